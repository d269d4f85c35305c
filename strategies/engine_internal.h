/* distref engine — the OpenMP variant's run state (internal to strategies/).
 *
 * engine.c opens and closes a run (devices, backend, comm, buffers) and is
 * the variant table; step.c is one synchronous step; engine_tpu.c the tpu
 * strategy's static shapes, spatial partitioning and torus all-reduce.
 */
#ifndef DISTREF_ENGINE_INTERNAL_H
#define DISTREF_ENGINE_INTERNAL_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_REF)
#error "strategies/engine_internal.h is the engine's"
#endif

#include "distref/backend.h"
#include "distref/comm.h"
#include "distref/engine.h"
#include "distref/plan.h"

#define ENGINE_MAX_WORKERS 16
/* BatchNormalization's moving-statistics update (Keras 3's defaults):
 * moving * ENGINE_BN_MOMENTUM + statistic * ENGINE_BN_REST, in float; the
 * graph step's (graph.c) and the ps ranks' landing rule (ps_mpi_graph.c) */
#define ENGINE_BN_MOMENTUM 0.99f
#define ENGINE_BN_REST     0.01f   /* (float)(1.0 - 0.99), as Keras computes it in double */

typedef struct engine_ranks engine_ranks;
typedef struct engine_mixed engine_mixed;
typedef struct engine_graph engine_graph;

typedef struct engine_tpu {
    bool          on;
    dr_tpu_system sys;
    uint32_t      tiles;            /* logical cores per replica */
    int           part[2];          /* the partition grid */
    uint32_t      tile_len;         /* pixels per tile */
    uint32_t     *pix;              /* tiles x tile_len */
    dr_buffer   **tile_x;           /* replica r's tile l (rows x tile_len) on its core: [r * tiles + l] */
    float        *tile_stage;       /* a tile cut from the staged rows on the host */
    dr_buffer    *z[DR_MAX_DEVICES - 1];        /* per replica: layer 0's merged partial sums (rows x out0 acc) */
    dr_buffer    *delta[DR_MAX_DEVICES - 1];    /* per replica: layer 0's delta landing on the tiles */
    size_t       *ranges;           /* per logical core: [lo, hi) pairs of the parameters it holds */
    uint32_t     *nranges, max_ranges;
    double        compute_s, merge_s, allreduce_s, step_s, total_s;
    /* a model beyond Dense partitioned (graph_spatial.c): the tiles of its
     * maps, each replica's cores 1 .. tiles - 1 ([r * (tiles - 1) + c - 1];
     * NULL: not partitioned), the step's and the run's bytes (replica 0's) */
    dr_spatial_plan plan;
    dr_replica_bufs *cores;
    uint64_t      halo[DR_MAX_TILES], gather, halo_total[DR_MAX_TILES], gather_total;
    uint64_t    (*link)[3][DR_MAX_TILES][DR_MAX_TILES];   /* per replica: its last exchange's rounds */
    double        halo_s;           /* the step's emulated halo, gather and scatter time */
} engine_tpu;

struct dr_session {
    const dr_run_plan   *plan;
    const dr_run_config *cfg;
    const dr_dataset    *data;
    dr_strategy          strat;
    const dr_backend_ops *bo;
    dr_backend          *be;
    dr_numerics          num;                /* exact: grad/loss are dr_acc; fast: floats */
    size_t               esz;                /* bytes of a grad/loss element: dr_sum_bytes(num) */
    int                  omp_saved, omp_threads;   /* the thread policy (engine.c): before, during */
    bool                 threads_set;
    const dr_comm_ops   *co;
    dr_comm             *ep[ENGINE_MAX_WORKERS];   /* ep[w - wlo]: the endpoints this process holds */
    uint32_t             neps;
    uint32_t             R, W, L;            /* replicas, workers, replicas per worker */
    uint32_t             wlo, whi;           /* the workers this process runs: all (threads comm) or its
                                                rank's (MPI); it holds replicas [wlo*L, whi*L) only */
    engine_ranks        *ranks;              /* MPI: the step's exchange between ranks (ranks.c) */
    struct engine_ps    *ps;                 /* parameter_server over MPI ranks (ps_mpi.c) */
    uint32_t             rows;               /* the largest batch a replica computes */
    dr_replica_bufs      rb[DR_MAX_DEVICES - 1];
    dr_buffer           *var, *var_slots, *central;   /* central_storage */
    float               *host_x;             /* staging: the batch gathered on the host, per replica */
    uint8_t             *host_labels;
    float               *host_targets;
    uint32_t            *arranged;           /* DATA-sharded ids */
    const uint32_t      *ids;                /* this step's examples, replica by replica */
    uint32_t             off[DR_MAX_DEVICES];
    uint32_t             row0[DR_MAX_DEVICES];   /* replica r's first row of the global batch
                                                  * (--dropout_masks): off[r] but under DATA
                                                  * over W > 1 workers (its slice's row) */
    uint32_t             count, den;        /* examples in the step; the shares' common denominator */
    uint32_t             mult[DR_MAX_DEVICES], coef;   /* share r = mult[r] * sums + coef * reg */
    uint64_t             step, steps;
    int                  rc[ENGINE_MAX_WORKERS];
    dr_err               err[ENGINE_MAX_WORKERS];
    engine_tpu           tpu;
    /* A backend whose buffers are not host memory (opencl): the replicas'
     * gradient sums and central_storage's total staged on the host for the
     * comm (download, collective, upload). NULL for host-memory backends. */
    void                *stage[DR_MAX_DEVICES - 1];
    void                *stage_central;
    /* Compact gradients (num EXACT_COMPACT, distref/cacc.h): a worker whose
     * reduced total has an overflowed element sets overflow[w - wlo] and
     * applies nothing; the step is then redone with full accumulators, into
     * these buffers (allocated at the first such step, swapped with
     * rb[r].grad and central while it runs). */
    bool                 overflow[ENGINE_MAX_WORKERS];
    dr_buffer           *full_grad[DR_MAX_DEVICES - 1];
    dr_buffer           *full_central;
    uint64_t             fallback_steps;
    /* --gradient_accumulation_steps=k (k > 1, step.c): each local replica's
     * shares of the update's micro-steps so far, added exactly on the host
     * in the gradient's form (floats in fast numerics; room for a full
     * dr_acc each in exact ones, so the compact fallback fits), and, with
     * compact gradients, the update's k micro-batches (an overflowed total
     * recomputes them all with full accumulators). */
    uint32_t             k;
    void                *accum[DR_MAX_DEVICES - 1];
    struct engine_micro *micro;
    /* The total the step's update read, for --trajectory's gradient/
     * (engine.c's get_gradients: the backend's applied_grad of it): its
     * buffer, number form and divisor, as the apply that read it was
     * called; total NULL when the step applied nothing (a micro-step of
     * --gradient_accumulation_steps). A compact step redone with full
     * accumulators leaves the full total (its buffer stays allocated).
     * rounded: the floats the update read when the comm rounded the total
     * (round_once.c; total NULL then). */
    struct { const dr_buffer *total; dr_numerics num; uint32_t divisor; const float *rounded; } applied;
    /* multi_worker_mirrored over MPI ranks with the default algorithm
     * (round_once.c): the comm rounds each exact total once (its
     * all_reduce_round) into `rounded`, this rank's L x P floats */
    bool                 round_once;
    float               *rounded;
    /* --dtype_policy=mixed_* (mixed.c): NULL for float32 */
    engine_mixed        *mixed;
    /* a model beyond Dense (graph.c): the batch-norm statistics' comm and sums; NULL for Dense */
    engine_graph        *graph;
};

/* graph.c: a model beyond Dense, its layers in lock step over worker w's
 * replicas (sync BatchNormalization all-reduces its sums mid-pass), then
 * the shares; open/close its statistics' comm (nothing for a Dense model) */
int  engine_graph_open(dr_session *s, dr_err *err);
void engine_graph_close(dr_session *s);
int  engine_graph_compute(dr_session *s, uint32_t w, dr_err *err);

/* graph_spatial.c: the tpu strategy's spatial partitioning of a model
 * beyond Dense (its header comment); engine_cores: 1 when not partitioned,
 * engine_core(s, r, 0) is rb[r] */
int  engine_spatial_open(dr_session *s, dr_err *err);
void engine_spatial_close(dr_session *s);
uint32_t engine_cores(const dr_session *s);
dr_replica_bufs *engine_core(dr_session *s, uint32_t r, uint32_t c);
int  engine_spatial_load(dr_session *s, uint32_t r, dr_err *err);
int  engine_spatial_exchange(dr_session *s, uint32_t r, uint32_t l, bool grad, dr_err *err);
void engine_spatial_rounds(dr_session *s, uint32_t lo, uint32_t n);
int  engine_spatial_merge(dr_session *s, uint32_t r, dr_err *err);
void engine_spatial_report(dr_session *s, char *extra, size_t cap);
void engine_spatial_summary(const dr_session *s, json_object *o);

/* step.c */
int  engine_step(dr_session *s, const dr_dist_batch *b, uint64_t step, dr_step_report *out, dr_err *err);
/* --gradient_accumulation_steps: the accumulators (k > 1), at open and close */
int  engine_accum_open(dr_session *s, dr_err *err);
void engine_accum_close(dr_session *s);
/* a micro-step's shares of local replicas lo .. lo + L - 1 (local: their host
 * gradients in form f) accumulated; true on the k-th, local then the update's */
bool engine_accumulate(dr_session *s, const dr_form *f, void *const *local, uint32_t lo, uint32_t L);
/* --clip_semantics=tensorflow under accumulation: on the k-th micro-step each
 * of the L replicas' update shares (local, over divisor d = k*D*R; fast: the
 * float sum of its k gradients, d = k) clipped as its mean, before the
 * collective (nothing when the run does not clip per replica) */
int  engine_accum_clip(dr_session *s, void *const *local, uint32_t L, uint32_t d, dr_err *err);
/* bytes from one emulated device to another (a copy within one is free) */
void engine_count(dr_strategy *st, uint32_t from, uint32_t to, size_t bytes);
/* the replica's n examples gathered on the host and uploaded, rows - n of zero padding after them */
int  engine_stage(dr_session *s, uint32_t r, const uint32_t *ids, uint32_t n, uint32_t pad, dr_err *err);
void engine_report(dr_session *s, dr_step_report *out);
/* fn(s, r, arg, err) for the n replicas r = lo .. lo + n - 1, side by side
 * on the OpenMP team; a single replica outside any parallel region (step.c
 * says why). The first failing replica's code and message. */
typedef int (*engine_replica_fn)(dr_session *s, uint32_t r, void *arg, dr_err *err);
int  engine_each_replica(dr_session *s, uint32_t lo, uint32_t n, engine_replica_fn fn, void *arg, dr_err *err);
/* Memory for one of this process's replicas (place: 0-based here) on its
 * device: a backend with several devices or queues places it (alloc_on). */
int  engine_alloc_at(dr_session *s, uint32_t place, size_t bytes, dr_buffer **out, dr_err *err);
/* an engine_replica_fn: replica r applies its own grad buffer, divided by
 * *(uint32_t *)arg, to its own variables */
int  engine_apply_own(dr_session *s, uint32_t r, void *divisor_u32, dr_err *err);
/* The host arrays the comm reduces for replicas lo .. lo + L - 1: their
 * grad buffers, or (device memory) the staging buffers they are downloaded
 * to; and, after the collective, the total applied by every one of them
 * (staged: uploaded once to replica lo's grad). */
int  engine_grads_local(dr_session *s, uint32_t lo, uint32_t L, void **local, dr_err *err);
int  engine_apply_total(dr_session *s, uint32_t w, uint32_t lo, uint32_t L, void *const *local, uint32_t d,
                        dr_err *err);
/* Worker w's update reads total over divisor: noted in s->applied by the
 * first worker of this process (every worker applies the same total). */
void engine_note_applied(dr_session *s, uint32_t w, const dr_buffer *total, uint32_t divisor);

/* round_once.c: whether worker_reduce's collective and apply of gradients
 * in form f go through the comm's all_reduce_round, and that path: the
 * totals over d rounded once by the comm, then every local replica's
 * optimizer on those floats (an overflowed element sets s->overflow, as a
 * compact total does). */
bool engine_rounds_once(const dr_session *s, const dr_form *f, bool staged);
int  engine_reduce_round(dr_session *s, uint32_t w, void *const *local, uint32_t d, dr_err *err);
/* --trajectory's gradient/ of a step whose total the comm rounded: the
 * floats its apply read into grads (P), true; false for any other step */
bool engine_rounded_applied(const dr_session *s, float *grads);

/* ranks.c: the MPI variant's agreement and report across ranks. After
 * every local replica computed: each rank's verdict (rc, message), its
 * replicas' losses, correct counts and the example ids each one staged go
 * to every rank (the comm's all_gather); a rank that failed fails every
 * rank alike, before anyone enters the reduction. */
/* How the engine opens any backend: the plan's model, optimizer and device
 * selection, for `places` replicas in this process (engine.c). */
dr_backend_params engine_backend_params(const dr_run_plan *plan, dr_numerics num, uint32_t places);

int  engine_ranks_open(dr_session *s, dr_err *err);
void engine_ranks_close(dr_session *s);
/* replica r's staged ids (r local) */
void engine_ranks_staged(dr_session *s, uint32_t r, const uint32_t *ids, uint32_t n);
int  engine_ranks_agree(dr_session *s, int rc, const dr_err *local_err, dr_err *err);
/* the step's loss partials (merged into *total, or the fast float sum in
 * replica order into *ftotal), correct predictions and the ids every
 * replica staged (*ids, off[0..R]), from every rank's record */
void engine_ranks_totals(dr_session *s, dr_acc *total, float *ftotal, uint64_t *correct, const uint32_t **ids,
                         uint32_t *off);
/* every rank's variables hash alike (summary.json's replicas_in_sync) */
bool engine_ranks_in_sync(dr_session *s, uint64_t my_hash);

/* mixed.c: --dtype_policy=mixed_* in the engine (its header comment says
 * what is built and what each step does) */
int  engine_mixed_supports(const char *name, const dr_run_plan *plan, const dr_backend_ops *bo, dr_err *err);
int  engine_mixed_open(dr_session *s, dr_err *err);
void engine_mixed_close(dr_session *s);
/* --l2's loss term: l2 * round(the exact sum of the regularized kernels'
 * squares), 0 without --l2 (the mixed step's reported loss, evaluate's) */
float engine_l2_loss(const dr_model_spec *m, const float *w);
/* replica r's mixed kernel (instead of forward, loss_grad and share) */
int  engine_mixed_compute(dr_session *s, uint32_t r, uint32_t n, dr_err *err);
/* worker w's partials before the collective (tensorflow: rounded to c) */
void engine_mixed_before_reduce(dr_session *s, uint32_t w, void *const *local, uint32_t L);
/* worker w's all-reduced total: rounded, the skip decision, unscaled, applied */
int  engine_mixed_apply(dr_session *s, uint32_t w, const dr_acc *total, dr_err *err);
/* a model beyond Dense (graph.c): replica r's pass in the compute dtype, with
 * this step's loss scale (float32 where the run has no mixed step), and its
 * share instead of the backend's (the loss times its multiplier) */
void engine_mixed_graph_rt(const dr_session *s, uint32_t r, dr_graph_rt *rt);
int  engine_mixed_graph_share(dr_session *s, uint32_t r, dr_err *err);
/* before each step: the resume check of --gradient_accumulation_steps (mixed.c) */
int  engine_mixed_begin(dr_session *s, dr_err *err);
bool engine_mixed_part_finite(const dr_session *s, const dr_acc *part);
/* the loss scale (NULL: float32), every local worker's copy alike, a restored one */
const dr_loss_scale *engine_mixed_state(const dr_session *s);
bool engine_mixed_agree(const dr_session *s);
void engine_mixed_restore(dr_session *s, const dr_loss_scale *ls);
/* The gradient the last mixed step applied (P floats, unscaled: what the
 * optimizer read), for --trajectory; false when the loss scale skipped it. */
bool engine_mixed_applied(const dr_session *s, float *grads);
void engine_mixed_summarize(const dr_session *s, json_object *o);
/* the step's loss scale and skip, for its metrics line */
void engine_mixed_report(const dr_session *s, dr_step_report *out);

/* engine_tpu.c */
/* the cores a replica's maps are split over under tpu (--input_partition_dims), else 1 */
uint32_t engine_tpu_partition_tiles(const dr_run_plan *plan);
int  engine_tpu_open(dr_session *s, dr_strategy_options *opt, dr_err *err);
int  engine_tpu_buffers(dr_session *s, dr_err *err);
int  engine_tpu_step(dr_session *s, dr_step_report *out, dr_err *err);
void engine_tpu_close(dr_session *s);
json_object *engine_tpu_report(const dr_session *s);

/* evaluate's and predict's forward pass (evaluate.c) on the OpenMP backend
 * (the openmp and mpi variants' infer) and on the OpenCL one (opencl's) */
extern const dr_infer_ops engine_infer_openmp, engine_infer_opencl, engine_infer_mpi;
/* engine.c's thread policy (--threads, OpenBLAS on one thread while a run is
 * open): s's omp_saved, omp_threads and threads_set */
void engine_threads_enter(dr_session *s, int threads);
void engine_threads_leave(dr_session *s);

#endif
