/* distref reference — the tpu strategy's spatial partitioning of a model
 * beyond Dense (--input_partition_dims with Conv2D, docs/MODELS.md): the
 * plan (core/spatial_plan.c), each core's work buffers and input tile, the
 * halo bytes reported per step (metrics.jsonl) and per run (summary.json).
 * The step itself is ref/graph.c's, over replica x core entries, with the
 * halo exchange of ref/halo.c. */
#include "ref/trainer.h"
#include "ref/halo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dr_tpu_spatial_open(trainer *t, dr_err *err)
{
    tpu_run *tp = &t->tpu;
    const dr_model_spec *m = &t->exp.model;
    uint32_t E = t->strat.num_replicas * tp->tiles;
    size_t f = t->data->features, widest = 0;
    int rc = dr_spatial_plan_make(m, (uint32_t)tp->part[0], (uint32_t)tp->part[1], &tp->plan, err);
    if (rc) return rc;
    for (uint32_t k = 0; k <= m->nlayers; k++) {
        uint32_t H, W, C;
        dr_model_map(m, k, &H, &W, &C);
        if ((size_t)H * W * C > widest) widest = (size_t)H * W * C;
    }
    tp->halo = calloc(1, sizeof *tp->halo);
    tp->core_work = calloc(E, sizeof *tp->core_work);
    tp->core_x = calloc((size_t)E * tp->local * f + 1, sizeof(float));
    if (!tp->halo || !tp->core_work || !tp->core_x ||
        !(tp->halo->send = malloc(tp->local * widest * sizeof(float) + 1)) ||
        !(tp->halo->recv = malloc(tp->local * widest * sizeof(float) + 1)))
        return dr_fail(err, DR_ENOMEM, "tpu: out of host memory for the spatial partitioning's buffers");
    tp->halo->m = m;
    tp->halo->topology = &tp->sys.topology;
    tp->halo->plan = &tp->plan;
    for (uint32_t e = 0; e < E; e++) {
        dr_work *w = &tp->core_work[e];
        if ((rc = dr_work_init(w, m, tp->local, err))) return rc;
        for (uint32_t l = 0; l < m->nlayers; l++) {   /* a hole in a tile reads 0, never a neighbour's value */
            memset(w->pre[l], 0, (size_t)tp->local * m->layer[l].out * sizeof(float));
            memset(w->act[l + 1], 0, (size_t)tp->local * m->layer[l].out * sizeof(float));
        }
        w->tile = &tp->plan.tile[e % tp->tiles];
        tp->halo->x[e] = tp->core_x + (size_t)e * tp->local * f;
        tp->halo->dev[e] = &t->strat.device[dr_strategy_tpu_device(&t->strat, e / tp->tiles, e % tp->tiles)];
        tp->halo->core[e] = (int)dr_strategy_tpu_device(&t->strat, e / tp->tiles, e % tp->tiles) - 1;
    }
    return DR_OK;
}

void dr_tpu_spatial_close(trainer *t)
{
    tpu_run *tp = &t->tpu;
    for (uint32_t e = 0; tp->core_work && e < t->strat.num_replicas * tp->tiles; e++) dr_work_free(&tp->core_work[e]);
    if (tp->halo) { free(tp->halo->send); free(tp->halo->recv); }
    free(tp->halo); free(tp->core_work); free(tp->core_x);
    tp->halo = NULL; tp->core_work = NULL; tp->core_x = NULL;
}

/* Replica r's tiles, already on their cores (tp->tile_x, load_static_batch),
 * into each core's input map at the tile's pixels (one channel). */
void dr_tpu_spatial_load(trainer *t, uint32_t r)
{
    tpu_run *tp = &t->tpu;
    size_t f = t->data->features;
    for (uint32_t c = 0; c < tp->tiles; c++) {
        const float *xt = tp->tile_x + (size_t)c * tp->local * tp->tile_len;
        float *x = tp->halo->x[r * tp->tiles + c];
        for (uint32_t n = 0; n < tp->local; n++)
            for (uint32_t q = 0; q < tp->tile_len; q++)
                x[(size_t)n * f + tp->tile_pixels[c * tp->tile_len + q]] = xt[(size_t)n * tp->tile_len + q];
    }
}

/* The step's halo bytes per logical core of replica 0 (forward halos and
 * the backward's gradient halos) and its gather/scatter bytes, for the
 * metrics line; added to the run's totals. */
int dr_tpu_spatial_extra(trainer *t, char *out, size_t cap)
{
    tpu_run *tp = &t->tpu;
    int n = snprintf(out, cap, ",\"halo_bytes_per_core\":[");
    for (uint32_t c = 0; c < tp->tiles && n > 0 && (size_t)n < cap; c++) {
        n += snprintf(out + n, cap - (size_t)n, "%s%llu", c ? "," : "", (unsigned long long)tp->halo->halo_bytes[c]);
        tp->halo_total[c] += tp->halo->halo_bytes[c];
        tp->halo->halo_bytes[c] = 0;
    }
    if (n > 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, "],\"gather_bytes\":%llu", (unsigned long long)tp->halo->gather_bytes);
    tp->gather_total += tp->halo->gather_bytes;
    tp->halo->gather_bytes = 0;
    return n;
}

void dr_tpu_spatial_report(const trainer *t, json_object *o)
{
    const tpu_run *tp = &t->tpu;
    json_object *s = json_object_new_object(), *hb = json_object_new_array();
    char grid[32];
    snprintf(grid, sizeof grid, "%dx%d", tp->part[0], tp->part[1]);
    for (uint32_t c = 0; c < tp->tiles; c++) json_object_array_add(hb, json_object_new_int64((int64_t)tp->halo_total[c]));
    json_object_object_add(s, "tiles", json_object_new_string(grid));
    json_object_object_add(s, "tiled_layers", json_object_new_int((int)tp->plan.lp));
    json_object_object_add(s, "tiles_end", json_object_new_string(tp->plan.stop));
    json_object_object_add(s, "halo_bytes_per_core_total", hb);
    json_object_object_add(s, "gather_bytes_total", json_object_new_int64((int64_t)tp->gather_total));
    json_object_object_add(o, "spatial_partitioning", s);
}
