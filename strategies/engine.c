/* distref engine — the engine's variants: opening a run and the tables.
 *
 * A run builds the strategy's emulated devices (core), opens the backend
 * (devices/cpu/openmp_backend.c, or devices/opencl/opencl_backend.c for
 * --variant=opencl) and the comm's endpoints (devices/comm/comm_threads.c: one
 * per worker; devices/mpi/comm_mpi.c for --variant=mpi: this rank's), and
 * allocates the tensors of the replicas this process holds on the backend.
 * The step is step.c's (tpu: engine_tpu.c), evaluate's evaluate.c. The three
 * variants share all here but the small entry points at the end that name
 * their backend and comm. A backend whose buffers are device memory
 * (host_ptr NULL) gets host staging buffers for the comm (step.c). */
#include "strategies/engine_internal.h"
#include "strategies/ps_mpi_internal.h"
#include "distref/opencl.h"
#include "distref/run_log.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void openblas_set_num_threads(int);   /* OpenBLAS extensions */
int  openblas_get_num_threads(void);

/* ---- the thread policy ---------------------------------------------------
 * One policy for the whole engine: OpenMP threads x OpenBLAS threads <=
 * cores. The engine's parallelism is OpenMP's (replicas side by side, and
 * loops around each BLAS call), so while a run is open OpenBLAS runs on one
 * thread: OpenBLAS's own threads would spin against OpenMP's waiting team
 * (measured: exact one_device on 2 threads went from ~1,400 to ~3,800
 * examples/s with this). --threads=T sets the OpenMP team size of the
 * thread that opened the run (omp_set_num_threads is per thread); worker
 * threads (multi_worker_mirrored) each take T / W, at least 1, so W workers
 * together stay within T. Both process-wide settings changed here are
 * restored when the last open run closes: the caller's OpenBLAS thread count
 * and the opening thread's OpenMP team size (evaluate.c's runs too). The
 * count of open runs below is process-wide state on purpose, the one
 * exception besides the default strategy: it mirrors OpenBLAS's thread count,
 * itself one setting per process, so that concurrent runs restore it once. */
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned threads_users;
static int threads_blas_saved;

void engine_threads_enter(dr_session *s, int threads)
{
    s->omp_saved = omp_get_max_threads();
    if (threads > 0) omp_set_num_threads(threads);
    s->omp_threads = omp_get_max_threads();
    s->threads_set = true;
    pthread_mutex_lock(&threads_lock);
    if (threads_users++ == 0) {
        threads_blas_saved = openblas_get_num_threads();
        openblas_set_num_threads(1);
    }
    pthread_mutex_unlock(&threads_lock);
}

void engine_threads_leave(dr_session *s)
{
    if (!s->threads_set) return;
    s->threads_set = false;
    omp_set_num_threads(s->omp_saved);
    pthread_mutex_lock(&threads_lock);
    if (--threads_users == 0) openblas_set_num_threads(threads_blas_saved);
    pthread_mutex_unlock(&threads_lock);
}

static int supports_on(const char *name, const dr_run_plan *plan, const dr_backend_ops *bo, dr_err *err);
static int model_supported(const dr_run_plan *plan, const dr_backend_ops *bo, dr_err *err);

static int omp_supports(const dr_run_plan *plan, dr_err *err)
{
    return supports_on("openmp", plan, dr_backend_openmp(), err);
}

static int ocl_supports(const dr_run_plan *plan, dr_err *err)
{
    return supports_on("opencl", plan, dr_backend_opencl(), err);
}

/* The MPI variant: the same engine, one rank per worker. Strategies of one
 * worker run with `mpirun -np 1` (the comm checks the world's size). */
static int mpi_supports(const dr_run_plan *plan, dr_err *err)
{
    int rc = model_supported(plan, dr_backend_openmp(), err);
    if (rc) return rc;
    if (plan->spec.kind == DR_STRATEGY_TPU)
        return dr_fail(err, DR_EUNSUPPORTED, "--variant=mpi: the tpu strategy runs in one process; use "
                       "--variant=openmp or ref");
    if (plan->spec.kind == DR_STRATEGY_PARAMETER_SERVER)
        return engine_mixed_supports("mpi", plan, dr_backend_openmp(), err) ? err->code : engine_ps_supports(plan, err);
    return supports_on("mpi", plan, dr_backend_openmp(), err);
}

/* The model's layers, asked of the backend before anything else: a model
 * it has no kernels for is refused at open, whatever the strategy. */
static int model_supported(const dr_run_plan *plan, const dr_backend_ops *bo, dr_err *err)
{
    dr_backend_query q;
    memset(&q, 0, sizeof q);
    q.strategy = DR_STRATEGY_ONE_DEVICE;
    q.numerics = DR_NUMERICS_EXACT;
    q.num_replicas = 1;
    q.tiles = 1;
    q.layer_kinds = dr_model_layer_kinds(&plan->exp.model);
    return q.layer_kinds == 1u << DR_LAYER_DENSE ? DR_OK : bo->supports(&q, err);
}

static int supports_on(const char *name, const dr_run_plan *plan, const dr_backend_ops *bo, dr_err *err)
{
    dr_backend_query q;
    int rc;
    if ((rc = model_supported(plan, bo, err))) return rc;
    memset(&q, 0, sizeof q);
    q.strategy = plan->spec.kind;
    q.numerics = plan->exact ? DR_NUMERICS_EXACT : DR_NUMERICS_FAST;
    q.num_replicas = 1;
    q.tiles = engine_tpu_partition_tiles(plan);
    q.layer_placement = plan->cfg->layer_devices[0] != 0;
    q.layer_kinds = dr_model_layer_kinds(&plan->exp.model);
    if ((rc = engine_mixed_supports(name, plan, bo, err))) return rc;
    if (plan->spec.kind == DR_STRATEGY_PARAMETER_SERVER)
        return dr_fail(err, DR_EUNSUPPORTED, "--variant=%s: parameter_server runs in the reference and under mpirun "
                       "only; use --variant=ref, or --variant=mpi under mpirun", name);
    if (q.layer_placement)
        return dr_fail(err, DR_EUNSUPPORTED, "--variant=%s: --layer_devices (model parallelism) runs in the "
                       "reference only; use --variant=ref", name);
    if (plan->num_workers > ENGINE_MAX_WORKERS && strcmp(name, "mpi") != 0)
        return dr_fail(err, DR_EUNSUPPORTED, "--variant=%s: %u workers; the threads comm runs at most %d",
                       name, plan->num_workers, ENGINE_MAX_WORKERS);
    if ((rc = bo->supports(&q, err))) return rc;
    if (bo->available) {   /* the devices it would open are on this machine */
        const dr_strategy_spec *sp = &plan->spec;
        uint32_t gpus = sp->num_gpus > 0 ? (uint32_t)sp->num_gpus : 1;
        uint32_t places = sp->kind == DR_STRATEGY_MIRRORED || sp->kind == DR_STRATEGY_CENTRAL_STORAGE ? gpus
                          : sp->kind == DR_STRATEGY_MULTI_WORKER_MIRRORED ? plan->num_workers * gpus : 1;
        dr_backend_params p = engine_backend_params(plan, q.numerics, places);
        return bo->available(&p, err);
    }
    return DR_OK;
}

dr_backend_params engine_backend_params(const dr_run_plan *plan, dr_numerics num, uint32_t places)
{
    dr_backend_params p = {
        .model = &plan->exp.model,
        .optimizer = &plan->exp.optimizer,
        .numerics = num,
        .places = places,
        .platform = plan->cfg->opencl_platform,
        .devices = plan->cfg->opencl_device,
        .mapping = plan->cfg->opencl_mapping,
    };
    return p;
}

static dr_comm_alg comm_alg(const dr_strategy *st)
{
    dr_cross_device_op op = st->spec.cross_device_op;
    if (op == DR_XDEV_DEFAULT) op = st->spec.num_gpus ? DR_XDEV_NCCL : DR_XDEV_REDUCTION_TO_ONE_DEVICE;
    if (st->spec.kind == DR_STRATEGY_TPU) return DR_COMM_TORUS;
    if (op == DR_XDEV_HIERARCHICAL_COPY) return DR_COMM_HIERARCHICAL;
    if (op == DR_XDEV_REDUCTION_TO_ONE_DEVICE) return DR_COMM_ONE_DEVICE;
    return DR_COMM_RING;
}

/* multi_worker_mirrored's CommunicationImplementation across ranks: NCCL
 * is the MPI library's own collective, RING distref's ring, AUTO the
 * comm's choice (distref/comm.h). */
static dr_comm_ranks_alg ranks_alg(const dr_strategy *st)
{
    if (st->spec.cross_device_op == DR_XDEV_NCCL) return DR_COMM_RANKS_NATIVE;
    if (st->spec.cross_device_op == DR_XDEV_RING) return DR_COMM_RANKS_RING;
    return DR_COMM_RANKS_AUTO;
}

/* Memory for one of this process's replicas (place: 0-based here) on its
 * device: a backend with several devices or queues places it (alloc_on). */
int engine_alloc_at(dr_session *s, uint32_t place, size_t bytes, dr_buffer **out, dr_err *err)
{
    return s->bo->alloc_on ? s->bo->alloc_on(s->be, place, bytes, out, err) : s->bo->alloc(s->be, bytes, out, err);
}

static int alloc_replica(dr_session *s, uint32_t r, dr_err *err)
{
    const dr_backend_ops *b = s->bo;
    dr_replica_bufs *rb = &s->rb[r];
    size_t P = s->plan->P, f = s->data->features, out = s->plan->exp.model.layer[s->plan->exp.model.nlayers - 1].out;
    bool holds = s->strat.spec.kind != DR_STRATEGY_CENTRAL_STORAGE;
    uint32_t place = r - s->wlo * s->L;   /* the backend's replica number in this process */
    int rc;
    if ((rc = engine_alloc_at(s, place, P * sizeof(float), &rb->params, err)) ||
        (holds && (rc = engine_alloc_at(s, place, P * (size_t)s->plan->nslots * sizeof(float) + 1, &rb->slots, err))) ||
        (rc = engine_alloc_at(s, place, P * dr_grad_bytes(s->num), &rb->grad, err)) ||
        (rc = engine_alloc_at(s, place, s->esz, &rb->loss, err)) ||
        (rc = engine_alloc_at(s, place, (size_t)s->rows * f * sizeof(float) + 1, &rb->x, err)) ||
        (s->data->labels && (rc = engine_alloc_at(s, place, s->rows + 1, &rb->labels, err))) ||
        (s->data->targets && (rc = engine_alloc_at(s, place, (size_t)s->rows * out * sizeof(float) + 1, &rb->targets, err))))
        return rc;
    if (!s->tpu.on) {   /* the emulated device's capacity (--gpu_memory_mb); tpu cores reserve in engine_tpu.c */
        uint64_t bytes = P * (sizeof(float) * (1 + (holds ? (uint64_t)s->plan->nslots : 0)) + s->esz) +
                         s->esz + (uint64_t)s->rows * (f * sizeof(float) + (s->data->labels ? 1 : 0) +
                         (s->data->targets ? out * sizeof(float) : 0));
        if ((rc = dr_device_reserve(&s->strat.device[s->strat.replica_device[r]], bytes, err)))
            return dr_fail_wrap(err, "replica %u's variables, gradients and batch", r);
    }
    return b->replica_open(s->be, rb, s->rows, err);
}

static void engine_close(dr_session *s)
{
    if (s->ps) { engine_ps_close(s); return; }
    for (uint32_t r = 0; s->be && r < s->R; r++) {
        dr_replica_bufs *rb = &s->rb[r];
        dr_buffer *bufs[] = { rb->params, rb->slots, rb->grad, rb->loss, rb->x, rb->labels, rb->targets,
                              s->full_grad[r] };
        if (rb->scratch) s->bo->replica_close(s->be, rb);
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) if (bufs[i]) s->bo->release(s->be, bufs[i]);
    }
    if (s->be) {
        if (s->var) s->bo->release(s->be, s->var);
        if (s->var_slots) s->bo->release(s->be, s->var_slots);
        if (s->central) s->bo->release(s->be, s->central);
        if (s->full_central) s->bo->release(s->be, s->full_central);
        engine_tpu_close(s);
        s->bo->close(s->be);
    }
    engine_ranks_close(s);
    engine_accum_close(s);
    engine_mixed_close(s);
    engine_graph_close(s);
    if (s->neps) s->co->close(s->ep, s->neps);
    engine_threads_leave(s);
    free(s->host_x); free(s->host_labels); free(s->host_targets); free(s->arranged); free(s->rounded);
    for (uint32_t r = 0; r < DR_MAX_DEVICES - 1; r++) free(s->stage[r]);
    free(s->stage_central);
    free(s);
}

static int set_all(dr_session *s, const float *params, const float *slots, dr_err *err)
{
    size_t P = s->plan->P, S = P * (size_t)s->plan->nslots;
    int rc = DR_OK;
    if (s->var) {
        if ((rc = s->bo->upload(s->be, s->var, 0, params, P * sizeof(float), err))) return rc;
        return S ? s->bo->upload(s->be, s->var_slots, 0, slots, S * sizeof(float), err) : DR_OK;
    }
    for (uint32_t r = 0; rc == DR_OK && r < s->R; r++) {   /* mirrored: every replica its own copy */
        bool mine = r >= s->wlo * s->L && r < s->whi * s->L;   /* (every process counts every copy) */
        if (mine) rc = s->bo->upload(s->be, s->rb[r].params, 0, params, P * sizeof(float), err);
        if (mine && rc == DR_OK && S) rc = s->bo->upload(s->be, s->rb[r].slots, 0, slots, S * sizeof(float), err);
        if (r > 0) {
            engine_count(&s->strat, s->strat.replica_device[0], s->strat.replica_device[r], (P + S) * sizeof(float));
        }
    }
    return rc;
}

/* Exact gradients in compact accumulators (distref/cacc.h: 32 bytes a
 * parameter instead of 168, the same bits) where the backend can switch
 * forms (every comm reduces every form); a step whose total overflows is
 * redone with full accumulators (step.c). Not for the tpu strategy, whose
 * layer-0 tiles and torus rings carry dr_acc. */
static dr_numerics gradient_numerics(const dr_session *s, dr_numerics num)
{
    dr_backend_query q;
    dr_err ignored;
    if (num != DR_NUMERICS_EXACT || s->tpu.on || s->plan->cfg->full_accumulators || !s->bo->set_numerics ||
        s->plan->cfg->mixed.compute != DR_DTYPE_F32)
        return num;
    memset(&q, 0, sizeof q);
    q.strategy = s->strat.spec.kind;
    q.numerics = DR_NUMERICS_EXACT_COMPACT;
    q.num_replicas = s->L;
    q.tiles = 1;
    q.layer_kinds = dr_model_layer_kinds(&s->plan->exp.model);
    return s->bo->supports(&q, &ignored) == DR_OK ? DR_NUMERICS_EXACT_COMPACT : num;
}

/* The comm's endpoints and the workers whose replicas this process holds:
 * every one (threads), or its rank's (MPI). */
static int open_comm(dr_session *s, dr_err *err)
{
    const dr_run_plan *plan = s->plan;
    dr_comm_config cc;
    int rc;
    memset(&cc, 0, sizeof cc);
    cc.num_ranks = s->W;
    cc.local_replicas = s->L;
    cc.alg = comm_alg(&s->strat);
    cc.ranks_alg = ranks_alg(&s->strat);
    cc.num_packs = s->strat.spec.num_packs;
    cc.tensor_len = plan->tensor_len;
    cc.ntensors = plan->ntensors;
    cc.strategy = &s->strat;
    cc.timeout_s = plan->cfg->collective_timeout;
    if ((rc = s->co->open(&cc, s->ep, &s->neps, err))) return rc;
    s->wlo = s->neps == s->W ? 0 : s->co->rank(s->ep[0]);
    s->whi = s->neps == s->W ? s->W : s->wlo + 1;
    /* MPI ranks, the default algorithm: the comm may round the totals (round_once.c) */
    s->round_once = s->neps < s->W && cc.ranks_alg == DR_COMM_RANKS_AUTO && s->co->all_reduce_round;
    return DR_OK;
}

/* The replicas' buffers on the backend, host staging for a backend whose
 * buffers are device memory, central_storage's variable device, and the
 * host buffers a step stages its batch through. */
static int open_buffers(dr_session *s, dr_err *err)
{
    const dr_run_plan *plan = s->plan;
    size_t f = s->data->features, out0 = plan->exp.model.layer[plan->exp.model.nlayers - 1].out;
    bool central = s->strat.spec.kind == DR_STRATEGY_CENTRAL_STORAGE;
    int rc;
    for (uint32_t r = s->wlo * s->L; r < s->whi * s->L; r++)
        if ((rc = alloc_replica(s, r, err))) return rc;
    if (!s->bo->host_ptr(s->rb[s->wlo * s->L].grad)) {   /* device memory: host staging for the comm */
        bool ok = true;
        for (uint32_t r = s->wlo * s->L; ok && r < s->whi * s->L; r++)
            ok = (s->stage[r] = calloc(plan->P ? plan->P : 1, s->esz)) != NULL;
        if (ok && central) ok = (s->stage_central = calloc(plan->P ? plan->P : 1, s->esz)) != NULL;
        if (!ok) return dr_fail(err, DR_ENOMEM, "out of host memory for the gradients' staging buffers");
    }
    if (central &&
        ((rc = s->bo->alloc(s->be, plan->P * sizeof(float), &s->var, err)) ||
         (rc = s->bo->alloc(s->be, plan->P * (size_t)plan->nslots * sizeof(float) + 1, &s->var_slots, err)) ||
         (rc = s->bo->alloc(s->be, plan->P * dr_grad_bytes(s->num), &s->central, err)) ||
         (rc = dr_device_reserve(&s->strat.device[s->strat.variable_device],
                                 plan->P * (sizeof(float) * (1 + (uint64_t)plan->nslots) + s->esz), err))))
        return rc;
    s->host_x = malloc((size_t)s->rows * f * sizeof(float) + 1);
    s->host_labels = malloc(s->rows + 1);
    s->host_targets = malloc((size_t)s->rows * out0 * sizeof(float) + 1);
    s->arranged = malloc((size_t)plan->G * sizeof(uint32_t) + 4);
    if (!s->host_x || !s->host_labels || !s->host_targets || !s->arranged)
        return dr_fail(err, DR_ENOMEM, "out of host memory for the staging buffers");
    return DR_OK;
}

static int open_with(const dr_run_plan *plan, const dr_dataset *data, const dr_backend_ops *bo,
                     const dr_comm_ops *co, dr_session **out, dr_err *err)
{
    dr_session *s = calloc(1, sizeof *s);
    dr_strategy_spec spec = plan->spec;
    dr_strategy_options sopt = plan->sopt;
    dr_backend_params bp;
    float *init = NULL;
    int rc;
    if (!s) return dr_fail(err, DR_ENOMEM, "out of host memory for the run");
    s->plan = plan;
    s->cfg = plan->cfg;
    s->data = data;
    s->bo = bo;
    s->co = co;
    /* the mixed step runs its exact kernels whatever --numerics (mixed.c) */
    s->num = plan->exact || plan->cfg->mixed.compute != DR_DTYPE_F32 ? DR_NUMERICS_EXACT : DR_NUMERICS_FAST;
    s->esz = dr_sum_bytes(s->num);
    engine_threads_enter(s, plan->cfg->threads);
    if (spec.kind == DR_STRATEGY_TPU && (rc = engine_tpu_open(s, &sopt, err))) goto fail;
    if ((rc = dr_strategy_create(&spec, &sopt, &s->strat, err))) goto fail;
    s->R = s->strat.num_replicas;
    s->W = s->strat.num_workers ? s->strat.num_workers : 1;
    s->L = s->R / s->W;
    s->rows = (plan->G + s->R - 1) / s->R;
    if (s->tpu.on && plan->G % s->R) {
        rc = dr_fail(err, DR_EUSAGE, "--global_batch_size=%u: the tpu strategy needs static shapes, "
                     "the same batch on each of its %u replicas; give a multiple of %u", plan->G, s->R, s->R);
        goto fail;
    }
    if (plan->unsharded) s->rows = plan->G;   /* a worker's own stream may fill one replica */
    s->num = gradient_numerics(s, s->num);
    if ((rc = open_comm(s, err)) || (rc = engine_graph_open(s, err))) goto fail;
    bp = engine_backend_params(plan, s->num, (s->whi - s->wlo) * s->L);
    if ((rc = s->bo->open(&bp, &s->be, err)) || (rc = open_buffers(s, err))) goto fail;
    if (s->whi - s->wlo < s->W && (rc = engine_ranks_open(s, err))) goto fail;
    if (s->tpu.on && (rc = engine_tpu_buffers(s, err))) goto fail;
    if ((rc = engine_accum_open(s, err)) || (rc = engine_mixed_open(s, err))) goto fail;
    if (!(init = calloc(plan->P * (size_t)(1 + plan->nslots) + 1, sizeof(float)))) {
        rc = dr_fail(err, DR_ENOMEM, "out of host memory for the initial variables");
        goto fail;
    }
    dr_model_init(&plan->exp.model, plan->cfg->seed, init);
    if ((rc = set_all(s, init, init + plan->P, err))) goto fail;
    free(init);
    *out = s;
    return DR_OK;
fail:
    free(init);
    engine_close(s);
    return rc;
}

static int omp_open(const dr_run_plan *plan, const dr_dataset *data, dr_session **out, dr_err *err)
{
    return open_with(plan, data, dr_backend_openmp(), dr_comm_threads(), out, err);
}

static int ocl_open(const dr_run_plan *plan, const dr_dataset *data, dr_session **out, dr_err *err)
{
    return open_with(plan, data, dr_backend_opencl(), dr_comm_threads(), out, err);
}

static int mpi_open(const dr_run_plan *plan, const dr_dataset *data, dr_session **out, dr_err *err)
{
    if (plan->spec.kind == DR_STRATEGY_PARAMETER_SERVER) return engine_ps_open(plan, data, out, err);
    return open_with(plan, data, dr_backend_openmp(), dr_comm_mpi(), out, err);
}

static const dr_strategy *engine_strategy(const dr_session *s) { return &s->strat; }

static int engine_get(dr_session *s, float *params, float *slots, dr_err *err)
{
    size_t P = s->plan->P, S = P * (size_t)s->plan->nslots;
    uint32_t r0 = s->wlo * s->L;   /* this process's first replica */
    dr_buffer *p = s->var ? s->var : s->rb[r0].params, *sl = s->var ? s->var_slots : s->rb[r0].slots;
    int rc;
    if (s->ps) return engine_ps_get(s, params, slots, err);
    rc = s->bo->sync(s->be, err);
    if (rc == DR_OK) rc = s->bo->download(s->be, params, p, 0, P * sizeof(float), err);
    if (rc == DR_OK && S) rc = s->bo->download(s->be, slots, sl, 0, S * sizeof(float), err);
    return rc;
}

/* The gradient the last step's update read: the backend's applied_grad of
 * the total it applied (step.c notes it), or *applied false. */
static int engine_gradients(dr_session *s, float *grads, bool *applied, dr_err *err)
{
    int rc;
    *applied = false;
    if (s->ps) return dr_fail(err, DR_EUNSUPPORTED, "parameter_server: its gradients are applied per worker update");
    if (engine_mixed_state(s)) {   /* the mixed step applies host floats of its own (mixed.c) */
        *applied = engine_mixed_applied(s, grads);
        return DR_OK;
    }
    if ((*applied = engine_rounded_applied(s, grads))) return DR_OK;   /* the comm rounded it (round_once.c) */
    if (!s->applied.total) return DR_OK;
    if (!s->bo->applied_grad)
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: the %s backend does not hand back the gradient it "
                       "applied (applied_grad)", s->bo->name);
    if ((rc = s->bo->sync(s->be, err)) ||
        (rc = s->bo->applied_grad(s->be, s->applied.total, s->applied.num, s->applied.divisor, grads, err)))
        return rc;
    *applied = true;
    return DR_OK;
}

static int engine_set(dr_session *s, const float *params, const float *slots, dr_err *err)
{
    return set_all(s, params, slots, err);
}

/* Mixed precision's loss scale: every local worker holds the same copy (mixed.c). */
static int engine_get_loss_scale(dr_session *s, dr_loss_scale *out, dr_err *err)
{
    const dr_loss_scale *ls = engine_mixed_state(s);
    if (!ls) return dr_fail(err, DR_ESTATE, "the run has no mixed step");
    *out = *ls;
    return DR_OK;
}

static int engine_set_loss_scale(dr_session *s, const dr_loss_scale *ls, dr_err *err)
{
    if (!engine_mixed_state(s)) return dr_fail(err, DR_ESTATE, "the run has no mixed step");
    engine_mixed_restore(s, ls);
    return DR_OK;
}

static int engine_step_fn(dr_session *s, const dr_dist_batch *b, uint64_t step, dr_step_report *out, dr_err *err)
{
    int rc = engine_step(s, b, step, out, err);
    s->steps += rc == DR_OK;
    return rc;
}

/* Mirrored replicas must hold the same variables after every step: this
 * process's replicas compared, and across ranks a hash of them (collective
 * under MPI: every rank summarizes). */
static bool replicas_identical(dr_session *s)
{
    size_t P = s->plan->P;
    uint32_t r0 = s->wlo * s->L;
    float *a = malloc(P * sizeof(float) + 1), *b = malloc(P * sizeof(float) + 1);
    dr_err err;
    bool same = a && b;
    uint64_t h = 1469598103934665603ull;
    if (same && !s->var && s->bo->download(s->be, a, s->rb[r0].params, 0, P * sizeof(float), &err)) same = false;
    for (uint32_t r = r0 + 1; same && !s->var && r < s->whi * s->L; r++) {
        if (s->bo->download(s->be, b, s->rb[r].params, 0, P * sizeof(float), &err)) same = false;
        else same = memcmp(a, b, P * sizeof(float)) == 0;
    }
    for (size_t i = 0; a && i < P * sizeof(float); i++) h = (h ^ ((const unsigned char *)a)[i]) * 1099511628211ull;
    if (s->ranks) same = engine_ranks_in_sync(s, same ? h : 0) && same;
    free(a); free(b);
    return same;
}

/* A backend with devices of its own (--variant=opencl): the mapping and,
 * per replica of this process, its device (sub-device), queue and the
 * device memory allocated for it. */
static json_object *places_json(dr_session *s)
{
    json_object *o = json_object_new_object(), *a = json_object_new_array();
    uint32_t n = (s->whi - s->wlo) * s->L;
    if (s->bo->mapping_name)
        json_object_object_add(o, "mapping", json_object_new_string(s->bo->mapping_name(s->be)));
    for (uint32_t p = 0; p < n; p++) {
        dr_backend_place pl;
        dr_err err;
        json_object *r;
        if (s->bo->place_of(s->be, p, &pl, &err) != DR_OK) break;
        r = json_object_new_object();
        json_object_object_add(r, "replica", json_object_new_int64((int64_t)(s->wlo * s->L + p)));
        json_object_object_add(r, "device", json_object_new_string(pl.device));
        json_object_object_add(r, "device_index", json_object_new_int(pl.device_index));
        json_object_object_add(r, "subdevice", json_object_new_int(pl.subdevice));
        json_object_object_add(r, "queue", json_object_new_int64(pl.queue));
        json_object_object_add(r, "bytes", json_object_new_int64((int64_t)pl.bytes));
        json_object_object_add(r, "device_memory_bytes", json_object_new_int64((int64_t)pl.capacity));
        json_object_array_add(a, r);
    }
    json_object_object_add(o, "replicas", a);
    return o;
}

static void engine_summarize(dr_session *s, json_object *o)
{
    if (s->ps) { engine_ps_summarize(s, o); return; }
    json_object_object_add(o, "replicas_in_sync", json_object_new_boolean(replicas_identical(s)));
    json_object_object_add(o, "devices", dr_devices_json(&s->strat));
    json_object_object_add(o, "backend", json_object_new_string(s->bo->name));
    json_object_object_add(o, "comm", json_object_new_string(s->co->name));
    if (s->num != DR_NUMERICS_FAST) {   /* exact: which accumulators held the gradients */
        json_object_object_add(o, "exact_accumulator",
                               json_object_new_string(s->num == DR_NUMERICS_EXACT_COMPACT ? "compact" : "full"));
        json_object_object_add(o, "exact_fallback_steps", json_object_new_int64((int64_t)s->fallback_steps));
    }
    if (s->tpu.on) json_object_object_add(o, "tpu", engine_tpu_report(s));
    engine_mixed_summarize(s, o);
    if (s->bo->place_of) json_object_object_add(o, s->bo->name, places_json(s));
}

const dr_variant dr_variant_openmp = {
    .name = "openmp",
    .about = "the engine on the OpenMP CPU backend and the threads comm: exact (the reference's bits) or fast",
    .launcher = "",
    .supports = omp_supports,
    .open = omp_open,
    .strategy = engine_strategy,
    .step = engine_step_fn,
    .get_variables = engine_get,
    .set_variables = engine_set,
    .summarize = engine_summarize,
    .close = engine_close,
    .get_gradients = engine_gradients,
    .get_loss_scale = engine_get_loss_scale,
    .set_loss_scale = engine_set_loss_scale,
    .infer = &engine_infer_openmp,
};

const dr_variant dr_variant_opencl = {
    .name = "opencl",
    .about = "the engine on an OpenCL device (PoCL, a GPU) and the threads comm over host staging: exact or fast",
    .launcher = "",
    .supports = ocl_supports,
    .open = ocl_open,
    .strategy = engine_strategy,
    .step = engine_step_fn,
    .get_variables = engine_get,
    .set_variables = engine_set,
    .summarize = engine_summarize,
    .close = engine_close,
    .get_gradients = engine_gradients,
    .get_loss_scale = engine_get_loss_scale,
    .set_loss_scale = engine_set_loss_scale,
    .infer = &engine_infer_opencl,
};

/* Rank 0 is the chief: TF_CONFIG's task of id 0 (the chief task, or worker
 * 0), validated against the MPI rank by the CLI. */
static bool mpi_chief(const dr_session *s) { return s->wlo == 0; }

const dr_variant dr_variant_mpi = {
    .name = "mpi",
    .about = "the engine with one MPI rank per worker (multi_worker_mirrored; one-worker strategies with -np 1), "
             "or a chief, worker and ps ranks (parameter_server): exact (the reference's bits) or fast",
    .launcher = "mpirun -np N",
    .supports = mpi_supports,
    .open = mpi_open,
    .strategy = engine_strategy,
    .step = engine_step_fn,
    .get_variables = engine_get,
    .set_variables = engine_set,
    .summarize = engine_summarize,
    .close = engine_close,
    .get_gradients = engine_gradients,
    .get_loss_scale = engine_get_loss_scale,
    .set_loss_scale = engine_set_loss_scale,
    .train = engine_ps_train,
    .chief = mpi_chief,
    .infer = &engine_infer_mpi,   /* the rank's backend on its share of the batches (strategies/evaluate.c) */
};
