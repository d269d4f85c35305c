/* distref nightly bench — repeated, interleaved samples for regression
 * detection (issue 15; scripts/nightly.py drives it, docs/NIGHTLY.md).
 *
 * Each metric is a ratio: the measured kernel's seconds over an in-run
 * baseline's (a naive loop, cblas_sdot, cblas_sgemm, the step's five
 * sgemms, or an identical copy of the kernel), and every sample of it is
 * taken from a neighbouring pair of measurements: kernel then baseline, the
 * next sample baseline then kernel, and so on. Load from other jobs on a
 * shared machine moves both halves of a pair together, so the ratio moves
 * much less than either time. The raw times are kept too.
 *
 *   nightly [--samples N] [--json FILE] [--only NAME[,NAME...]] [--list]
 *   nightly --calibrate
 *
 * --calibrate does a fixed amount of work that uses no distref code and
 * exits: the in-run baseline of the conformance rows (scripts/
 * nightly_rows.py times it, by CPU seconds, right before and after each
 * conformance slice; see calibrate()).
 *
 * DISTREF_NIGHTLY_PLANT=NAME:FRACTION (read here, in this bench program
 * only, never by the library) plants a slowdown: each timed kernel call of
 * metric NAME is stretched by FRACTION of its own measured time (a spin on
 * the clock inside the timed region), e.g. synthetic_loop:0.15 makes that
 * kernel 15% slower. The tests and docs/NIGHTLY.md use it to prove that the
 * detector flags a known regression.
 *
 * The OpenCL rows (train_opencl_*, gemm_opencl_*) need an OpenCL device
 * (DISTREF_OPENCL_PLATFORM / _DEVICE select it, docs/OPENCL.md); where none
 * is present they are skipped with a one-line note naming why. PoCL's CPU
 * device runs in the calling thread (POCL_DEVICES=basic and
 * POCL_MAX_PTHREAD_COUNT=1 unless set).
 *
 * Output: a readable table on stdout (median, min and max of each metric's
 * ratio samples); with --json FILE every sample as JSON.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_common.h"
#include "bench/bench_cl_gemm.h"
#include "distref/exact.h"
#include "distref/factory.h"
#include "distref/fastgemm.h"
#include "distref/harness.h"
#include "distref/opencl.h"
#include "distref/rng.h"
#include "distref/train.h"

void openblas_set_num_threads(int);   /* OpenBLAS extension */

static double median_of(const double *v, int n)
{
    double *t = malloc((size_t)n * sizeof *t), m;
    if (!t) return 0;
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return m;
}

/* The optimizer must not delete a loop whose result is unused. */
static volatile float sink;
static volatile uint64_t isink;

/* ---- the kernels and their baselines ------------------------------------ */

enum { SUM_N = 100000, GM = 256, GK = 784, GN = 128 };
enum { NG = 64, NI = 784, NH = 128, NO = 10 };

static float *sum_x, *sum_ones;
static float *ga, *gb, *gc;
static float *sx, *sw1, *sw2, *sa1, *sz2, *sg1, *sg2, *sd1;

static void fill(float *x, size_t n, uint64_t stream)
{
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * dr_rng_uniform(7, stream, i) - 1.0f;
}

static void *xmalloc(size_t n)
{
    void *p = calloc(1, n);
    if (!p) { fprintf(stderr, "nightly: out of memory\n"); exit(1); }
    return p;
}

static void setup_sum(void)
{
    if (sum_x) return;
    sum_x = xmalloc(SUM_N * sizeof *sum_x);
    sum_ones = xmalloc(SUM_N * sizeof *sum_ones);
    fill(sum_x, SUM_N, 1);
    for (size_t i = 0; i < SUM_N; i++) sum_ones[i] = 1.0f;
}

static void setup_gemm(void)
{
    if (ga) return;
    ga = xmalloc((size_t)GM * GK * 4);
    gb = xmalloc((size_t)GK * GN * 4);
    gc = xmalloc((size_t)GM * GN * 4);
    fill(ga, (size_t)GM * GK, 2);
    fill(gb, (size_t)GK * GN, 3);
}

static void setup_step(void)
{
    if (sx) return;
    sx = xmalloc((size_t)NG * NI * 4); sw1 = xmalloc((size_t)NI * NH * 4); sw2 = xmalloc((size_t)NH * NO * 4);
    sa1 = xmalloc((size_t)NG * NH * 4); sz2 = xmalloc((size_t)NG * NO * 4); sg1 = xmalloc((size_t)NI * NH * 4);
    sg2 = xmalloc((size_t)NH * NO * 4); sd1 = xmalloc((size_t)NG * NH * 4);
    for (size_t i = 0; i < (size_t)NG * NI; i++) sx[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)NI * NH; i++) sw1[i] = (float)(i % 5) * 0.01f;
    for (size_t i = 0; i < (size_t)NH * NO; i++) sw2[i] = (float)(i % 3) * 0.01f;
}

/* A dependent integer loop: the synthetic metric, against a copy of itself. */
static void k_loop(void)
{
    uint64_t s = isink | 1;
    for (int i = 0; i < (1 << 18); i++) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; }
    isink = s;
}

static float naive_sum(const float *x, size_t n)
{
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s;
}

/* The exact sum's vector pass without its bookkeeping: per 16 floats the
 * kinds of instructions dr_sum_f32's AVX-512 window pass runs (load, the
 * exponent field and mantissa by shifts and masks, a variable shift into
 * 64-bit lanes, adds), over the same data, with no chunk scan, carries or
 * exactness. The baseline of sum_exact_100k_vs_vecpass: throughput-bound
 * like the kernel, so what slows vector throughput on this core (another
 * guest on the host core's other hyperthread) slows both halves, where the
 * naive loop, a chain of dependent adds, is latency-bound and is not slowed
 * (docs/history/NIGHTLY.md, session 9). Scalar where there is no AVX-512. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx512f"))) static uint64_t vecpass_avx512(const float *x, size_t n)
{
    const __m512i fmask = _mm512_set1_epi32(0xff), mmask = _mm512_set1_epi32(0x7fffff);
    const __m512i hidden = _mm512_set1_epi32(0x800000), one = _mm512_set1_epi32(1);
    const __m512i base = _mm512_set1_epi32(27 - 127), zero = _mm512_setzero_si512();
    __m512i acc0 = zero, acc1 = zero;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_loadu_si512(x + i);
        __m512i field = _mm512_and_si512(_mm512_srli_epi32(u, 23), fmask);
        __m512i mant = _mm512_or_si512(_mm512_and_si512(u, mmask), hidden);
        __m512i sh = _mm512_max_epi32(_mm512_add_epi32(base, _mm512_max_epi32(field, one)), zero);
        __m512i lo = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(mant));
        __m512i hi = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(mant, 1));
        lo = _mm512_sllv_epi64(lo, _mm512_cvtepu32_epi64(_mm512_castsi512_si256(sh)));
        hi = _mm512_sllv_epi64(hi, _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(sh, 1)));
        acc0 = _mm512_add_epi64(acc0, lo);
        acc1 = _mm512_add_epi64(acc1, hi);
    }
    return (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(acc0, acc1)) + i;
}
#endif
static uint64_t vecpass(const float *x, size_t n)
{
    uint64_t acc = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f")) return vecpass_avx512(x, n);
#endif
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        int sh;
        memcpy(&u, &x[i], 4);
        sh = 27 - 127 + (int)((u >> 23) & 0xff ? (u >> 23) & 0xff : 1);
        acc += (uint64_t)((u & 0x7fffff) | 0x800000) << (sh > 0 ? sh : 0);
    }
    return acc;
}

static void k_sum_exact(void) { sink = dr_sum_f32(sum_x, SUM_N); }
static void k_vecpass(void) { isink = vecpass(sum_x, SUM_N); }
static void k_sum_naive(void) { sink = naive_sum(sum_x, SUM_N); }
static void k_sdot(void) { sink = cblas_sdot(SUM_N, sum_x, 1, sum_ones, 1); }

static void k_gemm_fast(void)
{
    dr_gemm_f32_fast(DR_NO_TRANS, DR_NO_TRANS, GM, GN, GK, ga, GK, gb, GN, NULL, gc, GN);
}

static void k_sgemm(void)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, GM, GN, GK, 1.0f, ga, GK, gb, GN, 0.0f, gc, GN);
}

/* The five GEMMs of one step of the 784-128-10 MLP at G = 64 (bench_train's
 * roofline), TRAIN_STEPS times: the baseline of the training metrics. */
enum { TRAIN_STEPS = 40 };
static void k_gemm_steps(void)
{
    for (int r = 0; r < TRAIN_STEPS; r++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, NG, NH, NI, 1, sx, NI, sw1, NH, 0, sa1, NH);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, NG, NO, NH, 1, sa1, NH, sw2, NO, 0, sz2, NO);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NH, NO, NG, 1, sa1, NH, sz2, NO, 0, sg2, NO);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, NG, NH, NO, 1, sz2, NO, sw2, NO, 0, sd1, NH);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NI, NH, NG, 1, sx, NI, sd1, NH, 0, sg1, NH);
    }
}

/* steps of mlp_synthetic under a strategy (num_gpus emulated GPUs), global
 * batch G, on `threads` OpenMP threads (start-up included: the same in
 * every run of a revision). */
static void train_with(const char *variant, const char *numerics, const char *strategy, int num_gpus, uint32_t G,
                       uint64_t steps, int threads)
{
    if (bench_train_run("nightly", variant, numerics, strategy, num_gpus, G, steps, threads, NULL) < 0) exit(1);
}

static void train(const char *variant, const char *numerics, uint64_t steps)
{
    train_with(variant, numerics, "one_device", 0, NG, steps, 1);
}

static void k_train_fast(void) { train("openmp", "fast", 40); }
static void k_train_exact(void) { train("openmp", "exact", 16); }
static void k_train_ref(void) { train("ref", "exact", 8); }
/* mirrored on two emulated GPUs against one device: what the split, the
 * second replica and the all-reduce cost (one thread, so the replicas take
 * turns) */
static void k_train_mirrored2(void) { train_with("openmp", "fast", "mirrored", 2, NG, 40, 1); }
/* one_device at G = 256 on two threads against one */
static void k_train_g256_2thr(void) { train_with("openmp", "fast", "one_device", 0, 256, 20, 2); }
static void k_train_g256_1thr(void) { train_with("openmp", "fast", "one_device", 0, 256, 20, 1); }

/* Issue 33's ratio, exact over fast (docs/PERFORMANCE.md), as a
 * regression row for each of its cells: G = 64 and 256, one_device and
 * mirrored on 2 emulated GPUs, 1 thread, and exact on 2 threads against 1.
 * Exact runs a quarter of fast's steps, so the two halves of a pair last
 * about as long (exact is 4-7x slower a step here), and enough of them
 * that the steps, not the start-up (~80 ms: the data set, the checkpoint),
 * make most of either half: the ratio is then exact/fast's step-time
 * ratio over 4, moved toward 1 by the start-up. */
static void k_train_fast64(void) { train_with("openmp", "fast", "one_device", 0, 64, 256, 1); }
static void k_train_exact64(void) { train_with("openmp", "exact", "one_device", 0, 64, 64, 1); }
static void k_train_fast256(void) { train_with("openmp", "fast", "one_device", 0, 256, 96, 1); }
static void k_train_exact256(void) { train_with("openmp", "exact", "one_device", 0, 256, 24, 1); }
static void k_train_fast_m2(void) { train_with("openmp", "fast", "mirrored", 2, 64, 256, 1); }
static void k_train_exact_m2(void) { train_with("openmp", "exact", "mirrored", 2, 64, 64, 1); }
static void k_train_exact256_2thr(void) { train_with("openmp", "exact", "one_device", 0, 256, 24, 2); }

/* cnn_synthetic (issue 31: conv, BN, pool, dropout) at G = 64 on one
 * thread: fast against the MLP's fast step (what a conv step costs over a
 * Dense one: a regression in the engine's layer kernels moves it), and
 * exact against fast (exact mode's price on the conv model). */
static void cnn(dr_run_config *c) { snprintf(c->experiment, sizeof c->experiment, "cnn_synthetic"); }
/* resnet_synthetic (38 layers: stride-2 convs, projection shortcuts, BN
 * everywhere, global average pooling) the same way, against cnn_synthetic's
 * fast step: what the deeper model costs per step over the small one. */
static void resnet(dr_run_config *c) { snprintf(c->experiment, sizeof c->experiment, "resnet_synthetic"); }
static void train_model(void (*model)(dr_run_config *), const char *numerics, uint64_t steps)
{
    if (bench_train_run_with("nightly", "openmp", numerics, "one_device", 0, NG, steps, 1, model, NULL, NULL, 0) < 0)
        exit(1);
}
static void k_train_cnn_fast(void) { train_model(cnn, "fast", 20); }
static void k_train_cnn_exact(void) { train_model(cnn, "exact", 4); }
static void k_train_resnet_fast(void) { train_model(resnet, "fast", 6); }
static void k_train_resnet_exact(void) { train_model(resnet, "exact", 1); }

/* The OpenCL variant against the OpenMP one (the host side on one thread;
 * the OpenCL device's own threads are its runtime's): fast, 40 steps each.
 * Exact: 4 OpenCL steps (an exact step on PoCL is ~0.1 s; ~0.55 s with the
 * start-up) against OMP_EXACT_STEPS openmp steps (~8 ms a step, ~0.5 s):
 * the two halves of a pair last about as long, so a preemption is as
 * likely in either (with 4 openmp steps, ~0.1 s, one A/A run at load 8 put
 * the ratio at +90%; docs/NIGHTLY.md). */
enum { OMP_EXACT_STEPS = 48 };
static void k_train_cl_fast(void) { train("opencl", "fast", 40); }
static void k_train_cl_exact(void) { train("opencl", "exact", 4); }
static void k_train_omp_exact_long(void) { train("openmp", "exact", OMP_EXACT_STEPS); }

/* The OpenCL fast GEMM (devices/opencl/cl/kernels.cl gemm_fast_v) on the shape of
 * gemm_fast_256x784x128_vs_sgemm, against cblas_sgemm on one thread. */
static bench_cl_gemm *clg;
static void setup_cl_gemm(void)
{
    setup_gemm();
    if (!clg && !(clg = bench_cl_gemm_open(GM, GK, GN, ga, gb))) exit(1);
}
static void k_cl_gemm(void)
{
    if (bench_cl_gemm_run(clg) != 0) exit(1);
}

/* The conformance rows' calibration workload: no distref code, a fixed
 * amount of work of a conformance run's kinds (~0.7 s on one core here):
 * OpenBLAS GEMMs, a dependent integer loop, and sweeps over 16 MB (out of
 * the core's caches, as training's data and checkpoints are). Its CPU
 * seconds move with what slows a CPU-bound process on a shared machine
 * (clock, cache and memory contention, context switches), as the slices'
 * do, and not with anything distref changes. */
static void calibrate(void)
{
    enum { SWEEP = 4u << 20 };
    float *m = xmalloc(SWEEP * sizeof *m);
    setup_gemm();
    for (int r = 0; r < 1000; r++) k_sgemm();
    for (int r = 0; r < 256; r++) k_loop();
    for (int r = 0; r < 200; r++)
        for (size_t i = 0; i < SWEEP; i += 16) m[(i * 7919u) % SWEEP] += 1.0f;
    sink = m[12345] + gc[0];
    free(m);
}

typedef struct metric {
    const char *name, *kernel_name, *baseline_name;
    void (*setup)(void);
    void (*kernel)(void), (*baseline)(void);
    int kernel_inner, baseline_inner;   /* calls per timed measurement */
    int best_of;                        /* pairs of measurements per sample, the fastest of each kept */
    int opencl;                         /* 1: needs an OpenCL device, skipped with a note where none is */
    int clock;                          /* CLK_WALL, CLK_PROCESS or CLK_THREAD (cpu_now) */
} metric;

static void setup_none(void) {}

enum { CLK_WALL, CLK_PROCESS, CLK_THREAD };

static const metric metrics[] = {
    { "synthetic_loop", "xorshift loop 2^18", "the same loop", setup_none, k_loop, k_loop, 1, 1, 7, 0, 0 },
    /* The sums: ~1 ms a measurement on either side (the exact sum ~29 us a
     * call, the naive loop ~49 us, the vector pass ~7 us, sdot ~5 us here),
     * best of 5 pairs (was 20 calls against 20 and 40, best of 3).
     * By the calling thread's CPU seconds: at load 6 with compile jobs
     * starting, wall-clock samples of a run spread 2.1-7.6 (best of 5).
     * sum_exact_100k_vs_vecpass is the exact sum's regression row;
     * sum_exact_100k_vs_naive (the price of exactness against the naive
     * loop) moves when another guest shares the host core (above), so its
     * minimum effect is 30% (docs/history/NIGHTLY.md, session 9). */
    { "sum_exact_100k_vs_vecpass", "dr_sum_f32 n=1e5", "its vector pass without bookkeeping", setup_sum,
      k_sum_exact, k_vecpass, 34, 150, 5, 0, CLK_THREAD },
    { "sum_exact_100k_vs_naive", "dr_sum_f32 n=1e5", "naive float loop", setup_sum, k_sum_exact, k_sum_naive, 34, 20, 5,
      0, CLK_THREAD },
    { "sum_exact_100k_vs_sdot", "dr_sum_f32 n=1e5", "cblas_sdot with ones", setup_sum, k_sum_exact, k_sdot, 34, 200, 5,
      0, CLK_THREAD },
    /* sgemm 15 calls a measurement (was 5): ~6.5 ms, as one fast GEMM, so
     * a preemption is as likely in either half (with 5 the ratio flipped
     * 15 <-> 25-30 between A/A runs: the 2 ms sgemm dodged the scheduler,
     * the 6.5 ms kernel could not; docs/NIGHTLY.md); best of 7 pairs (was
     * 3): at load 5 all three measurements of a half were often hit.
     * The OpenCL GEMM below likewise best of 15 (was 3): a pair is ~4 ms. */
    { "gemm_fast_256x784x128_vs_sgemm", "dr_gemm_f32_fast 1 thread", "cblas_sgemm 1 thread", setup_gemm,
      k_gemm_fast, k_sgemm, 1, 15, 7, 0, 0 },
    { "train_fast_g64_vs_gemms", "openmp fast one_device 40 steps", "the steps' five sgemms x40", setup_step,
      k_train_fast, k_gemm_steps, 1, 1, 3, 0, 0 },
    { "train_exact_g64_vs_gemms", "openmp exact one_device 16 steps", "the steps' five sgemms x40", setup_step,
      k_train_exact, k_gemm_steps, 1, 1, 3, 0, 0 },
    { "train_ref_g64_vs_gemms", "ref one_device 8 steps", "the steps' five sgemms x40", setup_step,
      k_train_ref, k_gemm_steps, 1, 1, 3, 0, 0 },
    { "train_fast_mirrored2_g64_vs_one_device", "openmp fast mirrored 2 GPUs 40 steps",
      "openmp fast one_device 40 steps", setup_none, k_train_mirrored2, k_train_fast, 1, 1, 3, 0, 0 },
    { "train_fast_g256_2thr_vs_1thr", "openmp fast one_device G=256 2 threads 20 steps",
      "the same on 1 thread", setup_none, k_train_g256_2thr, k_train_g256_1thr, 1, 1, 3, 0, 0 },
    { "train_exact_g64_vs_fast", "openmp exact one_device G=64 64 steps", "openmp fast one_device G=64 256 steps",
      setup_none, k_train_exact64, k_train_fast64, 1, 1, 3, 0, 0 },
    { "train_exact_g256_vs_fast", "openmp exact one_device G=256 24 steps", "openmp fast one_device G=256 96 steps",
      setup_none, k_train_exact256, k_train_fast256, 1, 1, 3, 0, 0 },
    { "train_exact_mirrored2_g64_vs_fast", "openmp exact mirrored 2 GPUs G=64 64 steps",
      "openmp fast mirrored 2 GPUs G=64 256 steps", setup_none, k_train_exact_m2, k_train_fast_m2, 1, 1, 3, 0, 0 },
    { "train_exact_g256_2thr_vs_1thr", "openmp exact one_device G=256 2 threads 24 steps", "the same on 1 thread",
      setup_none, k_train_exact256_2thr, k_train_exact256, 1, 1, 3, 0, 0 },
    { "train_cnn_fast_g64_vs_mlp_fast", "openmp fast one_device cnn_synthetic 20 steps",
      "openmp fast one_device mlp_synthetic 40 steps", setup_none, k_train_cnn_fast, k_train_fast, 1, 1, 3, 0, 0 },
    { "train_cnn_exact_g64_vs_fast", "openmp exact one_device cnn_synthetic 4 steps",
      "openmp fast one_device cnn_synthetic 20 steps", setup_none, k_train_cnn_exact, k_train_cnn_fast, 1, 1, 3, 0,
      0 },
    { "train_resnet_fast_g64_vs_cnn_fast", "openmp fast one_device resnet_synthetic 6 steps",
      "openmp fast one_device cnn_synthetic 20 steps", setup_none, k_train_resnet_fast, k_train_cnn_fast, 1, 1, 3, 0,
      0 },
    { "train_resnet_exact_g64_vs_fast", "openmp exact one_device resnet_synthetic 1 step",
      "openmp fast one_device resnet_synthetic 6 steps", setup_none, k_train_resnet_exact, k_train_resnet_fast, 1, 1,
      3, 0, 0 },
    { "train_opencl_fast_g64_vs_openmp", "opencl fast one_device 40 steps", "openmp fast one_device 40 steps",
      setup_none, k_train_cl_fast, k_train_fast, 1, 1, 3, 1, 0 },
    /* By CPU seconds: the two runs are single-threaded (OpenMP, OpenBLAS
     * and PoCL's basic driver on the calling thread), ~0.5 s each, and at
     * load 5 a wall-clock measurement of either half moved 0.3 -> 2.0 s
     * within a run (docs/history/NIGHTLY.md, session 9). */
    { "train_opencl_exact_g64_cpu_vs_openmp48", "opencl exact one_device 4 steps (CPU s)",
      "openmp exact one_device 48 steps (CPU s)", setup_none, k_train_cl_exact, k_train_omp_exact_long, 1, 1, 2, 1,
      CLK_PROCESS },
    { "gemm_opencl_fast_256x784x128_vs_sgemm", "opencl gemm_fast_v (clFinish)", "cblas_sgemm 1 thread",
      setup_cl_gemm, k_cl_gemm, k_sgemm, 5, 5, 15, 1, 0 },
};
enum { NMETRICS = sizeof metrics / sizeof metrics[0] };

/* CPU seconds, which leave out the time spent waiting for a core: the
 * process's (every thread: a runtime's helpers count too) or the calling
 * thread's alone. */
static double process_cpu_now(void) { return bench_cpu_seconds(CLOCK_PROCESS_CPUTIME_ID); }
static double thread_cpu_now(void) { return bench_cpu_seconds(CLOCK_THREAD_CPUTIME_ID); }

/* Seconds per call of f (wall or CPU seconds, clock), inner calls timed
 * together; with plant > 0 the timed region is stretched by plant times its
 * own length (a spin on the same clock). */
static double timed(void (*f)(void), int inner, double plant, int clock)
{
    double (*clk)(void) = clock == CLK_PROCESS ? process_cpu_now : clock == CLK_THREAD ? thread_cpu_now : dr_now;
    double t0 = clk(), t;
    for (int k = 0; k < inner; k++) f();
    t = clk() - t0;
    if (plant > 0) {
        double until = t0 + t * (1.0 + plant);
        while (clk() < until) {}
    }
    return (clk() - t0) / inner;
}

static int selected(const char *only, const char *name)
{
    size_t n = strlen(name);
    if (!only) return 1;
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static void json_array(FILE *f, const char *key, const double *v, int n)
{
    fprintf(f, "\"%s\":[", key);
    for (int i = 0; i < n; i++) fprintf(f, "%s%.9g", i ? "," : "", v[i]);
    fputc(']', f);
}

int main(int argc, char **argv)
{
    char blas[128];   /* bench_blas_kernels */
    int samples = 15, first = 1, have_cl = 0, calib = 0;
    char cl_why[sizeof(dr_err){ 0 }.msg] = "";
    const char *only = NULL, *plant_env = getenv("DISTREF_NIGHTLY_PLANT");
    char plant_name[128] = "";
    double plant = 0;
    FILE *json = NULL;
    dr_omp_short_spin_reexec(argv);   /* the policy bin/distref runs with (harness/omp_policy.c) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--samples") && i + 1 < argc) samples = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json = fopen(argv[++i], "w");
            if (!json) { fprintf(stderr, "nightly: --json: cannot write %s\n", argv[i]); return 2; }
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--calibrate")) calib = 1;
        else if (!strcmp(argv[i], "--list")) {
            for (int m = 0; m < NMETRICS; m++)
                printf("%-32s %s / %s\n", metrics[m].name, metrics[m].kernel_name, metrics[m].baseline_name);
            return 0;
        } else {
            fprintf(stderr, "usage: nightly [--samples N] [--json FILE] [--only NAME[,NAME...]] [--list] | --calibrate\n");
            return 2;
        }
    }
    if (calib) {   /* before anything else starts (no OpenCL runtime, no planting) */
        omp_set_num_threads(1);
        openblas_set_num_threads(1);
        calibrate();
        return 0;
    }
    if (samples < 1 || samples > 100000) { fprintf(stderr, "nightly: --samples must be 1..100000\n"); return 2; }
    if (bench_parse_plant("nightly", plant_env, plant_name, sizeof plant_name, &plant)) return 2;
    if (plant_name[0]) {
        for (int m = 0; m < NMETRICS; m++)   /* (a name of another program's metric: that program plants it) */
            if (!strcmp(metrics[m].name, plant_name))
                fprintf(stderr, "nightly: PLANTED slowdown: %s kernel +%.1f%%\n", plant_name, 100 * plant);
    }
    /* PoCL's CPU device on one thread, as OpenMP and OpenBLAS below: with
     * its default (a thread per core) the OpenCL rows' ratios moved with
     * the other core's load, 0.54 when it was idle, 0.90-0.96 when busy, in
     * A/A runs (docs/NIGHTLY.md). And PoCL's "basic" driver, which runs
     * the kernels in the calling thread: with the "pthread" driver's one
     * worker every launch is two thread hand-offs (host -> worker ->
     * host, ~11 us of the GEMM's ~390 us on an idle machine), and under
     * load a woken thread waits for a core, so the OpenCL GEMM's ratio to
     * the one-thread sgemm moved 0.92-1.26 between A/A runs at load 3-5
     * while with "basic" it stayed at 0.871-0.885 (docs/NIGHTLY.md). The
     * kernels are the same, compiled the same way; work-groups run one
     * after another in both. Values already set are kept. */
    setenv("POCL_MAX_PTHREAD_COUNT", "1", 0);
    setenv("POCL_DEVICES", "basic", 0);
    for (int m = 0; m < NMETRICS; m++)
        if (metrics[m].opencl && selected(only, metrics[m].name)) {
            dr_backend_params sel = { .numerics = DR_NUMERICS_EXACT, .places = 1, .platform = -1, .mapping = "shared" };
            dr_err err;
            have_cl = dr_backend_opencl()->available(&sel, &err) == DR_OK;
            if (!have_cl) snprintf(cl_why, sizeof cl_why, "%s", err.msg);
            break;
        }
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
    double *ratio = xmalloc((size_t)samples * sizeof *ratio);
    double *tk = xmalloc((size_t)samples * sizeof *tk), *tb = xmalloc((size_t)samples * sizeof *tb);
    printf("# nightly: %d interleaved samples per metric; ratio = kernel s / baseline s from neighbouring "
           "measurements (lower is better); %s\n", samples, bench_blas_kernels(blas, sizeof blas));
    printf("# %-32s %8s %8s %8s %12s %12s\n", "metric", "median", "min", "max", "kernel_s", "baseline_s");
    if (json) {
        /* "opencl": "" with a device, else why not (nightly.py skips the opencl conformance rows too) */
        fprintf(json, "{\"samples\":%d,\"plant\":\"%s\",\"plant_fraction\":%g,\"opencl\":\"", samples, plant_name,
                plant);
        for (const char *c = have_cl || !cl_why[0] ? "" : cl_why; *c; c++)
            if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20) fputc(*c, json);
        fputs("\",\"metrics\":[", json);
    }
    for (int m = 0; m < NMETRICS; m++) {
        const metric *w = &metrics[m];
        double p = strcmp(plant_name, w->name) ? 0 : plant, lo, hi;
        if (!selected(only, w->name)) continue;
        if (w->opencl && !have_cl) {
            printf("  %-32s skipped: no OpenCL device (%s)\n", w->name, cl_why);
            continue;
        }
        w->setup();
        w->kernel();       /* warm-up: caches, pages, OpenBLAS's buffers */
        w->baseline();
        for (int s = 0; s < samples; s++) {
            /* best_of pairs, the order alternating; the fastest kernel and
             * the fastest baseline of them make the sample (a measurement
             * the scheduler interrupted is dropped). */
            for (int r = 0; r < w->best_of; r++) {
                double k, b;
                if ((s + r) % 2 == 0) {
                    k = timed(w->kernel, w->kernel_inner, p, w->clock);
                    b = timed(w->baseline, w->baseline_inner, 0, w->clock);
                } else {
                    b = timed(w->baseline, w->baseline_inner, 0, w->clock);
                    k = timed(w->kernel, w->kernel_inner, p, w->clock);
                }
                if (r == 0 || k < tk[s]) tk[s] = k;
                if (r == 0 || b < tb[s]) tb[s] = b;
            }
            ratio[s] = tb[s] > 0 ? tk[s] / tb[s] : 0;
        }
        lo = hi = ratio[0];
        for (int s = 1; s < samples; s++) { lo = ratio[s] < lo ? ratio[s] : lo; hi = ratio[s] > hi ? ratio[s] : hi; }
        printf("  %-32s %8.4f %8.4f %8.4f %12.4e %12.4e%s\n", w->name, median_of(ratio, samples), lo, hi,
               median_of(tk, samples), median_of(tb, samples), p > 0 ? "  (planted)" : "");
        fflush(stdout);
        if (json) {
            fprintf(json, "%s\n{\"name\":\"%s\",\"kernel\":\"%s\",\"baseline\":\"%s\",\"unit\":\"ratio\",",
                    first ? "" : ",", w->name, w->kernel_name, w->baseline_name);
            json_array(json, "ratio", ratio, samples);
            fputc(',', json);
            json_array(json, "kernel_s", tk, samples);
            fputc(',', json);
            json_array(json, "baseline_s", tb, samples);
            fputc('}', json);
            first = 0;
        }
    }
    if (json) { fputs("\n]}\n", json); fclose(json); }
    bench_cl_gemm_close(clg);
    free(ratio); free(tk); free(tb);
    return 0;
}
