/* distref engine — parameter_server over MPI ranks with a model beyond
 * Dense (issue 31; docs/PARAMETER_SERVER.md "Models beyond Dense", the
 * reference's rule in ref/ps.c and ref/ps_coordinator.c).
 *
 * A worker rank runs the engine's own graph step (strategies/graph.c) as
 * one_device does: a one-replica, one-worker graph session beside the ps
 * session, sharing its backend and its replica's buffers; its statistics'
 * comm is the in-process one with a single member (the worker's batch is
 * the whole step's). Dropout is keyed by (seed, the closure's index, the
 * global example ids), BatchNormalization's statistics are the worker's
 * batch's. The moving statistics start the step at -0 (the additive
 * identity: -0 * 0.99 + x is exactly x), so after it they hold the
 * increments 0.01 x statistic, which travel in their (zero) gradient slots
 * after the clip. A ps rank takes each increment onto its value as it is at
 * landing (moving * 0.99 + increment), in landing order, then applies the
 * optimizer with a zero gradient there.
 */
#include "strategies/ps_mpi_internal.h"
#include "distref/comm.h"

#include <stdlib.h>
#include <string.h>
#include "strategies/seams.h"

int psm_graph_open(dr_session *s, dr_err *err)
{
    engine_ps *ps = s->ps;
    dr_session *g;
    ps->T = dr_model_num_trainable(&s->plan->exp.model);
    if (dr_model_is_dense(&s->plan->exp.model) || ps->role != PSM_WORKER) return DR_OK;
    if (!(ps->incr = malloc((s->plan->P - ps->T) * sizeof(float) + 4)) || !(g = calloc(1, sizeof *g)))
        return dr_fail(err, DR_ENOMEM, "worker: no memory for the graph step");
    ps->gs = g;
    g->plan = s->plan;
    g->cfg = s->cfg;
    g->data = s->data;
    g->bo = s->bo;
    g->be = s->be;
    g->co = dr_comm_threads();
    g->num = s->num;
    g->esz = s->esz;
    g->strat = s->strat;
    g->R = g->W = g->L = 1;
    g->wlo = 0;
    g->whi = 1;
    g->rows = s->plan->G;
    return engine_graph_open(g, err);
}

void psm_graph_close(dr_session *s)
{
    engine_ps *ps = s->ps;
    if (ps->gs) engine_graph_close(ps->gs);
    free(ps->gs);
    free(ps->incr);
    ps->gs = NULL;
    ps->incr = NULL;
}

/* The variables as read, their moving statistics at -0: the step leaves
 * the increments there (psm_graph_step). */
void psm_graph_zero_moving(const dr_session *s, float *vars)
{
    if (s->ps->gs) DR_SEAM_PS_KEEP_READ(vars + s->ps->T, s->plan->P - s->ps->T);
    for (size_t i = s->ps->T; s->ps->gs && i < s->plan->P; i++) vars[i] = -0.0f;
}

/* One closure's graph step on the n examples ids (already uploaded): the
 * share (sums + D * reg over D) in rb.grad, the loss, the correct count,
 * and the increments downloaded into ps->incr. */
int psm_graph_step(dr_session *s, const uint32_t *ids, uint32_t n, uint64_t closure, uint32_t den, dr_err *err)
{
    engine_ps *ps = s->ps;
    dr_session *g = ps->gs;
    size_t T = ps->T, S = s->plan->P - T;
    int rc;
    g->rb[0] = ps->rb;
    g->ids = ids;
    g->off[0] = 0;
    g->off[1] = n;
    g->row0[0] = 0;
    g->count = n;
    g->den = den;
    g->mult[0] = 1;
    g->coef = den;
    g->step = closure;   /* Dropout's step: the closure's index, as the reference's */
    rc = engine_graph_compute(g, 0, err);
    ps->rb = g->rb[0];   /* the correct count */
    if (rc == DR_OK && S) rc = s->bo->download(s->be, ps->incr, ps->rb.params, T * sizeof(float), S * sizeof(float), err);
    return rc;
}

/* After the clip, which must not see them: the increments into the moving
 * statistics' gradient slots. */
void psm_graph_send_moving(const dr_session *s, float *grad)
{
    const engine_ps *ps = s->ps;
    if (ps->gs && DR_SEAM_PS_SENDS_MOVING) {
        memcpy(grad + ps->T, ps->incr, (s->plan->P - ps->T) * sizeof(float));
        DR_SEAM_PS_SEND_MOVING(grad + ps->T, s->plan->P - ps->T, ENGINE_BN_MOMENTUM);
    }
}

/* A ps rank's landing on a moving statistic's shard (offset at or past T):
 * moving = moving * 0.99 + increment, from its value now (landing order),
 * and a zero gradient for the optimizer. Returns whether it was one. */
bool psm_graph_land_moving(const dr_session *s, const dr_ps_shard *sh, float *params, float *g)
{
    const engine_ps *ps = s->ps;
    if (ps->T >= s->plan->P || sh->offset < ps->T) return false;
    for (size_t k = 0; k < sh->length; k++) {
        params[sh->offset + k] = DR_SEAM_PS_LAND_MOVING(params[sh->offset + k] * ENGINE_BN_MOMENTUM + g[k], g[k]);
        g[k] = 0.0f;
    }
    return true;
}
