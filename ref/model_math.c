/* distref reference — Dense layers, losses and their gradients.
 *
 * Plain loops over exact primitives: every matrix product is dr_gemm_f32
 * (each element one correctly rounded dot product) and every sum over
 * examples goes into a dr_acc. Per-example quantities (activations, softmax,
 * deltas) depend only on the example, so they are the same bits whichever
 * replica holds the example.
 *
 * Shapes: b = examples in the batch; layer l maps in -> out; x is (b, in),
 * kernel W is (in, out), bias is (out), outputs are (b, out).
 */
#include "distref/model.h"
#include "distref/ref.h"
#include "distref/elem.h"
#include "distref/rng.h"
#include "ref/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define XENT_EPS 1e-7f   /* Keras' epsilon() for clipping probabilities */


float dr_model_reg_loss(const dr_model_spec *m, const float *params)
{
    dr_acc sq;
    if (m->l2 == 0.0f) return 0.0f;
    dr_acc_init(&sq);
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const float *w = params + dr_model_kernel_offset(m, l);
        if (dr_layer_regularized(&m->layer[l])) dr_acc_add_dot(&sq, w, w, dr_model_kernel_size(m, l));
    }
    return m->l2 * dr_acc_round(&sq);
}

float dr_model_reg_grad(const dr_model_spec *m, const float *params, size_t p)
{
    uint32_t l = 0;
    size_t off = 0;
    if (m->l2 == 0.0f) return 0.0f;
    while (l < m->nlayers && p >= off + dr_model_layer_params(m, l)) off += dr_model_layer_params(m, l++);
    if (l == m->nlayers || !dr_layer_regularized(&m->layer[l]) || p >= off + dr_model_kernel_size(m, l)) return 0.0f;
    return (2.0f * m->l2) * params[p];
}

/* ---- kernels ------------------------------------------------------------ */

static int ref_gemm_f32(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                        const float *A, size_t lda, const float *B, size_t ldb,
                        const float *bias, float *C, size_t ldc)
{
    dr_gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, bias, C, ldc);
    return DR_OK;
}

static int ref_gemm_acc(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                        const float *A, size_t lda, const float *B, size_t ldb, dr_acc *Cacc)
{
    dr_gemm_acc(ta, tb, M, N, K, A, lda, B, ldb, Cacc);
    return DR_OK;
}

const dr_model_ops *dr_model_ops_ref(void)
{
    static const dr_model_ops ops = { "ref", ref_gemm_f32, ref_gemm_acc, dr_expf, dr_logf };
    return &ops;
}

/* ---- scratch ------------------------------------------------------------ */

/* Graph models: the per-layer buffers of ref/layers.h. */
static int graph_work_init(dr_work *w, const dr_model_spec *m, size_t b)
{
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        w->aux_l[l] = malloc((b * d->out + 3 * (size_t)d->oc) * sizeof(float));
        w->idx[l] = malloc(b * d->out * sizeof(uint32_t));
        w->dact[l] = malloc(b * (l ? m->layer[l - 1].out : d->in) * sizeof(float));   /* d(loss)/d(act[l]) */
        if (!w->aux_l[l] || !w->idx[l] || !w->dact[l]) return DR_ENOMEM;
    }
    w->dact[m->nlayers] = malloc(b * m->layer[m->nlayers - 1].out * sizeof(float));
    return w->dact[m->nlayers] ? DR_OK : DR_ENOMEM;
}

int dr_work_init(dr_work *w, const dr_model_spec *m, uint32_t max_batch, dr_err *err)
{
    size_t widest = 0, b = max_batch ? max_batch : 1;
    memset(w, 0, sizeof *w);
    w->max_batch = max_batch;
    if (!dr_model_is_dense(m) && graph_work_init(w, m, b)) goto oom;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        if (m->layer[l].in > widest) widest = m->layer[l].in;
        if (m->layer[l].out > widest) widest = m->layer[l].out;
        w->pre[l] = malloc(b * m->layer[l].out * sizeof(float));
        w->act[l + 1] = malloc(b * m->layer[l].out * sizeof(float));
        if (!w->pre[l] || !w->act[l + 1]) goto oom;
    }
    w->delta[0] = malloc(b * widest * sizeof(float));
    w->delta[1] = malloc(b * widest * sizeof(float));
    w->aux = malloc(widest * sizeof(float));
    if (w->delta[0] && w->delta[1] && w->aux) return DR_OK;
oom:
    dr_work_free(w);
    return dr_fail(err, DR_ENOMEM, "out of memory for a batch of %u examples", max_batch);
}

void dr_work_free(dr_work *w)
{
    for (int l = 0; l < DR_MAX_LAYERS; l++) {
        free(w->pre[l]); free(w->act[l + 1]); free(w->aux_l[l]); free(w->idx[l]); free(w->dact[l]);
    }
    free(w->dact[DR_MAX_LAYERS]);
    free(w->delta[0]); free(w->delta[1]); free(w->aux);
    memset(w, 0, sizeof *w);
}

/* ---- forward ------------------------------------------------------------ */

/* Softmax of one row: e_i = exp(z_i - max), p_i = e_i / sum(e), the sum exact. */
static void softmax_row(const dr_model_ops *ops, const float *z, uint32_t n, float *p, float *e)
{
    float mx = z[0], s;
    for (uint32_t i = 1; i < n; i++) if (z[i] > mx) mx = z[i];
    for (uint32_t i = 0; i < n; i++) e[i] = ops->exp(z[i] - mx);
    s = dr_sum_f32(e, n);
    for (uint32_t i = 0; i < n; i++) p[i] = e[i] / s;
}

static void activate(const dr_model_ops *ops, const dr_dense *d, const float *pre, float *out,
                     uint32_t b, float *aux)
{
    size_t n = (size_t)b * d->out;
    switch (d->act) {
    case DR_ACT_LINEAR: memcpy(out, pre, n * sizeof *out); break;
    case DR_ACT_RELU:
        for (size_t i = 0; i < n; i++) out[i] = pre[i] > 0.0f ? pre[i] : 0.0f;
        break;
    case DR_ACT_SOFTMAX:
        for (uint32_t r = 0; r < b; r++)
            softmax_row(ops, pre + (size_t)r * d->out, d->out, out + (size_t)r * d->out, aux);
        break;
    }
}

void dr_model_activate(const dr_model_spec *m, const dr_model_ops *ops, uint32_t l, uint32_t b, dr_work *w)
{
    activate(ops, &m->layer[l], w->pre[l], w->act[l + 1], b, w->aux);
}

void dr_model_forward_layers(const dr_model_spec *m, const dr_model_ops *ops, const float *params,
                             const float *x, uint32_t first, uint32_t b, dr_work *w)
{
    const float *in = first ? w->act[first] : x;
    for (uint32_t l = first; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        const float *W = params + dr_model_kernel_offset(m, l), *bias = W + (size_t)d->in * d->out;
        if (b) ops->gemm_f32(DR_NO_TRANS, DR_NO_TRANS, b, d->out, d->in, in, d->in, W, d->out,
                             bias, w->pre[l], d->out);
        dr_model_activate(m, ops, l, b, w);
        in = w->act[l + 1];
    }
}

void dr_model_forward(const dr_model_spec *m, const dr_model_ops *ops, const float *params,
                      const float *x, uint32_t b, dr_work *w)
{
    if (!dr_model_is_dense(m)) {   /* inference: moving statistics, no dropout */
        dr_graph_ctx g = { m, ops, false, false, 0, 0, NULL, NULL, NULL, NULL, DR_DTYPE_F32, 0.0f, 0 };
        dr_graph_replica r = { params, x, NULL, NULL, NULL, b, w, NULL, NULL, NULL, 0, 0 };
        dr_graph_forward(&g, &r, 1);
        return;
    }
    dr_model_forward_layers(m, ops, params, x, 0, b, w);
}

/* ---- losses ------------------------------------------------------------- */

static uint32_t argmax(const float *v, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++) if (v[i] > v[best]) best = i;
    return best;
}

/* Loss of one example and d(loss)/d(pre-activation of the last layer). */
static float example_loss(const dr_model_spec *m, const dr_model_ops *ops, const float *pre,
                          const float *out, uint8_t label, const float *target, float *dz, float *aux)
{
    uint32_t n = m->layer[m->nlayers - 1].out;
    if (m->loss == DR_LOSS_XENT_LOGITS) {
        /* log(sum exp(z - max)) - (z_y - max); dz = softmax - onehot. */
        float mx = pre[argmax(pre, n)], s;
        for (uint32_t i = 0; i < n; i++) aux[i] = ops->exp(pre[i] - mx);
        s = dr_sum_f32(aux, n);
        if (dz) for (uint32_t i = 0; i < n; i++) dz[i] = aux[i] / s - (i == label ? 1.0f : 0.0f);
        return ops->log(s) - (pre[label] - mx);
    }
    if (m->loss == DR_LOSS_XENT_PROBS) {
        /* -log(clip(p_y)); back through the softmax: dz_i = p_i (g_i - p_y g_y). */
        float py = out[label], q = py < XENT_EPS ? XENT_EPS : py > 1.0f - XENT_EPS ? 1.0f - XENT_EPS : py;
        float gy = (q == py) ? -1.0f / py : 0.0f, t = py * gy;
        if (dz) for (uint32_t i = 0; i < n; i++) dz[i] = out[i] * ((i == label ? gy : 0.0f) - t);
        return -ops->log(q);
    }
    /* MSE: mean over outputs of (out - target)^2; dz = 2 (out - target) / n. */
    for (uint32_t i = 0; i < n; i++) aux[i] = out[i] - target[i];
    if (dz) for (uint32_t i = 0; i < n; i++) dz[i] = (2.0f * aux[i]) / (float)n;
    return dr_dot_f32(aux, aux, n) / (float)n;
}

void dr_model_example_losses(const dr_model_spec *m, const dr_model_ops *ops, const dr_work *w, uint32_t b,
                             const uint8_t *labels, const float *targets,
                             float *loss, uint32_t *pred)
{
    uint32_t L = m->nlayers, n = m->layer[L - 1].out;
    for (uint32_t r = 0; r < b; r++) {
        const float *pre = w->pre[L - 1] + (size_t)r * n, *out = w->act[L] + (size_t)r * n;
        if (loss) loss[r] = example_loss(m, ops, pre, out, labels ? labels[r] : 0,
                                         targets ? targets + (size_t)r * n : NULL, NULL, w->aux);
        if (pred) pred[r] = argmax(out, n);
    }
}

/* ---- backward ----------------------------------------------------------- */

void dr_model_loss_delta(const dr_model_spec *m, const dr_model_ops *ops, const dr_work *w, uint32_t n,
                         const uint8_t *labels, const float *targets, dr_acc *loss_sum, float *dz, uint64_t *correct)
{
    uint32_t L = m->nlayers, nout = m->layer[L - 1].out;
    for (uint32_t r = 0; r < n; r++) {
        const float *pre = w->pre[L - 1] + (size_t)r * nout, *out = w->act[L] + (size_t)r * nout;
        uint8_t label = labels ? labels[r] : 0;
        dr_acc_add(loss_sum, example_loss(m, ops, pre, out, label, targets ? targets + (size_t)r * nout : NULL,
                                          dz + (size_t)r * nout, w->aux));
        if (labels && correct) *correct += argmax(out, nout) == label;
    }
}

const float *dr_model_backward(const dr_model_spec *m, const dr_model_ops *ops, const float *params,
                               const float *x, const uint8_t *labels, const float *targets, uint32_t n,
                               dr_work *w, dr_acc *loss_sum, dr_acc *grad_sum, uint64_t *correct,
                               bool kernel0)
{
    uint32_t L = m->nlayers;
    float *dz = w->delta[0];
    dr_model_loss_delta(m, ops, w, n, labels, targets, loss_sum, dz, correct);
    for (uint32_t l = L; l-- > 0;) {
        const dr_dense *d = &m->layer[l];
        const float *in = l ? w->act[l] : x, *W = params + dr_model_kernel_offset(m, l);
        dr_acc *gW = grad_sum + dr_model_kernel_offset(m, l), *gb = gW + (size_t)d->in * d->out;
        float *dprev = w->delta[(L - l) & 1];
        if (l > 0 || kernel0)
            ops->gemm_acc(DR_TRANS, DR_NO_TRANS, d->in, d->out, n, in, d->in, dz, d->out, gW);
        for (uint32_t r = 0; r < n; r++)
            for (uint32_t j = 0; j < d->out; j++) dr_acc_add(&gb[j], dz[(size_t)r * d->out + j]);
        if (l == 0) break;
        /* delta of the layer below: dz W^T, through its ReLU (hidden layers are ReLU or linear). */
        ops->gemm_f32(DR_NO_TRANS, DR_TRANS, n, d->in, d->out, dz, d->out, W, d->out, NULL, dprev, d->in);
        if (m->layer[l - 1].act == DR_ACT_RELU)
            for (size_t i = 0; i < (size_t)n * d->in; i++) if (!(w->pre[l - 1][i] > 0.0f)) dprev[i] = 0.0f;
        dz = dprev;
    }
    return dz;
}

void dr_model_loss_grad(const dr_model_spec *m, const dr_model_ops *ops, const float *params, const float *x,
                        const uint8_t *labels, const float *targets, uint32_t b,
                        dr_work *w, dr_acc *loss_sum, dr_acc *grad_sum, uint64_t *correct)
{
    if (b == 0) return;
    if (!dr_model_is_dense(m)) {   /* one replica, replica BN, dropout keyed by the row */
        dr_graph_ctx g = { m, ops, true, false, 0, 0, NULL, NULL, NULL, NULL, DR_DTYPE_F32, 0.0f, 0 };
        dr_graph_replica r = { params, x, labels, targets, NULL, b, w, loss_sum, grad_sum, correct, 0, 0 };
        dr_graph_loss_grad(&g, &r, 1);
        return;
    }
    dr_model_forward(m, ops, params, x, b, w);
    dr_model_backward(m, ops, params, x, labels, targets, b, w, loss_sum, grad_sum, correct, true);
}
