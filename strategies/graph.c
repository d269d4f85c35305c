/* distref engine — a step's compute for a model beyond Dense (issue 31):
 * the backend's layer ops (distref/backend.h, "models beyond Dense") in
 * lock step over the replicas, because a synchronized BatchNormalization
 * needs the global batch's sums between two layers.
 *
 * Each worker drives its replicas layer by layer (side by side on the
 * OpenMP team, engine_each_replica); at a BatchNormalization in training:
 *   sync     every replica's exact sums of x and x^2 (forward) or of dy and
 *            dy xhat (backward) are all-reduced through the statistics'
 *            comm (threads in-process, MPI across processes: an exact sum,
 *            whatever the order), then rounded once over the global count:
 *            mean = round(sum x / N), var = round(sum x^2 / N) - mean^2
 *            (TensorFlow's synchronized=True, docs/MODELS.md), the same on
 *            every replica, so every R, strategy and variant gives
 *            one_device's bits
 *   replica  each replica's own two-pass statistics over its examples:
 *            mean = round(sum x / n), var = round(sum (x - mean)^2 / n)
 * The moving statistics (moving = moving * 0.99 + stat * 0.01) are updated
 * in each replica's variables after its forward; under replica BN they
 * end as replica 0's, handed to every replica through the same comm (its
 * values, every other replica adding zero, rounded once: the values
 * themselves). central_storage's variables take them too. The optimizer
 * leaves them as they are (their gradient is zero).
 *
 * --dtype_policy=mixed_*: the same lock step, the backend's ops rounding to
 * the compute dtype (dr_graph_rt.compute, the loss scale inside the loss's
 * delta: mixed.c's engine_mixed_graph_rt), no share but the loss's
 * multiplier; mixed.c reduces and applies.
 *
 * --gradient_accumulation_steps=k needs nothing here: each micro-step is
 * this compute over its own micro-batch (its statistics, its moving update,
 * its dropout masks keyed by its step number: Keras 3's rule, docs/MODELS.md)
 * and its shares wait in step.c's accumulators for the k-th. */
#include "strategies/engine_internal.h"

#include <stdlib.h>
#include <string.h>

#include "strategies/seams.h"

#define BN_MAX_C    256

struct engine_graph {
    dr_comm *ep[ENGINE_MAX_WORKERS];   /* the statistics' comm: one pack, any length */
    uint32_t neps;
    dr_acc  *sums[DR_MAX_DEVICES - 1]; /* per local replica: s1[C], then s2[C], C the layer's channels */
    dr_acc  *state[DR_MAX_DEVICES - 1];/* per local replica: the state's S values (replica BN) */
};

static uint32_t local_index(const dr_session *s, uint32_t r) { return r - s->wlo * s->L; }
static uint32_t rows_of(const dr_session *s, uint32_t r)
{
    uint32_t q = r;   /* as engine_stage's: the replica whose examples r trains on */
    return s->off[q + 1] - s->off[q];
}

int engine_graph_open(dr_session *s, dr_err *err)
{
    const dr_model_spec *m = &s->plan->exp.model;
    size_t S = dr_model_num_state(m);
    dr_comm_config cc;
    engine_graph *g;
    int rc;
    if (dr_model_is_dense(m)) return DR_OK;
    for (uint32_t l = 0; l < m->nlayers; l++)
        if (m->layer[l].kind == DR_LAYER_BATCH_NORM && m->layer[l].oc > BN_MAX_C)
            return dr_fail(err, DR_EUNSUPPORTED, "not supported: BatchNormalization layer %u has %u channels; the "
                           "engine's statistics hold at most %d", l, m->layer[l].oc, BN_MAX_C);
    if (!(g = calloc(1, sizeof *g))) return dr_fail(err, DR_ENOMEM, "out of host memory for the engine's maps");
    s->graph = g;
    for (uint32_t k = 0; k < (s->whi - s->wlo) * s->L; k++)
        if (!(g->sums[k] = calloc(2 * BN_MAX_C, sizeof(dr_acc))) || !(g->state[k] = calloc(S ? S : 1, sizeof(dr_acc))))
            return dr_fail(err, DR_ENOMEM, "out of host memory for the batch-norm statistics");
    memset(&cc, 0, sizeof cc);
    cc.num_ranks = s->W;
    cc.local_replicas = s->L;
    cc.alg = DR_COMM_RING;
    cc.num_packs = 1;
    cc.strategy = &s->strat;   /* the statistics' bytes count on the replicas' devices */
    cc.timeout_s = s->plan->cfg->collective_timeout;
    if ((rc = s->co->open(&cc, g->ep, &g->neps, err))) return dr_fail_wrap(err, "the batch-norm statistics' comm"), rc;
    return DR_OK;
}

void engine_graph_close(dr_session *s)
{
    engine_graph *g = s->graph;
    if (!g) return;
    if (g->neps) s->co->close(g->ep, g->neps);
    for (uint32_t k = 0; k < DR_MAX_DEVICES - 1; k++) { free(g->sums[k]); free(g->state[k]); }
    free(g);
    s->graph = NULL;
}

/* ---- per replica ------------------------------------------------------------ */
/* Each op runs on every core of the replica (one unless the tpu strategy
 * partitions its maps: graph_spatial.c; the backend then computes each
 * core's tile, or nothing on a core past the tiles). */

typedef struct gstep { uint32_t l; const float *mean, *var; bool grad; } gstep;

static int begin_fn(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    dr_graph_rt rt = { true, s->cfg->seed, s->step, s->ids + s->off[r], rows_of(s, r), s->plan->dropout_masks,
                       s->row0[r], DR_DTYPE_F32, 1.0f, s->plan->G, false };
    int rc = engine_cores(s) > 1 ? engine_spatial_load(s, r, err) : DR_OK;
    (void)arg;
    engine_mixed_graph_rt(s, r, &rt);
    for (uint32_t c = 0; rc == DR_OK && c < engine_cores(s); c++)
        rc = s->bo->graph_begin(s->be, engine_core(s, r, c), rt.n, &rt, err);
    return rc;
}

/* partitioned: the halos (or the gather, the scatter) before layer l */
static int exchange_fn(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    const gstep *a = arg;
    return engine_spatial_exchange(s, r, a->l, a->grad, err);
}

/* partitioned: every replica's exchange before layer l, and its emulated time */
static int exchange(dr_session *s, uint32_t lo, uint32_t n, gstep *a, dr_err *err)
{
    int rc;
    if (engine_cores(s) == 1) return DR_OK;
    if ((rc = engine_each_replica(s, lo, n, exchange_fn, a, err))) return rc;
    engine_spatial_rounds(s, lo, n);
    return DR_OK;
}

static int forward_fn(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    int rc = DR_OK;
    for (uint32_t c = 0; rc == DR_OK && c < engine_cores(s); c++)
        rc = s->bo->layer_forward(s->be, engine_core(s, r, c), ((gstep *)arg)->l, err);
    return rc;
}

static int backward_fn(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    int rc = DR_OK;
    for (uint32_t c = 0; rc == DR_OK && c < engine_cores(s); c++)
        rc = s->bo->layer_backward(s->be, engine_core(s, r, c), ((gstep *)arg)->l, err);
    return rc;
}

static int loss_fn(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    int rc = DR_OK;
    (void)arg;
    for (uint32_t c = 0; rc == DR_OK && c < engine_cores(s); c++) rc = s->bo->graph_loss(s->be, engine_core(s, r, c), err);
    return rc;
}

static int share_fn(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    int rc = engine_cores(s) > 1 ? engine_spatial_merge(s, r, err) : DR_OK;
    (void)arg;
    if (rc == DR_OK && s->mixed) return engine_mixed_graph_share(s, r, err);   /* the scale and 1/G in the deltas */
    return rc ? rc : s->bo->share(s->be, &s->rb[r], s->mult[r], s->coef, s->den, err);
}

/* BatchNormalization l's sums of every core of replica r, added into s1, s2
 * (exact: the whole image's sums, whatever the tiles) */
static int core_sums(dr_session *s, uint32_t r, uint32_t l, dr_bn_sum_kind kind, const float *mean, dr_acc *s1,
                     dr_acc *s2, dr_err *err)
{
    int rc = DR_OK;
    for (uint32_t c = 0; rc == DR_OK && c < DR_SEAM_BN_SUM_CORES(engine_cores(s)); c++)
        rc = s->bo->bn_sums(s->be, engine_core(s, r, c), l, kind, mean, s1, s2, err);
    return rc;
}

static int core_normalize(dr_session *s, uint32_t r, uint32_t l, const float *mean, const float *var, dr_err *err)
{
    int rc = DR_OK;
    for (uint32_t c = 0; rc == DR_OK && c < engine_cores(s); c++)
        rc = s->bo->bn_normalize(s->be, engine_core(s, r, c), l, mean, var, err);
    return rc;
}

static int core_bn_backward(dr_session *s, uint32_t r, uint32_t l, const float *mdy, const float *mdx, dr_err *err)
{
    int rc = DR_OK;
    for (uint32_t c = 0; rc == DR_OK && c < engine_cores(s); c++)
        rc = s->bo->bn_backward(s->be, engine_core(s, r, c), l, mdy, mdx, err);
    return rc;
}

/* moving = moving * 0.99 + stat * 0.01 in replica r's variables; under
 * --gradient_accumulation_steps at every micro-step, as Keras 3 (the
 * variables' other values do not move between updates) */
static int moving_update(dr_session *s, uint32_t r, uint32_t l, const float *mean, const float *var, dr_err *err)
{
    const dr_model_spec *m = &s->plan->exp.model;
    uint32_t C = m->layer[l].oc;
    size_t off = dr_model_state_offset(m, l) * sizeof(float);
    float st[2 * BN_MAX_C];
    int rc;
    if (DR_SEAM_BN_MOVING_SKIP(s->step, s->k)) return DR_OK;
    if ((rc = s->bo->download(s->be, st, s->rb[r].params, off, 2 * C * sizeof(float), err))) return rc;
    for (uint32_t c = 0; c < C; c++) {
        st[c] = st[c] * ENGINE_BN_MOMENTUM + mean[c] * ENGINE_BN_REST;
        st[C + c] = st[C + c] * ENGINE_BN_MOMENTUM + var[c] * ENGINE_BN_REST;
    }
    return s->bo->upload(s->be, s->rb[r].params, off, st, 2 * C * sizeof(float), err);
}

/* Replica r's sums of x (and x^2 under sync BN), from zero. */
static int sums_fn(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    const gstep *a = arg;
    uint32_t C = s->plan->exp.model.layer[a->l].oc;
    dr_acc *s1 = s->graph->sums[local_index(s, r)], *s2 = s1 + C;
    for (uint32_t c = 0; c < 2 * C; c++) dr_acc_init(&s1[c]);
    return core_sums(s, r, a->l, DR_BN_SUMS, NULL, s1, s->plan->bn_replica ? NULL : s2, err);
}

/* Replica BN: the replica's own two-pass statistics, its normalization and moving update. */
static int replica_fn(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    const dr_dense *d = &s->plan->exp.model.layer[((gstep *)arg)->l];
    uint32_t l = ((gstep *)arg)->l, N = rows_of(s, r) * d->ih * d->iw;
    dr_acc *s1 = s->graph->sums[local_index(s, r)], *s2 = s1 + d->oc;
    float mean[BN_MAX_C], var[BN_MAX_C];
    int rc;
    if (N == 0) return DR_OK;
    for (uint32_t c = 0; c < d->oc; c++) mean[c] = dr_acc_round_div(&s1[c], N);
    if ((rc = core_sums(s, r, l, DR_BN_CENTERED, mean, NULL, s2, err))) return rc;
    for (uint32_t c = 0; c < d->oc; c++) var[c] = dr_acc_round_div(&s2[c], N);
    if ((rc = core_normalize(s, r, l, mean, var, err))) return rc;
    return moving_update(s, r, l, mean, var, err);
}

static int normalize_fn(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    const gstep *a = arg;
    int rc = core_normalize(s, r, a->l, a->mean, a->var, err);
    return rc ? rc : moving_update(s, r, a->l, a->mean, a->var, err);
}

/* The backward sums of dy and dy xhat (also into gamma's and beta's gradient). */
static int grad_sums_fn(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    uint32_t l = ((gstep *)arg)->l, C = s->plan->exp.model.layer[l].oc;
    dr_acc *s1 = s->graph->sums[local_index(s, r)];
    for (uint32_t c = 0; c < 2 * C; c++) dr_acc_init(&s1[c]);
    return core_sums(s, r, l, DR_BN_GRAD, NULL, s1, s1 + C, err);
}

static int bn_back_fn(dr_session *s, uint32_t r, void *arg, dr_err *err)
{
    const gstep *a = arg;
    const dr_dense *d = &s->plan->exp.model.layer[a->l];
    uint32_t N = rows_of(s, r) * d->ih * d->iw;
    dr_acc *s1 = s->graph->sums[local_index(s, r)], *s2 = s1 + d->oc;
    float mdy[BN_MAX_C], mdx[BN_MAX_C];
    if (a->mean) return core_bn_backward(s, r, a->l, a->mean, a->var, err);   /* sync: given */
    if (N == 0) return DR_OK;
    for (uint32_t c = 0; c < d->oc; c++) { mdy[c] = dr_acc_round_div(&s1[c], N); mdx[c] = dr_acc_round_div(&s2[c], N); }
    return core_bn_backward(s, r, a->l, mdy, mdx, err);
}

/* ---- the worker's lock step ------------------------------------------------- */

/* Sync BN at layer l: every replica's sums of every worker, exactly (local[k]
 * then holds the total): 2 C accumulators, C the layer's channels. */
static int all_sums(dr_session *s, uint32_t w, uint32_t l, dr_err *err)
{
    void *local[DR_MAX_DEVICES];
    for (uint32_t k = 0; k < s->L; k++) local[k] = s->graph->sums[local_index(s, w * s->L + k)];
    return s->co->all_reduce(s->graph->ep[w - s->wlo], DR_FORM_ACC, local, 2 * (size_t)s->plan->exp.model.layer[l].oc,
                             err);
}

/* The global batch's statistics' count at layer l: its examples x pixels. */
static uint32_t global_count(const dr_session *s, uint32_t l)
{
    const dr_dense *d = &s->plan->exp.model.layer[l];
    return (s->off[s->R] - s->off[0]) * d->ih * d->iw;
}

static int bn_forward(dr_session *s, uint32_t w, uint32_t l, dr_err *err)
{
    const dr_dense *d = &s->plan->exp.model.layer[l];
    uint32_t lo = w * s->L, N = global_count(s, l);
    const dr_acc *t;
    float mean[BN_MAX_C], var[BN_MAX_C];
    gstep a = { l, mean, var, false };
    int rc;
    if ((rc = engine_each_replica(s, lo, s->L, sums_fn, &a, err))) return rc;
    if (s->plan->bn_replica) return engine_each_replica(s, lo, s->L, replica_fn, &a, err);
    if ((rc = DR_SEAM_BN_STATS_REDUCE(all_sums(s, w, l, err)))) return rc;
    if (N == 0) return DR_OK;
    t = s->graph->sums[local_index(s, lo)];
    for (uint32_t c = 0; c < d->oc; c++) {
        float ex2 = dr_acc_round_div(&t[d->oc + c], N);
        mean[c] = dr_acc_round_div(&t[c], N);
        var[c] = ex2 - mean[c] * mean[c];
    }
    return engine_each_replica(s, lo, s->L, normalize_fn, &a, err);
}

static int bn_backward(dr_session *s, uint32_t w, uint32_t l, dr_err *err)
{
    const dr_dense *d = &s->plan->exp.model.layer[l];
    uint32_t lo = w * s->L, N = global_count(s, l);
    float mdy[BN_MAX_C], mdx[BN_MAX_C];
    gstep a = { l, NULL, NULL, true };
    int rc;
    if ((rc = engine_each_replica(s, lo, s->L, grad_sums_fn, &a, err))) return rc;
    if (!s->plan->bn_replica) {
        const dr_acc *t;
        if ((rc = all_sums(s, w, l, err))) return rc;
        if (N == 0) return DR_OK;
        t = s->graph->sums[local_index(s, lo)];
        for (uint32_t c = 0; c < d->oc; c++) {
            mdy[c] = dr_acc_round_div(&t[c], N);
            mdx[c] = dr_acc_round_div(&t[d->oc + c], N);
        }
        a.mean = mdy;
        a.var = mdx;
    }
    return engine_each_replica(s, lo, s->L, bn_back_fn, &a, err);
}

/* Replica BN: replica 0's moving statistics to every replica (and central_storage's variables). */
static int spread_state(dr_session *s, uint32_t w, dr_err *err)
{
    const dr_model_spec *m = &s->plan->exp.model;
    size_t T = dr_model_num_trainable(m), S = dr_model_num_state(m);
    uint32_t lo = w * s->L;
    void *local[DR_MAX_DEVICES];
    float *v;
    int rc = DR_OK;
    if (S == 0) return DR_OK;
    if (!(v = malloc(S * sizeof *v))) return dr_fail(err, DR_ENOMEM, "out of host memory for the moving statistics");
    if (s->plan->bn_replica && s->R > 1) {
        for (uint32_t k = 0; k < s->L; k++) {
            dr_acc *a = s->graph->state[local_index(s, lo + k)];
            for (size_t i = 0; i < S; i++) dr_acc_init(&a[i]);
            local[k] = a;
        }
        if (lo == 0 && (rc = s->bo->download(s->be, v, s->rb[0].params, T * sizeof(float), S * sizeof(float), err)) == DR_OK)
            for (size_t i = 0; i < S; i++) dr_acc_add(&s->graph->state[local_index(s, 0)][i], v[i]);
        if (rc == DR_OK) rc = s->co->all_reduce(s->graph->ep[w - s->wlo], DR_FORM_ACC, local, S, err);
        for (size_t i = 0; rc == DR_OK && i < S; i++) v[i] = dr_acc_round(&((dr_acc *)local[0])[i]);
        for (uint32_t k = 0; rc == DR_OK && k < s->L; k++)
            rc = s->bo->upload(s->be, s->rb[lo + k].params, T * sizeof(float), v, S * sizeof(float), err);
    }
    if (rc == DR_OK && s->var) rc = s->bo->copy(s->be, s->var, T * sizeof(float), s->rb[lo].params, T * sizeof(float),
                                               S * sizeof(float), err);
    free(v);
    return rc;
}

int engine_graph_compute(dr_session *s, uint32_t w, dr_err *err)
{
    const dr_model_spec *m = &s->plan->exp.model;
    uint32_t lo = w * s->L, L = s->L;
    gstep a = { 0, NULL, NULL, false };
    int rc;
    if (!s->bo->graph_begin || !s->bo->layer_forward || !s->bo->bn_sums || !s->bo->bn_normalize ||
        !s->bo->graph_loss || !s->bo->layer_backward || !s->bo->bn_backward)
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: the %s backend has no layer ops for a model beyond "
                       "Dense", s->bo->name);
    if ((rc = engine_each_replica(s, lo, L, begin_fn, NULL, err))) return rc;
    for (a.l = 0; a.l < m->nlayers; a.l++) {
        if ((rc = exchange(s, lo, L, &a, err))) return rc;
        rc = m->layer[a.l].kind == DR_LAYER_BATCH_NORM ? bn_forward(s, w, a.l, err)
                                                       : engine_each_replica(s, lo, L, forward_fn, &a, err);
        if (rc) return rc;
    }
    if ((rc = engine_each_replica(s, lo, L, loss_fn, NULL, err))) return rc;
    a.grad = true;
    for (a.l = m->nlayers; a.l-- > 0;) {
        if ((rc = exchange(s, lo, L, &a, err))) return rc;
        rc = m->layer[a.l].kind == DR_LAYER_BATCH_NORM ? bn_backward(s, w, a.l, err)
                                                       : engine_each_replica(s, lo, L, backward_fn, &a, err);
        if (rc) return rc;
    }
    if ((rc = spread_state(s, w, err))) return rc;
    return engine_each_replica(s, lo, L, share_fn, NULL, err);
}
