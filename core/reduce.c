/* distref — fast exact sums and dot products.
 *
 * Adding every term straight into the 20-limb accumulator costs three limb
 * updates per term. Instead, terms are first binned by exponent (the "large
 * accumulator" idea of Neal, arXiv:1505.05571): a float is m * 2^e with
 * |m| < 2^24, so all terms of one exponent add exactly in an int64, and only
 * the bins are folded into the accumulator at the end of a chunk. Chunks are
 * sized so that no bin can overflow. Interleaved bin sets break the
 * load-add-store dependency when consecutive terms share an exponent.
 */
#include "distref/exact_parts.h"
#include "distref/exact_bins.h"

#include <string.h>

/* ---- sums --------------------------------------------------------------- */

/* 256 exponent fields x 4 sets; |m| < 2^24, so a chunk of 2^32 terms puts at
 * most 2^30 * 2^24 into one bin and 2^56 into the sum of one field. */
#define SUM_SETS 4
#define SUM_CHUNK ((size_t)1 << 32)

static void sum_chunk(dr_acc *a, const float *x, size_t n)
{
    int64_t bin[SUM_SETS][256];
    uint32_t not_neg0 = 0;
    memset(bin, 0, sizeof bin);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = dr_f32_bits(x[i]);
        uint32_t field = (u >> 23) & 0xffu;
        int64_t mag = (int64_t)((u & 0x7fffffu) | (uint32_t)(field != 0) << 23);
        int64_t s = -(int64_t)(u >> 31);            /* 0 or -1 */
        if (field == 255) { dr_acc_note_special_sum(a, u); continue; }
        bin[i & (SUM_SETS - 1)][field] += (mag ^ s) - s;
        not_neg0 |= (u != 0x80000000u);
    }
    for (int f = 0; f < 256; f++) {
        int64_t total = 0;
        for (int k = 0; k < SUM_SETS; k++) total += bin[k][f];
        if (total) {
            dr_acc_add_i64(a, total, (f ? f : 1) - 150);
            if (++a->pending >= DR_ACC_MAX_PENDING) dr_acc_normalize(a);
        }
    }
    a->flags |= DR_ACC_F_NONEMPTY | (not_neg0 ? DR_ACC_F_NOT_NEG0 : 0u);
}

/* ---- sums on AVX-512: a fixed-point window per chunk ---------------------
 *
 * A chunk of WIN_CHUNK terms whose largest exponent field is F (1 for
 * zeros and subnormals) is summed in int64 lanes as integers in units of
 * 2^(F - 150 - WIN_S): a term m * 2^(f - 150) is m << (WIN_S - (F - f)).
 * |m| < 2^24, so a term is below 2^51 and a whole chunk below 2^63: the
 * lanes and their total are exact, and the total goes into the accumulator
 * once per chunk. Terms more than WIN_S binades below F ("below the
 * window") are added one by one with dr_acc_add, exactly; a chunk holding
 * inf or NaN takes the portable path. The same value as the bins, so the
 * same bits; chosen at run time (__builtin_cpu_supports), the portable
 * path everywhere else. */
#define WIN_CHUNK 4096
#define WIN_S 27

/* -DDR_EXACT_NO_SIMD builds the portable path alone (the tests' second
 * build, test_exact_portable: the same bits from both). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(DR_EXACT_NO_SIMD)
#include <immintrin.h>
#define HAVE_WIN_AVX512 1

__attribute__((target("avx512f")))
static void add_below_window(dr_acc *a, const float *x, __mmask16 below)
{
    while (below) {
        int l = __builtin_ctz(below);
        dr_acc_add(a, x[l]);
        below &= (__mmask16)(below - 1u);
    }
}

/* One chunk, n <= WIN_CHUNK terms, no inf or NaN, largest field F. */
__attribute__((target("avx512f")))
static void win_chunk_avx512(dr_acc *a, const float *x, size_t n, int F, uint32_t *not_neg0)
{
    const __m512i fmask = _mm512_set1_epi32(0xff), mmask = _mm512_set1_epi32(0x7fffff);
    const __m512i hidden = _mm512_set1_epi32(0x800000), one = _mm512_set1_epi32(1);
    const __m512i negzero = _mm512_set1_epi32((int)0x80000000u), zero = _mm512_setzero_si512();
    const __m512i base = _mm512_set1_epi32(WIN_S - F);
    __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
    __mmask16 nn0 = 0;
    size_t i = 0;
    for (; i < n; i += 16) {
        __mmask16 live = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        __m512i u = _mm512_maskz_loadu_epi32(live, x + i);
        __m512i field = _mm512_and_si512(_mm512_srli_epi32(u, 23), fmask);
        __mmask16 normal = _mm512_test_epi32_mask(field, field);
        __m512i mant = _mm512_mask_or_epi32(_mm512_and_si512(u, mmask), normal, _mm512_and_si512(u, mmask), hidden);
        __m512i sh = _mm512_add_epi32(base, _mm512_max_epi32(field, one));   /* WIN_S - (F - fe) */
        __mmask16 nonzero = _mm512_test_epi32_mask(mant, mant);
        __mmask16 below = _mm512_mask_cmplt_epi32_mask(nonzero, sh, zero);
        __mmask16 neg = _mm512_test_epi32_mask(u, negzero);
        __m512i lo, hi, slo, shi;
        nn0 |= _mm512_mask_cmpneq_epi32_mask(live, u, negzero);
        if (below) {
            add_below_window(a, x + i, below);
            mant = _mm512_maskz_mov_epi32((__mmask16)~below, mant);
            sh = _mm512_max_epi32(sh, zero);
        }
        lo = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(mant));
        hi = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(mant, 1));
        slo = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(sh));
        shi = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(sh, 1));
        lo = _mm512_sllv_epi64(lo, slo);
        hi = _mm512_sllv_epi64(hi, shi);
        acc0 = _mm512_mask_sub_epi64(_mm512_add_epi64(acc0, lo), (__mmask8)neg, acc0, lo);
        acc1 = _mm512_mask_sub_epi64(_mm512_add_epi64(acc1, hi), (__mmask8)(neg >> 8), acc1, hi);
    }
    {
        int64_t total = _mm512_reduce_add_epi64(_mm512_add_epi64(acc0, acc1));
        if (total) {
            dr_acc_add_i64(a, total, F - 150 - WIN_S);
            if (++a->pending >= DR_ACC_MAX_PENDING) dr_acc_normalize(a);
        }
    }
    *not_neg0 |= nn0 != 0;
}

/* The largest exponent field of n <= WIN_CHUNK terms (255: inf or NaN). */
__attribute__((target("avx512f")))
static int max_field_avx512(const float *x, size_t n)
{
    const __m512i emask = _mm512_set1_epi32(0x7f800000);
    __m512i m = _mm512_setzero_si512();
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 live = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_maskz_loadu_epi32(live, x + i), emask));
    }
    return (int)(_mm512_reduce_max_epu32(m) >> 23);
}

static void sum_chunk(dr_acc *a, const float *x, size_t n);

static void sum_window(dr_acc *a, const float *x, size_t n)
{
    uint32_t not_neg0 = 0;
    int any = 0;
    while (n > 0) {
        size_t len = n < WIN_CHUNK ? n : WIN_CHUNK;
        int F = max_field_avx512(x, len);
        if (F == 255) sum_chunk(a, x, len);        /* inf or NaN: the portable path */
        else { win_chunk_avx512(a, x, len, F ? F : 1, &not_neg0); any = 1; }
        x += len;
        n -= len;
    }
    if (any) a->flags |= DR_ACC_F_NONEMPTY | (not_neg0 ? DR_ACC_F_NOT_NEG0 : 0u);
}
#endif

void dr_acc_add_sum(dr_acc *a, const float *x, size_t n)
{
    if (n < 64) {               /* clearing the bins would cost more than the terms */
        for (size_t i = 0; i < n; i++) dr_acc_add(a, x[i]);
        return;
    }
#if defined(HAVE_WIN_AVX512)
    if (__builtin_cpu_supports("avx512f")) {
        sum_window(a, x, n);
        return;
    }
#endif
    while (n > 0) {
        size_t len = n < SUM_CHUNK ? n : SUM_CHUNK;
        sum_chunk(a, x, len);
        x += len;
        n -= len;
    }
}

float dr_sum_f32(const float *x, size_t n)
{
    dr_acc a;
    dr_acc_init(&a);
    dr_acc_add_sum(&a, x, n);
    return dr_acc_round(&a);
}

/* ---- dot products ------------------------------------------------------- */

void dr_prod_bins_fold(dr_prod_bins *b, dr_acc *a)
{
    for (int k = b->lo; k <= b->hi; k++) {
        int64_t total = b->bin[0][k] + b->bin[1][k];
        b->bin[0][k] = b->bin[1][k] = 0;
        if (total) {
            dr_acc_add_i64(a, total, k + 2 * DR_F32_EXP_MIN);
            if (++a->pending >= DR_ACC_MAX_PENDING) dr_acc_normalize(a);
        }
    }
    b->lo = DR_PROD_BINS;
    b->hi = -1;
}

/* Flags of n products that sum to an exact zero (the rare case where the
 * sign of zero needs the terms themselves). */
uint32_t dr_zero_dot_flags(const float *x, size_t incx, const float *y, size_t incy, size_t n)
{
    uint32_t flags = n ? DR_ACC_F_NONEMPTY : 0u;
    for (size_t k = 0; k < n; k++) {
        uint32_t xb = dr_f32_bits(x[k * incx]), yb = dr_f32_bits(y[k * incy]);
        int zero = !(xb & 0x7fffffffu) || !(yb & 0x7fffffffu);
        if (!(zero && ((xb ^ yb) >> 31))) flags |= DR_ACC_F_NOT_NEG0;
    }
    return flags;
}

void dr_acc_add_dot_strided(dr_acc *a, const float *x, size_t incx,
                            const float *y, size_t incy, size_t n, dr_prod_bins *b)
{
    size_t done = 0;
    dr_acc part;
    dr_acc_init(&part);
    while (done < n) {
        size_t end = n - done < DR_PROD_CHUNK ? n : done + DR_PROD_CHUNK;
        for (size_t k = done; k < end; k++) {
            uint32_t xb = dr_f32_bits(x[k * incx]), yb = dr_f32_bits(y[k * incy]);
            int32_t xm, xe, ym, ye;
            if (dr_f32_is_special(xb) || dr_f32_is_special(yb)) {
                dr_acc_note_special_prod(&part, xb, yb);
                continue;
            }
            dr_split_f32(xb, &xm, &xe);
            dr_split_f32(yb, &ym, &ye);
            dr_prod_bins_add(b, k, (int64_t)xm * ym, xe + ye - 2 * DR_F32_EXP_MIN);
        }
        dr_prod_bins_fold(b, &part);
        done = end;
    }
    if (n) {
        int zero = 1;
        dr_acc_normalize(&part);
        for (int i = 0; i < DR_ACC_LIMBS; i++) zero &= part.limb[i] == 0;
        part.flags |= zero ? dr_zero_dot_flags(x, incx, y, incy, n)
                           : DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
    }
    dr_acc_merge(a, &part);
}

void dr_acc_add_dot(dr_acc *a, const float *x, const float *y, size_t n)
{
    dr_prod_bins b;
    dr_prod_bins_init(&b);
    dr_acc_add_dot_strided(a, x, 1, y, 1, n, &b);
}

float dr_dot_f32(const float *x, const float *y, size_t n)
{
    dr_acc a;
    dr_acc_init(&a);
    dr_acc_add_dot(&a, x, y, n);
    return dr_acc_round(&a);
}
