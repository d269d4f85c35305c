/* distref devices — the MPI comm's exact gradient all-reduce, rounded once
 * (distref/comm.h: all_reduce_round): every replica of every rank holds n
 * compact exact partials (dr_cacc); afterwards out[r] holds, per element,
 * round(total / d), total the exact sum of all R = W L partials: the bits
 * of dr_acc_round_div of that total (and of dr_cacc_round_div of the
 * all_reduce(DR_FORM_CACC) total wherever that did not overflow).
 *
 * A compact accumulator is 32 bytes; most partial sums of a few hundred
 * products span far fewer bits than its 189. So the wire carries each
 * partial as a double-double (hi + lo, both doubles, 16 bytes) whenever
 * that is exactly its value, and the accumulator itself only for the rest
 * (an escape list):
 *
 * 1. Each rank converts its partials (gx_encode): W as a 128-bit integer
 *    of at most 106 bits: hi its top 53 bits, lo the rest, both exact
 *    doubles; zero as a signed zero pair that keeps the flags (empty, -0,
 *    +0). Anything else (W beyond 106 bits, +-inf, NaN, an overflowed
 *    accumulator) is an escape: hi = NaN, and the accumulator goes in the
 *    escape message of its owner, in index order.
 * 2. Reduce-scatter: rank q owns chunk [q n/W, (q+1) n/W); every rank sends
 *    each other rank its replicas' pairs of that chunk and one escape
 *    message each (possibly empty), all in flight at once.
 * 3. The owner sums each element's 2R doubles with error-free two-sums
 *    (gx_sum): s + the exact errors is the exact total; y = s + (their
 *    float sum) has an error below a bound B; when y - 2B and y + 2B
 *    (times 1/d, d a power of two: exact) round to the same float, rounding
 *    is monotone, so that float is round(total / d). Every other element
 *    (an escape, a total of zero, an interval that straddles a rounding
 *    boundary, d not a power of two) is summed in a dr_acc from the exact
 *    pairs and escapes and rounded once (gx_slow); one whose every partial
 *    is a zero pair gets its signed zero from their signs (gx_zero).
 * 4. All-gather of the rounded floats, with each owner's count of elements
 *    whose partial was overflowed (NaN there; the caller redoes them with
 *    full accumulators).
 *
 * Bytes a rank sends: 16 (W-1)/W n L for the pairs (+ 32 per escape) and
 * 4 (W-1)/W n for the floats, against MPI_Allreduce's 4 (W-1)/W n twice.
 */
#include "distref/exact_parts.h"
#include "distref/round_avx512.h"
#include "distref/wide.h"
#include "devices/mpi/comm_mpi_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "devices/seams.h"

#define GX_MAX   ((size_t)1 << 25)   /* elements per call at most (an escape message stays below 2^31 bytes) */
#define GX_PIECE ((size_t)1 << 15)   /* pairs per message at most */
#define GX_COLS  256                 /* elements summed term by term at once */
#define GX_SPECIAL (DR_ACC_F_POS_INF | DR_ACC_F_NEG_INF | DR_ACC_F_NAN | DR_CACC_F_OVERFLOW)

__extension__ typedef unsigned __int128 gx_u128;

static inline double gx_pow2(int e)   /* 2^e, -1022 <= e <= 1023 */
{
    uint64_t b = (uint64_t)(e + 1023) << 52;
    double p;
    memcpy(&p, &b, sizeof p);
    return p;
}

static inline int gx_bits(gx_u128 m)
{
    uint64_t h = (uint64_t)(m >> 64);
    return h ? 64 + dr_bit_length(h) : dr_bit_length((uint64_t)m);
}

/* The pair of a zero or an escape (false: an escape, out[0] = NaN). */
static bool gx_encode_rare(const dr_cacc *a, double *out)
{
    if (!(a->flags & GX_SPECIAL) && !(a->w[0] | a->w[1] | a->w[2])) {
        /* zero: the flags in the signs (empty +0 -0, -0 -0 -0, +0 +0 +0) */
        bool nonempty = (a->flags & DR_ACC_F_NONEMPTY) != 0, neg0 = nonempty && !(a->flags & DR_ACC_F_NOT_NEG0);
        out[0] = neg0 ? -0.0 : 0.0;
        out[1] = nonempty ? out[0] : -0.0;
        return true;
    }
    out[0] = NAN;
    out[1] = 0.0;
    return false;
}

/* The pair of partial a (false: an escape, out[0] = NaN). Branch-free in
 * the common case (signs and bit counts are data: a mispredicted branch
 * costs more than the arithmetic). */
static inline bool gx_encode(const dr_cacc *a, double *out)
{
    const uint64_t w0 = a->w[0], w1 = a->w[1], sx = (uint64_t)((int64_t)w1 >> 63);
    const gx_u128 mk = (gx_u128)0 - (gx_u128)(sx & 1u);
    const gx_u128 m = (((gx_u128)w1 << 64 | w0) ^ mk) - mk;   /* |W| when W fits 128 bits */
    const int b = gx_bits(m), e = a->exp, s = b > 53 ? b - 53 : 0;
    uint64_t top, rest, hb, lb;
    double hi, lo;
    if ((a->flags & GX_SPECIAL) | (a->w[2] != sx) | (m == 0) | (b > DR_SEAM_GX_FITS(106)) | (e < -310) | (e + b > 280))
        return gx_encode_rare(a, out);
    top = (uint64_t)(m >> s);                          /* at most 53 bits: exact as a double */
    rest = (uint64_t)m & (((uint64_t)1 << s) - 1u);    /* s <= 53 */
    hi = (double)(int64_t)top * gx_pow2(e + s);
    lo = DR_SEAM_GX_LO((double)(int64_t)rest * gx_pow2(e));
    memcpy(&hb, &hi, sizeof hb);
    memcpy(&lb, &lo, sizeof lb);
    hb ^= sx << 63;
    lb ^= sx << 63;
    memcpy(&out[0], &hb, sizeof hb);
    memcpy(&out[1], &lb, sizeof lb);
    return true;
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(DR_EXACT_NO_SIMD)
/* Eight partials at a time (AVX-512): gx_encode's common case, the same
 * bits; returns the lanes it did not encode (a zero, an escape), which the
 * caller encodes one by one. */
static DR_ROUND_ISA __mmask8 gx_encode_x8(const dr_cacc *a, double *out)
{
    const __m512i zero = _mm512_setzero_si512(), all = _mm512_set1_epi64(-1), c64 = _mm512_set1_epi64(64);
    const __m512i i01 = _mm512_set_epi64(13, 9, 5, 1, 12, 8, 4, 0), i23 = _mm512_set_epi64(15, 11, 7, 3, 14, 10, 6, 2);
    const __m512i lo4 = _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0), hi4 = _mm512_set_epi64(15, 14, 13, 12, 7, 6, 5, 4);
    __m512i z0 = _mm512_loadu_si512((const void *)a), z1 = _mm512_loadu_si512((const void *)(a + 2));
    __m512i z2 = _mm512_loadu_si512((const void *)(a + 4)), z3 = _mm512_loadu_si512((const void *)(a + 6));
    __m512i p01 = _mm512_permutex2var_epi64(z0, i01, z1), q01 = _mm512_permutex2var_epi64(z2, i01, z3);
    __m512i p23 = _mm512_permutex2var_epi64(z0, i23, z1), q23 = _mm512_permutex2var_epi64(z2, i23, z3);
    __m512i w0 = _mm512_permutex2var_epi64(p01, lo4, q01), w1 = _mm512_permutex2var_epi64(p01, hi4, q01);
    __m512i w2 = _mm512_permutex2var_epi64(p23, lo4, q23), ef = _mm512_permutex2var_epi64(p23, hi4, q23);
    __m512i ex = _mm512_srai_epi64(_mm512_slli_epi64(ef, 32), 32), sx = _mm512_srai_epi64(w1, 63);
    __m512i m0 = _mm512_xor_si512(w0, sx), m1 = _mm512_xor_si512(w1, sx), b, s, top, rest, hb, lb;
    __m512d hi, lo;
    __mmask8 ok, carry;
    m0 = _mm512_sub_epi64(m0, sx);                                   /* + 1 where negative */
    carry = _mm512_cmpeq_epi64_mask(sx, all) & _mm512_cmpeq_epi64_mask(m0, zero);
    m1 = _mm512_mask_sub_epi64(m1, carry, m1, all);
    b = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(m1, all), _mm512_sub_epi64(c64, _mm512_lzcnt_epi64(m0)),
                                _mm512_sub_epi64(_mm512_set1_epi64(128), _mm512_lzcnt_epi64(m1)));
    s = _mm512_max_epi64(_mm512_sub_epi64(b, _mm512_set1_epi64(53)), zero);
    ok = _mm512_testn_epi64_mask(ef, _mm512_set1_epi64((long long)GX_SPECIAL << 32)) &
         _mm512_cmpeq_epi64_mask(w2, sx) & _mm512_test_epi64_mask(_mm512_or_si512(m0, m1), all) &
         _mm512_cmple_epi64_mask(b, _mm512_set1_epi64(DR_SEAM_GX_FITS(106))) &
         _mm512_cmpge_epi64_mask(ex, _mm512_set1_epi64(-310)) &
         _mm512_cmple_epi64_mask(_mm512_add_epi64(ex, b), _mm512_set1_epi64(280));
    top = _mm512_or_si512(_mm512_srlv_epi64(m0, s), _mm512_sllv_epi64(m1, _mm512_sub_epi64(c64, s)));
    rest = _mm512_and_si512(m0, _mm512_sub_epi64(_mm512_sllv_epi64(_mm512_set1_epi64(1), s), _mm512_set1_epi64(1)));
    hb = _mm512_slli_epi64(_mm512_add_epi64(_mm512_add_epi64(ex, s), _mm512_set1_epi64(1023)), 52);
    lb = _mm512_slli_epi64(_mm512_add_epi64(ex, _mm512_set1_epi64(1023)), 52);
    hi = _mm512_mul_pd(_mm512_cvtepi64_pd(top), _mm512_castsi512_pd(hb));
    lo = _mm512_mul_pd(_mm512_cvtepi64_pd(rest), _mm512_castsi512_pd(lb));
    lo = DR_SEAM_GX_LO(lo);
    hi = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(hi), _mm512_slli_epi64(sx, 63)));
    lo = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(lo), _mm512_slli_epi64(sx, 63)));
    _mm512_storeu_pd(out, _mm512_permutex2var_pd(hi, _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0), lo));
    _mm512_storeu_pd(out + 8, _mm512_permutex2var_pd(hi, _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4), lo));
    return (__mmask8)~ok;
}
#endif

/* Element i's escape: the next entry of esc (and its index in at, if any). */
static inline void gx_escape(const dr_cacc *a, size_t i, dr_cacc *esc, uint32_t *at, size_t *k)
{
    esc[*k] = a[i];
    if (at) at[*k] = (uint32_t)i;
    (*k)++;
}

/* Encodes a[lo, hi) into pairs; the escapes, in index order, to esc (and
 * their indices to at, unless NULL). Returns the number of escapes. */
static size_t gx_encode_n(const dr_cacc *a, size_t lo, size_t hi, double *pairs, dr_cacc *esc, uint32_t *at)
{
    size_t k = 0, i = lo;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(DR_EXACT_NO_SIMD)
    if (dr_round_avx512_ok())
        for (; i + 8 <= hi; i += 8) {
            __mmask8 rare = gx_encode_x8(&a[i], pairs + 2 * (i - lo));
            for (int j = 0; rare && j < 8; j++)
                if ((rare >> j & 1u) && !gx_encode(&a[i + j], pairs + 2 * (i + j - lo))) gx_escape(a, i + j, esc, at, &k);
        }
#endif
    for (; i < hi; i++)
        if (!gx_encode(&a[i], pairs + 2 * (i - lo))) gx_escape(a, i, esc, at, &k);
    return k;
}

size_t dr_dd_encode(const dr_cacc *a, size_t n, double *pairs, dr_cacc *esc, uint32_t *esc_at)
{
    return gx_encode_n(a, 0, n, pairs, esc, esc_at);
}

/* The first of the p's escapes at element i or later (esc_at ascending). */
static size_t gx_esc_from(const dr_dd_parts *p, size_t i)
{
    size_t lo = 0, hi = p->nesc;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->esc_at[mid] < i) lo = mid + 1;
        else hi = mid;
    }
    return DR_SEAM_GX_ESC_FROM(lo);
}

/* a += v exactly, v a nonzero double of a pair; false when it lies outside
 * what an encoded partial holds (bits below 2^-320 or from 2^280 up). */
static bool gx_acc_add(dr_acc *a, double v)
{
    uint64_t b, u;
    int e;
    memcpy(&b, &v, sizeof b);
    if (!(b & 0x7fffffffffffffffu)) return true;
    if ((b >> 52 & 0x7ffu) == 0 || (b >> 52 & 0x7ffu) == 0x7ffu) return false;   /* subnormal, inf, NaN: never encoded */
    u = (b & 0xfffffffffffffu) | (uint64_t)1 << 52;
    e = (int)(b >> 52 & 0x7ffu) - 1075;
    while (!(u & 1u)) { u >>= 1; e++; }
    if (e < DR_ACC_LSB_EXP || e + 53 > 280) return false;
    dr_acc_add_i64(a, (b >> 63) ? -(int64_t)u : (int64_t)u, e);
    a->pending++;
    return true;
}

typedef struct gx_src {
    const double  *pairs;   /* the source's pairs of the owner's chunk */
    const dr_cacc *esc;     /* its escapes, in index order */
    size_t         nesc, next;
} gx_src;

/* Element i when every source's partial is a zero pair (a weight that no
 * example of the step reached: most of the fast pass's slow elements, about
 * 7% of mlp_synthetic's at G = 256 over 2 ranks): its signed zero from the
 * flags alone, as gx_slow's accumulator would round it (dr_acc_round_div: -0
 * only for a non-empty all-(-0) sum), without building one. false: some
 * source's pair is not zero (an escape's NaN included). */
static bool gx_zero(const gx_src *src, uint32_t m, size_t i, float *out)
{
    uint32_t flags = 0;
    for (uint32_t k = 0; k < DR_SEAM_GX_ZERO_SOURCES(m); k++) {
        double hi = src[k].pairs[2 * i], lo = src[k].pairs[2 * i + 1];
        if (hi != 0 || lo != 0) return false;
        flags |= signbit(hi) ? DR_ACC_F_NONEMPTY : signbit(lo) ? 0u : DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
    }
    *out = dr_bits_f32((flags & DR_ACC_F_NONEMPTY) && !(flags & DR_ACC_F_NOT_NEG0) ? 0x80000000u : 0u);
    return true;
}

/* Element i by a full accumulator; false: some partial overflowed (*out NaN)
 * or a corrupt escape (*bad). */
static bool gx_slow(gx_src *src, uint32_t m, size_t i, uint32_t d, float *out, bool *bad)
{
    dr_acc a, p;
    bool over = false;
    if (gx_zero(src, m, i, out)) return true;
    dr_acc_init(&a);
    for (uint32_t k = 0; k < m; k++) {
        double hi = src[k].pairs[2 * i], lo = src[k].pairs[2 * i + 1];
        if (hi != hi) {   /* an escape: the next accumulator of this source */
            dr_cacc c;
            if (src[k].next >= src[k].nesc || !dr_cacc_deserialize(&c, (const uint8_t *)&src[k].esc[src[k].next++])) {
                *bad = true;
                return false;
            }
            if (!dr_cacc_to_acc(&p, &c)) over = true;
            else dr_acc_merge(&a, &p);
        } else if (hi == 0 && lo == 0) {   /* zero: its flags from the signs */
            a.flags |= signbit(hi) ? DR_ACC_F_NONEMPTY : signbit(lo) ? 0u : DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
        } else {
            a.flags |= DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
            if (!gx_acc_add(&a, hi) || !gx_acc_add(&a, lo)) {
                *bad = true;
                return false;
            }
        }
    }
    *out = over ? dr_bits_f32(0x7fc00000u) : dr_acc_round_div(&a, d);
    return !over;
}

/* out[i] = round(sum of the m sources' pairs / d) for i < len, or slow[i]
 * set: the fast pass (module comment, step 3). k: log2 d, or -1. Per
 * vector width (DR_WIDE): each lane does the scalar code's IEEE operations
 * (two-sums, fabs, the conversions), so AVX2 gives the same floats and
 * flags in half the instructions (the owner's pass over its chunk, every
 * step, O(P / W) whatever the batch). */
DR_WIDE static void gx_fast(const gx_src *src, uint32_t m, size_t lo, size_t len, int k, float *out, uint32_t *slow)
{
    double S[GX_COLS], C[GX_COLS], A[GX_COLS];
    const double sc = k >= 0 ? gx_pow2(-k) : 1.0, grow = (double)(2 * m + 2);
    size_t cols = len < GX_COLS ? len : GX_COLS;
    for (size_t j = 0; j < cols; j++) {
        S[j] = src[0].pairs[2 * (lo + j)];
        C[j] = src[0].pairs[2 * (lo + j) + 1];
        A[j] = fabs(C[j]);
    }
    for (uint32_t t = 1; t < m; t++) {
        const double *p = src[t].pairs + 2 * lo;
        #pragma omp simd
        for (size_t j = 0; j < cols; j++) {   /* two-sum: S + e is exactly S + hi */
            double a = p[2 * j], s = S[j] + a, bb = s - S[j], e = (S[j] - (s - bb)) + (a - bb);
            S[j] = s;
            C[j] += e + p[2 * j + 1];
            A[j] += fabs(e) + fabs(p[2 * j + 1]);
        }
    }
    #pragma omp simd
    for (size_t j = 0; j < cols; j++) {
        double y = S[j] + C[j], B = 0x1p-50 * (fabs(y) + grow * A[j]);
        float fl = (float)((y - 2 * B) * sc), fh = (float)((y + 2 * B) * sc);
        uint32_t bl, bh;
        memcpy(&bl, &fl, sizeof bl);
        memcpy(&bh, &fh, sizeof bh);
        out[lo + j] = fl;
        slow[j] = (uint32_t)(k < 0) | (bl != bh) | (y != y) | ((y == 0) & (A[j] == 0));
    }
}

/* A peer's escapes in its len pairs: those whose hi is NaN (step 1), per
 * vector width (DR_WIDE; a pass over the chunk every step). */
DR_WIDE static size_t gx_count_esc(const double *pairs, size_t len)
{
    size_t ne = 0;
    #pragma omp simd reduction(+ : ne)   /* an integer count: any order */
    for (size_t i = 0; i < len; i++) ne += DR_SEAM_GX_COUNT_ESC(pairs[2 * i] != pairs[2 * i]);
    return ne;
}

/* The owner's chunk: out[0 .. len) from m sources; *over: elements with an
 * overflowed partial. */
static int gx_sum(gx_src *src, uint32_t m, size_t len, uint32_t d, float *out, uint64_t *over, const char *what,
                  uint32_t rank, dr_err *err)
{
    int k = -1;
    uint32_t slow[GX_COLS];
    if ((d & (d - 1u)) == 0) for (k = 0; (1u << k) < d; k++) {}
    for (size_t lo = 0; lo < len; lo += GX_COLS) {
        size_t cols = len - lo < GX_COLS ? len - lo : GX_COLS;
        gx_fast(src, m, lo, cols, k, out, slow);
        for (size_t j = 0; j < cols; j++) {
            bool bad = false;
            if (!slow[j]) continue;
            if (!gx_slow(src, m, lo + j, d, &out[lo + j], &bad)) {
                if (bad) return dr_fail(err, DR_EFORMAT, "comm mpi rank %u %s: a corrupt pair or escaped "
                                        "accumulator for element %zu of its chunk", rank, what, lo + j);
                (*over)++;
            }
        }
    }
    for (uint32_t t = 0; t < m; t++)
        if (src[t].next != src[t].nesc)
            return dr_fail(err, DR_EFORMAT, "comm mpi rank %u %s: source %u sent %zu escaped accumulators, %zu used",
                           rank, what, t, src[t].nesc, src[t].next);
    return DR_OK;
}

static inline size_t gx_lo(size_t n, uint32_t q, uint32_t W) { return (size_t)((uint64_t)n * q / W); }

static int gx_post(cm_ep *e, bool recv, void *buf, size_t count, MPI_Datatype t, size_t piece, int peer, int tag,
                   MPI_Request *req, int *nreq)
{
    int mrc = MPI_SUCCESS, sz = 0;
    MPI_Type_size(t, &sz);
    for (size_t o = 0; (o < count || (o == 0 && count == 0)) && mrc == MPI_SUCCESS; o += piece) {
        int c = (int)(count - o < piece ? count - o : piece);
        void *p = (char *)buf + o * (size_t)sz;
        req[*nreq] = MPI_REQUEST_NULL;
        mrc = recv ? MPI_Irecv(p, c, t, peer, tag, e->comm, &req[*nreq]) : MPI_Isend(p, c, t, peer, tag, e->comm, &req[*nreq]);
        (*nreq)++;
        if (count == 0) break;
    }
    return mrc;
}

/* The call's buffers, kept with the endpoint: the pairs of the local
 * replicas (L n), their escapes (room for all), the peers' pairs and
 * escapes of this rank's chunk, the requests. */
typedef struct gx_bufs {
    double *pairs, *rpairs;
    dr_cacc *esc, *resc;
    MPI_Request *req;
    uint64_t *counts;
} gx_bufs;

static int gx_alloc(cm_ep *e, uint32_t W, uint32_t L, size_t n, size_t len, bool dd, gx_bufs *b, const char *what,
                    dr_err *err)
{
    size_t peers = (size_t)(W - 1) * L, nreq = 2 * (size_t)W * L * (n / GX_PIECE + 4) + 4 * W, enc = dd ? 0 : (size_t)L * n;
    size_t sz[6] = { enc * 16, peers * len * 16, enc * sizeof(dr_cacc), peers * len * sizeof(dr_cacc),
                     nreq * sizeof(MPI_Request), 2 * (size_t)W * sizeof(uint64_t) }, off[6], tot = 0;
    void *p;
    for (int i = 0; i < 6; i++) { off[i] = tot; tot += (sz[i] + 63) / 64 * 64; }
    if (!(p = dr_cm_grow(e->gx, &e->gx_cap, tot + 64)))
        return dr_fail(err, DR_ENOMEM, "comm mpi %s: no memory for %zu bytes", what, tot);
    e->gx = p;
    p = (void *)(((uintptr_t)p + 63) / 64 * 64);
    b->pairs = (double *)(void *)((char *)p + off[0]);
    b->rpairs = (double *)(void *)((char *)p + off[1]);
    b->esc = (dr_cacc *)(void *)((char *)p + off[2]);
    b->resc = (dr_cacc *)(void *)((char *)p + off[3]);
    b->req = (MPI_Request *)(void *)((char *)p + off[4]);
    b->counts = (uint64_t *)(void *)((char *)p + off[5]);
    return DR_OK;
}

/* Replica r's pairs and escapes of elements [qlo, qhi): dd's own, or
 * loc's encoded into b. */
static gx_src gx_part(const dr_cacc *const *loc, const dr_dd_parts *dd, uint32_t r, size_t n, size_t qlo, size_t qhi,
                      gx_bufs *b)
{
    if (dd) {
        size_t j0 = gx_esc_from(&dd[r], qlo);
        return (gx_src){ dd[r].pairs + 2 * qlo, dd[r].esc + j0, gx_esc_from(&dd[r], qhi) - j0, 0 };
    }
    {
        double *pp = b->pairs + 2 * ((size_t)r * n + qlo);
        dr_cacc *pe = b->esc + (size_t)r * n + qlo;
        return (gx_src){ pp, pe, gx_encode_n(loc[r], qlo, qhi, pp, pe, NULL), 0 };
    }
}

/* Phase 1: receive the peers' pairs and escapes of this rank's chunk;
 * encode (compact input) each peer's chunk and send it, then this rank's
 * own, whose sources go to own[0 .. L). */
static int gx_scatter(cm_ep *e, const dr_cacc *const *loc, const dr_dd_parts *dd, uint32_t W, uint32_t L, size_t n,
                      gx_bufs *b, gx_src *own, int *nreq)
{
    const uint32_t me = e->inner ? 0 : e->rank;
    const size_t len = gx_lo(n, me + 1, W) - gx_lo(n, me, W);
    int mrc = MPI_SUCCESS;
    for (uint32_t q = 0, k = 0; q < W; q++) {
        if (q == me) continue;
        for (uint32_t r = 0; r < L; r++, k++) {
            if (mrc == MPI_SUCCESS)
                mrc = gx_post(e, true, b->rpairs + 2 * (size_t)k * len, 2 * len, MPI_DOUBLE, 2 * GX_PIECE, (int)q,
                              CM_TAG_GX, b->req, nreq);
            if (mrc == MPI_SUCCESS)
                mrc = MPI_Irecv(b->resc + (size_t)k * len, (int)(len * sizeof(dr_cacc)), MPI_BYTE, (int)q,
                                CM_TAG_GX + 1, e->comm, &b->req[(*nreq)++]);
        }
    }
    for (uint32_t i = 1; i <= W; i++) {   /* the next rank's chunk first, this rank's own last */
        uint32_t q = (me + i) % W;
        size_t qlo = gx_lo(n, q, W), qhi = gx_lo(n, q + 1, W);
        for (uint32_t r = 0; r < L; r++) {
            gx_src p = gx_part(loc, dd, r, n, qlo, qhi, b);
            if (q == me) { own[r] = p; continue; }
            if (mrc == MPI_SUCCESS)   /* MPI reads a send buffer only: the input's const is kept */
                mrc = gx_post(e, false, (void *)(uintptr_t)p.pairs, 2 * (qhi - qlo), MPI_DOUBLE, 2 * GX_PIECE, (int)q,
                              CM_TAG_GX, b->req, nreq);
            if (mrc == MPI_SUCCESS)
                mrc = MPI_Isend(p.esc, (int)(p.nesc * sizeof(dr_cacc)), MPI_BYTE, (int)q, CM_TAG_GX + 1, e->comm,
                                &b->req[(*nreq)++]);
        }
    }
    return mrc;
}

int dr_cm_grad_round(cm_ep *e, const dr_cacc *const *loc, const dr_dd_parts *dd, uint32_t L, size_t n, uint32_t d,
                     float *const *out, size_t *overflowed, const char *what, dr_err *err)
{
    const uint32_t W = e->inner ? 1 : e->size, me = e->inner ? 0 : e->rank, m = W * L;
    const size_t lo = gx_lo(n, me, W), len = gx_lo(n, me + 1, W) - lo;
    gx_src stack[2 * DR_MAX_DEVICES], *src = stack, own[DR_MAX_DEVICES];
    gx_bufs b = { NULL, NULL, NULL, NULL, NULL, NULL };
    uint64_t over = 0;
    int rc, mrc = MPI_SUCCESS, nreq = 0;
    *overflowed = 0;
    if (!n) return DR_OK;
    if (n > GX_MAX) return dr_fail(err, DR_EUSAGE, "comm mpi %s: %zu elements; at most 2^25 a call", what, n);
    if (d == 0) return dr_fail(err, DR_EUSAGE, "comm mpi %s: divisor 0; expected d >= 1", what);
    if (m > 2 * DR_MAX_DEVICES && !(src = malloc(m * sizeof *src)))
        return dr_fail(err, DR_ENOMEM, "comm mpi %s: no memory for %u sources", what, m);
    if ((rc = gx_alloc(e, W, L, n, len, dd != NULL, &b, what, err))) goto out;
    mrc = gx_scatter(e, loc, dd, W, L, n, &b, own, &nreq);
    if (mrc == MPI_SUCCESS && nreq && (rc = dr_cm_wait_coll(e, b.req, nreq, what, err))) goto fail;
    if (mrc != MPI_SUCCESS) goto fail;
    for (uint32_t q = 0, k = 0, t = 0; q < W; q++)   /* the sources in global replica order */
        for (uint32_t r = 0; r < L; r++, t++) {
            if (q == me) {
                src[t] = own[r];
            } else {
                const double *pp = b.rpairs + 2 * (size_t)k * len;
                src[t] = (gx_src){ pp, b.resc + (size_t)k * len, gx_count_esc(pp, len), 0 };
                k++;
            }
        }
    if ((rc = gx_sum(src, m, len, d, out[0] + lo, &over, what, me, err))) goto out;
    nreq = 0;
    b.counts[me] = over;
    for (uint32_t q = 0; q < W; q++) {   /* 4: all-gather of the rounded chunks and the counts */
        size_t qlo = gx_lo(n, q, W), qhi = gx_lo(n, q + 1, W);
        if (q == me) continue;
        if (mrc == MPI_SUCCESS)
            mrc = gx_post(e, true, out[0] + qlo, qhi - qlo, MPI_FLOAT, 4 * GX_PIECE, (int)q, CM_TAG_GX + 2, b.req, &nreq);
        if (mrc == MPI_SUCCESS)
            mrc = gx_post(e, false, out[0] + lo, len, MPI_FLOAT, 4 * GX_PIECE, (int)q, CM_TAG_GX + 2, b.req, &nreq);
        if (mrc == MPI_SUCCESS) mrc = MPI_Irecv(&b.counts[q], 1, MPI_UINT64_T, (int)q, CM_TAG_GX + 3, e->comm, &b.req[nreq++]);
        if (mrc == MPI_SUCCESS) mrc = MPI_Isend(&b.counts[me], 1, MPI_UINT64_T, (int)q, CM_TAG_GX + 3, e->comm, &b.req[nreq++]);
    }
    if (mrc == MPI_SUCCESS && nreq && (rc = dr_cm_wait_coll(e, b.req, nreq, what, err))) goto fail;
    if (mrc != MPI_SUCCESS) goto fail;
    for (uint32_t q = 0; q < W; q++) *overflowed += b.counts[q];
    for (uint32_t r = 1; r < L; r++) memcpy(out[r], out[0], n * sizeof(float));
    goto out;
fail:
    dr_cm_cancel_all(b.req, nreq);
    if (mrc != MPI_SUCCESS) rc = dr_cm_fail(err, mrc, e->rank, what);
out:
    if (src != stack) free(src);
    return rc;
}

int dr_cm_all_reduce_round(dr_comm *c, const dr_cacc *const *local, const dr_dd_parts *dd, size_t n, uint32_t d,
                           float *const *out, size_t *overflowed, dr_err *err)
{
    cm_ep *e;
    size_t none = 0;
    if (!overflowed) overflowed = &none;
    if (!c) return dr_fail(err, DR_EUSAGE, "comm mpi all_reduce_round: no endpoint (NULL)");
    e = dr_cm_ep(c);
    if (!local == !dd)
        return dr_fail(err, DR_EUSAGE, "comm mpi all_reduce_round: %s; expected exactly one of local (compact "
                       "partials) and dd (double-doubles)", local ? "both local and dd given" : "no partials (NULL)");
    if (n && !out) return dr_fail(err, DR_EUSAGE, "comm mpi all_reduce_round: no out arrays (NULL)");
    for (uint32_t r = 0; n && r < e->geom.cfg.local_replicas; r++)
        if (!out[r] || (local ? !local[r] : !dd[r].pairs || (dd[r].nesc && (!dd[r].esc || !dd[r].esc_at))))
            return dr_fail(err, DR_EUSAGE, "comm mpi all_reduce_round: local replica %u's array is NULL", r);
    for (uint32_t r = 0; dd && r < e->geom.cfg.local_replicas; r++)   /* the escape lists split by binary search */
        for (size_t j = 0; j < dd[r].nesc; j++)
            if (dd[r].esc_at[j] >= n || (j && dd[r].esc_at[j] <= dd[r].esc_at[j - 1]))
                return dr_fail(err, DR_EUSAGE, "comm mpi all_reduce_round: local replica %u's escape %zu is at element "
                               "%u; expected ascending elements below n = %zu", r, j, dd[r].esc_at[j], n);
    return dr_cm_grad_round(e, local, dd, e->geom.cfg.local_replicas, n, d, out, overflowed, "all_reduce_round", err);
}
