/* distref bench — the OpenCL variant against the OpenMP one, in one run.
 *
 *   training   mlp_synthetic examples/s, exact and fast, one_device and
 *              mirrored (2 replicas), opencl and openmp side by side, with
 *              the ratio opencl / openmp and #wrong (exact runs whose
 *              weights differ from the reference's: must be 0); opencl's
 *              mirrored runs once per replica mapping (--opencl_mapping:
 *              shared, one queue; queues, one queue per replica;
 *              subdevices, one sub-device per replica, where the device
 *              splits), set through DISTREF_OPENCL_MAPPING.
 *   GEMM       the fast kernel (devices/opencl/cl/kernels.cl gemm_fast) at
 *              M x K x N = 256 x 784 x 128 (layer 0's forward at G = 256)
 *              against cblas_sgemm on the same shape, OpenBLAS on 1 and
 *              on 2 threads; the exact kernel's time too. GFLOP/s = 2MNK/s.
 *
 * Skipped, with the reason, where no OpenCL device is present.
 *   bench_opencl [--json FILE] [--steps N]
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_cl_gemm.h"
#include "bench/bench_common.h"
#include "devices/opencl/opencl_backend.h"
#include "distref/factory.h"
#include "distref/harness.h"
#include "distref/train.h"

void openblas_set_num_threads(int);

typedef struct row { const char *variant, *numerics, *strategy; int gpus; const char *mapping; } row;

static double run(const row *w, uint64_t steps, char sha[65])
{
    if (w->mapping) setenv("DISTREF_OPENCL_MAPPING", w->mapping, 1);   /* the run's default mapping */
    return bench_train_run("bench_opencl", w->variant, w->numerics, w->strategy, w->gpus, 64, steps, 0, sha);
}

/* The GEMM: seconds per call of the fast (or exact) kernel, each call
 * waited for, after a warm-up (bench/bench_cl_gemm.h). */
static double cl_gemm_seconds(bench_cl_gemm *g, bool exact, int reps)
{
    double t0 = 0;
    for (int r = -1; r < reps; r++) {
        if (r == 0) t0 = dr_now();
        if ((exact ? bench_cl_gemm_run_exact(g) : bench_cl_gemm_run(g)) != 0) return -1;
    }
    return (dr_now() - t0) / reps;
}

static double sgemm_seconds(uint32_t M, uint32_t K, uint32_t N, int threads, int reps)
{
    float *a = calloc((size_t)M * K, 4), *b = calloc((size_t)K * N, 4), *c = calloc((size_t)M * N, 4);
    double t0, t = -1;
    if (a && b && c) {
        openblas_set_num_threads(threads);
        for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 1000) * 1e-3f;
        for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(i % 997) * 1e-3f;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1, a, (int)K, b, (int)N, 0, c, (int)N);
        t0 = dr_now();
        for (int r = 0; r < reps; r++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1, a, (int)K, b, (int)N, 0, c,
                        (int)N);
        t = (dr_now() - t0) / reps;
        openblas_set_num_threads(1);
    }
    free(a); free(b); free(c);
    return t;
}

int main(int argc, char **argv)
{
    char blas[128];   /* bench_blas_kernels */
    static const row rows[] = {
        { "ref", "exact", "one_device", 0, NULL },
        { "openmp", "exact", "one_device", 0, NULL }, { "opencl", "exact", "one_device", 0, "auto" },
        { "openmp", "exact", "mirrored", 2, NULL }, { "opencl", "exact", "mirrored", 2, "shared" },
        { "opencl", "exact", "mirrored", 2, "queues" }, { "opencl", "exact", "mirrored", 2, "subdevices" },
        { "openmp", "fast", "one_device", 0, NULL }, { "opencl", "fast", "one_device", 0, "auto" },
        { "openmp", "fast", "mirrored", 2, NULL }, { "opencl", "fast", "mirrored", 2, "shared" },
        { "opencl", "fast", "mirrored", 2, "queues" }, { "opencl", "fast", "mirrored", 2, "subdevices" },
    };
    enum { NROWS = sizeof rows / sizeof rows[0] };
    const uint32_t M = 256, K = 784, N = 128;
    uint64_t steps = 80;
    FILE *json = NULL;
    char ref_sha[65] = "";
    double omp_rate = 0;
    dr_backend_params sel = { .numerics = DR_NUMERICS_FAST, .places = 1, .platform = -1, .mapping = "shared" };
    dr_err err;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) json = fopen(argv[++i], "w");
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = strtoull(argv[++i], NULL, 10);
        else { fprintf(stderr, "usage: bench_opencl [--json FILE] [--steps N]\n"); return 2; }
    }
    if (steps < 8) steps = 8;
    if (dr_backend_opencl()->available(&sel, &err) != DR_OK) {
        printf("# opencl: skipped: %s\n", err.msg);
        if (json) { fputs("[]\n", json); fclose(json); }
        return 0;
    }
    printf("# opencl vs openmp, mlp_synthetic G=64, %llu steps less %llu; %s\n",
           (unsigned long long)steps, (unsigned long long)steps / 4, bench_blas_kernels(blas, sizeof blas));
    printf("# %-7s %-6s %-11s %4s %-10s %10s %12s %10s %7s\n", "variant", "mode", "strategy", "gpus", "mapping",
           "seconds", "examples/s", "vs_openmp", "#wrong");
    if (json) fputs("[\n", json);
    for (size_t i = 0; i < NROWS; i++) {
        char sha[65], sha4[65];
        uint64_t n = steps - steps / 4;
        double a = run(&rows[i], steps / 4, sha4), b = run(&rows[i], steps, sha);
        /* b - a at or below 0 (noise on a busy machine): b itself, an upper bound */
        double s = a < 0 || b < 0 ? -1 : b - a > 0 ? b - a : b, rate = s > 0 ? (double)n * 64 / s : 0;
        int wrong, cl = !strcmp(rows[i].variant, "opencl");
        if (!strcmp(rows[i].variant, "ref")) memcpy(ref_sha, sha, 65);
        if (!strcmp(rows[i].variant, "openmp")) omp_rate = rate;
        wrong = !strcmp(rows[i].numerics, "exact") && strcmp(sha, ref_sha) != 0;
        printf("  %-7s %-6s %-11s %4d %-10s %10.2f %12.0f %10.3f %7d\n", rows[i].variant, rows[i].numerics,
               rows[i].strategy, rows[i].gpus, rows[i].mapping ? rows[i].mapping : "-", s, rate, cl && omp_rate > 0 ? rate / omp_rate : 1.0, wrong);
        if (json)
            fprintf(json, "%s{\"bench\":\"opencl_train\",\"variant\":\"%s\",\"numerics\":\"%s\",\"strategy\":\"%s\","
                    "\"gpus\":%d,\"mapping\":\"%s\",\"examples_per_s\":%.1f,\"ratio_vs_openmp\":%.4f,\"wrong\":%d}",
                    i ? ",\n" : "", rows[i].variant, rows[i].numerics, rows[i].strategy, rows[i].gpus,
                    rows[i].mapping ? rows[i].mapping : "-", rate,
                    cl && omp_rate > 0 ? rate / omp_rate : 1.0, wrong);
    }
    {
        float *h = malloc(((size_t)M * K + (size_t)K * N) * sizeof *h);
        bench_cl_gemm *g = NULL;
        double gf = 2.0 * M * N * K * 1e-9;
        for (size_t i = 0; h && i < (size_t)M * K + (size_t)K * N; i++) h[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
        if (!h || !(g = bench_cl_gemm_open(M, K, N, h, h + (size_t)M * K))) {
            printf("# opencl GEMM: not measured (see above)\n");
        } else {
            double tf = cl_gemm_seconds(g, false, 20), tx = cl_gemm_seconds(g, true, 2);
            double s1 = sgemm_seconds(M, K, N, 1, 50), s2 = sgemm_seconds(M, K, N, 2, 50);
            printf("# GEMM %ux%ux%u on %s: opencl fast %.3f ms (%.1f GFLOP/s), exact %.1f ms; cblas_sgemm "
                   "1 thread %.3f ms (%.1f GFLOP/s), 2 threads %.3f ms (%.1f GFLOP/s)\n", M, K, N, g->b->devs[0].caps.name,
                   1e3 * tf, gf / tf, 1e3 * tx, 1e3 * s1, gf / s1, 1e3 * s2, gf / s2);
            printf("# opencl fast GEMM / cblas_sgemm: %.3fx (1 thread), %.3fx (2 threads); target >= 0.3x\n",
                   s1 / tf, s2 / tf);
            if (json)
                fprintf(json, ",\n{\"bench\":\"opencl_gemm\",\"m\":%u,\"k\":%u,\"n\":%u,\"opencl_fast_s\":%.9g,"
                        "\"opencl_exact_s\":%.9g,\"sgemm1_s\":%.9g,\"sgemm2_s\":%.9g,\"ratio_1\":%.4f,\"ratio_2\":%.4f}",
                        M, K, N, tf, tx, s1, s2, s1 / tf, s2 / tf);
        }
        bench_cl_gemm_close(g);
        free(h);
    }
    if (json) { fputs("\n]\n", json); fclose(json); }
    return 0;
}
