/* distref devices — the OpenCL backend's mixed-precision step
 * (--dtype_policy=mixed_float16 / mixed_bfloat16; distref/backend.h's
 * mixed_loss_grad, apply_f32 and clip_f32; docs/TRAINING_FEATURES.md
 * "Mixed precision").
 *
 * devices/cpu/openmp_mixed.c's contract, bit for bit, as kernel launches on
 * the replica's device (cl/half.cl, cl/mixed.cl): float32 master weights in
 * rb->params; every op's result its exact value rounded once to the compute
 * dtype c:
 *   forward   Wc = RN_c(W) (biases included), xc = RN_c(x) (mixed_to_dtype);
 *             per layer pre = RN_c(exact in Wc + bc) (mixed_gemm), then
 *             ReLU or the identity (kernels.cl's activate);
 *   loss      per example the float32 softmax cross-entropy on the logits,
 *             dz = RN_c(exact scale (softmax - onehot) / G) (mixed_loss_rows);
 *             the losses summed exactly (partial_sum, merge_partials), times
 *             mult (share_exact on the loss);
 *   backward  per layer from the top gW = in^T dz and gb = the column sums of
 *             dz, exact (gemm_acc_exact, bias_grad_exact); the delta below
 *             RN_c(exact dz Wc^T) (mixed_gemm), masked by its ReLU.
 * --numerics=fast (mk->fast): the three GEMMs in float32 on the same
 * rounded operands (cl/mixed.cl's mixed_gemm_fast, mixed_grad_fast), as
 * openmp's fast mixed kernels; the loss, dz and the bias gradients as above.
 * The host only orchestrates: it checks the labels, launches, and counts the
 * hits. The strategy layer (strategies/mixed.c) reduces the exact gradients
 * through host staging, rounds them, takes the loss scale's decision and
 * unscales; apply_f32 uploads that float gradient and runs kernels.cl's
 * apply_fast on it (divisor 1: x / 1.0f is x), the optimizer of apply.
 * clip_f32 clips that gradient before, on the host where it already is:
 * devices/cpu/grad_clip.c with exact norms, as openmp's and as apply's
 * global clipping here (dr_cl_round_clip_host).
 */
#include "devices/opencl/opencl_backend.h"
#include "devices/cpu/grad_clip.h"

#include <stdlib.h>

#include "devices/seams.h"

/* The replica's Wc (P floats) and xc (rows x in0 floats), made on the first
 * mixed call and counted against its device; scratch_free releases them. */
static int mixed_buffers(dr_backend *b, dr_cl_scratch *s, dr_err *err)
{
    size_t nw = b->P * sizeof(float), nx = (size_t)(s->cap ? s->cap : 1) * b->m.layer[0].in * sizeof(float);
    cl_int e = CL_SUCCESS;
    int rc;
    if (s->wc) return DR_OK;
    if ((rc = dr_cl_mem_take(b, &b->slot[s->slot], nw + nx, err))) return rc;
    s->wc = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, nw, NULL, &e);
    if (s->wc) s->xc = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, nx, NULL, &e);
    if (!s->xc) {
        if (s->wc) clReleaseMemObject(s->wc);
        s->wc = NULL;
        dr_cl_mem_give(b, &b->slot[s->slot], nw + nx);
        return dr_cl_fail(err, e, "allocating the mixed step's workspace");
    }
    s->bytes += nw + nx;
    return DR_OK;
}

/* C (M x N) = RN_c(exact op(A) op(B) [+ bias]) per element; fast: of the
 * float32 sum, the bias added in float32 (mixed_gemm_fast). */
int dr_cl_mixed_gemm(dr_cl_slot *sl, bool fast, uint32_t M, uint32_t N, uint32_t K, cl_mem A, size_t sai,
                      size_t sak, cl_mem B, size_t boff, size_t sbk, size_t sbj, cl_mem bias, size_t bias_off,
                      cl_mem C, size_t ldc, dr_dtype c, const char *what, dr_err *err)
{
    dr_cl_arg a[] = { CLU(M), CLU(N), CLU(K), CLM(A), CLU(0), CLU(sai), CLU(sak), CLM(B), CLU(boff), CLU(sbk),
                      CLU(sbj), CLM(bias), CLU(bias_off), CLU(bias != NULL), CLM(C), CLU(ldc), CLU(c) };
    return dr_cl_launch(sl, fast ? K_MIXED_GEMM_FAST : K_MIXED_GEMM, M, N, DR_CL_TS, DR_CL_TS, a, 17, what, err);
}

static int to_dtype(dr_cl_slot *sl, cl_mem in, size_t n, dr_dtype c, cl_mem out, dr_err *err)
{
    dr_cl_arg a[] = { CLM(in), CLU(n), CLU(c), CLM(out) };
    return dr_cl_launch(sl, K_MIXED_TO_DTYPE, n, 1, 0, 0, a, 4, "mixed: rounding to the compute dtype", err);
}

/* The mixed step of a model beyond Dense (opencl_graph.c's graph_begin):
 * Wc (all of params rounded: only Conv2D and Dense read it, BN its float32
 * gamma and beta in params) and xc of the pass's n rows. */
int dr_cl_graph_mixed_begin(dr_backend *b, dr_replica_bufs *rb, uint32_t n, dr_dtype c, dr_err *err)
{
    dr_cl_scratch *s = rb->scratch;
    dr_cl_slot *sl = &b->slot[s->slot];
    int rc;
    if (b->num != DR_NUMERICS_EXACT)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: the mixed step of a model beyond Dense runs with full "
                       "exact accumulators");
    if ((rc = mixed_buffers(b, s, err)) || (rc = to_dtype(sl, rb->params->mem, b->P, c, s->wc, err))) return rc;
    return to_dtype(sl, rb->x->mem, (size_t)n * b->m.layer[0].in, c, s->xc, err);
}

/* Its loss: mixed_loss_rows on the logits (the last layer's pre, in c),
 * each example's float32 loss summed exactly into rb->loss (graph_begin
 * zeroed it), dz = RN_c(scale (p - y) / G) into the top map's gradient. */
int dr_cl_graph_mixed_loss(dr_backend *b, dr_replica_bufs *rb, uint32_t n, dr_dtype c, float scale, uint32_t G,
                           cl_mem dz, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    dr_cl_scratch *s = rb->scratch;
    dr_cl_slot *sl = &b->slot[s->slot];
    size_t groups = (n + DR_CL_CHUNK - 1) / DR_CL_CHUNK;
    dr_cl_arg a[] = { CLM(s->pre[m->nlayers - 1]), CLM(rb->labels ? rb->labels->mem : NULL), CLU(n),
                      CLU(m->layer[m->nlayers - 1].out), CLF(scale), CLU(G), CLU(c), CLM(s->ex_loss), CLM(dz),
                      CLM(s->hit) };
    dr_cl_arg p[] = { CLM(s->ex_loss), CLU(0), CLU(n), CLU(0), CLM(s->part), CLU(0) };
    dr_cl_arg g[] = { CLM(s->part), CLU(groups), CLM(rb->loss->mem), CLM(NULL), CLF(0.0f) };
    int rc;
    if ((rc = dr_cl_check_labels(b, rb, s, n, err)) ||
        (rc = dr_cl_launch(sl, K_MIXED_LOSS_ROWS, n, 1, 0, 0, a, 10, "mixed: loss", err)) ||
        (rc = dr_cl_launch(sl, K_PARTIAL_SUM, groups, 1, 0, 0, p, 6, "mixed: loss sum", err)))
        return rc;
    return dr_cl_launch(sl, K_MERGE, 1, 1, 0, 0, g, 5, "mixed: loss sum", err);
}

static int forward(dr_backend *b, dr_replica_bufs *rb, dr_cl_scratch *s, uint32_t n, dr_dtype c, bool fast,
                   dr_err *err)
{
    const dr_model_spec *m = &b->m;
    dr_cl_slot *sl = &b->slot[s->slot];
    int rc;
    if ((rc = to_dtype(sl, rb->params->mem, b->P, c, s->wc, err)) ||
        (rc = to_dtype(sl, rb->x->mem, (size_t)n * m->layer[0].in, c, s->xc, err)))
        return rc;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        size_t k0 = b->koff[l];
        dr_cl_arg a[] = { CLM(s->pre[l]), CLM(s->act[l]), CLU(n), CLU(d->out), CLU(d->act == DR_ACT_RELU), CLU(0) };
        if ((rc = dr_cl_mixed_gemm(sl, fast, n, d->out, d->in, l ? s->act[l - 1] : s->xc, d->in, 1, s->wc, k0, d->out, 1,
                             fast ? DR_SEAM_MIXED_FAST_BIAS(s->wc) : s->wc, k0 + (size_t)d->in * d->out, s->pre[l],
                             d->out, c, "mixed: forward GEMM", err)) ||
            (rc = dr_cl_launch(sl, K_ACTIVATE, n, 1, 0, 0, a, 6, "mixed: activation", err)))
            return rc;
    }
    return DR_OK;
}

/* The per-example losses summed exactly into rb->loss, times mult. */
static int loss(dr_backend *b, dr_replica_bufs *rb, dr_cl_scratch *s, uint32_t n, const dr_mixed_kernel *mk,
                dr_err *err)
{
    const dr_model_spec *m = &b->m;
    dr_cl_slot *sl = &b->slot[s->slot];
    size_t groups = (n + DR_CL_CHUNK - 1) / DR_CL_CHUNK;
    dr_cl_arg a[] = { CLM(s->pre[m->nlayers - 1]), CLM(rb->labels->mem), CLU(n), CLU(m->layer[m->nlayers - 1].out),
                      CLF(mk->scale), CLU(mk->G), CLU(mk->compute), CLM(s->ex_loss), CLM(s->dz[0]), CLM(s->hit) };
    dr_cl_arg p[] = { CLM(s->ex_loss), CLU(0), CLU(n), CLU(0), CLM(s->part), CLU(0) };
    dr_cl_arg g[] = { CLM(s->part), CLU(groups), CLM(rb->loss->mem), CLM(NULL), CLF(0.0f) };
    dr_cl_arg t[] = { CLM(rb->loss->mem), CLM(NULL), CLU(0), CLU(1), CLU(mk->mult), CLU(0), CLF(0.0f) };
    int rc;
    if ((rc = dr_cl_launch(sl, K_MIXED_LOSS_ROWS, n, 1, 0, 0, a, 10, "mixed: loss", err)) ||
        (rc = dr_cl_launch(sl, K_PARTIAL_SUM, groups, 1, 0, 0, p, 6, "mixed: loss sum", err)) ||
        (rc = dr_cl_launch(sl, K_MERGE, 1, 1, 0, 0, g, 5, "mixed: loss sum", err)))
        return rc;
    return dr_cl_launch(sl, K_SHARE_EXACT, 1, 1, 0, 0, t, 7, "mixed: loss share", err);
}

static int backward(dr_backend *b, dr_replica_bufs *rb, dr_cl_scratch *s, uint32_t n, dr_dtype c, bool fast,
                    dr_err *err)
{
    const dr_model_spec *m = &b->m;
    cl_mem dz = s->dz[0], grad = rb->grad->mem;
    dr_cl_slot *sl = &b->slot[s->slot];
    int rc;
    for (uint32_t l = m->nlayers; l-- > 0;) {
        const dr_dense *d = &m->layer[l];
        cl_mem in = l ? s->act[l - 1] : s->xc, dprev = dz == s->dz[0] ? s->dz[1] : s->dz[0];
        size_t kb = b->koff[l], bb = kb + (size_t)d->in * d->out;
        dr_cl_arg gw[] = { CLU(d->in), CLU(d->out), CLU(n), CLM(in), CLU(0), CLU(1), CLU(d->in), CLM(dz), CLU(0),
                           CLU(d->out), CLU(1), CLM(grad), CLU(kb) };
        dr_cl_arg gb[] = { CLM(dz), CLU(n), CLU(d->out), CLM(grad), CLU(bb) };
        dr_cl_arg mask[] = { CLM(dprev), CLM(s->pre[l > 0 ? l - 1 : 0]), CLU((size_t)n * d->in) };
        if ((rc = dr_cl_launch(sl, fast ? K_MIXED_GRAD_FAST : K_GEMM_ACC_EXACT, d->in, d->out, DR_CL_TS, DR_CL_TS, gw,
                               13, "mixed: gradient GEMM", err)) ||
            (rc = dr_cl_launch(sl, K_BIAS_EXACT, d->out, 1, 0, 0, gb, 5, "mixed: bias gradient", err)))
            return rc;
        if (l == 0) break;
        /* the delta below: RN_c(dz Wc^T), op(B)[k][j] = Wc[j][k] */
        if ((rc = dr_cl_mixed_gemm(sl, fast, n, d->in, d->out, dz, d->out, 1, s->wc, kb, 1, d->out, NULL, 0, dprev, d->in,
                             c, "mixed: delta GEMM", err)))
            return rc;
        if (m->layer[l - 1].act == DR_ACT_RELU &&
            (rc = dr_cl_launch(sl, K_RELU_MASK, (size_t)n * d->in, 1, 0, 0, mask, 3, "mixed: ReLU mask", err)))
            return rc;
        dz = dprev;
    }
    return DR_OK;
}

int dr_cl_mixed_loss_grad(dr_backend *b, dr_replica_bufs *rb, uint32_t n, const dr_mixed_kernel *mk, dr_err *err)
{
    const dr_backend_ops *ops = dr_backend_opencl();
    dr_cl_scratch *s;
    uint64_t correct = 0;
    int rc;
    if (b->num != DR_NUMERICS_EXACT)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: the mixed kernel runs with full exact accumulators");
    if (mk->compute != DR_DTYPE_F16 && mk->compute != DR_DTYPE_BF16)
        return dr_fail(err, DR_EUSAGE, "opencl backend: the mixed kernel computes in float16 or bfloat16, not %s",
                       dr_dtype_name(mk->compute));
    if (mk->G < 1 || mk->mult < 1 || mk->mult > (1u << 30))
        return dr_fail(err, DR_EUSAGE, "opencl backend: the mixed kernel's divisor %u and multiplier %u (1..2^30)",
                       mk->G, mk->mult);
    if ((rc = dr_cl_need_scratch(rb, n, err)) ||
        (rc = dr_cl_need(rb->grad, b->P * sizeof(dr_acc), "grad", err)) ||
        (rc = dr_cl_need(rb->loss, sizeof(dr_acc), "loss", err)) ||
        (rc = dr_cl_need(rb->params, b->P * sizeof(float), "params", err)) ||
        (rc = dr_cl_need(rb->x, (size_t)n * b->m.layer[0].in * sizeof(float), "x", err)))
        return rc;
    s = rb->scratch;
    rb->correct = 0;
    if (n == 0)
        return (rc = ops->fill_zero(b, rb->grad, 0, b->P * sizeof(dr_acc), err)) ? rc
                                                                                   : ops->fill_zero(b, rb->loss, 0, sizeof(dr_acc), err);
    if ((rc = dr_cl_check_labels(b, rb, s, n, err)) || (rc = mixed_buffers(b, s, err)) ||
        (rc = forward(b, rb, s, n, mk->compute, mk->fast, err)) || (rc = loss(b, rb, s, n, mk, err)) ||
        (rc = backward(b, rb, s, n, mk->compute, mk->fast, err)) ||
        (rc = ops->download(b, s->hit_host, &(dr_buffer){ n, s->hit, s->slot }, 0, n, err)))
        return rc;
    for (uint32_t r = 0; r < n; r++) correct += s->hit_host[r];
    rb->correct = correct;
    return DR_OK;
}

int dr_cl_apply_f32(dr_backend *b, const float *g, uint64_t step, dr_buffer *params, dr_buffer *slots, dr_err *err)
{
    const dr_optimizer *o = &b->o;
    size_t P = b->P, nslots = (size_t)dr_optimizer_num_slots(o);
    float lr, lr_t;
    cl_uint opt;
    cl_int e = CL_SUCCESS;
    cl_mem gm;
    int rc;
    if ((rc = dr_cl_need(params, P * sizeof(float), "params", err)) ||
        (nslots && (rc = dr_cl_need(slots, nslots * P * sizeof(float), "slots", err))))
        return rc;
    if (P == 0) return DR_OK;
    dr_cl_opt_scalars(b, step, &lr, &lr_t, &opt);
    /* a copy of g made now: the host's array is the strategy's to write again */
    if (!(gm = clCreateBuffer(b->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, P * sizeof(float), (void *)g, &e)))
        return dr_cl_fail(err, e, "the mixed step's gradient buffer");
    {
        dr_cl_arg a[] = { CLM(gm), CLF(1.0f), CLU(P), CLU(opt), CLF(lr), CLF(o->momentum), CLF(lr_t),
                          CLF(1.0f - o->beta1), CLF(1.0f - o->beta2), CLF(o->epsilon), CLM(params->mem),
                          CLM(slots ? slots->mem : NULL) };
        rc = dr_cl_launch(dr_cl_slot_of(b, params), K_APPLY_FAST, P, 1, 0, 0, a, 12, "mixed: apply", err);
    }
    clReleaseMemObject(gm);   /* freed once the kernel is done with it */
    return rc;
}

/* The mixed step's clip (--clip_semantics=exact; tensorflow's per-replica
 * clip is refused with a mixed policy): the aggregated, unscaled host
 * gradient, exact norms whatever --numerics. */
void dr_cl_clip_f32(dr_backend *b, float *g)
{
    if (dr_engine_clip_on(&b->o.clip) && !b->o.clip.per_replica) dr_engine_clip(&b->o.clip, &b->m, true, g, b->P);
}

/* --clip_semantics=tensorflow: one replica's gradient, staged on the host
 * for the all-reduce (the comm works through host buffers), clipped there. */
void dr_cl_clip_replica_f32(dr_backend *b, float *g)
{
    if (dr_engine_clip_on(&b->o.clip)) dr_engine_clip(&b->o.clip, &b->m, true, g, b->P);
}
