/* distref reference — Conv2D, pooling, Flatten, Dropout, Add and the pieces
 * of BatchNormalization, forward and backward (ref/layers.h). Plain loops:
 * a conv output is the exact dot product plus bias rounded once, a conv's
 * input gradient the exact dot product over every window that touched it,
 * the average pool's sum exact; parameter gradients are exact sums. */
#include "ref/layers.h"
#include "distref/elem.h"
#include "distref/rng.h"

#include <math.h>
#include <string.h>

uint32_t dr_layer_src(const dr_model_spec *m, uint32_t l)
{
    return m->layer[l].src ? m->layer[l].src : l;
}

const float *dr_layer_input(const dr_model_spec *m, uint32_t l, const float *x, const dr_work *w)
{
    uint32_t k = dr_layer_src(m, l);
    return k ? w->act[k] : x;
}

bool dr_layer_tiled(const dr_work *w, uint32_t l)
{
    return w->tile && l < w->tile->lp;
}

void dr_layer_region(const dr_work *w, uint32_t l, uint32_t k, uint32_t H, uint32_t W, uint32_t r[4])
{
    if (dr_layer_tiled(w, l)) { memcpy(r, w->tile->rect[k], 4 * sizeof *r); return; }
    r[0] = 0; r[1] = H; r[2] = 0; r[3] = W;
}

/* Layer l's output region (map l + 1). */
static void out_region(const dr_dense *d, const dr_work *w, uint32_t l, uint32_t r[4])
{
    dr_layer_region(w, l, l + 1, d->oh, d->ow, r);
}

static void activate(const dr_dense *d, uint32_t l, uint32_t b, dr_work *w)
{
    uint32_t r[4];
    size_t pix = (size_t)b * d->oh * d->ow;
    out_region(d, w, l, r);
    for (size_t p = 0; p < pix; p++) {
        if (!dr_region_has(r, d->oh, d->ow, p)) continue;
        for (size_t i = p * d->oc; i < (p + 1) * d->oc; i++)
            w->act[l + 1][i] = d->act == DR_ACT_RELU && !(w->pre[l][i] > 0.0f) ? 0.0f : w->pre[l][i];
    }
}

/* d(loss)/d(pre-activation) of layer l, in place in w->dact[l + 1]. */
void dr_layer_unactivate(const dr_model_spec *m, uint32_t l, uint32_t b, dr_work *w)
{
    const dr_dense *d = &m->layer[l];
    uint32_t r[4];
    size_t pix = (size_t)b * d->oh * d->ow;
    if (d->act != DR_ACT_RELU) return;
    out_region(d, w, l, r);
    for (size_t p = 0; p < pix; p++)
        for (size_t i = p * d->oc; dr_region_has(r, d->oh, d->ow, p) && i < (p + 1) * d->oc; i++)
            if (!(w->pre[l][i] > 0.0f)) w->dact[l + 1][i] = 0.0f;
}

/* ---- the mixed step's roundings ---------------------------------------- */

void dr_layer_round_output(const dr_model_spec *m, uint32_t l, uint32_t b, dr_work *w, dr_dtype c)
{
    size_t n = (size_t)b * m->layer[l].out;
    for (size_t i = 0; i < n; i++) {   /* RN_c commutes with the ReLU: it keeps signs and zeros */
        w->pre[l][i] = dr_round_to_dtype(w->pre[l][i], c);
        w->act[l + 1][i] = dr_round_to_dtype(w->act[l + 1][i], c);
    }
}

void dr_layer_round_grad(const dr_model_spec *m, uint32_t l, uint32_t b, dr_work *w, dr_dtype c)
{
    size_t n = (size_t)b * m->layer[l].out;
    for (size_t i = 0; i < n; i++) w->dact[l + 1][i] = dr_round_to_dtype(w->dact[l + 1][i], c);
}

float dr_mixed_example(const float *z, uint32_t n, uint8_t label, float scale, uint32_t G, dr_dtype c,
                       float *aux, float *dz)
{
    float mx = z[0], s;
    for (uint32_t i = 1; i < n; i++) if (z[i] > mx) mx = z[i];
    for (uint32_t i = 0; i < n; i++) aux[i] = dr_expf(z[i] - mx);
    s = dr_sum_f32(aux, n);
    for (uint32_t i = 0; i < n; i++) {
        dr_acc a;
        dr_acc_init(&a);
        dr_acc_add_prod(&a, aux[i] / s - (i == label ? 1.0f : 0.0f), scale);
        dz[i] = dr_acc_round_div_dtype(&a, G, c);
    }
    return dr_logf(s) - (z[label] - mx);
}

/* ---- Conv2D -------------------------------------------------------------- */

/* The mixed step (c not float32): the convolution rounded once to c, then
 * the bias added in c, rounded again (TensorFlow 2.21's Conv2D then
 * BiasAdd, measured by scripts/tf_mixed_conv.py). */
static void conv_forward(const dr_dense *d, const float *W, const float *bias, const float *x, uint32_t b, float *pre,
                         const uint32_t o[4], dr_dtype ct)
{
    size_t kc = (size_t)d->ic * d->oc;
    for (uint32_t n = 0; n < b; n++)
        for (uint32_t oy = o[0]; oy < o[1]; oy++)
            for (uint32_t ox = o[2]; ox < o[3]; ox++)
                for (uint32_t f = 0; f < d->oc; f++) {
                    dr_acc a;
                    dr_acc_init(&a);
                    for (uint32_t ky = 0; ky < d->ksize; ky++) {
                        int64_t iy = (int64_t)oy * d->stride + ky - d->pad_top;
                        if (iy < 0 || iy >= d->ih) continue;
                        for (uint32_t kx = 0; kx < d->ksize; kx++) {
                            int64_t ix = (int64_t)ox * d->stride + kx - d->pad_left;
                            const float *xp, *wp;
                            if (ix < 0 || ix >= d->iw) continue;
                            xp = x + (((size_t)n * d->ih + (size_t)iy) * d->iw + (size_t)ix) * d->ic;
                            wp = W + ((size_t)ky * d->ksize + kx) * kc + f;
                            for (uint32_t c = 0; c < d->ic; c++) dr_acc_add_prod(&a, xp[c], wp[(size_t)c * d->oc]);
                        }
                    }
                    if (ct != DR_DTYPE_F32) {   /* RN_c(RN_c(conv) + b): the sum of two c values is exact in an acc */
                        float v = dr_acc_round_div_dtype(&a, 1, ct);
                        dr_acc_init(&a);
                        dr_acc_add(&a, v);
                        dr_acc_add(&a, bias[f]);
                        pre[(((size_t)n * d->oh + oy) * d->ow + ox) * d->oc + f] = dr_acc_round_div_dtype(&a, 1, ct);
                        continue;
                    }
                    dr_acc_add(&a, bias[f]);
                    pre[(((size_t)n * d->oh + oy) * d->ow + ox) * d->oc + f] = dr_acc_round(&a);
                }
}

/* dW (exact sums of x * dz), db (sums of dz) over the outputs o and, per
 * input element of the region i, the exact dot product of dz with the kernel
 * taps that read it, rounded once (tiled: dz's halo came from the neighbours). */
static void conv_backward(const dr_dense *d, const float *W, const float *x, const float *dz, uint32_t b,
                          dr_acc *gW, dr_acc *gb, float *dx, const uint32_t o[4], const uint32_t in[4], dr_dtype ct)
{
    size_t kc = (size_t)d->ic * d->oc;
    for (uint32_t n = 0; n < b; n++)
        for (uint32_t oy = o[0]; oy < o[1]; oy++)
            for (uint32_t ox = o[2]; ox < o[3]; ox++) {
                const float *g = dz + (((size_t)n * d->oh + oy) * d->ow + ox) * d->oc;
                for (uint32_t f = 0; f < d->oc; f++) dr_acc_add(&gb[f], g[f]);
                for (uint32_t ky = 0; ky < d->ksize; ky++) {
                    int64_t iy = (int64_t)oy * d->stride + ky - d->pad_top;
                    if (iy < 0 || iy >= d->ih) continue;
                    for (uint32_t kx = 0; kx < d->ksize; kx++) {
                        int64_t ix = (int64_t)ox * d->stride + kx - d->pad_left;
                        const float *xp;
                        if (ix < 0 || ix >= d->iw) continue;
                        xp = x + (((size_t)n * d->ih + (size_t)iy) * d->iw + (size_t)ix) * d->ic;
                        for (uint32_t c = 0; c < d->ic; c++)
                            for (uint32_t f = 0; f < d->oc; f++)
                                dr_acc_add_prod(&gW[((size_t)ky * d->ksize + kx) * kc + (size_t)c * d->oc + f], xp[c], g[f]);
                    }
                }
            }
    if (!dx) return;
    for (uint32_t n = 0; n < b; n++)
        for (uint32_t iy = in[0]; iy < in[1]; iy++)
            for (uint32_t ix = in[2]; ix < in[3]; ix++)
                for (uint32_t c = 0; c < d->ic; c++) {
                    dr_acc a;
                    dr_acc_init(&a);
                    for (uint32_t ky = 0; ky < d->ksize; ky++) {
                        int64_t ty = (int64_t)iy + d->pad_top - ky, oy = ty / d->stride;
                        if (ty < 0 || ty % d->stride || oy >= d->oh) continue;
                        for (uint32_t kx = 0; kx < d->ksize; kx++) {
                            int64_t tx = (int64_t)ix + d->pad_left - kx, ox = tx / d->stride;
                            const float *g, *wp;
                            if (tx < 0 || tx % d->stride || ox >= d->ow) continue;
                            g = dz + (((size_t)n * d->oh + (size_t)oy) * d->ow + (size_t)ox) * d->oc;
                            wp = W + ((size_t)ky * d->ksize + kx) * kc + (size_t)c * d->oc;
                            for (uint32_t f = 0; f < d->oc; f++) dr_acc_add_prod(&a, g[f], wp[f]);
                        }
                    }
                    dx[(((size_t)n * d->ih + iy) * d->iw + ix) * d->ic + c] += dr_acc_round_div_dtype(&a, 1, ct);
                }
}

/* ---- pooling ------------------------------------------------------------ */

/* 2x2, stride 2: the window's first maximum in row-major order wins (and
 * takes the whole gradient), as TensorFlow 2.21's MaxPoolGrad (docs/MODELS.md). */
static void maxpool_forward(const dr_dense *d, const float *x, uint32_t b, float *out, uint32_t *win, const uint32_t o[4])
{
    for (uint32_t n = 0; n < b; n++)
        for (uint32_t oy = o[0]; oy < o[1]; oy++)
            for (uint32_t ox = o[2]; ox < o[3]; ox++)
                for (uint32_t c = 0; c < d->oc; c++) {
                    size_t best = (((size_t)n * d->ih + 2 * oy) * d->iw + 2 * ox) * d->ic + c;
                    for (uint32_t k = 1; k < 4; k++) {
                        size_t i = (((size_t)n * d->ih + 2 * oy + k / 2) * d->iw + 2 * ox + k % 2) * d->ic + c;
                        if (x[i] > x[best]) best = i;
                    }
                    size_t at = (((size_t)n * d->oh + oy) * d->ow + ox) * d->oc + c;
                    out[at] = x[best];
                    win[at] = (uint32_t)(best - (size_t)n * d->in);
                }
}

static void gap_forward(const dr_dense *d, const float *x, uint32_t b, float *out, dr_dtype ct)
{
    uint32_t hw = d->ih * d->iw;
    for (uint32_t n = 0; n < b; n++)
        for (uint32_t c = 0; c < d->ic; c++) {
            dr_acc a;
            dr_acc_init(&a);
            for (uint32_t p = 0; p < hw; p++) dr_acc_add(&a, x[((size_t)n * hw + p) * d->ic + c]);
            out[(size_t)n * d->ic + c] = dr_acc_round_div_dtype(&a, hw, ct);   /* measured: one rounding in c */
        }
}

/* The mixed step's Dense: RN_c(exact x_c W_c + b_c), as ref/mixed_step.c. */
static void dense_forward_mixed(const dr_dense *d, const float *x, const float *W, uint32_t b, float *pre, dr_dtype ct)
{
    for (uint32_t r = 0; r < b; r++)
        for (uint32_t j = 0; j < d->out; j++) {
            dr_acc a;
            dr_acc_init(&a);
            for (uint32_t i = 0; i < d->in; i++) dr_acc_add_prod(&a, x[(size_t)r * d->in + i], W[(size_t)i * d->out + j]);
            dr_acc_add(&a, W[(size_t)d->in * d->out + j]);
            pre[(size_t)r * d->out + j] = dr_acc_round_div_dtype(&a, 1, ct);
        }
}

/* The mixed step's Dense input gradient: RN_c(exact dz W_c^T), added. */
static void dense_dx_mixed(const dr_dense *d, const float *dz, const float *W, uint32_t b, float *dx, dr_dtype ct)
{
    for (uint32_t r = 0; r < b; r++)
        for (uint32_t i = 0; i < d->in; i++) {
            dr_acc a;
            dr_acc_init(&a);
            for (uint32_t j = 0; j < d->out; j++) dr_acc_add_prod(&a, dz[(size_t)r * d->out + j], W[(size_t)i * d->out + j]);
            dx[(size_t)r * d->in + i] += dr_acc_round_div_dtype(&a, 1, ct);
        }
}

/* ---- forward ------------------------------------------------------------ */

static void dropout_forward(const dr_dense *d, uint32_t l, const float *x, uint32_t b, dr_work *w, const dr_layer_rt *rt)
{
    size_t n = (size_t)b * d->out;
    /* the mixed step: x * RN_c(scale), rounded to c (measured for float16) */
    float scale = dr_round_to_dtype(1.0f / (1.0f - d->rate), rt->c), *mult = w->aux_l[l];
    if (!rt->training || d->rate == 0.0f) {
        memcpy(w->act[l + 1], x, n * sizeof *x);
        for (size_t i = 0; i < n; i++) mult[i] = 1.0f;
        return;
    }
    for (uint32_t r = 0; r < b; r++)
        for (uint32_t u = 0; u < d->out; u++) {
            uint64_t stream = DR_STREAM_DROPOUT + l + (rt->step << 24);
            bool keep = rt->masks ? dr_dropout_masks_keep(rt->masks, rt->step, l, rt->row0 + r, u)
                      : dr_rng_uniform(rt->seed, stream, (uint64_t)(rt->ids ? rt->ids[r] : r) * d->out + u) >= d->rate;
            size_t i = (size_t)r * d->out + u;
            mult[i] = keep ? scale : 0.0f;
            w->act[l + 1][i] = keep ? dr_round_to_dtype(x[i] * scale, rt->c) : 0.0f;
        }
}

void dr_layer_forward(const dr_model_spec *m, const dr_model_ops *ops, uint32_t l, const float *params,
                      const float *x, uint32_t b, dr_work *w, const dr_layer_rt *rt)
{
    const dr_dense *d = &m->layer[l];
    const float *in = dr_layer_input(m, l, x, w), *W = params + dr_model_kernel_offset(m, l);
    size_t n = (size_t)b * d->out;
    uint32_t o[4];
    out_region(d, w, l, o);
    switch (d->kind) {
    case DR_LAYER_DENSE:
        if (rt->c != DR_DTYPE_F32) { dense_forward_mixed(d, in, W, b, w->pre[l], rt->c); break; }
        if (b) ops->gemm_f32(DR_NO_TRANS, DR_NO_TRANS, b, d->out, d->in, in, d->in, W, d->out,
                             W + (size_t)d->in * d->out, w->pre[l], d->out);
        dr_model_activate(m, ops, l, b, w);
        return;
    case DR_LAYER_CONV2D:
        conv_forward(d, W, params + dr_model_bias_offset(m, l), in, b, w->pre[l], o, rt->c);
        break;
    case DR_LAYER_MAX_POOL2D: maxpool_forward(d, in, b, w->pre[l], w->idx[l], o); break;
    case DR_LAYER_GLOBAL_AVG_POOL2D: gap_forward(d, in, b, w->pre[l], rt->c); break;
    case DR_LAYER_FLATTEN: memcpy(w->pre[l], in, n * sizeof *in); break;
    case DR_LAYER_DROPOUT: dropout_forward(d, l, in, b, w, rt); memcpy(w->pre[l], w->act[l + 1], n * sizeof *in); return;
    case DR_LAYER_ADD: {
        const float *f = d->from < 0 ? x : w->act[d->from + 1];
        for (size_t i = 0; i < n; i++)
            if (dr_region_has(o, d->oh, d->ow, i / d->oc)) w->pre[l][i] = dr_round_to_dtype(in[i] + f[i], rt->c);
        break;
    }
    case DR_LAYER_BATCH_NORM: {   /* inference: the moving statistics */
        const float *s = params + dr_model_state_offset(m, l);
        dr_bn_normalize(m, l, params, x, b, w, s, s + d->oc, false);
        return;
    }
    }
    activate(d, l, b, w);
}

/* ---- backward ----------------------------------------------------------- */

void dr_layer_backward(const dr_model_spec *m, const dr_model_ops *ops, uint32_t l, const float *params,
                       const float *x, uint32_t b, dr_work *w, dr_acc *grad, bool input_grad, dr_dtype c)
{
    const dr_dense *d = &m->layer[l];
    const float *in = dr_layer_input(m, l, x, w), *W = params + dr_model_kernel_offset(m, l);
    float *dz = w->dact[l + 1], *dx = input_grad ? w->dact[dr_layer_src(m, l)] : NULL;
    size_t n = (size_t)b * d->out;
    uint32_t o[4], ir[4];
    out_region(d, w, l, o);
    dr_layer_region(w, l, dr_layer_src(m, l), d->ih, d->iw, ir);
    dr_layer_unactivate(m, l, b, w);
    switch (d->kind) {
    case DR_LAYER_DENSE: {
        dr_acc *gW = grad + dr_model_kernel_offset(m, l), *gb = gW + (size_t)d->in * d->out;
        float *tmp = w->delta[0];
        ops->gemm_acc(DR_TRANS, DR_NO_TRANS, d->in, d->out, b, in, d->in, dz, d->out, gW);
        for (uint32_t r = 0; r < b; r++)
            for (uint32_t j = 0; j < d->out; j++) dr_acc_add(&gb[j], dz[(size_t)r * d->out + j]);
        if (!dx || !b) return;
        if (c != DR_DTYPE_F32) { dense_dx_mixed(d, dz, W, b, dx, c); return; }
        ops->gemm_f32(DR_NO_TRANS, DR_TRANS, b, d->in, d->out, dz, d->out, W, d->out, NULL, tmp, d->in);
        for (size_t i = 0; i < (size_t)b * d->in; i++) dx[i] += tmp[i];
        return;
    }
    case DR_LAYER_CONV2D:
        conv_backward(d, W, in, dz, b, grad + dr_model_kernel_offset(m, l), grad + dr_model_bias_offset(m, l), dx, o, ir, c);
        return;
    case DR_LAYER_MAX_POOL2D:
        if (dx)
            for (size_t i = 0; i < n; i++)
                if (dr_region_has(o, d->oh, d->ow, i / d->oc)) dx[(i / d->out) * d->in + w->idx[l][i]] += dz[i];
        return;
    case DR_LAYER_GLOBAL_AVG_POOL2D: {
        uint32_t hw = d->ih * d->iw;
        if (dx)
            for (uint32_t r = 0; r < b; r++)
                for (uint32_t p = 0; p < hw; p++)
                    for (uint32_t ch = 0; ch < d->ic; ch++)
                        dx[((size_t)r * hw + p) * d->ic + ch] += dr_round_to_dtype(dz[(size_t)r * d->ic + ch] / (float)hw, c);
        return;
    }
    case DR_LAYER_FLATTEN:
        if (dx) for (size_t i = 0; i < n; i++) dx[i] += dz[i];
        return;
    case DR_LAYER_DROPOUT:
        if (dx)
            for (size_t i = 0; i < n; i++) dx[i] += w->aux_l[l][i] != 0.0f ? dr_round_to_dtype(dz[i] * w->aux_l[l][i], c) : 0.0f;
        return;
    case DR_LAYER_ADD:
        for (size_t i = 0; i < n; i++) {
            if (!dr_region_has(o, d->oh, d->ow, i / d->oc)) continue;
            if (dx) dx[i] += dz[i];
            if (d->from >= 0) w->dact[d->from + 1][i] += dz[i];
        }
        return;
    case DR_LAYER_BATCH_NORM:
        return;   /* ref/graph.c: dr_bn_backward */
    }
}
