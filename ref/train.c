/* distref reference — the training loop (see train.h and docs/SEMANTICS.md).
 *
 * One step, in the order a reader should follow it:
 *   1. the iterator hands out a global batch split over the replicas
 *      (TensorFlow's rule, common/input.c);
 *   2. every replica copies its examples to its device and computes, as
 *      exact accumulators, R * sum(its losses) + G * reg and, per parameter,
 *      R * sum(its gradients) + G * reg' -- its share over the common
 *      denominator G*R (replica_step);
 *   3. the shares are all-reduced (mirrored) or reduced to the variable
 *      device (central_storage), still exact;
 *   4. each holder of the variables rounds once, divides by G*R in the same
 *      rounding, and applies the optimizer (apply_update).
 */
#include "ref/trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- step 2: one replica's share ---------------------------------------- */

void dr_trainer_scale_share(trainer *t, replica *rp, uint32_t G)
{
    uint32_t R = t->strat.num_replicas;
    float reg = dr_model_reg_loss(&t->exp.model, rp->params);
    for (size_t p = 0; p < t->P; p++) {
        float g = dr_model_reg_grad(&t->exp.model, rp->params, p);
        if (R > 1) dr_acc_mul_u32(&rp->grad[p], R);
        if (t->cfg->fault == DR_FAULT_REG_NOT_SCALED) g = g * (float)R;
        if (t->cfg->fault == DR_FAULT_REG_SCALED_TWICE) g = g / (float)R;
        if (g != 0.0f) dr_acc_add_prod(&rp->grad[p], (float)G, g);
        if (t->cfg->fault == DR_FAULT_ROUND_PARTIAL) {
            float v = dr_acc_round_div(&rp->grad[p], G * R);   /* the bug: an early rounding */
            dr_acc_init(&rp->grad[p]);
            dr_acc_add_prod(&rp->grad[p], v, (float)(G * R));
        }
    }
    if (R > 1) dr_acc_mul_u32(&rp->loss, R);
    if (t->cfg->fault == DR_FAULT_REG_NOT_SCALED) reg = reg * (float)R;
    if (t->cfg->fault == DR_FAULT_REG_SCALED_TWICE) reg = reg / (float)R;
    dr_acc_add_prod(&rp->loss, (float)G, reg);
}

void dr_trainer_compute_share(trainer *t, replica *rp, uint32_t n, uint32_t G)
{
    memset(rp->grad, 0, t->P * sizeof *rp->grad);
    dr_acc_init(&rp->loss);
    rp->correct = 0;
    dr_model_loss_grad(&t->exp.model, t->ops, rp->params, rp->x, rp->labels, rp->targets, n,
                       &rp->work, &rp->loss, rp->grad, &rp->correct);
    dr_trainer_scale_share(t, rp, G);
}

static int replica_step(const dr_replica_ctx *ctx, void *arg, dr_err *err)
{
    trainer *t = arg;
    replica *rp = &t->rep[ctx->replica_id_in_sync_group];
    uint32_t r = ctx->replica_id_in_sync_group, n = t->off[r + 1] - t->off[r];
    const uint32_t *ids = t->ids + t->off[r];
    (void)err;
    dr_trainer_load_batch(t, rp, ids, n);
    if (t->var)
        dr_device_copy(rp->dev, rp->params, &t->strat.device[t->strat.variable_device], t->var, t->P * sizeof(float));
    dr_trainer_compute_share(t, rp, n, ctx->global_batch_count);
    dr_trainer_count_layer_copies(t, rp, n);
    return DR_OK;
}

/* ---- steps 3 and 4 ------------------------------------------------------ */

uint32_t dr_trainer_divisor(const trainer *t)
{
    uint32_t d = t->den;
    if (t->cfg->fault == DR_FAULT_MEAN_NOT_SUM) d *= t->strat.num_replicas;
    return d;
}

void dr_trainer_apply(trainer *t, const dr_acc *total, float *params, float *slots)
{
    dr_acc_round_array(total, t->P, dr_trainer_divisor(t), t->grad);
    dr_optimizer_apply(&t->exp.optimizer, t->step, params, t->grad, slots, t->P);
}

static int reduce_and_apply(trainer *t, dr_err *err)
{
    uint32_t R = t->strat.num_replicas;
    dr_acc *acc[DR_MAX_DEVICES];
    int rc;
    for (uint32_t r = 0; r < R; r++) acc[r] = t->rep[r].grad;
    if (t->var) {   /* central_storage: reduce to the variable device, update there */
        memset(t->central, 0, t->P * sizeof *t->central);
        rc = dr_reduce_to_device(&t->strat, acc, t->P, t->strat.variable_device, t->central, err);
        if (rc) return rc;
        dr_trainer_apply(t, t->central, t->var, t->var_slots);
        return DR_OK;
    }
    rc = dr_all_reduce(&t->strat, acc, t->P, t->tensor_len, t->ntensors, err);
    if (rc) return rc;
    for (uint32_t r = 0; r < R; r++)   /* mirrored: every replica updates its own copy */
        dr_trainer_apply(t, t->rep[r].grad, t->rep[r].params, t->rep[r].slots);
    return DR_OK;
}

/* The step's loss: the replicas' shares summed on the host, rounded once;
 * then the epoch's counters and the metrics line. */
int dr_trainer_end_step(trainer *t, dr_err *err)
{
    dr_acc total;
    uint64_t correct = 0;
    dr_acc_init(&total);
    for (uint32_t r = 0; r < t->strat.num_replicas; r++) {
        dr_acc_merge(&total, &t->rep[r].loss);
        correct += t->rep[r].correct;
    }
    t->last_loss = dr_acc_round_div(&total, dr_trainer_divisor(t));
    t->epoch_correct += correct;
    t->epoch_examples += t->count;
    return dr_trainer_log_step(t, t->last_loss, err);
}

/* ---- step 1 and the loop ------------------------------------------------ */

/* Offsets of the replicas' examples; the planted split faults bend them. */
void dr_trainer_split(trainer *t)
{
    uint32_t R = t->strat.num_replicas;
    t->ids = t->batch.ids;
    if (t->shard_data) {   /* multi_worker_mirrored: every worker keeps its DATA shard */
        dr_shard_data(t->batch.ids, t->batch.count, t->strat.num_workers, R / t->strat.num_workers,
                      t->sharded, t->off);
        t->ids = t->sharded;
    } else {
        memcpy(t->off, t->batch.offset, (R + 1) * sizeof *t->off);
    }
    if (t->cfg->fault == DR_FAULT_WRONG_SPLIT && t->strat.num_workers == 1 && t->batch.count % R) {
        /* the extras to the last replicas instead of the first */
        uint32_t pos = 0;
        for (uint32_t r = 0; r < R; r++) {
            uint32_t want = t->batch.offset[R - r] - t->batch.offset[R - r - 1];
            t->off[r] = pos;
            pos += want;
        }
        t->off[R] = pos;
    }
    dr_trainer_drop_short(t);
}

/* The planted fault: one example dropped from a final short batch. */
void dr_trainer_drop_short(trainer *t)
{
    uint32_t R = t->strat.num_replicas, last = R;
    if (t->cfg->fault != DR_FAULT_DROP_SHORT || t->count >= t->G) return;
    while (last > 0 && t->off[last] == t->off[last - 1]) last--;
    for (uint32_t r = last; r <= R; r++) if (r > 0) t->off[r]--;
    t->count--;
}

/* After the split: the common denominator G*R of this step. */
int dr_trainer_begin_step(trainer *t, dr_err *err)
{
    if ((uint64_t)t->count * t->strat.num_replicas > (1u << 30))
        return dr_fail(err, DR_EUSAGE, "--global_batch_size %u with %u replicas: G*R must stay below 2^30",
                       t->G, t->strat.num_replicas);
    t->den = t->count * t->strat.num_replicas;
    t->step++;
    return DR_OK;
}

static int one_step(trainer *t, dr_err *err)
{
    int rc;
    t->count = t->batch.count;
    dr_trainer_split(t);
    if ((rc = dr_trainer_begin_step(t, err)) ||
        (rc = dr_strategy_run(&t->strat, t->count, replica_step, t, err)) ||
        (rc = reduce_and_apply(t, err)))
        return rc;
    return dr_trainer_end_step(t, err);
}

static bool more_steps(const trainer *t)
{
    if (t->cfg->train_steps) return t->step < t->cfg->train_steps;
    return t->it.epoch < t->epochs;
}

int dr_run_train(const dr_run_config *cfg, dr_run_result *res, dr_err *err)
{
    trainer t;
    int rc;
    if (cfg->strategy.kind == DR_STRATEGY_PARAMETER_SERVER) return dr_ps_run_train(cfg, res, err);
    if ((rc = dr_trainer_open(&t, cfg, err))) return rc;
    while (rc == DR_OK && more_steps(&t)) {
        if (!dr_dist_iter_next(&t.it, &t.batch)) {
            dr_dist_iter_next_epoch(&t.it);
            if (more_steps(&t)) t.epoch_correct = t.epoch_examples = 0;   /* keep the last epoch's */
            continue;
        }
        rc = t.tpu.on ? dr_tpu_step(&t, err) : t.engine ? dr_engine_step(&t, err) : one_step(&t, err);
        if (rc == DR_OK && cfg->checkpoint_every && t.step % cfg->checkpoint_every == 0)
            rc = dr_trainer_save(&t, err);
        dr_trainer_progress(&t);
    }
    if (rc == DR_OK) rc = dr_trainer_save(&t, err);
    if (rc == DR_OK) rc = dr_trainer_finish(&t, res, err);
    dr_trainer_close(&t);
    return rc;
}
