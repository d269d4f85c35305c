/* distref reference — the trainer's state (internal to ref/).
 *
 * train.c holds the step; trainer.c sets up and tears down (datasets,
 * devices, buffers, resume) and writes the outputs.
 */
#ifndef DISTREF_REF_TRAINER_H
#define DISTREF_REF_TRAINER_H

#include "distref/data.h"
#include "distref/input.h"
#include "distref/multiworker.h"
#include "distref/train.h"
#include "ref/wire.h"

#include <json-c/json.h>
#include <stdio.h>

typedef struct replica {
    dr_device *dev;
    float     *params;     /* mirrored: this replica's variables; else a working copy */
    float     *slots;      /* mirrored: this replica's optimizer slots; else NULL */
    dr_acc    *grad;       /* P numerators over the step's denominator G*R */
    float     *x;          /* the replica's batch on its device */
    uint8_t   *labels;
    float     *targets;
    dr_work    work;
    dr_acc     loss;
    uint64_t   correct;
} replica;

/* The tpu strategy's part of a run (ref/tpu_step.c). */
typedef struct tpu_run {
    bool          on;
    dr_tpu_system sys;             /* initialized by this run */
    dr_device     backing;         /* host memory standing in for the cores' HBM */
    uint32_t      local;           /* static per-replica batch, G / R */
    uint32_t      tiles;           /* logical cores per replica (spatial partitioning) */
    int           part[2];         /* input_partition_dims */
    uint32_t      tile_len;        /* pixels per tile = rows of layer 0's kernel */
    uint32_t     *tile_pixels;     /* tiles x tile_len */
    float        *tile_x, *tile_w; /* every tile's inputs; one tile's kernel rows */
    float        *tile_stage;      /* a tile gathered on the host; the delta landing on a core */
    dr_wire       wire;
    dr_acc       *tile_z, *z, *tile_g;  /* partial pre-activations, their merge, kernel-row gradients */
    size_t       *ranges;          /* per logical core: [lo, hi) pairs of the parameters it holds */
    uint32_t     *nranges, max_ranges;
    size_t        reserve_bytes[DR_MAX_DEVICES];   /* HBM reserved per core */
    double        compute_s, merge_s, allreduce_s;   /* this step's emulated parts */
    double        backward_s;                        /* (merge_s includes it: the delta to the tiles) */
    double        step_s, total_s;                   /* this step's and the run's emulated time */
} tpu_run;

typedef struct trainer {
    const dr_run_config *cfg;
    dr_experiment exp;            /* model and optimizer after the flags */
    const dr_model_ops *ops;      /* the kernels: the reference's or an engine variant's */
    bool          engine;         /* step with strategies/engine.c instead of ref/train.c */
    dr_dataset    data;
    dr_strategy   strat;
    size_t        P;              /* parameters */
    int           nslots;
    uint32_t      G, epochs;
    replica       rep[DR_MAX_DEVICES - 1];
    float        *var, *var_slots;   /* central_storage: the variables */
    dr_acc       *central;           /* central_storage: the reduced gradient */
    float        *grad;              /* the rounded gradient (scratch) */
    float        *host_x;            /* a replica's batch gathered on the host */
    uint8_t      *host_labels;
    float        *host_targets;
    size_t        tensor_len[2 * DR_MAX_LAYERS];
    uint32_t      ntensors;
    uint32_t      layer_dev[DR_MAX_LAYERS];   /* explicit placement */
    bool          placed;
    size_t        layer_bytes[DR_MAX_LAYERS];   /* reserved on each layer's device */
    float        *staging;                    /* activations landing on the next layer's device */
    dr_dist_iter  it;
    dr_dist_batch batch;
    uint32_t      off[DR_MAX_DEVICES];        /* this step's replica offsets into ids */
    const uint32_t *ids;                      /* this step's examples, replica by replica */
    uint32_t     *sharded;                    /* DATA-sharded arrangement (multi-worker) */
    bool          shard_data;                 /* multi_worker_mirrored with DATA sharding */
    bool          unsharded;                  /* multi_worker_mirrored with auto-shard OFF */
    uint32_t      count, den;
    uint64_t      step;
    uint64_t      epoch_correct, epoch_examples;
    float         last_loss;
    char         *metrics;                    /* metrics.jsonl so far */
    size_t        metrics_len, metrics_cap;
    double        t_start;
    uint64_t      start_step;
    tpu_run       tpu;
    char          line_extra[512];   /* JSON fields (",\"k\":v") for the next metrics line */
    json_object  *summary_extra;     /* fields summary.json adds (owned; put by finish) */
} trainer;

int  dr_trainer_open(trainer *t, const dr_run_config *cfg, dr_err *err);
void dr_trainer_close(trainer *t);
void dr_trainer_load_batch(trainer *t, replica *rp, const uint32_t *ids, uint32_t n);
void dr_trainer_count_layer_copies(trainer *t, replica *rp, uint32_t n);
/* One metrics.jsonl line; t->line_extra is appended to it and cleared. */
int  dr_trainer_log_step(trainer *t, float loss, dr_err *err);
/* metrics.jsonl of an earlier run in model_dir, cut back to the resumed step. */
int  dr_trainer_load_metrics(trainer *t, dr_err *err);
void dr_trainer_trim_metrics(trainer *t);
int  dr_trainer_save(trainer *t, dr_err *err);
/* A loaded checkpoint belongs to this run: experiment, model, optimizer,
 * seed, global batch and training set agree (DR_EFORMAT naming the field). */
struct dr_checkpoint;
int  dr_trainer_check_checkpoint(const trainer *t, const struct dr_checkpoint *c, dr_err *err);
void dr_trainer_progress(const trainer *t);
/* summary.json, with t->summary_extra's fields added. */
int  dr_trainer_finish(trainer *t, dr_run_result *res, dr_err *err);

/* Pieces of a step that every variant shares (ref/train.c): the count check
 * and the denominator G*R, a replica's share over it (where the planted
 * regularization and rounding faults act), the divisor of the one rounding
 * (where MEAN-for-SUM acts), the drop-short fault, and the loss and metrics
 * at the end. */
int      dr_trainer_begin_step(trainer *t, dr_err *err);
void     dr_trainer_split(trainer *t);
void     dr_trainer_apply(trainer *t, const dr_acc *total, float *params, float *slots);
void     dr_trainer_scale_share(trainer *t, replica *rp, uint32_t G);
/* A replica's share: the exact loss and gradient sums of its n examples
 * (rp->x etc. already loaded), then dr_trainer_scale_share over G. */
void     dr_trainer_compute_share(trainer *t, replica *rp, uint32_t n, uint32_t G);
uint32_t dr_trainer_divisor(const trainer *t);
void     dr_trainer_drop_short(trainer *t);
int      dr_trainer_end_step(trainer *t, dr_err *err);

/* parameter_server training: the coordinator, its seeded asynchronous
 * schedule and the ps tasks (ref/ps.c). dr_run_train hands such runs over. */
int  dr_ps_run_train(const dr_run_config *cfg, dr_run_result *res, dr_err *err);

/* The tpu strategy (ref/tpu_step.c): setup after the strategy is built,
 * the step, and teardown. */
/* The tpu options of a run (shared with evaluate): initializes sys, maps
 * --input_partition_dims to Model Garden's computation shape in opt, and
 * gives the partition grid and the cores per replica. */
int  dr_tpu_options(const dr_run_config *cfg, const dr_experiment *exp, dr_tpu_system *sys,
                    dr_strategy_options *opt, int part[2], uint32_t *tiles, dr_err *err);
int  dr_tpu_run_init(trainer *t, dr_strategy_options *opt, dr_err *err);
int  dr_tpu_run_open(trainer *t, dr_err *err);
int  dr_tpu_step(trainer *t, dr_err *err);
void dr_tpu_run_close(trainer *t);

/* The engine's step (strategies/engine.c). */
int  dr_engine_step(trainer *t, dr_err *err);

/* Shared with evaluate/predict. */
int  dr_trainer_ops(const dr_run_config *cfg, const dr_model_ops **ops, bool *engine, dr_err *err);
int  dr_trainer_load_data(const dr_run_config *cfg, const char *dataset, int split,
                          dr_dataset *out, dr_err *err);
int  dr_trainer_resolve(const dr_run_config *cfg, dr_experiment *exp, dr_err *err);
void dr_weights_sha256(const float *params, size_t n, char hex[65]);
double dr_now(void);

#endif
