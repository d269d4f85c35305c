/* distref core — strategy objects: devices, replica placement, run,
 * reduce, and the exact loss-scaling helpers.
 *
 * Placement, as TensorFlow does it (research notes §7, Model Garden §4):
 *   off               one replica on /cpu:0, no input distribution
 *   one_device        /gpu:0 when num_gpus == 1, else /cpu:0
 *   mirrored          one replica per /gpu:i, or /cpu:0 without GPUs
 *   central_storage   compute replicated on the GPUs; variables on /cpu:0,
 *                     or on the GPU itself when there is exactly one
 */
#include "distref/strategy.h"
#include "core/strategy_kinds.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- exact scaled values ------------------------------------------------ */

void dr_scaled_init(dr_scaled *s, uint32_t den)
{
    dr_acc_init(&s->num);
    s->den = den;
}

bool dr_scaled_add(dr_scaled *a, const dr_scaled *b)
{
    dr_acc bn = b->num;
    if (a->den == b->den) {
        dr_acc_merge(&a->num, &bn);
        return true;
    }
    if ((uint64_t)a->den * b->den > UINT32_MAX || a->den > (1u << 30) || b->den > (1u << 30))
        return false;
    /* a/da + b/db = (a*db + b*da) / (da*db), all exact. */
    dr_acc_mul_u32(&a->num, b->den);
    dr_acc_mul_u32(&bn, a->den);
    dr_acc_merge(&a->num, &bn);
    a->den *= b->den;
    return true;
}

float dr_scaled_round(const dr_scaled *s)
{
    return dr_acc_round_div(&s->num, s->den);
}

dr_scaled dr_compute_average_loss(const dr_replica_ctx *ctx, const float *per_example_loss,
                                  uint32_t n, uint32_t global_batch_size)
{
    dr_scaled s;
    dr_scaled_init(&s, global_batch_size ? global_batch_size : n * ctx->num_replicas_in_sync);
    dr_acc_add_sum(&s.num, per_example_loss, n);
    if (s.den == 0) s.den = 1;   /* an empty replica: 0, as div_no_nan gives */
    return s;
}


dr_scaled dr_scale_regularization_loss(const dr_replica_ctx *ctx, float reg_loss)
{
    dr_scaled s;
    dr_scaled_init(&s, ctx->num_replicas_in_sync);
    dr_acc_add(&s.num, reg_loss);
    return s;
}

/* ---- construction ------------------------------------------------------- */

/* task < 0: a device of this machine; else one of worker `task`'s devices. */
static void add_device(dr_strategy *s, dr_device_type type, int index, uint64_t capacity, int task)
{
    dr_device_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.replica = -1;
    spec.task = -1;
    if (task >= 0) {
        strcpy(spec.job, "worker");
        spec.replica = 0;
        spec.task = task;
    }
    spec.type = type;
    spec.index = index;
    spec.has_type = 1;
    dr_device_init(&s->device[s->num_devices++], &spec, capacity);
}

/* multi_worker_mirrored: per worker its CPU, then its GPUs; replicas are
 * numbered worker-major. */
static int create_multi_worker(dr_strategy *s, uint32_t W, uint32_t gpus, const dr_strategy_options *opt,
                               dr_err *err)
{
    uint32_t per = gpus ? gpus : 1;
    if (W == 0) W = 1;
    if ((uint64_t)W * (1 + gpus) > DR_MAX_DEVICES || W * per > DR_MAX_DEVICES - 1)
        return dr_fail(err, DR_EUSAGE, "multi_worker_mirrored: %u workers x %u GPUs is more than the %d "
                       "emulated devices distref supports", W, gpus, DR_MAX_DEVICES);
    for (uint32_t w = 0; w < W; w++) {
        uint32_t cpu = s->num_devices;
        add_device(s, DR_DEV_CPU, 0, opt ? opt->cpu_memory_bytes : 0, (int)w);
        for (uint32_t g = 0; g < gpus; g++) add_device(s, DR_DEV_GPU, (int)g, opt ? opt->gpu_memory_bytes : 0, (int)w);
        for (uint32_t r = 0; r < per; r++) {
            s->replica_device[w * per + r] = gpus ? cpu + 1 + r : cpu;
            s->input_device[w * per + r] = cpu;   /* every worker builds its own pipeline */
        }
    }
    s->num_workers = W;
    s->num_replicas = W * per;
    s->mirrored_variables = true;
    s->distributes_input = true;
    s->variable_device = s->replica_device[0];
    return DR_OK;
}

int dr_strategy_create(const dr_strategy_spec *spec, const dr_strategy_options *opt,
                       dr_strategy *s, dr_err *err)
{
    uint32_t gpus = (uint32_t)spec->num_gpus;
    memset(s, 0, sizeof *s);
    s->spec = *spec;
    s->num_workers = 1;
    switch (spec->kind) {
    case DR_STRATEGY_PARAMETER_SERVER: return dr_strategy_create_ps(spec, opt, s, err);
    case DR_STRATEGY_TPU: return dr_strategy_create_tpu(spec, opt, s, err);
    default: break;
    }
    if (spec->num_gpus < 0 || gpus > DR_MAX_DEVICES - 1)
        return dr_fail(err, DR_EUSAGE, "--num_gpus: expected 0..%d, got %d", DR_MAX_DEVICES - 1, spec->num_gpus);
    if (spec->kind == DR_STRATEGY_MULTI_WORKER_MIRRORED)
        return create_multi_worker(s, opt ? opt->num_workers : 1, gpus, opt, err);
    add_device(s, DR_DEV_CPU, 0, opt ? opt->cpu_memory_bytes : 0, -1);
    for (uint32_t g = 0; g < gpus; g++) add_device(s, DR_DEV_GPU, (int)g, opt ? opt->gpu_memory_bytes : 0, -1);
    s->distributes_input = spec->kind != DR_STRATEGY_OFF;
    switch (spec->kind) {
    case DR_STRATEGY_OFF:
    case DR_STRATEGY_ONE_DEVICE:
        s->num_replicas = 1;
        s->replica_device[0] = gpus == 1 ? 1 : 0;
        s->variable_device = s->replica_device[0];
        break;
    case DR_STRATEGY_MIRRORED:
    case DR_STRATEGY_CENTRAL_STORAGE:
        s->num_replicas = gpus ? gpus : 1;
        for (uint32_t r = 0; r < s->num_replicas; r++) s->replica_device[r] = gpus ? 1 + r : 0;
        s->mirrored_variables = spec->kind == DR_STRATEGY_MIRRORED;
        s->variable_device = spec->kind == DR_STRATEGY_MIRRORED ? s->replica_device[0]
                           : gpus == 1 ? 1 : 0;
        break;
    default: break;
    }
    return DR_OK;
}

const dr_strategy *dr_get_strategy(void)
{
    /* The one global: the default strategy, immutable once built. */
    static const dr_strategy def = {
        .spec = { .kind = DR_STRATEGY_OFF },
        .num_replicas = 1,
        .num_workers = 1,
        .num_devices = 1,
        .device = { { .spec = { .replica = -1, .task = -1, .type = DR_DEV_CPU, .has_type = 1 },
                      .name = "/job:localhost/replica:0/task:0/device:CPU:0" } },
    };
    return &def;
}

/* ---- run and reduce ----------------------------------------------------- */

int dr_strategy_run(dr_strategy *s, uint32_t global_batch_count, dr_replica_fn fn,
                    void *arg, dr_err *err)
{
    int live = dr_strategy_check_tpu_live(s, err);
    if (live) return live;
    for (uint32_t r = 0; r < s->num_replicas; r++) {
        dr_replica_ctx ctx = { s, r, s->num_replicas, &s->device[s->replica_device[r]], global_batch_count };
        int rc = fn(&ctx, arg, err);
        if (rc) return dr_fail_wrap(err, "replica %u on %s", r, ctx.device->name);
    }
    return DR_OK;
}

int dr_strategy_reduce(const dr_strategy *s, dr_reduce_op op, const dr_per_replica *v,
                       int axis, float *out, dr_err *err)
{
    dr_acc sum;
    uint64_t total = 0;
    if (v->num_replicas != s->num_replicas)
        return dr_fail(err, DR_EUSAGE, "reduce: %u per-replica values for %u replicas",
                       v->num_replicas, s->num_replicas);
    dr_acc_init(&sum);
    for (uint32_t r = 0; r < v->num_replicas; r++) {
        if (axis < 0 && v->count[r] != 1)
            return dr_fail(err, DR_EUSAGE, "reduce with axis=None: replica %u holds %u values, expected 1 "
                           "(give axis=0 to reduce along the batch)", r, v->count[r]);
        dr_acc_add_sum(&sum, v->values[r], v->count[r]);
        total += v->count[r];
    }
    if (op == DR_REDUCE_SUM) { *out = dr_acc_round(&sum); return DR_OK; }
    if (axis < 0) total = v->num_replicas;
    if (total > UINT32_MAX) return dr_fail(err, DR_EUSAGE, "reduce MEAN: %llu values is too many", (unsigned long long)total);
    *out = total ? dr_acc_round_div(&sum, (uint32_t)total) : NAN;   /* mean of nothing */
    return DR_OK;
}
