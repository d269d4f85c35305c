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
