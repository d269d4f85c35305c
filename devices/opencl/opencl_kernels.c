/* distref devices — the OpenCL backend's step: forward, loss and gradients.
 *
 * The same contract and the same structure as devices/cpu/openmp_kernels.c,
 * as kernel launches (devices/opencl/cl/kernels.cl) on the replica's device
 * buffers; nothing leaves the device but the labels (checked) and the
 * per-example hits (counted) of the n examples.
 *
 *   forward    per layer one tiled GEMM, pre = round(bias + in W) per
 *              element (exact: an accumulator per work-item, rounded once;
 *              fast: a float sum), then the activation row by row.
 *   loss       one work-item per example: its loss, dz of the last layer,
 *              the hit; the losses summed exactly by work-items of CHUNK
 *              examples, their partial accumulators merged exactly.
 *   backward   per layer from the top: gW = in^T dz (exact accumulators,
 *              stored in the host's dr_acc layout), gb = the column sums of
 *              dz, the delta below round(dz W^T), masked by the ReLU.
 */
#include "devices/opencl/opencl_backend.h"
#include "devices/cpu/grad_clip.h"

#include <stdlib.h>
#include <string.h>

int dr_cl_need_scratch(const dr_replica_bufs *rb, uint32_t rows, dr_err *err)
{
    const dr_cl_scratch *s = rb ? rb->scratch : NULL;
    if (!s) return dr_fail(err, DR_ESTATE, "opencl backend: replica workspace not opened (replica_open)");
    if (rows > s->cap)
        return dr_fail(err, DR_EUSAGE, "opencl backend: %u rows, but the replica's workspace holds %u", rows, s->cap);
    return DR_OK;
}

/* A fast GEMM launch (gemm_fast's 17 arguments): the float16 kernel where
 * op(B)'s rows are contiguous and N is a multiple of 16, else the tiled one. */
int dr_cl_fast_gemm(dr_cl_slot *sl, const dr_cl_arg *a, const char *what, dr_err *err)
{
    cl_uint M = a[0].u, N = a[1].u, sbj = a[10].u;
    if (sbj == 1 && N % 16 == 0)
        return dr_cl_launch(sl, K_GEMM_FAST_V, (M + 3) / 4, N / 16, 8, 1, a, 17, what, err);
    return dr_cl_launch(sl, K_GEMM_FAST, M, N, DR_CL_TS, DR_CL_TS, a, 17, what, err);
}

/* C (M x N, float) = [bias +] op(A) op(B): exact rounded once, or fast. */
int dr_cl_gemm_f32(dr_backend *b, dr_cl_slot *sl, uint32_t M, uint32_t N, uint32_t K, cl_mem A, size_t aoff, size_t sai,
                   size_t sak, cl_mem B, size_t boff, size_t sbk, size_t sbj, cl_mem bias, size_t bias_off,
                   cl_mem C, size_t ldc, const char *what, dr_err *err)
{
    if (b->num == DR_NUMERICS_FAST) {
        dr_cl_arg a[] = { CLU(M), CLU(N), CLU(K), CLM(A), CLU(aoff), CLU(sai), CLU(sak), CLM(B), CLU(boff), CLU(sbk),
                          CLU(sbj), CLM(bias), CLU(bias_off), CLU(bias != NULL), CLM(C), CLU(0), CLU(ldc) };
        return dr_cl_fast_gemm(sl, a, what, err);
    } else {
        dr_cl_arg a[] = { CLU(M), CLU(N), CLU(K), CLM(A), CLU(aoff), CLU(sai), CLU(sak), CLM(B), CLU(boff), CLU(sbk),
                          CLU(sbj), CLM(bias), CLU(bias_off), CLU(bias != NULL), CLM(C), CLU(ldc) };
        return dr_cl_launch(sl, K_GEMM_EXACT, M, N, DR_CL_TS, DR_CL_TS, a, 16, what, err);
    }
}

int dr_cl_forward(dr_backend *b, dr_replica_bufs *rb, uint32_t rows, uint32_t first, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const bool fast = b->num == DR_NUMERICS_FAST;
    dr_cl_scratch *s;
    dr_cl_slot *sl;
    int rc;
    if ((rc = dr_cl_need_scratch(rb, rows, err))) return rc;
    s = rb->scratch;
    sl = &b->slot[s->slot];
    if (first > m->nlayers)   /* first == nlayers: layer0_finish already made the output */
        return dr_fail(err, DR_EUSAGE, "opencl backend: forward from layer %u of a %u-layer model", first, m->nlayers);
    if ((rc = dr_cl_need(rb->params, b->P * sizeof(float), "params", err)) ||
        (first == 0 && (rc = dr_cl_need(rb->x, (size_t)rows * m->layer[0].in * sizeof(float), "x", err))))
        return rc;
    for (uint32_t l = first; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        cl_mem in = l ? s->act[l - 1] : rb->x->mem;
        size_t k0 = b->koff[l];
        if ((rc = dr_cl_gemm_f32(b, sl, rows, d->out, d->in, in, 0, d->in, 1, rb->params->mem, k0, d->out, 1,
                           rb->params->mem, k0 + (size_t)d->in * d->out, s->pre[l], d->out, "forward GEMM", err)))
            return rc;
        {
            dr_cl_arg a[] = { CLM(s->pre[l]), CLM(s->act[l]), CLU(rows), CLU(d->out),
                              CLU(d->act == DR_ACT_LINEAR ? 0 : d->act == DR_ACT_RELU ? 1 : 2), CLU(fast) };
            if ((rc = dr_cl_launch(sl, K_ACTIVATE, rows, 1, 0, 0, a, 6, "activation", err))) return rc;
        }
    }
    s->fwd_rows = rows;
    return DR_OK;
}

static int backward(dr_backend *b, dr_replica_bufs *rb, dr_cl_scratch *s, uint32_t n, bool kernel0, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const bool fast = b->num == DR_NUMERICS_FAST;
    cl_mem dz = s->dz[0], grad = rb->grad->mem, W = rb->params->mem;
    dr_cl_slot *sl = &b->slot[s->slot];
    int rc;
    for (uint32_t l = m->nlayers; l-- > 0;) {
        const dr_dense *d = &m->layer[l];
        cl_mem in = l ? s->act[l - 1] : rb->x->mem, dprev = dz == s->dz[0] ? s->dz[1] : s->dz[0];
        size_t kb = b->koff[l], bb = kb + (size_t)d->in * d->out;
        if (l > 0 || kernel0) {   /* gW = in^T dz: op(A)[i][k] = in[k][i] */
            if (fast) {
                dr_cl_arg a[] = { CLU(d->in), CLU(d->out), CLU(n), CLM(in), CLU(0), CLU(1), CLU(d->in), CLM(dz),
                                  CLU(0), CLU(d->out), CLU(1), CLM(NULL), CLU(0), CLU(0), CLM(grad), CLU(kb),
                                  CLU(d->out) };
                rc = dr_cl_fast_gemm(sl, a, "gradient GEMM", err);
            } else {
                dr_cl_arg a[] = { CLU(d->in), CLU(d->out), CLU(n), CLM(in), CLU(0), CLU(1), CLU(d->in), CLM(dz),
                                  CLU(0), CLU(d->out), CLU(1), CLM(grad), CLU(kb) };
                rc = dr_cl_launch(sl, K_GEMM_ACC_EXACT, d->in, d->out, DR_CL_TS, DR_CL_TS, a, 13, "gradient GEMM", err);
            }
            if (rc) return rc;
        }
        {
            dr_cl_arg a[] = { CLM(dz), CLU(n), CLU(d->out), CLM(grad), CLU(bb) };
            if ((rc = dr_cl_launch(sl, fast ? K_BIAS_FAST : K_BIAS_EXACT, d->out, 1, 0, 0, a, 5, "bias gradient", err)))
                return rc;
        }
        if (l == 0) break;
        /* the delta below: dz W^T, op(B)[k][j] = W[j][k] */
        if ((rc = dr_cl_gemm_f32(b, sl, n, d->in, d->out, dz, 0, d->out, 1, W, kb, 1, d->out, NULL, 0, dprev, d->in,
                           "delta GEMM", err)))
            return rc;
        if (m->layer[l - 1].act == DR_ACT_RELU) {
            dr_cl_arg a[] = { CLM(dprev), CLM(s->pre[l - 1]), CLU((size_t)n * d->in) };
            if ((rc = dr_cl_launch(sl, K_RELU_MASK, (size_t)n * d->in, 1, 0, 0, a, 3, "ReLU mask", err))) return rc;
        }
        dz = dprev;
    }
    return DR_OK;
}

int dr_cl_check_labels(dr_backend *b, dr_replica_bufs *rb, dr_cl_scratch *s, uint32_t n, dr_err *err)
{
    uint32_t nout = b->m.layer[b->m.nlayers - 1].out;
    int rc;
    if (!rb->labels) return dr_fail(err, DR_EUSAGE, "opencl backend: a cross-entropy loss needs labels");
    if ((rc = dr_cl_need(rb->labels, n, "labels", err)) ||
        (rc = dr_backend_opencl()->download(b, s->hit_host, rb->labels, 0, n, err)))
        return rc;
    for (uint32_t r = 0; r < n; r++)
        if (s->hit_host[r] >= nout)
            return dr_fail(err, DR_EUSAGE, "opencl backend: example %u has label %u, outside 0..%u", r,
                           s->hit_host[r], nout - 1);
    return DR_OK;
}

int dr_cl_loss_rows(dr_backend *b, dr_replica_bufs *rb, dr_cl_scratch *s, uint32_t n, cl_mem dz, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    uint32_t nout = m->layer[m->nlayers - 1].out;
    const bool fast = b->num == DR_NUMERICS_FAST;
    dr_cl_slot *sl = &b->slot[s->slot];
    int rc;
    if (m->loss == DR_LOSS_MSE) {
        if ((rc = dr_cl_need(rb->targets, (size_t)n * nout * sizeof(float), "targets", err))) return rc;
    } else if ((rc = dr_cl_check_labels(b, rb, s, n, err))) {
        return rc;
    }
    {
        dr_cl_arg a[] = { CLM(s->pre[m->nlayers - 1]), CLM(s->act[m->nlayers - 1]),
                          CLM(rb->labels ? rb->labels->mem : NULL), CLM(rb->targets ? rb->targets->mem : NULL),
                          CLU(n), CLU(nout), CLU(m->loss == DR_LOSS_XENT_LOGITS ? 0 : m->loss == DR_LOSS_XENT_PROBS ? 1 : 2),
                          CLU(fast), CLM(s->ex_loss), CLM(dz), CLM(s->hit) };
        if ((rc = dr_cl_launch(sl, K_LOSS_ROWS, n, 1, 0, 0, a, 11, "loss", err))) return rc;
    }
    if (fast) {
        dr_cl_arg a[] = { CLM(s->ex_loss), CLU(n), CLM(rb->loss->mem) };
        return dr_cl_launch(sl, K_SUM_FAST, 1, 1, 0, 0, a, 3, "loss sum", err);
    } else {
        size_t groups = (n + DR_CL_CHUNK - 1) / DR_CL_CHUNK;
        dr_cl_arg a[] = { CLM(s->ex_loss), CLU(0), CLU(n), CLU(0), CLM(s->part), CLU(0) };
        dr_cl_arg g[] = { CLM(s->part), CLU(groups), CLM(rb->loss->mem), CLM(NULL), CLF(0.0f) };
        if ((rc = dr_cl_launch(sl, K_PARTIAL_SUM, groups, 1, 0, 0, a, 6, "loss sum", err))) return rc;
        return dr_cl_launch(sl, K_MERGE, 1, 1, 0, 0, g, 5, "loss sum", err);
    }
}

int dr_cl_count_hits(dr_backend *b, dr_replica_bufs *rb, dr_cl_scratch *s, uint32_t n, uint64_t *correct,
                     dr_err *err)
{
    int rc;
    *correct = 0;
    if (!rb->labels) return DR_OK;
    if ((rc = dr_backend_opencl()->download(b, s->hit_host, &(dr_buffer){ n, s->hit, s->slot }, 0, n, err)))
        return rc;
    for (uint32_t r = 0; r < n; r++) *correct += s->hit_host[r];
    return DR_OK;
}

/* evaluate's and predict's (distref/backend.h's outputs): the per-example
 * losses loss_rows forms for training (the same kernel, so exact numerics
 * give the reference's bits) and the top map, of the last forward pass
 * (Dense's forward or the layer ops in inference), read back. dz[0] takes
 * the loss's delta, which inference does not use. */
int dr_cl_outputs(dr_backend *b, dr_replica_bufs *rb, uint32_t n, float *loss, float *out, dr_err *err)
{
    const dr_backend_ops *ops = dr_backend_opencl();
    uint32_t L = b->m.nlayers, nout = b->m.layer[L - 1].out;
    size_t cells = (size_t)n * nout;
    dr_cl_scratch *s;
    int rc;
    if ((rc = dr_cl_need_scratch(rb, n, err))) return rc;
    s = rb->scratch;
    if (n > s->fwd_rows)
        return dr_fail(err, DR_EUSAGE, "opencl backend: outputs of %u rows, but the last forward pass had %u",
                       n, s->fwd_rows);
    if (n == 0) return DR_OK;
    if ((rc = dr_cl_loss_rows(b, rb, s, n, s->dz[0], err)) ||
        (rc = ops->download(b, loss, &(dr_buffer){ n * sizeof(float), s->ex_loss, s->slot }, 0, n * sizeof *loss,
                            err)))
        return rc;
    return ops->download(b, out, &(dr_buffer){ cells * sizeof(float), s->act[L - 1], s->slot }, 0,
                         cells * sizeof *out, err);
}

int dr_cl_loss_grad(dr_backend *b, dr_replica_bufs *rb, uint32_t n, bool kernel0, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    size_t esz = dr_sum_bytes(b->num);
    const dr_backend_ops *ops = dr_backend_opencl();
    dr_cl_scratch *s;
    uint64_t correct = 0;
    int rc;
    if ((rc = dr_cl_need_scratch(rb, n, err))) return rc;
    s = rb->scratch;
    if ((rc = dr_cl_need(rb->grad, b->P * esz, "grad", err)) ||
        (rc = dr_cl_need(rb->loss, esz, "loss", err)) ||
        (rc = dr_cl_need(rb->params, b->P * sizeof(float), "params", err)))
        return rc;
    if (n > s->fwd_rows)
        return dr_fail(err, DR_EUSAGE, "opencl backend: loss over %u rows, but the last forward pass had %u",
                       n, s->fwd_rows);
    rb->correct = 0;
    s->grad_n = 0;
    if (n == 0)
        return (rc = ops->fill_zero(b, rb->grad, 0, b->P * esz, err)) ? rc : ops->fill_zero(b, rb->loss, 0, esz, err);
    /* layer 0's kernel by tiles (layer0_grad_rows adds to it): zero here,
     * every other gradient is written whole below */
    if (!kernel0 && (rc = ops->fill_zero(b, rb->grad, b->koff[0] * esz,
                                         (size_t)m->layer[0].in * m->layer[0].out * esz, err)))
        return rc;
    if ((rc = dr_cl_need(rb->x, (size_t)n * m->layer[0].in * sizeof(float), "x", err)) ||
        (rc = dr_cl_loss_rows(b, rb, s, n, s->dz[0], err)) ||
        (rc = backward(b, rb, s, n, kernel0, err)) ||
        (rc = dr_cl_count_hits(b, rb, s, n, &correct, err)))
        return rc;
    rb->correct = correct;
    s->grad_n = n;
    return DR_OK;
}

/* ---- the gradient apply hands the optimizer ------------------------------------------ */

int dr_cl_round_clip_host(dr_backend *b, const dr_buffer *total, uint32_t divisor, float *g, dr_err *err)
{
    size_t P = b->P, eb = dr_sum_bytes(b->num);
    const bool fast = b->num == DR_NUMERICS_FAST;
    void *h = malloc(P * eb + 1);
    cl_int e;
    int rc;
    if (!h) return dr_fail(err, DR_ENOMEM, "opencl backend: no host memory to clip %zu gradients", P);
    if ((rc = dr_cl_need(total, P * eb, "gradient total", err)) == DR_OK &&
        (e = clEnqueueReadBuffer(dr_cl_slot_of(b, total)->q, total->mem, CL_TRUE, 0, P * eb, h, 0, NULL, NULL)) !=
            CL_SUCCESS)
        rc = dr_cl_fail(err, e, "download (the gradient total)");
    if (rc == DR_OK) {
        if (fast) for (size_t i = 0; i < P; i++) g[i] = ((const float *)h)[i] / (float)divisor;
        else dr_acc_round_array(h, P, divisor, g);
        dr_engine_clip(&b->o.clip, &b->m, !fast, g, P);
    }
    free(h);
    return rc;
}

/* Without clipping, the device's own rounding (kernels.cl's round_exact and
 * round_fast: apply_exact's and apply_fast's expressions) into a buffer,
 * read back; with it, the host's floats apply reads too. */
int dr_cl_applied_grad(dr_backend *b, const dr_buffer *total, dr_numerics num, uint32_t divisor, float *out,
                       dr_err *err)
{
    const bool fast = b->num == DR_NUMERICS_FAST;
    dr_cl_slot *sl = dr_cl_slot_of(b, total);
    cl_int e = CL_SUCCESS;
    cl_mem g;
    int rc;
    if (divisor < 1) return dr_fail(err, DR_EUSAGE, "opencl backend: applied_grad with divisor 0");
    if (num != b->num)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: applied_grad of a total in another number form than "
                       "the backend's (%s)", fast ? "fast" : "exact");
    if ((rc = dr_cl_need(total, b->P * dr_sum_bytes(num), "gradient total", err))) return rc;
    if (dr_engine_clip_on(&b->o.clip) && !b->o.clip.per_replica) return dr_cl_round_clip_host(b, total, divisor, out, err);
    if (!(g = clCreateBuffer(b->ctx, CL_MEM_WRITE_ONLY, b->P * sizeof(float) + 4, NULL, &e)))
        return dr_cl_fail(err, e, "the applied gradient's buffer");
    {
        dr_cl_arg a[] = { CLM(total->mem), fast ? CLF((float)divisor) : CLU(divisor), CLU(b->P), CLM(g) };
        rc = dr_cl_launch(sl, fast ? K_ROUND_FAST : K_ROUND_EXACT, b->P, 1, 0, 0, a, 4, "applied gradient", err);
    }
    if (rc == DR_OK && b->P &&
        (e = clEnqueueReadBuffer(sl->q, g, CL_TRUE, 0, b->P * sizeof(float), out, 0, NULL, NULL)) != CL_SUCCESS)
        rc = dr_cl_fail(err, e, "download (the applied gradient)");
    clReleaseMemObject(g);
    return rc;
}

int dr_cl_round_loss(dr_backend *b, const dr_buffer *loss, uint32_t divisor, float *out, dr_err *err)
{
    int rc;
    if (divisor < 1) return dr_fail(err, DR_EUSAGE, "opencl backend: round_loss with divisor 0");
    if ((rc = dr_cl_need(loss, dr_sum_bytes(b->num), "loss", err))) return rc;
    if (b->num == DR_NUMERICS_FAST) {
        float f;
        if ((rc = dr_backend_opencl()->download(b, &f, loss, 0, sizeof f, err))) return rc;
        *out = divisor == 1 ? f : f / (float)divisor;
    } else {
        dr_acc a;
        if ((rc = dr_backend_opencl()->download(b, &a, loss, 0, sizeof a, err))) return rc;
        *out = dr_acc_round_div(&a, divisor);
    }
    return DR_OK;
}
