/* distref devices/cpu/ — the CPU family: the OpenMP backend (openmp_*.c) and
 * the exact GEMM over DGEMM (cpu_gemm*.c). This header: the OpenMP CPU
 * backend's private declarations.
 *
 * Shared by devices/cpu/openmp_backend.c (the table: memory, share, apply) and
 * devices/cpu/openmp_kernels.c (forward, loss and gradients, spatial
 * partitioning of layer 0). Not a public header: the engine sees only
 * distref/backend.h. Tests may include it to look at a replica's
 * activations.
 *
 * Buffers are plain host memory (calloc'd), so host_ptr() is the data.
 *
 * A replica's workspace (dr_omp_scratch, made by replica_open for batches of
 * up to `cap` rows; every array is row-major, one row per example):
 *
 *   pre[l]   cap x out_l   layer l's pre-activations
 *   act[l]   cap x out_l   layer l's output (act[0] is unused: layer 0 reads
 *                          rb->x, or act comes from layer0_finish)
 *            -- act[l] here is the output OF layer l, i.e. the reference's
 *               act[l+1]; the input of layer l > 0 is act[l-1].
 *   dz[2]    cap x widest  backward ping-pong: d loss / d pre of the layer
 *                          being processed, and the delta of the one below
 *   colT     widest x cap  dz transposed, so that a bias gradient is one
 *                          contiguous exact sum per unit (dr_acc_add_sum)
 *   aux      cap x out_L   per-example loss terms (exp(z - max), out - target)
 *   ex_loss  cap           per-example losses, summed exactly at the end
 *   hit      cap           per-example "argmax == label"
 *
 * Nothing in it is shared between replicas, so the engine may run different
 * replicas' kernels concurrently; each kernel may also use OpenMP itself
 * (nested regions simply run on one thread).
 */
#ifndef DISTREF_DEVICES_OPENMP_BACKEND_H
#define DISTREF_DEVICES_OPENMP_BACKEND_H

#include "distref/backend.h"
#include "distref/cacc.h"
#include "distref/wide.h"

struct dr_buffer {
    size_t bytes;
    void  *data;
};

struct dr_backend {
    dr_model_spec m;
    dr_optimizer  o;
    dr_numerics   num;
    size_t        P;                       /* parameters */
    size_t        koff[DR_MAX_LAYERS];     /* kernel offsets; bias = koff + in*out (Dense) */
    size_t        ksz[DR_MAX_LAYERS];      /* the L2-regularized kernel's elements (Dense, Conv2D; else 0) */
    size_t        lsz[DR_MAX_LAYERS];      /* the layer's trainable parameters */
    uint32_t      widest;                  /* widest layer input or output */
    size_t        max_kernel;              /* largest in*out */
};

typedef struct dr_omp_graph dr_omp_graph;   /* a model beyond Dense: devices/cpu/openmp_graph.h */

typedef struct dr_omp_scratch {
    uint32_t cap;                          /* rows the workspace holds */
    uint32_t fwd_rows;                     /* rows of the last forward pass */
    uint32_t grad_n;                       /* n of the last loss_grad */
    uint32_t folded;                       /* the power of two of the share's mult that the last
                                              loss_grad put in the compact gradient (0 or 1: none) */
    float   *pre[DR_MAX_LAYERS];
    float   *act[DR_MAX_LAYERS];
    float   *dz[2];
    const float *delta0;                   /* layer 0's delta after loss_grad */
    float   *colT;
    float   *aux;
    float   *ex_loss;
    unsigned char *hit;
    dr_omp_graph *graph;                   /* the maps of a model beyond Dense, else NULL */
} dr_omp_scratch;

static inline float *dr_omp_f32(const dr_buffer *b) { return b ? (float *)b->data : NULL; }
static inline dr_acc *dr_omp_acc(const dr_buffer *b) { return b ? (dr_acc *)b->data : NULL; }
static inline dr_cacc *dr_omp_cacc(const dr_buffer *b) { return b ? (dr_cacc *)b->data : NULL; }

/* Checks that a buffer holds at least `bytes`; names it in the error. */
int dr_omp_need(const dr_buffer *b, size_t bytes, const char *what, dr_err *err);

#define PAR_PARAMS 4096   /* parameters below which share/apply stay on one thread */
/* The same for the float loops of fast numerics, elementwise (no order to
 * keep): from 2^16 parameters on the team. mlp_synthetic's 101,770 share
 * the work: fast G=256 on 2 threads, 2,000 steps in 1.19 s against 1.25 s
 * with these loops on one thread (docs/history/PERFORMANCE.md, session 10). */
#define PAR_PARAMS_F32 (1u << 16)

/* This thread's share [*lo, *hi) of n items, cut on multiples of unit: a
 * team's DR_WIDE loop (distref/wide.h) runs once per thread on it. */
void dr_omp_cut(size_t n, size_t unit, size_t *lo, size_t *hi);

/* openmp_apply.c: the backend's apply, applied_grad and apply_f32 */
int dr_omp_apply(dr_backend *b, const dr_buffer *total, uint32_t divisor, uint64_t step, dr_buffer *params,
                 dr_buffer *slots, dr_err *err);
int dr_omp_applied_grad(dr_backend *b, const dr_buffer *total, dr_numerics num, uint32_t divisor, float *out,
                        dr_err *err);
int dr_omp_apply_f32(dr_backend *b, const float *g, uint64_t step, dr_buffer *params, dr_buffer *slots, dr_err *err);
void dr_omp_clip_f32(dr_backend *b, float *g);
void dr_omp_clip_replica_f32(dr_backend *b, float *g);

/* devices/cpu/openmp_mixed.c: one example's float32 softmax cross-entropy on
 * the compute-dtype logits z[0..k), and dz[i] = RN_c(exact scale (p_i -
 * onehot_i) / G); aux: k floats of scratch */
float dr_omp_mixed_example(const float *z, uint32_t k, uint8_t label, float scale, uint32_t G, dr_dtype c,
                           float *aux, float *dz);

/* devices/cpu/openmp_kernels.c */
/* Where a fast-mode GEMM C[M x N] += op(A) op(B) over K is cut into two
 * slabs: 0 for one call, else the first row (*rows) or column of the
 * second slab. A function of the shape alone, never of the thread count. */
size_t dr_omp_sgemm_cut(size_t M, size_t N, size_t K, bool *rows);
/* The step's two GEMMs: C = round(bias + op(A) op(B)) per element (fast:
 * sgemm), and C += op(A) op(B) into exact accumulators (fast: floats, beta). */
int dr_omp_gemm_f32(const dr_backend *b, dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                    const float *A, size_t lda, const float *B, size_t ldb, const float *bias, float *C, size_t ldc);
int dr_omp_gemm_acc(dr_numerics form, dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                    const float *A, size_t lda, const float *B, size_t ldb, void *C, float beta);
/* Per-example losses (s->ex_loss), the top delta (s->dz[0]) and hits of n rows. */
void dr_omp_loss_rows(const dr_backend *b, dr_omp_scratch *s, uint32_t n, const uint8_t *labels,
                      const float *targets);
/* the table's outputs (distref/backend.h) */
int  dr_omp_outputs(dr_backend *b, dr_replica_bufs *rb, uint32_t n, float *loss, float *out, dr_err *err);
int dr_omp_forward(dr_backend *b, dr_replica_bufs *rb, uint32_t rows, uint32_t first, dr_err *err);
int dr_omp_loss_grad(dr_backend *b, dr_replica_bufs *rb, uint32_t n, bool kernel0, dr_err *err);
int dr_omp_layer0_partial(dr_backend *b, const dr_buffer *xt, const uint32_t *pix, uint32_t len,
                          uint32_t rows, const dr_buffer *params, dr_buffer *z, dr_err *err);
int dr_omp_layer0_finish(dr_backend *b, dr_replica_bufs *rb, const dr_buffer *z, uint32_t rows, dr_err *err);
int dr_omp_layer0_delta(dr_backend *b, dr_replica_bufs *rb, uint32_t n, float *out, dr_err *err);
int dr_omp_layer0_grad_rows(dr_backend *b, const dr_buffer *xt, const uint32_t *pix, uint32_t len,
                            uint32_t n, const dr_buffer *delta, dr_buffer *grad, dr_err *err);

/* devices/cpu/openmp_mixed.c: distref/backend.h's mixed_loss_grad */
int dr_omp_mixed_loss_grad(dr_backend *b, dr_replica_bufs *rb, uint32_t n, const dr_mixed_kernel *mk, dr_err *err);

#endif
