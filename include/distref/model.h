/* distref core — models and optimizers as data.
 *
 * A model is a stack of Dense layers. Parameters live in one flat float
 * array: for each layer its kernel (in x out, row-major) and then its bias
 * (out), so a checkpoint, a hash or an all-reduce sees one vector.
 *
 * This header is the model *as data*, shared by every layer: its layout,
 * initial values and optimizer settings. The math that trains it exists
 * twice, independently: the reference's (distref/ref.h, ref/model_math.c) and
 * the engine's (distref/backend.h, devices/).
 *
 * What a replica computes on its batch is *sums*, never means: the exact sum
 * of per-example losses and, per parameter, the exact sum of per-example
 * gradients, each kept in a dr_acc. Dividing by the global batch size and
 * scaling regularization by 1/R happen once, after the cross-replica
 * reduction (docs/SEMANTICS.md), which is what makes every replica count give
 * the same bits.
 */
#ifndef DISTREF_MODEL_H
#define DISTREF_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/exact.h"
#include "distref/schedule.h"

#define DR_MAX_LAYERS 4

typedef enum dr_activation { DR_ACT_LINEAR = 0, DR_ACT_RELU, DR_ACT_SOFTMAX } dr_activation;

typedef enum dr_loss_kind {
    DR_LOSS_XENT_LOGITS = 0,   /* sparse categorical cross-entropy, from_logits=True */
    DR_LOSS_XENT_PROBS,        /* the same on softmax probabilities (from_logits=False) */
    DR_LOSS_MSE                /* mean squared error over the outputs */
} dr_loss_kind;

typedef struct dr_dense {
    uint32_t      in, out;
    dr_activation act;
} dr_dense;

typedef struct dr_model_spec {
    uint32_t     nlayers;
    dr_dense     layer[DR_MAX_LAYERS];
    dr_loss_kind loss;
    float        l2;           /* L2 kernel regularization factor; 0 = none */
} dr_model_spec;

size_t dr_model_num_params(const dr_model_spec *m);
size_t dr_model_kernel_offset(const dr_model_spec *m, uint32_t layer);
size_t dr_model_bias_offset(const dr_model_spec *m, uint32_t layer);
/* Parameters of layer l: kernel then bias, contiguous. */
size_t dr_model_layer_params(const dr_model_spec *m, uint32_t layer);

/* Glorot-uniform kernels drawn from (seed, DR_STREAM_INIT + layer), zero biases. */
void dr_model_init(const dr_model_spec *m, uint64_t seed, float *params);

/* ---- optimizers --------------------------------------------------------- */

typedef enum dr_optimizer_kind { DR_OPT_SGD = 0, DR_OPT_ADAM } dr_optimizer_kind;

typedef struct dr_optimizer {
    dr_optimizer_kind kind;
    float lr;
    float momentum;     /* SGD; 0 = plain SGD */
    bool  nesterov;     /* SGD */
    float beta1, beta2, epsilon;   /* Adam: TensorFlow's 0.9, 0.999, 1e-7 */
    dr_lr_schedule schedule;       /* zero: constant lr (distref/schedule.h) */
    dr_clip        clip;           /* zero: no clipping */
    uint32_t       accumulation_steps;   /* --gradient_accumulation_steps k: an apply every k steps (0, 1: none) */
} dr_optimizer;

/* Keras 3's optimizer.iterations at the apply of 1-based step `step`: the
 * updates so far, step / k under gradient accumulation (Adam's bias
 * correction reads it; the learning-rate schedule reads the step itself,
 * docs/TRAINING_FEATURES.md). */
static inline uint64_t dr_optimizer_updates(const dr_optimizer *o, uint64_t step)
{
    return o->accumulation_steps > 1 ? step / o->accumulation_steps : step;
}

/* Slots per parameter: 0 (plain SGD), 1 (momentum), 2 (Adam m, v). */
int  dr_optimizer_num_slots(const dr_optimizer *o);

#endif
