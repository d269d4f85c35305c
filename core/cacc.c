/* distref — the compact exact accumulator (distref/cacc.h).
 *
 * W is a 192-bit two's complement integer in three words. Every term enters
 * as a signed integer X at an exponent e, its trailing zero bits moved into
 * e first, so the window sits on the lowest bit that is really set. Adding
 * X * 2^e to W * 2^exp lines the two up on the lower exponent: the one with
 * the higher exponent is shifted left, which is exact while its magnitude
 * stays below 2^DR_CACC_BITS; when it would not, the accumulator is marked
 * overflowed instead. Rounding is dr_acc's (dr_round_digits): the same
 * exact value gives the same float.
 */
#include "distref/cacc.h"
#include "distref/exact_parts.h"
#include "distref/round_avx512.h"

#include <string.h>

typedef struct u192 { uint64_t w[3]; } u192;

static inline bool is_neg(const u192 *x) { return (x->w[2] >> 63) != 0; }
static inline bool is_zero(const u192 *x) { return !(x->w[0] | x->w[1] | x->w[2]); }

static inline void neg192(u192 *x)
{
    uint64_t c = 1;
    for (int i = 0; i < 3; i++) {
        uint64_t t = ~x->w[i] + c;
        c = c && t == 0;
        x->w[i] = t;
    }
}

static inline void add192(u192 *x, const u192 *y)
{
    uint64_t c = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t s = x->w[i] + y->w[i], c1 = s < x->w[i], t = s + c, c2 = t < s;
        x->w[i] = t;
        c = c1 | c2;
    }
}

static inline int ctz64(uint64_t v)   /* v != 0 */
{
#if defined(__GNUC__)
    return __builtin_ctzll(v);
#else
    int n = 0;
    while (!(v & 1u)) { v >>= 1; n++; }
    return n;
#endif
}

/* Bits of |x|. */
static int mag_bits(const u192 *x)
{
    u192 m = *x;
    if (is_neg(&m)) neg192(&m);
    if (m.w[2]) return 128 + dr_bit_length(m.w[2]);
    if (m.w[1]) return 64 + dr_bit_length(m.w[1]);
    return dr_bit_length(m.w[0]);
}

/* x << s, 0 < s < 192, the result's magnitude known to fit. */
static void shl192(u192 *x, int s)
{
    int q = s >> 6, r = s & 63;
    uint64_t in[3] = { x->w[0], x->w[1], x->w[2] };
    for (int i = 2; i >= 0; i--) {
        int j = i - q;
        uint64_t v = j >= 0 ? in[j] << r : 0;
        if (r && j - 1 >= 0) v |= in[j - 1] >> (64 - r);
        x->w[i] = v;
    }
}

/* x >> s arithmetically, 0 < s < 192, the bits shifted out zero. */
static void sar192(u192 *x, int s)
{
    int q = s >> 6, r = s & 63;
    uint64_t fill = is_neg(x) ? ~(uint64_t)0 : 0, in[3] = { x->w[0], x->w[1], x->w[2] };
    for (int i = 0; i < 3; i++) {
        int j = i + q;
        uint64_t lo = j < 3 ? in[j] : fill, hi = j + 1 < 3 ? in[j + 1] : fill;
        x->w[i] = r ? (lo >> r | hi << (64 - r)) : lo;
    }
}

static int ctz192(const u192 *x)   /* x != 0 */
{
    if (x->w[0]) return ctz64(x->w[0]);
    if (x->w[1]) return 64 + ctz64(x->w[1]);
    return 128 + ctz64(x->w[2]);
}

static void overflow(dr_cacc *a)
{
    a->flags |= DR_CACC_F_OVERFLOW;
}

#if defined(__SIZEOF_INT128__)
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

/* x as an int128 when its top word only extends the sign. */
static inline bool fits128(const u192 *x, i128 *v)
{
    if (x->w[2] != ((x->w[1] >> 63) ? ~(uint64_t)0 : 0)) return false;
    *v = (i128)((u128)x->w[1] << 64 | x->w[0]);
    return true;
}

static inline int bits128(i128 v)   /* bits of |v|, v > -2^127 */
{
    u128 m = v < 0 ? (u128)0 - (u128)v : (u128)v;
    uint64_t hi = (uint64_t)(m >> 64);
    return hi ? 64 + dr_bit_length(hi) : dr_bit_length((uint64_t)m);
}

/* The common case in 128 bits: both values and their aligned sum below
 * 2^127. False when it does not apply (the general path then runs). */
static inline bool add_small(dr_cacc *a, const u192 *X, int32_t e)
{
    u192 W;
    i128 w, x;
    int64_t d = (int64_t)e - a->exp;
    memcpy(W.w, a->w, sizeof W.w);
    if (!fits128(&W, &w) || !fits128(X, &x)) return false;
    if (d >= 0) {
        if (d > 125 || bits128(x) + d > 125 || bits128(w) > 125) return false;
        x = (i128)((u128)x << d);
    } else {
        if (-d > 125 || bits128(w) - d > 125 || bits128(x) > 125) return false;
        w = (i128)((u128)w << -d);
        a->exp = e;
    }
    w += x;
    a->w[0] = (uint64_t)w;
    a->w[1] = (uint64_t)((u128)w >> 64);
    a->w[2] = w < 0 ? ~(uint64_t)0 : 0;
    return true;
}
#endif

/* a += X * 2^e exactly (X != 0, |X| < 2^DR_CACC_BITS), or the flag. */
static void add_value(dr_cacc *a, u192 X, int32_t e)
{
    u192 W;
    int64_t d;
    int tz = ctz192(&X);
    if (a->flags & DR_CACC_F_OVERFLOW) return;
    if (tz) { sar192(&X, tz); e += tz; }
    memcpy(W.w, a->w, sizeof W.w);
#if defined(__SIZEOF_INT128__)
    if (!is_zero(&W) && add_small(a, &X, e)) return;
#endif
    if (is_zero(&W)) {
        if (mag_bits(&X) > DR_CACC_BITS) { overflow(a); return; }
        memcpy(a->w, X.w, sizeof a->w);
        a->exp = e;
        return;
    }
    d = (int64_t)e - a->exp;
    if (d > 0) {
        if (d >= DR_CACC_BITS || mag_bits(&X) + d > DR_CACC_BITS) { overflow(a); return; }
        shl192(&X, (int)d);
    } else if (d < 0) {
        if (-d >= DR_CACC_BITS || mag_bits(&W) - d > DR_CACC_BITS) { overflow(a); return; }
        shl192(&W, (int)-d);
        a->exp = e;
    }
    add192(&W, &X);
    if (mag_bits(&W) > DR_CACC_BITS) { overflow(a); return; }
    memcpy(a->w, W.w, sizeof a->w);
}

void dr_cacc_init(dr_cacc *a)
{
    memset(a, 0, sizeof *a);
}

void dr_cacc_add_scaled(dr_cacc *a, int64_t hi, uint64_t lo, int32_t e)
{
    u192 X = { { lo, (uint64_t)hi, hi < 0 ? ~(uint64_t)0 : 0 } };
    if (!(lo | (uint64_t)hi)) return;
    a->flags |= DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
    if (!(a->w[0] | a->w[1] | a->w[2]) && !(a->flags & DR_CACC_F_OVERFLOW)) {
        /* the common case, a first term (one GEMM per step writes each
         * element once): it fits, only its trailing zeros move into exp */
#if defined(__SIZEOF_INT128__)
        i128 v = (i128)((u128)(uint64_t)hi << 64 | lo);
        int tz = lo ? ctz64(lo) : 64 + ctz64((uint64_t)hi);
        v >>= tz;   /* arithmetic, and exact: the bits shifted out are zero */
        a->w[0] = (uint64_t)v;
        a->w[1] = (uint64_t)((u128)v >> 64);
        a->w[2] = v < 0 ? ~(uint64_t)0 : 0;
        a->exp = e + tz;
#else
        int tz = ctz192(&X);
        if (tz) { sar192(&X, tz); e += tz; }
        memcpy(a->w, X.w, sizeof a->w);
        a->exp = e;
#endif
        return;
    }
    add_value(a, X, e);
}

static void add_i64(dr_cacc *a, int64_t v, int32_t e)
{
    dr_cacc_add_scaled(a, v < 0 ? -1 : 0, (uint64_t)v, e);
}

void dr_cacc_add(dr_cacc *a, float x)
{
    uint32_t bits = dr_f32_bits(x);
    int32_t m, e;
    if (dr_f32_is_special(bits)) { a->flags |= dr_special_sum_flags(bits); return; }
    dr_split_f32(bits, &m, &e);
    a->flags |= dr_term_flags((int)(bits >> 31), m == 0);
    if (m) add_i64(a, m, e);
}

void dr_cacc_add_prod(dr_cacc *a, float x, float y)
{
    uint32_t xb = dr_f32_bits(x), yb = dr_f32_bits(y);
    int32_t xm, xe, ym, ye;
    if (dr_f32_is_special(xb) || dr_f32_is_special(yb)) { a->flags |= dr_special_prod_flags(xb, yb); return; }
    dr_split_f32(xb, &xm, &xe);
    dr_split_f32(yb, &ym, &ye);
    a->flags |= dr_term_flags((int)((xb ^ yb) >> 31), xm == 0 || ym == 0);
    if (xm && ym) add_i64(a, (int64_t)xm * ym, xe + ye);
}

void dr_cacc_merge(dr_cacc *dst, const dr_cacc *src)
{
    u192 X;
    dst->flags |= src->flags;
    memcpy(X.w, src->w, sizeof X.w);
    if (!is_zero(&X)) add_value(dst, X, src->exp);
}

void dr_cacc_mul_u32(dr_cacc *a, uint32_t k)
{
    u192 W;
    int tz;
    memcpy(W.w, a->w, sizeof W.w);
    if (k <= 1 || is_zero(&W) || (a->flags & DR_CACC_F_OVERFLOW)) {
        if (k == 0) memset(a->w, 0, sizeof a->w);
        return;
    }
    tz = ctz64(k);
    k >>= tz;
    if (k > 1) {
        bool neg = is_neg(&W);
        uint64_t carry = 0;
        if (mag_bits(&W) + dr_bit_length(k) > DR_CACC_BITS) { overflow(a); return; }
        if (neg) neg192(&W);
        for (int i = 0; i < 3; i++) {   /* 64 x 32 bits, in two 32-bit halves */
            uint64_t lo = (W.w[i] & 0xffffffffu) * k + carry;
            uint64_t hi = (W.w[i] >> 32) * k + (lo >> 32);
            W.w[i] = (lo & 0xffffffffu) | hi << 32;
            carry = hi >> 32;
        }
        if (neg) neg192(&W);
        memcpy(a->w, W.w, sizeof a->w);
    }
    a->exp += tz;
}

float dr_cacc_round_div(const dr_cacc *a, uint32_t d)
{
    u192 m;
    uint32_t dig[8];
    int neg;
    if (a->flags & DR_CACC_F_OVERFLOW) return dr_bits_f32(0x7fc00000u);
    if (a->flags & (DR_ACC_F_POS_INF | DR_ACC_F_NEG_INF | DR_ACC_F_NAN)) return dr_round_special(a->flags);
    if (d == 0) return dr_bits_f32(0x7fc00000u);
    memcpy(m.w, a->w, sizeof m.w);
    if (is_zero(&m)) {   /* an exact zero: -0 only for a non-empty all-(-0) sum, as IEEE */
        int neg0 = (a->flags & DR_ACC_F_NONEMPTY) && !(a->flags & DR_ACC_F_NOT_NEG0);
        return dr_bits_f32(neg0 ? 0x80000000u : 0u);
    }
    neg = is_neg(&m);
    if (neg) neg192(&m);
#if defined(__SIZEOF_INT128__)
    {   /* N: |W| with its top bit at 126 (bits shifted out are sticky);
         * q = floor(N / d) has at least 96 bits and X / d lies in
         * [q, q + 1) * 2^e, exactly q * 2^e only when nothing was left over:
         * q's top 64 bits and a sticky bit round as the whole quotient. */
        int bits = m.w[2] ? 128 + dr_bit_length(m.w[2]) : m.w[1] ? 64 + dr_bit_length(m.w[1]) : dr_bit_length(m.w[0]);
        int sh = bits - 127, e = a->exp, sticky = 0, qb;
        u128 N, q;
        uint64_t top;
        if (sh > 0) {   /* |W| < 2^189: 0 < sh < 63, keep bits [sh, sh + 127) */
            sticky = (m.w[0] & (((uint64_t)1 << sh) - 1u)) != 0;
            N = (u128)(m.w[1] >> sh | m.w[2] << (64 - sh)) << 64 | (m.w[0] >> sh | m.w[1] << (64 - sh));
        } else {
            N = ((u128)m.w[1] << 64 | m.w[0]) << -sh;
        }
        e += sh;
        if ((d & (d - 1u)) == 0) {   /* 2^k: nothing to divide */
            q = N;
            while (d > 1u) { d >>= 1; e--; }
        } else {   /* N's top 64 bits (top bit set) over d < 2^31: a quotient of at least
                    * 33 bits, more than rounding needs; the rest only decides stickiness */
            uint64_t n64 = (uint64_t)(N >> 63);
            sticky |= ((uint64_t)N & (((uint64_t)1 << 63) - 1u)) != 0;
            sticky |= n64 % d != 0;
            q = n64 / d;
            e += 63;
        }
        qb = (uint64_t)(q >> 64) ? 64 + dr_bit_length((uint64_t)(q >> 64)) : dr_bit_length((uint64_t)q);
        if (qb > 64) {
            int s = qb - 64;
            sticky |= (q & (((u128)1 << s) - 1u)) != 0;
            top = (uint64_t)(q >> s);
            e += s;
        } else {
            top = (uint64_t)q;
        }
        return dr_round_window(top, e, sticky, neg);
    }
#endif
    /* two zero digits below the value: a quotient of three digits then
     * always has the significant bits dr_round_digits needs */
    dig[0] = dig[1] = 0;
    for (int i = 0; i < 3; i++) {
        dig[2 + 2 * i] = (uint32_t)m.w[i];
        dig[3 + 2 * i] = (uint32_t)(m.w[i] >> 32);
    }
    return dr_round_digits(dig, 7, a->exp - 64, d, neg);
}

#if defined(__SIZEOF_INT128__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
/* Eight accumulators at a time, d = 2^k: |W| cut to 64 bits below its
 * leading one (the words below it sticky), then distref/round_avx512.h; a
 * zero W gives +-0 by the flags, as dr_cacc_round_div. A lane with
 * specials, the overflow flag or an exponent out of range is left unset in
 * the returned mask (the caller rounds it one by one). */
_Static_assert(sizeof(dr_cacc) == 32, "dr_cacc: four 64-bit words");

static DR_ROUND_ISA __mmask8 round_pow2_x8(const dr_cacc *a, int k, float *out)
{
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi64(1), all = _mm512_set1_epi64(-1);
    const __m512i c64 = _mm512_set1_epi64(64);
    __m512i z0 = _mm512_loadu_si512((const void *)a), z1 = _mm512_loadu_si512((const void *)(a + 2));
    __m512i z2 = _mm512_loadu_si512((const void *)(a + 4)), z3 = _mm512_loadu_si512((const void *)(a + 6));
    const __m512i i01 = _mm512_set_epi64(13, 9, 5, 1, 12, 8, 4, 0), i23 = _mm512_set_epi64(15, 11, 7, 3, 14, 10, 6, 2);
    const __m512i lo4 = _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0), hi4 = _mm512_set_epi64(15, 14, 13, 12, 7, 6, 5, 4);
    __m512i p01 = _mm512_permutex2var_epi64(z0, i01, z1), q01 = _mm512_permutex2var_epi64(z2, i01, z3);
    __m512i p23 = _mm512_permutex2var_epi64(z0, i23, z1), q23 = _mm512_permutex2var_epi64(z2, i23, z3);
    __m512i w0 = _mm512_permutex2var_epi64(p01, lo4, q01), w1 = _mm512_permutex2var_epi64(p01, hi4, q01);
    __m512i w2 = _mm512_permutex2var_epi64(p23, lo4, q23), ef = _mm512_permutex2var_epi64(p23, hi4, q23);
    __m512i ex = _mm512_srai_epi64(_mm512_slli_epi64(ef, 32), 32), hiw, low, rest, base, s, W, e;
    __mmask8 ok, okflags, neg, c0, c1, m2, m1, sticky, wz, nz0;
    __m256 f;
    ok = okflags = _mm512_testn_epi64_mask(ef, _mm512_set1_epi64((long long)(DR_CACC_F_OVERFLOW | DR_ACC_F_POS_INF |
                                                                   DR_ACC_F_NEG_INF | DR_ACC_F_NAN) << 32));
    /* |W| and its sign */
    neg = _mm512_cmplt_epi64_mask(w2, zero);
    c0 = neg & _mm512_cmpeq_epi64_mask(w0, zero);
    c1 = c0 & _mm512_cmpeq_epi64_mask(w1, zero);
    w0 = _mm512_mask_sub_epi64(w0, neg, zero, w0);
    w1 = _mm512_mask_xor_epi64(w1, neg, w1, all);
    w1 = _mm512_mask_add_epi64(w1, c0, w1, one);
    w2 = _mm512_mask_xor_epi64(w2, neg, w2, all);
    w2 = _mm512_mask_add_epi64(w2, c1, w2, one);
    /* the leading word, the one below and the rest */
    m2 = _mm512_test_epi64_mask(w2, all);
    m1 = (__mmask8)(~m2 & _mm512_test_epi64_mask(w1, all));
    hiw = _mm512_mask_blend_epi64(m2, _mm512_mask_blend_epi64(m1, w0, w1), w2);
    low = _mm512_mask_blend_epi64(m2, _mm512_maskz_mov_epi64(m1, w0), w1);
    rest = _mm512_maskz_mov_epi64(m2, w0);
    base = _mm512_mask_blend_epi64(m2, _mm512_maskz_mov_epi64(m1, c64), _mm512_set1_epi64(128));
    wz = _mm512_testn_epi64_mask(hiw, all);        /* W = 0: -0 only for a non-empty all-(-0) sum */
    nz0 = _mm512_mask_cmpeq_epi64_mask(wz, _mm512_and_si512(ef, _mm512_set1_epi64((long long)(DR_ACC_F_NONEMPTY |
                                       DR_ACC_F_NOT_NEG0) << 32)), _mm512_set1_epi64((long long)DR_ACC_F_NONEMPTY << 32));
    s = _mm512_sub_epi64(c64, _mm512_lzcnt_epi64(hiw));                 /* bits in the leading word */
    W = _mm512_or_si512(_mm512_sllv_epi64(hiw, _mm512_sub_epi64(c64, s)), _mm512_srlv_epi64(low, s));
    sticky = _mm512_test_epi64_mask(_mm512_or_si512(_mm512_sllv_epi64(low, _mm512_sub_epi64(c64, s)), rest), all);
    e = _mm512_add_epi64(ex, _mm512_sub_epi64(_mm512_add_epi64(base, s), _mm512_set1_epi64(64 + k)));
    ok &= _mm512_cmpge_epi64_mask(e, _mm512_set1_epi64(DR_ROUND_E_MIN)) &
          _mm512_cmple_epi64_mask(e, _mm512_set1_epi64(DR_ROUND_E_MAX));
    ok |= wz;   /* a zero's exponent is any: out of range is fine */
    f = dr_round_odd_avx512(W, sticky, e, neg);
    f = _mm256_mask_mov_ps(f, wz, _mm256_castsi256_ps(_mm256_maskz_set1_epi32(nz0, (int)0x80000000u)));
    _mm256_storeu_ps(out, f);
    return ok & okflags;
}
#endif

void dr_cacc_round_div_n(const dr_cacc *a, size_t n, uint32_t d, float *out)
{
    size_t i = 0;
#if defined(__SIZEOF_INT128__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    if (d != 0 && (d & (d - 1u)) == 0 && n >= 8 && dr_round_avx512_ok()) {
        int k = 0;
        while ((1u << k) < d) k++;
        for (; i + 8 <= n; i += 8) {
            __mmask8 ok = round_pow2_x8(a + i, k, out + i);
            if (ok != 0xff)
                for (int j = 0; j < 8; j++)
                    if (!(ok >> j & 1u)) out[i + j] = dr_cacc_round_div(&a[i + j], d);
        }
    }
#endif
    for (; i < n; i++) out[i] = dr_cacc_round_div(&a[i], d);
}

bool dr_cacc_to_acc(dr_acc *dst, const dr_cacc *src)
{
    u192 m;
    bool neg;
    dr_acc_init(dst);
    if (src->flags & DR_CACC_F_OVERFLOW) return false;
    dst->flags = src->flags;
    memcpy(m.w, src->w, sizeof m.w);
    if (is_zero(&m)) return true;
    neg = is_neg(&m);
    if (neg) neg192(&m);
    for (int i = 0; i < 6; i++) {   /* 32-bit pieces, each an exact dr_acc term */
        int64_t piece = (int64_t)((m.w[i / 2] >> (32 * (i % 2))) & 0xffffffffu);
        if (piece) dr_acc_add_i64(dst, neg ? -piece : piece, src->exp + 32 * i);
    }
    dst->pending = 6;
    dr_acc_normalize(dst);
    return true;
}

void dr_cacc_from_acc(dr_cacc *dst, const dr_acc *src)
{
    dr_acc n = *src;
    uint32_t dig[DR_ACC_LIMBS + 1], ext;
    int lo = 0, hi, top, tz;
    u192 X = { { 0, 0, 0 } };
    dr_cacc_init(dst);
    dr_acc_normalize(&n);
    dst->flags = n.flags;
    /* two's complement digits: limb 19 is signed and below 2^31 in magnitude */
    for (int i = 0; i < DR_ACC_LIMBS; i++) dig[i] = (uint32_t)((uint64_t)n.limb[i] & 0xffffffffu);
    ext = n.limb[DR_ACC_LIMBS - 1] < 0 ? 0xffffffffu : 0;
    dig[DR_ACC_LIMBS] = ext;
    while (lo < DR_ACC_LIMBS && dig[lo] == 0) lo++;
    if (lo == DR_ACC_LIMBS) return;                 /* zero (its flags kept) */
    hi = DR_ACC_LIMBS;
    while (hi > lo && dig[hi] == ext) hi--;
    top = (dig[hi] >> 31) == (ext & 1u) ? hi : hi + 1;   /* a digit that carries the sign */
    tz = 0;
    while (!((dig[lo] >> tz) & 1u)) tz++;
    {   /* bits from the lowest set one up to and including a sign bit */
        uint32_t t = dig[hi] ^ ext;
        int tb = 0;
        while (t) { t >>= 1; tb++; }
        if (32 * (hi - lo) + tb + 1 - tz > 192) { overflow(dst); return; }
    }
    for (int k = 0; k < 3; k++) {   /* bits [64k + tz, 64k + tz + 64) of the digits from lo */
        uint64_t v = 0;
        for (int bit = 0; bit < 64; bit += 32) {
            int pos = 64 * k + tz + bit, i = lo + pos / 32, o = pos % 32;
            uint64_t d0 = i <= top ? dig[i] : ext, d1 = i + 1 <= top ? dig[i + 1] : ext;
            uint64_t piece = (d0 >> o | d1 << (32 - o)) & 0xffffffffu;
            v |= piece << bit;
        }
        X.w[k] = v;
    }
    add_value(dst, X, 32 * lo + tz + DR_ACC_LSB_EXP);
}

/* ---- wire format --------------------------------------------------------- */

#define KNOWN_FLAGS (DR_ACC_F_POS_INF | DR_ACC_F_NEG_INF | DR_ACC_F_NAN | \
                     DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0 | DR_CACC_F_OVERFLOW)

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void dr_cacc_serialize(const dr_cacc *a, uint8_t out[DR_CACC_BYTES])
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (sizeof *a == DR_CACC_BYTES) {   /* the struct is the wire format here */
        memcpy(out, a, DR_CACC_BYTES);
        return;
    }
#endif
    for (int i = 0; i < 3; i++) put64(out + 8 * i, a->w[i]);
    put64(out + 24, (uint64_t)(uint32_t)a->exp | (uint64_t)a->flags << 32);
}

bool dr_cacc_deserialize(dr_cacc *a, const uint8_t in[DR_CACC_BYTES])
{
    dr_cacc t;
    u192 W;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (sizeof t == DR_CACC_BYTES) memcpy(&t, in, DR_CACC_BYTES);
    else
#endif
    {
        uint64_t tail = get64(in + 24);
        for (int i = 0; i < 3; i++) t.w[i] = get64(in + 8 * i);
        t.exp = (int32_t)(uint32_t)tail;
        t.flags = (uint32_t)(tail >> 32);
    }
    memcpy(W.w, t.w, sizeof W.w);
    if ((t.flags & ~(uint32_t)KNOWN_FLAGS) || mag_bits(&W) > DR_CACC_BITS) return false;
    *a = t;
    return true;
}
