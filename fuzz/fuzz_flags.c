/* distref fuzzing — the command line, from argv to a planned run.
 *
 * Feeds: the input split on NUL and newline bytes into an argv (at most 64
 * arguments), run through what bin/distref does before it trains:
 *   - a first argument without a leading '-' is the command, as in
 *     cli/main.c; an argument "TF_CONFIG=<json>" stands for the environment
 *     variable and is not passed to the parser;
 *   - dr_flags_parse (core/flags.c) with bin/distref's own flag table and
 *     defaults (core/cli_flags.c, which cli/main.c parses with too; the
 *     --variant names are DR_CLI_VARIANT_NAMES, the registry's, checked by
 *     tests/test_cli_flags.c); --help prints dr_flags_usage to /dev/null;
 *   - the CLI's conversion to a dr_run_config (dr_cli_flags_strategy and
 *     dr_cli_flags_config, as cli/main.c's to_config calls them: the
 *     strategy, the string fields refused when they do not fit, --schedule
 *     and --exact_accumulator checked, the numbers), but without its
 *     --model_dir requirement, the flags' scopes (harness/) and
 *     --worker_hosts;
 *   - dr_run_plan_make (core/plan.c: experiment, optimizer, numerics, loss
 *     reduction, input mode, TF_CONFIG, auto-shard policy), then the
 *     strategy as the reference builds it: TF_CONFIG's workers and ps tasks for
 *     parameter_server, dr_tpu_options (topology, --input_partition_dims)
 *     for tpu, dr_strategy_create, --layer_devices through dr_device_parse,
 *     the tpu's per-core parameter ranges and HBM reservation
 *     (dr_tpu_core_ranges, dr_tpu_reserve_hbm as ref/tpu_step.c uses them,
 *     with the spatial plan for a model beyond Dense on tiles),
 *     and the input iterator a run would use (at most 4096 examples, global
 *     batch at most 65536): DATA sharding, unsharded or from_function
 *     streams as the plan says (harness/train_loop.c).
 * Checks: no crash, UB or leak; any error return is fine. Batches must hold
 * ids < n, replica offsets must be nondecreasing and end at the count.
 */
#include "distref/cli_flags.h"
#include "distref/cluster.h"
#include "distref/device.h"
#include "distref/factory.h"
#include "distref/flags.h"
#include "distref/input.h"
#include "distref/shards.h"
#include "distref/multiworker.h"
#include "distref/plan.h"
#include "distref/strategy.h"
#include "distref/tpu.h"
#include "distref/train.h"
#include "fuzz/fuzz_common.h"

#define MAX_ARGS 64

/* ---- bin/distref's flags: the CLI's own table (core/cli_flags.c) -------- */

/* cli/main.c's to_config, less what needs the harness or the process: the
 * --model_dir requirement, the flags' scopes, --worker_hosts, the progress
 * bar and the placement log. TF_CONFIG is the input's. */
static int to_config(const dr_cli_flags *c, const dr_flag *f, int n, const char *tf_config, dr_run_config *cfg,
                     dr_err *err)
{
    int rc = dr_cli_flags_strategy(c, cfg, err);
    if (rc == DR_OK)
        rc = dr_cli_flags_config(c, f, n, cfg, err);
    cfg->tf_config = tf_config;
    return rc;
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
    static dr_spatial_plan sp;   /* a model beyond Dense on tiles: its maps' tiles (ref/tpu_spatial.c) */
    bool spatial = !dr_model_is_dense(m) && tiles > 1;
    if (ranges && nranges && (tiles == 1 || pix) &&
        (!spatial || dr_spatial_plan_make(m, (uint32_t)part[0], (uint32_t)part[1], &sp, err) == DR_OK)) {
        if (tiles > 1)
            dr_tpu_tile_pixels(part, pix);
        dr_tpu_core_ranges(m, spatial ? 1 : tiles, pix, tile_len, ranges, nranges);
        (void)dr_tpu_reserve_hbm(s, m, (uint32_t)plan->nslots, plan->G / R, tiles, ranges, nranges,
                                 spatial ? &sp : NULL, got, err);
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

/* The iterator harness/train_loop.c opens, and ref/train_step.c's DATA split. */
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
    else if (plan->file_sharded)   /* --dataset_shards: the index's examples must be n, else an error */
        rc = dr_shards_iter(cfg->dataset_shards, &it, W, err);
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

/* Says once which table the target parses with: the CLI's, all its flags
 * (bin/distref --help lists the same number). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static dr_cli_flags c;
    (void)argc;
    (void)argv;
    fprintf(stderr, "fuzz_flags: bin/distref's flag table (core/cli_flags.c), %d flags\n",
            dr_cli_flag_table(&c, NULL, DR_CLI_VARIANT_NAMES));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static dr_cli_flags c;              /* 30 KB of string flags: off the stack */
    static dr_run_config cfg;
    static FILE *devnull;
    dr_flag f[DR_CLI_MAX_FLAGS];
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

    dr_cli_flags_defaults(&c);
    int first = 0;
    if (argc > 0 && argv[0][0] != '-') {
        if (strlen(argv[0]) >= sizeof c.command)
            goto out;
        strcpy(c.command, argv[0]);
        first = 1;
    }
    int n = dr_cli_flag_table(&c, f, DR_CLI_VARIANT_NAMES);
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
    if (to_config(&c, f, n, tf_config, &cfg, &err) == DR_OK)
        run(&cfg, &err);
out:
    free(buf);
    return 0;
}
