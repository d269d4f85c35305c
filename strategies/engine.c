/* distref engine — one training step of the OpenMP variant.
 *
 * The same step as ref/train.c (see docs/SEMANTICS.md), written for speed:
 * the split is the engine's own (strategies/split.c), replicas compute
 * concurrently on threads with the backend's kernels, the all-reduce runs
 * on threads over replica buffers, and every mirrored replica applies its
 * update concurrently. The planted faults are compiled in here too, off by
 * default, so that the conformance suites can show they catch them.
 */
#include "distref/engine.h"
#include "ref/trainer.h"

#include <stdlib.h>
#include <string.h>

/* ---- the split and its faults (a replica's share, the divisor and the
 * step's bookkeeping are the harness's: ref/train.c) ------------------------ */

static void split(trainer *t)
{
    uint32_t R = t->strat.num_replicas;
    dr_engine_split(t->batch.count, t->G, R, t->off);
    t->ids = t->batch.ids;
    t->count = t->batch.count;
    if (t->cfg->fault == DR_FAULT_WRONG_SPLIT && t->count % R) {
        uint32_t nominal[DR_MAX_DEVICES];                 /* the extras to the last replicas */
        for (uint32_t r = 0; r < R; r++) nominal[r] = t->off[R - r] - t->off[R - r - 1];
        for (uint32_t r = 0; r < R; r++) t->off[r + 1] = t->off[r] + nominal[r];
    }
    dr_trainer_drop_short(t);
}

/* Input and (central_storage) variables reach the replicas' devices first,
 * one after another: the byte counters are not shared between threads. */
static void stage(trainer *t)
{
    for (uint32_t r = 0; r < t->strat.num_replicas; r++) {
        replica *rp = &t->rep[r];
        dr_trainer_load_batch(t, rp, t->ids + t->off[r], t->off[r + 1] - t->off[r]);
        if (t->var)
            dr_device_copy(rp->dev, rp->params, &t->strat.device[t->strat.variable_device], t->var,
                           t->P * sizeof(float));
    }
}

static void compute(trainer *t, uint32_t r)
{
    replica *rp = &t->rep[r];
    dr_trainer_compute_share(t, rp, t->off[r + 1] - t->off[r], t->count);
}

/* ---- reduce and apply ---------------------------------------------------- */

static void apply(trainer *t, const dr_acc *total, float *params, float *slots, float *grad)
{
    dr_acc_round_array(total, t->P, dr_trainer_divisor(t), grad);
    dr_optimizer_apply(&t->exp.optimizer, t->step, params, grad, slots, t->P);
}

static int reduce_and_apply(trainer *t, dr_err *err)
{
    uint32_t R = t->strat.num_replicas;
    dr_acc *acc[DR_MAX_DEVICES];
    int rc;
    for (uint32_t r = 0; r < R; r++) acc[r] = t->rep[r].grad;
    if (t->var) {
        memset(t->central, 0, t->P * sizeof *t->central);
        rc = dr_openmp_reduce_to(&t->strat, acc, t->P, t->strat.variable_device, t->central);
        if (rc == DR_OK) apply(t, t->central, t->var, t->var_slots, t->grad);
        return rc;
    }
    rc = dr_openmp_all_reduce(&t->strat, acc, t->P, t->tensor_len, t->ntensors, err);
    if (rc) return rc;
    /* Every replica holds the same total, so it is rounded once, in parallel,
     * and each replica applies the same floats to its own variables. */
    {
        uint32_t d = dr_trainer_divisor(t);
        const dr_acc *total = t->rep[0].grad;
        float *g = t->grad;
        size_t P = t->P;
        #pragma omp parallel for schedule(static)
        for (size_t p = 0; p < P; p++) g[p] = dr_acc_round_div(&total[p], d);
    }
    #pragma omp parallel for schedule(static) if (R > 1)
    for (uint32_t r = 0; r < R; r++)
        dr_optimizer_apply(&t->exp.optimizer, t->step, t->rep[r].params, t->grad, t->rep[r].slots, t->P);
    return DR_OK;
}

int dr_engine_step(trainer *t, dr_err *err)
{
    uint32_t R = t->strat.num_replicas;
    int rc;
    split(t);
    if ((rc = dr_trainer_begin_step(t, err))) return rc;
    stage(t);
    #pragma omp parallel for schedule(dynamic) if (R > 1)
    for (uint32_t r = 0; r < R; r++) compute(t, r);
    if (t->placed) dr_trainer_count_layer_copies(t, &t->rep[0], t->off[1]);
    if ((rc = reduce_and_apply(t, err))) return rc;
    return dr_trainer_end_step(t, err);
}
