/* distref devices — the OpenCL backend's layer ops for models beyond Dense
 * (distref/backend.h, "models beyond Dense"), launches of cl/graph.cl's
 * kernels (Dense layers: kernels.cl's GEMMs) on one replica's buffers,
 * driven layer by layer by the engine (strategies/graph.c). Written for the
 * contract, apart from the reference and the OpenMP backend
 * (devices/cpu/openmp_graph.c), whose bits it must give.
 *
 * A replica's maps (dr_cl_graph, opencl_backend.h, allocated by
 * opencl_maps.c; beside dr_cl_scratch's pre/act: every layer's
 * pre-activation and output): map 0 is rb->x, map l + 1 act[l];
 *   dmap[k]  d(loss)/d(map k), k >= 1; a backward adds d(input) into
 *            dmap[src] (one float addition per element and path, in the
 *            layers' order from the top: the reference's order)
 *   aux[l]   Dropout: the multipliers (0 or 1/(1-rate)); BN: xhat
 *   chan[l]  BN: per channel mean, 1/sqrt(var + eps), a = gamma/sqrt(..)
 *   win[l]   MaxPooling2D: each output's winner within its example's input
 *   tmp      a Dense layer's d(input) before it is added into its map
 *   ids      the rows' global example ids (Dropout's key)
 *   red      BN: the per-channel exact sums, 2 x 256 accumulators, read
 *            back into the engine's host accumulators (dr_acc's layout)
 *   stat     BN: the statistics the engine hands in (2 x 256 floats)
 * Everything runs on the replica's slot (one in-order queue), so a blocking
 * upload into stat waits for the kernels that read it before.
 * The mixed step (dr_graph_rt.compute = c, g->ct; openmp_graph.c's header
 * states the contract): map 0 is xc and Conv2D and Dense read Wc (the
 * weights and the input rounded to c, opencl_mixed.c); each kernel takes
 * ct, the dtype its output or input gradient is rounded to once (0: the
 * float32 pass, unchanged): conv_fwd RN_c(RN_c(conv) + b), Dense
 * mixed_gemm, gap, add_cells, dropout (RN_c of the scale too), a training
 * bn_apply, and conv_dx, gap_grad, dropout_grad, bn_grad; unactivate
 * rounds a map's gradient before its layer's backward; the loss is
 * mixed.cl's mixed_loss_rows. --numerics=fast (g->fast, the kernels' fast
 * argument; openmp_graph.c's fast forms): the same roundings, each of a
 * float32 value: conv_fwd RN_c(RN_c(float sum) + b), conv_dx RN_c(float
 * sum), Dense mixed_gemm_fast; a kernel gradient its float32 sum added
 * exactly (conv_dw_mixed_fast, mixed_grad_fast: the cross-replica sum stays
 * exact); the bias gradients and BN sums stay exact sums (within the fast
 * bound, and exact is what the engine reduces).
 */
#include "devices/opencl/opencl_backend.h"
#include "devices/seams.h"
#include "distref/dropout_masks.h"
#include "distref/half.h"

#include <stdlib.h>
#include <string.h>


/* ---- helpers ----------------------------------------------------------------- */

static uint32_t src_of(const dr_model_spec *m, uint32_t l)
{
    return m->layer[l].src ? m->layer[l].src : l;
}

/* Map k; the mixed step's input is xc, its Conv2D and Dense read Wc. */
static cl_mem map_of(const dr_replica_bufs *rb, uint32_t k)
{
    const dr_cl_scratch *s = rb->scratch;
    return k ? s->act[k - 1] : s->graph && s->graph->ct ? s->xc : rb->x->mem;
}

/* The kernels' fast argument: float32 numerics, or the fast mixed step. */
static bool fast_of(const dr_backend *b, const dr_cl_graph *g)
{
    return b->num == DR_NUMERICS_FAST || g->fast;
}

static cl_mem weights_of(const dr_replica_bufs *rb)
{
    const dr_cl_scratch *s = rb->scratch;
    return s->graph->ct ? s->wc : rb->params->mem;
}

/* The replica's workspace with maps and layer l of the model (kind: a
 * required kind, or -1 for any). */
static int need_graph(const dr_backend *b, const dr_replica_bufs *rb, uint32_t l, int kind, const char *op,
                      dr_err *err)
{
    const dr_cl_scratch *s = rb ? rb->scratch : NULL;
    if (!s || !s->graph)
        return dr_fail(err, DR_ESTATE, "opencl backend: %s: replica workspace without maps (a Dense model's?)", op);
    if (l >= b->m.nlayers)
        return dr_fail(err, DR_EUSAGE, "opencl backend: %s of layer %u of a %u-layer model", op, l, b->m.nlayers);
    if (kind >= 0 && b->m.layer[l].kind != (dr_layer_kind)kind)
        return dr_fail(err, DR_EUSAGE, "opencl backend: %s of layer %u, a %s", op, l,
                       dr_layer_kind_name(b->m.layer[l].kind));
    return DR_OK;
}

/* Whether this core computes layer l: unpartitioned always; partitioned,
 * every core the layers before the tiles end, core 0 alone the rest. */
static bool runs(const dr_cl_graph *g, uint32_t l)
{
    return !g->tile || g->core == 0 || l < g->tile->lp;
}

/* Map k's rectangle r: the core's tile if tiled, else the whole map. */
static void tile_or_map(const dr_model_spec *m, const dr_cl_graph *g, bool tiled, uint32_t k, uint32_t r[4])
{
    uint32_t H, W, C;
    dr_model_map(m, k, &H, &W, &C);
    if (tiled) {
        memcpy(r, g->tile->rect[k], 4 * sizeof *r);
        return;
    }
    r[0] = 0; r[1] = H; r[2] = 0; r[3] = W;
}

/* The rectangle of map k that layer l's sums run over: the core's tile
 * before the tiles end, else the whole map. */
static void rect_of(const dr_model_spec *m, const dr_cl_graph *g, uint32_t l, uint32_t k, uint32_t r[4])
{
    tile_or_map(m, g, DR_SEAM_CL_TILE_SUMS(g->tile && l < g->tile->lp), k, r);
}

/* The rectangle of map k a conv's launch at layer l computes (its output
 * forward, its input gradient backward): before the tiles end, the core's
 * tile alone (the halos its windows read are received, and outside its
 * tile nothing reads the core's values), else the whole map. */
static void launch_rect(const dr_model_spec *m, const dr_cl_graph *g, uint32_t l, uint32_t k, uint32_t r[4])
{
    const bool tiled = g->tile && l < g->tile->lp;
    tile_or_map(m, g, tiled, k, r);
    if (tiled) r[1] = DR_SEAM_CL_TILE_LAUNCH_ROWS(r[0], r[1]);
}

/* Work-items for rectangle r of n examples of a map of C channels. */
static size_t rect_cells(uint32_t n, uint32_t C, const uint32_t r[4])
{
    return (size_t)n * (r[1] - r[0]) * (r[3] - r[2]) * C;
}

cl_mem dr_cl_graph_map(const dr_replica_bufs *rb, uint32_t k, bool grad)
{
    return grad ? ((const dr_cl_scratch *)rb->scratch)->graph->dmap[k] : map_of(rb, k);
}

static dr_cl_slot *slot_of(dr_backend *b, const dr_replica_bufs *rb)
{
    return &b->slot[((const dr_cl_scratch *)rb->scratch)->slot];
}

/* Blocking transfers on the replica's queue (after its kernels so far). */
static int upload(dr_cl_slot *sl, cl_mem mem, const void *host, size_t bytes, dr_err *err)
{
    cl_int e = clEnqueueWriteBuffer(sl->q, mem, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "upload (a layer's ids or statistics)");
}

static int download(dr_cl_slot *sl, cl_mem mem, void *host, size_t bytes, dr_err *err)
{
    cl_int e = clEnqueueReadBuffer(sl->q, mem, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "download (batch-norm sums)");
}

/* A conv's geometry, the first 11 arguments of cl/graph.cl's CONV_ARGS. */
static void conv_args(const dr_dense *d, uint32_t n, dr_cl_arg *a)
{
    const uint32_t v[11] = { n, d->ih, d->iw, d->ic, d->oh, d->ow, d->oc, d->ksize, d->stride, d->pad_top,
                             d->pad_left };
    for (int i = 0; i < 11; i++) a[i] = CLU(v[i]);
}

/* ---- the pass ------------------------------------------------------------------- */

/* --dropout_masks: each Dropout layer's masks of the pass's n rows (rows
 * row0.. of the step's global batch in the file) into keep[l], a byte a
 * cell, which the dropout kernel reads instead of drawing. */
static int upload_masks(dr_backend *b, dr_replica_bufs *rb, const dr_graph_rt *rt, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    dr_cl_graph *g = ((dr_cl_scratch *)rb->scratch)->graph;
    uint8_t *keep = NULL;
    int rc = DR_OK;
    for (uint32_t l = 0; rc == DR_OK && l < m->nlayers; l++) {
        const uint32_t units = m->layer[l].out;
        if (m->layer[l].kind != DR_LAYER_DROPOUT) continue;
        if (!keep && !(keep = malloc((size_t)g->n * b->widest)))
            return dr_fail(err, DR_ENOMEM, "opencl backend: out of host memory for the dropout masks");
        for (uint32_t r = 0; r < g->n; r++)
            for (uint32_t u = 0; u < units; u++)
                keep[(size_t)r * units + u] =
                    dr_dropout_masks_keep(rt->masks, rt->step, l, DR_SEAM_CL_DROPOUT_MASK_ROW0(rt->row0) + r, u);
        rc = upload(slot_of(b, rb), g->keep[l], keep, (size_t)g->n * units, err);
    }
    free(keep);
    return rc;
}

int dr_cl_graph_begin(dr_backend *b, dr_replica_bufs *rb, uint32_t n, const dr_graph_rt *rt, dr_err *err)
{
    const dr_backend_ops *ops = dr_backend_opencl();
    dr_cl_scratch *s;
    dr_cl_graph *g;
    cl_uint *ids;
    int rc;
    if ((rc = need_graph(b, rb, 0, -1, "graph_begin", err))) return rc;
    s = rb->scratch;
    g = s->graph;
    if (n > s->cap) return dr_fail(err, DR_EUSAGE, "opencl backend: %u rows, the workspace holds %u", n, s->cap);
    if ((rc = dr_cl_need(rb->grad, b->P * dr_grad_bytes(b->num), "grad", err)) ||
        (rc = dr_cl_need(rb->loss, dr_sum_bytes(b->num), "loss", err)) ||
        (rc = dr_cl_need(rb->params, b->P * sizeof(float), "params", err)) ||
        (rc = dr_cl_need(rb->x, (size_t)n * b->m.layer[0].in * sizeof(float), "x", err)))
        return rc;
    g->n = n;
    g->training = rt->training;
    g->seed = rt->seed;
    g->step = rt->step;
    /* the mixed step, and its fast forms (the float32 pass has b->num) */
    g->ct = rt->training ? rt->compute : DR_DTYPE_F32;
    g->fast = g->ct != DR_DTYPE_F32 && rt->fast;
    g->loss_scale = rt->loss_scale;
    g->G = rt->G;
    s->fwd_rows = n;
    rb->correct = 0;
    if ((rc = ops->fill_zero(b, rb->grad, 0, b->P * dr_grad_bytes(b->num), err)) ||
        (rc = ops->fill_zero(b, rb->loss, 0, dr_sum_bytes(b->num), err)) || n == 0)
        return rc;
    if (!(ids = malloc(n * sizeof *ids))) return dr_fail(err, DR_ENOMEM, "opencl backend: out of host memory");
    for (uint32_t r = 0; r < n; r++) ids[r] = rt->ids ? rt->ids[r] : r;
    rc = upload(slot_of(b, rb), g->ids, ids, n * sizeof *ids, err);
    free(ids);
    g->masks = rt->masks && rt->training;
    if (rc == DR_OK && g->ct) rc = dr_cl_graph_mixed_begin(b, rb, n, g->ct, err);
    return rc || !g->masks ? rc : upload_masks(b, rb, rt, err);
}

/* BatchNormalization l with the statistics at mean[moff..], var[voff..]
 * (the moving ones in params, or the engine's in stat). */
static int bn_apply(dr_backend *b, dr_replica_bufs *rb, uint32_t l, cl_mem stats, size_t moff, size_t voff,
                    bool training, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    dr_cl_scratch *s = rb->scratch;
    dr_cl_graph *g = s->graph;
    dr_cl_slot *sl = slot_of(b, rb);
    dr_cl_arg c[] = { CLM(stats), CLU(moff), CLM(stats), CLU(voff), CLM(rb->params->mem),
                      CLU(dr_model_kernel_offset(m, l)), CLU(d->oc), CLM(g->chan[l]) };
    dr_cl_arg a[] = { CLM(map_of(rb, src_of(m, l))), CLM(rb->params->mem), CLU(dr_model_bias_offset(m, l)),
                      CLM(g->chan[l]), CLU((size_t)g->n * d->out), CLU(d->oc), CLU(training),
                      CLU(d->act == DR_ACT_RELU), CLU(training ? g->ct : DR_DTYPE_F32), CLM(s->pre[l]),
                      CLM(s->act[l]), CLM(g->aux[l]) };
    int rc = dr_cl_launch(sl, K_BN_CHAN, d->oc, 1, 0, 0, c, 8, "batch-norm statistics", err);
    return rc ? rc : dr_cl_launch(sl, K_BN_APPLY, (size_t)g->n * d->out, 1, 0, 0, a, 12, "batch norm", err);
}

static int dense_forward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, cl_mem in, dr_err *err)
{
    const dr_dense *d = &b->m.layer[l];
    dr_cl_scratch *s = rb->scratch;
    size_t k0 = b->koff[l];
    if (s->graph->ct)   /* RN_c(x Wc + bc), one rounding */
        return dr_cl_mixed_gemm(slot_of(b, rb), s->graph->fast, s->graph->n, d->out, d->in, in, d->in, 1, s->wc, k0,
                                d->out, 1, s->wc, k0 + (size_t)d->in * d->out, s->pre[l], d->out, s->graph->ct,
                                "mixed: forward GEMM", err);
    return dr_cl_gemm_f32(b, slot_of(b, rb), s->graph->n, d->out, d->in, in, 0, d->in, 1, rb->params->mem, k0, d->out,
                          1, rb->params->mem, k0 + (size_t)d->in * d->out, s->pre[l], d->out, "forward GEMM", err);
}

int dr_cl_layer_forward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    dr_cl_scratch *s;
    dr_cl_graph *g;
    dr_cl_slot *sl;
    cl_mem in;
    size_t cells;
    int rc;
    if ((rc = need_graph(b, rb, l, -1, "layer_forward", err))) return rc;
    s = rb->scratch;
    g = s->graph;
    /* partitioned, a conv runs over the core's tile (launch_rect), the
     * other kernels over the whole map: outside its tile a core's map holds
     * values nothing reads (the halos that windows read are received before
     * the layer, the gather copies tiles only) */
    if (!runs(g, l)) return DR_OK;
    sl = slot_of(b, rb);
    in = map_of(rb, src_of(m, l));
    cells = (size_t)g->n * d->out;
    switch (d->kind) {
    case DR_LAYER_DENSE: rc = dense_forward(b, rb, l, in, err); break;
    case DR_LAYER_CONV2D: {
        dr_cl_arg a[22];
        uint32_t r[4];
        launch_rect(m, g, l, l + 1, r);
        conv_args(d, g->n, a);
        a[11] = CLM(in); a[12] = CLM(weights_of(rb)); a[13] = CLU(b->koff[l]);
        a[14] = CLU(dr_model_bias_offset(m, l)); a[15] = CLU(fast_of(b, g)); a[16] = CLU(g->ct);
        a[17] = CLM(s->pre[l]);
        for (int i = 0; i < 4; i++) a[18 + i] = CLU(r[i]);
        rc = dr_cl_launch(sl, K_CONV_FWD, rect_cells(g->n, d->oc, r), 1, 0, 0, a, 22, "conv forward", err);
        break;
    }
    case DR_LAYER_MAX_POOL2D: {
        dr_cl_arg a[] = { CLM(in), CLU(g->n), CLU(d->iw), CLU(d->ic), CLU(d->oh), CLU(d->ow), CLU(d->in),
                          CLM(s->pre[l]), CLM(g->win[l]) };
        rc = dr_cl_launch(sl, K_MAXPOOL, cells, 1, 0, 0, a, 9, "max pooling", err);
        break;
    }
    case DR_LAYER_GLOBAL_AVG_POOL2D: {
        dr_cl_arg a[] = { CLM(in), CLU(g->n), CLU(d->ih * d->iw), CLU(d->ic), CLU(g->ct), CLM(s->pre[l]) };
        rc = dr_cl_launch(sl, K_GAP, cells, 1, 0, 0, a, 6, "global average pooling", err);
        break;
    }
    case DR_LAYER_FLATTEN:
    case DR_LAYER_ADD: {
        cl_mem f = d->kind == DR_LAYER_ADD ? map_of(rb, d->from < 0 ? 0 : (uint32_t)d->from + 1) : NULL;
        dr_cl_arg a[] = { CLM(in), CLM(f), CLU(cells), CLU(g->ct), CLM(s->pre[l]) };
        rc = dr_cl_launch(sl, K_ADD_CELLS, cells, 1, 0, 0, a, 5, "add", err);
        break;
    }
    case DR_LAYER_DROPOUT: {   /* its output is act; pre a copy of it */
        const uint64_t stream = DR_GRAPH_STREAM_DROPOUT + l + (g->step << 24);
        dr_cl_arg a[] = { CLM(in), CLU(g->n), CLU(d->out), CLU(g->seed), CLU(g->seed >> 32), CLU(stream),
                          CLU(stream >> 32), CLM(g->ids), CLF(d->rate),
                          CLF(dr_round_to_dtype(1.0f / (1.0f - d->rate), g->ct)),   /* mixed: RN_c(scale) */
                          CLU(!g->training || d->rate == 0.0f), CLM(g->keep[l]), CLU(g->masks), CLU(g->ct),
                          CLM(g->aux[l]), CLM(s->act[l]) };
        dr_cl_arg c[] = { CLM(s->act[l]), CLM(NULL), CLU(cells), CLU(DR_DTYPE_F32), CLM(s->pre[l]) };
        if ((rc = dr_cl_launch(sl, K_DROPOUT, cells, 1, 0, 0, a, 16, "dropout", err))) return rc;
        return dr_cl_launch(sl, K_ADD_CELLS, cells, 1, 0, 0, c, 5, "dropout", err);
    }
    case DR_LAYER_BATCH_NORM: {   /* inference: the moving statistics, the mean's oc floats then the variance's */
        size_t st = dr_model_state_offset(m, l), mean, var;
        DR_SEAM_CL_BN_INFER_STATE(st, d->oc, mean, var);
        return bn_apply(b, rb, l, rb->params->mem, mean, var, false, err);
    }
    }
    if (rc) return rc;
    {
        dr_cl_arg a[] = { CLM(s->pre[l]), CLM(s->act[l]), CLU(cells), CLU(d->act == DR_ACT_RELU) };
        return dr_cl_launch(sl, K_ACT_CELLS, cells, 1, 0, 0, a, 4, "activation", err);
    }
}

/* ---- BatchNormalization ---------------------------------------------------------- */

/* d(loss)/d(pre) of layer l in place: zero where its ReLU was off. */
int dr_cl_unactivate(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_err *err)
{
    const dr_dense *d = &b->m.layer[l];
    dr_cl_scratch *s = rb->scratch;
    size_t cells = (size_t)s->graph->n * d->out;
    dr_cl_arg a[] = { CLM(s->graph->dmap[l + 1]), CLM(s->pre[l]), CLU(cells) };
    /* the mixed step first rounds the map's gradient (a fork's paths summed) to c, in place */
    dr_cl_arg r[] = { CLM(s->graph->dmap[l + 1]), CLU(cells), CLU(s->graph->ct), CLM(s->graph->dmap[l + 1]) };
    int rc = s->graph->ct ? dr_cl_launch(slot_of(b, rb), K_MIXED_TO_DTYPE, cells, 1, 0, 0, r, 4,
                                         "mixed: a map's gradient", err) : DR_OK;
    if (rc || d->act != DR_ACT_RELU) return rc;
    return dr_cl_launch(slot_of(b, rb), K_RELU_MASK, cells, 1, 0, 0, a, 3, "ReLU mask", err);
}

int dr_cl_bn_sums(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_bn_sum_kind kind, const float *mean,
                  dr_acc *s1, dr_acc *s2, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    dr_acc red[2 * BN_MAX_C];
    dr_cl_graph *g;
    dr_cl_slot *sl;
    uint32_t r[4];
    int rc;
    if ((rc = need_graph(b, rb, l, DR_LAYER_BATCH_NORM, "bn_sums", err))) return rc;
    if (d->oc > BN_MAX_C)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: BatchNormalization layer %u has %u channels; at most "
                       "%d", l, d->oc, BN_MAX_C);
    g = ((dr_cl_scratch *)rb->scratch)->graph;
    sl = slot_of(b, rb);
    rect_of(m, g, l, l + 1, r);
    if (!runs(g, l) || g->n == 0 || r[0] >= r[1] || r[2] >= r[3]) return DR_OK;   /* nothing to add */
    if (kind == DR_BN_GRAD) {
        const bool fast = b->num == DR_NUMERICS_FAST;
        dr_cl_arg a[] = { CLM(g->dmap[l + 1]), CLM(g->aux[l]), CLU(g->n), CLU(d->oh), CLU(d->ow), CLU(r[0]), CLU(r[1]),
                          CLU(r[2]), CLU(r[3]), CLU(d->oc), CLM(g->red), CLM(rb->grad->mem),
                          CLU(dr_model_kernel_offset(m, l)), CLU(dr_model_bias_offset(m, l)) };
        if ((rc = dr_cl_unactivate(b, rb, l, err)) ||
            (rc = dr_cl_launch(sl, fast ? K_BN_GRAD_SUMS_FAST : K_BN_GRAD_SUMS_EXACT, d->oc, 1, 0, 0, a, 14,
                               "batch-norm gradient sums", err)))
            return rc;
    } else {
        dr_cl_arg a[] = { CLM(map_of(rb, src_of(m, l))), CLU(g->n), CLU(d->oh), CLU(d->ow), CLU(r[0]), CLU(r[1]),
                          CLU(r[2]), CLU(r[3]), CLU(d->oc), CLU(kind == DR_BN_CENTERED), CLM(g->stat), CLM(g->red) };
        if (kind == DR_BN_CENTERED &&
            (rc = upload(sl, g->stat, mean, d->oc * sizeof(float), err)))
            return rc;
        if ((rc = dr_cl_launch(sl, K_BN_SUMS, d->oc, 1, 0, 0, a, 12, "batch-norm sums", err))) return rc;
    }
    if ((rc = download(sl, g->red, red, 2 * (size_t)d->oc * sizeof(dr_acc), err))) return rc;
    for (uint32_t c = 0; c < d->oc; c++) {
        if (kind != DR_BN_CENTERED) dr_acc_merge(&s1[c], &red[c]);
        if (s2) dr_acc_merge(&s2[c], &red[d->oc + c]);
    }
    return DR_OK;
}

int dr_cl_bn_normalize(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *mean, const float *var,
                       dr_err *err)
{
    const dr_dense *d = &b->m.layer[l];
    float st[2 * BN_MAX_C];
    dr_cl_graph *g;
    int rc;
    if ((rc = need_graph(b, rb, l, DR_LAYER_BATCH_NORM, "bn_normalize", err))) return rc;
    if (d->oc > BN_MAX_C) return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: %u channels; at most %d", d->oc, BN_MAX_C);
    g = ((dr_cl_scratch *)rb->scratch)->graph;
    if (!runs(g, l)) return DR_OK;
    memcpy(st, mean, d->oc * sizeof(float));
    memcpy(st + d->oc, var, d->oc * sizeof(float));
    if ((rc = upload(slot_of(b, rb), g->stat, st, 2 * (size_t)d->oc * sizeof(float), err))) return rc;
    return bn_apply(b, rb, l, g->stat, 0, d->oc, true, err);
}

int dr_cl_bn_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, const float *mean_dy,
                      const float *mean_dyxhat, dr_err *err)
{
    const dr_dense *d = &b->m.layer[l];
    uint32_t src = src_of(&b->m, l);
    float st[2 * BN_MAX_C];
    dr_cl_graph *g;
    int rc;
    if ((rc = need_graph(b, rb, l, DR_LAYER_BATCH_NORM, "bn_backward", err))) return rc;
    if (d->oc > BN_MAX_C) return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: %u channels; at most %d", d->oc, BN_MAX_C);
    g = ((dr_cl_scratch *)rb->scratch)->graph;
    if (src == 0 || g->n == 0 || !runs(g, l)) return DR_OK;
    memcpy(st, mean_dy, d->oc * sizeof(float));
    memcpy(st + d->oc, mean_dyxhat, d->oc * sizeof(float));
    if ((rc = upload(slot_of(b, rb), g->stat, st, 2 * (size_t)d->oc * sizeof(float), err))) return rc;
    {
        size_t cells = (size_t)g->n * d->out;
        dr_cl_arg a[] = { CLM(g->dmap[l + 1]), CLM(g->aux[l]), CLM(g->chan[l]), CLM(g->stat), CLU(cells), CLU(d->oc),
                          CLU(g->ct), CLM(g->dmap[src]) };
        return dr_cl_launch(slot_of(b, rb), K_BN_GRAD, cells, 1, 0, 0, a, 8, "batch-norm backward", err);
    }
}

/* ---- loss and backward ------------------------------------------------------------ */

int dr_cl_graph_loss(dr_backend *b, dr_replica_bufs *rb, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_backend_ops *ops = dr_backend_opencl();
    uint32_t L = m->nlayers;
    dr_cl_scratch *s;
    dr_cl_graph *g;
    uint64_t correct = 0;
    int rc;
    if ((rc = need_graph(b, rb, 0, -1, "graph_loss", err))) return rc;
    s = rb->scratch;
    g = s->graph;
    for (uint32_t k = 1; k < L; k++) {
        size_t bytes = (size_t)g->n * m->layer[k - 1].out * sizeof(float);
        if ((rc = ops->fill_zero(b, &(dr_buffer){ bytes, g->dmap[k], s->slot }, 0, bytes, err))) return rc;
    }
    if (g->n == 0 || !runs(g, L - 1)) return DR_OK;   /* partitioned: the loss is core 0's */
    if ((rc = g->ct ? dr_cl_graph_mixed_loss(b, rb, g->n, g->ct, g->loss_scale, g->G, g->dmap[L], err)
                    : dr_cl_loss_rows(b, rb, s, g->n, g->dmap[L], err)) ||
        (rc = dr_cl_count_hits(b, rb, s, g->n, &correct, err)))
        return rc;
    rb->correct += correct;
    return DR_OK;
}

static int dense_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, cl_mem dz, cl_mem dx, dr_err *err)
{
    const dr_dense *d = &b->m.layer[l];
    const bool fast = b->num == DR_NUMERICS_FAST;
    dr_cl_scratch *s = rb->scratch;
    dr_cl_slot *sl = slot_of(b, rb);
    cl_mem in = map_of(rb, src_of(&b->m, l)), grad = rb->grad->mem, W = weights_of(rb);
    size_t kb = b->koff[l], bb = kb + (size_t)d->in * d->out, n = s->graph->n;
    int rc;
    if (fast) {   /* gW = in^T dz: op(A)[i][k] = in[k][i] */
        dr_cl_arg a[] = { CLU(d->in), CLU(d->out), CLU(n), CLM(in), CLU(0), CLU(1), CLU(d->in), CLM(dz), CLU(0),
                          CLU(d->out), CLU(1), CLM(NULL), CLU(0), CLU(0), CLM(grad), CLU(kb), CLU(d->out) };
        rc = dr_cl_fast_gemm(sl, a, "gradient GEMM", err);
    } else {   /* exact accumulators (the fast mixed step: its float32 GEMM held exactly) */
        dr_cl_arg a[] = { CLU(d->in), CLU(d->out), CLU(n), CLM(in), CLU(0), CLU(1), CLU(d->in), CLM(dz), CLU(0),
                          CLU(d->out), CLU(1), CLM(grad), CLU(kb) };
        rc = dr_cl_launch(sl, s->graph->fast ? K_MIXED_GRAD_FAST : K_GEMM_ACC_EXACT, d->in, d->out, DR_CL_TS,
                          DR_CL_TS, a, 13, "gradient GEMM", err);
    }
    if (rc) return rc;
    {
        dr_cl_arg a[] = { CLM(dz), CLU(n), CLU(d->out), CLM(grad), CLU(bb) };
        if ((rc = dr_cl_launch(sl, fast ? K_BIAS_FAST : K_BIAS_EXACT, d->out, 1, 0, 0, a, 5, "bias gradient", err)))
            return rc;
    }
    if (!dx) return DR_OK;
    if ((rc = s->graph->ct ? dr_cl_mixed_gemm(sl, s->graph->fast, n, d->in, d->out, dz, d->out, 1, W, kb, 1, d->out,
                                              NULL, 0, s->graph->tmp, d->in, s->graph->ct, "mixed: delta GEMM", err)
                           : dr_cl_gemm_f32(b, sl, n, d->in, d->out, dz, 0, d->out, 1, W, kb, 1, d->out, NULL, 0,
                                            s->graph->tmp, d->in, "delta GEMM", err)))
        return rc;
    {
        dr_cl_arg a[] = { CLM(s->graph->tmp), CLU(n * d->in), CLM(dx), CLM(NULL) };
        return dr_cl_launch(sl, K_ADD_GRAD, n * d->in, 1, 0, 0, a, 4, "delta", err);
    }
}

static int conv_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, cl_mem dz, cl_mem dx, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    const bool fast = b->num == DR_NUMERICS_FAST;
    dr_cl_slot *sl = slot_of(b, rb);
    const dr_cl_graph *g = ((dr_cl_scratch *)rb->scratch)->graph;
    const size_t nw = (size_t)d->ksize * d->ksize * d->ic * d->oc;
    /* a core's tile: the bias gradient over the tile too, by conv_dw's last oc work-items */
    const bool tiled = g->tile && l < g->tile->lp;
    uint32_t n = g->n, r[4];
    dr_cl_arg a[21];
    int rc;
    rect_of(m, g, l, l + 1, r);
    conv_args(d, n, a);
    a[11] = CLM(map_of(rb, src_of(m, l))); a[12] = CLM(dz); a[13] = CLM(rb->grad->mem); a[14] = CLU(b->koff[l]);
    a[15] = CLU(dr_model_bias_offset(m, l));
    for (int i = 0; i < 4; i++) a[16 + i] = CLU(r[i]);
    if ((rc = dr_cl_launch(sl, fast ? K_CONV_DW_FAST : g->fast ? K_CONV_DW_MIXED_FAST : K_CONV_DW_EXACT,
                           nw + (tiled ? d->oc : 0), 1, 0, 0, a, 20, "conv kernel gradient", err)))
        return rc;
    if (!tiled) {
        dr_cl_arg gb[] = { CLM(dz), CLU((size_t)n * d->oh * d->ow), CLU(d->oc), CLM(rb->grad->mem),
                          CLU(dr_model_bias_offset(m, l)) };
        if ((rc = dr_cl_launch(sl, fast ? K_BIAS_FAST : K_BIAS_EXACT, d->oc, 1, 0, 0, gb, 5, "conv bias gradient", err)))
            return rc;
    }
    if (!dx) return DR_OK;
    a[11] = CLM(dz); a[12] = CLM(weights_of(rb)); a[13] = CLU(b->koff[l]); a[14] = CLU(fast_of(b, g));
    a[15] = CLU(g->ct); a[16] = CLM(dx);
    launch_rect(m, g, l, src_of(m, l), r);
    for (int i = 0; i < 4; i++) a[17 + i] = CLU(r[i]);
    return dr_cl_launch(sl, K_CONV_DX, rect_cells(n, d->ic, r), 1, 0, 0, a, 21, "conv input gradient", err);
}

int dr_cl_layer_backward(dr_backend *b, dr_replica_bufs *rb, uint32_t l, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    dr_cl_graph *g;
    dr_cl_slot *sl;
    cl_mem dz, dx;
    size_t cells;
    uint32_t src = src_of(m, l);
    int rc;
    if ((rc = need_graph(b, rb, l, -1, "layer_backward", err))) return rc;
    g = ((dr_cl_scratch *)rb->scratch)->graph;
    sl = slot_of(b, rb);
    if (g->n == 0 || d->kind == DR_LAYER_BATCH_NORM || !runs(g, l)) return DR_OK;   /* BN: bn_sums and bn_backward */
    /* partitioned, a conv past layer 0 had its output gradient masked by
     * spatial_exchange before the halos came in: masking again with this
     * core's pre, which outside its tile nothing computed right, would clear
     * the received halo at random */
    if (!(g->tile && l < g->tile->lp && d->kind == DR_LAYER_CONV2D && src > 0) &&
        (rc = dr_cl_unactivate(b, rb, l, err)))
        return rc;
    dz = g->dmap[l + 1];
    dx = src > 0 ? g->dmap[src] : NULL;
    cells = (size_t)g->n * d->out;
    switch (d->kind) {
    case DR_LAYER_DENSE: return dense_backward(b, rb, l, dz, dx, err);
    case DR_LAYER_CONV2D: return conv_backward(b, rb, l, dz, dx, err);
    case DR_LAYER_MAX_POOL2D: {
        dr_cl_arg a[] = { CLM(dz), CLM(g->win[l]), CLU(g->n), CLU(d->out), CLU(d->in), CLM(dx) };
        return dx ? dr_cl_launch(sl, K_MAXPOOL_GRAD, cells, 1, 0, 0, a, 6, "max pooling gradient", err) : DR_OK;
    }
    case DR_LAYER_GLOBAL_AVG_POOL2D: {
        dr_cl_arg a[] = { CLM(dz), CLU(g->n), CLU(d->ih * d->iw), CLU(d->ic), CLU(g->ct), CLM(dx) };
        return dx ? dr_cl_launch(sl, K_GAP_GRAD, (size_t)g->n * d->in, 1, 0, 0, a, 6, "pooling gradient", err) : DR_OK;
    }
    case DR_LAYER_DROPOUT: {
        dr_cl_arg a[] = { CLM(dz), CLM(g->aux[l]), CLU(cells), CLU(g->ct), CLM(dx) };
        return dx ? dr_cl_launch(sl, K_DROPOUT_GRAD, cells, 1, 0, 0, a, 5, "dropout gradient", err) : DR_OK;
    }
    case DR_LAYER_FLATTEN:
    case DR_LAYER_ADD: {   /* d(input), then the residual's d(from) */
        cl_mem f = d->kind == DR_LAYER_ADD && d->from >= 0 ? g->dmap[d->from + 1] : NULL;
        dr_cl_arg a[] = { CLM(dz), CLU(cells), CLM(dx), CLM(f) };
        return dr_cl_launch(sl, K_ADD_GRAD, cells, 1, 0, 0, a, 4, "add gradient", err);
    }
    case DR_LAYER_BATCH_NORM:
        return DR_OK;
    }
    return DR_OK;
}
