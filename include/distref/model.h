/* distref — models, losses, optimizers (the reference's math).
 *
 * A model is a stack of Dense layers. Parameters live in one flat float
 * array: for each layer its kernel (in x out, row-major) and then its bias
 * (out), so a checkpoint, a hash or an all-reduce sees one vector.
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

/* The regularization loss l2 * sum(w^2) over kernels, the dot product exact
 * and rounded once, then multiplied by l2. */
float dr_model_reg_loss(const dr_model_spec *m, const float *params);

/* d(reg loss)/dw = (2*l2) * w for kernel weights, 0 for biases. */
float dr_model_reg_grad(const dr_model_spec *m, const float *params, size_t p);

/* The kernels a model runs on. The reference's are plain exact loops
 * (dr_gemm_f32, dr_gemm_acc, dr_expf, dr_logf); the engine's exact kernels
 * return the same bits faster; its fast-mode kernels (sgemm, libm) do not. */
typedef struct dr_model_ops {
    const char *name;
    int   (*gemm_f32)(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                      const float *A, size_t lda, const float *B, size_t ldb,
                      const float *bias, float *C, size_t ldc);
    int   (*gemm_acc)(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                      const float *A, size_t lda, const float *B, size_t ldb, dr_acc *Cacc);
    float (*exp)(float x);
    float (*log)(float x);
} dr_model_ops;

/* The reference's kernels (a constant table). */
const dr_model_ops *dr_model_ops_ref(void);

/* Scratch for one batch of at most max_batch examples. */
typedef struct dr_work {
    uint32_t max_batch;
    float   *act[DR_MAX_LAYERS + 1];   /* act[0] = input copy, act[l+1] = output of layer l */
    float   *pre[DR_MAX_LAYERS];       /* pre-activations */
    float   *delta[2];                 /* backward ping-pong buffers */
    float   *aux;                      /* per-example scratch (softmax terms) */
} dr_work;

int  dr_work_init(dr_work *w, const dr_model_spec *m, uint32_t max_batch, dr_err *err);
void dr_work_free(dr_work *w);

/* Forward pass only: outputs (b x out of the last layer) into w->act[nlayers]. */
void dr_model_forward(const dr_model_spec *m, const dr_model_ops *ops, const float *params,
                      const float *x, uint32_t b, dr_work *w);

/* Batch of b examples (b may be 0): adds the exact sum of per-example losses
 * to *loss_sum and the exact sum of per-example gradients to grad_sum[0..P),
 * and the number of correct predictions (classification) to *correct.
 * labels for classification, targets for MSE. */
void dr_model_loss_grad(const dr_model_spec *m, const dr_model_ops *ops, const float *params, const float *x,
                        const uint8_t *labels, const float *targets, uint32_t b,
                        dr_work *w, dr_acc *loss_sum, dr_acc *grad_sum, uint64_t *correct);

/* The pieces of the two, for callers that compute a layer themselves (the
 * tpu strategy's spatial partitioning computes layer 0 tile by tile):
 * forward_layers runs layers first..L-1, layer `first` reading x when it is
 * 0 and w->act[first] otherwise; activate turns w->pre[l] into w->act[l+1].
 * backward takes the loss and gradients of the last forward pass over its
 * first n rows only: rows beyond n are static-shape padding, masked, and add
 * nothing (not even a signed zero). With kernel0 false, layer 0's kernel
 * gradient is left to the caller; the return value is then layer 0's
 * delta (n x out of layer 0), from which it is x^T delta. */
void dr_model_forward_layers(const dr_model_spec *m, const dr_model_ops *ops, const float *params,
                             const float *x, uint32_t first, uint32_t b, dr_work *w);
void dr_model_activate(const dr_model_spec *m, const dr_model_ops *ops, uint32_t l, uint32_t b, dr_work *w);
const float *dr_model_backward(const dr_model_spec *m, const dr_model_ops *ops, const float *params,
                               const float *x, const uint8_t *labels, const float *targets, uint32_t n,
                               dr_work *w, dr_acc *loss_sum, dr_acc *grad_sum, uint64_t *correct,
                               bool kernel0);

/* Per-example losses and argmax predictions of the last forward pass. */
void dr_model_example_losses(const dr_model_spec *m, const dr_model_ops *ops, const dr_work *w, uint32_t b,
                             const uint8_t *labels, const float *targets,
                             float *loss, uint32_t *pred);

/* ---- optimizers --------------------------------------------------------- */

typedef enum dr_optimizer_kind { DR_OPT_SGD = 0, DR_OPT_ADAM } dr_optimizer_kind;

typedef struct dr_optimizer {
    dr_optimizer_kind kind;
    float lr;
    float momentum;     /* SGD; 0 = plain SGD */
    bool  nesterov;     /* SGD */
    float beta1, beta2, epsilon;   /* Adam: TensorFlow's 0.9, 0.999, 1e-7 */
} dr_optimizer;

/* Slots per parameter: 0 (plain SGD), 1 (momentum), 2 (Adam m, v). */
int  dr_optimizer_num_slots(const dr_optimizer *o);

/* One update at 1-based step t, TensorFlow's kernels (ApplyGradientDescent,
 * ApplyMomentum, ApplyAdam) operation by operation, nothing contracted. */
void dr_optimizer_apply(const dr_optimizer *o, uint64_t t, float *params, const float *grad,
                        float *slots, size_t n);

#endif
