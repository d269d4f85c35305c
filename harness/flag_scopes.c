/* distref harness — which flags apply to which strategies, variants and
 * commands (harness.h, dr_flag_scopes_check; docs/RUN_DIRECTORY.md, "Strict
 * flags"). */
#include "distref/harness.h"

#include <string.h>

/* Flags that apply only to some strategies, variants or commands. Given
 * anywhere else they would be ignored, so they are refused, naming the flag
 * and what it is for. A flag's value is checked where it applies (the
 * factory, the plan), so "--all_reduce_alg=bogus" with one_device is refused
 * here and with mirrored there. */
#define S(k) (1u << DR_STRATEGY_##k)
#define ALL_STRATEGIES 0x7fu
#define CMD_TRAIN  1u   /* train, train_and_eval */
#define CMD_EVAL   2u   /* evaluate, predict */
#define CMD_EXPORT 4u
#define ALL_COMMANDS 7u


typedef struct scope {
    const char *flag;
    unsigned    strategies;   /* bit per dr_strategy_kind */
    unsigned    commands;
    const char *variants;     /* NULL: every variant; else the ones it is for, space-separated */
    const char *for_what;     /* the message's "is only for ..." */
} scope;

static const scope k_scopes[] = {
#define TRAINING(f) { f, ALL_STRATEGIES, CMD_TRAIN, NULL, "training (train, train_and_eval)" }
    TRAINING("lr_schedule"), TRAINING("warmup_steps"), TRAINING("decay_steps"), TRAINING("end_learning_rate"),
    TRAINING("power"), TRAINING("alpha"), TRAINING("decay_rate"), TRAINING("boundaries"), TRAINING("values"),
    TRAINING("staircase"), TRAINING("cycle"), TRAINING("warmup_learning_rate"),
    TRAINING("clipnorm"), TRAINING("clipvalue"), TRAINING("global_clipnorm"), TRAINING("clip_semantics"),
    TRAINING("gradient_accumulation_steps"), TRAINING("batch_norm"), TRAINING("dropout"),
    TRAINING("dtype_policy"), TRAINING("dtype"), TRAINING("loss_scale"), TRAINING("mixed_reduction"),
    TRAINING("dynamic_growth_steps"),
#undef TRAINING
    { "all_reduce_alg", S(MIRRORED) | S(CENTRAL_STORAGE) | S(MULTI_WORKER_MIRRORED), ALL_COMMANDS, NULL,
      "--distribution_strategy=mirrored or multi_worker_mirrored" },
    { "num_packs", S(MIRRORED), ALL_COMMANDS, NULL, "--distribution_strategy=mirrored" },
    { "bytes_per_pack", S(MULTI_WORKER_MIRRORED), ALL_COMMANDS, NULL, "--distribution_strategy=multi_worker_mirrored" },
    { "auto_shard_policy", S(MIRRORED) | S(CENTRAL_STORAGE) | S(MULTI_WORKER_MIRRORED) | S(TPU), ALL_COMMANDS, NULL,
      "strategies that distribute a dataset (mirrored, central_storage, multi_worker_mirrored, tpu)" },
    { "input_mode", ALL_STRATEGIES & ~S(PARAMETER_SERVER), ALL_COMMANDS, NULL,
      "strategies that distribute a dataset (parameter_server's workers read their own)" },
    { "num_gpus", ALL_STRATEGIES & ~S(TPU), ALL_COMMANDS, NULL, "strategies with GPUs (not tpu)" },
    { "gpu_memory_mb", ALL_STRATEGIES & ~S(TPU), ALL_COMMANDS, NULL, "strategies with GPUs (not tpu)" },
    { "layer_devices", ALL_STRATEGIES & ~(S(TPU) | S(PARAMETER_SERVER)), ALL_COMMANDS, NULL,
      "single-replica strategies (layer placement), not tpu or parameter_server" },
    { "tpu", S(TPU), ALL_COMMANDS, NULL, "--distribution_strategy=tpu" },
    { "tpu_platform", S(TPU), ALL_COMMANDS, NULL, "--distribution_strategy=tpu" },
    { "input_partition_dims", S(TPU), ALL_COMMANDS, NULL, "--distribution_strategy=tpu" },
    { "tpu_hbm_scale", S(TPU), ALL_COMMANDS, NULL, "--distribution_strategy=tpu" },
    { "staleness", S(PARAMETER_SERVER), ALL_COMMANDS, NULL, "--distribution_strategy=parameter_server" },
    { "schedule_seed", S(PARAMETER_SERVER), ALL_COMMANDS, NULL, "--distribution_strategy=parameter_server" },
    { "ps_partitioner", S(PARAMETER_SERVER), ALL_COMMANDS, NULL, "--distribution_strategy=parameter_server" },
    { "fail_worker", S(PARAMETER_SERVER), ALL_COMMANDS, NULL, "--distribution_strategy=parameter_server" },
    { "fail_ps", S(PARAMETER_SERVER), ALL_COMMANDS, NULL, "--distribution_strategy=parameter_server" },
    { "schedule", S(PARAMETER_SERVER), CMD_TRAIN, "mpi",
      "--distribution_strategy=parameter_server under --variant=mpi (training)" },
    { "dropout_masks", ALL_STRATEGIES & ~S(PARAMETER_SERVER), CMD_TRAIN, NULL,
      "training, under every strategy but parameter_server (its workers' steps have no one global batch)" },
    { "replay_schedule", S(PARAMETER_SERVER), CMD_TRAIN, "ref",
      "--distribution_strategy=parameter_server under --variant=ref (training)" },
    { "threads", ALL_STRATEGIES, ALL_COMMANDS, "openmp mpi", "--variant=openmp or mpi" },
    { "opencl_platform", S(OFF) | S(ONE_DEVICE) | S(MIRRORED) | S(CENTRAL_STORAGE) | S(MULTI_WORKER_MIRRORED),
      ALL_COMMANDS, "opencl", "--variant=opencl" },
    { "opencl_device", S(OFF) | S(ONE_DEVICE) | S(MIRRORED) | S(CENTRAL_STORAGE) | S(MULTI_WORKER_MIRRORED),
      ALL_COMMANDS, "opencl", "--variant=opencl" },
    { "opencl_mapping", S(OFF) | S(ONE_DEVICE) | S(MIRRORED) | S(CENTRAL_STORAGE) | S(MULTI_WORKER_MIRRORED),
      ALL_COMMANDS, "opencl", "--variant=opencl" },
    { "collective_timeout", ALL_STRATEGIES, CMD_TRAIN, "mpi", "--variant=mpi" },
    { "exact_accumulator", ALL_STRATEGIES & ~S(TPU), CMD_TRAIN, "openmp mpi",
      "--variant=openmp or mpi, not tpu (its tiles and torus carry the full accumulator)" },
    { "log_device_placement", ALL_STRATEGIES & ~(S(TPU) | S(PARAMETER_SERVER)), CMD_TRAIN, "ref",
      "the reference's training under the synchronous strategies other than tpu (--variant=ref)" },
    { "checkpoint_every", ALL_STRATEGIES, CMD_TRAIN, NULL, "training (train, --mode=train_and_eval)" },
    { "what", ALL_STRATEGIES, CMD_EXPORT, NULL, "export" },
    { "format", ALL_STRATEGIES, CMD_EXPORT, NULL, "export" },
    { "num_shards", ALL_STRATEGIES, CMD_EXPORT, NULL, "export --what=shards" },
    { "dataset_shards", ALL_STRATEGIES, CMD_TRAIN | CMD_EXPORT, NULL,
      "training and export (the training set; evaluate reads the experiment's test split)" },
    { "trajectory", ALL_STRATEGIES & ~S(PARAMETER_SERVER), CMD_TRAIN, NULL,
      "training under the synchronous strategies (parameter_server is asynchronous: a step there is one worker's "
      "update applied to the version it read, possibly stale, so there is no one state after step k that every "
      "replica shares to record; `distref export --what=weights` gives its final variables)" },
    { "tolerance", ALL_STRATEGIES, 0, NULL, "distref diff" },
    { "json", ALL_STRATEGIES, 0, NULL, "distref diff" },
    { "plot", ALL_STRATEGIES, 0, NULL, "distref diff" },
};

/* Whether name is a word of the space-separated list. */
static bool variant_in(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, " ");
        if (len == n && strncmp(p, name, n) == 0) return true;
        p += len;
        p += strspn(p, " ");
    }
    return false;
}

bool dr_flag_given(const dr_flag *f, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(f[i].name, name) == 0) return f[i].seen;
    return false;
}

static unsigned command_bit(const char *command)
{
    if (strcmp(command, "train") == 0 || strcmp(command, "train_and_eval") == 0) return CMD_TRAIN;
    if (strcmp(command, "export") == 0) return CMD_EXPORT;
    return CMD_EVAL;
}

int dr_flag_scopes_check(const dr_flag *f, int n, dr_strategy_kind kind, const char *command, const char *variant,
                         dr_err *err)
{
    for (size_t i = 0; i < sizeof k_scopes / sizeof k_scopes[0]; i++) {
        const scope *sc = &k_scopes[i];
        if (!dr_flag_given(f, n, sc->flag)) continue;
        if (!(sc->strategies & (1u << kind)))
            return dr_fail(err, DR_EUSAGE, "--%s does not apply to --distribution_strategy=%s: it is only for %s",
                           sc->flag, dr_strategy_kind_name(kind), sc->for_what);
        if (!(sc->commands & command_bit(command)))
            return dr_fail(err, DR_EUSAGE, "--%s does not apply to %s: it is only for %s", sc->flag, command,
                           sc->for_what);
        if (sc->variants && !variant_in(sc->variants, variant))
            return dr_fail(err, DR_EUSAGE, "--%s does not apply to --variant=%s: it is only for %s", sc->flag,
                           variant, sc->for_what);
    }
    return DR_OK;
}

