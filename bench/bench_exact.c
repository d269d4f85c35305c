/* distref bench — exact reductions against their inexact baselines.
 *
 * Every line is a ratio measured in this run, because a 2-core CI machine is
 * too noisy for absolute targets: exact sum vs a naive float loop and vs
 * cblas_sdot with a vector of ones; exact GEMM vs cblas_sgemm. Each
 * configuration reports the median of several repetitions, and each exact
 * result is checked against an independent exact path (#wrong), as
 * nccl-tests does, so a fast wrong kernel cannot look good.
 *
 * Output: a '#'-commented table (gnuplot reads it) on stdout, and with
 * --json FILE the same numbers as JSON.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>

void openblas_set_num_threads(int);   /* OpenBLAS extension */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_common.h"
#include "distref/exact.h"
#include "distref/fastgemm.h"
#include "devices/cpu/cpu_gemm_internal.h"
#include <omp.h>
#include "distref/rng.h"

#define REPS 7

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

/* The optimizer must not delete a loop whose result is unused. */
static volatile float sink;

static float naive_sum(const float *x, size_t n)
{
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s;
}

static void fill(float *x, size_t n, uint64_t stream)
{
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * dr_rng_uniform(7, stream, i) - 1.0f;
}

typedef float (*sum_fn)(const float *, size_t, const float *);

static float run_exact(const float *x, size_t n, const float *ones) { (void)ones; return dr_sum_f32(x, n); }
static float run_naive(const float *x, size_t n, const float *ones) { (void)ones; return naive_sum(x, n); }
static float run_sdot(const float *x, size_t n, const float *ones) { return cblas_sdot((int)n, x, 1, ones, 1); }

static double time_sum(sum_fn f, const float *x, size_t n, const float *ones)
{
    double t[REPS];
    int inner = n < 100000 ? 200 : n < 2000000 ? 10 : 1;
    for (int r = 0; r < REPS; r++) {
        double t0 = dr_now();
        for (int k = 0; k < inner; k++) sink = f(x, n, ones);
        t[r] = (dr_now() - t0) / inner;
    }
    return median(t, REPS);
}

/* The exact sum must equal the merge of two halves: an independent path. */
static int sum_wrong(const float *x, size_t n)
{
    dr_acc a, b;
    dr_acc_init(&a); dr_acc_init(&b);
    dr_acc_add_sum(&a, x, n / 2);
    for (size_t i = n / 2; i < n; i++) dr_acc_add(&b, x[i]);
    dr_acc_merge(&a, &b);
    return dr_acc_round(&a) != dr_sum_f32(x, n);
}

static void bench_sums(FILE *json)
{
    static const size_t sizes[] = { 10000, 1000000, 16000000 };
    printf("# exact sum: median of %d, seconds per call; ratio = exact / baseline (lower is better)\n", REPS);
    printf("# %10s %12s %12s %12s %10s %10s %7s\n", "n", "exact_s", "naive_s", "sdot1_s",
           "vs_naive", "vs_sdot", "#wrong");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *x = malloc(n * sizeof *x), *ones = malloc(n * sizeof *ones);
        double te, tn, td;
        int wrong;
        if (!x || !ones) { fprintf(stderr, "bench_exact: out of memory\n"); exit(1); }
        fill(x, n, 1);
        for (size_t i = 0; i < n; i++) ones[i] = 1.0f;
        te = time_sum(run_exact, x, n, ones);
        tn = time_sum(run_naive, x, n, ones);
        td = time_sum(run_sdot, x, n, ones);
        wrong = sum_wrong(x, n);
        printf("  %10zu %12.3e %12.3e %12.3e %10.2f %10.2f %7d\n", n, te, tn, td, te / tn, te / td, wrong);
        if (json)
            fprintf(json, "%s{\"bench\":\"sum\",\"n\":%zu,\"exact_s\":%.6e,\"naive_s\":%.6e,"
                    "\"sdot_s\":%.6e,\"ratio_naive\":%.4f,\"ratio_sdot\":%.4f,\"wrong\":%d}",
                    s ? ",\n" : "", n, te, tn, td, te / tn, te / td, wrong);
        free(x); free(ones);
    }
}

/* One GEMM configuration: plain exact, fast exact (1 and 2 threads) against
 * sgemm with the same thread count, by each path: "dgemm" the slices through
 * DGEMM (Ozaki scheme I), "crt" residues through the int8 VNNI kernel (Ozaki
 * scheme II), "cert" one DGEMM with a bound that proves each rounding
 * (cpu_gemm_cert.c), "auto" the one dr_gemm_f32_fast picks; #wrong = elements of the
 * fast result that differ from the plain exact one (must be 0). */
static double time_fast(size_t M, size_t N, size_t K, const float *A, const float *B, float *C, int threads,
                        dr_gemm_path path)
{
    double t[5];
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    for (int r = 0; r < 5; r++) {
        double t0 = dr_now();
        if (dr_gemm_fast_path(path, DR_NO_TRANS, DR_NO_TRANS, M, N, K, A, K, B, N, NULL, C, N, NULL, NULL))
            return -1.0;   /* the path cannot run here */
        t[r] = dr_now() - t0;
    }
    return median(t, 5);
}

static double time_sgemm(size_t M, size_t N, size_t K, const float *A, const float *B, float *D, int threads)
{
    double t[3];
    openblas_set_num_threads(threads);
    for (int r = 0; r < 3; r++) {
        double t0 = dr_now();
        for (int k = 0; k < 10; k++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K,
                        1.0f, A, (int)K, B, (int)N, 0.0f, D, (int)N);
        t[r] = (dr_now() - t0) / 10;
    }
    return median(t, 3);
}

static void bench_gemm(FILE *json)
{
    static const size_t shapes[][3] = { { 256, 784, 128 }, { 784, 128, 256 }, { 128, 256, 784 } };
    static const struct { const char *name; dr_gemm_path path; } paths[] = {
        { "dgemm", DR_GEMM_PATH_DGEMM }, { "crt", DR_GEMM_PATH_CRT_VNNI }, { "cert", DR_GEMM_PATH_CERTIFIED },
        { "auto", DR_GEMM_PATH_AUTO } };
    char blas[128];
    printf("# exact GEMM (M x K) * (K x N), median of 5; ratio = exact time / cblas_sgemm time, same threads;\n"
           "# %s\n", bench_blas_kernels(blas, sizeof blas));
    printf("# %5s %5s %5s %4s %6s %12s %12s %12s %10s %10s %7s\n", "M", "K", "N", "thr", "path", "plain_s", "fast_s",
           "sgemm_s", "plain/sg", "fast/sg", "#wrong");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        float *A = malloc(M * K * 4), *B = malloc(K * N * 4), *C = malloc(M * N * 4), *D = malloc(M * N * 4);
        double tp;
        if (!A || !B || !C || !D) { fprintf(stderr, "bench_exact: out of memory\n"); exit(1); }
        fill(A, M * K, 2); fill(B, K * N, 3);
        {
            double t0 = dr_now();
            dr_gemm_f32(DR_NO_TRANS, DR_NO_TRANS, M, N, K, A, K, B, N, NULL, C, N);
            tp = dr_now() - t0;
        }
        for (int threads = 1; threads <= 2; threads++) {
            for (size_t q = 0; q < sizeof paths / sizeof paths[0]; q++) {
                double tf, tb;
                int wrong = 0;
                memset(D, 0xff, M * N * 4);
                tf = time_fast(M, N, K, A, B, D, threads, paths[q].path);
                if (tf < 0) { printf("# %s: cannot run on this CPU\n", paths[q].name); continue; }
                for (size_t i = 0; i < M * N; i++) wrong += memcmp(&C[i], &D[i], 4) != 0;
                tb = time_sgemm(M, N, K, A, B, D, threads);   /* interleaved with the exact runs */
                printf("  %5zu %5zu %5zu %4d %6s %12.3e %12.3e %12.3e %10.1f %10.2f %7d\n", M, K, N, threads,
                       paths[q].name, tp, tf, tb, tp / tb, tf / tb, wrong);
                if (json)
                    fprintf(json, ",\n{\"bench\":\"gemm\",\"M\":%zu,\"K\":%zu,\"N\":%zu,\"threads\":%d,"
                            "\"path\":\"%s\",\"plain_s\":%.6e,\"fast_s\":%.6e,\"sgemm_s\":%.6e,\"wrong\":%d}",
                            M, K, N, threads, paths[q].name, tp, tf, tb, wrong);
            }
        }
        free(A); free(B); free(C); free(D);
    }
}

int main(int argc, char **argv)
{
    FILE *json = NULL;
    int gemm_only = argc == 2 && strcmp(argv[1], "--gemm-only") == 0;
    if (argc == 3 && strcmp(argv[1], "--json") == 0) {
        json = fopen(argv[2], "w");
        if (!json) { fprintf(stderr, "bench_exact: --json: cannot write %s\n", argv[2]); return 2; }
        fputs("[\n", json);
    } else if (argc != 1 && !gemm_only) {
        fprintf(stderr, "usage: bench_exact [--json FILE | --gemm-only]\n");
        return 2;
    }
    if (!gemm_only) bench_sums(json);
    bench_gemm(json);
    if (json) { fputs("\n]\n", json); fclose(json); }
    return 0;
}
