/* distref devices — the OpenMP CPU backend's kernel tables.
 *
 * exact: dr_gemm_f32_fast / dr_gemm_acc_fast (error-free splitting over
 * DGEMM, same bits as the reference) and the shared elementary functions.
 * fast: cblas_sgemm and libm's expf/logf. In fast mode a replica's gradient
 * is an sgemm result rounded to float, then entered into its accumulator:
 * the cross-replica reduction stays exact, the per-replica work does not.
 */
#include "distref/engine.h"
#include "distref/elem.h"
#include "distref/fastgemm.h"

#include <math.h>
#include <stdlib.h>

const dr_model_ops *dr_openmp_ops_exact(void)
{
    static const dr_model_ops ops = { "openmp-exact", dr_gemm_f32_fast, dr_gemm_acc_fast,
                                      dr_expf, dr_logf };
    return &ops;
}

static int sgemm_f32(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                     const float *A, size_t lda, const float *B, size_t ldb,
                     const float *bias, float *C, size_t ldc)
{
    dr_gemm_f32_sgemm(ta, tb, M, N, K, A, lda, B, ldb, bias, C, ldc);
    return DR_OK;
}

static int sgemm_acc(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                     const float *A, size_t lda, const float *B, size_t ldb, dr_acc *Cacc)
{
    float *C = malloc(M * N * sizeof *C + 1);
    if (!C) return DR_ENOMEM;
    dr_gemm_f32_sgemm(ta, tb, M, N, K, A, lda, B, ldb, NULL, C, N);
    for (size_t i = 0; i < M * N; i++) dr_acc_add(&Cacc[i], C[i]);
    free(C);
    return DR_OK;
}

static float libm_exp(float x) { return expf(x); }
static float libm_log(float x) { return logf(x); }

const dr_model_ops *dr_openmp_ops_fast(void)
{
    static const dr_model_ops ops = { "openmp-fast", sgemm_f32, sgemm_acc, libm_exp, libm_log };
    return &ops;
}
