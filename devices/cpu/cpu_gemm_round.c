/* distref devices — the CRT path's f32 outputs rounded eight at a time on
 * AVX-512: bias_j + V_ij 2^(Ea_i + Eb_j), V the exact 128-bit integer the
 * residues gave (cpu_gemm_crt.c), rounded once to the nearest float, ties
 * to even, in 128-bit integers and one double:
 *
 *   1. the bias m 2^e (m < 2^24) joins V as the integer m 2^(e - E) when
 *      0 <= e - E <= 100 (|V| < 2^96, so the sum stays below 2^125);
 *   2. |V| is cut to a 64-bit window W below its leading bit, the bits
 *      shifted out OR-ed into W's lowest bit (sticky);
 *   3. W is converted to double rounding to odd: toward zero, then the
 *      lowest mantissa bit set when the conversion was inexact. A value
 *      rounded to odd with 53 bits, then to nearest with at most 24, gives
 *      the value's own nearest float (Boldo and Melquiond 2008): the odd
 *      bit keeps a value off the float midpoints exactly when it was off;
 *   4. the double is scaled by 2^(E + shift) (exact: the exponent is kept
 *      inside the double's normal range) and converted to float to nearest,
 *      which also gives float subnormals and overflow to inf correctly;
 *   5. the sign is V's.
 *
 * A lane takes the general path (cpu_gemm.c's window rounding through the
 * exact accumulator) when this cannot decide it: the sum is zero (the
 * sign of a zero result depends on the terms), the bias is inf/NaN or its
 * unit lies below V's or more than 100 bits above it, the column is
 * marked (remainders, inf/NaN, all zeros: eb[j] = DR_ROUND_SKIP), or the
 * exponent leaves [-900, 800]. tests/test_fastgemm_round.c checks every
 * step against dr_gemm_f32 (MPFR-tested): ties, sticky bits only below the
 * window, windows of every width, biases at and past both limits,
 * subnormal results, overflow, signed zeros and inf/NaN.
 */
#include "devices/cpu/cpu_gemm_internal.h"
#include "distref/cacc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>


/* Per column of op(B), its exponent, or DR_ROUND_SKIP for one with
 * remainders, inf/NaN or all zeros, and room for the done flags of every
 * row; NULL (and *done NULL) when vnni is 0, there is no V, K is 0, or
 * memory is short: then every element takes the scalar paths, the same bits. */
int32_t *dr_crt_vector_columns(const dr_product *p, int vnni, uint8_t **done)
{
    size_t M = p->a.nvec, N = p->b.nvec;
    int32_t *eb = NULL;
    *done = NULL;
#if defined(__SIZEOF_INT128__)
    if (!vnni || !p->V || p->a.K == 0) return NULL;
    eb = malloc(N * sizeof *eb + 64);
    *done = malloc((N + 7) / 8 * M + 64);
    if (!eb || !*done) { free(eb); free(*done); *done = NULL; return NULL; }
    for (size_t j = 0; j < N; j++)
        eb[j] = p->b.special[j] || p->b.zero[j] || p->b.rem_start[j] != p->b.rem_start[j + 1] ? DR_ROUND_SKIP
                                                                                           : p->b.base[j];
#else
    (void)vnni; (void)M; (void)N;
#endif
    return eb;
}

/* Whether row i of op(A) takes the eight-at-a-time paths. */
bool dr_crt_row_clean(const dr_product *p, size_t i)
{
    return !p->a.special[i] && !p->a.zero[i] && p->a.rem_start[i] == p->a.rem_start[i + 1];
}

#if defined(__SIZEOF_INT128__)
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(DR_NO_VNNI)
#include "distref/round_avx512.h"
#include "devices/seams.h"

DR_ROUND_ISA void dr_crt_round_row_avx512(const dr_i128 *V, size_t N, int Ea, const int32_t *eb, const float *bias,
                                       float *out, uint8_t *done)
{
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi64(1), c64 = _mm512_set1_epi64(64);
    const __m512i even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), odd = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    const __m512i ea = _mm512_set1_epi64(Ea);
    for (size_t j0 = 0; j0 < N; j0 += 8) {
        __mmask8 live = N - j0 >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (N - j0)) - 1u), ok, neg, lz, sticky;
        size_t q = N - j0 >= 8 ? 16 : 2 * (N - j0);     /* live 64-bit words of V */
        __mmask8 w0 = q >= 8 ? (__mmask8)0xff : (__mmask8)((1u << q) - 1u);
        __mmask8 w1 = q >= 16 ? (__mmask8)0xff : q > 8 ? (__mmask8)((1u << (q - 8)) - 1u) : (__mmask8)0;
        __m512i x0, x1, lo, hi, E, n, sh, W, t;
        __m256 f;
        /* 8 two's complement 128-bit values as (lo, hi) 64-bit lanes */
        x0 = _mm512_maskz_loadu_epi64(w0, (const void *)(V + j0));
        x1 = _mm512_maskz_loadu_epi64(w1, (const void *)(V + j0 + 4));
        lo = _mm512_permutex2var_epi64(x0, even, x1);
        hi = _mm512_permutex2var_epi64(x0, odd, x1);
        E = _mm512_add_epi64(ea, _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(live, eb + j0)));
        ok = _mm512_mask_cmpge_epi64_mask(live, E, _mm512_set1_epi64(-900)) &   /* E + shift: see round_avx512.h */
             _mm512_cmple_epi64_mask(E, _mm512_set1_epi64(800));
        if (bias) {   /* bias m 2^e added as the integer m 2^(e - E), 0 <= e - E <= 100 */
            __m512i bb = _mm512_cvtepu32_epi64(_mm256_maskz_loadu_epi32(live, bias + j0));
            __m512i ef = _mm512_and_si512(_mm512_srli_epi64(bb, 23), _mm512_set1_epi64(0xff));
            __m512i m = _mm512_and_si512(bb, _mm512_set1_epi64(0x7fffff)), s, blo, bhi;
            __mmask8 nz, bneg;
            m = _mm512_mask_or_epi64(m, _mm512_cmpneq_epi64_mask(ef, zero), m, _mm512_set1_epi64(0x800000));
            /* e = max(ef, 1) - 150 */
            s = _mm512_sub_epi64(_mm512_sub_epi64(_mm512_max_epi64(ef, one), _mm512_set1_epi64(150)), E);
            nz = _mm512_cmpneq_epi64_mask(m, zero);
            ok &= _mm512_cmpneq_epi64_mask(ef, _mm512_set1_epi64(0xff));
            ok &= ~nz | (_mm512_cmpge_epi64_mask(s, DR_SEAM_BIAS_LOWEST(zero)) &
                         _mm512_cmple_epi64_mask(s, _mm512_set1_epi64(100)));
            s = _mm512_max_epi64(s, zero);
            blo = _mm512_sllv_epi64(m, s);       /* counts of 64 and more give 0 */
            bhi = DR_SEAM_BIAS_HIGH(_mm512_sllv_epi64(m, _mm512_sub_epi64(s, c64)),
                                    _mm512_srlv_epi64(m, _mm512_sub_epi64(c64, s)));
            bneg = _mm512_test_epi64_mask(bb, _mm512_set1_epi64(0x80000000LL));
            bhi = _mm512_mask_xor_epi64(bhi, bneg, bhi, _mm512_set1_epi64(-1));      /* -(bhi:blo) */
            bhi = _mm512_mask_add_epi64(bhi, bneg & _mm512_cmpeq_epi64_mask(blo, zero), bhi, one);
            blo = _mm512_mask_sub_epi64(blo, bneg, zero, blo);
            t = _mm512_add_epi64(lo, blo);
            hi = _mm512_add_epi64(hi, bhi);
            hi = _mm512_mask_add_epi64(hi, _mm512_cmplt_epu64_mask(t, lo), hi, one); /* the carry */
            lo = t;
        }
        /* |V| and its sign; a zero sum takes the general path */
        neg = _mm512_cmplt_epi64_mask(hi, zero);
        hi = _mm512_mask_xor_epi64(hi, neg, hi, _mm512_set1_epi64(-1));
        hi = _mm512_mask_add_epi64(hi, neg & _mm512_cmpeq_epi64_mask(lo, zero), hi, one);
        lo = _mm512_mask_sub_epi64(lo, neg, zero, lo);
        ok &= _mm512_test_epi64_mask(_mm512_or_si512(lo, hi), _mm512_or_si512(lo, hi));
        /* the window: 64 bits below the leading one of |V|, sticky in bit 0 */
        lz = _mm512_cmpeq_epi64_mask(hi, zero);
        n = _mm512_mask_sub_epi64(_mm512_sub_epi64(_mm512_set1_epi64(128), _mm512_lzcnt_epi64(hi)), lz, c64,
                                  _mm512_lzcnt_epi64(lo));
        sh = _mm512_max_epi64(_mm512_sub_epi64(n, c64), zero);
        W = _mm512_or_si512(_mm512_srlv_epi64(lo, sh), _mm512_sllv_epi64(hi, _mm512_sub_epi64(c64, sh)));
        sticky = _mm512_test_epi64_mask(_mm512_sllv_epi64(lo, _mm512_sub_epi64(c64, sh)), _mm512_set1_epi64(-1));
        f = dr_round_odd_avx512(W, sticky, _mm512_add_epi64(E, sh), neg);
        _mm256_mask_storeu_ps(out + j0, ok, f);
        done[j0 / 8] = ok;
    }
}

/* acc[j] += V[j] 2^(Ea + eb[j]) for the compact accumulators it can do at
 * once: an empty one (W = 0, not overflowed: one GEMM per step writes each
 * gradient element once) and V != 0 take V with its trailing zeros moved
 * into the exponent, as dr_cacc_add_scaled stores a first term. Full
 * groups of eight only; bit j % 8 of done[j / 8] says which were done. */
_Static_assert(sizeof(dr_cacc) == 32, "dr_cacc: four 64-bit words");

DR_ROUND_ISA void dr_crt_cacc_row_avx512(const dr_i128 *V, size_t N, int Ea, const int32_t *eb, dr_cacc *acc,
                                         uint8_t *done, int fresh)
{
    const __m512i zero = _mm512_setzero_si512(), all = _mm512_set1_epi64(-1), c64 = _mm512_set1_epi64(64);
    const __m512i c63 = _mm512_set1_epi64(63), ea = _mm512_set1_epi64(Ea);
    const __m512i even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), odd = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    const __m512i i01 = _mm512_set_epi64(13, 9, 5, 1, 12, 8, 4, 0), i23 = _mm512_set_epi64(15, 11, 7, 3, 14, 10, 6, 2);
    const __m512i lo4 = _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0), hi4 = _mm512_set_epi64(15, 14, 13, 12, 7, 6, 5, 4);
    const __m512i join = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
    const long long set = (long long)(DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0) << 32;
    size_t j0 = 0;
    for (; j0 + 8 <= N; j0 += 8) {
        dr_cacc *a = acc + j0;
        __m512i x0 = _mm512_loadu_si512((const void *)(V + j0)), x1 = _mm512_loadu_si512((const void *)(V + j0 + 4));
        __m512i lo = _mm512_permutex2var_epi64(x0, even, x1), hi = _mm512_permutex2var_epi64(x0, odd, x1);
        __m512i z[4], p01, q01, p23, q23, w0, w1, w2, ef, tz, nlo, nhi, E;
        __mmask8 ok, small;
        for (int q = 0; q < 4; q++) z[q] = fresh ? zero : _mm512_loadu_si512((const void *)(a + 2 * q));
        p01 = _mm512_permutex2var_epi64(z[0], i01, z[1]);
        q01 = _mm512_permutex2var_epi64(z[2], i01, z[3]);
        p23 = _mm512_permutex2var_epi64(z[0], i23, z[1]);
        q23 = _mm512_permutex2var_epi64(z[2], i23, z[3]);
        w0 = _mm512_permutex2var_epi64(p01, lo4, q01);
        w1 = _mm512_permutex2var_epi64(p01, hi4, q01);
        w2 = _mm512_permutex2var_epi64(p23, lo4, q23);
        ef = _mm512_permutex2var_epi64(p23, hi4, q23);
        E = _mm512_add_epi64(ea, _mm512_cvtepi32_epi64(_mm256_loadu_si256((const void *)(eb + j0))));
        ok = _mm256_cmpneq_epi32_mask(_mm256_loadu_si256((const void *)(eb + j0)), _mm256_set1_epi32(DR_ROUND_SKIP));
        ok &= _mm512_test_epi64_mask(_mm512_or_si512(lo, hi), all);
        ok &= DR_SEAM_CACC_EMPTY(_mm512_testn_epi64_mask(_mm512_or_si512(_mm512_or_si512(w0, w1), w2), all));
        ok &= _mm512_testn_epi64_mask(ef, _mm512_set1_epi64((long long)DR_CACC_F_OVERFLOW << 32));
        if (!ok) { done[j0 / 8] = 0; continue; }
        /* trailing zeros: 63 - lzcnt(x & -x) */
        tz = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(lo, all),
                 _mm512_sub_epi64(_mm512_set1_epi64(127), _mm512_lzcnt_epi64(_mm512_and_si512(hi, _mm512_sub_epi64(zero, hi)))),
                 _mm512_sub_epi64(c63, _mm512_lzcnt_epi64(_mm512_and_si512(lo, _mm512_sub_epi64(zero, lo)))));
        DR_SEAM_ROW_TZ(tz, zero);
        small = _mm512_cmplt_epi64_mask(tz, c64);
        nlo = _mm512_mask_blend_epi64(small, _mm512_srav_epi64(hi, _mm512_sub_epi64(tz, c64)),
                                      _mm512_or_si512(_mm512_srlv_epi64(lo, tz),
                                                      _mm512_sllv_epi64(hi, _mm512_sub_epi64(c64, tz))));
        nhi = _mm512_mask_blend_epi64(small, _mm512_srai_epi64(hi, 63), _mm512_srav_epi64(hi, tz));
        w0 = _mm512_mask_mov_epi64(w0, ok, nlo);
        w1 = _mm512_mask_mov_epi64(w1, ok, nhi);
        w2 = _mm512_mask_mov_epi64(w2, ok, _mm512_srai_epi64(nhi, 63));
        ef = _mm512_mask_mov_epi64(ef, ok, _mm512_or_si512(   /* flags | NONEMPTY | NOT_NEG0, exp = E + tz */
                 _mm512_or_si512(_mm512_and_si512(ef, _mm512_set1_epi64((long long)0xffffffff00000000ULL)),
                                 _mm512_set1_epi64(set)),
                 _mm512_and_si512(_mm512_add_epi64(E, tz), _mm512_set1_epi64(0xffffffffLL))));
        for (int q = 0; q < 4; q++) {   /* back to accumulators 2q, 2q + 1 */
            __m512i ix = _mm512_set_epi64(0, 0, 9 + 2 * q, 1 + 2 * q, 0, 0, 8 + 2 * q, 2 * q);
            __m512i X = _mm512_permutex2var_epi64(w0, ix, w1), Y = _mm512_permutex2var_epi64(w2, ix, ef);
            _mm512_storeu_si512((void *)(a + 2 * q), _mm512_permutex2var_epi64(X, join, Y));
        }
        done[j0 / 8] = ok;
    }
    for (; j0 < N; j0 += 8) done[j0 / 8] = 0;
}
#else
void dr_crt_round_row_avx512(const dr_i128 *V, size_t N, int Ea, const int32_t *eb, const float *bias,
                             float *out, uint8_t *done)
{   /* never called: dr_crt_have_vnni() is 0 in such a build */
    (void)V; (void)Ea; (void)eb; (void)bias; (void)out;
    memset(done, 0, (N + 7) / 8);
}
void dr_crt_cacc_row_avx512(const dr_i128 *V, size_t N, int Ea, const int32_t *eb, dr_cacc *acc, uint8_t *done,
                            int fresh)
{
    (void)V; (void)Ea; (void)eb; (void)acc; (void)fresh;
    memset(done, 0, (N + 7) / 8);
}
#endif
#endif
