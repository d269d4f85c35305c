/* distref devices — GEMMs over the engine's OpenMP team (devices/par_blas.c).
 * Row-major, C = alpha op(A) op(B) + beta C (the DGEMM: alpha 1, beta 0),
 * C's rows in fixed blocks of DR_PAR_ROWS, one single-threaded BLAS call
 * each. Not a public header. */
#ifndef DISTREF_DEVICES_PAR_BLAS_H
#define DISTREF_DEVICES_PAR_BLAS_H

#include <stddef.h>
#include "distref/exact.h"

#define DR_PAR_ROWS 128

void dr_par_sgemm(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K, float alpha, const float *A,
                  size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc);
void dr_par_dgemm(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K, const double *A, size_t lda,
                  const double *B, size_t ldb, double *C, size_t ldc);

#endif
