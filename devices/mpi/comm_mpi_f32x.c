/* distref devices — the MPI comm's exact float all-reduce
 * (distref/comm.h: all_reduce of DR_FORM_F32_EXACT): every replica of every rank holds
 * n floats; afterwards each holds, per element, the exact sum of all
 * R = W L of them rounded once (round to nearest even): exact.h's
 * contract, so the bits depend on neither the rank count, nor the replica
 * count, nor the order.
 *
 * Floats need no accumulator on the wire: a float is already exact. So
 * the all-reduce is a reduce-scatter of the raw floats, an exact sum where
 * all of an element's terms are, and an all-gather of the rounded sums:
 *
 * 1. Rank q owns chunk q, [q n/W, (q+1) n/W). Every rank sends each other
 *    rank its L replicas' floats of that rank's chunk (point to point, all
 *    in flight at once; Open MPI moves each message in one copy).
 * 2. The owner sums each element of its chunk over the R terms, exactly,
 *    rounded once (fx_sum below): two terms are one IEEE 754 addition (it
 *    is the correctly rounded exact sum); more are int64 digits on a grid
 *    set by the element's largest exponent, rounded by one conversion. A
 *    term below the grid, an inf or a NaN, or a result in the subnormal
 *    range (where two roundings could differ from one) goes through a
 *    dr_acc for that element alone: the same bits, exact.h.
 * 3. Every owner sends its rounded chunk to every other rank.
 *
 * Per rank that is (W-1)/W of the floats each way, what a float ring's
 * reduce-scatter and all-gather move. Every wait polls with the endpoint's
 * deadline (dr_cm_wait_coll). The receive buffers stay with the endpoint
 * between calls (grown when needed, freed at close).
 */
#include "distref/exact_parts.h"
#include "devices/mpi/comm_mpi_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "devices/seams.h"

#define FX_MAX   ((size_t)1 << 30)   /* elements per call at most */
#define FX_BLOCK 4096               /* elements checked for inf and NaN at once */
#define FX_COLS  256                /* elements summed term by term at once */
#define FX_PIECE ((size_t)1 << 16)   /* floats per message at most: each completes soon, so a wait sees
                                        progress and keeps the core (dr_cm_idle) */

/* Headroom of an int64 digit for R terms: each below 2^(63 - ceil(log2 R)). */
static int fx_shift(uint64_t R)
{
    int lg = 0;
    while (((uint64_t)1 << lg) < R) lg++;
    return DR_SEAM_F32X_DIGIT_BITS(39 - lg);
}

/* One element the slow way: a full accumulator, rounded once. */
static float fx_slow(const float *const *t, uint32_t R, size_t i)
{
    dr_acc a;
    dr_acc_init(&a);
    for (uint32_t k = 0; k < R; k++) dr_acc_add(&a, t[k][i]);
    return dr_acc_round(&a);
}

/* Whether no term of a[0..n), b[0..n) is an inf or a NaN; out = a + b
 * (IEEE addition; out may be a). SSE2, x86-64's baseline, four at a time;
 * plain C elsewhere (the same bits: the same operations). */
#if defined(__SSE2__) && !defined(DR_EXACT_NO_SIMD)
#include <emmintrin.h>
static bool fx_all_finite(const float *a, const float *b, size_t n)
{
    const __m128i ex = _mm_set1_epi32(0x7f800000);
    __m128i bad = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m128i x = _mm_and_si128(_mm_castps_si128(_mm_loadu_ps(a + i)), ex);
        __m128i y = _mm_and_si128(_mm_castps_si128(_mm_loadu_ps(b + i)), ex);
        bad = _mm_or_si128(bad, _mm_or_si128(_mm_cmpeq_epi32(x, ex), _mm_cmpeq_epi32(y, ex)));
    }
    for (; i < n; i++) {
        uint32_t x = dr_f32_bits(a[i]) & 0x7f800000u, y = dr_f32_bits(b[i]) & 0x7f800000u;
        if (x == 0x7f800000u || y == 0x7f800000u) return false;
    }
    return _mm_movemask_epi8(bad) == 0;
}

static void fx_add(float *out, const float *a, const float *b, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, _mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
    for (; i < n; i++) out[i] = a[i] + b[i];
}
#else
static bool fx_all_finite(const float *a, const float *b, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= ((dr_f32_bits(a[i]) & 0x7f800000u) == 0x7f800000u) | ((dr_f32_bits(b[i]) & 0x7f800000u) == 0x7f800000u);
    return !bad;
}

static void fx_add(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}
#endif

/* out[i] = the exact sum of t[0..R)[i], rounded once, for i < n. */
static void fx_sum(float *out, const float *const *t, uint32_t R, size_t n, int s)
{
    if (R == 1) {
        if (out != t[0]) memcpy(out, t[0], n * sizeof *out);
        return;
    }
    if (R == 2) {   /* IEEE addition of two floats is their exact sum rounded once; inf and NaN as exact.h says */
        for (size_t lo = 0; lo < n; lo += FX_BLOCK) {
            size_t hi = lo + FX_BLOCK < n ? lo + FX_BLOCK : n;
            bool finite_all = DR_SEAM_F32X_FINITE(fx_all_finite(t[0] + lo, t[1] + lo, hi - lo));
            if (finite_all) fx_add(out + lo, t[0] + lo, t[1] + lo, hi - lo);
            else
                for (size_t i = lo; i < hi; i++) {
                    float a = t[0][i], b = t[1][i];
                    bool finite = ((dr_f32_bits(a) >> 23 & 0xffu) != 0xffu) & ((dr_f32_bits(b) >> 23 & 0xffu) != 0xffu);
                    out[i] = finite ? a + b : fx_slow(t, R, i);
                }
        }
        return;
    }
    for (size_t lo = 0; lo < n; lo += FX_COLS) {   /* a block of elements at a time, term by term */
        size_t m = n - lo < FX_COLS ? n - lo : FX_COLS;
        uint64_t acc[FX_COLS];   /* the int64 sums, kept unsigned: each fits, so no wrap shows in the end */
        int32_t U[FX_COLS];
        uint32_t lost[FX_COLS], notneg0[FX_COLS];
        for (size_t j = 0; j < m; j++) { U[j] = 1; acc[j] = 0; lost[j] = 0; notneg0[j] = 0; }
        for (uint32_t k = 0; k < R; k++)
            for (size_t j = 0; j < m; j++) {
                uint32_t b = dr_f32_bits(t[k][lo + j]), ef = b >> 23 & 0xffu;
                U[j] = (int32_t)ef > U[j] ? (int32_t)ef : U[j];
                notneg0[j] |= b ^ 0x80000000u;
            }
        for (uint32_t k = 0; k < R; k++)
            for (size_t j = 0; j < m; j++) {   /* each term times 2^-g, g = U - 150 - s: below 2^(24 + s) */
                uint32_t b = dr_f32_bits(t[k][lo + j]), ef = b >> 23 & 0xffu, mt = (b & 0x7fffffu) | (ef ? 0x800000u : 0);
                int sh = (int)(ef ? ef : 1) - U[j] + s;
                uint32_t l = sh > 0 ? (uint32_t)sh : 0, r = sh < 0 ? (uint32_t)(-sh > 31 ? 31 : -sh) : 0;
                uint64_t d = ((uint64_t)mt << l) >> r;   /* m < 2^24: a shift beyond 23 leaves nothing */
                lost[j] |= mt & ((1u << r) - 1u);         /* bits below the grid: this element goes slow */
                acc[j] += (b >> 31) ? 0 - d : d;
            }
        for (size_t j = 0; j < m; j++) {
            size_t i = lo + j;
            if (U[j] == 255 || lost[j]) out[i] = fx_slow(t, R, i);   /* inf, NaN, or bits below the grid */
            else if (!acc[j]) out[i] = notneg0[j] ? 0.0f : -0.0f;
            else {
                int64_t v = acc[j] >> 63 ? -(int64_t)(0 - acc[j]) : (int64_t)acc[j];   /* |v| < 2^63 */
                uint64_t pb = (uint64_t)(U[j] - 150 - s + 1023) << 52;              /* 2^g */
                double p, y;
                memcpy(&p, &pb, sizeof p);
                y = (double)(float)v * p;   /* the one rounding (to 24 bits), then an exact scaling */
                if (y > -0x1p-126 && y < 0x1p-126) out[i] = fx_slow(t, R, i);   /* subnormal: round once there */
                else out[i] = (float)y;   /* exact, or beyond the range: +-inf, as rounding the exact sum gives */
            }
        }
    }
}

static int fx_grow(cm_ep *e, size_t bytes, const char *what, dr_err *err)
{
    void *p = dr_cm_grow(e->fx, &e->fx_cap, bytes);
    if (!p) return dr_fail(err, DR_ENOMEM, "comm mpi %s: no memory for %zu bytes", what, bytes);
    e->fx = p;
    return DR_OK;
}

static inline size_t fx_lo(size_t n, uint32_t q, uint32_t W) { return (size_t)((uint64_t)n * q / W); }

/* Posts buf[0..count) to or from rank peer as messages of FX_PIECE floats
 * (the receiver's pieces match the sender's: MPI keeps their order). */
static int fx_post(cm_ep *e, bool recv, float *buf, size_t count, int peer, int tag, MPI_Request *req, int *nreq)
{
    int mrc = MPI_SUCCESS;
    for (size_t o = 0; o < count && mrc == MPI_SUCCESS; o += FX_PIECE) {
        int m = (int)(count - o < FX_PIECE ? count - o : FX_PIECE);
        req[*nreq] = MPI_REQUEST_NULL;
        mrc = recv ? MPI_Irecv(buf + o, m, MPI_FLOAT, peer, tag, e->comm, &req[*nreq])
                   : MPI_Isend(buf + o, m, MPI_FLOAT, peer, tag, e->comm, &req[*nreq]);
        (*nreq)++;
    }
    return mrc;
}

int dr_cm_exact_f32(cm_ep *e, float *const *loc, uint32_t L, size_t n, const char *what, dr_err *err)
{
    const uint32_t W = e->inner ? 1 : e->size, me = e->inner ? 0 : e->rank, R = W * L;
    const size_t lo = fx_lo(n, me, W), hi = fx_lo(n, me + 1, W), len = hi - lo;
    const float *terms[2 * DR_MAX_DEVICES];
    const float **t = terms;
    MPI_Request *req;
    float *in;
    int rc = DR_OK, mrc = MPI_SUCCESS, nreq = 0;
    if (!n) return DR_OK;
    if (n > FX_MAX) return dr_fail(err, DR_EUSAGE, "comm mpi %s: %zu elements; at most 2^30 a call", what, n);
    if (R > 2 * DR_MAX_DEVICES && !(t = malloc(R * sizeof *t)))
        return dr_fail(err, DR_ENOMEM, "comm mpi %s: no memory for %u terms", what, R);
    /* the peers' terms of this rank's chunk, then the requests */
    if ((rc = fx_grow(e, (size_t)(R - L) * len * sizeof(float) + 2 * (size_t)R * (n / FX_PIECE + 2) * sizeof *req + 64,
                      what, err)))
        goto out;
    in = e->fx;
    req = (MPI_Request *)(void *)((char *)e->fx + ((size_t)(R - L) * len * sizeof(float) + 63) / 64 * 64);
    for (uint32_t r = 0; r < L; r++) t[r] = loc[r] + lo;
    for (uint32_t q = 0, k = L; q < W; q++) {   /* 1: reduce-scatter, every message in flight at once */
        if (q == me) continue;
        for (uint32_t r = 0; r < L; r++, k++) {
            t[k] = in + (size_t)(k - L) * len;
            if (mrc == MPI_SUCCESS) mrc = fx_post(e, true, in + (size_t)(k - L) * len, len, (int)q, CM_TAG_FX, req, &nreq);
        }
    }
    for (uint32_t q = 0; q < W; q++) {
        size_t qlo = fx_lo(n, q, W), qhi = fx_lo(n, q + 1, W);
        if (q == me) continue;
        for (uint32_t r = 0; r < L; r++) {
            if (mrc == MPI_SUCCESS) mrc = fx_post(e, false, loc[r] + qlo, qhi - qlo, (int)q, CM_TAG_FX, req, &nreq);
        }
    }
    if (mrc == MPI_SUCCESS && nreq) rc = dr_cm_wait_coll(e, req, nreq, what, err);
    if (mrc != MPI_SUCCESS || rc) goto fail;
    fx_sum(loc[0] + lo, t, R, len, fx_shift(R));   /* 2: the exact sums of this rank's chunk */
    nreq = 0;
    for (uint32_t q = 0; q < W; q++) {   /* 3: all-gather of the rounded chunks */
        size_t qlo = fx_lo(n, q, W), qhi = fx_lo(n, q + 1, W);
        if (q == me) continue;
        if (mrc == MPI_SUCCESS) mrc = fx_post(e, true, loc[0] + qlo, qhi - qlo, (int)q, CM_TAG_FX + 1, req, &nreq);
        if (mrc == MPI_SUCCESS) mrc = fx_post(e, false, loc[0] + lo, len, (int)q, CM_TAG_FX + 1, req, &nreq);
    }
    if (mrc == MPI_SUCCESS && nreq) rc = dr_cm_wait_coll(e, req, nreq, what, err);
    if (mrc != MPI_SUCCESS || rc) goto fail;
    for (uint32_t r = 1; r < L; r++) memcpy(loc[r], loc[0], n * sizeof(float));
    goto out;
fail:
    dr_cm_cancel_all(req, nreq);
    if (mrc != MPI_SUCCESS) rc = dr_cm_fail(err, mrc, e->rank, what);
out:
    if (t != terms) free(t);
    return rc;
}

int dr_cm_all_reduce_f32_exact(dr_comm *c, float *const *local, size_t n, dr_err *err)
{
    cm_ep *e;
    if (!c) return dr_fail(err, DR_EUSAGE, "comm mpi all_reduce_f32_exact: no endpoint (NULL)");
    e = dr_cm_ep(c);
    if (n && !local) return dr_fail(err, DR_EUSAGE, "comm mpi all_reduce_f32_exact: no local arrays (NULL)");
    for (uint32_t r = 0; n && r < e->geom.cfg.local_replicas; r++)
        if (!local[r])
            return dr_fail(err, DR_EUSAGE, "comm mpi all_reduce_f32_exact: local replica %u's array is NULL", r);
    return dr_cm_exact_f32(e, local, e->geom.cfg.local_replicas, n, "all_reduce_f32_exact", err);
}
