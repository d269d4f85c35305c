/* distref devices/cpu/ — the OpenMP backend's mixed-precision kernel
 * (--dtype_policy=mixed_float16 / mixed_bfloat16; distref/backend.h,
 * mixed_loss_grad; docs/TRAINING_FEATURES.md "Mixed precision").
 *
 * float32 master weights in rb->params; every op's result is its exact
 * value rounded once to the compute dtype c (distref/half.h):
 *   forward   x_c = RN_c(x), W_c = RN_c(W), b_c = RN_c(b); each layer's
 *             pre-activation RN_c(exact x_c W_c + b_c) (the engine's exact
 *             GEMM into accumulators, distref/fastgemm.h); ReLU; the
 *             softmax cross-entropy in float32 on the compute-dtype logits;
 *   backward  per example dz_c = RN_c(exact scale (softmax - onehot) / G);
 *             the layer below gets RN_c(exact dz_c W_c^T), masked by its
 *             ReLU; the weight gradients stay exact sums (rb->grad).
 * --numerics=fast (mk->fast): the three GEMMs are float32 sgemms (the
 * engine's fast GEMM, cut by shape) on the dtype-rounded operands, as a
 * GPU's half GEMM with float32 accumulation computes; a pre-activation is
 * then RN_c(float(x_c W_c) + b_c), a delta RN_c(float(dz_c W_c^T)), and a
 * replica's weight gradient its float32 sgemm, added exactly to rb->grad
 * (so the cross-replica sum stays exact; the per-replica float partial
 * makes the result depend on the split, as TensorFlow's does).
 * The strategy layer (strategies/mixed.c) reduces them, rounds, decides the
 * loss scale's skip and applies (apply_f32). Dense layers with ReLU or
 * linear activations and the logits cross-entropy only: the engine refuses
 * the rest before it opens.
 */
#include "devices/cpu/openmp_backend.h"

#include "distref/elem.h"
#include "distref/fastgemm.h"

#include <stdlib.h>
#include <string.h>

#include "devices/seams.h"

typedef struct mix_ws {
    float  *Wc, *xc, *pre[DR_MAX_LAYERS], *act[DR_MAX_LAYERS], *dz[2], *aux;
    dr_acc *tmp;
    float  *tf;     /* fast: a GEMM's float32 result (rows x widest, or a layer's kernel) */
    bool    fast;
} mix_ws;

static void ws_free(mix_ws *w)
{
    free(w->Wc); free(w->xc); free(w->dz[0]); free(w->dz[1]); free(w->aux); free(w->tmp); free(w->tf);
    for (int l = 0; l < DR_MAX_LAYERS; l++) { free(w->pre[l]); free(w->act[l]); }
}

static int ws_alloc(const dr_backend *b, uint32_t n, bool fast, mix_ws *w, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    size_t tf = (size_t)n * b->widest;
    bool ok;
    memset(w, 0, sizeof *w);
    w->fast = fast;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        size_t kernel = (size_t)m->layer[l].in * m->layer[l].out;
        if (kernel > tf) tf = kernel;
        w->pre[l] = malloc((size_t)n * m->layer[l].out * sizeof(float));
        w->act[l] = malloc((size_t)n * m->layer[l].out * sizeof(float));
    }
    w->Wc = malloc(b->P * sizeof(float));
    w->xc = malloc((size_t)n * m->layer[0].in * sizeof(float));
    w->dz[0] = malloc((size_t)n * b->widest * sizeof(float));
    w->dz[1] = malloc((size_t)n * b->widest * sizeof(float));
    w->aux = malloc(b->widest * sizeof(float));
    if (fast) w->tf = malloc(tf * sizeof(float));
    else w->tmp = malloc((size_t)n * b->widest * sizeof(dr_acc));
    ok = w->Wc && w->xc && w->dz[0] && w->dz[1] && w->aux && (fast ? w->tf != NULL : w->tmp != NULL);
    for (uint32_t l = 0; l < m->nlayers; l++) ok = ok && w->pre[l] && w->act[l];
    if (ok) return DR_OK;
    ws_free(w);
    return dr_fail(err, DR_ENOMEM, "openmp backend: out of memory for the mixed step's workspace (%u rows)", n);
}

static void to_dtype(const float *in, size_t n, dr_dtype c, float *out)
{
    for (size_t i = 0; i < n; i++) out[i] = dr_round_to_dtype(in[i], c);
}

/* tmp[0..n) rounded once each to c */
static void acc_to_dtype(const dr_acc *tmp, size_t n, dr_dtype c, float *out)
{
    for (size_t i = 0; i < n; i++) out[i] = dr_acc_round_div_dtype(&tmp[i], 1, c);
}

/* C[M x N] = op(A) op(B) in float32 (the fast GEMM), then (bias: + bias
 * per row, in float32) each element rounded to c into out. */
static void gemm_fast_dtype(dr_trans tb, size_t M, size_t N, size_t K, const float *A, const float *B,
                            const float *bias, dr_dtype c, float *C, float *out)
{
    dr_omp_gemm_acc(DR_NUMERICS_FAST, DR_NO_TRANS, tb, M, N, K, A, K, B, tb ? K : N, C, 0.0f);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++)
            out[i * N + j] = dr_round_to_dtype(bias ? C[i * N + j] + bias[j] : C[i * N + j], c);
}

/* Layer l on n rows: pre = RN_c(in W_c + b_c), act = ReLU or the identity. */
static int forward_layer(const dr_backend *b, uint32_t l, const float *in, uint32_t n, dr_dtype c, mix_ws *w)
{
    const dr_dense *d = &b->m.layer[l];
    const float *Wc = w->Wc + b->koff[l], *bc = Wc + (size_t)d->in * d->out;
    size_t cnt = (size_t)n * d->out;
    if (w->fast) {
        gemm_fast_dtype(DR_NO_TRANS, n, d->out, d->in, in, Wc, DR_SEAM_MIXED_FAST_BIAS(bc), c, w->tf, w->pre[l]);
    } else {
        memset(w->tmp, 0, cnt * sizeof *w->tmp);
        if (dr_gemm_acc_fast(DR_NO_TRANS, DR_NO_TRANS, n, d->out, d->in, in, d->in, Wc, d->out, w->tmp))
            return DR_ENOMEM;
        for (uint32_t r = 0; r < n; r++)
            for (uint32_t j = 0; j < d->out; j++) dr_acc_add(&w->tmp[(size_t)r * d->out + j], bc[j]);
        acc_to_dtype(w->tmp, cnt, c, w->pre[l]);
    }
    for (size_t i = 0; i < cnt; i++)
        w->act[l][i] = d->act == DR_ACT_RELU ? (w->pre[l][i] > 0.0f ? w->pre[l][i] : 0.0f) : w->pre[l][i];
    return DR_OK;
}

/* One example: its float32 loss on the compute-dtype logits z, and dz
 * (also the mixed graph step's loss, openmp_graph.c). */
float dr_omp_mixed_example(const float *z, uint32_t k, uint8_t label, float scale, uint32_t G, dr_dtype c,
                           float *aux, float *dz)
{
    float mx = z[0], s;
    for (uint32_t i = 1; i < k; i++) if (z[i] > mx) mx = z[i];
    for (uint32_t i = 0; i < k; i++) aux[i] = dr_expf(z[i] - mx);
    s = dr_sum_f32(aux, k);
    for (uint32_t i = 0; i < k; i++) {
        dr_acc a;
        dr_acc_init(&a);
        dr_acc_add_prod(&a, aux[i] / s - (i == label ? 1.0f : 0.0f), scale);
        dz[i] = dr_acc_round_div_dtype(&a, G, c);
    }
    return dr_logf(s) - (z[label] - mx);
}

/* Backward from the top's dz: weight gradients exact into g, deltas rounded to c. */
static int backward(const dr_backend *b, const float *xc, uint32_t n, dr_dtype c, dr_acc *g, mix_ws *w)
{
    const dr_model_spec *m = &b->m;
    float *dz = w->dz[0];
    for (uint32_t l = m->nlayers; l-- > 0;) {
        const dr_dense *d = &m->layer[l];
        const float *Wc = w->Wc + b->koff[l], *in = l ? w->act[l - 1] : xc;
        dr_acc *gW = g + b->koff[l], *gb = gW + (size_t)d->in * d->out;
        float *dprev = w->dz[(m->nlayers - l) & 1];
        if (w->fast) {   /* the replica's float32 kernel gradient, added exactly */
            dr_omp_gemm_acc(DR_NUMERICS_FAST, DR_TRANS, DR_NO_TRANS, d->in, d->out, n, in, d->in, dz, d->out,
                            w->tf, 0.0f);
            for (size_t i = 0; i < (size_t)d->in * d->out; i++) dr_acc_add(&gW[i], w->tf[i]);
        } else if (dr_gemm_acc_fast(DR_TRANS, DR_NO_TRANS, d->in, d->out, n, in, d->in, dz, d->out, gW))
            return DR_ENOMEM;
        for (uint32_t e = 0; e < n; e++)
            for (uint32_t j = 0; j < d->out; j++) dr_acc_add(&gb[j], dz[(size_t)e * d->out + j]);
        if (l == 0) break;
        if (w->fast) gemm_fast_dtype(DR_TRANS, n, d->in, d->out, dz, Wc, NULL, c, w->tf, dprev);
        else {
            memset(w->tmp, 0, (size_t)n * d->in * sizeof *w->tmp);
            if (dr_gemm_acc_fast(DR_NO_TRANS, DR_TRANS, n, d->in, d->out, dz, d->out, Wc, d->out, w->tmp))
                return DR_ENOMEM;
            acc_to_dtype(w->tmp, (size_t)n * d->in, c, dprev);
        }
        if (m->layer[l - 1].act == DR_ACT_RELU)
            for (size_t i = 0; i < (size_t)n * d->in; i++) if (!(w->pre[l - 1][i] > 0.0f)) dprev[i] = 0.0f;
        dz = dprev;
    }
    return DR_OK;
}

static int run(dr_backend *b, dr_replica_bufs *rb, uint32_t n, const dr_mixed_kernel *mk, mix_ws *w)
{
    const dr_model_spec *m = &b->m;
    uint32_t L = m->nlayers, k = m->layer[L - 1].out;
    const uint8_t *labels = rb->labels->data;
    dr_acc *loss = dr_omp_acc(rb->loss);
    to_dtype(dr_omp_f32(rb->params), b->P, mk->compute, w->Wc);
    to_dtype(dr_omp_f32(rb->x), (size_t)n * m->layer[0].in, mk->compute, w->xc);
    for (uint32_t l = 0; l < L; l++)
        if (forward_layer(b, l, l ? w->act[l - 1] : w->xc, n, mk->compute, w)) return DR_ENOMEM;
    for (uint32_t e = 0; e < n; e++) {
        const float *z = w->pre[L - 1] + (size_t)e * k;
        uint32_t best = 0;
        for (uint32_t i = 1; i < k; i++) if (z[i] > z[best]) best = i;
        rb->correct += best == labels[e];
        dr_acc_add(loss, dr_omp_mixed_example(z, k, labels[e], mk->scale, mk->G, mk->compute, w->aux,
                                                   w->dz[0] + (size_t)e * k));
    }
    if (mk->mult > 1) dr_acc_mul_u32(loss, mk->mult);
    return backward(b, w->xc, n, mk->compute, dr_omp_acc(rb->grad), w);
}

int dr_omp_mixed_loss_grad(dr_backend *b, dr_replica_bufs *rb, uint32_t n, const dr_mixed_kernel *mk, dr_err *err)
{
    mix_ws w;
    int rc;
    if (b->num != DR_NUMERICS_EXACT)
        return dr_fail(err, DR_EUNSUPPORTED, "openmp backend: the mixed kernel runs with full exact accumulators");
    if ((rc = dr_omp_need(rb->grad, b->P * sizeof(dr_acc), "gradient", err)) ||
        (rc = dr_omp_need(rb->loss, sizeof(dr_acc), "loss", err)) ||
        (rc = dr_omp_need(rb->params, b->P * sizeof(float), "params", err)))
        return rc;
    memset(rb->grad->data, 0, b->P * sizeof(dr_acc));
    dr_acc_init(dr_omp_acc(rb->loss));
    rb->correct = 0;
    if (n == 0) return DR_OK;
    if (!rb->labels) return dr_fail(err, DR_EUNSUPPORTED, "openmp backend: the mixed kernel needs labels");
    if ((rc = ws_alloc(b, n, mk->fast, &w, err))) return rc;
    rc = run(b, rb, n, mk, &w);
    ws_free(&w);
    return rc ? dr_fail(err, DR_ENOMEM, "openmp backend: out of memory in the mixed step's exact GEMM") : DR_OK;
}
