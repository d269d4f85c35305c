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
static void sgd(const dr_optimizer *o, float *w, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) w[i] = w[i] - o->lr * g[i];
}

/* Keras SGD with momentum: v = momentum * v - lr * g; w += v, or with
 * Nesterov w += momentum * v - lr * g. */
static void momentum(const dr_optimizer *o, float *w, const float *g, float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = o->momentum * v[i] - o->lr * g[i];
        w[i] = o->nesterov ? w[i] + (o->momentum * v[i] - o->lr * g[i]) : w[i] + v[i];
    }
}

/* ApplyAdam: lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t);
 * m += (g - m) * (1 - beta1); v += (g^2 - v) * (1 - beta2);
 * var -= lr_t * m / (sqrt(v) + epsilon). */
static void adam(const dr_optimizer *o, uint64_t t, float *w, const float *g,
                 float *m, float *v, size_t n)
{
    unsigned step = t > 0xffffffffu ? 0xffffffffu : (unsigned)t;
    float b1t = dr_powi_f32(o->beta1, step), b2t = dr_powi_f32(o->beta2, step);
    float lr_t = o->lr * sqrtf(1.0f - b2t) / (1.0f - b1t);
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
    if (o->kind == DR_OPT_ADAM) adam(o, t, params, grad, slots, slots + n, n);
    else if (o->momentum != 0.0f) momentum(o, params, grad, slots, n);
    else sgd(o, params, grad, n);
}
