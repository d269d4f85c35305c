/* distref reference — a training step of a model beyond Dense (ref/graph.h):
 * every replica's batch is loaded, the layers run in lock step over the
 * replicas (synchronized BatchNormalization needs the global batch's sums
 * mid-forward), each replica's exact sums become its share, and the
 * BatchNormalization state after the step is written to every holder of
 * the variables (the optimizer leaves it as it is: its gradient is zero).
 *
 * --gradient_accumulation_steps=k: each micro-step is such a step over its
 * own micro-batch (its BatchNormalization statistics, its moving-statistics
 * update, its dropout masks keyed by its own step number: Keras 3's rule,
 * measured by scripts/tf_graph_accum.py, docs/MODELS.md), and only its
 * shares wait in the accumulators for the k-th (dr_trainer_update). */
#include "ref/trainer.h"
#include "ref/graph.h"
#include "ref/halo.h"

#include <stdlib.h>
#include <string.h>

static int load_replica(const dr_replica_ctx *ctx, void *arg, dr_err *err)
{
    trainer *t = arg;
    uint32_t r = ctx->replica_id_in_sync_group;
    replica *rp = &t->rep[r];
    (void)err;
    dr_trainer_load_batch(t, rp, t->ids + t->off[r], t->off[r + 1] - t->off[r]);
    if (t->var)
        dr_device_copy(rp->dev, rp->params, &t->strat.device[t->strat.variable_device], t->var, t->P * sizeof(float));
    return DR_OK;
}

int dr_graph_shares(trainer *t, dr_err *err)
{
    const dr_model_spec *m = &t->exp.model;
    uint32_t R = t->strat.num_replicas, C = t->tpu.halo ? t->tpu.tiles : 1;   /* C: cores per replica */
    size_t T = dr_model_num_trainable(m), S = t->P - T;
    dr_graph_replica g[DR_MAX_DEVICES];
    float *state = S ? malloc(S * sizeof *state) : NULL;
    /* the statistics' bytes counted as the engine's comm moves them; the tpu
     * step's are its torus' (ref/tpu_step.c) */
    dr_graph_ctx ctx = { m, t->ops, true, !t->plan->bn_replica, t->cfg->seed, t->step, state, t->tpu.halo,
                         t->tpu.on ? NULL : &t->strat, t->plan->dropout_masks, DR_DTYPE_F32, 0.0f, 0 };
    if (S && !state) return dr_fail(err, DR_ENOMEM, "out of host memory for the batch-norm state");
    if (S) memcpy(state, dr_trainer_params(t) + T, S * sizeof *state);
    if (S && t->plan->bn_replica && R > 1 && !t->tpu.on)   /* the engine hands replica 0's state to the others */
        dr_count_ring(&t->strat, S);
    for (uint32_t r = 0; r < R; r++) {
        replica *rp = &t->rep[r];
        memset(rp->grad, 0, t->P * sizeof *rp->grad);
        dr_acc_init(&rp->loss);
        rp->correct = 0;
        for (uint32_t c = 0; c < C; c++) {   /* spatial partitioning: each core of the replica on its tile */
            uint32_t e = r * C + c;
            g[e] = (dr_graph_replica){ rp->params, C > 1 ? t->tpu.halo->x[e] : rp->x, rp->labels, rp->targets,
                                       t->ids + t->off[r], t->off[r + 1] - t->off[r], C > 1 ? &t->tpu.core_work[e] : &rp->work,
                                       &rp->loss, rp->grad, &rp->correct, c, t->row0[r] };
        }
    }
    dr_graph_loss_grad(&ctx, g, R * C);
    for (uint32_t r = 0; r < R; r++) {
        dr_trainer_count_layer_copies(t, &t->rep[r], t->off[r + 1] - t->off[r]);   /* --layer_devices */
        if (t->cfg->placement_log) dr_trainer_log_replica_ops(t, r);
        dr_trainer_scale_share(t, &t->rep[r], t->mult[r], t->coef);
        if (t->exp.optimizer.clip.per_replica) dr_trainer_clip_share(t, &t->rep[r]);
    }
    if (S) {
        for (uint32_t r = 0; r < R; r++) memcpy(t->rep[r].params + T, state, S * sizeof *state);
        if (t->var) memcpy(t->var + T, state, S * sizeof *state);
    }
    free(state);
    return DR_OK;
}

int dr_graph_step(trainer *t, dr_err *err)
{
    int rc;
    if ((rc = dr_strategy_run(&t->strat, t->count, load_replica, t, err)) ||
        (rc = dr_graph_shares(t, err)) ||
        (rc = dr_trainer_update(t, err)))
        return rc;
    dr_trainer_end_step(t);
    return DR_OK;
}
