/* distref harness — the training loop, for any variant.
 *
 *   plan        dr_run_plan_make: the experiment after the flags, the
 *               strategy spec, the sharding mode (core/plan.c)
 *   variant     looked up by --variant; it must support the plan, then it
 *               builds its devices and variables (open)
 *   input       the core's iterator: the epoch's order from (seed, epoch),
 *               global batches of G
 *   resume      ckpt.bin in model_dir: checked against the plan, the
 *               iterator moved to its position, the variables set
 *   the loop    one variant step per global batch; a metrics.jsonl line
 *               per step; a checkpoint every --checkpoint_every steps
 *   the end     a checkpoint, and summary.json with weights_sha256 and
 *               the segments (harness/segment.c)
 *
 * A directory whose checkpoint already has every step runs nothing and
 * says so (res->already_complete); one continued under another topology
 * says from which (res->previous), where that is allowed (segment.h).
 */
#include "distref/harness.h"
#include "distref/mpi.h"
#include "distref/checkpoint.h"
#include "distref/cluster.h"
#include "distref/dropout_masks.h"
#include "distref/run_log.h"
#include "distref/shards.h"
#include "harness/run_lock.h"
#include "harness/segment.h"
#include "harness/trajectory_rec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct run {
    const dr_run_config *cfg;
    const dr_variant *v;
    dr_run_plan   plan;
    dr_dataset    data;
    dr_session   *s;
    dr_run_log    log;
    dr_dist_iter  it;
    bool          it_open;
    uint64_t      step, start_step;
    uint64_t      epoch_correct, epoch_examples;
    uint32_t      counted_epoch;   /* the epoch those counters are of (UINT32_MAX: none yet) */
    float         last_loss;
    float        *params, *slots;
    char          topology[160];   /* this run's, in words */
    char          previous[160];   /* the checkpoint's segment, when it differs */
    dr_dir_lock   lock;            /* model_dir's, for the run (harness/run_lock.h) */
    traj_rec      traj;            /* --trajectory (harness/trajectory_rec.h) */
    dr_dropout_masks masks;        /* --dropout_masks (r->plan.dropout_masks points here) */
} run;

/* Only the chief writes model_dir (variant.h); every process trains. */
static bool chief(const run *r)
{
    return !r->v->chief || r->v->chief(r->s);
}

/* Mixed precision: the checkpoint's loss-scale state on every replica. */
static int restore_loss_scale(run *r, const dr_checkpoint *c, dr_err *err)
{
    dr_loss_scale ls;
    if (!r->v->set_loss_scale)
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: resuming a --dtype_policy=%s run under --variant=%s: "
                       "it cannot restore the loss scale", c->mixed_dtype == DR_DTYPE_F16 ? "mixed_float16"
                       : "mixed_bfloat16", r->v->name);
    dr_loss_scale_init(&ls, c->loss_scale_kind == DR_LOSS_SCALE_DYNAMIC, c->ls_scale);
    ls.scale = c->ls_scale;
    if (c->ls_growth_steps) ls.growth_steps = c->ls_growth_steps;   /* 07: --dynamic_growth_steps */
    ls.counter = c->ls_counter;
    ls.skipped = c->ls_skipped;
    return r->v->set_loss_scale(r->s, &ls, err);
}

static int resume(run *r, dr_err *err)
{
    dr_checkpoint c, now;
    bool found;
    const dr_run_plan *p = &r->plan;
    int rc = dr_checkpoint_load(r->cfg->model_dir, &c, &found, err);
    if (rc || !found) return rc;
    memset(&now, 0, sizeof now);
    dr_plan_checkpoint_settings(&r->plan, &now);
    rc = dr_checkpoint_check(&c, r->cfg->model_dir, p->exp.name, p->P, p->nslots, (int)p->exp.optimizer.kind,
                             r->cfg->seed, p->G, r->data.n, err);
    if (!rc) rc = dr_checkpoint_check_settings(&c, r->cfg->model_dir, &now, err);
    if (!rc && r->cfg->train_steps && r->cfg->train_steps < c.step)
        rc = dr_fail(err, DR_EUSAGE, "--train_steps=%llu: the checkpoint in %s is already at step %llu; give at "
                     "least %llu to continue it, or another --model_dir", (unsigned long long)r->cfg->train_steps,
                     r->cfg->model_dir, (unsigned long long)c.step, (unsigned long long)c.step);
    /* (a run that finished its epochs saved epoch = epochs, position 0) */
    if (!rc && !r->cfg->train_steps && (c.epoch > p->epochs || (c.epoch == p->epochs && c.position > 0)))
        rc = dr_fail(err, DR_EUSAGE, "--epochs=%u: the checkpoint in %s has trained %u epochs; give at least %u to "
                     "continue it, or another --model_dir", p->epochs, r->cfg->model_dir, c.epoch, c.epoch + 1);
    if (!rc && dr_dist_iter_seek(&r->it, c.epoch, c.position, c.step, err) != DR_OK) {
        dr_fail_wrap(err, "checkpoint %s/ckpt.bin: data position is invalid, nothing was loaded", r->cfg->model_dir);
        rc = err->code = DR_EFORMAT;
    }
    if (!rc) rc = r->v->set_variables(r->s, c.params, c.slots, err);
    if (!rc && c.mixed_dtype != DR_DTYPE_F32) rc = restore_loss_scale(r, &c, err);
    if (!rc) {
        r->step = r->start_step = c.step;
        r->epoch_correct = c.epoch_correct;
        r->epoch_examples = c.epoch_examples;
        r->counted_epoch = c.position > 0 ? c.epoch : UINT32_MAX;   /* at a boundary: the epoch before's */
        memcpy(&r->last_loss, &c.last_loss_bits, sizeof r->last_loss);
    }
    dr_checkpoint_free(&c);
    return rc;
}

/* --trajectory: this step, if the spec wants it (checkpoint: one is written now). */
static int record(run *r, bool checkpoint, dr_err *err)
{
    if (!r->traj.on || !dr_traj_spec_wants(&r->traj.spec, r->step, checkpoint)) return DR_OK;
    return traj_rec_step(&r->traj, r->s, r->v, r->step, &r->last_loss, r->params, r->slots, err);
}

static int save(run *r, dr_err *err)
{
    dr_checkpoint c;
    int rc;
    if (!chief(r)) return DR_OK;
    if ((rc = record(r, true, err))) return rc;
    if ((rc = r->v->get_variables(r->s, r->params, r->slots, err))) return rc;
    memset(&c, 0, sizeof c);
    snprintf(c.experiment, sizeof c.experiment, "%s", r->plan.exp.name);
    c.seed = r->cfg->seed;
    c.global_batch = r->plan.G;
    c.optimizer = (uint32_t)r->plan.exp.optimizer.kind;
    c.step = r->step;
    c.examples = r->data.n;
    c.epoch = r->it.epoch;
    c.position = r->it.position;
    c.epoch_correct = r->epoch_correct;
    c.epoch_examples = r->epoch_examples;
    memcpy(&c.last_loss_bits, &r->last_loss, sizeof c.last_loss_bits);
    dr_plan_checkpoint_settings(&r->plan, &c);
    if (c.mixed_dtype != DR_DTYPE_F32) {   /* the loss scale's state */
        dr_loss_scale ls;
        if (!r->v->get_loss_scale)
            return dr_fail(err, DR_EUNSUPPORTED, "not supported: a checkpoint of a mixed-precision run under "
                           "--variant=%s: it cannot report the loss scale", r->v->name);
        if ((rc = r->v->get_loss_scale(r->s, &ls, err))) return rc;
        c.ls_scale = ls.scale;
        c.ls_counter = ls.counter;
        c.ls_skipped = ls.skipped;
    }
    c.nparams = (uint32_t)r->plan.P;
    c.nslots = (uint32_t)r->plan.nslots;
    c.params = r->params;
    c.slots = r->slots;
    if ((rc = dr_run_log_save(&r->log, &c, err))) return rc;
    return traj_rec_flush(&r->traj, err);   /* the index never names a step past the checkpoint */
}

static bool more_steps(const run *r)
{
    if (r->cfg->train_steps) return r->step < r->cfg->train_steps;
    return r->it.epoch < r->plan.epochs;
}

static int loop(run *r, dr_err *err)
{
    dr_dist_batch batch;
    int rc = DR_OK;
    while (rc == DR_OK && more_steps(r)) {
        dr_step_report rep;
        if (!dr_dist_iter_next(&r->it, &batch)) {
            dr_dist_iter_next_epoch(&r->it);
            if (more_steps(r)) r->epoch_correct = r->epoch_examples = 0;   /* keep the last epoch's */
            continue;
        }
        memset(&rep, 0, sizeof rep);
        dr_mpi_last_words_step(r->step + 1);   /* (a no-op unless under mpi) */
        if ((rc = r->v->step(r->s, &batch, r->step + 1, &rep, err))) break;
        r->step++;
        r->last_loss = rep.loss;
        if (batch.epoch != r->counted_epoch) {   /* a new epoch's first step (also right after a resume) */
            r->epoch_correct = r->epoch_examples = 0;
            r->counted_epoch = batch.epoch;
        }
        r->epoch_correct += rep.correct;
        r->epoch_examples += rep.count;
        rc = dr_run_log_step(&r->log, r->step, batch.epoch, &rep, err);
        if (rc == DR_OK && chief(r)) rc = record(r, false, err);
        if (rc == DR_OK && r->cfg->checkpoint_every && r->step % r->cfg->checkpoint_every == 0) rc = save(r, err);
        dr_run_log_progress(&r->log, r->step, r->it.epoch, r->plan.epochs, r->last_loss);
        if (rc == DR_OK && r->cfg->stop && *r->cfg->stop &&   /* SIGINT/SIGTERM: checkpoint and stop, */
            (r->cfg->gradient_accumulation_steps <= 1 || r->step % r->cfg->gradient_accumulation_steps == 0)) {
            /* on an update: accumulated micro-batches are not in a checkpoint */
            if ((rc = save(r, err)) == DR_OK)
                rc = dr_fail(err, DR_EINTERRUPTED, "stopped by signal %d after step %llu; checkpoint %s/ckpt.bin "
                             "(the same command resumes it)", (int)*r->cfg->stop, (unsigned long long)r->step,
                             r->cfg->model_dir);
            return rc;
        }
    }
    /* a finished run resumed: nothing trained, nothing to write */
    if (rc == DR_OK && r->step != r->start_step) rc = save(r, err);
    return rc;
}

/* A finished run run again: nothing ran, and nothing is reported as if
 * computed now. Only a summary.json that a crash kept from being written is
 * written (from the checkpoint). */
static bool nothing_ran(const run *r)
{
    return r->step == r->start_step && r->start_step > 0;
}

static bool has_summary(const run *r)
{
    char path[1100];
    struct stat sb;
    snprintf(path, sizeof path, "%s/summary.json", r->cfg->model_dir);
    return stat(path, &sb) == 0;
}

static int finish(run *r, dr_run_result *res, dr_err *err)
{
    const dr_strategy *st = r->v->strategy(r->s);
    json_object *o, *tpu;
    char num[32];
    uint32_t bits;
    int rc;
    memset(res, 0, sizeof *res);
    res->already_complete = nothing_ran(r);
    res->resumed_step = r->start_step;
    snprintf(res->topology, sizeof res->topology, "%s", r->topology);
    snprintf(res->previous, sizeof res->previous, "%s", r->previous);
    res->steps = r->step;
    if (res->already_complete && has_summary(r)) return DR_OK;
    o = json_object_new_object();
    if ((rc = r->v->get_variables(r->s, r->params, r->slots, err))) { json_object_put(o); return rc; }
    res->steps = r->step;
    res->loss = r->last_loss;
    res->accuracy = r->epoch_examples ? (float)r->epoch_correct / (float)r->epoch_examples : 0.0f;
    res->examples = r->epoch_examples;
    res->seconds = dr_now() - r->log.t_start;
    dr_weights_sha256(r->params, r->plan.P, res->weights_sha256);
    memcpy(&bits, &res->loss, sizeof bits);
    json_object_object_add(o, "experiment", json_object_new_string(r->plan.exp.name));
    json_object_object_add(o, "variant", json_object_new_string(r->v->name));
    json_object_object_add(o, "numerics", json_object_new_string(r->plan.exact ? "exact" : "fast"));
    json_object_object_add(o, "distribution_strategy", json_object_new_string(dr_strategy_kind_name(st->spec.kind)));
    json_object_object_add(o, "num_replicas_in_sync", json_object_new_int((int)st->num_replicas));
    json_object_object_add(o, "num_workers", json_object_new_int((int)st->num_workers));
    json_object_object_add(o, "cross_device_op", json_object_new_string(dr_cross_device_op_name(st->spec.cross_device_op)));
    json_object_object_add(o, "num_packs", json_object_new_int(st->spec.num_packs));
    json_object_object_add(o, "global_batch_size", json_object_new_int((int)r->plan.G));
    json_object_object_add(o, "steps", json_object_new_int64((int64_t)r->step));
    json_object_object_add(o, "final_loss", json_object_new_double_s((double)res->loss, dr_json_float(res->loss, num, sizeof num)));
    snprintf(num, sizeof num, "0x%08x", bits);
    json_object_object_add(o, "final_loss_bits", json_object_new_string(num));
    json_object_object_add(o, "train_accuracy_last_epoch", json_object_new_double((double)res->accuracy));
    json_object_object_add(o, "weights_sha256", json_object_new_string(res->weights_sha256));
    json_object_object_add(o, "wall_seconds", json_object_new_double(res->seconds));
    json_object_object_add(o, "segments", dr_run_log_segments(&r->log));
    r->v->summarize(r->s, o);
    if (json_object_object_get_ex(o, "tpu", &tpu)) {
        json_object *t;
        if (json_object_object_get_ex(tpu, "emulated_seconds_total", &t)) res->emulated_seconds = json_object_get_double(t);
    }
    if (!chief(r)) { json_object_put(o); return DR_OK; }
    return dr_run_log_summary(&r->log, o, err);
}

/* Why a step's examples depend on the number of workers (NULL: they do not).
 * DATA (and AUTO on in-memory data or one file: DATA for W > 1) cuts the
 * one global batch of G into slices; OFF, FILE and HINT fill each worker's
 * own stream by batch_sizes_for_worker, and a dataset_fn shards the epoch
 * over the workers (docs/SEMANTICS.md §6): other examples for another W. */
static const char *by_workers(const run *r)
{
    const char *pol = r->cfg->auto_shard_policy;
    if (r->plan.from_function)
        return "--input_mode=function shards the epoch over the workers, so a step's examples depend on their number";
    if (strcmp(pol, "data") == 0 || (strcmp(pol, "auto") == 0 && r->plan.shard_files < 2)) return NULL;
    return strcmp(pol, "auto") == 0 ? "--auto_shard_policy=auto is FILE over these shard files: each worker streams "
                                      "its own files, so a step's examples depend on the number of workers"
                                    : "--auto_shard_policy=off|file|hint gives each worker its own stream, so a "
                                      "step's examples depend on the number of workers";
}

/* The directory's last segment against this run's (segment.h); step: the
 * checkpoint's. Sets r->previous when the run goes on under another one. */
static int check_segment(run *r, uint64_t step, bool finished, dr_err *err)
{
    char prev[sizeof r->log.segment];
    bool changed;
    int rc;
    const char *by_replicas = r->plan.divide_locally ? "--loss_reduction=tf_default divides each replica's loss by "
                              "its own examples, so the bits depend on the replica count" : NULL;
    if (step == 0 || !dr_run_log_last_segment(&r->log, prev, sizeof prev)) return DR_OK;
    rc = dr_segment_check(prev, r->log.segment, finished, step, r->cfg->model_dir, by_replicas, by_workers(r),
                          &changed, err);
    if (rc == DR_OK && changed) dr_segment_words(prev, r->previous, sizeof r->previous);
    return rc;
}

/* parameter_server resumes inside its own train: its checkpoint's step is
 * read here, and its metrics.jsonl is not trimmed yet (a segment marker past
 * the checkpoint is possible only after a crash between the two renames;
 * parameter_server refuses every change of topology either way). */
static int ps_segment(run *r, dr_err *err)
{
    dr_checkpoint c;
    bool found;
    int rc = dr_checkpoint_load(r->cfg->model_dir, &c, &found, err);
    if (rc || !found) return rc;
    dr_checkpoint_free(&c);
    return check_segment(r, c.step, false, err);
}

/* parameter_server's coordinator schedules its own steps (variant.h). */
static bool self_scheduled(const run *r)
{
    return r->v->train && r->plan.spec.kind == DR_STRATEGY_PARAMETER_SERVER;
}

/* TF_CONFIG's evaluator is a side-car that evaluates the chief's
 * checkpoints (multi_worker_util: it is not in the worker count); it never
 * trains. */
static int not_evaluator(const dr_run_config *cfg, dr_err *err)
{
    dr_cluster cl;
    bool evaluator;
    int rc = dr_cluster_parse(cfg->tf_config, &cl, err);
    if (rc) return rc;
    evaluator = cl.has_task && cl.task_type == DR_TASK_EVALUATOR;
    dr_cluster_free(&cl);
    if (evaluator)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task.type is 'evaluator', which does not train (it evaluates "
                       "the chief's checkpoints): run `distref evaluate` as this task, or give it a chief or "
                       "worker task");
    return DR_OK;
}

/* The worker this process is: a process of a launcher-started variant (mpi)
 * is one worker, its TF_CONFIG task; any other emulates every worker
 * (DR_SHARDS_ALL) and reads every shard file. */
static uint32_t own_worker(const dr_variant *v, const dr_run_config *cfg)
{
    dr_cluster cl;
    dr_err e2;
    uint32_t w = DR_SHARDS_ALL;
    if (v->launcher[0] && dr_cluster_parse(cfg->tf_config, &cl, &e2) == DR_OK) {
        if (cl.has_task) w = dr_cluster_id_in_cluster(&cl);
        dr_cluster_free(&cl);
    }
    return w;
}

/* The training set; from --dataset_shards, what this process read, on
 * stderr. */
static int load_training_set(run *r, dr_err *err)
{
    dr_shard_reads rd;
    char who[64];
    uint32_t w = own_worker(r->v, r->cfg);
    int rc;
    if ((rc = dr_load_training_set(&r->plan, w, &r->data, &rd, err)) || !r->cfg->dataset_shards[0]) return rc;
    if (w == DR_SHARDS_ALL) snprintf(who, sizeof who, "this process (every worker)");
    else snprintf(who, sizeof who, "worker %u of %u", w, r->plan.num_workers);
    /* one write, so that the ranks' lines do not interleave */
    fprintf(stderr, "shards: %s read %llu bytes from %u of %u shard files (%s) under %s, and %llu bytes of "
            DR_SHARDS_INDEX "\n", who, (unsigned long long)rd.data_bytes, rd.files_read, rd.files, rd.list,
            r->plan.file_sharded ? "file" : r->plan.shard_data ? "data" : r->plan.unsharded ? "off" : "one stream",
            (unsigned long long)rd.index_bytes);
    return DR_OK;
}

/* --dropout_masks: the file loaded and held against the run (its model, G
 * and every step it trains), before the variant's first step reads it
 * through the plan. A row of the file is a row of the step's global batch:
 * on one worker replica r's rows are rows off[r].. of it, under every split
 * (DATA's ceil(B/R) slices, or in order); over W > 1 workers DATA cuts the
 * same global batch into W*R slices (replica r of worker w: slice r*W + w,
 * whose rows it reads: dr_shard_data_row), the rows one worker at the same
 * W*R reads. OFF, FILE, HINT and --input_mode=function give each worker its
 * own stream: no global batch, refused. */
static int open_dropout_masks(run *r, const dr_strategy *st, dr_err *err)
{
    const dr_run_config *cfg = r->cfg;
    uint64_t steps = cfg->train_steps;
    int rc;
    if (!cfg->dropout_masks[0]) return DR_OK;
    if (st->num_workers > 1 && !r->plan.shard_data) {
        char how[96];
        if (r->plan.from_function) snprintf(how, sizeof how, "--input_mode=function");
        else snprintf(how, sizeof how, "--auto_shard_policy=%s%s", cfg->auto_shard_policy,
                      strcmp(cfg->auto_shard_policy, "auto") == 0 ? " (file here: the input's shard files)" : "");
        return dr_fail(err, DR_EUSAGE, "--dropout_masks=%s with %u workers and %s: not supported: each worker reads "
                       "its own stream, so a step has no one global batch whose rows the file's are "
                       "(--auto_shard_policy=data cuts one global batch over the workers; docs/MODELS.md)",
                       cfg->dropout_masks, st->num_workers, how);
    }
    if (!steps) {
        uint32_t n = r->data.n, G = r->plan.G;
        steps = (uint64_t)r->plan.epochs * (cfg->drop_remainder ? n / G : (n + G - 1) / G);
    }
    if ((rc = dr_dropout_masks_load(cfg->dropout_masks, &r->masks, err)) ||
        (rc = dr_dropout_masks_check(&r->masks, &r->plan.exp.model, r->plan.G, steps, cfg->dropout_masks, err)))
        return rc;
    r->plan.dropout_masks = &r->masks;
    return DR_OK;
}

static int open_run(run *r, dr_err *err)
{
    const dr_run_config *cfg = r->cfg;
    const dr_strategy *st;
    int rc;
    if ((rc = not_evaluator(cfg, err)) || (rc = dr_variant_lookup(cfg->variant, &r->v, err)) || (rc = dr_run_plan_make(cfg, &r->plan, err)) ||
        (rc = r->v->supports(&r->plan, err)) ||
        (rc = load_training_set(r, err)))
        return rc;
    if (cfg->drop_remainder && r->data.n < r->plan.G)
        return dr_fail(err, DR_EUSAGE, "--drop_remainder with --global_batch_size=%u: the training set has only "
                       "%u examples, so every batch would be dropped", r->plan.G, r->data.n);
    r->params = malloc(r->plan.P * sizeof(float) + 1);
    r->slots = malloc(r->plan.P * (size_t)r->plan.nslots * sizeof(float) + 1);
    if (!r->params || !r->slots) return dr_fail(err, DR_ENOMEM, "out of host memory for the variables");
    /* The lock (harness/run_lock.h): an existing model_dir's before anything
     * is read from it; a new one's once the variant accepted the run, so
     * that a refused run leaves no directory, and before the first write. */
    if ((rc = dr_run_lock(cfg, false, &r->lock, err)) || (rc = r->v->open(&r->plan, &r->data, &r->s, err)) ||
        (rc = open_dropout_masks(r, r->v->strategy(r->s), err)) ||
        (!dr_run_locked(&r->lock) && (rc = dr_run_lock(cfg, true, &r->lock, err))) ||
        (rc = dr_run_log_open_as(&r->log, cfg, chief(r), err))) return rc;
    r->log.learning_rate = r->plan.exp.optimizer.lr;
    r->log.schedule = &r->plan.exp.optimizer.schedule;   /* TensorBoard's learning_rate: the step's scheduled rate */
    r->log.accuracy = r->plan.exp.model.loss != DR_LOSS_MSE;
    st = r->v->strategy(r->s);
    {
        char seg[sizeof r->log.segment];
        dr_segment_of(st, r->v->name, r->plan.exact, seg, sizeof seg, r->topology, sizeof r->topology);
        dr_run_log_set_segment(&r->log, seg);
    }
    if (self_scheduled(r)) return ps_segment(r, err);   /* it iterates its own input */
    /* DATA sharding arranges each global batch itself: the iterator only batches. */
    if ((rc = dr_dist_iter_init(&r->it, r->data.n, r->plan.G, r->plan.shard_data ? 1 : st->num_replicas,
                                cfg->seed, cfg->shuffle, cfg->drop_remainder, err)))
        return rc;
    r->it_open = true;
    if (r->plan.from_function) rc = dr_dist_iter_from_function(&r->it, st->num_workers ? st->num_workers : 1, err);
    else if (r->plan.file_sharded) rc = dr_shards_iter(cfg->dataset_shards, &r->it, st->num_workers, err);
    else if (r->plan.unsharded) rc = dr_dist_iter_unsharded(&r->it, st->num_workers, err);
    if (rc) return rc;
    if ((rc = resume(r, err))) return rc;
    dr_run_log_trim(&r->log, r->step);
    if ((rc = check_segment(r, r->start_step, !more_steps(r), err))) return rc;
    if (chief(r) && (rc = traj_rec_open(&r->traj, cfg, &r->plan, r->v, r->start_step, err))) return rc;
    return r->start_step == 0 ? record(r, false, err) : DR_OK;   /* step 0: the initial variables */
}

static void close_run(run *r)
{
    if (r->s) r->v->close(r->s);
    if (r->it_open) dr_dist_iter_free(&r->it);
    dr_run_log_free(&r->log);
    traj_rec_close(&r->traj);
    dr_dataset_free(&r->data);
    dr_dropout_masks_free(&r->masks);
    free(r->params);
    free(r->slots);
    dr_run_unlock(&r->lock);
}

int dr_run_check_supported(const dr_run_config *cfg, dr_err *err)
{
    const dr_variant *v;
    dr_run_plan plan;
    int rc = dr_variant_lookup(cfg->variant, &v, err);
    if (!rc) rc = dr_run_plan_make(cfg, &plan, err);
    if (!rc) rc = v->supports(&plan, err);
    /* this process's shard files exist with the index's sizes: under mpirun
     * before the ranks agree to start, so that a missing one ends every rank */
    if (!rc && cfg->dataset_shards[0])
        rc = dr_shards_check(cfg->dataset_shards, plan.num_workers, plan.file_sharded ? own_worker(v, cfg) : DR_SHARDS_ALL,
                             err);
    if (rc == DR_EUNSUPPORTED) rc = err->code = DR_EUSAGE;   /* a combination of flags no variant runs */
    return rc;
}

int dr_run_train(const dr_run_config *cfg, dr_run_result *res, dr_err *err)
{
    run *r = calloc(1, sizeof *r);
    int rc;
    if (!r) return dr_fail(err, DR_ENOMEM, "out of host memory for the run");
    r->cfg = cfg;
    r->lock.fd = -1;
    rc = open_run(r, err);
    if (rc == DR_OK && self_scheduled(r)) {
        dr_train_totals tot;
        memset(&tot, 0, sizeof tot);
        rc = r->v->train(r->s, &r->log, &tot, err);
        r->step = tot.steps;
        r->start_step = tot.start_step;
        r->last_loss = tot.last_loss;
        r->epoch_correct = tot.epoch_correct;
        r->epoch_examples = tot.epoch_examples;
        if (rc == DR_OK) rc = finish(r, res, err);
        if (rc == DR_OK) res->peer_lost = tot.peer_lost;
    } else if (rc == DR_OK) {
        rc = loop(r, err);
        if (rc == DR_OK) rc = finish(r, res, err);
    }
    close_run(r);
    free(r);
    return rc;
}
