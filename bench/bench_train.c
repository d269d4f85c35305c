/* distref bench — end-to-end training throughput of each variant against
 * the reference, measured in one run (ratios, because 2-core CI machines are
 * noisy). Each line trains mlp_synthetic for a fixed number of steps and
 * checks its weights_sha256 against the reference's (#wrong counts exact-mode
 * runs whose bits differ: must be 0; fast mode is expected to differ).
 *
 * Then the roofline of fast mode: the step's five GEMMs alone (cblas_sgemm on
 * the same shapes: forward 64x784x128 and 64x128x10, backward the two
 * kernel gradients 784x64x128 and 128x64x10 and the delta 64x10x128), one
 * OpenBLAS thread, timed in the same run, and fast one_device's step time
 * on one thread divided by it.
 *
 * Each rate is the steps' own: a run of N/4 steps is subtracted from a run
 * of N (start-up: synthetic data, initialization, the final checkpoint).
 * Then the ratios the speed issue tracks: exact / fast examples/s, 2
 * threads / 1 thread at G=256, the accumulator state per parameter
 * (sizeof(dr_acc), a replica's share in exact numerics; fast numerics keeps
 * one float) and the process's peak RSS.
 *
 *   bench_train [--json FILE] [--steps N]
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/resource.h>

#include "bench/bench_common.h"
#include "distref/cacc.h"
#include "distref/exact.h"
#include "distref/factory.h"
#include "distref/harness.h"
#include "distref/train.h"

typedef struct row { const char *variant, *numerics, *strategy; int gpus, threads, G; } row;

static double run(const row *w, uint64_t steps, char sha[65])
{
    return bench_train_run("bench_train", w->variant, w->numerics, w->strategy, w->gpus, (uint32_t)w->G, steps,
                           w->threads, sha);
}

void openblas_set_num_threads(int);   /* OpenBLAS extensions */
int  openblas_get_num_threads(void);

/* Seconds per step of the 784-128-10 MLP's five GEMMs at G = 64 (sgemm,
 * one OpenBLAS thread; the caller's setting restored). */
static double gemm_step_seconds(void)
{
    enum { NG = 64, NI = 784, NH = 128, NO = 10, REPS = 400 };
    float *x = calloc((size_t)NG * NI, 4), *w1 = calloc((size_t)NI * NH, 4), *w2 = calloc((size_t)NH * NO, 4);
    float *a1 = calloc((size_t)NG * NH, 4), *z2 = calloc((size_t)NG * NO, 4), *g1 = calloc((size_t)NI * NH, 4);
    float *g2 = calloc((size_t)NH * NO, 4), *d1 = calloc((size_t)NG * NH, 4);
    int saved = openblas_get_num_threads();
    double t0, best = 0;
    if (!x || !w1 || !w2 || !a1 || !z2 || !g1 || !g2 || !d1) return 0;
    for (size_t i = 0; i < (size_t)NG * NI; i++) x[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)NI * NH; i++) w1[i] = (float)(i % 5) * 0.01f;
    for (size_t i = 0; i < (size_t)NH * NO; i++) w2[i] = (float)(i % 3) * 0.01f;
    openblas_set_num_threads(1);
    for (int round = 0; round < 3; round++) {   /* the best of three rounds */
        double t;
        t0 = dr_now();
        for (int r = 0; r < REPS; r++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, NG, NH, NI, 1, x, NI, w1, NH, 0, a1, NH);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, NG, NO, NH, 1, a1, NH, w2, NO, 0, z2, NO);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NH, NO, NG, 1, a1, NH, z2, NO, 0, g2, NO);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, NG, NH, NO, 1, z2, NO, w2, NO, 0, d1, NH);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NI, NH, NG, 1, x, NI, d1, NH, 0, g1, NH);
        }
        t = (dr_now() - t0) / REPS;
        if (round == 0 || t < best) best = t;
    }
    openblas_set_num_threads(saved);
    free(x); free(w1); free(w2); free(a1); free(z2); free(g1); free(g2); free(d1);
    return best;
}

/* The steps' own seconds: N steps less N/4 steps (both include start-up). */
static double steps_seconds(const row *w, uint64_t steps, char sha[65])
{
    char sha_short[65];
    double a = run(w, steps / 4, sha_short), b = run(w, steps, sha);
    return a < 0 || b < 0 ? -1 : b - a > 0 ? b - a : 1e-9;
}

static double rate_of(const row *rows, size_t n, const double *rate, const char *num, const char *strat, int thr, int G)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].numerics, num) && !strcmp(rows[i].strategy, strat) && rows[i].threads == thr &&
            rows[i].G == G && strcmp(rows[i].variant, "ref") != 0)
            return rate[i];
    return 0;
}

int main(int argc, char **argv)
{
    static const row rows[] = {
        { "ref", "exact", "one_device", 0, 1, 64 },
        { "openmp", "exact", "one_device", 0, 1, 64 }, { "openmp", "exact_full", "one_device", 0, 1, 64 },
        { "openmp", "exact", "one_device", 0, 2, 64 },
        { "openmp", "exact", "mirrored", 2, 2, 64 }, { "openmp", "exact_full", "mirrored", 2, 2, 64 },
        { "openmp", "fast", "one_device", 0, 1, 64 }, { "openmp", "fast", "one_device", 0, 2, 64 },
        { "openmp", "fast", "mirrored", 2, 2, 64 },
        { "ref", "exact", "one_device", 0, 1, 256 },
        { "openmp", "exact", "one_device", 0, 1, 256 }, { "openmp", "exact_full", "one_device", 0, 1, 256 },
        { "openmp", "exact", "one_device", 0, 2, 256 },
        { "openmp", "exact", "mirrored", 2, 2, 256 },
        { "openmp", "fast", "one_device", 0, 1, 256 }, { "openmp", "fast", "one_device", 0, 2, 256 },
        { "openmp", "fast", "mirrored", 2, 2, 256 },
    };
    enum { NROWS = sizeof rows / sizeof rows[0] };
    double rates[NROWS];
    uint64_t steps = 80;
    FILE *json = NULL;
    char ref_sha[65] = "";
    double ref_rate = 0;
    char blas[128];
    dr_omp_short_spin_reexec(argv);   /* the policy bin/distref runs with (harness/omp_policy.c) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) json = fopen(argv[++i], "w");
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = strtoull(argv[++i], NULL, 10);
        else { fprintf(stderr, "usage: bench_train [--json FILE] [--steps N]\n"); return 2; }
    }
    if (steps < 8) steps = 8;
    printf("# training throughput, mlp_synthetic, %llu steps less %llu (start-up removed); "
           "ratio = examples/s / ref's at the same G; %s, GOMP_SPINCOUNT=%s\n", (unsigned long long)steps,
           (unsigned long long)steps / 4, bench_blas_kernels(blas, sizeof blas),
           getenv("GOMP_SPINCOUNT") ? getenv("GOMP_SPINCOUNT") : "(unset)");
    printf("# %-7s %-10s %-11s %4s %4s %4s %10s %12s %8s %7s\n", "variant", "mode", "strategy", "gpus", "thr", "G",
           "seconds", "examples/s", "vs_ref", "#wrong");
    if (json) fputs("[\n", json);
    double fast1_step = 0;
    for (size_t i = 0; i < NROWS; i++) {
        char sha[65];
        uint64_t n = steps - steps / 4;
        double s = steps_seconds(&rows[i], steps, sha), rate = s > 0 ? (double)n * rows[i].G / s : 0;
        if (!strcmp(rows[i].numerics, "fast") && !strcmp(rows[i].strategy, "one_device") && rows[i].threads == 1 &&
            rows[i].G == 64)
            fast1_step = s / (double)n;
        int wrong;
        if (!strcmp(rows[i].variant, "ref")) { ref_rate = rate; memcpy(ref_sha, sha, 65); }
        wrong = strncmp(rows[i].numerics, "exact", 5) == 0 && strcmp(sha, ref_sha) != 0;
        rates[i] = rate;
        printf("  %-7s %-10s %-11s %4d %4d %4d %10.2f %12.0f %8.2f %7d\n", rows[i].variant, rows[i].numerics,
               rows[i].strategy, rows[i].gpus, rows[i].threads, rows[i].G, s, rate, ref_rate > 0 ? rate / ref_rate : 0,
               wrong);
        if (json)
            fprintf(json, "%s{\"bench\":\"train\",\"variant\":\"%s\",\"numerics\":\"%s\",\"strategy\":\"%s\","
                    "\"threads\":%d,\"global_batch\":%d,\"examples_per_s\":%.1f,\"ratio_vs_ref\":%.3f,\"wrong\":%d}",
                    i ? ",\n" : "", rows[i].variant, rows[i].numerics, rows[i].strategy, rows[i].threads, rows[i].G,
                    rate, ref_rate > 0 ? rate / ref_rate : 0, wrong);
    }
    {
        struct rusage ru;
        double e64 = rate_of(rows, NROWS, rates, "exact", "one_device", 1, 64);
        double f64 = rate_of(rows, NROWS, rates, "fast", "one_device", 1, 64);
        double e1 = rate_of(rows, NROWS, rates, "exact", "one_device", 1, 256);
        double e2 = rate_of(rows, NROWS, rates, "exact", "one_device", 2, 256);
        double f1 = rate_of(rows, NROWS, rates, "fast", "one_device", 1, 256);
        double f2 = rate_of(rows, NROWS, rates, "fast", "one_device", 2, 256);
        getrusage(RUSAGE_SELF, &ru);
        printf("# exact / fast examples/s: %.3f (G=64, 1 thread), %.3f (G=256, 1 thread)\n",
               f64 > 0 ? e64 / f64 : 0, f1 > 0 ? e1 / f1 : 0);
        printf("# 2 threads / 1 thread, G=256: fast %.2fx, exact %.2fx\n", f1 > 0 ? f2 / f1 : 0, e1 > 0 ? e2 / e1 : 0);
        double c64 = rate_of(rows, NROWS, rates, "exact_full", "one_device", 1, 64);
        double c256 = rate_of(rows, NROWS, rates, "exact_full", "one_device", 1, 256);
        printf("# compact / full accumulators, exact examples/s, 1 thread: %.2fx (G=64), %.2fx (G=256)\n",
               c64 > 0 ? e64 / c64 : 0, c256 > 0 ? e1 / c256 : 0);
        printf("# accumulator state per parameter: exact %zu bytes (dr_cacc; dr_acc's %zu only for a step that "
               "overflows it), fast %zu bytes (float); peak RSS %.1f MB\n", sizeof(dr_cacc), sizeof(dr_acc),
               sizeof(float), (double)ru.ru_maxrss / 1024.0);
        if (json)
            fprintf(json, ",\n{\"bench\":\"train_ratios\",\"exact_over_fast_g64\":%.4f,\"exact_over_fast_g256\":%.4f,"
                    "\"threads2_over_1_fast_g256\":%.3f,\"threads2_over_1_exact_g256\":%.3f,"
                    "\"acc_bytes_per_param\":%zu,\"compact_over_full_g64\":%.3f,\"peak_rss_mb\":%.1f}",
                    f64 > 0 ? e64 / f64 : 0, f1 > 0 ? e1 / f1 : 0, f1 > 0 ? f2 / f1 : 0, e1 > 0 ? e2 / e1 : 0,
                    sizeof(dr_cacc), c64 > 0 ? e64 / c64 : 0,
                    (double)ru.ru_maxrss / 1024.0);
    }
    {
        double g = gemm_step_seconds();
        printf("# fast one_device 1 thread: %.1f us/step; its five sgemms alone %.1f us/step; "
               "step / GEMMs = %.2fx\n", 1e6 * fast1_step, 1e6 * g, g > 0 ? fast1_step / g : 0);
        if (json)
            fprintf(json, ",\n{\"bench\":\"train_roofline\",\"fast_step_s\":%.9g,\"gemm_step_s\":%.9g,"
                    "\"step_over_gemms\":%.3f}", fast1_step, g, g > 0 ? fast1_step / g : 0);
    }
    if (json) { fputs("\n]\n", json); fclose(json); }
    return 0;
}
