/* distref devices — the OpenMP backend's Conv2D and BatchNormalization
 * (distref/backend.h, "models beyond Dense").
 *
 * Conv2D is im2col and the step's GEMMs (devices/cpu/openmp_kernels.c):
 *   forward   col[(e, oy, ox), (ky, kx, c)] = the input under tap (ky, kx)
 *             (0 in the padding); pre = round(bias + col W) per element,
 *             W the Keras kernel (kh kw cin) x cout as it lies
 *   dW, db    gW += col^T dz exactly (dr_gemm_acc_fast), gb += dz's
 *             column sums
 *   d(input)  gathered the other way: dcol[(e, iy, ix), (ky, kx, f)] = dz
 *             at the output whose tap (ky, kx) read (iy, ix) (0 where none
 *             did), times wt[(ky, kx, f), c] = W[ky, kx, c, f]: each input
 *             gradient the exact sum over every tap that read it, rounded
 *             once, then added into its map
 * Exact numerics: the exact GEMM (each output its exact value rounded
 * once); fast numerics: sgemm, TensorFlow's float path (grad floats).
 * Spatially partitioned (set_tile), a core computes its tile: the rows of
 * its output (forward, dW) or input (d(input)) pixels, through tmp, put
 * back at those pixels; the exact GEMM gives each the unpartitioned bits.
 *
 * BatchNormalization's statistics are the engine's (strategies/graph.c):
 * these kernels give the per-replica exact sums and apply given means. */
#include "devices/cpu/openmp_graph.h"
#include "devices/seams.h"

#include <math.h>
#include <omp.h>   /* omp_get_max_threads in a planted fault (devices/seams.h) */
#include <string.h>

#define BN_EPSILON 1e-3f

/* im2col's and the gather's runs are a few taps of a few channels (3 to
 * 48 floats in resnet_synthetic): a vector loop, not a memcpy call. */
static inline void copy_run(float *restrict t, const float *restrict src, size_t n)
{
    #pragma omp simd
    for (size_t j = 0; j < n; j++) t[j] = src[j];
}

static inline void zero_run(float *t, size_t n)
{
    #pragma omp simd
    for (size_t j = 0; j < n; j++) t[j] = 0.0f;
}

/* Row (e, oy, ox) of the forward's im2col: the window's taps, 0 in the
 * padding. A window row's taps inside the map are contiguous in x (NHWC),
 * so each window row is one copy of (kx_hi - kx_lo) * ic floats between
 * zeros: the same values as tap by tap, without a test per element. */
static void im2col_row(const dr_dense *d, const float *xe, uint32_t oy, uint32_t ox, float *row)
{
    const int64_t ix0 = (int64_t)ox * d->stride - d->pad_left, k = d->ksize, ic = d->ic;
    const int64_t kx_lo = ix0 < 0 ? -ix0 : 0, kx_hi = ix0 + k > d->iw ? d->iw - ix0 : k;
    for (int64_t ky = 0; ky < k; ky++) {
        int64_t iy = (int64_t)oy * d->stride + ky - d->pad_top;
        float *t = row + ky * k * ic;
        if (iy < 0 || iy >= d->ih || kx_hi <= kx_lo) {
            zero_run(t, (size_t)(k * ic));
            continue;
        }
        const float *src = xe + ((size_t)iy * d->iw + (size_t)(ix0 + kx_lo)) * (size_t)ic;
        zero_run(t, (size_t)(kx_lo * ic));
        copy_run(t + kx_lo * ic, src, (size_t)((kx_hi - kx_lo) * ic));
        zero_run(t + kx_hi * ic, (size_t)((k - kx_hi) * ic));
    }
}

/* Output index o = t / st of tap offset t, when t lands on an output in
 * [0, n): stride 1 without a division. */
static inline bool tap_out(int64_t t, int64_t st, uint32_t n, int64_t *o)
{
    if (st == 1) { *o = t; return t >= 0 && t < n; }
    if (t < 0 || t % st) return false;
    *o = t / st;
    return *o < n;
}

/* Row (e, iy, ix) of the input gradient's gather: dz at the outputs whose
 * taps read (iy, ix), 0 where none does. */
static void gather_row(const dr_dense *d, const float *dze, uint32_t iy, uint32_t ix, float *row)
{
    const uint32_t pt = DR_SEAM_CONV_GRAD_PAD(d->pad_top), pl = DR_SEAM_CONV_GRAD_PAD(d->pad_left);
    const int64_t st = DR_SEAM_CONV_GRAD_STRIDE(d->stride), k = d->ksize, oc = d->oc;
    for (int64_t ky = 0; ky < k; ky++) {
        int64_t oy, ox;
        float *t = row + ky * k * oc;
        if (!tap_out((int64_t)iy + pt - ky, st, d->oh, &oy)) {
            zero_run(t, (size_t)(k * oc));
            continue;
        }
        for (int64_t kx = 0; kx < k; kx++, t += oc) {
            if (!tap_out((int64_t)ix + pl - kx, st, d->ow, &ox)) {
                zero_run(t, (size_t)oc);
                continue;
            }
            copy_run(t, dze + ((size_t)oy * d->ow + (size_t)ox) * (size_t)oc, (size_t)oc);
        }
    }
}

/* Spatial partitioning (devices/cpu/openmp_spatial.c): the forward's im2col
 * rows of the outputs in o = rows [o[0], o[1]) x columns [o[2], o[3]) only,
 * and the input gradient's gather rows of the inputs in i, in the same
 * order as the whole map's (example, row, column): a core's tile, read from
 * its map, which holds its tile and the halo it received. The rows are the
 * whole map's rows at those pixels, so the GEMM gives their bits. */
void dr_omp_im2col_rect(const dr_dense *d, const float *x, uint32_t n, const uint32_t o[4], float *col)
{
    const size_t kk = (size_t)d->ksize * d->ksize * d->ic, rows = o[1] - o[0], cols = o[3] - o[2];
    #pragma omp parallel for schedule(static) if (dr_omp_par((size_t)n * rows * cols * kk))
    for (uint32_t e = 0; e < n; e++)
        for (uint32_t oy = o[0]; oy < o[1]; oy++)
            for (uint32_t ox = o[2]; ox < o[3]; ox++)
                im2col_row(d, x + (size_t)e * d->in, oy, ox,
                           col + (((size_t)e * rows + oy - o[0]) * cols + ox - o[2]) * kk);
}

void dr_omp_grad_gather_rect(const dr_dense *d, const float *dz, uint32_t n, const uint32_t i[4], float *dcol)
{
    const size_t kk = (size_t)d->ksize * d->ksize * d->oc, rows = i[1] - i[0], cols = i[3] - i[2];
    #pragma omp parallel for schedule(static) if (dr_omp_par((size_t)n * rows * cols * kk))
    for (uint32_t e = 0; e < n; e++)
        for (uint32_t iy = i[0]; iy < i[1]; iy++)
            for (uint32_t ix = i[2]; ix < i[3]; ix++)
                gather_row(d, dz + (size_t)e * d->out, iy, ix,
                           dcol + (((size_t)e * rows + iy - i[0]) * cols + ix - i[2]) * kk);
}

int dr_omp_conv_forward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *in, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    dr_omp_scratch *s = rb->scratch;
    dr_omp_graph *g = s->graph;
    const float *W = dr_omp_params(rb) + dr_model_kernel_offset(m, l);
    const float *bias = dr_omp_params(rb) + dr_model_bias_offset(m, l);
    const dr_omp_rect o = dr_omp_rect_of(m, g, l, l + 1, g->rt.n);
    const bool tiled = !dr_omp_rect_whole(&o);
    const size_t kk = (size_t)d->ksize * d->ksize * d->ic, rows = o.spans * (o.r[3] - o.r[2]);
    const bool direct = d->ksize == 1 && d->stride == 1 && !d->pad_top && !d->pad_left && !tiled;
    int rc;
    if (rows == 0) return DR_OK;
    if (!direct) dr_omp_im2col_rect(d, in, g->rt.n, o.r, g->col);
    /* a tile's outputs land in tmp, then at their pixels of the map */
    if (dr_omp_mixed(g))   /* RN_c(RN_c(conv) + b), each output of the tile on its own */
        rc = dr_omp_gemm_dtype(g, DR_NO_TRANS, rows, d->oc, kk, direct ? in : g->col, kk, W, d->oc, bias, true,
                               tiled ? g->tmp : s->pre[l]);
    else
        rc = dr_omp_gemm_f32(b, DR_NO_TRANS, DR_NO_TRANS, rows, d->oc, kk, direct ? in : g->col, kk, W, d->oc, bias,
                             tiled ? g->tmp : s->pre[l], d->oc);
    if (rc) return dr_fail(err, rc, "openmp backend: out of memory in conv layer %u's GEMM", l);
    for (size_t q = 0; tiled && q < o.spans; q++) memcpy(s->pre[l] + dr_omp_span(&o, q), g->tmp + q * o.len,
                                                         o.len * sizeof(float));
    return DR_OK;
}

int dr_omp_conv_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, float *dz, float *dx, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    dr_omp_scratch *s = rb->scratch;
    dr_omp_graph *g = s->graph;
    const size_t gsz = dr_grad_bytes(b->num), k0 = dr_model_kernel_offset(m, l);
    const uint32_t src = dr_omp_src(m, l);
    const dr_omp_rect o = dr_omp_rect_of(m, g, l, l + 1, g->rt.n), i = dr_omp_rect_of(m, g, l, src, g->rt.n);
    const bool tiled = !dr_omp_rect_whole(&o);
    const size_t kk = (size_t)d->ksize * d->ksize * d->ic, rows = o.spans * (o.r[3] - o.r[2]);
    const bool direct = d->ksize == 1 && d->stride == 1 && !d->pad_top && !d->pad_left && !tiled;
    const float *in = dr_omp_map(rb, src), *W = dr_omp_params(rb) + k0;
    char *grad = rb->grad->data;
    const size_t kf = (size_t)d->ksize * d->ksize * d->oc, pix = i.spans * (i.r[3] - i.r[2]);
    float *dzt = dz;
    int rc;
    if (!direct) dr_omp_im2col_rect(d, in, g->rt.n, o.r, g->col);
    if (tiled) {   /* the tile's output gradients as rows: this core's exact partial of dW and db */
        dzt = g->tmp;
        for (size_t q = 0; q < o.spans; q++) memcpy(dzt + q * o.len, dz + dr_omp_span(&o, q), o.len * sizeof(float));
    }
    rc = dr_omp_grad_gemm(b, g, kk, d->oc, rows, direct ? in : g->col, kk, dzt, d->oc, grad + k0 * gsz);
    if (rc) return dr_fail(err, rc, "openmp backend: out of memory in conv layer %u's kernel gradient", l);
    dr_omp_bias_grad(b, g, grad + dr_model_bias_offset(m, l) * gsz, dzt, rows, d->oc, g->rt.n);
    if (!dx) return DR_OK;
    for (uint32_t t = 0; t < d->ksize * d->ksize; t++)   /* wt[(t, f), c] = W[t, c, f] */
        for (uint32_t c = 0; c < d->ic; c++)
            for (uint32_t f = 0; f < d->oc; f++)
                g->wt[((size_t)t * d->oc + f) * d->ic + c] = W[((size_t)t * d->ic + c) * d->oc + f];
    dr_omp_grad_gather_rect(d, dz, g->rt.n, i.r, g->col);
    rc = dr_omp_mixed(g) ? dr_omp_gemm_dtype(g, DR_NO_TRANS, pix, d->ic, kf, g->col, kf, g->wt, d->ic, NULL, false, g->tmp)
                         : dr_omp_gemm_f32(b, DR_NO_TRANS, DR_NO_TRANS, pix, d->ic, kf, g->col, kf, g->wt, d->ic, NULL,
                                           g->tmp, d->ic);
    if (rc) return dr_fail(err, rc, "openmp backend: out of memory in conv layer %u's input gradient", l);
    const float *tmp = g->tmp;
    #pragma omp parallel for schedule(static) if (dr_omp_par(pix * d->ic))
    for (size_t q = 0; q < i.spans; q++) {   /* the input tile's gradient, into its pixels of the map */
        float *to = dx + dr_omp_span(&i, q);
        const float *from = tmp + q * i.len;
        #pragma omp simd
        for (size_t j = 0; j < i.len; j++) to[j] += from[j];
    }
    return DR_OK;
}

/* ---- BatchNormalization ------------------------------------------------------ */
/* Its loops walk a rectangle's spans (dr_omp_rect_of: the core's tile, or
 * the whole map in its order), the channel c counted along each span. */

static float *bn_chan(const dr_omp_graph *g, const dr_dense *d, uint32_t l, uint32_t cap)
{
    return g->aux[l] + (size_t)cap * d->out;   /* mean, inv, a: oc each */
}

int dr_omp_bn_apply(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *mean, const float *var,
                    bool training, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    dr_omp_scratch *s = rb->scratch;
    dr_omp_graph *g = s->graph;
    const float *params = dr_omp_params(rb), *in = dr_omp_map(rb, dr_omp_src(m, l));
    const float *gamma = params + dr_model_kernel_offset(m, l), *beta = params + dr_model_bias_offset(m, l);
    float *mu = bn_chan(g, d, l, s->cap), *inv = mu + d->oc, *a = inv + d->oc, *xhat = g->aux[l];
    const dr_omp_rect r = dr_omp_rect_of(m, g, l, l + 1, g->rt.n);
    (void)err;
    if (!dr_omp_runs(g, l)) return DR_OK;
    for (uint32_t c = 0; c < d->oc; c++) {
        mu[c] = mean[c];
        inv[c] = 1.0f / sqrtf(var[c] + BN_EPSILON);
        a[c] = inv[c] * gamma[c];
    }
    const bool relu = d->act == DR_ACT_RELU;
    float *pre = s->pre[l], *act = s->act[l];
    /* pixel by pixel, its channels one vector loop (no store under a
     * condition, which would keep it scalar): the same expression per element */
    #pragma omp parallel for schedule(static) if (dr_omp_par(r.spans * r.len))
    for (size_t q = 0; q < r.spans; q++)
        for (size_t at = dr_omp_span(&r, q), e = at + r.len; at < e; at += d->oc) {
            #pragma omp simd
            for (uint32_t c = 0; c < d->oc; c++) {
                float shift = beta[c] - mean[c] * a[c], v = in[at + c] * a[c] + shift;
                pre[at + c] = v;
                act[at + c] = relu && !(v > 0.0f) ? 0.0f : v;
            }
            if (!training) continue;
            for (uint32_t c = 0; dr_omp_mixed(g) && c < d->oc; c++) {   /* float32 BN, cast to c */
                float v = DR_SEAM_MIXED_BN_OUT(dr_omp_rn(g, pre[at + c]), pre[at + c]);
                pre[at + c] = v;
                act[at + c] = relu && !(v > 0.0f) ? 0.0f : v;
            }
            #pragma omp simd
            for (uint32_t c = 0; c < d->oc; c++) xhat[at + c] = (in[at + c] - mean[c]) * inv[c];
        }
    return DR_OK;
}

int dr_omp_bn_normalize(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *mean, const float *var,
                        dr_err *err)
{
    const dr_omp_scratch *s = rb ? rb->scratch : NULL;
    if (!s || !s->graph || l >= b->m.nlayers || b->m.layer[l].kind != DR_LAYER_BATCH_NORM)
        return dr_fail(err, DR_EUSAGE, "openmp backend: bn_normalize of layer %u, not a BatchNormalization", l);
    return dr_omp_bn_apply(b, rb, l, mean, var, true, err);
}

/* Fast numerics' BN sums: per channel in double, each example's pixels in
 * pixel order into its own partial (g->part) on the team, the examples'
 * partials then added in example order (DR_SEAM_SUM_PARTS: the model's
 * order, never the team's), handed to the accumulator the strategy reduces
 * as two floats (the sum's high and low part), instead of an exact
 * accumulation per element (a sixth of fast cnn_synthetic's step, perf at
 * G = 64). kind: DR_BN_SUMS (x, x^2), DR_BN_CENTERED ((x - mean)^2 into s2
 * alone) or DR_BN_GRAD (y, y x: dy and dy xhat). */
static void acc_add_double(dr_acc *a, double v)
{
    float hi = (float)v;
    dr_acc_add(a, hi);
    dr_acc_add(a, (float)(v - (double)hi));
}

static void bn_part(const dr_dense *d, const dr_omp_rect *r, size_t q0, size_t q1, dr_bn_sum_kind kind,
                    const float *x, const float *y, const float *mean, double *d1, double *d2)
{
    const uint32_t oc = d->oc;
    for (uint32_t c = 0; c < oc; c++) d1[c] = d2[c] = 0.0;
    for (size_t q = q0; q < q1; q++)
        for (size_t at = dr_omp_span(r, q), e = at + r->len; at < e; at += oc) {
            const float *xp = x + at, *yp = y + at;
            if (kind == DR_BN_GRAD) {
                #pragma omp simd
                for (uint32_t c = 0; c < oc; c++) { d1[c] += yp[c]; d2[c] += (double)yp[c] * xp[c]; }
            } else if (kind == DR_BN_CENTERED) {
                #pragma omp simd
                for (uint32_t c = 0; c < oc; c++) { double v = (double)xp[c] - mean[c]; d2[c] += v * v; }
            } else {
                #pragma omp simd
                for (uint32_t c = 0; c < oc; c++) { double v = xp[c]; d1[c] += v; d2[c] += v * v; }
            }
        }
}

static void bn_sums_fast(const dr_dense *d, const dr_omp_graph *g, const dr_omp_rect *r, dr_bn_sum_kind kind,
                         const float *x, const float *y, const float *mean, dr_acc *s1, dr_acc *s2)
{
    const size_t P0 = DR_SEAM_SUM_PARTS(g->rt.n), P = P0 && r->spans % P0 == 0 ? P0 : 1, per = r->spans / P;
    const uint32_t oc = d->oc;
    double *part = g->part;
    #pragma omp parallel for schedule(static) if (dr_omp_par(r->spans * r->len))
    for (size_t p = 0; p < P; p++)
        bn_part(d, r, p * per, (p + 1) * per, kind, x, y, mean, part + 2 * p * oc, part + (2 * p + 1) * oc);
    for (uint32_t c = 0; c < oc; c++) {
        double t1 = part[c], t2 = part[oc + c];
        for (size_t p = 1; p < P; p++) { t1 += part[2 * p * oc + c]; t2 += part[(2 * p + 1) * oc + c]; }
        if (kind != DR_BN_CENTERED) acc_add_double(&s1[c], t1);
        if (s2) acc_add_double(&s2[c], t2);
    }
}

/* The backward sums, per replica, also into gamma's (dy xhat) and beta's (dy) gradient. */
static void bn_grad_sums(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_acc *s1, dr_acc *s2)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    dr_omp_scratch *s = rb->scratch;
    dr_omp_graph *g = s->graph;
    const float *dy = g->dmap[l + 1], *xhat = g->aux[l];
    const dr_omp_rect r = dr_omp_rect_of(m, g, l, l + 1, g->rt.n);
    size_t gsz = dr_grad_bytes(b->num);
    char *grad = rb->grad->data;
    dr_acc t1[256], t2[256];
    if (!dr_omp_runs(g, l)) return;
    dr_omp_unactivate(m, l, s, g->rt.n);
    for (uint32_t c = 0; c < d->oc; c++) { dr_acc_init(&t1[c]); dr_acc_init(&t2[c]); }
    if (b->num == DR_NUMERICS_FAST || dr_omp_mixed_fast(g))   /* the fast mixed step: added exactly below */
        bn_sums_fast(d, g, &r, DR_BN_GRAD, xhat, dy, NULL, t1, t2);
    else
        for (size_t q = 0; q < r.spans; q++)
            for (size_t j = 0, c = 0, at = dr_omp_span(&r, q); j < r.len; j++, c = c + 1 < d->oc ? c + 1 : 0) {
                size_t i = at + j;
                dr_acc_add(&t1[c], dy[i]);
                dr_acc_add_prod(&t2[c], dy[i], xhat[i]);
            }
    for (uint32_t c = 0; c < d->oc; c++) {
        void *gg = grad + (dr_model_kernel_offset(m, l) + c) * gsz, *gb = grad + (dr_model_bias_offset(m, l) + c) * gsz;
        if (b->num == DR_NUMERICS_FAST) {
            *(float *)gg = *(float *)gg + dr_acc_round(&t2[c]);
            *(float *)gb = *(float *)gb + dr_acc_round(&t1[c]);
        } else {
            dr_acc_merge(gg, &t2[c]);
            dr_acc_merge(gb, &t1[c]);
        }
        dr_acc_merge(&s1[c], &t1[c]);
        dr_acc_merge(&s2[c], &t2[c]);
    }
}

int dr_omp_bn_sums(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_bn_sum_kind kind, const float *mean,
                   dr_acc *s1, dr_acc *s2, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    const dr_omp_scratch *s = rb ? rb->scratch : NULL;
    const float *in;
    dr_omp_rect r;
    if (!s || !s->graph || l >= m->nlayers || d->kind != DR_LAYER_BATCH_NORM || d->oc > 256)
        return dr_fail(err, DR_EUSAGE, "openmp backend: bn_sums of layer %u, not a BatchNormalization of <= 256 "
                       "channels", l);
    if (kind == DR_BN_GRAD) { bn_grad_sums(b, rb, l, s1, s2); return DR_OK; }
    if (!dr_omp_runs(s->graph, l)) return DR_OK;
    in = dr_omp_map(rb, dr_omp_src(m, l));
    r = dr_omp_rect_of(m, s->graph, l, l + 1, s->graph->rt.n);
    if (b->num == DR_NUMERICS_FAST || dr_omp_mixed_fast(s->graph)) {
        bn_sums_fast(d, s->graph, &r, kind, in, in, mean, s1, s2);
        return DR_OK;
    }
    for (size_t q = 0; q < r.spans; q++)
        for (size_t j = 0, c = 0, at = dr_omp_span(&r, q); j < r.len; j++, c = c + 1 < d->oc ? c + 1 : 0) {
            float v = in[at + j];
            if (kind == DR_BN_CENTERED) {
                float t = v - mean[c];
                dr_acc_add(&s2[c], t * t);
                continue;
            }
            dr_acc_add(&s1[c], v);
            if (s2) dr_acc_add_prod(&s2[c], v, v);
        }
    return DR_OK;
}

int dr_omp_bn_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *mean_dy,
                       const float *mean_dyxhat, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    const dr_omp_scratch *s = rb ? rb->scratch : NULL;
    const dr_omp_graph *g;
    uint32_t src = dr_omp_src(m, l);
    const float *a, *dy, *xhat;
    float *dx;
    dr_omp_rect r;
    if (!s || !s->graph || l >= m->nlayers || d->kind != DR_LAYER_BATCH_NORM)
        return dr_fail(err, DR_EUSAGE, "openmp backend: bn_backward of layer %u, not a BatchNormalization", l);
    if (src == 0 || !dr_omp_runs(s->graph, l)) return DR_OK;
    g = s->graph;
    a = bn_chan(g, d, l, s->cap) + 2 * (size_t)d->oc;
    dy = g->dmap[l + 1];
    xhat = g->aux[l];
    dx = g->dmap[src];
    r = dr_omp_rect_of(m, g, l, l + 1, g->rt.n);
    #pragma omp parallel for schedule(static) if (dr_omp_par(r.spans * r.len))
    for (size_t q = 0; q < r.spans; q++)
        for (size_t at = dr_omp_span(&r, q), e = at + r.len; at < e; at += d->oc) {
            if (dr_omp_mixed(g)) {   /* each term rounded to the compute dtype */
                for (uint32_t c = 0; c < d->oc; c++) {
                    size_t i = at + c;
                    float t = (dy[i] - mean_dy[c]) - xhat[i] * mean_dyxhat[c];
                    dx[i] += dr_omp_rn(g, a[c] * t);
                }
                continue;
            }
            #pragma omp simd
            for (uint32_t c = 0; c < d->oc; c++) {
                size_t i = at + c;
                float t = (dy[i] - mean_dy[c]) - xhat[i] * mean_dyxhat[c];
                dx[i] += a[c] * t;
            }
        }
    return DR_OK;
}
