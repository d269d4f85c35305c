/* distref core — checkpoint files (format in checkpoint.h). */
#include "distref/checkpoint.h"
#include "distref/fileio.h"
#include "distref/sha256.h"
#include "distref/loss_scale.h"
#include "distref/model.h"
#include "distref/train.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAGIC "DRCKPT07"
#define MAGIC_06 "DRCKPT06"   /* read too: no staircase, cycle or warmup start */
#define MAGIC_05 "DRCKPT05"   /* read too: no input identity (not checked) */
#define MAGIC_04 "DRCKPT04"   /* read too: float32 (no mixed precision) */
#define MAGIC_03 "DRCKPT03"   /* read too: no schedule, no clipping */
#define HEADER_03 (32 + 8 + 4 + 4 + 8 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 4 + 4 + 4 + 4)
/* 04 adds the schedule and clipping: kind, warmup, decay_steps, boundaries
 * count, end_learning_rate, power, alpha, decay_rate, boundaries, values, clip */
#define EXT_BYTES (4 * 4 + 4 * 4 + 4 * DR_LR_MAX_BOUNDARIES + 4 * (DR_LR_MAX_BOUNDARIES + 1) + 3 * 4 + 4 + 4)
#define HEADER_04 (HEADER_03 + EXT_BYTES)
/* 05 adds mixed precision: dtype, loss-scale kind, its configured number,
 * the reduction, and the loss scale's state (scale, counter, skipped) */
#define MIX_BYTES (4 + 4 + 4 + 4 + 4 + 4 + 8)
#define HEADER_05 (HEADER_04 + MIX_BYTES)
/* 06 adds the input's identity: the auto-shard policy, the shard set's SHA-256 */
#define INPUT_BYTES (4 + 32)
#define HEADER_06 (HEADER_05 + INPUT_BYTES)
/* 07 adds the schedule's options: flags (staircase, cycle), the warmup's
 * start; and the loss scale's --dynamic_growth_steps */
#define SCHED_BYTES (4 + 4 + 4)
#define HEADER_BYTES (HEADER_06 + SCHED_BYTES)
#define SCHED_STAIRCASE 1u
#define SCHED_CYCLE 2u
#define MAX_CHECKPOINT ((size_t)1 << 31)

static void put_f64(uint8_t *p, double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    dr_put_u64le(p, u);
}

static double get_f64(const uint8_t *p)
{
    uint64_t u = dr_get_u64le(p);
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void path_of(const char *dir, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", dir, DR_CHECKPOINT_FILE);
}

static size_t file_size(const dr_checkpoint *c, size_t header)
{
    return 8 + 4 + header + 4 * (size_t)c->nparams * (1 + c->nslots) + 32;
}

static void put_f32(uint8_t *p, float x) { uint32_t u; memcpy(&u, &x, 4); dr_put_u32le(p, u); }
static float get_f32(const uint8_t *p) { uint32_t u = dr_get_u32le(p); float x; memcpy(&x, &u, 4); return x; }

/* The 04 extension: the schedule and clipping (EXT_BYTES). */
static size_t put_ext(uint8_t *p, const dr_checkpoint *c)
{
    const dr_lr_schedule *s = &c->schedule;
    size_t off = 0;
    dr_put_u32le(p + off, (uint32_t)s->kind); off += 4;
    dr_put_u32le(p + off, s->warmup_steps); off += 4;
    dr_put_u32le(p + off, s->decay_steps); off += 4;
    dr_put_u32le(p + off, s->nboundaries); off += 4;
    put_f32(p + off, s->end_learning_rate); off += 4;
    put_f32(p + off, s->power); off += 4;
    put_f32(p + off, s->alpha); off += 4;
    put_f32(p + off, s->decay_rate); off += 4;
    for (int i = 0; i < DR_LR_MAX_BOUNDARIES; i++, off += 4) dr_put_u32le(p + off, s->boundaries[i]);
    for (int i = 0; i <= DR_LR_MAX_BOUNDARIES; i++, off += 4) put_f32(p + off, s->values[i]);
    put_f32(p + off, c->clip.clipnorm); off += 4;
    put_f32(p + off, c->clip.clipvalue); off += 4;
    put_f32(p + off, c->clip.global_clipnorm); off += 4;
    dr_put_u32le(p + off, c->clip.per_replica); off += 4;
    dr_put_u32le(p + off, c->accumulation_steps); off += 4;
    return off;
}

/* The 05 extension: mixed precision (MIX_BYTES). */
static size_t put_mix(uint8_t *p, const dr_checkpoint *c)
{
    size_t off = 0;
    dr_put_u32le(p + off, c->mixed_dtype); off += 4;
    dr_put_u32le(p + off, c->loss_scale_kind); off += 4;
    put_f32(p + off, c->loss_scale_value); off += 4;
    dr_put_u32le(p + off, c->mixed_tf_reduction); off += 4;
    put_f32(p + off, c->ls_scale); off += 4;
    dr_put_u32le(p + off, c->ls_counter); off += 4;
    dr_put_u64le(p + off, c->ls_skipped); off += 8;
    return off;
}

static size_t get_mix(const uint8_t *p, dr_checkpoint *c)
{
    size_t off = 0;
    c->mixed_dtype = dr_get_u32le(p + off); off += 4;
    c->loss_scale_kind = dr_get_u32le(p + off); off += 4;
    c->loss_scale_value = get_f32(p + off); off += 4;
    c->mixed_tf_reduction = dr_get_u32le(p + off); off += 4;
    c->ls_scale = get_f32(p + off); off += 4;
    c->ls_counter = dr_get_u32le(p + off); off += 4;
    c->ls_skipped = dr_get_u64le(p + off); off += 8;
    return off;
}

static size_t get_ext(const uint8_t *p, dr_checkpoint *c)
{
    dr_lr_schedule *s = &c->schedule;
    size_t off = 0;
    s->kind = (dr_lr_kind)dr_get_u32le(p + off); off += 4;
    s->warmup_steps = dr_get_u32le(p + off); off += 4;
    s->decay_steps = dr_get_u32le(p + off); off += 4;
    s->nboundaries = dr_get_u32le(p + off); off += 4;
    s->end_learning_rate = get_f32(p + off); off += 4;
    s->power = get_f32(p + off); off += 4;
    s->alpha = get_f32(p + off); off += 4;
    s->decay_rate = get_f32(p + off); off += 4;
    for (int i = 0; i < DR_LR_MAX_BOUNDARIES; i++, off += 4) s->boundaries[i] = dr_get_u32le(p + off);
    for (int i = 0; i <= DR_LR_MAX_BOUNDARIES; i++, off += 4) s->values[i] = get_f32(p + off);
    c->clip.clipnorm = get_f32(p + off); off += 4;
    c->clip.clipvalue = get_f32(p + off); off += 4;
    c->clip.global_clipnorm = get_f32(p + off); off += 4;
    c->clip.per_replica = dr_get_u32le(p + off) != 0; off += 4;
    c->accumulation_steps = dr_get_u32le(p + off); off += 4;
    return off;
}

int dr_checkpoint_save(const char *model_dir, const dr_checkpoint *c, dr_err *err)
{
    char path[1100];
    size_t n = file_size(c, HEADER_BYTES), off = 0;
    uint8_t *buf = malloc(n);
    int rc;
    if (!buf) return dr_fail(err, DR_ENOMEM, "checkpoint: no memory for %zu bytes", n);
    path_of(model_dir, path, sizeof path);
    memcpy(buf, MAGIC, 8); off = 8;
    dr_put_u32le(buf + off, HEADER_BYTES); off += 4;
    memset(buf + off, 0, 32);
    memcpy(buf + off, c->experiment, strnlen(c->experiment, 31)); off += 32;
    dr_put_u64le(buf + off, c->seed); off += 8;
    dr_put_u32le(buf + off, c->global_batch); off += 4;
    dr_put_u32le(buf + off, c->optimizer); off += 4;
    dr_put_u64le(buf + off, c->step); off += 8;
    dr_put_u32le(buf + off, c->examples); off += 4;
    dr_put_u32le(buf + off, c->epoch); off += 4;
    dr_put_u32le(buf + off, c->position); off += 4;
    dr_put_u64le(buf + off, c->epoch_correct); off += 8;
    dr_put_u64le(buf + off, c->epoch_examples); off += 8;
    dr_put_u32le(buf + off, c->last_loss_bits); off += 4;
    put_f64(buf + off, c->learning_rate); off += 8;
    put_f64(buf + off, c->momentum); off += 8;
    put_f64(buf + off, c->l2); off += 8;
    dr_put_u32le(buf + off, c->flags); off += 4;
    dr_put_u32le(buf + off, c->loss_reduction); off += 4;
    dr_put_u32le(buf + off, c->nparams); off += 4;
    dr_put_u32le(buf + off, c->nslots); off += 4;
    off += put_ext(buf + off, c);
    off += put_mix(buf + off, c);
    dr_put_u32le(buf + off, c->input_policy); off += 4;
    memcpy(buf + off, c->shards_sha256, 32); off += 32;
    dr_put_u32le(buf + off, (c->schedule.staircase ? SCHED_STAIRCASE : 0) | (c->schedule.cycle ? SCHED_CYCLE : 0));
    off += 4;
    put_f32(buf + off, c->schedule.warmup_lr); off += 4;
    dr_put_u32le(buf + off, c->ls_growth_steps); off += 4;
    for (size_t i = 0; i < c->nparams; i++, off += 4) { uint32_t u; memcpy(&u, &c->params[i], 4); dr_put_u32le(buf + off, u); }
    for (size_t i = 0; i < (size_t)c->nparams * c->nslots; i++, off += 4) { uint32_t u; memcpy(&u, &c->slots[i], 4); dr_put_u32le(buf + off, u); }
    {
        dr_sha256_ctx h;
        dr_sha256_init(&h);
        dr_sha256_update(&h, buf, off);
        dr_sha256_final(&h, buf + off);
    }
    rc = dr_write_atomic(path, buf, n, err);
    free(buf);
    return rc;
}

static int bad(dr_err *err, const char *path, const char *what)
{
    return dr_fail(err, DR_EFORMAT, "checkpoint %s: %s; nothing was loaded", path, what);
}

/* The header's counters agree with each other (the SHA-256 proves only that
 * the file is whole: whoever can write it can recompute it). Bounds every
 * strategy meets: a step takes at least one example (so at most (e + 1) * n
 * steps); the epoch's counters count examples trained, at most G per step. */
static int consistent(const char *path, const dr_checkpoint *c, dr_err *err)
{
    const unsigned long long G = c->global_batch, n = c->examples, step = c->step, e = c->epoch;
    if (G == 0) return dr_fail(err, DR_EFORMAT, "checkpoint %s: global_batch is 0, expected at least 1; nothing "
                               "was loaded", path);
    if (n == 0) return dr_fail(err, DR_EFORMAT, "checkpoint %s: examples is 0, expected at least 1; nothing was "
                               "loaded", path);
    if (c->position > n)
        return dr_fail(err, DR_EFORMAT, "checkpoint %s: position %u is past the end of an epoch of %llu examples; "
                       "nothing was loaded", path, c->position, n);
    if (c->epoch_correct > c->epoch_examples)
        return dr_fail(err, DR_EFORMAT, "checkpoint %s: epoch_correct %llu is more than epoch_examples %llu "
                       "(forged or corrupt); nothing was loaded", path, (unsigned long long)c->epoch_correct,
                       (unsigned long long)c->epoch_examples);
    /* Not bounded by n: under auto_shard_policy=off each of W workers reads
     * the whole training set, so an epoch trains up to W * n examples (and
     * the checkpoint does not record W); at most G a step bounds it. */
    if (step <= UINT64_MAX / G && c->epoch_examples > step * G)
        return dr_fail(err, DR_EFORMAT, "checkpoint %s: epoch_examples %llu is more than %llu steps of %llu can "
                       "train; nothing was loaded", path, (unsigned long long)c->epoch_examples, step, G);
    /* No lower bound on step from the position: a parameter_server run's
     * workers take batches that a lost worker or ps never turns into a step
     * (its checkpoint at step 6 may sit at epoch 1, position 0). */
    if (step > (e + 1) * n)
        return dr_fail(err, DR_EFORMAT, "checkpoint %s: step %llu is more than the %llu steps epoch %llu can hold "
                       "(one example each); nothing was loaded", path, step, (e + 1) * n, e);
    return DR_OK;
}

static int parse(const char *path, const uint8_t *buf, size_t n, dr_checkpoint *c, dr_err *err)
{
    size_t off = 12, header = HEADER_BYTES;
    uint8_t digest[32];
    dr_sha256_ctx h;
    if (n >= 8 && memcmp(buf, MAGIC_03, 8) == 0) header = HEADER_03;
    if (n >= 8 && memcmp(buf, MAGIC_04, 8) == 0) header = HEADER_04;
    if (n >= 8 && memcmp(buf, MAGIC_05, 8) == 0) header = HEADER_05;
    if (n >= 8 && memcmp(buf, MAGIC_06, 8) == 0) header = HEADER_06;
    if (n < 12 + header + 32) return bad(err, path, "truncated (shorter than its header)");
    if (memcmp(buf, "DRCKPT0", 7) == 0 && memcmp(buf, MAGIC, 8) != 0 && header == HEADER_BYTES)
        return bad(err, path, "written by another distref version (its magic is not " MAGIC "); resume it with "
                   "that version or start a new --model_dir");
    if (memcmp(buf, MAGIC, 8) != 0 && header == HEADER_BYTES)
        return bad(err, path, "not a distref checkpoint (magic is not " MAGIC ")");
    if (dr_get_u32le(buf + 8) != header) return bad(err, path, "unsupported header size (written by another version)");
    memcpy(c->experiment, buf + off, 32); c->experiment[31] = 0; off += 32;
    c->seed = dr_get_u64le(buf + off); off += 8;
    c->global_batch = dr_get_u32le(buf + off); off += 4;
    c->optimizer = dr_get_u32le(buf + off); off += 4;
    c->step = dr_get_u64le(buf + off); off += 8;
    c->examples = dr_get_u32le(buf + off); off += 4;
    c->epoch = dr_get_u32le(buf + off); off += 4;
    c->position = dr_get_u32le(buf + off); off += 4;
    c->epoch_correct = dr_get_u64le(buf + off); off += 8;
    c->epoch_examples = dr_get_u64le(buf + off); off += 8;
    c->last_loss_bits = dr_get_u32le(buf + off); off += 4;
    c->learning_rate = get_f64(buf + off); off += 8;
    c->momentum = get_f64(buf + off); off += 8;
    c->l2 = get_f64(buf + off); off += 8;
    c->flags = dr_get_u32le(buf + off); off += 4;
    c->loss_reduction = dr_get_u32le(buf + off); off += 4;
    c->nparams = dr_get_u32le(buf + off); off += 4;
    c->nslots = dr_get_u32le(buf + off); off += 4;
    if (header != HEADER_03) off += get_ext(buf + off, c);
    if (header >= HEADER_05) off += get_mix(buf + off, c);
    if (header >= HEADER_06) {
        c->input_policy = dr_get_u32le(buf + off); off += 4;
        memcpy(c->shards_sha256, buf + off, 32); off += 32;
        if (c->input_policy > DR_CKPT_POLICY_BASE + 4)
            return bad(err, path, "its auto-shard policy is out of range (corrupt)");
    }
    if (header == HEADER_BYTES) {
        uint32_t f = dr_get_u32le(buf + off); off += 4;
        c->schedule.warmup_lr = get_f32(buf + off); off += 4;
        c->ls_growth_steps = dr_get_u32le(buf + off); off += 4;
        c->schedule.staircase = (f & SCHED_STAIRCASE) != 0;
        c->schedule.cycle = (f & SCHED_CYCLE) != 0;
        if (f & ~(SCHED_STAIRCASE | SCHED_CYCLE) || !(c->schedule.warmup_lr >= 0.0f))
            return bad(err, path, "its learning-rate schedule's options are out of range (corrupt)");
    }
    if (c->mixed_dtype > 2 || c->loss_scale_kind > 2)
        return bad(err, path, "its mixed-precision policy is out of range (corrupt)");
    if (!dr_lr_kind_name(c->schedule.kind) || c->schedule.nboundaries > DR_LR_MAX_BOUNDARIES)
        return bad(err, path, "its learning-rate schedule is out of range (corrupt)");
    if (c->nslots > 2 || c->nparams > (1u << 28) || n != file_size(c, header))
        return bad(err, path, "size does not match its header (truncated or corrupt)");
    dr_sha256_init(&h);
    dr_sha256_update(&h, buf, n - 32);
    dr_sha256_final(&h, digest);
    if (memcmp(digest, buf + n - 32, 32) != 0) return bad(err, path, "checksum mismatch (corrupt)");
    {
        int rc = consistent(path, c, err);
        if (rc) return rc;
    }
    c->params = malloc(4 * (size_t)c->nparams + 1);
    c->slots = malloc(4 * (size_t)c->nparams * c->nslots + 1);
    if (!c->params || !c->slots) {
        dr_checkpoint_free(c);
        return dr_fail(err, DR_ENOMEM, "checkpoint %s: no memory", path);
    }
    for (size_t i = 0; i < c->nparams; i++, off += 4) { uint32_t u = dr_get_u32le(buf + off); memcpy(&c->params[i], &u, 4); }
    for (size_t i = 0; i < (size_t)c->nparams * c->nslots; i++, off += 4) { uint32_t u = dr_get_u32le(buf + off); memcpy(&c->slots[i], &u, 4); }
    return DR_OK;
}

int dr_checkpoint_load(const char *model_dir, dr_checkpoint *c, bool *found, dr_err *err)
{
    char path[1100];
    uint8_t *buf;
    size_t n;
    struct stat st;
    int rc;
    memset(c, 0, sizeof *c);
    *found = false;
    path_of(model_dir, path, sizeof path);
    if (lstat(path, &st) != 0 && errno == ENOENT) return DR_OK;
    /* a link, a FIFO (which would block open() forever), a device: refused */
    rc = dr_read_regular(path, MAX_CHECKPOINT, &buf, &n, err);
    if (rc) return rc;
    rc = parse(path, buf, n, c, err);
    free(buf);
    if (rc == DR_OK) *found = true;
    return rc;
}

void dr_checkpoint_free(dr_checkpoint *c)
{
    free(c->params);
    free(c->slots);
    c->params = c->slots = NULL;
}

/* A setting of the run that differs from the checkpoint's: a usage error
 * naming the flag and both values, like dr_checkpoint_check_settings. */
static int check_field(dr_err *err, const char *dir, const char *flag, int same, const char *saved, const char *now)
{
    if (same) return DR_OK;
    return dr_fail(err, DR_EUSAGE, "%s=%s, but the checkpoint %s/ckpt.bin was trained with %s=%s; resume with the "
                   "same value or use another --model_dir", flag, now, dir, flag, saved);
}

/* Another experiment: the architectures compared, so the message names the
 * first layer and dimension that differ (both are registered experiments:
 * a checkpoint's name is checked when it is read; an unknown one keeps the
 * plain message). */
static int check_experiment(dr_err *err, const char *dir, const char *saved, const char *now)
{
    dr_experiment es, en;
    dr_err ignored;
    char diff[320] = "";
    if (!strcmp(saved, now)) return DR_OK;
    if (!dr_experiment_lookup(saved, &es, &ignored) && !dr_experiment_lookup(now, &en, &ignored) &&
        !dr_model_derive(&es.model, &ignored) && !dr_model_derive(&en.model, &ignored) &&
        dr_model_first_difference(&en.model, &es.model, "the checkpoint", diff, sizeof diff))
        return dr_fail(err, DR_EUSAGE, "--experiment=%s, but the checkpoint %s/ckpt.bin was trained with "
                       "--experiment=%s, another architecture (%s); resume with the same value or use another "
                       "--model_dir", now, dir, saved, diff);
    return check_field(err, dir, "--experiment", 0, saved, now);
}

int dr_checkpoint_check(const dr_checkpoint *c, const char *dir, const char *experiment,
                        size_t nparams, int nslots, int optimizer, uint64_t seed, uint32_t G,
                        uint32_t examples, dr_err *err)
{
    char a[48], b[48];
    int rc = check_experiment(err, dir, c->experiment, experiment);
    snprintf(a, sizeof a, "%s (%u parameters)", c->experiment, c->nparams);
    snprintf(b, sizeof b, "%s (%zu parameters)", experiment, nparams);
    if (!rc) rc = check_field(err, dir, "--experiment", c->nparams == nparams, a, b);
    snprintf(a, sizeof a, "%s", c->optimizer == 0 ? "sgd" : c->optimizer == 1 ? "adam" : "?");
    snprintf(b, sizeof b, "%s", optimizer == 0 ? "sgd" : optimizer == 1 ? "adam" : "?");
    if (!rc) rc = check_field(err, dir, "--optimizer",
                              c->nslots == (uint32_t)nslots && c->optimizer == (uint32_t)optimizer, a, b);
    snprintf(a, sizeof a, "%llu", (unsigned long long)c->seed);
    snprintf(b, sizeof b, "%llu", (unsigned long long)seed);
    if (!rc) rc = check_field(err, dir, "--seed", c->seed == seed, a, b);
    snprintf(a, sizeof a, "%u", c->global_batch); snprintf(b, sizeof b, "%u", G);
    if (!rc) rc = check_field(err, dir, "--global_batch_size", c->global_batch == G, a, b);
    snprintf(a, sizeof a, "%u examples", c->examples); snprintf(b, sizeof b, "%u examples", examples);
    if (!rc) rc = check_field(err, dir, "the training set (--synthetic_examples, --data_dir)", c->examples == examples,
                              a, b);
    return rc;
}

static const char *on_off(uint32_t flags, uint32_t bit) { return flags & bit ? "true" : "false"; }

/* The schedule and clipping: each flag named with both values. */
static int check_training(const dr_checkpoint *c, const char *dir, const dr_checkpoint *now, dr_err *err)
{
    const dr_lr_schedule *a = &c->schedule, *b = &now->schedule;
    const struct { const char *flag; double saved, mine; } num[] = {
        { "--warmup_steps", a->warmup_steps, b->warmup_steps }, { "--decay_steps", a->decay_steps, b->decay_steps },
        { "--end_learning_rate", a->end_learning_rate, b->end_learning_rate }, { "--power", a->power, b->power },
        { "--alpha", a->alpha, b->alpha }, { "--decay_rate", a->decay_rate, b->decay_rate },
        { "--staircase", a->staircase, b->staircase }, { "--cycle", a->cycle, b->cycle },
        { "--warmup_learning_rate", a->warmup_lr, b->warmup_lr },
        { "--clipnorm", c->clip.clipnorm, now->clip.clipnorm }, { "--clipvalue", c->clip.clipvalue, now->clip.clipvalue },
        { "--global_clipnorm", c->clip.global_clipnorm, now->clip.global_clipnorm },
    };
    if (a->kind != b->kind)
        return dr_fail(err, DR_EUSAGE, "--lr_schedule=%s, but the checkpoint in %s was trained with --lr_schedule=%s; "
                       "resume with the same value or use another --model_dir", dr_lr_kind_name(b->kind), dir,
                       dr_lr_kind_name(a->kind));
    for (size_t i = 0; i < sizeof num / sizeof num[0]; i++)
        if (num[i].saved != num[i].mine)
            return dr_fail(err, DR_EUSAGE, "%s=%.9g, but the checkpoint in %s was trained with %s=%.9g (0: not "
                           "given); resume with the same value or use another --model_dir", num[i].flag, num[i].mine,
                           dir, num[i].flag, num[i].saved);
    if ((c->accumulation_steps > 1 ? c->accumulation_steps : 1) != (now->accumulation_steps > 1 ? now->accumulation_steps : 1))
        return dr_fail(err, DR_EUSAGE, "--gradient_accumulation_steps=%u, but the checkpoint in %s was trained with "
                       "--gradient_accumulation_steps=%u; resume with the same value or use another --model_dir",
                       now->accumulation_steps > 1 ? now->accumulation_steps : 1, dir,
                       c->accumulation_steps > 1 ? c->accumulation_steps : 1);
    if (c->clip.per_replica != now->clip.per_replica)
        return dr_fail(err, DR_EUSAGE, "--clip_semantics=%s, but the checkpoint in %s was trained with "
                       "--clip_semantics=%s; resume with the same value or use another --model_dir",
                       now->clip.per_replica ? "tensorflow" : "exact", dir, c->clip.per_replica ? "tensorflow" : "exact");
    if (a->nboundaries != b->nboundaries || memcmp(a->boundaries, b->boundaries, sizeof a->boundaries) ||
        memcmp(a->values, b->values, sizeof a->values))
        return dr_fail(err, DR_EUSAGE, "--boundaries/--values differ from those the checkpoint in %s was trained "
                       "with; resume with the same values or use another --model_dir", dir);
    return DR_OK;
}

/* Mixed precision: --dtype_policy, --loss_scale and --mixed_reduction. */
static void loss_scale_words(const dr_checkpoint *c, char *out, size_t n)
{
    if (c->loss_scale_kind == 0) snprintf(out, n, "none");
    else if (c->loss_scale_kind == 2) snprintf(out, n, "%.9g", c->loss_scale_value);
    else if (c->loss_scale_value > 0) snprintf(out, n, "dynamic:%.9g", c->loss_scale_value);
    else snprintf(out, n, "dynamic");
}

static int check_mixed(const dr_checkpoint *c, const char *dir, const dr_checkpoint *now, dr_err *err)
{
    static const char *const policies[] = { "float32", "mixed_float16", "mixed_bfloat16" };
    char a[48], b[48];
    if (c->mixed_dtype != now->mixed_dtype)
        return dr_fail(err, DR_EUSAGE, "--dtype_policy=%s, but the checkpoint in %s was trained with "
                       "--dtype_policy=%s; resume with the same value or use another --model_dir",
                       policies[now->mixed_dtype % 3], dir, policies[c->mixed_dtype % 3]);
    loss_scale_words(now, a, sizeof a);
    loss_scale_words(c, b, sizeof b);
    if (c->loss_scale_kind != now->loss_scale_kind || c->loss_scale_value != now->loss_scale_value)
        return dr_fail(err, DR_EUSAGE, "--loss_scale=%s, but the checkpoint in %s was trained with --loss_scale=%s; "
                       "resume with the same value or use another --model_dir", a, dir, b);
    if ((c->ls_growth_steps ? c->ls_growth_steps : DR_LOSS_SCALE_GROWTH_STEPS) !=
        (now->ls_growth_steps ? now->ls_growth_steps : DR_LOSS_SCALE_GROWTH_STEPS))
        return dr_fail(err, DR_EUSAGE, "--dynamic_growth_steps=%u, but the checkpoint in %s was trained with "
                       "--dynamic_growth_steps=%u; resume with the same value or use another --model_dir",
                       now->ls_growth_steps ? now->ls_growth_steps : DR_LOSS_SCALE_GROWTH_STEPS, dir,
                       c->ls_growth_steps ? c->ls_growth_steps : DR_LOSS_SCALE_GROWTH_STEPS);
    if (c->mixed_tf_reduction != now->mixed_tf_reduction)
        return dr_fail(err, DR_EUSAGE, "--mixed_reduction=%s, but the checkpoint in %s was trained with "
                       "--mixed_reduction=%s; resume with the same value or use another --model_dir",
                       now->mixed_tf_reduction ? "tensorflow" : "exact", dir,
                       c->mixed_tf_reduction ? "tensorflow" : "exact");
    return DR_OK;
}

/* The input: the shard set (its index's SHA-256) and the auto-shard policy
 * where both runs apply one. A 05 or older file recorded neither. */
static void shards_words(const dr_checkpoint *c, char *out, size_t n)
{
    static const uint8_t none[32];
    char hex[65];
    if (memcmp(c->shards_sha256, none, 32) == 0) { snprintf(out, n, "none (the whole-file training set)"); return; }
    dr_sha256_to_hex(c->shards_sha256, hex);
    snprintf(out, n, "a set whose shards.json has SHA-256 %s", hex);
}

static int check_input(const dr_checkpoint *c, const char *dir, const dr_checkpoint *now, dr_err *err)
{
    static const char *const policies[] = { "auto", "file", "data", "off", "hint" };
    char a[112], b[112];
    if (c->input_policy == DR_CKPT_POLICY_UNRECORDED) return DR_OK;
    if (memcmp(c->shards_sha256, now->shards_sha256, 32) != 0) {
        shards_words(now, a, sizeof a);
        shards_words(c, b, sizeof b);
        return dr_fail(err, DR_EUSAGE, "--dataset_shards: %s, but the checkpoint in %s was trained on %s; another "
                       "input is another trajectory: resume with the same shard files or use another --model_dir",
                       a, dir, b);
    }
    if (c->input_policy >= DR_CKPT_POLICY_BASE && now->input_policy >= DR_CKPT_POLICY_BASE &&
        c->input_policy != now->input_policy)
        return dr_fail(err, DR_EUSAGE, "--auto_shard_policy=%s, but the checkpoint in %s was trained with "
                       "--auto_shard_policy=%s; resume with the same value or use another --model_dir",
                       policies[(now->input_policy - DR_CKPT_POLICY_BASE) % 5], dir,
                       policies[(c->input_policy - DR_CKPT_POLICY_BASE) % 5]);
    return DR_OK;
}

int dr_checkpoint_check_settings(const dr_checkpoint *c, const char *dir, const dr_checkpoint *now, dr_err *err)
{
    int rc;
    static const char *const divisors[] = { "global_batch_size", "examples_in_step", "tf_default" };
    static const struct { const char *flag; uint32_t bit; } bits[] = {
        { "--shuffle", DR_CKPT_SHUFFLE }, { "--drop_remainder", DR_CKPT_DROP_REMAINDER },
        { "--nesterov", DR_CKPT_NESTEROV },
    };
    const struct { const char *flag; double saved, mine; } num[] = {
        { "--learning_rate", c->learning_rate, now->learning_rate }, { "--momentum", c->momentum, now->momentum },
        { "--l2", c->l2, now->l2 },
    };
    for (size_t i = 0; i < sizeof num / sizeof num[0]; i++)
        if (num[i].saved != num[i].mine)
            return dr_fail(err, DR_EUSAGE, "%s=%.7g, but the checkpoint in %s was trained with %s=%.7g; resume "
                           "with the same value or use another --model_dir", num[i].flag, num[i].mine, dir,
                           num[i].flag, num[i].saved);
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
        if ((c->flags ^ now->flags) & bits[i].bit)
            return dr_fail(err, DR_EUSAGE, "%s=%s, but the checkpoint in %s was trained with %s=%s; resume with "
                           "the same value or use another --model_dir", bits[i].flag, on_off(now->flags, bits[i].bit),
                           dir, bits[i].flag, on_off(c->flags, bits[i].bit));
    if ((c->flags ^ now->flags) & DR_CKPT_BN_REPLICA)
        return dr_fail(err, DR_EUSAGE, "--batch_norm=%s, but the checkpoint in %s was trained with --batch_norm=%s; "
                       "resume with the same value or use another --model_dir",
                       now->flags & DR_CKPT_BN_REPLICA ? "replica" : "sync", dir,
                       c->flags & DR_CKPT_BN_REPLICA ? "replica" : "sync");
    if ((c->flags ^ now->flags) & DR_CKPT_DROPOUT_OFF)
        return dr_fail(err, DR_EUSAGE, "--dropout=%s, but the checkpoint in %s was trained with --dropout=%s; "
                       "resume with the same value or use another --model_dir",
                       now->flags & DR_CKPT_DROPOUT_OFF ? "off" : "model", dir,
                       c->flags & DR_CKPT_DROPOUT_OFF ? "off" : "model");
    if ((c->flags ^ now->flags) & DR_CKPT_DROPOUT_MASKS)
        return dr_fail(err, DR_EUSAGE, "--dropout_masks %s, but the checkpoint in %s was trained %s; resume the "
                       "same way or use another --model_dir", now->flags & DR_CKPT_DROPOUT_MASKS ? "given" : "not given",
                       dir, c->flags & DR_CKPT_DROPOUT_MASKS ? "with a masks file" : "with the RNG's masks");
    if ((c->flags ^ now->flags) & DR_CKPT_FAST_NUMERICS)
        return dr_fail(err, DR_EUSAGE, "--numerics=%s, but the checkpoint in %s was trained with --numerics=%s: "
                       "resuming it in the other mode would silently change its trajectory; resume with "
                       "--numerics=%s or use another --model_dir", now->flags & DR_CKPT_FAST_NUMERICS ? "fast" : "exact",
                       dir, c->flags & DR_CKPT_FAST_NUMERICS ? "fast" : "exact",
                       c->flags & DR_CKPT_FAST_NUMERICS ? "fast" : "exact");
    if ((rc = check_training(c, dir, now, err)) || (rc = check_mixed(c, dir, now, err)) ||
        (rc = check_input(c, dir, now, err))) return rc;
    if (c->loss_reduction != now->loss_reduction)
        return dr_fail(err, DR_EUSAGE, "--loss_reduction=%s, but the checkpoint in %s was trained with "
                       "--loss_reduction=%s; resume with the same value or use another --model_dir",
                       now->loss_reduction < 3 ? divisors[now->loss_reduction] : "?", dir,
                       c->loss_reduction < 3 ? divisors[c->loss_reduction] : "?");
    return DR_OK;
}
