/* distref engine — the tpu strategy's spatial partitioning of a model beyond
 * Dense (--input_partition_dims with Conv2D, docs/MODELS.md "Spatial
 * partitioning with halos"): each replica's maps split over its ph x pw
 * logical cores, on core/spatial_plan.c's plan, as the reference's
 * ref/tpu_spatial.c (never called: the engine's own buffers and copies).
 *
 * Core 0 of replica r is the replica's own bufs (rb[r]: its variables,
 * gradient, loss, labels); cores 1 .. T-1 are bufs of their own (a gradient,
 * a loss, an input map, the backend's maps) reading rb[r]'s variables. Each
 * core's input map holds its tile of the images (cut from the staged rows,
 * engine_tpu.c's tile_x), zeros elsewhere. graph.c drives every layer op on
 * every core of a replica; the backend computes only each core's tile
 * before the plan's lp, core 0 the whole maps from lp on (set_tile), and
 * moves the halos, the gather onto core 0 and the scatter back
 * (spatial_exchange). BatchNormalization's sums are each core's, added into
 * the replica's accumulators (graph.c), so its statistics are the whole
 * image's. The kernel gradients are each core's exact partials, merged into
 * core 0's gradient once before the share (exact: any order; fast: floats
 * added in core order, repeatable).
 *
 * A backend whose buffers are device memory (host_ptr NULL: opencl) gets
 * the two host steps here, the input maps' load and the merge, through
 * download and upload; its cores' buffers are on the replica's device
 * (engine_alloc_at), beside the replica's own.
 *
 * Reported as the reference does: per step, the bytes each logical core of
 * replica 0 received (halo_bytes_per_core, forward and backward halos) and
 * the gather and scatter bytes (gather_bytes), in metrics.jsonl; the run's
 * totals in summary.json's tpu.spatial_partitioning. */
#include "strategies/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t engine_cores(const dr_session *s)
{
    return s->tpu.cores ? s->tpu.tiles : 1;
}

dr_replica_bufs *engine_core(dr_session *s, uint32_t r, uint32_t c)
{
    return c == 0 ? &s->rb[r] : &s->tpu.cores[(size_t)r * (s->tpu.tiles - 1) + c - 1];
}

int engine_spatial_open(dr_session *s, dr_err *err)
{
    engine_tpu *tp = &s->tpu;
    const dr_model_spec *m = &s->plan->exp.model;
    size_t f = s->data->features, P = s->plan->P;
    int rc;
    if (!s->graph || tp->tiles < 2) return DR_OK;
    if (!s->bo->set_tile || !s->bo->spatial_exchange)
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: --input_partition_dims with a model beyond Dense in the "
                       "%s backend: it has no spatial partitioning ops; use --variant=ref", s->bo->name);
    if ((rc = dr_spatial_plan_make(m, (uint32_t)tp->part[0], (uint32_t)tp->part[1], &tp->plan, err))) return rc;
    if (!(tp->cores = calloc((size_t)s->R * (tp->tiles - 1), sizeof *tp->cores)) ||
        !(tp->link = calloc(s->R, sizeof *tp->link)))
        return dr_fail(err, DR_ENOMEM, "tpu: out of host memory for the cores' buffers");
    for (uint32_t r = 0; r < s->R; r++)
        for (uint32_t c = 0; c < tp->tiles; c++) {
            dr_replica_bufs *cb = engine_core(s, r, c);
            if (c > 0) {
                cb->params = s->rb[r].params;   /* read only: the replica's variables */
                uint32_t place = r - s->wlo * s->L;   /* the replica's device: its cores' buffers beside its own */
                if ((rc = engine_alloc_at(s, place, P * dr_grad_bytes(s->num), &cb->grad, err)) ||
                    (rc = engine_alloc_at(s, place, s->esz, &cb->loss, err)) ||
                    (rc = engine_alloc_at(s, place, (size_t)s->rows * f * sizeof(float) + 1, &cb->x, err)) ||
                    (rc = s->bo->replica_open(s->be, cb, s->rows, err)))
                    return rc;
            }
            if ((rc = s->bo->set_tile(s->be, cb, &tp->plan.tile[c], c, err))) return rc;
        }
    return DR_OK;
}

void engine_spatial_close(dr_session *s)
{
    engine_tpu *tp = &s->tpu;
    for (uint32_t i = 0; tp->cores && i < s->R * (tp->tiles - 1); i++) {
        dr_replica_bufs *cb = &tp->cores[i];
        if (cb->scratch) s->bo->replica_close(s->be, cb);
        if (cb->grad) s->bo->release(s->be, cb->grad);
        if (cb->loss) s->bo->release(s->be, cb->loss);
        if (cb->x) s->bo->release(s->be, cb->x);
    }
    free(tp->cores);
    free(tp->link);
    tp->cores = NULL;
    tp->link = NULL;
}

/* Replica r's cores' input maps: each its tile of the rows (tile_x, already
 * on its core), zeros elsewhere. Device memory (host_ptr NULL): the tile
 * read back and the map built on the host (buffers of this call: the
 * replicas may load at once), then written to the core. */
int engine_spatial_load(dr_session *s, uint32_t r, dr_err *err)
{
    engine_tpu *tp = &s->tpu;
    size_t f = s->data->features, len = tp->tile_len, bytes = (size_t)s->rows * f * sizeof(float);
    float *hx = NULL, *ht = NULL;
    int rc = DR_OK;
    for (uint32_t c = 0; rc == DR_OK && c < tp->tiles; c++) {
        dr_buffer *xb = engine_core(s, r, c)->x, *tb = tp->tile_x[r * tp->tiles + c];
        float *x = s->bo->host_ptr(xb), *xt = s->bo->host_ptr(tb);
        const uint32_t *pix = tp->pix + (size_t)c * len;
        if ((!x && !hx && !(hx = malloc(bytes + 1))) || (!xt && !ht && !(ht = malloc(s->rows * len * sizeof(float) + 1)))) {
            rc = dr_fail(err, DR_ENOMEM, "tpu: out of host memory for a core's input map");
            break;
        }
        if (!xt && (rc = s->bo->download(s->be, xt = ht, tb, 0, s->rows * len * sizeof(float), err))) break;
        if (!x) x = hx;
        memset(x, 0, bytes);
        for (size_t e = 0; e < s->rows; e++)
            for (size_t q = 0; q < len; q++) x[e * f + pix[q]] = xt[e * len + q];
        if (x == hx) rc = s->bo->upload(s->be, xb, 0, x, bytes, err);
    }
    free(hx);
    free(ht);
    return rc;
}

/* Replica r's cores before layer l's forward or backward: the backend's
 * halos, gather or scatter; replica 0's bytes counted. */
int engine_spatial_exchange(dr_session *s, uint32_t r, uint32_t l, bool grad, dr_err *err)
{
    engine_tpu *tp = &s->tpu;
    dr_replica_bufs *cores[DR_MAX_TILES];
    for (uint32_t c = 0; c < tp->tiles; c++) cores[c] = engine_core(s, r, c);
    memset(tp->link[r], 0, sizeof tp->link[r]);
    return s->bo->spatial_exchange(s->be, cores, &tp->plan, l, grad, r == 0 ? tp->halo : NULL,
                                   r == 0 ? &tp->gather : NULL, &tp->link[r][0][0][0], err);
}

/* The emulated time of the exchange just done by replicas lo .. lo + n - 1:
 * every core of every replica sends at once, so each round (the gather or
 * scatter, then the halo's two passes) takes its slowest transfer (TPU.md's
 * link model), as the reference's ref/halo.c. */
void engine_spatial_rounds(dr_session *s, uint32_t lo, uint32_t n)
{
    engine_tpu *tp = &s->tpu;
    for (uint32_t round = 0; round < 3; round++) {
        double slowest = 0;
        for (uint32_t r = lo; r < lo + n; r++)
            for (uint32_t a = 0; a < tp->tiles; a++)
                for (uint32_t b = 0; b < tp->tiles; b++) {
                    uint64_t bytes = tp->link[r][round][a][b];
                    double t;
                    if (!bytes) continue;
                    t = dr_tpu_transfer_seconds(&tp->sys.topology, (int)dr_strategy_tpu_device(&s->strat, r, a) - 1,
                                                (int)dr_strategy_tpu_device(&s->strat, r, b) - 1, bytes);
                    if (t > slowest) slowest = t;
                }
        tp->halo_s += slowest;
    }
}

/* Replica r's cores' gradient partials into core 0's, before its share.
 * Device memory (host_ptr NULL): each read back, merged on the host, core
 * 0's written back. */
int engine_spatial_merge(dr_session *s, uint32_t r, dr_err *err)
{
    const dr_form *f = dr_form_of(dr_grad_form(s->num));
    size_t bytes = s->plan->P * dr_grad_bytes(s->num);
    void *g0 = s->bo->host_ptr(s->rb[r].grad), *own = NULL, *gc = NULL;
    int rc = DR_OK;
    if (!g0 && (!(g0 = own = malloc(bytes + 1)) || !(gc = malloc(bytes + 1)))) {
        free(own);
        return dr_fail(err, DR_ENOMEM, "tpu: out of host memory to merge the cores' gradients");
    }
    if (own) rc = s->bo->download(s->be, own, s->rb[r].grad, 0, bytes, err);
    for (uint32_t c = 1; rc == DR_OK && c < s->tpu.tiles; c++) {
        dr_buffer *b = engine_core(s, r, c)->grad;
        void *h = s->bo->host_ptr(b);
        if (!h && !(rc = s->bo->download(s->be, gc, b, 0, bytes, err))) h = gc;
        if (rc == DR_OK) f->merge(g0, h, s->plan->P);
    }
    if (own && rc == DR_OK) rc = s->bo->upload(s->be, s->rb[r].grad, 0, own, bytes, err);
    free(own);
    free(gc);
    return rc;
}

/* The step's bytes into its metrics line (after what extra holds), added to the run's totals. */
void engine_spatial_report(dr_session *s, char *extra, size_t cap)
{
    engine_tpu *tp = &s->tpu;
    size_t n = strlen(extra);
    if (!tp->cores) return;
    n += (size_t)snprintf(extra + n, n < cap ? cap - n : 0, ",\"halo_bytes_per_core\":[");
    for (uint32_t c = 0; c < tp->tiles; c++) {
        if (n < cap) n += (size_t)snprintf(extra + n, cap - n, "%s%llu", c ? "," : "", (unsigned long long)tp->halo[c]);
        tp->halo_total[c] += tp->halo[c];
        tp->halo[c] = 0;
    }
    if (n < cap) snprintf(extra + n, cap - n, "],\"gather_bytes\":%llu", (unsigned long long)tp->gather);
    tp->gather_total += tp->gather;
    tp->gather = 0;
}

void engine_spatial_summary(const dr_session *s, json_object *o)
{
    const engine_tpu *tp = &s->tpu;
    json_object *sp, *hb;
    char grid[32];
    if (!tp->cores) return;
    sp = json_object_new_object();
    hb = json_object_new_array();
    snprintf(grid, sizeof grid, "%dx%d", tp->part[0], tp->part[1]);
    for (uint32_t c = 0; c < tp->tiles; c++) json_object_array_add(hb, json_object_new_int64((int64_t)tp->halo_total[c]));
    json_object_object_add(sp, "tiles", json_object_new_string(grid));
    json_object_object_add(sp, "tiled_layers", json_object_new_int((int)tp->plan.lp));
    json_object_object_add(sp, "tiles_end", json_object_new_string(tp->plan.stop));
    json_object_object_add(sp, "halo_bytes_per_core_total", hb);
    json_object_object_add(sp, "gather_bytes_total", json_object_new_int64((int64_t)tp->gather_total));
    json_object_object_add(o, "spatial_partitioning", sp);
}
