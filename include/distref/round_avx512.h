/* distref — the last step of rounding exact integers to float eight at
 * a time on AVX-512, shared by the exact GEMM's outputs
 * (devices/cpu/cpu_gemm_round.c) and the compact accumulators' rounding
 * (core/cacc.c, dr_cacc_round_div_n).
 *
 * The caller has cut each lane's magnitude to a 64-bit window W (the bits
 * below it nonzero: sticky) at exponent e, value (W + something in [0, 1)
 * when sticky) 2^e. Here: the sticky bit is OR-ed into W's lowest bit, W
 * is converted to double rounding to odd (toward zero, then the lowest
 * mantissa bit set when the conversion was inexact), scaled by 2^e (exact:
 * the caller keeps e inside [-1000, 900], the double's normal range for a
 * value of 64 bits) and converted to float to nearest, ties to even, with
 * the sign applied last. A value rounded to odd with 53 bits and then to
 * nearest with 24 or fewer (float subnormals included) rounds as the value
 * itself (Boldo and Melquiond 2008): the odd bit keeps it off a float
 * midpoint exactly when it was off one. Overflow gives inf, as IEEE.
 * Only for code compiled with DR_ROUND_ISA, run where the CPU has it.
 */
#ifndef DISTREF_ROUND_AVX512_H
#define DISTREF_ROUND_AVX512_H

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

/* The planted faults' seams of this shared header (tests/faults.tsv:
 * round_odd, round_sticky, cacc_round_odd; a public header includes no
 * layer's seams.h): the lanes whose sticky bit is ORed in, and the lanes
 * whose inexact double is rounded to odd. */
#if defined(DR_MUTANT_ROUND_STICKY)   /* the bits below the window dropped */
#define DR_SEAM_STICKY_LANES(sticky) ((void)(sticky), (__mmask8)0)
#else
#define DR_SEAM_STICKY_LANES(sticky) (sticky)
#endif
#if defined(DR_MUTANT_ROUND_ODD)      /* truncated, not rounded to odd */
#define DR_SEAM_ODD_LANES(inexact) ((void)(inexact), (__mmask8)0)
#else
#define DR_SEAM_ODD_LANES(inexact) (inexact)
#endif

#define DR_ROUND_ISA __attribute__((target("avx512f,avx512dq,avx512cd,avx512vl")))
#define DR_ROUND_E_MIN (-1000)
#define DR_ROUND_E_MAX 900

static inline DR_ROUND_ISA __attribute__((always_inline))
__m256 dr_round_odd_avx512(__m512i W, __mmask8 sticky, __m512i e, __mmask8 neg)
{
    const __m512i one = _mm512_set1_epi64(1);
    __m512d d;
    __mmask8 inexact;
    __m256 f;
    W = _mm512_mask_or_epi64(W, DR_SEAM_STICKY_LANES(sticky), W, one);
    d = _mm512_cvt_roundepu64_pd(W, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    inexact = _mm512_cmpneq_epi64_mask(_mm512_cvttpd_epu64(d), W);
    d = _mm512_castsi512_pd(_mm512_mask_or_epi64(_mm512_castpd_si512(d), DR_SEAM_ODD_LANES(inexact),
                                                 _mm512_castpd_si512(d), one));
    d = _mm512_scalef_pd(d, _mm512_cvtepi64_pd(e));
    f = _mm512_cvt_roundpd_ps(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_castsi256_ps(_mm256_mask_or_epi32(_mm256_castps_si256(f), neg, _mm256_castps_si256(f),
                                                    _mm256_set1_epi32((int)0x80000000u)));
}

/* Whether this CPU runs DR_ROUND_ISA code. */
static inline int dr_round_avx512_ok(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512vl");
}
#endif

#endif
