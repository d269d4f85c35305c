/* distref devices — the OpenCL backend's spatial partitioning of layer 0
 * (the tpu strategy's --input_partition_dims for a Dense model;
 * distref/backend.h's layer0_partial .. layer0_grad_rows, the contract
 * devices/cpu/openmp_kernels.c keeps on the host).
 *
 * Each op is one launch of a kernel in devices/opencl/cl/kernels.cl on the
 * queue of the buffer it writes (the engine places a replica's tiles, z and
 * delta on the replica's device: engine_tpu_buffers), after the queues of
 * the buffers it reads from another slot are finished. A tile's pixel list
 * travels with the launch (a small read-only buffer, released once the
 * kernel is done with it). Exact: the tiles' partial sums and their
 * gradient rows are exact accumulators, so their order is free and
 * layer0_finish rounds each pre-activation once, with the bias: the bits of
 * the unpartitioned forward and of the openmp backend's tiles.
 */
#include "devices/opencl/opencl_backend.h"

#include <stdlib.h>

/* Before a command on sl reads src: src's queue finished when it is another slot's. */
static int settle(dr_backend *b, const dr_cl_slot *sl, const dr_buffer *src, dr_err *err)
{
    dr_cl_slot *own = dr_cl_slot_of(b, src);
    cl_int e = own == sl ? CL_SUCCESS : clFinish(own->q);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "waiting for a tile's buffer");
}

/* The tile's pixels, checked against layer 0's inputs, in a device buffer. */
static int pixels(dr_backend *b, const uint32_t *pix, uint32_t len, cl_mem *out, dr_err *err)
{
    cl_int e;
    *out = NULL;
    if (!pix) return dr_fail(err, DR_EUSAGE, "opencl backend: a tile of %u pixels without its list", len);
    for (uint32_t q = 0; q < len; q++)
        if (pix[q] >= b->m.layer[0].in)
            return dr_fail(err, DR_EUSAGE, "opencl backend: pixel %u of a tile is %u, outside 0..%u", q, pix[q],
                           b->m.layer[0].in - 1);
    *out = clCreateBuffer(b->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)len * sizeof(cl_uint),
                          (void *)pix, &e);
    return *out ? DR_OK : dr_cl_fail(err, e, "a tile's pixel list");
}

/* One tile kernel over g0 x out0: l0_partial_* (src the params, dst z) or
 * l0_grad_* (src the delta, dst the gradient), the same arguments. */
static int tile_launch(dr_backend *b, int kernel, const dr_buffer *xt, const uint32_t *pix, uint32_t len,
                       uint32_t g0, uint32_t rows, const dr_buffer *src, size_t koff, dr_buffer *dst,
                       const char *what, dr_err *err)
{
    uint32_t out0 = b->m.layer[0].out;
    dr_cl_slot *sl = dr_cl_slot_of(b, dst);
    cl_mem pm;
    int rc;
    if ((rc = settle(b, sl, xt, err)) || (rc = settle(b, sl, src, err)) || (rc = pixels(b, pix, len, &pm, err)))
        return rc;
    {
        dr_cl_arg a[] = { CLM(xt->mem), CLM(pm), CLU(len), CLU(rows), CLU(out0), CLM(src->mem), CLU(koff),
                          CLM(dst->mem) };
        rc = dr_cl_launch(sl, kernel, g0, out0, 0, 0, a, 8, what, err);
    }
    clReleaseMemObject(pm);   /* freed once the kernel is done with it */
    return rc;
}

int dr_cl_layer0_partial(dr_backend *b, const dr_buffer *xt, const uint32_t *pix, uint32_t len, uint32_t rows,
                         const dr_buffer *params, dr_buffer *z, dr_err *err)
{
    const bool fast = b->num == DR_NUMERICS_FAST;
    int rc;
    if ((rc = dr_cl_need(xt, (size_t)rows * len * sizeof(float), "tile", err)) ||
        (rc = dr_cl_need(params, b->P * sizeof(float), "params", err)) ||
        (rc = dr_cl_need(z, (size_t)rows * b->m.layer[0].out * dr_sum_bytes(b->num), "z", err)))
        return rc;
    if (rows == 0 || len == 0) return DR_OK;
    return tile_launch(b, fast ? K_L0_PARTIAL_FAST : K_L0_PARTIAL_EXACT, xt, pix, len, rows, rows, params, b->koff[0],
                       z, "a tile's partial sums", err);
}

int dr_cl_layer0_finish(dr_backend *b, dr_replica_bufs *rb, const dr_buffer *z, uint32_t rows, dr_err *err)
{
    const dr_dense *d = &b->m.layer[0];
    const bool fast = b->num == DR_NUMERICS_FAST;
    size_t cells = (size_t)rows * d->out;
    dr_cl_scratch *s;
    dr_cl_slot *sl;
    int rc;
    if ((rc = dr_cl_need_scratch(rb, rows, err)) ||
        (rc = dr_cl_need(z, cells * dr_sum_bytes(b->num), "z", err)) ||
        (rc = dr_cl_need(rb->params, b->P * sizeof(float), "params", err)))
        return rc;
    s = rb->scratch;
    sl = &b->slot[s->slot];
    if ((rc = settle(b, sl, z, err))) return rc;
    {
        dr_cl_arg a[] = { CLM(z->mem), CLM(rb->params->mem), CLU(b->koff[0] + (size_t)d->in * d->out), CLU(d->out),
                          CLU(cells), CLM(s->pre[0]) };
        dr_cl_arg act[] = { CLM(s->pre[0]), CLM(s->act[0]), CLU(rows), CLU(d->out),
                            CLU(d->act == DR_ACT_LINEAR ? 0 : d->act == DR_ACT_RELU ? 1 : 2), CLU(fast) };
        if ((rc = dr_cl_launch(sl, fast ? K_L0_FINISH_FAST : K_L0_FINISH_EXACT, cells, 1, 0, 0, a, 6,
                               "layer 0 from its tiles", err)) ||
            (rc = dr_cl_launch(sl, K_ACTIVATE, rows, 1, 0, 0, act, 6, "activation", err)))
            return rc;
    }
    s->fwd_rows = rows;
    return DR_OK;
}

int dr_cl_layer0_delta(dr_backend *b, dr_replica_bufs *rb, uint32_t n, float *out, dr_err *err)
{
    dr_cl_scratch *s;
    cl_int e;
    int rc;
    if ((rc = dr_cl_need_scratch(rb, n, err))) return rc;
    s = rb->scratch;
    if (n > s->grad_n)
        return dr_fail(err, DR_ESTATE, "opencl backend: layer 0's delta of %u rows asked, the last loss_grad had %u",
                       n, s->grad_n);
    if (n == 0) return DR_OK;
    e = clEnqueueReadBuffer(b->slot[s->slot].q, s->dz[dr_cl_delta0(&b->m)], CL_TRUE, 0,
                            (size_t)n * b->m.layer[0].out * sizeof(float), out, 0, NULL, NULL);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "download (layer 0's delta)");
}

int dr_cl_layer0_grad_rows(dr_backend *b, const dr_buffer *xt, const uint32_t *pix, uint32_t len, uint32_t n,
                           const dr_buffer *delta, dr_buffer *grad, dr_err *err)
{
    const bool fast = b->num == DR_NUMERICS_FAST;
    int rc;
    if ((rc = dr_cl_need(xt, (size_t)n * len * sizeof(float), "tile", err)) ||
        (rc = dr_cl_need(delta, (size_t)n * b->m.layer[0].out * sizeof(float), "delta", err)) ||
        (rc = dr_cl_need(grad, b->P * dr_sum_bytes(b->num), "grad", err)))
        return rc;
    if (n == 0 || len == 0) return DR_OK;
    return tile_launch(b, fast ? K_L0_GRAD_FAST : K_L0_GRAD_EXACT, xt, pix, len, len, n, delta, b->koff[0], grad,
                       "a tile's gradient rows", err);
}
