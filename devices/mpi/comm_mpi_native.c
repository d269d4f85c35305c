/* distref devices — the MPI comm's native compact all-reduce: exact sums
 * carried by MPI's own integer all-reduce (devices/mpi/comm_mpi_internal.h).
 *
 * Integer addition is associative, so MPI_Iallreduce(MPI_INT32_T, MPI_SUM)
 * gives the same bits whatever algorithm Open MPI picks, provided nothing
 * overflows. A compact accumulator is W * 2^exp; per pack, every rank, over
 * its L local replicas at once (they are not merged first: their digits
 * are added, so a replica's partial sum never overflows):
 *
 * 1. Agreement (two reductions in flight at once). Per element, its lowest
 *    exponent e (the accumulator's exp: its trailing zeros are already
 *    in it) and its top t (|value| < 2^t), quantized to int8 codes
 *    floor(e/4) and ceil(t/4) (so e in [-504, 507], t in [-504, 504]:
 *    dr_acc spans 2^-320 .. 2^320, nothing real lies outside), reduced
 *    with MPI_MIN over [code_e, -code_t] pairs (the rank's own: the
 *    extremes over its replicas); an element with no value (zero, or
 *    overflowed) sends 127 for both. And the pack's flags
 *    summary, reduced with MPI_BOR: [OR of every element's flags, OR of
 *    their complements]. Every rank then knows, identically, each
 *    element's grid g = 4 min code_e and top T = 4 max code_t.
 * 2. Sums. Element i needs s = T - g + 1 bits (sign included); it is cut
 *    into K = ceil(s / D) digits of D = 31 - ceil(log2 (W L)) bits (the
 *    lower ones unsigned, the top one signed), so that the sum of any digit
 *    over W ranks of L replicas fits an int32 (carry-save: the carries are resolved after
 *    the sum; each rank first adds its replicas' digits). Elements are grouped by K, every rank knowing the groups,
 *    and each group is one MPI_Iallreduce(MPI_SUM) over its digits. When
 *    the summary shows that not every element carries the same flags (the
 *    OR differs from the AND), the per-element flags go with them
 *    (MPI_BOR, a byte each); otherwise every element's flags are the OR.
 * 3. Every element's digits are added up (exact, multi-word), trailing
 *    zeros moved into exp, and the value stored back when it fits the
 *    compact window (|W| < 2^DR_CACC_BITS); otherwise, and for any element
 *    some rank held overflowed, it is marked DR_CACC_F_OVERFLOW (the
 *    engine redoes the step with full accumulators: the same bits). The
 *    result, in the first replica's array, is the exact sum with the flags
 *    ORed, as the ring's merges give (dr_cacc_merge), or the flag.
 *
 * Packs (--bytes_per_pack) are pipelined: up to NAT_DEPTH packs' agreement
 * in flight while earlier packs' sums run; every rank posts its
 * collectives in the same order (pack by pack), as MPI requires. Waits
 * poll (MPI_Testsome) with the endpoint's deadline: nothing completing for
 * timeout_s pings every other rank, and a rank that does not answer is
 * named (and the others told), as in the ring. A collective cannot be
 * cancelled: on failure its buffers stay with the endpoint (freed at
 * close) and the caller ends the job.
 */
#include "devices/mpi/comm_mpi_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "devices/seams.h"

#define NAT_NONE  127       /* the code of an element without a value */
#define NAT_Q     4         /* exponent quantum of the codes */
#define NAT_LIM   504       /* |e|, |t| the codes carry */
#define NAT_KMAX  128       /* digit groups */
#define NAT_DEPTH 4         /* packs whose agreement is in flight */
#define NAT_PIECE (1 << 30) /* ints per MPI call at most */
#define NAT_WORDS 24        /* 64-bit words of a digit sum: 1009 + 8 + 31 bits fit */

typedef struct nat_pack {
    size_t       off, len;
    int8_t      *code;          /* 2 per element */
    uint32_t     sum[2];        /* OR of flags, OR of ~flags */
    uint8_t     *flags;         /* per element, when they differ */
    int32_t     *dig;           /* every group's digits */
    size_t       nreq;
    MPI_Request *req;           /* agreement: 2; sums: groups, pieces and flags */
    int          stage;         /* 0: agreement posted, 1: sums posted, 2: done */
    bool         mixed;         /* the per-element flags travel (flags) */
    size_t       code_cap, flags_cap, dig_cap, req_cap;   /* bytes held: the buffers stay with the endpoint */
} nat_pack;

/* floor(v / 4), ceil(v / 4) for |v| <= NAT_LIM + 3 */
static inline int floor_div4(int v) { return (v + 4 * 256) / NAT_Q - 256; }
static inline int ceil_div4(int v) { return (v + 4 * 256 + NAT_Q - 1) / NAT_Q - 256; }

static int bitlen(uint64_t v)
{
#if defined(__GNUC__)
    if (v) return 64 - __builtin_clzll(v);
#endif
    int n = 0;
    while (v >> 8) { v >>= 8; n += 8; }
    while (v) { v >>= 1; n++; }
    return n;
}

static int bits192(const uint64_t w[3])   /* bits of |W| */
{
    uint64_t m[3] = { w[0], w[1], w[2] };
    if (w[2] >> 63) {
        uint64_t c = 1;
        for (int i = 0; i < 3; i++) { uint64_t t = ~m[i] + c; c = c && t == 0; m[i] = t; }
    }
    if (m[2]) return 128 + bitlen(m[2]);
    if (m[1]) return 64 + bitlen(m[1]);
    return bitlen(m[0]);
}

/* Digit width: the sum of n = W L digits of D bits fits an int32. */
static int digit_bits(uint64_t n)
{
    int lg = 0;
    while (((uint64_t)1 << lg) < n) lg++;
    return DR_SEAM_NATIVE_DIGIT_BITS(31 - lg);
}

/* 64 bits of the (infinitely sign-extended) W from bit pos on; zeros below 0. */
static inline uint64_t bits_at(const uint64_t w[3], int pos)
{
    int q = pos >= 0 ? pos / 64 : -((-pos + 63) / 64), r = pos - 64 * q;
    uint64_t fill = (w[2] >> 63) ? ~(uint64_t)0 : 0;
    uint64_t lo = q < 0 ? 0 : q > 2 ? fill : w[q], hi = q + 1 < 0 ? 0 : q + 1 > 2 ? fill : w[q + 1];
    return r ? (lo >> r | hi << (64 - r)) : lo;
}

/* ---- stage 1: codes and summary ------------------------------------------ */

/* One accumulator's codes: *ce = min(*ce, its code_e), *ct = min(*ct,
 * -code_t); one beyond dr_acc's range is marked overflowed. */
static inline void code_one(dr_cacc *c, int8_t *pce, int8_t *pct)
{
    int8_t ce = NAT_NONE, ct = NAT_NONE;
    uint64_t s = (uint64_t)0 - (c->w[0] >> 63);   /* W's sign word when it fits 64 bits */
    if (c->w[1] == s && c->w[2] == s && !(c->flags & DR_CACC_F_OVERFLOW)) {   /* the common case */
        int64_t e = c->exp, t = e + bitlen((c->w[0] ^ s) - s);
        if (c->w[0] && (e < -NAT_LIM || t > NAT_LIM)) c->flags |= DR_CACC_F_OVERFLOW;
        else if (c->w[0]) { ce = (int8_t)floor_div4((int)e); ct = (int8_t)-ceil_div4((int)t); }
    } else if (!(c->flags & DR_CACC_F_OVERFLOW) && (c->w[0] | c->w[1] | c->w[2])) {
        int64_t e = c->exp, t = e + bits192(c->w);
        if (e < -NAT_LIM || t > NAT_LIM) c->flags |= DR_CACC_F_OVERFLOW;   /* beyond dr_acc's range */
        else { ce = (int8_t)floor_div4((int)e); ct = (int8_t)-ceil_div4((int)t); }
    }
    if (ce < *pce) *pce = ce;
    if (ct < *pct) *pct = ct;
}

/* The codes of elements off .. off+len of the rank's L replicas, and the
 * summary of their flags (each element's ORed over the replicas). */
static void codes_of(dr_cacc *const *loc, uint32_t L, size_t off, size_t len, int8_t *code, uint32_t sum[2])
{
    uint32_t o = 0, no = 0;
    for (size_t i = 0; i < len; i++) {
        int8_t ce = NAT_NONE, ct = NAT_NONE;
        uint32_t f = 0;
        for (uint32_t r = 0; r < L; r++) {
            code_one(&loc[r][off + i], &ce, &ct);
            f |= loc[r][off + i].flags;
        }
        code[2 * i] = ce;
        code[2 * i + 1] = ct;
        o |= f;
        no |= ~f;
    }
    sum[0] = o;
    sum[1] = no;
}

/* ---- stage 2: digits ------------------------------------------------------ */

/* ceil(s / D) for every span s = 4 (a - b) + 1 two int8 codes can give,
 * [-1019, 1021], at kof[s + NAT_SPAN]: one table a call instead of a
 * division an element. */
#define NAT_SPAN 1024
static void digit_table(int8_t kof[2 * NAT_SPAN], int D)
{
    for (int s = -NAT_SPAN; s < NAT_SPAN; s++) {   /* agreed codes give 1 <= s <= 1009: K <= 127 for D >= 8 */
        int k = (s + D - 1) / D;
        kof[s + NAT_SPAN] = (int8_t)(k < 0 ? 0 : k > 127 ? 127 : k);
    }
}

/* Element i's digit count from the agreed codes (0: no value anywhere). */
static inline int digits_of(const int8_t *code, size_t i, const int8_t kof[2 * NAT_SPAN])
{
    if (code[2 * i] == NAT_NONE) return 0;
    return kof[NAT_Q * (-code[2 * i + 1]) - NAT_Q * code[2 * i] + 1 + NAT_SPAN];
}

#if defined(__SIZEOF_INT128__)
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;
#endif

static void put_digits(const dr_cacc *c, int g, int K, int D, int32_t *out)
{
    int sh;
    uint64_t mask = ((uint64_t)1 << D) - 1u;
    if ((c->flags & DR_CACC_F_OVERFLOW) || !(c->w[0] | c->w[1] | c->w[2])) {
        memset(out, 0, (size_t)K * sizeof *out);
        return;
    }
    sh = c->exp - g;   /* >= 0: the grid is at or below every rank's exp */
    if (K == 1 && c->w[1] == (uint64_t)0 - (c->w[0] >> 63) && c->w[2] == c->w[1]) {
        out[0] = (int32_t)((int64_t)c->w[0] * ((int64_t)1 << sh));   /* below 2^(D-1) in magnitude */
        return;
    }
#if defined(__SIZEOF_INT128__)
    if (K * D <= 120 && c->w[2] == ((c->w[1] >> 63) ? ~(uint64_t)0 : 0)) {
        /* the common case: W fits 128 bits and the shifted value (below
         * 2^(K D - 1), the agreed top) does too */
        i128 x = (i128)((u128)((u128)c->w[1] << 64 | c->w[0]) << sh);
        for (int k = 0; k + 1 < K; k++) out[k] = (int32_t)(uint32_t)((uint64_t)(x >> (D * k)) & mask);
        out[K - 1] = (int32_t)(x >> (D * (K - 1)));
        return;
    }
#endif
    for (int k = 0; k + 1 < K; k++) out[k] = (int32_t)(bits_at(c->w, D * k - sh) & mask);
    out[K - 1] = (int32_t)(int64_t)bits_at(c->w, D * (K - 1) - sh);   /* signed: the rest is sign */
}

/* ---- stage 3: digits back to an accumulator ------------------------------- */

static int ctz64(uint64_t v)   /* v != 0 */
{
#if defined(__GNUC__)
    return __builtin_ctzll(v);
#endif
    int n = 0;
    while (!(v & 0xffu)) { v >>= 8; n += 8; }
    while (!(v & 1u)) { v >>= 1; n++; }
    return n;
}

/* c (zero, flags clear) = sum_k d[k] * 2^(D k + g), or marked overflowed. */
static void from_digits(dr_cacc *c, const int32_t *d, int K, int D, int g)
{
    uint64_t x[NAT_WORDS];
    int nw = (D * K + 31 + 63) / 64 + 1, lo, tz, bits;
    bool neg;
    if (K == 1) {   /* one digit: W is the digit without its trailing zeros */
        int64_t v = d[0];
        if (!v) return;
        tz = ctz64((uint64_t)v);
        v /= (int64_t)1 << tz;   /* exact */
        c->w[0] = (uint64_t)v;
        c->w[1] = c->w[2] = v < 0 ? ~(uint64_t)0 : 0;
        c->exp = g + tz;
        return;
    }
#if defined(__SIZEOF_INT128__)
    if (D * K <= 96) {   /* the common case: the sum (below 2^(D K + 31)) fits 127 bits */
        i128 v = 0;
        u128 m;
        for (int k = 0; k < K; k++) v += (i128)d[k] * ((i128)1 << (D * k));
        if (!v) return;
        m = (u128)v;
        tz = (uint64_t)m ? ctz64((uint64_t)m) : 64 + ctz64((uint64_t)(m >> 64));
        v >>= tz;   /* arithmetic and exact: the bits shifted out are zero */
        c->w[0] = (uint64_t)v;
        c->w[1] = (uint64_t)((u128)v >> 64);
        c->w[2] = v < 0 ? ~(uint64_t)0 : 0;
        c->exp = g + tz;
        return;
    }
#endif
    memset(x, 0, (size_t)nw * sizeof x[0]);
    for (int k = 0; k < K; k++) {   /* x += d[k] * 2^(D k), two's complement over nw words */
        int64_t v = d[k];
        int p = D * k, q = p / 64, r = p % 64;
        uint64_t ext = v < 0 ? ~(uint64_t)0 : 0, add[2], carry = 0;
        if (!v) continue;
        add[0] = (uint64_t)v << r;
        add[1] = r ? (uint64_t)(v >> (64 - r)) : ext;
        for (int j = q; j < nw; j++) {
            uint64_t a = j - q < 2 ? add[j - q] : ext, s = x[j] + a, c1 = s < a, t = s + carry, c2 = t < s;
            x[j] = t;
            carry = c1 | c2;
        }
    }
    for (lo = 0; lo < nw && !x[lo]; lo++) {}
    if (lo == nw) return;   /* an exact zero */
    neg = (x[nw - 1] >> 63) != 0;
    tz = 64 * lo + ctz64(x[lo]);
    {   /* bits of |x| */
        uint64_t m[NAT_WORDS] = { 0 }, c1 = 1;
        int top = nw - 1;
        for (int j = 0; j < nw; j++) {
            uint64_t t = neg ? ~x[j] + c1 : x[j];
            if (neg) c1 = c1 && t == 0;
            m[j] = t;
        }
        while (top > 0 && !m[top]) top--;
        bits = 64 * top + bitlen(m[top]);
    }
    if (bits - tz > DR_CACC_BITS) { c->flags |= DR_CACC_F_OVERFLOW; return; }
    for (int k = 0; k < 3; k++) {   /* x >> tz, its low 192 bits (it fits: sign-extended) */
        int pos = tz + 64 * k, q = pos / 64, r = pos % 64;
        uint64_t fill = neg ? ~(uint64_t)0 : 0, a = q < nw ? x[q] : fill, b = q + 1 < nw ? x[q + 1] : fill;
        c->w[k] = r ? (a >> r | b << (64 - r)) : a;
    }
    c->exp = g + tz;
}

/* ---- the pipeline ----------------------------------------------------------- */

void dr_cm_native_release(cm_ep *e)
{
    nat_pack *pk = e->nat;
    for (uint32_t p = 0; pk && p < e->nat_np; p++) {
        free(pk[p].code);
        free(pk[p].flags);
        free(pk[p].dig);
        free(pk[p].req);
    }
    free(pk);
    e->nat = NULL;
    e->nat_np = 0;
}

static int post_agreement(cm_ep *e, dr_cacc *const *loc, uint32_t L, nat_pack *p, const char *what, dr_err *err)
{
    int mrc;
    void *c, *q;
    if (p->len > INT_MAX / 2)
        return dr_fail(err, DR_EUSAGE, "comm mpi %s: a pack of %zu elements; the native sum takes at most %d (give "
                       "--bytes_per_pack)", what, p->len, INT_MAX / 2);
    if ((c = dr_cm_grow(p->code, &p->code_cap, 2 * p->len + 1))) p->code = c;
    if ((q = dr_cm_grow(p->req, &p->req_cap, 2 * sizeof *p->req))) p->req = q;
    if (!c || !q) return dr_fail(err, DR_ENOMEM, "comm mpi %s: no memory for %zu elements' codes", what, p->len);
    codes_of(loc, L, p->off, p->len, p->code, p->sum);
    p->req[0] = p->req[1] = MPI_REQUEST_NULL;
    p->nreq = 2;
    mrc = MPI_Iallreduce(MPI_IN_PLACE, p->code, (int)(2 * p->len), MPI_INT8_T, MPI_MIN, e->comm, &p->req[0]);
    if (mrc == MPI_SUCCESS)
        mrc = MPI_Iallreduce(MPI_IN_PLACE, p->sum, 2, MPI_UINT32_T, MPI_BOR, e->comm, &p->req[1]);
    return mrc == MPI_SUCCESS ? DR_OK : dr_cm_fail(err, mrc, e->rank, what);
}

/* The digits of every group (group K's elements in index order) and one
 * reduction per group (pieces of at most NAT_PIECE ints), plus the flags. */
static int post_sums(cm_ep *e, dr_cacc *const *loc, uint32_t L, nat_pack *p, int D, const char *what, dr_err *err)
{
    size_t count[NAT_KMAX + 1] = { 0 }, at[NAT_KMAX + 1], total = 0, nreq = 0;
    bool mixed = p->mixed = p->sum[0] != ~p->sum[1];
    int mrc = MPI_SUCCESS;
    int8_t kof[2 * NAT_SPAN];
    void *d, *q, *fl = NULL;
    digit_table(kof, D);
    for (size_t i = 0; i < p->len; i++) {   /* the top's code is not needed again: it becomes K */
        int K = digits_of(p->code, i, kof);
        p->code[2 * i + 1] = (int8_t)K;
        count[K]++;
    }
    for (int K = 1; K <= NAT_KMAX; K++) {
        at[K] = total;
        total += count[K] * (size_t)K;
        nreq += (count[K] * (size_t)K + NAT_PIECE - 1) / NAT_PIECE;
    }
    p->nreq = 0;
    if ((d = dr_cm_grow(p->dig, &p->dig_cap, total * sizeof *p->dig + 1))) p->dig = d;
    if ((q = dr_cm_grow(p->req, &p->req_cap, (nreq + 1) * sizeof *p->req))) p->req = q;
    if (mixed && (fl = dr_cm_grow(p->flags, &p->flags_cap, p->len + 1))) p->flags = fl;
    if (!d || !q || (mixed && !fl))
        return dr_fail(err, DR_ENOMEM, "comm mpi %s: no memory for %zu digits", what, total);
    for (size_t i = 0; i < p->len; i++) {
        int K = p->code[2 * i + 1], g = NAT_Q * p->code[2 * i];
        int32_t *out = p->dig + at[K];
        if (mixed) {
            uint32_t f = 0;
            for (uint32_t r = 0; r < L; r++) f |= loc[r][p->off + i].flags;
            p->flags[i] = (uint8_t)f;
        }
        if (!K) continue;
        put_digits(&loc[0][p->off + i], g, K, D, out);
        for (uint32_t r = 1; r < L; r++) {   /* the other replicas' digits added: below 2^31 (headroom) */
            int32_t t[NAT_KMAX];
            put_digits(&loc[r][p->off + i], g, K, D, t);
            for (int k = 0; k < K; k++) out[k] += t[k];
        }
        at[K] += (size_t)K;
    }
    for (int K = 1; K <= NAT_KMAX && mrc == MPI_SUCCESS; K++) {
        size_t n = count[K] * (size_t)K, base = at[K] - n;
        for (size_t o = 0; o < n && mrc == MPI_SUCCESS; o += NAT_PIECE) {
            size_t m = n - o < NAT_PIECE ? n - o : NAT_PIECE;
            p->req[p->nreq] = MPI_REQUEST_NULL;
            mrc = MPI_Iallreduce(MPI_IN_PLACE, p->dig + base + o, (int)m, MPI_INT32_T, MPI_SUM, e->comm,
                                 &p->req[p->nreq++]);
        }
    }
    if (mrc == MPI_SUCCESS && mixed) {
        p->req[p->nreq] = MPI_REQUEST_NULL;
        mrc = MPI_Iallreduce(MPI_IN_PLACE, p->flags, (int)p->len, MPI_UINT8_T, MPI_BOR, e->comm, &p->req[p->nreq++]);
    }
    return mrc == MPI_SUCCESS ? DR_OK : dr_cm_fail(err, mrc, e->rank, what);
}

static void finish(dr_cacc *a, nat_pack *p, int D)
{
    size_t count[NAT_KMAX + 1] = { 0 }, at[NAT_KMAX + 1], total = 0;
    uint32_t common = p->sum[0];
    for (size_t i = 0; i < p->len; i++) count[p->code[2 * i + 1]]++;
    for (int K = 1; K <= NAT_KMAX; K++) { at[K] = total; total += count[K] * (size_t)K; }
    for (size_t i = 0; i < p->len; i++) {
        dr_cacc *c = &a[p->off + i];
        int K = p->code[2 * i + 1];
        c->flags = 0;
        memset(c->w, 0, sizeof c->w);
        c->exp = 0;
        if (K) {   /* (may mark it overflowed) */
            from_digits(c, p->dig + at[K], K, D, NAT_Q * p->code[2 * i]);
            at[K] += (size_t)K;
        }
        c->flags |= p->mixed ? p->flags[i] : common;
        if (c->flags & DR_CACC_F_OVERFLOW) { memset(c->w, 0, sizeof c->w); c->exp = 0; }
    }
}

/* Whether every request of p completed; *moved when one did now. */
static int test_pack(cm_ep *e, nat_pack *p, bool *done, bool *moved, const char *what, dr_err *err)
{
    int out = 0, mrc, idx[64];
    *done = true;
    for (size_t i = 0; i < p->nreq; i += 64) {
        int n = p->nreq - i < 64 ? (int)(p->nreq - i) : 64;
        mrc = MPI_Testsome(n, p->req + i, &out, idx, MPI_STATUSES_IGNORE);
        if (mrc != MPI_SUCCESS) return dr_cm_fail(err, mrc, e->rank, what);
        if (out != MPI_UNDEFINED && out > 0) *moved = true;
        for (int k = 0; k < n; k++) if (p->req[i + (size_t)k] != MPI_REQUEST_NULL) *done = false;
    }
    return DR_OK;
}

/* Polls the packs in flight until pack `need`'s agreement completes (stage
 * 3), or every pack is done (need == np), finishing any whose sums complete. */
static int drive(cm_ep *e, dr_cacc *a, nat_pack *pk, uint32_t np, uint32_t need, int D, const char *what,
                 dr_err *err)
{
    double last = dr_cm_now();
    int rc;
    dr_cm_awaiting(e, what, -1);
    for (;;) {
        bool moved = false;
        for (uint32_t q = 0; q < np; q++) {
            bool done;
            if (pk[q].stage == 2 || (pk[q].stage == 0 && q != need)) continue;
            if ((rc = test_pack(e, &pk[q], &done, &moved, what, err))) return rc;
            if (done && pk[q].stage == 1) {
                finish(a, &pk[q], D);
                pk[q].stage = 2;
            } else if (done) {
                pk[q].stage = 3;   /* agreement complete: the caller posts the sums */
            }
        }
        if (need < np && pk[need].stage == 3) return DR_OK;
        if (need >= np) {
            bool all = true;
            for (uint32_t q = 0; q < np; q++) all = all && pk[q].stage == 2;
            if (all) return DR_OK;
        }
        if (moved) { last = dr_cm_now(); continue; }
        dr_cm_pong_serve(e);
        if ((rc = dr_cm_notice_check(e, what, err))) return rc;
        if (dr_cm_overdue(e, &last) && (rc = dr_cm_blame(e, &last, what, err))) return rc;
        dr_cm_idle(last);
    }
}

int dr_cm_native_compact(cm_ep *e, dr_cacc *const *loc, uint32_t L, size_t n, const char *what, dr_err *err)
{
    const ct_hub *h = &e->geom;
    uint32_t np = dr_ct_num_packs(h), posted = 0;
    int D = digit_bits((uint64_t)e->size * L), rc = DR_OK;
    dr_cacc *a = loc[0];
    nat_pack *pk;
    size_t off = 0;
    if (!n) return DR_OK;
    if (D < 8) return dr_fail(err, DR_EUNSUPPORTED, "comm mpi %s: %u ranks x %u replicas; the native sum takes "
                              "at most 2^23", what, e->size, L);
    if (e->nat_np != np) {   /* the packs' buffers stay with the endpoint from call to call */
        dr_cm_native_release(e);
        if (!(e->nat = calloc(np, sizeof *pk)))
            return dr_fail(err, DR_ENOMEM, "comm mpi %s: no memory for %u packs", what, np);
        e->nat_np = np;
    }
    pk = e->nat;
    for (uint32_t p = 0; p < np; p++) {
        pk[p].stage = 0;
        pk[p].nreq = 0;
        pk[p].mixed = false;
        pk[p].off = off;
        pk[p].len = dr_ct_pack_len(h, p, n, off);
        off += pk[p].len;
    }
    for (uint32_t p = 0; rc == DR_OK && p < np; p++) {
        while (rc == DR_OK && posted < np && posted < p + NAT_DEPTH) {   /* the same order on every rank */
            if (pk[posted].len) rc = post_agreement(e, loc, L, &pk[posted], what, err);
            else pk[posted].stage = 2;
            posted++;
        }
        if (rc || pk[p].stage == 2) continue;
        if ((rc = drive(e, a, pk, np, p, D, what, err))) break;
        pk[p].stage = 1;
        rc = post_sums(e, loc, L, &pk[p], D, what, err);
    }
    if (rc == DR_OK) rc = drive(e, a, pk, np, np, D, what, err);
    return rc;   /* on failure the library may still write the buffers: they stay until close (the job ends) */
}
