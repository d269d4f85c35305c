/* distref devices — internals of the engine's exact GEMM, shared by
 * cpu_gemm_slice.c (the slicing), cpu_gemm.c (the DGEMM products and the
 * per-element paths), cpu_gemm_element.c (the common f32 element),
 * cpu_gemm_crt.c (the same integer products by residues, Ozaki scheme II)
 * and cpu_gemm_vnni.c (the int8 kernel). Not a public header: the tests
 * include it to force a path and to call the kernels directly.
 */
#ifndef DISTREF_CPU_GEMM_INTERNAL_H
#define DISTREF_CPU_GEMM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/exact.h"

#if defined(__SIZEOF_INT128__)
__extension__ typedef __int128 dr_i128;
__extension__ typedef unsigned __int128 dr_u128;
#endif

/* One side of the product, split: vector v (a row of op(A) or a column of
 * op(B)) is sign * (hi * 2^w + lo) * 2^base[v] + rem, elementwise. */
typedef struct dr_sliced {
    const float *base_ptr;
    size_t   inc_vec, inc_elem;
    size_t   nvec, K;
    int      w;
    int      bits;             /* the widest vector's integers on its grid: below 2^bits (<= 2w) */
    int      em;               /* slices element-major (K x nvec), else vector-major (nvec x K) */
    double  *hi, *lo;          /* integers below 2^w; NULL on the CRT path */
    double  *scale;            /* per vector: 2^-base */
    int     *base;             /* per vector */
    unsigned char *special;    /* per vector: holds inf or NaN */
    unsigned char *zero;       /* per vector: every element is +0 or -0 */
    unsigned char *signs;      /* per vector: 1 some sign bit clear, 2 some sign bit set */
    size_t  *rem_start;        /* per vector: its remainders in rem_k/rem_v */
    uint32_t *rem_k;
    float   *rem_v;
    size_t   nrem;
} dr_sliced;

/* The slices of both sides and their integer products: either the four
 * DGEMM products of the slices (c), or (V, the CRT path) the exact integer
 * (hi 2^w + lo) . (hi' 2^w + lo') of every row and column, M x N. */
typedef struct dr_product {
    dr_sliced a, b;            /* rows of op(A), columns of op(B) */
    double   *c[4];            /* hi*hi, hi*lo, lo*hi, lo*lo: M x N each */
#if defined(__SIZEOF_INT128__)
    dr_i128  *V;
#endif
    int       b_rems_added;    /* B's remainder products already in the full accumulators */
} dr_product;

/* cpu_gemm.c: lo(row i) . lo(column j) (the DGEMM path's fourth product,
 * computed when it did not run), and the exact integer row i . column j
 * without remainders, V: from the slices or the CRT path's V; _hi without
 * lo . lo, with the bound on what lo . lo adds. */
double dr_gemm_ll_value(const dr_product *p, size_t i, size_t j, size_t N);
#if defined(__SIZEOF_INT128__)
/* acc += V 2^E exactly, V != 0, |V| < 2^125, E >= -400, V 2^E a multiple of
 * 2^-320 (a sum of float products: of 2^-298). */
void dr_gemm_add_wide(dr_acc *acc, dr_i128 V, int E);
dr_i128 dr_gemm_slice_value(const dr_product *p, size_t i, size_t j, size_t N);
dr_i128 dr_gemm_slice_value_hi(const dr_product *p, size_t i, size_t j, size_t N, dr_i128 *bound);
#endif
/* cpu_gemm_rem.c: B's remainder products, (a - r_a) r_b, added to the full
 * accumulators full[i N + j] of every row that takes the general path (not
 * all zeros, no inf/NaN), and p->b_rems_added set (without __int128: none
 * added, the flag left 0). DR_OK or DR_ENOMEM. */
int dr_gemm_b_remainders(dr_product *p, size_t N, dr_acc *full);
/* cpu_gemm_element.c: bias[j] + row i . column j rounded once into *out,
 * straight from the integer product, when neither vector has remainders or
 * inf/NaN; false sends the element to the general path. */
bool dr_gemm_fast_element(const dr_product *p, size_t i, size_t j, size_t N, const float *bias, float *out);

/* cpu_gemm_slice.c. The DGEMM path's slice width: w = (53 - ceil(log2 K)) / 2. */
int dr_slice_width(size_t K);
/* Vector v of a side is base[v * inc_vec + k * inc_elem], k < K, v < nvec;
 * its grid is 2w bits below its largest exponent. slices: also the DGEMM
 * path's hi/lo slices and remainders; else (the CRT path) hi = lo = NULL
 * and the caller lists the remainders (dr_sliced_rems). DR_OK or DR_ENOMEM. */
int dr_sliced_init(dr_sliced *s, const float *base, size_t inc_vec, size_t inc_elem,
                   size_t nvec, size_t K, int w, int slices);
void dr_sliced_free(dr_sliced *s);
/* Per vector of s: the largest magnitude's bits (inf/NaN above every finite
 * one), the OR and the AND of the elements' bits, and the smallest exponent
 * field of a nonzero element (0x7f800000 when there is none); on AVX-512
 * (only where dr_crt_have_vnni() says so), cpu_gemm_vnni.c. */
void dr_scan_avx512(const dr_sliced *s, uint32_t *mx, uint32_t *orr, uint32_t *andd, uint32_t *mn);
/* The remainders of the vectors flagged in has_rem (nvec flags) listed in
 * s->rem_*: bits of an element below its vector's grid. */
void dr_sliced_rems(dr_sliced *s, const unsigned char *has_rem);

/* Which way the integer products are formed. AUTO: for rounded outputs
 * (C) of M N K >= 2^16, K >= 1, the certified path; otherwise the CRT path
 * with the VNNI kernel when the CPU has it and K is in its range, else
 * DGEMM. */
typedef enum {
    DR_GEMM_PATH_AUTO,
    DR_GEMM_PATH_DGEMM,         /* Ozaki scheme I: slices through DGEMM */
    DR_GEMM_PATH_CRT_VNNI,      /* Ozaki scheme II: residues, int8 GEMM on AVX-512 VNNI */
    DR_GEMM_PATH_CRT_PORTABLE,  /* the same residues, the plain C int8 kernel */
    DR_GEMM_PATH_CERTIFIED      /* rounded outputs: one DGEMM and a bound that proves each rounding,
                                 * the plain exact path where it cannot (cpu_gemm_cert.c); the
                                 * accumulator outputs as AUTO */
} dr_gemm_path;

/* cpu_gemm_cert.c: C = bias + op(A) op(B), each element the correctly
 * rounded exact value, as dr_gemm_f32; DR_ENOMEM (nothing written). */
int dr_gemm_f32_certified(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                          const float *B, size_t ldb, const float *bias, float *C, size_t ldc);

/* The three entry points of fastgemm.h with the path forced: exactly one of
 * C (with bias), full and compact is non-NULL. DR_EUNSUPPORTED when the
 * forced path cannot run here (no VNNI, no __int128, K out of range). */
struct dr_cacc;
int dr_gemm_fast_path(dr_gemm_path path, dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                      const float *A, size_t lda, const float *B, size_t ldb,
                      const float *bias, float *C, size_t ldc, dr_acc *full, struct dr_cacc *compact);

/* cpu_gemm_round.c: which outputs the VNNI path's eight-at-a-time stages
 * take. Per column of op(B) its exponent, or DR_ROUND_SKIP (remainders,
 * inf/NaN, all zeros), and *done: room for M rows of done flags, one bit
 * an output; NULL, NULL when !vnni, K = 0 or memory is short (every output
 * then takes the scalar paths, the same bits). Rows: dr_crt_row_clean. */
#define DR_ROUND_SKIP (-100000)
int32_t *dr_crt_vector_columns(const dr_product *p, int vnni, uint8_t **done);
bool dr_crt_row_clean(const dr_product *p, size_t i);

/* ---- the CRT path (cpu_gemm_crt.c) --------------------------------------- */

/* Slice width w (grid of 2w bits per vector) for the CRT path at this K, or
 * 0 when the path does not take K (K = 0, or K above DR_CRT_K_MAX, where
 * the int32 sums of u8 x s8 products could wrap). */
#define DR_CRT_K_MAX 65536
#define DR_CRT_MAX_MODULI 16
int dr_crt_width(size_t K);
/* How many moduli that w and K need: their product P exceeds
 * 2 K (2^2w - 1)^2 with room to spare. */
int dr_crt_moduli(size_t K, int w);
/* The same for integers below 2^bits_a and 2^bits_b (each <= 2w): P exceeds
 * 2 K (2^bits_a - 1)(2^bits_b - 1) with room to spare. */
int dr_crt_moduli_bits(size_t K, int bits_a, int bits_b);
/* Modulus t (0 <= t < DR_CRT_MAX_MODULI), in the order they are taken. */
int dr_crt_modulus(int t);
/* Whether this CPU runs the VNNI kernel (avx512f, avx512bw, avx512vnni). */
int dr_crt_have_vnni(void);
/* p->V from p->a, p->b (sliced with w = dr_crt_width(K)). DR_OK or DR_ENOMEM. */
int dr_crt_values(dr_product *p, int vnni);

#if defined(__SIZEOF_INT128__)
/* The n moduli and what the residues and the reconstruction need of them. */
typedef struct dr_crt_plan {
    int n;
    double m[DR_CRT_MAX_MODULI], invm[DR_CRT_MAX_MODULI];    /* m_t, 1/m_t */
    double inv[DR_CRT_MAX_MODULI];                            /* (P/m_t)^-1 mod m_t */
    double cu[DR_CRT_MAX_MODULI], cs[DR_CRT_MAX_MODULI];      /* 1/(2m), 1/2 + 1/(4m) */
    dr_u128 Q[DR_CRT_MAX_MODULI], P;                          /* Q_t = P / m_t */
    uint32_t Qlimb[DR_CRT_MAX_MODULI][4], Plimb[4];           /* Q_t, P in 32-bit digits */
    uint64_t Q52[DR_CRT_MAX_MODULI][2], P52[2];               /* Q_t, P in 52-bit digits (when P < 2^104) */
    int ifma;                                                 /* P < 2^104 and the CPU has avx512ifma */
} dr_crt_plan;

/* The plan for the first n moduli (cpu_gemm_crt.c). */
void dr_crt_plan_init(dr_crt_plan *c, int n);

/* The VNNI path's residues and reconstruction (cpu_gemm_vnni.c), the same
 * bytes and the same V as the plain C ones in cpu_gemm_crt.c: packed A
 * (n planes of M x lda u8) and B (n planes of Np x 4G s8, kernel layout),
 * V (M x N) from the n planes of int32 sums (M x Np each). tmp: scratch of
 * n (4 M + 4 Np + 4G) bytes. has_rem[v] |= 1 when vector v has bits below its
 * grid (a remainder). */
void dr_crt_pack_a_vnni(const dr_crt_plan *c, const dr_sliced *s, uint8_t *Ap, size_t lda, uint8_t *tmp,
                        unsigned char *has_rem);
/* B is packed by the OpenMP team: tmp holds one scratch of tmp_per bytes a
 * thread, each at least n (4 Np + 4 G) + N bytes. */
void dr_crt_pack_b_vnni(const dr_crt_plan *c, const dr_sliced *s, int8_t *Bp, size_t G, size_t Np,
                        uint8_t *tmp, size_t tmp_per, unsigned char *has_rem);
void dr_crt_reconstruct_vnni(const dr_crt_plan *c, const int32_t *C32, size_t M, size_t N, size_t Np,
                             dr_i128 *V);
/* The same V by IFMA (fewer operations a modulus); only where c->ifma. */
void dr_crt_reconstruct_ifma(const dr_crt_plan *c, const int32_t *C32, size_t M, size_t N, size_t Np,
                             dr_i128 *V);

/* cpu_gemm_round.c: the f32 outputs of one row, bias_j + V[j] 2^(Ea + eb[j]),
 * j < N, correctly rounded, eight at a time on AVX-512 (only where
 * dr_crt_have_vnni() says so). Bit j % 8 of done[j / 8] says whether out[j]
 * was written; a column with eb[j] = DR_ROUND_SKIP, a zero sum, an inf/NaN
 * bias or one whose unit lies below V's or over 100 bits above it is left
 * to the caller. bias may be NULL. */
void dr_crt_round_row_avx512(const dr_i128 *V, size_t N, int Ea, const int32_t *eb, const float *bias,
                             float *out, uint8_t *done);
/* The same for compact accumulators: acc[j] += V[j] 2^(Ea + eb[j]) where
 * acc[j] is empty (W = 0, not overflowed) and V[j] != 0, stored as
 * dr_cacc_add_scaled stores a first term; full groups of eight only.
 * fresh: acc's old content is not read, every acc[j] taken as empty (the
 * columns left undone are then the caller's to initialize). */
void dr_crt_cacc_row_avx512(const dr_i128 *V, size_t N, int Ea, const int32_t *eb, struct dr_cacc *acc,
                            uint8_t *done, int fresh);
#endif

/* The int8 kernels: C[i][j] = sum_k A[i][k] * B[k][j] in int32 for one
 * modulus, i < M, j < Np (Np a multiple of 16). A: M rows of u8, row
 * stride lda >= 4 ceil(K/4), zero past K. B: packed for vpdpbusd, Np/16
 * panels of ceil(K/4) groups of 64 bytes (16 columns x 4 consecutive k,
 * byte 4c + t = B[4g + t][16q + c]), zero past K. Both give the same int32s. */
void dr_crt_kernel_portable(const uint8_t *A, size_t lda, const int8_t *B, size_t M, size_t Np,
                            size_t K, int32_t *C, size_t ldc);
void dr_crt_kernel_vnni(const uint8_t *A, size_t lda, const int8_t *B, size_t M, size_t Np,
                        size_t K, int32_t *C, size_t ldc);

#endif
