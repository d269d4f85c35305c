/* distref reference — what a run writes: metrics.jsonl, summary.json, the
 * progress bar. Every loss is written twice, as a decimal that round-trips
 * (%.9g) and as the float's bits, so bit-identity is visible at a glance. */
#include "ref/trainer.h"
#include "distref/fileio.h"
#include "distref/sha256.h"

#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

void dr_weights_sha256(const float *params, size_t n, char hex[65])
{
    dr_sha256_ctx h;
    uint8_t d[32];
    dr_sha256_init(&h);
    for (size_t i = 0; i < n; i++) {
        uint8_t le[4];
        dr_put_u32le(le, bits_of(params[i]));
        dr_sha256_update(&h, le, 4);
    }
    dr_sha256_final(&h, d);
    dr_sha256_to_hex(d, hex);
}

/* ---- metrics.jsonl ------------------------------------------------------ */

static int append(trainer *t, dr_err *err, const char *fmt, ...)
{
    va_list ap;
    int need;
    va_start(ap, fmt);
    need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->metrics_len + (size_t)need + 1 > t->metrics_cap) {
        size_t cap = (t->metrics_cap + (size_t)need + 1) * 2;
        char *p = realloc(t->metrics, cap);
        if (!p) return dr_fail(err, DR_ENOMEM, "no memory for metrics");
        t->metrics = p;
        t->metrics_cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->metrics + t->metrics_len, t->metrics_cap - t->metrics_len, fmt, ap);
    va_end(ap);
    t->metrics_len += (size_t)need;
    return DR_OK;
}

/* First 16 hex digits of SHA-256 over the ids' little-endian bytes. */
static void ids_hash(const uint32_t *ids, uint32_t n, char out[17])
{
    dr_sha256_ctx h;
    uint8_t d[32];
    char hex[65];
    dr_sha256_init(&h);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t le[4];
        dr_put_u32le(le, ids[i]);
        dr_sha256_update(&h, le, 4);
    }
    dr_sha256_final(&h, d);
    dr_sha256_to_hex(d, hex);
    memcpy(out, hex, 16);
    out[16] = 0;
}

static const char *json_float(float x, char *buf, size_t n)
{
    if (!isfinite(x)) return "null";   /* JSON has no inf or NaN; loss_bits still tells */
    snprintf(buf, n, "%.9g", (double)x);
    return buf;
}

int dr_trainer_log_step(trainer *t, float loss, dr_err *err)
{
    uint32_t R = t->strat.num_replicas;
    char num[32];
    int rc = append(t, err, "{\"step\":%llu,\"epoch\":%u,\"loss\":%s,\"loss_bits\":\"0x%08x\",\"examples\":%u,"
                    "\"replica_batch_sizes\":[", (unsigned long long)t->step, t->batch.epoch,
                    json_float(loss, num, sizeof num), bits_of(loss), t->count);
    for (uint32_t r = 0; rc == DR_OK && r < R; r++)
        rc = append(t, err, "%s%u", r ? "," : "", t->off[r + 1] - t->off[r]);
    if (rc == DR_OK) rc = append(t, err, "],\"replica_ids\":[");
    for (uint32_t r = 0; rc == DR_OK && r < R; r++) {
        char h[17];
        ids_hash(t->ids + t->off[r], t->off[r + 1] - t->off[r], h);
        rc = append(t, err, "%s\"%s\"", r ? "," : "", h);
    }
    if (rc == DR_OK) rc = append(t, err, "]%s}\n", t->line_extra);
    t->line_extra[0] = 0;
    return rc;
}

int dr_trainer_load_metrics(trainer *t, dr_err *err)
{
    char path[1100];
    uint8_t *buf;
    size_t n;
    int rc;
    snprintf(path, sizeof path, "%s/metrics.jsonl", t->cfg->model_dir);
    if (access(path, F_OK) != 0) return DR_OK;   /* no earlier run */
    rc = dr_read_file(path, (size_t)1 << 30, &buf, &n, err);
    if (rc) return rc;
    t->metrics = (char *)buf;
    t->metrics_len = n;
    t->metrics_cap = n + 1;
    return DR_OK;
}

/* Keep the lines of steps the checkpoint covers; later ones will be redone. */
void dr_trainer_trim_metrics(trainer *t)
{
    size_t keep = 0;
    while (keep < t->metrics_len) {
        unsigned long long step;
        char *nl = memchr(t->metrics + keep, '\n', t->metrics_len - keep);
        if (!nl || sscanf(t->metrics + keep, "{\"step\":%llu", &step) != 1 || step > t->step) break;
        keep = (size_t)(nl - t->metrics) + 1;
    }
    t->metrics_len = keep;
    if (t->metrics) t->metrics[keep] = 0;
}

/* ---- progress and summary ----------------------------------------------- */

void dr_trainer_progress(const trainer *t)
{
    uint64_t total = t->cfg->train_steps;
    if (!t->cfg->progress) return;
    if (total) {
        int w = (int)(30 * t->step / total);
        fprintf(stderr, "\r[%-30.*s] step %llu/%llu loss %.4f", w, "==============================",
                (unsigned long long)t->step, (unsigned long long)total, (double)t->last_loss);
    } else {
        fprintf(stderr, "\repoch %u/%u step %llu loss %.4f", t->it.epoch + 1, t->epochs,
                (unsigned long long)t->step, (double)t->last_loss);
    }
    if (!total || t->step == total) fflush(stderr);
}

static bool replicas_identical(const trainer *t)
{
    for (uint32_t r = 1; t->strat.mirrored_variables && r < t->strat.num_replicas; r++)
        if (memcmp(t->rep[0].params, t->rep[r].params, t->P * sizeof(float))) return false;
    return true;
}

static json_object *device_report(const dr_strategy *s)
{
    json_object *arr = json_object_new_array();
    for (uint32_t d = 0; d < s->num_devices; d++) {
        const dr_device *dv = &s->device[d];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "device", json_object_new_string(dv->name));
        json_object_object_add(o, "peak_bytes", json_object_new_int64((int64_t)dv->peak));
        json_object_object_add(o, "bytes_in", json_object_new_int64((int64_t)dv->bytes_in));
        json_object_object_add(o, "bytes_out", json_object_new_int64((int64_t)dv->bytes_out));
        json_object_array_add(arr, o);
    }
    return arr;
}

static json_object *tpu_report(const trainer *t)
{
    const tpu_run *tp = &t->tpu;
    const dr_tpu_topology *top = &tp->sys.topology;
    json_object *o = json_object_new_object(), *mesh = json_object_new_array();
    uint64_t steps = t->step - t->start_step;
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
    return o;
}

int dr_trainer_finish(trainer *t, dr_run_result *res, dr_err *err)
{
    json_object *o = json_object_new_object();
    char path[1100], num[32];
    const char *text;
    float *params = t->var ? t->var : t->rep[0].params;
    int rc;
    if (t->cfg->progress) fputc('\n', stderr);
    memset(res, 0, sizeof *res);
    res->steps = t->step;
    res->loss = t->last_loss;
    res->accuracy = t->epoch_examples ? (float)t->epoch_correct / (float)t->epoch_examples : 0.0f;
    res->examples = t->epoch_examples;
    res->seconds = dr_now() - t->t_start;
    res->emulated_seconds = t->tpu.total_s;
    dr_weights_sha256(params, t->P, res->weights_sha256);
    json_object_object_add(o, "experiment", json_object_new_string(t->exp.name));
    json_object_object_add(o, "distribution_strategy", json_object_new_string(dr_strategy_kind_name(t->strat.spec.kind)));
    json_object_object_add(o, "num_replicas_in_sync", json_object_new_int((int)t->strat.num_replicas));
    json_object_object_add(o, "num_workers", json_object_new_int((int)t->strat.num_workers));
    json_object_object_add(o, "cross_device_op", json_object_new_string(dr_cross_device_op_name(t->strat.spec.cross_device_op)));
    json_object_object_add(o, "num_packs", json_object_new_int(t->strat.spec.num_packs));
    json_object_object_add(o, "global_batch_size", json_object_new_int((int)t->G));
    json_object_object_add(o, "steps", json_object_new_int64((int64_t)t->step));
    json_object_object_add(o, "final_loss", json_object_new_double_s((double)res->loss, json_float(res->loss, num, sizeof num)));
    snprintf(num, sizeof num, "0x%08x", bits_of(res->loss));
    json_object_object_add(o, "final_loss_bits", json_object_new_string(num));
    json_object_object_add(o, "train_accuracy_last_epoch", json_object_new_double((double)res->accuracy));
    json_object_object_add(o, "weights_sha256", json_object_new_string(res->weights_sha256));
    json_object_object_add(o, "replicas_in_sync", json_object_new_boolean(replicas_identical(t)));
    json_object_object_add(o, "wall_seconds", json_object_new_double(res->seconds));
    json_object_object_add(o, "devices", device_report(&t->strat));
    if (t->tpu.on) json_object_object_add(o, "tpu", tpu_report(t));
    if (t->summary_extra) {
        json_object_object_foreach(t->summary_extra, key, val)
            json_object_object_add(o, key, json_object_get(val));
        json_object_put(t->summary_extra);
        t->summary_extra = NULL;
    }
    text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    snprintf(path, sizeof path, "%s/summary.json", t->cfg->model_dir);
    rc = dr_write_atomic(path, text, strlen(text), err);
    json_object_put(o);
    return rc;
}
