/* distref core — experiments, run configurations and results as data.
 *
 * The training loop that consumes them is the harness's (distref/harness.h):
 * dr_run_train is a custom training loop in the tf.distribute style: per
 * step, the strategy distributes a global batch, every replica computes its
 * share of the loss and gradient as exact accumulators over the common
 * denominator G*R (docs/SEMANTICS.md), the cross-device op all-reduces them,
 * and each holder of the variables rounds once and applies the optimizer.
 *
 * Outputs in model_dir: metrics.jsonl (a line per step: loss, loss_bits, the
 * per-replica batch sizes and a hash of each replica's example ids),
 * summary.json (final metrics, weights_sha256, bytes moved, peak memory),
 * ckpt.bin. An existing checkpoint in model_dir is resumed from.
 */
#ifndef DISTREF_TRAIN_H
#define DISTREF_TRAIN_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <signal.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/model.h"
#include "distref/strategy.h"
#include "distref/loss_scale.h"

/* Experiments by name: linear_ones (the guide's Dense(1) toy), linear_wide
 * (Dense(1) on features spanning 2^-60 .. 2^60: exact sums stressed), mlp_synthetic
 * (784-128-10 on the embedded data, the default), mlp_fashion_mnist
 * (784-128-10, Adam 0.001, as in the seeds). */
typedef struct dr_experiment {
    const char   *name;
    const char   *dataset;        /* "toy", "synthetic", "fashion_mnist" */
    dr_model_spec model;
    uint32_t      global_batch;
    uint32_t      epochs;
    dr_optimizer  optimizer;
} dr_experiment;

int dr_experiment_lookup(const char *name, dr_experiment *out, dr_err *err);
/* The small ResNet of resnet_* at stem width w (core/experiment_resnet.c). */
void dr_resnet_spec(dr_model_spec *m, uint32_t width);
/* The i-th experiment's name, NULL past the last (the --experiment list). */
const char *dr_experiment_name(size_t i);

/* "Not given: use the experiment's value" for the optional real settings
 * (learning_rate, momentum, l2). A NaN, never a number a user could type:
 * a negative value is an error (DR_EUSAGE), not a default. */
#define DR_UNSET ((double)NAN)
#define dr_is_unset(x) (isnan(x))

typedef struct dr_run_config {
    char     experiment[32];
    dr_strategy_spec    strategy;
    dr_strategy_options memory;
    char     layer_devices[256];  /* explicit per-layer placement, "" = none */
    uint32_t global_batch_size;   /* 0 = the experiment's */
    uint64_t train_steps;         /* 0 = run whole epochs */
    uint32_t epochs;              /* 0 = the experiment's */
    double   learning_rate;       /* DR_UNSET = the experiment's; otherwise >= 0 */
    char     optimizer[16];       /* "" = the experiment's; "sgd" or "adam" */
    double   momentum;            /* DR_UNSET = the experiment's; otherwise in [0, 1] */
    bool     nesterov;
    uint64_t seed;
    double   l2;                  /* DR_UNSET = the experiment's (none); otherwise >= 0 */
    bool     from_logits;
    char     data_dir[1024];
    char     dataset_shards[1024];/* "" or a folder of shard files + shards.json (distref/shards.h) */
    uint32_t num_shards;          /* export --what=shards: how many files */
    char     model_dir[1024];
    uint32_t synthetic_examples;  /* training examples of the synthetic data */
    bool     drop_remainder;
    bool     shuffle;
    uint64_t checkpoint_every;    /* steps; 0 = at the end only */
    const char *tf_config;        /* TF_CONFIG JSON; NULL or "" = one machine. Not copied:
                                   * the caller keeps it alive for the run */
    char     auto_shard_policy[8];/* auto (default), file, data, off, hint */
    char     input_mode[16];      /* dataset (experimental_distribute_dataset, default) or function */
    char     loss_reduction[24];  /* the loss's divisor: global_batch_size (default) or examples_in_step */
    uint64_t bytes_per_pack;      /* multi_worker_mirrored: 0 = one pack */
    char     variant[16];         /* "ref" (default), "openmp", "mpi" or "opencl" */
    char     numerics[16];        /* "exact" (default) or "fast" (openmp only) */
    int      threads;             /* OpenMP threads for the engine; 0 = OpenMP's default */
    bool     full_accumulators;   /* --exact_accumulator=full: the openmp and mpi engines keep exact
                                   * gradients in dr_acc, not compact dr_cacc (the same bits) */
    double   collective_timeout;  /* --variant=mpi: seconds a collective waits without progress before
                                   * it fails naming the rank it waits for; 0 = the comm's default */
    int      opencl_platform;     /* --variant=opencl: platform index; -1 = DISTREF_OPENCL_PLATFORM or 0 */
    char     opencl_device[64];   /* its devices: "D" or "D1,D2,..."; "" = DISTREF_OPENCL_DEVICE or "0" */
    char     opencl_mapping[16];  /* replicas onto them: shared|queues|subdevices|auto; "" = DISTREF_OPENCL_MAPPING
                                   * or auto (distref/opencl.h) */
    char     trajectory[256];     /* --trajectory: "" (off), every:N, steps:LIST or checkpoints
                                   * (distref/trajectory.h) into model_dir/trajectory */
    bool     progress;            /* a progress bar on stderr */
    FILE    *placement_log;       /* --log_device_placement: the reference logs each op's device
                                   * here (TensorFlow's format, ref/placement_log.c); NULL: off */
    /* Set (to a signal number) by the program's SIGINT/SIGTERM handler: the
     * training loop finishes its step, checkpoints and returns
     * DR_EINTERRUPTED. NULL: never stopped. */
    const volatile sig_atomic_t *stop;
    /* tpu (the TPU address is strategy.tpu_address) */
    char     tpu_platform[8];     /* "" or v2, v3, v4 */
    char     input_partition_dims[32]; /* spatial partitioning, e.g. "2,2"; "" = none */
    double   tpu_hbm_scale;       /* multiplies each core's HBM (tests provoke OOM); 1 = real */
    /* parameter_server */
    uint64_t schedule_seed;       /* seed of the emulated asynchronous interleaving */
    uint32_t staleness;           /* most updates a worker's read of the variables may miss; 0 = lock-step */
    char     ps_partitioner[48];  /* "" = none; fixed:N, min_size:BYTES[:MAX], max_size:BYTES[:MAX] */
    char     fail_worker[32];     /* "" = none; "W:K": worker W fails while running step K */
    char     fail_ps[32];         /* "" = none; "P:K": ps task P fails at step K */
    char     schedule[16];        /* --variant=mpi: "seeded" (the reference's order) or "free" (arrival) */
    char     replay_schedule[1024]; /* --variant=ref: a recorded ps_schedule.jsonl to follow; "" = draw */
    /* --lr_schedule and its parameters, --clipnorm/--clipvalue/--global_clipnorm (distref/schedule.h);
     * zero: a constant rate, no clipping. dr_experiment_resolve copies them into the optimizer. */
    dr_lr_schedule lr_schedule;
    dr_clip        clip;
    uint32_t       gradient_accumulation_steps;  /* k: an update every k steps (micro-batches); 0, 1 = none */
    char           batch_norm[8];     /* "sync" (default: global batch statistics) or "replica" (docs/MODELS.md) */
    char           dropout[8];        /* "model" (default: the experiment's rates) or "off" (every rate 0) */
    char           dropout_masks[1024]; /* a masks file (distref/dropout_masks.h) instead of the RNG; "" = draw */
    dr_mixed_config mixed;        /* --dtype_policy, --loss_scale, --mixed_reduction; zero: float32 */
} dr_run_config;

void dr_run_config_defaults(dr_run_config *c);

typedef struct dr_run_result {
    uint64_t steps;
    float    loss;                /* last step's loss (train) or the eval loss */
    float    accuracy;
    uint64_t examples;
    char     weights_sha256[65];
    double   seconds;
    double   emulated_seconds;    /* tpu: the emulated time of this run's steps (alpha-beta model) */
    bool     peer_lost;           /* mpi: a rank of the job died and the run finished without it
                                   * (MPI_Finalize must then be skipped: docs/MPI.md) */
    /* train: what the run did with its model_dir (docs/RUN_DIRECTORY.md) */
    bool     already_complete;    /* the checkpoint had every step: nothing ran, nothing was written,
                                   * and only steps is set */
    uint64_t resumed_step;        /* the checkpoint's step it continued from (0: from the start) */
    char     topology[160];       /* "mirrored, 1 worker x 3 replicas, openmp, exact" */
    char     previous[160];       /* the topology the steps up to resumed_step ended under, when
                                   * it was another one ("" otherwise) */
} dr_run_result;

/* Training, evaluation and prediction are the harness's (distref/harness.h). */

#endif
