/* distref engine — parameter_server over MPI ranks: what the worker ranks
 * and the ps ranks do (the chief's coordinator is strategies/ps_mpi.c).
 *
 * A worker rank waits for a closure, receives the variables from every ps
 * task that holds shards (the read at dispatch), takes the next batch of
 * its own shard of the data (TensorFlow's InputContext(W, w): examples
 * w, w + W, ..., shuffled per epoch, batched by the global batch size,
 * repeating), computes the exact sum of its losses and gradients with the
 * backend's kernels (one replica: share = sums + D * reg over D, D the
 * divisor), rounds the gradient once and sends it back to the chief.
 *
 * A ps rank holds its shards' variables and optimizer slots. In the order
 * the chief sends them it answers reads (its shards to a worker), applies
 * updates (its shards of a landed gradient, as optimizer step `version`
 * with the backend's apply, from the exact value of the float gradient)
 * and sends its shards back for a checkpoint. The backend's buffers are
 * full length (its kernels address the whole parameter vector); only the
 * ps task's own shards are ever read or written from outside.
 */
#include "strategies/ps_mpi_internal.h"
#include "distref/exact.h"
#include "distref/input.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "strategies/seams.h"

size_t psm_gather(const engine_ps *ps, uint32_t p, const float *full, float *out)
{
    size_t at = 0;
    for (uint32_t i = 0; i < ps->layout.num_shards; i++) {
        const dr_ps_shard *sh = &ps->layout.shard[i];
        if (sh->ps_task != p) continue;
        memcpy(out + at, full + sh->offset, sh->length * sizeof(float));
        at += sh->length;
    }
    return at;
}

size_t psm_scatter(const engine_ps *ps, uint32_t p, const float *in, float *full)
{
    size_t at = 0;
    for (uint32_t i = 0; i < ps->layout.num_shards; i++) {
        const dr_ps_shard *sh = &ps->layout.shard[i];
        if (sh->ps_task != p) continue;
        memcpy(full + sh->offset, in + at, sh->length * sizeof(float));
        at += sh->length;
    }
    return at;
}

static int mpi_fail(int mrc, const char *what, dr_err *err)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(mrc, msg, &len);
    return dr_fail(err, DR_EIO, "parameter_server over MPI: %s: %s", what, msg);
}

/* ---- waits ---------------------------------------------------------------- */

/* The chief's PSM_ABORT: this rank stops with the chief's reason. */
static int aborted(engine_ps *ps, dr_err *err)
{
    char msg[sizeof err->msg];
    MPI_Status st;
    int n = 0, mrc = MPI_Recv(msg, (int)sizeof msg - 1, MPI_CHAR, 0, PSM_ABORT, ps->comm, &st);
    if (mrc == MPI_SUCCESS) MPI_Get_count(&st, MPI_CHAR, &n);
    msg[n > 0 ? n : 0] = '\0';
    return dr_fail(err, DR_EFAULT, "the chief stopped training: %s", msg);
}

/* A worker that saw a ps task die tells the chief (which names it to
 * everyone); the send is given a second to leave before this rank stops. */
static void tell_chief(engine_ps *ps, const dr_err *err)
{
    MPI_Request req;
    double t0 = dr_now();
    int done = 0;
    if (MPI_Isend(err->msg, (int)strlen(err->msg) + 1, MPI_CHAR, 0, PSM_ABORT, ps->comm, &req) != MPI_SUCCESS) return;
    while (!done && dr_now() - t0 < 1.0)
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
}

/* Is the chief still there? After a quarter of the deadline without a
 * word from it, this rank pings it; after the deadline without the answer (the
 * chief answers from inside its own waits), it names the chief dead, so
 * that under `mpirun --enable-recovery` a dead chief cannot leave the other
 * ranks waiting forever. An order or an answer resets the clock. */
static int chief_alive(engine_ps *ps, dr_err *err)
{
    static const char ping = 0;
    double now = dr_now();
    int flag = 0, mrc = MPI_Iprobe(0, PSM_PONG, ps->comm, &flag, MPI_STATUS_IGNORE);
    if (mrc) return mpi_fail(mrc, "waiting for the chief", err);
    if (flag) {
        char b;
        if ((mrc = MPI_Recv(&b, 1, MPI_CHAR, 0, PSM_PONG, ps->comm, MPI_STATUS_IGNORE)))
            return mpi_fail(mrc, "waiting for the chief", err);
        ps->chief_quiet = now;
        ps->ping_at = 0;
    } else if (ps->ping_at == 0 && now - ps->chief_quiet > ps->timeout / 4) {
        MPI_Request req;
        if (MPI_Isend(&ping, 1, MPI_CHAR, 0, PSM_PING, ps->comm, &req) == MPI_SUCCESS) MPI_Request_free(&req);
        ps->ping_at = now;
    } else if (ps->ping_at > 0 && now - ps->ping_at > ps->timeout) {
        return dr_fail(err, DR_EFAULT, "the chief (MPI rank 0) died or hangs: nothing from it for %.1f s, and no "
                       "answer to a ping for %.1f s", now - ps->chief_quiet, now - ps->ping_at);
    }
    return DR_OK;
}

/* A worker's or ps task's wait on one message: it completes, or the chief
 * aborts (a rank this one waits for may be dead: the chief's deadline
 * sees it and tells everyone), or the chief itself is gone. */
static int role_wait(engine_ps *ps, MPI_Request *req, const char *what, dr_err *err)
{
    const struct timespec nap = { 0, 50000 };
    int rc;
    if (ps->ping_at == 0) ps->chief_quiet = dr_now();
    for (;;) {
        int done = 0, flag = 0, mrc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (mrc) return mpi_fail(mrc, what, err);
        if (done) return DR_OK;
        if (ps->limit > 0 && dr_now() - ps->waiting_since > ps->limit) {   /* the variables' transfer (watch) */
            dr_fail(err, DR_EFAULT, "%s: nothing from MPI rank %u for %.1f s: rank %u died or hangs", what,
                    ps->waiting_for, ps->limit, ps->waiting_for);
            tell_chief(ps, err);
            return err->code;
        }
        if ((mrc = MPI_Iprobe(0, PSM_ABORT, ps->comm, &flag, MPI_STATUS_IGNORE))) return mpi_fail(mrc, what, err);
        if (flag) return aborted(ps, err);
        if ((rc = chief_alive(ps, err))) return rc;
        nanosleep(&nap, NULL);
    }
}

static int role_recv(engine_ps *ps, void *buf, int n, MPI_Datatype type, uint32_t from, int tag, const char *what,
                     dr_err *err)
{
    MPI_Request req;
    int mrc = MPI_Irecv(buf, n, type, (int)from, tag, ps->comm, &req);
    return mrc ? mpi_fail(mrc, what, err) : role_wait(ps, &req, what, err);
}

static int role_send(engine_ps *ps, const void *buf, int n, MPI_Datatype type, uint32_t to, int tag, const char *what,
                     dr_err *err)
{
    MPI_Request req;
    int mrc = MPI_Isend(buf, n, type, (int)to, tag, ps->comm, &req);
    return mrc ? mpi_fail(mrc, what, err) : role_wait(ps, &req, what, err);
}

/* The chief's next order: its tag, and the header (2 words) unless it
 * aborts; an answer to a ping is taken on the way (chief_alive). */
static int next_order(engine_ps *ps, uint64_t hdr[2], int *tag, dr_err *err)
{
    const struct timespec nap = { 0, 100000 };
    if (ps->ping_at == 0) ps->chief_quiet = dr_now();
    for (;;) {
        MPI_Status st;
        int flag = 0, rc, mrc = MPI_Iprobe(0, MPI_ANY_TAG, ps->comm, &flag, &st);
        if (mrc) return mpi_fail(mrc, "waiting for the chief", err);
        if (flag && st.MPI_TAG == PSM_ABORT) return aborted(ps, err);
        if (flag && st.MPI_TAG != PSM_PONG) {
            *tag = st.MPI_TAG;
            mrc = MPI_Recv(hdr, 2, MPI_UINT64_T, 0, st.MPI_TAG, ps->comm, MPI_STATUS_IGNORE);
            ps->chief_quiet = dr_now();
            return mrc ? mpi_fail(mrc, "waiting for the chief", err) : DR_OK;
        }
        if ((rc = chief_alive(ps, err))) return rc;
        if (!flag) nanosleep(&nap, NULL);
    }
}

/* The variables' way from a ps task to a worker is watched from both ends
 * with half the chief's deadline, so that the end that sees the other die
 * names it before the chief's own wait (on that worker's result, or on an
 * update to that ps task) runs out and blames the survivor. */
static void watch(const dr_session *s, uint32_t rank)
{
    engine_ps *ps = s->ps;
    ps->limit = (s->cfg->collective_timeout > 0 ? s->cfg->collective_timeout : DR_COMM_TIMEOUT_DEFAULT) / 2;
    ps->waiting_since = dr_now();
    ps->waiting_for = rank;
}

/* ---- a worker rank -------------------------------------------------------- */

/* dataset_fn(InputContext(W, w)) for one epoch, as the reference's shard_fn. */
static int build_pass(dr_session *s, uint32_t epoch, dr_err *err)
{
    engine_ps *ps = s->ps;
    const dr_run_config *cfg = s->cfg;
    uint32_t W = ps->W, w = ps->index, N = s->data->n, G = s->plan->G;
    uint32_t n = N / W + (w < N % W ? 1 : 0);
    free(ps->pass);
    if (!(ps->pass = malloc((size_t)n * sizeof *ps->pass + 4)))
        return dr_fail(err, DR_ENOMEM, "worker %u: no memory for %u ids", w, n);
    dr_epoch_order(n, cfg->seed, epoch, cfg->shuffle, ps->pass);
    for (uint32_t i = 0; i < n; i++) ps->pass[i] = w + W * ps->pass[i];
    if (cfg->drop_remainder) n -= n % G;
    if (n == 0)
        return dr_fail(err, DR_EUSAGE, "worker %u's shard of the data holds no batch (%u examples, %u workers%s)",
                       w, N, W, cfg->drop_remainder ? ", --drop_remainder" : "");
    ps->pass_n = n;
    ps->position = 0;
    ps->epoch = epoch;
    ps->built = true;
    return DR_OK;
}

static int skip_batches(dr_session *s, uint64_t n, dr_err *err)
{
    engine_ps *ps = s->ps;
    uint32_t G = s->plan->G;
    int rc;
    for (uint64_t i = 0; i < n; i++) {
        if ((!ps->built || ps->position == ps->pass_n) && (rc = build_pass(s, ps->built ? ps->epoch + 1 : 0, err)))
            return rc;
        ps->position += ps->pass_n - ps->position < G ? ps->pass_n - ps->position : G;
    }
    return DR_OK;
}

static int compute(dr_session *s, const uint32_t *ids, uint32_t n, uint64_t closure, psm_result *h, float *grad,
                   dr_err *err)
{
    engine_ps *ps = s->ps;
    const dr_backend_ops *b = s->bo;
    dr_replica_bufs *rb = &ps->rb;
    size_t f = s->data->features, out = s->plan->exp.model.layer[s->plan->exp.model.nlayers - 1].out;
    uint32_t den = dr_plan_divisor(s->plan, n);
    int rc;
    dr_dataset_gather(s->data, ids, n, s->host_x, s->data->labels ? s->host_labels : NULL,
                      s->data->targets ? s->host_targets : NULL);
    psm_graph_zero_moving(s, ps->vars);
    if ((rc = b->upload(s->be, rb->x, 0, s->host_x, (size_t)n * f * sizeof(float), err)) ||
        (rb->labels && (rc = b->upload(s->be, rb->labels, 0, s->host_labels, n, err))) ||
        (rb->targets && (rc = b->upload(s->be, rb->targets, 0, s->host_targets, (size_t)n * out * sizeof(float), err))) ||
        (rc = b->upload(s->be, rb->params, 0, ps->vars, s->plan->P * sizeof(float), err)))
        return rc;
    if (ps->gs) rc = psm_graph_step(s, ids, n, closure, den, err);   /* a model beyond Dense: the graph step */
    else if ((rc = b->forward(s->be, rb, n, 0, err)) == DR_OK && (rc = b->loss_grad(s->be, rb, n, true, err)) == DR_OK)
        rc = b->share(s->be, rb, 1, den, den, err);
    if (rc || (rc = b->round_loss(s->be, rb->loss, den, &h->loss, err))) return rc;
    dr_acc_round_array(b->host_ptr(rb->grad), s->plan->P, den, grad);
    if (b->clip_f32 && DR_SEAM_PS_CLIPS_ON_WORKER) b->clip_f32(s->be, grad);   /* the worker's whole gradient */
    psm_graph_send_moving(s, grad);   /* after the clip, which must not see them */
    h->correct = rb->correct;
    h->count = n;
    return DR_OK;
}

static int run_closure(dr_session *s, uint64_t closure, dr_err *err)
{
    engine_ps *ps = s->ps;
    uint8_t *msg = ps->res[0];
    psm_result h;
    uint32_t G = s->plan->G, *ids = (uint32_t *)(msg + sizeof h), n;
    float *grad = (float *)(msg + sizeof h + (size_t)G * sizeof(uint32_t));
    int rc;
    /* the read: every ps task's shards, each into its own part of ps->send;
     * the receives are all posted first, so that a live worker takes every
     * ps task's send at once and a ps task that waits on a worker waits
     * only on a dead one (it names it after a quarter of the deadline, this
     * worker a dead ps task after half) */
    size_t at = 0;
    for (uint32_t p = 0; p < ps->P; p++) {
        size_t k = 0;
        int mrc;
        for (uint32_t i = 0; i < ps->layout.num_shards; i++)
            if (ps->layout.shard[i].ps_task == p) k += ps->layout.shard[i].length;
        ps->vreq[p] = MPI_REQUEST_NULL;
        if (k && (mrc = MPI_Irecv(ps->send + at, (int)k, MPI_FLOAT, (int)(1 + ps->W + p), PSM_VARS, ps->comm,
                                  &ps->vreq[p])))
            return mpi_fail(mrc, "a worker's read of the variables", err);
        at += k;
    }
    at = 0;
    for (uint32_t p = 0; p < ps->P; p++) {
        if (ps->vreq[p] == MPI_REQUEST_NULL) continue;
        watch(s, 1 + ps->W + p);
        rc = role_wait(ps, &ps->vreq[p], "a worker's read of the variables", err);
        ps->limit = 0;
        if (rc) return rc;
        at += psm_scatter(ps, p, ps->send + at, ps->vars);
    }
    if ((!ps->built || ps->position == ps->pass_n) && (rc = build_pass(s, ps->built ? ps->epoch + 1 : 0, err)))
        return rc;
    memset(&h, 0, sizeof h);
    n = ps->pass_n - ps->position < G ? ps->pass_n - ps->position : G;
    memcpy(ids, ps->pass + ps->position, n * sizeof *ids);
    ps->position += n;
    if ((rc = compute(s, ids, n, closure, &h, grad, err))) return rc;
    h.closure = closure;
    h.epoch = ps->epoch;
    h.position = ps->position;
    h.pass_size = ps->pass_n;
    memcpy(msg, &h, sizeof h);
    return role_send(ps, msg, (int)ps->msg_bytes, MPI_BYTE, 0, PSM_RESULT, "a worker's result", err);
}

int psm_worker_loop(dr_session *s, dr_err *err)
{
    engine_ps *ps = s->ps;
    for (;;) {
        uint64_t hdr[2];
        int tag = 0, rc = next_order(ps, hdr, &tag, err);
        if (rc) return dr_fail_wrap(err, "MPI rank %u (/job:worker/replica:0/task:%u)", ps->rank, ps->index);
        if (tag == PSM_STOP) { ps->dead_workers = hdr[0]; return DR_OK; }
        if (tag == PSM_SKIP) {   /* a recovered worker's datasets re-created; a resumed run's batches skipped */
            if (hdr[1]) ps->built = false;   /* the next batch is the first of epoch 0 */
            if ((rc = skip_batches(s, hdr[0], err)))
                return dr_fail_wrap(err, "MPI rank %u (/job:worker/replica:0/task:%u)", ps->rank, ps->index);
            continue;
        }
        if ((rc = run_closure(s, hdr[0], err)))
            return dr_fail_wrap(err, "MPI rank %u (/job:worker/replica:0/task:%u), step function %llu", ps->rank,
                                ps->index, (unsigned long long)hdr[0]);
    }
}

/* ---- a ps rank ------------------------------------------------------------ */

static int apply(dr_session *s, uint64_t version, dr_err *err)
{
    engine_ps *ps = s->ps;
    dr_acc *t = s->bo->host_ptr(ps->total);
    float *params = s->bo->host_ptr(ps->params);
    size_t at = 0;
    for (uint32_t i = 0; i < ps->layout.num_shards; i++) {
        const dr_ps_shard *sh = &ps->layout.shard[i];
        if (sh->ps_task != ps->index) continue;
        psm_graph_land_moving(s, sh, params, ps->send + at);   /* a moving statistic: its increment, then 0 */
        for (size_t k = 0; k < sh->length; k++) {
            dr_acc_init(&t[sh->offset + k]);
            dr_acc_add(&t[sh->offset + k], ps->send[at + k]);
        }
        at += sh->length;
    }
    return s->bo->apply(s->be, ps->total, 1, version, ps->params, ps->slots, err);
}

static int send_shards(dr_session *s, dr_err *err)
{
    engine_ps *ps = s->ps;
    size_t P = s->plan->P, n = psm_gather(ps, ps->index, s->bo->host_ptr(ps->params), ps->send);
    const float *slots = s->bo->host_ptr(ps->slots);
    int rc = role_send(ps, ps->send, (int)n, MPI_FLOAT, 0, PSM_SHARDS, "a ps task's shards to the chief", err);
    for (int j = 0; rc == DR_OK && j < s->plan->nslots; j++) {
        psm_gather(ps, ps->index, slots + (size_t)j * P, ps->send);
        rc = role_send(ps, ps->send, (int)n, MPI_FLOAT, 0, PSM_SHARDS, "a ps task's shards to the chief", err);
    }
    return rc;
}

/* PSM_READ: this ps task's shards to a worker. Without rerun, a worker
 * that does not take them within half the deadline is named dead (and the
 * chief told). With rerun (a dead worker's closure re-runs elsewhere) this
 * task must outlive the worker: after a quarter of the deadline the send is
 * left pending with its buffer (a live worker that reads late still gets
 * exactly these values) and a fresh buffer serves the next order, so the
 * chief's updates and the other workers' reads never wait on a dead rank. */
static int send_vars(dr_session *s, uint32_t worker, dr_err *err)
{
    const struct timespec nap = { 0, 50000 };
    engine_ps *ps = s->ps;
    MPI_Request req;
    double t0;
    int rc, mrc;
    psm_gather(ps, ps->index, s->bo->host_ptr(ps->params), ps->send);
    if (!ps->rerun) {
        watch(s, 1 + worker);
        ps->limit = ps->timeout / 4;   /* before a worker names this task (half): run_closure */
        rc = role_send(ps, ps->send, (int)ps->mine, MPI_FLOAT, 1 + worker, PSM_VARS, "sending its shards to a worker",
                       err);
        ps->limit = 0;
        return rc;
    }
    for (uint32_t i = 0; i < ps->nabandoned;) {   /* a late reader took an earlier send: its buffer is free */
        int done = 0;
        if (MPI_Test(&ps->abandoned[i], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
            free(ps->abandoned_buf[i]);
            ps->abandoned[i] = ps->abandoned[--ps->nabandoned];
            ps->abandoned_buf[i] = ps->abandoned_buf[ps->nabandoned];
        } else {
            i++;
        }
    }
    if ((mrc = MPI_Isend(ps->send, (int)ps->mine, MPI_FLOAT, (int)(1 + worker), PSM_VARS, ps->comm, &req)))
        return mpi_fail(mrc, "sending its shards to a worker", err);
    t0 = dr_now();
    if (ps->ping_at == 0) ps->chief_quiet = t0;
    for (;;) {
        int done = 0, flag = 0;
        if ((mrc = MPI_Test(&req, &done, MPI_STATUS_IGNORE))) return mpi_fail(mrc, "sending its shards to a worker", err);
        if (done) return DR_OK;
        if (dr_now() - t0 > ps->timeout / 4) {
            float *fresh;
            if (ps->nabandoned == DR_PS_MAX_WORKERS || !(fresh = malloc(s->plan->P * sizeof(float) + 1)))
                return dr_fail(err, DR_EFAULT, "%u sends of the variables to workers that never read them",
                               ps->nabandoned);
            ps->abandoned[ps->nabandoned] = req;
            ps->abandoned_buf[ps->nabandoned++] = ps->send;
            ps->send = fresh;
            return DR_OK;
        }
        if ((mrc = MPI_Iprobe(0, PSM_ABORT, ps->comm, &flag, MPI_STATUS_IGNORE)))
            return mpi_fail(mrc, "sending its shards to a worker", err);
        if (flag) return aborted(ps, err);
        if ((rc = chief_alive(ps, err))) return rc;
        nanosleep(&nap, NULL);
    }
}

int psm_ps_loop(dr_session *s, dr_err *err)
{
    engine_ps *ps = s->ps;
    uint64_t hdr[2];
    for (;;) {
        int tag = 0, rc = next_order(ps, hdr, &tag, err);
        if (rc == DR_OK) {
            switch (tag) {
            case PSM_STOP: ps->dead_workers = hdr[0]; return DR_OK;
            case PSM_READ:   /* hdr[0]: the worker that reads; a dead one is named (as a worker names a ps) */
                rc = send_vars(s, (uint32_t)hdr[0], err);
                break;
            case PSM_APPLY:  /* hdr[0]: the version it makes; its shards' gradient follows */
                rc = role_recv(ps, ps->send, (int)ps->mine, MPI_FLOAT, 0, PSM_APPLY, "an update", err);
                if (rc == DR_OK) rc = apply(s, hdr[0], err);
                break;
            case PSM_FETCH: rc = send_shards(s, err); break;
            default: rc = dr_fail(err, DR_EFORMAT, "unexpected message tag %d", tag);
            }
        }
        if (rc) return dr_fail_wrap(err, "MPI rank %u (/job:ps/replica:0/task:%u)", ps->rank, ps->index);
    }
}

/* ---- buffers -------------------------------------------------------------- */

int psm_roles_open(dr_session *s, dr_err *err)
{
    engine_ps *ps = s->ps;
    const dr_backend_ops *b = s->bo;
    size_t P = s->plan->P, f = s->data->features, G = s->plan->G;
    size_t out = s->plan->exp.model.layer[s->plan->exp.model.nlayers - 1].out;
    int rc;
    if (ps->role == PSM_WORKER) {
        dr_replica_bufs *rb = &ps->rb;
        if ((rc = b->alloc(s->be, P * sizeof(float), &rb->params, err)) ||
            (rc = b->alloc(s->be, P * sizeof(dr_acc), &rb->grad, err)) ||
            (rc = b->alloc(s->be, sizeof(dr_acc), &rb->loss, err)) ||
            (rc = b->alloc(s->be, G * f * sizeof(float) + 1, &rb->x, err)) ||
            (s->data->labels && (rc = b->alloc(s->be, G + 1, &rb->labels, err))) ||
            (s->data->targets && (rc = b->alloc(s->be, G * out * sizeof(float) + 1, &rb->targets, err))) ||
            (rc = b->replica_open(s->be, rb, (uint32_t)G, err)))
            return rc;
        s->host_x = malloc(G * f * sizeof(float) + 1);
        s->host_labels = malloc(G + 1);
        s->host_targets = malloc(G * out * sizeof(float) + 1);
        if (!s->host_x || !s->host_labels || !s->host_targets)
            return dr_fail(err, DR_ENOMEM, "worker: no memory for the staging buffers");
    }
    if (ps->role == PSM_PS) {
        float *init = calloc(P * (size_t)(1 + s->plan->nslots) + 1, sizeof(float));
        if (!init) return dr_fail(err, DR_ENOMEM, "ps: no memory for the variables");
        dr_model_init(&s->plan->exp.model, s->cfg->seed, init);   /* the same values the chief would send */
        if (ps->resume_step) {   /* or the checkpoint's */
            memcpy(init, ps->ck.params, P * sizeof(float));
            memcpy(init + P, ps->ck.slots, P * (size_t)s->plan->nslots * sizeof(float));
        }
        rc = b->alloc(s->be, P * sizeof(float), &ps->params, err);
        if (!rc) rc = b->alloc(s->be, P * (size_t)s->plan->nslots * sizeof(float) + 1, &ps->slots, err);
        if (!rc) rc = b->alloc(s->be, P * sizeof(dr_acc), &ps->total, err);
        if (!rc) rc = b->upload(s->be, ps->params, 0, init, P * sizeof(float), err);
        if (!rc && s->plan->nslots) rc = b->upload(s->be, ps->slots, 0, init + P, P * (size_t)s->plan->nslots * sizeof(float), err);
        if (!rc) rc = b->fill_zero(s->be, ps->total, 0, P * sizeof(dr_acc), err);
        free(init);
        if (rc) return rc;
    }
    return psm_graph_open(s, err);
}

void psm_roles_close(dr_session *s)
{
    engine_ps *ps = s->ps;
    dr_replica_bufs *rb = &ps->rb;
    dr_buffer *bufs[] = { rb->params, rb->grad, rb->loss, rb->x, rb->labels, rb->targets, ps->params, ps->slots,
                          ps->total };
    if (!s->be) return;
    psm_graph_close(s);
    if (rb->scratch) s->bo->replica_close(s->be, rb);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) if (bufs[i]) s->bo->release(s->be, bufs[i]);
    free(ps->pass);
}
