/* distref devices — the OpenCL backend (distref/backend.h).
 *
 * Device memory is the device's: a dr_buffer is a cl_mem made for one slot
 * (a replica's device and in-order queue, devices/opencl/opencl_places.c),
 * host_ptr() is NULL, upload/download are blocking transfers on the
 * buffer's queue. Kernels are enqueued without waiting on the queue of the
 * replica's buffers; sync() is clFinish on every queue.
 *
 * Across queues: a blocking transfer waits for its own queue only. Where
 * one slot's command reads another slot's buffer (apply's total when it is
 * another replica's grad; a copy between slots) the source's queue is
 * finished first; the reader's queue is finished after a copy; for apply
 * the caller syncs before the total is written again (distref/backend.h,
 * strategies/step.c). Running out of device memory (an allocation
 * or a kernel failing with CL_MEM_OBJECT_ALLOCATION_FAILURE or
 * CL_OUT_OF_RESOURCES) is DR_EDEVICE_OOM naming what failed.
 *
 * This file holds the table, memory, share and apply; the forward, loss
 * and gradient launches are devices/opencl/opencl_kernels.c, the kernels
 * devices/opencl/cl/ (acc.cl, kernels.cl). Exact numerics need a device with correctly rounded
 * divide/sqrt, denormals and 64-bit integers (dr_cl_exact_missing); no
 * double precision is used.
 */
#include "devices/opencl/opencl_backend.h"
#include "distref/elem.h"
#include "distref/opencl.h"
#include "devices/cpu/grad_clip.h"
#include "devices/seams.h"

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
int dr_cl_launch(dr_cl_slot *sl, int kernel, size_t g0, size_t g1, size_t l0, size_t l1,
                 const dr_cl_arg *args, int nargs, const char *what, dr_err *err)
{
    cl_kernel k = sl->k[kernel];
    size_t g[2], l[2];
    cl_int e = CL_SUCCESS;
    if (g0 == 0 || g1 == 0) return DR_OK;
    if (l0 == 0 && g1 == 1) l0 = 64;   /* a fixed local size: PoCL compiles a kernel once per local size */
    g[0] = l0 ? (g0 + l0 - 1) / l0 * l0 : g0;
    g[1] = l1 ? (g1 + l1 - 1) / l1 * l1 : g1;
    l[0] = l0; l[1] = l1;
    pthread_mutex_lock(&sl->lock);
    for (int i = 0; i < nargs && e == CL_SUCCESS; i++) {
        const dr_cl_arg *a = &args[i];
        if (a->kind == 'm') e = clSetKernelArg(k, (cl_uint)i, sizeof(cl_mem), a->m ? &a->m : NULL);
        else if (a->kind == 'u') e = clSetKernelArg(k, (cl_uint)i, sizeof(cl_uint), &a->u);
        else e = clSetKernelArg(k, (cl_uint)i, sizeof(cl_float), &a->f);
    }
    if (e == CL_SUCCESS)
        e = clEnqueueNDRangeKernel(sl->q, k, g1 > 1 || l1 ? 2 : 1, NULL, g, l0 ? l : NULL, 0, NULL, NULL);
    pthread_mutex_unlock(&sl->lock);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, what);
}

/* ---- what is supported ------------------------------------------------------ */

static int cl_supports(const dr_backend_query *q, dr_err *err)
{
    if (q->strategy == DR_STRATEGY_PARAMETER_SERVER)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: %s is not built for OpenCL (one_device, mirrored, "
                       "central_storage, multi_worker_mirrored and tpu are)", dr_strategy_kind_name(q->strategy));
    if ((unsigned)q->strategy > DR_STRATEGY_TPU)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: unknown strategy kind %d", (int)q->strategy);
    if (q->numerics != DR_NUMERICS_EXACT && q->numerics != DR_NUMERICS_FAST)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: unknown numerics %d", (int)q->numerics);
    if (q->layer_placement)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: --layer_devices (layer placement) is not built");
    return DR_OK;   /* every layer kind (devices/opencl/opencl_graph.c), on tiles too (opencl_halo.c) */
}

/* ---- open / close -------------------------------------------------------------- */

static void cl_close(dr_backend *b)
{
    if (!b) return;
    dr_cl_places_close(b);
    free(b);
}

int dr_cl_share_buffers(dr_backend *b, dr_cl_slot *sl, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    cl_uint ranges[2 * DR_MAX_LAYERS];
    cl_int e;
    size_t groups = 0;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        size_t nk = b->ksz[l];
        ranges[2 * l] = (cl_uint)b->koff[l];
        ranges[2 * l + 1] = (cl_uint)nk;
        groups += (nk + DR_CL_CHUNK - 1) / DR_CL_CHUNK;
    }
    b->part_n = groups;
    sl->ranges = clCreateBuffer(b->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof ranges, ranges, &e);
    if (!sl->ranges) return dr_cl_fail(err, e, "allocating the share's ranges");
    sl->part = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, (groups ? groups : 1) * sizeof(dr_acc), NULL, &e);
    if (!sl->part) return dr_cl_fail(err, e, "allocating the share's partial sums");
    sl->reg = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, sizeof(float), NULL, &e);
    if (!sl->reg) return dr_cl_fail(err, e, "allocating the share's regularization");
    return DR_OK;
}

static int cl_open(const dr_backend_params *p, dr_backend **out, dr_err *err)
{
    const dr_model_spec *m = p->model;
    const dr_optimizer *o = p->optimizer;
    dr_numerics num = p->numerics;
    dr_backend *b;
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
        if (m->layer[l].act == DR_ACT_SOFTMAX && !dr_model_is_dense(m)) {
            free(b);
            return dr_fail(err, DR_EUNSUPPORTED, "not supported: a softmax layer (%u) in a model beyond Dense in the "
                           "opencl backend; use a linear last layer with from_logits", l);
        }
        b->koff[l] = dr_model_kernel_offset(m, l);
        b->ksz[l] = DR_SEAM_CL_L2_KIND(m->layer[l].kind) ? dr_model_kernel_size(m, l) : 0;
        b->lsz[l] = dr_model_layer_params(m, l);
        if (m->layer[l].in > b->widest) b->widest = m->layer[l].in;
        if (m->layer[l].out > b->widest) b->widest = m->layer[l].out;
    }
    if (b->P * sizeof(dr_acc) >= ((size_t)1 << 32)) {
        size_t P = b->P;
        free(b);
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: %zu parameters; the kernels index below 2^32 bytes", P);
    }
    if ((rc = dr_cl_places_open(b, p, err))) {
        cl_close(b);
        return rc;
    }
    *out = b;
    return DR_OK;
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

/* A buffer on place p's slot (its replica's device), counted against that device. */
static int cl_alloc_on(dr_backend *b, uint32_t place, size_t bytes, dr_buffer **out, dr_err *err)
{
    dr_buffer *buf;
    uint32_t slot = dr_cl_slot_of_place(b, place);
    dr_cl_slot *sl = &b->slot[slot];
    const dr_cl_caps *c = dr_cl_caps_of_slot(b, sl);
    cl_int e = CL_SUCCESS;
    int rc;
    *out = NULL;
    if (place >= b->places)
        return dr_fail(err, DR_EUSAGE, "opencl backend: memory for replica %u, but the backend was opened for %u",
                       place, b->places);
    if (bytes > c->max_alloc)
        return dr_fail(err, DR_EDEVICE_OOM, "opencl backend: a buffer of %zu bytes is larger than %s's largest "
                       "allocation (%llu bytes): the device is out of memory", bytes, c->name,
                       (unsigned long long)c->max_alloc);
    if ((rc = dr_cl_mem_take(b, sl, bytes, err))) return rc;
    if (!(buf = calloc(1, sizeof *buf))) {
        dr_cl_mem_give(b, sl, bytes);
        return dr_fail(err, DR_ENOMEM, "opencl backend: out of host memory");
    }
    buf->bytes = bytes;
    buf->slot = slot;
    buf->mem = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, &e);
    if (!buf->mem) {
        dr_cl_mem_give(b, sl, bytes);
        free(buf);
        return dr_cl_fail(err, e, "allocating a device buffer");
    }
    /* the first command on it, on its own queue, places it on the replica's device */
    if ((rc = cl_fill_zero(b, buf, 0, bytes, err))) {
        clReleaseMemObject(buf->mem);
        dr_cl_mem_give(b, sl, bytes);
        free(buf);
        return rc;
    }
    *out = buf;
    return DR_OK;
}

static int cl_alloc(dr_backend *b, size_t bytes, dr_buffer **out, dr_err *err)
{
    return cl_alloc_on(b, 0, bytes, out, err);
}

static void cl_release(dr_backend *b, dr_buffer *buf)
{
    if (!buf) return;
    dr_cl_mem_give(b, dr_cl_slot_of(b, buf), buf->bytes);
    clReleaseMemObject(buf->mem);
    free(buf);
}

static int cl_upload(dr_backend *b, dr_buffer *dst, size_t off, const void *src, size_t bytes, dr_err *err)
{
    int rc = in_range(dst, off, bytes, "upload", err);
    cl_int e;
    if (rc || !bytes) return rc;
    e = clEnqueueWriteBuffer(dr_cl_slot_of(b, dst)->q, dst->mem, CL_TRUE, off, bytes, src, 0, NULL, NULL);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "upload");
}

static int cl_download(dr_backend *b, void *dst, const dr_buffer *src, size_t off, size_t bytes, dr_err *err)
{
    int rc = in_range(src, off, bytes, "download", err);
    cl_int e;
    if (rc || !bytes) return rc;
    e = clEnqueueReadBuffer(dr_cl_slot_of(b, src)->q, src->mem, CL_TRUE, off, bytes, dst, 0, NULL, NULL);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "download");
}

/* Before a slot's command reads src: src's own queue finished when it is another's. */
static cl_int settle(dr_backend *b, const dr_cl_slot *reader, const dr_buffer *src)
{
    dr_cl_slot *own = dr_cl_slot_of(b, src);
    return own == reader ? CL_SUCCESS : clFinish(own->q);
}

static int cl_copy(dr_backend *b, dr_buffer *dst, size_t dst_off, const dr_buffer *src, size_t src_off,
                   size_t bytes, dr_err *err)
{
    dr_cl_slot *sl = dr_cl_slot_of(b, dst);
    int rc;
    cl_int e;
    if ((rc = in_range(dst, dst_off, bytes, "copy (destination)", err)) ||
        (rc = in_range(src, src_off, bytes, "copy (source)", err)) || !bytes)
        return rc;
    if (dst == src && dst_off < src_off + bytes && src_off < dst_off + bytes)
        return dr_fail(err, DR_EUSAGE, "opencl backend: overlapping copy within one buffer");
    if ((e = settle(b, sl, src)) == CL_SUCCESS)
        e = clEnqueueCopyBuffer(sl->q, src->mem, dst->mem, src_off, dst_off, bytes, 0, NULL, NULL);
    if (e == CL_SUCCESS && dr_cl_slot_of(b, src) != sl) e = clFinish(sl->q);   /* src may be written again */
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "copy");
}

static int cl_fill_zero(dr_backend *b, dr_buffer *dst, size_t off, size_t bytes, dr_err *err)
{
    int rc = in_range(dst, off, bytes, "fill_zero", err);
    cl_uchar zero = 0;
    cl_int e;
    if (rc || !bytes) return rc;
    e = clEnqueueFillBuffer(dr_cl_slot_of(b, dst)->q, dst->mem, &zero, 1, off, bytes, 0, NULL, NULL);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "fill_zero");
}

static int cl_sync(dr_backend *b, dr_err *err)
{
    for (uint32_t s = 0; s < b->nslots; s++) {
        cl_int e = clFinish(b->slot[s].q);
        if (e != CL_SUCCESS) return dr_cl_fail(err, e, "waiting for the device");
    }
    return DR_OK;
}

static void *cl_host_ptr(dr_buffer *buf)
{
    (void)buf;
    return NULL;   /* device memory: collectives stage through download/upload */
}

/* ---- a replica's workspace ---------------------------------------------------------- */

static void scratch_free(dr_cl_scratch *s)
{
    cl_mem all[2 * DR_MAX_LAYERS + 7];
    size_t n = 0;
    if (!s) return;
    for (int l = 0; l < DR_MAX_LAYERS; l++) { all[n++] = s->pre[l]; all[n++] = s->act[l]; }
    all[n++] = s->dz[0]; all[n++] = s->dz[1]; all[n++] = s->ex_loss; all[n++] = s->hit; all[n++] = s->part;
    all[n++] = s->wc; all[n++] = s->xc;   /* the mixed step's (opencl_mixed.c), made on its first call */
    for (size_t i = 0; i < n; i++) if (all[i]) clReleaseMemObject(all[i]);
    dr_cl_graph_free(s->graph);
    free(s->hit_host);
    free(s);
}

static int cl_replica_open(dr_backend *b, dr_replica_bufs *rb, uint32_t rows, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    size_t cap = rows ? rows : 1;
    dr_cl_scratch *s = calloc(1, sizeof *s);
    cl_int e = CL_SUCCESS;
    size_t bytes = 0;
    int rc;
    rb->scratch = NULL;
    rb->correct = 0;
    if (!s) return dr_fail(err, DR_ENOMEM, "opencl backend: out of host memory");
    s->cap = rows;
    s->slot = rb->params ? rb->params->slot : 0;
#define MK(field, n) do { if (e == CL_SUCCESS) { field = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, (n), NULL, &e); bytes += (n); } } while (0)
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
    if (e == CL_SUCCESS && s->hit_host && !dr_model_is_dense(m) && (rc = dr_cl_graph_open(b, s, rows, &bytes, err))) {
        scratch_free(s);
        return rc;
    }
    if (e != CL_SUCCESS || !s->hit_host) {
        scratch_free(s);
        return e != CL_SUCCESS ? dr_cl_fail(err, e, "allocating a replica's workspace")
                               : dr_fail(err, DR_ENOMEM, "opencl backend: out of host memory");
    }
    if ((rc = dr_cl_mem_take(b, &b->slot[s->slot], bytes, err))) {   /* counted against the replica's device */
        scratch_free(s);
        return rc;
    }
    s->bytes = bytes;
    rb->scratch = s;
    return DR_OK;
}

static void cl_replica_close(dr_backend *b, dr_replica_bufs *rb)
{
    dr_cl_scratch *s = rb->scratch;
    if (s) dr_cl_mem_give(b, &b->slot[s->slot], s->bytes);
    scratch_free(s);
    rb->scratch = NULL;
}

/* ---- share ------------------------------------------------------------------------ */

static int share_on_device(dr_backend *b, dr_replica_bufs *rb, uint32_t mult, uint32_t coef, uint32_t den,
                           dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const bool fast = b->num == DR_NUMERICS_FAST;
    const float c = 2.0f * m->l2;
    dr_cl_slot *sl;
    int rc;
    if (mult < 1 || mult > (1u << 30))
        return dr_fail(err, DR_EUSAGE, "opencl backend: share multiplier %u; 1..2^30 supported", mult);
    if ((rc = dr_cl_need(rb->grad, b->P * dr_sum_bytes(b->num), "grad", err)) ||
        (rc = dr_cl_need(rb->loss, dr_sum_bytes(b->num), "loss", err)) ||
        (rc = dr_cl_need(rb->params, b->P * sizeof(float), "params", err)))
        return rc;
    sl = dr_cl_slot_of(b, rb->params);
    if (fast) {
        float sg, sr;
        if (den < 1) return dr_fail(err, DR_EUSAGE, "opencl backend: share over a denominator of 0");
        sg = (float)((double)mult / den);
        sr = (float)((double)coef / den);
        for (uint32_t l = 0; l < m->nlayers; l++) {
            size_t k0 = b->koff[l], nk = b->ksz[l], nb = b->lsz[l] - nk;
            dr_cl_arg a[] = { CLM(rb->grad->mem), CLM(rb->params->mem), CLU(k0), CLU(nk + nb),
                              CLF(sg), CLF(c), CLF(sr), CLU(0) };
            dr_cl_arg k[] = { CLM(rb->grad->mem), CLM(rb->params->mem), CLU(k0), CLU(nk),
                              CLF(sg), CLF(c), CLF(sr), CLU(m->l2 != 0.0f) };
            if (m->l2 != 0.0f) {   /* the kernel with its L2 term, then the biases alone */
                a[2] = CLU(k0 + nk); a[3] = CLU(nb);
                if ((rc = dr_cl_launch(sl, K_SHARE_FAST, nk, 1, 0, 0, k, 8, "share", err))) return rc;
            }
            if ((rc = dr_cl_launch(sl, K_SHARE_FAST, a[3].u, 1, 0, 0, a, 8, "share", err))) return rc;
        }
        {
            dr_cl_arg a[] = { CLM(rb->loss->mem), CLM(rb->params->mem), CLM(sl->ranges), CLU(m->l2 != 0.0f ? m->nlayers : 0),
                              CLF(sg), CLF(sr), CLF(m->l2) };
            return dr_cl_launch(sl, K_LOSS_SHARE_FAST, 1, 1, 0, 0, a, 7, "share (loss)", err);
        }
    }
    if (m->l2 != 0.0f) {   /* reg = l2 * round(sum of w^2 over the kernels), on the device */
        size_t poff = 0;
        for (uint32_t l = 0; l < m->nlayers; l++) {
            size_t nk = b->ksz[l], g = (nk + DR_CL_CHUNK - 1) / DR_CL_CHUNK;
            dr_cl_arg a[] = { CLM(rb->params->mem), CLU(b->koff[l]), CLU(nk), CLU(1), CLM(sl->part), CLU(poff) };
            if ((rc = dr_cl_launch(sl, K_PARTIAL_SUM, g, 1, 0, 0, a, 6, "share (sum of squares)", err))) return rc;
            poff += g;
        }
        {
            dr_cl_arg a[] = { CLM(sl->part), CLU(poff), CLM(NULL), CLM(sl->reg), CLF(m->l2) };
            if ((rc = dr_cl_launch(sl, K_MERGE, 1, 1, 0, 0, a, 5, "share (sum of squares)", err))) return rc;
        }
    }
    for (uint32_t l = 0; l < m->nlayers; l++) {
        size_t k0 = b->koff[l], nk = b->ksz[l], nb = b->lsz[l] - nk;
        dr_cl_arg k[] = { CLM(rb->grad->mem), CLM(rb->params->mem), CLU(k0), CLU(nk), CLU(mult), CLU(coef), CLF(c) };
        dr_cl_arg a[] = { CLM(rb->grad->mem), CLM(rb->params->mem), CLU(k0 + nk), CLU(nb), CLU(mult),
                          CLU(coef), CLF(0.0f) };
        if ((rc = dr_cl_launch(sl, K_SHARE_EXACT, nk, 1, 0, 0, k, 7, "share", err)) ||
            (rc = dr_cl_launch(sl, K_SHARE_EXACT, nb, 1, 0, 0, a, 7, "share", err)))
            return rc;
    }
    {
        dr_cl_arg a[] = { CLM(rb->loss->mem), CLU(mult), CLU(coef), CLM(m->l2 != 0.0f ? sl->reg : NULL) };
        return dr_cl_launch(sl, K_LOSS_SHARE_EXACT, 1, 1, 0, 0, a, 4, "share (loss)", err);
    }
}

/* --clip_semantics=tensorflow: the replica's share clipped on the host
 * (devices/cpu/grad_clip.c) before the all-reduce, as Keras 3 clips each
 * replica's gradient: downloaded, clipped, uploaded. */
static int cl_share(dr_backend *b, dr_replica_bufs *rb, uint32_t mult, uint32_t coef, uint32_t den, dr_err *err)
{
    size_t bytes = b->P * dr_sum_bytes(b->num);
    void *h;
    int rc = share_on_device(b, rb, mult, coef, den, err);
    if (rc || !b->o.clip.per_replica || b->o.clip.at_update) return rc;   /* at_update: step.c clips the update's */
    if (!(h = malloc(bytes))) return dr_fail(err, DR_ENOMEM, "opencl backend: no host memory to clip a share");
    if (!(rc = cl_download(b, h, rb->grad, 0, bytes, err)) &&
        !(rc = dr_engine_clip_share(&b->o.clip, &b->m, b->num, h, b->P, den, err)))
        rc = cl_upload(b, rb->grad, 0, h, bytes, err);
    free(h);
    return rc;
}

/* ---- apply -------------------------------------------------------------------------- */

/* Clipping (distref/schedule.h) runs on the host (dr_cl_round_clip_host),
 * its floats a buffer that apply_fast reads with d = 1 (x / 1.0f is x). */
static int clip_on_host(dr_backend *b, const dr_buffer *total, uint32_t divisor, cl_mem *out, dr_err *err)
{
    float *g = malloc(b->P * sizeof(float) + 1);
    cl_int e = CL_SUCCESS;
    int rc = g ? dr_cl_round_clip_host(b, total, divisor, g, err)
               : dr_fail(err, DR_ENOMEM, "opencl backend: no host memory to clip %zu gradients", b->P);
    *out = NULL;
    if (!rc) {
        *out = clCreateBuffer(b->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, b->P * sizeof(float), g, &e);
        if (!*out) rc = dr_cl_fail(err, e, "the clipped gradient's buffer");
    }
    free(g);
    return rc;
}

void dr_cl_opt_scalars(const dr_backend *b, uint64_t step, float *lr, float *lr_t, cl_uint *opt)
{
    const dr_optimizer *o = &b->o;
    uint64_t at = DR_SEAM_SCHEDULE_STEP(step);   /* the schedule reads iterations = step - 1 (distref/schedule.h) */
    *lr = dr_lr_at(&o->schedule, o->lr, at);
    *lr_t = 0.0f;
    if (o->kind == DR_OPT_ADAM) {   /* the host computes lr_t as the OpenMP backend does */
        uint64_t t = dr_optimizer_updates(o, step);   /* Keras's iterations: updates, not micro-steps */
        unsigned k = t > 0xffffffffu ? 0xffffffffu : (unsigned)t;
        const float b1t = dr_powi_f32(o->beta1, k), b2t = dr_powi_f32(o->beta2, k);
        *lr_t = *lr * sqrtf(1.0f - b2t) / (1.0f - b1t);
        *opt = 3;
    } else {
        *opt = o->momentum == 0.0f ? 0 : o->nesterov ? 2 : 1;
    }
}

static int cl_apply(dr_backend *b, const dr_buffer *total, uint32_t divisor, uint64_t step,
                    dr_buffer *params, dr_buffer *slots, dr_err *err)
{
    const dr_optimizer *o = &b->o;
    size_t P = b->P, nslots = (size_t)dr_optimizer_num_slots(o);
    bool fast = b->num == DR_NUMERICS_FAST;
    float lr, lr_t;
    cl_mem clipped = NULL;
    cl_uint opt;
    dr_cl_slot *sl;
    cl_int e;
    int rc;
    if (divisor < 1) return dr_fail(err, DR_EUSAGE, "opencl backend: apply with divisor 0");
    if ((rc = dr_cl_need(total, P * dr_sum_bytes(b->num), "gradient total", err)) ||
        (rc = dr_cl_need(params, P * sizeof(float), "params", err)) ||
        (nslots && (rc = dr_cl_need(slots, nslots * P * sizeof(float), "slots", err))))
        return rc;
    sl = dr_cl_slot_of(b, params);
    if ((e = settle(b, sl, total)) != CL_SUCCESS) return dr_cl_fail(err, e, "apply (waiting for the total)");
    dr_cl_opt_scalars(b, step, &lr, &lr_t, &opt);
    if (dr_engine_clip_on(&o->clip) && !o->clip.per_replica) {
        if ((rc = clip_on_host(b, total, divisor, &clipped, err))) return rc;
        fast = true;   /* apply_fast reads the clipped floats */
        divisor = 1;
    }
    {
        dr_cl_arg a[] = { CLM(clipped ? clipped : total->mem), fast ? CLF((float)divisor) : CLU(divisor), CLU(P),
                          CLU(opt), CLF(lr), CLF(o->momentum), CLF(lr_t), CLF(1.0f - o->beta1), CLF(1.0f - o->beta2),
                          CLF(o->epsilon), CLM(params->mem), CLM(slots ? slots->mem : NULL) };
        rc = dr_cl_launch(sl, fast ? K_APPLY_FAST : K_APPLY_EXACT, P, 1, 0, 0, a, 12, "apply", err);
        if (clipped) clReleaseMemObject(clipped);   /* freed once the kernel is done with it */
        return rc;
    }
}

const dr_backend_ops *dr_backend_opencl(void)
{
    static const dr_backend_ops ops = {
        .name = "opencl",
        .supports = cl_supports,
        .available = dr_cl_available,
        .open = cl_open,
        .close = cl_close,
        .mapping_name = dr_cl_mapping_name,
        .place_of = dr_cl_place_of,
        .alloc = cl_alloc,
        .alloc_on = cl_alloc_on,
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
        .outputs = dr_cl_outputs,
        .share = cl_share,
        .apply = cl_apply,
        .applied_grad = dr_cl_applied_grad,
        .round_loss = dr_cl_round_loss,
        .mixed_loss_grad = dr_cl_mixed_loss_grad,
        .apply_f32 = dr_cl_apply_f32,
        .clip_f32 = dr_cl_clip_f32,
        .clip_replica_f32 = dr_cl_clip_replica_f32,
        .layer0_partial = dr_cl_layer0_partial,
        .layer0_finish = dr_cl_layer0_finish,
        .layer0_delta = dr_cl_layer0_delta,
        .layer0_grad_rows = dr_cl_layer0_grad_rows,
        .graph_begin = dr_cl_graph_begin,
        .layer_forward = dr_cl_layer_forward,
        .bn_sums = dr_cl_bn_sums,
        .bn_normalize = dr_cl_bn_normalize,
        .graph_loss = dr_cl_graph_loss,
        .graph_ops_mixed = true,
        .layer_backward = dr_cl_layer_backward,
        .bn_backward = dr_cl_bn_backward,
        .set_tile = dr_cl_set_tile,
        .spatial_exchange = dr_cl_spatial_exchange,
    };
    return &ops;
}
