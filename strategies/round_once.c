/* distref engine — multi_worker_mirrored's exact gradient all-reduce rounded
 * once by the comm (issue 33 item 3).
 *
 * Over more than one MPI rank with compact exact gradients, the old step
 * all-reduced the accumulators themselves (all_reduce of DR_FORM_CACC: the
 * ring, or MPI_Iallreduce on integer digits) and apply then rounded every
 * element's total / d. The comm's all_reduce_round (distref/comm.h,
 * devices/mpi/comm_mpi_gradx.c) hands back round(total / d) itself: the
 * same bits (dr_cacc_round_div's of the exact total) for a fraction of the
 * bytes and the merging. The apply it replaces is, per element (distref/
 * backend.h, devices/cpu/openmp_apply.c): round(total / d) once, the
 * global clipping on those floats (exact norms), then the optimizer; so
 * this path clips the floats with the backend's clip_f32 (the same clip on
 * the same floats) and runs the optimizer through apply_f32 (the same
 * optimizer code at divisor 1). The L2 term is inside the exact shares,
 * and --clip_semantics=tensorflow's per-replica clip inside share: both
 * before the reduction, as in the old path.
 *
 * Taken only with the default algorithm across ranks (an explicit
 * --all_reduce_alg=ring or nccl still runs that algorithm on the
 * accumulators, and the conformance cells that name one still test it),
 * for host-memory gradients (no staging), without central_storage's
 * reduce_to, the mixed step or --gradient_accumulation_steps, which keep
 * the old path, as do models above 2^25 parameters (all_reduce_round's
 * limit a call). An element one of whose partials overflowed its compact
 * window comes back counted (the same count on every rank): the worker
 * marks the overflow and the engine redoes the step with full
 * accumulators through the old path (step.c), as for a compact total.
 */
#include "strategies/engine_internal.h"

#include <stdlib.h>
#include <string.h>

#include "strategies/seams.h"

bool engine_rounds_once(const dr_session *s, const dr_form *f, bool staged)
{
    return s->round_once && s->strat.spec.kind == DR_STRATEGY_MULTI_WORKER_MIRRORED && f->id == DR_FORM_CACC &&
           !staged && !s->var && !s->mixed && s->k == 1 && s->bo->apply_f32 && s->bo->clip_f32 &&
           s->plan->P <= ((size_t)1 << 25);   /* the most all_reduce_round takes a call (distref/comm.h) */
}

/* an engine_replica_fn: replica r's optimizer on the rounded total g */
static int apply_rounded(dr_session *s, uint32_t r, void *g, dr_err *err)
{
    return s->bo->apply_f32(s->be, g, s->step, s->rb[r].params, s->rb[r].slots, err);
}

int engine_reduce_round(dr_session *s, uint32_t w, void *const *local, uint32_t d, dr_err *err)
{
    const size_t P = s->plan->P;
    const uint32_t lo = w * s->L;
    float *out[DR_MAX_DEVICES];
    size_t over = 0;
    int rc;
    if (!s->rounded && !(s->rounded = malloc((P ? P : 1) * s->L * sizeof(float))))
        return dr_fail(err, DR_ENOMEM, "out of host memory for the rounded gradients (%u x %zu floats)", s->L, P);
    /* the comm hands every local replica its copy; all of them apply the first */
    for (uint32_t k = 0; k < s->L; k++) out[k] = s->rounded + (size_t)k * P;
    if ((rc = s->co->all_reduce_round(s->ep[w - s->wlo], (const dr_cacc *const *)(const void *)local, NULL, P,
                                      DR_SEAM_ROUND_DIVISOR(d), out, &over, err)))
        return rc;
    if (DR_SEAM_TOTAL_FLAGS(over ? DR_CACC_F_OVERFLOW : 0u) & DR_CACC_F_OVERFLOW) {
        s->overflow[w - s->wlo] = true;   /* every rank counted the same: all redo the step */
        return DR_OK;
    }
    s->bo->clip_f32(s->be, out[0]);   /* the global clipping apply does after its rounding (nothing when off) */
    if (w == s->wlo) s->applied.rounded = out[0];
    return engine_each_replica(s, lo, s->L, apply_rounded, out[0], err);
}

bool engine_rounded_applied(const dr_session *s, float *grads)
{
    if (s->applied.rounded) memcpy(grads, s->applied.rounded, s->plan->P * sizeof(float));
    return s->applied.rounded != NULL;
}
