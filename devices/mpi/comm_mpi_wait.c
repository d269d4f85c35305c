/* distref devices — the MPI comm's waits (devices/mpi/comm_mpi_internal.h).
 *
 * Every wait of the MPI comm polls (MPI_Test*), spinning while messages are
 * likely in flight and yielding the core after CM_SPIN_S without progress
 * (a yield per message fragment costs a time slice on a busy machine). A
 * wait that sees nothing move for the endpoint's timeout pings the rank it
 * waits for: a live rank (itself waiting on a dead one) answers from inside
 * its own wait and is not blamed, the wait goes on. A rank that does not
 * answer is reported dead, and the first rank to report it tells every
 * other rank (a notice), so that wherever they wait they fail at once naming
 * the same rank.
 *
 * all_gather is all-pairs (a rank whose bytes do not come is named);
 * barrier is an all_gather of one byte.
 */
#include "devices/mpi/comm_mpi_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices/seams.h"

double dr_cm_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* An idle wait spins while messages are likely in flight and gives the core
 * away (sched_yield) only after CM_SPIN_S without progress: a yield on a
 * busy machine can cost a whole time slice per message fragment. */
void dr_cm_idle(double since)
{
    if (dr_cm_now() - since > CM_SPIN_S) sched_yield();
}

bool dr_cm_overdue(cm_ep *e, double *last)
{
    double now = dr_cm_now(), gap = now - e->polled;
    bool stalled = DR_SEAM_CM_STALLED(e->polled > 0 && gap > CM_STALL_F * e->timeout);
    e->polled = now;
    if (stalled) {
        if (gap > e->stalled) e->stalled = gap;
        *last = now;
    }
    return now - *last > e->timeout;
}

int dr_cm_blamed(cm_ep *e, uint32_t peer, int rc, dr_err *err)
{
    if (rc == DR_EFAULT && e->stalled > 0)
        dr_fail(err, DR_EFAULT, "comm mpi rank %u: this process did not run for %.1f s during a wait (stopped, "
                "e.g. SIGSTOP): the other ranks gave up on it, and rank %u no longer answers since; it blames no "
                "rank", e->rank, e->stalled, peer);
    return rc;
}

int dr_cm_fail(dr_err *err, int mrc, uint32_t rank, const char *what)
{
    char s[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(mrc, s, &len) != MPI_SUCCESS) len = 0;
    s[len] = '\0';
    return dr_fail(err, DR_EFAULT, "comm mpi rank %u %s: MPI error: %s", rank, what, s);
}

/* ---- death notices ---------------------------------------------------------
 * The first rank whose deadline passes tells every other rank which rank it
 * waited for (fire and forget), so that the others, wherever they wait,
 * fail at once naming the same rank instead of each waiting out its own
 * deadline (or naming a survivor that has already left). A rank that was
 * stopped meanwhile sends none (dr_cm_overdue saw its pause): its peers
 * gave up on it, it has nobody to blame. */

void dr_cm_notice_send(cm_ep *e, uint32_t dead)
{
    int32_t v = (int32_t)dead;
    if (e->stalled > 0) return;
    for (uint32_t q = 0; q < e->size; q++) {
        MPI_Request rq;
        if (q == e->rank || q == dead) continue;   /* (an Isend to a dead rank can block inside Open MPI) */
        if (MPI_Isend(&v, 1, MPI_INT32_T, (int)q, CM_TAG_NOTICE, e->comm, &rq) == MPI_SUCCESS) {
            double t0 = dr_cm_now();
            int done = 0;
            while (!done && dr_cm_now() - t0 < 0.2 && MPI_Test(&rq, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS) {}
            if (!done) MPI_Request_free(&rq);
        }
    }
}

/* Answers every ping that arrived (called from every wait). */
void dr_cm_pong_serve(cm_ep *e)
{
    int flag = 1;
    while (flag) {
        MPI_Status st;
        int32_t v = 0;
        MPI_Request rq;
        flag = 0;
        if (MPI_Iprobe(MPI_ANY_SOURCE, CM_TAG_PING, e->comm, &flag, &st) != MPI_SUCCESS || !flag) return;
        MPI_Recv(&v, 1, MPI_INT32_T, st.MPI_SOURCE, CM_TAG_PING, e->comm, MPI_STATUS_IGNORE);
        if (MPI_Isend(&e->rank, 1, MPI_UINT32_T, st.MPI_SOURCE, CM_TAG_PONG, e->comm, &rq) == MPI_SUCCESS)
            MPI_Request_free(&rq);   /* (a 4-byte message: sent eagerly from its buffer) */
    }
}

/* Whether `peer` answers a ping within CM_PING_S: a rank that waits on a
 * live rank (itself waiting on the dead one) must not blame it. DR_EFAULT
 * when a notice arrives meanwhile. */
int dr_cm_ping(cm_ep *e, uint32_t peer, bool *alive, const char *what, dr_err *err)
{
    int32_t v = (int32_t)e->rank;
    uint32_t got = 0;
    MPI_Request sq, rq;
    double t0 = dr_cm_now();
    int done = 0, rc = DR_OK;
    *alive = false;
    if (MPI_Irecv(&got, 1, MPI_UINT32_T, (int)peer, CM_TAG_PONG, e->comm, &rq) != MPI_SUCCESS) return DR_OK;
    if (MPI_Isend(&v, 1, MPI_INT32_T, (int)peer, CM_TAG_PING, e->comm, &sq) == MPI_SUCCESS) MPI_Request_free(&sq);
    while (dr_cm_now() - t0 < CM_PING_S && rc == DR_OK) {
        if (MPI_Test(&rq, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        if (done) { *alive = true; return DR_OK; }
        dr_cm_pong_serve(e);
        rc = dr_cm_notice_check(e, what, err);
        sched_yield();
    }
    MPI_Cancel(&rq);
    MPI_Request_free(&rq);
    return rc;
}

/* DR_EFAULT when another rank's notice arrived. */
int dr_cm_notice_check(cm_ep *e, const char *what, dr_err *err)
{
    int flag = 0;
    MPI_Status st;
    int32_t dead = -1;
    if (MPI_Iprobe(MPI_ANY_SOURCE, CM_TAG_NOTICE, e->comm, &flag, &st) != MPI_SUCCESS || !flag) return DR_OK;
    MPI_Recv(&dead, 1, MPI_INT32_T, st.MPI_SOURCE, CM_TAG_NOTICE, e->comm, MPI_STATUS_IGNORE);
    return dr_fail(err, DR_EFAULT, "comm mpi rank %u %s: rank %d died or hangs (rank %d waited %.1f s for it)",
                   e->rank, what, (int)dead, st.MPI_SOURCE, e->timeout);
}

void dr_cm_cancel_all(MPI_Request *req, int n)
{
    for (int i = 0; i < n; i++)
        if (req[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&req[i]);
            MPI_Request_free(&req[i]);
        }
}

/* All-pairs: rank w's bytes to every other rank; a rank whose bytes do not
 * come within the deadline is named. */
int dr_cm_all_gather(dr_comm *c, const void *mine, size_t bytes, void *all, dr_err *err)
{
    cm_ep *e;
    MPI_Request *req;
    uint32_t W, missing = 0;
    double last;
    int mrc = MPI_SUCCESS, rc = DR_OK;
    if (!c) return dr_fail(err, DR_EUSAGE, "comm mpi all_gather: no endpoint (NULL)");
    e = dr_cm_ep(c);
    W = e->size;
    if (bytes > INT32_MAX) return dr_fail(err, DR_EUSAGE, "comm mpi all_gather: %zu bytes, at most 2^31-1", bytes);
    if (bytes) memmove((uint8_t *)all + (size_t)e->rank * bytes, mine, bytes);
    if (W == 1) return DR_OK;
    if (!(req = malloc(2 * (size_t)W * sizeof *req))) return dr_fail(err, DR_ENOMEM, "comm mpi all_gather: no memory");
    for (uint32_t q = 0; q < 2 * W; q++) req[q] = MPI_REQUEST_NULL;
    for (uint32_t q = 0; mrc == MPI_SUCCESS && q < W; q++) {
        if (q == e->rank) continue;
        mrc = MPI_Irecv((uint8_t *)all + (size_t)q * bytes, (int)bytes, MPI_BYTE, (int)q, CM_TAG_GATHER, e->comm, &req[q]);
        if (mrc == MPI_SUCCESS)
            mrc = MPI_Isend((uint8_t *)all + (size_t)e->rank * bytes, (int)bytes, MPI_BYTE, (int)q, CM_TAG_GATHER,
                            e->comm, &req[W + q]);
    }
    last = dr_cm_now();
    dr_cm_awaiting(e, "all_gather", -1);
    while (mrc == MPI_SUCCESS) {
        int flag = 0;
        bool moved = false;
        missing = W;   /* the first rank still owed a message: a receive first, else a send */
        for (uint32_t q = 0; mrc == MPI_SUCCESS && q < 2 * W; q++) {
            if (req[q] == MPI_REQUEST_NULL) continue;
            mrc = MPI_Test(&req[q], &flag, MPI_STATUS_IGNORE);
            if (flag) moved = true;
            else if (missing == W) missing = q < W ? q : q - W;
        }
        if (mrc != MPI_SUCCESS || missing == W) break;
        dr_cm_pong_serve(e);
        if (moved) last = dr_cm_now();
        else if ((rc = dr_cm_notice_check(e, "all_gather", err))) break;
        else if (dr_cm_overdue(e, &last)) {
            bool alive;
            if ((rc = dr_cm_ping(e, missing, &alive, "all_gather", err))) break;
            if (alive) { last = dr_cm_now(); continue; }
            dr_cm_notice_send(e, missing);
            rc = dr_cm_blamed(e, missing, dr_fail(err, DR_EFAULT, "comm mpi rank %u: nothing from rank %u for %.1f s: "
                                                  "rank %u died or hangs", e->rank, missing, e->timeout, missing), err);
            break;
        }
        dr_cm_idle(last);
    }
    if (mrc != MPI_SUCCESS) rc = dr_cm_fail(err, mrc, e->rank, "all_gather");
    if (rc) dr_cm_cancel_all(req, 2 * (int)W);
    free(req);
    return rc;
}

int dr_cm_barrier(dr_comm *c, dr_err *err)
{
    uint8_t one = 1, *all;
    int rc;
    if (!c) return dr_fail(err, DR_EUSAGE, "comm mpi barrier: no endpoint (NULL)");
    if (!(all = malloc(dr_cm_ep(c)->size))) return dr_fail(err, DR_ENOMEM, "comm mpi barrier: no memory");
    rc = dr_cm_all_gather(c, &one, 1, all, err);
    free(all);
    return rc;
}

/* Nothing completed for the deadline: ping every other rank; one that does
 * not answer is named (and every other rank told). */
int dr_cm_blame(cm_ep *e, double *last, const char *what, dr_err *err)
{
    for (uint32_t q = 0; q < e->size; q++) {
        bool alive;
        int rc;
        if (q == e->rank) continue;
        if ((rc = dr_cm_ping(e, q, &alive, what, err))) return rc;
        if (!alive) {
            dr_cm_notice_send(e, q);
            return dr_cm_blamed(e, q, dr_fail(err, DR_EFAULT, "comm mpi rank %u %s: MPI_Iallreduce made no progress "
                                              "for %.1f s and rank %u does not answer: rank %u died or hangs", e->rank,
                                              what, e->timeout, q, q), err);
        }
    }
    *last = dr_cm_now();   /* every rank answers: a slow one, not a dead one */
    return DR_OK;
}

/* Polls req[0..n) until every one completes, with the endpoint's deadline
 * (dr_cm_blame when none completes for timeout seconds). */
int dr_cm_wait_coll(cm_ep *e, MPI_Request *req, int n, const char *what, dr_err *err)
{
    double last = dr_cm_now();
    int rc, mrc, left = n;
    dr_cm_awaiting(e, what, -1);
    while (left > 0) {
        int out = 0, idx[8];
        for (int i = 0; i < n; i += 8) {
            int m = n - i < 8 ? n - i : 8;
            if ((mrc = MPI_Testsome(m, req + i, &out, idx, MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
                return dr_cm_fail(err, mrc, e->rank, what);
            if (out != MPI_UNDEFINED && out > 0) { left -= out; last = dr_cm_now(); }
        }
        if (left <= 0) break;
        dr_cm_pong_serve(e);
        if ((rc = dr_cm_notice_check(e, what, err))) return rc;
        if (dr_cm_overdue(e, &last) && (rc = dr_cm_blame(e, &last, what, err))) return rc;
        dr_cm_idle(last);
    }
    return DR_OK;
}
