/* distref engine — the tpu strategy: replicas on the cores of an emulated
 * TPU slice, computed concurrently on threads.
 *
 *   static shapes   every replica computes G/R rows; rows beyond its share
 *                   of a short batch are zero padding, forwarded and masked
 *   spatial         --input_partition_dims: each logical core holds a tile
 *   partitioning    of the 28x28 input and its rows of the first kernel; its
 *                   exact partial sums of layer 0 merge on logical core 0,
 *                   which adds the bias and rounds once; the delta of layer
 *                   0 travels back and each core forms its kernel rows'
 *                   gradient; a model beyond Dense: every map split over
 *                   the cores with halos (graph_spatial.c)
 *   collectives     the comm's torus all-reduce, one per logical core over
 *                   the parameters it holds
 *   accumulation    --gradient_accumulation_steps: each replica's shares
 *                   accumulate on the host; the k-th micro-step runs the
 *                   rings and applies (step.c's engine_accumulate)
 *   step time       the same alpha-beta estimate as the reference's
 */
#include "strategies/engine_internal.h"
#include "strategies/seams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* The cores a replica's maps are split over (--input_partition_dims under
 * tpu, "A,B": A x B); 1 otherwise. Malformed dims are dr_tpu_options' to
 * refuse, later. */
uint32_t engine_tpu_partition_tiles(const dr_run_plan *plan)
{
    return plan->spec.kind == DR_STRATEGY_TPU ? dr_tpu_partition_cores(plan->cfg->input_partition_dims) : 1;
}

int engine_tpu_open(dr_session *s, dr_strategy_options *opt, dr_err *err)
{
    engine_tpu *tp = &s->tpu;
    int rc = dr_tpu_options(s->cfg, &s->plan->exp, &tp->sys, opt, tp->part, &tp->tiles, err);
    if (rc) return rc;
    tp->on = true;
    return DR_OK;
}

int engine_tpu_buffers(dr_session *s, dr_err *err)
{
    engine_tpu *tp = &s->tpu;
    size_t out0 = s->plan->exp.model.layer[0].out;
    int rc;
    tp->tile_len = s->plan->exp.model.layer[0].in / tp->tiles;
    tp->max_ranges = tp->tile_len + 1;
    tp->ranges = malloc(2 * (size_t)tp->tiles * tp->max_ranges * sizeof *tp->ranges + 1);
    tp->nranges = calloc(tp->tiles, sizeof *tp->nranges);
    tp->pix = malloc((size_t)tp->tiles * tp->tile_len * sizeof *tp->pix + 1);
    if (!tp->ranges || !tp->nranges || !tp->pix) return dr_fail(err, DR_ENOMEM, "tpu: out of host memory");
    if (tp->tiles > 1) {
        dr_tpu_tile_pixels(tp->part, tp->pix);
        tp->tile_x = calloc((size_t)s->R * tp->tiles, sizeof *tp->tile_x);
        tp->tile_stage = malloc((size_t)s->rows * tp->tile_len * sizeof(float) + 1);
        if (!tp->tile_x || !tp->tile_stage) return dr_fail(err, DR_ENOMEM, "tpu: out of host memory for the tiles");
        /* on the replica's device (opencl: its queue, where its kernels run in order) */
        for (uint32_t i = 0; i < s->R * tp->tiles; i++)
            if ((rc = engine_alloc_at(s, i / tp->tiles, (size_t)s->rows * tp->tile_len * sizeof(float), &tp->tile_x[i],
                                      err)))
                return rc;
        for (uint32_t r = 0; r < s->R; r++)
            if ((rc = engine_alloc_at(s, r, (size_t)s->rows * out0 * s->esz, &tp->z[r], err)) ||
                (rc = engine_alloc_at(s, r, (size_t)s->rows * out0 * sizeof(float), &tp->delta[r], err)))
                return rc;
    }
    /* a model beyond Dense keeps every variable on each replica's core 0 (its
     * cores hold the maps' tiles), as the reference's ref/tpu_step.c */
    dr_tpu_core_ranges(&s->plan->exp.model, dr_model_is_dense(&s->plan->exp.model) ? tp->tiles : 1, tp->pix,
                       tp->tile_len, tp->ranges, tp->nranges);
    if ((rc = engine_spatial_open(s, err))) return rc;
    /* each core's share of the replica's memory, against the core's HBM */
    uint64_t got[DR_MAX_DEVICES] = { 0 };
    return dr_tpu_reserve_hbm(&s->strat, &s->plan->exp.model, s->plan->nslots, s->rows, tp->tiles, tp->ranges,
                              tp->nranges, tp->cores ? &tp->plan : NULL, got, err);
}

void engine_tpu_close(dr_session *s)
{
    engine_tpu *tp = &s->tpu;
    engine_spatial_close(s);
    for (uint32_t i = 0; tp->tile_x && i < s->R * tp->tiles; i++)
        if (tp->tile_x[i]) s->bo->release(s->be, tp->tile_x[i]);
    for (uint32_t r = 0; r < DR_MAX_DEVICES - 1; r++) {
        if (tp->z[r]) s->bo->release(s->be, tp->z[r]);
        if (tp->delta[r]) s->bo->release(s->be, tp->delta[r]);
    }
    free(tp->ranges); free(tp->nranges); free(tp->pix); free(tp->tile_x); free(tp->tile_stage);
}

/* Each tile's columns of the staged rows, uploaded to the tile's core. */
static int stage_tiles(dr_session *s, uint32_t r, dr_err *err)
{
    engine_tpu *tp = &s->tpu;
    size_t f = s->data->features, len = tp->tile_len, rows = s->rows;
    float *t = tp->tile_stage;
    int rc = DR_OK;
    for (uint32_t l = 0; rc == DR_OK && l < tp->tiles; l++) {
        const uint32_t *pix = tp->pix + l * len;
        for (size_t e = 0; e < rows; e++)
            for (size_t q = 0; q < len; q++) t[e * len + q] = s->host_x[e * f + pix[q]];
        rc = s->bo->upload(s->be, tp->tile_x[r * tp->tiles + l], 0, t, rows * len * sizeof(float), err);
        engine_count(&s->strat, 0, dr_strategy_tpu_device(&s->strat, r, l), rows * len * sizeof(float));
    }
    return rc;
}

static int replica(dr_session *s, uint32_t r, double *merge_s, dr_err *err)
{
    engine_tpu *tp = &s->tpu;
    const dr_backend_ops *b = s->bo;
    dr_replica_bufs *rb = &s->rb[r];
    uint32_t n = s->off[r + 1] - s->off[r], rows = s->rows;
    size_t out0 = s->plan->exp.model.layer[0].out;
    const dr_tpu_topology *top = &tp->sys.topology;
    uint32_t dev0 = dr_strategy_tpu_device(&s->strat, r, 0);
    int rc;
    if (s->mixed) return engine_mixed_compute(s, r, DR_SEAM_MIXED_TPU_ROWS(n, rows), err);   /* unpartitioned */
    DR_SEAM_PAD_EXAMPLES(n, rows);
    if (tp->tiles == 1) {
        if ((rc = b->forward(s->be, rb, rows, 0, err)) || (rc = b->loss_grad(s->be, rb, n, true, err))) return rc;
        return b->share(s->be, rb, s->mult[r], s->coef, s->den, err);
    }
    /* layer 0 from the tiles: partial sums on each core, merged on core 0 */
    if ((rc = b->fill_zero(s->be, tp->z[r], 0, (size_t)rows * out0 * s->esz, err))) return rc;
    for (uint32_t l = 0; l < tp->tiles; l++) {
        uint32_t dev = dr_strategy_tpu_device(&s->strat, r, l);
        rc = b->layer0_partial(s->be, tp->tile_x[r * tp->tiles + l], tp->pix + l * tp->tile_len, tp->tile_len, rows,
                               rb->params, tp->z[r], err);
        if (rc) return rc;
        if (l > 0) {
            uint64_t bytes = (uint64_t)rows * out0 * (s->num == DR_NUMERICS_FAST ? sizeof(float) : DR_ACC_BYTES);
            double t = dr_tpu_transfer_seconds(top, (int)dev - 1, (int)dev0 - 1, bytes);
            if (t > merge_s[0]) merge_s[0] = t;
        }
    }
    if ((rc = b->layer0_finish(s->be, rb, tp->z[r], rows, err)) || (rc = b->forward(s->be, rb, rows, 1, err)) ||
        (rc = b->loss_grad(s->be, rb, n, false, err)))
        return rc;
    if (n > 0) {   /* the delta of layer 0 to every tile; each core its kernel rows' gradient */
        float *d = malloc((size_t)n * out0 * sizeof *d + 1);
        if (!d) return dr_fail(err, DR_ENOMEM, "tpu: out of host memory for the delta");
        rc = b->layer0_delta(s->be, rb, n, d, err);
        if (rc == DR_OK) rc = b->upload(s->be, tp->delta[r], 0, d, (size_t)n * out0 * sizeof(float), err);
        free(d);
        for (uint32_t l = 0; rc == DR_OK && l < tp->tiles; l++) {
            uint32_t dev = dr_strategy_tpu_device(&s->strat, r, l);
            if (l > 0) {
                double t = dr_tpu_transfer_seconds(top, (int)dev0 - 1, (int)dev - 1, (uint64_t)n * out0 * sizeof(float));
                if (t > merge_s[1]) merge_s[1] = t;
            }
            rc = b->layer0_grad_rows(s->be, tp->tile_x[r * tp->tiles + l], tp->pix + l * tp->tile_len, tp->tile_len, n,
                                     tp->delta[r], rb->grad, err);
        }
        if (rc) return rc;
    }
    return b->share(s->be, rb, s->mult[r], s->coef, s->den, err);
}

/* engine_each_replica's fn: replica r, its merge times in row r of arg (double[R][2]). */
static int replica_at(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    return replica(s, r, ((double (*)[2])arg)[r], err);
}

/* The replicas' shares all-reduced by the comm's torus rings, one per
 * logical core over the parameters it holds, at once; then every replica
 * applies the total over divisor. */
/* One all-reduce per logical core, over its own links, at once. */
static int rings(dr_session *s, void **local, dr_err *err)
{
    engine_tpu *tp = &s->tpu;
    for (uint32_t l = 0; l < tp->tiles; l++) {
        double sec = 0;
        const size_t *rg = tp->ranges + 2 * (size_t)l * tp->max_ranges;
        int rc = s->co->all_reduce_ranges(s->ep[0], dr_grad_form(s->num), local, rg, tp->nranges[l], l, &sec, err);
        if (rc) return rc;
        if (sec > tp->allreduce_s) tp->allreduce_s = sec;
    }
    return DR_OK;
}

static int reduce_and_apply(dr_session *s, void **local, uint32_t divisor, dr_err *err)
{
    int rc = rings(s, local, err);
    if (rc) return rc;
    return engine_apply_total(s, 0, 0, s->R, local, divisor, err);
}

int engine_tpu_step(dr_session *s, dr_step_report *out, dr_err *err)
{
    engine_tpu *tp = &s->tpu;
    void *local[DR_MAX_DEVICES];
    const bool fast = s->num == DR_NUMERICS_FAST;
    double merge[DR_MAX_DEVICES - 1][2];
    int rc = DR_OK;
    uint32_t R = s->R, divisor = fast ? 1 : s->den;
    for (uint32_t r = 0; r < R; r++) {
        uint32_t n = s->off[r + 1] - s->off[r];
        if ((rc = engine_stage(s, r, s->ids + s->off[r], n, s->rows - n, err))) return rc;
        if (tp->tiles > 1 && (rc = stage_tiles(s, r, err))) return rc;
        merge[r][0] = merge[r][1] = 0;
    }
    /* A model beyond Dense: the engine's layer ops over each replica's real
     * examples (its padding rows add nothing), as the reference's
     * dr_graph_shares; partitioned, over each replica's cores (graph_spatial.c). */
    rc = s->graph ? engine_graph_compute(s, 0, err) : engine_each_replica(s, 0, R, replica_at, merge, err);
    if (rc) return rc;
    tp->merge_s = tp->allreduce_s = 0;
    {
        double back = 0;
        for (uint32_t r = 0; r < R; r++) {
            if (merge[r][0] > tp->merge_s) tp->merge_s = merge[r][0];
            if (merge[r][1] > back) back = merge[r][1];
        }
        tp->merge_s += back;   /* partitioning's traffic: partial sums in, the delta out */
        tp->merge_s += tp->halo_s;   /* or a model's halos, gather and scatter (graph_spatial.c) */
        tp->halo_s = 0;
    }
    if ((rc = engine_grads_local(s, 0, R, local, err))) return rc;   /* device memory: staged on the host */
    if (s->mixed) {   /* the loss scale's decision, the unscale and the update (mixed.c) */
        engine_mixed_before_reduce(s, 0, local, R);
        if ((rc = rings(s, local, err)) || (rc = engine_mixed_apply(s, 0, local[0], err))) return rc;
    } else {
        /* --gradient_accumulation_steps=k: each replica's shares accumulate on
         * the host (step.c's engine_accumulate, in their own form); only the
         * k-th micro-step runs the rings and applies, over k times the divisor
         * (the other micro-steps' emulated time has no all-reduce) */
        bool update = s->k == 1 || DR_SEAM_TPU_ACCUMULATE(engine_accumulate(s, dr_form_of(dr_grad_form(s->num)),
                                                                            local, 0, R), s);
        if (s->k > 1) divisor = DR_SEAM_ACCUM_DIVISOR(divisor, s->k);
        if (update && s->k > 1 && (rc = engine_accum_clip(s, local, R, divisor, err))) return rc;
        if (update && (rc = reduce_and_apply(s, local, divisor, err))) return rc;
    }
    tp->compute_s = dr_tpu_compute_seconds(&s->plan->exp.model, s->rows, tp->tiles);
    tp->step_s = tp->compute_s + tp->merge_s + tp->allreduce_s;
    tp->total_s += tp->step_s;
    engine_report(s, out);
    snprintf(out->extra, sizeof out->extra, ",\"emulated_step_s\":%.9g,\"emulated\":{\"compute_s\":%.9g,"
             "\"merge_s\":%.9g,\"allreduce_s\":%.9g}", tp->step_s, tp->compute_s, tp->merge_s, tp->allreduce_s);
    engine_spatial_report(s, out->extra, sizeof out->extra);
    engine_mixed_report(s, out);
    return DR_OK;
}

json_object *engine_tpu_report(const dr_session *s)
{
    const engine_tpu *tp = &s->tpu;
    const dr_tpu_topology *top = &tp->sys.topology;
    json_object *o = json_object_new_object(), *mesh = json_object_new_array();
    for (int d = 0; d < DR_TPU_RANK; d++) json_object_array_add(mesh, json_object_new_int(top->mesh[d]));
    json_object_object_add(o, "topology", json_object_new_string(top->name));
    json_object_object_add(o, "mesh_shape", mesh);
    json_object_object_add(o, "num_cores_per_replica", json_object_new_int((int)tp->tiles));
    json_object_object_add(o, "static_batch_per_replica", json_object_new_int((int)s->rows));
    json_object_object_add(o, "emulated_seconds_total", json_object_new_double(tp->total_s));
    json_object_object_add(o, "emulated_step_seconds_mean",
                           json_object_new_double(s->steps ? tp->total_s / (double)s->steps : 0.0));
    engine_spatial_summary(s, o);
    return o;
}
