/* distref devices — the engine's halo exchange between the cores of a
 * replica under spatial partitioning (devices/cpu/openmp_spatial.h): the
 * plan is core/spatial_plan.c's, the copies are the engine's own. The
 * planted fault engine_halo_row_short (DR_SEAM_HALO_BELOW, devices/seams.h)
 * receives the halo from the core below one row short. */
#include "devices/cpu/openmp_spatial.h"

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
    return (uint64_t)n * (r[1] - r[0]) * seg * sizeof(float);
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

static void take(const dr_model_spec *m, uint32_t k, uint32_t n, const float *from, float *to, const uint32_t r[4],
                 uint64_t *count)
{
    uint32_t H, W, C;
    uint64_t got;
    dr_model_map(m, k, &H, &W, &C);
    got = dr_omp_halo_copy(H, W, C, n, from, to, r);
    if (count) *count += got;
}

void dr_omp_halo_exchange(const dr_spatial_plan *p, const dr_model_spec *m, uint32_t k, uint32_t n,
                          float *const *maps, const uint32_t need[][4], uint64_t *bytes)
{
    for (uint32_t pass = 0; pass < 2; pass++)
        for (uint32_t c = 0; c < p->tiles; c++) {
            const uint32_t *nd = need[c], *own = p->tile[c].rect[k];
            uint64_t *count = bytes ? &bytes[c] : NULL;
            if (pass == 0) {
                uint32_t above[4] = { nd[0], own[0], own[2], own[3] };
                uint32_t below[4] = { own[1], DR_SEAM_HALO_BELOW(nd[1], own[1]), own[2], own[3] };
                if (c >= p->pw) take(m, k, n, maps[c - p->pw], maps[c], above, count);
                if (c + p->pw < p->tiles) take(m, k, n, maps[c + p->pw], maps[c], below, count);
            } else {
                uint32_t left[4] = { nd[0], nd[1], nd[2], own[2] }, right[4] = { nd[0], nd[1], own[3], nd[3] };
                if (c % p->pw) take(m, k, n, maps[c - 1], maps[c], left, count);
                if (c % p->pw + 1 < p->pw) take(m, k, n, maps[c + 1], maps[c], right, count);
            }
        }
}
