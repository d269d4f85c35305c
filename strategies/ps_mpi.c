/* distref engine — parameter_server over MPI ranks (--variant=mpi): the
 * chief's coordinator, and opening a rank of any role.
 *
 * Rank 0 is the chief and runs the coordinator; ranks 1 .. W the workers;
 * W+1 .. W+P the ps tasks (harness/mpi_cluster.c maps TF_CONFIG onto them).
 * The training program is the reference's (docs/PARAMETER_SERVER.md):
 * N step functions, scheduled --checkpoint_every at a time with a join and
 * a checkpoint after each group.
 *
 * --schedule=seeded: the coordinator walks the seeded schedule (core,
 *   distref/ps_plan.h) event by event: a dispatch sends the closure to its
 *   worker and has every ps task send it its shards; a landing waits for
 *   that worker's result and sends each ps task its shards of the gradient,
 *   applied as optimizer step `version`. The workers compute concurrently
 *   between their dispatch and their landing; the order of the updates is
 *   the reference's, so the bits are.
 * --schedule=free: the coordinator dispatches whenever the staleness rule
 *   allows it (idle workers in index order) and lands the result that
 *   arrived first among those the rule allows to land, and records every
 *   event to model_dir/ps_schedule.jsonl (written atomically with each
 *   checkpoint), which `--variant=ref --replay_schedule` follows.
 */
#include "strategies/ps_mpi_internal.h"
#include "strategies/seams.h"
#include "distref/checkpoint.h"
#include "distref/cluster.h"
#include "distref/fileio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef psm_chief chief;

static int mpi_fail(int mrc, const char *what, dr_err *err)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(mrc, msg, &len);
    return dr_fail(err, DR_EIO, "parameter_server over MPI: %s: %s", what, msg);
}

static size_t held_by(const engine_ps *ps, uint32_t p)
{
    size_t n = 0;
    for (uint32_t i = 0; i < ps->layout.num_shards; i++)
        if (ps->layout.shard[i].ps_task == p) n += ps->layout.shard[i].length;
    return n;
}

/* A worker or ps rank that heard nothing for the deadline asks whether
 * the chief lives (ps_mpi_roles.c, chief_alive): the answer. */
static void answer_pings(const chief *c)
{
    static const char pong = 0;
    for (;;) {
        MPI_Status st;
        MPI_Request req;
        char b;
        int flag = 0;
        if (MPI_Iprobe(MPI_ANY_SOURCE, PSM_PING, c->ps->comm, &flag, &st) != MPI_SUCCESS || !flag) return;
        if (MPI_Recv(&b, 1, MPI_CHAR, st.MPI_SOURCE, PSM_PING, c->ps->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
        if (MPI_Isend(&pong, 1, MPI_CHAR, st.MPI_SOURCE, PSM_PONG, c->ps->comm, &req) == MPI_SUCCESS)
            MPI_Request_free(&req);
    }
}

/* Every wait of the chief polls with a deadline (--collective_timeout
 * seconds without the message moving): a rank that died or hangs ends the
 * run with an error naming it and the step, and the CLI's MPI_Abort ends
 * every rank, instead of a wait that never returns (under rerun, a worker
 * whose result never comes is lost instead: lose_worker). */
int psm_wait_for(chief *c, MPI_Request *req, uint32_t rank, const char *what, uint64_t step, dr_err *err)
{
    const struct timespec nap = { 0, 50000 };
    double t0 = dr_now(), limit = c->ps->timeout;
    c->timed_out = 0;
    for (;;) {
        MPI_Status st;
        int done = 0, mrc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (mrc) return mpi_fail(mrc, what, err);
        if (done) return DR_OK;
        answer_pings(c);
        if ((mrc = MPI_Iprobe(MPI_ANY_SOURCE, PSM_ABORT, c->ps->comm, &done, &st))) return mpi_fail(mrc, what, err);
        if (done) {   /* a worker saw a ps task die while reading the variables, or a ps task the worker */
            char msg[sizeof err->msg] = "";
            int n = 0;
            if (MPI_Recv(msg, (int)sizeof msg - 1, MPI_CHAR, st.MPI_SOURCE, PSM_ABORT, c->ps->comm, &st) == MPI_SUCCESS)
                MPI_Get_count(&st, MPI_CHAR, &n);
            msg[n > 0 ? n : 0] = '\0';
            return dr_fail(err, DR_EFAULT, "parameter_server: step %llu: MPI rank %d: %s",
                           (unsigned long long)step, st.MPI_SOURCE, msg);
        }
        if (dr_now() - t0 > limit) {
            c->timed_out = rank;
            return dr_fail(err, DR_EFAULT, "parameter_server: step %llu: %s MPI rank %u for %.1f s: rank %u died or "
                           "hangs", (unsigned long long)step, what, rank, limit, rank);
        }
        nanosleep(&nap, NULL);
    }
}

/* A send from the chief, with the deadline. */
int psm_send_to(chief *c, const void *buf, int n, MPI_Datatype type, uint32_t rank, int tag, uint64_t step,
                   const char *what, dr_err *err)
{
    MPI_Request req;
    int mrc = MPI_Isend(buf, n, type, (int)rank, tag, c->ps->comm, &req);
    if (mrc) return mpi_fail(mrc, what, err);
    return psm_wait_for(c, &req, rank, what, step, err);
}

int psm_record(engine_ps *ps, const dr_ps_event *ev, dr_err *err)
{
    char line[256];
    size_t n = dr_ps_event_line(ev, line, sizeof line);
    if (ps->record_len + n + 1 > ps->record_cap) {
        size_t cap = ps->record_cap ? 2 * ps->record_cap : 65536;
        char *p = realloc(ps->record, cap);
        if (!p) return dr_fail(err, DR_ENOMEM, "--schedule=free: no memory for the recorded schedule");
        ps->record = p;
        ps->record_cap = cap;
    }
    memcpy(ps->record + ps->record_len, line, n);
    ps->record_len += n;
    return DR_OK;
}

/* ---- events --------------------------------------------------------------- */

static int dispatch(chief *c, const dr_ps_event *ev, dr_err *err)
{
    engine_ps *ps = c->ps;
    uint64_t hdr[2] = { ev->closure, ev->read_version }, rd[2] = { ev->worker, 0 };
    int rc = ps->record ? psm_record(ps, ev, err) : DR_OK, mrc;
    c->arrival[ev->worker] = 0;
    ps->dispatches++;
    for (uint32_t v = 0; v < ps->W; v++)
        if (ps->rerun_of[v] == ev->closure) ps->rerun_closures++;
    if (rc == DR_OK)
        rc = psm_send_to(c, hdr, 2, MPI_UINT64_T, 1 + ev->worker, PSM_DISPATCH, ev->version + 1, "dispatching to", err);
    if (rc && ps->rerun && c->timed_out == 1 + ev->worker) return psm_lose_worker(c, ev->worker, err);
    for (uint32_t p = 0; rc == DR_OK && p < ps->P; p++)   /* the worker reads every shard */
        if (held_by(ps, p))
            rc = psm_send_to(c, rd, 2, MPI_UINT64_T, 1 + ps->W + p, PSM_READ, ev->version + 1, "a read request to", err);
    if (rc) return rc;
    mrc = MPI_Irecv(ps->res[ev->worker], (int)ps->msg_bytes, MPI_BYTE, (int)(1 + ev->worker), PSM_RESULT, ps->comm,
                    &ps->req[ev->worker]);
    return mrc ? mpi_fail(mrc, "dispatch", err) : DR_OK;
}

static int log_landing(chief *c, const dr_ps_event *ev, const psm_result *h, const uint32_t *ids, dr_err *err)
{
    dr_step_report rep;
    int rc, len;
    memset(&rep, 0, sizeof rep);
    rep.loss = h->loss;
    rep.count = h->count;
    rep.num_replicas = 1;
    rep.off[1] = h->count;
    rep.ids = ids;
    rep.correct = h->correct;
    if (h->epoch > c->acc_epoch) {   /* accuracy of the last epoch, as one_device keeps it */
        c->acc_epoch = h->epoch;
        c->epoch_correct = c->epoch_examples = 0;
    }
    c->epoch_correct += h->correct;
    c->epoch_examples += h->count;
    c->last_loss = h->loss;
    len = snprintf(rep.extra, sizeof rep.extra, ",\"closure\":%llu,\"worker\":%u,\"read_version\":%llu,"
                   "\"staleness\":%llu", (unsigned long long)ev->closure, ev->worker,
                   (unsigned long long)ev->read_version, (unsigned long long)ev->staleness);
    for (uint32_t v = 0; v < c->ps->W; v++)   /* as the reference's line for a closure re-run after a failure */
        if (c->ps->rerun_of[v] == ev->closure && len > 0 && (size_t)len < sizeof rep.extra) {
            snprintf(rep.extra + len, sizeof rep.extra - (size_t)len, ",\"rerun_after_failure_of_worker\":%u", v);
            c->ps->rerun_of[v] = 0;
            break;
        }
    rc = dr_run_log_step(c->log, ev->version, h->epoch, &rep, err);
    dr_run_log_progress(c->log, ev->version, h->epoch, c->s->plan->epochs, h->loss);
    return rc;
}

static int land(chief *c, const dr_ps_event *ev, dr_err *err)
{
    engine_ps *ps = c->ps;
    uint32_t w = ev->worker;
    const uint8_t *msg = ps->res[w];
    const uint32_t *ids = (const uint32_t *)(msg + sizeof(psm_result));
    const float *grad = (const float *)(msg + sizeof(psm_result) + (size_t)c->s->plan->G * sizeof(uint32_t));
    uint64_t hdr[2] = { ev->version, 0 };
    psm_result h;
    int rc;
    if (ps->fail_ps_step && ev->version == ps->fail_ps_step) return psm_ps_failure(c, ev, err);
    if ((rc = psm_wait_for(c, &ps->req[w], 1 + w, "no result from worker", ev->version, err))) return rc;
    memcpy(&h, msg, sizeof h);
    if (h.closure != ev->closure)
        return dr_fail(err, DR_EFORMAT, "worker %u sent the result of closure %llu, expected %llu", w,
                       (unsigned long long)h.closure, (unsigned long long)ev->closure);
    for (uint32_t p = 0; rc == DR_OK && p < ps->P; p++) {   /* each ps task applies its shards */
        size_t n = psm_gather(ps, p, grad, ps->send);
        if (!n) continue;
        if (DR_SEAM_PS_SKIP_LANDED(ev)) continue;
        rc = psm_send_to(c, hdr, 2, MPI_UINT64_T, 1 + ps->W + p, PSM_APPLY, ev->version, "an update to ps", err);
        if (rc == DR_OK)
            rc = psm_send_to(c, ps->send, (int)n, MPI_FLOAT, 1 + ps->W + p, PSM_APPLY, ev->version, "an update to ps", err);
    }
    if (rc) return rc;
    ps->updates = ev->version;
    ps->staleness_sum += ev->staleness;
    if (ev->staleness > ps->max_staleness) ps->max_staleness = ev->staleness;
    if (w == 0) c->last0 = h;
    if (ps->record && (rc = psm_record(ps, ev, err))) return rc;
    return log_landing(c, ev, &h, ids, err);
}

static int event(chief *c, const dr_ps_event *ev, dr_err *err)
{
    if (ev->kind == DR_PS_DISPATCH) return dispatch(c, ev, err);
    if (ev->kind == DR_PS_LAND) return land(c, ev, err);
    if (ev->kind == DR_PS_FAIL) return psm_fail_closure(c, ev, err);
    if (ev->kind == DR_PS_RECOVER) return psm_recover_worker(c, ev, err);
    return dr_fail(err, DR_ESTATE, "parameter_server over MPI: unexpected schedule event %d", (int)ev->kind);
}

/* --schedule=free: until the group is drained, dispatch what the rule
 * allows, then land the earliest arrival the rule allows to land (landing
 * the oldest in flight is always allowed, so waiting always ends). */
static int drain_free(chief *c, dr_err *err)
{
    engine_ps *ps = c->ps;
    uint32_t W = ps->W;
    dr_ps_event ev;
    int rc = DR_OK;
    while (rc == DR_OK && (c->sched.qlen > 0 || dr_ps_schedule_in_flight(&c->sched) > 0)) {
        uint32_t pick = W;
        for (uint32_t w = 0; rc == DR_OK && w < W; w++)
            if (dr_ps_schedule_take(&c->sched, DR_PS_DISPATCH, w, &ev)) rc = dispatch(c, &ev, err);
        for (uint32_t w = 0; rc == DR_OK && w < W; w++) {   /* what has arrived since */
            int done = 0, mrc;
            if (!c->sched.busy[w] || c->arrival[w]) continue;
            if ((mrc = MPI_Test(&ps->req[w], &done, MPI_STATUS_IGNORE))) return mpi_fail(mrc, "a worker's result", err);
            if (done) c->arrival[w] = ++c->arrivals;
        }
        for (uint32_t w = 0; rc == DR_OK && w < W; w++)
            if (c->arrival[w] && c->sched.busy[w] && dr_ps_schedule_allows(&c->sched, DR_PS_LAND, w) &&
                (pick == W || c->arrival[w] < c->arrival[pick]))
                pick = w;
        if (rc) break;
        if (pick < W) {
            dr_ps_schedule_take(&c->sched, DR_PS_LAND, pick, &ev);
            c->arrival[pick] = 0;
            rc = land(c, &ev, err);
        } else if (dr_ps_schedule_in_flight(&c->sched) > 0) {
            /* nothing may land yet: wait for the oldest read in flight (landing it is always allowed) */
            uint32_t oldest = W;
            for (uint32_t w = 0; w < W; w++)
                if (c->sched.busy[w] && !c->arrival[w] && (oldest == W || c->sched.read[w] < c->sched.read[oldest]))
                    oldest = w;
            if (oldest == W)
                return dr_fail(err, DR_ESTATE, "--schedule=free: results arrived but none may land (schedule bug)");
            rc = psm_wait_for(c, &ps->req[oldest], 1 + oldest, "no result from worker", c->sched.version + 1, err);
            if (rc && ps->rerun && c->timed_out == 1 + oldest) rc = psm_lose_worker(c, oldest, err);
            else if (rc) return rc;
            else c->arrival[oldest] = ++c->arrivals;
        }
    }
    return rc;
}

/* ---- checkpoints ---------------------------------------------------------- */

static int fetch(chief *c, dr_err *err)
{
    engine_ps *ps = c->ps;
    size_t P = c->s->plan->P;
    uint64_t hdr[2] = { 0, 0 };
    int rc = DR_OK;
    for (uint32_t p = 0; rc == DR_OK && p < ps->P; p++) {
        size_t n = held_by(ps, p);
        if (!n) continue;
        rc = psm_send_to(c, hdr, 2, MPI_UINT64_T, 1 + ps->W + p, PSM_FETCH, ps->updates, "a checkpoint read from", err);
        for (int j = -1; rc == DR_OK && j < c->s->plan->nslots; j++) {
            MPI_Request req;
            int mrc = MPI_Irecv(ps->send, (int)n, MPI_FLOAT, (int)(1 + ps->W + p), PSM_SHARDS, ps->comm, &req);
            rc = mrc ? mpi_fail(mrc, "reading the variables back", err)
                     : psm_wait_for(c, &req, 1 + ps->W + p, "no shards for the checkpoint from", ps->updates, err);
            if (rc == DR_OK) psm_scatter(ps, p, ps->send, j < 0 ? ps->final_params : ps->final_slots + (size_t)j * P);
        }
    }
    return rc;
}

static int save(chief *c, dr_err *err)
{
    dr_session *s = c->s;
    engine_ps *ps = c->ps;
    const psm_result *k0 = &c->last0;
    dr_checkpoint ck;
    int rc;
    if ((rc = fetch(c, err))) return rc;
    memset(&ck, 0, sizeof ck);
    snprintf(ck.experiment, sizeof ck.experiment, "%s", s->plan->exp.name);
    ck.seed = s->cfg->seed;
    ck.global_batch = s->plan->G;
    ck.optimizer = (uint32_t)s->plan->exp.optimizer.kind;
    ck.step = ps->updates;
    ck.examples = s->data->n;
    ck.epoch = k0->epoch;
    ck.position = k0->position;
    if (k0->pass_size != s->data->n && k0->position == k0->pass_size && k0->position % s->plan->G) {
        ck.epoch++;   /* a shard's short end is no position of the whole set: the next epoch's start */
        ck.position = 0;
    }
    ck.epoch_correct = c->epoch_correct;
    ck.epoch_examples = c->epoch_examples;
    memcpy(&ck.last_loss_bits, &c->last_loss, sizeof ck.last_loss_bits);
    dr_plan_checkpoint_settings(s->plan, &ck);
    ck.nparams = (uint32_t)s->plan->P;
    ck.nslots = (uint32_t)s->plan->nslots;
    ck.params = ps->final_params;
    ck.slots = ps->final_slots;
    {   /* what decides the seeded plan a resume re-walks (core: dr_ps_settings_line), as the reference
         * writes it, or a free run's plan, its recording: committed with the checkpoint */
        char settings[512];
        dr_ckpt_part part = { "ps_schedule.json", settings, 0 };
        if (ps->record) {
            part.name = "ps_schedule.jsonl";
            part.data = ps->record;
            part.len = ps->record_len;
        } else {
            part.len = dr_ps_settings_line(s->cfg, ps->W, ps->P, ps->updates, settings, sizeof settings);
        }
        if ((rc = dr_run_log_commit(c->log, &ck, &part, 1, err))) return rc;
    }
    ps->saved = ps->updates;
    ps->have_ckpt = true;
    return DR_OK;
}

/* ---- the training program ------------------------------------------------- */

uint64_t psm_total_steps(const dr_session *s)
{
    uint64_t G = s->plan->G, n = s->data->n;
    uint64_t per = s->cfg->drop_remainder ? n / G : (n + G - 1) / G;
    return s->cfg->train_steps ? s->cfg->train_steps : (uint64_t)s->plan->epochs * per;
}

/* Closures are scheduled up to the next join: a multiple of
 * --checkpoint_every, the resumed step or the end (the reference's rule). */
static uint64_t next_join(const chief *c, uint64_t done)
{
    uint64_t E = c->s->cfg->checkpoint_every, next = E ? (done / E + 1) * E : c->N, R = c->ps->resume_step;
    if (R > done && R < next) next = R;
    return next < c->N ? next : c->N;
}

/* A resumed run re-walks the seeded plan (or, --schedule=free, the
 * recording: the schedule follows it as --replay_schedule does, and every
 * event goes into this run's recording again) up to the checkpoint without
 * computing anything (as the reference does): each worker is told how many
 * batches it took since its datasets were last created (it skips them),
 * worker 0's iterator is recounted for the checkpoints, and the variables
 * are the checkpoint's (on the ps tasks). */
static int rewalk(chief *c, uint64_t *done, dr_err *err)
{
    engine_ps *ps = c->ps;
    uint64_t batches[DR_PS_MAX_WORKERS] = { 0 }, hdr[2] = { 0, 0 };
    psm_result it0;   /* worker 0's iterator (re-created when it recovers) */
    int rc = DR_OK;
    memset(&it0, 0, sizeof it0);
    while (rc == DR_OK && *done < ps->resume_step) {
        uint64_t until = next_join(c, *done);
        dr_ps_event ev;
        for (; rc == DR_OK && *done < until; (*done)++)
            if (!dr_ps_schedule_push(&c->sched)) rc = dr_fail(err, DR_ENOMEM, "schedule: no memory for the queue");
        while (rc == DR_OK && dr_ps_schedule_next(&c->sched, &ev)) {
            uint32_t w = ev.worker;
            if (DR_SEAM_PS_RECORD_REWALK(ps->record) && (rc = psm_record(ps, &ev, err))) break;
            /* summary.json counts them, as the reference's replay does */
            if (ev.kind == DR_PS_DISPATCH) {
                batches[w]++;
                if (w == 0) { psm_skip_batch(c, &it0); c->last0 = it0; }
                for (uint32_t v = 0; v < ps->W; v++)
                    if (ps->rerun_of[v] == ev.closure) ps->rerun_closures++;
            } else if (ev.kind == DR_PS_FAIL) {
                ps->worker_failures++;
                ps->rerun_of[w] = ev.closure;
            } else if (ev.kind == DR_PS_RECOVER) {   /* its datasets re-created: its batches count from here */
                ps->recoveries++;
                batches[w] = 0;
                if (w == 0) memset(&it0, 0, sizeof it0);
            } else {
                ps->staleness_sum += ev.staleness;
                if (ev.staleness > ps->max_staleness) ps->max_staleness = ev.staleness;
                for (uint32_t v = 0; v < ps->W; v++)
                    if (ps->rerun_of[v] == ev.closure) ps->rerun_of[v] = 0;
            }
        }
    }
    if (rc == DR_OK && ps->record && (c->sched.replay_bad || c->sched.replayed != ps->nreplay))
        rc = dr_fail(err, DR_EFORMAT, "%s/ps_schedule.jsonl: event %zu of %zu does not fit this run's plan (TF_CONFIG, "
                     "--staleness, --checkpoint_every as the run that wrote it); resume with that run's settings",
                     c->s->cfg->model_dir, c->sched.replayed + 1, ps->nreplay);
    c->sched.opt.replay = NULL;   /* from here the free run's own order */
    c->sched.opt.replay_len = 0;
    for (uint32_t w = 0; rc == DR_OK && w < ps->W; w++) {
        hdr[0] = batches[w];
        DR_SEAM_PS_RESUME_SKIP(hdr[0]);
        rc = psm_send_to(c, hdr, 2, MPI_UINT64_T, 1 + w, PSM_SKIP, ps->resume_step, "resuming", err);
    }
    ps->updates = ps->resume_step;
    return rc;
}

static int coordinate(chief *c, dr_err *err)
{
    uint64_t done = 0, E = c->s->cfg->checkpoint_every;
    bool seeded = c->ps->record == NULL;
    int rc = c->ps->resume_step ? rewalk(c, &done, err) : DR_OK;
    while (rc == DR_OK && done < c->N) {
        uint64_t until = next_join(c, done);
        dr_ps_event ev;
        for (; rc == DR_OK && done < until; done++)
            if (!dr_ps_schedule_push(&c->sched)) rc = dr_fail(err, DR_ENOMEM, "schedule: no memory for the queue");
        if (seeded)
            while (rc == DR_OK && dr_ps_schedule_next(&c->sched, &ev)) rc = event(c, &ev, err);
        else if (rc == DR_OK)
            rc = drain_free(c, err);
        if (rc == DR_OK && E && done % E == 0 && done > c->ps->resume_step && done < c->N) rc = save(c, err);
    }
    if (rc == DR_OK && c->N != c->ps->resume_step) rc = save(c, err);   /* a finished run, run again: nothing */
    return rc;
}

static int run_chief(dr_session *s, dr_run_log *log, dr_train_totals *out, dr_err *err)
{
    engine_ps *ps = s->ps;
    chief *c = calloc(1, sizeof *c);
    dr_ps_schedule_options so = { ps->W, s->cfg->staleness, s->cfg->schedule_seed, ps->fail_worker,
                                  ps->fail_worker_step, ps->replay, ps->nreplay };   /* replay: a free resume's */
    uint64_t stop[2] = { 0, 0 };
    int rc;
    if (!c) return dr_fail(err, DR_ENOMEM, "coordinator: no memory");
    c->s = s;
    c->ps = ps;
    c->log = log;
    c->N = psm_total_steps(s);
    dr_run_log_trim(log, ps->resume_step);
    if (ps->resume_step) {   /* what a finished run reports; a resume continues them (ref/ps.c) */
        const dr_checkpoint *k = &ps->ck;
        c->epoch_correct = k->epoch_correct;
        c->epoch_examples = k->epoch_examples;
        c->acc_epoch = k->position == 0 && k->step > 0 && k->epoch > 0 ? k->epoch - 1 : k->epoch;
        memcpy(&c->last_loss, &k->last_loss_bits, sizeof c->last_loss);
    }
    if ((rc = dr_ps_schedule_init(&c->sched, &so, 1, err)) == DR_OK) rc = coordinate(c, err);
    dr_ps_schedule_free(&c->sched);
    for (uint32_t r = 1; rc == DR_OK && r < 1 + ps->W + ps->P; r++)   /* training is over: every rank stops */
        if (r > ps->W || !ps->lost_at[r - 1]) {   /* stop[0]: how many workers died (no MPI_Finalize then) */
            stop[0] = ps->dead_workers;
            rc = psm_send_to(c, stop, 2, MPI_UINT64_T, r, PSM_STOP, c->N, "stopping", err);
        }
    if (rc == DR_EFAULT) psm_why_no_rerun(c, err);
    if (rc) psm_abort_all(c, err);
    out->steps = c->N;
    out->start_step = ps->resume_step;
    out->last_loss = c->last_loss;
    out->epoch_correct = c->epoch_correct;
    out->epoch_examples = c->epoch_examples;
    out->peer_lost = ps->dead_workers > 0;
    free(c);
    return rc;
}

int engine_ps_train(dr_session *s, dr_run_log *log, dr_train_totals *out, dr_err *err)
{
    engine_ps *ps = s->ps;
    int rc;
    if (!ps) return dr_fail(err, DR_ESTATE, "train: not a parameter_server session");
    if (ps->role == PSM_CHIEF) return run_chief(s, log, out, err);
    rc = ps->role == PSM_WORKER ? psm_worker_loop(s, err) : psm_ps_loop(s, err);
    out->steps = psm_total_steps(s);
    out->peer_lost = ps->dead_workers > 0;
    return rc;
}
