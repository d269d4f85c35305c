/* distref bench — what every bench program shares: the core's monotonic
 * clock (dr_now, distref/run_log.h), CPU seconds, a qsort comparison for
 * medians, the OpenBLAS kernels in use, and one training run in a scratch
 * folder. */
#ifndef DISTREF_BENCH_COMMON_H
#define DISTREF_BENCH_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "distref/factory.h"
#include "distref/harness.h"
#include "distref/rng.h"
#include "distref/run_log.h"
#include "distref/train.h"

/* What every figure must say about OpenBLAS (docs/PERFORMANCE.md): the
 * OPENBLAS_CORETYPE the user set, and the kernels the library runs with
 * it (openblas_get_corename, an OpenBLAS extension): on one machine they
 * can differ 1.7-1.9x in sgemm's speed, and fast mode's bits can depend
 * on them. In a buffer of the caller's. */
static inline const char *bench_blas_kernels(char *buf, size_t cap)
{
    const char *env = getenv("OPENBLAS_CORETYPE");
    snprintf(buf, cap, "OPENBLAS_CORETYPE=%s (kernels: %s)", env ? env : "(unset)", openblas_get_corename());
    return buf;
}

/* The exact gradient all-reduce's bench data (bench/mpi_allreduce's grad
 * column, bench/nightly_mpi's _grad_ rows): rank w's partial of element i
 * is BENCH_GRAD_K products; product k's factors span about 12 binades, as
 * a gradient's activations and deltas. */
#define BENCH_GRAD_K 8
static inline void bench_grad_factors(uint32_t w, size_t i, int k, float *a, float *b)
{
    uint64_t j = (uint64_t)i * BENCH_GRAD_K + (uint64_t)k;
    *a = (dr_rng_uniform(2027, w, j) - 0.5f) * (float)(1u << (j % 7));
    *b = (dr_rng_uniform(2028, w, j) - 0.25f) * 0x1p-5f * (float)(1u << (i % 6));
}

/* CPU seconds on clock id: CLOCK_PROCESS_CPUTIME_ID (every thread of the
 * process) or CLOCK_THREAD_CPUTIME_ID (the calling thread's alone). */
static inline double bench_cpu_seconds(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* DISTREF_NIGHTLY_PLANT=NAME:FRACTION (docs/NIGHTLY.md): the metric to
 * slow down and by how much. Unset or "": nothing planted (name "", 0).
 * Returns 0, or 2 with a message on stderr prefixed with prog. */
static inline int bench_parse_plant(const char *prog, const char *env, char *name, size_t cap, double *fraction)
{
    const char *colon = env ? strrchr(env, ':') : NULL;
    size_t len = colon ? (size_t)(colon - env) : 0;
    name[0] = '\0';
    *fraction = 0;
    if (!env || !*env) return 0;
    if (!colon || len == 0 || len >= cap || (*fraction = atof(colon + 1)) <= 0 || *fraction > 10) {
        fprintf(stderr, "%s: DISTREF_NIGHTLY_PLANT must be NAME:FRACTION (0 < FRACTION <= 10)\n", prog);
        return 2;
    }
    memcpy(name, env, len);
    name[len] = '\0';
    return 0;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A training run as the benches time it: mlp_synthetic on 4096 synthetic
 * examples, `steps` steps of global batch G under `strategy` (num_gpus
 * emulated GPUs) on `threads` OpenMP threads (0: OpenMP's default), in a
 * scratch folder removed afterwards; tweak (may be NULL) sets the run's
 * training features (bench/bench_features.c). Returns the run's seconds
 * (start-up included) and its weights_sha256 in sha (may be NULL), or -1
 * with the error in why (may be NULL; else on stderr, prefixed with prog). */
static inline double bench_train_run_with(const char *prog, const char *variant, const char *numerics,
                                          const char *strategy, int num_gpus, uint32_t G, uint64_t steps, int threads,
                                          void (*tweak)(dr_run_config *), char sha[65], char *why, size_t why_cap)
{
    dr_run_config c;
    dr_run_result res;
    dr_err err;
    char dir[] = "/tmp/distref_bench_XXXXXX", cmd[128];
    dr_run_config_defaults(&c);
    c.synthetic_examples = 4096;
    c.global_batch_size = G;
    c.train_steps = steps;
    snprintf(c.variant, sizeof c.variant, "%s", variant);
    /* "exact_full": exact with the gradients in dr_acc (--exact_accumulator=full) */
    c.full_accumulators = strcmp(numerics, "exact_full") == 0;
    snprintf(c.numerics, sizeof c.numerics, "%s", c.full_accumulators ? "exact" : numerics);
    c.threads = threads;
    if (tweak) tweak(&c);
    if (!mkdtemp(dir)) return -1;
    snprintf(c.model_dir, sizeof c.model_dir, "%s", dir);
    int rc = dr_get_distribution_strategy(strategy, num_gpus, NULL, 1, NULL, &c.strategy, &err);
    if (!rc) rc = dr_run_train(&c, &res, &err);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "%s: could not remove %s\n", prog, dir);
    if (rc) {
        if (why) snprintf(why, why_cap, "%.*s", (int)(why_cap ? why_cap - 1 : 0), err.msg);
        else fprintf(stderr, "%s: %s\n", prog, err.msg);
        return -1;
    }
    if (sha) memcpy(sha, res.weights_sha256, 65);
    return res.seconds;
}

static inline double bench_train_run(const char *prog, const char *variant, const char *numerics,
                                     const char *strategy, int num_gpus, uint32_t G, uint64_t steps, int threads,
                                     char sha[65])
{
    return bench_train_run_with(prog, variant, numerics, strategy, num_gpus, G, steps, threads, NULL, sha, NULL, 0);
}

#endif
