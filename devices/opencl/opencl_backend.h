/* distref devices/opencl/ — the OpenCL family: one backend on any OpenCL
 * device (PoCL, a GPU), its kernels in cl/. This header: its private
 * declarations.
 *
 * devices/opencl/opencl_program.c   platforms, devices, capabilities; the program
 *                            (sources, build options, binary cache)
 * devices/opencl/opencl_backend.c   the table: open/close, memory, share, apply
 * devices/opencl/opencl_kernels.c   forward, loss and gradients (kernel launches)
 * devices/opencl/opencl_mixed.c     the mixed-precision step (mixed_loss_grad,
 *                            apply_f32, clip_f32; kernels cl/half.cl, cl/mixed.cl)
 * devices/opencl/opencl_spatial.c   layer 0 by tiles (tpu spatial partitioning
 *                            of a Dense model; kernels in cl/kernels.cl)
 * devices/opencl/opencl_graph.c     the layer ops of the models beyond Dense
 *                            (Conv2D, pooling, Dropout, Add, BatchNormalization;
 *                            kernels cl/graph.cl), a core's tile (set_tile)
 * devices/opencl/opencl_halo.c      their spatial partitioning's halos, gather
 *                            and scatter between a replica's cores
 *
 * devices/opencl/opencl_places.c    the device list, the replica mapping (shared
 *                            queue, a queue per replica, sub-devices), the
 *                            context, queues and kernels; memory accounting
 *
 * A dr_buffer is a cl_mem in the backend's one context, made for one slot
 * (a replica's device and in-order queue); host_ptr() is NULL, so the
 * engine stages collectives through download/upload. Everything on a
 * buffer runs on its slot's queue, so a replica's work runs in issue order.
 * Each slot has its own kernel objects and share scratch; its lock
 * serializes setting a kernel's arguments and enqueueing it (cl_kernel
 * objects are not thread-safe; under the shared mapping every replica
 * uses slot 0 from several threads).
 */
#ifndef DISTREF_DEVICES_OPENCL_BACKEND_H
#define DISTREF_DEVICES_OPENCL_BACKEND_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <pthread.h>
#include "distref/backend.h"
#include "distref/opencl.h"

enum {
    K_GEMM_EXACT, K_GEMM_ACC_EXACT, K_GEMM_FAST, K_ACTIVATE, K_LOSS_ROWS, K_PARTIAL_SUM, K_MERGE,
    K_SUM_FAST, K_BIAS_EXACT, K_BIAS_FAST, K_RELU_MASK, K_SHARE_EXACT, K_LOSS_SHARE_EXACT, K_SHARE_FAST,
    K_LOSS_SHARE_FAST, K_APPLY_EXACT, K_APPLY_FAST, K_GEMM_FAST_V, K_ROUND_EXACT, K_ROUND_FAST,
    K_MIXED_TO_DTYPE, K_MIXED_GEMM, K_MIXED_LOSS_ROWS, K_MIXED_GEMM_FAST, K_MIXED_GRAD_FAST,
    /* cl/graph.cl: the models beyond Dense */
    K_CONV_FWD, K_CONV_DX, K_CONV_DW_EXACT, K_CONV_DW_FAST, K_CONV_DW_MIXED_FAST, K_ACT_CELLS, K_ADD_CELLS,
    K_ADD_GRAD, K_MAXPOOL, K_MAXPOOL_GRAD, K_GAP, K_GAP_GRAD, K_DROPOUT, K_DROPOUT_GRAD, K_BN_CHAN, K_BN_APPLY, K_BN_SUMS,
    K_BN_GRAD_SUMS_EXACT, K_BN_GRAD_SUMS_FAST, K_BN_GRAD,
    /* cl/kernels.cl: tpu spatial partitioning of layer 0 (opencl_spatial.c) */
    K_L0_PARTIAL_EXACT, K_L0_PARTIAL_FAST, K_L0_FINISH_EXACT, K_L0_FINISH_FAST, K_L0_GRAD_EXACT, K_L0_GRAD_FAST,
    K_COUNT
};

#define DR_CL_CHUNK 8    /* devices/opencl/cl/kernels.cl's CHUNK: elements per partial sum */
#define DR_CL_TS    16   /* its GEMM tile edge */

struct dr_buffer {
    size_t   bytes;
    cl_mem   mem;
    uint32_t slot;   /* the slot (device and queue) it was made for */
};

/* What the device can do (bin/distref devices, and exact mode's checks). */
typedef struct dr_cl_caps {
    char     platform[256], name[256], version[256], driver[256];
    cl_device_type type;
    bool     cr_divide_sqrt;   /* CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT */
    bool     denorm, fma;      /* CL_FP_DENORM, CL_FP_FMA */
    bool     fp64;             /* cl_khr_fp64 */
    bool     full_profile;     /* FULL_PROFILE: 64-bit integers */
    cl_ulong global_mem, max_alloc, local_mem;
    cl_uint  compute_units;
    size_t   max_wg;
    cl_uint  max_sub_devices;  /* CL_DEVICE_PARTITION_MAX_SUB_DEVICES */
    bool     part_equally;     /* CL_DEVICE_PARTITION_EQUALLY offered */
} dr_cl_caps;

#define DR_CL_MAX_SLOTS 64   /* replicas of one process (DR_MAX_DEVICES - 1) */

typedef enum dr_cl_mapping { DR_CL_MAP_AUTO, DR_CL_MAP_SHARED, DR_CL_MAP_QUEUES, DR_CL_MAP_SUBDEVICES } dr_cl_mapping;

/* A device of the context: a listed device or one of its sub-devices. */
typedef struct dr_cl_dev {
    cl_device_id id;
    int          index;       /* the listed device's index in the platform */
    int          sub;         /* its sub-device number, or -1 */
    dr_cl_caps   caps;
    cl_program   prog;
} dr_cl_dev;

/* Where a replica runs: a device of the context and an in-order queue. */
typedef struct dr_cl_slot {
    uint32_t         dev;     /* into dr_backend.devs */
    cl_command_queue q;
    cl_kernel        k[K_COUNT];
    pthread_mutex_t  lock;
    bool             lock_made;
    cl_mem           ranges;  /* fast share: the kernels' (offset, length) pairs */
    cl_mem           part;    /* exact share: partial sums of w^2 */
    cl_mem           reg;     /* exact share: l2 * round(sum w^2) */
    uint64_t         bytes;   /* device memory allocated through the slot */
} dr_cl_slot;

struct dr_backend {
    dr_model_spec m;
    dr_optimizer  o;
    dr_numerics   num;
    size_t        P;
    size_t        koff[DR_MAX_LAYERS];
    size_t        ksz[DR_MAX_LAYERS];   /* layer l's L2 range: a Dense or Conv2D kernel (else 0), then lsz - ksz
                                         * parameters without L2 (biases, BN's gamma and beta) */
    size_t        lsz[DR_MAX_LAYERS];   /* its trainable parameters */
    uint32_t      widest;
    cl_platform_id   platform;
    dr_cl_mapping    mapping;  /* resolved: shared, queues or subdevices */
    cl_context       ctx;
    uint32_t         ndevs, nslots, places;
    dr_cl_dev        devs[DR_CL_MAX_SLOTS];
    dr_cl_slot       slot[DR_CL_MAX_SLOTS];
    pthread_mutex_t  mem_lock;  /* the slots' byte counts */
    bool             mem_lock_made;
    size_t           part_n;
};

/* The slot of place p (a replica), and of a buffer. */
static inline uint32_t dr_cl_slot_of_place(const dr_backend *b, uint32_t p)
{
    return b->nslots ? p % b->nslots : 0;
}
static inline dr_cl_slot *dr_cl_slot_of(dr_backend *b, const dr_buffer *buf)
{
    return &b->slot[buf && buf->slot < b->nslots ? buf->slot : 0];
}
static inline const dr_cl_caps *dr_cl_caps_of_slot(const dr_backend *b, const dr_cl_slot *sl)
{
    return &b->devs[sl->dev].caps;
}

/* A replica's workspace on the device. */
typedef struct dr_cl_scratch {
    uint32_t cap, fwd_rows, grad_n;
    uint32_t slot;      /* the replica's slot: its params' */
    size_t   bytes;     /* device memory of the workspace (counted on the slot) */
    cl_mem   pre[DR_MAX_LAYERS], act[DR_MAX_LAYERS], dz[2], ex_loss, hit, part;
    cl_mem   wc, xc;    /* the mixed step's weights and input in the compute dtype (NULL until its first call) */
    unsigned char *hit_host;
    struct dr_cl_graph *graph;   /* a model beyond Dense: its maps (opencl_graph.c), else NULL */
} dr_cl_scratch;

/* One kernel argument: a buffer, a u32 or a float. */
typedef struct dr_cl_arg {
    char kind;          /* 'm' cl_mem, 'u' uint, 'f' float */
    cl_mem m;
    cl_uint u;
    cl_float f;
} dr_cl_arg;
#define CLM(x) ((dr_cl_arg){ 'm', (x), 0, 0.0f })
#define CLU(x) ((dr_cl_arg){ 'u', NULL, (cl_uint)(x), 0.0f })
#define CLF(x) ((dr_cl_arg){ 'f', NULL, 0, (cl_float)(x) })

/* devices/opencl/opencl_program.c */
const char *dr_cl_strerror(cl_int e);
int  dr_cl_fail(dr_err *err, cl_int e, const char *what);
/* platform/device indices: < 0 = DISTREF_OPENCL_PLATFORM/DEVICE (its first entry), else 0 */
int  dr_cl_pick(int platform, int device, cl_platform_id *pid, cl_device_id *did, dr_err *err);
/* The platform and the listed devices (devices NULL or "": the environment,
 * else "0"); n_out devices, at most DR_CL_MAX_SLOTS. */
int  dr_cl_pick_list(int platform, const char *devices, cl_platform_id *pid, cl_device_id *ids, int *index,
                     uint32_t *n_out, dr_err *err);
void dr_cl_caps_of(cl_platform_id p, cl_device_id d, dr_cl_caps *c);
/* Why exact numerics cannot run on the device (NULL: they can). */
const char *dr_cl_exact_missing(const dr_cl_caps *c);
/* Builds the program for dev (through the binary cache). */
int  dr_cl_build_dev(dr_backend *b, dr_cl_dev *dev, dr_err *err);
/* Creates slot sl's kernels from its device's program. */
int  dr_cl_kernels(dr_backend *b, dr_cl_slot *sl, dr_err *err);
/* Builds a program of elem.h, acc.cl and extra_src (tests). */
int  dr_cl_build_program(cl_context ctx, cl_device_id dev, const dr_cl_caps *caps, const char *extra_src,
                         cl_program *out, dr_err *err);

/* devices/opencl/opencl_places.c: the devices, mapping, context, slots (queues,
 * kernels, locks; share buffers by dr_cl_share_buffers); close releases them */
int  dr_cl_places_open(dr_backend *b, const dr_backend_params *sel, dr_err *err);
/* The backend's available(), mapping_name() and place_of() (distref/opencl.h). */
int  dr_cl_available(const dr_backend_params *sel, dr_err *err);
const char *dr_cl_mapping_name(const dr_backend *b);
int  dr_cl_place_of(const dr_backend *b, uint32_t p, dr_backend_place *out, dr_err *err);
void dr_cl_places_close(dr_backend *b);
/* Counts bytes against the slot's device; DR_EDEVICE_OOM past its memory. */
int  dr_cl_mem_take(dr_backend *b, dr_cl_slot *sl, size_t bytes, dr_err *err);
void dr_cl_mem_give(dr_backend *b, dr_cl_slot *sl, size_t bytes);

/* devices/opencl/opencl_backend.c */
int  dr_cl_share_buffers(dr_backend *b, dr_cl_slot *sl, dr_err *err);
int  dr_cl_launch(dr_cl_slot *sl, int kernel, size_t g0, size_t g1, size_t l0, size_t l1,
                  const dr_cl_arg *args, int nargs, const char *what, dr_err *err);
int  dr_cl_need(const dr_buffer *b, size_t bytes, const char *what, dr_err *err);
/* The optimizer's scalars at 1-based step for apply_one (kernels.cl): the
 * schedule's lr, Adam's lr_t (0 otherwise) and opt (0 sgd, 1 momentum,
 * 2 nesterov, 3 adam). */
void dr_cl_opt_scalars(const dr_backend *b, uint64_t step, float *lr, float *lr_t, cl_uint *opt);

/* devices/opencl/opencl_kernels.c */
/* Global clipping's gradient, on the host: the total downloaded, rounded
 * once (exact: dr_acc_round_array; fast: the float total over divisor, as
 * apply_fast divides), clipped by devices/cpu/grad_clip.c (P floats in g):
 * what apply hands the optimizer under clipping, and applied_grad then. */
int dr_cl_round_clip_host(dr_backend *b, const dr_buffer *total, uint32_t divisor, float *g, dr_err *err);
/* The backend's applied_grad (distref/backend.h). */
int dr_cl_applied_grad(dr_backend *b, const dr_buffer *total, dr_numerics num, uint32_t divisor, float *out,
                       dr_err *err);
/* The backend's round_loss (distref/backend.h). */
int dr_cl_round_loss(dr_backend *b, const dr_buffer *loss, uint32_t divisor, float *out, dr_err *err);
int dr_cl_fast_gemm(dr_cl_slot *sl, const dr_cl_arg *a17, const char *what, dr_err *err);
int dr_cl_forward(dr_backend *b, dr_replica_bufs *rb, uint32_t rows, uint32_t first, dr_err *err);
int dr_cl_loss_grad(dr_backend *b, dr_replica_bufs *rb, uint32_t n, bool kernel0, dr_err *err);
int dr_cl_outputs(dr_backend *b, dr_replica_bufs *rb, uint32_t n, float *loss, float *out, dr_err *err);
/* Needs a workspace opened by replica_open with at least n rows. */
int dr_cl_need_scratch(const dr_replica_bufs *rb, uint32_t rows, dr_err *err);

/* C (M x N floats, row stride ldc) = [bias +] op(A) op(B): exact, each
 * element rounded once, or fast (kernels.cl's GEMMs; strides as gemm_exact's). */
int dr_cl_gemm_f32(dr_backend *b, dr_cl_slot *sl, uint32_t M, uint32_t N, uint32_t K, cl_mem A, size_t aoff,
                   size_t sai, size_t sak, cl_mem B, size_t boff, size_t sbk, size_t sbj, cl_mem bias,
                   size_t bias_off, cl_mem C, size_t ldc, const char *what, dr_err *err);
/* The per-example losses of the first n rows of the last layer (labels
 * checked first), d loss / d pre into dz, their sum into rb->loss. */
int dr_cl_loss_rows(dr_backend *b, dr_replica_bufs *rb, dr_cl_scratch *s, uint32_t n, cl_mem dz, dr_err *err);
/* The labels of n rows there and each within the last layer's outputs. */
int dr_cl_check_labels(dr_backend *b, dr_replica_bufs *rb, dr_cl_scratch *s, uint32_t n, dr_err *err);
/* The hits of those rows (labels only; else 0). */
int dr_cl_count_hits(dr_backend *b, dr_replica_bufs *rb, dr_cl_scratch *s, uint32_t n, uint64_t *correct,
                     dr_err *err);

/* devices/opencl/opencl_mixed.c: C = RN_c(op(A) op(B) [+ bias]) per element
 * (cl/mixed.cl's mixed_gemm, or mixed_gemm_fast); the mixed step of a model
 * beyond Dense: graph_begin's Wc and xc, graph_loss's loss (c: the compute dtype) */
int dr_cl_mixed_gemm(dr_cl_slot *sl, bool fast, uint32_t M, uint32_t N, uint32_t K, cl_mem A, size_t sai, size_t sak,
                     cl_mem B, size_t boff, size_t sbk, size_t sbj, cl_mem bias, size_t bias_off, cl_mem C, size_t ldc,
                     dr_dtype c, const char *what, dr_err *err);
int dr_cl_graph_mixed_begin(dr_backend *b, dr_replica_bufs *rb, uint32_t n, dr_dtype c, dr_err *err);
int dr_cl_graph_mixed_loss(dr_backend *b, dr_replica_bufs *rb, uint32_t n, dr_dtype c, float scale, uint32_t G,
                           cl_mem dz, dr_err *err);

/* A replica's maps for a model beyond Dense (opencl_graph.c's header says
 * what each holds; opencl_maps.c allocates them). */
#define BN_MAX_C 256
typedef struct dr_cl_graph {
    uint32_t n, rows;
    bool     training;
    uint64_t seed, step;
    bool     masks;            /* --dropout_masks: keep[l] holds this pass's masks */
    dr_dtype ct;               /* the mixed step's compute dtype (F32: the float32 pass) */
    bool     fast;             /* the mixed step under --numerics=fast (dr_graph_rt.fast) */
    float    loss_scale;       /* the mixed step's: loss_scale / G inside the top delta */
    uint32_t G;
    cl_mem   dmap[DR_MAX_LAYERS + 1], aux[DR_MAX_LAYERS], chan[DR_MAX_LAYERS], win[DR_MAX_LAYERS];
    cl_mem   keep[DR_MAX_LAYERS];   /* Dropout: a byte a cell, the masks file's (1 kept, 0 dropped) */
    cl_mem   tmp, ids, red, stat;
    const dr_tile *tile;   /* spatial partitioning (set_tile): this core's tile, or NULL */
    uint32_t core;
} dr_cl_graph;

/* devices/opencl/opencl_maps.c: a replica's maps; opencl_graph.c:
 * distref/backend.h's graph_begin .. bn_backward */
int  dr_cl_graph_open(dr_backend *b, dr_cl_scratch *s, uint32_t rows, size_t *bytes, dr_err *err);
void dr_cl_graph_free(struct dr_cl_graph *g);
int  dr_cl_graph_begin(dr_backend *b, dr_replica_bufs *rb, uint32_t n, const dr_graph_rt *rt, dr_err *err);
int  dr_cl_layer_forward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_err *err);
int  dr_cl_bn_sums(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_bn_sum_kind kind, const float *mean,
                   dr_acc *s1, dr_acc *s2, dr_err *err);
int  dr_cl_bn_normalize(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *mean, const float *var,
                        dr_err *err);
int  dr_cl_graph_loss(dr_backend *b, dr_replica_bufs *rb, dr_err *err);
int  dr_cl_layer_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_err *err);
int  dr_cl_bn_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *mean_dy,
                       const float *mean_dyxhat, dr_err *err);

/* devices/opencl/opencl_graph.c, for the tpu strategy's spatial partitioning
 * of a model beyond Dense: the table's set_tile; whether a replica's
 * workspace holds tile; its rows this step; its map k (grad: d(loss)/d(map
 * k)); layer l's ReLU mask on its output gradient (idempotent) */
int    dr_cl_set_tile(dr_backend *b, dr_replica_bufs *rb, const dr_tile *tile, uint32_t core, dr_err *err);
bool   dr_cl_graph_tiled(const dr_replica_bufs *rb, const dr_tile *tile);
uint32_t dr_cl_graph_rows(const dr_replica_bufs *rb);
cl_mem dr_cl_graph_map(const dr_replica_bufs *rb, uint32_t k, bool grad);
int    dr_cl_unactivate(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_err *err);
/* devices/opencl/opencl_halo.c: the table's spatial_exchange (host copies) */
int    dr_cl_spatial_exchange(dr_backend *b, dr_replica_bufs *const *cores, const dr_spatial_plan *p, uint32_t l,
                              bool grad, uint64_t *halo, uint64_t *gather, uint64_t *link, dr_err *err);

/* Which of a replica's dz buffers holds layer 0's delta after backward: the
 * last layer's dz is dz[0] and each layer below swaps. */
static inline unsigned dr_cl_delta0(const dr_model_spec *m)
{
    return (m->nlayers - 1) & 1u;
}

/* devices/opencl/opencl_spatial.c: distref/backend.h's layer0_partial ..
 * layer0_grad_rows (tpu spatial partitioning of a Dense model) */
int dr_cl_layer0_partial(dr_backend *b, const dr_buffer *xt, const uint32_t *pix, uint32_t len, uint32_t rows,
                         const dr_buffer *params, dr_buffer *z, dr_err *err);
int dr_cl_layer0_finish(dr_backend *b, dr_replica_bufs *rb, const dr_buffer *z, uint32_t rows, dr_err *err);
int dr_cl_layer0_delta(dr_backend *b, dr_replica_bufs *rb, uint32_t n, float *out, dr_err *err);
int dr_cl_layer0_grad_rows(dr_backend *b, const dr_buffer *xt, const uint32_t *pix, uint32_t len, uint32_t n,
                           const dr_buffer *delta, dr_buffer *grad, dr_err *err);

/* devices/opencl/opencl_mixed.c: distref/backend.h's mixed_loss_grad, apply_f32 and clip_f32 */
int dr_cl_mixed_loss_grad(dr_backend *b, dr_replica_bufs *rb, uint32_t n, const dr_mixed_kernel *mk, dr_err *err);
int dr_cl_apply_f32(dr_backend *b, const float *g, uint64_t step, dr_buffer *params, dr_buffer *slots, dr_err *err);
void dr_cl_clip_f32(dr_backend *b, float *g);
void dr_cl_clip_replica_f32(dr_backend *b, float *g);

#endif
