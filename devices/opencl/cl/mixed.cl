/* distref OpenCL kernels — the mixed-precision step (--dtype_policy=
 * mixed_float16 / mixed_bfloat16; distref/backend.h mixed_loss_grad,
 * devices/opencl/opencl_mixed.c launches them): devices/cpu/openmp_mixed.c's
 * contract, bit for bit. Every op's result is its exact value rounded once to
 * the compute dtype c (cl/half.cl): the weights and the input rounded
 * (mixed_to_dtype), each pre-activation and each delta rounded from an exact
 * accumulator (mixed_gemm), dz = RN_c(exact scale (softmax - onehot) / G) per
 * example (mixed_loss_rows); the weight gradients stay exact sums
 * (kernels.cl's gemm_acc_exact and bias_grad_exact).
 * --numerics=fast (dr_mixed_kernel.fast): the three GEMMs in float32 on the
 * same dtype-rounded operands, as a GPU's half GEMM with float32
 * accumulation (devices/cpu/openmp_mixed.c's gemm_fast_dtype): a
 * pre-activation RN_c(float(x_c W_c) + b_c), a delta RN_c(float(dz_c W_c^T))
 * (mixed_gemm_fast), a kernel gradient its float32 sum added exactly to the
 * replica's accumulator (mixed_grad_fast); each sum in k order, nothing
 * contracted (so the bits are PoCL's and a GPU's alike, not sgemm's).
 *
 * Built after kernels.cl in one program (its FP_CONTRACT OFF, argmax_g and
 * GEMM_ARGS); a planted fault (DR_MUTANT_MIXED_DOUBLE_ROUND, a build option)
 * marks where the mixed_precision suite must catch a wrong kernel.
 */
#pragma OPENCL FP_CONTRACT OFF

#if defined(DR_MUTANT_MIXED_DOUBLE_ROUND)
/* fault: the exact result rounded to float32 first, then to c (two roundings) */
float mixed_round(const acc_t *a, uint d, uint c)
{
    acc_t k = *a;
    return half_round(acc_round_div(&k, d), c);
}
#else
float mixed_round(const acc_t *a, uint d, uint c)
{
    return acc_round_div_dtype(a, d, c);
}
#endif

/* The fast mixed step's float32 GEMM or conv result (its bias added)
 * rounded to c, as the exact step rounds its exact value (0: float32);
 * graph.cl's conv_fwd, built after this file, reads it too. */
#if defined(DR_MUTANT_MIXED_FAST_UNROUNDED)
#define FAST_DTYPE(c) 0u   /* fault: left float32, every layer's output one rounding short */
#else
#define FAST_DTYPE(c) (c)
#endif

/* out[i] = in[i] rounded to c, i < n. */
__kernel void mixed_to_dtype(__global const float *in, uint n, uint c, __global float *out)
{
    uint i = get_global_id(0);
    if (i < n) out[i] = half_round(in[i], c);
}

/* C[i*ldc + j] = RN_c(exact bias[j] + sum_k op(A)[i][k] op(B)[k][j]): one
 * work-item per element, an accumulator each (as gemm_exact). */
__kernel void mixed_gemm(GEMM_ARGS, __global const float *bias, uint bias_off, uint has_bias,
                         __global float *C, uint ldc, uint c)
{
    acc_t a;
    uint i = get_global_id(0), j = get_global_id(1);
    if (i >= M || j >= N) return;
    acc_init(&a);
    for (uint k = 0; k < K; k++) acc_add_prod(&a, A[aoff + i * sai + k * sak], B[boff + k * sbk + j * sbj]);
    if (has_bias) acc_add(&a, bias[bias_off + j]);
    C[i * ldc + j] = mixed_round(&a, 1u, c);
}

/* One work-item per example r of the logits z (rows of n, in c): its float32
 * softmax cross-entropy (dr_expf, the exact normalizer rounded once,
 * dr_logf) into ex_loss[r], dz[r][i] = RN_c(exact scale (p_i - y_i) / G),
 * hit[r] whether argmax z is the label. */
__kernel void mixed_loss_rows(__global const float *pre, __global const uchar *labels, uint nrows, uint n,
                              float scale, uint G, uint c, __global float *ex_loss, __global float *dz,
                              __global uchar *hit)
{
    uint r = get_global_id(0);
    if (r >= nrows) return;
    __global const float *z = pre + (size_t)r * n;
    __global float *d = dz + (size_t)r * n;
    uint label = labels[r], best = argmax_g(z, n);
    float mx = z[best], s;
    acc_t a;
    acc_init(&a);
    for (uint i = 0; i < n; i++) { d[i] = dr_expf(z[i] - mx); acc_add(&a, d[i]); }
    s = acc_round(&a);
    for (uint i = 0; i < n; i++) {
        acc_t p;
        acc_init(&p);
        acc_add_prod(&p, d[i] / s - (i == label ? 1.0f : 0.0f), scale);
        d[i] = mixed_round(&p, G, c);
    }
    ex_loss[r] = dr_logf(s) - (z[label] - mx);
    hit[r] = best == label;
}

/* --numerics=fast: C[i*ldc + j] = RN_c(float32 sum_k op(A)[i][k] op(B)[k][j]
 * [+ bias[j]]), the sum in k order (kernels.cl's tiles, as gemm_fast), the
 * bias added to it in float32, then one rounding to c. The same arguments
 * as mixed_gemm. */
__kernel void mixed_gemm_fast(GEMM_ARGS, __global const float *bias, uint bias_off, uint has_bias,
                              __global float *C, uint ldc, uint c)
{
    float s = 0.0f;
    GEMM_TILES(s = s + As[li][kk] * Bs[kk][lj])
    if (i < M && j < N) C[i * ldc + j] = half_round(has_bias ? s + bias[bias_off + j] : s, FAST_DTYPE(c));
}

/* --numerics=fast: Cacc[coff + i*N + j] = the float32 sum (k in order) held
 * exactly, so the replicas' sum stays exact (the same arguments as
 * gemm_acc_exact). */
__kernel void mixed_grad_fast(GEMM_ARGS, __global acc_t *C, uint coff)
{
    float s = 0.0f;
    acc_t a;
    GEMM_TILES(s = s + As[li][kk] * Bs[kk][lj])
    acc_init(&a);
    acc_add(&a, s);
    if (i < M && j < N) acc_store(&C[coff + i * N + j], &a);
}
