/* distref reference — ClusterCoordinator: closures, remote values,
 * per-worker datasets and the sharded variables on the ps tasks
 * (include/distref/ps.h).
 *
 * Nothing runs in the background: the seeded schedule (ps_schedule.c) says
 * what happens next, and join, done and fetch let it happen. A DISPATCH
 * copies the variables from their ps tasks to the worker and runs the step
 * function there at once (its result depends only on that copy and its
 * batch, so computing it early changes nothing); a LAND sends the worker's
 * gradient to the ps tasks, which apply it shard by shard. The optimizers
 * are elementwise, so sharding never changes a bit.
 */
#include "distref/ps.h"
#include "distref/ref.h"
#include "ref/layers.h"

#include <stdlib.h>
#include <string.h>

enum { PENDING = 0, READY, REPLAYED };
#define MAX_DATASETS 8

typedef struct closure {
    dr_step_fn fn;
    void      *arg;
    uint8_t    state;
    bool       failed;     /* lost once with a failed worker: its next dispatch is a rerun */
    float      value;
} closure;

typedef struct worker_iter {
    uint32_t *ids;         /* the current pass (NULL: not built) */
    uint32_t  n, position, epoch;
} worker_iter;

struct dr_per_worker_dataset {
    dr_worker_dataset_fn fn;
    void        *user;
    uint32_t     global_batch;
    worker_iter  it[DR_PS_MAX_WORKERS];
};

typedef struct shard_store {
    float *values, *slots;  /* on its ps task */
} shard_store;

struct dr_coordinator {
    dr_strategy           *s;
    dr_coordinator_options opt;
    dr_ps_schedule         sched;
    uint32_t               W, P;
    closure               *cl;          /* cl[i - 1] is closure i */
    uint64_t               ncl, capcl;
    float                  result[DR_PS_MAX_WORKERS];
    float                 *snapshot[DR_PS_MAX_WORKERS], *gradient[DR_PS_MAX_WORKERS];
    size_t                 nparams;
    int                    nslots;
    dr_optimizer           optimizer;
    dr_ps_layout           layout;
    shard_store           *store;
    float                 *recv[DR_MAX_DEVICES];   /* per ps task: the gradient it receives */
    size_t                 recv_len[DR_MAX_DEVICES];
    dr_per_worker_dataset *ds[MAX_DATASETS];
    uint32_t               nds;
    dr_coordinator_stats   stats;
    dr_err                 failure;     /* code != 0: the coordinator is dead */
};

static dr_device *worker_dev(dr_coordinator *c, uint32_t w) { return &c->s->device[dr_ps_worker_device(w)]; }
static dr_device *ps_dev(dr_coordinator *c, uint32_t p) { return &c->s->device[dr_ps_task_device(c->s, p)]; }

int dr_coordinator_create(dr_strategy *s, const dr_coordinator_options *opt,
                          dr_coordinator **out, dr_err *err)
{
    dr_coordinator *c;
    dr_ps_schedule_options so;
    int rc;
    *out = NULL;
    if (s->spec.kind != DR_STRATEGY_PARAMETER_SERVER)
        return dr_fail(err, DR_EUSAGE, "ClusterCoordinator: needs a parameter_server strategy, not %s",
                       dr_strategy_kind_name(s->spec.kind));
    if (!(c = calloc(1, sizeof *c))) return dr_fail(err, DR_ENOMEM, "ClusterCoordinator: no memory");
    c->s = s;
    c->opt = *opt;
    c->W = s->num_workers;
    c->P = dr_ps_num_ps(s);
    so = (dr_ps_schedule_options){ c->W, opt->staleness, opt->schedule_seed, opt->fail_worker, opt->fail_worker_step,
                                   opt->replay, opt->replay_len };
    if (opt->fail_ps_step && opt->fail_ps >= c->P)
        rc = dr_fail(err, DR_EUSAGE, "--fail_ps: ps task %u does not exist (%u ps tasks)", opt->fail_ps, c->P);
    else
        rc = dr_ps_schedule_init(&c->sched, &so, 1, err);
    if (rc) { free(c); return rc; }
    *out = c;
    return DR_OK;
}

static void free_dataset(dr_per_worker_dataset *d)
{
    for (uint32_t w = 0; w < DR_PS_MAX_WORKERS; w++) free(d->it[w].ids);
    free(d);
}

void dr_coordinator_free(dr_coordinator *c)
{
    if (!c) return;
    for (uint32_t w = 0; w < c->W; w++) {
        dr_device_free(worker_dev(c, w), c->snapshot[w], c->nparams * sizeof(float));
        dr_device_free(worker_dev(c, w), c->gradient[w], c->nparams * sizeof(float));
    }
    for (uint32_t i = 0; c->store && i < c->layout.num_shards; i++) {
        const dr_ps_shard *sh = &c->layout.shard[i];
        dr_device_free(ps_dev(c, sh->ps_task), c->store[i].values, sh->length * sizeof(float));
        dr_device_free(ps_dev(c, sh->ps_task), c->store[i].slots, sh->length * (size_t)c->nslots * sizeof(float));
    }
    for (uint32_t p = 0; p < c->P; p++) dr_device_free(ps_dev(c, p), c->recv[p], c->recv_len[p] * sizeof(float));
    for (uint32_t i = 0; i < c->nds; i++) free_dataset(c->ds[i]);
    free(c->store);
    free(c->cl);
    dr_ps_layout_free(&c->layout);
    dr_ps_schedule_free(&c->sched);
    free(c);
}

/* ---- variables ---------------------------------------------------------- */

/* Zero-length buffers still get a real allocation (dr_device_alloc's rule). */
static int alloc_floats(dr_device *d, size_t n, float **out, dr_err *err)
{
    return dr_device_alloc(d, n * sizeof(float), (void **)out, err);
}

/* Slot j of a shard is slots[j * length + i]; of the flat vector, j * P + p. */
static void copy_shard(dr_coordinator *c, uint32_t i, bool to_ps, float *params, float *slots)
{
    const dr_ps_shard *sh = &c->layout.shard[i];
    dr_device *ps = ps_dev(c, sh->ps_task), *coord = &c->s->device[0];
    size_t bytes = sh->length * sizeof(float);
    if (to_ps) dr_device_copy(ps, c->store[i].values, coord, params + sh->offset, bytes);
    else dr_device_copy(coord, params + sh->offset, ps, c->store[i].values, bytes);
    for (int j = 0; j < c->nslots; j++) {
        float *flat = slots + (size_t)j * c->nparams + sh->offset, *local = c->store[i].slots + (size_t)j * sh->length;
        if (to_ps) dr_device_copy(ps, local, coord, flat, bytes);
        else dr_device_copy(coord, flat, ps, local, bytes);
    }
}

static int alloc_variables(dr_coordinator *c, dr_err *err)
{
    int rc = DR_OK;
    if (!(c->store = calloc(c->layout.num_shards + 1, sizeof *c->store)))
        return dr_fail(err, DR_ENOMEM, "ClusterCoordinator: no memory for the shards");
    for (uint32_t i = 0; rc == DR_OK && i < c->layout.num_shards; i++) {
        const dr_ps_shard *sh = &c->layout.shard[i];
        c->recv_len[sh->ps_task] += sh->length;
        rc = alloc_floats(ps_dev(c, sh->ps_task), sh->length, &c->store[i].values, err);
        if (rc == DR_OK) rc = alloc_floats(ps_dev(c, sh->ps_task), sh->length * (size_t)c->nslots, &c->store[i].slots, err);
    }
    for (uint32_t p = 0; rc == DR_OK && p < c->P; p++) rc = alloc_floats(ps_dev(c, p), c->recv_len[p], &c->recv[p], err);
    for (uint32_t w = 0; rc == DR_OK && w < c->W; w++) {
        rc = alloc_floats(worker_dev(c, w), c->nparams, &c->snapshot[w], err);
        if (rc == DR_OK) rc = alloc_floats(worker_dev(c, w), c->nparams, &c->gradient[w], err);
    }
    return rc;
}

int dr_coordinator_create_variables(dr_coordinator *c, const dr_ps_variable *vars, uint32_t nvars,
                                    const dr_optimizer *opt, const float *params,
                                    const float *slots, dr_err *err)
{
    int rc;
    if (c->store) return dr_fail(err, DR_ESTATE, "ClusterCoordinator: the variables exist already");
    for (uint32_t v = 0; v < nvars; v++)
        if (vars[v].offset + vars[v].dim0 * vars[v].row_len > c->nparams) c->nparams = vars[v].offset + vars[v].dim0 * vars[v].row_len;
    c->optimizer = *opt;
    c->nslots = dr_optimizer_num_slots(opt);
    if ((rc = dr_ps_place_variables(vars, nvars, &c->opt.partitioner, c->P, &c->layout, err)) ||
        (rc = alloc_variables(c, err)))
        return rc;
    for (uint32_t i = 0; i < c->layout.num_shards; i++) copy_shard(c, i, true, (float *)params, (float *)slots);
    return DR_OK;
}

void dr_coordinator_read_variables(dr_coordinator *c, float *params, float *slots)
{
    for (uint32_t i = 0; i < c->layout.num_shards; i++) copy_shard(c, i, false, params, slots);
}

const dr_ps_layout *dr_coordinator_layout(const dr_coordinator *c) { return &c->layout; }

/* ---- per-worker datasets ------------------------------------------------ */

int dr_coordinator_create_per_worker_dataset(dr_coordinator *c, dr_worker_dataset_fn fn, void *user,
                                             uint32_t global_batch, dr_per_worker_dataset **out,
                                             dr_err *err)
{
    dr_per_worker_dataset *d;
    if (c->nds == MAX_DATASETS)
        return dr_fail(err, DR_EUNSUPPORTED, "create_per_worker_dataset: at most %d datasets", MAX_DATASETS);
    if (global_batch == 0) return dr_fail(err, DR_EUSAGE, "create_per_worker_dataset: global_batch_size must be at least 1");
    if (!(d = calloc(1, sizeof *d))) return dr_fail(err, DR_ENOMEM, "create_per_worker_dataset: no memory");
    d->fn = fn;
    d->user = user;
    d->global_batch = global_batch;
    c->ds[c->nds++] = d;
    *out = d;
    return DR_OK;
}

/* A recovered worker's datasets are re-created: its iterators start over. */
static void rebuild_datasets(dr_coordinator *c, uint32_t w)
{
    for (uint32_t i = 0; i < c->nds; i++) {
        free(c->ds[i]->it[w].ids);
        memset(&c->ds[i]->it[w], 0, sizeof c->ds[i]->it[w]);
    }
}

static int build_pass(dr_per_worker_dataset *d, uint32_t W, uint32_t w, uint32_t epoch, dr_err *err)
{
    dr_input_context ctx = { W, w, 1 };
    worker_iter *it = &d->it[w];
    int rc;
    free(it->ids);
    it->ids = NULL;
    it->n = it->position = 0;
    it->epoch = epoch;
    if ((rc = d->fn(&ctx, epoch, d->user, &it->ids, &it->n, err)))
        return dr_fail_wrap(err, "dataset_fn on /job:worker/replica:0/task:%u", w);
    if (it->n == 0)
        return dr_fail(err, DR_EUSAGE, "per-worker dataset of /job:worker/replica:0/task:%u is empty "
                       "(epoch %u): it can never give a batch", w, epoch);
    return DR_OK;
}

int dr_per_worker_dataset_next(dr_per_worker_dataset *ds, const dr_worker_ctx *ctx,
                               dr_worker_batch *out, dr_err *err)
{
    uint32_t w = ctx->worker;
    worker_iter *it = &ds->it[w];
    int rc;
    if (!it->ids || it->position == it->n) {
        uint32_t epoch = it->ids ? it->epoch + 1 : 0;
        if ((rc = build_pass(ds, ctx->num_workers, w, epoch, err))) return rc;
    }
    out->ids = it->ids + it->position;
    out->count = it->n - it->position < ds->global_batch ? it->n - it->position : ds->global_batch;
    out->epoch = it->epoch;
    it->position += out->count;
    out->position = it->position;
    out->pass_size = it->n;
    return DR_OK;
}

/* ---- closures and events ------------------------------------------------ */

static int dead(dr_coordinator *c, dr_err *err)
{
    if (err) *err = c->failure;
    return c->failure.code;
}

/* Remembers the first error: the coordinator answers it from now on. */
static int die(dr_coordinator *c, int rc, dr_err *err)
{
    if (rc && !c->failure.code) c->failure = *err;
    return rc;
}

int dr_coordinator_schedule(dr_coordinator *c, dr_step_fn fn, void *arg, uint64_t *id, dr_err *err)
{
    uint64_t i;
    if (c->failure.code) return dead(c, err);
    if (!c->store) return dr_fail(err, DR_ESTATE, "schedule: create the variables first");
    if (c->ncl == c->capcl) {
        uint64_t cap = c->capcl ? c->capcl * 2 : 256;
        closure *p = realloc(c->cl, cap * sizeof *p);
        if (!p) return dr_fail(err, DR_ENOMEM, "schedule: no memory for %llu closures", (unsigned long long)cap);
        c->cl = p;
        c->capcl = cap;
    }
    if (!(i = dr_ps_schedule_push(&c->sched))) return dr_fail(err, DR_ENOMEM, "schedule: no memory for the queue");
    c->cl[c->ncl++] = (closure){ fn, arg, PENDING, false, 0.0f };
    *id = i;
    return DR_OK;
}

/* Is this event a resumed run re-walking what its checkpoint covers? */
static bool replayed(const dr_coordinator *c, const dr_ps_event *ev)
{
    return ev->kind == DR_PS_LAND ? ev->version <= c->opt.replay_until : ev->version < c->opt.replay_until;
}

static int on_dispatch(dr_coordinator *c, const dr_ps_event *ev, bool replay, dr_err *err)
{
    closure *cl = &c->cl[ev->closure - 1];
    uint32_t w = ev->worker;
    dr_worker_ctx ctx = { w, c->W, worker_dev(c, w), ev->closure, ev->read_version, replay,
                          replay ? NULL : c->snapshot[w], replay ? NULL : c->gradient[w] };
    int rc;
    c->stats.dispatches++;
    if (cl->failed) c->stats.rerun_closures++;
    if (!replay)   /* the worker reads every shard from its ps task */
        for (uint32_t i = 0; i < c->layout.num_shards; i++) {
            const dr_ps_shard *sh = &c->layout.shard[i];
            dr_device_copy(worker_dev(c, w), c->snapshot[w] + sh->offset, ps_dev(c, sh->ps_task),
                           c->store[i].values, sh->length * sizeof(float));
        }
    c->result[w] = 0.0f;
    rc = cl->fn(&ctx, cl->arg, &c->result[w], err);
    return rc ? dr_fail_wrap(err, "step function %llu on /job:worker/replica:0/task:%u",
                             (unsigned long long)ev->closure, w) : DR_OK;
}

static int ps_failure(dr_coordinator *c, const dr_ps_event *ev, dr_err *err)
{
    return dr_fail(err, DR_EFAULT, "parameter server /job:ps/replica:0/task:%u failed at step %llu "
                   "(UnavailableError)", c->opt.fail_ps, (unsigned long long)ev->version);
}

/* The worker's gradient travels to each shard's ps task, which applies it
 * as optimizer step `version` (1-based, for Adam's bias correction). A
 * moving statistic's shard first takes its increment onto its value as it
 * is now, in landing order (tf.keras 2's assign_sub on the ps variable when
 * the update runs), then the optimizer's zero gradient, as one_device
 * applies the optimizer to the whole vector after the batch-norm state. */
static void apply_update(dr_coordinator *c, uint32_t w, uint64_t version)
{
    size_t at[DR_MAX_DEVICES] = { 0 };
    for (uint32_t i = 0; i < c->layout.num_shards; i++) {
        const dr_ps_shard *sh = &c->layout.shard[i];
        float *g = c->recv[sh->ps_task] + at[sh->ps_task];
        at[sh->ps_task] += sh->length;
        dr_device_copy(ps_dev(c, sh->ps_task), g, worker_dev(c, w), c->gradient[w] + sh->offset,
                       sh->length * sizeof(float));
        if (c->opt.moving_from && sh->offset >= c->opt.moving_from)
            for (size_t k = 0; k < sh->length; k++) {
                c->store[i].values[k] = c->store[i].values[k] * DR_BN_MOMENTUM + g[k];
                g[k] = 0.0f;
            }
        dr_optimizer_apply(&c->optimizer, version, c->store[i].values, g, c->store[i].slots, sh->length);
    }
}

static int on_land(dr_coordinator *c, const dr_ps_event *ev, bool replay, dr_err *err)
{
    closure *cl = &c->cl[ev->closure - 1];
    c->stats.version = ev->version;
    if (ev->staleness > c->stats.max_staleness) c->stats.max_staleness = ev->staleness;
    c->stats.staleness_sum += ev->staleness;
    if (replay) { cl->state = REPLAYED; return DR_OK; }
    if (c->opt.fail_ps_step && ev->version == c->opt.fail_ps_step) return ps_failure(c, ev, err);
    apply_update(c, ev->worker, ev->version);
    cl->state = READY;
    cl->value = c->result[ev->worker];
    return DR_OK;
}

static int process(dr_coordinator *c, const dr_ps_event *ev, dr_err *err)
{
    bool replay = replayed(c, ev);
    int rc = DR_OK;
    switch (ev->kind) {
    case DR_PS_DISPATCH: rc = on_dispatch(c, ev, replay, err); break;
    case DR_PS_LAND:     rc = on_land(c, ev, replay, err); break;
    case DR_PS_FAIL:
        c->stats.worker_failures++;
        c->cl[ev->closure - 1].failed = true;
        break;
    case DR_PS_RECOVER:
        c->stats.recoveries++;
        rebuild_datasets(c, ev->worker);
        break;
    }
    if (rc == DR_OK && !replay && c->opt.on_event)
        rc = c->opt.on_event(ev, ev->kind == DR_PS_LAND ? c->cl[ev->closure - 1].value : 0.0f, c->opt.user, err);
    return rc;
}

/* Why the recording stopped: the event this run cannot take, named by its
 * file, line and field. */
static int replay_refused(const dr_coordinator *c, dr_err *err)
{
    const dr_ps_event *r = c->sched.replayed < c->opt.replay_len ? &c->opt.replay[c->sched.replayed] : NULL;
    const char *file = c->opt.replay_name ? c->opt.replay_name : "the recording";
    if (!r)
        return dr_fail(err, DR_EFORMAT, "--replay_schedule=%s: the recording ends after %zu events but closures "
                       "are still queued or in flight", file, c->sched.replayed);
    if (c->sched.replay_field)
        return dr_fail(err, DR_EFORMAT, "--replay_schedule=%s line %zu: field \"%s\": this run has %llu there, "
                       "the recording %llu", file, r->line, c->sched.replay_field,
                       (unsigned long long)c->sched.replay_want, (unsigned long long)c->sched.replay_got);
    return dr_fail(err, DR_EFORMAT, "--replay_schedule=%s line %zu: field \"event\": %s of closure %llu on "
                   "worker %u is not allowed here (expected an event the queue, the staleness bound %u and the %u "
                   "workers of this run allow: the run that recorded it had other ones)", file, r->line,
                   r->kind == DR_PS_LAND ? "land" : r->kind == DR_PS_FAIL ? "fail" : "dispatch",
                   (unsigned long long)r->closure, r->worker, c->opt.staleness, c->W);
}

/* One event; *idle when nothing was queued or in flight. */
static int step(dr_coordinator *c, bool *idle, dr_err *err)
{
    dr_ps_event ev;
    *idle = !dr_ps_schedule_next(&c->sched, &ev);
    if (*idle && c->sched.replay_bad) return die(c, replay_refused(c, err), err);
    return *idle ? DR_OK : die(c, process(c, &ev, err), err);
}

int dr_coordinator_join(dr_coordinator *c, dr_err *err)
{
    bool idle = false;
    int rc = c->failure.code ? dead(c, err) : DR_OK;
    while (rc == DR_OK && !idle) rc = step(c, &idle, err);
    return rc;
}

void dr_coordinator_cancel_queued(dr_coordinator *c)
{
    dr_ps_schedule_cancel_queued(&c->sched);
}

int dr_coordinator_done(dr_coordinator *c, bool *done, dr_err *err)
{
    bool idle = false;
    int rc = c->failure.code ? dead(c, err) : step(c, &idle, err);
    *done = rc == DR_OK && c->sched.qlen == 0 && dr_ps_schedule_in_flight(&c->sched) == 0;
    return rc;
}

int dr_remote_value_fetch(dr_coordinator *c, uint64_t id, float *value, dr_err *err)
{
    bool idle = false;
    int rc = DR_OK;
    if (id < 1 || id > c->ncl)
        return dr_fail(err, DR_EUSAGE, "fetch: no scheduled function has remote value id %llu (1..%llu)",
                       (unsigned long long)id, (unsigned long long)c->ncl);
    while (rc == DR_OK && c->cl[id - 1].state == PENDING && !idle) rc = c->failure.code ? dead(c, err) : step(c, &idle, err);
    if (rc) return rc;
    if (c->cl[id - 1].state == REPLAYED)
        return dr_fail(err, DR_ESTATE, "fetch: step function %llu was replayed from a checkpoint; "
                       "the run that computed it kept its value", (unsigned long long)id);
    *value = c->cl[id - 1].value;
    return DR_OK;
}

void dr_coordinator_get_stats(const dr_coordinator *c, dr_coordinator_stats *out)
{
    *out = c->stats;
    out->version = c->sched.version;
}
