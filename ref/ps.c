/* distref reference — parameter_server: the strategy's devices and the
 * training program, written the way TensorFlow's parameter-server tutorial
 * writes it: a coordinator, per-worker datasets, a step function scheduled
 * N times, a join (and a checkpoint) every --checkpoint_every steps.
 *
 * One scheduled step function, on worker w: the next batch of w's own
 * shard of the data; the exact sum of its losses and gradients on the
 * variables w read (dr_acc), plus count * the regularization, rounded once
 * over count: exactly what one_device computes for a step of R = 1 (the
 * shared pieces dr_trainer_scale_share and the divisor count). When it
 * lands, the ps tasks apply it as optimizer step version + 1 (the
 * learning-rate schedule at iterations = version, as the optimizer's
 * iterations variable on a ps task counts applied updates; clipping, if
 * asked, on the worker's whole gradient before it travels). With one
 * worker the schedule is sequential, the data order is one_device's, and
 * so are the bits.
 */
#include "distref/ps.h"
#include "distref/checkpoint.h"
#include "distref/cluster.h"
#include "distref/fileio.h"
#include "ref/trainer.h"
#include "ref/graph.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the strategy ------------------------------------------------------- */

/* ---- the run's state ---------------------------------------------------- */

typedef struct ps_worker {
    replica   rp;            /* its buffers, on its CPU; rp.params is the copy it read */
    uint32_t *ids;           /* the batch of the closure it runs (G ids) */
    uint32_t  count, used;   /* its examples, and how many it trained on */
    uint32_t  epoch, position, pass_size;   /* its iterator after that batch */
} ps_worker;

struct ps_run {
    trainer         t;        /* the shared pieces: plan, data, strategy, variables */
    dr_run_log     *log;      /* the harness's metrics.jsonl and checkpoints */
    uint64_t        epoch_correct, epoch_examples;
    float           last_loss;
    uint32_t        W, P;
    dr_partitioner  part;
    dr_coordinator_options copt;
    dr_coordinator *coord;
    dr_per_worker_dataset *ds;
    ps_worker       wk[DR_PS_MAX_WORKERS];
    uint64_t        N;        /* step functions this run schedules */
    uint64_t        resumed;  /* the checkpoint's step (0: fresh) */
    uint64_t        saved;    /* the last checkpoint in model_dir */
    bool            have_ckpt;
    uint32_t        acc_epoch;
    uint64_t        lost_closure;   /* the closure a failed worker lost, until it lands */
    uint32_t        lost_worker;
    dr_ps_event    *replay;         /* --replay_schedule's events */
    size_t          nreplay;
    size_t          T;              /* trainable floats; the batch-norm state follows */
    float          *increments;     /* a graph step's moving-statistics increments (P - T) */
};

/* ---- setup -------------------------------------------------------------- */

static int cluster(ps_run *r, dr_err *err)
{
    const dr_run_config *cfg = r->t.cfg;
    dr_cluster cl;
    uint32_t W, P;
    int rc;
    const char *tf = cfg->tf_config ? cfg->tf_config : "", *blank = tf + strspn(tf, " \t\r\n");
    if (!blank[0] || strcmp(blank, "{}") == 0)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: parameter_server needs a cluster with at least one 'worker' "
                       "and one 'ps' task, e.g. {\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w:1\"],"
                       "\"ps\":[\"p:1\"]},\"task\":{\"type\":\"chief\",\"index\":0}}; it is empty");
    if ((rc = dr_cluster_parse(cfg->tf_config, &cl, err))) return rc;
    rc = dr_cluster_check(&cl, DR_STRATEGY_PARAMETER_SERVER, err);
    W = cl.job[DR_TASK_WORKER].n;
    P = cl.job[DR_TASK_PS].n;
    dr_cluster_free(&cl);
    if (rc) return rc;
    /* r->W bounds every walk of r->wk[] (close_run's included): it is set
     * only once it fits the array */
    if (W > DR_PS_MAX_WORKERS)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: %u workers; distref emulates at most %d", W, DR_PS_MAX_WORKERS);
    r->W = W;
    r->P = P;
    return DR_OK;
}

/* train_steps, or the epochs one_device would run: ceil(n/G) steps each
 * (floor with drop_remainder). */
static uint64_t total_steps(const trainer *t)
{
    uint64_t per = t->cfg->drop_remainder ? t->data->n / t->G : (t->data->n + t->G - 1) / t->G;
    return t->cfg->train_steps ? t->cfg->train_steps : (uint64_t)t->plan->epochs * per;
}

static int flags(ps_run *r, dr_err *err)
{
    const dr_run_config *cfg = r->t.cfg;
    dr_coordinator_options *o = &r->copt;
    int rc;
    memset(o, 0, sizeof *o);
    o->staleness = cfg->staleness;
    o->schedule_seed = cfg->schedule_seed;
    if ((rc = dr_partitioner_parse(cfg->ps_partitioner, &r->part, err)) ||
        (rc = dr_ps_parse_failures(cfg->fail_worker, cfg->fail_ps, r->W, r->P, r->N, &o->fail_worker,
                                   &o->fail_worker_step, &o->fail_ps, &o->fail_ps_step, err)))
        return rc;
    o->partitioner = r->part;
    if (cfg->replay_schedule[0]) {   /* a recorded schedule (an MPI run's free one) instead of the seed */
        if (o->fail_worker_step)
            return dr_fail(err, DR_EUSAGE, "--replay_schedule with --fail_worker: a recorded schedule has no "
                           "failures to inject");
        if ((rc = dr_ps_schedule_load(cfg->replay_schedule, &r->replay, &r->nreplay, err))) return rc;
        o->replay = r->replay;
        o->replay_len = r->nreplay;
        o->replay_name = cfg->replay_schedule;
    }
    return DR_OK;
}

/* What decides the plan a resumed run replays (model_dir/ps_schedule.json,
 * core: dr_ps_settings_line): a rerun with other settings would replay
 * another plan and continue from data positions that were never reached,
 * so it is refused. */
static int check_schedule(const ps_run *r, uint64_t step, dr_err *err)
{
    bool absent = false;
    int rc = dr_ps_settings_check(r->t.cfg, r->W, r->P, step, &absent, err);
    if (rc || !absent) return rc;
    /* Another strategy's checkpoint: with one worker and no failure the
     * plan is sequential whatever the seed and staleness. */
    if (r->W == 1 && !r->t.cfg->fail_worker[0]) return DR_OK;
    return dr_fail(err, DR_EFORMAT, "checkpoint %s/ckpt.bin has no ps_schedule.json beside it: it was not "
                   "written by a parameter_server run, and one with %u workers%s resumes only its own "
                   "checkpoints; use another --model_dir", r->t.cfg->model_dir, r->W,
                   r->t.cfg->fail_worker[0] ? " or a --fail_worker" : "");
}

/* The checkpoint's variables and step. The data positions are not read
 * from it: the coordinator replays the plan up to its step. */
static int resume(ps_run *r, dr_err *err)
{
    trainer *t = &r->t;
    dr_checkpoint c, now;
    bool found;
    int rc = dr_checkpoint_load(t->cfg->model_dir, &c, &found, err);
    if (rc || !found) return rc;
    memset(&now, 0, sizeof now);
    dr_plan_checkpoint_settings(t->plan, &now);
    rc = dr_checkpoint_check(&c, t->cfg->model_dir, t->exp.name, t->P, t->nslots, (int)t->exp.optimizer.kind,
                             t->cfg->seed, t->G, t->data->n, err);
    if (!rc) rc = dr_checkpoint_check_settings(&c, t->cfg->model_dir, &now, err);
    if (!rc && c.step > r->N)
        rc = dr_fail(err, DR_EFORMAT, "checkpoint %s/ckpt.bin: step %llu is past this run's %llu steps; "
                     "use another --model_dir or more steps", t->cfg->model_dir, (unsigned long long)c.step,
                     (unsigned long long)r->N);
    if (!rc) rc = check_schedule(r, c.step, err);
    if (!rc) {
        memcpy(t->var, c.params, t->P * sizeof(float));
        memcpy(t->var_slots, c.slots, t->P * t->nslots * sizeof(float));
        t->step = r->resumed = r->saved = c.step;
        r->have_ckpt = true;
        r->epoch_correct = c.epoch_correct;   /* what a finished run reports; a resume continues them */
        r->epoch_examples = c.epoch_examples;
        /* the epoch they count: the checkpoint's, or the one before when
         * save() moved a shard's short end to the next epoch's start */
        r->acc_epoch = c.position == 0 && c.step > 0 && c.epoch > 0 ? c.epoch - 1 : c.epoch;
        memcpy(&r->last_loss, &c.last_loss_bits, sizeof r->last_loss);
    }
    dr_checkpoint_free(&c);
    return rc;
}

static int alloc_workers(ps_run *r, dr_err *err)
{
    trainer *t = &r->t;
    size_t f = t->data->features;
    int rc = DR_OK;
    if (!(r->increments = malloc((t->P - r->T) * sizeof *r->increments + 4)))
        return dr_fail(err, DR_ENOMEM, "no memory for the batch-norm increments");
    for (uint32_t w = 0; rc == DR_OK && w < r->W; w++) {
        ps_worker *k = &r->wk[w];
        dr_device *d = &t->strat.device[dr_ps_worker_device(w)];
        k->rp.dev = d;
        if (!(k->ids = malloc((size_t)t->G * sizeof *k->ids))) return dr_fail(err, DR_ENOMEM, "no memory for a batch");
        rc = dr_device_alloc(d, t->P * sizeof(dr_acc), (void **)&k->rp.grad, err);
        if (!rc) rc = dr_device_alloc(d, (size_t)t->G * f * sizeof(float), (void **)&k->rp.x, err);
        if (!rc && t->data->labels) rc = dr_device_alloc(d, t->G, (void **)&k->rp.labels, err);
        if (!rc && t->data->targets) rc = dr_device_alloc(d, (size_t)t->G * sizeof(float), (void **)&k->rp.targets, err);
        if (!rc) rc = dr_work_init(&k->rp.work, &t->exp.model, t->G, err);
    }
    return rc;
}

/* ---- the per-worker dataset and the step function ----------------------- */

/* dataset_fn(input_context): shard input_pipeline_id of num_input_pipelines
 * (examples w, w + W, ...), shuffled per epoch with the run's seed, the
 * short final batch dropped with --drop_remainder. With W = 1 this is
 * exactly one_device's order. */
static int shard_fn(const dr_input_context *ctx, uint32_t epoch, void *user,
                    uint32_t **ids, uint32_t *n_ids, dr_err *err)
{
    const trainer *t = user;
    uint32_t W = ctx->num_input_pipelines, w = ctx->input_pipeline_id;
    uint32_t n = t->data->n / W + (w < t->data->n % W ? 1 : 0);
    uint32_t *order = malloc((size_t)n * sizeof *order + 4);
    if (!order) return dr_fail(err, DR_ENOMEM, "dataset_fn: no memory for %u ids", n);
    dr_epoch_order(n, t->cfg->seed, epoch, t->cfg->shuffle, order);
    for (uint32_t i = 0; i < n; i++) order[i] = w + W * order[i];
    if (t->cfg->drop_remainder) n -= n % t->G;
    if (n == 0 && t->cfg->drop_remainder)
        return free(order), dr_fail(err, DR_EUSAGE, "--drop_remainder: worker %u's shard of the data "
                                    "holds fewer than --global_batch_size=%u examples", w, t->G);
    *ids = order;
    *n_ids = n;
    return DR_OK;
}

/* A model beyond Dense: one_device's graph step at R = 1 on the worker's
 * batch (BatchNormalization's statistics over that batch, --batch_norm's
 * formula as one_device has it; Dropout keyed by the closure's index, the
 * step one_device runs when W = 1, and the global example ids). The moving
 * statistics are not written here: run from a state of -0 (the additive
 * identity, so -0 * momentum + x is exactly x), the graph's moving update
 * leaves the increments (1 - momentum) * statistic in r->increments, which
 * travel in the moving statistics' gradient slots to the ps (ps_step). */
static void graph_share(ps_run *r, ps_worker *k, const dr_worker_ctx *ctx, uint32_t n)
{
    trainer *t = &r->t;
    replica *rp = &k->rp;
    dr_graph_ctx g = { &t->exp.model, t->ops, true, !t->plan->bn_replica, t->cfg->seed, ctx->closure,
                       r->increments, NULL, NULL, NULL, DR_DTYPE_F32, 0.0f, 0 };
    dr_graph_replica e = { rp->params, rp->x, rp->labels, rp->targets, k->ids, n, &rp->work, &rp->loss,
                           rp->grad, &rp->correct, 0, 0 };
    for (size_t i = r->T; i < t->P; i++) r->increments[i - r->T] = -0.0f;
    memset(rp->grad, 0, t->P * sizeof *rp->grad);
    dr_acc_init(&rp->loss);
    rp->correct = 0;
    dr_graph_loss_grad(&g, &e, 1);
    dr_trainer_scale_share(t, rp, 1, t->den);
}

static int ps_step(const dr_worker_ctx *ctx, void *arg, float *result, dr_err *err)
{
    ps_run *r = arg;
    trainer *t = &r->t;
    ps_worker *k = &r->wk[ctx->worker];
    replica *rp = &k->rp;
    dr_worker_batch b;
    uint32_t n;
    int rc = dr_per_worker_dataset_next(r->ds, ctx, &b, err);
    if (rc) return rc;
    memcpy(k->ids, b.ids, b.count * sizeof *k->ids);
    k->epoch = b.epoch;
    k->position = b.position;
    k->pass_size = b.pass_size;
    if (ctx->replay) return DR_OK;
    /* as one_device's step with R = 1: the divisor D (G, or the count with
     * --loss_reduction=examples_in_step), the share with D * reg */
    t->count = n = b.count;
    t->den = dr_plan_divisor(t->plan, t->count);
    dr_dataset_gather(t->data, k->ids, n, rp->x, rp->labels, rp->targets);   /* its own pipeline, its own CPU */
    rp->params = (float *)ctx->variables;
    if (dr_model_is_dense(&t->exp.model)) dr_trainer_compute_share(t, rp, n, 1, t->den);
    else graph_share(r, k, ctx, n);
    dr_acc_round_array(rp->grad, t->P, t->den, ctx->gradient);
    /* clipping on the worker, over its whole gradient, before the variables'
     * shards travel: where apply_gradients inside the step function clips it */
    dr_optimizer_clip(&t->exp.optimizer, &t->exp.model, ctx->gradient, t->P);
    /* after the clip, which must not see them: the moving statistics' increments */
    if (t->P > r->T) memcpy(ctx->gradient + r->T, r->increments, (t->P - r->T) * sizeof(float));
    *result = dr_acc_round_div(&rp->loss, t->den);
    k->count = t->count;     /* what its metrics line will say when it lands */
    k->used = n;
    return DR_OK;
}

/* ---- metrics: one line per landed update --------------------------------- */

static int log_landing(ps_run *r, const dr_ps_event *ev, float loss, dr_err *err)
{
    trainer *t = &r->t;
    ps_worker *k = &r->wk[ev->worker];
    dr_step_report rep;
    int rc, len;
    memset(&rep, 0, sizeof rep);
    t->step = ev->version;
    rep.loss = loss;
    rep.count = k->count;
    rep.num_replicas = 1;
    rep.off[1] = k->used;
    rep.ids = k->ids;
    rep.correct = k->rp.correct;
    if (k->epoch > r->acc_epoch) {   /* accuracy of the last epoch, as one_device keeps it */
        r->acc_epoch = k->epoch;
        r->epoch_correct = r->epoch_examples = 0;
    }
    r->epoch_correct += k->rp.correct;
    r->epoch_examples += k->count;
    r->last_loss = loss;
    len = snprintf(rep.extra, sizeof rep.extra, ",\"closure\":%llu,\"worker\":%u,"
                   "\"read_version\":%llu,\"staleness\":%llu", (unsigned long long)ev->closure, ev->worker,
                   (unsigned long long)ev->read_version, (unsigned long long)ev->staleness);
    if (ev->closure == r->lost_closure) {
        snprintf(rep.extra + len, sizeof rep.extra - (size_t)len,
                 ",\"rerun_after_failure_of_worker\":%u", r->lost_worker);
        r->lost_closure = 0;
    }
    rc = dr_run_log_step(r->log, t->step, k->epoch, &rep, err);
    dr_run_log_progress(r->log, t->step, k->epoch, t->plan->epochs, loss);
    return rc;
}

static int on_event(const dr_ps_event *ev, float result, void *user, dr_err *err)
{
    ps_run *r = user;
    if (ev->kind == DR_PS_LAND) return log_landing(r, ev, result, err);
    if (ev->kind == DR_PS_FAIL) { r->lost_closure = ev->closure; r->lost_worker = ev->worker; }
    return DR_OK;
}

/* ---- checkpoints, summary ------------------------------------------------ */

/* At a join: nothing in flight. The checkpoint's data position is worker
 * 0's (one_device's with one worker, so either strategy can resume it);
 * parameter_server itself recomputes every worker's position by replay. */
static int save(ps_run *r, dr_err *err)
{
    trainer *t = &r->t;
    const ps_worker *k0 = &r->wk[0];
    dr_coordinator_stats st;
    int rc;
    dr_checkpoint c;
    dr_coordinator_get_stats(r->coord, &st);
    dr_coordinator_read_variables(r->coord, t->var, t->var_slots);
    t->step = st.version;
    memset(&c, 0, sizeof c);
    snprintf(c.experiment, sizeof c.experiment, "%s", t->exp.name);
    c.seed = t->cfg->seed;
    c.global_batch = t->G;
    c.optimizer = (uint32_t)t->exp.optimizer.kind;
    c.step = t->step;
    c.examples = t->data->n;
    c.epoch = k0->epoch;
    c.position = k0->position;
    if (k0->pass_size != t->data->n && k0->position == k0->pass_size && k0->position % t->G) {
        c.epoch++;   /* a shard's short end is no position of the whole set: the next epoch's start */
        c.position = 0;
    }
    c.epoch_correct = r->epoch_correct;
    c.epoch_examples = r->epoch_examples;
    memcpy(&c.last_loss_bits, &r->last_loss, sizeof c.last_loss_bits);
    dr_plan_checkpoint_settings(t->plan, &c);
    c.nparams = (uint32_t)t->P;
    c.nslots = (uint32_t)t->nslots;
    c.params = t->var;
    c.slots = t->var_slots;
    {   /* the plan's settings, committed with the checkpoint (written before its rename) */
        char settings[512];
        dr_ckpt_part part = { "ps_schedule.json", settings, 0 };
        part.len = dr_ps_settings_line(t->cfg, r->W, r->P, t->step, settings, sizeof settings);
        if ((rc = dr_run_log_commit(r->log, &c, &part, 1, err))) return rc;
    }
    r->saved = t->step;
    r->have_ckpt = true;
    return DR_OK;
}

static json_object *shards_json(const dr_ps_layout *l)
{
    json_object *a = json_object_new_array();
    for (uint32_t i = 0; i < l->num_shards; i++) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "variable", json_object_new_int((int)l->shard[i].variable));
        json_object_object_add(o, "part", json_object_new_int((int)l->shard[i].part));
        json_object_object_add(o, "ps_task", json_object_new_int((int)l->shard[i].ps_task));
        json_object_object_add(o, "floats", json_object_new_int64((int64_t)l->shard[i].length));
        json_object_array_add(a, o);
    }
    return a;
}

/* What parameter_server adds to summary.json. */
void dr_ps_summarize(ps_run *r, json_object *o)
{
    const dr_run_config *cfg = r->t.cfg;
    dr_coordinator_stats st;
    dr_coordinator_get_stats(r->coord, &st);
    json_object_object_add(o, "num_ps", json_object_new_int((int)r->P));
    json_object_object_add(o, "staleness_bound", json_object_new_int64((int64_t)cfg->staleness));
    json_object_object_add(o, "schedule_seed", json_object_new_int64((int64_t)cfg->schedule_seed));
    json_object_object_add(o, "ps_partitioner", json_object_new_string(cfg->ps_partitioner));
    json_object_object_add(o, "updates_applied", json_object_new_int64((int64_t)st.version));
    json_object_object_add(o, "worker_failures", json_object_new_int64((int64_t)st.worker_failures));
    json_object_object_add(o, "rerun_closures", json_object_new_int64((int64_t)st.rerun_closures));
    json_object_object_add(o, "worker_recoveries", json_object_new_int64((int64_t)st.recoveries));
    json_object_object_add(o, "max_staleness", json_object_new_int64((int64_t)st.max_staleness));
    json_object_object_add(o, "mean_staleness", json_object_new_double(st.version ? (double)st.staleness_sum / (double)st.version : 0.0));
    json_object_object_add(o, "variable_shards", shards_json(dr_coordinator_layout(r->coord)));
}

/* ---- the program --------------------------------------------------------- */

/* Closures are scheduled up to the next join: a multiple of
 * --checkpoint_every, the resumed step (a join of the run that wrote it) or
 * the end. */
static uint64_t next_join(const ps_run *r, uint64_t done)
{
    uint64_t E = r->t.cfg->checkpoint_every, next = E ? (done / E + 1) * E : r->N;
    if (r->resumed > done && r->resumed < next) next = r->resumed;
    return next < r->N ? next : r->N;
}

static int train_loop(ps_run *r, dr_err *err)
{
    uint64_t done = 0, E = r->t.cfg->checkpoint_every;
    const volatile sig_atomic_t *stop = r->t.cfg->stop;
    int rc = DR_OK;
    while (rc == DR_OK && done < r->N) {
        uint64_t until = next_join(r, done), id;
        bool joined = false;
        for (; rc == DR_OK && done < until; done++) rc = dr_coordinator_schedule(r->coord, ps_step, r, &id, err);
        /* the join, one event at a time: SIGINT/SIGTERM drops the closures
         * not dispatched yet and lets those in flight land */
        while (rc == DR_OK && !joined) {
            if (stop && *stop) dr_coordinator_cancel_queued(r->coord);
            rc = dr_coordinator_done(r->coord, &joined, err);
        }
        if (rc == DR_EFAULT && r->copt.fail_ps_step) return dr_ps_failure_stopped(err, r->t.cfg->model_dir, r->have_ckpt, r->saved);
        /* stopped: checkpoint there (a join, as --checkpoint_every makes one) */
        if (rc == DR_OK && stop && *stop && (rc = save(r, err)) == DR_OK && r->t.step < r->N)
            return dr_fail(err, DR_EINTERRUPTED, "stopped by signal %d after step %llu; checkpoint %s/ckpt.bin "
                           "(the same command resumes it)", (int)*stop, (unsigned long long)r->t.step,
                           r->t.cfg->model_dir);
        if (rc == DR_OK && E && done % E == 0 && done > r->resumed && done < r->N) rc = save(r, err);
    }
    return rc;
}

static int open_run(ps_run *r, const dr_run_plan *plan, const dr_dataset *data, dr_err *err)
{
    trainer *t = &r->t;
    const dr_run_config *cfg = plan->cfg;
    dr_strategy_spec spec = plan->spec;
    dr_strategy_options sopt = plan->sopt;
    dr_device *coord;
    int rc;
    t->plan = plan;
    t->cfg = cfg;
    t->exp = plan->exp;
    t->ops = dr_model_ops_ref();
    t->data = data;
    t->G = plan->G;
    t->P = plan->P;
    t->nslots = plan->nslots;
    r->T = dr_model_num_trainable(&t->exp.model);
    /* What other strategies read and this one would silently ignore. */
    if (cfg->input_partition_dims[0] || cfg->tpu_platform[0] || cfg->layer_devices[0])
        return dr_fail(err, DR_EUSAGE, "--%s: not with --distribution_strategy=parameter_server",
                       cfg->input_partition_dims[0] ? "input_partition_dims"
                       : cfg->tpu_platform[0] ? "tpu_platform" : "layer_devices");
    if ((rc = cluster(r, err))) return rc;
    r->N = total_steps(t);
    sopt.num_workers = r->W;
    sopt.num_ps = r->P;
    if ((rc = flags(r, err)) || (rc = dr_strategy_create(&spec, &sopt, &t->strat, err))) return rc;
    /* the coordinator's copy of the variables: initial values, checkpoints */
    coord = &t->strat.device[0];
    if ((rc = dr_device_alloc(coord, t->P * sizeof(float), (void **)&t->var, err)) ||
        (rc = dr_device_alloc(coord, t->P * t->nslots * sizeof(float) + 1, (void **)&t->var_slots, err)))
        return rc;
    dr_model_init(&t->exp.model, cfg->seed, t->var);
    if ((rc = resume(r, err))) return rc;
    return alloc_workers(r, err);
}

static int start_coordinator(ps_run *r, dr_err *err)
{
    dr_ps_variable vars[DR_PS_MAX_VARIABLES];
    uint32_t nvars = dr_ps_model_variables(&r->t.exp.model, vars);
    int rc;
    r->copt.replay_until = r->resumed;
    if (r->t.P > r->T) r->copt.moving_from = r->T;
    r->copt.on_event = on_event;
    r->copt.user = r;
    if ((rc = dr_coordinator_create(&r->t.strat, &r->copt, &r->coord, err)) ||
        (rc = dr_coordinator_create_variables(r->coord, vars, nvars, &r->t.exp.optimizer, r->t.var,
                                              r->t.var_slots, err)))
        return rc;
    return dr_coordinator_create_per_worker_dataset(r->coord, shard_fn, &r->t, r->t.G, &r->ds, err);
}

static void close_run(ps_run *r)
{
    trainer *t = &r->t;
    size_t f = t->data->features;
    dr_coordinator_free(r->coord);
    for (uint32_t w = 0; w < r->W; w++) {
        ps_worker *k = &r->wk[w];
        if (!k->rp.dev) continue;
        dr_device_free(k->rp.dev, k->rp.grad, t->P * sizeof(dr_acc));
        dr_device_free(k->rp.dev, k->rp.x, (size_t)t->G * f * sizeof(float));
        dr_device_free(k->rp.dev, k->rp.labels, t->G);
        dr_device_free(k->rp.dev, k->rp.targets, (size_t)t->G * sizeof(float));
        dr_work_free(&k->rp.work);
        free(k->ids);
    }
    if (t->var) {
        dr_device_free(&t->strat.device[0], t->var, t->P * sizeof(float));
        dr_device_free(&t->strat.device[0], t->var_slots, t->P * t->nslots * sizeof(float) + 1);
        t->var = t->var_slots = NULL;
    }
    dr_trainer_close(t);
}

int dr_ps_open(const dr_run_plan *plan, const dr_dataset *data, ps_run **out, dr_err *err)
{
    ps_run *r = calloc(1, sizeof *r);
    int rc;
    if (!r) return dr_fail(err, DR_ENOMEM, "parameter_server: no memory for the run");
    rc = open_run(r, plan, data, err);
    if (rc == DR_OK) rc = start_coordinator(r, err);
    if (rc) { dr_ps_close(r); return rc; }
    *out = r;
    return DR_OK;
}

int dr_ps_train(ps_run *r, dr_run_log *log, dr_train_totals *out, dr_err *err)
{
    int rc;
    r->log = log;
    dr_run_log_trim(log, r->resumed);
    rc = train_loop(r, err);
    if (rc == DR_OK && r->N != r->resumed) rc = save(r, err);   /* a finished run, run again: nothing to save */
    out->steps = r->N;
    out->start_step = r->resumed;
    out->last_loss = r->last_loss;
    out->epoch_correct = r->epoch_correct;
    out->epoch_examples = r->epoch_examples;
    return rc;
}

const dr_strategy *dr_ps_strategy(const ps_run *r) { return &r->t.strat; }

int dr_ps_variables(ps_run *r, float *params, float *slots)
{
    memcpy(params, r->t.var, r->t.P * sizeof(float));
    memcpy(slots, r->t.var_slots, r->t.P * (size_t)r->t.nslots * sizeof(float));
    return DR_OK;
}

void dr_ps_close(ps_run *r)
{
    close_run(r);
    free(r->increments);
    free(r->replay);
    free(r);
}
