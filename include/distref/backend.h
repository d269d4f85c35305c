/* distref engine — a backend: where a replica's tensors live and the kernels
 * of one training step run.
 *
 * A backend is a table of functions (as in ggml's backend interface): the
 * engine's step (strategies/) never touches a replica's memory except
 * through it. Buffers are device-resident: the engine uploads a staged
 * batch, runs kernels on buffers, and downloads only what must leave the
 * device (the step's loss, gradients for a collective when the comm cannot
 * read device memory, variables for a checkpoint). Kernels may be
 * asynchronous; sync() waits for everything issued so far.
 *
 * The model is the core's spec (distref/model.h): a stack of Dense layers,
 * parameters in one flat array (per layer its kernel, in x out row-major,
 * then its bias). In exact numerics a replica's gradient share is kept as
 * exact accumulators (distref/exact.h), one per parameter, plus one for the
 * loss: the backend's kernels compute *sums* over examples, never means
 * (see docs/SEMANTICS.md and docs/ARCHITECTURE.md). In fast numerics the
 * same buffers hold floats (P floats, 1 float; dr_sum_bytes()): the float
 * path TensorFlow runs, below.
 *
 * What each kernel must return, bit for bit in exact numerics:
 *   forward     pre[l] = round(bias + act[l] W) per element (one rounding),
 *               act[l+1] = relu / identity / softmax of pre[l]; softmax and
 *               the losses use dr_expf / dr_logf (distref/elem.h) and exact
 *               sums (dr_sum_f32) for the normalizers.
 *   loss_grad   over the first n of the rows forwarded (the rest are
 *               static-shape padding and add nothing): the exact sum of
 *               per-example losses, and per parameter the exact sum of
 *               per-example gradients (kernel: act^T dz exact; bias: sum of
 *               dz exact; the delta of the layer below: round(dz W^T) per
 *               element, masked by pre > 0 for a ReLU layer).
 *   share       grad = mult * grad + coef * reg'(w), loss = mult * loss +
 *               coef * reg(w): the replica's share over the step's common
 *               denominator, exact. mult = R and coef = D (the loss's
 *               divisor) over D*R; --loss_reduction=tf_default scales each
 *               replica by its own size (include/distref/plan.h).
 *   apply       grad_f = round(total / divisor) once per parameter, then the
 *               optimizer (TensorFlow's kernels, operation by operation).
 *
 * Fast numerics (TensorFlow's float path; results may differ from exact
 * within the bounds of docs/CONFORMANCE.md, and may depend on R):
 *   forward     pre[l] = bias + in W by cblas_sgemm, libm expf/logf, float
 *               sums for the softmax normalizers (left to right).
 *   loss_grad   grad (P floats) and loss (1 float) are float *sums*: kernel
 *               grad = act^T dz by one cblas_sgemm (beta 0), bias grad =
 *               the column sums of dz accumulated row by row in float, loss
 *               = the per-example losses summed in row order in float.
 *   share       TensorFlow's per-replica gradient of compute_average_loss +
 *               scale_regularization_loss, i.e. of sum(loss_i)/D + reg/R:
 *               with sg = fl(mult/den), sr = fl(coef/den) (den = D*R, so
 *               sg = fl(1/D), sr = fl(1/R) for the default reduction)
 *                 grad[p] = grad[p]*sg + (2*l2*w[p])*sr   (kernels; biases
 *                           grad[p]*sg), each operation rounded to float,
 *                 loss    = loss*sg + (l2*sum w^2)*sr.
 *               TensorFlow multiplies dz by 1/D before its GEMMs; scaling the
 *               sums after them differs by one rounding per element.
 *   apply       the total is the all-reduced float sum of the shares, i.e.
 *               TensorFlow's gradient already: g = total[p] (divisor 1; a
 *               divisor d > 1 gives total[p]/d in float), then the optimizer.
 *   round_loss  loss (divisor 1) or loss/divisor in float.
 *   layer 0 tiles  z (rows x out0 floats) += the tile's sgemm, tile by tile;
 *               layer0_finish pre0 = z + bias in float; layer0_grad_rows
 *               grad rows += xt^T delta by sgemm (beta 1).
 */
#ifndef DISTREF_BACKEND_H
#define DISTREF_BACKEND_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_REF)
#error "distref/backend.h is the engine's: core/ and ref/ may not include it (docs/ARCHITECTURE.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/cacc.h"
#include "distref/exact.h"
#include "distref/factory.h"
#include "distref/form.h"
#include "distref/half.h"
#include "distref/model.h"

/* EXACT_COMPACT is exact numerics with the gradient kept in 32-byte compact
 * accumulators (distref/cacc.h) instead of dr_acc: the same bits, or an
 * element marked overflowed. The engine checks the reduced total before
 * apply(); when any element overflowed, it switches the backend to EXACT
 * (set_numerics) and redoes the step's compute and reduction with full
 * accumulators (strategies/step.c), so apply() never sees an overflow. */
typedef enum dr_numerics { DR_NUMERICS_EXACT = 0, DR_NUMERICS_FAST, DR_NUMERICS_EXACT_COMPACT } dr_numerics;

/* Bytes of one element of loss and layer 0's partial sums z: an exact
 * accumulator in exact numerics, a float in fast numerics. */
static inline size_t dr_sum_bytes(dr_numerics num)
{
    return num == DR_NUMERICS_FAST ? sizeof(float) : sizeof(dr_acc);
}

/* The number form of grad (distref/form.h): the form the collectives move
 * and apply reads. */
static inline dr_form_id dr_grad_form(dr_numerics num)
{
    return num == DR_NUMERICS_FAST ? DR_FORM_F32 : num == DR_NUMERICS_EXACT_COMPACT ? DR_FORM_CACC : DR_FORM_ACC;
}

/* Bytes of one element of grad: the same, but a dr_cacc for EXACT_COMPACT. */
static inline size_t dr_grad_bytes(dr_numerics num)
{
    return num == DR_NUMERICS_EXACT_COMPACT ? sizeof(dr_cacc) : dr_sum_bytes(num);
}

/* What the mixed kernel needs of the step (mixed_loss_grad). */
typedef struct dr_mixed_kernel {
    dr_dtype compute;    /* DR_DTYPE_F16 or DR_DTYPE_BF16 */
    float    scale;      /* the loss scale of this step (1: none) */
    uint32_t G;          /* the loss's divisor: the global batch size */
    uint32_t mult;       /* the loss share's multiplier (R: over G*R) */
    bool     fast;       /* --numerics=fast: the GEMMs in float32 (openmp:
                          * sgemm; opencl: k in order) on the rounded
                          * operands, each result then rounded to the
                          * compute dtype, a kernel gradient's float sum
                          * held exactly; a backend without fast mixed
                          * kernels runs its exact ones (the exact bits) */
} dr_mixed_kernel;

/* What a model-beyond-Dense pass needs beyond its batch (graph_begin). */
typedef struct dr_graph_rt {
    bool            training;
    uint64_t        seed, step;
    const uint32_t *ids;     /* the rows' global example ids: Dropout's key */
    uint32_t        n;       /* rows */
    const struct dr_dropout_masks *masks;   /* --dropout_masks (row r is row row0 + r of the global
                                             * batch); NULL: the RNG's */
    uint32_t        row0;
    /* the mixed step (--dtype_policy=mixed_*; DR_DTYPE_F32: the float32 pass):
     * Conv2D's and Dense's weights and the input rounded to compute, every
     * layer's output and input gradient one rounding to it of its exact
     * value, the loss float32 on the rounded logits with loss_scale / G
     * inside its delta (graph_ops_mixed: the backend honours it) */
    dr_dtype        compute;
    float           loss_scale;
    uint32_t        G;
    /* the mixed step under --numerics=fast (dr_mixed_kernel.fast): the same
     * roundings to compute, each of a float32 GEMM's result (the backend's
     * fast GEMM on the rounded operands, order fixed by the shapes), a
     * kernel gradient's float32 GEMM and a bias gradient's and the BN sums'
     * fixed-order float sums added exactly into rb->grad and the sums */
    bool            fast;
} dr_graph_rt;

typedef enum dr_bn_sum_kind { DR_BN_SUMS = 0, DR_BN_CENTERED, DR_BN_GRAD } dr_bn_sum_kind;

#define DR_GRAPH_STREAM_DROPOUT 0x6000u   /* + layer, + step << 24: the dropout masks' rng stream */

typedef struct dr_backend dr_backend;   /* an opened backend */
typedef struct dr_buffer  dr_buffer;    /* device-resident memory of a backend */

/* What a run asks of a backend; supports() answers yes, or no and why. */
typedef struct dr_backend_query {
    dr_strategy_kind strategy;
    dr_numerics      numerics;
    uint32_t         num_replicas;    /* in this process */
    uint32_t         tiles;           /* tpu spatial partitioning: cores per replica (1 = none) */
    bool             layer_placement; /* --layer_devices */
    uint32_t         layer_kinds;     /* the model's layer kinds, bit 1 << dr_layer_kind (0: Dense only) */
} dr_backend_query;

/* One replica's tensors on its device. The engine allocates them with
 * alloc() and hands them to the kernels; sizes in elements:
 *   params  P floats             slots   P * nslots floats (or NULL)
 *   grad    P dr_acc             loss    1 dr_acc     (exact numerics)
 *   grad    P dr_cacc            loss    1 dr_acc     (exact, compact gradient)
 *   grad    P floats             loss    1 float      (fast numerics)
 *   x       rows * in0 floats    labels  rows bytes (or NULL)
 *   targets rows * out floats (or NULL)
 * `rows` is the largest batch the replica computes (its static shape).
 * The activations' scratch is the backend's own (per replica), made by
 * replica_open. */
typedef struct dr_replica_bufs {
    dr_buffer *params, *slots, *grad, *loss, *x, *labels, *targets;
    void      *scratch;   /* backend-owned per-replica workspace */
    uint64_t   correct;   /* set by loss_grad: correct predictions of the n examples */
    uint32_t   share_mult;   /* the mult the next share will be given (0: not known); a backend
                                may fold its power of two into loss_grad's gradient, which share
                                then leaves out (openmp: exact compact gradients) */
} dr_replica_bufs;

/* How a backend is opened: what it runs and where. A backend reads the
 * fields that concern it (the CPU backend has one device and ignores the
 * device selection), so the engine opens any backend the same way and
 * never asks which one it holds. */
typedef struct dr_backend_params {
    const dr_model_spec *model;
    const dr_optimizer  *optimizer;
    dr_numerics          numerics;
    uint32_t             places;     /* replicas of this process, each a "place" (0 counts as 1) */
    /* device selection (--opencl_platform, --opencl_device, --opencl_mapping;
     * distref/opencl.h says how each is read and its environment fallback) */
    int                  platform;   /* < 0: the backend's default */
    const char          *devices;    /* NULL or "": the default */
    const char          *mapping;    /* NULL or "": the default */
} dr_backend_params;

/* Where one place (a replica of this process) runs, for the run summary. */
typedef struct dr_backend_place {
    char     device[128];   /* the device's name */
    int      device_index;  /* in the platform's list (bin/distref devices) */
    int      subdevice;     /* its sub-device, or -1 */
    uint32_t queue;         /* the command queue it uses (one shared queue: 0 for all) */
    uint64_t bytes;         /* device memory allocated for it so far */
    uint64_t capacity;      /* its device's global memory (a sub-device: its parent's, shared) */
} dr_backend_place;

typedef struct dr_backend_ops {
    const char *name;

    /* DR_OK, or DR_EUNSUPPORTED with err saying what is not supported. */
    int   (*supports)(const dr_backend_query *q, dr_err *err);
    /* Optional (NULL: always available). DR_OK when p's devices exist on
     * this machine and have what p->numerics needs; else DR_EUNSUPPORTED
     * ("not available: <why>") or DR_EUSAGE (a bad device index, list or
     * mapping name). Opens nothing. */
    int   (*available)(const dr_backend_params *p, dr_err *err);

    int   (*open)(const dr_backend_params *p, dr_backend **out, dr_err *err);
    void  (*close)(dr_backend *b);
    /* Optional (NULL: nothing to say): how the places are mapped onto
     * devices ("shared", "queues", "subdevices") and place p's device,
     * queue and memory (p < p->places of open). */
    const char *(*mapping_name)(const dr_backend *b);
    int   (*place_of)(const dr_backend *b, uint32_t p, dr_backend_place *out, dr_err *err);

    /* memory: zero-filled on alloc; offsets and sizes in bytes */
    int   (*alloc)(dr_backend *b, size_t bytes, dr_buffer **out, dr_err *err);
    /* Optional (NULL: alloc): memory on the device of `place`, the
     * process's replica number (0-based) the buffer belongs to. A backend
     * with several devices or queues (opencl) runs a replica's kernels,
     * transfers and fills where its buffers are, so replicas' kernels may
     * run at once; a command that reads another place's buffer (apply's
     * total, a copy's source) waits for that place's work first, and such a
     * buffer may be written again only after sync(). */
    int   (*alloc_on)(dr_backend *b, uint32_t place, size_t bytes, dr_buffer **out, dr_err *err);
    void  (*release)(dr_backend *b, dr_buffer *buf);
    int   (*upload)(dr_backend *b, dr_buffer *dst, size_t off, const void *src, size_t bytes, dr_err *err);
    int   (*download)(dr_backend *b, void *dst, const dr_buffer *src, size_t off, size_t bytes, dr_err *err);
    int   (*copy)(dr_backend *b, dr_buffer *dst, size_t dst_off, const dr_buffer *src, size_t src_off,
                  size_t bytes, dr_err *err);
    int   (*fill_zero)(dr_backend *b, dr_buffer *dst, size_t off, size_t bytes, dr_err *err);
    int   (*sync)(dr_backend *b, dr_err *err);
    /* The host address of a buffer when the device shares host memory (a CPU
     * backend), else NULL: collectives then work through download/upload. */
    void *(*host_ptr)(dr_buffer *buf);

    /* per-replica workspace for batches of up to `rows` examples */
    int   (*replica_open)(dr_backend *b, dr_replica_bufs *rb, uint32_t rows, dr_err *err);
    void  (*replica_close)(dr_backend *b, dr_replica_bufs *rb);

    /* ---- the step's kernels ---------------------------------------------- */

    /* Forward layers first..L-1 on `rows` rows: layer 0 reads rb->x; a
     * later first layer reads the activations left by layer0_finish. */
    int   (*forward)(dr_backend *b, dr_replica_bufs *rb, uint32_t rows, uint32_t first, dr_err *err);
    /* Zeroes rb->grad and rb->loss, then the loss and gradient sums of the
     * first n rows of the last forward pass (n <= rows; n == 0 adds nothing).
     * With kernel0 false, layer 0's kernel gradient is left to the caller
     * (spatial partitioning: layer0_grad_rows). */
    int   (*loss_grad)(dr_backend *b, dr_replica_bufs *rb, uint32_t n, bool kernel0, dr_err *err);
    /* The share over the step's common denominator den (= coef * R): see
     * the header comment (exact numerics do not read den). */
    int   (*share)(dr_backend *b, dr_replica_bufs *rb, uint32_t mult, uint32_t coef, uint32_t den, dr_err *err);
    /* grad_f = round(total[p] / divisor) (fast: total[p], or total[p] /
     * divisor when divisor > 1), then the optimizer at 1-based step
     * on params/slots (total may be another replica's grad: the all-reduced
     * sum; several replicas may apply the same total concurrently). */
    int   (*apply)(dr_backend *b, const dr_buffer *total, uint32_t divisor, uint64_t step,
                   dr_buffer *params, dr_buffer *slots, dr_err *err);
    /* The gradient apply() hands the optimizer for the same total and
     * divisor, as P host floats in out: round(total[p] / divisor) once (fast:
     * total[p], or total[p] / divisor in float), then the global clipping
     * apply() does (not --clip_semantics=tensorflow's, which share did per
     * replica); synchronously, total untouched. num is the form total holds
     * (the engine's compact fallback reads a full total after switching
     * back). What --trajectory records as gradient/ (strategies/engine.c). */
    int   (*applied_grad)(dr_backend *b, const dr_buffer *total, dr_numerics num, uint32_t divisor, float *out,
                          dr_err *err);
    /* round(loss / divisor) of an accumulator buffer (fast: a float buffer,
     * loss / divisor in float), synchronously. */
    int   (*round_loss)(dr_backend *b, const dr_buffer *loss, uint32_t divisor, float *out, dr_err *err);
    /* Optional (NULL: the numerics of open() only): switch between EXACT and
     * EXACT_COMPACT between steps; grad buffers are then the new form's. */
    int   (*set_numerics)(dr_backend *b, dr_numerics num, dr_err *err);

    /* ---- mixed precision (--dtype_policy=mixed_*; optional, NULL: not built) */

    /* The mixed step's forward and backward on the first n rows of rb->x,
     * exact numerics only (docs/TRAINING_FEATURES.md, "Mixed precision"):
     * every op's result its exact value rounded once to m->compute (the
     * input, the weights, each pre-activation, dz = RN(scale (softmax -
     * onehot) / G) per example, each delta below); rb->grad = the exact
     * sums of the weight gradients (the scale and 1/G inside dz: no share),
     * rb->loss = mult * the exact sum of the float32 per-example losses. */
    int   (*mixed_loss_grad)(dr_backend *b, dr_replica_bufs *rb, uint32_t n, const dr_mixed_kernel *m,
                             dr_err *err);
    /* The optimizer at 1-based `step` on a float gradient g[0..P) on the
     * host, already rounded and unscaled (the mixed step's apply). */
    int   (*apply_f32)(dr_backend *b, const float *g, uint64_t step, dr_buffer *params, dr_buffer *slots,
                       dr_err *err);
    /* The run's --clipnorm/--clipvalue/--global_clipnorm on the mixed step's
     * rounded, unscaled gradient g[0..P) in place, exact norms (nothing
     * when the run does not clip); NULL: the backend cannot. */
    void  (*clip_f32)(dr_backend *b, float *g);
    /* --clip_semantics=tensorflow: the run's clipping on one replica's
     * rounded, unscaled mixed gradient g[0..P) in place, before the
     * all-reduce (Keras 3 per replica), exact norms; NULL: the backend
     * cannot. */
    void  (*clip_replica_f32)(dr_backend *b, float *g);

    /* ---- spatial partitioning of layer 0 (tpu) --------------------------- */

    /* z[rows x out0] += exact xt W0[rows `pix` of the kernel] (fast: floats,
     * += the tile's sgemm): xt is a
     * rows x len tile (row-major) of the input, pix[0..len) the pixels it
     * holds, i.e. its rows of layer 0's kernel read from params. */
    int   (*layer0_partial)(dr_backend *b, const dr_buffer *xt, const uint32_t *pix, uint32_t len,
                            uint32_t rows, const dr_buffer *params, dr_buffer *z, dr_err *err);
    /* pre0 = round(z + bias0), act1 = the activation: what forward(first=1) reads. */
    int   (*layer0_finish)(dr_backend *b, dr_replica_bufs *rb, const dr_buffer *z, uint32_t rows, dr_err *err);
    /* Layer 0's delta (n x out0) left by loss_grad(kernel0 = false). */
    int   (*layer0_delta)(dr_backend *b, dr_replica_bufs *rb, uint32_t n, float *out, dr_err *err);
    /* grad rows pix of layer 0's kernel += exact xt^T delta (delta n x out0 floats on the device). */
    int   (*layer0_grad_rows)(dr_backend *b, const dr_buffer *xt, const uint32_t *pix, uint32_t len,
                              uint32_t n, const dr_buffer *delta, dr_buffer *grad, dr_err *err);

    /* ---- models beyond Dense (issue 31; optional, NULL: Dense only) ------
     *
     * The engine drives the layers one at a time, in lock step over its
     * replicas (strategies/graph.c), because a synchronized
     * BatchNormalization needs the global batch's sums between two layers.
     * Maps are NHWC as Keras; map 0 is rb->x, map l + 1 layer l's output
     * (its input: map src, distref/model.h). Each op works on the first n
     * rows of one replica; the kernels keep the maps, their gradients and
     * what a backward needs (the ReLU's pre-activations, a pool's argmax, a
     * dropout mask, BN's xhat) in the replica's scratch. Exact numerics:
     *   Conv2D      pre = round(bias + the window's dot product) per output;
     *               dW, db exact sums into grad; d(input) per element the
     *               exact sum over every tap that read it, rounded once
     *   MaxPool2D   the window's first maximum (row-major) takes the gradient
     *   GlobalAvg   round(exact sum / (h w)); backward dy / (float)(h w)
     *   Dropout     keep unit u of example `ids[r]` at step `step` when
     *               dr_rng_uniform(seed, DR_GRAPH_STREAM_DROPOUT + l + (step << 24),
     *               ids[r] * units + u) >= rate; kept: x * (1 / (1 - rate))
     *   BatchNorm   y = x a + (beta - mean a), a = gamma / sqrtf(var + 1e-3);
     *               the statistics are the engine's (bn_sums, then mean and
     *               var rounded once from the exact sums it reduced)
     * Fast numerics: the same ops with sgemm for the convs' GEMMs and float
     * grad; BN's statistics stay exact sums (docs/MODELS.md). */
    /* zero rb->grad and rb->loss, keep rt (ids: the rows' global example
     * ids, the dropout masks' key; seed, step) for the pass's ops */
    int   (*graph_begin)(dr_backend *b, dr_replica_bufs *rb, uint32_t n, const dr_graph_rt *rt, dr_err *err);
    /* forward of layer l (every kind; BatchNormalization: with the moving
     * statistics, inference only) */
    int   (*layer_forward)(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_err *err);
    /* BatchNormalization l's per-channel exact sums over the replica's n
     * rows x pixels, added into s1[c], s2[c] (host accumulators, oc each):
     *   DR_BN_SUMS      x, x^2 (s2 may be NULL)       of the layer's input
     *   DR_BN_CENTERED  (x - mean[c])^2 into s2       (two-pass variance)
     *   DR_BN_GRAD      dy, dy * xhat (after the ReLU's mask), also added
     *                   into beta's and gamma's gradient */
    int   (*bn_sums)(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_bn_sum_kind kind, const float *mean,
                     dr_acc *s1, dr_acc *s2, dr_err *err);
    /* training forward of BatchNormalization l with the given statistics */
    int   (*bn_normalize)(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *mean, const float *var,
                          dr_err *err);
    /* the loss and its gradient at the top of the last forward pass (the
     * last layer Dense), into rb->loss and the top map's gradient; every
     * other map's gradient zeroed */
    int   (*graph_loss)(dr_backend *b, dr_replica_bufs *rb, dr_err *err);
    /* backward of layer l (every kind but BatchNormalization): parameter
     * gradients into rb->grad, d(input) added into map src's gradient
     * (layer 0: none) */
    int   (*layer_backward)(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_err *err);
    /* BatchNormalization l's d(input) += a ((dy - mean_dy) - xhat mean_dyxhat) */
    int   (*bn_backward)(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *mean_dy,
                         const float *mean_dyxhat, dr_err *err);
    /* the ops above run the mixed step's roundings (dr_graph_rt.compute;
     * with set_tile too: see spatial_exchange): rb->grad the exact
     * sums (loss_scale and 1/G inside the deltas), rb->loss the exact sum of the float32
     * per-example losses; the engine then shares nothing but the loss's
     * multiplier (strategies/mixed.c); and their --numerics=fast forms
     * (dr_graph_rt.fast: the same roundings of float32 GEMMs and sums,
     * the weight gradients still exact accumulators) */
    bool  graph_ops_mixed;
    /* Optional (NULL: the backend does not evaluate): each example's loss
     * (as loss_grad sums it) into loss[0..n) and the last layer's output
     * (n x out) into out, host floats, of the first n rows of the last
     * forward pass: forward() of a Dense model, or graph_begin with
     * rt->training false and layer_forward of every layer (BN with the
     * moving statistics, Dropout off): evaluate and predict
     * (strategies/evaluate.c). Synchronously. */
    int   (*outputs)(dr_backend *b, dr_replica_bufs *rb, uint32_t n, float *loss, float *out, dr_err *err);

    /* ---- spatial partitioning of a model beyond Dense (tpu; optional) ----
     *
     * A replica's T = ph x pw cores are T replica bufs (core 0 the replica's
     * own), each opened by replica_open, the same n examples, the maps at
     * their whole size (docs/MODELS.md "Spatial partitioning with halos").
     * set_tile: the ops above then compute, of the layers before tile->lp,
     * only the core's tile of every map, and from lp on core 0 the whole
     * maps (and the loss), every other core nothing; bn_sums add the
     * core's part, the engine merges a replica's cores. tile NULL: whole
     * maps again. */
    int   (*set_tile)(dr_backend *b, dr_replica_bufs *rb, const dr_tile *tile, uint32_t core, dr_err *err);
    /* Before layer l's forward (grad false) or backward (grad true), between
     * the replica's cores[0 .. p->tiles): the halo a windowed layer's tiles
     * read across a cut (forward: its input; backward: a conv's output
     * gradient after the ReLU's mask), and where the tiles end (l == lp
     * forward, l + 1 == lp backward) the gather onto core 0 or the scatter
     * back. The bytes core c received are added into halo[c], the gather's
     * and scatter's into *gather; link (3 x DR_MAX_TILES x DR_MAX_TILES,
     * zeroed by the caller) keeps the largest single transfer from core a to
     * core b in each of the op's rounds, in order: the gather or scatter,
     * then the halo's two passes (rows, columns), for the emulated time
     * (any of the three NULL: not kept). The mixed step (graph_ops_mixed)
     * on tiles: each op's roundings on the core's tile alone, and the
     * exchange moves the maps the ops read (map 0 the input rounded to c by
     * graph_begin, not rb->x), so a partitioned step gives the unpartitioned
     * bits. */
    int   (*spatial_exchange)(dr_backend *b, dr_replica_bufs *const *cores, const dr_spatial_plan *p, uint32_t l,
                              bool grad, uint64_t *halo, uint64_t *gather, uint64_t *link, dr_err *err);
} dr_backend_ops;

/* The OpenMP CPU backend (devices/cpu/openmp_backend.c): host memory, exact
 * kernels by error-free splitting over DGEMM (distref/fastgemm.h), fast
 * kernels on sgemm, libm and float buffers (devices/cpu/openmp_kernels.c). */
const dr_backend_ops *dr_backend_openmp(void);

#endif
