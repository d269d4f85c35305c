/* distref devices/mpi/ — the MPI family: the comm with one process per rank
 * and the MPI world. This header: the MPI comm's internals (comm_mpi.c:
 * the collectives; comm_mpi_native.c: the compact all-reduce through
 * MPI_Iallreduce; comm_mpi_f32x.c: the exact float all-reduce;
 * comm_mpi_wait.c: waiting with deadlines, death notices and liveness
 * pings, all_gather and barrier). Not a public header: nothing outside
 * devices/mpi/ includes it. */
#ifndef DISTREF_DEVICES_COMM_MPI_INTERNAL_H
#define DISTREF_DEVICES_COMM_MPI_INTERNAL_H

#include <mpi.h>
#include <stdlib.h>
#include "devices/comm/comm_internal.h"
#include "distref/mpi.h"

#define CM_SEG   8192     /* elements per message */
#define CM_DEPTH 8        /* messages in flight each way */
#define CM_TAGS  30000    /* segment tags; MPI guarantees at least 32767 */
#define CM_TAG_GATHER (CM_TAGS + 1)
#define CM_TAG_NOTICE (CM_TAGS + 2)   /* "rank X died": sent by the first rank whose deadline passed */
#define CM_TAG_PING   (CM_TAGS + 3)   /* "are you alive?", answered with CM_TAG_PONG from any wait */
#define CM_TAG_PONG   (CM_TAGS + 4)
#define CM_TAG_FX     (CM_TAGS + 5)   /* and + 6: the exact float all-reduce of two ranks (comm_mpi_f32x.c) */
#define CM_TAG_GX     (CM_TAGS + 7)   /* to + 10: the exact gradient all-reduce, rounded once (comm_mpi_gradx.c) */
#define CM_PING_S     0.5             /* how long a ping waits for its pong */

typedef enum cm_op { CM_MERGE, CM_SET, CM_ADD, CM_COPY } cm_op;   /* exact: merge, set; float: add, copy */

typedef struct cm_seg { size_t at, len; } cm_seg;

typedef struct cm_ep {
    struct dr_comm base;     /* first member: a dr_comm * of this comm is a cm_ep * */
    ct_hub   geom;           /* only geom.cfg: packs, chunks and byte counts (comm_threads.c's helpers) */
    MPI_Comm comm;
    uint32_t rank, size;
    dr_comm *inner;          /* one rank: the threads comm's endpoint */
    uint8_t *sbuf, *rbuf;    /* CM_DEPTH slots of CM_SEG * DR_ACC_BYTES each */
    void    *tmp;            /* one segment's elements, deserialized before they merge */
    double   timeout;
    double   polled;         /* when a wait last asked dr_cm_overdue (a stop shows as a gap) */
    double   stalled;        /* the longest such gap (0: none): this rank was stopped */
    void    *fx;             /* the exact float all-reduce's buffers (comm_mpi_f32x.c), kept between calls */
    size_t   fx_cap;         /* bytes at fx */
    void    *nat;            /* the native sum's packs and their buffers (comm_mpi_native.c), kept between calls */
    uint32_t nat_np;         /* packs at nat */
    void    *gx;             /* the exact gradient all-reduce's buffers (comm_mpi_gradx.c), kept between calls */
    size_t   gx_cap;         /* bytes at gx */
} cm_ep;

#define CM_SPIN_S 200e-6              /* an idle wait spins this long before it yields the core */
#define CM_STALL_F 0.5                /* a gap of this part of the deadline between two polls: this process
                                       * was stopped (a starved one polls far more often) */

/* A dr_comm of this comm is a cm_ep (its first member). */
static inline cm_ep *dr_cm_ep(dr_comm *c) { return (cm_ep *)(void *)c; }

/* buf (holding *cap bytes), or it grown to bytes; NULL when out of memory
 * (buf is kept). The endpoint's buffers stay between calls this way. */
static inline void *dr_cm_grow(void *buf, size_t *cap, size_t bytes)
{
    void *q;
    if (bytes <= *cap) return buf;
    if (!(q = realloc(buf, bytes))) return NULL;
    *cap = bytes;
    return q;
}

/* ---- comm_mpi_native.c -------------------------------------------------- */
/* The exact sum over every replica of every rank of loc[0..L)[0..n), per
 * pack, through MPI_Iallreduce on integer digits, into loc[0] (the other
 * arrays are left as they were, but for their flags); an element whose
 * total leaves the compact window comes out marked overflowed. */
int    dr_cm_native_compact(cm_ep *e, dr_cacc *const *loc, uint32_t L, size_t n, const char *what, dr_err *err);
/* Frees the buffers the native sum keeps with the endpoint (at close). */
void   dr_cm_native_release(cm_ep *e);

/* ---- comm_mpi_gradx.c --------------------------------------------------- */
/* round(total / d) of the exact total of loc[0..L)[0..n) (or dd[0..L)) over every replica
 * of every rank into every out[r]; *overflowed: the elements (NaN) some
 * partial of which was overflowed, the same count on every rank
 * (distref/comm.h: all_reduce_round). */
int    dr_cm_grad_round(cm_ep *e, const dr_cacc *const *loc, const dr_dd_parts *dd, uint32_t L, size_t n, uint32_t d,
                        float *const *out, size_t *overflowed, const char *what, dr_err *err);
/* The op itself (arguments checked). */
int    dr_cm_all_reduce_round(dr_comm *c, const dr_cacc *const *local, const dr_dd_parts *dd, size_t n, uint32_t d,
                              float *const *out, size_t *overflowed, dr_err *err);

/* ---- comm_mpi_f32x.c ---------------------------------------------------- */
/* The exact sum of loc[0..L)[0..n) over every replica of every rank,
 * rounded once, into every loc[r] (distref/comm.h: all_reduce of DR_FORM_F32_EXACT). */
int    dr_cm_exact_f32(cm_ep *e, float *const *loc, uint32_t L, size_t n, const char *what, dr_err *err);
/* The op itself (arguments checked). */
int    dr_cm_all_reduce_f32_exact(dr_comm *c, float *const *local, size_t n, dr_err *err);

/* ---- comm_mpi_wait.c ---------------------------------------------------- */
double dr_cm_now(void);                  /* monotonic seconds */
/* Yields the core once `since` is more than CM_SPIN_S ago. */
void   dr_cm_idle(double since);
/* Whether the wait that last moved at *last is past the deadline. A gap of
 * CM_STALL_F * timeout since the previous poll means this process was stopped
 * (SIGSTOP) or starved, not that its peers were silent: the deadline starts
 * again (*last = now), so a resumed rank first hears the notices sent
 * meanwhile and never blames a peer for its own pause. */
bool   dr_cm_overdue(cm_ep *e, double *last);
/* rc of a wait that blames `peer`; after a stall of this rank the message
 * says so instead and blames nobody (its peers gave up on it and left). */
int    dr_cm_blamed(cm_ep *e, uint32_t peer, int rc, dr_err *err);
/* DR_EFAULT with MPI's message for error code mrc. */
int    dr_cm_fail(dr_err *err, int mrc, uint32_t rank, const char *what);
/* Cancels and frees every active request of req[0..n). */
void   dr_cm_cancel_all(MPI_Request *req, int n);
/* Tells every other rank that `dead` died (fire and forget). */
void   dr_cm_notice_send(cm_ep *e, uint32_t dead);
/* DR_EFAULT naming the dead rank when another rank's notice arrived. */
int    dr_cm_notice_check(cm_ep *e, const char *what, dr_err *err);
/* Answers the pings that arrived; every wait calls it. */
void   dr_cm_pong_serve(cm_ep *e);
/* *alive: whether peer answered a ping within CM_PING_S. */
int    dr_cm_ping(cm_ep *e, uint32_t peer, bool *alive, const char *what, dr_err *err);
/* Nothing completed for the deadline: pings every other rank; one that does
 * not answer is named (DR_EFAULT, every other rank told); else *last = now. */
int    dr_cm_blame(cm_ep *e, double *last, const char *what, dr_err *err);
/* Waits for every request of req[0..n) (collectives), polling with the
 * deadline and dr_cm_blame. */
int    dr_cm_wait_coll(cm_ep *e, MPI_Request *req, int n, const char *what, dr_err *err);
/* The comm's all_gather and barrier (distref/comm.h). */
int    dr_cm_all_gather(dr_comm *c, const void *mine, size_t bytes, void *all, dr_err *err);
int    dr_cm_barrier(dr_comm *c, dr_err *err);

/* ---- mpi_last_words.c ---------------------------------------------------- */
/* A wait of `what` begins: the line a SIGTERM then says names the ranks it
 * awaits (peer, or every other rank when peer < 0). dr_cm_awaited: it ended. */
void   dr_cm_awaiting(const cm_ep *e, const char *what, int peer);
void   dr_cm_awaited(void);

#endif
