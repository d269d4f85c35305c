/* distref core — learning-rate schedules and gradient clipping, as data.
 *
 * A schedule is data plus a pure function of the step, defined once here
 * and read by the reference and by every engine variant alike (it reaches
 * them inside dr_optimizer, like the learning rate it replaces), so every
 * variant applies the same learning rate at every step.
 *
 * Keras 3's formulas, in Keras's order of float32 operations (measured
 * against TensorFlow 2.21: docs/TRAINING_FEATURES.md). Update k (1-based)
 * reads the schedule at optimizer.iterations = k - 1, as Keras does.
 * --warmup_steps=W: for step s < W the rate rises linearly from
 * --warmup_learning_rate w0 (default 0) to the target t (--learning_rate;
 * values[0] for piecewise), RN(RN(RN(t - w0) * RN(s / W)) + w0), then the
 * schedule runs on s - W (Keras's CosineDecay with initial_learning_rate w0
 * and warmup_target t; the same rule for every kind).
 * --staircase (exponential): the exponent is floor(s / decay_steps), as
 * ExponentialDecay(staircase=True). --cycle (polynomial): past decay_steps
 * the decay restarts over the next multiple of decay_steps, as
 * PolynomialDecay(cycle=True).
 *
 * Clipping (distref's semantics, docs/TRAINING_FEATURES.md) applies to the
 * aggregated gradient, after the one rounding and before the optimizer:
 * clipvalue (elementwise to [-v, v]), clipnorm (each variable, kernel or
 * bias, by its own norm) or global_clipnorm (all variables by one norm).
 * A norm is the correctly rounded sqrt of the exact sum of squares
 * (dr_acc_sqrt); the scale is RN(c / norm) when norm > c, else 1, one
 * rounding; each gradient element becomes RN(g * scale). 0 = off.
 */
#ifndef DISTREF_SCHEDULE_H
#define DISTREF_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/exact.h"

typedef enum dr_lr_kind {
    DR_LR_CONSTANT = 0, DR_LR_PIECEWISE, DR_LR_COSINE, DR_LR_POLYNOMIAL, DR_LR_EXPONENTIAL
} dr_lr_kind;

#define DR_LR_MAX_BOUNDARIES 8

typedef struct dr_lr_schedule {
    dr_lr_kind kind;
    uint32_t   warmup_steps;     /* 0 = none */
    uint32_t   decay_steps;      /* cosine, polynomial, exponential: > 0 */
    float      end_learning_rate;/* polynomial */
    float      power;            /* polynomial */
    float      alpha;            /* cosine: the floor, a fraction of the rate */
    float      decay_rate;       /* exponential */
    bool       staircase;        /* exponential: integer exponent floor(s / decay_steps) */
    bool       cycle;            /* polynomial: decay_steps * ceil(s / decay_steps) past the end */
    float      warmup_lr;        /* --warmup_learning_rate: where the warmup starts (0 = from 0) */
    uint32_t   nboundaries;      /* piecewise: values has nboundaries + 1 */
    uint32_t   boundaries[DR_LR_MAX_BOUNDARIES];
    float      values[DR_LR_MAX_BOUNDARIES + 1];
} dr_lr_schedule;

typedef struct dr_clip {
    float clipnorm, clipvalue, global_clipnorm;   /* 0 = off; at most one is set */
    bool  per_replica;   /* --clip_semantics=tensorflow: each replica's share is clipped before the
                          * all-reduce, as Keras 3 does under MirroredStrategy (deterministic for a
                          * given R, not replica-invariant); false: the aggregated gradient */
    bool  at_update;     /* per_replica under --gradient_accumulation_steps (set by the plan): a
                          * micro-step's share is not clipped; at the update each replica clips the
                          * mean of its own k micro-steps, before the all-reduce (Keras 3, measured:
                          * scripts/tf_accum_clip.py) */
} dr_clip;

/* The rate of update `update` (1-based), for base rate lr. */
float dr_lr_at(const dr_lr_schedule *s, float lr, uint64_t update);

/* "constant", "piecewise", ... ; NULL for an unknown kind. */
const char *dr_lr_kind_name(dr_lr_kind k);
int  dr_lr_kind_parse(const char *name, dr_lr_kind *out);

/* Checks a schedule's parameters (DR_EUSAGE naming the flag). */
int  dr_lr_schedule_check(const dr_lr_schedule *s, dr_err *err);

/* The correctly rounded (to nearest, ties to even) float square root of
 * the exact non-negative value a holds: +inf past the float range, NaN for
 * a NaN or a negative value. Exact comparisons against squared midpoints,
 * so no double rounding. */
float dr_acc_sqrt(const dr_acc *a);

#endif
