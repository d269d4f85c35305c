/* distref devices — the engine's gradient clipping (distref/schedule.h's
 * semantics), written independently of the reference's (ref/optim.c).
 * Used by the OpenMP backend's apply and, on the host after a download, by
 * the OpenCL backend's. Engine-private. */
#ifndef DISTREF_DEVICES_GRAD_CLIP_H
#define DISTREF_DEVICES_GRAD_CLIP_H

#include <stdbool.h>
#include <stddef.h>
#include "distref/model.h"

static inline bool dr_engine_clip_on(const dr_clip *c)
{
    return c->clipnorm > 0.0f || c->clipvalue > 0.0f || c->global_clipnorm > 0.0f;
}

/* Clips the rounded, aggregated gradient g (P floats in m's layout) in
 * place. exact: each norm is dr_acc_sqrt of the exact sum of squares (the
 * reference's bits); fast: float sums of squares in parameter order (per
 * variable, then over the variables in order) and sqrtf. */
void dr_engine_clip(const dr_clip *c, const dr_model_spec *m, bool exact, float *g, size_t P);

/* --clip_semantics=tensorflow (and the planted fault clip_before_aggregation):
 * a replica's share over den (exact accumulators or, fast, its float
 * gradient) clipped before the all-reduce, as Keras 3 does per replica:
 * exact, g = RN(share / den) clipped and put back as exactly g * den
 * (den must be a float: <= 2^24). */
#include "distref/backend.h"
int dr_engine_clip_share(const dr_clip *c, const dr_model_spec *m, dr_numerics num, void *grad, size_t P,
                         uint32_t den, dr_err *err);

#endif
