/* distref devices — the OpenCL backend (distref/backend.h).
 *
 * Device memory is the device's: a dr_buffer is a cl_mem, host_ptr() is
 * NULL, upload/download are blocking transfers on the backend's one
 * in-order queue (devices/opencl_backend.h). Kernels are enqueued without
 * waiting; sync() is clFinish. Running out of device memory (an allocation
 * or a kernel failing with CL_MEM_OBJECT_ALLOCATION_FAILURE or
 * CL_OUT_OF_RESOURCES) is DR_EDEVICE_OOM naming what failed.
 *
 * This file holds the table, memory, share and apply; the forward, loss
 * and gradient launches are devices/opencl_kernels.c, the kernels
 * devices/cl/ (acc.cl, kernels.cl). Exact numerics need a device with correctly rounded
 * divide/sqrt, denormals and 64-bit integers (dr_cl_exact_missing); no
 * double precision is used.
 */
#include "devices/opencl_backend.h"
#include "distref/elem.h"
#include "distref/opencl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int dr_cl_need(const dr_buffer *b, size_t bytes, const char *what, dr_err *err)
{
    if (!b) return dr_fail(err, DR_EUSAGE, "opencl backend: no %s buffer", what);
    if (b->bytes < bytes)
        return dr_fail(err, DR_EUSAGE, "opencl backend: the %s buffer holds %zu bytes, %zu needed",
                       what, b->bytes, bytes);
    return DR_OK;
}

/* Sets the arguments and enqueues one launch (global g0 x g1 rounded up to
 * the local size; l0 = 0: the implementation's choice). */
int dr_cl_launch(dr_backend *b, int kernel, size_t g0, size_t g1, size_t l0, size_t l1,
                 const dr_cl_arg *args, int nargs, const char *what, dr_err *err)
{
    cl_kernel k = b->k[kernel];
    size_t g[2], l[2];
    cl_int e = CL_SUCCESS;
    if (g0 == 0 || g1 == 0) return DR_OK;
    if (l0 == 0 && g1 == 1) l0 = 64;   /* a fixed local size: PoCL compiles a kernel once per local size */
    g[0] = l0 ? (g0 + l0 - 1) / l0 * l0 : g0;
    g[1] = l1 ? (g1 + l1 - 1) / l1 * l1 : g1;
    l[0] = l0; l[1] = l1;
    pthread_mutex_lock(&b->lock);
    for (int i = 0; i < nargs && e == CL_SUCCESS; i++) {
        const dr_cl_arg *a = &args[i];
        if (a->kind == 'm') e = clSetKernelArg(k, (cl_uint)i, sizeof(cl_mem), a->m ? &a->m : NULL);
        else if (a->kind == 'u') e = clSetKernelArg(k, (cl_uint)i, sizeof(cl_uint), &a->u);
        else e = clSetKernelArg(k, (cl_uint)i, sizeof(cl_float), &a->f);
    }
    if (e == CL_SUCCESS)
        e = clEnqueueNDRangeKernel(b->q, k, g1 > 1 || l1 ? 2 : 1, NULL, g, l0 ? l : NULL, 0, NULL, NULL);
    pthread_mutex_unlock(&b->lock);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, what);
}

/* ---- what is supported ------------------------------------------------------ */

static int cl_supports(const dr_backend_query *q, dr_err *err)
{
    if (q->strategy == DR_STRATEGY_PARAMETER_SERVER || q->strategy == DR_STRATEGY_TPU)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: %s is not built for OpenCL (one_device, mirrored, "
                       "central_storage and multi_worker_mirrored are)", dr_strategy_kind_name(q->strategy));
    if ((unsigned)q->strategy > DR_STRATEGY_TPU)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: unknown strategy kind %d", (int)q->strategy);
    if (q->numerics != DR_NUMERICS_EXACT && q->numerics != DR_NUMERICS_FAST)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: unknown numerics %d", (int)q->numerics);
    if (q->tiles != 1 || q->layer_placement)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: spatial partitioning and layer placement are not built");
    return DR_OK;
}

/* ---- open / close -------------------------------------------------------------- */

static void cl_close(dr_backend *b)
{
    if (!b) return;
    if (b->q) clFinish(b->q);
    if (b->ranges) clReleaseMemObject(b->ranges);
    if (b->part) clReleaseMemObject(b->part);
    if (b->reg) clReleaseMemObject(b->reg);
    for (int i = 0; i < K_COUNT; i++) if (b->k[i]) clReleaseKernel(b->k[i]);
    if (b->prog) clReleaseProgram(b->prog);
    if (b->q) clReleaseCommandQueue(b->q);
    if (b->ctx) clReleaseContext(b->ctx);
    if (b->lock_made) pthread_mutex_destroy(&b->lock);
    free(b);
}

static int share_buffers(dr_backend *b, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    cl_uint ranges[2 * DR_MAX_LAYERS];
    cl_int e;
    size_t groups = 0;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        size_t nk = (size_t)m->layer[l].in * m->layer[l].out;
        ranges[2 * l] = (cl_uint)b->koff[l];
        ranges[2 * l + 1] = (cl_uint)nk;
        groups += (nk + DR_CL_CHUNK - 1) / DR_CL_CHUNK;
    }
    b->part_n = groups;
    b->ranges = clCreateBuffer(b->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof ranges, ranges, &e);
    if (!b->ranges) return dr_cl_fail(err, e, "allocating the share's ranges");
    b->part = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, (groups ? groups : 1) * sizeof(dr_acc), NULL, &e);
    if (!b->part) return dr_cl_fail(err, e, "allocating the share's partial sums");
    b->reg = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, sizeof(float), NULL, &e);
    if (!b->reg) return dr_cl_fail(err, e, "allocating the share's regularization");
    return DR_OK;
}

int dr_backend_opencl_open(const dr_opencl_select *sel, const dr_model_spec *m, const dr_optimizer *o,
                           dr_numerics num, dr_backend **out, dr_err *err)
{
    dr_backend *b;
    const char *missing;
    cl_int e;
    int rc;
    *out = NULL;
    if (m->nlayers < 1 || m->nlayers > DR_MAX_LAYERS)
        return dr_fail(err, DR_EUSAGE, "opencl backend: %u layers; 1..%d supported", m->nlayers, DR_MAX_LAYERS);
    if (num != DR_NUMERICS_EXACT && num != DR_NUMERICS_FAST)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: unknown numerics %d", (int)num);
    if (o->kind != DR_OPT_SGD && o->kind != DR_OPT_ADAM)
        return dr_fail(err, DR_EUSAGE, "opencl backend: unknown optimizer %d", (int)o->kind);
    if (!(b = calloc(1, sizeof *b))) return dr_fail(err, DR_ENOMEM, "opencl backend: out of memory");
    b->m = *m;
    b->o = *o;
    b->num = num;
    b->P = dr_model_num_params(m);
    for (uint32_t l = 0; l < m->nlayers; l++) {
        b->koff[l] = dr_model_kernel_offset(m, l);
        if (m->layer[l].in > b->widest) b->widest = m->layer[l].in;
        if (m->layer[l].out > b->widest) b->widest = m->layer[l].out;
    }
    if (b->P * sizeof(dr_acc) >= ((size_t)1 << 32)) {
        size_t P = b->P;
        free(b);
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: %zu parameters; the kernels index below 2^32 bytes", P);
    }
    if (pthread_mutex_init(&b->lock, NULL) != 0) {
        free(b);
        return dr_fail(err, DR_ENOMEM, "opencl backend: could not make a lock");
    }
    b->lock_made = true;
    if ((rc = dr_cl_pick(sel ? sel->platform : -1, sel ? sel->device : -1, &b->platform, &b->dev, err))) goto fail;
    dr_cl_caps_of(b->platform, b->dev, &b->caps);
    if (num == DR_NUMERICS_EXACT && (missing = dr_cl_exact_missing(&b->caps))) {
        rc = dr_fail(err, DR_EUNSUPPORTED, "opencl backend: exact numerics need %s, which %s lacks; "
                     "--numerics=fast runs there", missing, b->caps.name);
        goto fail;
    }
    b->ctx = clCreateContext(NULL, 1, &b->dev, NULL, NULL, &e);
    if (!b->ctx) { rc = dr_cl_fail(err, e, "clCreateContext"); goto fail; }
    b->q = clCreateCommandQueue(b->ctx, b->dev, 0, &e);
    if (!b->q) { rc = dr_cl_fail(err, e, "clCreateCommandQueue"); goto fail; }
    if ((rc = dr_cl_build(b, err)) || (rc = share_buffers(b, err))) goto fail;
    *out = b;
    return DR_OK;
fail:
    cl_close(b);
    return rc;
}

static int cl_open(const dr_model_spec *m, const dr_optimizer *o, dr_numerics num, dr_backend **out, dr_err *err)
{
    return dr_backend_opencl_open(NULL, m, o, num, out, err);
}

/* ---- memory ---------------------------------------------------------------------- */

static int in_range(const dr_buffer *buf, size_t off, size_t bytes, const char *what, dr_err *err)
{
    if (!buf) return dr_fail(err, DR_EUSAGE, "opencl backend: %s: no buffer", what);
    if (off > buf->bytes || bytes > buf->bytes - off)
        return dr_fail(err, DR_EUSAGE, "opencl backend: %s of %zu bytes at offset %zu outside a buffer of %zu",
                       what, bytes, off, buf->bytes);
    return DR_OK;
}

static int cl_fill_zero(dr_backend *b, dr_buffer *dst, size_t off, size_t bytes, dr_err *err);

static int cl_alloc(dr_backend *b, size_t bytes, dr_buffer **out, dr_err *err)
{
    dr_buffer *buf = calloc(1, sizeof *buf);
    cl_int e = CL_SUCCESS;
    int rc;
    *out = NULL;
    if (!buf) return dr_fail(err, DR_ENOMEM, "opencl backend: out of host memory");
    if (bytes > b->caps.max_alloc) {
        free(buf);
        return dr_fail(err, DR_EDEVICE_OOM, "opencl backend: a buffer of %zu bytes is larger than %s's largest "
                       "allocation (%llu bytes): the device is out of memory", bytes, b->caps.name,
                       (unsigned long long)b->caps.max_alloc);
    }
    buf->bytes = bytes;
    buf->mem = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, &e);
    if (!buf->mem) {
        free(buf);
        return dr_cl_fail(err, e, "allocating a device buffer");
    }
    if ((rc = cl_fill_zero(b, buf, 0, bytes, err))) {
        clReleaseMemObject(buf->mem);
        free(buf);
        return rc;
    }
    *out = buf;
    return DR_OK;
}

static void cl_release(dr_backend *b, dr_buffer *buf)
{
    (void)b;
    if (!buf) return;
    clReleaseMemObject(buf->mem);
    free(buf);
}

static int cl_upload(dr_backend *b, dr_buffer *dst, size_t off, const void *src, size_t bytes, dr_err *err)
{
    int rc = in_range(dst, off, bytes, "upload", err);
    cl_int e;
    if (rc || !bytes) return rc;
    e = clEnqueueWriteBuffer(b->q, dst->mem, CL_TRUE, off, bytes, src, 0, NULL, NULL);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "upload");
}

static int cl_download(dr_backend *b, void *dst, const dr_buffer *src, size_t off, size_t bytes, dr_err *err)
{
    int rc = in_range(src, off, bytes, "download", err);
    cl_int e;
    if (rc || !bytes) return rc;
    e = clEnqueueReadBuffer(b->q, src->mem, CL_TRUE, off, bytes, dst, 0, NULL, NULL);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "download");
}

static int cl_copy(dr_backend *b, dr_buffer *dst, size_t dst_off, const dr_buffer *src, size_t src_off,
                   size_t bytes, dr_err *err)
{
    int rc;
    cl_int e;
    if ((rc = in_range(dst, dst_off, bytes, "copy (destination)", err)) ||
        (rc = in_range(src, src_off, bytes, "copy (source)", err)) || !bytes)
        return rc;
    if (dst == src && dst_off < src_off + bytes && src_off < dst_off + bytes)
        return dr_fail(err, DR_EUSAGE, "opencl backend: overlapping copy within one buffer");
    e = clEnqueueCopyBuffer(b->q, src->mem, dst->mem, src_off, dst_off, bytes, 0, NULL, NULL);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "copy");
}

static int cl_fill_zero(dr_backend *b, dr_buffer *dst, size_t off, size_t bytes, dr_err *err)
{
    int rc = in_range(dst, off, bytes, "fill_zero", err);
    cl_uchar zero = 0;
    cl_int e;
    if (rc || !bytes) return rc;
    e = clEnqueueFillBuffer(b->q, dst->mem, &zero, 1, off, bytes, 0, NULL, NULL);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "fill_zero");
}

static int cl_sync(dr_backend *b, dr_err *err)
{
    cl_int e = clFinish(b->q);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "waiting for the device");
}

static void *cl_host_ptr(dr_buffer *buf)
{
    (void)buf;
    return NULL;   /* device memory: collectives stage through download/upload */
}

/* ---- a replica's workspace ---------------------------------------------------------- */

static void scratch_free(dr_cl_scratch *s)
{
    cl_mem all[2 * DR_MAX_LAYERS + 5];
    size_t n = 0;
    if (!s) return;
    for (int l = 0; l < DR_MAX_LAYERS; l++) { all[n++] = s->pre[l]; all[n++] = s->act[l]; }
    all[n++] = s->dz[0]; all[n++] = s->dz[1]; all[n++] = s->ex_loss; all[n++] = s->hit; all[n++] = s->part;
    for (size_t i = 0; i < n; i++) if (all[i]) clReleaseMemObject(all[i]);
    free(s->hit_host);
    free(s);
}

static int cl_replica_open(dr_backend *b, dr_replica_bufs *rb, uint32_t rows, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    size_t cap = rows ? rows : 1;
    dr_cl_scratch *s = calloc(1, sizeof *s);
    cl_int e = CL_SUCCESS;
    rb->scratch = NULL;
    rb->correct = 0;
    if (!s) return dr_fail(err, DR_ENOMEM, "opencl backend: out of host memory");
    s->cap = rows;
#define MK(field, bytes) do { if (e == CL_SUCCESS) field = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, (bytes), NULL, &e); } while (0)
    for (uint32_t l = 0; l < m->nlayers; l++) {
        MK(s->pre[l], cap * m->layer[l].out * sizeof(float));
        MK(s->act[l], cap * m->layer[l].out * sizeof(float));
    }
    MK(s->dz[0], cap * b->widest * sizeof(float));
    MK(s->dz[1], cap * b->widest * sizeof(float));
    MK(s->ex_loss, cap * sizeof(float));
    MK(s->hit, cap);
    MK(s->part, ((cap + DR_CL_CHUNK - 1) / DR_CL_CHUNK) * sizeof(dr_acc));
#undef MK
    s->hit_host = malloc(cap);
    if (e != CL_SUCCESS || !s->hit_host) {
        scratch_free(s);
        return e != CL_SUCCESS ? dr_cl_fail(err, e, "allocating a replica's workspace")
                               : dr_fail(err, DR_ENOMEM, "opencl backend: out of host memory");
    }
    rb->scratch = s;
    return DR_OK;
}

static void cl_replica_close(dr_backend *b, dr_replica_bufs *rb)
{
    (void)b;
    scratch_free(rb->scratch);
    rb->scratch = NULL;
}

/* ---- share ------------------------------------------------------------------------ */

static int cl_share(dr_backend *b, dr_replica_bufs *rb, uint32_t mult, uint32_t coef, uint32_t den, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const bool fast = b->num == DR_NUMERICS_FAST;
    const float c = 2.0f * m->l2;
    int rc;
    if (mult < 1 || mult > (1u << 30))
        return dr_fail(err, DR_EUSAGE, "opencl backend: share multiplier %u; 1..2^30 supported", mult);
    if ((rc = dr_cl_need(rb->grad, b->P * dr_sum_bytes(b->num), "grad", err)) ||
        (rc = dr_cl_need(rb->loss, dr_sum_bytes(b->num), "loss", err)) ||
        (rc = dr_cl_need(rb->params, b->P * sizeof(float), "params", err)))
        return rc;
    if (fast) {
        float sg, sr;
        if (den < 1) return dr_fail(err, DR_EUSAGE, "opencl backend: share over a denominator of 0");
        sg = (float)((double)mult / den);
        sr = (float)((double)coef / den);
        for (uint32_t l = 0; l < m->nlayers; l++) {
            size_t k0 = b->koff[l], nk = (size_t)m->layer[l].in * m->layer[l].out;
            dr_cl_arg a[] = { CLM(rb->grad->mem), CLM(rb->params->mem), CLU(k0), CLU(nk + m->layer[l].out),
                              CLF(sg), CLF(c), CLF(sr), CLU(0) };
            dr_cl_arg k[] = { CLM(rb->grad->mem), CLM(rb->params->mem), CLU(k0), CLU(nk),
                              CLF(sg), CLF(c), CLF(sr), CLU(m->l2 != 0.0f) };
            if (m->l2 != 0.0f) {   /* the kernel with its L2 term, then the biases alone */
                a[2] = CLU(k0 + nk); a[3] = CLU(m->layer[l].out);
                if ((rc = dr_cl_launch(b, K_SHARE_FAST, nk, 1, 0, 0, k, 8, "share", err))) return rc;
            }
            if ((rc = dr_cl_launch(b, K_SHARE_FAST, a[3].u, 1, 0, 0, a, 8, "share", err))) return rc;
        }
        {
            dr_cl_arg a[] = { CLM(rb->loss->mem), CLM(rb->params->mem), CLM(b->ranges), CLU(m->l2 != 0.0f ? m->nlayers : 0),
                              CLF(sg), CLF(sr), CLF(m->l2) };
            return dr_cl_launch(b, K_LOSS_SHARE_FAST, 1, 1, 0, 0, a, 7, "share (loss)", err);
        }
    }
    if (m->l2 != 0.0f) {   /* reg = l2 * round(sum of w^2 over the kernels), on the device */
        size_t poff = 0;
        for (uint32_t l = 0; l < m->nlayers; l++) {
            size_t nk = (size_t)m->layer[l].in * m->layer[l].out, g = (nk + DR_CL_CHUNK - 1) / DR_CL_CHUNK;
            dr_cl_arg a[] = { CLM(rb->params->mem), CLU(b->koff[l]), CLU(nk), CLU(1), CLM(b->part), CLU(poff) };
            if ((rc = dr_cl_launch(b, K_PARTIAL_SUM, g, 1, 0, 0, a, 6, "share (sum of squares)", err))) return rc;
            poff += g;
        }
        {
            dr_cl_arg a[] = { CLM(b->part), CLU(poff), CLM(NULL), CLM(b->reg), CLF(m->l2) };
            if ((rc = dr_cl_launch(b, K_MERGE, 1, 1, 0, 0, a, 5, "share (sum of squares)", err))) return rc;
        }
    }
    for (uint32_t l = 0; l < m->nlayers; l++) {
        size_t k0 = b->koff[l], nk = (size_t)m->layer[l].in * m->layer[l].out;
        dr_cl_arg k[] = { CLM(rb->grad->mem), CLM(rb->params->mem), CLU(k0), CLU(nk), CLU(mult), CLU(coef), CLF(c) };
        dr_cl_arg a[] = { CLM(rb->grad->mem), CLM(rb->params->mem), CLU(k0 + nk), CLU(m->layer[l].out), CLU(mult),
                          CLU(coef), CLF(0.0f) };
        if ((rc = dr_cl_launch(b, K_SHARE_EXACT, nk, 1, 0, 0, k, 7, "share", err)) ||
            (rc = dr_cl_launch(b, K_SHARE_EXACT, m->layer[l].out, 1, 0, 0, a, 7, "share", err)))
            return rc;
    }
    {
        dr_cl_arg a[] = { CLM(rb->loss->mem), CLU(mult), CLU(coef), CLM(m->l2 != 0.0f ? b->reg : NULL) };
        return dr_cl_launch(b, K_LOSS_SHARE_EXACT, 1, 1, 0, 0, a, 4, "share (loss)", err);
    }
}

/* ---- apply -------------------------------------------------------------------------- */

static int cl_apply(dr_backend *b, const dr_buffer *total, uint32_t divisor, uint64_t step,
                    dr_buffer *params, dr_buffer *slots, dr_err *err)
{
    const dr_optimizer *o = &b->o;
    size_t P = b->P, nslots = (size_t)dr_optimizer_num_slots(o);
    const bool fast = b->num == DR_NUMERICS_FAST;
    float lr_t = 0.0f;
    cl_uint opt;
    int rc;
    if (divisor < 1) return dr_fail(err, DR_EUSAGE, "opencl backend: apply with divisor 0");
    if ((rc = dr_cl_need(total, P * dr_sum_bytes(b->num), "gradient total", err)) ||
        (rc = dr_cl_need(params, P * sizeof(float), "params", err)) ||
        (nslots && (rc = dr_cl_need(slots, nslots * P * sizeof(float), "slots", err))))
        return rc;
    if (o->kind == DR_OPT_ADAM) {   /* the host computes lr_t as the OpenMP backend does */
        unsigned k = step > 0xffffffffu ? 0xffffffffu : (unsigned)step;
        const float b1t = dr_powi_f32(o->beta1, k), b2t = dr_powi_f32(o->beta2, k);
        lr_t = o->lr * sqrtf(1.0f - b2t) / (1.0f - b1t);
        opt = 3;
    } else {
        opt = o->momentum == 0.0f ? 0 : o->nesterov ? 2 : 1;
    }
    {
        dr_cl_arg a[] = { CLM(total->mem), fast ? CLF((float)divisor) : CLU(divisor), CLU(P), CLU(opt), CLF(o->lr),
                          CLF(o->momentum), CLF(lr_t), CLF(1.0f - o->beta1), CLF(1.0f - o->beta2), CLF(o->epsilon),
                          CLM(params->mem), CLM(slots ? slots->mem : NULL) };
        return dr_cl_launch(b, fast ? K_APPLY_FAST : K_APPLY_EXACT, P, 1, 0, 0, a, 12, "apply", err);
    }
}

static int cl_round_loss(dr_backend *b, const dr_buffer *loss, uint32_t divisor, float *out, dr_err *err)
{
    int rc;
    if (divisor < 1) return dr_fail(err, DR_EUSAGE, "opencl backend: round_loss with divisor 0");
    if ((rc = dr_cl_need(loss, dr_sum_bytes(b->num), "loss", err))) return rc;
    if (b->num == DR_NUMERICS_FAST) {
        float f;
        if ((rc = cl_download(b, &f, loss, 0, sizeof f, err))) return rc;
        *out = divisor == 1 ? f : f / (float)divisor;
    } else {
        dr_acc a;
        if ((rc = cl_download(b, &a, loss, 0, sizeof a, err))) return rc;
        *out = dr_acc_round_div(&a, divisor);
    }
    return DR_OK;
}

/* ---- spatial partitioning: not built ---------------------------------------------- */

static int no_tiles(dr_err *err)
{
    return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: spatial partitioning (tpu) is not built");
}
static int cl_l0_partial(dr_backend *b, const dr_buffer *xt, const uint32_t *pix, uint32_t len, uint32_t rows,
                         const dr_buffer *params, dr_buffer *z, dr_err *err)
{
    (void)b; (void)xt; (void)pix; (void)len; (void)rows; (void)params; (void)z;
    return no_tiles(err);
}
static int cl_l0_finish(dr_backend *b, dr_replica_bufs *rb, const dr_buffer *z, uint32_t rows, dr_err *err)
{
    (void)b; (void)rb; (void)z; (void)rows;
    return no_tiles(err);
}
static int cl_l0_delta(dr_backend *b, dr_replica_bufs *rb, uint32_t n, float *out, dr_err *err)
{
    (void)b; (void)rb; (void)n; (void)out;
    return no_tiles(err);
}
static int cl_l0_grad_rows(dr_backend *b, const dr_buffer *xt, const uint32_t *pix, uint32_t len, uint32_t n,
                           const dr_buffer *delta, dr_buffer *grad, dr_err *err)
{
    (void)b; (void)xt; (void)pix; (void)len; (void)n; (void)delta; (void)grad;
    return no_tiles(err);
}

const dr_backend_ops *dr_backend_opencl(void)
{
    static const dr_backend_ops ops = {
        .name = "opencl",
        .supports = cl_supports,
        .open = cl_open,
        .close = cl_close,
        .alloc = cl_alloc,
        .release = cl_release,
        .upload = cl_upload,
        .download = cl_download,
        .copy = cl_copy,
        .fill_zero = cl_fill_zero,
        .sync = cl_sync,
        .host_ptr = cl_host_ptr,
        .replica_open = cl_replica_open,
        .replica_close = cl_replica_close,
        .forward = dr_cl_forward,
        .loss_grad = dr_cl_loss_grad,
        .share = cl_share,
        .apply = cl_apply,
        .round_loss = cl_round_loss,
        .layer0_partial = cl_l0_partial,
        .layer0_finish = cl_l0_finish,
        .layer0_delta = cl_l0_delta,
        .layer0_grad_rows = cl_l0_grad_rows,
    };
    return &ops;
}
