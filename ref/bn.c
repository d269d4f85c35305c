/* distref reference — BatchNormalization's per-replica pieces (ref/layers.h):
 * the exact sums its statistics are made of, the normalization as Keras 3
 * writes it (tf.nn.batch_normalization: inv = rsqrt(var + eps) * gamma,
 * y = x * inv + (beta - mean * inv)), and the backward sums. Whether the
 * sums span replicas (sync) or not is ref/graph.c's choice. */
#include "ref/layers.h"

#include <math.h>
#include <string.h>

/* aux_l[l]: xhat (b * out), then per channel mean, inv = rsqrt(var + eps), a = inv * gamma */
static float *bn_mean(const dr_dense *d, const dr_work *w, uint32_t l) { return w->aux_l[l] + (size_t)w->max_batch * d->out; }

void dr_bn_sums(const dr_model_spec *m, uint32_t l, const float *x, uint32_t b, const dr_work *w,
                dr_acc *s1, dr_acc *s2)
{
    const dr_dense *d = &m->layer[l];
    const float *in = dr_layer_input(m, l, x, w);
    size_t pix = (size_t)b * d->ih * d->iw;
    uint32_t r[4];
    dr_layer_region(w, l, l, d->ih, d->iw, r);
    for (size_t p = 0; p < pix; p++)
        for (uint32_t c = 0; dr_region_has(r, d->ih, d->iw, p) && c < d->ic; c++) {
            float v = in[p * d->ic + c];
            dr_acc_add(&s1[c], v);
            if (s2) dr_acc_add_prod(&s2[c], v, v);
        }
}

void dr_bn_centered(const dr_model_spec *m, uint32_t l, const float *x, uint32_t b, const dr_work *w,
                    const float *mean, dr_acc *s2)
{
    const dr_dense *d = &m->layer[l];
    const float *in = dr_layer_input(m, l, x, w);
    size_t pix = (size_t)b * d->ih * d->iw;
    uint32_t r[4];
    dr_layer_region(w, l, l, d->ih, d->iw, r);
    for (size_t p = 0; p < pix; p++)
        for (uint32_t c = 0; dr_region_has(r, d->ih, d->iw, p) && c < d->ic; c++) {
            float t = in[p * d->ic + c] - mean[c];
            dr_acc_add(&s2[c], t * t);
        }
}

void dr_bn_normalize(const dr_model_spec *m, uint32_t l, const float *params, const float *x, uint32_t b,
                     dr_work *w, const float *mean, const float *var, bool training)
{
    const dr_dense *d = &m->layer[l];
    const float *in = dr_layer_input(m, l, x, w);
    const float *gamma = params + dr_model_kernel_offset(m, l), *beta = params + dr_model_bias_offset(m, l);
    float *mu = bn_mean(d, w, l), *inv = mu + d->oc, *a = inv + d->oc, *xhat = w->aux_l[l];
    size_t pix = (size_t)b * d->ih * d->iw;
    uint32_t r[4];
    dr_layer_region(w, l, l, d->ih, d->iw, r);
    for (uint32_t c = 0; c < d->oc; c++) {
        mu[c] = mean[c];
        inv[c] = 1.0f / sqrtf(var[c] + DR_BN_EPSILON);
        a[c] = inv[c] * gamma[c];
    }
    for (size_t p = 0; p < pix; p++)
        for (uint32_t c = 0; dr_region_has(r, d->ih, d->iw, p) && c < d->oc; c++) {
            size_t i = p * d->oc + c;
            float shift = beta[c] - mean[c] * a[c];
            w->pre[l][i] = in[i] * a[c] + shift;
            if (training) xhat[i] = (in[i] - mean[c]) * inv[c];
            w->act[l + 1][i] = d->act == DR_ACT_RELU && !(w->pre[l][i] > 0.0f) ? 0.0f : w->pre[l][i];
        }
}

void dr_bn_grad_sums(const dr_model_spec *m, uint32_t l, uint32_t b, dr_work *w, dr_acc *s1, dr_acc *s2)
{
    const dr_dense *d = &m->layer[l];
    size_t pix = (size_t)b * d->ih * d->iw;
    float *dy = w->dact[l + 1];
    uint32_t r[4];
    dr_layer_region(w, l, l, d->ih, d->iw, r);
    dr_layer_unactivate(m, l, b, w);
    for (size_t p = 0; p < pix; p++)
        for (uint32_t c = 0; dr_region_has(r, d->ih, d->iw, p) && c < d->oc; c++) {
            size_t i = p * d->oc + c;
            dr_acc_add(&s1[c], dy[i]);
            dr_acc_add_prod(&s2[c], dy[i], w->aux_l[l][i]);
        }
}

/* dx = a * ((dy - mean(dy)) - xhat * mean(dy * xhat)), a = gamma * inv;
 * the mixed step rounds the float32 dx to c (Keras 3 computes a float16 or
 * bfloat16 input's BatchNormalization in float32, then casts back). */
void dr_bn_backward(const dr_model_spec *m, uint32_t l, const float *params, uint32_t b, dr_work *w,
                    const float *mean_dy, const float *mean_dyxhat, bool input_grad, dr_dtype c)
{
    const dr_dense *d = &m->layer[l];
    const float *a = bn_mean(d, w, l) + 2 * (size_t)d->oc, *dy = w->dact[l + 1], *xhat = w->aux_l[l];
    size_t pix = (size_t)b * d->ih * d->iw;
    uint32_t r[4];
    (void)params;
    if (!input_grad) return;
    dr_layer_region(w, l, l, d->ih, d->iw, r);
    for (size_t p = 0; p < pix; p++)
        for (uint32_t ch = 0; dr_region_has(r, d->ih, d->iw, p) && ch < d->oc; ch++) {
            size_t i = p * d->oc + ch;
            float t = (dy[i] - mean_dy[ch]) - xhat[i] * mean_dyxhat[ch];
            w->dact[dr_layer_src(m, l)][i] += dr_round_to_dtype(a[ch] * t, c);
        }
}
