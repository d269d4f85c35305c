/* distref reference — the oracle's public entry points.
 *
 * ref/ is the deliberately simple reference: every strategy and device type
 * emulated in one process with plain loops over the core's exact
 * primitives. It depends on the core only; the engine (strategies/,
 * devices/) never includes this header, so that conformance compares two
 * implementations (docs/ARCHITECTURE.md). Tests, the harness and the
 * conformance suites may use it.
 */
#ifndef DISTREF_REF_H
#define DISTREF_REF_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_ENGINE)
#error "distref/ref.h is the reference's: core/, strategies/ and devices/ may not include it (docs/ARCHITECTURE.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/exact.h"
#include "distref/model.h"
#include "distref/strategy.h"

/* ---- the model's math (ref/model_math.c, ref/optim.c) ------------------------ */

/* The regularization loss l2 * sum(w^2) over kernels, the dot product exact
 * and rounded once, then multiplied by l2. */
float dr_model_reg_loss(const dr_model_spec *m, const float *params);

/* d(reg loss)/dw = (2*l2) * w for kernel weights, 0 for biases. */
float dr_model_reg_grad(const dr_model_spec *m, const float *params, size_t p);

/* The kernels a model runs on. The reference's are plain exact loops
 * (dr_gemm_f32, dr_gemm_acc, dr_expf, dr_logf). The engine does not use
 * this table: it has its own kernels behind distref/backend.h. */
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
    /* models beyond Dense (ref/layers.h); NULL for a Dense MLP */
    float   *aux_l[DR_MAX_LAYERS];     /* per layer: BatchNormalization's xhat and statistics,
                                        * Dropout's multipliers */
    uint32_t *idx[DR_MAX_LAYERS];      /* MaxPooling2D: each output's winner */
    float   *dact[DR_MAX_LAYERS + 1];  /* backward: d(loss)/d(input of layer l); [nlayers]: of the output */
    const dr_tile *tile;               /* spatial partitioning: this core's tile of each map (layers
                                        * before tile->lp compute only it); NULL: whole maps */
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

/* The loss of the last forward pass's first n rows, added to *loss_sum, and
 * d(loss)/d(last layer's pre-activation) into dz (n x out). */
void dr_model_loss_delta(const dr_model_spec *m, const dr_model_ops *ops, const dr_work *w, uint32_t n,
                         const uint8_t *labels, const float *targets, dr_acc *loss_sum, float *dz, uint64_t *correct);

/* Per-example losses and argmax predictions of the last forward pass. */
void dr_model_example_losses(const dr_model_spec *m, const dr_model_ops *ops, const dr_work *w, uint32_t b,
                             const uint8_t *labels, const float *targets,
                             float *loss, uint32_t *pred);

/* One update at 1-based step t, TensorFlow's kernels (ApplyGradientDescent,
 * ApplyMomentum, ApplyAdam) operation by operation, nothing contracted. */
void dr_optimizer_apply(const dr_optimizer *o, uint64_t t, float *params, const float *grad,
                        float *slots, size_t n);

/* The same at rate lr (a schedule's value, read by the caller). */
void dr_optimizer_apply_lr(const dr_optimizer *o, float lr, uint64_t t, float *params, const float *grad,
                           float *slots, size_t n);

/* o->clip on the rounded, aggregated gradient g (P floats, m's layout),
 * before the optimizer: distref/schedule.h's semantics, plain loops. */
void dr_optimizer_clip(const dr_optimizer *o, const dr_model_spec *m, float *g, size_t P);

/* ---- cross-device all-reduce (ref/cross_device.c) ---------------------- */

/* Sums the replicas' accumulator arrays acc[r][0..n) in place, exactly, with
 * the strategy's cross-device op: every replica ends with the total. Tensors
 * are the consecutive pieces of length tensor_len[0..ntensors) (for
 * num_packs == 0 each is its own pack; otherwise the concatenation is split
 * into num_packs packs as TensorFlow's _ConcatAndSplitPacker does). Bytes
 * move between devices in dr_acc wire format and are counted. */
int  dr_all_reduce(dr_strategy *s, dr_acc *const *acc, size_t n,
                   const size_t *tensor_len, uint32_t ntensors, dr_err *err);

/* Counts on the replicas' devices the bytes a ring all-reduce of one pack
 * of n accumulators moves (dr_all_reduce's ring, DR_ACC_BYTES an element),
 * moving nothing: for sums the reference merges in memory (ref/graph.c's
 * batch-norm statistics), counted as the engine's comm counts them. */
void dr_count_ring(dr_strategy *s, size_t n);

/* Sums the replicas' arrays into dst (length n) on device dst_dev: the
 * reduction to a variable device of central_storage. */
int  dr_reduce_to_device(dr_strategy *s, dr_acc *const *acc, size_t n,
                         uint32_t dst_dev, dr_acc *dst, dr_err *err);

/* ---- the reference as a variant (ref/variant.c) ------------------------ */

#include "distref/variant.h"
#include "distref/train.h"

/* --variant=ref: every strategy, exact numerics. */
extern const dr_variant dr_variant_ref;

/* evaluate's and predict's forward pass (ref/evaluate.c), dr_variant_ref's
 * infer: behind dr_run_evaluate and dr_run_predict (distref/harness.h). */
extern const dr_infer_ops dr_ref_infer_ops;

#endif
