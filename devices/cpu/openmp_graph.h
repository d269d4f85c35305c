/* distref devices/cpu/ — the OpenMP backend's kernels for models beyond
 * Dense (private): devices/cpu/openmp_graph.c (the pass, pooling, Flatten,
 * Dropout, Add, Dense) and devices/cpu/openmp_conv.c (Conv2D by im2col and
 * the step's GEMMs, BatchNormalization). distref/backend.h states what each
 * op returns.
 *
 * A replica's maps (dr_omp_graph, beside dr_omp_scratch's pre/act, which
 * hold every layer's pre-activation and output, cap x out_l):
 *   dmap[k]  cap x out of layer k - 1   d(loss)/d(map k), k >= 1
 *   aux[l]   Dropout: the multipliers (0 or 1/(1-rate)); BatchNormalization:
 *            xhat (cap x out), then per channel mean, inv, a = inv gamma
 *   idx[l]   MaxPooling2D: each output's winner, an offset in the example's input
 *   col      the largest conv's im2col (forward, dW) or gradient gather (dx)
 *   wt       a conv kernel rearranged for d(input): (kh kw cout) x cin
 *   tmp      a d(input) before it is added into its map
 *   colT     a bias gradient's transpose (exact) or its partials (fast);
 *            red: GlobalAveragePooling2D's sums
 * The mixed step (rt.compute not float32, openmp_graph.c's header;
 * openmp_graph_mixed.c):
 *   wc, xc   the weights the layers read (Conv2D's and Dense's rounded to
 *            the compute dtype) and the input rounded to it
 *   macc     a GEMM's exact rows before their rounding (dr_omp_gemm_dtype)
 */
#ifndef DISTREF_DEVICES_OPENMP_GRAPH_H
#define DISTREF_DEVICES_OPENMP_GRAPH_H

#include "devices/cpu/openmp_backend.h"

struct dr_omp_graph {
    dr_graph_rt rt;
    float      *dmap[DR_MAX_LAYERS + 1];
    float      *aux[DR_MAX_LAYERS];
    uint32_t   *idx[DR_MAX_LAYERS];
    float      *col, *wt, *tmp, *colT;
    dr_acc     *red;
    double     *part;   /* fast BN sums' partials: 2 x oc doubles an example */
    /* spatial partitioning (the tpu strategy, devices/cpu/openmp_spatial.c):
     * this core's tile of every map for the layers before tile->lp, which
     * compute only it; from lp on core 0 computes the whole maps and the
     * other cores nothing. NULL: whole maps (unpartitioned). */
    const dr_tile *tile;
    uint32_t    core;
    float      *wc, *xc;
    dr_acc     *macc;
    size_t      nmacc;
    float      *wf;     /* the fast mixed step: a layer's float32 kernel or bias gradient */
};

/* v rounded to the pass's compute dtype (float32: v itself, no call) */
static inline float dr_omp_rn(const dr_omp_graph *g, float v)
{
    return g->rt.compute == DR_DTYPE_F32 ? v : dr_round_to_dtype(v, g->rt.compute);
}
static inline bool dr_omp_mixed(const dr_omp_graph *g) { return g->rt.compute != DR_DTYPE_F32; }
/* the mixed step under --numerics=fast (dr_graph_rt.fast; rb->grad still exact accumulators) */
static inline bool dr_omp_mixed_fast(const dr_omp_graph *g) { return dr_omp_mixed(g) && g->rt.fast; }
/* the weights the layers read: rb->params, or the mixed step's wc */
const float *dr_omp_params(const dr_replica_bufs *rb);
/* The mixed step's GEMM: C[M x N] = RN_c(exact A op(B) (+ bias[j])), A
 * row-major (lda), B K x N (NO_TRANS) or N x K (TRANS); bias_after: the
 * exact product rounded to c first, then RN_c(that + bias[j]) (Conv2D
 * then BiasAdd). Its rows go through macc in chunks; DR_ENOMEM when the
 * exact GEMM's scratch cannot be had. Fast (dr_omp_mixed_fast): the
 * float32 GEMM into C, then the same roundings of its float values, the
 * bias added in float32 (openmp_mixed.c's fast Dense step alike). */
/* openmp_graph_mixed.c: the mixed step's copies (wc, xc, macc, wf) at graph_begin */
int dr_omp_mixed_begin(dr_backend *b, dr_replica_bufs *rb, dr_omp_graph *g, uint32_t cap, dr_err *err);
/* grad's n accumulators += the float32 values f, each exactly */
void dr_omp_acc_add_floats(dr_acc *grad, const float *f, size_t n);
int dr_omp_gemm_dtype(dr_omp_graph *g, dr_trans tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                      const float *B, size_t ldb, const float *bias, bool bias_after, float *C);

/* The rectangle of map k (rows r[0]..r[1], columns r[2]..r[3] of H x W x C)
 * that layer l computes over n examples: n * (r[1] - r[0]) spans of len
 * floats, in the whole map's order (example, row, column), so a loop over
 * the spans visits the whole map's elements in its order when unpartitioned. */
typedef struct dr_omp_rect { uint32_t H, W, C, r[4]; size_t spans, len; } dr_omp_rect;
dr_omp_rect dr_omp_rect_of(const dr_model_spec *m, const dr_omp_graph *g, uint32_t l, uint32_t k, uint32_t n);
static inline size_t dr_omp_span(const dr_omp_rect *a, size_t q)
{
    size_t rows = a->r[1] - a->r[0];
    return (((q / rows) * a->H + a->r[0] + q % rows) * a->W + a->r[2]) * a->C;
}
/* Whether a layer's loop over `cells` floats runs on the OpenMP team: an
 * element-wise loop (each element its own expression, any sum in a fixed
 * order that does not follow the threads) has the same bits on any team, so
 * it runs on the team when the map is large enough to pay for the fork
 * (the smallest resnet_synthetic map at G = 32 is 25,088 floats) and the
 * caller is not already on one (the tpu step's cores, openmp_spatial.c). */
#define DR_OMP_PAR_MIN ((size_t)1 << 14)
bool dr_omp_par(size_t cells);
static inline bool dr_omp_rect_whole(const dr_omp_rect *a)
{
    return a->r[0] == 0 && a->r[1] == a->H && a->r[2] == 0 && a->r[3] == a->W;
}
/* whether this core computes layer l (unpartitioned: always) */
bool dr_omp_runs(const dr_omp_graph *g, uint32_t l);

int  dr_omp_graph_open(const dr_backend *b, dr_omp_scratch *s, uint32_t rows, dr_err *err);
void dr_omp_graph_free(dr_omp_graph *g);
/* layer l's input map (0: the model's input) and map k's floats */
uint32_t dr_omp_src(const dr_model_spec *m, uint32_t l);
const float *dr_omp_map(const dr_replica_bufs *rb, uint32_t k);
void dr_omp_unactivate(const dr_model_spec *m, uint32_t l, const dr_omp_scratch *s, uint32_t n);
void dr_omp_bias_grad(const dr_backend *b, dr_omp_graph *g, void *gb, const float *dz, size_t rows, uint32_t out,
                      uint32_t parts);
/* a kernel gradient: grad (b->num's form) += A^T B, A K x M (lda), B K x N
 * (ldb); the fast mixed step: A^T B's float32 GEMM added exactly */
int dr_omp_grad_gemm(const dr_backend *b, dr_omp_graph *g, size_t M, size_t N, size_t K, const float *A, size_t lda,
                     const float *B, size_t ldb, void *grad);

/* the table's ops (distref/backend.h) */
int dr_omp_graph_begin(dr_backend *b, dr_replica_bufs *rb, uint32_t n, const dr_graph_rt *rt, dr_err *err);
int dr_omp_layer_forward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_err *err);
int dr_omp_graph_loss(dr_backend *b, dr_replica_bufs *rb, dr_err *err);
int dr_omp_layer_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_err *err);
int dr_omp_bn_sums(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_bn_sum_kind kind, const float *mean,
                   dr_acc *s1, dr_acc *s2, dr_err *err);
int dr_omp_bn_normalize(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *mean, const float *var,
                        dr_err *err);
int dr_omp_bn_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *mean_dy,
                       const float *mean_dyxhat, dr_err *err);

/* openmp_conv.c */
/* 2x2 max pooling of n examples: out, and win = each output's window
 * element (its flat index within the example's input) of the outputs in
 * rows [o[0], o[1]) x columns [o[2], o[3]), the first maximum
 * in row-major order on a tie, as TensorFlow 2.21 routes the gradient
 * (docs/MODELS.md); the backward sends dout to x at win. */
void dr_omp_maxpool(const dr_dense *d, const float *x, uint32_t n, const uint32_t o[4], float *out, uint32_t *win);
int dr_omp_conv_forward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *in, dr_err *err);
int dr_omp_conv_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, float *dz, float *dx, dr_err *err);
/* a tile's im2col rows (outputs o) and gradient gather rows (inputs i):
 * rows [r[0], r[1]) x columns [r[2], r[3]) of the map */
void dr_omp_im2col_rect(const dr_dense *d, const float *x, uint32_t n, const uint32_t o[4], float *col);
void dr_omp_grad_gather_rect(const dr_dense *d, const float *dz, uint32_t n, const uint32_t i[4], float *dcol);
/* spatial partitioning (openmp_spatial.c): the table's set_tile and spatial_exchange */
int dr_omp_set_tile(dr_backend *b, dr_replica_bufs *rb, const dr_tile *tile, uint32_t core, dr_err *err);
int dr_omp_spatial_exchange(dr_backend *b, dr_replica_bufs *const *cores, const dr_spatial_plan *p, uint32_t l,
                            bool grad, uint64_t *halo, uint64_t *gather, uint64_t *link, dr_err *err);
/* BatchNormalization with given statistics (training: xhat kept) */
int dr_omp_bn_apply(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *mean, const float *var,
                    bool training, dr_err *err);

#endif
