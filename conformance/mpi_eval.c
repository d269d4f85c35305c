/* distref conformance — suite mpi's evaluate cells: `evaluate
 * --variant=mpi` across MPI ranks (harness/run_evaluate.c, the mpi
 * variant's share and combine in strategies/evaluate.c).
 *
 * Each cell trains a checkpoint (bin/distref train --variant=openmp, a few
 * steps), evaluates it in one process (--variant=openmp: the oracle), then
 * under `mpirun -np W ... evaluate --variant=mpi` for each W of the cell,
 * each rank a contiguous run of the global batches and the loss sums
 * combined by the exact all-reduce of accumulators: rank 0's eval.json
 * must be the one-process file byte for byte (loss bits, accuracy,
 * examples), and exactly one rank must print the result line. The shapes:
 * a batch count W does not divide, W above the batch count (empty ranks,
 * rank 0's among them), a short final batch, a Dense model and a graph
 * one (cnn_synthetic: BatchNormalization's moving statistics, Dropout off).
 * Predict the same way: each rank predicts its share, rank 0 gathers the
 * lines in rank order, and predictions.jsonl must be the one-process file
 * (-np 2 and 3 over 8 batches, -np 3 over 2 with rank 0 empty).
 * Mutants (scripts/run_conformance_mutants.sh): a rank's share starting a
 * batch late (mpi_eval_share); a rank's loss sum rounded to a float before
 * the all-reduce (mpi_eval_rounded: the G=5 cell's -np 2 shows it); the
 * ranks' predictions gathered last rank first (mpi_eval_gather_reversed).
 */
#ifndef DR_BIN
#define DR_BIN "bin/distref"   /* the Makefile passes its build's CLI */
#endif
#include "conformance/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENV "env -u TF_CONFIG OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "

typedef struct eval_cell {
    const char *experiment;
    uint32_t    G, steps;     /* the test set (58 examples at 230) in batches of G */
    uint32_t    np[2];        /* the rank counts evaluated (0: none) */
    const char *command;      /* evaluate or predict */
} eval_cell;

static const eval_cell k_eval[] = {
    { "mlp_synthetic", 37, 5, { 2, 3 }, "evaluate" },   /* 2 batches (37, 21): -np 3 leaves rank 0 empty */
    { "mlp_synthetic", 8, 5, { 3, 0 }, "evaluate" },    /* 8 batches (the last 2 examples): 2, 3, 3 */
    /* 12 batches (the last 3 examples): 6 + 6, 3 x 4. A partial rounded to a float moves the mean by less
     * than half its ulp in most shapes; here under -np 2 it moves the loss bits (mutant mpi_eval_rounded). */
    { "mlp_synthetic", 5, 5, { 2, 4 }, "evaluate" },
    { "cnn_synthetic", 8, 3, { 2, 3 }, "evaluate" },
    { "mlp_synthetic", 8, 5, { 2, 3 }, "predict" },
    { "mlp_synthetic", 37, 5, { 3, 0 }, "predict" },
};

/* A whole small file into buf (NUL-terminated); false when unreadable. */
static bool slurp(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    size_t len;
    if (!f) return false;
    len = fread(buf, 1, n - 1, f);
    buf[len] = '\0';
    fclose(f);
    return true;
}

static unsigned count_lines(const char *text, const char *prefix)
{
    unsigned k = 0;
    for (const char *p = text; (p = strstr(p, prefix)); p += strlen(prefix)) k += p == text || p[-1] == '\n';
    return k;
}

/* `[mpirun -np W] distref COMMAND --variant=V` on dir's checkpoint; the
 * output file's text into out, the log's into log. */
static int run_eval(const results *r, const eval_cell *k, const char *dir, uint32_t W, char *out, size_t nout,
                    char *log, size_t nlog)
{
    char cmd[1600], launcher[64] = "", path[600];
    const char *file = strcmp(k->command, "predict") == 0 ? "predictions.jsonl" : "eval.json";
    int st;
    if (W) snprintf(launcher, sizeof launcher, "mpirun --oversubscribe -np %u ", W);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    remove(path);   /* a stale file must not pass */
    snprintf(cmd, sizeof cmd, ENV "%s%s %s --variant=%s --experiment=%s --global_batch_size=%u "
             "--synthetic_examples=230 --seed=7 --model_dir=%s > %s/log.txt 2>&1", launcher,
             r->bin ? r->bin : DR_BIN, k->command, W ? "mpi" : "openmp", k->experiment, k->G, dir, dir);
    st = system(cmd);
    out[0] = '\0';
    if (!slurp(path, out, nout)) out[0] = '\0';
    snprintf(path, sizeof path, "%s/log.txt", dir);
    if (!slurp(path, log, nlog)) log[0] = '\0';
    return st;
}

static int eval_cell_run(results *r, const eval_cell *k)
{
    static char want[1 << 16], got[1 << 16], log[1 << 14];
    char dir[] = "/tmp/distref_mpiev_XXXXXX", cmd[1200];
    const char *line = strcmp(k->command, "predict") == 0 ? "predict:" : "evaluate:";
    double t0 = now();
    int fails = 0, st;
    if (!mkdtemp(dir)) {
        record(r, "mpi", NULL, 0, false, 0, "%s %s: mkdtemp failed", k->command, k->experiment);
        return 1;
    }
    snprintf(cmd, sizeof cmd, ENV "%s train --variant=openmp --experiment=%s --global_batch_size=%u "
             "--synthetic_examples=230 --seed=7 --train_steps=%u --model_dir=%s > %s/train.txt 2>&1",
             r->bin ? r->bin : DR_BIN, k->experiment, k->G, k->steps, dir, dir);
    st = system(cmd);
    if (st == 0) st = run_eval(r, k, dir, 0, want, sizeof want, log, sizeof log);
    for (int i = 0; i < 2 && k->np[i]; i++) {
        bool pass;
        int mst = st == 0 ? run_eval(r, k, dir, k->np[i], got, sizeof got, log, sizeof log) : -1;
        unsigned printed = mst == 0 ? count_lines(log, line) : 0;
        pass = st == 0 && want[0] && mst == 0 && strcmp(got, want) == 0 && printed == 1;
        record(r, "mpi", NULL, (int)k->np[i], pass, now() - t0, "%s across ranks: %s G=%u (%u test batches) -np %u = "
               "one process's %s%s%s", k->command, k->experiment, k->G, (58 + k->G - 1) / k->G, k->np[i],
               strcmp(k->command, "predict") == 0 ? "predictions.jsonl" : "eval.json", pass ? "" : ": ",
               pass ? "" : st ? "the training or the one-process run failed" : mst ? "mpirun failed" :
               printed != 1 ? "not exactly one rank printed" : "the files differ");
        if (!pass && strcmp(got, want) != 0 && mst == 0) fprintf(stderr, "  want %s\n  got  %s\n", want, got);
        fails += !pass;
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
    return fails;
}

int suite_mpi_eval(results *r)
{
    int fails = 0;
    for (size_t i = 0; i < sizeof k_eval / sizeof k_eval[0]; i++) {
        fails += eval_cell_run(r, &k_eval[i]);
        if (r->fault && fails) break;   /* a mutant: caught */
    }
    return fails;
}
