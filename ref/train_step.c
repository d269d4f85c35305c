/* distref reference — one training step (see docs/SEMANTICS.md).
 *
 * One step, in the order a reader should follow it:
 *   1. the iterator hands out a global batch split over the replicas
 *      (TensorFlow's rule, core/input.c);
 *   2. every replica copies its examples to its device and computes, as
 *      exact accumulators, R * sum(its losses) + D * reg and, per parameter,
 *      R * sum(its gradients) + D * reg' -- its share over the common
 *      denominator D*R, where D is the loss's divisor: G, as the seeds'
 *      compute_average_loss(global_batch_size=G), or the examples in the
 *      step (--loss_reduction; tf_default scales each replica by its own
 *      size instead, core/plan.c's dr_plan_step_scale) (replica_step);
 *   3. the shares are all-reduced (mirrored) or reduced to the variable
 *      device (central_storage), still exact;
 *   4. each holder of the variables rounds once, divides by D*R in the same
 *      rounding, and applies the optimizer (reduce_and_apply, then
 *      dr_trainer_apply).
 */
#include "ref/trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- step 2: one replica's share ---------------------------------------- */

void dr_trainer_scale_share(trainer *t, replica *rp, uint32_t mult, uint32_t coef)
{
    float reg = dr_model_reg_loss(&t->exp.model, rp->params);
    for (size_t p = 0; p < t->P; p++) {
        float g = dr_model_reg_grad(&t->exp.model, rp->params, p);
        if (mult > 1) dr_acc_mul_u32(&rp->grad[p], mult);
        if (g != 0.0f) dr_acc_add_prod(&rp->grad[p], (float)coef, g);
    }
    if (mult > 1) dr_acc_mul_u32(&rp->loss, mult);
    dr_acc_add_prod(&rp->loss, (float)coef, reg);
}

void dr_trainer_compute_share(trainer *t, replica *rp, uint32_t n, uint32_t mult, uint32_t coef)
{
    memset(rp->grad, 0, t->P * sizeof *rp->grad);
    dr_acc_init(&rp->loss);
    rp->correct = 0;
    dr_model_loss_grad(&t->exp.model, t->ops, rp->params, rp->x, rp->labels, rp->targets, n,
                       &rp->work, &rp->loss, rp->grad, &rp->correct);
    dr_trainer_scale_share(t, rp, mult, coef);
}

/* --clip_semantics=tensorflow: this replica's gradient, RN(share / den),
 * clipped before the all-reduce (Keras 3 under MirroredStrategy) and put
 * back over the same denominator, exactly (den is a float: the plan keeps
 * it <= 2^24). t->grad is scratch until apply. */
static void clip_share_over(trainer *t, dr_acc *share, uint32_t den)
{
    dr_acc_round_array(share, t->P, den, t->grad);
    dr_optimizer_clip(&t->exp.optimizer, &t->exp.model, t->grad, t->P);
    for (size_t p = 0; p < t->P; p++) {
        dr_acc_init(&share[p]);
        dr_acc_add_prod(&share[p], t->grad[p], (float)den);
    }
}

/* A step's share; under --gradient_accumulation_steps not a micro-step's
 * (clip.at_update: dr_trainer_accumulate clips the replica's k of them). */
void dr_trainer_clip_share(trainer *t, replica *rp)
{
    if (!t->exp.optimizer.clip.at_update) clip_share_over(t, rp->grad, t->den);
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
    dr_trainer_compute_share(t, rp, n, t->mult[r], t->coef);
    if (t->exp.optimizer.clip.per_replica) dr_trainer_clip_share(t, rp);
    dr_trainer_count_layer_copies(t, rp, n);
    if (t->cfg->placement_log) dr_trainer_log_replica_ops(t, r);
    return DR_OK;
}

/* ---- steps 3 and 4 ------------------------------------------------------ */

void dr_trainer_apply(trainer *t, const dr_acc *total, float *params, float *slots)
{
    const dr_optimizer *o = &t->exp.optimizer;
    uint32_t k = t->cfg->gradient_accumulation_steps > 1 ? t->cfg->gradient_accumulation_steps : 1;
    dr_acc_round_array(total, t->P, t->den, t->grad);
    if (!o->clip.per_replica) dr_optimizer_clip(o, &t->exp.model, t->grad, t->P);
    /* Keras: the schedule reads the step (micro-batch) counter, Adam the updates' */
    dr_optimizer_apply_lr(o, dr_lr_at(&o->schedule, o->lr, t->step), t->step / k, params, t->grad, slots, t->P);
}

int dr_trainer_reduce_and_apply(trainer *t, dr_err *err)
{
    uint32_t R = t->strat.num_replicas;
    dr_acc *acc[DR_MAX_DEVICES];
    int rc;
    if (t->cfg->placement_log) dr_trainer_log_update_ops(t);
    for (uint32_t r = 0; r < R; r++) acc[r] = t->rep[r].grad;
    if (t->var) {   /* central_storage: reduce to the variable device, update there */
        memset(t->central, 0, t->P * sizeof *t->central);
        rc = dr_reduce_to_device(&t->strat, acc, t->P, t->strat.variable_device, t->central, err);
        if (rc) return rc;
        dr_trainer_apply(t, t->central, t->var, t->var_slots);
        return DR_OK;
    }
    rc = dr_all_reduce(&t->strat, acc, t->P, t->plan->tensor_len, t->plan->ntensors, err);
    if (rc) return rc;
    for (uint32_t r = 0; r < R; r++)   /* mirrored: every replica updates its own copy */
        dr_trainer_apply(t, t->rep[r].grad, t->rep[r].params, t->rep[r].slots);
    return DR_OK;
}

/* The step's loss: the replicas' shares summed on the host, rounded once
 * over the same denominator; the report for the harness. */
void dr_trainer_end_step(trainer *t)
{
    dr_step_report *rep = t->report;
    dr_acc total;
    uint64_t correct = 0;
    dr_acc_init(&total);
    for (uint32_t r = 0; r < t->strat.num_replicas; r++) {
        dr_acc_merge(&total, &t->rep[r].loss);
        correct += t->rep[r].correct;
    }
    rep->loss = dr_acc_round_div(&total, t->den);
    rep->correct = correct;
    rep->count = t->count;
    rep->num_replicas = t->strat.num_replicas;
    rep->ids = t->ids;
    memcpy(rep->off, t->off, (t->strat.num_replicas + 1) * sizeof *t->off);
}

/* ---- step 1 ------------------------------------------------------------- */

/* TensorFlow's split of this global batch under the input's auto-shard
 * policy (common to all strategies; tpu's static shapes split the same
 * way), the common denominator D*R of this step, and the step's number. */
int dr_trainer_begin_step(trainer *t, const dr_dist_batch *b, uint64_t step, dr_step_report *rep, dr_err *err)
{
    uint32_t R = t->strat.num_replicas, sizes[DR_MAX_DEVICES];
    int rc;
    t->batch = b;
    t->report = rep;
    t->count = b->count;
    t->ids = b->ids;
    if (t->sharded) {   /* DATA: legacy ceil(B/N) slices; worker w keeps its own */
        uint32_t W = t->strat.num_workers ? t->strat.num_workers : 1;
        dr_shard_data(b->ids, b->count, W, R / W, t->sharded, t->off);
        t->ids = t->sharded;
        for (uint32_t r = 0; r < R; r++) t->row0[r] = dr_shard_data_row(b->count, W, R / W, r);
    } else {
        memcpy(t->off, b->offset, (R + 1) * sizeof *t->off);
        memcpy(t->row0, t->off, R * sizeof *t->row0);
    }
    if ((uint64_t)t->G * R > (1u << 30))
        return dr_fail(err, DR_EUSAGE, "--global_batch_size %u with %u replicas: G*R must stay below 2^30",
                       t->G, R);
    for (uint32_t r = 0; r < R; r++) sizes[r] = t->off[r + 1] - t->off[r];
    if ((rc = dr_plan_step_scale(t->plan, sizes, R, t->count, t->mult, &t->coef, &t->den, err))) return rc;
    if (t->exp.optimizer.clip.per_replica && t->den > (1u << 24))
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: --clip_semantics=tensorflow with a step denominator "
                       "of %u (above 2^24: a replica's clipped share is not exact over it)", t->den);
    t->step = step;
    return DR_OK;
}

/* --gradient_accumulation_steps=k: each step's shares (over the step's
 * denominator D*R, regularization included: the weights do not move between
 * updates) are added exactly to each replica's accumulators; every k-th step
 * reduces them and applies the total over k*D*R, rounded once: the bits of
 * one step of all k batches at once, for every k and R. reduce is the
 * strategy's reduction and apply (the mirrored family's, or tpu's rings). */
int dr_trainer_accumulate(trainer *t, int (*reduce)(trainer *t, dr_err *err), dr_err *err)
{
    uint32_t R = t->strat.num_replicas, k = t->cfg->gradient_accumulation_steps, den = t->den;
    int rc = DR_OK;
    for (uint32_t r = 0; r < R; r++)
        for (size_t p = 0; p < t->P; p++) dr_acc_merge(&t->accum[r][p], &t->rep[r].grad[p]);
    if (t->step % k) return DR_OK;
    if ((uint64_t)den * k > (1u << 30))
        return dr_fail(err, DR_EUSAGE, "--gradient_accumulation_steps=%u: k*G*R = %llu must stay below 2^30", k,
                       (unsigned long long)den * k);
    for (uint32_t r = 0; r < R; r++) { dr_acc *g = t->rep[r].grad; t->rep[r].grad = t->accum[r]; t->accum[r] = g; }
    t->den = den * k;
    /* --clip_semantics=tensorflow: each replica clips its accumulated
     * gradient, RN(sum of its k shares / (k*D*R)) -- the mean of its own k
     * micro-steps, as Keras 3's (g + acc) / k then clip (measured:
     * scripts/tf_accum_clip.py) -- before the reduction */
    if (t->exp.optimizer.clip.at_update && t->den > (1u << 24))
        rc = dr_fail(err, DR_EUNSUPPORTED, "not supported: --clip_semantics=tensorflow with "
                     "--gradient_accumulation_steps=%u: the update's denominator k*D*R = %u is above 2^24 (a "
                     "replica's clipped share is not exact over it)", k, t->den);
    for (uint32_t r = 0; rc == DR_OK && t->exp.optimizer.clip.at_update && r < R; r++)
        clip_share_over(t, t->rep[r].grad, t->den);
    if (rc == DR_OK) rc = reduce(t, err);
    t->den = den;
    for (uint32_t r = 0; r < R; r++) {
        dr_acc *g = t->rep[r].grad; t->rep[r].grad = t->accum[r]; t->accum[r] = g;
        memset(t->accum[r], 0, t->P * sizeof(dr_acc));
    }
    return rc;
}

int dr_trainer_update(trainer *t, dr_err *err)
{
    return t->cfg->gradient_accumulation_steps > 1 ? dr_trainer_accumulate(t, dr_trainer_reduce_and_apply, err)
                                                   : dr_trainer_reduce_and_apply(t, err);
}

int dr_ref_step(trainer *t, const dr_dist_batch *b, uint64_t step, dr_step_report *rep, dr_err *err)
{
    int rc;
    if (t->cfg->mixed.compute != DR_DTYPE_F32) return dr_ref_mixed_step(t, b, step, rep, err);
    if ((rc = dr_trainer_begin_step(t, b, step, rep, err))) return rc;
    if (t->tpu.on) return dr_tpu_step(t, err);
    if (!dr_model_is_dense(&t->exp.model)) return dr_graph_step(t, err);   /* models beyond Dense: ref/graph_step.c */
    if ((rc = dr_strategy_run(&t->strat, t->count, replica_step, t, err)) ||
        (rc = dr_trainer_update(t, err)))
        return rc;
    dr_trainer_end_step(t);
    return DR_OK;
}
