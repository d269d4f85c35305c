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
