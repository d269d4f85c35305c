/* distref — the engine's exact GEMM: same contract, same bits, fewer cycles.
 *
 * dr_gemm_f32_fast and dr_gemm_acc_fast return exactly what dr_gemm_f32 and
 * dr_gemm_acc (exact.h) return, bit for bit, but compute the products with
 * four DGEMM calls (OpenBLAS) on error-free slices of the operands (the Ozaki
 * scheme: Ozaki, Ogita, Oishi, Rump, Numer. Algorithms 59, 2012):
 *
 *   Every row of op(A) and column of op(B) is split, relative to its largest
 *   exponent, into two slices of w bits, held as integers in doubles, with
 *   w = floor((53 - ceil(log2 K)) / 2): a slice product summed over K terms
 *   then stays below 2^53, so DGEMM computes it without rounding. The four
 *   slice products are exact integers; they are placed into an exact
 *   accumulator with their scales. Bits of an element below its row's two
 *   slices (an element far smaller than its row's maximum) are a remainder
 *   r; its products are added exactly one by one (a * b = slices + r_a * b +
 *   (a - r_a) * r_b). Rows or columns holding inf or NaN take the plain
 *   exact path. Nothing is rounded before the one final rounding.
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

/* The same into compact accumulators (distref/cacc.h): Cacc[i*N + j] +=
 * the exact product, or the element is marked overflowed. */
struct dr_cacc;
int dr_gemm_cacc_fast(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                      const float *A, size_t lda, const float *B, size_t ldb,
                      struct dr_cacc *Cacc);

/* Fast (inexact) mode: cblas_sgemm plus the bias, rounded as sgemm rounds. */
void dr_gemm_f32_sgemm(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                       const float *A, size_t lda, const float *B, size_t ldb,
                       const float *bias, float *C, size_t ldc);

#endif
