/* distref engine — mixed precision with loss scaling in the engine's step
 * (--dtype_policy=mixed_float16 / mixed_bfloat16, --loss_scale,
 * --mixed_reduction; docs/TRAINING_FEATURES.md "Mixed precision").
 *
 *   compute  each replica's mixed kernel on its backend (mixed_loss_grad):
 *            every op rounded once to the compute dtype c, the loss scale
 *            and 1/G inside dz, the weight gradients exact sums;
 *   reduce   the comm's exact all-reduce of the replicas' accumulators;
 *            --mixed_reduction=tensorflow first rounds each replica's
 *            partial to c (as TensorFlow), so the sum is of the R rounded
 *            partials; the total is then rounded once (exact: to c, the
 *            global value whatever R; tensorflow: to float32);
 *   decide   "every element finite", read from that all-reduced, rounded
 *            total: the same value on every worker (thread or MPI rank),
 *            so each worker's copy of the loss scale (core/loss_scale.c,
 *            Keras 3's LossScaleOptimizer) takes the same decision;
 *   apply    skipped (weights, slots, the applied-step count unmoved), or
 *            g / scale in float32, clipped (--clipnorm, --clipvalue,
 *            --global_clipnorm: the backend's clip_f32, exact norms, on the
 *            aggregated unscaled gradient, once per worker), and the
 *            optimizer at the applied-step count on every replica (apply_f32).
 * --gradient_accumulation_steps=k: every micro-step is reduced, checked and
 * skipped or unscaled on its own (Keras 3's order); a finite one's unscaled
 * float32 gradient is added exactly to the worker's accumulator, and the
 * k-th finite one applies RN(sum / k), clipped (ref/mixed_step.c alike).
 * --l2: the float32 gradient of the scaled L2 loss (dr_mixed_l2_term, on the
 * replica's float32 weights: read in place from host memory, or read back
 * after the replica's compute from device memory, opencl) added before the
 * unscale: exact once to the reduced, rounded gradient; tensorflow to each
 * replica's rounded partial (its 1/R share) before the all-reduce (ref alike).
 * The step runs with full exact accumulators (no compact form); under
 * --numerics=fast the kernel (mk.fast) does its GEMMs in float32 where the
 * backend has fast mixed kernels (openmp, opencl), and the reduction stays exact.
 * central_storage: the replicas' accumulators reduced to the variable
 * device (step.c), the one update there on its variables and slots
 * (apply_holders); tpu: the cores' torus all-reduce (engine_tpu.c), every
 * core's copy updated, padding rows masked (the kernel's n real rows).
 * Built where the reference's mixed step is: one_device, mirrored,
 * multi_worker_mirrored, central_storage and tpu (a Dense model without
 * --input_partition_dims; a model beyond Dense also with it:
 * graph_spatial.c's cores, each op rounding on its tile), the
 * global_batch_size reduction, Dense layers
 * (ReLU or linear) under the logits cross-entropy, on a backend with the
 * mixed kernel (openmp, opencl; mpi ranks run openmp's).
 * A model beyond Dense (convolution, pooling, batch norm, dropout): graph.c's
 * lock step with the backend's layer ops rounding to c (graph_ops_mixed:
 * openmp, mpi's ranks), its loss share engine_mixed_graph_share; the
 * reduction rounds BatchNormalization's gamma and beta gradients to float32
 * (float32_bn_grads; --mixed_reduction=tensorflow rounds each replica's
 * gamma and beta partials to float32 too, engine_mixed_before_reduce).
 * --l2 (Conv2D's and Dense's kernels; add_reg_loss from the share),
 * accumulation, --clip_semantics=tensorflow and tpu (engine_tpu.c's
 * step, graph.c's lock step over each replica's real rows, partitioned over
 * its cores' tiles with halos) as with Dense. --numerics=fast: the same
 * roundings, the backend's ops on float32 GEMMs and fixed-order float sums (dr_graph_rt.fast), each
 * replica's gradient still added exactly and reduced exactly.
 * --clip_semantics=tensorflow (needs the tensorflow reduction and the
 * backend's clip_replica_f32): each replica's rounded gradient unscaled and
 * clipped before the all-reduce (clip_replica), no unscale or clip after. The rest is refused at open with the
 * reason.
 */
#include "strategies/engine_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "strategies/seams.h"

struct engine_mixed {
    dr_dtype      c;
    bool          tf;
    dr_loss_scale ls[ENGINE_MAX_WORKERS];      /* each worker's own copy, w - wlo */
    bool          local_finite[ENGINE_MAX_WORKERS];
    float        *g[ENGINE_MAX_WORKERS];       /* the rounded, unscaled gradient of worker w - wlo */
    float        *w[DR_MAX_DEVICES - 1];       /* --l2, device memory: replica r's weights read back */
    dr_acc       *acc[ENGINE_MAX_WORKERS];     /* k > 1: the finite micro-steps' exact sum since the update */
    uint32_t      k;                           /* --gradient_accumulation_steps (1: none) */
    uint64_t      steps;                       /* mixed steps this session ran (resume check) */
    bool          step_updated;                /* the step updated the variables */
    float         step_scale;                  /* this process's first worker: the step's scale, */
    bool          step_skipped;                /*   and whether it skipped (metrics.jsonl) */
};

#define MIXED_CLIP_TF_WHY "--clip_semantics=tensorflow needs --mixed_reduction=tensorflow (Keras 3 unscales and " \
    "clips each replica's own compute-dtype gradient before the all-reduce; the exact reduction rounds only the " \
    "global sum, so there is no replica gradient to clip)"

static const char *mixed_why(const dr_run_plan *p, const dr_backend_ops *bo)
{
    const dr_experiment *e = &p->exp;
    if (!bo->mixed_loss_grad || !bo->apply_f32)
        return "the backend has no mixed kernel (float16/bfloat16 rounding of every op is built for the OpenMP "
               "and OpenCL backends: --variant=openmp, opencl or mpi)";
    if (p->spec.kind == DR_STRATEGY_PARAMETER_SERVER)
        return "Keras 3, whose LossScaleOptimizer distref reproduces, does not support ParameterServerStrategy "
               "(keras-team/keras#18624): there is no loss-scale semantics across asynchronous workers to measure "
               "(the engine's mixed step runs one_device, mirrored, multi_worker_mirrored, central_storage and tpu)";
    if (engine_tpu_partition_tiles(p) > 1 && dr_model_is_dense(&e->model))
        return "--input_partition_dims with a Dense model is not built into it (the partitioned first layer merges "
               "float32 partial sums across a replica's cores; the Dense mixed kernel runs a replica's layers whole "
               "on one core; the models beyond Dense, whose maps are tiled, run it)";
    if (p->divide_by_count || p->divide_locally) return "it needs --loss_reduction=global_batch_size";
    if (e->model.loss != DR_LOSS_XENT_LOGITS) return "it is built for the logits cross-entropy";
    if (e->optimizer.clip.per_replica && !p->cfg->mixed.tf_reduction)
        return MIXED_CLIP_TF_WHY;
    if (e->optimizer.clip.per_replica && !bo->clip_replica_f32)
        return "--clip_semantics=tensorflow is not built into this backend's mixed step (no clip_replica_f32: a "
               "replica's gradient is clipped on the host, built for openmp and mpi)";
    if ((e->optimizer.clip.clipnorm > 0 || e->optimizer.clip.clipvalue > 0 || e->optimizer.clip.global_clipnorm > 0) &&
        !bo->clip_f32)
        return "the backend cannot clip the mixed step's gradient (no clip_f32)";
    if (p->cfg->layer_devices[0]) return "--layer_devices is not built into it";
    if (!dr_model_is_dense(&e->model) && !bo->graph_ops_mixed)   /* with its --numerics=fast forms */
        return "the backend's layer ops for a model beyond Dense (convolution, pooling, batch norm, dropout) have no "
               "float16/bfloat16 roundings (built for openmp, mpi and opencl: use one of them or ref)";
    for (uint32_t l = 0; l < e->model.nlayers; l++)
        if (e->model.layer[l].act == DR_ACT_SOFTMAX) return "a softmax layer is not built into it";
    return NULL;
}

int engine_mixed_supports(const char *name, const dr_run_plan *plan, const dr_backend_ops *bo, dr_err *err)
{
    const char *why;
    if (plan->cfg->mixed.compute == DR_DTYPE_F32) return DR_OK;
    if (!(why = mixed_why(plan, bo))) return DR_OK;
    return dr_fail(err, DR_EUNSUPPORTED, "not supported: --dtype_policy=mixed_%s under --variant=%s with %s: %s",
                   dr_dtype_name(plan->cfg->mixed.compute), name, dr_strategy_kind_name(plan->spec.kind), why);
}

int engine_mixed_open(dr_session *s, dr_err *err)
{
    const dr_mixed_config *mc = &s->cfg->mixed;
    engine_mixed *m;
    if (mc->compute == DR_DTYPE_F32) return DR_OK;
    if (!(m = s->mixed = calloc(1, sizeof *m))) return dr_fail(err, DR_ENOMEM, "out of host memory for the mixed step");
    m->c = mc->compute;
    m->tf = mc->tf_reduction;
    m->k = s->cfg->gradient_accumulation_steps > 1 ? s->cfg->gradient_accumulation_steps : 1;
    for (uint32_t w = 0; w < s->whi - s->wlo; w++) {
        dr_loss_scale_from_config(&m->ls[w], mc);
        if (!(m->g[w] = malloc((s->plan->P ? s->plan->P : 1) * sizeof(float))))
            return dr_fail(err, DR_ENOMEM, "out of host memory for the mixed step's gradient (%zu floats)",
                           (size_t)s->plan->P);
        if (m->k > 1 && !(m->acc[w] = calloc(s->plan->P ? s->plan->P : 1, sizeof(dr_acc))))
            return dr_fail(err, DR_ENOMEM, "out of host memory for the mixed step's accumulated gradient");
    }
    return DR_OK;
}

void engine_mixed_close(dr_session *s)
{
    if (!s->mixed) return;
    for (uint32_t w = 0; w < ENGINE_MAX_WORKERS; w++) { free(s->mixed->g[w]); free(s->mixed->acc[w]); }
    for (uint32_t r = 0; r < DR_MAX_DEVICES - 1; r++) free(s->mixed->w[r]);
    free(s->mixed);
    s->mixed = NULL;
}

/* The float32 weights the L2 term reads: replica r's buffer in place, or
 * the copy read back by engine_mixed_compute (device memory). */
static const float *weights_of(const dr_session *s, uint32_t r)
{
    const float *w = s->bo->host_ptr(s->rb[r].params);
    return w ? w : s->mixed->w[r];
}

/* --l2: the reported loss adds the float32 L2 loss, l2 * RN(exact sum of
 * the kernels' squares), over the shares' common denominator (coef of
 * them), as the float32 step's share does; the gradient's term is added
 * before the unscale (engine_mixed_before_reduce, engine_mixed_apply).
 * w: the replica's float32 weights (every replica holds the same). */
float engine_l2_loss(const dr_model_spec *m, const float *w)
{
    dr_acc sq;
    if (m->l2 == 0.0f) return 0.0f;
    dr_acc_init(&sq);
    for (uint32_t l = 0; l < m->nlayers; l++)
        if (dr_layer_regularized(&m->layer[l]))
            dr_acc_add_dot(&sq, w + dr_model_kernel_offset(m, l), w + dr_model_kernel_offset(m, l),
                           dr_model_kernel_size(m, l));
    return m->l2 * dr_acc_round(&sq);
}

static int add_reg_loss(dr_session *s, uint32_t r, const float *w, dr_err *err)
{
    dr_acc *loss = s->bo->host_ptr(s->rb[r].loss), staged;
    float reg = DR_SEAM_MIXED_REG_LOSS(engine_l2_loss(&s->plan->exp.model, w));
    int rc;
    if (loss) {   /* host memory: in place */
        dr_acc_add_prod(loss, (float)s->coef, reg);
        return DR_OK;
    }
    /* device memory (opencl): the one accumulator read back, added to, written */
    if ((rc = s->bo->download(s->be, &staged, s->rb[r].loss, 0, sizeof staged, err))) return rc;
    dr_acc_add_prod(&staged, (float)s->coef, reg);
    return s->bo->upload(s->be, s->rb[r].loss, 0, &staged, sizeof staged, err);
}

/* --l2: replica r's L2 term into its loss. On device memory the weights
 * the step's L2 term and reported loss read are read back first, before its
 * apply moves them (each replica its own copy: the replicas may run at once). */
static int add_replica_reg_loss(dr_session *s, uint32_t r, dr_err *err)
{
    engine_mixed *m = s->mixed;
    const size_t bytes = s->plan->P * sizeof(float);
    int rc;
    if (!s->bo->host_ptr(s->rb[r].params) && bytes) {
        if (!m->w[r] && !(m->w[r] = malloc(bytes)))
            return dr_fail(err, DR_ENOMEM, "out of host memory for the mixed step's L2 weights (%zu floats)",
                           (size_t)s->plan->P);
        if ((rc = s->bo->download(s->be, m->w[r], s->rb[r].params, 0, bytes, err))) return rc;
    }
    return add_reg_loss(s, r, weights_of(s, r), err);
}

int engine_mixed_compute(dr_session *s, uint32_t r, uint32_t n, dr_err *err)
{
    engine_mixed *m = s->mixed;
    dr_mixed_kernel mk = { m->c, m->ls[r / s->L - s->wlo].scale, s->plan->G, s->mult[r], !s->plan->exact };
    int rc = s->bo->mixed_loss_grad(s->be, &s->rb[r], n, &mk, err);
    return rc || s->plan->exp.model.l2 == 0.0f ? rc : add_replica_reg_loss(s, r, err);
}

void engine_mixed_graph_rt(const dr_session *s, uint32_t r, dr_graph_rt *rt)
{
    if (!s->mixed) return;
    rt->compute = s->mixed->c;
    rt->loss_scale = s->mixed->ls[r / s->L - s->wlo].scale;
    rt->G = s->plan->G;
    rt->fast = !s->plan->exact;   /* the same roundings of float32 GEMMs and sums (distref/backend.h) */
}

/* rb->loss = mult * the exact sum of the per-example losses, as the Dense
 * kernel's (the gradient's scale and 1/G are in its deltas already), plus
 * --l2's loss (the weights in host memory, or read back: opencl). */
int engine_mixed_graph_share(dr_session *s, uint32_t r, dr_err *err)
{
    dr_acc *loss = s->bo->host_ptr(s->rb[r].loss), staged;
    int rc;
    if (s->mult[r] > 1 && loss) dr_acc_mul_u32(loss, s->mult[r]);
    if (s->mult[r] > 1 && !loss) {
        if ((rc = s->bo->download(s->be, &staged, s->rb[r].loss, 0, sizeof staged, err))) return rc;
        dr_acc_mul_u32(&staged, s->mult[r]);
        if ((rc = s->bo->upload(s->be, s->rb[r].loss, 0, &staged, sizeof staged, err))) return rc;
    }
    return s->plan->exp.model.l2 != 0.0f ? add_replica_reg_loss(s, r, err) : DR_OK;
}

/* BatchNormalization's gamma and beta are float32 variables read as they
 * are: their gradients a rounded once to float32, not to c (ref/mixed_graph.c's;
 * a: the exact total, or under --mixed_reduction=tensorflow one replica's
 * partial). Returns whether all of g is finite (the skip decision, over c's
 * values elsewhere and these). */
static int float32_bn_grads(const dr_session *s, const dr_acc *a, float *g)
{
    const dr_model_spec *md = &s->plan->exp.model;
    int fin = 1;
    for (uint32_t l = 0; l < md->nlayers; l++) {
        size_t at = dr_model_kernel_offset(md, l), n = dr_model_layer_params(md, l);
        if (md->layer[l].kind != DR_LAYER_BATCH_NORM) continue;
        for (size_t p = at; p < at + n; p++) g[p] = DR_SEAM_MIXED_BN_GRAD(dr_acc_round(&a[p]), g[p]);
    }
    for (size_t p = 0; p < s->plan->P; p++) fin &= g[p] - g[p] == 0.0f;
    return fin;
}

bool engine_mixed_part_finite(const dr_session *s, const dr_acc *part)
{
    bool fin = true;
    for (size_t p = 0; fin && p < s->plan->P; p++) {
        float v = dr_acc_round_div_dtype(&part[p], 1, s->mixed->c);
        fin = v - v == 0.0f;
    }
    return fin;
}

/* --clip_semantics=tensorflow (Keras 3 under MirroredStrategy, measured by
 * scripts/tf_mixed_clip.py): a finite replica gradient g (rounded to c, its
 * L2 term added) is unscaled in float32 and clipped on its own before the
 * all-reduce, which then sums unscaled, clipped gradients. A non-finite one
 * stays as it is: it reaches the total, and the one skip decision (on the
 * total) skips the step, whatever the clip would have made of it. */
static void clip_replica(dr_session *s, float scale, float *g, long long P)
{
    int fin = 1;
    #pragma omp parallel for schedule(static) reduction(&:fin) if (P >= 4096 && !omp_in_parallel())
    for (long long p = 0; p < P; p++) fin &= g[p] - g[p] == 0.0f;
    if (!fin) return;
    DR_SEAM_MIXED_REPLICA_CLIP_SCALED(s, g);
    for (long long p = 0; p < P; p++) g[p] = DR_SEAM_MIXED_UNSCALE(g[p], scale);
    DR_SEAM_MIXED_REPLICA_CLIP(s, g);
}

void engine_mixed_before_reduce(dr_session *s, uint32_t w, void *const *local, uint32_t L)
{
    const engine_mixed *m = s->mixed;
    const long long P = (long long)s->plan->P;
    DR_SEAM_MIXED_LOCAL_CHECK(s, w - s->wlo, (const dr_acc *)local[0]);
    if (!m->tf) return;
    for (uint32_t k = 0; k < L; k++) {   /* --mixed_reduction=tensorflow: each partial rounded to c first */
        dr_acc *a = local[k];
        float *g = m->g[w - s->wlo];   /* scratch until apply */
        #pragma omp parallel for schedule(static) if (P >= 4096 && !omp_in_parallel())
        for (long long p = 0; p < P; p++) g[p] = dr_acc_round_div_dtype(&a[p], 1, m->c);
        if (!dr_model_is_dense(&s->plan->exp.model))   /* gamma, beta: float32 variables, float32 partials */
            DR_SEAM_MIXED_TF_BN_PARTIAL(float32_bn_grads(s, a, g));
        if (s->plan->exp.model.l2 != 0.0f)   /* this replica's 1/R L2 term on its rounded partial (TensorFlow's) */
            dr_mixed_add_l2(&s->plan->exp.model, weights_of(s, w * L + k),
                            DR_SEAM_MIXED_L2_SCALE(m->ls[w - s->wlo].scale), s->R, g);
        if (s->plan->exp.optimizer.clip.per_replica) clip_replica(s, m->ls[w - s->wlo].scale, g, P);
        #pragma omp parallel for schedule(static) if (P >= 4096 && !omp_in_parallel())
        for (long long p = 0; p < P; p++) {
            dr_acc_init(&a[p]);
            dr_acc_add(&a[p], g[p]);
        }
    }
}

typedef struct apply_arg { const float *g; uint64_t step; } apply_arg;

static int apply_one(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    const apply_arg *a = arg;
    return s->bo->apply_f32(s->be, a->g, a->step, s->rb[r].params, s->rb[r].slots, err);
}

/* The holders of worker w's variables apply g: central_storage's variable
 * device once (its replicas copy the variables in at the next step), else
 * every replica its own copy. */
static int apply_holders(dr_session *s, uint32_t w, const apply_arg *a, dr_err *err)
{
    if (DR_SEAM_MIXED_CENTRAL_HOLDS(s->var))
        return s->bo->apply_f32(s->be, a->g, a->step, s->var, s->var_slots, err);
    return engine_each_replica(s, w * s->L, s->L, apply_one, (void *)a, err);
}

/* k > 1: a finite micro-step's unscaled g added exactly to worker i's sum;
 * true on the k-th (applied: finite micro-steps so far), g = RN(sum / k). */
static bool accumulate_micro(engine_mixed *m, uint32_t i, float *g, long long P, uint64_t applied, uint64_t step)
{
    dr_acc *acc = m->acc[i];
    #pragma omp parallel for schedule(static) if (P >= 4096 && !omp_in_parallel())
    for (long long p = 0; p < P; p++) dr_acc_add(&acc[p], g[p]);
    if (DR_SEAM_MIXED_ACCUM_AT(applied, step) % m->k) return false;
    #pragma omp parallel for schedule(static) if (P >= 4096 && !omp_in_parallel())
    for (long long p = 0; p < P; p++) {
        g[p] = dr_acc_round_div(&acc[p], m->k);
        dr_acc_init(&acc[p]);
    }
    return true;
}

int engine_mixed_apply(dr_session *s, uint32_t w, const dr_acc *total, dr_err *err)
{
    engine_mixed *m = s->mixed;
    const uint32_t i = w - s->wlo;
    const long long P = (long long)s->plan->P;
    float *g = m->g[i], scale = m->ls[i].scale;
    int fin = 1;
    apply_arg a;
    #pragma omp parallel for schedule(static) reduction(&:fin) if (P >= 4096 && !omp_in_parallel())
    for (long long p = 0; p < P; p++) {
        g[p] = m->tf ? dr_acc_round(&total[p]) : dr_acc_round_div_dtype(&total[p], 1, m->c);
        fin &= g[p] - g[p] == 0.0f;   /* 0 for inf and NaN */
    }
    if (!dr_model_is_dense(&s->plan->exp.model)) fin = float32_bn_grads(s, total, g);
    if (!m->tf && s->plan->exp.model.l2 != 0.0f &&   /* exact: the L2 term once, on the reduced gradient */
        !dr_mixed_add_l2(&s->plan->exp.model, weights_of(s, w * s->L), DR_SEAM_MIXED_L2_SCALE(scale),
                         1, g))
        fin = 0;
    bool applies = dr_loss_scale_step(&m->ls[i], DR_SEAM_MIXED_FINITE(s, i, fin != 0));
    if (i == 0) { m->step_scale = DR_SEAM_MIXED_REPORTED_SCALE(scale, m->ls[i].scale); m->step_skipped = !applies; }
    if (!applies) return DR_OK;   /* skipped */
    DR_SEAM_MIXED_CLIP_SCALED(s, g);
    for (long long p = 0; !s->plan->exp.optimizer.clip.per_replica && p < P; p++)   /* per replica: unscaled */
        g[p] = DR_SEAM_MIXED_UNSCALE(g[p], scale);
    a.step = s->step - m->ls[i].skipped;   /* Keras's iterations: applied (micro-)steps only */
    if (m->k > 1 && !accumulate_micro(m, i, g, P, a.step, s->step)) return DR_OK;
    if (i == 0) m->step_updated = true;
    DR_SEAM_MIXED_CLIP(s, g);   /* after the unscale, as Keras's inner optimizer: once per worker */
    a.g = g;
    return apply_holders(s, w, &a, err);
}

/* Before a step: a resumed session's accumulators are empty, so a
 * checkpoint taken while finite micro-steps waited for their update (a
 * skip moved the updates off the multiples of k) is refused. */
int engine_mixed_begin(dr_session *s, dr_err *err)
{
    engine_mixed *m = s->mixed;
    uint64_t held;
    if (!m) return DR_OK;
    m->step_updated = false;
    held = (s->step - 1 - m->ls[0].skipped) % m->k;
    if (m->k <= 1 || m->steps++ || held == 0) return DR_OK;
    return dr_fail(err, DR_EUSAGE, "cannot resume --dtype_policy=mixed_%s with "
                   "--gradient_accumulation_steps=%u at step %llu: %llu finite micro-steps were accumulated "
                   "toward an update (a skipped micro-step moved the updates) and a checkpoint does not hold them",
                   dr_dtype_name(m->c), m->k, (unsigned long long)s->step - 1, (unsigned long long)held);
}

void engine_mixed_report(const dr_session *s, dr_step_report *out)
{
    size_t n = strlen(out->extra);
    if (!s->mixed) return;
    snprintf(out->extra + n, sizeof out->extra - n, ",\"loss_scale\":%.9g,\"skipped\":%s", s->mixed->step_scale,
             s->mixed->step_skipped ? "true" : "false");
}

const dr_loss_scale *engine_mixed_state(const dr_session *s)
{
    return s->mixed ? &s->mixed->ls[0] : NULL;
}

bool engine_mixed_applied(const dr_session *s, float *grads)
{
    if (!s->mixed || !s->mixed->step_updated) return false;
    memcpy(grads, s->mixed->g[0], s->plan->P * sizeof *grads);   /* worker 0's unscaled gradient, as applied */
    return true;
}

bool engine_mixed_agree(const dr_session *s)
{
    for (uint32_t w = 1; s->mixed && w < s->whi - s->wlo; w++)
        if (memcmp(&s->mixed->ls[w], &s->mixed->ls[0], sizeof s->mixed->ls[0])) return false;
    return true;
}

void engine_mixed_restore(dr_session *s, const dr_loss_scale *ls)
{
    for (uint32_t w = 0; s->mixed && w < s->whi - s->wlo; w++) s->mixed->ls[w] = *ls;
}

void engine_mixed_summarize(const dr_session *s, json_object *o)
{
    const engine_mixed *m = s->mixed;
    json_object *j;
    if (!m) return;
    j = json_object_new_object();
    json_object_object_add(j, "compute_dtype", json_object_new_string(dr_dtype_name(m->c)));
    json_object_object_add(j, "reduction", json_object_new_string(m->tf ? "tensorflow" : "exact"));
    json_object_object_add(j, "loss_scale", json_object_new_double(m->ls[0].scale));
    json_object_object_add(j, "growth_counter", json_object_new_int64(m->ls[0].counter));
    json_object_object_add(j, "skipped_steps", json_object_new_int64((int64_t)m->ls[0].skipped));
    json_object_object_add(j, "workers_agree", json_object_new_boolean(engine_mixed_agree(s)));
    json_object_object_add(o, "mixed_precision", j);
}
