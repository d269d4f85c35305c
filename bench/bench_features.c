/* distref bench — what each training feature costs (issue 30): the
 * examples/s of a run with the feature over the same run without it,
 * measured in the same process, interleaved, the best of five rounds.
 *
 * Features: a cosine schedule with warmup, global_clipnorm, clipnorm (per
 * variable), the per-replica clip (--clip_semantics=tensorflow) and
 * gradient accumulation over k = 4 micro-batches (each micro-batch G/4,
 * 4x the steps: the same examples per update), mixed_float16 and
 * mixed_bfloat16 with a dynamic loss scale (their exact mixed kernels run
 * in both numerics: docs/TRAINING_FEATURES.md). Each on the openmp variant,
 * exact and fast, one_device (1 thread) and mirrored R=2 (2 threads), G=64,
 * mlp_synthetic. #wrong counts exact runs whose weights differ from the
 * reference's with the same feature and strategy (must be 0); a feature the
 * variant does not run prints "not supported" and the reason.
 *
 *   bench_features [--json FILE] [--steps N]
 *
 * Every rate is the steps' own: a run of N/4 steps subtracted from a run of
 * N (start-up removed), as bench_train does.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_common.h"

typedef struct feature {
    const char *name;
    void (*tweak)(dr_run_config *c);
    uint32_t k;   /* micro-batches per update: G/k examples a step, k times the steps */
} feature;

static void f_none(dr_run_config *c) { (void)c; }
static void f_cosine(dr_run_config *c)
{
    c->lr_schedule.kind = DR_LR_COSINE;
    c->lr_schedule.warmup_steps = 5;
    c->lr_schedule.decay_steps = 100;
    c->lr_schedule.alpha = 0.1f;
}
static void f_global(dr_run_config *c) { c->clip.global_clipnorm = 0.05f; }
static void f_clipnorm(dr_run_config *c) { c->clip.clipnorm = 0.02f; }
static void f_per_replica(dr_run_config *c) { c->clip.global_clipnorm = 0.05f; c->clip.per_replica = true; }
static void f_accum4(dr_run_config *c) { c->gradient_accumulation_steps = 4; }
static void f_mixed(dr_run_config *c, dr_dtype t)
{
    c->mixed.compute = t;
    c->mixed.loss_scale = DR_LOSS_SCALE_DYNAMIC;
}
static void f_float16(dr_run_config *c) { f_mixed(c, DR_DTYPE_F16); }
static void f_bfloat16(dr_run_config *c) { f_mixed(c, DR_DTYPE_BF16); }

static const feature k_features[] = {
    { "cosine+warmup", f_cosine, 1 }, { "global_clipnorm", f_global, 1 }, { "clipnorm", f_clipnorm, 1 },
    { "clip_per_replica", f_per_replica, 1 }, { "accumulate_k4", f_accum4, 4 },
    { "mixed_float16", f_float16, 1 }, { "mixed_bfloat16", f_bfloat16, 1 },
};

typedef struct place { const char *strategy; int gpus, threads; } place;
static const place k_places[] = { { "one_device", 0, 1 }, { "mirrored", 2, 2 } };

enum { G = 64, ROUNDS = 5 };

/* The seconds of one run of a configuration: n updates (n * k micro-steps
 * of G/k), start-up included, or -1 with the reason in why. */
static double run_seconds(const char *variant, const char *num, const place *p, const feature *f, uint64_t n,
                          char sha[65], char *why, size_t cap)
{
    return bench_train_run_with("bench_features", variant, num, p->strategy, p->gpus, G / f->k, n * f->k, p->threads,
                                f->tweak, sha, why, cap);
}

/* The steps' own seconds: the best long run (steps updates) less the best
 * short one (steps/4), each the minimum over the rounds (noise only adds
 * time), base and feature interleaved; -1 with why when either fails. */
static int best_seconds(const char *num, const place *p, const feature *f, uint64_t steps, double *base, double *feat,
                        char sha[65], char *why, size_t cap)
{
    static const feature none = { "none", f_none, 1 };
    const feature *fs[2] = { &none, f };
    double best[2][2] = { { 0, 0 }, { 0, 0 } };   /* [base|feature][short|long] */
    for (int r = 0; r < ROUNDS; r++)
        for (int w = 0; w < 2; w++)
            for (int l = 0; l < 2; l++) {
                double t = run_seconds("openmp", num, p, fs[w], l ? steps : steps / 4, w && l ? sha : NULL, why, cap);
                if (t < 0) return -1;
                if (r == 0 || t < best[w][l]) best[w][l] = t;
            }
    *base = best[0][1] - best[0][0] > 0 ? best[0][1] - best[0][0] : 1e-9;
    *feat = best[1][1] - best[1][0] > 0 ? best[1][1] - best[1][0] : 1e-9;
    return 0;
}

/* One row: the feature's cost on (num, place); prints it and its JSON. */
static void row(FILE *json, bool *first, const char *num, const place *p, const feature *f, uint64_t steps)
{
    char sha[65] = "", ref_sha[65] = "", why[256] = "";
    double best_base, best_feat;
    if (best_seconds(num, p, f, steps, &best_base, &best_feat, sha, why, sizeof why)) {
        printf("  %-17s %-6s %-11s %4d %4d  not supported: %.120s\n", f->name, num, p->strategy, p->threads, G, why);
        return;
    }
    int wrong = 0;
    if (strcmp(num, "exact") == 0) {
        if (run_seconds("ref", "exact", p, f, steps, ref_sha, why, sizeof why) < 0) ref_sha[0] = '\0';
        wrong = strcmp(sha, ref_sha) != 0;
    }
    double ex = (double)(steps - steps / 4) * G;   /* the same examples with and without the feature */
    double base_rate = ex / best_base, feat_rate = ex / best_feat;
    printf("  %-17s %-6s %-11s %4d %4d %12.0f %12.0f %8.3f %7d\n", f->name, num, p->strategy, p->threads, G,
           base_rate, feat_rate, feat_rate / base_rate, wrong);
    if (json)
        fprintf(json, "%s{\"bench\":\"features\",\"feature\":\"%s\",\"numerics\":\"%s\",\"strategy\":\"%s\","
                "\"threads\":%d,\"global_batch\":%d,\"base_examples_per_s\":%.1f,\"examples_per_s\":%.1f,"
                "\"ratio\":%.4f,\"wrong\":%d}", *first ? "" : ",\n", f->name, num, p->strategy, p->threads, G,
                base_rate, feat_rate, feat_rate / base_rate, wrong);
    *first = false;
}

int main(int argc, char **argv)
{
    char blas[128];   /* bench_blas_kernels */
    uint64_t steps = 80;
    FILE *json = NULL;
    bool first = true;
    dr_omp_short_spin_reexec(argv);   /* the policy bin/distref runs with (harness/omp_policy.c) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            if (!(json = fopen(argv[++i], "w"))) { fprintf(stderr, "bench_features: cannot write %s\n", argv[i]); return 2; }
        } else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
            steps = strtoull(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "usage: bench_features [--json FILE] [--steps N]\n");
            return 2;
        }
    }
    if (steps < 8) steps = 8;
    printf("# training features' cost, openmp, mlp_synthetic G=%d, %llu updates less %llu, best of %d interleaved "
           "rounds; ratio = examples/s with / without; %s\n", G, (unsigned long long)steps,
           (unsigned long long)steps / 4, ROUNDS, bench_blas_kernels(blas, sizeof blas));
    printf("# %-17s %-6s %-11s %4s %4s %12s %12s %8s %7s\n", "feature", "mode", "strategy", "thr", "G", "base ex/s",
           "feature ex/s", "ratio", "#wrong");
    if (json) fputs("[\n", json);
    for (size_t f = 0; f < sizeof k_features / sizeof *k_features; f++)
        for (size_t m = 0; m < 2; m++)
            for (size_t p = 0; p < sizeof k_places / sizeof *k_places; p++)
                row(json, &first, m ? "fast" : "exact", &k_places[p], &k_features[f], steps);
    if (json) { fputs("\n]\n", json); fclose(json); }
    return 0;
}
