/* distref devices — the engine's gradient clipping (devices/cpu/grad_clip.h).
 *
 * Exact numerics: a norm is the correctly rounded sqrt of the exact sum of
 * squares (core's dr_acc dot and dr_acc_sqrt); the scale is RN(c / norm)
 * when norm > c, else 1; each element RN(g * scale). Fast numerics: the
 * same with the sum of squares in float, parameter order, which moves the
 * norm by at most ~n ulps relative (n the variable's size; docs/
 * TRAINING_FEATURES.md) and the scale with it.
 */
#include "devices/cpu/grad_clip.h"
#include "distref/schedule.h"
#include "distref/cacc.h"
#include "distref/form.h"

#include <stdlib.h>

#include <math.h>

typedef struct span { size_t off, n; } span;

/* The sum of squares of a span: exact (into *acc) or float. */
static float sumsq_f32(const float *g, size_t n)
{
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) s = s + g[i] * g[i];
    return s;
}

static float norm_of(const float *g, const span *v, size_t nv, bool exact)
{
    if (exact) {
        dr_acc a;
        dr_acc_init(&a);
        for (size_t k = 0; k < nv; k++) dr_acc_add_dot(&a, g + v[k].off, g + v[k].off, v[k].n);
        return dr_acc_sqrt(&a);
    }
    float s = 0.0f;
    for (size_t k = 0; k < nv; k++) s = s + sumsq_f32(g + v[k].off, v[k].n);
    return sqrtf(s);
}

static void rescale(float *g, const span *v, size_t nv, float c, float norm)
{
    float scale = !isfinite(norm) ? NAN : norm > c ? c / norm : 1.0f;
    if (scale == 1.0f) return;
    for (size_t k = 0; k < nv; k++)
        for (size_t i = v[k].off; i < v[k].off + v[k].n; i++) g[i] = g[i] * scale;
}

void dr_engine_clip(const dr_clip *c, const dr_model_spec *m, bool exact, float *g, size_t P)
{
    span v[2 * DR_MAX_LAYERS] = { { 0, 0 } };
    size_t nv = 0;
    if (c->clipvalue > 0.0f) {
        const float hi = c->clipvalue, lo = -c->clipvalue;
        for (size_t i = 0; i < P; i++) g[i] = g[i] > hi ? hi : g[i] < lo ? lo : g[i];
        return;
    }
    for (uint32_t l = 0; l < m->nlayers; l++) {   /* the variables: kernel (BN: gamma), bias (beta) of each layer */
        size_t nk = dr_model_kernel_size(m, l);
        v[nv++] = (span){ dr_model_kernel_offset(m, l), nk };
        v[nv++] = (span){ dr_model_bias_offset(m, l), dr_model_layer_params(m, l) - nk };
    }
    if (c->global_clipnorm > 0.0f) {
        rescale(g, v, nv, c->global_clipnorm, norm_of(g, v, nv, exact));
    } else if (c->clipnorm > 0.0f) {
        for (size_t k = 0; k < nv; k++) rescale(g, &v[k], 1, c->clipnorm, norm_of(g, &v[k], 1, exact));
    }
}

/* Per replica (devices/cpu/grad_clip.h). */
int dr_engine_clip_share(const dr_clip *c, const dr_model_spec *m, dr_numerics num, void *grad, size_t P,
                         uint32_t den, dr_err *err)
{
    if (num == DR_NUMERICS_FAST) { dr_engine_clip(c, m, false, grad, P); return DR_OK; }
    if ((uint32_t)(float)den != den || den > (1u << 24))
        return dr_fail(err, DR_EUNSUPPORTED, "--clip_semantics=tensorflow: the step's denominator %u is not a "
                       "float (above 2^24)", den);
    const dr_form *f = dr_form_of(dr_grad_form(num));
    float *g = malloc(P * sizeof(float));
    if (!g) return dr_fail(err, DR_ENOMEM, "clip per replica: no memory for %zu floats", P);
    f->round(grad, P, den, g);
    dr_engine_clip(c, m, true, g, P);
    for (size_t i = 0; i < P; i++) {
        if (f->id == DR_FORM_CACC) {
            dr_cacc *a = (dr_cacc *)grad + i;
            dr_cacc_init(a);
            dr_cacc_add_prod(a, g[i], (float)den);
        } else {
            dr_acc *a = (dr_acc *)grad + i;
            dr_acc_init(a);
            dr_acc_add_prod(a, g[i], (float)den);
        }
    }
    free(g);
    return DR_OK;
}
