/* distref devices — the MPI comm: ranks are MPI processes (distref/comm.h).
 *
 * Each process holds one endpoint, its rank's local replicas, and nothing
 * of any other rank: what crosses ranks travels as MPI messages.
 *
 * One rank (the world of one process): the threads comm opened for a
 * single rank does everything (its local algorithms, packs, float orders
 * and byte counts), so `mpirun -np 1` gives the openmp variant's bits.
 *
 * More ranks, all_reduce (exact and float), the threads comm's schedule
 * "across ranks": the rank's replicas onto its local[0] (merged exactly, or
 * added in replica order), then a ring over the ranks per pack (the pack's
 * chunks [c*len/W, (c+1)*len/W)): reduce-scatter, W-1 steps in which rank w
 * sends chunk (w - step) mod W to w+1 and merges (adds) the chunk it gets
 * from w-1, then the all-gather, W-1 steps passing the totals on; then
 * local[0] copied to the rank's other replicas. Chunk c's float total is
 * therefore ((y_c + y_{c+1}) + ...) + y_{c-1}, as comm.h documents. Two
 * ranks exchange their whole float arrays at once instead (one wait for the
 * other rank instead of two, the same bytes) and add each chunk in that
 * order. Compact accumulators, unless the config asks for the ring
 * (DR_COMM_RANKS_RING), take the native sum (comm_mpi_native.c), which
 * adds the replicas' digits instead of merging them first.
 *
 * Messages. A step's chunks (every pack's) are cut into segments of at most
 * CM_SEG accumulators (or the floats that fit in the same bytes); up to CM_DEPTH segments are in flight each way
 * (MPI_Isend / MPI_Irecv into fixed slots), and MPI_Testsome drives
 * progress: a segment that arrives is merged at once while the others are
 * still on the wire, and the next is serialized into the slot a finished
 * send frees. Exact segments carry the DR_ACC_BYTES wire form
 * (dr_acc_serialize / dr_acc_deserialize, which validates), float segments
 * the floats. Segment k of a step has tag k mod CM_TAGS; MPI's
 * non-overtaking order between two ranks keeps steps apart.
 *
 * Deadlines (devices/mpi/comm_mpi_wait.c). Every wait polls; when no message
 * has moved for timeout_s it pings the rank it waits for, and fails
 * (DR_EFAULT) naming it if it does not answer, cancelling what it posted
 * and telling the other ranks (a notice), which then fail at once naming
 * the same rank. A rank that dies is so detected by every survivor
 * (mpirun, by default, also ends the job when a process dies: docs/MPI.md
 * measures which comes first).
 *
 * reduce_to: every rank's replicas to rank 0, which merges them into dst
 * (exact: each rank first merges its own; float: every array sent on its
 * own, added in global replica order). all_gather: all-pairs messages, so a
 * missing rank is named. Byte counts: every process counts the whole
 * collective on its own copy of the strategy, as the threads comm counts it.
 */
#include "devices/mpi/comm_mpi_internal.h"

#include <stdlib.h>
#include <string.h>

#include "devices/seams.h"

/* ---- segments ------------------------------------------------------------ */

/* The element a collective moves is its form (distref/form.h: dr_acc,
 * dr_cacc or float). Elements per segment: as many as fit in a slot of
 * CM_SEG * DR_ACC_BYTES bytes (CM_SEG full accumulators, 2.6 times as many
 * compact ones, 21 times as many floats). */
static size_t seg_len(const dr_form *f) { return (size_t)CM_SEG * DR_ACC_BYTES / f->wire; }

/* The segments of chunk c (of W) of every pack of an n-element array. */
static int ring_segments(const cm_ep *e, size_t n, uint32_t c, const dr_form *f, cm_seg **out, size_t *count,
                         dr_err *err)
{
    const ct_hub *h = &e->geom;
    uint32_t np = dr_ct_num_packs(h);
    size_t S = seg_len(f), cap = n / S + np + 1, k = 0, off = 0;
    cm_seg *s = malloc(cap * sizeof *s);
    if (!s) return dr_fail(err, DR_ENOMEM, "comm mpi: no memory for %zu segments", cap);
    for (uint32_t p = 0; p < np; p++) {
        size_t len = dr_ct_pack_len(h, p, n, off), lo, hi;
        dr_ct_chunk(len, e->size, c, &lo, &hi);
        DR_SEAM_PACK_END(lo, hi);
        for (size_t a = lo; a < hi; a += S) s[k++] = (cm_seg){ off + a, hi - a < S ? hi - a : S };
        off += len;
    }
    *out = s;
    *count = k;
    return DR_OK;
}

/* Whole arrays of n elements, cut into segments. */
static int whole_segments(size_t n, const dr_form *f, cm_seg **out, size_t *count, dr_err *err)
{
    size_t S = seg_len(f), cap = n / S + 1, k = 0;
    cm_seg *s = malloc(cap * sizeof *s);
    if (!s) return dr_fail(err, DR_ENOMEM, "comm mpi: no memory for %zu segments", cap);
    for (size_t a = 0; a < n; a += S) s[k++] = (cm_seg){ a, n - a < S ? n - a : S };
    *out = s;
    *count = k;
    return DR_OK;
}

static void pack_seg(const dr_form *f, const void *base, cm_seg sg, uint8_t *buf)
{
    f->serialize((const char *)base + sg.at * f->size, sg.len, buf);
}

/* A segment that arrived: floats added after the sum they hold or copied;
 * exact elements validated, then merged (through tmp, room for a segment)
 * or set. */
static int unpack_seg(cm_op op, const dr_form *f, void *base, cm_seg sg, const uint8_t *buf, void *tmp,
                      uint32_t from, dr_err *err)
{
    switch (op) {
    case CM_ADD:   /* the sender's sum first: ((y_c + y_{c+1}) + ...) */
        f->merge_after(dr_ct_at(f, base, sg.at), buf, sg.len);
        return DR_OK;
    case CM_COPY:
        memcpy(dr_ct_at(f, base, sg.at), buf, sg.len * f->size);
        return DR_OK;
    default:
        if (!f->deserialize(op == CM_SET ? dr_ct_at(f, base, sg.at) : tmp, sg.len, buf))
            return dr_fail(err, DR_EFORMAT, "comm mpi: a corrupt accumulator from rank %u (elements %zu..%zu)",
                           from, sg.at, sg.at + sg.len - 1);
        DR_SEAM_PARTIALS_IN(op == CM_MERGE, f, tmp, sg.len);
        if (op == CM_MERGE) f->merge(dr_ct_at(f, base, sg.at), tmp, sg.len);
        return DR_OK;
    }
}

/* ---- the message pump ------------------------------------------------------ */

typedef struct cm_flow {
    int           peer;      /* -1: none */
    void         *base;      /* the array segments are read from (send) or land in (recv) */
    const cm_seg *seg;
    size_t        nseg;
} cm_flow;

/* Sends tx's segments to tx.peer and receives rx's from rx.peer at once,
 * applying op to each segment that arrives. */
static int pump(cm_ep *e, cm_op op, const dr_form *f, cm_flow tx, cm_flow rx, const char *what, dr_err *err)
{
    MPI_Request req[2 * CM_DEPTH];
    MPI_Status st[2 * CM_DEPTH];
    int idx[2 * CM_DEPTH], out, mrc;
    size_t seg_of[2 * CM_DEPTH], next_s = 0, next_r = 0, done_s = 0, done_r = 0, w = f->wire;
    double last = dr_cm_now();
    if (tx.peer < 0) tx.nseg = 0;
    if (rx.peer < 0) rx.nseg = 0;
    for (int i = 0; i < 2 * CM_DEPTH; i++) req[i] = MPI_REQUEST_NULL;
    dr_cm_awaiting(e, what, rx.peer >= 0 ? rx.peer : tx.peer);
    while (done_s < tx.nseg || done_r < rx.nseg) {
        for (int i = 0; i < CM_DEPTH && next_r < rx.nseg; i++) {
            if (req[i] != MPI_REQUEST_NULL) continue;
            seg_of[i] = next_r;
            mrc = MPI_Irecv(e->rbuf + (size_t)i * CM_SEG * DR_ACC_BYTES, (int)(rx.seg[next_r].len * w), MPI_BYTE,
                            rx.peer, (int)(next_r % CM_TAGS), e->comm, &req[i]);
            if (mrc != MPI_SUCCESS) { dr_cm_cancel_all(req, 2 * CM_DEPTH); return dr_cm_fail(err, mrc, e->rank, what); }
            next_r++;
        }
        for (int i = CM_DEPTH; i < 2 * CM_DEPTH && next_s < tx.nseg; i++) {
            uint8_t *buf = e->sbuf + (size_t)(i - CM_DEPTH) * CM_SEG * DR_ACC_BYTES;
            if (req[i] != MPI_REQUEST_NULL) continue;
            pack_seg(f, tx.base, tx.seg[next_s], buf);
            mrc = MPI_Isend(buf, (int)(tx.seg[next_s].len * w), MPI_BYTE, tx.peer, (int)(next_s % CM_TAGS), e->comm,
                            &req[i]);
            if (mrc != MPI_SUCCESS) { dr_cm_cancel_all(req, 2 * CM_DEPTH); return dr_cm_fail(err, mrc, e->rank, what); }
            next_s++;
        }
        mrc = MPI_Testsome(2 * CM_DEPTH, req, &out, idx, st);
        if (mrc != MPI_SUCCESS) { dr_cm_cancel_all(req, 2 * CM_DEPTH); return dr_cm_fail(err, mrc, e->rank, what); }
        if (out == MPI_UNDEFINED) out = 0;
        for (int k = 0; k < out; k++) {
            int i = idx[k];
            if (i >= CM_DEPTH) { done_s++; continue; }
            {
                int got = 0;
                cm_seg sg = rx.seg[seg_of[i]];
                MPI_Get_count(&st[k], MPI_BYTE, &got);
                if ((size_t)got != sg.len * w) {
                    dr_cm_cancel_all(req, 2 * CM_DEPTH);
                    return dr_fail(err, DR_EFAULT, "comm mpi rank %u %s: rank %d sent %d bytes where %zu were "
                                   "expected (the ranks disagree on the arrays or the packs)", e->rank, what,
                                   rx.peer, got, sg.len * w);
                }
                if ((mrc = unpack_seg(op, f, rx.base, sg, e->rbuf + (size_t)i * CM_SEG * DR_ACC_BYTES, e->tmp,
                                      (uint32_t)rx.peer, err))) {
                    dr_cm_cancel_all(req, 2 * CM_DEPTH);
                    return mrc;
                }
                done_r++;
            }
        }
        if (out > 0) { last = dr_cm_now(); continue; }
        dr_cm_pong_serve(e);
        if ((mrc = dr_cm_notice_check(e, what, err))) {
            dr_cm_cancel_all(req, 2 * CM_DEPTH);
            return mrc;
        }
        if (dr_cm_overdue(e, &last)) {
            bool recv_waiting = done_r < rx.nseg, alive;
            if ((mrc = dr_cm_ping(e, (uint32_t)(recv_waiting ? rx.peer : tx.peer), &alive, what, err))) {
                dr_cm_cancel_all(req, 2 * CM_DEPTH);
                return mrc;
            }
            if (alive) { last = dr_cm_now(); continue; }   /* it waits on somebody else: so do we */
            dr_cm_cancel_all(req, 2 * CM_DEPTH);
            dr_cm_notice_send(e, (uint32_t)(recv_waiting ? rx.peer : tx.peer));
            return dr_cm_blamed(e, (uint32_t)(recv_waiting ? rx.peer : tx.peer),
                                dr_fail(err, DR_EFAULT, "comm mpi rank %u %s: nothing from rank %d for %.1f s (%s %zu "
                                        "of %zu messages): rank %d %s died or hangs", e->rank, what,
                                        recv_waiting ? rx.peer : tx.peer, e->timeout,
                                        recv_waiting ? "received" : "sent to it", recv_waiting ? done_r : done_s,
                                        recv_waiting ? rx.nseg : tx.nseg, recv_waiting ? rx.peer : tx.peer,
                                        e->size > 2 ? "or a rank before it in the ring" : ""), err);
        }
        dr_cm_idle(last);
    }
    return DR_OK;
}

/* ---- across ranks ---------------------------------------------------------- */

/* The rank's replicas onto its local[0], in replica order (back: local[0]
 * onto the others). */
static void rank_fold(const cm_ep *e, void *const *local, size_t n, const dr_form *f, bool back)
{
    uint32_t L = e->geom.cfg.local_replicas;
    size_t nb = (n + CM_SEG - 1) / CM_SEG;
    if (L == 1) return;
    #pragma omp parallel for schedule(static) if (nb > 1)
    for (size_t b = 0; b < nb; b++) {
        size_t a = b * CM_SEG, k = n - a < CM_SEG ? n - a : CM_SEG;
        for (uint32_t r = 1; r < L; r++) {
            if (back) memcpy(dr_ct_at(f, local[r], a), dr_ct_at(f, local[0], a), k * f->size);
            else f->merge(dr_ct_at(f, local[0], a), dr_ct_at(f, local[r], a), k);
        }
    }
}

/* Two ranks, floats: one exchange of the whole array instead of the ring's
 * two steps (one wait for the other rank a step instead of two; the same
 * bytes), each chunk added in the ring's order, chunk c being y_c + y_{c+1}:
 * the rank's own first in its own chunk, the other's first in the other. */
static int pair_f32(cm_ep *e, const dr_form *f, char *mine, size_t n, const char *what, dr_err *err)
{
    const ct_hub *h = &e->geom;
    char *other = malloc(n * f->size + 1);
    cm_seg *seg = NULL;
    size_t nseg = 0, off = 0;
    int peer = (int)(1 - e->rank), rc;
    if (!other) return dr_fail(err, DR_ENOMEM, "comm mpi %s: no memory for %zu floats", what, n);
    if ((rc = whole_segments(n, f, &seg, &nseg, err)) == DR_OK)
        rc = pump(e, CM_COPY, f, (cm_flow){ peer, mine, seg, nseg }, (cm_flow){ peer, other, seg, nseg }, what, err);
    for (uint32_t p = 0; rc == DR_OK && p < dr_ct_num_packs(h); p++) {
        size_t len = dr_ct_pack_len(h, p, n, off);
        for (uint32_t c = 0; c < 2; c++) {
            size_t lo, hi;
            dr_ct_chunk(len, 2, c, &lo, &hi);
            if (c == e->rank) f->merge(dr_ct_at(f, mine, off + lo), dr_ct_at(f, other, off + lo), hi - lo);
            else f->merge_after(dr_ct_at(f, mine, off + lo), dr_ct_at(f, other, off + lo), hi - lo);
        }
        off += len;
    }
    free(seg);
    free(other);
    return rc;
}

static int ring(cm_ep *e, void *const *local, size_t n, const dr_form *f, const char *what, dr_err *err)
{
    uint32_t W = e->size, w = e->rank, next = (w + 1) % W, prev = (w + W - 1) % W;
    const bool fast = !f->exact;
    int rc = DR_OK;
    if (n) rank_fold(e, local, n, f, false);
    dr_ct_count_ranks(&e->geom, n, f->wire);
    if (fast && W == 2 && n) {
        rc = pair_f32(e, f, local[0], n, what, err);
        if (rc == DR_OK) rank_fold(e, local, n, f, true);
        return rc;
    }
    for (uint32_t phase = 0; rc == DR_OK && phase < 2; phase++)
        for (uint32_t step = 0; rc == DR_OK && step + 1 < W; step++) {
            cm_seg *ss = NULL, *rs = NULL;
            size_t ns = 0, nr = 0;
            uint32_t cs = (w + W - step + phase) % W, cr = (prev + W - step + phase) % W;
            cm_op op = fast ? (phase ? CM_COPY : CM_ADD) : (phase ? CM_SET : CM_MERGE);
            if ((rc = ring_segments(e, n, cs, f, &ss, &ns, err)) == DR_OK &&
                (rc = ring_segments(e, n, cr, f, &rs, &nr, err)) == DR_OK)
                rc = pump(e, op, f, (cm_flow){ (int)next, local[0], ss, ns }, (cm_flow){ (int)prev, local[0], rs, nr },
                          what, err);
            free(ss);
            free(rs);
        }
    if (rc == DR_OK && n) rank_fold(e, local, n, f, true);
    return rc;
}

/* ---- checks ------------------------------------------------------------------ */

static int check_call(cm_ep *e, const char *what, void *const *local, size_t n, dr_err *err)
{
    if (e->geom.cfg.alg == DR_COMM_TORUS)
        return dr_fail(err, DR_EUNSUPPORTED, "comm mpi %s: the tpu strategy's torus runs in one rank only", what);
    if (n && !local) return dr_fail(err, DR_EUSAGE, "comm mpi %s: no local arrays (NULL)", what);
    for (uint32_t r = 0; n && r < e->geom.cfg.local_replicas; r++)
        if (!local[r]) return dr_fail(err, DR_EUSAGE, "comm mpi %s: local replica %u's array is NULL", what, r);
    return dr_ct_check_lengths(&e->geom, what, n, err);
}

/* ---- the operations ---------------------------------------------------------- */

static void cm_close(dr_comm **eps, uint32_t neps)
{
    for (uint32_t i = 0; eps && i < neps; i++) {
        cm_ep *e;
        if (!eps[i]) continue;
        e = dr_cm_ep(eps[i]);
        eps[i] = NULL;
        if (e->inner) dr_comm_threads()->close(&e->inner, 1);
        if (e->comm != MPI_COMM_NULL && dr_mpi_active()) MPI_Comm_free(&e->comm);
        free(e->geom.tensor_len);
        free(e->sbuf);
        free(e->rbuf);
        free(e->tmp);
        free(e->fx);
        free(e->gx);
        dr_cm_native_release(e);
        free(e);
    }
}

static int cm_open(const dr_comm_config *cfg, dr_comm **eps, uint32_t *neps, dr_err *err)
{
    cm_ep *e;
    int rank = 0, size = 0, rc;
    uint32_t one = 1;
    if (!cfg || !eps || !neps)
        return dr_fail(err, DR_EUSAGE, "comm mpi: open needs a config, an endpoint array and a count");
    if (!dr_mpi_active())
        return dr_fail(err, DR_ESTATE, "comm mpi: MPI is not initialized (run `mpirun -np N bin/distref train "
                       "--variant=mpi ...`)");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (cfg->num_ranks != (uint32_t)size)
        return dr_fail(err, DR_EUSAGE, "comm mpi: the strategy has %u worker(s) (multi_worker_mirrored: one per "
                       "TF_CONFIG worker; every other strategy: one) but MPI's world has %d ranks (mpirun -np)",
                       cfg->num_ranks, size);
    if (cfg->local_replicas == 0 || cfg->num_packs < 0 || (cfg->ntensors && !cfg->tensor_len))
        return dr_fail(err, DR_EUSAGE, "comm mpi: local_replicas >= 1, num_packs >= 0 and tensor lengths needed");
    if (cfg->local_replicas > DR_MAX_DEVICES)
        return dr_fail(err, DR_EUSAGE, "comm mpi: %u local replicas; at most %d", cfg->local_replicas, DR_MAX_DEVICES);
    if (cfg->strategy && (uint64_t)cfg->num_ranks * cfg->local_replicas != cfg->strategy->num_replicas)
        return dr_fail(err, DR_EUSAGE, "comm mpi: %u ranks x %u local replicas, but the strategy has %u replicas",
                       cfg->num_ranks, cfg->local_replicas, cfg->strategy->num_replicas);
    if (!(e = calloc(1, sizeof *e))) return dr_fail(err, DR_ENOMEM, "comm mpi: no memory");
    e->comm = MPI_COMM_NULL;
    e->rank = (uint32_t)rank;
    e->size = (uint32_t)size;
    e->base.hub = &e->geom;
    e->base.rank = e->rank;
    e->geom.cfg = *cfg;
    e->timeout = cfg->timeout_s > 0 ? cfg->timeout_s : DR_COMM_TIMEOUT_DEFAULT;
    e->geom.tensor_len = malloc((size_t)cfg->ntensors * sizeof(size_t) + 1);
    e->sbuf = malloc((size_t)CM_DEPTH * CM_SEG * DR_ACC_BYTES);
    e->rbuf = malloc((size_t)CM_DEPTH * CM_SEG * DR_ACC_BYTES);
    e->tmp = malloc((size_t)CM_SEG * sizeof(dr_acc));   /* a segment: CM_SEG dr_acc or more dr_cacc */
    if (!e->geom.tensor_len || !e->sbuf || !e->rbuf || !e->tmp) {
        dr_comm *d = &e->base;
        cm_close(&d, 1);
        return dr_fail(err, DR_ENOMEM, "comm mpi: no memory for the message slots");
    }
    if (cfg->ntensors) memcpy(e->geom.tensor_len, cfg->tensor_len, (size_t)cfg->ntensors * sizeof(size_t));
    e->geom.cfg.tensor_len = e->geom.tensor_len;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &e->comm) != MPI_SUCCESS ||
        MPI_Comm_set_errhandler(e->comm, MPI_ERRORS_RETURN) != MPI_SUCCESS) {
        dr_comm *d = &e->base;
        cm_close(&d, 1);
        return dr_fail(err, DR_EFAULT, "comm mpi: could not duplicate MPI_COMM_WORLD");
    }
    if (size == 1 && (rc = dr_comm_threads()->open(cfg, &e->inner, &one, err))) {
        dr_comm *d = &e->base;
        cm_close(&d, 1);
        return rc;
    }
    if (size > 1 && cfg->alg == DR_COMM_TORUS) {
        dr_comm *d = &e->base;
        cm_close(&d, 1);
        return dr_fail(err, DR_EUNSUPPORTED, "comm mpi: the tpu strategy's torus runs in one rank, not %d", size);
    }
    eps[0] = &e->base;
    *neps = 1;
    return DR_OK;
}

static uint32_t cm_rank(const dr_comm *c) { return ((const cm_ep *)(const void *)c)->rank; }
static uint32_t cm_num_ranks(const dr_comm *c) { return ((const cm_ep *)(const void *)c)->size; }

static int cm_all_reduce(dr_comm *c, dr_form_id form, void *const *local, size_t n, dr_err *err)
{
    const dr_form *f;
    cm_ep *e;
    int rc;
    if (!c) return dr_fail(err, DR_EUSAGE, "comm mpi all_reduce: no endpoint (NULL)");
    /* exact floats: not a merge of partials; its own algorithm, any rank count */
    if (form == DR_FORM_F32_EXACT) return dr_cm_all_reduce_f32_exact(c, (float *const *)local, n, err);
    if ((rc = dr_ct_form(form, "mpi", "all_reduce", &f, err))) return rc;
    e = dr_cm_ep(c);
    if (e->inner) return dr_comm_threads()->all_reduce(e->inner, form, local, n, err);
    if ((rc = check_call(e, "all_reduce", local, n, err))) return rc;
    if (form != DR_FORM_CACC || e->geom.cfg.ranks_alg == DR_COMM_RANKS_RING) return ring(e, local, n, f, "all_reduce", err);
    /* compact: the library's own all-reduce on integer digits (comm_mpi_native.c);
     * the strategy's byte counts are the ring's, as for every algorithm */
    dr_ct_count_ranks(&e->geom, n, f->wire);
    if ((rc = dr_cm_native_compact(e, (dr_cacc *const *)local, e->geom.cfg.local_replicas, n, "all_reduce", err)))
        return rc;
    if (n) rank_fold(e, local, n, f, true);
    return DR_OK;
}

/* Every rank's replicas to rank 0's dst: exact, each rank's merged first;
 * copy_first (floats), every array on its own, in global replica order,
 * the first one copied. */
static int reduce_to_impl(cm_ep *e, void *const *local, size_t n, uint32_t dst_device, void *dst,
                          const dr_form *f, const char *what, dr_err *err)
{
    uint32_t L = e->geom.cfg.local_replicas, W = e->size;
    const bool fast = f->copy_first;
    cm_seg *seg = NULL;
    size_t nseg = 0;
    char *mine = NULL;
    int rc;
    if ((rc = check_call(e, what, local, n, err))) return rc;
    if ((rc = dr_ct_check_dst(&e->geom, e->rank, n, dst, dst_device, what, err))) return rc;
    if ((rc = whole_segments(n, f, &seg, &nseg, err))) return rc;
    if (e->rank == 0) {
        if (fast) memcpy(dst, local[0], n * f->size);
        for (uint32_t r = fast ? 1 : 0; r < L; r++) f->merge(dst, local[r], n);
        for (uint32_t q = 1; rc == DR_OK && q < W; q++)
            for (uint32_t r = 0; rc == DR_OK && r < (fast ? L : 1); r++)
                rc = pump(e, fast ? CM_ADD : CM_MERGE, f, (cm_flow){ -1, NULL, NULL, 0 },
                          (cm_flow){ (int)q, dst, seg, nseg }, what, err);
    } else if (fast) {
        for (uint32_t r = 0; rc == DR_OK && r < L; r++)
            rc = pump(e, CM_ADD, f, (cm_flow){ 0, local[r], seg, nseg }, (cm_flow){ -1, NULL, NULL, 0 }, what, err);
    } else if (!(mine = calloc(n + 1, f->size))) {
        rc = dr_fail(err, DR_ENOMEM, "comm mpi %s: no memory for %zu accumulators", what, n);
    } else {
        for (uint32_t r = 0; r < L; r++) f->merge(mine, local[r], n);
        rc = pump(e, CM_MERGE, f, (cm_flow){ 0, mine, seg, nseg }, (cm_flow){ -1, NULL, NULL, 0 }, what, err);
    }
    for (uint32_t q = 0; rc == DR_OK && q < W; q++)
        for (uint32_t r = 0; r < L; r++)
            dr_ct_count(e->geom.cfg.strategy, dr_ct_dev_of(&e->geom, q, r), dst_device, n, f->wire);
    free(mine);
    free(seg);
    return rc;
}

static int cm_reduce_to(dr_comm *c, dr_form_id form, void *const *local, size_t n, uint32_t dst_device, void *dst,
                        dr_err *err)
{
    const dr_form *f;
    cm_ep *e;
    int rc;
    if (!c) return dr_fail(err, DR_EUSAGE, "comm mpi reduce_to: no endpoint (NULL)");
    if ((rc = dr_ct_form(form, "mpi", "reduce_to", &f, err))) return rc;
    e = dr_cm_ep(c);
    if (e->inner) return dr_comm_threads()->reduce_to(e->inner, form, local, n, dst_device, dst, err);
    return reduce_to_impl(e, local, n, dst_device, dst, f, "reduce_to", err);
}

static int cm_ranges(dr_comm *c, dr_form_id form, void *const *local, const size_t *ranges, uint32_t nranges,
                     uint32_t l, double *seconds, dr_err *err)
{
    if (!c) return dr_fail(err, DR_EUSAGE, "comm mpi all_reduce_ranges: no endpoint (NULL)");
    if (!dr_cm_ep(c)->inner)
        return dr_fail(err, DR_EUNSUPPORTED, "comm mpi all_reduce_ranges: the tpu strategy runs in one rank");
    return dr_comm_threads()->all_reduce_ranges(dr_cm_ep(c)->inner, form, local, ranges, nranges, l, seconds, err);
}

/* Each op that waits, then the end of its wait for its last words
 * (mpi_last_words.c: a SIGTERM after it is no longer "during" it). */
static int op_all_reduce(dr_comm *c, dr_form_id form, void *const *local, size_t n, dr_err *err)
{
    int rc = cm_all_reduce(c, form, local, n, err);
    dr_cm_awaited();
    return rc;
}

static int op_reduce_to(dr_comm *c, dr_form_id form, void *const *local, size_t n, uint32_t dst_device, void *dst,
                        dr_err *err)
{
    int rc = cm_reduce_to(c, form, local, n, dst_device, dst, err);
    dr_cm_awaited();
    return rc;
}

static int op_barrier(dr_comm *c, dr_err *err)
{
    int rc = dr_cm_barrier(c, err);
    dr_cm_awaited();
    return rc;
}

static int op_all_gather(dr_comm *c, const void *mine, size_t bytes, void *all, dr_err *err)
{
    int rc = dr_cm_all_gather(c, mine, bytes, all, err);
    dr_cm_awaited();
    return rc;
}

static int op_all_reduce_round(dr_comm *c, const dr_cacc *const *local, const dr_dd_parts *dd, size_t n, uint32_t d,
                               float *const *out, size_t *overflowed, dr_err *err)
{
    int rc = dr_cm_all_reduce_round(c, local, dd, n, d, out, overflowed, err);
    dr_cm_awaited();
    return rc;
}

static const dr_comm_ops mpi_ops = {
    .name = "mpi",
    .open = cm_open,
    .close = cm_close,
    .rank = cm_rank,
    .num_ranks = cm_num_ranks,
    .all_reduce = op_all_reduce,
    .reduce_to = op_reduce_to,
    .all_reduce_ranges = cm_ranges,
    .barrier = op_barrier,
    .all_gather = op_all_gather,
    .all_reduce_round = op_all_reduce_round,
};

const dr_comm_ops *dr_comm_mpi(void)
{
    return &mpi_ops;
}
