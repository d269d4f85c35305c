/* distref devices — the OpenMP CPU backend (distref/backend.h).
 *
 * Device memory is host memory: a dr_buffer is a calloc'd block, host_ptr()
 * hands it out, upload/download/copy are memcpy, sync() has nothing to wait
 * for. Each replica gets its own workspace (devices/cpu/openmp_backend.h), so
 * the engine may run replicas' kernels concurrently on threads.
 *
 * This file holds the table and the parameter-wise kernels:
 *   share   grad = R * grad + G * reg'(w), loss = R * loss + G * reg(w),
 *           exactly (dr_acc_mul_u32, dr_acc_add_prod), in parallel over
 *           parameters;
 * In fast numerics (float grad and loss, distref/backend.h) share scales in
 * float (grad*fl(mult/den) + reg'*fl(coef/den)).
 * apply (round once, then the optimizer) is devices/cpu/openmp_apply.c; the
 * forward, loss and gradient kernels are devices/cpu/openmp_kernels.c.
 *
 * The planted faults the conformance suites must catch (DR_MUTANT_*; never
 * built by default) sit behind named seams, DR_SEAM_* (devices/seams.h).
 */
#include "devices/cpu/openmp_backend.h"
#include "devices/cpu/openmp_graph.h"
#include "distref/elem.h"
#include "devices/cpu/grad_clip.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "devices/seams.h"


int dr_omp_need(const dr_buffer *b, size_t bytes, const char *what, dr_err *err)
{
    if (!b) return dr_fail(err, DR_EUSAGE, "openmp backend: no %s buffer", what);
    if (b->bytes < bytes)
        return dr_fail(err, DR_EUSAGE, "openmp backend: the %s buffer holds %zu bytes, %zu needed",
                       what, b->bytes, bytes);
    return DR_OK;
}

/* ---- what is supported ----------------------------------------------------- */

static int omp_supports(const dr_backend_query *q, dr_err *err)
{
    uint32_t beyond = q->layer_kinds & ~(1u << DR_LAYER_DENSE);
    if (beyond && q->numerics == DR_NUMERICS_EXACT_COMPACT)
        return dr_fail(err, DR_EUNSUPPORTED, "openmp backend: compact gradients are built for Dense models only");
    if (q->strategy == DR_STRATEGY_PARAMETER_SERVER)
        return dr_fail(err, DR_EUNSUPPORTED, "openmp backend: parameter_server runs in the reference and under "
                       "mpirun only (strategies/ps_mpi.c)");
    if ((unsigned)q->strategy > DR_STRATEGY_TPU)
        return dr_fail(err, DR_EUNSUPPORTED, "openmp backend: unknown strategy kind %d", (int)q->strategy);
    if (q->numerics != DR_NUMERICS_EXACT && q->numerics != DR_NUMERICS_FAST &&
        q->numerics != DR_NUMERICS_EXACT_COMPACT)
        return dr_fail(err, DR_EUNSUPPORTED, "openmp backend: unknown numerics %d", (int)q->numerics);
    if (q->numerics == DR_NUMERICS_EXACT_COMPACT && (q->tiles > 1 || q->strategy == DR_STRATEGY_TPU))
        return dr_fail(err, DR_EUNSUPPORTED, "openmp backend: compact gradients are not built for the tpu strategy");
    if (q->tiles < 1)
        return dr_fail(err, DR_EUNSUPPORTED, "openmp backend: %u tiles per replica; at least 1 is needed", q->tiles);
    return DR_OK;   /* every other strategy, any replica count, layer placement */
}

/* ---- open / close -------------------------------------------------------- */

static int check_model(const dr_model_spec *m, dr_err *err)
{
    if (m->nlayers < 1 || m->nlayers > DR_MAX_LAYERS)
        return dr_fail(err, DR_EUSAGE, "openmp backend: %u layers; 1..%d supported", m->nlayers, DR_MAX_LAYERS);
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        if (d->in < 1 || d->out < 1)
            return dr_fail(err, DR_EUSAGE, "openmp backend: layer %u is %u x %u", l, d->in, d->out);
        if (l > 0 && !d->src && d->in != m->layer[l - 1].out)
            return dr_fail(err, DR_EUSAGE, "openmp backend: layer %u takes %u inputs, layer %u gives %u",
                           l, d->in, l - 1, m->layer[l - 1].out);
        if ((unsigned)d->act > DR_ACT_SOFTMAX)
            return dr_fail(err, DR_EUSAGE, "openmp backend: layer %u has unknown activation %d", l, (int)d->act);
        if (d->act == DR_ACT_SOFTMAX && !dr_model_is_dense(m))
            return dr_fail(err, DR_EUNSUPPORTED, "not supported: a softmax layer (%u) in a model beyond Dense in the "
                           "openmp backend; use a linear last layer with from_logits", l);
    }
    if ((unsigned)m->loss > DR_LOSS_MSE)
        return dr_fail(err, DR_EUSAGE, "openmp backend: unknown loss %d", (int)m->loss);
    return DR_OK;
}

/* One device, the host: the device selection of p does not apply. */
static int omp_open(const dr_backend_params *p, dr_backend **out, dr_err *err)
{
    const dr_model_spec *m = p->model;
    const dr_optimizer *o = p->optimizer;
    dr_numerics num = p->numerics;
    dr_backend *b;
    int rc;
    *out = NULL;
    if ((rc = check_model(m, err))) return rc;
    if (num != DR_NUMERICS_EXACT && num != DR_NUMERICS_FAST && num != DR_NUMERICS_EXACT_COMPACT)
        return dr_fail(err, DR_EUNSUPPORTED, "openmp backend: unknown numerics %d", (int)num);
    if (o->kind != DR_OPT_SGD && o->kind != DR_OPT_ADAM)
        return dr_fail(err, DR_EUSAGE, "openmp backend: unknown optimizer %d", (int)o->kind);
    if (!(b = calloc(1, sizeof *b))) return dr_fail(err, DR_ENOMEM, "openmp backend: out of memory");
    b->m = *m;
    b->o = *o;
    b->num = num;
    b->P = dr_model_num_params(m);
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        b->koff[l] = dr_model_kernel_offset(m, l);
        if (d->in > b->widest) b->widest = d->in;
        if (d->out > b->widest) b->widest = d->out;
        if ((size_t)d->in * d->out > b->max_kernel) b->max_kernel = (size_t)d->in * d->out;
        b->lsz[l] = dr_model_layer_params(m, l);
        b->ksz[l] = d->kind == DR_LAYER_DENSE || d->kind == DR_LAYER_CONV2D ? dr_model_kernel_size(m, l) : 0;
    }
    *out = b;
    return DR_OK;
}

static void omp_close(dr_backend *b)
{
    free(b);
}

/* ---- memory ---------------------------------------------------------------- */

static int in_range(const dr_buffer *buf, size_t off, size_t bytes, const char *what, dr_err *err)
{
    if (!buf) return dr_fail(err, DR_EUSAGE, "openmp backend: %s: no buffer", what);
    if (off > buf->bytes || bytes > buf->bytes - off)
        return dr_fail(err, DR_EUSAGE, "openmp backend: %s of %zu bytes at offset %zu outside a buffer of %zu",
                       what, bytes, off, buf->bytes);
    return DR_OK;
}

static int omp_alloc(dr_backend *b, size_t bytes, dr_buffer **out, dr_err *err)
{
    dr_buffer *buf = calloc(1, sizeof *buf);
    (void)b;
    *out = NULL;
    if (buf) buf->data = calloc(bytes ? bytes : 1, 1);
    if (!buf || !buf->data) {
        free(buf);
        return dr_fail(err, DR_ENOMEM, "openmp backend: out of memory for a buffer of %zu bytes", bytes);
    }
    buf->bytes = bytes;
    *out = buf;
    return DR_OK;
}

static void omp_release(dr_backend *b, dr_buffer *buf)
{
    (void)b;
    if (!buf) return;
    free(buf->data);
    free(buf);
}

static int omp_upload(dr_backend *b, dr_buffer *dst, size_t off, const void *src, size_t bytes, dr_err *err)
{
    int rc = in_range(dst, off, bytes, "upload", err);
    (void)b;
    if (rc == DR_OK && bytes) memcpy((char *)dst->data + off, src, bytes);
    return rc;
}

static int omp_download(dr_backend *b, void *dst, const dr_buffer *src, size_t off, size_t bytes, dr_err *err)
{
    int rc = in_range(src, off, bytes, "download", err);
    (void)b;
    if (rc == DR_OK && bytes) memcpy(dst, (const char *)src->data + off, bytes);
    return rc;
}

static int omp_copy(dr_backend *b, dr_buffer *dst, size_t dst_off, const dr_buffer *src, size_t src_off,
                    size_t bytes, dr_err *err)
{
    int rc;
    (void)b;
    if ((rc = in_range(dst, dst_off, bytes, "copy (destination)", err)) ||
        (rc = in_range(src, src_off, bytes, "copy (source)", err)))
        return rc;
    if (bytes) memmove((char *)dst->data + dst_off, (const char *)src->data + src_off, bytes);
    return DR_OK;
}

static int omp_fill_zero(dr_backend *b, dr_buffer *dst, size_t off, size_t bytes, dr_err *err)
{
    int rc = in_range(dst, off, bytes, "fill_zero", err);
    (void)b;
    if (rc == DR_OK && bytes) memset((char *)dst->data + off, 0, bytes);
    return rc;
}

static int omp_sync(dr_backend *b, dr_err *err)
{
    (void)b; (void)err;
    return DR_OK;   /* every kernel has finished when it returns */
}

static void *omp_host_ptr(dr_buffer *buf)
{
    return buf ? buf->data : NULL;
}

/* ---- a replica's workspace -------------------------------------------------- */

static void scratch_free(dr_omp_scratch *s)
{
    if (!s) return;
    for (int l = 0; l < DR_MAX_LAYERS; l++) { free(s->pre[l]); free(s->act[l]); }
    dr_omp_graph_free(s->graph);
    free(s->dz[0]); free(s->dz[1]); free(s->colT); free(s->aux);
    free(s->ex_loss); free(s->hit);
    free(s);
}

static int omp_replica_open(dr_backend *b, dr_replica_bufs *rb, uint32_t rows, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    size_t cap = rows ? rows : 1, wide = cap * b->widest;
    dr_omp_scratch *s = calloc(1, sizeof *s);
    bool ok = s != NULL;
    rb->scratch = NULL;
    rb->correct = 0;
    if (ok) {
        s->cap = rows;
        for (uint32_t l = 0; l < m->nlayers; l++) {   /* zeroed: under spatial partitioning a core's map outside
                                                          its tile and halo is a hole that reads 0, never stale
                                                          memory (as the reference's, ref/tpu_spatial.c) */
            s->pre[l] = calloc(cap * m->layer[l].out, sizeof(float));
            s->act[l] = calloc(cap * m->layer[l].out, sizeof(float));
            ok = ok && s->pre[l] && s->act[l];
        }
        s->dz[0] = malloc(wide * sizeof(float));
        s->dz[1] = malloc(wide * sizeof(float));
        s->colT = malloc(wide * sizeof(float));
        s->aux = malloc(cap * m->layer[m->nlayers - 1].out * sizeof(float));
        s->ex_loss = malloc(cap * sizeof(float));
        s->hit = malloc(cap);
        ok = ok && s->dz[0] && s->dz[1] && s->colT && s->aux && s->ex_loss && s->hit;
    }
    if (!ok) {
        scratch_free(s);
        return dr_fail(err, DR_ENOMEM, "openmp backend: out of memory for a replica of %u rows", rows);
    }
    s->delta0 = s->dz[0];
    if (!dr_model_is_dense(m) && dr_omp_graph_open(b, s, rows, err)) {
        scratch_free(s);
        return DR_ENOMEM;
    }
    rb->scratch = s;
    return DR_OK;
}

static void omp_replica_close(dr_backend *b, dr_replica_bufs *rb)
{
    (void)b;
    scratch_free(rb->scratch);
    rb->scratch = NULL;
}

/* ---- share: the replica's part over the step's denominator ------------------ */
/* mult * sums + coef * reg: mult = R and coef = D (the loss's divisor) over
 * D*R; tf_default gives each replica its own mult (include/distref/plan.h). */

/* One parameter: a = mult a + coef g, g its regularization gradient (0 for none). */
static inline void share_one(dr_acc *a, uint32_t mult, uint32_t coef, float g)
{
    if (mult > 1) dr_acc_mul_u32(a, mult);
    DR_SEAM_REG_SCALE(g, mult);
    if (DR_SEAM_L2_IN_GRADIENT && g != 0.0f) dr_acc_add_prod(a, (float)coef, g);
    DR_SEAM_SHARE_DONE(a, coef * mult);
}

/* share_one for a compact accumulator, with the same seams; its sums were
 * multiplied by mult / left already (loss_grad's fold). */
static inline void share_one_compact(dr_cacc *a, uint32_t left, uint32_t mult, uint32_t coef, float g)
{
    (void)mult;   /* the seams' (not every build reads it) */
    if (left > 1) dr_cacc_mul_u32(a, left);
    DR_SEAM_REG_SCALE(g, mult);
    if (DR_SEAM_L2_IN_GRADIENT && g != 0.0f) dr_cacc_add_prod(a, (float)coef, g);
    DR_SEAM_SHARE_DONE_COMPACT(a, coef * mult);
}

/* x[0..n) *= s, per vector width (DR_WIDE). */
DR_WIDE static void scale_f32(float *x, size_t n, float s)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = x[i] * s;
}

/* Fast numerics: TensorFlow's per-replica gradient of sum(loss_i)/D +
 * reg/R, in float (distref/backend.h): sg = fl(mult/den), sr = fl(coef/den). */
static int share_f32(dr_backend *b, dr_replica_bufs *rb, uint32_t mult, uint32_t coef, uint32_t den)
{
    const dr_model_spec *m = &b->m;
    const float *w = dr_omp_f32(rb->params);
    float *grad = dr_omp_f32(rb->grad), *loss = dr_omp_f32(rb->loss);
    float sg = (float)((double)mult / den), sr = (float)((double)coef / den), c = 2.0f * m->l2, reg = 0.0f;
    DR_SEAM_REG_SCALE(sr, mult);
    #pragma omp parallel if (b->P >= PAR_PARAMS_F32)
    {
        size_t lo, hi;
        dr_omp_cut(b->P, 64, &lo, &hi);
        scale_f32(grad + lo, hi - lo, sg);
    }
    for (uint32_t l = 0; l < m->nlayers && m->l2 != 0.0f; l++) {
        size_t k0 = b->koff[l], nk = b->ksz[l];
        float lanes[16] = { 0 }, sq = 0.0f;
        size_t p = 0;
        for (; p + 16 <= nk; p += 16)   /* sum of w^2 in 16 float lanes, then the lanes in order */
            for (int j = 0; j < 16; j++) lanes[j] = lanes[j] + w[k0 + p + j] * w[k0 + p + j];
        for (int j = 0; j < 16; j++) sq = sq + lanes[j];
        for (; p < nk; p++) sq = sq + w[k0 + p] * w[k0 + p];
        reg = reg + sq;
        if (DR_SEAM_L2_IN_GRADIENT) {
            #pragma omp parallel for simd schedule(static) if (parallel: nk >= PAR_PARAMS_F32)
            for (size_t q = k0; q < k0 + nk; q++) grad[q] = grad[q] + (c * w[q]) * sr;
        }
    }
    *loss = *loss * sg + (m->l2 * reg) * sr;
    return DR_OK;
}

/* What of mult is left for share_exact to multiply a compact gradient by,
 * given the power of two loss_grad folded into it (openmp_kernels.c). A
 * fold that does not divide mult (a share given another mult than
 * rb->share_mult announced) is taken back first: the exponent of every
 * nonzero, not overflowed accumulator, as dr_cacc_mul_u32 moved it. */
static uint32_t share_left(dr_replica_bufs *rb, dr_cacc *grad, size_t P, uint32_t mult)
{
    dr_omp_scratch *s = rb->scratch;
    uint32_t folded = s && s->folded > 1 ? s->folded : 1;
    if (s) s->folded = 1;
    if (mult % folded == 0) return mult / folded;
    for (size_t p = 0; p < P; p++)
        if ((grad[p].w[0] | grad[p].w[1] | grad[p].w[2]) && !dr_cacc_overflowed(&grad[p]))
            grad[p].exp -= __builtin_ctz(folded);
    return mult;
}

/* Exact share of a replica's gradient in form EXACT (dr_acc) or
 * EXACT_COMPACT (dr_cacc). */
static void share_exact(dr_backend *b, dr_replica_bufs *rb, dr_numerics form, void *gradv, uint32_t mult,
                        uint32_t coef)
{
    const dr_model_spec *m = &b->m;
    const float *w;
    dr_acc *grad, *loss;
    float reg = 0.0f, c = 2.0f * m->l2;
    const bool compact = form == DR_NUMERICS_EXACT_COMPACT;
    dr_cacc *cgrad = compact ? (dr_cacc *)gradv : NULL;
    const uint32_t left = compact ? share_left(rb, cgrad, b->P, mult) : mult;
    w = dr_omp_f32(rb->params);
    grad = compact ? NULL : (dr_acc *)gradv;
    loss = dr_omp_acc(rb->loss);
    if (m->l2 != 0.0f) {   /* reg = l2 * round(sum of w^2 over the kernels) */
        dr_acc sq;
        dr_acc_init(&sq);
        for (uint32_t l = 0; l < m->nlayers; l++)
            dr_acc_add_dot(&sq, w + b->koff[l], w + b->koff[l], b->ksz[l]);
        reg = m->l2 * dr_acc_round(&sq);
    }
    /* a compact gradient with all of mult folded in and no regularization
     * term: nothing left to do to it */
    const bool done = compact && left == 1 && m->l2 == 0.0f && !DR_SEAM_SHARE_DONE_ACTS;
    for (uint32_t l = 0; l < m->nlayers && !done; l++) {
        size_t k0 = b->koff[l], nk = b->ksz[l], nb = b->lsz[l] - nk;
        if (m->l2 != 0.0f) {
            #pragma omp parallel for schedule(static) if (nk >= PAR_PARAMS)
            for (size_t p = k0; p < k0 + nk; p++) {
                if (compact) share_one_compact(&cgrad[p], left, mult, coef, c * w[p]);
                else share_one(&grad[p], mult, coef, c * w[p]);
            }
        } else {
            #pragma omp parallel for schedule(static) if (nk >= PAR_PARAMS)
            for (size_t p = k0; p < k0 + nk; p++) {
                if (compact) share_one_compact(&cgrad[p], left, mult, coef, 0.0f);
                else share_one(&grad[p], mult, coef, 0.0f);
            }
        }
        for (size_t p = k0 + nk; p < k0 + nk + nb; p++) {   /* biases */
            if (compact) share_one_compact(&cgrad[p], left, mult, coef, 0.0f);
            else share_one(&grad[p], mult, coef, 0.0f);
        }
    }
    if (mult > 1) dr_acc_mul_u32(loss, mult);
    DR_SEAM_REG_SCALE(reg, mult);
    dr_acc_add_prod(loss, (float)coef, reg);
}

static int omp_share(dr_backend *b, dr_replica_bufs *rb, uint32_t mult, uint32_t coef, uint32_t den, dr_err *err)
{
    int rc;
    if (mult < 1 || mult > (1u << 30))
        return dr_fail(err, DR_EUSAGE, "openmp backend: share multiplier %u; 1..2^30 supported", mult);
    if (b->num == DR_NUMERICS_FAST) {
        if (den < 1) return dr_fail(err, DR_EUSAGE, "openmp backend: share over a denominator of 0");
        if ((rc = dr_omp_need(rb->grad, b->P * sizeof(float), "grad", err)) ||
            (rc = dr_omp_need(rb->loss, sizeof(float), "loss", err)) ||
            (rc = dr_omp_need(rb->params, b->P * sizeof(float), "params", err)))
            return rc;
        if ((rc = share_f32(b, rb, mult, coef, den))) return rc;
    } else {
        if ((rc = dr_omp_need(rb->grad, b->P * dr_grad_bytes(b->num), "grad", err)) ||
            (rc = dr_omp_need(rb->loss, sizeof(dr_acc), "loss", err)) ||
            (rc = dr_omp_need(rb->params, b->P * sizeof(float), "params", err)))
            return rc;
        share_exact(b, rb, b->num, rb->grad->data, mult, coef);
    }
    /* --clip_semantics=tensorflow: each replica's share, Keras's way (under
     * accumulation not a micro-step's: the engine clips the update's, step.c) */
    if (DR_SEAM_CLIP_PER_REPLICA(&b->o.clip) && !b->o.clip.at_update)
        return dr_engine_clip_share(&b->o.clip, &b->m, b->num, rb->grad->data, b->P, den, err);
    return DR_OK;
}

/* Exact numerics switch between full and compact gradients (the engine's
 * fallback, between steps). */
static int omp_set_numerics(dr_backend *b, dr_numerics num, dr_err *err)
{
    bool exact_now = b->num == DR_NUMERICS_EXACT || b->num == DR_NUMERICS_EXACT_COMPACT;
    if (!exact_now || (num != DR_NUMERICS_EXACT && num != DR_NUMERICS_EXACT_COMPACT))
        return dr_fail(err, DR_EUSAGE, "openmp backend: numerics switch between the two exact forms only");
    b->num = num;
    return DR_OK;
}

static int omp_round_loss(dr_backend *b, const dr_buffer *loss, uint32_t divisor, float *out, dr_err *err)
{
    int rc;
    if (divisor < 1) return dr_fail(err, DR_EUSAGE, "openmp backend: round_loss with divisor 0");
    if ((rc = dr_omp_need(loss, dr_sum_bytes(b->num), "loss", err))) return rc;
    if (b->num == DR_NUMERICS_FAST) *out = divisor == 1 ? *dr_omp_f32(loss) : *dr_omp_f32(loss) / (float)divisor;
    else *out = dr_acc_round_div(dr_omp_acc(loss), divisor);
    return DR_OK;
}

/* ---- the table -------------------------------------------------------------- */

const dr_backend_ops *dr_backend_openmp(void)
{
    static const dr_backend_ops ops = {
        .name = "openmp",
        .supports = omp_supports,
        .open = omp_open,
        .close = omp_close,
        .alloc = omp_alloc,
        .release = omp_release,
        .upload = omp_upload,
        .download = omp_download,
        .copy = omp_copy,
        .fill_zero = omp_fill_zero,
        .sync = omp_sync,
        .host_ptr = omp_host_ptr,
        .replica_open = omp_replica_open,
        .replica_close = omp_replica_close,
        .forward = dr_omp_forward,
        .loss_grad = dr_omp_loss_grad,
        .share = omp_share,
        .apply = dr_omp_apply,
        .applied_grad = dr_omp_applied_grad,
        .round_loss = omp_round_loss,
        .set_numerics = omp_set_numerics,
        .mixed_loss_grad = dr_omp_mixed_loss_grad,
        .apply_f32 = dr_omp_apply_f32,
        .clip_f32 = dr_omp_clip_f32,
        .clip_replica_f32 = dr_omp_clip_replica_f32,
        .layer0_partial = dr_omp_layer0_partial,
        .layer0_finish = dr_omp_layer0_finish,
        .layer0_delta = dr_omp_layer0_delta,
        .layer0_grad_rows = dr_omp_layer0_grad_rows,
        .graph_begin = dr_omp_graph_begin,
        .layer_forward = dr_omp_layer_forward,
        .bn_sums = dr_omp_bn_sums,
        .bn_normalize = dr_omp_bn_normalize,
        .graph_loss = dr_omp_graph_loss,
        .layer_backward = dr_omp_layer_backward,
        .bn_backward = dr_omp_bn_backward,
        .outputs = dr_omp_outputs,
        .graph_ops_mixed = true,
        .set_tile = dr_omp_set_tile,
        .spatial_exchange = dr_omp_spatial_exchange,
    };
    return &ops;
}
