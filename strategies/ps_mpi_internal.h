/* distref engine — parameter_server over MPI ranks (--variant=mpi): the
 * state shared by the coordinator (strategies/ps_mpi.c) and the worker and
 * ps ranks (strategies/ps_mpi_roles.c). docs/MPI.md has the protocol.
 *
 * Ranks: 0 the chief (the coordinator), 1 .. W the workers, W+1 .. W+P the
 * ps tasks. The schedule (core: distref/ps_plan.h) runs on the chief only;
 * the gradients and the updates are the engine's own backend kernels.
 */
#ifndef DISTREF_PS_MPI_INTERNAL_H
#define DISTREF_PS_MPI_INTERNAL_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_REF)
#error "strategies/ps_mpi_internal.h is the engine's"
#endif

#include <mpi.h>
#include "distref/checkpoint.h"
#include "distref/ps_plan.h"
#include "distref/run_log.h"
#include "distref/variant.h"
#include "strategies/engine_internal.h"

/* PSM_ABORT: the chief saw a rank die or hang; its error text follows and
 * every other rank stops with it (a wait of a worker or ps rank also
 * watches for it). PSM_PING / PSM_PONG: a worker or ps rank that has heard
 * nothing from the chief for the deadline asks whether it lives; the chief
 * answers from inside its own waits. */
enum { PSM_DISPATCH = 101, PSM_READ, PSM_VARS, PSM_RESULT, PSM_APPLY, PSM_FETCH, PSM_SHARDS, PSM_STOP, PSM_ABORT,
       PSM_PING, PSM_PONG, PSM_SKIP };
/* PSM_SKIP { n, rebuild }: with rebuild = 1 the worker's datasets are
 * re-created first (a recovered worker, --fail_worker: its iterator starts
 * again at epoch 0); then it skips n batches (a resumed run: the batches it
 * took since its last rebuild). */

typedef enum psm_role { PSM_CHIEF = 0, PSM_WORKER, PSM_PS } psm_role;

/* What a worker sends back for a closure: this header, then G example ids
 * (uint32), then P gradient floats (rounded once over the divisor). */
typedef struct psm_result {
    uint64_t closure, correct;
    uint32_t count, epoch, position, pass_size;
    float    loss;
    uint32_t pad;
} psm_result;

typedef struct engine_ps {
    MPI_Comm       comm;
    psm_role       role;
    uint32_t       rank, index;        /* world rank; index within its job */
    uint32_t       W, P;               /* workers, ps tasks */
    dr_ps_layout   layout;
    size_t         mine;               /* floats of the shards this ps task holds */
    size_t         msg_bytes;          /* a result message */
    /* --schedule=free under `mpirun --enable-recovery` (Open MPI sets
     * OMPI_MCA_orte_enable_recovery=1 in every rank): a worker rank that dies
     * loses only its closure, which re-runs on a live worker */
    bool           rerun;
    double         timeout;            /* --collective_timeout (or the default), seconds */
    double         chief_quiet, ping_at;   /* worker, ps: last word from the chief; a ping's time (0: none) */
    /* worker: one replica's buffers, its iterator */
    dr_replica_bufs rb;
    float         *vars;               /* P: the variables it read / the gradient it sends */
    MPI_Request   *vreq;               /* one receive per ps task, all posted at once */
    uint32_t      *pass;               /* this pass of its shard */
    uint32_t       pass_n, position, epoch;
    bool           built;
    /* a model beyond Dense (ps_mpi_graph.c): the trainable floats (the
     * moving statistics follow them); worker: its one-replica graph session,
     * the step's moving-statistics increments */
    size_t         T;
    dr_session    *gs;
    float         *incr;
    double         limit, waiting_since;   /* the variables' transfer: its deadline (0: none) */
    uint32_t       waiting_for;            /*   and the rank at the other end */
    /* ps: its variables and slots (full-length buffers; only its shards are
     * its), the exact total an update is applied from */
    dr_buffer     *params, *slots, *total;
    /* ps, rerun: sends of the variables to a worker that did not take them
     * within a quarter of the deadline (dead, or not yet reading): left
     * pending with their buffers, never reused */
    MPI_Request    abandoned[DR_PS_MAX_WORKERS];
    float         *abandoned_buf[DR_PS_MAX_WORKERS];
    uint32_t       nabandoned;
    /* chief */
    uint8_t       *res[DR_PS_MAX_WORKERS];      /* each busy worker's result */
    MPI_Request    req[DR_PS_MAX_WORKERS];
    float         *send;                        /* shard floats on their way to a ps task */
    float         *final_params, *final_slots;  /* read back at each checkpoint */
    char          *record;                      /* --schedule=free: ps_schedule.jsonl so far */
    size_t         record_len, record_cap;
    uint64_t       updates, max_staleness, staleness_sum, dispatches;
    uint64_t       worker_failures, rerun_closures, recoveries;   /* injected and real, as summary.json says */
    uint64_t       dead_workers;       /* ranks that really died (no MPI_Finalize then); workers: from PSM_STOP */
    /* --fail_worker=W:K, --fail_ps=P:K (--schedule=seeded): the reference's
     * injected failures (docs/PARAMETER_SERVER.md "Failures"); steps 0 = none */
    uint32_t       fail_worker, fail_ps;
    uint64_t       fail_worker_step, fail_ps_step;
    uint64_t       saved;              /* chief: the step of the last checkpoint (resumed or written) */
    bool           have_ckpt;
    /* a resumed run (--schedule=seeded): the checkpoint every rank read */
    dr_checkpoint  ck;
    uint64_t       resume_step;        /* its step (0: a fresh run) */
    dr_ps_event   *replay;             /* chief, --schedule=free: the recording up to it, re-walked */
    size_t         nreplay;
    uint64_t       rerun_of[DR_PS_MAX_WORKERS];  /* a lost worker's closure not landed yet (0: none) */
    uint64_t       lost_at[DR_PS_MAX_WORKERS];   /* the step a worker was lost at (0: alive) */
} engine_ps;

/* ---- the chief ------------------------------------------------------------ */

/* The coordinator's state (rank 0; strategies/ps_mpi.c, its failures
 * strategies/ps_mpi_faults.c). */
typedef struct psm_chief {
    dr_session    *s;
    engine_ps     *ps;
    dr_run_log    *log;
    dr_ps_schedule sched;
    uint64_t       N;
    float          last_loss;
    uint64_t       epoch_correct, epoch_examples;
    uint32_t       acc_epoch;
    psm_result     last0;          /* worker 0's iterator after its last landed closure */
    uint64_t       arrival[DR_PS_MAX_WORKERS];   /* free: when its result arrived (0: not yet) */
    uint64_t       arrivals;
    uint32_t       timed_out;      /* the rank whose deadline ran out in the last failed wait (0: none) */
} psm_chief;

/* strategies/ps_mpi.c: every wait of the chief polls with a deadline and
 * answers pings; a send is a wait; a free run's event into its recording */
int  psm_wait_for(psm_chief *c, MPI_Request *req, uint32_t rank, const char *what, uint64_t step, dr_err *err);
int  psm_send_to(psm_chief *c, const void *buf, int n, MPI_Datatype type, uint32_t rank, int tag, uint64_t step,
                 const char *what, dr_err *err);
int  psm_record(engine_ps *ps, const dr_ps_event *ev, dr_err *err);

/* strategies/ps_mpi_faults.c: workers and ps tasks that fail, injected
 * (--fail_worker, --fail_ps: the reference's) or real (a rank that dies) */
void psm_skip_batch(const psm_chief *c, psm_result *k);
int  psm_lose_worker(psm_chief *c, uint32_t w, dr_err *err);
int  psm_fail_closure(psm_chief *c, const dr_ps_event *ev, dr_err *err);
int  psm_recover_worker(psm_chief *c, const dr_ps_event *ev, dr_err *err);
int  psm_ps_failure(const psm_chief *c, const dr_ps_event *ev, dr_err *err);
void psm_why_no_rerun(const psm_chief *c, dr_err *err);
void psm_abort_all(psm_chief *c, const dr_err *err);

/* strategies/ps_mpi_roles.c */
int  psm_worker_loop(dr_session *s, dr_err *err);
int  psm_ps_loop(dr_session *s, dr_err *err);
int  psm_roles_open(dr_session *s, dr_err *err);
void psm_roles_close(dr_session *s);
/* the floats of ps task p's shards, in layout order, gathered from / scattered to a P-vector */
size_t psm_gather(const engine_ps *ps, uint32_t p, const float *full, float *out);
size_t psm_scatter(const engine_ps *ps, uint32_t p, const float *in, float *full);

/* strategies/ps_mpi_graph.c: a model beyond Dense */
int  psm_graph_open(dr_session *s, dr_err *err);
void psm_graph_close(dr_session *s);
void psm_graph_zero_moving(const dr_session *s, float *vars);
int  psm_graph_step(dr_session *s, const uint32_t *ids, uint32_t n, uint64_t closure, uint32_t den, dr_err *err);
void psm_graph_send_moving(const dr_session *s, float *grad);
bool psm_graph_land_moving(const dr_session *s, const dr_ps_shard *sh, float *params, float *g);

/* strategies/ps_mpi.c */
uint64_t psm_total_steps(const dr_session *s);
int  engine_ps_supports(const dr_run_plan *plan, dr_err *err);
int  engine_ps_open(const dr_run_plan *plan, const dr_dataset *data, dr_session **out, dr_err *err);
int  engine_ps_train(dr_session *s, struct dr_run_log *log, dr_train_totals *out, dr_err *err);
void engine_ps_close(dr_session *s);
void engine_ps_summarize(dr_session *s, json_object *o);
int  engine_ps_get(dr_session *s, float *params, float *slots, dr_err *err);

#endif
