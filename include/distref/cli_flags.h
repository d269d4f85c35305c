/* distref — bin/distref's flags: the values, their defaults, the table the
 * parser reads (distref/flags.h) and the dr_run_config they make.
 *
 * One table for every program that parses bin/distref's command line:
 * cli/main.c, and fuzz/fuzz_flags.c, which fuzzes the same table and the
 * same conversion (core/cli_flags.c holds both). A flag is added here, once;
 * tests/test_cli_flags.c fails while no seed of fuzz/corpus/flags/ gives it.
 *
 * What stays in cli/main.c: the command and --mode, --help's header, the
 * --model_dir requirement and the flags' scopes (harness/flag_scopes.c),
 * TF_CONFIG from the environment or --worker_hosts, the progress bar,
 * --log_device_placement's stream, and the run itself.
 */
#ifndef DISTREF_CLI_FLAGS_H
#define DISTREF_CLI_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/flags.h"
#include "distref/train.h"

/* Room a caller gives dr_cli_flag_table (the table has fewer). */
#define DR_CLI_MAX_FLAGS 96

/* --variant's values when the registry (harness/registry.c, above core) is
 * not linked, as in the fuzzer; tests/test_cli_flags.c checks that they are
 * the registry's names in its order. */
#define DR_CLI_VARIANT_NAMES "ref|openmp|opencl|mpi"

/* Every flag's value (a field per flag, named as the flag or nearly:
 * --distribution_strategy is strategy), and the command before them. */
typedef struct dr_cli_flags {
    char    command[16];   /* the first argument, when it has no leading '-' */
    char    strategy[DR_FLAG_STR_MAX], all_reduce_alg[DR_FLAG_STR_MAX], tpu[DR_FLAG_STR_MAX];
    char    tpu_platform[DR_FLAG_STR_MAX], mode[DR_FLAG_STR_MAX], experiment[DR_FLAG_STR_MAX];
    char    model_dir[DR_FLAG_STR_MAX], data_dir[DR_FLAG_STR_MAX], optimizer[DR_FLAG_STR_MAX];
    char    dataset_shards[DR_FLAG_STR_MAX];
    int64_t num_shards;
    char    layer_devices[DR_FLAG_STR_MAX];
    char    variant[DR_FLAG_STR_MAX], numerics[DR_FLAG_STR_MAX], auto_shard_policy[DR_FLAG_STR_MAX];
    char    input_partition_dims[DR_FLAG_STR_MAX], ps_partitioner[DR_FLAG_STR_MAX];
    char    fail_worker[DR_FLAG_STR_MAX], fail_ps[DR_FLAG_STR_MAX], loss_reduction[DR_FLAG_STR_MAX];
    char    schedule[DR_FLAG_STR_MAX], replay_schedule[DR_FLAG_STR_MAX], cluster_resolver[DR_FLAG_STR_MAX];
    char    what[DR_FLAG_STR_MAX], format[DR_FLAG_STR_MAX], input_mode[DR_FLAG_STR_MAX];
    char    batch_norm[DR_FLAG_STR_MAX], dropout[DR_FLAG_STR_MAX], dropout_masks[DR_FLAG_STR_MAX];
    char    exact_accumulator[DR_FLAG_STR_MAX];
    char    opencl_device[DR_FLAG_STR_MAX], opencl_mapping[DR_FLAG_STR_MAX];
    char    worker_hosts[DR_FLAG_STR_MAX], flagfile[DR_FLAG_STR_MAX];
    char    trajectory[DR_FLAG_STR_MAX], tolerance[DR_FLAG_STR_MAX], plot[DR_FLAG_STR_MAX];
    int64_t task_index;
    int64_t threads, bytes_per_pack, schedule_seed, staleness, opencl_platform;
    double  tpu_hbm_scale;
    int64_t num_gpus, num_packs, global_batch_size, train_steps, epochs, seed;
    int64_t synthetic_examples, checkpoint_every, gpu_memory_mb;
    double  learning_rate, l2, momentum;
    bool    nesterov, staircase, cycle, from_logits, drop_remainder, shuffle, print_tf_config, log_device_placement, version, json;
    double  collective_timeout;
    /* learning-rate schedule and clipping (distref/schedule.h) */
    char    lr_schedule[DR_FLAG_STR_MAX], boundaries[DR_FLAG_STR_MAX], values[DR_FLAG_STR_MAX];
    char    clip_semantics[DR_FLAG_STR_MAX];
    int64_t warmup_steps, decay_steps, gradient_accumulation_steps, dynamic_growth_steps;
    double  end_learning_rate, power, alpha, decay_rate, warmup_learning_rate, clipnorm, clipvalue, global_clipnorm;
    /* mixed precision (distref/loss_scale.h) */
    char    dtype_policy[DR_FLAG_STR_MAX], dtype[DR_FLAG_STR_MAX], loss_scale[DR_FLAG_STR_MAX];
    char    mixed_reduction[DR_FLAG_STR_MAX];
} dr_cli_flags;

/* Every flag at its default (dr_run_config_defaults' values, Model
 * Garden's where bin/distref follows it); command empty. */
void dr_cli_flags_defaults(dr_cli_flags *c);

/* Fills f[0..n) with bin/distref's flags bound to c's fields and returns n
 * (at most DR_CLI_MAX_FLAGS); f may be NULL to count them. variants:
 * --variant's values joined with '|' (the registry's names; it must
 * outlive f); NULL takes DR_CLI_VARIANT_NAMES. */
int dr_cli_flag_table(dr_cli_flags *c, dr_flag *f, const char *variants);

/* --distribution_strategy, --num_gpus, --all_reduce_alg, --num_packs and
 * --tpu as cfg->strategy (dr_get_distribution_strategy). */
int dr_cli_flags_strategy(const dr_cli_flags *c, dr_run_config *cfg, dr_err *err);

/* The other flags into cfg (f, n: the parsed table, for which were given):
 * the strings (DR_EUSAGE naming one that does not fit), --schedule and
 * --exact_accumulator checked, the numbers. Leaves cfg->strategy,
 * tf_config, progress and placement_log as they were. */
int dr_cli_flags_config(const dr_cli_flags *c, const dr_flag *f, int n, dr_run_config *cfg, dr_err *err);

/* --lr_schedule and its parameters, the clipping flags into cfg->lr_schedule
 * and cfg->clip (core/cli_train_flags.c): values and scope checked, DR_EUSAGE
 * naming the flag. Called by dr_cli_flags_config. */
int dr_cli_flags_training(const dr_cli_flags *c, const dr_flag *f, int n, dr_run_config *cfg, dr_err *err);

/* --dtype_policy (--dtype), --loss_scale, --mixed_reduction into cfg->mixed
 * (core/cli_mixed_flags.c): values checked, DR_EUSAGE naming the flag. */
int dr_cli_flags_mixed(const dr_cli_flags *c, const dr_flag *f, int n, dr_run_config *cfg, dr_err *err);

#endif
