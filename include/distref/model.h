/* distref core — models and optimizers as data.
 *
 * A model is a list of layers, each of a kind (dr_layer_kind): Dense, and
 * since issue 31 Conv2D, MaxPooling2D, GlobalAveragePooling2D, Flatten,
 * BatchNormalization, Dropout and a residual Add. Activations are NHWC as in
 * Keras; a layer's in/out are its flat per-example sizes (h*w*c), derived
 * with every other shape by dr_model_derive (core/model_spec.c), the one
 * place that knows shapes and offsets.
 *
 * Parameters live in one flat float array: first the trainable tensors,
 * layer by layer (Dense: kernel in x out row-major, then bias out; Conv2D:
 * kernel kh x kw x cin x cout as Keras, then bias; BatchNormalization: gamma,
 * beta), then the non-trainable state: each BatchNormalization's moving mean
 * and moving variance, layer by layer (docs/MODELS.md). A Dense MLP has no
 * state and exactly its old layout. The state's gradient is always zero, so
 * every optimizer leaves it bit-unchanged; the training step writes it.
 * A checkpoint, a hash or an all-reduce sees one vector.
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

#define DR_MAX_LAYERS 40

typedef enum dr_activation { DR_ACT_LINEAR = 0, DR_ACT_RELU, DR_ACT_SOFTMAX } dr_activation;

typedef enum dr_loss_kind {
    DR_LOSS_XENT_LOGITS = 0,   /* sparse categorical cross-entropy, from_logits=True */
    DR_LOSS_XENT_PROBS,        /* the same on softmax probabilities (from_logits=False) */
    DR_LOSS_MSE                /* mean squared error over the outputs */
} dr_loss_kind;

typedef enum dr_layer_kind {
    DR_LAYER_DENSE = 0,        /* zero: the specs written before kinds existed stay Dense */
    DR_LAYER_CONV2D,
    DR_LAYER_MAX_POOL2D,       /* 2x2, stride 2, valid */
    DR_LAYER_GLOBAL_AVG_POOL2D,
    DR_LAYER_FLATTEN,
    DR_LAYER_BATCH_NORM,       /* over the channels; momentum 0.99, epsilon 1e-3 */
    DR_LAYER_DROPOUT,
    DR_LAYER_ADD               /* residual: this layer's input + the output of layer `from` */
} dr_layer_kind;

/* One layer. Written by hand: kind, act and the kind's settings (units in
 * `out` for Dense, filters/ksize/stride/same for Conv2D, rate for Dropout,
 * from for Add); the shapes are derived (dr_model_derive). For a Dense MLP
 * with a flat input, {in, out, act} is the whole spec, as before. */
typedef struct dr_dense {
    uint32_t      in, out;     /* flat per-example sizes (Dense: units) */
    dr_activation act;         /* Dense, Conv2D: linear or relu (softmax: Dense) */
    dr_layer_kind kind;
    uint32_t      filters, ksize, stride;   /* Conv2D */
    bool          same;        /* Conv2D padding: true = "same", false = "valid" */
    float         rate;        /* Dropout, in [0, 1) */
    int32_t       from;        /* Add: the layer whose output is added; -1 = the model's input */
    uint32_t      src;         /* the layer's input: 0 = the previous layer's output, k + 1 = layer k's
                                * (a branch: a ResNet's projection shortcut) */
    /* derived: the input and output feature maps (h, w, c; 1 x 1 x n when flat) */
    uint32_t      ih, iw, ic, oh, ow, oc;
    uint32_t      pad_top, pad_left;        /* Conv2D "same" (TensorFlow's: the extra one bottom/right) */
} dr_dense;
typedef dr_dense dr_layer;

typedef struct dr_model_spec {
    uint32_t     nlayers;
    dr_dense     layer[DR_MAX_LAYERS];
    dr_loss_kind loss;
    float        l2;           /* L2 kernel regularization factor; 0 = none */
    uint32_t     in_h, in_w, in_c;   /* an image input (NHWC); 0 = a flat input of layer[0].in */
} dr_model_spec;

const char *dr_layer_kind_name(dr_layer_kind k);

/* Derives every layer's shapes from the input and the settings, checking
 * that they fit; DR_EUSAGE naming the layer (index and kind) and the
 * dimension otherwise. Idempotent; a Dense MLP is left as written. */
int  dr_model_derive(dr_model_spec *m, dr_err *err);

/* Where two derived models first differ, for a refusal's message: "layer
 * 0 (conv2d): 4 filters here, dense 784 -> 128 in the checkpoint"-style
 * text naming the layer and the dimension, a the model here and b the
 * other (`other` names it). Writes "" and returns false when they are the
 * same architecture. */
bool dr_model_first_difference(const dr_model_spec *a, const dr_model_spec *b, const char *other, char *buf,
                               size_t cap);

/* Whether --l2 regularizes the layer's kernel: Keras's kernel_regularizer,
 * Dense and Conv2D (never BatchNormalization's gamma). The one rule every
 * step's L2 term and loss reads. */
bool dr_layer_regularized(const dr_dense *d);

/* Every layer Dense: the engine's models. */
bool dr_model_is_dense(const dr_model_spec *m);
/* The kinds the model uses: bit 1 << dr_layer_kind. A backend's supports()
 * refuses the kinds it has no kernels for, naming the first. */
uint32_t dr_model_layer_kinds(const dr_model_spec *m);
/* The lowest kind in a mask, for the refusal's message. */
const char *dr_layer_kinds_first(uint32_t kinds);
/* The first layer that is not Dense, or nlayers. */
uint32_t dr_model_first_non_dense(const dr_model_spec *m);

/* Trainable parameters (the gradient's length) and the state after them. */
size_t dr_model_num_trainable(const dr_model_spec *m);
size_t dr_model_num_state(const dr_model_spec *m);
/* Layer l's state (BatchNormalization: moving mean, then moving variance, oc each). */
size_t dr_model_state_offset(const dr_model_spec *m, uint32_t layer);
/* Elements of layer l's kernel (Dense, Conv2D; BatchNormalization: gamma): the L2 range. */
size_t dr_model_kernel_size(const dr_model_spec *m, uint32_t layer);
/* The tensors in layout order (trainable ones, then the state's): their
 * count, and their lengths into len[0..max). */
uint32_t dr_model_tensors(const dr_model_spec *m, size_t *len, uint32_t max);

/* All parameters: trainable, then state (= trainable for a Dense MLP). */
size_t dr_model_num_params(const dr_model_spec *m);
size_t dr_model_kernel_offset(const dr_model_spec *m, uint32_t layer);
size_t dr_model_bias_offset(const dr_model_spec *m, uint32_t layer);
/* Trainable parameters of layer l: kernel then bias (BatchNormalization:
 * gamma then beta), contiguous from kernel_offset; 0 for kinds without. */
size_t dr_model_layer_params(const dr_model_spec *m, uint32_t layer);

/* Glorot-uniform kernels drawn from (seed, DR_STREAM_INIT + layer), zero
 * biases (Conv2D: fans kh*kw*cin and kh*kw*cout, as Keras); BatchNormalization
 * gamma 1, beta 0, moving mean 0, moving variance 1. */
void dr_model_init(const dr_model_spec *m, uint64_t seed, float *params);

/* ---- spatial partitioning (the tpu strategy's --input_partition_dims) ----
 *
 * A replica's ph x pw cores each hold a tile of every feature map: core c
 * (row-major: c / pw, c % pw) owns rows [i*H/ph, (i+1)*H/ph) and columns
 * [j*W/pw, (j+1)*W/pw) of an H x W map. Layers [0, lp) run on the tiles
 * (Conv2D with halos from the neighbouring cores, MaxPooling2D when its
 * windows do not straddle a cut, BatchNormalization with the statistics
 * combined across the cores, Add); at layer lp, the first that cannot run on
 * the tiles (GlobalAveragePooling2D, Flatten, Dense, or a map that does not
 * split evenly), the maps the rest reads are gathered onto core 0, which runs
 * the rest (docs/MODELS.md). */
#define DR_MAX_TILES 16

typedef struct dr_tile {
    uint32_t lp;                            /* layers [0, lp) run on the tile; from lp on, whole maps on core 0 */
    uint32_t rect[DR_MAX_LAYERS + 1][4];    /* map k (0: the input, l + 1: layer l's output): rows
                                             * [rect[0], rect[1]), columns [rect[2], rect[3]) */
} dr_tile;

typedef struct dr_spatial_plan {
    uint32_t ph, pw, tiles, lp;
    bool     gathered[DR_MAX_LAYERS + 1];   /* maps read from layer lp on: gathered onto core 0 */
    dr_tile  tile[DR_MAX_TILES];
    char     stop[200];                     /* why the tiles end at layer lp */
} dr_spatial_plan;

/* The plan for ph x pw tiles of m's feature maps. DR_EUSAGE naming the
 * layer (index and kind) and the dimension when layer 0 cannot run on the
 * tiles (nothing would be partitioned). core/spatial_plan.c */
int dr_spatial_plan_make(const dr_model_spec *m, uint32_t ph, uint32_t pw, dr_spatial_plan *p, dr_err *err);
/* Map k's height, width and channels (k = 0: the input). */
void dr_model_map(const dr_model_spec *m, uint32_t k, uint32_t *h, uint32_t *w, uint32_t *c);
/* The rows (or columns) [lo, hi) of layer l's input that its outputs [o0, o1)
 * read (forward), and the outputs [lo, hi) whose windows read its inputs
 * [i0, i1) (the gradient's halo), along a dimension of `in` inputs and `out`
 * outputs with the given leading pad; clipped to the map. */
void dr_window_rows(const dr_dense *d, uint32_t pad, uint32_t in, uint32_t o0, uint32_t o1, uint32_t r[2]);
void dr_window_outs(const dr_dense *d, uint32_t pad, uint32_t out, uint32_t i0, uint32_t i1, uint32_t r[2]);

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
