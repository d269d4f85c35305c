/* distref devices — the OpenMP backend's kernels for models beyond Dense
 * (distref/backend.h, "models beyond Dense"): one layer at a time on one
 * replica, driven by the engine in lock step over its replicas
 * (strategies/graph.c). Written for the contract, independently of the
 * reference (ref/layers.c); Conv2D and BatchNormalization are
 * devices/cpu/openmp_conv.c.
 *
 * Maps: k = 0 is rb->x, k = l + 1 layer l's output (s->act[l]); their
 * gradients g->dmap[k]. A backward adds d(input) into dmap[src], so that a
 * residual's two paths meet, in the layers' order from the top, one float
 * addition per element and path: the reference's order, hence its bits.
 *
 * The mixed step (rt.compute = c, float16 or bfloat16; exact numerics):
 * the contract's roundings, measured in TensorFlow 2.21 (docs/
 * TRAINING_FEATURES.md "Mixed precision with the models beyond Dense"):
 * graph_begin rounds Conv2D's and Dense's weights and the input to c (wc,
 * xc; BatchNormalization's stay float32); each output is one rounding to c
 * of its exact value: Dense RN_c(x W + b), Conv2D RN_c(RN_c(conv) + b),
 * GlobalAveragePooling2D RN_c(mean), Add RN_c(a + b), Dropout RN_c(x *
 * RN_c(scale)), BatchNormalization its float32 result rounded; the loss
 * float32 on the c logits, its delta RN_c(scale (p - y) / G); each map's
 * gradient rounded to c before its layer's backward (a fork's two paths
 * summed, then rounded once), each input gradient RN_c of its exact value;
 * the weight gradients stay exact sums, gamma's and beta's too.
 * Under --numerics=fast (rt.fast) the roundings are the same, each of a
 * float32 value: the GEMMs are the fast GEMM's (sgemm, cut by the shapes
 * alone) on the rounded operands, a kernel gradient its float32 GEMM and a
 * bias gradient and the BN sums their fixed-order float sums (one partial
 * an example), each added exactly into rb->grad (the cross-replica sum
 * stays exact, as the fast Dense step's, openmp_mixed.c): no sum follows
 * the team, so the bits are the same on any number of threads.
 */
#include "devices/cpu/openmp_graph.h"
#include "distref/dropout_masks.h"
#include "distref/fastgemm.h"
#include "distref/rng.h"
#include "devices/seams.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

uint32_t dr_omp_src(const dr_model_spec *m, uint32_t l)
{
    return m->layer[l].src ? m->layer[l].src : l;
}

const float *dr_omp_map(const dr_replica_bufs *rb, uint32_t k)
{
    const dr_omp_scratch *s = rb->scratch;
    if (k) return s->act[k - 1];
    return s->graph && dr_omp_mixed(s->graph) ? s->graph->xc : dr_omp_f32(rb->x);
}

const float *dr_omp_params(const dr_replica_bufs *rb)
{
    const dr_omp_scratch *s = rb->scratch;
    return s->graph && dr_omp_mixed(s->graph) ? s->graph->wc : dr_omp_f32(rb->params);
}

bool dr_omp_par(size_t cells)
{
    return cells >= DR_OMP_PAR_MIN && !omp_in_parallel();
}

bool dr_omp_runs(const dr_omp_graph *g, uint32_t l)
{
    return !g->tile || g->core == 0 || l < g->tile->lp;
}

dr_omp_rect dr_omp_rect_of(const dr_model_spec *m, const dr_omp_graph *g, uint32_t l, uint32_t k, uint32_t n)
{
    dr_omp_rect a;
    dr_model_map(m, k, &a.H, &a.W, &a.C);
    if (g->tile && l < g->tile->lp) {
        memcpy(a.r, g->tile->rect[k], sizeof a.r);
    } else {
        a.r[0] = 0; a.r[1] = a.H; a.r[2] = 0; a.r[3] = a.W;
    }
    a.spans = (size_t)n * (a.r[1] - a.r[0]);
    a.len = (size_t)(a.r[3] - a.r[2]) * a.C;
    return a;
}

/* ---- workspace ----------------------------------------------------------- */

void dr_omp_graph_free(dr_omp_graph *g)
{
    if (!g) return;
    for (uint32_t k = 0; k <= DR_MAX_LAYERS; k++) free(g->dmap[k]);
    for (uint32_t l = 0; l < DR_MAX_LAYERS; l++) { free(g->aux[l]); free(g->idx[l]); }
    free(g->col); free(g->wt); free(g->tmp); free(g->colT); free(g->red); free(g->part);
    free(g->wc); free(g->xc); free(g->macc); free(g->wf);
    free(g);
}

/* The largest im2col (forward) or gradient gather (backward) of a conv, per row. */
static size_t conv_col_per_row(const dr_dense *d)
{
    size_t k2 = (size_t)d->ksize * d->ksize;
    size_t f = (size_t)d->oh * d->ow * k2 * d->ic, b = (size_t)d->ih * d->iw * k2 * d->oc;
    return f > b ? f : b;
}

int dr_omp_graph_open(const dr_backend *b, dr_omp_scratch *s, uint32_t rows, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    size_t cap = rows ? rows : 1, col = 1, wt = 1, wide = 1, red = 1, part = 1;
    dr_omp_graph *g = calloc(1, sizeof *g);
    bool ok = g != NULL;
    for (uint32_t l = 0; ok && l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        size_t out = cap * d->out;
        if (d->in > wide) wide = d->in;
        if (d->out > wide) wide = d->out;
        if (d->kind == DR_LAYER_CONV2D) {
            if (conv_col_per_row(d) * cap > col) col = conv_col_per_row(d) * cap;
            if ((size_t)d->ksize * d->ksize * d->ic * d->oc > wt) wt = (size_t)d->ksize * d->ksize * d->ic * d->oc;
        }
        if (d->kind == DR_LAYER_GLOBAL_AVG_POOL2D && cap * d->oc > red) red = cap * d->oc;
        if (d->kind == DR_LAYER_BATCH_NORM && 2 * cap * d->oc > part) part = 2 * cap * d->oc;
        g->dmap[l + 1] = malloc(out * sizeof(float));
        if (d->kind == DR_LAYER_DROPOUT) g->aux[l] = malloc(out * sizeof(float));
        if (d->kind == DR_LAYER_BATCH_NORM) g->aux[l] = malloc((out + 3 * (size_t)d->oc) * sizeof(float));
        if (d->kind == DR_LAYER_MAX_POOL2D) g->idx[l] = malloc(out * sizeof(uint32_t));
        ok = g->dmap[l + 1] && (g->aux[l] || (d->kind != DR_LAYER_DROPOUT && d->kind != DR_LAYER_BATCH_NORM)) &&
             (g->idx[l] || d->kind != DR_LAYER_MAX_POOL2D);
    }
    if (ok) {
        g->col = malloc(col * sizeof(float));
        g->wt = malloc(wt * sizeof(float));
        g->tmp = malloc(cap * wide * sizeof(float));
        g->colT = malloc(cap * wide * sizeof(float));
        g->red = malloc(red * sizeof(dr_acc));
        g->part = malloc(part * sizeof(double));
        ok = g->col && g->wt && g->tmp && g->colT && g->red && g->part;
    }
    if (!ok) {
        dr_omp_graph_free(g);
        return dr_fail(err, DR_ENOMEM, "openmp backend: out of memory for a replica's maps of %u rows", rows);
    }
    s->graph = g;
    return DR_OK;
}

static int need_graph(const dr_backend *b, const dr_replica_bufs *rb, uint32_t l, dr_err *err)
{
    const dr_omp_scratch *s = rb ? rb->scratch : NULL;
    if (!s || !s->graph)
        return dr_fail(err, DR_ESTATE, "openmp backend: replica workspace without maps (a Dense model's?)");
    if (l >= b->m.nlayers)
        return dr_fail(err, DR_EUSAGE, "openmp backend: layer %u of a %u-layer model", l, b->m.nlayers);
    return DR_OK;
}

/* ---- the pass ------------------------------------------------------------ */

int dr_omp_graph_begin(dr_backend *b, dr_replica_bufs *rb, uint32_t n, const dr_graph_rt *rt, dr_err *err)
{
    dr_omp_scratch *s;
    int rc;
    if ((rc = need_graph(b, rb, 0, err))) return rc;
    s = rb->scratch;
    if (n > s->cap) return dr_fail(err, DR_EUSAGE, "openmp backend: %u rows, the workspace holds %u", n, s->cap);
    if ((rc = dr_omp_need(rb->grad, b->P * dr_grad_bytes(b->num), "grad", err)) ||
        (rc = dr_omp_need(rb->loss, dr_sum_bytes(b->num), "loss", err)) ||
        (rc = dr_omp_need(rb->params, b->P * sizeof(float), "params", err)) ||
        (rc = dr_omp_need(rb->x, (size_t)n * b->m.layer[0].in * sizeof(float), "x", err)))
        return rc;
    if (b->num == DR_NUMERICS_EXACT_COMPACT)
        return dr_fail(err, DR_EUNSUPPORTED, "openmp backend: compact gradients for a model beyond Dense");
    s->graph->rt = *rt;
    s->graph->rt.n = n;
    if (dr_omp_mixed(s->graph) && (rc = dr_omp_mixed_begin(b, rb, s->graph, s->cap, err))) return rc;
    s->fwd_rows = n;
    memset(rb->grad->data, 0, b->P * dr_grad_bytes(b->num));
    memset(rb->loss->data, 0, dr_sum_bytes(b->num));
    if (b->num != DR_NUMERICS_FAST) dr_acc_init(dr_omp_acc(rb->loss));
    rb->correct = 0;
    return DR_OK;
}

/* out = relu(pre) or pre, over the rectangle a. The layers' element-wise
 * loops run their spans on the team (dr_omp_par) and each span as one
 * vector loop (omp simd: -O2 leaves a loop with a remainder scalar). */
static void activate(const dr_dense *d, const float *pre, float *out, const dr_omp_rect *a)
{
    #pragma omp parallel for schedule(static) if (dr_omp_par(a->spans * a->len))
    for (size_t q = 0; q < a->spans; q++) {
        size_t at = dr_omp_span(a, q);
        if (d->act != DR_ACT_RELU) { if (out != pre) memcpy(out + at, pre + at, a->len * sizeof *out); continue; }
        const float *p = pre + at;
        float *o = out + at;
        #pragma omp simd
        for (size_t i = 0; i < a->len; i++) o[i] = p[i] > 0.0f ? p[i] : 0.0f;
    }
}

/* 2x2, stride 2: the first maximum of the window in row-major order
 * (openmp_graph.h). */
void dr_omp_maxpool(const dr_dense *d, const float *x, uint32_t n, const uint32_t o[4], float *out, uint32_t *win)
{
    #pragma omp parallel for schedule(static) if (dr_omp_par((size_t)n * d->out))
    for (uint32_t e = 0; e < n; e++)
        for (uint32_t oy = o[0]; oy < o[1]; oy++)
            for (uint32_t ox = o[2]; ox < o[3]; ox++)
                for (uint32_t c = 0; c < d->oc; c++) {
                    size_t base = (size_t)e * d->in, best = (((size_t)2 * oy) * d->iw + 2 * ox) * d->ic + c;
                    for (uint32_t k = 1; k < 4; k++) {
                        size_t i = (((size_t)2 * oy + k / 2) * d->iw + 2 * ox + k % 2) * d->ic + c;
                        if (DR_SEAM_POOL_BEATS(x[base + i], x[base + best])) best = i;
                    }
                    size_t at = (size_t)e * d->out + ((size_t)oy * d->ow + ox) * d->oc + c;
                    out[at] = x[base + best];
                    win[at] = (uint32_t)best;
                }
}

static void gap(const dr_dense *d, const float *x, uint32_t n, float *out, dr_acc *a, dr_dtype ct)
{
    uint32_t hw = d->ih * d->iw;
    for (size_t i = 0; i < (size_t)n * d->ic; i++) dr_acc_init(&a[i]);
    #pragma omp parallel for schedule(static) if (dr_omp_par((size_t)n * d->in))   /* an example's sums its own */
    for (uint32_t e = 0; e < n; e++)
        for (uint32_t p = 0; p < hw; p++)
            for (uint32_t c = 0; c < d->ic; c++) dr_acc_add(&a[(size_t)e * d->ic + c], x[((size_t)e * hw + p) * d->ic + c]);
    for (size_t i = 0; i < (size_t)n * d->ic; i++) out[i] = dr_acc_round_div_dtype(&a[i], hw, ct);
}

static void dropout(const dr_dense *d, uint32_t l, const dr_graph_rt *rt, const float *x, float *mult, float *out)
{
    /* the mixed step: x * RN_c(scale), rounded to c (ref/layers.c's, measured for float16) */
    const float scale = dr_round_to_dtype(1.0f / (1.0f - d->rate), rt->compute);
    const uint64_t stream = DR_GRAPH_STREAM_DROPOUT + l + (rt->step << 24);
    size_t cells = (size_t)rt->n * d->out;
    if (!rt->training || d->rate == 0.0f) {
        memcpy(out, x, cells * sizeof *out);
        for (size_t i = 0; i < cells; i++) mult[i] = 1.0f;
        return;
    }
    for (uint32_t r = 0; r < rt->n; r++)
        for (uint32_t u = 0; u < d->out; u++) {
            uint64_t key = (uint64_t)DR_SEAM_DROPOUT_KEY(rt->ids ? rt->ids[r] : r, r) * d->out + u;
            /* a masks file: the row of the global batch (the replica's slice starts at row0) */
            bool keep = rt->masks
                      ? dr_dropout_masks_keep(rt->masks, rt->step, l, rt->row0 + DR_SEAM_DROPOUT_MASK_ROW(r, rt->n), u)
                      : dr_rng_uniform(rt->seed, stream, key) >= d->rate;
            size_t i = (size_t)r * d->out + u;
            mult[i] = keep ? scale : 0.0f;
            out[i] = keep ? dr_round_to_dtype(x[i] * scale, rt->compute) : 0.0f;
        }
}

int dr_omp_layer_forward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    dr_omp_scratch *s;
    dr_omp_graph *g;
    const float *in, *params;
    size_t cells;
    dr_omp_rect a;
    int rc;
    if ((rc = need_graph(b, rb, l, err))) return rc;
    s = rb->scratch;
    g = s->graph;
    if (!dr_omp_runs(g, l)) return DR_OK;
    in = dr_omp_map(rb, dr_omp_src(m, l));
    params = dr_omp_params(rb);
    cells = (size_t)g->rt.n * d->out;
    a = dr_omp_rect_of(m, g, l, l + 1, g->rt.n);
    switch (d->kind) {
    case DR_LAYER_DENSE: {
        const float *W = params + dr_model_kernel_offset(m, l);
        rc = dr_omp_mixed(g) ? dr_omp_gemm_dtype(g, DR_NO_TRANS, g->rt.n, d->out, d->in, in, d->in, W, d->out,
                                                 W + (size_t)d->in * d->out, false, s->pre[l])
                             : dr_omp_gemm_f32(b, DR_NO_TRANS, DR_NO_TRANS, g->rt.n, d->out, d->in, in, d->in, W,
                                               d->out, W + (size_t)d->in * d->out, s->pre[l], d->out);
        if (rc) return dr_fail(err, rc, "openmp backend: out of memory in layer %u's forward GEMM", l);
        break;
    }
    case DR_LAYER_CONV2D:
        if ((rc = dr_omp_conv_forward(b, rb, l, in, err))) return rc;
        break;
    case DR_LAYER_MAX_POOL2D: dr_omp_maxpool(d, in, g->rt.n, a.r, s->pre[l], g->idx[l]); break;
    case DR_LAYER_GLOBAL_AVG_POOL2D: gap(d, in, g->rt.n, s->pre[l], g->red, g->rt.compute); break;
    case DR_LAYER_FLATTEN: memcpy(s->pre[l], in, cells * sizeof *in); break;
    case DR_LAYER_DROPOUT:
        dropout(d, l, &g->rt, in, g->aux[l], s->act[l]);
        memcpy(s->pre[l], s->act[l], cells * sizeof(float));
        return DR_OK;
    case DR_LAYER_ADD: {
        const float *f = dr_omp_map(rb, d->from < 0 ? 0 : (uint32_t)d->from + 1);
        float *pre = s->pre[l];
        #pragma omp parallel for schedule(static) if (dr_omp_par(a.spans * a.len))
        for (size_t q = 0; q < a.spans; q++) {
            size_t at = dr_omp_span(&a, q);
            if (dr_omp_mixed(g)) {
                for (size_t i = at; i < at + a.len; i++) pre[i] = dr_omp_rn(g, in[i] + f[i]);
                continue;
            }
            #pragma omp simd
            for (size_t i = at; i < at + a.len; i++) pre[i] = in[i] + f[i];
        }
        break;
    }
    case DR_LAYER_BATCH_NORM: {   /* inference: the moving statistics */
        const float *st = params + dr_model_state_offset(m, l), *mean, *var;
        DR_SEAM_BN_INFER_STATE(st, d->oc, mean, var);
        return dr_omp_bn_apply(b, rb, l, mean, var, false, err);
    }
    }
    activate(d, s->pre[l], s->act[l], &a);
    return DR_OK;
}

/* ---- loss ------------------------------------------------------------------ */

/* The mixed step's: float32 on the logits z in c, the delta in c with the
 * loss scale and 1 / G (openmp_mixed.c's, the Dense step's). */
static int mixed_loss(dr_replica_bufs *rb, dr_omp_graph *g, const float *z, uint32_t nout, const uint8_t *labels,
                      float *dz)
{
    dr_acc *loss = dr_omp_acc(rb->loss);
    for (uint32_t r = 0; r < g->rt.n; r++) {
        const float *zr = z + (size_t)r * nout;
        uint32_t best = 0;
        for (uint32_t i = 1; i < nout; i++) if (zr[i] > zr[best]) best = i;
        rb->correct += best == labels[r];
        dr_acc_add(loss, dr_omp_mixed_example(zr, nout, labels[r], g->rt.loss_scale, g->rt.G, g->rt.compute, g->tmp,
                                              dz + (size_t)r * nout));
    }
    return DR_OK;
}

int dr_omp_graph_loss(dr_backend *b, dr_replica_bufs *rb, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    uint32_t L = m->nlayers, nout = m->layer[L - 1].out, n;
    dr_omp_scratch *s;
    dr_omp_graph *g;
    const uint8_t *labels;
    int rc;
    if ((rc = need_graph(b, rb, 0, err))) return rc;
    s = rb->scratch;
    g = s->graph;
    n = g->rt.n;
    for (uint32_t k = 1; k < L; k++) memset(g->dmap[k], 0, (size_t)n * m->layer[k - 1].out * sizeof(float));
    if (n == 0 || !dr_omp_runs(g, L - 1)) return DR_OK;   /* partitioned: the loss is core 0's */
    labels = rb->labels ? (const uint8_t *)rb->labels->data : NULL;
    if (m->loss != DR_LOSS_MSE) {
        if (!labels) return dr_fail(err, DR_EUSAGE, "openmp backend: a cross-entropy loss needs labels");
        for (uint32_t r = 0; r < n; r++)
            if (labels[r] >= nout)
                return dr_fail(err, DR_EUSAGE, "openmp backend: example %u has label %u, outside 0..%u",
                               r, labels[r], nout - 1);
    } else if ((rc = dr_omp_need(rb->targets, (size_t)n * nout * sizeof(float), "targets", err))) {
        return rc;
    }
    if (dr_omp_mixed(g)) return mixed_loss(rb, g, s->pre[L - 1], nout, labels, g->dmap[L]);
    dr_omp_loss_rows(b, s, n, labels, dr_omp_f32(rb->targets));
    if (b->num == DR_NUMERICS_FAST) {
        float t = 0.0f;
        for (uint32_t r = 0; r < n; r++) t = t + s->ex_loss[r];
        *dr_omp_f32(rb->loss) = t;
    } else {
        dr_acc_add_sum(dr_omp_acc(rb->loss), s->ex_loss, n);
    }
    for (uint32_t r = 0; r < n; r++) rb->correct += s->hit[r];
    memcpy(g->dmap[L], s->dz[0], (size_t)n * nout * sizeof(float));
    return DR_OK;
}

/* ---- backward ---------------------------------------------------------------- */

/* gb[j] += the column sums of dz (rows x out): exact; or fast in float, in
 * `parts` equal runs of rows (a conv: one an example), each summed row by
 * row into its own partial (colT, parts x out) on the team, the partials
 * then added into gb in their order: the order is the model's, never the
 * team's, so the bits are the same on any number of threads. */
static void bias_sums_fast(float *f, const float *dz, size_t rows, uint32_t out, uint32_t parts, float *colT)
{
    const size_t P = DR_SEAM_SUM_PARTS(parts), per = P ? rows / P : 0;
    if (P <= 1 || per * P != rows) {
        for (size_t r = 0; r < rows; r++)
            for (uint32_t j = 0; j < out; j++) f[j] = f[j] + dz[r * out + j];
        return;
    }
    #pragma omp parallel for schedule(static) if (dr_omp_par(rows * out))
    for (size_t p = 0; p < P; p++) {
        float *t = colT + p * out;
        const float *z = dz + p * per * out;
        for (uint32_t j = 0; j < out; j++) t[j] = z[j];
        for (size_t r = 1; r < per; r++)
            for (uint32_t j = 0; j < out; j++) t[j] = t[j] + z[r * out + j];
    }
    for (size_t p = 0; p < P; p++)
        for (uint32_t j = 0; j < out; j++) f[j] = f[j] + colT[p * out + j];
}

void dr_omp_bias_grad(const dr_backend *b, dr_omp_graph *g, void *gb, const float *dz, size_t rows, uint32_t out,
                      uint32_t parts)
{
    float *colT = g->colT;
    if (dr_omp_mixed_fast(g)) {   /* the float sums, then added exactly to the accumulators */
        memset(g->wf, 0, out * sizeof *g->wf);
        bias_sums_fast(g->wf, dz, rows, out, parts, colT);
        dr_omp_acc_add_floats(gb, g->wf, out);
        return;
    }
    if (b->num == DR_NUMERICS_FAST) {
        bias_sums_fast(gb, dz, rows, out, parts, colT);
        return;
    }
    #pragma omp parallel for schedule(static) if (rows * out >= (1u << 14))
    for (uint32_t j = 0; j < out; j++) {
        for (size_t r = 0; r < rows; r++) colT[(size_t)j * rows + r] = dz[r * out + j];
        dr_acc_add_sum((dr_acc *)gb + j, colT + (size_t)j * rows, rows);
    }
}

static int dense_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *dz, float *dx, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    dr_omp_graph *g = ((dr_omp_scratch *)rb->scratch)->graph;
    const size_t gsz = dr_grad_bytes(b->num), k0 = dr_model_kernel_offset(m, l);
    const float *in = dr_omp_map(rb, dr_omp_src(m, l)), *W = dr_omp_params(rb) + k0;
    char *grad = rb->grad->data;
    uint32_t n = g->rt.n;
    int rc = dr_omp_grad_gemm(b, g, d->in, d->out, n, in, d->in, dz, d->out, grad + k0 * gsz);
    if (rc) return dr_fail(err, rc, "openmp backend: out of memory in layer %u's gradient GEMM", l);
    dr_omp_bias_grad(b, g, grad + (k0 + (size_t)d->in * d->out) * gsz, dz, n, d->out, 1);
    if (!dx) return DR_OK;
    rc = dr_omp_mixed(g) ? dr_omp_gemm_dtype(g, DR_TRANS, n, d->in, d->out, dz, d->out, W, d->out, NULL, false, g->tmp)
                         : dr_omp_gemm_f32(b, DR_NO_TRANS, DR_TRANS, n, d->in, d->out, dz, d->out, W, d->out, NULL,
                                           g->tmp, d->in);
    if (rc) return dr_fail(err, rc, "openmp backend: out of memory in layer %u's delta GEMM", l);
    for (size_t i = 0; i < (size_t)n * d->in; i++) dx[i] += g->tmp[i];
    return DR_OK;
}

/* d(loss)/d(pre) of layer l in place: zero where its ReLU was off; the
 * mixed step first rounds the map's gradient (a fork's paths summed) to c. */
void dr_omp_unactivate(const dr_model_spec *m, uint32_t l, const dr_omp_scratch *s, uint32_t n)
{
    const dr_dense *d = &m->layer[l];
    float *dz = s->graph->dmap[l + 1];
    const float *pre = s->pre[l];
    dr_omp_rect a = dr_omp_rect_of(m, s->graph, l, l + 1, n);
    for (size_t i = 0; dr_omp_mixed(s->graph) && i < (size_t)n * d->out; i++) dz[i] = dr_omp_rn(s->graph, dz[i]);
    if (d->act != DR_ACT_RELU) return;
    #pragma omp parallel for schedule(static) if (dr_omp_par(a.spans * a.len))
    for (size_t q = 0; q < a.spans; q++) {
        size_t at = dr_omp_span(&a, q);
        #pragma omp simd
        for (size_t i = at; i < at + a.len; i++) dz[i] = pre[i] > 0.0f ? dz[i] : 0.0f;
    }
}

int dr_omp_layer_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    dr_omp_scratch *s;
    dr_omp_graph *g;
    float *dz, *dx;
    size_t cells;
    uint32_t src = dr_omp_src(m, l), n;
    dr_omp_rect a;
    int rc;
    if ((rc = need_graph(b, rb, l, err))) return rc;
    s = rb->scratch;
    g = s->graph;
    n = g->rt.n;
    dz = g->dmap[l + 1];
    dx = src > 0 ? g->dmap[src] : NULL;
    cells = (size_t)n * d->out;
    a = dr_omp_rect_of(m, g, l, l + 1, n);
    if (n == 0 || d->kind == DR_LAYER_BATCH_NORM || !dr_omp_runs(g, l)) return DR_OK;   /* BN: bn_sums and bn_backward */
    dr_omp_unactivate(m, l, s, n);
    switch (d->kind) {
    case DR_LAYER_DENSE: return dense_backward(b, rb, l, dz, dx, err);
    case DR_LAYER_CONV2D: return dr_omp_conv_backward(b, rb, l, dz, dx, err);
    case DR_LAYER_MAX_POOL2D:   /* the 2x2 stride-2 windows do not overlap: a span's inputs are its own */
        if (!dx) return DR_OK;
        #pragma omp parallel for schedule(static) if (dr_omp_par(a.spans * a.len))
        for (size_t q = 0; q < a.spans; q++)
            for (size_t i = dr_omp_span(&a, q), e = i + a.len; i < e; i++)
                dx[(i / d->out) * d->in + g->idx[l][i]] += dz[i];
        return DR_OK;
    case DR_LAYER_GLOBAL_AVG_POOL2D: {
        uint32_t hw = d->ih * d->iw;
        if (!dx) return DR_OK;
        #pragma omp parallel for schedule(static) if (dr_omp_par((size_t)n * d->in))
        for (uint32_t r = 0; r < n; r++)
            for (uint32_t p = 0; p < hw; p++)
                for (uint32_t c = 0; c < d->ic; c++)
                    dx[((size_t)r * hw + p) * d->ic + c] += dr_omp_rn(g, dz[(size_t)r * d->ic + c] / (float)hw);
        return DR_OK;
    }
    case DR_LAYER_FLATTEN:
        if (!dx) return DR_OK;
        #pragma omp parallel for simd schedule(static) if (dr_omp_par(cells))
        for (size_t i = 0; i < cells; i++) dx[i] += dz[i];
        return DR_OK;
    case DR_LAYER_DROPOUT: {
        const float *mult = g->aux[l];
        if (!dx) return DR_OK;
        if (dr_omp_mixed(g)) {
            for (size_t i = 0; i < cells; i++) dx[i] += mult[i] != 0.0f ? dr_omp_rn(g, dz[i] * mult[i]) : 0.0f;
            return DR_OK;
        }
        #pragma omp parallel for simd schedule(static) if (dr_omp_par(cells))
        for (size_t i = 0; i < cells; i++) dx[i] += mult[i] != 0.0f ? dz[i] * mult[i] : 0.0f;
        return DR_OK;
    }
    case DR_LAYER_ADD: {   /* dx and the shortcut's map may be one map: each element still gets both, in order */
        float *df = d->from >= 0 ? g->dmap[d->from + 1] : NULL;
        #pragma omp parallel for schedule(static) if (dr_omp_par(a.spans * a.len))
        for (size_t q = 0; q < a.spans; q++)
            for (size_t i = dr_omp_span(&a, q), e = i + a.len; i < e; i++) {
                if (dx) dx[i] += dz[i];
                if (df) df[i] += dz[i];
            }
        return DR_OK;
    }
    case DR_LAYER_BATCH_NORM:
        return DR_OK;
    }
    return DR_OK;
}
