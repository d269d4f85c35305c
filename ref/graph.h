/* distref reference — models beyond Dense, over a step's replicas (internal
 * to ref/). The layers run in lock step across the replicas so that a
 * synchronized BatchNormalization can take its statistics over the global
 * batch: one exact cross-replica sum (docs/MODELS.md). */
#ifndef DISTREF_REF_GRAPH_H
#define DISTREF_REF_GRAPH_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_ENGINE) || defined(DR_LAYER_HARNESS)
#error "ref/graph.h is internal to ref/ (docs/ARCHITECTURE.md)"
#endif

#include "ref/layers.h"

/* One replica's part of a step. */
typedef struct dr_graph_replica {
    const float    *params;
    const float    *x;
    const uint8_t  *labels;
    const float    *targets;
    const uint32_t *ids;       /* global example ids (Dropout's key) */
    uint32_t        n;
    dr_work        *w;
    dr_acc         *loss, *grad;   /* exact sums, added to */
    uint64_t       *correct;
    uint32_t        core;      /* spatial partitioning: the replica's logical core (0: the whole
                                * maps from the halo's gather on, the loss) */
    uint32_t        row0;      /* the global batch's row of the replica's row 0 (--dropout_masks) */
} dr_graph_replica;

struct dr_halo;

typedef struct dr_graph_ctx {
    const dr_model_spec *m;
    const dr_model_ops  *ops;
    bool     training;
    bool     sync_bn;          /* BatchNormalization over the global batch */
    uint64_t seed, step;
    float   *new_state;        /* training: the state after the step (S floats, m's state layout) */
    struct dr_halo *halo;      /* spatial partitioning (ref/halo.h): the entries are replica x
                                * core, core-major within a replica; NULL: one entry a replica */
    dr_strategy *count;        /* sync BN: the statistics' bytes counted on its devices, as the
                                * engine's comm moves them (dr_count_ring); NULL: not counted */
    const dr_dropout_masks *masks;   /* --dropout_masks (rows: rp[r].row0 + r); NULL: the RNG's */
    dr_dtype compute;          /* the mixed step's compute dtype (DR_DTYPE_F32: the float32 step):
                                * every layer's output and input gradient rounded to it, the loss
                                * float32 on the rounded logits (ref/mixed_graph.c) */
    float    loss_scale;       /* mixed: the loss scale inside the loss's delta, with 1 / G */
    uint32_t G;
} dr_graph_ctx;

/* Forward of every replica (with a halo, every core of every replica: R
 * entries), layer by layer. */
void dr_graph_forward(const dr_graph_ctx *g, dr_graph_replica *rp, uint32_t R);
/* Forward, loss and backward: the exact sums of the losses and gradients. */
void dr_graph_loss_grad(const dr_graph_ctx *g, dr_graph_replica *rp, uint32_t R);

#endif
