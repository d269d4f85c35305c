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

#include "distref/ps_plan.h"

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
    size_t          moving_from;        /* > 0: the floats from here on are BatchNormalization's moving
                                         * statistics; their gradient slots carry the worker's
                                         * increments (1 - momentum) * batch statistic, which the ps
                                         * adds at landing: moving = moving * momentum + increment */
    const dr_ps_event *replay;          /* a recorded schedule to follow (dr_ps_schedule_options) */
    size_t          replay_len;
    const char     *replay_name;        /* its file, for messages */
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


#endif
