/* distref core — what a run writes: metrics.jsonl, summary.json, the
 * progress bar (include/distref/run_log.h). */
#include "distref/run_log.h"
#include "distref/fileio.h"
#include "distref/sha256.h"
#include "core/seams.h"

#include <dirent.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Seconds since the epoch: an Event's wall_time. */
static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double dr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

static int append(dr_run_log *t, dr_err *err, const char *fmt, ...)
{
    va_list ap;
    int need;
    va_start(ap, fmt);
    need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->len + (size_t)need + 1 > t->cap) {
        size_t cap = (t->cap + (size_t)need + 1) * 2;
        char *p = realloc(t->metrics, cap);
        if (!p) return dr_fail(err, DR_ENOMEM, "no memory for metrics");
        t->metrics = p;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->metrics + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)need;
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

const char *dr_json_float(float x, char *buf, size_t n)
{
    if (!isfinite(x)) return "null";   /* JSON has no inf or NaN; loss_bits still tells */
    snprintf(buf, n, "%.9g", (double)x);
    return buf;
}

/* The step's TensorBoard scalars. */
static int step_scalars(dr_run_log *t, uint64_t step, const dr_step_report *rep, dr_err *err)
{
    const char *tags[4];
    float vals[4];
    size_t n = 0;
    double now = dr_now(), dt = now - t->t_prev;
    int rc;
    /* the segment's first step: a START, so TensorBoard drops the events
     * of steps an interrupted segment wrote past its checkpoint */
    if (t->events.nscalars == 0 && (rc = dr_tfevents_session_start(&t->events, wall_now(), (int64_t)step, err)))
        return rc;
    tags[n] = "loss", vals[n++] = rep->loss;
    if (t->accuracy && rep->count) tags[n] = "accuracy", vals[n++] = (float)((double)rep->correct / rep->count);
    if (!isnan(t->learning_rate))
        tags[n] = "learning_rate",
        vals[n++] = t->schedule ? dr_lr_at(t->schedule, t->learning_rate, step) : t->learning_rate;
    if (dt > 0) tags[n] = "examples_per_sec", vals[n++] = (float)(rep->count / dt);
    t->t_prev = now;
    return dr_tfevents_scalars(&t->events, wall_now(), (int64_t)step, tags, vals, n, err);
}

int dr_run_log_step(dr_run_log *t, uint64_t step, uint32_t epoch, const dr_step_report *rep, dr_err *err)
{
    uint32_t R = rep->num_replicas;
    char num[32];
    int rc = append(t, err, "{\"step\":%llu,\"epoch\":%u,\"loss\":%s,\"loss_bits\":\"0x%08x\",\"examples\":%u,"
                    "\"replica_batch_sizes\":[", (unsigned long long)step, epoch,
                    dr_json_float(rep->loss, num, sizeof num), bits_of(rep->loss), rep->count);
    for (uint32_t r = 0; rc == DR_OK && r < R; r++)
        rc = append(t, err, "%s%u", r ? "," : "", rep->off[r + 1] - rep->off[r]);
    if (rc == DR_OK) rc = append(t, err, "],\"replica_ids\":[");
    for (uint32_t r = 0; rc == DR_OK && r < R; r++) {
        char h[17];
        ids_hash(rep->ids + rep->off[r], rep->off[r + 1] - rep->off[r], h);
        rc = append(t, err, "%s\"%s\"", r ? "," : "", h);
    }
    if (rc == DR_OK) rc = append(t, err, "]%s", rep->extra);
    if (rc == DR_OK && !t->segment_checked) {   /* a new segment: its topology, once */
        char last[sizeof t->segment];
        t->segment_checked = true;
        if (t->segment[0] && (!dr_run_log_last_segment(t, last, sizeof last) || strcmp(last, t->segment) != 0))
            rc = append(t, err, ",\"segment\":%s", t->segment);
    }
    if (rc == DR_OK) rc = append(t, err, "}\n");
    if (rc == DR_OK) rc = step_scalars(t, step, rep, err);
    return rc;
}

/* ---- segments ----------------------------------------------------------- */

#define SEGMENT_KEY ",\"segment\":{"

void dr_run_log_set_segment(dr_run_log *t, const char *text)
{
    snprintf(t->segment, sizeof t->segment, "%s", text);
}

/* The marker of the line [p, end): its object's text, or NULL. */
static const char *line_marker(const char *p, const char *end, size_t *n)
{
    size_t k = strlen(SEGMENT_KEY);
    for (const char *q = p; q + k <= end; q++) {
        if (memcmp(q, SEGMENT_KEY, k) != 0) continue;
        const char *close = memchr(q + k, '}', (size_t)(end - q - k));
        if (!close) return NULL;
        *n = (size_t)(close - (q + k - 1)) + 1;
        return q + k - 1;
    }
    return NULL;
}

/* Calls fn for each line: its step (0 when unreadable) and marker. */
typedef void (*line_fn)(void *ctx, unsigned long long step, const char *marker, size_t n);

static void each_line(const dr_run_log *t, line_fn fn, void *ctx)
{
    size_t at = 0;
    while (t->metrics && at < t->len) {
        const char *p = t->metrics + at, *nl = memchr(p, '\n', t->len - at);
        const char *end = nl ? nl : t->metrics + t->len;
        unsigned long long step = 0;
        size_t n = 0;
        const char *m = line_marker(p, end, &n);
        char head[32];
        size_t h = (size_t)(end - p) < sizeof head - 1 ? (size_t)(end - p) : sizeof head - 1;
        memcpy(head, p, h);
        head[h] = 0;
        if (sscanf(head, "{\"step\":%llu", &step) != 1) step = 0;
        fn(ctx, step, m, n);
        at = (size_t)(end - t->metrics) + 1;
    }
}

typedef struct last_ctx { char *buf; size_t n; bool found; } last_ctx;

static void keep_last(void *ctx, unsigned long long step, const char *m, size_t n)
{
    last_ctx *c = ctx;
    (void)step;
    if (!m) return;
    c->found = n < c->n;
    if (c->found) { memcpy(c->buf, m, n); c->buf[n] = 0; }
}

bool dr_run_log_last_segment(const dr_run_log *t, char *buf, size_t n)
{
    last_ctx c = { buf, n, false };
    each_line(t, keep_last, &c);
    return c.found;
}

typedef struct list_ctx { json_object *arr, *cur; } list_ctx;

static void add_line(void *ctx, unsigned long long step, const char *m, size_t n)
{
    list_ctx *c = ctx;
    if (m || !c->cur) {
        char text[512];
        json_object *o = NULL;
        if (m && n < sizeof text) {
            memcpy(text, m, n);
            text[n] = 0;
            o = json_tokener_parse(text);
            if (o && !json_object_is_type(o, json_type_object)) { json_object_put(o); o = NULL; }
        }
        if (!o) {
            o = json_object_new_object();
            json_object_object_add(o, "unrecorded", json_object_new_boolean(1));
        }
        json_object_object_add(o, "first_step", json_object_new_int64((int64_t)step));
        json_object_array_add(c->arr, o);
        c->cur = o;
    }
    json_object_object_add(c->cur, "last_step", json_object_new_int64((int64_t)step));
}

json_object *dr_run_log_segments(const dr_run_log *t)
{
    list_ctx c = { json_object_new_array(), NULL };
    each_line(t, add_line, &c);
    return c.arr;
}

/* Temp files of a write that a kill interrupted ("<name>.tmp.<pid>[.<k>]",
 * core/fileio.c): the rename never happened, so they hold nothing the run
 * needs. Only those whose writer is gone (dr_pid_gone) are removed: a live
 * process's temp file is about to be renamed. unlink() of a planted link
 * removes the link, never its target. */
static void remove_stale_temps(const char *dir)
{
    static const char *const names[] = { "ckpt.bin", "metrics.jsonl", "summary.json", "predictions.jsonl",
                                         "eval.json", "ps_schedule.json", "ps_schedule.jsonl" };
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d) return;
    while ((e = readdir(d))) {
        long pid = strncmp(e->d_name, "events.out.tfevents.", 20) == 0 ? dr_temp_pid(e->d_name, "") : 0;
        for (size_t i = 0; !pid && i < sizeof names / sizeof names[0]; i++) pid = dr_temp_pid(e->d_name, names[i]);
        if (dr_pid_gone(pid)) {
            char path[1400];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            (void)unlink(path);
        }
    }
    closedir(d);
}

int dr_run_log_open(dr_run_log *t, const dr_run_config *cfg, dr_err *err)
{
    return dr_run_log_open_as(t, cfg, true, err);
}

int dr_run_log_open_as(dr_run_log *t, const dr_run_config *cfg, bool writer, dr_err *err)
{
    char path[1100];
    struct stat st;
    uint8_t *buf;
    size_t n;
    int rc;
    memset(t, 0, sizeof *t);
    t->cfg = cfg;
    t->t_start = t->t_prev = dr_now();
    t->learning_rate = NAN;
    if ((rc = dr_tfevents_open(&t->events, cfg->model_dir, wall_now(), err))) return rc;
    snprintf(path, sizeof path, "%s/metrics.jsonl", cfg->model_dir);
    if (writer) remove_stale_temps(cfg->model_dir);   /* never another rank's live temp files */
    if (lstat(path, &st) != 0) return DR_OK;   /* no earlier run */
    rc = dr_read_regular(path, (size_t)1 << 30, &buf, &n, err);   /* no link, FIFO or device */
    if (rc) return rc;
    t->metrics = (char *)buf;
    t->len = n;
    t->cap = n + 1;
    return DR_OK;
}

void dr_run_log_free(dr_run_log *t)
{
    free(t->metrics);
    dr_tfevents_free(&t->events);
    memset(t, 0, sizeof *t);
}

/* Keep the lines of steps the checkpoint covers; later ones will be redone. */
void dr_run_log_trim(dr_run_log *t, uint64_t upto)
{
    size_t keep = 0;
    while (keep < t->len) {
        unsigned long long step;
        char *nl = memchr(t->metrics + keep, '\n', t->len - keep);
        if (!nl || sscanf(t->metrics + keep, "{\"step\":%llu", &step) != 1 || step > upto) break;
        keep = (size_t)(nl - t->metrics) + 1;
    }
    t->len = keep;
    if (t->metrics) t->metrics[keep] = 0;
}

/* metrics.jsonl and this segment's TensorBoard events first, then the
 * parts that must agree with the checkpoint (parameter_server's schedule),
 * then ckpt.bin: the checkpoint's rename is the one commit. A kill before
 * it leaves the old checkpoint with metrics lines (and parts) beyond it,
 * which a resume cuts back (dr_run_log_trim; a part's reader keeps what the
 * checkpoint covers) and redoes; a kill after it leaves all of them new.
 * Either way every step's line is there exactly once after the resume (the
 * durability suite kills at every write, fsync and rename of every strategy
 * to show it). The events of redone steps land again in the next segment's
 * file, after a SessionLog START at its first step, on which TensorBoard
 * drops the earlier copies (scripts/test_tensorboard.sh kills a run between
 * the two to show it). */
int dr_run_log_commit(dr_run_log *t, const dr_checkpoint *c, const dr_ckpt_part *parts, size_t nparts,
                      dr_err *err)
{
    char path[1100];
    int rc = dr_mkdirs(t->cfg->model_dir, err);
    snprintf(path, sizeof path, "%s/metrics.jsonl", t->cfg->model_dir);
    if (rc == DR_OK && DR_SEAM_CKPT_BEFORE_METRICS) rc = dr_checkpoint_save(t->cfg->model_dir, c, err);
    if (rc == DR_OK) rc = dr_write_atomic(path, t->metrics ? t->metrics : "", t->len, err);
    if (rc == DR_OK && DR_SEAM_EVENTS_WITH_METRICS) rc = dr_tfevents_write(&t->events, err);
    if (rc == DR_OK && DR_SEAM_CKPT_BEFORE_PARTS) rc = dr_checkpoint_save(t->cfg->model_dir, c, err);
    for (size_t i = 0; rc == DR_OK && i < nparts; i++) {
        snprintf(path, sizeof path, "%s/%s", t->cfg->model_dir, parts[i].name);
        rc = dr_write_atomic(path, parts[i].data, parts[i].len, err);
    }
    if (rc == DR_OK && DR_SEAM_CKPT_LAST) rc = dr_checkpoint_save(t->cfg->model_dir, c, err);
    return rc;
}

int dr_run_log_save(dr_run_log *t, const dr_checkpoint *c, dr_err *err)
{
    return dr_run_log_commit(t, c, NULL, 0, err);
}


/* ---- progress and summary ----------------------------------------------- */

void dr_run_log_progress(const dr_run_log *t, uint64_t step, uint32_t epoch, uint32_t epochs, float loss)
{
    uint64_t total = t->cfg->train_steps;
    if (!t->cfg->progress) return;
    if (total) {
        int w = (int)(30 * step / total);
        fprintf(stderr, "\r[%-30.*s] step %llu/%llu loss %.4f", w, "==============================",
                (unsigned long long)step, (unsigned long long)total, (double)loss);
    } else {
        fprintf(stderr, "\repoch %u/%u step %llu loss %.4f", epoch + 1, epochs,
                (unsigned long long)step, (double)loss);
    }
    if (!total || step == total) fflush(stderr);
}

json_object *dr_devices_json(const dr_strategy *s)
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

int dr_run_log_summary(dr_run_log *t, json_object *o, dr_err *err)
{
    char path[1100];
    const char *text;
    int rc;
    if (t->cfg->progress) fputc('\n', stderr);
    text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    snprintf(path, sizeof path, "%s/summary.json", t->cfg->model_dir);
    rc = dr_write_atomic(path, text, strlen(text), err);
    json_object_put(o);
    return rc;
}
