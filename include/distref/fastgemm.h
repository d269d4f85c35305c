/* distref — the engine's exact GEMM: same contract, same bits, fewer cycles.
 *
 * dr_gemm_f32_fast and dr_gemm_acc_fast return exactly what dr_gemm_f32 and
 * dr_gemm_acc (exact.h) return, bit for bit: every row of op(A) and column
 * of op(B) is put on an integer grid below its largest exponent, the
 * integer dot products are formed exactly, and nothing is rounded before
 * the one final rounding. Two ways of forming the integer products:
 *
 *   Residues (Ozaki scheme II; Ozaki, Uchino, Imamura 2025), chosen when
 *   the CPU has AVX-512 VNNI (run-time check), 1 <= K <= 65536 and
 *   M N K >= 2^16. The grid is 2w = min(40, 2 floor((53 - ceil(log2 K))/2))
 *   bits; the integers are reduced modulo n pairwise coprime moduli <= 256
 *   (n from K: their product exceeds 2 K 2^4w; 12 at K = 784), one int8
 *   GEMM per modulus (vpdpbusd, u8 x s8 into int32), and the Chinese
 *   remainder theorem gives each 128-bit integer product.
 *
 *   Slices through DGEMM (Ozaki scheme I; Ozaki, Ogita, Oishi, Rump, Numer.
 *   Algorithms 59, 2012), everywhere else: the grid of 2w bits, w =
 *   floor((53 - ceil(log2 K)) / 2), split into two slices of w bits held as
 *   integers in doubles, so that a slice product summed over K terms stays
 *   below 2^53 and DGEMM (OpenBLAS) computes it without rounding; three or
 *   four DGEMMs.
 *
 * dr_gemm_f32_fast's rounded outputs take a third way when M N K >= 2^16:
 * one DGEMM (each float product exact in double) with an error bound that
 * proves each output's rounding (Cauchy-Schwarz over Higham's gamma_K),
 * a compensated re-summation (Sum2) where that bound is too wide, and the
 * exact path where even that cannot decide (ties and near-ties, zeros,
 * inf and NaN): devices/cpu/cpu_gemm_cert.c. The accumulator outputs
 * (dr_gemm_acc_fast, dr_gemm_cacc_fast) always take the exact products.
 *
 * Either way, bits of an element below its vector's grid (an element far
 * smaller than its vector's maximum) are a remainder r, whose products are
 * added exactly one by one (a * b = grid part + r_a * b + (a - r_a) * r_b);
 * rows or columns holding inf or NaN take the plain exact path.
 * devices/cpu/cpu_gemm_internal.h forces a path (tests, benches).
 *
 * Returns DR_OK, or DR_ENOMEM (nothing written) when scratch allocation fails.
 */
#ifndef DISTREF_FASTGEMM_H
#define DISTREF_FASTGEMM_H

#include <stddef.h>
#include "distref/error.h"
#include "distref/exact.h"

int dr_gemm_f32_fast(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                     const float *A, size_t lda, const float *B, size_t ldb,
                     const float *bias, float *C, size_t ldc);

int dr_gemm_acc_fast(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                     const float *A, size_t lda, const float *B, size_t ldb,
                     dr_acc *Cacc);

/* The same into compact accumulators (distref/cacc.h): Cacc[i*N + j] =
 * beta Cacc[i*N + j] + the exact product times 2^e2 (beta 0 or 1, 0 <= e2
 * <= 30; beta 0 never reads Cacc, which may hold anything), or the
 * element is marked overflowed. e2 is free where the product is reconstructed (an exponent
 * added); a caller that would scale the sums by a power of two afterwards
 * (a replica's share of R = 2^k) passes it here instead of a pass over
 * the accumulators. The same accumulators as dr_cacc_mul_u32(2^e2) after,
 * word for word: every term moves by the same 2^e2. */
struct dr_cacc;
int dr_gemm_cacc_fast(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                      const float *A, size_t lda, const float *B, size_t ldb,
                      struct dr_cacc *Cacc, int e2, int beta);

#endif
