/* distref devices — the CRT path's int8 GEMM on AVX-512 VNNI (vpdpbusd:
 * 64 u8 x s8 products into 16 int32 lanes per instruction). The contract
 * and the packed layouts are in cpu_gemm_internal.h; the plain C kernel in
 * cpu_gemm_crt.c gives the same int32s. Compiled for the baseline ISA: only
 * these functions carry target("avx512f,avx512bw,avx512vnni"), and
 * cpu_gemm.c calls them only when __builtin_cpu_supports says so.
 *
 * Register blocking: 8 rows x 2 panels (32 columns) = 16 accumulators; per
 * group of 4 k, two 64-byte loads of B and 8 broadcasts of 4 bytes of A
 * feed 16 vpdpbusd. Panel pairs outermost, so a pair's B (2 x K 16 bytes,
 * 25 KB at K = 784) stays in L1 while the rows stream past it.
 */
#include "devices/cpu_gemm_internal.h"

#include <string.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(DR_NO_VNNI)
#include <immintrin.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

static inline VNNI __attribute__((always_inline))
void micro(const uint8_t *A, size_t lda, const int8_t *B0, const int8_t *B1, size_t G,
           int32_t *C, size_t ldc, int mr, int np)
{
    __m512i acc[8][2];
    for (int r = 0; r < 8; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
    for (size_t g = 0; g < G; g++) {
        __m512i b0 = _mm512_loadu_si512((const void *)(B0 + g * 64));
        __m512i b1 = np > 1 ? _mm512_loadu_si512((const void *)(B1 + g * 64)) : b0;
        for (int r = 0; r < 8; r++) {
            int32_t a4;
            __m512i a;
            if (r >= mr) break;
            memcpy(&a4, A + r * lda + 4 * g, 4);
            a = _mm512_set1_epi32(a4);
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], a, b0);
            if (np > 1) acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], a, b1);
        }
    }
    for (int r = 0; r < mr; r++) {
        _mm512_storeu_si512((void *)(C + r * ldc), acc[r][0]);
        if (np > 1) _mm512_storeu_si512((void *)(C + r * ldc + 16), acc[r][1]);
    }
}

/* One call per (rows, panels) shape, so that mr and np are constants and
 * the accumulators live in registers. */
#define MICRO_CASE(R) case R: \
    if (np > 1) micro(A, lda, B0, B1, G, C, ldc, R, 2); else micro(A, lda, B0, B1, G, C, ldc, R, 1); break;

static VNNI void micro_any(const uint8_t *A, size_t lda, const int8_t *B0, const int8_t *B1, size_t G,
                           int32_t *C, size_t ldc, int mr, int np)
{
    switch (mr) {
    MICRO_CASE(1) MICRO_CASE(2) MICRO_CASE(3) MICRO_CASE(4)
    MICRO_CASE(5) MICRO_CASE(6) MICRO_CASE(7)
    default: if (np > 1) micro(A, lda, B0, B1, G, C, ldc, 8, 2); else micro(A, lda, B0, B1, G, C, ldc, 8, 1);
    }
}

VNNI void dr_crt_kernel_vnni(const uint8_t *A, size_t lda, const int8_t *B, size_t M, size_t Np,
                             size_t K, int32_t *C, size_t ldc)
{
#if defined(DR_MUTANT_CRT_KTAIL)
    size_t G = K / 4;                              /* fault: the last k < 4 dropped */
#else
    size_t G = (K + 3) / 4;
#endif
    size_t panels = Np / 16, pstride = (K + 3) / 4 * 64;
    for (size_t q = 0; q < panels; q += 2) {
        int np = q + 1 < panels ? 2 : 1;
        const int8_t *B0 = B + q * pstride, *B1 = np > 1 ? B0 + pstride : B0;
        for (size_t i = 0; i < M; i += 8) {
            int mr = M - i < 8 ? (int)(M - i) : 8;
            micro_any(A + i * lda, lda, B0, B1, G, C + i * ldc + 16 * q, ldc, mr, np);
        }
    }
}
#else
void dr_crt_kernel_vnni(const uint8_t *A, size_t lda, const int8_t *B, size_t M, size_t Np,
                        size_t K, int32_t *C, size_t ldc)
{
    dr_crt_kernel_portable(A, lda, B, M, Np, K, C, ldc);   /* never chosen: dr_crt_have_vnni() is 0 */
}
#endif
