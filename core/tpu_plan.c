/* distref core — the tpu strategy's part of a run plan (include/distref/
 * plan.h): the system and computation shape from the flags, the tiles of
 * --input_partition_dims, the parameters each logical core holds, their HBM,
 * and the emulated compute time of a step. The reference (ref/tpu_step.c)
 * and the engine (strategies/engine_tpu.c) both plan a tpu run with these.
 */
#include "distref/plan.h"

#include <stdlib.h>
#include <string.h>

uint32_t dr_tpu_partition_cores(const char *dims)
{
    uint32_t t = 1;
    while (*dims) {
        char *end;
        unsigned long v = strtoul(dims, &end, 10);
        if (end == dims) return t;
        t *= v > 0 && v <= DR_MAX_TILES ? (uint32_t)v : 1;
        dims = *end ? end + 1 : end;
    }
    return t;
}

int dr_tpu_options(const dr_run_config *cfg, const dr_experiment *exp, dr_tpu_system *sys,
                   dr_strategy_options *opt, int part[2], uint32_t *tiles, dr_err *err)
{
    static const int image[2] = { DR_IMAGE_SIDE, DR_IMAGE_SIDE };
    int cs[DR_TPU_RANK] = { 0 }, prod = 1;
    int rc = dr_tpu_initialize_system(sys, cfg->strategy.tpu_address, cfg->tpu_platform, cfg->tpu_hbm_scale, err);
    if (rc) return rc;
    part[0] = part[1] = 1;
    if (cfg->input_partition_dims[0]) {
        if (exp->model.layer[0].in != DR_IMAGE_SIDE * DR_IMAGE_SIDE)
            return dr_fail(err, DR_EUSAGE, "--input_partition_dims: experiment %s's input has %u "
                           "features, not a %dx%d image", exp->name, exp->model.layer[0].in, DR_IMAGE_SIDE, DR_IMAGE_SIDE);
        if ((rc = dr_tpu_partition_shape(cfg->input_partition_dims, image, part, cs, &prod, err))) return rc;
    }
    *tiles = (uint32_t)prod;
    memcpy(opt->tpu_computation_shape, cs, sizeof cs);
    opt->tpu_system = sys;
    return DR_OK;
}

void dr_tpu_tile_pixels(const int part[2], uint32_t *pix)
{
    uint32_t th = DR_IMAGE_SIDE / (uint32_t)part[0], tw = DR_IMAGE_SIDE / (uint32_t)part[1], q = 0;
    uint32_t tiles = (uint32_t)(part[0] * part[1]);
    for (uint32_t l = 0; l < tiles; l++) {
        uint32_t i = l / (uint32_t)part[1], j = l % (uint32_t)part[1];
        for (uint32_t y = 0; y < th; y++)
            for (uint32_t x = 0; x < tw; x++) pix[q++] = (i * th + y) * DR_IMAGE_SIDE + j * tw + x;
    }
}

void dr_tpu_core_ranges(const dr_model_spec *m, uint32_t tiles, const uint32_t *pix, uint32_t tile_len,
                        size_t *ranges, uint32_t *nranges)
{
    size_t out0 = m->layer[0].out, k0 = (size_t)m->layer[0].in * out0, P = dr_model_num_params(m);
    for (uint32_t l = 0; l < tiles; l++) {
        size_t *rg = ranges + 2 * (size_t)l * (tile_len + 1);
        uint32_t n = 0;
        if (tiles == 1) { rg[0] = 0; rg[1] = P; nranges[l] = 1; continue; }
        for (uint32_t q = 0; q < tile_len; q++) {
            size_t lo = pix[l * tile_len + q] * out0;
            if (n && rg[2 * n - 1] == lo) rg[2 * n - 1] = lo + out0;
            else { rg[2 * n] = lo; rg[2 * n + 1] = lo + out0; n++; }
        }
        if (l == 0) { rg[2 * n] = k0; rg[2 * n + 1] = P; n++; }
        nranges[l] = n;
    }
}

/* The floats of one example's feature maps (pre-activations and
 * activations) logical core c holds under spatial partitioning: before the
 * plan's lp each layer's output tile, and for a Conv2D the halo its windows
 * read beyond its input tile (the rectangle received, corners included);
 * from lp on core 0 the whole maps, and the whole of every map gathered
 * there; the other cores nothing more. */
static uint64_t core_map_floats(const dr_model_spec *m, const dr_spatial_plan *p, uint32_t c)
{
    uint64_t n = 0;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        const uint32_t *in = p->tile[c].rect[l], *o = p->tile[c].rect[l + 1];
        uint32_t r[2], q[2];
        if (l >= p->lp) { n += c == 0 ? 2ull * d->out : 0; continue; }
        n += 2ull * (o[1] - o[0]) * (o[3] - o[2]) * d->oc;
        if (d->kind != DR_LAYER_CONV2D) continue;
        dr_window_rows(d, d->pad_top, d->ih, o[0], o[1], r);
        dr_window_rows(d, d->pad_left, d->iw, o[2], o[3], q);
        n += ((uint64_t)(r[1] - r[0]) * (q[1] - q[0]) - (uint64_t)(in[1] - in[0]) * (in[3] - in[2])) * d->ic;
    }
    for (uint32_t k = 1; c == 0 && k <= p->lp; k++)   /* map k: layer k-1's output, whole on core 0 */
        if (p->gathered[k]) {
            const uint32_t *t = p->tile[0].rect[k];
            n += m->layer[k - 1].out - (uint64_t)(t[1] - t[0]) * (t[3] - t[2]) * m->layer[k - 1].oc;
        }
    return n;
}

int dr_tpu_reserve_hbm(dr_strategy *s, const dr_model_spec *m, uint32_t nslots, uint32_t local, uint32_t tiles,
                       const size_t *ranges, const uint32_t *nranges, const dr_spatial_plan *plan,
                       uint64_t *reserved, dr_err *err)
{
    uint32_t tile_len = m->layer[0].in / tiles;
    uint64_t per_param = sizeof(float) * (1 + (uint64_t)nslots) + sizeof(dr_acc), act = 0;
    for (uint32_t i = 0; i < m->nlayers; i++) act += 2ull * m->layer[i].out;   /* pre + act */
    for (uint32_t r = 0; r < s->num_replicas; r++)
        for (uint32_t l = 0; l < tiles; l++) {
            const size_t *rg = ranges + 2 * (size_t)l * (tile_len + 1);
            uint32_t d = dr_strategy_tpu_device(s, r, l);
            uint64_t params = 0, w, x = (uint64_t)local * tile_len * sizeof(float);
            for (uint32_t i = 0; i < nranges[l]; i++) params += rg[2 * i + 1] - rg[2 * i];
            w = params * per_param;
            if (plan) x += (uint64_t)local * core_map_floats(m, plan, l) * sizeof(float);
            else {
                if (tiles > 1) x += (uint64_t)local * m->layer[0].out * sizeof(dr_acc);
                if (l == 0) x += (uint64_t)local * act * sizeof(float);
            }
            if (dr_device_reserve(&s->device[d], w + x, err))
                return dr_fail_wrap(err, "tpu: replica %u, logical core %u needs %llu bytes (weights, slots "
                                    "and gradients %llu, inputs and activations %llu)%s", r, l,
                                    (unsigned long long)(w + x), (unsigned long long)w, (unsigned long long)x,
                                    tiles == 1 ? "; --input_partition_dims spreads the first layer "
                                    "over more cores" : "");
            reserved[d] += w + x;
        }
    return DR_OK;
}

double dr_tpu_compute_seconds(const dr_model_spec *m, uint32_t rows, uint32_t tiles)
{
    double macs = (double)m->layer[0].in * m->layer[0].out / tiles;
    for (uint32_t l = 1; l < m->nlayers; l++) macs += (double)m->layer[l].in * m->layer[l].out;
    return 6.0 * rows * macs / 2e13;
}
