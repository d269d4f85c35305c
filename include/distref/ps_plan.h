/* distref core — the parameter-server pieces that are pure functions of
 * the run's settings, shared by the reference (ref/ps*.c) and the engine's
 * MPI parameter_server (strategies/ps_mpi*.c): the partitioners and the
 * variables' placement on ps tasks, the seeded asynchronous schedule (a pure
 * function of --schedule_seed, the workers, --staleness and the failures,
 * like the data order is of --seed), and the recorded schedule of a free
 * run (model_dir/ps_schedule.jsonl) that the reference replays.
 * The training itself (the coordinator, the step functions, the ps tasks
 * applying updates) is each side's own: include/distref/ps.h (ref).
 */
#ifndef DISTREF_PS_PLAN_H
#define DISTREF_PS_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/model.h"
#include "distref/strategy.h"
#include "distref/train.h"

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

/* The variables of a model in Keras' creation order, per layer with
 * variables: its kernel (a Dense kernel in x out: dim0 = in; a Conv2D
 * kernel kh x kw x in x out: dim0 = kh) then its bias; BatchNormalization's
 * gamma, beta, moving_mean, moving_variance (the last two non-trainable, at
 * the state offsets: they live on the ps tasks too). vars needs
 * DR_PS_MAX_VARIABLES entries; returns how many. */
#define DR_PS_MAX_VARIABLES (4 * DR_MAX_LAYERS)
uint32_t dr_ps_model_variables(const dr_model_spec *m, dr_ps_variable *vars);

/* ---- the seeded schedule ------------------------------------------------ */

/* Events, in the order they happen. Versions count updates applied to the
 * ps variables; an update that lands makes version v + 1 and is applied as
 * optimizer step v + 1. */
typedef enum dr_ps_event_kind {
    DR_PS_DISPATCH = 0,   /* closure starts on worker: reads the variables at read_version */
    DR_PS_LAND,           /* its update is applied: version becomes read_version + staleness + 1 */
    DR_PS_FAIL,           /* the worker failed running it: result lost, closure re-queued at the front
                           * (a worker that fails by --fail_worker rejoins; one whose rank died,
                           * dr_ps_schedule_take's DR_PS_FAIL, is lost for good) */
    DR_PS_RECOVER         /* the failed worker rejoins, its datasets rebuilt */
} dr_ps_event_kind;

typedef struct dr_ps_event {
    dr_ps_event_kind kind;
    uint32_t worker;
    uint64_t closure;        /* 1-based schedule index; 0 for RECOVER */
    uint64_t read_version;   /* DISPATCH, LAND, FAIL */
    uint64_t version;        /* updates applied after the event */
    uint64_t staleness;      /* LAND: updates that landed between its read and its own */
    size_t   line;           /* read from a recording: its line there (messages); else 0 */
} dr_ps_event;

typedef struct dr_ps_schedule_options {
    uint32_t num_workers;    /* 1 .. DR_PS_MAX_WORKERS */
    uint32_t staleness;      /* S: the most updates a read may miss */
    uint64_t seed;           /* --schedule_seed */
    uint32_t fail_worker;    /* --fail_worker=W:K: worker W ... */
    uint64_t fail_step;      /* ... fails running closure K (kept for W); 0 = never */
    /* A recorded schedule to follow instead of drawing (--replay_schedule):
     * dr_ps_schedule_next takes replay[0], replay[1], ... (DISPATCH, LAND
     * and FAIL events, matched by kind and worker, taken as
     * dr_ps_schedule_take does), each checked against the rule's
     * validity; one that is not valid, or running out, stops the schedule
     * with replay_bad set. NULL: draw with the seed. */
    const struct dr_ps_event *replay;
    size_t   replay_len;
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
    bool      lost[DR_PS_MAX_WORKERS];         /* down for good: its rank died (take's DR_PS_FAIL) */
    uint32_t  recover_in[DR_PS_MAX_WORKERS];   /* landings until a down worker rejoins */
    uint64_t  closure[DR_PS_MAX_WORKERS];      /* what a busy worker runs */
    uint64_t  read[DR_PS_MAX_WORKERS];         /* and the version it read */
    bool      failure_injected;
    size_t    replayed;       /* recorded events taken (opt.replay) */
    bool      replay_bad;     /* the recording broke the rule or ran out */
    const char *replay_field; /* with replay_bad: the recorded event's field that differs from the run's */
    uint64_t  replay_want, replay_got;   /* (NULL: the rule forbids the event, or none is left) */
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
/* Takes one action chosen by the caller instead of a draw: DR_PS_DISPATCH
 * of the closure at the front of the queue to worker w, DR_PS_LAND of
 * worker w's closure, or DR_PS_FAIL of worker w's closure: w's rank died
 * with it in flight, so it goes back to the front of the queue (its next
 * dispatch, to a live worker, is a re-run, as ClusterCoordinator re-runs a
 * closure lost with its worker) and w is lost for good (never dispatched
 * to again, never rejoins). False (nothing changes) when the rule does not
 * allow it now (a busy or reserved worker, the staleness bound, nothing
 * queued; FAIL: w is not running a closure). How a free-running
 * coordinator lets real arrival order decide, and how a recording of one
 * is replayed. */
bool dr_ps_schedule_take(dr_ps_schedule *s, dr_ps_event_kind kind, uint32_t w, dr_ps_event *ev);
bool dr_ps_schedule_allows(const dr_ps_schedule *s, dr_ps_event_kind kind, uint32_t w);
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


/* ---- the recorded schedule (model_dir/ps_schedule.jsonl) ---------------- */

/* One JSON line per DISPATCH, LAND or FAIL (a worker rank that died) event:
 *   {"event":"dispatch","worker":1,"closure":3,"read_version":2,"version":2}
 *   {"event":"fail","worker":1,"closure":3,"read_version":2,"version":3}
 * into buf (NUL-terminated, '\n' ended); returns its length. */
size_t dr_ps_event_line(const dr_ps_event *ev, char *buf, size_t n);
/* Reads such a file (*events malloc'd; core/ps_schedule_read.c). DR_EUSAGE
 * for a missing file or one that is not a regular file (a FIFO, a device:
 * refused, never opened blocking; a symbolic link is not followed);
 * DR_EFORMAT naming the file, line, field and what was expected for a line
 * longer than DR_PS_SCHEDULE_LINE_MAX bytes, a NUL byte, anything but one
 * JSON object of the five fields, and an event that does not follow from
 * the ones before it (the closure a dispatch takes, the version it reads,
 * the worker a landing or fail comes from, the versions they carry).
 * Messages start with "FLAG=PATH" (flag NULL: the path alone);
 * dr_ps_schedule_load's flag is "--replay_schedule". */
#define DR_PS_SCHEDULE_LINE_MAX 4096   /* the longest line distref writes is ~150 bytes */
int  dr_ps_schedule_load(const char *path, dr_ps_event **events, size_t *count, dr_err *err);
int  dr_ps_schedule_load_as(const char *path, const char *flag, dr_ps_event **events, size_t *count,
                            dr_err *err);

/* ---- the plan's settings (model_dir/ps_schedule.json) -------------------- */

/* What decides the plan a resumed run re-walks, written beside every
 * parameter_server checkpoint (by --variant=ref and --variant=mpi alike;
 * DRCKPT02 has no room for it), with the checkpoint's step:
 *   {"checkpoint_step":S,"workers":W,"ps":P,"staleness":..,"schedule_seed":..,
 *    "checkpoint_every":..,"fail_worker":"..","ps_partitioner":".."}
 * Not in it: --fail_ps (a ps failure ends the plan, it does not change it)
 * and the step count (the resumed step is a join of both plans). */
size_t dr_ps_settings_line(const dr_run_config *cfg, uint32_t W, uint32_t P, uint64_t step, char *buf, size_t n);
/* Compares model_dir/ps_schedule.json with this run's line: DR_OK when
 * equal; *absent (DR_OK) when there is no such file; DR_EFORMAT naming both
 * settings when they differ. */
int  dr_ps_settings_check(const dr_run_config *cfg, uint32_t W, uint32_t P, uint64_t step, bool *absent,
                          dr_err *err);

/* --fail_worker=W:K and --fail_ps=P:K: "" gives *step = 0 (none); DR_EUSAGE,
 * naming the flag, for anything but two decimal integers with K >= 1 and
 * the index below count (workers or ps tasks of the cluster). */
int  dr_ps_parse_failure(const char *flag, const char *text, uint32_t count,
                         uint32_t *index, uint64_t *step, dr_err *err);
/* Both flags of a run with W workers, P ps tasks and N step functions,
 * each parsed as above, and their steps checked against N (DR_EUSAGE naming
 * the flag). The reference and the MPI variant check them alike. */
int  dr_ps_parse_failures(const char *fail_worker, const char *fail_ps, uint32_t W, uint32_t P, uint64_t N,
                          uint32_t *worker, uint64_t *worker_step, uint32_t *ps, uint64_t *ps_step, dr_err *err);
/* A run stopped by --fail_ps=P:K: err's message (the ps task's failure)
 * gets what to do next, with the last checkpoint (saved, when have_ckpt)
 * in model_dir. Returns DR_EFAULT. */
int  dr_ps_failure_stopped(dr_err *err, const char *model_dir, bool have_ckpt, uint64_t saved);

#endif
