/* distref — mixed precision's loss scale: Keras 3's LossScaleOptimizer.
 *
 * Measured in TensorFlow 2.21 / Keras 3.15 (scripts/tf_mixed_probe.py,
 * docs/TRAINING_FEATURES.md "Mixed precision"):
 *   - dynamic: the loss is multiplied by `scale` (float32, initial 2^15)
 *     before the backward pass; the gradients are divided by it (float32
 *     division, one rounding) before the inner optimizer applies them;
 *   - a step whose gradient has any non-finite element is skipped: weights,
 *     slots and the inner optimizer's iterations do not move; the scale
 *     halves and the growth counter resets to 0;
 *   - a finite step applies with the current scale, then the counter
 *     advances; when it was growth_steps - 1 the scale doubles and the
 *     counter resets (so the scale grows after growth_steps finite steps in
 *     a row; default 2000);
 *   - fixed (`--loss_scale=<x>`, Keras's inner optimizer's
 *     loss_scale_factor): scale and divide by x, never skip, never change.
 * The skip decision is one value for the whole step: in distref an exact
 * OR over every replica's "any non-finite" (dr_loss_scale_step's finite
 * argument), so every replica takes it.
 */
#ifndef DISTREF_LOSS_SCALE_H
#define DISTREF_LOSS_SCALE_H

#include <stdbool.h>
#include <stdint.h>

#include "distref/exact.h"
#include "distref/half.h"
#include "distref/model.h"

/* --dtype_policy (or Model Garden's --dtype), --loss_scale, --mixed_reduction:
 * the run's mixed-precision settings (docs/TRAINING_FEATURES.md). */
typedef enum dr_loss_scale_kind {
    DR_LOSS_SCALE_NONE = 0,     /* float32, and mixed_bfloat16 unless --loss_scale is given */
    DR_LOSS_SCALE_DYNAMIC = 1,  /* mixed_float16's default, as Model Garden's */
    DR_LOSS_SCALE_FIXED = 2
} dr_loss_scale_kind;

typedef struct dr_mixed_config {
    dr_dtype           compute;          /* DR_DTYPE_F32: the float32 policy */
    dr_loss_scale_kind loss_scale;
    float              fixed_scale;      /* DR_LOSS_SCALE_FIXED's factor (> 0, finite); DYNAMIC's
                                          * initial scale (--loss_scale=dynamic:X), 0: 2^15 */
    bool               tf_reduction;     /* --mixed_reduction=tensorflow: each replica's partial
                                          * gradient rounded to the compute dtype before the sum */
    uint32_t           growth_steps;     /* --dynamic_growth_steps (Keras's dynamic_growth_steps);
                                          * 0: DR_LOSS_SCALE_GROWTH_STEPS */
} dr_mixed_config;

#define DR_LOSS_SCALE_INITIAL       32768.0f
#define DR_LOSS_SCALE_GROWTH_STEPS  2000u

typedef struct dr_loss_scale {
    bool     dynamic;       /* false: a fixed factor */
    float    scale;         /* the factor the loss is multiplied by this step */
    uint32_t counter;       /* finite steps since the scale last changed (Keras' step_counter) */
    uint32_t growth_steps;  /* dynamic_growth_steps */
    uint64_t skipped;       /* steps skipped so far (non-finite gradients) */
} dr_loss_scale;

/* Dynamic with Keras 3's defaults, or fixed at `fixed` (> 0, finite). */
void dr_loss_scale_init(dr_loss_scale *ls, bool dynamic, float fixed);

/* The run's loss scale from its --dtype_policy/--loss_scale settings:
 * dr_loss_scale_init, dynamic's initial scale (dynamic:X) and growth steps
 * (--dynamic_growth_steps). Every variant starts its state from this. */
void dr_loss_scale_from_config(dr_loss_scale *ls, const dr_mixed_config *mc);

/* After a step's gradient was checked: true when the step applies (with
 * ls->scale as it was before this call: the caller unscales first), false
 * when it is skipped. Updates the scale, counter and skip count. */
bool dr_loss_scale_step(dr_loss_scale *ls, bool finite);

/* Step 3 of the mixed step (docs/TRAINING_FEATURES.md): n gradient
 * elements from R replicas' exact partials parts[r][0..n), each over the
 * common divisor d, into out (float32 containers):
 *   exact (tf_reduction false): the exact global sum / d rounded once to t,
 *     so any split of the same terms over any R gives the same bits
 *     (one_device's: TensorFlow at R = 1);
 *   tensorflow: each replica's partial / d rounded to t first, the R
 *     rounded values summed exactly and rounded once to float32
 *     (deterministic for a given R; TensorFlow sums them in float32).
 * Returns true when every element is finite: the step's one skip decision,
 * taken over all replicas' values at once. */
bool dr_mixed_reduce(const dr_acc *const *parts, uint32_t R, size_t n, uint32_t d, dr_dtype t,
                     bool tf_reduction, float *out);

/* --l2 under a mixed policy (docs/TRAINING_FEATURES.md, "L2 under a mixed
 * policy"): the gradient of scale * (1/R) * l2 * sum(w^2) in TensorFlow's
 * tape order, float32: ((scale * RN(1/R)) * l2) * (2w). */
float dr_mixed_l2_term(float scale, uint32_t R, float l2, float w);

/* g[p] += dr_mixed_l2_term(scale, R, l2, w[p]) in float32 on every
 * regularized kernel element of m; true when those sums are all finite. */
bool dr_mixed_add_l2(const dr_model_spec *m, const float *w, float scale, uint32_t R, float *g);

/* dr_mixed_reduce (d = 1) with the L2 term: exact adds it once (R = 1 form,
 * w[0]'s weights) to the reduced, t-rounded gradient; tensorflow adds each
 * replica's 1/R term (w[r]) to its t-rounded partial before the exact sum,
 * rounded once to float32. With l2 == 0, dr_mixed_reduce. */
bool dr_mixed_reduce_l2(const dr_acc *const *parts, uint32_t R, size_t n, dr_dtype t, bool tf_reduction,
                        const dr_model_spec *m, const float *const *w, float scale, float *out);

/* g / scale, as Keras' ops.divide(g, scale) in float32. */
float dr_loss_scale_unscale(const dr_loss_scale *ls, float g);

#endif
