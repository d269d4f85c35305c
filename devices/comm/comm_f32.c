/* distref devices — the threads comm's float collectives (fast numerics):
 * all_reduce_f32 and reduce_to_f32 of distref/comm.h.
 *
 * TensorFlow's float all-reduce: the same hub, agreement, algorithms, packs,
 * chunks and byte accounting as the exact collectives of
 * devices/comm/comm_threads.c, with floats on the wire (4 bytes per element) and
 * float additions in the algorithm's order (distref/comm.h lists it):
 *   RING          chunk c of a pack: member c's element, then each member
 *                 after it in ring order adds its own on receipt
 *                 (reduce-scatter), the total copied around (all-gather):
 *                 ((x_c + x_{c+1}) + ...) + x_{c-1};
 *   HIERARCHICAL  each half summed in replica order, then s0 + s1, copied
 *                 to every replica (HierarchicalCopyAllReduce's roots only
 *                 decide which links carry bytes);
 *   ONE_DEVICE    x_0 + x_1 + ... + x_{R-1}, copied to every replica;
 *   across ranks  each rank folds its replicas onto local[0] in order, a
 *                 ring over the ranks (chunk c starting at rank c), copied
 *                 back to the rank's other replicas;
 *   reduce_to     dst = the sum in global replica order.
 * Every element's total is formed once and copied, so every replica ends
 * with the same bits. As in the exact comm, the elements are cut into
 * blocks (DR_CT_BLOCK_F32), one OpenMP iteration each; a block runs the
 * algorithm's whole data flow for its elements, so the order of additions
 * of an element never depends on the blocking or the thread count.
 * Nothing here needs another rank's memory except through the slots, as
 * an MPI comm would send it.
 */
#include "devices/comm/comm_internal.h"

#include <string.h>

/* Elements below which a float collective's pass stays on the calling
 * thread (a pass over 2^18 floats is far cheaper than a busy team's wake-up). */
#define PAR_F32 ((size_t)1 << 18)

static size_t nblocks(size_t len)
{
    return (len + DR_CT_BLOCK_F32 - 1) / DR_CT_BLOCK_F32;
}

static int check_arrays(const ct_hub *h, const char *what, float *const *local, size_t n, dr_err *err)
{
    if (n == 0) return DR_OK;
    if (!local) return dr_fail(err, DR_EUSAGE, "comm threads %s: no local arrays (NULL)", what);
    for (uint32_t r = 0; r < h->cfg.local_replicas; r++)
        if (!local[r]) return dr_fail(err, DR_EUSAGE, "comm threads %s: local replica %u's array is NULL", what, r);
    return DR_OK;
}

/* t[0..k) = x_lo + x_{lo+1} + ... + x_{hi-1} at offset at, left to right. */
static void fold(float *t, float *const *x, uint32_t lo, uint32_t hi, size_t at, size_t k)
{
    memcpy(t, x[lo] + at, k * sizeof *t);
    for (uint32_t r = lo + 1; r < hi; r++) {
        const float *v = x[r] + at;
        #pragma omp simd
        for (size_t i = 0; i < k; i++) t[i] = t[i] + v[i];
    }
}

static void to_all(float *const *x, uint32_t R, const float *t, size_t at, size_t k)
{
    for (uint32_t r = 0; r < R; r++) memcpy(x[r] + at, t, k * sizeof *t);
}

/* The ring's data flow for elements [at, at+k) of chunk c: reduce-scatter
 * from member c around to c-1, each adding its own, then the all-gather. */
void dr_ct_ring_chain_f32(float *const *ring, uint32_t n, uint32_t c, size_t at, size_t k)
{
    for (uint32_t s = 0; s + 1 < n; s++) {
        uint32_t j = (c + s) % n;
        float *dst = ring[(j + 1) % n] + at;
        const float *src = ring[j] + at;
        #pragma omp simd
        for (size_t i = 0; i < k; i++) dst[i] = src[i] + dst[i];
    }
    for (uint32_t s = 0; s + 1 < n; s++) {
        uint32_t j = (c + s + n - 1) % n;
        memcpy(ring[(j + 1) % n] + at, ring[j] + at, k * sizeof(float));
    }
}

/* The algorithm's data flow for elements [a, e) of the pack [off, off+len). */
static void local_block(const ct_hub *h, float *const *x, size_t off, size_t len, size_t a, size_t e)
{
    uint32_t R = h->cfg.local_replicas, half = R / 2;
    float t0[DR_CT_BLOCK_F32], t1[DR_CT_BLOCK_F32];
    size_t k = e - a;
    switch (h->cfg.alg) {
    case DR_COMM_RING:
        for (uint32_t c = 0; c < R; c++) {
            size_t lo, hi;
            dr_ct_chunk(len, R, c, &lo, &hi);
            if (lo < a) lo = a;
            if (hi > e) hi = e;
            if (lo < hi) dr_ct_ring_chain_f32(x, R, c, off + lo, hi - lo);
        }
        break;
    case DR_COMM_HIERARCHICAL:
        fold(t1, x, half, R, off + a, k);
        if (half) {
            fold(t0, x, 0, half, off + a, k);
            #pragma omp simd
            for (size_t i = 0; i < k; i++) t0[i] = t0[i] + t1[i];
            to_all(x, R, t0, off + a, k);
        } else {
            to_all(x, R, t1, off + a, k);
        }
        break;
    default:   /* ONE_DEVICE */
        fold(t0, x, 0, R, off + a, k);
        to_all(x, R, t0, off + a, k);
        break;
    }
}

static void local_all_reduce(const ct_hub *h, float *const *x, size_t n)
{
    size_t off = 0;
    if (h->cfg.local_replicas == 1) return;
    for (uint32_t p = 0; p < dr_ct_num_packs(h); p++) {
        size_t len = dr_ct_pack_len(h, p, n, off), nb = nblocks(len);
        #pragma omp parallel for schedule(static) if (len >= PAR_F32)
        for (size_t b = 0; b < nb; b++) {
            size_t a = b * DR_CT_BLOCK_F32, e = len - a > DR_CT_BLOCK_F32 ? a + DR_CT_BLOCK_F32 : len;
            local_block(h, x, off, len, a, e);
        }
        dr_ct_count_local_pack(h, len, p, sizeof(float));
        off += len;
    }
}

/* ---- across ranks ------------------------------------------------------- */

/* A rank's replicas folded onto its local[0] in order (back: copied out). */
static void rank_gather(const ct_hub *h, float *const *x, size_t n, bool back)
{
    uint32_t R = h->cfg.local_replicas;
    size_t nb = nblocks(n);
    if (R == 1) return;
    #pragma omp parallel for schedule(static) if (n >= PAR_F32)
    for (size_t b = 0; b < nb; b++) {
        size_t a = b * DR_CT_BLOCK_F32, k = n - a > DR_CT_BLOCK_F32 ? DR_CT_BLOCK_F32 : n - a;
        for (uint32_t r = 1; r < R; r++) {
            if (back) {
                memcpy(x[r] + a, x[0] + a, k * sizeof(float));
            } else {
                float *t = x[0] + a;
                const float *v = x[r] + a;
                #pragma omp simd
                for (size_t i = 0; i < k; i++) t[i] = t[i] + v[i];
            }
        }
    }
}

/* Step `step` of the ring over ranks as rank w receives it (the exact
 * comm's schedule): rank w-1's chunk (w-1 - step + phase) mod W of every
 * pack, added to its own (phase 0) or copied (phase 1). */
static void rank_ring_recv(const ct_hub *h, uint32_t w, size_t n, uint32_t step, uint32_t phase)
{
    uint32_t W = h->cfg.num_ranks, prev = (w + W - 1) % W, c = (prev + W - step + phase) % W;
    float *dst = h->slot[w].flocal[0];
    const float *src = h->slot[prev].flocal[0];
    size_t off = 0;
    for (uint32_t p = 0; p < dr_ct_num_packs(h); p++) {
        size_t len = dr_ct_pack_len(h, p, n, off), lo, hi, nb;
        dr_ct_chunk(len, W, c, &lo, &hi);
        nb = nblocks(hi - lo);
        #pragma omp parallel for schedule(static) if (hi - lo >= PAR_F32)
        for (size_t b = 0; b < nb; b++) {
            size_t a = off + lo + b * DR_CT_BLOCK_F32, e = a + DR_CT_BLOCK_F32 < off + hi ? a + DR_CT_BLOCK_F32 : off + hi;
            if (phase == 1) memcpy(dst + a, src + a, (e - a) * sizeof(float));
            else {
                #pragma omp simd
                for (size_t i = a; i < e; i++) dst[i] = src[i] + dst[i];
            }
        }
        off += len;
    }
}

static int ranks_all_reduce(dr_comm *c, float *const *x, size_t n, dr_err *err)
{
    ct_hub *h = c->hub;
    uint32_t W = h->cfg.num_ranks;
    int rc;
    if (n) rank_gather(h, x, n, false);
    if (c->rank == 0) dr_ct_count_ranks(h, n, sizeof(float));
    if ((rc = dr_ct_sync(h, err))) return rc;
    for (uint32_t phase = 0; phase < 2; phase++)
        for (uint32_t step = 0; step + 1 < W; step++) {
            if (n) rank_ring_recv(h, c->rank, n, step, phase);
            if ((rc = dr_ct_sync(h, err))) return rc;
        }
    if (n) rank_gather(h, x, n, true);
    return DR_OK;
}

/* ---- the operations ----------------------------------------------------- */

int dr_ct_all_reduce_f32(dr_comm *c, float *const *local, size_t n, dr_err *err)
{
    ct_slot *me;
    int rc;
    if (!c) return dr_fail(err, DR_EUSAGE, "comm threads all_reduce_f32: no endpoint (NULL)");
    me = dr_ct_publish(c, NULL, NULL, n, NULL, 0);
    me->flocal = local;
    if (c->hub->cfg.alg == DR_COMM_TORUS)
        me->rc = dr_fail(&me->err, DR_EUSAGE, "comm threads all_reduce_f32: algorithm TORUS reduces by "
                         "all_reduce_ranges_f32");
    if (me->rc == DR_OK) me->rc = dr_ct_check_lengths(c->hub, "all_reduce_f32", n, &me->err);
    if (me->rc == DR_OK) me->rc = check_arrays(c->hub, "all_reduce_f32", local, n, &me->err);
    if ((rc = dr_ct_agree(c, "all_reduce_f32", err))) return rc;
    if (c->hub->cfg.num_ranks > 1) return ranks_all_reduce(c, local, n, err);
    local_all_reduce(c->hub, local, n);
    return DR_OK;
}

int dr_ct_reduce_to_f32(dr_comm *c, float *const *local, size_t n, uint32_t dst_device, float *dst, dr_err *err)
{
    ct_hub *h;
    ct_slot *me;
    uint32_t W, R, w;
    size_t lo, hi, nb;
    int rc;
    if (!c) return dr_fail(err, DR_EUSAGE, "comm threads reduce_to_f32: no endpoint (NULL)");
    h = c->hub;
    me = dr_ct_publish(c, NULL, NULL, n, NULL, dst_device);
    me->flocal = local;
    me->fdst = dst;
    me->rc = check_arrays(h, "reduce_to_f32", local, n, &me->err);
    if (me->rc == DR_OK) me->rc = dr_ct_check_dst(h, c->rank, n, dst, dst_device, "reduce_to_f32", &me->err);
    if ((rc = dr_ct_agree(c, "reduce_to_f32", err))) return rc;
    W = h->cfg.num_ranks;
    R = h->cfg.local_replicas;
    w = c->rank;
    lo = (size_t)w * n / W;
    hi = ((size_t)w + 1) * n / W;
    dst = h->slot[0].fdst;
    nb = nblocks(hi - lo);
    #pragma omp parallel for schedule(static) if (hi - lo >= PAR_F32)
    for (size_t b = 0; b < nb; b++) {
        size_t a = lo + b * DR_CT_BLOCK_F32, k = hi - a > DR_CT_BLOCK_F32 ? DR_CT_BLOCK_F32 : hi - a;
        memcpy(dst + a, h->slot[0].flocal[0] + a, k * sizeof(float));
        for (uint32_t q = 0; q < W; q++)
            for (uint32_t r = q ? 0 : 1; r < R; r++) {
                const float *v = h->slot[q].flocal[r] + a;
                #pragma omp simd
                for (size_t i = 0; i < k; i++) dst[a + i] = dst[a + i] + v[i];
            }
    }
    if (w == 0)
        for (uint32_t q = 0; q < W; q++)
            for (uint32_t r = 0; r < R; r++)
                dr_ct_count(h->cfg.strategy, dr_ct_dev_of(h, q, r), h->slot[0].dst_device, n, sizeof(float));
    return dr_ct_sync(h, err);
}
