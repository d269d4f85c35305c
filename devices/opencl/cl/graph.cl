/* distref OpenCL kernels — the layers of a model beyond Dense (issue 31;
 * distref/backend.h, "models beyond Dense"), launched one layer at a time
 * by devices/opencl/opencl_graph.c.
 *
 * Built after kernels.cl into the same program, under its FP_CONTRACT OFF
 * and the build options of devices/opencl/opencl_program.c (correctly
 * rounded divide and sqrt). Maps are NHWC; one work-item per output
 * element unless a kernel says otherwise.
 *
 * Conv2D is direct, not im2col: a work-item walks its window (forward), the
 * outputs that read its input (d(input)) or every output position (dW) in
 * the order the im2col / gather rows of devices/cpu/openmp_conv.c lay them
 * out, the padding's taps included as +0.0 terms. In exact numerics each
 * result is the exact sum of exactly those terms rounded once (the sign of
 * an exact zero too, which the terms' signs decide); fast numerics sum the
 * same terms in float in that order.
 */

#define BN_EPSILON 1e-3f

/* The stride a conv's input gradient gathers with. */
#if defined(DR_MUTANT_CONV_GRAD_STRIDE)
#define GRAD_STRIDE(s) ((s) > 1 ? (s) - 1 : (s))   /* fault: a strided conv's backward, the stride one short */
#else
#define GRAD_STRIDE(s) (s)
#endif

/* Whether candidate x beats the window's best so far in max pooling. */
#if defined(DR_MUTANT_POOL_LAST_TIE)
#define POOL_BEATS(x, best) ((x) >= (best))   /* fault: the last maximum of a tie wins */
#else
#define POOL_BEATS(x, best) ((x) > (best))
#endif

/* The dtype a mixed step's Conv2D output (RN_c(conv) + b) is rounded to. */
#if defined(DR_MUTANT_MIXED_CONV_UNROUNDED)
#define CONV_OUT_DTYPE(ct) 0u   /* fault: left float32, not rounded to the compute dtype */
#else
#define CONV_OUT_DTYPE(ct) (ct)
#endif

/* n examples; input ih x iw x ic, output oh x ow x oc; a k x k kernel,
 * stride st, padding pt on top and pl on the left. */
#define CONV_ARGS uint n, uint ih, uint iw, uint ic, uint oh, uint ow, uint oc, uint k, uint st, uint pt, uint pl

/* Input (e, iy, ix, c) or 0.0f in the padding: the im2col row's value. */
float conv_in(__global const float *x, uint e, int iy, int ix, uint c, uint ih, uint iw, uint ic)
{
    if (iy < 0 || ix < 0 || iy >= (int)ih || ix >= (int)iw) return 0.0f;
    return x[(((size_t)e * ih + (uint)iy) * iw + (uint)ix) * ic + c];
}

/* pre[o] = round(bias + the window's dot product) (fast: bias + the float
 * sum, taps (ky, kx, c) in order); o = ((e oh + oy) ow + ox) oc + f. The
 * mixed step (c: the compute dtype, 0 for float32): RN_c(RN_c(conv) + b),
 * TensorFlow's Conv2D then BiasAdd, each rounded once from its exact value;
 * fast, the same two roundings of the float sum and of the float32 add
 * (half_round with 0 is the identity: the float32 fast pass unchanged).
 * One work-item per output of rows [r0, r1) x columns [r2, r3) of the
 * output map: a core's tile under spatial partitioning, else the whole map. */
__kernel void conv_fwd(CONV_ARGS, __global const float *x, __global const float *W, uint woff, uint boff,
                       uint fast, uint ct, __global float *pre, uint r0, uint r1, uint r2, uint r3)
{
    size_t t = get_global_id(0), rw = r3 - r2, rh = r1 - r0;
    if (t >= (size_t)n * rh * rw * oc) return;
    uint f = t % oc, ox = r2 + (t / oc) % rw, oy = r0 + (t / oc / rw) % rh, e = t / oc / rw / rh;
    size_t o = (((size_t)e * oh + oy) * ow + ox) * oc + f;
    int iy0 = (int)(oy * st) - (int)pt, ix0 = (int)(ox * st) - (int)pl;
    acc_t a;
    float s = 0.0f;
    if (!fast) acc_init(&a);
    for (uint ky = 0; ky < k; ky++)
        for (uint kx = 0; kx < k; kx++)
            for (uint c = 0; c < ic; c++) {
                float v = conv_in(x, e, iy0 + (int)ky, ix0 + (int)kx, c, ih, iw, ic);
                float w = W[woff + ((ky * k + kx) * ic + c) * oc + f];
                if (fast) s = s + v * w; else acc_add_prod(&a, v, w);
            }
    if (fast) {
        pre[o] = half_round(W[boff + f] + half_round(s, FAST_DTYPE(ct)), FAST_DTYPE(ct));
        return;
    }
    if (ct) {
        float v = acc_round_div_dtype(&a, 1u, ct);
        acc_init(&a);
        acc_add(&a, v);
    }
    acc_add(&a, W[boff + f]);
    pre[o] = CONV_OUT_DTYPE(ct) ? acc_round_div_dtype(&a, 1u, ct) : acc_round(&a);
}

/* Output index of tap offset t along a dimension of n outputs, stride st; -1: none. */
int tap_out(int t, int st, uint n)
{
    if (t < 0 || t % st) return -1;
    return t / st < (int)n ? t / st : -1;
}

/* dx[i] += round(the exact sum over every tap that read input i) (fast: the
 * float sum, the mixed step's rounded to ct); the terms in gather order
 * (ky, kx, f), dz 0.0f where no output's tap read it. i = ((e ih + iy) iw +
 * ix) ic + c, over rows [r0, r1) x columns [r2, r3) of the input map (a
 * core's tile, else the whole map). */
__kernel void conv_dx(CONV_ARGS, __global const float *dz, __global const float *W, uint woff, uint fast,
                      uint ct, __global float *dx, uint r0, uint r1, uint r2, uint r3)
{
    size_t t = get_global_id(0), rw = r3 - r2, rh = r1 - r0;
    if (t >= (size_t)n * rh * rw * ic) return;
    uint c = t % ic, ix = r2 + (t / ic) % rw, iy = r0 + (t / ic / rw) % rh, e = t / ic / rw / rh;
    size_t i = (((size_t)e * ih + iy) * iw + ix) * ic + c;
    int gs = (int)GRAD_STRIDE(st);
    acc_t a;
    float s = 0.0f;
    if (!fast) acc_init(&a);
    for (uint ky = 0; ky < k; ky++) {
        int oy = tap_out((int)(iy + pt) - (int)ky, gs, oh);
        for (uint kx = 0; kx < k; kx++) {
            int ox = tap_out((int)(ix + pl) - (int)kx, gs, ow);
            for (uint f = 0; f < oc; f++) {
                float g = oy >= 0 && ox >= 0 ? dz[(((size_t)e * oh + (uint)oy) * ow + (uint)ox) * oc + f] : 0.0f;
                float w = W[woff + ((ky * k + kx) * ic + c) * oc + f];
                if (fast) s = s + g * w; else acc_add_prod(&a, g, w);
            }
        }
    }
    dx[i] = dx[i] + (fast ? half_round(s, ct) : ct ? acc_round_div_dtype(&a, 1u, ct) : acc_round(&a));   /* ct: RN_c */
}

/* dW[q] over the output positions r = (e, oy, ox) of rows [r0, r1) x
 * columns [r2, r3) (the whole map, or a core's tile under spatial
 * partitioning), r in order: the im2col value times dz[r][f]; q = (tap ic +
 * c) oc + f, the Keras kernel's index. Work-items k k ic oc + f, launched
 * only for a tile (bias_grad_* sum the whole map), sum db[f] over the same
 * positions into grad[boff + f]. */
#define CONV_DW(NAME, T, INIT, ADD, BADD, STORE, BSTORE)                                             \
__kernel void NAME(CONV_ARGS, __global const float *x, __global const float *dz, __global T *grad,  \
                   uint goff, uint boff, uint r0, uint r1, uint r2, uint r3)                       \
{                                                                                                  \
    uint q = get_global_id(0), nw = k * k * ic * oc;                                               \
    if (q >= nw + oc) return;                                                                      \
    uint f = q % oc, c = (q / oc) % ic, tap = q / oc / ic, ky = tap / k, kx = tap % k;             \
    INIT;                                                                                          \
    for (uint e = 0; e < n; e++)                                                                   \
        for (uint oy = r0; oy < r1; oy++)                                                          \
            for (uint ox = r2; ox < r3; ox++) {                                                    \
                float g = dz[(((size_t)e * oh + oy) * ow + ox) * oc + f];                          \
                if (q >= nw) { BADD; continue; }                                                   \
                float v = conv_in(x, e, (int)(oy * st + ky) - (int)pt, (int)(ox * st + kx) - (int)pl, \
                                  c, ih, iw, ic);                                                  \
                ADD;                                                                               \
            }                                                                                      \
    if (q >= nw) { BSTORE; return; }                                                               \
    STORE;                                                                                         \
}
CONV_DW(conv_dw_exact, acc_t, acc_t a; acc_init(&a), acc_add_prod(&a, v, g), acc_add(&a, g),
        acc_store(&grad[goff + q], &a), acc_store(&grad[boff + f], &a))
CONV_DW(conv_dw_fast, float, float s = 0.0f, s = s + v * g, s = s + g, grad[goff + q] = s, grad[boff + f] = s)
/* the fast mixed step: the float sum held exactly in the replica's
 * accumulator (mixed.cl's mixed_grad_fast alike: the cross-replica sum
 * stays exact) */
CONV_DW(conv_dw_mixed_fast, acc_t, float s = 0.0f; acc_t a, s = s + v * g, s = s + g,
        { acc_init(&a); acc_add(&a, s); acc_store(&grad[goff + q], &a); },
        { acc_init(&a); acc_add(&a, s); acc_store(&grad[boff + f], &a); })

/* ---- elementwise ------------------------------------------------------------- */

/* act = relu(pre) (relu) or pre. */
__kernel void act_cells(__global const float *pre, __global float *act, uint cells, uint relu)
{
    uint i = get_global_id(0);
    if (i >= cells) return;
    act[i] = relu && !(pre[i] > 0.0f) ? 0.0f : pre[i];
}

/* dst = a (+ b): Flatten's copy (b NULL), Add's sum, rounded to ct (the
 * mixed step's compute dtype; a copy of values in it stays what it is). */
__kernel void add_cells(__global const float *a, __global const float *b, uint cells, uint ct, __global float *dst)
{
    uint i = get_global_id(0);
    if (i >= cells) return;
    dst[i] = half_round(b ? a[i] + b[i] : a[i], ct);
}

/* d1 += dz, then d2 += dz (either NULL: none): one float addition per path. */
__kernel void add_grad(__global const float *dz, uint cells, __global float *d1, __global float *d2)
{
    uint i = get_global_id(0);
    if (i >= cells) return;
    if (d1) d1[i] = d1[i] + dz[i];
    if (d2) d2[i] = d2[i] + dz[i];
}

/* ---- pooling ------------------------------------------------------------------ */

/* 2x2, stride 2: the window's first maximum in row-major order (TensorFlow's
 * tie rule); win = its offset within the example's input. */
__kernel void maxpool(__global const float *x, uint n, uint iw, uint ic, uint oh, uint ow, uint in,
                      __global float *out, __global uint *win)
{
    uint o = get_global_id(0), per = oh * ow * ic;
    if (o >= n * per) return;
    uint e = o / per, c = o % ic, ox = (o / ic) % ow, oy = o / ic / ow % oh;
    __global const float *xe = x + (size_t)e * in;
    uint best = ((2 * oy) * iw + 2 * ox) * ic + c;
    for (uint t = 1; t < 4; t++) {
        uint i = ((2 * oy + t / 2) * iw + 2 * ox + t % 2) * ic + c;
        if (POOL_BEATS(xe[i], xe[best])) best = i;
    }
    out[o] = xe[best];
    win[o] = best;
}

/* dx at each output's winner += dz (the windows do not overlap). */
__kernel void maxpool_grad(__global const float *dz, __global const uint *win, uint n, uint out, uint in,
                           __global float *dx)
{
    uint o = get_global_id(0);
    if (o >= n * out) return;
    size_t at = (size_t)(o / out) * in + win[o];
    dx[at] = dx[at] + dz[o];
}

/* out[e c] = round(exact sum over the h w pixels / (h w)), both numerics;
 * ct (the mixed step's compute dtype, 0: float32) the rounding's format. */
__kernel void gap(__global const float *x, uint n, uint hw, uint c, uint ct, __global float *out)
{
    uint o = get_global_id(0);
    acc_t a;
    if (o >= n * c) return;
    acc_init(&a);
    for (uint p = 0; p < hw; p++) acc_add(&a, x[((size_t)(o / c) * hw + p) * c + o % c]);
    out[o] = acc_round_div_dtype(&a, hw, ct);
}

__kernel void gap_grad(__global const float *dz, uint n, uint hw, uint c, uint ct, __global float *dx)
{
    uint i = get_global_id(0);
    if (i >= n * hw * c) return;
    dx[i] = dx[i] + half_round(dz[(i / (hw * c)) * c + i % c] / (float)hw, ct);
}

/* ---- Dropout: core/rng.c's Philox4x32-10 ----------------------------------------- */

uint philox_word(uint2 key, uint4 ctr, uint w)
{
    for (int r = 0; r < 10; r++) {
        if (r > 0) { key.x += 0x9E3779B9u; key.y += 0xBB67AE85u; }
        uint hi0 = mul_hi(0xD2511F53u, ctr.x), lo0 = 0xD2511F53u * ctr.x;
        uint hi1 = mul_hi(0xCD9E8D57u, ctr.z), lo1 = 0xCD9E8D57u * ctr.z;
        ctr = (uint4)(hi1 ^ ctr.y ^ key.x, lo1, hi0 ^ ctr.w ^ key.y, lo0);
    }
    return w == 0 ? ctr.x : w == 1 ? ctr.y : w == 2 ? ctr.z : ctr.w;
}

/* dr_rng_uniform(seed, stream, index): 24 bits, exact in a float. */
float rng_uniform(ulong seed, ulong stream, ulong index)
{
    ulong block = index / 4;
    uint u = philox_word((uint2)((uint)seed, (uint)(seed >> 32)),
                         (uint4)((uint)block, (uint)(block >> 32), (uint)stream, (uint)(stream >> 32)), (uint)(index % 4));
    return (float)(u >> 8) * 0x1p-24f;
}

/* Unit u of row r kept when the draw keyed by (ids[r] units + u) >= rate,
 * or with a masks file (from_file) when its byte says so: out = x scale,
 * mult = scale; else 0. keep_all: inference or rate 0. The mixed step: scale
 * is RN_c(1/(1-rate)) (the host's) and out RN_c(x scale), ct its dtype. */
__kernel void dropout(__global const float *x, uint rows, uint units, uint seed_lo, uint seed_hi, uint stream_lo,
                      uint stream_hi, __global const uint *ids, float rate, float scale, uint keep_all,
                      __global const uchar *file, uint from_file, uint ct, __global float *mult, __global float *out)
{
    uint i = get_global_id(0);
    if (i >= rows * units) return;
    if (keep_all) { out[i] = x[i]; mult[i] = 1.0f; return; }
    ulong key = (ulong)ids[i / units] * units + i % units;
    bool keep = from_file ? file[i] != 0
                          : rng_uniform((ulong)seed_hi << 32 | seed_lo, (ulong)stream_hi << 32 | stream_lo, key) >= rate;
    mult[i] = keep ? scale : 0.0f;
    out[i] = keep ? half_round(x[i] * scale, ct) : 0.0f;
}

__kernel void dropout_grad(__global const float *dz, __global const float *mult, uint cells, uint ct,
                           __global float *dx)
{
    uint i = get_global_id(0);
    if (i >= cells) return;
    dx[i] = dx[i] + (mult[i] != 0.0f ? half_round(dz[i] * mult[i], ct) : 0.0f);
}

/* ---- BatchNormalization ---------------------------------------------------------- */

/* chan = mean, inv = 1 / sqrt(var + eps), a = inv gamma (oc each). */
__kernel void bn_chan(__global const float *mean, uint moff, __global const float *var, uint voff,
                      __global const float *gamma, uint goff, uint oc, __global float *chan)
{
    uint c = get_global_id(0);
    if (c >= oc) return;
    float inv = 1.0f / sqrt(var[voff + c] + BN_EPSILON);
    chan[c] = mean[moff + c];
    chan[oc + c] = inv;
    chan[2 * oc + c] = inv * gamma[goff + c];
}

/* pre = x a + (beta - mean a), rounded to ct (the mixed step's training
 * pass: float32 BN cast to the compute dtype; 0 else); xhat = (x - mean)
 * inv (training); act. */
__kernel void bn_apply(__global const float *x, __global const float *beta, uint boff, __global const float *chan,
                       uint cells, uint oc, uint training, uint relu, uint ct, __global float *pre,
                       __global float *act, __global float *xhat)
{
    uint i = get_global_id(0);
    if (i >= cells) return;
    uint c = i % oc;
    float mu = chan[c], inv = chan[oc + c], a = chan[2 * oc + c];
    float shift = beta[boff + c] - mu * a, p = half_round(x[i] * a + shift, ct);
    pre[i] = p;
    if (training) xhat[i] = (x[i] - mu) * inv;
    act[i] = relu && !(p > 0.0f) ? 0.0f : p;
}

/* The pixels p of n examples' h x w maps, rows [r0, r1) x columns [r2, r3)
 * (the whole map, or a core's tile), in order. */
#define RECT_ARGS uint n, uint h, uint w, uint r0, uint r1, uint r2, uint r3
#define FOR_RECT(p)                                                                                \
    for (uint e_ = 0; e_ < n; e_++)                                                                \
        for (uint y_ = r0; y_ < r1; y_++)                                                          \
            for (size_t p = ((size_t)e_ * h + y_) * w + r2, p_end = p - r2 + r3; p < p_end; p++)

/* Per channel c (one work-item each) over the rectangle's pixels, exactly:
 * kind 0: red[c] = sum x, red[oc + c] = sum x^2; kind 1: red[oc + c] = sum
 * (x - mean[c])^2, each square rounded (the two-pass variance). */
__kernel void bn_sums(__global const float *x, RECT_ARGS, uint oc, uint kind, __global const float *mean,
                      __global acc_t *red)
{
    uint c = get_global_id(0);
    acc_t a1, a2;
    if (c >= oc) return;
    acc_init(&a1);
    acc_init(&a2);
    FOR_RECT(p) {
        float v = x[p * oc + c];
        if (kind == 1) {
            float t = v - mean[c];
            acc_add(&a2, t * t);
        } else {
            acc_add(&a1, v);
            acc_add_prod(&a2, v, v);
        }
    }
    acc_store(&red[c], &a1);
    acc_store(&red[oc + c], &a2);
}

/* The backward sums: red[c] = sum dy, red[oc + c] = sum dy xhat, exactly;
 * also beta's and gamma's gradient (exact: the sums; fast: rounded). */
#define BN_GRAD_SUMS(NAME, T, STORE)                                                                \
__kernel void NAME(__global const float *dy, __global const float *xhat, RECT_ARGS, uint oc,        \
                   __global acc_t *red, __global T *grad, uint gamma_off, uint beta_off)           \
{                                                                                                  \
    uint c = get_global_id(0);                                                                     \
    acc_t a1, a2;                                                                                  \
    if (c >= oc) return;                                                                           \
    acc_init(&a1);                                                                                 \
    acc_init(&a2);                                                                                 \
    FOR_RECT(p) {                                                                                  \
        acc_add(&a1, dy[p * oc + c]);                                                              \
        acc_add_prod(&a2, dy[p * oc + c], xhat[p * oc + c]);                                       \
    }                                                                                              \
    acc_store(&red[c], &a1);                                                                       \
    acc_store(&red[oc + c], &a2);                                                                  \
    STORE;                                                                                         \
}
BN_GRAD_SUMS(bn_grad_sums_exact, acc_t, { grad[gamma_off + c] = red[oc + c]; grad[beta_off + c] = red[c]; })
BN_GRAD_SUMS(bn_grad_sums_fast, float, {                               /* into the zeroed floats: -0 becomes +0 */ \
    grad[gamma_off + c] = grad[gamma_off + c] + acc_round(&a2);                                    \
    grad[beta_off + c] = grad[beta_off + c] + acc_round(&a1); })

/* dx += a ((dy - mean_dy) - xhat mean_dyxhat), the term rounded to ct
 * (the mixed step's dtype, 0: float32); stat = mean_dy, then mean_dyxhat (oc each). */
__kernel void bn_grad(__global const float *dy, __global const float *xhat, __global const float *chan,
                      __global const float *stat, uint cells, uint oc, uint ct, __global float *dx)
{
    uint i = get_global_id(0);
    if (i >= cells) return;
    uint c = i % oc;
    float t = (dy[i] - stat[c]) - xhat[i] * stat[oc + c];
    dx[i] = dx[i] + half_round(chan[2 * oc + c] * t, ct);
}
