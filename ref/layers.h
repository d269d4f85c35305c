/* distref reference — the layers beyond Dense (internal to ref/): plain
 * loops, each reduction exact and rounded once (docs/MODELS.md).
 *
 * Every function works on one replica's batch of b examples in NHWC; the
 * input of layer l is x for l == 0, else w->act[l]; its output goes to
 * w->act[l + 1] (w->pre[l] before the activation). Backward functions read
 * d(loss)/d(output) in w->dact[l + 1] and ADD d(loss)/d(input) into
 * w->dact[l] (and, for Add, into the gradient of layer `from`'s output), so
 * that a residual's two paths meet; they add parameter gradients as exact
 * sums into grad (the replica's accumulators, m's layout).
 *
 * BatchNormalization is split: its statistics may span replicas (sync), so
 * ref/graph.c computes them and calls dr_bn_* with them.
 */
#ifndef DISTREF_REF_LAYERS_H
#define DISTREF_REF_LAYERS_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_ENGINE) || defined(DR_LAYER_HARNESS)
#error "ref/layers.h is internal to ref/ (docs/ARCHITECTURE.md)"
#endif

#include "distref/dropout_masks.h"
#include "distref/half.h"
#include "distref/ref.h"

#define DR_BN_MOMENTUM 0.99f
#define DR_BN_EPSILON  1e-3f
#define DR_STREAM_DROPOUT 0x6000u   /* + layer, + step << 24: dropout masks (core/rng.c's streams) */

/* What a layer needs beyond its input: training or inference, and for
 * Dropout the keys of the masks: (seed, step, global example id of row r =
 * ids[r], layer, unit), or with a masks file (--dropout_masks) its mask of
 * (step, layer, row row0 + r of the global batch, unit). */
typedef struct dr_layer_rt {
    bool            training;
    uint64_t        seed, step;
    const uint32_t *ids;
    const dr_dropout_masks *masks;   /* NULL: the RNG's */
    uint32_t        row0;            /* the global batch's row of the replica's row 0 */
    dr_dtype        c;     /* the mixed step's compute dtype (DR_DTYPE_F32: the float32 step) */
} dr_layer_rt;

/* Spatial partitioning (w->tile, docs/MODELS.md): whether layer l computes
 * only this core's tile, and the rows [r[0], r[1]) and columns [r[2], r[3])
 * of map k (H x W; 0 the input, l + 1 layer l's output) it computes at
 * layer l: its tile, or the whole map. */
bool dr_layer_tiled(const dr_work *w, uint32_t l);
void dr_layer_region(const dr_work *w, uint32_t l, uint32_t k, uint32_t H, uint32_t W, uint32_t r[4]);
/* Whether pixel px = (example * H + y) * W + x lies in r. */
static inline bool dr_region_has(const uint32_t r[4], uint32_t H, uint32_t W, size_t px)
{
    uint32_t x = (uint32_t)(px % W), y = (uint32_t)(px / W % H);
    return y >= r[0] && y < r[1] && x >= r[2] && x < r[3];
}
/* The ReLU's mask applied to d(loss)/d(output) of layer l (in place, over
 * its region): the backward does it first; a core does it before sending
 * its gradient's halo. */
void dr_layer_unactivate(const dr_model_spec *m, uint32_t l, uint32_t b, dr_work *w);

const float *dr_layer_input(const dr_model_spec *m, uint32_t l, const float *x, const dr_work *w);
/* Where layer l's input is: k = 0 the model's input, else layer k-1's output
 * (w->act[k], its gradient w->dact[k]). */
uint32_t dr_layer_src(const dr_model_spec *m, uint32_t l);

/* Forward of every kind but BatchNormalization in training. */
void dr_layer_forward(const dr_model_spec *m, const dr_model_ops *ops, uint32_t l, const float *params,
                      const float *x, uint32_t b, dr_work *w, const dr_layer_rt *rt);
/* Backward of every kind but BatchNormalization; `input_grad` false skips
 * d(loss)/d(input) (layer 0). c: each contribution to d(loss)/d(input)
 * rounded once to the compute dtype (the mixed step; DR_DTYPE_F32: float32). */
void dr_layer_backward(const dr_model_spec *m, const dr_model_ops *ops, uint32_t l, const float *params,
                       const float *x, uint32_t b, dr_work *w, dr_acc *grad, bool input_grad, dr_dtype c);
/* The mixed step: layer l's output and pre-activation (BatchNormalization's
 * float32 result) rounded to c in place, and d(loss)/d(output of l) (the sum
 * of its consumers' contributions, TensorFlow's AddN in c) rounded to c. */
void dr_layer_round_output(const dr_model_spec *m, uint32_t l, uint32_t b, dr_work *w, dr_dtype c);
void dr_layer_round_grad(const dr_model_spec *m, uint32_t l, uint32_t b, dr_work *w, dr_dtype c);
/* The mixed step's loss on an example's compute-dtype logits z (n of
 * them): float32 softmax cross-entropy, returned, and its delta
 * dz_c = RN_c(scale * (softmax - onehot) / G) (aux: n floats of scratch). */
float dr_mixed_example(const float *z, uint32_t n, uint8_t label, float scale, uint32_t G, dr_dtype c,
                       float *aux, float *dz);

/* BatchNormalization, channel c of layer l: the per-replica sums of x and
 * x^2 (exact, into s1[c], s2[c]), the centered squares around mean (two-pass,
 * into s2[c]), the normalization with given mean and variance, and the
 * backward sums sum(dy), sum(dy * xhat) (into s1, s2). */
void dr_bn_sums(const dr_model_spec *m, uint32_t l, const float *x, uint32_t b, const dr_work *w,
                dr_acc *s1, dr_acc *s2);
void dr_bn_centered(const dr_model_spec *m, uint32_t l, const float *x, uint32_t b, const dr_work *w,
                    const float *mean, dr_acc *s2);
void dr_bn_normalize(const dr_model_spec *m, uint32_t l, const float *params, const float *x, uint32_t b,
                     dr_work *w, const float *mean, const float *var, bool training);
void dr_bn_grad_sums(const dr_model_spec *m, uint32_t l, uint32_t b, dr_work *w, dr_acc *s1, dr_acc *s2);
/* Given the sums' means (over the statistics' count), adds d(loss)/d(x)
 * into w->dact[l]; the parameter gradients are the replica's own sums. */
void dr_bn_backward(const dr_model_spec *m, uint32_t l, const float *params, uint32_t b, dr_work *w,
                    const float *mean_dy, const float *mean_dyxhat, bool input_grad, dr_dtype c);

#endif
