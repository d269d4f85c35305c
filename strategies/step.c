/* distref engine — one synchronous step of the OpenMP variant.
 *
 *   split    the engine's own TensorFlow split (split.c): by the nominal
 *            sizes of batch_sizes_for_worker, or DATA sharding's slices
 *            over the workers; auto-shard OFF keeps each worker's own
 *            rebatched stream (the iterator's offsets)
 *   stage    each replica's examples gathered on its input CPU and uploaded
 *            to its device (counted)
 *   compute  every replica concurrently on the backend: forward, the exact
 *            loss and gradient sums, the share over G*R
 *   reduce   the comm: all-reduce within and across workers (one thread per
 *            worker), or the reduction to central_storage's variable device
 *   apply    one rounding of the total over G*R, then the optimizer, on every
 *            holder of the variables concurrently
 * Fast numerics run the same phases on floats (distref/backend.h): the
 * share is already TensorFlow's scaled per-replica gradient, the comm's
 * float collectives add in the algorithm's order, apply takes the total as
 * it is (divisor 1), and the step's loss is the float sum of the replicas'
 * scaled losses in replica order (strategy.reduce(SUM)).
 */
#include "strategies/engine_internal.h"

#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategies/seams.h"

void engine_count(dr_strategy *st, uint32_t from, uint32_t to, size_t bytes)
{
    if (from == to || bytes == 0) return;
    st->device[from].bytes_out += bytes;
    st->device[to].bytes_in += bytes;
}

/* ---- split ---------------------------------------------------------------- */

static void split(dr_session *s, const dr_dist_batch *b)
{
    s->count = b->count;
    s->ids = b->ids;
    if (s->plan->shard_data) {
        dr_engine_shard_data(b->ids, b->count, s->W, s->L, s->arranged, s->off, s->row0);
        s->ids = s->arranged;
    } else if (s->plan->unsharded) {
        memcpy(s->off, b->offset, (s->R + 1) * sizeof *s->off);
    } else {
        dr_engine_split(b->count, s->plan->G, s->R, s->off);
        DR_SEAM_SPLIT_EXTRAS(s);
    }
    DR_SEAM_SHORT_BATCH(s);
    /* one stream: a replica's rows of the global batch are where it reads
     * (OFF and FILE over W > 1 have no global batch: --dropout_masks refuses them) */
    if (!s->plan->shard_data) memcpy(s->row0, s->off, s->R * sizeof *s->row0);
}

/* ---- stage ---------------------------------------------------------------- */

#define GATHER_PAR (1u << 15)   /* floats below which a replica's rows are gathered on one thread */

/* A replica's n examples gathered into x (and labels, targets), the rows cut
 * into one slice per thread of the team: a copy, no arithmetic, so the cut
 * changes nothing but the time (random rows of a dataset larger than one
 * core's cache: each core's copy runs from its own L2). */
static void gather_rows(const dr_dataset *d, const uint32_t *ids, uint32_t n, float *x, uint8_t *labels,
                        float *targets)
{
    const size_t f = d->features;
    const int T = (size_t)n * f >= GATHER_PAR && !omp_in_parallel() ? omp_get_max_threads() : 1;
    #pragma omp parallel for schedule(static) num_threads(T) if (T > 1)
    for (int t = 0; t < T; t++) {
        uint32_t lo = (uint32_t)((uint64_t)n * (uint64_t)t / (uint64_t)T);
        uint32_t hi = (uint32_t)((uint64_t)n * (uint64_t)(t + 1) / (uint64_t)T);
        dr_dataset_gather(d, ids + lo, hi - lo, x + (size_t)lo * f, labels ? labels + lo : NULL,
                          targets ? targets + lo : NULL);
    }
}

int engine_stage(dr_session *s, uint32_t r, const uint32_t *ids, uint32_t n, uint32_t pad, dr_err *err)
{
    const dr_backend_ops *b = s->bo;
    dr_replica_bufs *rb = &s->rb[r];
    size_t f = s->data->features, out = s->plan->exp.model.layer[s->plan->exp.model.nlayers - 1].out;
    uint32_t from = s->strat.input_device[r], to = s->strat.replica_device[r];
    int rc;
    DR_SEAM_STAGE_IDS(ids, s, r, n);
    /* a device in host memory takes the features straight into its buffer;
     * tpu's tiles are cut from host_x (tpu.c), so it always stages there */
    float *direct = s->tpu.on ? NULL : b->host_ptr(rb->x), *x = direct ? direct : s->host_x;
    if ((uint64_t)n + pad > s->rows)
        return dr_fail(err, DR_EUSAGE, "engine: %u examples staged on replica %u, which holds %u", n + pad, r, s->rows);
    gather_rows(s->data, ids, n, x, s->data->labels ? s->host_labels : NULL,
                s->data->targets ? s->host_targets : NULL);
    memset(x + (size_t)n * f, 0, (size_t)pad * f * sizeof(float));
    if (s->data->labels) memset(s->host_labels + n, 0, pad);
    if (s->data->targets) memset(s->host_targets + (size_t)n * out, 0, (size_t)pad * out * sizeof(float));
    if (!direct && (rc = b->upload(s->be, rb->x, 0, s->host_x, (size_t)(n + pad) * f * sizeof(float), err))) return rc;
    if (rb->labels && (rc = b->upload(s->be, rb->labels, 0, s->host_labels, n + pad, err))) return rc;
    if (rb->targets && (rc = b->upload(s->be, rb->targets, 0, s->host_targets, (size_t)(n + pad) * out * sizeof(float), err)))
        return rc;
    engine_count(&s->strat, from, to, (size_t)n * f * sizeof(float) + (rb->labels ? n : 0) +
                 (rb->targets ? (size_t)n * out * sizeof(float) : 0));
    return DR_OK;
}

/* ---- compute, reduce, apply ----------------------------------------------- */

/* engine_each_replica's fn: replica r's forward, loss and gradients, and its share. */
static int compute(dr_session *s, uint32_t r, void *unused, dr_err *err)
{
    const dr_backend_ops *b = s->bo;
    dr_replica_bufs *rb = &s->rb[r];
    uint32_t n = s->off[r + 1] - s->off[r];
    int rc;
    (void)unused;
    if (s->mixed) return engine_mixed_compute(s, r, n, err);
    rb->share_mult = s->mult[r];
    if ((rc = b->forward(s->be, rb, n, 0, err)) || (rc = b->loss_grad(s->be, rb, n, true, err)))
        return rc;
    return b->share(s->be, rb, s->mult[r], s->coef, s->den, err);
}

static uint32_t divisor(const dr_session *s)
{
    return DR_SEAM_GRAD_DIVISOR(s->den, s->R);
}

/* apply's divisor: the exact total's G*R, or 1 for a float total (already
 * scaled by share; a planted MEAN_NOT_SUM still divides it by R). */
static uint32_t apply_divisor(const dr_session *s)
{
    return s->num == DR_NUMERICS_FAST ? divisor(s) / s->den : divisor(s);
}

int engine_each_replica(dr_session *s, uint32_t lo, uint32_t n, engine_replica_fn fn, void *arg, dr_err *err)
{
    int rcs[DR_MAX_DEVICES];
    dr_err errs[DR_MAX_DEVICES];
    /* One replica runs outside any parallel region: inside one (even a
     * serialized one, `if (n > 1)` false) the kernels' own regions would be
     * nested, and libgomp starts a new thread for every nested team instead
     * of reusing its pool (measured: 18 thread creations a step, exact
     * G=256 on 2 threads). */
    if (n == 1) return fn(s, lo, arg, err);
    #pragma omp parallel for schedule(dynamic)
    for (uint32_t k = 0; k < n; k++) rcs[k] = fn(s, lo + k, arg, &errs[k]);
    for (uint32_t k = 0; k < n; k++)
        if (rcs[k]) { *err = errs[k]; return rcs[k]; }
    return DR_OK;
}

int engine_apply_own(dr_session *s, uint32_t r, void *divisor_u32, dr_err *err)
{
    return s->bo->apply(s->be, s->rb[r].grad, *(const uint32_t *)divisor_u32, s->step, s->rb[r].params,
                        s->rb[r].slots, err);
}

void engine_note_applied(dr_session *s, uint32_t w, const dr_buffer *total, uint32_t divisor)
{
    if (w != s->wlo) return;
    s->applied.total = total;
    s->applied.num = s->num;
    s->applied.divisor = DR_SEAM_RECORDED_DIVISOR(divisor, s);
}

/* Phase 1 of worker w: its replicas' shares. */
static int worker_compute(dr_session *s, uint32_t w, dr_err *err)
{
    if (s->graph) return engine_graph_compute(s, w, err);
    return engine_each_replica(s, w * s->L, s->L, compute, NULL, err);
}

/* Host staging (a backend with device memory): the replicas' sums come down
 * before the collective, and the total goes back up to the first replica's
 * grad buffer, from which every replica of the worker applies. One path for
 * every strategy whose comm reduces host memory (this file's workers, the
 * tpu step's rings: engine_tpu.c). */
int engine_grads_local(dr_session *s, uint32_t lo, uint32_t L, void **local, dr_err *err)
{
    const bool staged = s->stage[lo] != NULL;
    for (uint32_t k = 0; k < L; k++) {
        int rc;
        local[k] = staged ? s->stage[lo + k] : s->bo->host_ptr(s->rb[lo + k].grad);
        if (!local[k]) return dr_fail(err, DR_ESTATE, "replica %u's gradient is neither host memory nor staged", lo + k);
        if (staged && (rc = s->bo->download(s->be, s->stage[lo + k], s->rb[lo + k].grad, 0, s->plan->P * s->esz, err)))
            return rc;
    }
    return DR_OK;
}

int engine_apply_total(dr_session *s, uint32_t w, uint32_t lo, uint32_t L, void *const *local, uint32_t d,
                       dr_err *err)
{
    int rc;
    if (s->stage[lo]) {   /* one upload of the total; every replica applies it */
        size_t bytes = s->plan->P * dr_form_of(dr_grad_form(s->num))->size;
        if ((rc = s->bo->upload(s->be, s->rb[lo].grad, 0, local[0], bytes, err))) return rc;
        engine_note_applied(s, w, s->rb[lo].grad, d);
        for (uint32_t k = 0; k < L; k++)
            if ((rc = s->bo->apply(s->be, s->rb[lo].grad, d, s->step, s->rb[lo + k].params, s->rb[lo + k].slots, err)))
                return rc;
        /* Replicas on other queues (opencl: a queue or sub-device each) read
         * the first replica's grad; it is written again by the next step's
         * loss_grad on its own queue, so every apply finishes first. */
        return L > 1 ? s->bo->sync(s->be, err) : DR_OK;
    }
    engine_note_applied(s, w, s->rb[lo].grad, d);   /* every replica's grad holds the total */
    return engine_each_replica(s, lo, L, engine_apply_own, &d, err);
}

/* ---- gradient accumulation ------------------------------------------------- */
/* --gradient_accumulation_steps=k (docs/TRAINING_FEATURES.md): the weights
 * do not move between updates, so each replica keeps its shares (over one
 * micro-step's denominator D*R, regularization included) and adds them
 * exactly, in the gradient's own form (full or compact accumulators; fast
 * numerics: floats, in micro-step order); the k-th micro-step adds the
 * earlier ones to its own share, the comm reduces that once, and apply
 * rounds the total once over k*D*R (fast: the float total over k, Keras's
 * mean): the bits of one step of all k batches, for every k and R. The
 * accumulators' merge and --clip_semantics=tensorflow's clip at the update:
 * accumulate.c. */

typedef struct engine_micro { dr_dist_batch b; uint32_t cap; } engine_micro;

int engine_accum_open(dr_session *s, dr_err *err)
{
    uint32_t k = s->cfg->gradient_accumulation_steps;
    s->k = k > 1 ? k : 1;
    if (s->k == 1) return DR_OK;
    for (uint32_t r = s->wlo * s->L; r < s->whi * s->L; r++)
        if (!(s->accum[r] = calloc(s->plan->P ? s->plan->P : 1, dr_sum_bytes(s->num))))
            return dr_fail(err, DR_ENOMEM, "out of host memory for the accumulated gradients (%zu parameters)",
                           (size_t)s->plan->P);
    if (s->num == DR_NUMERICS_EXACT_COMPACT && !(s->micro = calloc(s->k, sizeof *s->micro)))
        return dr_fail(err, DR_ENOMEM, "out of host memory for the micro-batches of an update");
    return DR_OK;
}

void engine_accum_close(dr_session *s)
{
    for (uint32_t r = 0; r < DR_MAX_DEVICES - 1; r++) { free(s->accum[r]); s->accum[r] = NULL; }
    for (uint32_t j = 0; s->micro && j < s->k; j++) { free(s->micro[j].b.ids); free(s->micro[j].b.offset); }
    free(s->micro);
    s->micro = NULL;
}

static void clear_accum(dr_session *s, size_t elem)
{
    for (uint32_t r = s->wlo * s->L; r < s->whi * s->L; r++) memset(s->accum[r], 0, s->plan->P * elem);
}

/* Compact gradients: the micro-batch of step s->step, kept until its update. */
static int keep_batch(dr_session *s, const dr_dist_batch *b, dr_err *err)
{
    engine_micro *m = &s->micro[(s->step - 1) % s->k];
    uint32_t *ids = m->b.ids;
    if (b->count > m->cap || !ids) {
        if (!(ids = realloc(m->b.ids, (b->count ? b->count : 1) * sizeof *ids)))
            return dr_fail(err, DR_ENOMEM, "out of host memory for a micro-batch's %u ids", b->count);
        m->b.ids = ids;
        m->cap = b->count;
    }
    if (!m->b.offset && !(m->b.offset = malloc((DR_MAX_DEVICES + 1) * sizeof *m->b.offset)))
        return dr_fail(err, DR_ENOMEM, "out of host memory for a micro-batch's offsets");
    memcpy(m->b.ids, b->ids, b->count * sizeof *ids);
    memcpy(m->b.offset, b->offset, (b->num_replicas + 1) * sizeof *b->offset);
    m->b.count = b->count;
    m->b.num_replicas = b->num_replicas;
    m->b.step = b->step;
    m->b.epoch = b->epoch;
    return DR_OK;
}

#define OVERFLOW_SCAN_PAR (1u << 16)   /* elements below which the scan stays on one thread */

/* Whether any element of a compact total left its window (the engine then
 * redoes the step with full accumulators: engine_step). */
static bool total_overflowed(const dr_session *s, const dr_buffer *total)
{
    const dr_cacc *t = s->bo->host_ptr((dr_buffer *)total);
    uint32_t f = 0;
    #pragma omp parallel for schedule(static) reduction(|:f) if (s->plan->P >= OVERFLOW_SCAN_PAR && !omp_in_parallel())
    for (size_t p = 0; p < s->plan->P; p++) f |= t[p].flags;
    return (DR_SEAM_TOTAL_FLAGS(f) & DR_CACC_F_OVERFLOW) != 0;
}

/* Phase 2 of worker w: the collective, then its replicas' updates. One
 * path for every number form of the gradients (distref/form.h): the form
 * is a parameter of the collective and of apply. */
static int worker_reduce(dr_session *s, uint32_t w, dr_err *err)
{
    const dr_backend_ops *b = s->bo;
    const dr_form *f = dr_form_of(dr_grad_form(s->num));
    const bool staged = s->stage[s->wlo * s->L] != NULL;
    void *local[DR_MAX_DEVICES];
    uint32_t lo = w * s->L, L = s->L, d = apply_divisor(s);
    size_t bytes = s->plan->P * f->size;
    dr_comm *ep = s->ep[w - s->wlo];
    void *dst = NULL;   /* central_storage: the total on the variable device (host side) */
    int rc = DR_OK;
    s->overflow[w - s->wlo] = false;
    if ((rc = engine_grads_local(s, lo, L, local, err))) return rc;
    if (s->mixed) engine_mixed_before_reduce(s, w, local, L);
    if (s->k > 1 && !s->mixed) {   /* accumulation: add this micro-step's shares; reduce on the k-th (mixed: mixed.c) */
        if (!engine_accumulate(s, f, local, lo, L)) return DR_OK;
        d = DR_SEAM_ACCUM_DIVISOR(d, s->k);
        if ((rc = engine_accum_clip(s, local, L, d, err))) return rc;
    }
    if (s->var) {   /* central_storage: reduce to the variable device, one update there */
        dst = staged ? s->stage_central : b->host_ptr(s->central);
        /* an exact reduce_to adds to what dst holds (floats overwrite it) */
        if (!f->copy_first && staged) memset(dst, 0, bytes);
        else if (!f->copy_first) rc = b->fill_zero(s->be, s->central, 0, bytes, err);
        if (rc == DR_OK) rc = s->co->reduce_to(ep, f->id, local, s->plan->P, s->strat.variable_device, dst, err);
        if (rc == DR_OK && staged && w == 0) rc = b->upload(s->be, s->central, 0, dst, bytes, err);
    } else if (engine_rounds_once(s, f, staged)) {   /* the comm rounds the totals (round_once.c) */
        return engine_reduce_round(s, w, local, d, err);
    } else {
        rc = s->co->all_reduce(ep, f->id, local, s->plan->P, err);
    }
    if (rc) return rc;
    /* compact: every replica of every worker holds the same total, so all
     * see an overflow alike and the engine redoes the step (engine_step) */
    if (f->id == DR_FORM_CACC && total_overflowed(s, s->var ? s->central : s->rb[lo].grad)) {
        s->overflow[w - s->wlo] = true;
        return DR_OK;
    }
    if (s->mixed) return engine_mixed_apply(s, w, dst ? dst : local[0], err);   /* host memory (mixed.c) */
    if (s->var) {
        engine_note_applied(s, w, s->central, d);
        return b->apply(s->be, s->central, d, s->step, s->var, s->var_slots, err);
    }
    return engine_apply_total(s, w, lo, L, local, d, err);
}

typedef int (*phase_fn)(dr_session *s, uint32_t w, dr_err *err);
typedef struct worker_arg { dr_session *s; uint32_t w; phase_fn fn; } worker_arg;

static void *worker_thread(void *p)
{
    worker_arg *a = p;
    /* the thread policy (engine.c): W workers share the run's T threads */
    int t = a->s->omp_threads / (int)a->s->W;
    omp_set_num_threads(t > 0 ? t : 1);
    a->s->rc[a->w] = a->fn(a->s, a->w, &a->s->err[a->w]);
    return NULL;
}

/* One phase on every worker: one thread each (a worker is a thread group). */
static int run_phase(dr_session *s, phase_fn fn, dr_err *err)
{
    pthread_t th[ENGINE_MAX_WORKERS];
    worker_arg arg[ENGINE_MAX_WORKERS];
    uint32_t started = 0;
    int rc = DR_OK;
    if (s->whi - s->wlo == 1) return fn(s, s->wlo, err);   /* one worker here (or one rank's) */
    for (; started < s->W; started++) {
        arg[started] = (worker_arg){ s, started, fn };
        s->rc[started] = DR_OK;
        if (pthread_create(&th[started], NULL, worker_thread, &arg[started]) != 0) {
            rc = dr_fail(err, DR_ENOMEM, "could not start worker thread %u", started);
            break;
        }
    }
    for (uint32_t w = 0; w < started; w++) pthread_join(th[w], NULL);
    for (uint32_t w = 0; rc == DR_OK && w < s->W; w++)
        if (s->rc[w]) { *err = s->err[w]; rc = s->rc[w]; }
    return rc;
}

/* Every worker computes; only when all succeeded do they meet in the
 * collective. A worker that failed alone would otherwise leave the others
 * waiting in the comm for a partner that never comes; MPI ranks agree the
 * same way (ranks.c) before their all-reduce. rc: staging's verdict. */
static int run_workers(dr_session *s, int rc, dr_err *err)
{
    if (rc == DR_OK) rc = run_phase(s, worker_compute, err);
    for (uint32_t r = s->wlo * s->L; rc == DR_OK && r < s->whi * s->L; r++)
        if (!s->bo->host_ptr(s->rb[r].grad) && !s->stage[r])
            rc = dr_fail(err, DR_EUNSUPPORTED, "the comm needs host-addressable or staged gradients");
    if (s->ranks) {
        dr_err mine = *err;
        rc = engine_ranks_agree(s, rc, &mine, err);
    }
    if (rc) return rc;
    if ((rc = run_phase(s, worker_reduce, err)) && s->ranks)   /* MPI: name the step (ranks.c names it too) */
        dr_fail_wrap(err, "step %llu", (unsigned long long)s->step);
    return rc;
}

/* The step's loss: the replicas' shares summed, rounded once (fast: the
 * float sum of the scaled shares in replica order). */
void engine_report(dr_session *s, dr_step_report *out)
{
    dr_acc total;
    float ftotal = 0.0f;
    dr_acc_init(&total);
    out->correct = 0;
    out->ids = s->ids;
    memcpy(out->off, s->off, (s->R + 1) * sizeof *s->off);
    if (s->ranks) engine_ranks_totals(s, &total, &ftotal, &out->correct, &out->ids, out->off);
    for (uint32_t r = 0; !s->ranks && r < s->R; r++) {
        dr_acc l;
        float f;
        dr_err e;
        if (s->num == DR_NUMERICS_FAST) {
            if (s->bo->download(s->be, &f, s->rb[r].loss, 0, sizeof f, &e) == DR_OK) ftotal = r ? ftotal + f : f;
        } else if (s->bo->download(s->be, &l, s->rb[r].loss, 0, sizeof l, &e) == DR_OK) {
            dr_acc_merge(&total, &l);
        }
        out->correct += s->rb[r].correct;
    }
    if (s->num == DR_NUMERICS_FAST) {
        uint32_t d = apply_divisor(s);
        out->loss = d == 1 ? ftotal : ftotal / (float)d;
    } else {
        out->loss = dr_acc_round_div(&total, divisor(s));
    }
    out->count = s->count;
    out->num_replicas = s->R;
}

/* The shares' scaling (docs/SEMANTICS.md §2). The loss's divisor D is G
 * (compute_average_loss(global_batch_size=G)) or, with
 * --loss_reduction=examples_in_step, the examples in this step: share r =
 * R * sums + D * reg over D*R. tf_default divides each replica by its own
 * size n_r times R: with L the lcm of the nonzero n_r, share r =
 * (L/n_r) * sums + L * reg over L*R. */
static int scale(dr_session *s, dr_err *err)
{
    uint64_t L = 1;
    if (!s->plan->divide_locally) {
        uint32_t D = s->plan->divide_by_count ? s->count : s->plan->G;
        for (uint32_t r = 0; r < s->R; r++) s->mult[r] = s->R;
        s->coef = D;
        s->den = D * s->R;
        return DR_OK;
    }
    for (uint32_t r = 0; r < s->R; r++) {
        uint64_t n = s->off[r + 1] - s->off[r], a = L, b = n;
        while (b) { uint64_t t = a % b; a = b; b = t; }   /* a = gcd(L, n) */
        if (n) L = L / a * n;
        if (L * s->R > (1u << 30))
            return dr_fail(err, DR_EUNSUPPORTED, "--loss_reduction=tf_default: the replicas' batch sizes need a "
                           "common denominator (%llu x %u replicas) above 2^30", (unsigned long long)L, s->R);
    }
    for (uint32_t r = 0; r < s->R; r++) {
        uint32_t n = s->off[r + 1] - s->off[r];
        s->mult[r] = n ? (uint32_t)(L / n) : 1;
    }
    s->coef = (uint32_t)L;
    s->den = (uint32_t)L * s->R;
    return DR_OK;
}

/* Swaps the compact gradients with the full ones (allocated the first
 * time) and tells the backend which form its kernels write. */
static int swap_forms(dr_session *s, dr_numerics to, dr_err *err)
{
    const dr_backend_ops *b = s->bo;
    size_t full = s->plan->P * sizeof(dr_acc);
    int rc;
    for (uint32_t r = s->wlo * s->L; r < s->whi * s->L; r++) {
        dr_buffer *t;
        if (!s->full_grad[r] && (rc = b->alloc(s->be, full, &s->full_grad[r], err))) return rc;
        t = s->rb[r].grad; s->rb[r].grad = s->full_grad[r]; s->full_grad[r] = t;
    }
    if (s->central) {
        dr_buffer *t;
        if (!s->full_central && (rc = b->alloc(s->be, full, &s->full_central, err))) return rc;
        t = s->central; s->central = s->full_central; s->full_central = t;
    }
    if ((rc = b->set_numerics(s->be, to, err))) return rc;
    s->num = to;
    return DR_OK;
}

/* The step again with full accumulators, after a compact total overflowed
 * (the staged batches are still on the devices; nothing was applied). */
static int redo_full(dr_session *s, dr_err *err)
{
    int rc = swap_forms(s, DR_NUMERICS_EXACT, err), back;
    dr_err e2;
    if (rc == DR_OK) rc = run_workers(s, DR_OK, err);
    back = swap_forms(s, DR_NUMERICS_EXACT_COMPACT, &e2);
    if (rc == DR_OK && back) { *err = e2; rc = back; }
    s->fallback_steps++;
    return rc;
}

/* split, the checks, the shares' scale: what a micro-batch needs before staging. */
static int begin(dr_session *s, const dr_dist_batch *b, dr_err *err)
{
    split(s, b);
    if ((uint64_t)s->plan->G * s->R > (1u << 30))
        return dr_fail(err, DR_EUSAGE, "--global_batch_size %u with %u replicas: G*R must stay below 2^30",
                       s->plan->G, s->R);
    if ((uint64_t)s->plan->G * s->R * s->k > (1u << 30))
        return dr_fail(err, DR_EUSAGE, "--gradient_accumulation_steps=%u: k*G*R = %llu must stay below 2^30", s->k,
                       (unsigned long long)s->plan->G * s->R * s->k);
    return scale(s, err);
}

/* Every local replica's batch staged, then compute, reduce and apply. */
static int stage_and_run(dr_session *s, dr_err *err)
{
    int rc = DR_OK;
    for (uint32_t r = s->wlo * s->L; rc == DR_OK && r < s->whi * s->L; r++) {
        uint32_t q = DR_SEAM_SHARD_OF(r, s);   /* the replica whose examples r trains on */
        if ((rc = engine_stage(s, r, s->ids + s->off[q], s->off[q + 1] - s->off[q], 0, err))) break;
        if (s->ranks) engine_ranks_staged(s, r, s->ids + s->off[q], s->off[q + 1] - s->off[q]);
        if (s->var) {   /* central_storage: the variables come to the replica */
            if ((rc = s->bo->copy(s->be, s->rb[r].params, 0, s->var, 0, s->plan->P * sizeof(float), err))) break;
            engine_count(&s->strat, s->strat.variable_device, s->strat.replica_device[r], s->plan->P * sizeof(float));
        }
    }
    if (rc && !s->ranks) return rc;   /* MPI: a rank's failure goes through the agreement */
    return run_workers(s, rc, err);
}

/* An accumulated compact total overflowed: the update's k micro-batches
 * again, with full accumulators (the weights have not moved since the
 * first of them). */
static int redo_update_full(dr_session *s, dr_err *err)
{
    uint64_t step = s->step;
    int rc = swap_forms(s, DR_NUMERICS_EXACT, err), back;
    dr_err e2;
    clear_accum(s, sizeof(dr_acc));
    for (uint32_t j = 0; rc == DR_OK && j < s->k; j++) {
        s->step = step - s->k + 1 + j;
        if ((rc = begin(s, &s->micro[j].b, err)) == DR_OK) rc = stage_and_run(s, err);
    }
    s->step = step;
    back = swap_forms(s, DR_NUMERICS_EXACT_COMPACT, &e2);
    if (rc == DR_OK && back) { *err = e2; rc = back; }
    clear_accum(s, sizeof(dr_acc));
    s->fallback_steps += s->k;
    return rc;
}

int engine_step(dr_session *s, const dr_dist_batch *b, uint64_t step, dr_step_report *out, dr_err *err)
{
    int rc;
    s->step = step;
    s->applied.total = NULL;   /* set by the apply that runs (engine_note_applied, round_once.c) */
    s->applied.rounded = NULL;
    if ((rc = begin(s, b, err)) || (rc = engine_mixed_begin(s, err))) return rc;
    if (s->tpu.on) return engine_tpu_step(s, out, err);
    if (s->micro && (rc = keep_batch(s, b, err))) return rc;
    if ((rc = stage_and_run(s, err))) return rc;
    if (s->num == DR_NUMERICS_EXACT_COMPACT && s->overflow[0]) {
        if ((rc = s->k > 1 ? redo_update_full(s, err) : redo_full(s, err))) return rc;
        snprintf(out->extra, sizeof out->extra, ",\"exact_fallback\":true");
    }
    engine_report(s, out);
    engine_mixed_report(s, out);
    return DR_OK;
}
