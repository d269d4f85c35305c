/* distref reference — the trainer's state (internal to ref/).
 *
 * train_step.c holds the step; trainer.c sets up and tears down (devices,
 * buffers, placement). The loop around the steps, the outputs and resume
 * are the harness's (harness/train_loop.c); ref/variant.c is the table through
 * which the harness reaches this.
 */
#ifndef DISTREF_REF_TRAINER_H
#define DISTREF_REF_TRAINER_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_ENGINE) || defined(DR_LAYER_HARNESS)
#error "ref/trainer.h is internal to ref/ (docs/ARCHITECTURE.md)"
#endif

#include "distref/data.h"
#include "distref/input.h"
#include "distref/multiworker.h"
#include "distref/train.h"
#include "distref/ref.h"
#include "distref/plan.h"
#include "distref/variant.h"
#include "distref/run_log.h"
#include "distref/wire.h"

#include <json-c/json.h>
#include <stdio.h>

typedef struct replica {
    dr_device *dev;
    float     *params;     /* mirrored: this replica's variables; else a working copy */
    float     *slots;      /* mirrored: this replica's optimizer slots; else NULL */
    dr_acc    *grad;       /* P numerators over the step's denominator D*R */
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
    /* spatial partitioning of a model beyond Dense (ref/tpu_spatial.c): the plan, each core's
     * work and input (entry e = replica * tiles + core), the halo traffic */
    dr_spatial_plan plan;
    struct dr_halo *halo;          /* NULL: not partitioned, or a Dense model (the tiles above) */
    dr_work      *core_work;
    float        *core_x;
    uint64_t      halo_total[DR_MAX_TILES], gather_total;   /* the run's, replica 0's cores */
} tpu_run;

typedef struct trainer {
    const dr_run_plan *plan;
    const dr_run_config *cfg;
    dr_experiment exp;            /* model and optimizer after the flags */
    const dr_model_ops *ops;      /* the reference's kernels */
    const dr_dataset *data;       /* the harness's */
    dr_strategy   strat;
    size_t        P;              /* parameters */
    int           nslots;
    uint32_t      G;
    replica       rep[DR_MAX_DEVICES - 1];
    float        *var, *var_slots;   /* central_storage: the variables */
    dr_acc       *central;           /* central_storage: the reduced gradient */
    float        *grad;              /* the rounded gradient (scratch) */
    dr_loss_scale ls;                /* --dtype_policy=mixed_*: the loss scale (ref/mixed_step.c);
                                      * growth_steps 0 until the first mixed step */
    uint64_t      mixed_steps;       /* mixed steps run by this trainer (0: a fresh one, maybe resumed) */
    bool          updated;           /* the last mixed step updated the variables */
    dr_acc       *accum[DR_MAX_DEVICES];  /* --gradient_accumulation_steps: each replica's shares of the
                                           * update's steps so far (host memory); else NULL */
    float        *host_x;            /* a replica's batch gathered on the host */
    uint8_t      *host_labels;
    float        *host_targets;
    uint32_t      layer_dev[DR_MAX_LAYERS];   /* explicit placement */
    bool          placed;
    size_t        layer_bytes[DR_MAX_LAYERS];   /* reserved on each layer's device */
    float        *staging;                    /* activations landing on the next layer's device */
    const dr_dist_batch *batch;               /* this step's global batch */
    uint32_t      off[DR_MAX_DEVICES];        /* this step's replica offsets into ids */
    uint32_t      row0[DR_MAX_DEVICES];       /* replica r's first row of the global batch
                                               * (--dropout_masks): off[r] but under DATA
                                               * over W > 1 workers (dr_shard_data_row) */
    const uint32_t *ids;                      /* this step's examples, replica by replica */
    uint32_t     *sharded;                    /* DATA-sharded arrangement (multi-worker) */
    uint32_t      count, den;      /* examples in the step; the shares' common denominator */
    uint32_t      mult[DR_MAX_DEVICES], coef;   /* share r = (mult[r] sum_r + coef reg) / den */
    uint64_t      step;
    dr_step_report *report;                   /* what this step tells the harness */
    tpu_run       tpu;
} trainer;

int  dr_trainer_open(trainer *t, const dr_run_plan *plan, const dr_dataset *data, dr_err *err);
void dr_trainer_close(trainer *t);
void dr_trainer_load_batch(trainer *t, replica *rp, const uint32_t *ids, uint32_t n);
void dr_trainer_count_layer_copies(trainer *t, replica *rp, uint32_t n);
/* The variables' holder (central_storage's variable device, else replica
 * 0) and copying them to every mirrored replica. */
float *dr_trainer_params(trainer *t);
float *dr_trainer_slots(trainer *t);
void  dr_trainer_broadcast(trainer *t);

/* Pieces of a step shared by the strategies (ref/train_step.c): the split, the
 * count check and the denominator D*R, a replica's share over it, the
 * divisor of the one rounding, and the loss and the report at the end. */
int      dr_trainer_begin_step(trainer *t, const dr_dist_batch *b, uint64_t step, dr_step_report *rep,
                               dr_err *err);
void     dr_trainer_apply(trainer *t, const dr_acc *total, float *params, float *slots);
void     dr_trainer_scale_share(trainer *t, replica *rp, uint32_t mult, uint32_t coef);
/* --clip_semantics=tensorflow: the replica's share rounded (RN(share / den)),
 * clipped as Keras 3 clips each replica's gradient under MirroredStrategy,
 * and put back over the same denominator, exactly (nothing under
 * --gradient_accumulation_steps: clip.at_update, dr_trainer_accumulate). */
void     dr_trainer_clip_share(trainer *t, replica *rp);
/* --gradient_accumulation_steps: the step's shares added to each replica's
 * accumulators; on the k-th step reduce(t) (the strategy's reduction and
 * apply) runs with them as the shares, over k*D*R, each first clipped as
 * its replica's mean under --clip_semantics=tensorflow (Keras 3). */
int      dr_trainer_accumulate(trainer *t, int (*reduce)(trainer *t, dr_err *err), dr_err *err);
/* A replica's share: the exact loss and gradient sums of its n examples
 * (rp->x etc. already loaded), then dr_trainer_scale_share: mult * sums +
 * coef * reg, over the step's denominator. */
void     dr_trainer_compute_share(trainer *t, replica *rp, uint32_t n, uint32_t mult, uint32_t coef);
void     dr_trainer_end_step(trainer *t);
/* --log_device_placement (placement_log.c): replica r's forward, loss and
 * backward ops, then the reduction and the updates, one line per op. */
void     dr_trainer_log_replica_ops(const trainer *t, uint32_t r);
void     dr_trainer_log_update_ops(const trainer *t);
/* ... their parts: the loss op (placement_log.c), a model beyond Dense's
 * replica ops (placement_graph.c) */
void     dr_trainer_log_loss(const trainer *t, const char *prefix, const dr_device *dev);
void     dr_trainer_log_graph_ops(const trainer *t, uint32_t r);
/* The gradient's reduction and the updates of a step (train_step.c). */
int      dr_trainer_reduce_and_apply(trainer *t, dr_err *err);
/* The step's shares to the update: reduced and applied, or under
 * --gradient_accumulation_steps=k added to the accumulators, reduced and
 * applied every k-th step (train_step.c). */
int      dr_trainer_update(trainer *t, dr_err *err);
/* Models beyond Dense (graph_step.c): every replica's share of the step
 * (batches already loaded), and the whole step after dr_trainer_begin_step. */
int      dr_graph_shares(trainer *t, dr_err *err);
int      dr_graph_step(trainer *t, dr_err *err);
/* One synchronous step of the reference (train_step.c). */
int      dr_ref_step(trainer *t, const dr_dist_batch *b, uint64_t step, dr_step_report *rep, dr_err *err);
/* --dtype_policy=mixed_*: what the reference's mixed step runs (DR_EUNSUPPORTED
 * naming the rest), and the step (ref/mixed_step.c). */
int      dr_ref_mixed_supports(const dr_run_plan *p, dr_err *err);
int      dr_ref_mixed_step(trainer *t, const dr_dist_batch *b, uint64_t step, dr_step_report *rep, dr_err *err);
/* The models beyond Dense under the mixed step (ref/mixed_graph.c): every
 * replica's share (batches loaded), and BatchNormalization's float32
 * gradients written over the reduced grad; returns whether grad is finite. */
int      dr_ref_mixed_graph_shares(trainer *t, dr_err *err);
bool     dr_ref_mixed_bn_grads(trainer *t, float *grad);
void     dr_ref_mixed_bn_partial(const dr_model_spec *m, const dr_acc *part, float *out);

/* parameter_server training: the coordinator, its seeded asynchronous
 * schedule and the ps tasks (ref/ps.c), as the ref variant's train hook. */
typedef struct ps_run ps_run;
int  dr_ps_open(const dr_run_plan *plan, const dr_dataset *data, ps_run **out, dr_err *err);
int  dr_ps_train(ps_run *r, struct dr_run_log *log, dr_train_totals *out, dr_err *err);
const dr_strategy *dr_ps_strategy(const ps_run *r);
int  dr_ps_variables(ps_run *r, float *params, float *slots);
void dr_ps_summarize(ps_run *r, json_object *o);
void dr_ps_close(ps_run *r);

/* The tpu strategy (ref/tpu_step.c): setup after the strategy is built,
 * the step, and teardown. */
int  dr_tpu_run_init(trainer *t, dr_strategy_options *opt, dr_err *err);
/* The unpartitioned mixed step's collective (ref/mixed_step.c): the torus
 * all-reduce of the replicas' partials acc, for its traffic, and the step's
 * emulated time written to the report's extra (before the loss scale's). */
int  dr_tpu_reduce_timed(trainer *t, dr_acc *const *acc, dr_err *err);
int  dr_tpu_run_open(trainer *t, dr_err *err);
int  dr_tpu_step(trainer *t, dr_err *err);
void dr_tpu_run_close(trainer *t);

json_object *dr_tpu_report(const trainer *t, uint64_t steps);
/* Spatial partitioning of a model beyond Dense (ref/tpu_spatial.c): the
 * plan and the cores' buffers; replica r's tiles from its loaded batch; the
 * step's halo bytes into the metrics line; summary.json's part. */
int  dr_tpu_spatial_open(trainer *t, dr_err *err);
void dr_tpu_spatial_load(trainer *t, uint32_t r);
int  dr_tpu_spatial_extra(trainer *t, char *out, size_t cap);
void dr_tpu_spatial_report(const trainer *t, json_object *o);
void dr_tpu_spatial_close(trainer *t);

#endif
