/* distref — parameter-server training: TensorFlow's ParameterServerStrategy
 * (v2) and ClusterCoordinator, emulated in one process.
 *
 *   TensorFlow                                          distref
 *   ParameterServerStrategy(cluster_resolver,           dr_strategy_create, kind parameter_server
 *     variable_partitioner)                               (W workers, P ps tasks from TF_CONFIG)
 *   partitioners.FixedShardsPartitioner(n)              dr_partitioner, "fixed:N"
 *   partitioners.MinSizePartitioner(bytes, max_shards)  "min_size:BYTES[:MAX_SHARDS]"
 *   partitioners.MaxSizePartitioner(bytes, max_shards)  "max_size:BYTES[:MAX_SHARDS]"
 *   variables placed on /job:ps/task:(i % P)            dr_ps_place_variables
 *   ClusterCoordinator(strategy)                        dr_coordinator_create
 *   coordinator.create_per_worker_dataset(dataset_fn)   dr_coordinator_create_per_worker_dataset
 *   next(per_worker_iterator) inside the step fn        dr_per_worker_dataset_next
 *   coordinator.schedule(step_fn, args) -> RemoteValue  dr_coordinator_schedule -> a remote value id
 *   coordinator.join() / coordinator.done()             dr_coordinator_join / dr_coordinator_done
 *   RemoteValue.fetch()                                 dr_remote_value_fetch
 *
 * What is emulated (docs/PARAMETER_SERVER.md has the whole story):
 *
 * Asynchrony. Each scheduled step function reads the variables from the ps
 * tasks, computes a gradient on its worker and sends it back; the ps applies
 * it whenever it arrives. Workers do not wait for one another, so a
 * gradient may have been computed on variables that other workers have
 * updated since ("stale"). The interleaving is not left to threads: it is a
 * pure function of (schedule_seed, W, staleness bound S, failures), drawn
 * event by event (dr_ps_schedule below), so a run is bit-reproducible for a
 * given --schedule_seed. S = 0 is lock-step; W = 1 is sequential whatever S
 * is, and then gives one_device's bits.
 *
 * Failures, as TensorFlow promises them. A worker that fails loses the
 * closure it was running (its result is never applied); the closure goes
 * back to the front of the queue and runs again on a live worker; the
 * failed worker rejoins later with its per-worker datasets rebuilt, so its
 * iterators start again from the beginning (cluster_coordinator.py puts the
 * closure back and re-creates the worker's resources on recovery). A
 * parameter-server failure stops training with DR_EFAULT (TensorFlow raises
 * UnavailableError to the coordinator); a rerun resumes from the last
 * checkpoint.
 */
#ifndef DISTREF_PS_H
#define DISTREF_PS_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_ENGINE)
#error "distref/ps.h is the reference's parameter_server: core/ and the engine may not include it"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/input.h"
#include "distref/model.h"
#include "distref/ref.h"
#include "distref/strategy.h"

/* A failed worker rejoins after this many landings of other workers' updates
 * (or at once when no live worker is left to make progress). */
#define DR_PS_RECOVERY_LANDINGS 2

/* ---- partitioners (tensorflow/python/distribute/sharded_variable.py) ---- */

typedef enum dr_partitioner_kind {
    DR_PARTITION_NONE = 0,   /* every variable whole on one ps task */
    DR_PARTITION_FIXED,      /* FixedShardsPartitioner(num_shards) */
    DR_PARTITION_MIN_SIZE,   /* MinSizePartitioner(min_shard_bytes, max_shards=1) */
    DR_PARTITION_MAX_SIZE    /* MaxSizePartitioner(max_shard_bytes, max_shards=None) */
} dr_partitioner_kind;

typedef struct dr_partitioner {
    dr_partitioner_kind kind;
    uint64_t num_shards;     /* fixed */
    uint64_t shard_bytes;    /* min_size: min_shard_bytes; max_size: max_shard_bytes */
    uint64_t max_shards;     /* min_size: default 1; max_size: 0 = None (no bound) */
} dr_partitioner;

/* Parses --ps_partitioner: "" (none), "fixed:N", "min_size:BYTES[:MAX_SHARDS]"
 * or "max_size:BYTES[:MAX_SHARDS]", decimal integers >= 1 (TensorFlow's
 * constructors reject 0 and negatives too). DR_EUSAGE with a message that
 * names --ps_partitioner and the expected form. */
int dr_partitioner_parse(const char *text, dr_partitioner *out, dr_err *err);

/* The number of shards k of a variable with dim0 rows of row_bytes each, as
 * ParameterServerStrategyV2._create_variable gets it: the partitioner's
 * answer, then min(k, dim0). In integers, which equals TensorFlow's float
 * formulas for sizes below 2^53:
 *   fixed:    k = num_shards
 *   min_size: k = max(1, min(dim0, max_shards, ceil(dim0*row_bytes / min_shard_bytes)))
 *   max_size: per = max(1, floor(max_shard_bytes / row_bytes)); k = ceil(dim0 / per),
 *             then min(k, max_shards) when max_shards is given
 * DR_EUSAGE for dim0 == 0 or row_bytes == 0 (TensorFlow skips rank-0
 * variables; distref has none). */
int dr_partition_shards(const dr_partitioner *p, uint64_t dim0, uint64_t row_bytes,
                        uint64_t *k, dr_err *err);

/* Rows of shard i of k over dim0 rows: the "div" split, the first dim0 % k
 * shards get one extra row (10 rows, 4 shards: 3, 3, 2, 2). */
static inline uint64_t dr_partition_shard_rows(uint64_t dim0, uint64_t k, uint64_t i)
{
    return dim0 / k + (i < dim0 % k ? 1 : 0);
}

/* ---- variable placement ------------------------------------------------- */

/* A variable of the flat parameter vector: dim0 rows of row_len floats at
 * offset (a Dense kernel is in x out: dim0 = in, row_len = out). */
typedef struct dr_ps_variable {
    size_t   offset;
    uint64_t dim0, row_len;
} dr_ps_variable;

typedef struct dr_ps_shard {
    uint32_t variable;       /* index in the variables given */
    uint32_t part;           /* TensorFlow's "<name>/part_<part>" */
    uint32_t ps_task;
    size_t   offset, length; /* floats of the flat vector */
} dr_ps_shard;

typedef struct dr_ps_layout {
    uint32_t     num_shards;
    dr_ps_shard *shard;      /* malloc'd; dr_ps_layout_free */
} dr_ps_layout;

/* Shards each variable (in creation order) with the partitioner and places
 * the shards round-robin on ps tasks 0..num_ps-1 with one counter shared by
 * all variables and shards, as _create_variable_round_robin does with
 * self._variable_count % num_ps (so 3 variables of 2 shards on 2 ps tasks
 * go 0,1 | 0,1 | 0,1, and with 3 ps tasks 0,1 | 2,0 | 1,2). */
int  dr_ps_place_variables(const dr_ps_variable *vars, uint32_t nvars, const dr_partitioner *p,
                           uint32_t num_ps, dr_ps_layout *out, dr_err *err);
void dr_ps_layout_free(dr_ps_layout *l);

/* The variables of a model in Keras' creation order: per layer its kernel,
 * then its bias. vars needs 2 * m->nlayers entries; returns how many. */
uint32_t dr_ps_model_variables(const dr_model_spec *m, dr_ps_variable *vars);

/* ---- the seeded schedule ------------------------------------------------ */

/* Events, in the order they happen. Versions count updates applied to the
 * ps variables; an update that lands makes version v + 1 and is applied as
 * optimizer step v + 1. */
typedef enum dr_ps_event_kind {
    DR_PS_DISPATCH = 0,   /* closure starts on worker: reads the variables at read_version */
    DR_PS_LAND,           /* its update is applied: version becomes read_version + staleness + 1 */
    DR_PS_FAIL,           /* the worker failed running it: result lost, closure re-queued at the front */
    DR_PS_RECOVER         /* the failed worker rejoins, its datasets rebuilt */
} dr_ps_event_kind;

typedef struct dr_ps_event {
    dr_ps_event_kind kind;
    uint32_t worker;
    uint64_t closure;        /* 1-based schedule index; 0 for RECOVER */
    uint64_t read_version;   /* DISPATCH, LAND, FAIL */
    uint64_t version;        /* updates applied after the event */
    uint64_t staleness;      /* LAND: updates that landed between its read and its own */
} dr_ps_event;

typedef struct dr_ps_schedule_options {
    uint32_t num_workers;    /* 1 .. DR_PS_MAX_WORKERS */
    uint32_t staleness;      /* S: the most updates a read may miss */
    uint64_t seed;           /* --schedule_seed */
    uint32_t fail_worker;    /* --fail_worker=W:K: worker W ... */
    uint64_t fail_step;      /* ... fails running closure K (kept for W); 0 = never */
} dr_ps_schedule_options;

/* The schedule's state (fields are read-only to callers). The rule, at each
 * event:
 *   1. a failed worker whose recovery is due rejoins (RECOVER);
 *   2. otherwise the valid actions are: dispatch the closure at the front of
 *      the queue to an idle live worker (one action per such worker), or
 *      land one in-flight closure; one is drawn uniformly with
 *      dr_rng_below(seed, DR_STREAM_SCHEDULE, draw, #actions), dispatches
 *      first by worker, then landings by worker;
 *   3. with no valid action but queued closures, every worker is down: the
 *      one due first rejoins.
 * Validity keeps the in-flight closures able to land within the bound: sorted
 * by read version r_1 <= r_2 <= ..., they are feasible when for the k-th
 * (1-based) version + (k - 1) - r_k <= S. A dispatch is valid while fewer
 * than S + 1 closures are in flight; a landing while the rest stays
 * feasible. Landing the oldest is always valid, so the schedule always
 * progresses, no landing is staler than S, S = 0 keeps one closure in flight
 * (lock-step) and W = 1 is sequential. Landing a doomed closure (the
 * injected failure) is a FAIL instead. */
typedef struct dr_ps_schedule {
    dr_ps_schedule_options opt;
    uint64_t  version;
    uint64_t  draws;          /* random choices so far: the Philox counter */
    uint64_t  next_closure;   /* the index the next push gets */
    uint64_t *queue;          /* ring buffer of closure indices */
    size_t    qhead, qlen, qcap;
    bool      busy[DR_PS_MAX_WORKERS];
    bool      doomed[DR_PS_MAX_WORKERS];
    bool      down[DR_PS_MAX_WORKERS];
    uint32_t  recover_in[DR_PS_MAX_WORKERS];   /* landings until a down worker rejoins */
    uint64_t  closure[DR_PS_MAX_WORKERS];      /* what a busy worker runs */
    uint64_t  read[DR_PS_MAX_WORKERS];         /* and the version it read */
    bool      failure_injected;
} dr_ps_schedule;

/* DR_EUSAGE for num_workers outside 1..DR_PS_MAX_WORKERS or a fail_worker
 * beyond the workers; DR_ENOMEM. first_closure numbers the first push. */
int  dr_ps_schedule_init(dr_ps_schedule *s, const dr_ps_schedule_options *opt,
                         uint64_t first_closure, dr_err *err);
void dr_ps_schedule_free(dr_ps_schedule *s);
/* Queues the next closure (coordinator.schedule); returns its index, 0 on ENOMEM. */
uint64_t dr_ps_schedule_push(dr_ps_schedule *s);
/* Empties the queue (closures not dispatched yet); in-flight ones stay. */
void dr_ps_schedule_cancel_queued(dr_ps_schedule *s);
/* The next event; false when nothing is queued or in flight. */
bool dr_ps_schedule_next(dr_ps_schedule *s, dr_ps_event *ev);
static inline uint32_t dr_ps_schedule_in_flight(const dr_ps_schedule *s)
{
    uint32_t n = 0;
    for (uint32_t w = 0; w < s->opt.num_workers; w++) n += s->busy[w];
    return n;
}

/* The whole plan of a training run, without computing anything: n closures
 * scheduled join_every at a time (0 = all at once) with a join after each
 * group, which is what dr_ps_run_train does (a checkpoint is taken at each
 * join). *events is malloc'd. */
int  dr_ps_plan(const dr_ps_schedule_options *opt, uint64_t n, uint64_t join_every,
                dr_ps_event **events, size_t *count, dr_err *err);

/* ---- the coordinator ---------------------------------------------------- */

typedef struct dr_coordinator dr_coordinator;
typedef struct dr_per_worker_dataset dr_per_worker_dataset;

/* What a step function sees on the worker that runs it. */
typedef struct dr_worker_ctx {
    uint32_t     worker;         /* /job:worker/replica:0/task:<worker> */
    uint32_t     num_workers;
    dr_device   *device;         /* its CPU: compute there */
    uint64_t     closure;        /* 1-based schedule index */
    uint64_t     read_version;   /* the variables it sees include this many updates */
    bool         replay;         /* a resumed run re-walking its plan: take the inputs, compute nothing */
    const float *variables;      /* the worker's copy of all variables (NULL in replay) */
    float       *gradient;       /* out: the flat gradient it sends to the ps (NULL in replay) */
} dr_worker_ctx;

/* A step function: reads its batch from a per-worker dataset, computes on
 * ctx->variables, writes the gradient the optimizer applies (the
 * coordinator applies it on the ps tasks when the closure lands, as
 * optimizer.apply_gradients inside TF's step function would) and *result,
 * the value its RemoteValue will hold. */
typedef int (*dr_step_fn)(const dr_worker_ctx *ctx, void *arg, float *result, dr_err *err);

/* Told about every event as it happens (not during replay); result is the
 * closure's value for LAND. Used by training to write metrics. */
typedef int (*dr_event_fn)(const dr_ps_event *ev, float result, void *user, dr_err *err);

typedef struct dr_coordinator_options {
    uint32_t        staleness;
    uint64_t        schedule_seed;
    uint32_t        fail_worker;        /* with fail_worker_step > 0 */
    uint64_t        fail_worker_step;
    uint32_t        fail_ps;            /* with fail_ps_step > 0: ps task fail_ps fails ... */
    uint64_t        fail_ps_step;       /* ... when update fail_ps_step would land */
    uint64_t        replay_until;       /* resumed at this version: events before it are replayed */
    dr_partitioner  partitioner;
    dr_event_fn     on_event;
    void           *user;
} dr_coordinator_options;

typedef struct dr_coordinator_stats {
    uint64_t version;          /* updates applied (replayed ones included) */
    uint64_t dispatches, worker_failures, rerun_closures, recoveries;
    uint64_t max_staleness, staleness_sum;   /* over landings */
} dr_coordinator_stats;

/* The coordinator of a parameter_server strategy built by dr_strategy_create
 * (device 0 the coordinator, then the workers, then the ps tasks). */
int  dr_coordinator_create(dr_strategy *s, const dr_coordinator_options *opt,
                           dr_coordinator **out, dr_err *err);
void dr_coordinator_free(dr_coordinator *c);

/* Creates the variables on the ps tasks (sharded and placed as
 * dr_ps_place_variables says) with their optimizer slots, initialized from
 * params / slots (slot j of parameter p at slots[j * P + p], as checkpoints
 * keep them) held on the coordinator: the copies are counted. */
int  dr_coordinator_create_variables(dr_coordinator *c, const dr_ps_variable *vars, uint32_t nvars,
                                     const dr_optimizer *opt, const float *params,
                                     const float *slots, dr_err *err);
/* Reads every shard back to the coordinator (for a checkpoint or the final hash). */
void dr_coordinator_read_variables(dr_coordinator *c, float *params, float *slots);
const dr_ps_layout *dr_coordinator_layout(const dr_coordinator *c);

/* Calls fn once per worker with InputContext(num_input_pipelines = W,
 * input_pipeline_id = w, num_replicas_in_sync = 1) and an epoch: fn returns
 * the ids of one pass (malloc'd, taken over). The worker's iterator batches
 * them by global_batch (the last batch may be short; return a multiple to
 * drop it) and calls fn again with epoch + 1 when a pass is used up, so it
 * repeats forever. Datasets are built lazily on each worker. */
typedef int (*dr_worker_dataset_fn)(const dr_input_context *ctx, uint32_t epoch, void *user,
                                    uint32_t **ids, uint32_t *n_ids, dr_err *err);
int  dr_coordinator_create_per_worker_dataset(dr_coordinator *c, dr_worker_dataset_fn fn, void *user,
                                              uint32_t global_batch, dr_per_worker_dataset **out,
                                              dr_err *err);

/* One batch of a per-worker dataset as the worker running ctx sees it. */
typedef struct dr_worker_batch {
    const uint32_t *ids;     /* valid until the next call for this worker */
    uint32_t        count;
    uint32_t        epoch;   /* of the worker's own iterator */
    uint32_t        position;   /* ids of this pass consumed, this batch included */
    uint32_t        pass_size;  /* ids in this pass */
} dr_worker_batch;

/* DR_EUSAGE when a pass of the worker's dataset is empty (it could never
 * give a batch). */
int  dr_per_worker_dataset_next(dr_per_worker_dataset *ds, const dr_worker_ctx *ctx,
                                dr_worker_batch *out, dr_err *err);

/* Queues fn(arg) and returns the id of its remote value (>= 1); nothing runs
 * until join, done or a fetch lets time pass. After an error, every call
 * returns that error (restart the coordinator, as TensorFlow asks). */
int  dr_coordinator_schedule(dr_coordinator *c, dr_step_fn fn, void *arg, uint64_t *id, dr_err *err);
/* Runs the schedule until every queued closure has landed. */
int  dr_coordinator_join(dr_coordinator *c, dr_err *err);
/* One event of the schedule (polling lets time pass), then whether all
 * scheduled closures have landed. */
int  dr_coordinator_done(dr_coordinator *c, bool *done, dr_err *err);
/* Drops the closures scheduled but not dispatched yet (their remote values
 * never arrive); those in flight still land. How a stopped run (SIGINT)
 * reaches a join quickly. */
void dr_coordinator_cancel_queued(dr_coordinator *c);
/* The closure's value, running the schedule until it lands (fetch blocks in
 * TensorFlow). DR_EUSAGE for an unknown id; DR_ESTATE for a closure that a
 * resumed run replayed (an earlier run computed it). */
int  dr_remote_value_fetch(dr_coordinator *c, uint64_t id, float *value, dr_err *err);
void dr_coordinator_get_stats(const dr_coordinator *c, dr_coordinator_stats *out);

/* Device indices of a parameter_server strategy: distref/strategy.h. */

/* --fail_worker=W:K and --fail_ps=P:K: "" gives *step = 0 (none); DR_EUSAGE,
 * naming the flag, for anything but two decimal integers with K >= 1 and
 * the index below count (workers or ps tasks of the cluster). */
int  dr_ps_parse_failure(const char *flag, const char *text, uint32_t count,
                         uint32_t *index, uint64_t *step, dr_err *err);

#endif
