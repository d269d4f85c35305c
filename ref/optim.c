/* distref reference — optimizers, as TensorFlow's training kernels write them.
 *
 * Each statement is one rounded operation in a fixed order (-ffp-contract=off
 * keeps the compiler from fusing any), so the engine's own optimizer
 * (devices/cpu/openmp_backend.c), written the same way, gets the same bits. Adam's beta^t is dr_powi_f32, a pure
 * function of the step, so a resumed run needs no saved running product.
 */
#include "distref/model.h"
#include "distref/ref.h"
#include "distref/elem.h"

#include <math.h>

/* ApplyGradientDescent: var -= lr * grad. */
static void sgd(float lr, float *w, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) w[i] = w[i] - lr * g[i];
}

/* Keras SGD with momentum: v = momentum * v - lr * g; w += v, or with
 * Nesterov w += momentum * v - lr * g. */
static void momentum(const dr_optimizer *o, float lr, float *w, const float *g, float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = o->momentum * v[i] - lr * g[i];
        w[i] = o->nesterov ? w[i] + (o->momentum * v[i] - lr * g[i]) : w[i] + v[i];
    }
}

/* ApplyAdam: lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t);
 * m += (g - m) * (1 - beta1); v += (g^2 - v) * (1 - beta2);
 * var -= lr_t * m / (sqrt(v) + epsilon). */
static void adam(const dr_optimizer *o, float lr, uint64_t t, float *w, const float *g,
                 float *m, float *v, size_t n)
{
    unsigned step = t > 0xffffffffu ? 0xffffffffu : (unsigned)t;
    float b1t = dr_powi_f32(o->beta1, step), b2t = dr_powi_f32(o->beta2, step);
    float lr_t = lr * sqrtf(1.0f - b2t) / (1.0f - b1t);
    float one_b1 = 1.0f - o->beta1, one_b2 = 1.0f - o->beta2;
    for (size_t i = 0; i < n; i++) {
        m[i] = m[i] + (g[i] - m[i]) * one_b1;
        v[i] = v[i] + (g[i] * g[i] - v[i]) * one_b2;
        w[i] = w[i] - lr_t * m[i] / (sqrtf(v[i]) + o->epsilon);
    }
}

void dr_optimizer_apply(const dr_optimizer *o, uint64_t t, float *params, const float *grad,
                        float *slots, size_t n)
{
    dr_optimizer_apply_lr(o, dr_lr_at(&o->schedule, o->lr, t), t, params, grad, slots, n);   /* iterations t - 1 */
}

void dr_optimizer_apply_lr(const dr_optimizer *o, float lr, uint64_t t, float *params, const float *grad,
                           float *slots, size_t n)
{
    if (o->kind == DR_OPT_ADAM) adam(o, lr, t, params, grad, slots, slots + n, n);
    else if (o->momentum != 0.0f) momentum(o, lr, params, grad, slots, n);
    else sgd(lr, params, grad, n);
}

/* ---- clipping (distref/schedule.h): the rounded, aggregated gradient ---- */

/* The correctly rounded norm of g[0..n): sqrt of the exact sum of squares. */
static float norm_of(const float *g, size_t n, dr_acc *sum)
{
    dr_acc_add_dot(sum, g, g, n);
    return dr_acc_sqrt(sum);
}

/* Scale g by RN(c / norm) when norm > c (one rounding); a non-finite norm
 * gives NaN, as Keras's clip_by_global_norm does. */
static void scale_by(float *g, size_t n, float c, float norm)
{
    float scale = isfinite(norm) ? (norm > c ? c / norm : 1.0f) : NAN;
    if (scale == 1.0f) return;
    for (size_t i = 0; i < n; i++) g[i] = g[i] * scale;
}

void dr_optimizer_clip(const dr_optimizer *o, const dr_model_spec *m, float *g, size_t P)
{
    const dr_clip *c = &o->clip;
    if (c->clipvalue > 0.0f) {
        for (size_t i = 0; i < P; i++) g[i] = g[i] > c->clipvalue ? c->clipvalue : g[i] < -c->clipvalue ? -c->clipvalue : g[i];
    } else if (c->global_clipnorm > 0.0f) {
        dr_acc sum;
        dr_acc_init(&sum);
        scale_by(g, P, c->global_clipnorm, norm_of(g, P, &sum));
    } else if (c->clipnorm > 0.0f) {   /* each variable, kernel and bias, by its own norm */
        for (uint32_t l = 0; l < m->nlayers; l++) {
            size_t k = dr_model_kernel_offset(m, l), b = dr_model_bias_offset(m, l);
            size_t nk = dr_model_kernel_size(m, l), nb = dr_model_layer_params(m, l) - nk;
            dr_acc sk, sb;
            dr_acc_init(&sk);
            dr_acc_init(&sb);
            scale_by(g + k, nk, c->clipnorm, norm_of(g + k, nk, &sk));
            scale_by(g + b, nb, c->clipnorm, norm_of(g + b, nb, &sb));
        }
    }
}
