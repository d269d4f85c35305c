/* distref bench — end-to-end training throughput of each variant against
 * the reference, measured in one run (ratios, because 2-core CI machines are
 * noisy). Each line trains mlp_synthetic for a fixed number of steps and
 * checks its weights_sha256 against the reference's (#wrong counts exact-mode
 * runs whose bits differ: must be 0; fast mode is expected to differ).
 *
 *   bench_train [--json FILE] [--steps N]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distref/factory.h"
#include "distref/harness.h"
#include "distref/train.h"

typedef struct row { const char *variant, *numerics, *strategy; int gpus, threads; } row;

static double run(const row *w, uint64_t steps, char sha[65])
{
    dr_run_config c;
    dr_run_result res;
    dr_err err;
    char dir[] = "/tmp/distref_bench_XXXXXX", cmd[128];
    dr_run_config_defaults(&c);
    c.synthetic_examples = 4096;
    c.global_batch_size = 64;
    c.train_steps = steps;
    strcpy(c.variant, w->variant);
    strcpy(c.numerics, w->numerics);
    c.threads = w->threads;
    if (!mkdtemp(dir)) return -1;
    strcpy(c.model_dir, dir);
    if (dr_get_distribution_strategy(w->strategy, w->gpus, NULL, 1, NULL, &c.strategy, &err) ||
        dr_run_train(&c, &res, &err)) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return -1;
    }
    memcpy(sha, res.weights_sha256, 65);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench_train: could not remove %s\n", dir);
    return res.seconds;
}

int main(int argc, char **argv)
{
    static const row rows[] = {
        { "ref", "exact", "one_device", 0, 1 },
        { "openmp", "exact", "one_device", 0, 1 }, { "openmp", "exact", "one_device", 0, 2 },
        { "openmp", "exact", "mirrored", 2, 2 },
        { "openmp", "fast", "one_device", 0, 1 }, { "openmp", "fast", "one_device", 0, 2 },
        { "openmp", "fast", "mirrored", 2, 2 },
    };
    uint64_t steps = 40;
    FILE *json = NULL;
    char ref_sha[65] = "";
    double ref_rate = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) json = fopen(argv[++i], "w");
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = strtoull(argv[++i], NULL, 10);
        else { fprintf(stderr, "usage: bench_train [--json FILE] [--steps N]\n"); return 2; }
    }
    printf("# training throughput, mlp_synthetic, G=64, %llu steps; ratio = examples/s / ref's\n",
           (unsigned long long)steps);
    printf("# %-7s %-6s %-11s %4s %4s %10s %12s %8s %7s\n", "variant", "mode", "strategy", "gpus", "thr",
           "seconds", "examples/s", "vs_ref", "#wrong");
    if (json) fputs("[\n", json);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char sha[65];
        double s = run(&rows[i], steps, sha), rate = s > 0 ? (double)steps * 64 / s : 0;
        int wrong;
        if (i == 0) { ref_rate = rate; memcpy(ref_sha, sha, 65); }
        wrong = !strcmp(rows[i].numerics, "exact") && strcmp(sha, ref_sha) != 0;
        printf("  %-7s %-6s %-11s %4d %4d %10.2f %12.0f %8.2f %7d\n", rows[i].variant, rows[i].numerics,
               rows[i].strategy, rows[i].gpus, rows[i].threads, s, rate, ref_rate > 0 ? rate / ref_rate : 0, wrong);
        if (json)
            fprintf(json, "%s{\"bench\":\"train\",\"variant\":\"%s\",\"numerics\":\"%s\",\"strategy\":\"%s\","
                    "\"threads\":%d,\"examples_per_s\":%.1f,\"ratio_vs_ref\":%.3f,\"wrong\":%d}",
                    i ? ",\n" : "", rows[i].variant, rows[i].numerics, rows[i].strategy, rows[i].threads,
                    rate, ref_rate > 0 ? rate / ref_rate : 0, wrong);
    }
    if (json) { fputs("\n]\n", json); fclose(json); }
    return 0;
}
