/* distref harness — `distref export`: what another framework needs to
 * reproduce a run without distref's RNG.
 *
 *   init      the initial variables, one array per tensor, in Keras's
 *             layout: dense_<l>_kernel (in x out, row-major) and
 *             dense_<l>_bias (out); for a model with other layers
 *             (docs/MODELS.md) one flat array `params` in distref's
 *             layout (trainable tensors layer by layer, Keras shapes, then
 *             each BatchNormalization's moving mean and variance)
 *   data      the training set as the model sees it: x (n x features
 *             float32, pixels already byte / 255) and y (n uint8 labels, or
 *             n float32 targets for the toy)
 *   batches   every step's example ids per replica, after the strategy's
 *             split under the run's auto-shard policy (batches.json), and
 *             with --format=npy each epoch's order too (order.npy,
 *             epochs x n uint32)
 *   shards    the training set as --num_shards shard files and their index
 *             shards.json (distref/shards.h), for --dataset_shards
 *   weights   the checkpoint's variables and optimizer slots (and its
 *             loss) as a one-step trajectory in model_dir/weights
 *             (distref/trajectory.h; `distref diff` reads it)
 *
 * --format=npy writes NumPy .npy files (format 1.0, little-endian);
 * --format=json writes the same arrays as JSON. Every file is written
 * atomically into --model_dir.
 */
#include "distref/harness.h"
#include "harness/run_lock.h"
#include "harness/trajectory_rec.h"
#include "distref/checkpoint.h"
#include "distref/fileio.h"
#include "distref/input.h"
#include "distref/model.h"
#include "distref/multiworker.h"
#include "distref/plan.h"
#include "distref/shards.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct buf { char *p; size_t n, cap; bool oom; } buf;

static void put(buf *b, const void *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p; b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void putf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(buf *b, const char *fmt, ...)
{
    char s[96];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(s, sizeof s, fmt, ap);
    va_end(ap);
    put(b, s, k < 0 ? 0 : (size_t)k < sizeof s ? (size_t)k : sizeof s - 1);
}

static int flush(buf *b, const char *dir, const char *name, dr_err *err)
{
    char path[2048];
    int rc;
    if (b->oom) { free(b->p); return dr_fail(err, DR_ENOMEM, "export %s: out of memory", name); }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rc = dr_write_atomic(path, b->p ? b->p : "", b->n, err);
    free(b->p);
    memset(b, 0, sizeof *b);
    return rc;
}

/* One array: dtype "<f4", "|u1" or "<u4"; shape of 1 or 2 dims. */
static int write_array(const char *dir, const char *name, bool npy, const char *dtype, const uint32_t *shape,
                       int ndim, const void *data, dr_err *err)
{
    size_t count = shape[0] * (size_t)(ndim > 1 ? shape[1] : 1), esize = dtype[2] == '1' ? 1 : 4;
    char file[256];
    buf b = { 0 };
    snprintf(file, sizeof file, "%s.%s", name, npy ? "npy" : "json");
    if (npy) {
        char hdr[160];
        int k = ndim > 1 ? snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%u, %u), }",
                                    dtype, shape[0], shape[1])
                         : snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%u,), }",
                                    dtype, shape[0]);
        size_t total = 10 + (size_t)k + 1, pad = (64 - total % 64) % 64;
        uint16_t hlen = (uint16_t)(k + pad + 1);
        unsigned char magic[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                                    (unsigned char)(hlen >> 8) };
        put(&b, magic, sizeof magic);
        put(&b, hdr, (size_t)k);
        for (size_t i = 0; i < pad; i++) put(&b, " ", 1);
        put(&b, "\n", 1);
        put(&b, data, count * esize);   /* this machine is little-endian (x86-64, AArch64) */
    } else {
        putf(&b, "{\"dtype\": \"%s\", \"shape\": [%u%s", dtype[1] == 'f' ? "float32" : dtype[2] == '1' ? "uint8" : "uint32",
             shape[0], ndim > 1 ? ", " : "");
        if (ndim > 1) putf(&b, "%u", shape[1]);
        put(&b, "], \"data\": [", 12);
        for (size_t i = 0; i < count; i++) {
            if (i) put(&b, ",", 1);
            if (dtype[1] == 'f') putf(&b, "%.9g", (double)((const float *)data)[i]);
            else if (esize == 1) putf(&b, "%u", ((const uint8_t *)data)[i]);
            else putf(&b, "%u", ((const uint32_t *)data)[i]);
        }
        put(&b, "]}\n", 3);
    }
    return flush(&b, dir, file, err);
}

static int export_init(const dr_run_config *cfg, const dr_run_plan *plan, bool npy, dr_err *err)
{
    const dr_model_spec *m = &plan->exp.model;
    float *w = malloc(plan->P * sizeof(float) + 1);
    int rc = DR_OK;
    if (!w) return dr_fail(err, DR_ENOMEM, "export init: out of memory");
    dr_model_init(m, cfg->seed, w);
    if (!dr_model_is_dense(m)) {   /* one flat array in distref's layout (docs/MODELS.md) */
        uint32_t shape[1] = { (uint32_t)plan->P };
        rc = write_array(cfg->model_dir, "params", npy, "<f4", shape, 1, w, err);
        free(w);
        return rc;
    }
    for (uint32_t l = 0; rc == DR_OK && l < m->nlayers; l++) {
        char name[64];
        uint32_t ks[2] = { m->layer[l].in, m->layer[l].out }, bs[1] = { m->layer[l].out };
        snprintf(name, sizeof name, "dense_%u_kernel", l);
        rc = write_array(cfg->model_dir, name, npy, "<f4", ks, 2, w + dr_model_kernel_offset(m, l), err);
        snprintf(name, sizeof name, "dense_%u_bias", l);
        if (rc == DR_OK) rc = write_array(cfg->model_dir, name, npy, "<f4", bs, 1, w + dr_model_bias_offset(m, l), err);
    }
    free(w);
    return rc;
}

static int export_data(const dr_run_config *cfg, const dr_dataset *d, bool npy, dr_err *err)
{
    uint32_t *ids = malloc((size_t)d->n * sizeof *ids + 4), xs[2] = { d->n, d->features }, ys[1] = { d->n };
    float *x = malloc((size_t)d->n * d->features * sizeof(float) + 4), *t = malloc((size_t)d->n * sizeof(float) + 4);
    uint8_t *lab = malloc((size_t)d->n + 1);
    int rc;
    if (!ids || !x || !t || !lab) { rc = dr_fail(err, DR_ENOMEM, "export data: out of memory"); goto out; }
    for (uint32_t i = 0; i < d->n; i++) ids[i] = i;
    dr_dataset_gather(d, ids, d->n, x, d->labels ? lab : NULL, d->targets ? t : NULL);
    rc = write_array(cfg->model_dir, "x", npy, "<f4", xs, 2, x, err);
    if (rc == DR_OK)
        rc = d->labels ? write_array(cfg->model_dir, "y", npy, "|u1", ys, 1, lab, err)
                       : write_array(cfg->model_dir, "y", npy, "<f4", ys, 1, t, err);
out:
    free(ids); free(x); free(t); free(lab);
    return rc;
}

/* Replicas in sync and workers of the strategy, as the variants build it. */
static int replicas_of(const dr_run_plan *plan, uint32_t *R, uint32_t *W, dr_err *err)
{
    dr_strategy s;
    dr_strategy_options opt = plan->sopt;
    dr_tpu_system sys;
    int part[2], rc;
    uint32_t tiles;
    if (plan->spec.kind == DR_STRATEGY_TPU && (rc = dr_tpu_options(plan->cfg, &plan->exp, &sys, &opt, part, &tiles, err)))
        return rc;
    if ((rc = dr_strategy_create(&plan->spec, &opt, &s, err))) return rc;
    *R = s.num_replicas;
    *W = s.num_workers ? s.num_workers : 1;
    return DR_OK;
}

static int export_batches(const dr_run_config *cfg, const dr_run_plan *plan, const dr_dataset *d, bool npy,
                          dr_err *err)
{
    uint32_t R, W, *arranged = NULL, off[DR_MAX_DEVICES + 1], epochs_seen = 0;
    uint64_t steps = 0;
    dr_dist_iter it;
    dr_dist_batch b;
    buf j = { 0 }, ord = { 0 };
    int rc = replicas_of(plan, &R, &W, err);
    if (rc) return rc;
    if ((rc = dr_dist_iter_init(&it, d->n, plan->G, plan->shard_data ? 1 : R, cfg->seed, cfg->shuffle,
                                cfg->drop_remainder, err)))
        return rc;
    if (plan->from_function) rc = dr_dist_iter_from_function(&it, W, err);
    else if (plan->file_sharded) rc = dr_shards_iter(cfg->dataset_shards, &it, W, err);
    else if (plan->unsharded) rc = dr_dist_iter_unsharded(&it, W, err);
    if (rc) goto out;
    if (!(arranged = malloc((size_t)plan->G * sizeof *arranged + 4))) { rc = dr_fail(err, DR_ENOMEM, "export: out of memory"); goto out; }
    putf(&j, "{\"global_batch_size\": %u, \"num_replicas\": %u, \"num_workers\": %u, ", plan->G, R, W);
    putf(&j, "\"split\": \"%s\", ", plan->from_function ? "function: per-replica batches of G/N" :
         plan->shard_data ? "data: ceil(B/N) slices" : "batch_sizes_for_worker");
    putf(&j, "\"loss_divisor\": \"%s\", \"steps\": [", plan->divide_by_count ? "examples_in_step" : "global_batch_size");
    while (cfg->train_steps ? steps < cfg->train_steps : it.epoch < plan->epochs) {
        if (it.position == 0 && it.epoch == epochs_seen) {   /* this epoch's order, once */
            put(&ord, it.order, (size_t)d->n * sizeof *it.order);
            epochs_seen++;
        }
        if (!dr_dist_iter_next(&it, &b)) { dr_dist_iter_next_epoch(&it); continue; }
        const uint32_t *ids = b.ids;
        if (plan->shard_data) { dr_shard_data(b.ids, b.count, W, R / W, arranged, off); ids = arranged; }
        else memcpy(off, b.offset, (R + 1) * sizeof *off);
        putf(&j, "%s\n  {\"step\": %llu, \"epoch\": %u, \"count\": %u, \"ids\": [", steps ? "," : "",
             (unsigned long long)(steps + 1), b.epoch, b.count);
        for (uint32_t r = 0; r < R; r++) {
            put(&j, r ? ", [" : "[", r ? 3 : 1);
            for (uint32_t k = off[r]; k < off[r + 1]; k++) putf(&j, k > off[r] ? ",%u" : "%u", ids[k]);
            put(&j, "]", 1);
        }
        put(&j, "]}", 2);
        steps++;
    }
    put(&j, "\n]}\n", 4);
    rc = flush(&j, cfg->model_dir, "batches.json", err);
    if (rc == DR_OK && npy) {
        uint32_t shape[2] = { epochs_seen, d->n };
        rc = ord.oom ? dr_fail(err, DR_ENOMEM, "export: out of memory")
                     : write_array(cfg->model_dir, "order", true, "<u4", shape, 2, ord.p ? ord.p : "", err);
    }
out:
    free(j.p); free(ord.p); free(arranged);
    dr_dist_iter_free(&it);
    return rc;
}

/* The checkpoint in model_dir as model_dir/weights (a one-step trajectory). */
static int export_weights(const dr_run_config *cfg, const dr_run_plan *plan, dr_err *err)
{
    dr_checkpoint c;
    dr_traj_index ix;
    dr_traj_where *where = calloc(DR_TRAJ_MAX_TENSORS, sizeof *where);
    char dir[1100];
    bool found;
    float loss;
    int rc = where ? dr_checkpoint_load(cfg->model_dir, &c, &found, err) : dr_fail(err, DR_ENOMEM, "export: out of memory");
    if (rc) { free(where); return rc; }
    if (!found) {
        free(where);
        return dr_fail(err, DR_EUSAGE, "--what=weights: no checkpoint in %s (train there first)", cfg->model_dir);
    }
    memset(&ix, 0, sizeof ix);
    rc = dr_checkpoint_check(&c, cfg->model_dir, plan->exp.name, plan->P, plan->nslots, (int)plan->exp.optimizer.kind,
                             cfg->seed, plan->G, c.examples, err);
    memcpy(&loss, &c.last_loss_bits, sizeof loss);
    snprintf(dir, sizeof dir, "%s/weights", cfg->model_dir);
    if (rc == DR_OK) rc = dr_traj_model_tensors(&plan->exp.model, &plan->exp.optimizer, false, true, &ix, where, err);
    if (rc == DR_OK && !(ix.settings = traj_settings(cfg, plan, "checkpoint", "weights", NULL)))
        rc = dr_fail(err, DR_ENOMEM, "export: out of memory");
    if (rc == DR_OK && !(ix.steps = calloc(1, sizeof *ix.steps))) rc = dr_fail(err, DR_ENOMEM, "export: out of memory");
    if (rc == DR_OK) rc = dr_mkdirs(dir, err);
    if (rc == DR_OK)
        rc = dr_traj_write_step(dir, &ix, where, plan->P, c.step, c.params, c.slots, NULL, c.step ? &loss : NULL,
                                &ix.steps[0], err);
    if (rc == DR_OK) {
        ix.nsteps = 1;
        rc = dr_traj_index_write(dir, &ix, err);
    }
    dr_traj_index_free(&ix);
    dr_checkpoint_free(&c);
    free(where);
    return rc;
}

static int export_locked(const dr_run_config *cfg, const dr_run_plan *p, const char *what, bool npy, dr_err *err)
{
    dr_run_plan plan = *p;
    dr_dataset data;
    int rc = DR_OK;
    if (!strcmp(what, "weights")) return export_weights(cfg, &plan, err);
    if (!strcmp(what, "init") || !strcmp(what, "all"))
        if ((rc = export_init(cfg, &plan, npy, err))) return rc;
    if (!strcmp(what, "init")) return DR_OK;
    if ((rc = dr_load_training_set(&plan, DR_SHARDS_ALL, &data, NULL, err))) return rc;
    if (!strcmp(what, "shards")) rc = dr_shards_write(cfg->model_dir, plan.exp.dataset, &data, cfg->num_shards, err);
    if (!strcmp(what, "data") || !strcmp(what, "all")) rc = export_data(cfg, &data, npy, err);
    if (rc == DR_OK && (!strcmp(what, "batches") || !strcmp(what, "all"))) rc = export_batches(cfg, &plan, &data, npy, err);
    dr_dataset_free(&data);
    return rc;
}

int dr_run_export(const dr_run_config *cfg, const char *what, const char *format, dr_err *err)
{
    dr_run_plan plan;
    dr_dir_lock lock;
    bool npy = strcmp(format, "npy") == 0;
    int rc;
    if (!npy && strcmp(format, "json") != 0)
        return dr_fail(err, DR_EUSAGE, "--format: expected npy or json, got '%s'", format);
    if (strcmp(what, "init") && strcmp(what, "data") && strcmp(what, "batches") && strcmp(what, "all") &&
        strcmp(what, "weights") && strcmp(what, "shards"))
        return dr_fail(err, DR_EUSAGE, "--what: expected init, data, batches, all, weights or shards, got '%s'", what);
    if (!strcmp(what, "shards") && !cfg->num_shards)
        return dr_fail(err, DR_EUSAGE, "--what=shards needs --num_shards=N (N >= 1): how many files to write");
    if (strcmp(what, "shards") && cfg->num_shards)
        return dr_fail(err, DR_EUSAGE, "--num_shards=%u applies to --what=shards, not --what=%s", cfg->num_shards, what);
    if (!cfg->model_dir[0]) return dr_fail(err, DR_EUSAGE, "--model_dir: export needs a folder to write into");
    if ((rc = dr_run_plan_make(cfg, &plan, err))) return rc;
    if (plan.spec.kind == DR_STRATEGY_PARAMETER_SERVER && strcmp(what, "init") && strcmp(what, "data") &&
        strcmp(what, "weights") && strcmp(what, "shards"))
        return dr_fail(err, DR_EUSAGE, "export --what=%s: parameter_server's workers take their batches in "
                       "the emulated asynchronous schedule; export a synchronous strategy", what);
    if (!strcmp(what, "weights")) {   /* nothing to export before training: refused before any mkdir */
        char ck[1100];
        FILE *f;
        snprintf(ck, sizeof ck, "%s/" DR_CHECKPOINT_FILE, cfg->model_dir);
        if (!(f = fopen(ck, "rb")))
            return dr_fail(err, DR_EUSAGE, "--what=weights: no checkpoint in %s (train there first)", cfg->model_dir);
        fclose(f);
    }
    /* mkdir -p and the lock only once the request is valid */
    if ((rc = dr_run_lock(cfg, true, &lock, err))) return rc;
    rc = export_locked(cfg, &plan, what, npy, err);
    dr_run_unlock(&lock);
    return rc;
}
