/* distref core — spatial partitioning of a model's feature maps over a
 * replica's cores (the tpu strategy's --input_partition_dims, issue 31):
 * which layers run on tiles, each core's tile of every map, the rows a
 * window reads across a cut (the halo), and which maps are gathered onto
 * core 0 where the tiles end (include/distref/model.h, docs/MODELS.md). */
#include "distref/model.h"

#include <stdio.h>
#include <string.h>

void dr_model_map(const dr_model_spec *m, uint32_t k, uint32_t *h, uint32_t *w, uint32_t *c)
{
    if (k == 0) { *h = m->in_h; *w = m->in_w; *c = m->in_c; return; }
    *h = m->layer[k - 1].oh; *w = m->layer[k - 1].ow; *c = m->layer[k - 1].oc;
}

static uint32_t win(const dr_dense *d) { return d->kind == DR_LAYER_CONV2D ? d->ksize : 2; }
static uint32_t step(const dr_dense *d) { return d->kind == DR_LAYER_CONV2D ? d->stride : 2; }

static uint32_t clip(int64_t v, uint32_t hi) { return v < 0 ? 0 : v > (int64_t)hi ? hi : (uint32_t)v; }

void dr_window_rows(const dr_dense *d, uint32_t pad, uint32_t in, uint32_t o0, uint32_t o1, uint32_t r[2])
{
    r[0] = clip((int64_t)o0 * step(d) - pad, in);
    r[1] = clip((int64_t)(o1 - 1) * step(d) - pad + win(d), in);
}

void dr_window_outs(const dr_dense *d, uint32_t pad, uint32_t out, uint32_t i0, uint32_t i1, uint32_t r[2])
{
    int64_t s = step(d), lo = (int64_t)i0 + pad - win(d) + 1, hi = (int64_t)i1 - 1 + pad;
    lo = lo <= 0 ? 0 : (lo + s - 1) / s;
    r[0] = clip(lo, out);
    r[1] = hi < 0 ? 0 : clip(hi / s + 1, out);
}

/* Along one dimension (n tiles of in -> out): whether every tile's window
 * reads only its neighbours' tiles (halo) or, with `own`, only its own, in
 * the forward and the backward pass. */
static bool fits(const dr_dense *d, uint32_t pad, uint32_t in, uint32_t out, uint32_t n, bool own)
{
    uint32_t ti = in / n, to = out / n, reach = own ? 0 : 1, r[2];
    for (uint32_t i = 0; i < n; i++) {
        uint32_t lo = i >= reach ? (i - reach) : 0, hi = i + 1 + reach < n ? i + 1 + reach : n;
        dr_window_rows(d, pad, in, i * to, (i + 1) * to, r);
        if (r[0] < lo * ti || r[1] > hi * ti) return false;
        dr_window_outs(d, pad, out, i * ti, (i + 1) * ti, r);
        if (r[0] < lo * to || r[1] > hi * to) return false;
    }
    return true;
}

/* Why layer l cannot run on ph x pw tiles ("" if it can). */
static void stop_reason(const dr_model_spec *m, uint32_t l, uint32_t ph, uint32_t pw, char *why, size_t cap)
{
    const dr_dense *d = &m->layer[l];
    const char *kind = dr_layer_kind_name(d->kind);
    bool pool = d->kind == DR_LAYER_MAX_POOL2D;
    why[0] = 0;
    if (d->kind != DR_LAYER_CONV2D && !pool && d->kind != DR_LAYER_BATCH_NORM && d->kind != DR_LAYER_ADD)
        snprintf(why, cap, "layer %u (%s) reads the whole feature map", l, kind);
    else if (d->ih % ph || d->oh % ph)
        snprintf(why, cap, "layer %u (%s): %s height %u does not split into %u tiles", l, kind,
                 d->ih % ph ? "input" : "output", d->ih % ph ? d->ih : d->oh, ph);
    else if (d->iw % pw || d->ow % pw)
        snprintf(why, cap, "layer %u (%s): %s width %u does not split into %u tiles", l, kind,
                 d->iw % pw ? "input" : "output", d->iw % pw ? d->iw : d->ow, pw);
    else if ((d->kind == DR_LAYER_CONV2D || pool) &&
             (!fits(d, pool ? 0 : d->pad_top, d->ih, d->oh, ph, pool) || !fits(d, pool ? 0 : d->pad_left, d->iw, d->ow, pw, pool)))
        snprintf(why, cap, pool ? "layer %u (%s): its 2x2 windows straddle the cut between tiles of %ux%u inputs"
                                : "layer %u (%s): its window reaches past the neighbouring tile (tiles of %ux%u inputs)",
                 l, kind, d->ih / ph, d->iw / pw);
}

static void mark(dr_spatial_plan *p, int64_t k)
{
    if (k >= 0 && k <= (int64_t)p->lp) p->gathered[k] = true;
}

int dr_spatial_plan_make(const dr_model_spec *m, uint32_t ph, uint32_t pw, dr_spatial_plan *p, dr_err *err)
{
    memset(p, 0, sizeof *p);
    p->ph = ph; p->pw = pw; p->tiles = ph * pw;
    if (p->tiles == 0 || p->tiles > DR_MAX_TILES)
        return dr_fail(err, DR_EUSAGE, "--input_partition_dims: %ux%u tiles; at most %d", ph, pw, DR_MAX_TILES);
    for (p->lp = 0; p->lp < m->nlayers; p->lp++) {
        stop_reason(m, p->lp, ph, pw, p->stop, sizeof p->stop);
        if (p->stop[0]) break;
    }
    if (p->lp == 0)
        return dr_fail(err, DR_EUSAGE, "--input_partition_dims=%u,%u: model: %s; spatial partitioning needs at least "
                       "the first layer to run on the tiles", ph, pw, p->stop);
    for (uint32_t l = p->lp; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        mark(p, d->src ? d->src : l);
        if (d->kind == DR_LAYER_ADD) mark(p, (int64_t)d->from + 1);
    }
    for (uint32_t c = 0; c < p->tiles; c++) {
        uint32_t i = c / pw, j = c % pw;
        p->tile[c].lp = p->lp;
        for (uint32_t k = 0; k <= m->nlayers; k++) {
            uint32_t H, W, C, *r = p->tile[c].rect[k];
            dr_model_map(m, k, &H, &W, &C);
            if (k > p->lp) { r[0] = 0; r[1] = H; r[2] = 0; r[3] = W; continue; }
            r[0] = i * H / ph; r[1] = (i + 1) * H / ph; r[2] = j * W / pw; r[3] = (j + 1) * W / pw;
        }
    }
    return DR_OK;
}
