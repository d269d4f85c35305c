/* distref reference — spatial partitioning's halo exchange, gather and
 * scatter between the cores of a replica (ref/halo.h, docs/MODELS.md).
 *
 * Entry e of a step is core e % T of replica e / T (T = ph x pw tiles); core
 * c sits at row c / pw, column c % pw of the replica's grid. Each core's
 * buffers are the size of the whole map, but a core writes only its tile and
 * what it receives: a halo it is not sent is a hole, never its neighbour's
 * value. A transfer packs a rectangle of the sender's map (every example of
 * the batch) into a buffer, copies it to the receiver's device and unpacks
 * it there. */
#include "ref/halo.h"

#include <string.h>

static float *map_buf(dr_halo *h, dr_graph_replica *rp, uint32_t e, uint32_t k, bool grad)
{
    return grad ? rp[e].w->dact[k] : k ? rp[e].w->act[k] : h->x[e];
}

/* Rows [r[0], r[1]) x columns [r[2], r[3]) of map k, from entry `from` to
 * entry `to`; the bytes are added to *count when the receiver is replica 0's. */
static void transfer(dr_halo *h, dr_graph_replica *rp, uint32_t k, bool grad, uint32_t from, uint32_t to,
                     const uint32_t r[4], uint64_t *count)
{
    uint32_t H, W, C;
    size_t q = 0, seg;
    const float *src = map_buf(h, rp, from, k, grad);
    float *dst = map_buf(h, rp, to, k, grad);
    if (r[0] >= r[1] || r[2] >= r[3] || !rp[to].n) return;
    dr_model_map(h->m, k, &H, &W, &C);
    seg = (size_t)(r[3] - r[2]) * C;
    for (uint32_t n = 0; n < rp[to].n; n++)
        for (uint32_t y = r[0]; y < r[1]; y++, q += seg)
            memcpy(h->send + q, src + (((size_t)n * H + y) * W + r[2]) * C, seg * sizeof(float));
    dr_device_copy(h->dev[to], h->recv, h->dev[from], h->send, q * sizeof(float));
    q = 0;
    for (uint32_t n = 0; n < rp[to].n; n++)
        for (uint32_t y = r[0]; y < r[1]; y++, q += seg)
            memcpy(dst + (((size_t)n * H + y) * W + r[2]) * C, h->recv + q, seg * sizeof(float));
    if (count) *count += q * sizeof(float);
    if (h->topology) {
        double s = dr_tpu_transfer_seconds(h->topology, h->core[from], h->core[to], q * sizeof(float));
        if (s > h->slowest) h->slowest = s;
    }
}

/* One round of transfers ends: the step waits for its slowest. */
static void round_done(dr_halo *h)
{
    h->seconds += h->slowest;
    h->slowest = 0;
}

/* Every core receives the part of need[c] (rows, columns of map k) outside
 * its tile: first the rows above and below from the cores above and below
 * (over its own columns), then the columns left and right, over all the
 * needed rows, from the cores beside it, which hold those rows by then: the
 * corners travel in two hops. */
static void exchange(dr_halo *h, dr_graph_replica *rp, uint32_t E, uint32_t k, bool grad, uint32_t need[][4])
{
    const dr_spatial_plan *p = h->plan;
    for (uint32_t pass = 0; pass < 2; pass++)
        for (uint32_t e = 0; e < E; e++) {
            uint32_t c = e % p->tiles, *nd = need[c];
            const uint32_t *own = p->tile[c].rect[k];
            uint64_t *count = e < p->tiles ? &h->halo_bytes[c] : NULL;
            if (pass == 0) {
                uint32_t above[4] = { nd[0], own[0], own[2], own[3] };
                uint32_t below[4] = { own[1], nd[1], own[2], own[3] };
                if (c >= p->pw) transfer(h, rp, k, grad, e - p->pw, e, above, count);
                if (c + p->pw < p->tiles) transfer(h, rp, k, grad, e + p->pw, e, below, count);
            } else {
                uint32_t left[4] = { nd[0], nd[1], nd[2], own[2] }, right[4] = { nd[0], nd[1], own[3], nd[3] };
                if (c % p->pw) transfer(h, rp, k, grad, e - 1, e, left, count);
                if (c % p->pw + 1 < p->pw) transfer(h, rp, k, grad, e + 1, e, right, count);
            }
            if (e + 1 == E) round_done(h);
        }
}

static bool windowed(const dr_dense *d)
{
    return d->kind == DR_LAYER_CONV2D || d->kind == DR_LAYER_MAX_POOL2D;
}

/* Maps gathered onto core 0 (forward) or their gradients scattered back. */
static void gather(dr_halo *h, dr_graph_replica *rp, uint32_t E, bool grad)
{
    const dr_spatial_plan *p = h->plan;
    for (uint32_t k = grad ? 1 : 0; k <= p->lp; k++) {
        if (!p->gathered[k]) continue;
        for (uint32_t e = 0; e < E; e++) {
            uint32_t c = e % p->tiles, core0 = e - c;
            uint64_t *count = e < p->tiles ? &h->gather_bytes : NULL;
            if (c == 0) continue;
            if (grad) transfer(h, rp, k, true, core0, e, p->tile[c].rect[k], count);
            else transfer(h, rp, k, false, e, core0, p->tile[c].rect[k], count);
        }
    }
    round_done(h);
}

void dr_halo_before_forward(dr_halo *h, uint32_t l, dr_graph_replica *rp, uint32_t E)
{
    const dr_dense *d = &h->m->layer[l];
    uint32_t need[DR_MAX_TILES][4];
    if (l == h->plan->lp) { gather(h, rp, E, false); return; }
    if (l > h->plan->lp || !windowed(d)) return;
    for (uint32_t c = 0; c < h->plan->tiles; c++) {
        const uint32_t *o = h->plan->tile[c].rect[l + 1];
        dr_window_rows(d, d->pad_top, d->ih, o[0], o[1], need[c]);
        dr_window_rows(d, d->pad_left, d->iw, o[2], o[3], need[c] + 2);
    }
    exchange(h, rp, E, d->src ? d->src : l, false, need);
}

void dr_halo_before_backward(dr_halo *h, uint32_t l, dr_graph_replica *rp, uint32_t E)
{
    const dr_dense *d = &h->m->layer[l];
    uint32_t need[DR_MAX_TILES][4], k = d->src ? d->src : l;
    if (l + 1 == h->plan->lp) gather(h, rp, E, true);
    if (l >= h->plan->lp || d->kind != DR_LAYER_CONV2D || k == 0) return;
    for (uint32_t e = 0; e < E; e++)
        if (rp[e].n) dr_layer_unactivate(h->m, l, rp[e].n, rp[e].w);
    for (uint32_t c = 0; c < h->plan->tiles; c++) {
        const uint32_t *in = h->plan->tile[c].rect[k];
        dr_window_outs(d, d->pad_top, d->oh, in[0], in[1], need[c]);
        dr_window_outs(d, d->pad_left, d->ow, in[2], in[3], need[c] + 2);
    }
    exchange(h, rp, E, l + 1, true, need);
}
