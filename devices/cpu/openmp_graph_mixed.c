/* distref devices/cpu/ — the OpenMP backend's mixed step for models beyond
 * Dense (--dtype_policy=mixed_*: dr_graph_rt.compute; openmp_graph.c's
 * header states its roundings): the copies the layers read (Conv2D's and
 * Dense's weights and the input rounded to the compute dtype), its GEMM
 * (each output one rounding of its exact value, or under --numerics=fast of
 * the float32 GEMM's), and a kernel gradient's GEMM (exact accumulators;
 * fast: the float32 GEMM added exactly, so the cross-replica sum stays exact).
 */
#include "devices/cpu/openmp_graph.h"
#include "distref/fastgemm.h"
#include "devices/seams.h"

#include <stdlib.h>
#include <string.h>

#define MIX_CHUNK ((size_t)1 << 14)   /* accumulators a GEMM's rows are rounded through */

int dr_omp_gemm_dtype(dr_omp_graph *g, dr_trans tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                      const float *B, size_t ldb, const float *bias, bool bias_after, float *C)
{
    const dr_dtype c = g->rt.compute;
    const size_t step = g->nmacc / N;   /* rows a chunk (nmacc >= every N) */
    const bool after = DR_SEAM_MIXED_BIAS_AFTER(bias_after);
    if (dr_omp_mixed_fast(g)) {   /* element-wise after the GEMM: the same bits on any team */
        dr_omp_gemm_acc(DR_NUMERICS_FAST, DR_NO_TRANS, tb, M, N, K, A, lda, B, ldb, C, 0.0f);
        #pragma omp parallel for schedule(static) if (dr_omp_par(M * N))
        for (size_t i = 0; i < M * N; i++) {
            float v = bias && after ? dr_round_to_dtype(C[i], c) : C[i];
            if (bias) v = v + bias[i % N];
            C[i] = DR_SEAM_MIXED_FAST_ROUND(dr_round_to_dtype(v, c), v);
        }
        return DR_OK;
    }
    for (size_t r0 = 0; r0 < M; r0 += step) {
        size_t rows = M - r0 < step ? M - r0 : step;
        memset(g->macc, 0, rows * N * sizeof *g->macc);
        if (dr_gemm_acc_fast(DR_NO_TRANS, tb, rows, N, K, A + r0 * lda, lda, B, ldb, g->macc)) return DR_ENOMEM;
        for (size_t i = 0; i < rows * N; i++) {
            dr_acc *a = &g->macc[i];
            if (bias && after) {   /* two c values: their sum is exact in an accumulator */
                float v = dr_acc_round_div_dtype(a, 1, c);
                dr_acc_init(a);
                dr_acc_add(a, v);
            }
            if (bias) dr_acc_add(a, bias[i % N]);
            C[r0 * N + i] = dr_acc_round_div_dtype(a, 1, c);
        }
    }
    return DR_OK;
}

/* The mixed step's copies: wc (Conv2D's and Dense's weights and biases
 * rounded to c, the rest as they are), xc, and the GEMMs' accumulators. */
int dr_omp_mixed_begin(dr_backend *b, dr_replica_bufs *rb, dr_omp_graph *g, uint32_t cap, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const float *w = dr_omp_f32(rb->params), *x = dr_omp_f32(rb->x);
    size_t nx = (size_t)g->rt.n * m->layer[0].in, need = MIX_CHUNK, wf = 0;
    if (b->num != DR_NUMERICS_EXACT)
        return dr_fail(err, DR_EUNSUPPORTED, "openmp backend: the mixed step of a model beyond Dense runs with full "
                       "exact accumulators");
    for (uint32_t l = 0; l < m->nlayers; l++) {   /* the widest GEMM row: every N below */
        if (m->layer[l].in > need) need = m->layer[l].in;
        if (m->layer[l].out > need) need = m->layer[l].out;
    }
    if (!g->wc) g->wc = malloc((b->P ? b->P : 1) * sizeof(float));
    if (!g->xc) g->xc = malloc(((size_t)cap * m->layer[0].in + 1) * sizeof(float));
    if (!g->macc) g->macc = malloc(need * sizeof(dr_acc));
    g->nmacc = need;
    for (uint32_t l = 0; g->rt.fast && !g->wf && l <= m->nlayers; l++)   /* the largest layer's gradient */
        if (l == m->nlayers) g->wf = malloc((wf ? wf : 1) * sizeof(float));
        else if (dr_model_layer_params(m, l) > wf) wf = dr_model_layer_params(m, l);
    if (!g->wc || !g->xc || !g->macc || (g->rt.fast && !g->wf))
        return dr_fail(err, DR_ENOMEM, "openmp backend: out of memory for the mixed step's copies of %u rows", cap);
    memcpy(g->wc, w, b->P * sizeof(float));
    for (uint32_t l = 0; l < m->nlayers; l++) {
        size_t at = dr_model_kernel_offset(m, l), n = dr_model_layer_params(m, l);
        if (m->layer[l].kind != DR_LAYER_DENSE && m->layer[l].kind != DR_LAYER_CONV2D) continue;
        for (size_t i = at; i < at + n; i++) g->wc[i] = dr_round_to_dtype(w[i], g->rt.compute);
    }
    for (size_t i = 0; i < nx; i++) g->xc[i] = dr_round_to_dtype(x[i], g->rt.compute);
    return DR_OK;
}

/* grad's n accumulators += the float32 values f, each exactly */
void dr_omp_acc_add_floats(dr_acc *grad, const float *f, size_t n)
{
    #pragma omp parallel for schedule(static) if (dr_omp_par(n))
    for (size_t i = 0; i < n; i++) dr_acc_add(&grad[i], f[i]);
}

int dr_omp_grad_gemm(const dr_backend *b, dr_omp_graph *g, size_t M, size_t N, size_t K, const float *A, size_t lda,
                     const float *B, size_t ldb, void *grad)
{
    if (!dr_omp_mixed_fast(g)) return dr_omp_gemm_acc(b->num, DR_TRANS, DR_NO_TRANS, M, N, K, A, lda, B, ldb, grad, 0.0f);
    dr_omp_gemm_acc(DR_NUMERICS_FAST, DR_TRANS, DR_NO_TRANS, M, N, K, A, lda, B, ldb, g->wf, 0.0f);
    dr_omp_acc_add_floats(grad, g->wf, M * N);
    return DR_OK;
}
