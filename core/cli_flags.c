/* distref core — bin/distref's flags: the table, the defaults and the
 * dr_run_config they make (distref/cli_flags.h). cli/main.c and
 * fuzz/fuzz_flags.c both parse with this table.
 */
#include "distref/cli_flags.h"
#include "distref/factory.h"
#include "distref/train.h"

#include <stdio.h>
#include <string.h>

#define STR(name, field, help) { name, DR_FLAG_STRING, c->field, 1, 0, help, false, NULL, false }
/* A string flag with a list of values: the parser refuses others, listing them; help shows them. */
#define ENUM(name, field, choices, help) { name, DR_FLAG_STRING, c->field, 1, 0, help, false, choices, false }
#define INT(name, field, lo, hi, help) { name, DR_FLAG_INT, &c->field, lo, hi, help, false, NULL, false }
#define DBL(name, field, lo, hi, help) { name, DR_FLAG_DOUBLE, &c->field, lo, hi, help, false, NULL, false }
#define BOOL(name, field, help) { name, DR_FLAG_BOOL, &c->field, 1, 0, help, false, NULL, false }

/* The values of the flags whose lists live in the library: the strategies
 * (factory.h) and experiments, joined with '|'; --variant's come from the
 * caller (the registry is the harness's). */
static char k_strategies[256], k_experiments[256];

static void join(char *buf, size_t n, const char *name)
{
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, "%s%s", len ? "|" : "", name);
}

static void lists(void)
{
    const char *e;
    if (k_strategies[0]) return;
    for (int k = DR_STRATEGY_OFF; k <= DR_STRATEGY_TPU; k++)
        join(k_strategies, sizeof k_strategies, dr_strategy_kind_name((dr_strategy_kind)k));
    for (size_t i = 0; (e = dr_experiment_name(i)) != NULL; i++) join(k_experiments, sizeof k_experiments, e);
}

int dr_cli_flag_table(dr_cli_flags *c, dr_flag *f, const char *variants)
{
    lists();   /* before the table: the parser and help read the lists */
    if (!variants) variants = DR_CLI_VARIANT_NAMES;
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
        STR("dataset_shards", dataset_shards, "train from the shard files and shards.json that `distref export "
            "--what=shards` wrote into this folder (--auto_shard_policy=file: each worker reads only its files)"),
        INT("num_shards", num_shards, 0, 4096, "export --what=shards: the number of shard files"),
        INT("synthetic_examples", synthetic_examples, 1, 1000000, "training examples of the synthetic data"),
        BOOL("drop_remainder", drop_remainder, "drop the final short batch"),
        BOOL("shuffle", shuffle, "shuffle every epoch"),
        INT("checkpoint_every", checkpoint_every, 0, (double)(1LL << 40), "checkpoint every N steps (0 = at the end)"),
        STR("layer_devices", layer_devices, "per-layer placement, e.g. /gpu:0,/gpu:1 (model parallelism)"),
        BOOL("log_device_placement", log_device_placement, "print each op's device every step, on stderr (ref)"),
        INT("gpu_memory_mb", gpu_memory_mb, 0, 1 << 30, "memory of each emulated GPU (0 = unlimited)"),
        ENUM("variant", variant, variants, "the reference, or the engine on OpenMP, on OpenCL, or under mpirun "
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
        ENUM("what", what, "init|data|batches|all|weights|shards", "export: what to write (weights: the checkpoint's "
             "variables and slots as a one-step trajectory in --model_dir/weights, docs/JUDGING.md; shards: the "
             "training set as --num_shards files and shards.json, docs/MPI.md)"),
        ENUM("format", format, "npy|json", "export: the files' format"),
        ENUM("loss_reduction", loss_reduction, "global_batch_size|examples_in_step|tf_default", "the loss's divisor: "
             "global_batch_size (G, also for a short final batch), examples_in_step (the step's examples), "
             "tf_default (each replica divides by its own batch, as tf.keras does; depends on the replica count)"),
        ENUM("batch_norm", batch_norm, "sync|replica", "BatchNormalization's statistics: sync (the global batch, "
             "every replica count the same bits) | replica (each replica's own, TensorFlow's default)"),
        ENUM("dropout", dropout, "model|off", "Dropout layers: model (the experiment's rates) | off (rate 0: "
             "the TensorFlow comparisons, whose per-replica masks distref deliberately does not draw)"),
        STR("dropout_masks", dropout_masks, "train: apply the Dropout masks of FILE (step x layer x row of the global "
            "batch x unit; TensorFlow's, written by scripts/tf_golden.py; docs/MODELS.md) instead of drawing them; "
            "over several workers under --auto_shard_policy=data"),
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
        ENUM("cluster_resolver", cluster_resolver, "tf_config|slurm", "where the cluster comes from: tf_config "
             "(TF_CONFIG, --worker_hosts, or under mpi the MPI world) | slurm (SLURM_PROCID, SLURM_NTASKS, "
             "SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE, as SlurmClusterResolver)"),
        INT("task_index", task_index, -1, 65535, "Model Garden: this task's place in --worker_hosts (needed for more "
            "than one worker)"),
        STR("flagfile", flagfile, "read flags from FILE, one --flag=value a line (absl: # and // comments; later "
            "flags override it)"),
        STR("trajectory", trajectory, "train: record every:N | steps:A,B,... | checkpoints (variables, slots, "
            "gradients where the variant gives them, loss) into --model_dir/trajectory (docs/JUDGING.md)"),
        STR("tolerance", tolerance, "diff: ulp=N | rtol=X | atol=X; every element within it passes (default: bit for bit)"),
        BOOL("json", json, "diff: the report as JSON"),
        STR("plot", plot, "diff: a folder for the divergence picture over steps (log ulp, max and p99 per step and "
            "tensor): divergence.dat, divergence.gp, index.html, divergence.svg with gnuplot"),
        BOOL("version", version, "print the version and the git revision it was built from, and exit"),
        ENUM("lr_schedule", lr_schedule, "constant|piecewise|cosine|polynomial|exponential", "the learning rate "
             "per step, Keras 3's schedules in float32 (docs/TRAINING_FEATURES.md)"),
        INT("warmup_steps", warmup_steps, 0, 2147483647.0, "linear warmup from --warmup_learning_rate over this "
            "many steps, then the schedule from its step 0"),
        DBL("warmup_learning_rate", warmup_learning_rate, 0, 1e6, "where the warmup starts (default 0; Model Garden's "
            "warmup_learning_rate, Keras CosineDecay's initial_learning_rate with a warmup_target)"),
        INT("decay_steps", decay_steps, 0, 2147483647.0, "cosine|polynomial|exponential: the decay's steps (> 0)"),
        DBL("end_learning_rate", end_learning_rate, 0, 1e6, "polynomial: the final rate (default 0.0001)"),
        DBL("power", power, 0, 1000, "polynomial: the exponent (default 1)"),
        DBL("alpha", alpha, 0, 1, "cosine: the floor, a fraction of --learning_rate (default 0)"),
        DBL("decay_rate", decay_rate, 0, 1e6, "exponential: lr * decay_rate^(step / decay_steps) (> 0)"),
        BOOL("staircase", staircase, "exponential: the exponent floor(step / decay_steps) (Keras's staircase)"),
        BOOL("cycle", cycle, "polynomial: restart the decay past --decay_steps (Keras's cycle)"),
        STR("boundaries", boundaries, "piecewise: increasing steps, e.g. 100,200"),
        STR("values", values, "piecewise: the rates, one more than --boundaries, e.g. 0.1,0.01,0.001"),
        DBL("clipnorm", clipnorm, 0, 1e30, "clip each variable's aggregated gradient to this norm (> 0)"),
        DBL("clipvalue", clipvalue, 0, 1e30, "clip each aggregated gradient element to [-v, v] (> 0)"),
        DBL("global_clipnorm", global_clipnorm, 0, 1e30, "clip the aggregated gradient to this global norm (> 0)"),
        INT("gradient_accumulation_steps", gradient_accumulation_steps, 1, 65536, "apply the optimizer every k "
            "steps, to the gradient of all k batches (Keras 3's gradient_accumulation_steps)"),
        ENUM("clip_semantics", clip_semantics, "exact|tensorflow", "exact: clip the aggregated gradient "
             "(replica-invariant) | tensorflow: clip each replica's gradient before the all-reduce, as Keras 3 "
             "does under MirroredStrategy (depends on the replica count)"),
        ENUM("dtype_policy", dtype_policy, "float32|mixed_float16|mixed_bfloat16", "Keras' dtype policy: float32 "
             "master weights, each op rounded once to the compute dtype (docs/TRAINING_FEATURES.md; not built yet)"),
        ENUM("dtype", dtype, "fp32|fp16|bf16", "Model Garden's spelling of --dtype_policy (float32|mixed_float16|"
             "mixed_bfloat16)"),
        INT("dynamic_growth_steps", dynamic_growth_steps, 1, 4294967295.0, "a dynamic loss scale doubles after this "
            "many finite steps in a row (Keras 3's dynamic_growth_steps; default 2000)"),
        STR("loss_scale", loss_scale, "dynamic | dynamic:<initial scale> | a fixed factor > 0 (Keras 3's "
            "LossScaleOptimizer, initial 2^15; default dynamic for mixed_float16, none otherwise)"),
        ENUM("mixed_reduction", mixed_reduction, "exact|tensorflow", "exact: the global gradient summed exactly and "
             "rounded once (replica-invariant) | tensorflow: each replica's gradient rounded to the compute dtype "
             "before the sum, as TensorFlow (depends on the replica count)"),
    };
    _Static_assert(sizeof all / sizeof all[0] <= DR_CLI_MAX_FLAGS, "DR_CLI_MAX_FLAGS: room for every flag");
    if (f) memcpy(f, all, sizeof all);
    return (int)(sizeof all / sizeof all[0]);
}

void dr_cli_flags_defaults(dr_cli_flags *c)
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
    strcpy(c->batch_norm, d.batch_norm);
    strcpy(c->dropout, d.dropout);
    strcpy(c->what, "all");
    strcpy(c->format, "npy");
    strcpy(c->numerics, d.numerics);
    strcpy(c->schedule, d.schedule);
    strcpy(c->exact_accumulator, "compact");
    strcpy(c->cluster_resolver, "tf_config");
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
    strcpy(c->lr_schedule, "constant");
    strcpy(c->clip_semantics, "exact");
    strcpy(c->dtype_policy, "float32");
    strcpy(c->mixed_reduction, "exact");
    c->gradient_accumulation_steps = 1;
    c->end_learning_rate = 0.0001;   /* Keras's PolynomialDecay defaults */
    c->power = 1.0;
}


/* Copies a string flag into a fixed field, refusing one that does not fit. */
static int copy_flag(char *dst, size_t size, const char *src, const char *name, dr_err *err)
{
    size_t len = strlen(src);
    if (len >= size) return dr_fail(err, DR_EUSAGE, "--%s: %zu characters, at most %zu allowed", name, len, size - 1);
    memcpy(dst, src, len + 1);
    return DR_OK;
}

static bool given(const dr_flag *f, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(f[i].name, name) == 0) return f[i].seen;
    return false;
}

int dr_cli_flags_strategy(const dr_cli_flags *c, dr_run_config *cfg, dr_err *err)
{
    return dr_get_distribution_strategy(c->strategy, (int)c->num_gpus, c->all_reduce_alg[0] ? c->all_reduce_alg : NULL,
                                        (int)c->num_packs, c->tpu, &cfg->strategy, err);
}

static int strings(const dr_cli_flags *c, dr_run_config *cfg, dr_err *err)
{
    int rc;
    if ((rc = copy_flag(cfg->experiment, sizeof cfg->experiment, c->experiment, "experiment", err)) ||
        (rc = copy_flag(cfg->model_dir, sizeof cfg->model_dir, c->model_dir, "model_dir", err)) ||
        (rc = copy_flag(cfg->data_dir, sizeof cfg->data_dir, c->data_dir, "data_dir", err)) ||
        (rc = copy_flag(cfg->dataset_shards, sizeof cfg->dataset_shards, c->dataset_shards, "dataset_shards", err)) ||
        (rc = copy_flag(cfg->optimizer, sizeof cfg->optimizer, c->optimizer, "optimizer", err)) ||
        (rc = copy_flag(cfg->layer_devices, sizeof cfg->layer_devices, c->layer_devices, "layer_devices", err)) ||
        (rc = copy_flag(cfg->variant, sizeof cfg->variant, c->variant, "variant", err)) ||
        (rc = copy_flag(cfg->numerics, sizeof cfg->numerics, c->numerics, "numerics", err)) ||
        (rc = copy_flag(cfg->auto_shard_policy, sizeof cfg->auto_shard_policy, c->auto_shard_policy,
                        "auto_shard_policy", err)) ||
        (rc = copy_flag(cfg->loss_reduction, sizeof cfg->loss_reduction, c->loss_reduction,
                        "loss_reduction", err)) ||
        (rc = copy_flag(cfg->input_mode, sizeof cfg->input_mode, c->input_mode, "input_mode", err)) ||
        (rc = copy_flag(cfg->batch_norm, sizeof cfg->batch_norm, c->batch_norm, "batch_norm", err)) ||
        (rc = copy_flag(cfg->dropout, sizeof cfg->dropout, c->dropout, "dropout", err)) ||
        (rc = copy_flag(cfg->dropout_masks, sizeof cfg->dropout_masks, c->dropout_masks, "dropout_masks", err)) ||
        (rc = copy_flag(cfg->tpu_platform, sizeof cfg->tpu_platform, c->tpu_platform, "tpu_platform", err)) ||
        (rc = copy_flag(cfg->input_partition_dims, sizeof cfg->input_partition_dims, c->input_partition_dims,
                        "input_partition_dims", err)) ||
        (rc = copy_flag(cfg->ps_partitioner, sizeof cfg->ps_partitioner, c->ps_partitioner, "ps_partitioner", err)) ||
        (rc = copy_flag(cfg->fail_worker, sizeof cfg->fail_worker, c->fail_worker, "fail_worker", err)) ||
        (rc = copy_flag(cfg->fail_ps, sizeof cfg->fail_ps, c->fail_ps, "fail_ps", err)) ||
        (rc = copy_flag(cfg->schedule, sizeof cfg->schedule, c->schedule, "schedule", err)) ||
        (rc = copy_flag(cfg->replay_schedule, sizeof cfg->replay_schedule, c->replay_schedule, "replay_schedule", err)) ||
        (rc = copy_flag(cfg->opencl_device, sizeof cfg->opencl_device, c->opencl_device, "opencl_device", err)) ||
        (rc = copy_flag(cfg->opencl_mapping, sizeof cfg->opencl_mapping, c->opencl_mapping, "opencl_mapping", err)) ||
        (rc = copy_flag(cfg->trajectory, sizeof cfg->trajectory, c->trajectory, "trajectory", err)))
        return rc;
    return DR_OK;
}

int dr_cli_flags_config(const dr_cli_flags *c, const dr_flag *f, int n, dr_run_config *cfg, dr_err *err)
{
    int rc;
    if ((rc = strings(c, cfg, err))) return rc;
    if (strcmp(cfg->schedule, "seeded") != 0 && strcmp(cfg->schedule, "free") != 0)
        return dr_fail(err, DR_EUSAGE, "--schedule=%s: expected seeded or free", cfg->schedule);
    if ((cfg->fail_worker[0] || cfg->fail_ps[0]) && strcmp(cfg->schedule, "free") == 0)
        return dr_fail(err, DR_EUSAGE, "--%s with --schedule=free: an injected failure is a step of the reference's "
                       "seeded plan (--schedule=seeded); a free run's failures are ranks that really die",
                       cfg->fail_worker[0] ? "fail_worker" : "fail_ps");
    if (strcmp(c->exact_accumulator, "compact") != 0 && strcmp(c->exact_accumulator, "full") != 0)
        return dr_fail(err, DR_EUSAGE, "--exact_accumulator=%s: expected compact or full", c->exact_accumulator);
    if (given(f, n, "exact_accumulator") && strcmp(c->numerics, "exact") != 0)
        return dr_fail(err, DR_EUSAGE, "--exact_accumulator=%s does not apply to --numerics=%s: it chooses the "
                       "accumulator of --numerics=exact", c->exact_accumulator, c->numerics);
    cfg->full_accumulators = strcmp(c->exact_accumulator, "full") == 0;
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
    cfg->num_shards = (uint32_t)c->num_shards;
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
    if ((rc = dr_cli_flags_training(c, f, n, cfg, err))) return rc;
    return dr_cli_flags_mixed(c, f, n, cfg, err);
}
