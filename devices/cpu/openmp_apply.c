/* distref devices — the OpenMP backend's apply (distref/backend.h):
 *
 *   apply         per parameter: round(total / divisor) once, then the
 *                 optimizer (TensorFlow's ApplyGradientDescent /
 *                 ApplyMomentum / ApplyAdam, one rounded operation per
 *                 statement, nothing contracted), fused into one parallel
 *                 pass with no scratch; in fast numerics the float total is
 *                 the gradient, through the same optimizer code;
 *   applied_grad  the gradient apply reads, handed back (--trajectory);
 *   apply_f32     the mixed step's apply of an already rounded gradient.
 *
 * The planted faults behind DR_SEAM_* (devices/seams.h) are documented there.
 */
#include "devices/cpu/openmp_backend.h"
#include "distref/elem.h"
#include "devices/cpu/grad_clip.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "devices/seams.h"

/* ---- apply: round once, then the optimizer -------------------------------- */

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

/* Each apply below: chunks of GRAD_CHUNK parameters, their gradients
 * first, then the elementwise update (the same bits as one at a time;
 * `omp simd` vectorizes IEEE operations without changing a bit). */
static void apply_sgd(float lr, const grad_src *t, uint32_t d, float *w, size_t P)
{
    #pragma omp parallel for schedule(static) if (P >= t->par)
    for (size_t p0 = 0; p0 < P; p0 += GRAD_CHUNK) {
        float buf[GRAD_CHUNK];
        size_t n = P - p0 < GRAD_CHUNK ? P - p0 : GRAD_CHUNK;
        const float *g = grads_of(t, d, p0, n, buf);
        #pragma omp simd
        for (size_t q = 0; q < n; q++) w[p0 + q] = w[p0 + q] - lr * g[q];
    }
}

static void apply_momentum(const dr_optimizer *o, float lr, const grad_src *t, uint32_t d, float *w, float *v,
                           size_t P)
{
    const float mu = o->momentum;
    const bool nesterov = o->nesterov;
    #pragma omp parallel for schedule(static) if (P >= t->par)
    for (size_t p0 = 0; p0 < P; p0 += GRAD_CHUNK) {
        float buf[GRAD_CHUNK];
        size_t n = P - p0 < GRAD_CHUNK ? P - p0 : GRAD_CHUNK;
        const float *g = grads_of(t, d, p0, n, buf);
        float *vc = v + p0, *wc = w + p0;
        if (nesterov) {   /* two loops, no branch in either: both vectorize */
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

static void apply_adam(const dr_optimizer *o, float lr, uint64_t step, const grad_src *t, uint32_t d,
                       float *w, float *m, float *v, size_t P)
{
    unsigned k = step > 0xffffffffu ? 0xffffffffu : (unsigned)step;
    const float b1t = dr_powi_f32(o->beta1, k), b2t = dr_powi_f32(o->beta2, k);
    const float lr_t = lr * sqrtf(1.0f - b2t) / (1.0f - b1t);
    const float one_b1 = 1.0f - o->beta1, one_b2 = 1.0f - o->beta2, eps = o->epsilon;
    #pragma omp parallel for schedule(static) if (P >= PAR_PARAMS)
    for (size_t p0 = 0; p0 < P; p0 += GRAD_CHUNK) {
        float buf[GRAD_CHUNK];
        size_t n = P - p0 < GRAD_CHUNK ? P - p0 : GRAD_CHUNK;
        const float *gs = grads_of(t, d, p0, n, buf);
        for (size_t q = 0; q < n; q++) {
            size_t p = p0 + q;
            float g = gs[q];
            m[p] = m[p] + (g - m[p]) * one_b1;
            v[p] = v[p] + (g * g - v[p]) * one_b2;
            w[p] = w[p] - lr_t * m[p] / (sqrtf(v[p]) + eps);
        }
    }
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
    size_t P = b->P;
    if (o->kind == DR_OPT_ADAM) apply_adam(o, lr, dr_optimizer_updates(o, step), t, d, w, s, s + P, P);
    else if (o->momentum != 0.0f) apply_momentum(o, lr, t, d, w, s, P);
    else apply_sgd(lr, t, d, w, P);
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
