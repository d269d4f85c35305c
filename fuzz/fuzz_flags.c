/* distref fuzzing — the command line, from argv to a planned run.
 *
 * Feeds: the input split on NUL and newline bytes into an argv (at most 64
 * arguments), run through what bin/distref does before it trains:
 *   - a first argument without a leading '-' is the command, as in
 *     cli/main.c; an argument "TF_CONFIG=<json>" stands for the environment
 *     variable and is not passed to the parser;
 *   - dr_flags_parse (core/flags.c) with bin/distref's flag table and
 *     defaults (copied from cli/main.c, which is a program and is not
 *     linked); --help prints dr_flags_usage to /dev/null;
 *   - the CLI's conversion to a dr_run_config (cli/main.c to_config:
 *     dr_get_distribution_strategy, then the string fields, refused when
 *     they do not fit), but without its --model_dir requirement;
 *   - dr_run_plan_make (core/plan.c: experiment, optimizer, numerics, loss
 *     reduction, input mode, TF_CONFIG, auto-shard policy), then the
 *     strategy as the reference builds it: TF_CONFIG's workers and ps tasks for
 *     parameter_server, dr_tpu_options (topology, --input_partition_dims)
 *     for tpu, dr_strategy_create, --layer_devices through dr_device_parse,
 *     the tpu's per-core parameter ranges and HBM reservation
 *     (dr_tpu_core_ranges, dr_tpu_reserve_hbm as ref/tpu_step.c uses them),
 *     and the input iterator a run would use (at most 4096 examples, global
 *     batch at most 65536): DATA sharding, unsharded or from_function
 *     streams as the plan says (harness/train.c).
 * Checks: no crash, UB or leak; any error return is fine. Batches must hold
 * ids < n, replica offsets must be nondecreasing and end at the count.
 */
#include "distref/cluster.h"
#include "distref/device.h"
#include "distref/factory.h"
#include "distref/flags.h"
#include "distref/input.h"
#include "distref/multiworker.h"
#include "distref/plan.h"
#include "distref/strategy.h"
#include "distref/tpu.h"
#include "distref/train.h"
#include "fuzz/fuzz_common.h"

#define MAX_ARGS 64

/* ---- bin/distref's flags (cli/main.c: struct cli, table, defaults) ------ */

typedef struct cli {
    char    command[16];
    char    strategy[DR_FLAG_STR_MAX], all_reduce_alg[DR_FLAG_STR_MAX], tpu[DR_FLAG_STR_MAX];
    char    tpu_platform[DR_FLAG_STR_MAX], mode[DR_FLAG_STR_MAX], experiment[DR_FLAG_STR_MAX];
    char    model_dir[DR_FLAG_STR_MAX], data_dir[DR_FLAG_STR_MAX], optimizer[DR_FLAG_STR_MAX];
    char    layer_devices[DR_FLAG_STR_MAX];
    char    variant[DR_FLAG_STR_MAX], numerics[DR_FLAG_STR_MAX], auto_shard_policy[DR_FLAG_STR_MAX];
    char    input_partition_dims[DR_FLAG_STR_MAX], ps_partitioner[DR_FLAG_STR_MAX];
    char    fail_worker[DR_FLAG_STR_MAX], fail_ps[DR_FLAG_STR_MAX], loss_reduction[DR_FLAG_STR_MAX];
    char    what[DR_FLAG_STR_MAX], format[DR_FLAG_STR_MAX], input_mode[DR_FLAG_STR_MAX];
    int64_t threads, bytes_per_pack, schedule_seed, staleness;
    double  tpu_hbm_scale;
    int64_t num_gpus, num_packs, global_batch_size, train_steps, epochs, seed;
    int64_t synthetic_examples, checkpoint_every, gpu_memory_mb;
    double  learning_rate, l2, momentum;
    bool    nesterov, from_logits, drop_remainder, shuffle;
} cli;

#define STR(name, field) { name, DR_FLAG_STRING, c->field, 1, 0, NULL, false, NULL, false }
#define INT(name, field, lo, hi) { name, DR_FLAG_INT, &c->field, lo, hi, NULL, false, NULL, false }
#define DBL(name, field, lo, hi) { name, DR_FLAG_DOUBLE, &c->field, lo, hi, NULL, false, NULL, false }
#define BOOL(name, field) { name, DR_FLAG_BOOL, &c->field, 1, 0, NULL, false, NULL, false }

static int table(cli *c, dr_flag *f)
{
    dr_flag all[] = {
        STR("distribution_strategy", strategy), INT("num_gpus", num_gpus, -1000000, 64),
        STR("all_reduce_alg", all_reduce_alg), INT("num_packs", num_packs, -1000, 1000000),
        STR("tpu", tpu), STR("tpu_platform", tpu_platform), STR("model_dir", model_dir), STR("mode", mode),
        STR("experiment", experiment), INT("global_batch_size", global_batch_size, 0, 1 << 24),
        INT("train_steps", train_steps, 0, (double)(1LL << 40)), INT("epochs", epochs, 0, 1000000),
        DBL("learning_rate", learning_rate, 0, 1e6), STR("optimizer", optimizer),
        DBL("momentum", momentum, 0, 1), BOOL("nesterov", nesterov),
        INT("seed", seed, 0, 9007199254740992.0), DBL("l2", l2, 0, 1e6), BOOL("from_logits", from_logits),
        STR("data_dir", data_dir), INT("synthetic_examples", synthetic_examples, 1, 1000000),
        BOOL("drop_remainder", drop_remainder), BOOL("shuffle", shuffle),
        INT("checkpoint_every", checkpoint_every, 0, (double)(1LL << 40)), STR("layer_devices", layer_devices),
        INT("gpu_memory_mb", gpu_memory_mb, 0, 1 << 30), STR("variant", variant), STR("numerics", numerics),
        INT("threads", threads, 0, 1024), STR("auto_shard_policy", auto_shard_policy), STR("what", what),
        STR("format", format), STR("loss_reduction", loss_reduction), INT("bytes_per_pack", bytes_per_pack, 0, 1e15),
        STR("input_partition_dims", input_partition_dims), DBL("tpu_hbm_scale", tpu_hbm_scale, 1e-12, 1e6),
        INT("schedule_seed", schedule_seed, 0, 9007199254740992.0), INT("staleness", staleness, 0, 1 << 20),
        STR("ps_partitioner", ps_partitioner), STR("fail_worker", fail_worker), STR("fail_ps", fail_ps),
        STR("input_mode", input_mode),
    };
    int n = (int)(sizeof all / sizeof all[0]);
    memcpy(f, all, sizeof all);
    return n;
}

static void defaults(cli *c)
{
    dr_run_config d;
    dr_run_config_defaults(&d);
    memset(c, 0, sizeof *c);
    strcpy(c->strategy, "mirrored");
    snprintf(c->experiment, sizeof c->experiment, "%s", d.experiment);
    snprintf(c->data_dir, sizeof c->data_dir, "%s", d.data_dir);
    snprintf(c->variant, sizeof c->variant, "%s", d.variant);
    snprintf(c->auto_shard_policy, sizeof c->auto_shard_policy, "%s", d.auto_shard_policy);
    snprintf(c->loss_reduction, sizeof c->loss_reduction, "%s", d.loss_reduction);
    snprintf(c->numerics, sizeof c->numerics, "%s", d.numerics);
    snprintf(c->input_mode, sizeof c->input_mode, "%s", d.input_mode);
    strcpy(c->what, "all");
    strcpy(c->format, "npy");
    c->num_packs = 1;
    c->seed = (int64_t)d.seed;
    c->learning_rate = c->momentum = c->l2 = DR_UNSET;
    c->from_logits = c->shuffle = true;
    c->synthetic_examples = d.synthetic_examples;
    c->gpu_memory_mb = (int64_t)(d.memory.gpu_memory_bytes >> 20);
    c->tpu_hbm_scale = d.tpu_hbm_scale;
    c->staleness = d.staleness;
    c->schedule_seed = (int64_t)d.schedule_seed;
}

/* ---- cli/main.c's to_config, less the CLI-only checks ----------------- */

static bool copy(char *dst, size_t size, const char *src)
{
    size_t len = strlen(src);
    if (len >= size)
        return false;
    memcpy(dst, src, len + 1);
    return true;
}

static int to_config(const cli *c, const char *tf_config, dr_run_config *cfg, dr_err *err)
{
    int rc = dr_get_distribution_strategy(c->strategy, (int)c->num_gpus,
                                          c->all_reduce_alg[0] ? c->all_reduce_alg : NULL,
                                          (int)c->num_packs, c->tpu, &cfg->strategy, err);
    if (rc)
        return rc;
    if (!copy(cfg->experiment, sizeof cfg->experiment, c->experiment) ||
        !copy(cfg->model_dir, sizeof cfg->model_dir, c->model_dir) ||
        !copy(cfg->data_dir, sizeof cfg->data_dir, c->data_dir) ||
        !copy(cfg->optimizer, sizeof cfg->optimizer, c->optimizer) ||
        !copy(cfg->layer_devices, sizeof cfg->layer_devices, c->layer_devices) ||
        !copy(cfg->variant, sizeof cfg->variant, c->variant) ||
        !copy(cfg->numerics, sizeof cfg->numerics, c->numerics) ||
        !copy(cfg->auto_shard_policy, sizeof cfg->auto_shard_policy, c->auto_shard_policy) ||
        !copy(cfg->loss_reduction, sizeof cfg->loss_reduction, c->loss_reduction) ||
        !copy(cfg->tpu_platform, sizeof cfg->tpu_platform, c->tpu_platform) ||
        !copy(cfg->input_partition_dims, sizeof cfg->input_partition_dims, c->input_partition_dims) ||
        !copy(cfg->ps_partitioner, sizeof cfg->ps_partitioner, c->ps_partitioner) ||
        !copy(cfg->fail_worker, sizeof cfg->fail_worker, c->fail_worker) ||
        !copy(cfg->fail_ps, sizeof cfg->fail_ps, c->fail_ps) ||
        !copy(cfg->input_mode, sizeof cfg->input_mode, c->input_mode))
        return dr_fail(err, DR_EUSAGE, "a string flag is too long");
    cfg->tf_config = tf_config;
    cfg->global_batch_size = (uint32_t)c->global_batch_size;
    cfg->train_steps = (uint64_t)c->train_steps;
    cfg->epochs = (uint32_t)c->epochs;
    cfg->learning_rate = c->learning_rate;
    cfg->momentum = c->momentum;
    cfg->nesterov = c->nesterov;
    cfg->seed = (uint64_t)c->seed;
    cfg->l2 = c->l2;
    cfg->from_logits = c->from_logits;
    cfg->synthetic_examples = (uint32_t)c->synthetic_examples;
    cfg->drop_remainder = c->drop_remainder;
    cfg->shuffle = c->shuffle;
    cfg->checkpoint_every = (uint64_t)c->checkpoint_every;
    cfg->threads = (int)c->threads;
    cfg->bytes_per_pack = (uint64_t)c->bytes_per_pack;
    cfg->memory.gpu_memory_bytes = (uint64_t)c->gpu_memory_mb << 20;
    cfg->tpu_hbm_scale = c->tpu_hbm_scale;
    cfg->schedule_seed = (uint64_t)c->schedule_seed;
    cfg->staleness = (uint32_t)c->staleness;
    return DR_OK;
}

/* ---- what a run builds from the plan ------------------------------------ */

/* --layer_devices as ref/trainer.c reads it: comma-separated device strings. */
static void layer_devices(const dr_run_config *cfg, dr_err *err)
{
    char list[sizeof cfg->layer_devices], *save = NULL;
    memcpy(list, cfg->layer_devices, sizeof list);
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        dr_device_spec spec;
        if (dr_device_parse(tok, &spec, err) != DR_OK)
            return;
    }
}

/* ref/tpu_step.c's dr_tpu_run_open: per-core parameter ranges and HBM. */
static void tpu_cores(dr_strategy *s, const dr_run_plan *plan, const int part[2], uint32_t tiles, dr_err *err)
{
    const dr_model_spec *m = &plan->exp.model;
    uint32_t R = s->num_replicas;
    if (R == 0 || tiles == 0 || plan->G % R)   /* ref/tpu_step.c refuses G % R too */
        return;
    uint32_t tile_len = m->layer[0].in / tiles;
    size_t *ranges = malloc(2 * (size_t)tiles * (tile_len + 1) * sizeof *ranges + 1);
    uint32_t *nranges = calloc(tiles, sizeof *nranges);
    uint32_t *pix = tiles > 1 ? malloc((size_t)tiles * tile_len * sizeof *pix) : NULL;
    uint64_t got[DR_MAX_DEVICES] = { 0 };
    if (ranges && nranges && (tiles == 1 || pix)) {
        if (tiles > 1)
            dr_tpu_tile_pixels(part, pix);
        dr_tpu_core_ranges(m, tiles, pix, tile_len, ranges, nranges);
        (void)dr_tpu_reserve_hbm(s, m, (uint32_t)plan->nslots, plan->G / R, tiles, ranges, nranges, got, err);
        for (uint32_t d = 0; d < DR_MAX_DEVICES; d++)
            if (got[d])
                dr_device_unreserve(&s->device[d], got[d]);
    }
    free(ranges);
    free(nranges);
    free(pix);
}

static void check_batch(const dr_dist_batch *b, uint32_t n)
{
    if (b->offset[0] != 0 || b->offset[b->num_replicas] != b->count)
        __builtin_trap();
    for (uint32_t r = 0; r < b->num_replicas; r++)
        if (b->offset[r] > b->offset[r + 1])
            __builtin_trap();
    for (uint32_t i = 0; i < b->count; i++)
        if (b->ids[i] >= n)
            __builtin_trap();
}

/* The iterator harness/train.c opens, and ref/train.c's DATA split. */
static void input(const dr_run_config *cfg, const dr_run_plan *plan, const dr_strategy *s, dr_err *err)
{
    uint32_t n = strcmp(plan->exp.dataset, "toy") == 0 ? 100 : cfg->synthetic_examples;
    uint32_t R = s->num_replicas, W = s->num_workers ? s->num_workers : 1;
    dr_dist_iter it;
    dr_dist_batch b;
    if (n > 4096)
        n = 4096;
    if (plan->G > 65536 || R == 0 || (cfg->drop_remainder && n < plan->G))
        return;
    if (dr_dist_iter_init(&it, n, plan->G, plan->shard_data ? 1 : R, cfg->seed, cfg->shuffle,
                          cfg->drop_remainder, err) != DR_OK)
        return;
    uint32_t *sharded = malloc((size_t)plan->G * sizeof *sharded + 4), off[DR_MAX_DEVICES + 1];
    int rc = DR_OK;
    if (plan->from_function)
        rc = dr_dist_iter_from_function(&it, W, err);
    else if (plan->unsharded)
        rc = dr_dist_iter_unsharded(&it, W, err);
    if (sharded && rc == DR_OK) {
        for (int i = 0; i < 3; i++) {
            if (!dr_dist_iter_next(&it, &b)) {
                dr_dist_iter_next_epoch(&it);
                continue;
            }
            check_batch(&b, n);
            if (plan->shard_data && R % W == 0)
                dr_shard_data(b.ids, b.count, W, R / W, sharded, off);
        }
    }
    free(sharded);
    dr_dist_iter_free(&it);
}

static void run(const dr_run_config *cfg, dr_err *err)
{
    static dr_run_plan plan;
    static dr_strategy s;
    static dr_cluster cl;
    dr_tpu_system sys;
    int part[2] = { 1, 1 };
    uint32_t tiles = 1;
    if (dr_run_plan_make(cfg, &plan, err) != DR_OK)
        return;
    dr_strategy_options opt = plan.sopt;
    memset(&sys, 0, sizeof sys);
    if (plan.spec.kind == DR_STRATEGY_PARAMETER_SERVER) {
        if (dr_cluster_parse(cfg->tf_config, &cl, err) != DR_OK)
            return;
        opt.num_workers = cl.job[DR_TASK_WORKER].n;
        opt.num_ps = cl.job[DR_TASK_PS].n;
        dr_cluster_free(&cl);
    }
    if (plan.spec.kind == DR_STRATEGY_TPU && dr_tpu_options(cfg, &plan.exp, &sys, &opt, part, &tiles, err) != DR_OK)
        return;
    if (dr_strategy_create(&plan.spec, &opt, &s, err) != DR_OK)
        return;
    layer_devices(cfg, err);
    if (plan.spec.kind == DR_STRATEGY_TPU)
        tpu_cores(&s, &plan, part, tiles, err);
    if (plan.spec.kind != DR_STRATEGY_PARAMETER_SERVER)
        input(cfg, &plan, &s, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static cli c;                       /* 20 KB of string flags: off the stack */
    static dr_run_config cfg;
    static FILE *devnull;
    dr_flag f[64];
    char *argv[MAX_ARGS];
    const char *tf_config = "";
    dr_err err = { 0, "" };
    bool help = false;
    int argc = 0;

    char *buf = fz_cstr(data, size);    /* every argument ends at a NUL */
    if (buf == NULL)
        return 0;
    for (size_t i = 0; i < size; i++)
        if (buf[i] == '\n')
            buf[i] = '\0';
    for (char *p = buf; p <= buf + size && argc < MAX_ARGS; p += strlen(p) + 1) {
        if (strncmp(p, "TF_CONFIG=", 10) == 0)
            tf_config = p + 10;
        else
            argv[argc++] = p;
    }
    if (argc > 0 && argv[argc - 1][0] == '\0' && argv[argc - 1] == buf + size)
        argc--;                         /* the terminator after a final separator */

    defaults(&c);
    int first = 0;
    if (argc > 0 && argv[0][0] != '-') {
        if (strlen(argv[0]) >= sizeof c.command)
            goto out;
        strcpy(c.command, argv[0]);
        first = 1;
    }
    int n = table(&c, f);
    if (dr_flags_parse(f, n, argc - first, argv + first, &help, &err) != DR_OK)
        goto out;
    if (help) {
        if (devnull == NULL)
            devnull = fopen("/dev/null", "w");
        if (devnull != NULL)
            dr_flags_usage(devnull, f, n);
        goto out;
    }
    dr_run_config_defaults(&cfg);
    if (to_config(&c, tf_config, &cfg, &err) == DR_OK)
        run(&cfg, &err);
out:
    free(buf);
    return 0;
}
