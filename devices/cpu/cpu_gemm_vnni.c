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
#include "devices/cpu/cpu_gemm_internal.h"
#include "devices/seams.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(DR_NO_VNNI)
#include <immintrin.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

static inline VNNI __attribute__((always_inline))
void micro(const uint8_t *A, size_t lda, const int8_t *B0, const int8_t *B1, size_t G,
           int32_t *C, size_t ldc, int mr, int np)
{
    __m512i acc[8][2];
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
    for (size_t g = 0; g < G; g++) {
        __m512i b0 = _mm512_loadu_si512((const void *)(B0 + g * 64));
        __m512i b1 = np > 1 ? _mm512_loadu_si512((const void *)(B1 + g * 64)) : b0;
#pragma GCC unroll 8
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
#pragma GCC unroll 8
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
    size_t G = DR_SEAM_K_GROUPS(K);
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

/* ---- residues: 8 elements per step, every modulus ------------------------
 * t = trunc(x * scale) in double, then per modulus r = t - m floor(t/m + c)
 * as in cpu_gemm_crt.c (fma instead of mul + add: both within the margin, so
 * the same r), formed as (t + 1.5 2^52) - m q, whose low byte is r's. */
#define MAGIC 0x1.8p52

static VNNI void residues(const dr_crt_plan *c, const float *x, size_t n, const double *sc, double sc1,
                          int sym, uint8_t *out, size_t ostride, unsigned char *rem)
{
    __mmask8 any = 0;
    const __m512d magic = _mm512_set1_pd(MAGIC);
    for (size_t e = 0; e < n; e += 8) {
        __mmask8 live = n - e >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - e)) - 1u);
        __m512d t = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(live, x + e)), tm;
        __mmask8 below;
        t = _mm512_mul_pd(t, sc ? _mm512_maskz_loadu_pd(live, sc + e) : _mm512_set1_pd(sc1));
        tm = _mm512_roundscale_pd(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        below = DR_SEAM_BELOW_GRID(_mm512_cmp_pd_mask(t, tm, _CMP_NEQ_UQ));   /* bits below the grid (or NaN) */
        t = tm;
        if (sc && below)                                  /* one vector per lane */
            for (unsigned b = 0; b < 8; b++) { if (below >> b & 1u) rem[e + b] = 1; }
        any |= below;
        tm = _mm512_add_pd(t, magic);
        for (int q = 0; q < c->n; q++) {
            double off = DR_SEAM_RESIDUE_CENTRED(sym, q) ? c->cs[q] : c->cu[q];
            __m512d f = _mm512_fmadd_pd(t, _mm512_set1_pd(c->invm[q]), _mm512_set1_pd(off));
            __m512d r = _mm512_fnmadd_pd(_mm512_roundscale_pd(f, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC),
                                         _mm512_set1_pd(c->m[q]), tm);
            if (live == 0xff) _mm_storel_epi64((void *)(out + q * ostride + e), _mm512_cvtepi64_epi8(_mm512_castpd_si512(r)));
            else _mm512_mask_cvtepi64_storeu_epi8(out + q * ostride + e, live, _mm512_castpd_si512(r));
        }
    }
    if (!sc && any) *rem = 1;                             /* one vector */
}

/* The residues of elements 4g..4g+3 of the n vectors of an element-major
 * operand (sym: centred, for B) into four scratch rows of len bytes per
 * modulus (modulus q's rows at tmp + 4 len q); rows past K are zeros. */
static inline VNNI __attribute__((always_inline)) void residues4(const dr_crt_plan *c, const dr_sliced *s, size_t g,
                                                                 size_t n, int sym, uint8_t *tmp, size_t len,
                                                                 unsigned char *rem)
{
    for (size_t r = 0; r < 4; r++) {
        if (4 * g + r < s->K)
            residues(c, s->base_ptr + (4 * g + r) * s->inc_elem, n, s->scale, 0.0, sym, tmp + r * len, 4 * len, rem);
        else
            for (int q = 0; q < c->n; q++) memset(tmp + q * 4 * len + r * len, 0, len);
    }
}

/* Four rows of 16 bytes (at t0, t0 + stride, ...) interleaved into 16
 * words of 4 bytes, one per column: vpdpbusd's layout of 4 k. */
static inline VNNI __attribute__((always_inline)) void interleave4x16(const uint8_t *t0, size_t stride, uint8_t out[64])
{
    __m128i r0 = _mm_loadu_si128((const void *)t0), r1 = _mm_loadu_si128((const void *)(t0 + stride));
    __m128i r2 = _mm_loadu_si128((const void *)(t0 + 2 * stride));
    __m128i r3 = _mm_loadu_si128((const void *)(t0 + 3 * stride));
    __m128i lo01 = _mm_unpacklo_epi8(r0, r1), hi01 = _mm_unpackhi_epi8(r0, r1);
    __m128i lo23 = _mm_unpacklo_epi8(r2, r3), hi23 = _mm_unpackhi_epi8(r2, r3);
    _mm_storeu_si128((void *)out, _mm_unpacklo_epi16(lo01, lo23));
    _mm_storeu_si128((void *)(out + 16), _mm_unpackhi_epi16(lo01, lo23));
    _mm_storeu_si128((void *)(out + 32), _mm_unpacklo_epi16(hi01, hi23));
    _mm_storeu_si128((void *)(out + 48), _mm_unpackhi_epi16(hi01, hi23));
}

#define PREFETCH_GROUPS 8   /* 32 k ahead: 18 KB of a 576-byte-row source */

/* Rows of op(A): straight into their planes when a row is contiguous, else
 * one k at a time through a scratch row, scattered. Rows holding inf or NaN
 * get bytes that no result uses. */
VNNI void dr_crt_pack_a_vnni(const dr_crt_plan *c, const dr_sliced *s, uint8_t *Ap, size_t lda, uint8_t *tmp,
                             unsigned char *has_rem)
{
    size_t M = s->nvec, K = s->K, plane = M * lda;
    if (!s->em) {
        for (size_t i = 0; i < M; i++) {
            uint8_t *row = Ap + i * lda;
            residues(c, s->base_ptr + i * s->inc_vec, K, NULL, s->scale[i], 0, row, plane, &has_rem[i]);
            for (int q = 0; q < c->n; q++) memset(row + q * plane + K, 0, lda - K);
        }
        return;
    }
    /* Columns of the source: four k at a time through scratch rows, each
     * 16 rows' 4 bytes interleaved by byte and word unpacks, as for B. The
     * block's M floats of each k are a short piece of a long source row
     * (dW's im2col: 48 of 144 floats, rows 576 bytes apart), a stride the
     * hardware prefetchers did not follow: the loads missed at each k
     * (three quarters of the residues' time, resnet_fashion_mnist), so
     * each group fetches the pieces PREFETCH_GROUPS groups ahead. */
    for (size_t g = 0; g < (K + 3) / 4; g++) {
        for (size_t k = 4 * (g + PREFETCH_GROUPS); k < 4 * (g + PREFETCH_GROUPS + 1) && k < K; k++)
            for (size_t b = 0; b < M * sizeof(float); b += 64)
                _mm_prefetch((const char *)(s->base_ptr + k * s->inc_elem) + b, _MM_HINT_T0);
        residues4(c, s, g, M, 0, tmp, M, has_rem);
        for (int q = 0; q < c->n; q++) {
            const uint8_t *t0 = tmp + q * 4 * M;
            uint8_t *dst = Ap + q * plane + 4 * g;
            size_t i = 0;
            for (; i + 16 <= M; i += 16) {
                uint8_t w[64];
                interleave4x16(t0 + i, M, w);
                for (int e = 0; e < 16; e++) memcpy(dst + (i + e) * lda, w + 4 * e, 4);
            }
            for (; i < M; i++)
                for (int r = 0; r < 4; r++) dst[i * lda + r] = t0[r * M + i];
        }
    }
}

/* Columns of op(B) into vpdpbusd's layout: when rows of op(B) are
 * contiguous, four rows (one group) at a time through scratch rows, then
 * 16 columns x 4 rows interleaved by byte and word unpacks; else column by
 * column, 4 bytes per group. */
VNNI void dr_crt_pack_b_vnni(const dr_crt_plan *c, const dr_sliced *s, int8_t *Bp, size_t G, size_t Np,
                             uint8_t *tmp, size_t tmp_per, unsigned char *has_rem)
{
    size_t N = s->nvec, K = s->K, plane = Np * G * 4;
    if (!s->em) {   /* vector j contiguous: one vector a thread at a time */
        memset(Bp, 0, (size_t)c->n * plane);
        #pragma omp parallel for schedule(static)
        for (size_t j = 0; j < N; j++) {
            uint8_t *t = tmp + (size_t)omp_get_thread_num() * tmp_per;
            residues(c, s->base_ptr + j * s->inc_vec, K, NULL, s->scale[j], 1, t, 4 * G, &has_rem[j]);
            for (int q = 0; q < c->n; q++) {
                int8_t *dst = Bp + q * plane + (j / 16) * G * 64 + (j % 16) * 4;
                memset(t + q * 4 * G + K, 0, 4 * G - K);
                for (size_t g = 0; g < G; g++) memcpy(dst + g * 64, t + q * 4 * G + 4 * g, 4);
            }
        }
        return;
    }
    /* element k of every vector contiguous: groups of 4 k shared out; each
     * thread marks remainders in its own bytes, OR-ed in at the end */
    #pragma omp parallel
    {
        uint8_t *t = tmp + (size_t)omp_get_thread_num() * tmp_per;
        unsigned char *rem = t + (size_t)c->n * 4 * Np;
        memset(t, 0, (size_t)c->n * 4 * Np);   /* columns N..Np stay zero */
        memset(rem, 0, N);
        #pragma omp for schedule(static)
        for (size_t g = 0; g < G; g++) {
            residues4(c, s, g, N, 1, t, Np, rem);
            for (int q = 0; q < c->n; q++)
                for (size_t p = 0; p < Np / 16; p++)
                    interleave4x16(t + q * 4 * Np + 16 * p, Np, (uint8_t *)(Bp + q * plane + p * G * 64 + g * 64));
        }
        #pragma omp critical
        for (size_t j = 0; j < N; j++) has_rem[j] |= rem[j];
    }
}

/* Eight 128-bit values, given as their low and high words, stored in
 * order (the first n of them when n < 8). */
static inline VNNI __attribute__((always_inline)) void store8(__m512i lo, __m512i hi, dr_i128 *V, size_t n)
{
    __m512i v0 = _mm512_unpacklo_epi64(lo, hi);    /* elements 0, 2, 4, 6 as (lo, hi) */
    __m512i v1 = _mm512_unpackhi_epi64(lo, hi);    /* elements 1, 3, 5, 7 */
    lo = _mm512_permutex2var_epi64(v0, _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0), v1);
    hi = _mm512_permutex2var_epi64(v0, _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4), v1);
    if (n >= 8) {
        _mm512_storeu_si512((void *)V, lo);
        _mm512_storeu_si512((void *)(V + 4), hi);
    } else {
        dr_i128 t8[8];
        _mm512_storeu_si512((void *)t8, lo);
        _mm512_storeu_si512((void *)(t8 + 4), hi);
        memcpy(V, t8, n * sizeof *t8);
    }
}

/* V of 8 elements per step: per modulus y = (c inv) mod m in double
 * (exact: |c inv| < 2^31 2^8), S += y Q_t in four 32-bit digits of int64 lanes (each below
 * 16 2^8 2^32: no carry lost), f += y / m; then, as in cpu_gemm_crt.c,
 * V = S - floor(f + 1/2) P modulo 2^128: digit by digit in the same lanes
 * (S_l - q P_l, |.| < 2^45, signed carries), stored as 128-bit integers. */
VNNI void dr_crt_reconstruct_vnni(const dr_crt_plan *c, const int32_t *C32, size_t M, size_t N, size_t Np,
                                  dr_i128 *V)
{
    const __m512d magic = _mm512_set1_pd(MAGIC), half = _mm512_set1_pd(0.5);
    size_t plane = M * Np;
    for (size_t i = 0; i < M; i++)
        for (size_t j0 = 0; j0 < N; j0 += 8) {
            __m512i S[4] = { _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                             _mm512_setzero_si512() };
            __m512d f = _mm512_setzero_pd();
            for (int t = 0; t < c->n; t++) {
                __m512d m = _mm512_set1_pd(c->m[t]), im = _mm512_set1_pd(c->invm[t]), cu = _mm512_set1_pd(c->cu[t]);
                __m512d x = _mm512_cvtepi32_pd(_mm256_loadu_si256((const void *)(C32 + t * plane + i * Np + j0)));
                __m512d u = _mm512_mul_pd(x, _mm512_set1_pd(c->inv[t]));   /* |c inv| < 2^39: exact */
                __m512d ym = _mm512_fnmadd_pd(_mm512_roundscale_pd(_mm512_fmadd_pd(u, im, cu), _MM_FROUND_TO_NEG_INF |
                                                                   _MM_FROUND_NO_EXC), m, _mm512_add_pd(u, magic));
                __m512i yi = _mm512_castpd_si512(ym);
                f = _mm512_fmadd_pd(_mm512_sub_pd(ym, magic), im, f);
                for (int l = 0; l < 4; l++)
                    S[l] = _mm512_add_epi64(S[l], _mm512_mul_epu32(yi, _mm512_set1_epi64((long long)c->Qlimb[t][l])));
            }
            {   /* V = S - qP in 32-bit digits with signed carries, then as 128-bit words */
                __m512i q = _mm512_cvttpd_epu64(_mm512_roundscale_pd(_mm512_add_pd(f, half),
                                                                    _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
                const __m512i low32 = _mm512_set1_epi64(0xffffffffLL);
                __m512i lo, hi;
                for (int l = 0; l < 4; l++)
                    S[l] = _mm512_sub_epi64(S[l], _mm512_mul_epu32(q, _mm512_set1_epi64((long long)c->Plimb[l])));
                for (int l = 0; l < 3; l++) {
                    S[l + 1] = _mm512_add_epi64(S[l + 1], _mm512_srai_epi64(S[l], 32));
                    S[l] = _mm512_and_si512(S[l], low32);
                }
                lo = _mm512_or_si512(S[0], _mm512_slli_epi64(S[1], 32));
                hi = _mm512_or_si512(S[2], _mm512_slli_epi64(S[3], 32));
                store8(lo, hi, V + i * N + j0, N - j0);
            }
        }
}

/* The same V with IFMA (vpmadd52luq/huq), fewer operations per modulus:
 * y = u - m RN(u / m), u = c inv (exact), a residue in [-m/2, m/2], taken
 * as y' = y + m in [m/2, 3m/2] (positive, below 2^9), formed as the double
 * y' + 2^52, whose low 52 bits are y' as an integer; S = sum y' Q_t in two
 * 52-bit digits (Q_t = Qa + Qb 2^52, Qb < 2^43: y' Qa's low and high
 * halves and y' Qb, each digit's sum below 2^56), f = sum y' / m_t; then
 * S / P = f exactly, so V = S - round(f) P, as above. Only where P < 2^104
 * (dr_crt_plan.ifma: every K up to DR_CRT_K_MAX at w <= 20). */
#define IFMA __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512ifma")))

IFMA void dr_crt_reconstruct_ifma(const dr_crt_plan *c, const int32_t *C32, size_t M, size_t N, size_t Np,
                                  dr_i128 *V)
{
    const __m512d magic = _mm512_set1_pd(MAGIC), two52 = _mm512_set1_pd(0x1p52), half = _mm512_set1_pd(0.5);
    const __m512i mask52 = _mm512_set1_epi64(((long long)1 << 52) - 1);
    const __m512i Pa = _mm512_set1_epi64((long long)c->P52[0]), Pb = _mm512_set1_epi64((long long)c->P52[1]);
    size_t plane = M * Np;
    for (size_t i = 0; i < M; i++)
        for (size_t j0 = 0; j0 < N; j0 += 8) {
            __m512i D0 = _mm512_setzero_si512(), D1 = _mm512_setzero_si512(), q, t0, t1;
            __m512d f = _mm512_setzero_pd();
            for (int t = 0; t < c->n; t++) {
                __m512d m = _mm512_set1_pd(c->m[t]), im = _mm512_set1_pd(c->invm[t]);
                __m512d x = _mm512_cvtepi32_pd(_mm256_loadu_si256((const void *)(C32 + t * plane + i * Np + j0)));
                __m512d u = _mm512_mul_pd(x, _mm512_set1_pd(c->inv[t]));   /* |c inv| < 2^39: exact */
                __m512d qm = _mm512_sub_pd(_mm512_fmadd_pd(u, im, magic), magic);               /* RN(u / m) */
                __m512d ym = _mm512_fnmadd_pd(qm, m, _mm512_add_pd(u, _mm512_set1_pd(c->m[t] + 0x1p52)));
                __m512i yi = _mm512_castpd_si512(ym);                                           /* y' + 2^52 */
                f = _mm512_fmadd_pd(_mm512_sub_pd(ym, two52), im, f);
                D0 = _mm512_madd52lo_epu64(D0, yi, _mm512_set1_epi64((long long)c->Q52[t][0]));
                D1 = DR_SEAM_IFMA_HI(_mm512_madd52hi_epu64(D1, yi, _mm512_set1_epi64((long long)c->Q52[t][0])), D1);
                D1 = _mm512_madd52lo_epu64(D1, yi, _mm512_set1_epi64((long long)c->Q52[t][1]));
            }
            q = _mm512_cvttpd_epi64(_mm512_roundscale_pd(_mm512_add_pd(f, half), _MM_FROUND_TO_NEG_INF |
                                                                                 _MM_FROUND_NO_EXC));
            t0 = _mm512_sub_epi64(D0, _mm512_mullo_epi64(q, Pa));   /* |.| < 2^57: D0's carry goes with the borrow */
            t1 = _mm512_sub_epi64(D1, _mm512_mullo_epi64(q, Pb));
            t1 = _mm512_add_epi64(t1, _mm512_srai_epi64(t0, 52));
            t0 = _mm512_and_si512(t0, mask52);
            store8(_mm512_or_si512(t0, _mm512_slli_epi64(t1, 52)), _mm512_srai_epi64(t1, 12), V + i * N + j0,
                   N - j0);
        }
}

VNNI void dr_scan_avx512(const dr_sliced *s, uint32_t *mx, uint32_t *orr, uint32_t *andd, uint32_t *mn)
{
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), expo = _mm512_set1_epi32(0x7f800000);
    size_t nv = s->nvec, K = s->K;
    if (!s->em) {                                  /* a vector's elements contiguous: reduce them */
        for (size_t v = 0; v < nv; v++) {
            const float *x = s->base_ptr + v * s->inc_vec;
            __m512i m = _mm512_setzero_si512(), o = m, n = _mm512_set1_epi32(-1), e = expo;
            for (size_t k = 0; k < K; k += 16) {
                __mmask16 live = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1u);
                __m512i u = _mm512_maskz_loadu_epi32(live, x + k), g = _mm512_and_si512(u, abs);
                m = _mm512_max_epu32(m, g);
                o = _mm512_or_si512(o, u);
                n = _mm512_mask_and_epi32(n, live, n, u);
                e = _mm512_mask_min_epu32(e, _mm512_test_epi32_mask(g, g), e, _mm512_and_si512(u, expo));
            }
            mx[v] = (uint32_t)_mm512_reduce_max_epu32(m);
            orr[v] = (uint32_t)_mm512_reduce_or_epi32(o);
            andd[v] = (uint32_t)_mm512_reduce_and_epi32(n);
            mn[v] = (uint32_t)_mm512_reduce_min_epu32(e);
        }
        return;
    }
    for (size_t v = 0; v < nv; v++) { mx[v] = 0; orr[v] = 0; andd[v] = 0xffffffffu; mn[v] = 0x7f800000u; }
    for (size_t k = 0; k < K; k++) {               /* rows of the source: elementwise */
        const float *x = s->base_ptr + k * s->inc_elem;
        for (size_t v = 0; v < nv; v += 16) {
            __mmask16 live = nv - v >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nv - v)) - 1u);
            __m512i u = _mm512_maskz_loadu_epi32(live, x + v), g = _mm512_and_si512(u, abs);
            __m512i m = _mm512_maskz_loadu_epi32(live, mx + v), o = _mm512_maskz_loadu_epi32(live, orr + v);
            __m512i n = _mm512_maskz_loadu_epi32(live, andd + v), e = _mm512_maskz_loadu_epi32(live, mn + v);
            _mm512_mask_storeu_epi32(mx + v, live, _mm512_max_epu32(m, g));
            _mm512_mask_storeu_epi32(orr + v, live, _mm512_or_si512(o, u));
            _mm512_mask_storeu_epi32(andd + v, live, _mm512_and_si512(n, u));
            _mm512_mask_storeu_epi32(mn + v, live & _mm512_test_epi32_mask(g, g),
                                     _mm512_min_epu32(e, _mm512_and_si512(u, expo)));
        }
    }
}
#else
/* Never called: dr_crt_have_vnni() is 0 in such a build. */
void dr_crt_kernel_vnni(const uint8_t *A, size_t lda, const int8_t *B, size_t M, size_t Np,
                        size_t K, int32_t *C, size_t ldc)
{
    dr_crt_kernel_portable(A, lda, B, M, Np, K, C, ldc);
}
void dr_scan_avx512(const dr_sliced *s, uint32_t *mx, uint32_t *orr, uint32_t *andd, uint32_t *mn)
{
    (void)s; (void)mx; (void)orr; (void)andd; (void)mn;
}
#if defined(__SIZEOF_INT128__)
void dr_crt_pack_a_vnni(const dr_crt_plan *c, const dr_sliced *s, uint8_t *Ap, size_t lda, uint8_t *tmp,
                        unsigned char *has_rem)
{
    (void)c; (void)s; (void)Ap; (void)lda; (void)tmp; (void)has_rem;
}
void dr_crt_pack_b_vnni(const dr_crt_plan *c, const dr_sliced *s, int8_t *Bp, size_t G, size_t Np,
                        uint8_t *tmp, size_t tmp_per, unsigned char *has_rem)
{
    (void)c; (void)s; (void)Bp; (void)G; (void)Np; (void)tmp; (void)tmp_per; (void)has_rem;
}
void dr_crt_reconstruct_vnni(const dr_crt_plan *c, const int32_t *C32, size_t M, size_t N, size_t Np,
                             dr_i128 *V)
{
    (void)c; (void)C32; (void)M; (void)N; (void)Np; (void)V;
}
void dr_crt_reconstruct_ifma(const dr_crt_plan *c, const int32_t *C32, size_t M, size_t N, size_t Np,
                             dr_i128 *V)
{
    (void)c; (void)C32; (void)M; (void)N; (void)Np; (void)V;
}
#endif
#endif
