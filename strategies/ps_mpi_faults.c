/* distref engine — parameter_server over MPI ranks: the chief's side of
 * failures (docs/PARAMETER_SERVER.md "Failures", docs/MPI.md "When a rank
 * dies"):
 *   injected, --schedule=seeded: --fail_worker=W:K (worker W's rank loses
 *     closure K and rejoins with its datasets re-created) and --fail_ps=P:K
 *     (the run stops at update K), steps of the reference's seeded plan, so
 *     the bits are the reference's;
 *   real: a worker rank that dies under --schedule=free and `mpirun
 *     --enable-recovery` loses its closure, which re-runs; otherwise the run
 *     ends naming the rank, and every other rank is told.
 */
#include "strategies/ps_mpi_internal.h"
#include "strategies/seams.h"

#include <stdio.h>
#include <string.h>

/* worker 0's iterator after one more batch: the batch a lost worker 0 took
 * with the closure it died running (the reference's per-worker dataset
 * gave it; the checkpoint's data position is worker 0's, ref/ps.c) */
void psm_skip_batch(const psm_chief *c, psm_result *k)
{
    uint32_t W = c->ps->W, N = c->s->data->n, G = c->s->plan->G;
    uint32_t n = N / W + (N % W ? 1 : 0);
    if (c->s->cfg->drop_remainder) n -= n % G;
    if (k->pass_size == 0) {   /* it never landed anything: the first batch of epoch 0 */
        k->epoch = 0;
        k->position = 0;
        k->pass_size = n;
    } else if (k->position == k->pass_size) {
        k->epoch++;
        k->position = 0;
    }
    k->position += k->pass_size - k->position < G ? k->pass_size - k->position : G;
}


/* --schedule=free under `mpirun --enable-recovery`: worker w's rank took no
 * dispatch or sent no result within the deadline, so it is lost with the
 * closure it ran: the closure goes back to the front of the queue (its next
 * dispatch, to a live worker, is the re-run; ClusterCoordinator re-runs a
 * closure whose worker failed the same way), the event is recorded for the
 * reference's replay, and w is never dispatched to again. A note on stderr
 * names the rank and the step; err (the deadline's message) is cleared. */
int psm_lose_worker(psm_chief *c, uint32_t w, dr_err *err)
{
    engine_ps *ps = c->ps;
    dr_ps_event ev;
    MPI_Request req;
    double t0 = dr_now();
    int done = 0, rc, alive = 0;
    if (ps->req[w] != MPI_REQUEST_NULL) {   /* the result never comes: withdraw the receive */
        MPI_Cancel(&ps->req[w]);
        while (!done && dr_now() - t0 < 1.0)
            if (MPI_Test(&ps->req[w], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        if (!done) MPI_Request_free(&ps->req[w]);
        ps->req[w] = MPI_REQUEST_NULL;
    }
    if (!dr_ps_schedule_take(&c->sched, DR_PS_FAIL, w, &ev))
        return dr_fail(err, DR_ESTATE, "parameter_server over MPI: worker %u lost but not running a closure", w);
    DR_SEAM_PS_DEAD_CLOSURE(&c->sched);
    ps->worker_failures++;
    ps->dead_workers++;
    ps->rerun_of[w] = ev.closure;
    ps->lost_at[w] = ev.version + 1;
    if (w == 0) psm_skip_batch(c, &c->last0);
    if (ps->record && (rc = psm_record(ps, &ev, err))) return rc;
    fprintf(stderr, "distref: note: MPI rank %u (/job:worker/replica:0/task:%u) died or hangs: no result for step "
            "function %llu within %.1f s at step %llu; it re-runs on another worker (%s)\n", 1 + w, w,
            (unsigned long long)ev.closure, ps->timeout, (unsigned long long)ev.version + 1, err->msg);
    fflush(stderr);
    /* a worker that only hangs must not wait forever for orders: it is told (the send is not waited for) */
    if (MPI_Isend(err->msg, (int)strlen(err->msg) + 1, MPI_CHAR, (int)(1 + w), PSM_ABORT, ps->comm, &req) ==
        MPI_SUCCESS)
        MPI_Request_free(&req);
    for (uint32_t v = 0; v < ps->W; v++) alive += !c->sched.lost[v];
    if (!alive)
        return dr_fail(err, DR_EFAULT, "parameter_server: step %llu: every worker rank died (the last, MPI rank %u, "
                       "with step function %llu)", (unsigned long long)ev.version + 1, 1 + w,
                       (unsigned long long)ev.closure);
    err->code = DR_OK;
    err->msg[0] = '\0';
    return DR_OK;
}


/* The run ends on a dead worker rank (its own deadline, or a ps task's
 * report): say why its closure was not re-run. */
void psm_why_no_rerun(const psm_chief *c, dr_err *err)
{
    const char *at = strstr(err->msg, "rank ");
    unsigned r = 0;
    size_t n = strlen(err->msg);
    bool worker = false;
    for (; at && !worker; at = strstr(at + 5, "rank ")) {   /* "rank R died or hangs", R a worker's rank */
        int end = 0;
        worker = sscanf(at, "rank %u died%n", &r, &end) == 1 && end > 0 && r >= 1 && r <= c->ps->W;
    }
    if (!worker || c->ps->rerun) return;
    snprintf(err->msg + n, sizeof err->msg - n, "%s", c->ps->record
             ? " (a dead worker's closure re-runs on another worker only under `mpirun --enable-recovery`, where "
               "the survivors keep running)"
             : " (--schedule=seeded does not re-run a dead worker's closure: the seeded schedule is the reference's, "
               "whose failed worker (--fail_worker) rejoins, and a dead rank cannot; --schedule=free under `mpirun "
               "--enable-recovery` re-runs it)");
}

/* --fail_ps=P:K: ps task P is unavailable when update K would land; the run
 * stops as the reference's does (the same words), the last checkpoint intact. */
int psm_ps_failure(const psm_chief *c, const dr_ps_event *ev, dr_err *err)
{
    const engine_ps *ps = c->ps;
    dr_fail(err, DR_EFAULT, "parameter server /job:ps/replica:0/task:%u failed at step %llu (UnavailableError)",
            ps->fail_ps, (unsigned long long)ev->version);
    return dr_ps_failure_stopped(err, c->s->cfg->model_dir, ps->have_ckpt, ps->saved);
}


/* --fail_worker=W:K, the reference's injected failure (docs/PARAMETER_SERVER.md):
 * worker W ran closure K, and its landing is replaced by the failure. Its
 * result is taken (the rank is alive) and dropped; the closure goes back to
 * the front of the queue (the schedule did that), so its next dispatch is the
 * re-run; worker 0's iterator still moved (the checkpoint's data position). */
int psm_fail_closure(psm_chief *c, const dr_ps_event *ev, dr_err *err)
{
    engine_ps *ps = c->ps;
    uint32_t w = ev->worker;
    psm_result h;
    int rc = psm_wait_for(c, &ps->req[w], 1 + w, "no result from worker", ev->version + 1, err);
    if (rc) return rc;
    memcpy(&h, ps->res[w], sizeof h);
    if (h.closure != ev->closure)
        return dr_fail(err, DR_EFORMAT, "worker %u sent the result of closure %llu, expected %llu", w,
                       (unsigned long long)h.closure, (unsigned long long)ev->closure);
    ps->worker_failures++;
    ps->rerun_of[w] = ev->closure;
    if (w == 0) c->last0 = h;
    return DR_OK;
}

/* The failed worker rejoins: its datasets are re-created (PSM_SKIP with
 * rebuild), as TF re-creates a recovered worker's resources. */
int psm_recover_worker(psm_chief *c, const dr_ps_event *ev, dr_err *err)
{
    uint64_t hdr[2] = { 0, 1 };
    DR_SEAM_PS_RECOVER_REBUILD(hdr[1]);
    c->ps->recoveries++;
    return psm_send_to(c, hdr, 2, MPI_UINT64_T, 1 + ev->worker, PSM_SKIP, ev->version + 1, "recovering", err);
}


/* A failure (a rank died or hangs): every other rank is told, with the
 * reason, so that none waits forever (under `mpirun --enable-recovery`
 * MPI_Abort alone leaves them blocked); the sends are not waited for
 * longer than a second (one goes to the dead rank). */
void psm_abort_all(psm_chief *c, const dr_err *err)
{
    engine_ps *ps = c->ps;
    uint32_t n = ps->W + ps->P;
    MPI_Request req[2 * DR_PS_MAX_WORKERS + 64];
    double t0 = dr_now();
    int all = 0;
    if (n > sizeof req / sizeof req[0]) n = sizeof req / sizeof req[0];
    for (uint32_t r = 0; r < n; r++)
        if (MPI_Isend(err->msg, (int)strlen(err->msg) + 1, MPI_CHAR, (int)(r + 1), PSM_ABORT, ps->comm, &req[r]))
            req[r] = MPI_REQUEST_NULL;
    while (!all && dr_now() - t0 < 1.0)
        if (MPI_Testall((int)n, req, &all, MPI_STATUSES_IGNORE) != MPI_SUCCESS) break;
}
