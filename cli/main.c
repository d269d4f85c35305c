/* distref — the command-line tool.
 *
 *   bin/distref train|evaluate|predict [--flag=value ...]
 *
 * Flag names and values are TensorFlow Model Garden's where it has them
 * (--distribution_strategy, --num_gpus, --all_reduce_alg, --num_packs, --tpu,
 * --tpu_platform, --model_dir, --mode, --worker_hosts, --task_index), and
 * absl's --flagfile. Exit status: 0 success, 2 usage error (bad flag,
 * value or combination, one no variant runs included; under mpirun said
 * once, by rank 0), 1 anything else. --help and --version exit 0.
 */
#include "distref/factory.h"
#include "distref/flags.h"
#include "distref/harness.h"
#include "distref/mpi.h"
#include "distref/opencl.h"
#include "distref/train.h"
#include "distref/version.h"

#include <malloc.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

typedef struct cli {
    char    command[16];
    char    strategy[DR_FLAG_STR_MAX], all_reduce_alg[DR_FLAG_STR_MAX], tpu[DR_FLAG_STR_MAX];
    char    tpu_platform[DR_FLAG_STR_MAX], mode[DR_FLAG_STR_MAX], experiment[DR_FLAG_STR_MAX];
    char    model_dir[DR_FLAG_STR_MAX], data_dir[DR_FLAG_STR_MAX], optimizer[DR_FLAG_STR_MAX];
    char    layer_devices[DR_FLAG_STR_MAX];
    char    variant[DR_FLAG_STR_MAX], numerics[DR_FLAG_STR_MAX], auto_shard_policy[DR_FLAG_STR_MAX];
    char    input_partition_dims[DR_FLAG_STR_MAX], ps_partitioner[DR_FLAG_STR_MAX];
    char    fail_worker[DR_FLAG_STR_MAX], fail_ps[DR_FLAG_STR_MAX], loss_reduction[DR_FLAG_STR_MAX];
    char    schedule[DR_FLAG_STR_MAX], replay_schedule[DR_FLAG_STR_MAX];
    char    what[DR_FLAG_STR_MAX], format[DR_FLAG_STR_MAX], input_mode[DR_FLAG_STR_MAX];
    char    exact_accumulator[DR_FLAG_STR_MAX];
    char    opencl_device[DR_FLAG_STR_MAX], opencl_mapping[DR_FLAG_STR_MAX];
    char    worker_hosts[DR_FLAG_STR_MAX], flagfile[DR_FLAG_STR_MAX];
    char    tf_config_hosts[4 * DR_FLAG_STR_MAX];   /* the TF_CONFIG --worker_hosts gives */
    int64_t task_index;
    int64_t threads, bytes_per_pack, schedule_seed, staleness, opencl_platform;
    double  tpu_hbm_scale;
    int64_t num_gpus, num_packs, global_batch_size, train_steps, epochs, seed;
    int64_t synthetic_examples, checkpoint_every, gpu_memory_mb;
    double  learning_rate, l2, momentum;
    bool    nesterov, from_logits, drop_remainder, shuffle, print_tf_config, log_device_placement, version;
    bool    peer_lost;   /* mpi: a rank died and training finished without it (skip MPI_Finalize) */
    double  collective_timeout;
} cli;

#define STR(name, field, help) { name, DR_FLAG_STRING, c->field, 1, 0, help, false, NULL, false }
/* A string flag with a list of values: the parser refuses others, listing them; help shows them. */
#define ENUM(name, field, choices, help) { name, DR_FLAG_STRING, c->field, 1, 0, help, false, choices, false }
#define INT(name, field, lo, hi, help) { name, DR_FLAG_INT, &c->field, lo, hi, help, false, NULL, false }
#define DBL(name, field, lo, hi, help) { name, DR_FLAG_DOUBLE, &c->field, lo, hi, help, false, NULL, false }
#define BOOL(name, field, help) { name, DR_FLAG_BOOL, &c->field, 1, 0, help, false, NULL, false }

/* The values of the flags whose lists live in the library: the strategies
 * (factory.h), variants (the registry) and experiments, joined with '|'. */
static char k_strategies[256], k_variants[128], k_experiments[256];

static void join(char *buf, size_t n, const char *name)
{
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, "%s%s", len ? "|" : "", name);
}

static void lists(void)
{
    size_t nv;
    const dr_variant *const *v = dr_variants(&nv);
    const char *e;
    if (k_strategies[0]) return;
    for (int k = DR_STRATEGY_OFF; k <= DR_STRATEGY_TPU; k++)
        join(k_strategies, sizeof k_strategies, dr_strategy_kind_name((dr_strategy_kind)k));
    for (size_t i = 0; i < nv; i++) join(k_variants, sizeof k_variants, v[i]->name);
    for (size_t i = 0; (e = dr_experiment_name(i)) != NULL; i++) join(k_experiments, sizeof k_experiments, e);
}

static int table(cli *c, dr_flag *f)
{
    lists();   /* before the table: the parser and help read the lists */
    dr_flag all[] = {
        { "distribution_strategy", DR_FLAG_STRING, c->strategy, 1, 0, "the tf.distribute strategy (any case, as "
          "Model Garden lower-cases it)", false, k_strategies, true },
        INT("num_gpus", num_gpus, 0, 64, "emulated GPUs (0 = CPU only)"),
        STR("all_reduce_alg", all_reduce_alg, "mirrored: nccl|hierarchical_copy; multi_worker_mirrored: ring|nccl"),
        INT("num_packs", num_packs, -1000, 1000000, "gradient packs for nccl/hierarchical_copy (0 = one per tensor)"),
        STR("tpu", tpu, "TPU address or name (tpu strategy)"),
        STR("tpu_platform", tpu_platform, "TPU platform, e.g. v3 (tpu strategy)"),
        STR("model_dir", model_dir, "where metrics.jsonl, summary.json and ckpt.bin go (required)"),
        ENUM("mode", mode, "|train|eval|train_and_eval", "the command, Model Garden's way (instead of the command)"),
        ENUM("experiment", experiment, k_experiments, "model, data and optimizer defaults"),
        INT("global_batch_size", global_batch_size, 0, 1 << 24, "global batch (0 = the experiment's)"),
        INT("train_steps", train_steps, 0, (double)(1LL << 40), "stop after this many steps (0 = run --epochs)"),
        INT("epochs", epochs, 0, 1000000, "epochs (0 = the experiment's)"),
        DBL("learning_rate", learning_rate, 0, 1e6, "learning rate (default: the experiment's)"),
        ENUM("optimizer", optimizer, "|sgd|adam", "the optimizer (empty = the experiment's)"),
        DBL("momentum", momentum, 0, 1, "SGD momentum (default: the experiment's)"),
        BOOL("nesterov", nesterov, "Nesterov momentum"),
        INT("seed", seed, 0, 9007199254740992.0, "seed of initialization, data and order"),
        DBL("l2", l2, 0, 1e6, "L2 kernel regularization (default: none)"),
        BOOL("from_logits", from_logits, "cross-entropy from logits (false: softmax output)"),
        STR("data_dir", data_dir, "Fashion-MNIST IDX files"),
        INT("synthetic_examples", synthetic_examples, 1, 1000000, "training examples of the synthetic data"),
        BOOL("drop_remainder", drop_remainder, "drop the final short batch"),
        BOOL("shuffle", shuffle, "shuffle every epoch"),
        INT("checkpoint_every", checkpoint_every, 0, (double)(1LL << 40), "checkpoint every N steps (0 = at the end)"),
        STR("layer_devices", layer_devices, "per-layer placement, e.g. /gpu:0,/gpu:1 (model parallelism)"),
        BOOL("log_device_placement", log_device_placement, "print each op's device every step, on stderr (ref)"),
        INT("gpu_memory_mb", gpu_memory_mb, 0, 1 << 30, "memory of each emulated GPU (0 = unlimited)"),
        ENUM("variant", variant, k_variants, "the reference, or the engine on OpenMP, on OpenCL, or under mpirun "
             "(`distref variants` lists what each supports)"),
        ENUM("numerics", numerics, "exact|fast", "fast: the engine's variants; float kernels"),
        INT("threads", threads, 0, 1024, "OpenMP threads of the engine (0 = OMP_NUM_THREADS)"),
        INT("opencl_platform", opencl_platform, -1, 64, "opencl: platform index (-1 = $DISTREF_OPENCL_PLATFORM or 0; distref devices)"),
        STR("opencl_device", opencl_device, "opencl: device index, or a list like 0,1 for the replicas (empty = "
            "$DISTREF_OPENCL_DEVICE or 0)"),
        ENUM("opencl_mapping", opencl_mapping, "|shared|queues|subdevices|auto", "opencl: replicas onto devices: "
            "shared (one queue) | queues (a queue "
            "each, round-robin over --opencl_device's list) | subdevices (the device split equally) | auto (empty = "
            "$DISTREF_OPENCL_MAPPING or auto: shared for 1 replica, queues for a list, else subdevices where "
            "the device splits, else queues)"),
        ENUM("auto_shard_policy", auto_shard_policy, "auto|file|data|off|hint",
             "input sharding and split (tf.data AutoShardPolicy)"),
        ENUM("input_mode", input_mode, "dataset|function", "dataset: experimental_distribute_dataset; function: "
             "distribute_datasets_from_function"),
        ENUM("what", what, "init|data|batches|all", "export: what to write"),
        ENUM("format", format, "npy|json", "export: the files' format"),
        ENUM("loss_reduction", loss_reduction, "global_batch_size|examples_in_step|tf_default", "the loss's divisor: "
             "global_batch_size (G, also for a short final batch), examples_in_step (the step's examples), "
             "tf_default (each replica divides by its own batch, as tf.keras does; depends on the replica count)"),
        INT("bytes_per_pack", bytes_per_pack, 0, 1e15, "multi_worker_mirrored: gradient bytes per all-reduce pack (0 = one pack)"),
        STR("input_partition_dims", input_partition_dims, "tpu: spatial partitioning of the 28x28 input, e.g. 2,2"),
        DBL("tpu_hbm_scale", tpu_hbm_scale, 1e-12, 1e6, "tpu: multiply each core's HBM (1 = real sizes)"),
        INT("schedule_seed", schedule_seed, 0, 9007199254740992.0, "parameter_server: seed of the asynchronous schedule"),
        INT("staleness", staleness, 0, 1 << 20, "parameter_server: most updates a read may miss (0 = lock-step)"),
        STR("ps_partitioner", ps_partitioner, "parameter_server: fixed:N | min_size:BYTES[:MAX] | max_size:BYTES[:MAX]"),
        STR("fail_worker", fail_worker, "parameter_server: W:K, worker W fails while running step K"),
        ENUM("schedule", schedule, "seeded|free", "parameter_server under mpi: seeded (the reference's order) | free "
             "(arrival order)"),
        STR("replay_schedule", replay_schedule, "parameter_server under ref: follow a recorded ps_schedule.jsonl"),
        STR("fail_ps", fail_ps, "parameter_server: P:K, ps task P fails at step K"),
        BOOL("print_tf_config", print_tf_config, "print the TF_CONFIG the run uses (mpi: given or derived per rank)"),
        DBL("collective_timeout", collective_timeout, 0.001, 1e6, "mpi: seconds a collective waits without progress "
            "before it fails naming the rank it waits for (default 5)"),
        ENUM("exact_accumulator", exact_accumulator, "compact|full", "openmp/mpi exact gradients: compact (32 B a parameter, "
            "full for a step that needs it) | full (168 B)"),
        STR("worker_hosts", worker_hosts, "Model Garden: the workers' host:port, comma-separated; gives TF_CONFIG "
            "{\"cluster\": {\"worker\": [...]}, \"task\": {\"type\": \"worker\", \"index\": --task_index}} (not "
            "with TF_CONFIG)"),
        INT("task_index", task_index, -1, 65535, "Model Garden: this task's place in --worker_hosts (needed for more "
            "than one worker)"),
        STR("flagfile", flagfile, "read flags from FILE, one --flag=value a line (absl: # and // comments; later "
            "flags override it)"),
        BOOL("version", version, "print the version and the git revision it was built from, and exit"),
    };
    int n = (int)(sizeof all / sizeof all[0]);
    if (f) memcpy(f, all, sizeof all);

    return n;
}

static void defaults(cli *c)
{
    dr_run_config d;
    dr_run_config_defaults(&d);
    memset(c, 0, sizeof *c);
    strcpy(c->strategy, "mirrored");   /* Model Garden's RuntimeConfig default */
    strcpy(c->experiment, d.experiment);
    strcpy(c->data_dir, d.data_dir);
    strcpy(c->variant, d.variant);
    strcpy(c->auto_shard_policy, d.auto_shard_policy);
    strcpy(c->loss_reduction, d.loss_reduction);
    strcpy(c->input_mode, d.input_mode);
    strcpy(c->what, "all");
    strcpy(c->format, "npy");
    strcpy(c->numerics, d.numerics);
    strcpy(c->schedule, d.schedule);
    strcpy(c->exact_accumulator, "compact");
    c->num_packs = 1;
    c->task_index = -1;   /* Model Garden's default: not given */
    c->learning_rate = c->momentum = c->l2 = DR_UNSET;   /* the experiment's, unless given */
    c->seed = (int64_t)d.seed;
    c->from_logits = true;
    c->shuffle = true;
    c->synthetic_examples = d.synthetic_examples;
    c->gpu_memory_mb = (int64_t)(d.memory.gpu_memory_bytes >> 20);
    c->tpu_hbm_scale = d.tpu_hbm_scale;
    c->staleness = d.staleness;
    c->schedule_seed = (int64_t)d.schedule_seed;
    c->opencl_platform = d.opencl_platform;
    strcpy(c->opencl_device, d.opencl_device);
    strcpy(c->opencl_mapping, d.opencl_mapping);
}

static void usage(FILE *out, cli *c)
{
    dr_flag f[64];
    int n = table(c, f);
    fprintf(out, "usage: distref train|evaluate|predict [--flag=value ...]\n       distref variants   (the registered variants and what each supports)\n       distref devices    (the OpenCL platforms and devices, with their capabilities)\n"
                 "       distref export --what=init|data|batches|all --format=npy|json --model_dir=DIR [run flags]\n\n"
                 "Trains, evaluates or predicts with a tf.distribute-style strategy whose every\n"
                 "reduction is exact: any strategy and replica count gives one_device's bits.\n\nflags:\n");
    dr_flags_usage(out, f, n);
}

/* Copies a string flag into a fixed field, refusing one that does not fit. */
static int copy_flag(char *dst, size_t size, const char *src, const char *name, dr_err *err)
{
    size_t len = strlen(src);
    if (len >= size) return dr_fail(err, DR_EUSAGE, "--%s: %zu characters, at most %zu allowed", name, len, size - 1);
    memcpy(dst, src, len + 1);
    return DR_OK;
}

/* The progress bar only for a person watching: stdout and stderr both a
 * terminal, and not under CI (the CI variable set to anything but "" or
 * "false", as CI services and .ci/run set it). */
static bool progress_wanted(void)
{
    const char *ci = getenv("CI");
    if (ci && *ci && strcmp(ci, "false") != 0 && strcmp(ci, "0") != 0) return false;
    return isatty(STDOUT_FILENO) && isatty(STDERR_FILENO);
}

/* Model Garden's --worker_hosts/--task_index: the TF_CONFIG they give. */
static int hosts_tf_config(cli *c, const dr_flag *f, int n, dr_run_config *cfg, dr_err *err)
{
    char *tf = NULL;
    int rc = dr_tf_config_from_hosts(c->worker_hosts, dr_flag_given(f, n, "worker_hosts"), c->task_index,
                                     dr_flag_given(f, n, "task_index"), cfg->tf_config, &tf, err);
    if (rc || !tf) return rc;
    rc = copy_flag(c->tf_config_hosts, sizeof c->tf_config_hosts, tf, "worker_hosts", err);
    free(tf);
    if (rc == DR_OK) cfg->tf_config = c->tf_config_hosts;
    return rc;
}

static int to_config(cli *c, const dr_flag *f, int n, dr_run_config *cfg, dr_err *err)
{
    int rc = dr_get_distribution_strategy(c->strategy, (int)c->num_gpus,
                                          c->all_reduce_alg[0] ? c->all_reduce_alg : NULL,
                                          (int)c->num_packs, c->tpu, &cfg->strategy, err);
    if (rc) return rc;
    if (!c->model_dir[0]) return dr_fail(err, DR_EUSAGE, "--model_dir is required");
    if ((rc = dr_flag_scopes_check(f, n, cfg->strategy.kind, c->command, c->variant, err))) return rc;
    if ((rc = copy_flag(cfg->experiment, sizeof cfg->experiment, c->experiment, "experiment", err)) ||
        (rc = copy_flag(cfg->model_dir, sizeof cfg->model_dir, c->model_dir, "model_dir", err)) ||
        (rc = copy_flag(cfg->data_dir, sizeof cfg->data_dir, c->data_dir, "data_dir", err)) ||
        (rc = copy_flag(cfg->optimizer, sizeof cfg->optimizer, c->optimizer, "optimizer", err)) ||
        (rc = copy_flag(cfg->layer_devices, sizeof cfg->layer_devices, c->layer_devices, "layer_devices", err)) ||
        (rc = copy_flag(cfg->variant, sizeof cfg->variant, c->variant, "variant", err)) ||
        (rc = copy_flag(cfg->numerics, sizeof cfg->numerics, c->numerics, "numerics", err)) ||
        (rc = copy_flag(cfg->auto_shard_policy, sizeof cfg->auto_shard_policy, c->auto_shard_policy,
                        "auto_shard_policy", err)) ||
        (rc = copy_flag(cfg->loss_reduction, sizeof cfg->loss_reduction, c->loss_reduction,
                        "loss_reduction", err)) ||
        (rc = copy_flag(cfg->input_mode, sizeof cfg->input_mode, c->input_mode, "input_mode", err)) ||
        (rc = copy_flag(cfg->tpu_platform, sizeof cfg->tpu_platform, c->tpu_platform, "tpu_platform", err)) ||
        (rc = copy_flag(cfg->input_partition_dims, sizeof cfg->input_partition_dims, c->input_partition_dims,
                        "input_partition_dims", err)) ||
        (rc = copy_flag(cfg->ps_partitioner, sizeof cfg->ps_partitioner, c->ps_partitioner, "ps_partitioner", err)) ||
        (rc = copy_flag(cfg->fail_worker, sizeof cfg->fail_worker, c->fail_worker, "fail_worker", err)) ||
        (rc = copy_flag(cfg->fail_ps, sizeof cfg->fail_ps, c->fail_ps, "fail_ps", err)) ||
        (rc = copy_flag(cfg->schedule, sizeof cfg->schedule, c->schedule, "schedule", err)) ||
        (rc = copy_flag(cfg->replay_schedule, sizeof cfg->replay_schedule, c->replay_schedule, "replay_schedule", err)) ||
        (rc = copy_flag(cfg->opencl_device, sizeof cfg->opencl_device, c->opencl_device, "opencl_device", err)) ||
        (rc = copy_flag(cfg->opencl_mapping, sizeof cfg->opencl_mapping, c->opencl_mapping, "opencl_mapping", err)))
        return rc;
    if (strcmp(cfg->schedule, "seeded") != 0 && strcmp(cfg->schedule, "free") != 0)
        return dr_fail(err, DR_EUSAGE, "--schedule=%s: expected seeded or free", cfg->schedule);
    if ((cfg->fail_worker[0] || cfg->fail_ps[0]) && strcmp(cfg->schedule, "free") == 0)
        return dr_fail(err, DR_EUSAGE, "--%s with --schedule=free: an injected failure is a step of the reference's "
                       "seeded plan (--schedule=seeded); a free run's failures are ranks that really die",
                       cfg->fail_worker[0] ? "fail_worker" : "fail_ps");
    if (strcmp(c->exact_accumulator, "compact") != 0 && strcmp(c->exact_accumulator, "full") != 0)
        return dr_fail(err, DR_EUSAGE, "--exact_accumulator=%s: expected compact or full", c->exact_accumulator);
    if (dr_flag_given(f, n, "exact_accumulator") && strcmp(c->numerics, "exact") != 0)
        return dr_fail(err, DR_EUSAGE, "--exact_accumulator=%s does not apply to --numerics=%s: it chooses the "
                       "accumulator of --numerics=exact", c->exact_accumulator, c->numerics);
    cfg->full_accumulators = strcmp(c->exact_accumulator, "full") == 0;
    cfg->tf_config = getenv("TF_CONFIG");   /* any length: a 1,000-worker cluster is fine */
    if ((rc = hosts_tf_config(c, f, n, cfg, err))) return rc;   /* or Model Garden's --worker_hosts */
    cfg->global_batch_size = (uint32_t)c->global_batch_size;
    cfg->train_steps = (uint64_t)c->train_steps;
    cfg->epochs = (uint32_t)c->epochs;
    cfg->learning_rate = c->learning_rate;   /* DR_UNSET unless given */
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
    cfg->collective_timeout = c->collective_timeout;
    cfg->opencl_platform = (int)c->opencl_platform;
    cfg->bytes_per_pack = (uint64_t)c->bytes_per_pack;
    cfg->memory.gpu_memory_bytes = (uint64_t)c->gpu_memory_mb << 20;
    cfg->tpu_hbm_scale = c->tpu_hbm_scale;
    cfg->schedule_seed = (uint64_t)c->schedule_seed;
    cfg->staleness = (uint32_t)c->staleness;
    cfg->progress = progress_wanted();
    cfg->placement_log = c->log_device_placement ? stderr : NULL;
    return DR_OK;
}

#define COMMANDS "train, evaluate, predict, export, variants or devices"

/* The command comes first, or --mode names it (Model Garden's spelling). */
static int pick_command(cli *c, dr_err *err)
{
    const char *m = c->mode;
    if (!m[0]) {
        static const char *const known[] = { "train", "evaluate", "predict", "export" };
        if (!c->command[0]) return dr_fail(err, DR_EUSAGE, "no command: expected " COMMANDS " (see --help)");
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strcmp(c->command, known[i]) == 0) return DR_OK;
        return dr_fail(err, DR_EUSAGE, "unknown command '%s': expected " COMMANDS, c->command);
    }
    if (c->command[0]) return dr_fail(err, DR_EUSAGE, "--mode=%s and the command %s: give one of them", m, c->command);
    if (strcmp(m, "train") == 0 || strcmp(m, "train_and_eval") == 0) strcpy(c->command, m);
    else if (strcmp(m, "eval") == 0) strcpy(c->command, "evaluate");
    else return dr_fail(err, DR_EUSAGE, "--mode: expected train, eval or train_and_eval, got '%s'", m);
    return DR_OK;
}

/* SIGINT/SIGTERM: the first asks the training loop to checkpoint and stop
 * after its current step; SA_RESETHAND gives the second the default action
 * (exit at once), which atomic writes make safe for the last checkpoint. */
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static int run_config(cli *c, dr_run_config *cfg0, dr_err *err);

static bool trains(const cli *c)
{
    return strcmp(c->command, "train") == 0 || strcmp(c->command, "train_and_eval") == 0;
}

/* ---- under mpirun ------------------------------------------------------------
 * A usage error is said once, by rank 0, and every rank exits 2 through
 * MPI_Finalize, not MPI_Abort (whose kill notice would bury it). Before
 * MPI_Init a rank knows its number from the launcher's environment. After
 * it, the checks before training end in one agreement (an all-reduce), so
 * every rank knows whether any failed and whether rank 0 did (then rank 0
 * speaks for all; else each failed rank speaks, naming itself). Open MPI's
 * mpirun still reports a non-zero exit in its own words ("Primary job
 * terminated normally, but 1 process returned a non-zero exit code", for
 * any non-zero exit, MPI_Finalize or not); `mpirun -q` keeps it quiet and
 * still exits 2 (docs/MPI.md). */

static int g_argc;
static char **g_argv;
static bool g_agreed;   /* the ranks agreed on a failure: exit without MPI_Abort */
static bool g_silent;   /* this rank leaves the message to another */

/* This process's rank as the launcher set it (Open MPI, PMIx, MPICH): -1
 * when not started by one. */
static long launcher_rank(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r;
        if (!v || !*v) continue;
        r = strtol(v, &end, 10);
        if (*end == '\0' && r >= 0) return r;
    }
    return -1;
}

/* Every rank calls this at the same point with its own outcome. */
static int agree(int rc, dr_err *err)
{
    uint32_t rank;
    int mine[3], all[3];
    dr_mpi_world(&rank, NULL);
    mine[0] = rc != DR_OK;
    mine[1] = rc != DR_OK && rank == 0;
    mine[2] = rc;
    MPI_Allreduce(mine, all, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!all[0]) return DR_OK;
    g_agreed = true;
    g_silent = rc == DR_OK || (all[1] && rank != 0);
    if (rc == DR_OK) rc = err->code = all[2];   /* another rank's failure: exit as it does */
    return rc;
}

static int run_mpi(cli *c, dr_run_config *cfg, dr_err *err)
{
    char *tf = NULL;
    int rc = dr_mpi_init(&g_argc, &g_argv, err);
    if (rc) return rc;
    /* TF_CONFIG checked against, or derived from, the MPI world */
    rc = dr_mpi_tf_config(cfg->tf_config, cfg->strategy.kind == DR_STRATEGY_PARAMETER_SERVER, &tf, err);
    if (!rc) cfg->tf_config = tf;
    if (!rc && trains(c)) rc = dr_run_check_supported(cfg, err);
    if (!(rc = agree(rc, err))) rc = run_config(c, cfg, err);
    free(tf);
    return rc;
}

static int run(cli *c, const dr_flag *f, int n, dr_err *err)
{
    dr_run_config cfg;
    int rc;
    dr_run_config_defaults(&cfg);
    if (strcmp(c->command, "variants") == 0) {
        dr_variants_print(stdout);
        return DR_OK;
    }
    if (strcmp(c->command, "devices") == 0) {   /* the OpenCL platforms and devices */
        dr_opencl_devices_print(stdout);
        return DR_OK;
    }
    if ((rc = pick_command(c, err)) || (rc = to_config(c, f, n, &cfg, err))) return rc;
    cfg.stop = &stop_signal;
    if (strcmp(c->variant, "mpi") == 0) return run_mpi(c, &cfg, err);
    if (trains(c) && (rc = dr_run_check_supported(&cfg, err))) return rc;
    return run_config(c, &cfg, err);
}

/* Only the chief (MPI rank 0; the only process otherwise) prints results. */
static bool printer(void)
{
    uint32_t rank;
    dr_mpi_world(&rank, NULL);
    return rank == 0;
}

static int run_config(cli *c, dr_run_config *cfg0, dr_err *err)
{
    dr_run_config cfg = *cfg0;
    dr_run_result res;
    int rc;
    if (c->print_tf_config) {
        uint32_t rank, size;
        dr_mpi_world(&rank, &size);
        if (strcmp(c->variant, "mpi") == 0) printf("TF_CONFIG (MPI rank %u of %u): %s\n", rank, size, cfg.tf_config);
        else printf("TF_CONFIG: %s\n", cfg.tf_config && cfg.tf_config[0] ? cfg.tf_config : "(unset: one machine)");
    }
    if (strcmp(c->command, "train") == 0) {
        if ((rc = dr_run_train(&cfg, &res, err))) return rc;
        c->peer_lost = res.peer_lost;
        if (printer()) dr_report_train(stdout, "train", &res, cfg.model_dir, dr_classifier(&cfg));
        return DR_OK;
    }
    if (strcmp(c->command, "train_and_eval") == 0) return dr_run_train_and_eval(&cfg, stdout, err);
    if (strcmp(c->command, "evaluate") == 0) {
        rc = dr_run_evaluate(&cfg, &res, err);
        if (rc == DR_OK || res.examples) dr_report_evaluate(stdout, "evaluate", &res, dr_classifier(&cfg));   /* shown even if eval.json could not be written */
        return rc;
    }
    if (strcmp(c->command, "predict") == 0) {
        if ((rc = dr_run_predict(&cfg, &res, err))) return rc;
        dr_report_predict(stdout, &res, cfg.model_dir);
        return DR_OK;
    }
    if (strcmp(c->command, "export") == 0) {
        if ((rc = dr_run_export(&cfg, c->what, c->format, err))) return rc;
        printf("export: %s as %s in %s\n", c->what, c->format, cfg.model_dir);
        return DR_OK;
    }
    return dr_fail(err, DR_EUSAGE, "unknown command '%s': expected " COMMANDS, c->command);
}

/* --variant=mpi: finalize together on success; after an error, print it
 * (naming this rank) and end the whole job (MPI_Abort), so that no rank
 * is left waiting in a collective for this one. A run that finished
 * without a rank that died (parameter_server under `mpirun
 * --enable-recovery`) exits without MPI_Finalize: measured with Open MPI
 * 4.1.4, its closing fence sometimes waits forever for the dead rank, and
 * mpirun --enable-recovery still exits 0 when every survivor exits 0. A
 * failed job after a rank died ends through dr_mpi_abort_failed_job, so
 * that mpirun --enable-recovery exits non-zero too; not under
 * parameter_server, whose coordinator survives a lost worker by design
 * (its chief reports a failed job): there a rank's timeout while a dead
 * worker's closure re-runs must not end the job (tests/mpi_ps_rerun.sh
 * under load: mpirun exit 137, the chief killed mid-run). */
static int mpi_exit(int rc, const dr_err *err, bool peer_lost, bool ps)
{
    uint32_t rank, size;
    int code = rc == DR_EUSAGE ? 2 : rc == DR_EINTERRUPTED ? 128 + (int)stop_signal : 1;
    dr_mpi_world(&rank, &size);
    if (rc == DR_OK) {
        if (!peer_lost) dr_mpi_finalize();
        return 0;
    }
    if (g_agreed || rc == DR_EUSAGE) {   /* a usage error in training (the same on every rank): rank 0 says it */
        if (!g_silent && (g_agreed || rank == 0)) {
            if (rank == 0) fprintf(stderr, "distref: error: %s\n", err->msg);
            else fprintf(stderr, "distref: error: MPI rank %u of %u: %s\n", rank, size, err->msg);
        }
        dr_mpi_finalize();
        return code;
    }
    fprintf(stderr, "distref: %sMPI rank %u of %u: %s\n", rc == DR_EINTERRUPTED ? "" : "error: ", rank, size, err->msg);
    fflush(stderr);
    if (rc == DR_EFAULT) {   /* a rank died: give the other survivors a moment to say so too */
        struct timespec grace = { 0, 500000000 };
        nanosleep(&grace, NULL);
    }
    if (rc == DR_EFAULT && !ps) dr_mpi_abort_failed_job(code);   /* a rank died: mpirun must not say 0 */
    else dr_mpi_abort(code);
    return code;
}

int main(int argc, char **argv)
{
    static cli c;   /* large: keep it off the stack */
    dr_flag f[64];
    dr_err err = { 0, "" };
    bool help = false;
    int first = 1, n, rc;
    dr_omp_short_spin_reexec(argv);   /* OpenMP threads spin briefly, then sleep, while they wait */
    /* Keep large scratch buffers in the heap instead of mapping and unmapping
     * them on every GEMM call (page faults dominated the engine's sys time). */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    setvbuf(stdout, NULL, _IOLBF, 0);   /* per-epoch lines appear as they happen */
    defaults(&c);
    g_argc = argc;
    g_argv = argv;
    if (argc > 1 && argv[1][0] != '-') {
        if (strlen(argv[1]) >= sizeof c.command) {
            if (launcher_rank() <= 0) fprintf(stderr, "distref: error: unknown command '%s': expected " COMMANDS "\n", argv[1]);
            return 2;
        }
        strcpy(c.command, argv[1]);
        first = 2;
    }
    n = table(&c, f);
    {   /* absl's --flagfile, expanded in place; then the table's flags */
        dr_flag_args args;
        rc = dr_flag_args_expand(argc - first, argv + first, &args, &err);
        if (rc == DR_OK) rc = dr_flags_parse_args(f, n, &args, &help, &err);
        dr_flag_args_free(&args);
    }
    if (rc == DR_OK && help) { usage(stdout, &c); return 0; }
    if (rc == DR_OK && c.version) { printf("distref %s (git %s)\n", DR_VERSION, DR_GIT_REVISION); return 0; }
    catch_signals();
    if (rc == DR_OK) rc = run(&c, f, n, &err);
    if (dr_mpi_active()) return mpi_exit(rc, &err, c.peer_lost, strcasecmp(c.strategy, "parameter_server") == 0);
    if (rc == DR_OK) return 0;
    if (rc == DR_EINTERRUPTED) {
        fprintf(stderr, "distref: %s\n", err.msg);
        return 128 + (int)stop_signal;   /* 130 for SIGINT, 143 for SIGTERM */
    }
    if (rc != DR_EUSAGE || launcher_rank() <= 0) fprintf(stderr, "distref: error: %s\n", err.msg);   /* once under mpirun */
    return rc == DR_EUSAGE ? 2 : 1;
}
