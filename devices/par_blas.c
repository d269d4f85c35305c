/* distref devices — BLAS calls spread over the engine's OpenMP team.
 *
 * The thread policy (strategies/engine.c) keeps OpenBLAS on one thread
 * while a run is open, so that its threads never spin against OpenMP's.
 * The GEMMs then get the team this way: C's rows are cut into blocks of
 * DR_PAR_ROWS and each block is one single-threaded BLAS call, the blocks
 * shared out by `omp parallel for`. The blocks are fixed, whatever the
 * team's size, so a fast-mode sgemm gives the same bits on 1 thread as on
 * 2; inside another parallel region (replicas side by side) the loop runs
 * on the calling thread. The exact GEMM's DGEMMs multiply integers exactly,
 * so their split cannot change a bit at all.
 */
#include "devices/par_blas.h"

#include <cblas.h>

static size_t nblocks(size_t M)
{
    return (M + DR_PAR_ROWS - 1) / DR_PAR_ROWS;
}

void dr_par_sgemm(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K, float alpha, const float *A,
                  size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
    size_t nb = nblocks(M);
    #pragma omp parallel for schedule(static) if (nb > 1)
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * DR_PAR_ROWS, m = M - lo < DR_PAR_ROWS ? M - lo : DR_PAR_ROWS;
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)N,
                    (int)K, alpha, ta ? A + lo : A + lo * lda, (int)lda, B, (int)ldb, beta, C + lo * ldc, (int)ldc);
    }
}

void dr_par_dgemm(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K, const double *A, size_t lda,
                  const double *B, size_t ldb, double *C, size_t ldc)
{
    size_t nb = nblocks(M);
    #pragma omp parallel for schedule(static) if (nb > 1)
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * DR_PAR_ROWS, m = M - lo < DR_PAR_ROWS ? M - lo : DR_PAR_ROWS;
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)N,
                    (int)K, 1.0, ta ? A + lo : A + lo * lda, (int)lda, B, (int)ldb, 0.0, C + lo * ldc, (int)ldc);
    }
}
