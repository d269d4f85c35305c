/* distref — experiments and the reference training loop.
 *
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

#include <stdbool.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/model.h"
#include "distref/strategy.h"

/* Experiments by name: linear_ones (the guide's Dense(1) toy), mlp_synthetic
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

/* Planted faults (off by default): each breaks one rule the conformance
 * comparison must notice. */
typedef enum dr_fault {
    DR_FAULT_NONE = 0,
    DR_FAULT_REG_NOT_SCALED,     /* regularization not scaled by 1/R */
    DR_FAULT_REG_SCALED_TWICE,   /* scaled by 1/R^2 */
    DR_FAULT_MEAN_NOT_SUM,       /* gradients all-reduced with MEAN instead of SUM */
    DR_FAULT_WRONG_SPLIT,        /* extras of an uneven batch go to the last replicas */
    DR_FAULT_DROP_SHORT,         /* one example dropped from a final short batch */
    DR_FAULT_ROUND_PARTIAL,      /* each replica's partial gradient rounded before the all-reduce */
    DR_FAULT_PAD_UNMASKED        /* tpu: the padding of a short final batch counted as examples */
} dr_fault;

int dr_fault_parse(const char *name, dr_fault *out, dr_err *err);

typedef struct dr_run_config {
    char     experiment[32];
    dr_strategy_spec    strategy;
    dr_strategy_options memory;
    char     layer_devices[256];  /* explicit per-layer placement, "" = none */
    uint32_t global_batch_size;   /* 0 = the experiment's */
    uint64_t train_steps;         /* 0 = run whole epochs */
    uint32_t epochs;              /* 0 = the experiment's */
    double   learning_rate;       /* < 0 = the experiment's */
    char     optimizer[16];       /* "" = the experiment's; "sgd" or "adam" */
    double   momentum;            /* < 0 = the experiment's */
    bool     nesterov;
    uint64_t seed;
    double   l2;                  /* < 0 = the experiment's (none) */
    bool     from_logits;
    char     data_dir[1024];
    char     model_dir[1024];
    uint32_t synthetic_examples;  /* training examples of the synthetic data */
    bool     drop_remainder;
    bool     shuffle;
    uint64_t checkpoint_every;    /* steps; 0 = at the end only */
    dr_fault fault;
    char     tf_config[4096];     /* TF_CONFIG JSON ("" = one machine) */
    char     auto_shard_policy[8];/* auto (default), file, data, off */
    uint64_t bytes_per_pack;      /* multi_worker_mirrored: 0 = one pack */
    char     variant[16];         /* "ref" (default) or "openmp" */
    char     numerics[16];        /* "exact" (default) or "fast" (openmp only) */
    int      threads;             /* OpenMP threads for the engine; 0 = OpenMP's default */
    bool     progress;            /* a progress bar on stderr */
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
} dr_run_result;

int dr_run_train(const dr_run_config *cfg, dr_run_result *res, dr_err *err);

/* Loads model_dir's checkpoint and evaluates on the test split (evaluate)
 * or writes model_dir/predictions.jsonl (predict), distributed the same way. */
int dr_run_evaluate(const dr_run_config *cfg, dr_run_result *res, dr_err *err);
int dr_run_predict(const dr_run_config *cfg, dr_run_result *res, dr_err *err);

#endif
