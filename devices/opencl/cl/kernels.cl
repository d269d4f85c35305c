/* distref OpenCL kernels — one training step of a Dense stack.
 *
 * Built after include/distref/elem.h (dr_expf, dr_logf: the C build's own
 * source) and devices/opencl/cl/acc.cl (the exact accumulator) into one program
 * (devices/opencl/opencl_program.c), with -cl-fp32-correctly-rounded-divide-sqrt
 * and never -cl-mad-enable / -cl-fast-relaxed-math. Contraction is off:
 */
#if defined(DR_MUTANT_CONTRACT)
#pragma OPENCL FP_CONTRACT ON    /* fault: a * b + c may become one fma (OpenCL C's default) */
#else
#pragma OPENCL FP_CONTRACT OFF
#endif
/*
 * Exact kernels keep the contract of distref/backend.h bit for bit (every
 * sum exact, rounded once); fast kernels (suffix _fast) are plain float
 * code held to the fast-mode bounds. Planted faults (DR_MUTANT_*, passed as
 * build options by a mutant build of devices/opencl/opencl_program.c) mark where
 * the conformance suites must catch a wrong kernel.
 */
#define TS 16            /* GEMM tile edge: work-groups of TS x TS */
#define XENT_EPS 1e-7f
#define CHUNK 8          /* elements per work-item of the partial sums */

/* ---- tiled GEMM: C[i][j] = op(A)[i][k] op(B)[k][j], k < K ------------------
 * op(A)[i][k] = A[aoff + i*sai + k*sak], op(B)[k][j] = B[boff + k*sbk + j*sbj]
 * (strides give both transposes). Each work-group stages TS x TS tiles of
 * op(A) and op(B) in local memory; each work-item owns one C element. */
#define GEMM_ARGS uint M, uint N, uint K, __global const float *A, uint aoff, uint sai, uint sak, \
                  __global const float *B, uint boff, uint sbk, uint sbj
#define GEMM_TILES(BODY)                                                              \
    __local float As[TS][TS + 1], Bs[TS][TS + 1];                                     \
    uint li = get_local_id(0), lj = get_local_id(1);                                  \
    uint i = get_group_id(0) * TS + li, j = get_group_id(1) * TS + lj;                \
    uint ntiles = (K + TS - 1) / TS;                                                  \
    GEMM_EDGE_MUTANT                                                                  \
    for (uint t = 0; t < ntiles; t++) {                                               \
        uint ka = t * TS + lj, kb = t * TS + li;                                      \
        uint bi = get_group_id(0) * TS + li, bj = get_group_id(1) * TS + lj;          \
        As[li][lj] = (bi < M && ka < K) ? A[aoff + bi * sai + ka * sak] : 0.0f;       \
        Bs[li][lj] = (kb < K && bj < N) ? B[boff + kb * sbk + bj * sbj] : 0.0f;       \
        barrier(CLK_LOCAL_MEM_FENCE);                                                 \
        uint kmax = K - t * TS < TS ? K - t * TS : TS;                                \
        if (i < M && j < N)                                                           \
            for (uint kk = 0; kk < kmax; kk++) { BODY; }                              \
        barrier(CLK_LOCAL_MEM_FENCE);                                                 \
    }

#if defined(DR_MUTANT_GEMM_EDGE)
/* fault: the last, partial tile of the K dimension is dropped */
#define GEMM_EDGE_MUTANT ntiles = K / TS;
#else
#define GEMM_EDGE_MUTANT
#endif

/* C = round(bias[j] + sum) per element: one rounding (exact numerics).
 * Not tiled: on PoCL's CPU device one work-item per element reading global
 * memory measured faster (212 ms at 256 x 784 x 128) than the local-memory
 * tiles (278 ms), whose barriers spill every work-item's accumulator. */
__kernel void gemm_exact(GEMM_ARGS, __global const float *bias, uint bias_off, uint has_bias,
                         __global float *C, uint ldc)
{
    acc_t a;
    uint i = get_global_id(0), j = get_global_id(1);
    acc_init(&a);
    if (i < M && j < N)
        for (uint k = 0; k < K; k++) acc_add_prod(&a, A[aoff + i * sai + k * sak], B[boff + k * sbk + j * sbj]);
    if (i < M && j < N) {
        if (has_bias) acc_add(&a, bias[bias_off + j]);
        C[i * ldc + j] = acc_round(&a);
    }
}

/* Cacc[coff + i*N + j] = the exact sum (nothing rounded). */
__kernel void gemm_acc_exact(GEMM_ARGS, __global acc_t *C, uint coff)
{
    acc_t a;
    acc_init(&a);
    GEMM_TILES(acc_add_prod(&a, As[li][kk], Bs[kk][lj]))
    if (i < M && j < N) acc_store(&C[coff + i * N + j], &a);
}

/* C[coff + i*ldc + j] = bias[j] + sum, in float (fast numerics). */
__kernel void gemm_fast(GEMM_ARGS, __global const float *bias, uint bias_off, uint has_bias,
                        __global float *C, uint coff, uint ldc)
{
    float s = 0.0f;
    GEMM_TILES(s = s + As[li][kk] * Bs[kk][lj])
    if (i < M && j < N) C[coff + i * ldc + j] = has_bias ? bias[bias_off + j] + s : s;
}

/* Fast, when op(B)'s rows are contiguous (sbj == 1) and N % 16 == 0: each
 * work-item owns a 4 x 16 block of C, one float16 row of op(B) per k times
 * four broadcast elements of op(A). Written for CPU devices, where a float16
 * maps onto SIMD registers (PoCL); the same sums as gemm_fast, k in order. */
__kernel void gemm_fast_v(GEMM_ARGS, __global const float *bias, uint bias_off, uint has_bias,
                          __global float *C, uint coff, uint ldc)
{
    uint i0 = get_global_id(0) * 4, j0 = get_global_id(1) * 16;
    float16 c0 = (float16)(0.0f), c1 = c0, c2 = c0, c3 = c0;
    uint r1 = i0 + 1 < M ? i0 + 1 : i0, r2 = i0 + 2 < M ? i0 + 2 : i0, r3 = i0 + 3 < M ? i0 + 3 : i0;
    if (i0 >= M || j0 >= N) return;
    for (uint k = 0; k < K; k++) {
        float16 bv = vload16(0, B + boff + k * sbk + j0);
        uint ak = aoff + k * sak;
        c0 = c0 + A[ak + i0 * sai] * bv;
        c1 = c1 + A[ak + r1 * sai] * bv;
        c2 = c2 + A[ak + r2 * sai] * bv;
        c3 = c3 + A[ak + r3 * sai] * bv;
    }
    if (has_bias) {
        float16 bb = vload16(0, bias + bias_off + j0);
        c0 = bb + c0; c1 = bb + c1; c2 = bb + c2; c3 = bb + c3;
    }
    vstore16(c0, 0, C + coff + i0 * ldc + j0);
    if (i0 + 1 < M) vstore16(c1, 0, C + coff + (i0 + 1) * ldc + j0);
    if (i0 + 2 < M) vstore16(c2, 0, C + coff + (i0 + 2) * ldc + j0);
    if (i0 + 3 < M) vstore16(c3, 0, C + coff + (i0 + 3) * ldc + j0);
}

/* ---- activations (one work-item per row) ----------------------------------- */

uint argmax_g(__global const float *v, uint n)
{
    uint best = 0;
    for (uint i = 1; i < n; i++) if (v[i] > v[best]) best = i;
    return best;
}

/* act = relu / identity / softmax of pre, row r; kind 0 linear, 1 relu, 2 softmax. */
__kernel void activate(__global const float *pre, __global float *act, uint rows, uint n, uint kind, uint fast)
{
    uint r = get_global_id(0);
    if (r >= rows) return;
    __global const float *z = pre + (size_t)r * n;
    __global float *p = act + (size_t)r * n;
    if (kind == 0) {
        for (uint i = 0; i < n; i++) p[i] = z[i];
    } else if (kind == 1) {
        for (uint i = 0; i < n; i++) p[i] = z[i] > 0.0f ? z[i] : 0.0f;
    } else {
        float mx = z[argmax_g(z, n)], s = 0.0f;
        if (fast) {
            for (uint i = 0; i < n; i++) p[i] = exp(z[i] - mx);
            for (uint i = 0; i < n; i++) s = s + p[i];
        } else {
            acc_t a;
            acc_init(&a);
            for (uint i = 0; i < n; i++) { p[i] = dr_expf(z[i] - mx); acc_add(&a, p[i]); }
            s = acc_round(&a);
        }
        for (uint i = 0; i < n; i++) p[i] = p[i] / s;
    }
}

/* ---- the loss: one work-item per example ----------------------------------- */
/* loss kind 0 xent from logits, 1 xent from probabilities, 2 mse; dz (rows x n)
 * gets d loss / d pre of the last layer, ex_loss[r] the example's loss,
 * hit[r] whether argmax(out) is its label. */
__kernel void loss_rows(__global const float *pre, __global const float *out, __global const uchar *labels,
                        __global const float *targets, uint nrows, uint n, uint kind, uint fast,
                        __global float *ex_loss, __global float *dz, __global uchar *hit)
{
    uint r = get_global_id(0);
    if (r >= nrows) return;
    __global const float *z = pre + (size_t)r * n, *o = out + (size_t)r * n;
    __global float *d = dz + (size_t)r * n;
    uint label = labels ? labels[r] : 0;
    float loss;
    if (kind == 0) {
        float mx = z[argmax_g(z, n)], s = 0.0f;
        if (fast) {
            for (uint i = 0; i < n; i++) { d[i] = exp(z[i] - mx); s = s + d[i]; }
        } else {
            acc_t a;
            acc_init(&a);
            for (uint i = 0; i < n; i++) { d[i] = dr_expf(z[i] - mx); acc_add(&a, d[i]); }
            s = acc_round(&a);
        }
        for (uint i = 0; i < n; i++) d[i] = d[i] / s - (i == label ? 1.0f : 0.0f);
        loss = (fast ? log(s) : dr_logf(s)) - (z[label] - mx);
    } else if (kind == 1) {
        float py = o[label];
        float q = py < XENT_EPS ? XENT_EPS : py > 1.0f - XENT_EPS ? 1.0f - XENT_EPS : py;
        float gy = (q == py) ? -1.0f / py : 0.0f, t = py * gy;
        for (uint i = 0; i < n; i++) d[i] = o[i] * ((i == label ? gy : 0.0f) - t);
        loss = -(fast ? log(q) : dr_logf(q));
    } else {
        __global const float *tg = targets + (size_t)r * n;
        float s = 0.0f;
        for (uint i = 0; i < n; i++) d[i] = o[i] - tg[i];
        if (fast) {
            for (uint i = 0; i < n; i++) s = s + d[i] * d[i];
        } else {
            acc_t a;
            acc_init(&a);
            for (uint i = 0; i < n; i++) acc_add_prod(&a, d[i], d[i]);
            s = acc_round(&a);
        }
        loss = s / (float)n;
        for (uint i = 0; i < n; i++) d[i] = (2.0f * d[i]) / (float)n;
    }
    ex_loss[r] = loss;
    hit[r] = labels ? argmax_g(o, n) == label : 0;
}

/* ---- exact partial sums, merged exactly -------------------------------------
 * Work-item g sums x[off + g*CHUNK ..) (or its squares) into part[poff + g];
 * merge adds ngroups partials into one accumulator. */
__kernel void partial_sum(__global const float *x, uint off, uint n, uint squares,
                          __global acc_t *part, uint poff)
{
    uint g = get_global_id(0), lo = g * CHUNK;
    acc_t a;
    if (lo >= n) return;
    acc_init(&a);
    for (uint k = lo; k < n && k < lo + CHUNK; k++) {
        float v = x[off + k];
        if (squares) acc_add_prod(&a, v, v); else acc_add(&a, v);
    }
    acc_store(&part[poff + g], &a);
}

/* dst = the sum of part[0..ngroups); with round_to, also *round_to = scale * round(sum). */
__kernel void merge_partials(__global const acc_t *part, uint ngroups, __global acc_t *dst,
                             __global float *round_to, float scale)
{
    acc_t a;
    uint last = ngroups;
#if defined(DR_MUTANT_SKIP_LAST_GROUP)
    if (last > 1) last--;   /* fault: the last work-group's partial is not merged */
#endif
    if (get_global_id(0) != 0) return;
    acc_init(&a);
    for (uint g = 0; g < last; g++) acc_merge_g(&a, &part[g]);
    if (round_to) { acc_t c = a; *round_to = scale * acc_round(&c); }
    if (dst) acc_store(dst, &a);
}

/* Fast: loss = the float sum of x[0..n) left to right. */
__kernel void sum_fast(__global const float *x, uint n, __global float *dst)
{
    float s = 0.0f;
    if (get_global_id(0) != 0) return;
    for (uint k = 0; k < n; k++) s = s + x[k];
    *dst = s;
}

/* ---- backward -------------------------------------------------------------- */

/* gb[j] = the column sum of dz over n rows: exact into grad[goff + j]. */
__kernel void bias_grad_exact(__global const float *dz, uint n, uint out, __global acc_t *grad, uint goff)
{
    uint j = get_global_id(0);
    acc_t a;
    if (j >= out) return;
    acc_init(&a);
    for (uint r = 0; r < n; r++) acc_add(&a, dz[(size_t)r * out + j]);
    acc_store(&grad[goff + j], &a);
}

__kernel void bias_grad_fast(__global const float *dz, uint n, uint out, __global float *grad, uint goff)
{
    uint j = get_global_id(0);
    float s = 0.0f;
    if (j >= out) return;
    for (uint r = 0; r < n; r++) s = s + dz[(size_t)r * out + j];
    grad[goff + j] = s;
}

/* The delta of a ReLU layer's output is zero where the unit was inactive. */
__kernel void relu_mask(__global float *delta, __global const float *pre, uint cells)
{
    uint i = get_global_id(0);
    if (i >= cells) return;
#if defined(DR_MUTANT_RELU_AT_ZERO)
    if (!(pre[i] >= 0.0f)) delta[i] = 0.0f;   /* fault: a unit with pre == 0 counts as active */
#else
    if (!(pre[i] > 0.0f)) delta[i] = 0.0f;
#endif
}

/* ---- share: mult * sums + coef * reg ---------------------------------------- */

/* grad[p] = mult grad[p] + coef (c w[p]) for p in [off, off+len); c = 0: no L2 term. */
__kernel void share_exact(__global acc_t *grad, __global const float *w, uint off, uint len,
                          uint mult, uint coef, float c)
{
    uint p = get_global_id(0);
    acc_t a;
    if (p >= len) return;
    p += off;
    acc_load(&a, &grad[p]);
    if (mult > 1) acc_mul_u32(&a, mult);
    if (c != 0.0f) {
        float g = c * w[p];
        if (g != 0.0f) acc_add_prod(&a, (float)coef, g);
    }
    acc_store(&grad[p], &a);
}

/* loss = mult loss + coef reg (reg: l2 * round(sum w^2), from merge_partials). */
__kernel void loss_share_exact(__global acc_t *loss, uint mult, uint coef, __global const float *reg)
{
    acc_t a;
    if (get_global_id(0) != 0) return;
    acc_load(&a, loss);
    if (mult > 1) acc_mul_u32(&a, mult);
    acc_add_prod(&a, (float)coef, reg ? *reg : 0.0f);
    acc_store(loss, &a);
}

/* Fast: grad[p] = grad[p] sg (+ (c w[p]) sr where l2 applies). */
__kernel void share_fast(__global float *grad, __global const float *w, uint off, uint len,
                         float sg, float c, float sr, uint l2)
{
    uint p = get_global_id(0);
    if (p >= len) return;
    p += off;
    grad[p] = grad[p] * sg;
    if (l2) grad[p] = grad[p] + (c * w[p]) * sr;
}

/* Fast: loss = loss sg + (l2 sum w^2) sr; ranges: nr (offset, length) pairs. */
__kernel void loss_share_fast(__global float *loss, __global const float *w, __global const uint *ranges, uint nr,
                              float sg, float sr, float l2)
{
    float reg = 0.0f;
    if (get_global_id(0) != 0) return;
    for (uint q = 0; q < nr; q++) {
        float sq = 0.0f;
        for (uint p = ranges[2 * q]; p < ranges[2 * q] + ranges[2 * q + 1]; p++) sq = sq + w[p] * w[p];
        reg = reg + sq;
    }
    *loss = *loss * sg + (l2 * reg) * sr;
}

/* ---- apply: round once, then the optimizer (TensorFlow's order) -------------
 * opt 0 sgd, 1 momentum, 2 nesterov, 3 adam (lr_t from the host). */
float apply_one(float g, uint opt, float lr, float mu, float lr_t, float one_b1, float one_b2, float eps,
                __global float *w, __global float *s1, __global float *s2, uint p)
{
    if (opt == 0) {
        w[p] = w[p] - lr * g;
    } else if (opt == 1 || opt == 2) {
        s1[p] = mu * s1[p] - lr * g;
        w[p] = opt == 2 ? w[p] + (mu * s1[p] - lr * g) : w[p] + s1[p];
    } else {
        s1[p] = s1[p] + (g - s1[p]) * one_b1;
        s2[p] = s2[p] + (g * g - s2[p]) * one_b2;
        w[p] = w[p] - lr_t * s1[p] / (sqrt(s2[p]) + eps);
    }
    return g;
}

__kernel void apply_exact(__global const acc_t *total, uint d, uint P, uint opt, float lr, float mu, float lr_t,
                          float one_b1, float one_b2, float eps, __global float *w, __global float *slots)
{
    uint p = get_global_id(0);
    acc_t a;
    if (p >= P) return;
    acc_load(&a, &total[p]);
    apply_one(acc_round_div(&a, d), opt, lr, mu, lr_t, one_b1, one_b2, eps, w, slots, slots + P, p);
}

__kernel void apply_fast(__global const float *total, float d, uint P, uint opt, float lr, float mu, float lr_t,
                         float one_b1, float one_b2, float eps, __global float *w, __global float *slots)
{
    uint p = get_global_id(0);
    if (p >= P) return;
    apply_one(total[p] / d, opt, lr, mu, lr_t, one_b1, one_b2, eps, w, slots, slots + P, p);
}

/* The gradient apply_exact / apply_fast hand apply_one, written out (the
 * backend's applied_grad: --trajectory's gradient/): the same expressions. */
__kernel void round_exact(__global const acc_t *total, uint d, uint P, __global float *g)
{
    uint p = get_global_id(0);
    acc_t a;
    if (p >= P) return;
    acc_load(&a, &total[p]);
    g[p] = acc_round_div(&a, d);
}

__kernel void round_fast(__global const float *total, float d, uint P, __global float *g)
{
    uint p = get_global_id(0);
    if (p >= P) return;
    g[p] = total[p] / d;
}

/* ---- spatial partitioning of layer 0 (tpu --input_partition_dims) ----------
 * A tile xt (rows x len, row-major) holds the input's pixels pix[0..len):
 * its rows of layer 0's kernel W (in x out, at koff). Exact kernels add to
 * an accumulator in the host's dr_acc layout (the tiles' sums merge exactly,
 * in any order); fast ones add a float sum over the tile, q in order. */
#if defined(DR_MUTANT_TILE_CONTIGUOUS)
#define L0_PIXEL(pix, q) (pix[0] + (q))   /* fault: a tile's pixels taken as one run (true of H-only tiles) */
#else
#define L0_PIXEL(pix, q) (pix[q])
#endif

/* z[i][j] += sum_q xt[i][q] W[pix[q]][j] */
__kernel void l0_partial_exact(__global const float *xt, __global const uint *pix, uint len, uint rows, uint out,
                               __global const float *W, uint koff, __global acc_t *z)
{
    uint i = get_global_id(0), j = get_global_id(1);
    acc_t a;
    if (i >= rows || j >= out) return;
    acc_load(&a, &z[i * out + j]);
    for (uint q = 0; q < len; q++) acc_add_prod(&a, xt[i * len + q], W[koff + L0_PIXEL(pix, q) * out + j]);
    acc_store(&z[i * out + j], &a);
}

__kernel void l0_partial_fast(__global const float *xt, __global const uint *pix, uint len, uint rows, uint out,
                              __global const float *W, uint koff, __global float *z)
{
    uint i = get_global_id(0), j = get_global_id(1);
    float s = 0.0f;
    if (i >= rows || j >= out) return;
    for (uint q = 0; q < len; q++) s = s + xt[i * len + q] * W[koff + L0_PIXEL(pix, q) * out + j];
    z[i * out + j] = z[i * out + j] + s;
}

/* pre = z + bias[j]: exact rounded once (the bias joins the sum), or in float */
__kernel void l0_finish_exact(__global const acc_t *z, __global const float *bias, uint boff, uint out, uint cells,
                              __global float *pre)
{
    uint c = get_global_id(0);
    acc_t a;
    if (c >= cells) return;
    acc_load(&a, &z[c]);
    acc_add(&a, bias[boff + c % out]);
    pre[c] = acc_round(&a);
}

__kernel void l0_finish_fast(__global const float *z, __global const float *bias, uint boff, uint out, uint cells,
                             __global float *pre)
{
    uint c = get_global_id(0);
    if (c < cells) pre[c] = z[c] + bias[boff + c % out];
}

/* grad[koff + pix[q] out + j] += sum_e xt[e][q] delta[e][j], e < n */
__kernel void l0_grad_exact(__global const float *xt, __global const uint *pix, uint len, uint n, uint out,
                            __global const float *delta, uint koff, __global acc_t *grad)
{
    uint q = get_global_id(0), j = get_global_id(1);
    acc_t a;
    if (q >= len || j >= out) return;
    __global acc_t *g = &grad[koff + L0_PIXEL(pix, q) * out + j];
    acc_load(&a, g);
    for (uint e = 0; e < n; e++) acc_add_prod(&a, xt[e * len + q], delta[e * out + j]);
    acc_store(g, &a);
}

__kernel void l0_grad_fast(__global const float *xt, __global const uint *pix, uint len, uint n, uint out,
                           __global const float *delta, uint koff, __global float *grad)
{
    uint q = get_global_id(0), j = get_global_id(1);
    float s = 0.0f;
    if (q >= len || j >= out) return;
    for (uint e = 0; e < n; e++) s = s + xt[e * len + q] * delta[e * out + j];
    grad[koff + L0_PIXEL(pix, q) * out + j] = grad[koff + L0_PIXEL(pix, q) * out + j] + s;
}
