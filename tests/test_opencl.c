/* distref — tests of the OpenCL device code against the host build.
 *
 *   elem_on_device     dr_expf and dr_logf compiled from include/distref/
 *                      elem.h as OpenCL C, run on the device over 2^22+
 *                      inputs (a stride through every float bit pattern,
 *                      plus the specials, subnormals and the known worst
 *                      cases of tests/test_elem.c): every result must have
 *                      the host build's bits. test_elem.c proves the host's
 *                      ULP bounds against MPFR; bit equality carries them
 *                      over to the device.
 *   acc_on_device      devices/opencl/cl/acc.cl's accumulator: exact sums of
 *                      products with cancellation, subnormals and specials,
 *                      rounded once and divided by d on the device, against
 *                      core/acc.c (dr_acc_add_prod, dr_acc_round_div), and
 *                      the accumulator written in the host's dr_acc layout.
 *   half_on_device     devices/opencl/cl/half.cl against core/half.c: float16
 *                      and bfloat16 rounding of every 1021st float bit
 *                      pattern, and exact sums of products (ties, edges,
 *                      tiny remainders) divided by d, rounded to odd and
 *                      once to float32, float16 and bfloat16 on the device.
 *   exact_capabilities what exact numerics refuse, naming it.
 *   device_oom         a buffer beyond the device's memory is DR_EDEVICE_OOM.
 *   subdevice_places   --opencl_mapping=subdevices with 2 replicas: two
 *                      sub-devices, a queue each, a buffer counted against
 *                      its own replica's place; a place beyond the
 *                      replicas is refused.
 *   device_list_places queues over --opencl_device=0,1: replica r on device
 *                      r (PoCL is asked for two devices by main(), unless
 *                      POCL_DEVICES is set); skipped with the reason where
 *                      the platform has one device.
 *   mapping_errors     a bad mapping name, a repeated or malformed device
 *                      list, shared with a list: usage errors naming them.
 *   pool_tie_first     cl/graph.cl's 2x2 max pooling sends a tie's gradient
 *                      to the window's first maximum (row-major), through
 *                      the backend's layer ops (fault cl_pool_last_tie).
 *
 * Every test is skipped, with the reason printed, where no OpenCL device is
 * present.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/opencl/opencl_backend.h"
#include "distref/opencl.h"
#include "distref/elem.h"
#include "distref/exact.h"

typedef struct cl_env {
    cl_platform_id p;
    cl_device_id d;
    dr_cl_caps caps;
    cl_context ctx;
    cl_command_queue q;
} cl_env;

/* false (and a printed reason) when there is no device */
static bool env_open(cl_env *e)
{
    dr_err err;
    cl_int rc;
    memset(e, 0, sizeof *e);
    if (dr_cl_pick(-1, -1, &e->p, &e->d, &err) != DR_OK) {
        printf("skipped: %s\n", err.msg);
        return false;
    }
    dr_cl_caps_of(e->p, e->d, &e->caps);
    e->ctx = clCreateContext(NULL, 1, &e->d, NULL, NULL, &rc);
    assert_non_null(e->ctx);
    e->q = clCreateCommandQueue(e->ctx, e->d, 0, &rc);
    assert_non_null(e->q);
    return true;
}

static void env_close(cl_env *e)
{
    clReleaseCommandQueue(e->q);
    clReleaseContext(e->ctx);
}

static cl_program build(cl_env *e, const char *src)
{
    cl_program prog;
    dr_err err;
    int rc = dr_cl_build_program(e->ctx, e->d, &e->caps, src, &prog, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, DR_OK);
    return prog;
}

static cl_mem buffer(cl_env *e, size_t bytes, const void *init)
{
    cl_int rc;
    cl_mem m = clCreateBuffer(e->ctx, CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                              (void *)init, &rc);
    assert_int_equal(rc, CL_SUCCESS);
    return m;
}

static void run1(cl_env *e, cl_kernel k, size_t n)
{
    assert_int_equal(clEnqueueNDRangeKernel(e->q, k, 1, NULL, &n, NULL, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(clFinish(e->q), CL_SUCCESS);
}

/* ---- dr_expf / dr_logf ------------------------------------------------------ */

static const char k_elem_src[] =
    "__kernel void elem(__global const uint *x, __global uint *ex, __global uint *lg, uint n)\n"
    "{ uint i = get_global_id(0); if (i < n) { float v = as_float(x[i]);\n"
    "  ex[i] = as_uint(dr_expf(v)); lg[i] = as_uint(dr_logf(v)); } }\n";

static void elem_on_device(void **state)
{
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x00000001u, 0x807fffffu,
        0x3f800000u, 0xbf800000u, 0x42b17218u, 0x42b17217u, 0xc2cff1b5u, 0xc2cff1b4u, 0xc1cfe8b4u /* -0x1.9fd168p+4 */,
        0x3f30d37fu /* 0x1.61a6fep-1 */, 0x7f7fffffu, 0x00800000u, 0x3f7fffffu, 0x3f800001u,
    };
    const uint32_t stride = 1021, n = (uint32_t)(0x100000000ull / stride) + sizeof specials / sizeof specials[0];
    uint32_t *x = malloc(n * sizeof *x), *ex = malloc(n * sizeof *ex), *lg = malloc(n * sizeof *lg);
    uint64_t bad_e = 0, bad_l = 0;
    cl_env e;
    (void)state;
    if (!env_open(&e)) { free(x); free(ex); free(lg); skip(); }
    assert_non_null(x); assert_non_null(ex); assert_non_null(lg);
    {
        uint32_t i = 0;
        for (uint64_t u = 0; u < 0x100000000ull && i < n; u += stride) x[i++] = (uint32_t)u;
        for (size_t k = 0; k < sizeof specials / sizeof specials[0] && i < n; k++) x[i++] = specials[k];
        assert_int_equal(i, n);
    }
    {
        cl_program prog = build(&e, k_elem_src);
        cl_int rc;
        cl_kernel k = clCreateKernel(prog, "elem", &rc);
        cl_mem bx = buffer(&e, n * sizeof *x, x), be = buffer(&e, n * sizeof *x, NULL), bl = buffer(&e, n * sizeof *x, NULL);
        cl_uint nn = n;
        assert_non_null(k);
        clSetKernelArg(k, 0, sizeof bx, &bx); clSetKernelArg(k, 1, sizeof be, &be);
        clSetKernelArg(k, 2, sizeof bl, &bl); clSetKernelArg(k, 3, sizeof nn, &nn);
        run1(&e, k, n);
        assert_int_equal(clEnqueueReadBuffer(e.q, be, CL_TRUE, 0, n * sizeof *x, ex, 0, NULL, NULL), CL_SUCCESS);
        assert_int_equal(clEnqueueReadBuffer(e.q, bl, CL_TRUE, 0, n * sizeof *x, lg, 0, NULL, NULL), CL_SUCCESS);
        clReleaseMemObject(bx); clReleaseMemObject(be); clReleaseMemObject(bl);
        clReleaseKernel(k); clReleaseProgram(prog);
    }
    for (uint32_t i = 0; i < n; i++) {
        float v = dr_elem_from_bits(x[i]);
        uint32_t he = dr_elem_bits(dr_expf(v)), hl = dr_elem_bits(dr_logf(v));
        if (he != ex[i] && bad_e++ < 5) printf("dr_expf(%a): host %08x, device %08x\n", (double)v, he, ex[i]);
        if (hl != lg[i] && bad_l++ < 5) printf("dr_logf(%a): host %08x, device %08x\n", (double)v, hl, lg[i]);
    }
    printf("elem on %s: %u inputs, dr_expf %llu and dr_logf %llu differ from the host\n", e.caps.name, n,
           (unsigned long long)bad_e, (unsigned long long)bad_l);
    assert_int_equal(bad_e, 0);
    assert_int_equal(bad_l, 0);
    free(x); free(ex); free(lg);
    env_close(&e);
}

/* ---- the accumulator ----------------------------------------------------------- */

static const char k_acc_src[] =
    "__kernel void dots(__global const float *x, __global const float *y, uint len, uint d,\n"
    "                   __global acc_t *out, __global float *rounded)\n"
    "{ uint t = get_global_id(0); acc_t a; acc_init(&a);\n"
    "  for (uint k = 0; k < len; k++) acc_add_prod(&a, x[t * len + k], y[t * len + k]);\n"
    "  acc_add(&a, x[t * len]);\n"
    "  { acc_t c = a; rounded[t] = acc_round_div(&c, d + t); }\n"
    "  acc_store(&out[t], &a); }\n";

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float pick(uint64_t *r)
{
    uint64_t u = splitmix(r);
    switch (u % 8) {
    case 0: return dr_elem_from_bits((uint32_t)(u >> 32) & 0x807fffffu);               /* subnormal or 0 */
    case 1: return (u >> 40) & 1 ? 1e30f : -1e30f;                                     /* cancels */
    case 2: return dr_elem_from_bits((uint32_t)(u >> 32));                             /* any bits, specials too */
    default: return (float)((int64_t)(u >> 11) - (1ll << 52)) * 0x1p-50f;
    }
}

static void acc_on_device(void **state)
{
    enum { T = 512, LEN = 37 };
    float *x = malloc(T * LEN * sizeof *x), *y = malloc(T * LEN * sizeof *y), rounded[T];
    dr_acc *out = malloc(T * sizeof *out);
    uint64_t rng = 2024;
    cl_env e;
    int bad = 0;
    (void)state;
    if (!env_open(&e)) { free(x); free(y); free(out); skip(); }
    assert_non_null(x); assert_non_null(y); assert_non_null(out);
    for (size_t i = 0; i < (size_t)T * LEN; i++) { x[i] = pick(&rng); y[i] = pick(&rng); }
    {
        cl_program prog = build(&e, k_acc_src);
        cl_int rc;
        cl_kernel k = clCreateKernel(prog, "dots", &rc);
        cl_mem bx = buffer(&e, sizeof(float) * T * LEN, x), by = buffer(&e, sizeof(float) * T * LEN, y);
        cl_mem bo = buffer(&e, sizeof(dr_acc) * T, NULL), br = buffer(&e, sizeof(float) * T, NULL);
        cl_uint len = LEN, d = 1;
        assert_non_null(k);
        clSetKernelArg(k, 0, sizeof bx, &bx); clSetKernelArg(k, 1, sizeof by, &by);
        clSetKernelArg(k, 2, sizeof len, &len); clSetKernelArg(k, 3, sizeof d, &d);
        clSetKernelArg(k, 4, sizeof bo, &bo); clSetKernelArg(k, 5, sizeof br, &br);
        run1(&e, k, T);
        assert_int_equal(clEnqueueReadBuffer(e.q, bo, CL_TRUE, 0, sizeof(dr_acc) * T, out, 0, NULL, NULL), CL_SUCCESS);
        assert_int_equal(clEnqueueReadBuffer(e.q, br, CL_TRUE, 0, sizeof(float) * T, rounded, 0, NULL, NULL), CL_SUCCESS);
        clReleaseMemObject(bx); clReleaseMemObject(by); clReleaseMemObject(bo); clReleaseMemObject(br);
        clReleaseKernel(k); clReleaseProgram(prog);
    }
    for (int t = 0; t < T; t++) {
        dr_acc h;
        float hr;
        dr_acc_init(&h);
        for (int k = 0; k < LEN; k++) dr_acc_add_prod(&h, x[t * LEN + k], y[t * LEN + k]);
        dr_acc_add(&h, x[t * LEN]);
        hr = dr_acc_round_div(&h, 1u + (uint32_t)t);
        if (!dr_acc_equal(&h, &out[t]) || dr_elem_bits(hr) != dr_elem_bits(rounded[t])) {
            if (bad++ < 5) printf("sum %d: host %a, device %a\n", t, (double)hr, (double)rounded[t]);
        }
        /* the device's layout is the host's: rounding it on the host agrees */
        if (dr_elem_bits(dr_acc_round_div(&out[t], 1u + (uint32_t)t)) != dr_elem_bits(hr)) bad++;
    }
    assert_int_equal(bad, 0);
    free(x); free(y); free(out);
    env_close(&e);
}

/* ---- float16 / bfloat16 (cl/half.cl) ------------------------------------------- */

static const char k_half_src[] =
    "__kernel void rnd(__global const uint *x, __global uint *h, __global uint *b, uint n)\n"
    "{ uint i = get_global_id(0); if (i < n) { float v = as_float(x[i]);\n"
    "  h[i] = as_uint(half_round(v, 1u)); b[i] = as_uint(half_round(v, 2u)); } }\n"
    "__kernel void sums(__global const float *x, __global const float *y, uint len, __global const uint *d,\n"
    "                   __global uint *out)\n"
    "{ uint t = get_global_id(0); acc_t a; acc_init(&a);\n"
    "  for (uint k = 0; k < len; k++) acc_add_prod(&a, x[t * len + k], y[t * len + k]);\n"
    "  out[4 * t] = as_uint(acc_round_div_odd(&a, d[t]));\n"
    "  for (uint c = 0; c < 3; c++) out[4 * t + 1 + c] = as_uint(acc_round_div_dtype(&a, d[t], c)); }\n";

/* A term for half_on_device's sums: the accumulator test's picks, and values
 * near float16 / bfloat16 ties and their overflow and underflow edges plus a
 * tiny remainder, where rounding through float32 first would double-round. */
static float pick_half(uint64_t *r)
{
    static const float edge[] = { 0x1.002p0f, 0x1.01p0f, 65520.0f, 0x1.ffep15f, 0x1p-25f, 0x1.8p-24f, 0x1.ffp127f,
                                  0x1p-133f, 0x1.8p-134f, 1e30f, 0x1p-149f, 1.0f };
    uint64_t u = splitmix(r);
    switch (u % 4) {
    case 0: return edge[(u >> 8) % (sizeof edge / sizeof *edge)] * ((u >> 20) & 1 ? -1.0f : 1.0f);
    case 1: return dr_elem_from_bits((uint32_t)(u >> 32) & 0x807fffffu) * 0x1p-60f;   /* far below: a sticky bit */
    default: return pick(r);
    }
}

/* cl/half.cl against core/half.c: the rounding of every 1021st float bit
 * pattern to float16 and bfloat16, and exact sums of products divided by d
 * rounded to odd and once to float32, float16 and bfloat16. */
static void half_on_device(void **state)
{
    enum { T = 4096, LEN = 3 };
    const uint32_t stride = 1021, n = (uint32_t)(0x100000000ull / stride);
    uint32_t *x = malloc(n * 4), *h = malloc(n * 4), *bf = malloc(n * 4), d[T], out[4 * T];
    float *sx = malloc(T * LEN * 4), *sy = malloc(T * LEN * 4);
    uint64_t rng = 30, bad = 0;
    cl_env e;
    (void)state;
    if (!env_open(&e)) { free(x); free(h); free(bf); free(sx); free(sy); skip(); }
    assert_true(x && h && bf && sx && sy);
    for (uint32_t i = 0; i < n; i++) x[i] = i * stride;
    for (size_t i = 0; i < (size_t)T * LEN; i++) {
        sx[i] = pick_half(&rng);
        sy[i] = i % LEN ? pick_half(&rng) : 1.0f;
    }
    for (uint32_t t = 0; t < T; t++) d[t] = t % 5 == 0 ? 1u : t % 5 == 1 ? 64u : t % 5 == 2 ? 3u : 1u + (uint32_t)(splitmix(&rng) % 100000u);
    {
        cl_program prog = build(&e, k_half_src);
        cl_int rc;
        cl_kernel kr = clCreateKernel(prog, "rnd", &rc), ks = clCreateKernel(prog, "sums", &rc);
        cl_mem bx = buffer(&e, n * 4, x), bh = buffer(&e, n * 4, NULL), bb = buffer(&e, n * 4, NULL);
        cl_mem b1 = buffer(&e, T * LEN * 4, sx), b2 = buffer(&e, T * LEN * 4, sy), bd = buffer(&e, sizeof d, d);
        cl_mem bo = buffer(&e, sizeof out, NULL);
        cl_uint nn = n, len = LEN;
        assert_true(kr && ks);
        clSetKernelArg(kr, 0, sizeof bx, &bx); clSetKernelArg(kr, 1, sizeof bh, &bh);
        clSetKernelArg(kr, 2, sizeof bb, &bb); clSetKernelArg(kr, 3, sizeof nn, &nn);
        clSetKernelArg(ks, 0, sizeof b1, &b1); clSetKernelArg(ks, 1, sizeof b2, &b2);
        clSetKernelArg(ks, 2, sizeof len, &len); clSetKernelArg(ks, 3, sizeof bd, &bd);
        clSetKernelArg(ks, 4, sizeof bo, &bo);
        run1(&e, kr, n);
        run1(&e, ks, T);
        assert_int_equal(clEnqueueReadBuffer(e.q, bh, CL_TRUE, 0, n * 4, h, 0, NULL, NULL), CL_SUCCESS);
        assert_int_equal(clEnqueueReadBuffer(e.q, bb, CL_TRUE, 0, n * 4, bf, 0, NULL, NULL), CL_SUCCESS);
        assert_int_equal(clEnqueueReadBuffer(e.q, bo, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL), CL_SUCCESS);
        clReleaseMemObject(bx); clReleaseMemObject(bh); clReleaseMemObject(bb); clReleaseMemObject(b1);
        clReleaseMemObject(b2); clReleaseMemObject(bd); clReleaseMemObject(bo);
        clReleaseKernel(kr); clReleaseKernel(ks); clReleaseProgram(prog);
    }
    for (uint32_t i = 0; i < n; i++) {
        float v = dr_elem_from_bits(x[i]);
        if ((dr_elem_bits(dr_round_to_dtype(v, DR_DTYPE_F16)) != h[i] ||
             dr_elem_bits(dr_round_to_dtype(v, DR_DTYPE_BF16)) != bf[i]) && bad++ < 5)
            printf("round %08x: device %08x %08x\n", x[i], h[i], bf[i]);
    }
    for (uint32_t t = 0; t < T; t++) {
        dr_acc a;
        uint32_t want[4];
        dr_acc_init(&a);
        for (int k = 0; k < LEN; k++) dr_acc_add_prod(&a, sx[t * LEN + k], sy[t * LEN + k]);
        want[0] = dr_elem_bits(dr_acc_round_div_odd(&a, d[t]));
        for (int c = 0; c < 3; c++) want[1 + c] = dr_elem_bits(dr_acc_round_div_dtype(&a, d[t], (dr_dtype)c));
        if (memcmp(want, &out[4 * t], sizeof want) && bad++ < 10)
            printf("sum %u / %u: host %08x %08x %08x %08x, device %08x %08x %08x %08x\n", t, d[t], want[0], want[1],
                   want[2], want[3], out[4 * t], out[4 * t + 1], out[4 * t + 2], out[4 * t + 3]);
    }
    printf("half on %s: %u roundings, %d sums; %llu differ from the host\n", e.caps.name, n, T, (unsigned long long)bad);
    assert_int_equal(bad, 0);
    free(x); free(h); free(bf); free(sx); free(sy);
    env_close(&e);
}

/* ---- what exact numerics refuse ----------------------------------------------- */

static void exact_capabilities(void **state)
{
    dr_cl_caps c;
    (void)state;
    memset(&c, 0, sizeof c);
    c.cr_divide_sqrt = c.denorm = c.full_profile = true;
    c.max_wg = 1024;
    assert_null(dr_cl_exact_missing(&c));
    c.cr_divide_sqrt = false;
    assert_non_null(strstr(dr_cl_exact_missing(&c), "CORRECTLY_ROUNDED_DIVIDE_SQRT"));
    c.cr_divide_sqrt = true; c.denorm = false;
    assert_non_null(strstr(dr_cl_exact_missing(&c), "DENORM"));
    c.denorm = true; c.full_profile = false;
    assert_non_null(strstr(dr_cl_exact_missing(&c), "64-bit integers"));
}

static void device_oom(void **state)
{
    dr_model_spec m = { .nlayers = 2, .layer = { { .in = 4, .out = 3, .act = DR_ACT_RELU }, { .in = 3, .out = 2, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_XENT_LOGITS, .l2 = 0.0f };
    dr_optimizer o;
    dr_backend *b;
    dr_buffer *buf = NULL;
    dr_err err;
    cl_env e;
    const dr_backend_ops *ops = dr_backend_opencl();
    (void)state;
    if (!env_open(&e)) skip();
    env_close(&e);
    memset(&o, 0, sizeof o);
    o.kind = DR_OPT_SGD;
    o.lr = 0.1f;
    dr_backend_params bp = { .model = &m, .optimizer = &o, .numerics = DR_NUMERICS_EXACT, .platform = -1 };
    assert_int_equal(ops->open(&bp, &b, &err), DR_OK);
    assert_int_equal(ops->alloc(b, (size_t)1 << 46, &buf, &err), DR_EDEVICE_OOM);
    assert_null(buf);
    assert_non_null(strstr(err.msg, "out of memory"));
    assert_int_equal(ops->alloc(b, 64, &buf, &err), DR_OK);
    ops->release(b, buf);
    ops->close(b);
}

/* ---- replica mappings ------------------------------------------------------------ */

static const dr_model_spec k_small = { .nlayers = 2, .layer = { { .in = 4, .out = 3, .act = DR_ACT_RELU }, { .in = 3, .out = 2, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_XENT_LOGITS, .l2 = 0.0f };

static dr_optimizer sgd(void)
{
    dr_optimizer o;
    memset(&o, 0, sizeof o);
    o.kind = DR_OPT_SGD;
    o.lr = 0.1f;
    return o;
}

static void subdevice_places(void **state)
{
    dr_optimizer o = sgd();
    dr_backend_params sel = { .model = &k_small, .optimizer = &o, .numerics = DR_NUMERICS_EXACT, .places = 2,
                              .platform = -1, .devices = "", .mapping = "subdevices" };
    const dr_backend_ops *ops = dr_backend_opencl();
    dr_backend_place p0, p1;
    dr_backend *b;
    dr_buffer *buf = NULL;
    dr_err err;
    int rc;
    (void)state;
    rc = ops->open(&sel, &b, &err);
    if (rc == DR_EUNSUPPORTED) { printf("skipped: %s\n", err.msg); skip(); }
    if (rc) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, DR_OK);
    assert_string_equal(ops->mapping_name(b), "subdevices");
    assert_int_equal(ops->place_of(b, 0, &p0, &err), DR_OK);
    assert_int_equal(ops->place_of(b, 1, &p1, &err), DR_OK);
    assert_int_equal(p0.subdevice, 0);
    assert_int_equal(p1.subdevice, 1);
    assert_int_not_equal(p0.queue, p1.queue);
    assert_true(p0.capacity > 0);
    assert_int_equal(ops->alloc_on(b, 1, 4096, &buf, &err), DR_OK);
    assert_int_equal(ops->place_of(b, 0, &p0, &err), DR_OK);
    assert_int_equal(ops->place_of(b, 1, &p1, &err), DR_OK);
    assert_int_equal(p1.bytes - p0.bytes, 4096);   /* counted against replica 1's place only */
    ops->release(b, buf);
    assert_int_equal(ops->place_of(b, 1, &p1, &err), DR_OK);
    assert_int_equal(p1.bytes, p0.bytes);
    assert_int_equal(ops->alloc_on(b, 2, 64, &buf, &err), DR_EUSAGE);
    assert_int_equal(ops->place_of(b, 2, &p1, &err), DR_EUSAGE);
    ops->close(b);
}

static void device_list_places(void **state)
{
    dr_optimizer o = sgd();
    dr_backend_params sel = { .model = &k_small, .optimizer = &o, .numerics = DR_NUMERICS_EXACT, .places = 2,
                              .platform = -1, .devices = "0,1", .mapping = "auto" };
    const dr_backend_ops *ops = dr_backend_opencl();
    dr_backend_place p0, p1;
    dr_backend *b;
    dr_err err;
    int rc;
    (void)state;
    rc = ops->open(&sel, &b, &err);
    if (rc != DR_OK && strstr(err.msg, "has 1 device")) { printf("skipped: %s\n", err.msg); skip(); }
    if (rc == DR_EUNSUPPORTED) { printf("skipped: %s\n", err.msg); skip(); }
    if (rc) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, DR_OK);
    assert_string_equal(ops->mapping_name(b), "queues");
    assert_int_equal(ops->place_of(b, 0, &p0, &err), DR_OK);
    assert_int_equal(ops->place_of(b, 1, &p1, &err), DR_OK);
    assert_int_equal(p0.device_index, 0);
    assert_int_equal(p1.device_index, 1);
    assert_int_equal(p0.subdevice, -1);
    assert_int_not_equal(p0.queue, p1.queue);
    ops->close(b);
}

static void mapping_errors(void **state)
{
    static const struct { const char *devices, *mapping, *phrase; } bad[] = {
        { "", "bogus", "--opencl_mapping=bogus: expected shared, queues, subdevices or auto" },
        { "0,0", "queues", "device 0 listed twice" },
        { "0,", "queues", "expected a device index or a list like 0,1" },
        { "-1", "queues", "expected a device index or a list like 0,1" },
        { "0,1", "shared", "" },   /* shared runs on one device (or device 1 is absent): a usage error either way */
    };
    cl_env e;
    (void)state;
    if (!env_open(&e)) skip();
    env_close(&e);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dr_backend_params sel = { .numerics = DR_NUMERICS_FAST, .places = 2, .platform = -1,
                                  .devices = bad[i].devices, .mapping = bad[i].mapping };
        dr_err err;
        memset(&err, 0, sizeof err);
        assert_int_equal(dr_backend_opencl()->available(&sel, &err), DR_EUSAGE);
        if (!strstr(err.msg, bad[i].phrase)) fprintf(stderr, "%s\n", err.msg);
        assert_non_null(strstr(err.msg, bad[i].phrase));
    }
}

/* ---- the kernel cache (issue 27 #6) ---------------------------------------- */

/* Conv2D 1x1 with w = 0, b = 0 (all four outputs tie at 0) -> MaxPooling2D
 * -> Flatten -> Dense(2): the conv's kernel gradient is x at the pool's
 * winner times the pooled gradient g, its bias gradient g. With x = 1, 2,
 * 3, 4 row-major, the first maximum gives dW = db, the last 4 db. (The
 * training bits cannot show a tie rule: docs/MODELS.md, "Checks".) */
static void pool_tie_first(void **state)
{
    dr_model_spec m = { .nlayers = 4, .layer = { { .kind = DR_LAYER_CONV2D, .filters = 1, .ksize = 1, .stride = 1 },
                                                 { .kind = DR_LAYER_MAX_POOL2D }, { .kind = DR_LAYER_FLATTEN },
                                                 { .kind = DR_LAYER_DENSE, .out = 2 } },
                        .loss = DR_LOSS_XENT_LOGITS, .in_h = 2, .in_w = 2, .in_c = 1 };
    dr_optimizer o = sgd();
    dr_backend_params sel = { .model = &m, .optimizer = &o, .numerics = DR_NUMERICS_EXACT, .places = 1,
                              .platform = -1, .devices = "", .mapping = "" };
    const dr_backend_ops *ops = dr_backend_opencl();
    const float params[6] = { 0.0f, 0.0f, 1.0f, -1.0f, 0.0f, 0.0f }, x[4] = { 1.0f, 2.0f, 3.0f, 4.0f };
    const uint8_t label = 0;
    const uint32_t id = 0;
    dr_graph_rt rt = { true, 1, 1, &id, 1, NULL, 0, DR_DTYPE_F32, 1.0f, 1, false };
    dr_replica_bufs rb;
    dr_acc grad[6];
    dr_backend *b;
    dr_err err;
    int rc;
    (void)state;
    assert_int_equal(dr_model_derive(&m, &err), DR_OK);
    assert_int_equal(dr_model_num_params(&m), 6);   /* conv w, b; dense 1 x 2, 2 */
    rc = ops->open(&sel, &b, &err);
    if (rc == DR_EUNSUPPORTED) { printf("skipped: %s\n", err.msg); skip(); }
    assert_int_equal(rc, DR_OK);
    memset(&rb, 0, sizeof rb);
    assert_int_equal(ops->alloc(b, sizeof params, &rb.params, &err), DR_OK);
    assert_int_equal(ops->alloc(b, sizeof grad, &rb.grad, &err), DR_OK);
    assert_int_equal(ops->alloc(b, sizeof(dr_acc), &rb.loss, &err), DR_OK);
    assert_int_equal(ops->alloc(b, sizeof x, &rb.x, &err), DR_OK);
    assert_int_equal(ops->alloc(b, 1, &rb.labels, &err), DR_OK);
    assert_int_equal(ops->upload(b, rb.params, 0, params, sizeof params, &err), DR_OK);
    assert_int_equal(ops->upload(b, rb.x, 0, x, sizeof x, &err), DR_OK);
    assert_int_equal(ops->upload(b, rb.labels, 0, &label, 1, &err), DR_OK);
    assert_int_equal(ops->replica_open(b, &rb, 1, &err), DR_OK);
    assert_int_equal(ops->graph_begin(b, &rb, 1, &rt, &err), DR_OK);
    for (uint32_t l = 0; l < m.nlayers; l++) assert_int_equal(ops->layer_forward(b, &rb, l, &err), DR_OK);
    assert_int_equal(ops->graph_loss(b, &rb, &err), DR_OK);
    for (uint32_t l = m.nlayers; l-- > 0;) assert_int_equal(ops->layer_backward(b, &rb, l, &err), DR_OK);
    assert_int_equal(ops->download(b, grad, rb.grad, 0, sizeof grad, &err), DR_OK);
    {
        float dw = dr_acc_round(&grad[0]), db = dr_acc_round(&grad[1]);
        assert_true(db == -1.0f);   /* g = (1, -1) . (softmax(0, 0) - onehot(0)) */
        assert_true(dw == db);      /* x = 1 at the first maximum; the last would give -4 */
    }
    ops->replica_close(b, &rb);
    ops->release(b, rb.params); ops->release(b, rb.grad); ops->release(b, rb.loss);
    ops->release(b, rb.x); ops->release(b, rb.labels);
    ops->close(b);
}

/* The tpu tile ops (opencl_spatial.c) on model m (layer 0 of 4 inputs): two
 * tiles of interleaved pixels {0, 2} and {1, 3}, so a tile's kernel rows are
 * not one run (planted fault cl_tile_contiguous reads them as one); 3 rows,
 * 2 real. The loss and every gradient element, rounded, equal the whole
 * forward's and backward's. */
static void tiles_equal_whole(const dr_model_spec *m)
{
    enum { ROWS = 3, N = 2 };
    static const uint32_t pix[4] = { 0, 2, 1, 3 };
    const float x[ROWS * 4] = { 0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f, 0.125f, -2.0f, 0.0f, 0.0f, 0.0f, 0.0f };
    const uint8_t labels[ROWS] = { 1, 0, 0 };
    dr_optimizer o = sgd();
    dr_backend_params sel = { .model = m, .optimizer = &o, .numerics = DR_NUMERICS_EXACT, .places = 1,
                              .platform = -1, .devices = "", .mapping = "" };
    const dr_backend_ops *ops = dr_backend_opencl();
    size_t P = dr_model_num_params(m), out0 = m->layer[0].out;
    float *params = malloc(P * sizeof(float)), xt[ROWS * 2], delta[N * 8];
    dr_acc *g[2] = { malloc(P * sizeof(dr_acc)), malloc(P * sizeof(dr_acc)) }, loss[2];
    dr_replica_bufs rb[2];
    dr_buffer *z, *tile[2], *dbuf;
    dr_backend *b;
    dr_err err;
    int rc = ops->open(&sel, &b, &err);
    if (rc == DR_EUNSUPPORTED) { printf("skipped: %s\n", err.msg); skip(); }
    assert_int_equal(rc, DR_OK);
    for (size_t i = 0; i < P; i++) params[i] = (float)((int)(i * 7 % 11) - 5) / 8.0f;
    for (int w = 0; w < 2; w++) {   /* 0: whole, 1: by tiles (its x never written) */
        memset(&rb[w], 0, sizeof rb[w]);
        assert_int_equal(ops->alloc(b, P * sizeof(float), &rb[w].params, &err), DR_OK);
        assert_int_equal(ops->alloc(b, P * sizeof(dr_acc), &rb[w].grad, &err), DR_OK);
        assert_int_equal(ops->alloc(b, sizeof(dr_acc), &rb[w].loss, &err), DR_OK);
        assert_int_equal(ops->alloc(b, sizeof x, &rb[w].x, &err), DR_OK);
        assert_int_equal(ops->alloc(b, ROWS, &rb[w].labels, &err), DR_OK);
        assert_int_equal(ops->upload(b, rb[w].params, 0, params, P * sizeof(float), &err), DR_OK);
        assert_int_equal(ops->upload(b, rb[w].labels, 0, labels, ROWS, &err), DR_OK);
        assert_int_equal(ops->replica_open(b, &rb[w], ROWS, &err), DR_OK);
    }
    assert_int_equal(ops->upload(b, rb[0].x, 0, x, sizeof x, &err), DR_OK);
    assert_int_equal(ops->forward(b, &rb[0], ROWS, 0, &err), DR_OK);
    assert_int_equal(ops->loss_grad(b, &rb[0], N, true, &err), DR_OK);
    assert_int_equal(ops->alloc(b, ROWS * out0 * sizeof(dr_acc), &z, &err), DR_OK);
    assert_int_equal(ops->alloc(b, N * out0 * sizeof(float), &dbuf, &err), DR_OK);
    for (int t = 0; t < 2; t++) {
        for (int r = 0; r < ROWS; r++)
            for (int q = 0; q < 2; q++) xt[r * 2 + q] = x[r * 4 + pix[t * 2 + q]];
        assert_int_equal(ops->alloc(b, sizeof xt, &tile[t], &err), DR_OK);
        assert_int_equal(ops->upload(b, tile[t], 0, xt, sizeof xt, &err), DR_OK);
        assert_int_equal(ops->layer0_partial(b, tile[t], pix + t * 2, 2, ROWS, rb[1].params, z, &err), DR_OK);
    }
    assert_int_equal(ops->layer0_finish(b, &rb[1], z, ROWS, &err), DR_OK);
    assert_int_equal(ops->forward(b, &rb[1], ROWS, 1, &err), DR_OK);
    assert_int_equal(ops->loss_grad(b, &rb[1], N, false, &err), DR_OK);
    assert_int_equal(ops->layer0_delta(b, &rb[1], N, delta, &err), DR_OK);
    assert_int_equal(ops->upload(b, dbuf, 0, delta, N * out0 * sizeof(float), &err), DR_OK);
    for (int t = 0; t < 2; t++)
        assert_int_equal(ops->layer0_grad_rows(b, tile[t], pix + t * 2, 2, N, dbuf, rb[1].grad, &err), DR_OK);
    for (int w = 0; w < 2; w++) {
        assert_int_equal(ops->download(b, g[w], rb[w].grad, 0, P * sizeof(dr_acc), &err), DR_OK);
        assert_int_equal(ops->download(b, &loss[w], rb[w].loss, 0, sizeof(dr_acc), &err), DR_OK);
    }
    assert_true(dr_acc_round(&loss[0]) == dr_acc_round(&loss[1]));
    for (size_t i = 0; i < P; i++) {
        float a = dr_acc_round(&g[0][i]), c = dr_acc_round(&g[1][i]);
        if (memcmp(&a, &c, sizeof a) != 0) fail_msg("gradient %zu: tiles %g, whole %g", i, (double)c, (double)a);
    }
    for (int t = 0; t < 2; t++) ops->release(b, tile[t]);
    ops->release(b, z); ops->release(b, dbuf);
    for (int w = 0; w < 2; w++) {
        ops->replica_close(b, &rb[w]);
        ops->release(b, rb[w].params); ops->release(b, rb[w].grad); ops->release(b, rb[w].loss);
        ops->release(b, rb[w].x); ops->release(b, rb[w].labels);
    }
    ops->close(b);
    free(params); free(g[0]); free(g[1]);
}

static void tpu_tiles(void **state)
{
    static const dr_model_spec one = { .nlayers = 1, .layer = { { .in = 4, .out = 2, .act = DR_ACT_LINEAR } },
                                       .loss = DR_LOSS_XENT_LOGITS, .l2 = 0.0f };
    (void)state;
    tiles_equal_whole(&k_small);   /* a ReLU layer 0, then Dense */
    tiles_equal_whole(&one);       /* layer0_finish makes the output */
}

static uint8_t *slurp_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *b;
    long len;
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc((size_t)len + 1);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void spill(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* A cache file cut at any length, a flipped byte, junk after it: the next
 * build still works (before: PoCL's loader asserted, 134, or crashed, 139)
 * and rewrites the file whole. */
static void truncated_cache(void **state)
{
    static const char src[] = "__kernel void one(__global uint *x) { x[get_global_id(0)] = 1u; }\n";
    char dir[] = "/tmp/distref_clcache_XXXXXX", path[256], cmd[300];
    cl_env e;
    size_t n, m;
    uint8_t *full, *now;
    FILE *ls;
    (void)state;
    if (!env_open(&e)) skip();
    assert_non_null(mkdtemp(dir));
    setenv("DISTREF_CL_CACHE", dir, 1);
    clReleaseProgram(build(&e, src));
    snprintf(cmd, sizeof cmd, "ls %s/*.bin", dir);
    assert_non_null(ls = popen(cmd, "r"));
    assert_non_null(fgets(path, sizeof path, ls));
    pclose(ls);
    path[strcspn(path, "\n")] = 0;
    full = slurp_file(path, &n);
    assert_true(n > 100);
    const size_t cuts[] = { 0, 1, 8, 16, 79, 80, 81, n / 2, n - 1, n + 1, n + 2 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        uint8_t *bad = calloc(n + 2, 1);
        memcpy(bad, full, n);
        if (cuts[i] == n + 1) bad[n / 2] ^= 0x40;   /* one flipped bit, full length */
        spill(path, bad, cuts[i] == n + 1 ? n : cuts[i]);   /* n + 2: two bytes of junk after it */
        free(bad);
        clReleaseProgram(build(&e, src));
        now = slurp_file(path, &m);
        if (m != n || memcmp(now, full, 8) != 0) fail_msg("cut at %zu: the cache was not rewritten (%zu bytes)", cuts[i], m);
        free(now);
    }
    free(full);
    unsetenv("DISTREF_CL_CACHE");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(elem_on_device),
        cmocka_unit_test(acc_on_device),
        cmocka_unit_test(half_on_device),
        cmocka_unit_test(exact_capabilities),
        cmocka_unit_test(device_oom),
        cmocka_unit_test(subdevice_places),
        cmocka_unit_test(device_list_places),
        cmocka_unit_test(mapping_errors),
        cmocka_unit_test(truncated_cache),
        cmocka_unit_test(pool_tie_first),
        cmocka_unit_test(tpu_tiles),
    };
    /* PoCL: two devices for device_list_places (other platforms ignore it); set
     * before the first OpenCL call, device 0 stays what it was */
    if (!getenv("POCL_DEVICES")) setenv("POCL_DEVICES", "pthread pthread", 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
