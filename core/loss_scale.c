/* distref — Keras 3's LossScaleOptimizer state machine (distref/loss_scale.h). */
#include "distref/loss_scale.h"

#include <string.h>

void dr_loss_scale_init(dr_loss_scale *ls, bool dynamic, float fixed)
{
    memset(ls, 0, sizeof *ls);
    ls->dynamic = dynamic;
    ls->scale = dynamic ? DR_LOSS_SCALE_INITIAL : fixed;
    ls->growth_steps = DR_LOSS_SCALE_GROWTH_STEPS;
}

void dr_loss_scale_from_config(dr_loss_scale *ls, const dr_mixed_config *mc)
{
    dr_loss_scale_init(ls, mc->loss_scale == DR_LOSS_SCALE_DYNAMIC,
                       mc->loss_scale == DR_LOSS_SCALE_FIXED ? mc->fixed_scale : 1.0f);
    if (mc->loss_scale == DR_LOSS_SCALE_DYNAMIC && mc->fixed_scale > 0) ls->scale = mc->fixed_scale;
    if (mc->growth_steps) ls->growth_steps = mc->growth_steps;
}

bool dr_loss_scale_step(dr_loss_scale *ls, bool finite)
{
    if (!ls->dynamic) return true;            /* loss_scale_factor: no check, no skip */
    if (!finite) {
        ls->counter = 0;
        ls->scale *= 0.5f;
        ls->skipped++;
        return false;
    }
    if (ls->counter + 1u >= ls->growth_steps) {   /* counter == growth_steps - 1: upscale */
        ls->counter = 0;
        ls->scale *= 2.0f;
    } else {
        ls->counter++;
    }
    return true;
}

float dr_loss_scale_unscale(const dr_loss_scale *ls, float g)
{
    return g / ls->scale;
}

bool dr_mixed_reduce(const dr_acc *const *parts, uint32_t R, size_t n, uint32_t d, dr_dtype t,
                     bool tf_reduction, float *out)
{
    bool finite = true;
    for (size_t i = 0; i < n; i++) {
        dr_acc s;
        dr_acc_init(&s);
        if (tf_reduction) {
            for (uint32_t r = 0; r < R; r++) dr_acc_add(&s, dr_acc_round_div_dtype(&parts[r][i], d, t));
            out[i] = dr_acc_round(&s);
        } else {
            for (uint32_t r = 0; r < R; r++) dr_acc_merge(&s, &parts[r][i]);
            out[i] = dr_acc_round_div_dtype(&s, d, t);
        }
        finite &= out[i] - out[i] == 0.0f;   /* false for inf and NaN */
    }
    return finite;
}

float dr_mixed_l2_term(float scale, uint32_t R, float l2, float w)
{
    float q = (scale * (1.0f / (float)R)) * l2;   /* the tape's order: scale, 1/R, l2, then d(w^2) = 2w */
    return q * (2.0f * w);
}

bool dr_mixed_add_l2(const dr_model_spec *m, const float *w, float scale, uint32_t R, float *g)
{
    bool finite = true;
    for (uint32_t l = 0; m->l2 != 0.0f && l < m->nlayers; l++) {
        size_t off = dr_model_kernel_offset(m, l), n = dr_model_kernel_size(m, l);
        if (!dr_layer_regularized(&m->layer[l])) continue;
        for (size_t p = off; p < off + n; p++) {
            g[p] = g[p] + dr_mixed_l2_term(scale, R, m->l2, w[p]);
            finite &= g[p] - g[p] == 0.0f;
        }
    }
    return finite;
}

static bool regularized(const dr_model_spec *m, size_t p)
{
    for (uint32_t l = 0; l < m->nlayers; l++) {
        size_t off = dr_model_kernel_offset(m, l);
        if (p >= off && p < off + dr_model_kernel_size(m, l))
            return dr_layer_regularized(&m->layer[l]);
    }
    return false;
}

bool dr_mixed_reduce_l2(const dr_acc *const *parts, uint32_t R, size_t n, dr_dtype t, bool tf_reduction,
                        const dr_model_spec *m, const float *const *w, float scale, float *out)
{
    bool finite = true;
    if (m->l2 == 0.0f) return dr_mixed_reduce(parts, R, n, 1, t, tf_reduction, out);
    if (!tf_reduction) {   /* exact: the global data gradient rounded once to t, then its L2 term, once */
        finite = dr_mixed_reduce(parts, R, n, 1, t, false, out);
        return dr_mixed_add_l2(m, w[0], scale, 1, out) && finite;
    }
    for (size_t i = 0; i < n; i++) {   /* tensorflow: each replica's t-rounded partial plus its 1/R L2 term */
        bool reg = regularized(m, i);
        dr_acc s;
        dr_acc_init(&s);
        for (uint32_t r = 0; r < R; r++) {
            float v = dr_acc_round_div_dtype(&parts[r][i], 1, t);
            if (reg) v = v + dr_mixed_l2_term(scale, R, m->l2, w[r][i]);
            dr_acc_add(&s, v);
        }
        out[i] = dr_acc_round(&s);
        finite &= out[i] - out[i] == 0.0f;
    }
    return finite;
}
