/* distref reference — training under the tpu strategy.
 *
 * What is particular to a TPU, and where it happens here:
 *   static shapes    every replica computes on exactly G/R rows; a short
 *                    final batch is split by TensorFlow's rule and each
 *                    replica's rows beyond its share are padding, masked:
 *                    they run through the forward pass and add nothing to
 *                    the loss or the gradients (replica_step). With
 *                    --drop_remainder the short batch is never formed.
 *   HBM              each core's share of weights, slots, gradient
 *                    accumulators, inputs and activations is reserved on
 *                    that core; what does not fit fails naming the core
 *                    (reserve_hbm).
 *   spatial          --input_partition_dims splits each replica's 28x28
 *   partitioning     input into tiles, one per logical core; each core
 *                    multiplies its tile by its rows of the first kernel
 *                    into exact partial sums, the partials merge exactly on
 *                    logical core 0 and are rounded once with the bias, so
 *                    the pre-activations are the unpartitioned bits
 *                    (partitioned_layer0); the kernel's gradient rows are
 *                    computed where they live (tile_gradients). A conv
 *                    model's feature maps are tiled instead, with halos
 *                    between the cores (ref/tpu_spatial.c, ref/halo.c).
 *   collectives      gradients are all-reduced by rings along the torus,
 *                    one per logical core (ref/tpu_collective.c); with
 *                    --gradient_accumulation_steps only on the k-th
 *                    micro-step, over the accumulated shares
 *                    (dr_trainer_accumulate). --clip_semantics=tensorflow
 *                    clips each replica's gradient (its cores' rows merged)
 *                    before the rings.
 *   step time        an alpha-beta estimate of each step (compute at an
 *                    assumed rate, the partial-sum merge, the rings) is
 *                    written to metrics.jsonl and summary.json.
 */
#include "ref/trainer.h"
#include "ref/tpu_collective.h"
#include "ref/halo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- setup -------------------------------------------------------------- */

int dr_tpu_run_init(trainer *t, dr_strategy_options *opt, dr_err *err)
{
    const dr_run_config *cfg = t->cfg;
    tpu_run *tp = &t->tpu;
    int rc;
    if (cfg->layer_devices[0])
        return dr_fail(err, DR_EUSAGE, "--layer_devices: not with the tpu strategy (it places a "
                       "replica over several cores with --input_partition_dims)");
    if ((rc = dr_tpu_options(cfg, &t->exp, &tp->sys, opt, tp->part, &tp->tiles, err))) return rc;
    tp->on = true;
    return DR_OK;
}

/* Logical core l's [lo, hi) pairs of parameters. */
static size_t *core_range(const tpu_run *tp, uint32_t l)
{
    return tp->ranges + 2 * (size_t)l * tp->max_ranges;
}

static int reserve_hbm(trainer *t, dr_err *err)
{
    tpu_run *tp = &t->tpu;
    uint64_t got[DR_MAX_DEVICES] = { 0 };
    int rc = dr_tpu_reserve_hbm(&t->strat, &t->exp.model, (uint32_t)t->nslots, tp->local, tp->tiles, tp->ranges,
                                tp->nranges, tp->halo ? &tp->plan : NULL, got, err);
    for (uint32_t d = 0; d < DR_MAX_DEVICES; d++) tp->reserve_bytes[d] = got[d];
    return rc;
}

int dr_tpu_run_open(trainer *t, dr_err *err)
{
    tpu_run *tp = &t->tpu;
    uint32_t R = t->strat.num_replicas, out0 = t->exp.model.layer[0].out;
    bool dense = dr_model_is_dense(&t->exp.model);
    dr_device_spec host;
    if (t->G % R)
        return dr_fail(err, DR_EUSAGE, "--global_batch_size=%u: the tpu strategy needs static shapes, "
                       "the same batch on each of its %u replicas; give a multiple of %u", t->G, R, R);
    tp->local = t->G / R;
    tp->tile_len = t->exp.model.layer[0].in / tp->tiles;
    tp->max_ranges = tp->tile_len + 1;
    memset(&host, 0, sizeof host);
    host.replica = host.task = -1;
    host.has_type = 1;
    dr_device_init(&tp->backing, &host, 0);
    tp->ranges = malloc(2 * (size_t)tp->tiles * tp->max_ranges * sizeof *tp->ranges + 1);
    tp->nranges = calloc(tp->tiles, sizeof *tp->nranges);
    if (!tp->ranges || !tp->nranges) return dr_fail(err, DR_ENOMEM, "tpu: out of host memory");
    if (tp->tiles > 1) {   /* the partitioning's buffers */
        tp->tile_pixels = malloc((size_t)tp->tiles * tp->tile_len * sizeof *tp->tile_pixels);
        tp->tile_x = malloc((size_t)tp->local * t->data->features * sizeof(float) + 1);
        tp->tile_w = malloc((size_t)tp->tile_len * out0 * sizeof(float));
        tp->tile_stage = malloc((size_t)tp->local * (tp->tile_len > out0 ? tp->tile_len : out0) * sizeof(float));
        tp->tile_z = malloc((size_t)tp->local * out0 * sizeof(dr_acc));
        tp->z = malloc((size_t)tp->local * out0 * sizeof(dr_acc));
        tp->tile_g = malloc((size_t)tp->tile_len * out0 * sizeof(dr_acc));
        if (!tp->tile_pixels || !tp->tile_x || !tp->tile_w || !tp->tile_stage || !tp->tile_z || !tp->z || !tp->tile_g)
            return dr_fail(err, DR_ENOMEM, "tpu: out of host memory for the partitioning buffers");
        if (dr_wire_init(&tp->wire, (size_t)tp->local * out0, err)) return err->code;
        dr_tpu_tile_pixels(tp->part, tp->tile_pixels);
    }
    /* A model beyond Dense keeps every variable on each replica's core 0
     * (its cores hold the feature maps' tiles, ref/tpu_spatial.c). */
    dr_tpu_core_ranges(&t->exp.model, dense ? tp->tiles : 1, tp->tile_pixels, tp->tile_len, tp->ranges, tp->nranges);
    if (!dense && tp->tiles > 1) {
        int rc = dr_tpu_spatial_open(t, err);
        if (rc) return rc;
    }
    return reserve_hbm(t, err);
}

void dr_tpu_run_close(trainer *t)
{
    tpu_run *tp = &t->tpu;
    for (uint32_t d = 0; d < DR_MAX_DEVICES; d++)
        if (tp->reserve_bytes[d]) dr_device_unreserve(&t->strat.device[d], tp->reserve_bytes[d]);
    free(tp->tile_pixels); free(tp->ranges); free(tp->nranges); free(tp->tile_x); free(tp->tile_w); free(tp->tile_stage);
    free(tp->tile_z); free(tp->z); free(tp->tile_g);
    dr_wire_free(&tp->wire);
    dr_tpu_spatial_close(t);
}

/* ---- the step ----------------------------------------------------------- */

/* The replica's n examples and local - n rows of padding (zero inputs,
 * label 0), on its cores: whole rows to core 0, or, partitioned, the labels
 * to core 0 and each tile's columns to the core of the tile. */
static void load_static_batch(trainer *t, replica *rp, uint32_t r, const uint32_t *ids, uint32_t n)
{
    tpu_run *tp = &t->tpu;
    size_t f = t->data->features, pad = (size_t)(tp->local - n);
    dr_device *host = &t->strat.device[0];
    if (tp->tiles == 1) {
        dr_trainer_load_batch(t, rp, ids, n);
    } else {
        /* rp->x is the host's view of the rows, from which the tiles are cut. */
        dr_dataset_gather(t->data, ids, n, rp->x, t->data->labels ? t->host_labels : NULL,
                          t->data->targets ? t->host_targets : NULL);
        if (rp->labels) dr_device_copy(rp->dev, rp->labels, host, t->host_labels, n);
        if (rp->targets) dr_device_copy(rp->dev, rp->targets, host, t->host_targets, (size_t)n * sizeof(float));
    }
    memset(rp->x + (size_t)n * f, 0, pad * f * sizeof(float));
    if (rp->labels) memset(rp->labels + n, 0, pad);
    if (rp->targets) memset(rp->targets + n, 0, pad * sizeof(float));
    for (uint32_t l = 0; tp->tiles > 1 && l < tp->tiles; l++) {
        float *xt = tp->tile_x + (size_t)l * tp->local * tp->tile_len;
        for (uint32_t e = 0; e < tp->local; e++)
            for (uint32_t q = 0; q < tp->tile_len; q++)
                tp->tile_stage[(size_t)e * tp->tile_len + q] = rp->x[(size_t)e * f + tp->tile_pixels[l * tp->tile_len + q]];
        dr_device_copy(&t->strat.device[dr_strategy_tpu_device(&t->strat, r, l)], xt, host, tp->tile_stage,
                       (size_t)tp->local * tp->tile_len * sizeof(float));
    }
}

/* Layer 0's pre-activations from the tiles: partial sums on each core,
 * merged exactly on core 0, the bias added, rounded once. */
static int partitioned_layer0(trainer *t, replica *rp, uint32_t r, dr_err *err)
{
    tpu_run *tp = &t->tpu;
    const dr_dense *d = &t->exp.model.layer[0];
    const float *W = rp->params, *bias = W + (size_t)d->in * d->out;
    size_t cells = (size_t)tp->local * d->out;
    dr_device *core0 = &t->strat.device[dr_strategy_tpu_device(&t->strat, r, 0)];
    double slowest = 0;
    memset(tp->z, 0, cells * sizeof *tp->z);
    for (uint32_t l = 0; l < tp->tiles; l++) {
        const uint32_t *pix = tp->tile_pixels + l * tp->tile_len;
        uint32_t dev = dr_strategy_tpu_device(&t->strat, r, l);
        for (uint32_t q = 0; q < tp->tile_len; q++)
            memcpy(tp->tile_w + (size_t)q * d->out, W + (size_t)pix[q] * d->out, d->out * sizeof(float));
        memset(tp->tile_z, 0, cells * sizeof *tp->tile_z);
        t->ops->gemm_acc(DR_NO_TRANS, DR_NO_TRANS, tp->local, d->out, tp->tile_len,
                         tp->tile_x + (size_t)l * tp->local * tp->tile_len, tp->tile_len,
                         tp->tile_w, d->out, tp->tile_z);
        int rc = dr_wire_send(&tp->wire, &t->strat.device[dev], tp->tile_z, core0, tp->z, cells, false, err);
        if (rc) return rc;
        double ts = dr_tpu_transfer_seconds(&tp->sys.topology, (int)dev - 1, (int)(core0 - t->strat.device) - 1,
                                            (uint64_t)cells * DR_ACC_BYTES);
        if (l > 0 && ts > slowest) slowest = ts;
    }
    tp->merge_s = slowest > tp->merge_s ? slowest : tp->merge_s;
    for (size_t i = 0; i < cells; i++) {
        dr_acc_add(&tp->z[i], bias[i % d->out]);
        rp->work.pre[0][i] = dr_acc_round(&tp->z[i]);
    }
    dr_model_activate(&t->exp.model, t->ops, 0, tp->local, &rp->work);
    dr_model_forward_layers(&t->exp.model, t->ops, rp->params, NULL, 1, tp->local, &rp->work);
    return DR_OK;
}

/* Each core's rows of the first kernel's gradient: its tile^T * delta.
 * Layer 0's delta is computed on core 0 and travels to the other cores. */
static void tile_gradients(trainer *t, replica *rp, uint32_t r, const float *dz0, uint32_t n)
{
    tpu_run *tp = &t->tpu;
    size_t out0 = t->exp.model.layer[0].out, bytes = (size_t)n * out0 * sizeof(float);
    uint32_t dev0 = dr_strategy_tpu_device(&t->strat, r, 0);
    double slowest = 0;
    for (uint32_t l = 0; l < tp->tiles; l++) {
        const uint32_t *pix = tp->tile_pixels + l * tp->tile_len;
        uint32_t dev = dr_strategy_tpu_device(&t->strat, r, l);
        const float *dz = dz0;
        if (l > 0) {
            double ts = dr_tpu_transfer_seconds(&tp->sys.topology, (int)dev0 - 1, (int)dev - 1, bytes);
            dr_device_copy(&t->strat.device[dev], tp->tile_stage, &t->strat.device[dev0], dz0, bytes);
            dz = tp->tile_stage;
            if (ts > slowest) slowest = ts;
        }
        memset(tp->tile_g, 0, (size_t)tp->tile_len * out0 * sizeof *tp->tile_g);
        t->ops->gemm_acc(DR_TRANS, DR_NO_TRANS, tp->tile_len, out0, n,
                         tp->tile_x + (size_t)l * tp->local * tp->tile_len, tp->tile_len, dz, out0, tp->tile_g);
        for (uint32_t q = 0; q < tp->tile_len; q++)
            for (size_t j = 0; j < out0; j++)
                dr_acc_merge(&rp->grad[(size_t)pix[q] * out0 + j], &tp->tile_g[(size_t)q * out0 + j]);
    }
    tp->backward_s = slowest > tp->backward_s ? slowest : tp->backward_s;
}

static int replica_step(const dr_replica_ctx *ctx, void *arg, dr_err *err)
{
    trainer *t = arg;
    tpu_run *tp = &t->tpu;
    uint32_t r = ctx->replica_id_in_sync_group, n = t->off[r + 1] - t->off[r];
    replica *rp = &t->rep[r];
    uint32_t rows = n;   /* the rows that count: the rest is padding, masked */
    load_static_batch(t, rp, r, t->ids + t->off[r], n);
    if (!dr_model_is_dense(&t->exp.model)) {   /* dr_graph_shares, after every replica's load */
        if (tp->halo) dr_tpu_spatial_load(t, r);
        return DR_OK;
    }
    memset(rp->grad, 0, t->P * sizeof *rp->grad);
    dr_acc_init(&rp->loss);
    rp->correct = 0;
    if (tp->tiles > 1) {
        int rc = partitioned_layer0(t, rp, r, err);
        if (rc) return rc;
    } else {
        dr_model_forward(&t->exp.model, t->ops, rp->params, rp->x, tp->local, &rp->work);
    }
    if (rows > 0) {
        const float *dz0 = dr_model_backward(&t->exp.model, t->ops, rp->params, rp->x, rp->labels, rp->targets,
                                             rows, &rp->work, &rp->loss, rp->grad, &rp->correct, tp->tiles == 1);
        if (tp->tiles > 1) tile_gradients(t, rp, r, dz0, rows);
    }
    dr_trainer_scale_share(t, rp, t->mult[r], t->coef);
    /* --clip_semantics=tensorflow: the replica's gradient, all its cores'
     * rows merged above, clipped before the rings (Keras 3 under
     * TPUStrategy, as under MirroredStrategy) */
    if (t->exp.optimizer.clip.per_replica) dr_trainer_clip_share(t, rp);
    return DR_OK;
}

/* The replicas' shares all-reduced, one ring per logical core over its
 * own links, at once; then every replica applies the total. */
/* One all-reduce per logical core, over its own links, at once. */
static int all_reduce_cores(trainer *t, dr_acc *const *acc, dr_err *err)
{
    tpu_run *tp = &t->tpu;
    for (uint32_t l = 0; l < tp->tiles; l++) {
        double s = 0;
        int rc = dr_tpu_all_reduce(&t->strat, acc, core_range(tp, l), tp->nranges[l], l, &s, err);
        if (rc) return rc;
        if (s > tp->allreduce_s) tp->allreduce_s = s;
    }
    return DR_OK;
}

/* The rings, then every replica applies the reduced gradient. */
static int reduce_and_apply(trainer *t, dr_err *err)
{
    dr_acc *acc[DR_MAX_DEVICES];
    int rc;
    for (uint32_t r = 0; r < t->strat.num_replicas; r++) acc[r] = t->rep[r].grad;
    if ((rc = all_reduce_cores(t, acc, err))) return rc;
    for (uint32_t r = 0; r < t->strat.num_replicas; r++)
        dr_trainer_apply(t, t->rep[r].grad, t->rep[r].params, t->rep[r].slots);
    return DR_OK;
}

/* The step's emulated time, added to the run's, into the report's extra. */
static void step_time(trainer *t)
{
    tpu_run *tp = &t->tpu;
    tp->compute_s = dr_tpu_compute_seconds(&t->exp.model, tp->local, tp->tiles);
    tp->merge_s += tp->backward_s;   /* partitioning's traffic: partial sums in, the delta out */
    if (tp->halo) {                  /* (a conv model's: the halos, the gather and the scatter) */
        tp->merge_s += tp->halo->seconds;
        tp->halo->seconds = 0;
    }
    tp->step_s = tp->compute_s + tp->merge_s + tp->allreduce_s;
    tp->total_s += tp->step_s;
    int n = snprintf(t->report->extra, sizeof t->report->extra, ",\"emulated_step_s\":%.9g,\"emulated\":{\"compute_s\":%.9g,"
                     "\"merge_s\":%.9g,\"allreduce_s\":%.9g}", tp->step_s, tp->compute_s, tp->merge_s, tp->allreduce_s);
    if (tp->halo && n > 0 && (size_t)n < sizeof t->report->extra)
        dr_tpu_spatial_extra(t, t->report->extra + n, sizeof t->report->extra - (size_t)n);
}

int dr_tpu_reduce_timed(trainer *t, dr_acc *const *acc, dr_err *err)
{
    int rc;
    t->tpu.merge_s = t->tpu.backward_s = t->tpu.allreduce_s = 0;
    if ((rc = all_reduce_cores(t, acc, err))) return rc;
    step_time(t);
    return DR_OK;
}

int dr_tpu_step(trainer *t, dr_err *err)
{
    tpu_run *tp = &t->tpu;
    int rc;
    tp->merge_s = tp->backward_s = tp->allreduce_s = 0;
    if ((rc = dr_strategy_run(&t->strat, t->count, replica_step, t, err))) return rc;
    if (!dr_model_is_dense(&t->exp.model) && (rc = dr_graph_shares(t, err))) return rc;
    /* --gradient_accumulation_steps=k: only the k-th micro-step runs the
     * rings and applies (the others' emulated time has no all-reduce) */
    rc = t->cfg->gradient_accumulation_steps > 1 ? dr_trainer_accumulate(t, reduce_and_apply, err)
                                                 : reduce_and_apply(t, err);
    if (rc) return rc;
    dr_trainer_end_step(t);
    step_time(t);
    return DR_OK;
}

/* What the tpu strategy adds to summary.json. */
json_object *dr_tpu_report(const trainer *t, uint64_t steps)
{
    const tpu_run *tp = &t->tpu;
    const dr_tpu_topology *top = &tp->sys.topology;
    json_object *o = json_object_new_object(), *mesh = json_object_new_array();
    for (int d = 0; d < DR_TPU_RANK; d++) json_object_array_add(mesh, json_object_new_int(top->mesh[d]));
    json_object_object_add(o, "topology", json_object_new_string(top->name));
    json_object_object_add(o, "mesh_shape", mesh);
    json_object_object_add(o, "hbm_bytes_per_core", json_object_new_int64((int64_t)top->hbm_bytes_per_core));
    json_object_object_add(o, "num_cores_per_replica", json_object_new_int((int)tp->tiles));
    json_object_object_add(o, "static_batch_per_replica", json_object_new_int((int)tp->local));
    json_object_object_add(o, "emulated_seconds_total", json_object_new_double(tp->total_s));
    json_object_object_add(o, "emulated_step_seconds_mean", json_object_new_double(steps ? tp->total_s / (double)steps : 0.0));
    json_object_object_add(o, "link_model", json_object_new_string("alpha 1e-6 s per hop, 50e9 bytes/s per link; "
                           "compute at an assumed 2e13 flop/s per core"));
    if (tp->halo) dr_tpu_spatial_report(t, o);
    return o;
}
