/* distref devices — the engine's halo exchange between the cores of a
 * replica under spatial partitioning (devices/cpu/openmp_spatial.h): the
 * plan is core/spatial_plan.c's, the copies are the engine's own. The
 * exchange's rectangles come from dr_omp_halo_moves, which the OpenCL
 * backend's device copies (devices/opencl/opencl_halo.c) share. The
 * planted faults engine_halo_row_short and engine_halo_row_short_tiles
 * (DR_SEAM_HALO_BELOW, devices/seams.h) receive the halo from the core below
 * one row short: the models suite catches the first through a partitioned
 * step, tests/test_omp_halo.c the second in the exchange alone. */
#include "devices/cpu/openmp_spatial.h"
#include "devices/cpu/openmp_graph.h"

#include <string.h>

#include "devices/seams.h"

uint64_t dr_omp_halo_copy(uint32_t H, uint32_t W, uint32_t C, uint32_t n, const float *src, float *dst,
                          const uint32_t r[4])
{
    size_t seg;
    if (r[0] >= r[1] || r[2] >= r[3]) return 0;
    seg = (size_t)(r[3] - r[2]) * C;
    for (uint32_t e = 0; e < n; e++)
        for (uint32_t y = r[0]; y < r[1]; y++) {
            size_t at = (((size_t)e * H + y) * W + r[2]) * C;
            memcpy(dst + at, src + at, seg * sizeof(float));
        }
    return dr_omp_rect_bytes(C, n, r);
}

uint64_t dr_omp_rect_bytes(uint32_t C, uint32_t n, const uint32_t r[4])
{
    if (r[0] >= r[1] || r[2] >= r[3]) return 0;
    return (uint64_t)n * (r[1] - r[0]) * (r[3] - r[2]) * C * sizeof(float);
}

void dr_omp_halo_need(const dr_spatial_plan *p, const dr_model_spec *m, uint32_t l, bool grad,
                      uint32_t need[][4])
{
    const dr_dense *d = &m->layer[l];
    bool pool = d->kind == DR_LAYER_MAX_POOL2D;
    uint32_t k = d->src ? d->src : l, pt = pool ? 0 : d->pad_top, pl = pool ? 0 : d->pad_left;
    for (uint32_t c = 0; c < p->tiles; c++) {
        const uint32_t *o = p->tile[c].rect[l + 1], *in = p->tile[c].rect[k];
        if (grad) {
            dr_window_outs(d, pt, d->oh, in[0], in[1], need[c]);
            dr_window_outs(d, pl, d->ow, in[2], in[3], need[c] + 2);
        } else {
            dr_window_rows(d, pt, d->ih, o[0], o[1], need[c]);
            dr_window_rows(d, pl, d->iw, o[2], o[3], need[c] + 2);
        }
    }
}

/* Pass 0 the rows from the cores above and below, over the receiver's own
 * columns; pass 1 the columns from the cores beside it over all its needed
 * rows, so the corners come in two hops (ref/halo.c's order). */
uint32_t dr_omp_halo_moves(const dr_spatial_plan *p, uint32_t k, const uint32_t need[][4], dr_omp_halo_move *mv)
{
    uint32_t n = 0;
    for (uint32_t pass = 0; pass < 2; pass++)
        for (uint32_t c = 0; c < p->tiles; c++) {
            const uint32_t *nd = need[c], *own = p->tile[c].rect[k];
            if (pass == 0) {
                if (c >= p->pw) mv[n++] = (dr_omp_halo_move){ 0, c - p->pw, c, { nd[0], own[0], own[2], own[3] } };
                if (c + p->pw < p->tiles)
                    mv[n++] = (dr_omp_halo_move){ 0, c + p->pw, c,
                                                  { own[1], DR_SEAM_HALO_BELOW(nd[1], own[1]), own[2], own[3] } };
            } else {
                if (c % p->pw) mv[n++] = (dr_omp_halo_move){ 1, c - 1, c, { nd[0], nd[1], nd[2], own[2] } };
                if (c % p->pw + 1 < p->pw) mv[n++] = (dr_omp_halo_move){ 1, c + 1, c, { nd[0], nd[1], own[3], nd[3] } };
            }
        }
    return n;
}

void dr_omp_halo_tally(const dr_omp_halo_move *mv, uint64_t got, uint64_t *bytes, dr_omp_links *link)
{
    if (bytes) bytes[mv->to] += got;
    if (link && got > link[mv->pass][mv->from][mv->to]) link[mv->pass][mv->from][mv->to] = got;
}

void dr_omp_halo_exchange(const dr_spatial_plan *p, const dr_model_spec *m, uint32_t k, uint32_t n,
                          float *const *maps, const uint32_t need[][4], uint64_t *bytes, dr_omp_links *link)
{
    dr_omp_halo_move mv[DR_OMP_HALO_MOVES];
    uint32_t H, W, C, moves = dr_omp_halo_moves(p, k, need, mv);
    dr_model_map(m, k, &H, &W, &C);
    for (uint32_t i = 0; i < moves; i++)
        dr_omp_halo_tally(&mv[i], dr_omp_halo_copy(H, W, C, n, maps[mv[i].from], maps[mv[i].to], mv[i].r), bytes,
                          link);
}

/* ---- the backend's ops: a replica's cores in the engine's step ------------ */

int dr_omp_set_tile(dr_backend *b, dr_replica_bufs *rb, const dr_tile *tile, uint32_t core, dr_err *err)
{
    dr_omp_scratch *s = rb ? rb->scratch : NULL;
    (void)b;
    if (!s || !s->graph) return dr_fail(err, DR_ESTATE, "openmp backend: set_tile on a workspace without maps");
    s->graph->tile = tile;
    s->graph->core = core;
    return DR_OK;
}

/* Core c's buffer of map k, or of its gradient: the map its layers read
 * (dr_omp_map; the mixed step's input map is xc, the tile rounded to c by
 * graph_begin, so its halo travels rounded, as the unpartitioned conv reads
 * it). The buffers are the core's own: dr_omp_map hands them read-only to
 * the layers. */
static float *core_map(dr_replica_bufs *const *cores, uint32_t c, uint32_t k, bool grad)
{
    dr_omp_scratch *s = cores[c]->scratch;
    if (grad) return s->graph->dmap[k];
    return DR_SEAM_MIXED_HALO_INPUT((float *)dr_omp_map(cores[c], k), dr_omp_f32(cores[c]->x), k);
}

/* Where the tiles end (layer lp): the maps the rest reads, each core's tile
 * onto core 0 (forward), or their gradients from core 0 back to the tiles
 * (backward): exact copies, their bytes into *bytes. */
static void gather(const dr_spatial_plan *p, const dr_model_spec *m, dr_replica_bufs *const *cores, uint32_t n,
                   bool grad, uint64_t *bytes, dr_omp_links link)
{
    for (uint32_t k = grad ? 1 : 0; k <= p->lp; k++) {
        uint32_t H, W, C;
        if (!p->gathered[k]) continue;
        dr_model_map(m, k, &H, &W, &C);
        for (uint32_t c = 1; c < p->tiles; c++) {
            uint32_t from = grad ? 0 : c, to = grad ? c : 0;
            uint64_t got = dr_omp_halo_copy(H, W, C, n, core_map(cores, from, k, grad), core_map(cores, to, k, grad),
                                            p->tile[c].rect[k]);
            if (bytes) *bytes += got;
            if (link && got > link[from][to]) link[from][to] = got;
        }
    }
}

int dr_omp_spatial_exchange(dr_backend *b, dr_replica_bufs *const *cores, const dr_spatial_plan *p, uint32_t l,
                            bool grad, uint64_t *halo, uint64_t *gather_bytes, uint64_t *link, dr_err *err)
{
    dr_omp_links *ln = (dr_omp_links *)link;   /* rounds: the gather or scatter, the two passes */
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    uint32_t need[DR_MAX_TILES][4], k = d->src ? d->src : l, n;
    float *maps[DR_MAX_TILES];
    for (uint32_t c = 0; c < p->tiles; c++) {
        const dr_omp_scratch *s = cores[c] ? cores[c]->scratch : NULL;
        if (!s || !s->graph || s->graph->tile != &p->tile[c])
            return dr_fail(err, DR_ESTATE, "openmp backend: spatial_exchange: core %u holds no tile of the plan", c);
    }
    n = ((dr_omp_scratch *)cores[0]->scratch)->graph->rt.n;
    if (n == 0) return DR_OK;
    if (!grad) {
        if (l == p->lp) gather(p, m, cores, n, false, gather_bytes, ln ? ln[0] : NULL);
        if (l >= p->lp || (d->kind != DR_LAYER_CONV2D && d->kind != DR_LAYER_MAX_POOL2D)) return DR_OK;
        for (uint32_t c = 0; c < p->tiles; c++) maps[c] = core_map(cores, c, k, false);
        dr_omp_halo_need(p, m, l, false, need);
        dr_omp_halo_exchange(p, m, k, n, maps, (const uint32_t (*)[4])need, halo, ln ? ln + 1 : NULL);
        return DR_OK;
    }
    if (l + 1 == p->lp) gather(p, m, cores, n, true, gather_bytes, ln ? ln[0] : NULL);
    if (l >= p->lp || d->kind != DR_LAYER_CONV2D || k == 0) return DR_OK;
    /* each core's output gradient masked by its ReLU before it travels (the
     * backward masks its tile again: the same values) */
    for (uint32_t c = 0; c < p->tiles; c++) {
        dr_omp_unactivate(m, l, cores[c]->scratch, n);
        maps[c] = core_map(cores, c, l + 1, true);
    }
    dr_omp_halo_need(p, m, l, true, need);
    dr_omp_halo_exchange(p, m, l + 1, n, maps, (const uint32_t (*)[4])need, halo, ln ? ln + 1 : NULL);
    return DR_OK;
}
