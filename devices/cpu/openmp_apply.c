/* distref devices — the OpenMP backend's apply (distref/backend.h):
 *
 *   apply         per parameter: round(total / divisor) once, then the
 *                 optimizer (TensorFlow's ApplyGradientDescent /
 *                 ApplyMomentum / ApplyAdam, one rounded operation per
 *                 statement, nothing contracted), fused into one parallel
 *                 pass with no scratch, each thread's share compiled per
 *                 vector width (distref/wide.h); in fast numerics the float
 *                 total is the gradient, through the same optimizer code;
 *   applied_grad  the gradient apply reads, handed back (--trajectory);
 *   apply_f32     the mixed step's apply of an already rounded gradient.
 *
 * The planted faults behind DR_SEAM_* (devices/seams.h) are documented there.
 */
#include "devices/cpu/openmp_backend.h"
#include "distref/elem.h"
#include "devices/cpu/grad_clip.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "devices/seams.h"

/* ---- apply: round once, then the optimizer -------------------------------- */

void dr_omp_cut(size_t n, size_t unit, size_t *lo, size_t *hi)
{
    const size_t T = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
    const size_t units = DR_SEAM_CUT_UNITS(n, unit);
    *lo = units * t / T * unit;
    *hi = units * (t + 1) / T * unit;
    if (*hi > n) *hi = n;
    if (*lo > *hi) *lo = *hi;
}


/* The optimizer, written once: it reads the gradient total through its
 * number form (distref/form.h), which rounds each element once: an exact
 * total (full or compact) divided by d, round-to-nearest of the exact
 * quotient; a float total (fast numerics) over (float)d, where d is 1 but
 * for a planted MEAN_NOT_SUM (x / 1.0f is x exactly). */
typedef struct grad_src {
    const dr_form *form;
    const char    *total;
    size_t         par;   /* parameters below which SGD and momentum stay on one thread
                             (Adam's heavier loop: PAR_PARAMS in every form) */
} grad_src;

/* The gradients of parameters p0 .. p0 + n: a float total with divisor 1
 * (fast numerics' apply) is read where it lies; any other is rounded into
 * buf (the form's round: exact ones rounded once, compact eight at a time). */
#define GRAD_CHUNK 64
static inline const float *grads_of(const grad_src *g, uint32_t d, size_t p0, size_t n, float *buf)
{
    if (d == 1 && g->form->id == DR_FORM_F32) return (const float *)(const void *)g->total + p0;
    g->form->round(g->total + p0 * g->form->size, n, d, buf);
    return buf;
}

/* One optimizer step's constants and arrays (w: the weights, s1 and s2:
 * the slots: momentum's v, Adam's m and v). */
typedef struct opt_step {
    const grad_src *t;
    uint32_t d;
    float    lr, mu;                       /* SGD (mu unused), momentum */
    bool     nesterov;
    float    lr_t, one_b1, one_b2, eps;    /* Adam */
    float   *w, *s1, *s2;
} opt_step;

/* Each update below: the parameters [lo, hi) one thread owns, in chunks of
 * GRAD_CHUNK, their gradients first, then the elementwise update (the same
 * bits as one at a time: `omp simd` vectorizes IEEE operations without
 * changing a bit), compiled per vector width (DR_WIDE). */
DR_WIDE static void sgd_range(const opt_step *a, size_t lo, size_t hi)
{
    const float lr = a->lr;
    for (size_t p0 = lo; p0 < hi; p0 += GRAD_CHUNK) {
        float buf[GRAD_CHUNK];
        size_t n = hi - p0 < GRAD_CHUNK ? hi - p0 : GRAD_CHUNK;
        const float *g = grads_of(a->t, a->d, p0, n, buf);
        float *wc = a->w + p0;
        #pragma omp simd
        for (size_t q = 0; q < n; q++) wc[q] = wc[q] - lr * g[q];
    }
}

DR_WIDE static void momentum_range(const opt_step *a, size_t lo, size_t hi)
{
    const float lr = a->lr, mu = a->mu;
    for (size_t p0 = lo; p0 < hi; p0 += GRAD_CHUNK) {
        float buf[GRAD_CHUNK];
        size_t n = hi - p0 < GRAD_CHUNK ? hi - p0 : GRAD_CHUNK;
        const float *g = grads_of(a->t, a->d, p0, n, buf);
        float *vc = a->s1 + p0, *wc = a->w + p0;
        if (a->nesterov) {   /* two loops, no branch in either: both vectorize */
            #pragma omp simd
            for (size_t q = 0; q < n; q++) {
                vc[q] = mu * vc[q] - lr * g[q];
                wc[q] = wc[q] + (mu * vc[q] - lr * g[q]);
            }
        } else {
            #pragma omp simd
            for (size_t q = 0; q < n; q++) {
                vc[q] = mu * vc[q] - lr * g[q];
                wc[q] = wc[q] + vc[q];
            }
        }
    }
}

DR_WIDE static void adam_range(const opt_step *a, size_t lo, size_t hi)
{
    const float lr_t = a->lr_t, one_b1 = a->one_b1, one_b2 = a->one_b2, eps = a->eps;
    for (size_t p0 = lo; p0 < hi; p0 += GRAD_CHUNK) {
        float buf[GRAD_CHUNK];
        size_t n = hi - p0 < GRAD_CHUNK ? hi - p0 : GRAD_CHUNK;
        const float *gs = grads_of(a->t, a->d, p0, n, buf);
        float *m = a->s1 + p0, *v = a->s2 + p0, *w = a->w + p0;
        #pragma omp simd
        for (size_t q = 0; q < n; q++) {
            float g = gs[q];
            m[q] = m[q] + (g - m[q]) * one_b1;
            v[q] = v[q] + (g * g - v[q]) * one_b2;
            w[q] = w[q] - lr_t * m[q] / (sqrtf(v[q]) + eps);
        }
    }
}

/* range over the P parameters, on the team from `par` parameters on (each
 * thread its share, cut on GRAD_CHUNK: a chunk's rounding is the same on
 * any thread). */
static void on_team(void (*range)(const opt_step *, size_t, size_t), const opt_step *a, size_t P, size_t par)
{
    #pragma omp parallel if (P >= par)
    {
        size_t lo, hi;
        dr_omp_cut(P, GRAD_CHUNK, &lo, &hi);
        range(a, lo, hi);
    }
}

static void apply_adam(const dr_optimizer *o, opt_step *a, uint64_t step, size_t P)
{
    unsigned k = step > 0xffffffffu ? 0xffffffffu : (unsigned)step;
    const float b1t = dr_powi_f32(o->beta1, k), b2t = dr_powi_f32(o->beta2, k);
    a->lr_t = a->lr * sqrtf(1.0f - b2t) / (1.0f - b1t);
    a->one_b1 = 1.0f - o->beta1;
    a->one_b2 = 1.0f - o->beta2;
    a->eps = o->epsilon;
    a->s2 = a->s1 + P;
    on_team(adam_range, a, P, PAR_PARAMS);   /* Adam's heavier loop: PAR_PARAMS in every form */
}

/* Whether apply clips the rounded total (global clipping; Keras 3's per
 * replica clipping, --clip_semantics=tensorflow, was share's). */
static bool clips_total(const dr_backend *b)
{
    return dr_engine_clip_on(&b->o.clip) && !b->o.clip.per_replica;
}

/* round(total / divisor) once in total's form, then the clipping when clip:
 * the gradient apply hands the optimizer when it must round it first, and
 * what applied_grad hands back; one code for both. */
static void round_and_clip(const dr_backend *b, const dr_form *form, const char *total, uint32_t divisor, bool clip,
                           float *out)
{
    form->round(total, b->P, divisor, out);
    if (clip) dr_engine_clip(&b->o.clip, &b->m, form->exact, out, b->P);
}

int dr_omp_applied_grad(dr_backend *b, const dr_buffer *total, dr_numerics num, uint32_t divisor, float *out,
                        dr_err *err)
{
    int rc;
    if (divisor < 1) return dr_fail(err, DR_EUSAGE, "openmp backend: applied_grad with divisor 0");
    if ((rc = dr_omp_need(total, b->P * dr_grad_bytes(num), "gradient total", err))) return rc;
    round_and_clip(b, dr_form_of(dr_grad_form(num)), total->data, divisor, DR_SEAM_RECORD_CLIPPED(clips_total(b)), out);
    return DR_OK;
}

/* The optimizer on the gradient t (over d) at 1-based step. */
static void optimize(dr_backend *b, float lr, uint64_t step, const grad_src *t, uint32_t d, float *w, float *s)
{
    const dr_optimizer *o = &b->o;
    opt_step a = { .t = t, .d = d, .lr = lr, .mu = o->momentum, .nesterov = o->nesterov, .w = w, .s1 = s };
    if (o->kind == DR_OPT_ADAM) apply_adam(o, &a, dr_optimizer_updates(o, step), b->P);
    else on_team(o->momentum != 0.0f ? momentum_range : sgd_range, &a, b->P, t->par);
    DR_SEAM_L2_AS_DECAY(b, o, w);
}

int dr_omp_apply(dr_backend *b, const dr_buffer *total, uint32_t divisor, uint64_t step,
                 dr_buffer *params, dr_buffer *slots, dr_err *err)
{
    const dr_optimizer *o = &b->o;
    size_t P = b->P, nslots = (size_t)dr_optimizer_num_slots(o);
    grad_src t;
    float *w, *s, *clipped = NULL;
    uint64_t at = DR_SEAM_SCHEDULE_STEP(step);   /* the schedule reads iterations = step - 1 (distref/schedule.h) */
    const float lr = dr_lr_at(&o->schedule, o->lr, at);
    int rc;
    if (divisor < 1) return dr_fail(err, DR_EUSAGE, "openmp backend: apply with divisor 0");
    if ((rc = dr_omp_need(total, P * dr_grad_bytes(b->num), "gradient total", err)) ||
        (rc = dr_omp_need(params, P * sizeof(float), "params", err)) ||
        (nslots && (rc = dr_omp_need(slots, nslots * P * sizeof(float), "slots", err))))
        return rc;
    t.form = dr_form_of(dr_grad_form(b->num));
    t.total = total->data;
    t.par = t.form->exact ? PAR_PARAMS : PAR_PARAMS_F32;
    w = dr_omp_f32(params);
    s = dr_omp_f32(slots);
    if (clips_total(b)) {   /* round, clip, the optimizer reads floats */
        if (!(clipped = malloc(P * sizeof(float))))
            return dr_fail(err, DR_ENOMEM, "openmp backend: no memory for the clipped gradient (%zu floats)", P);
        round_and_clip(b, t.form, t.total, divisor, true, clipped);
        t.form = dr_form_of(DR_FORM_F32);
        t.total = (const char *)clipped;
        divisor = 1;
    }
    optimize(b, lr, step, &t, divisor, w, s);
    free(clipped);
    return DR_OK;
}

/* The mixed step's clip: after the one skip decision and the unscale, on
 * the aggregated gradient (strategies/mixed.c), with exact norms whatever
 * --numerics (the mixed step runs its exact kernels in both). */
void dr_omp_clip_f32(dr_backend *b, float *g)
{
    if (clips_total(b)) dr_engine_clip(&b->o.clip, &b->m, true, g, b->P);
}

/* --clip_semantics=tensorflow under a mixed policy: one replica's rounded,
 * unscaled gradient, before the all-reduce (strategies/mixed.c). */
void dr_omp_clip_replica_f32(dr_backend *b, float *g)
{
    if (dr_engine_clip_on(&b->o.clip)) dr_engine_clip(&b->o.clip, &b->m, true, g, b->P);
}

/* The mixed step's apply: g is already rounded and unscaled (strategies/mixed.c). */
int dr_omp_apply_f32(dr_backend *b, const float *g, uint64_t step, dr_buffer *params, dr_buffer *slots,
                     dr_err *err)
{
    const dr_optimizer *o = &b->o;
    size_t P = b->P, nslots = (size_t)dr_optimizer_num_slots(o);
    grad_src t = { dr_form_of(DR_FORM_F32), (const char *)(const void *)g, PAR_PARAMS_F32 };
    int rc;
    if ((rc = dr_omp_need(params, P * sizeof(float), "params", err)) ||
        (nslots && (rc = dr_omp_need(slots, nslots * P * sizeof(float), "slots", err))))
        return rc;
    optimize(b, dr_lr_at(&o->schedule, o->lr, DR_SEAM_SCHEDULE_STEP(step)), step, &t, 1, dr_omp_f32(params),
             dr_omp_f32(slots));
    return DR_OK;
}
