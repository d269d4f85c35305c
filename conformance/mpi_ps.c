/* distref conformance — suite 7, parameter_server over MPI ranks.
 *
 * Each cell launches `mpirun --oversubscribe -np 1+W+P bin/distref train
 * --variant=mpi --distribution_strategy=parameter_server` (a chief, W
 * worker ranks, P ps ranks; TF_CONFIG given to every rank without a task,
 * so each takes its rank's) and judges it against the reference, live:
 *   seeded  every metrics line's loss_bits and the final weights equal
 *           `--variant=ref` parameter_server with the same TF_CONFIG shape,
 *           --schedule_seed, --staleness, --ps_partitioner, --checkpoint_every;
 *   free    the run's own order (model_dir/ps_schedule.jsonl) replayed by
 *           `--variant=ref --replay_schedule` gives the same loss_bits and
 *           weights;
 *   usage   a TF_CONFIG whose chief + workers + ps differ from -np exits 2
 *           naming both.
 *   faults  seeded with --fail_worker=W:K (worker W's rank loses closure K,
 *           which re-runs; W rejoins with its datasets re-created) equals
 *           the reference's run with the same failure; with --fail_ps=P:K
 *           too, the run must stop at step K naming ps task P (exit 1), and
 *           the rerun without --fail_ps, resumed from the last checkpoint
 *           (re-walking the failure), must equal the reference's run that
 *           never stopped.
 *   resume  a first run of K steps (--train_steps), then the rerun to N
 *           says it resumed at step K and equals the reference's N
 *           straight.
 * 2-3 workers x 1-2 ps, staleness 0 and 2, L2 on and off, uneven short
 * batches. Mutants (scripts/run_conformance_mutants.sh): the coordinator
 * drops one landed update (DR_MUTANT_MPI_PS_DROP_UPDATE); a recovered
 * worker keeps its iterator (DR_MUTANT_PS_RECOVER_NO_REBUILD).
 */
#ifndef DR_BIN
#define DR_BIN "bin/distref"
#endif
#include "conformance/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef struct ps_cell {
    uint32_t    W, P, S, G, E, every;
    uint64_t    seed;
    double      l2;
    const char *partitioner;
    const char *schedule;    /* seeded | free */
    const char *fail_worker; /* --fail_worker=W:K, or "" */
    const char *fail_ps;     /* --fail_ps=P:K, or "": the run stops at K, its rerun without it resumes */
    float       clip;        /* --global_clipnorm (0: none): on the worker's whole gradient */
    uint32_t    decay;       /* --lr_schedule=cosine --decay_steps=decay --warmup_steps=2 (0: constant) */
    const char *experiment;  /* a model beyond Dense, with --batch_norm=bn ("": the default Dense one) */
    const char *bn;
    uint32_t    steps;       /* --train_steps (0: the one epoch of E examples) */
    uint32_t    resume;      /* a first run of this many steps, then the rerun resumes it to `steps` (0: none) */
} ps_cell;

static const ps_cell k_ps_cells[] = {
    { 2, 1, 0, 32, 200, 0, 3, 0.0, "", "seeded", "", "", 0.0f, 0, "", "", 0, 0 },
    { 2, 2, 2, 37, 230, 3, 11, 1e-3, "fixed:2", "seeded", "", "", 0.0f, 0, "", "", 0, 0 },
    { 3, 1, 2, 37, 230, 4, 5, 0.0, "min_size:4096:4", "seeded", "", "", 0.0f, 0, "", "", 0, 0 },
    { 3, 2, 0, 32, 200, 0, 8, 1e-3, "max_size:8192", "seeded", "", "", 0.0f, 0, "", "", 0, 0 },
    { 3, 2, 2, 37, 230, 0, 2, 1e-3, "fixed:3", "seeded", "", "", 0.0f, 0, "", "", 0, 0 },
    { 3, 2, 2, 37, 230, 4, 0, 1e-3, "fixed:2", "free", "", "", 0.0f, 0, "", "", 0, 0 },
    { 2, 1, 1, 32, 200, 0, 0, 0.0, "", "free", "", "", 0.0f, 0, "", "", 0, 0 },
    { 2, 1, 1, 32, 200, 0, 3, 0.0, "", "seeded", "1:4", "", 0.0f, 0, "", "", 0, 0 },
    { 3, 2, 2, 37, 230, 3, 11, 1e-3, "fixed:2", "seeded", "0:2", "", 0.0f, 0, "", "", 0, 0 },
    { 2, 2, 1, 32, 260, 3, 5, 1e-3, "", "seeded", "1:3", "0:8", 0.0f, 0, "", "", 0, 0 },
    { 2, 2, 1, 32, 256, 4, 3, 1e-3, "fixed:2", "seeded", "", "", 0.05f, 6, "", "", 0, 0 },   /* clipping and a schedule */
};

/* The models beyond Dense (issue 31): each worker rank runs the engine's
 * graph step, the ps ranks land BatchNormalization's moving statistics
 * (docs/PARAMETER_SERVER.md "Models beyond Dense"); resnet_synthetic for
 * 2-3 steps (38 layers: kept short). Also run by the models suite. The
 * seeded cells at W >= 2 and the free ones are where a moving statistic
 * updated from the version its worker read (not at landing) differs. */
static const ps_cell k_model_cells[] = {
    { 1, 2, 2, 32, 100, 0, 7, 0.0, "fixed:2", "seeded", "", "", 0.0f, 0, "cnn_synthetic", "sync", 0, 0 },
    { 2, 2, 2, 32, 100, 0, 7, 0.0, "fixed:2", "seeded", "", "", 0.0f, 0, "cnn_synthetic", "sync", 0, 0 },
    { 3, 1, 2, 16, 100, 0, 3, 1e-3, "", "seeded", "", "", 0.0f, 0, "cnn_synthetic", "replica", 0, 0 },
    { 1, 2, 2, 32, 64, 0, 7, 0.0, "fixed:2", "seeded", "", "", 0.0f, 0, "resnet_synthetic", "sync", 0, 0 },
    { 2, 2, 2, 32, 96, 0, 7, 0.0, "fixed:2", "seeded", "", "", 0.0f, 0, "resnet_synthetic", "sync", 0, 0 },
    /* the free schedule replayed by the reference, a worker's failure, a ps
     * task's failure and the resumed rerun, 4 steps resumed to 7 (seed 3
     * with --fail_worker=1:3: an update lands stale, where seed 7's are not) */
    { 2, 2, 2, 32, 100, 0, 7, 0.0, "fixed:2", "free", "", "", 0.0f, 0, "cnn_synthetic", "sync", 0, 0 },
    { 2, 2, 2, 32, 100, 0, 3, 0.0, "fixed:2", "seeded", "1:3", "", 0.0f, 0, "cnn_synthetic", "sync", 0, 0 },
    { 2, 2, 2, 32, 100, 2, 3, 0.0, "fixed:2", "seeded", "1:3", "0:5", 0.0f, 0, "cnn_synthetic", "sync", 7, 0 },
    { 2, 2, 2, 32, 100, 4, 7, 0.0, "fixed:2", "seeded", "", "", 0.0f, 0, "cnn_synthetic", "sync", 7, 4 },
    { 3, 1, 2, 16, 100, 0, 3, 1e-3, "", "free", "", "", 0.0f, 0, "cnn_synthetic", "replica", 0, 0 },
    { 2, 2, 2, 32, 96, 0, 7, 0.0, "fixed:2", "free", "", "", 0.0f, 0, "resnet_synthetic", "sync", 0, 0 },
    /* resnet_synthetic's 19 BNs through a worker's failure, and a resumed
     * run (2 steps resumed to 4: each resnet step costs seconds here) */
    { 2, 2, 2, 32, 96, 0, 3, 0.0, "fixed:2", "seeded", "1:3", "", 0.0f, 0, "resnet_synthetic", "sync", 0, 0 },
    { 2, 2, 2, 32, 96, 2, 7, 0.0, "fixed:2", "seeded", "", "", 0.0f, 0, "resnet_synthetic", "sync", 4, 2 },
};

#define PS_ENV "env -u TF_CONFIG OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "

/* chief + W workers + P ps; with a task (the chief) for the reference, without for the ranks */
static void ps_tf_config(uint32_t W, uint32_t P, bool task, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "{\"cluster\": {\"chief\": [\"c:2222\"], \"worker\": [");
    for (uint32_t w = 0; w < W; w++) len += (size_t)snprintf(buf + len, n - len, "%s\"w%u:2222\"", w ? ", " : "", w);
    len += (size_t)snprintf(buf + len, n - len, "], \"ps\": [");
    for (uint32_t p = 0; p < P; p++) len += (size_t)snprintf(buf + len, n - len, "%s\"p%u:2222\"", p ? ", " : "", p);
    snprintf(buf + len, n - len, "]}%s}", task ? ", \"task\": {\"type\": \"chief\", \"index\": 0}" : "");
}

static void ref_config(const ps_cell *k, char *tf, size_t ntf, dr_run_config *c)
{
    base_config(c, k->E, k->G, k->l2);
    set_strategy(c, "parameter_server", 0, NULL, 1);
    snprintf(c->variant, sizeof c->variant, "ref");
    c->staleness = k->S;
    c->schedule_seed = k->seed;
    c->checkpoint_every = k->every;
    snprintf(c->ps_partitioner, sizeof c->ps_partitioner, "%s", k->partitioner);
    snprintf(c->fail_worker, sizeof c->fail_worker, "%s", k->fail_worker);   /* fail_ps: the run that never stopped */
    c->clip.global_clipnorm = k->clip;
    if (k->experiment[0]) {
        snprintf(c->experiment, sizeof c->experiment, "%s", k->experiment);
        snprintf(c->batch_norm, sizeof c->batch_norm, "%s", k->bn);
    }
    c->train_steps = k->steps;   /* resume: the run that never stopped */
    if (k->decay) {
        c->lr_schedule.kind = DR_LR_COSINE;
        c->lr_schedule.decay_steps = k->decay;
        c->lr_schedule.warmup_steps = 2;
    }
    ps_tf_config(k->W, k->P, true, tf, ntf);
    c->tf_config = tf;
}

/* mpirun into dir (kept: the caller reads it and removes it); returns the
 * exit status. with_fail_ps: pass the cell's --fail_ps (its first run);
 * steps: --train_steps (0: the epoch). */
static int ps_launch(const results *r, const ps_cell *k, const char *tf_env, uint32_t np, const char *dir,
                     bool with_fail_ps, uint32_t steps)
{
    char cmd[3000], tf[1024], part[96] = "", faults[96] = "", train[160] = "";
    int st;
    if (!tf_env) {
        ps_tf_config(k->W, k->P, false, tf, sizeof tf);
        tf_env = tf;
    }
    if (k->partitioner[0]) snprintf(part, sizeof part, " --ps_partitioner=%s", k->partitioner);
    if (k->clip > 0) snprintf(train, sizeof train, " --global_clipnorm=%g", (double)k->clip);
    if (k->decay)
        snprintf(train + strlen(train), sizeof train - strlen(train), " --lr_schedule=cosine --decay_steps=%u "
                 "--warmup_steps=2", k->decay);
    if (k->experiment[0])
        snprintf(train + strlen(train), sizeof train - strlen(train), " --experiment=%s --batch_norm=%s",
                 k->experiment, k->bn);
    if (steps) snprintf(train + strlen(train), sizeof train - strlen(train), " --train_steps=%u", steps);
    snprintf(faults, sizeof faults, "%s%s%s%s", k->fail_worker[0] ? " --fail_worker=" : "", k->fail_worker,
             with_fail_ps && k->fail_ps[0] ? " --fail_ps=" : "", with_fail_ps ? k->fail_ps : "");
    snprintf(cmd, sizeof cmd, PS_ENV "TF_CONFIG='%s' mpirun --oversubscribe -np %u %s train --variant=mpi "
             "--distribution_strategy=parameter_server --global_batch_size=%u --synthetic_examples=%u --epochs=1 "
             "--seed=7 --l2=%g --staleness=%u --schedule_seed=%llu --checkpoint_every=%u --schedule=%s%s%s "
             "--model_dir=%s%s >> %s/log.txt 2>&1", tf_env, np, r->bin ? r->bin : DR_BIN, k->G, k->E, k->l2, k->S,
             (unsigned long long)k->seed, k->every, k->schedule, part, faults, dir, train, dir);
    st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Whether dir/log.txt holds text. */
static bool log_has(const char *dir, const char *text)
{
    char path[1100], log[16384];
    size_t n = 0;
    FILE *f;
    snprintf(path, sizeof path, "%s/log.txt", dir);
    if ((f = fopen(path, "r"))) { n = fread(log, 1, sizeof log - 1, f); fclose(f); }
    log[n] = '\0';
    return strstr(log, text) != NULL;
}

static int ps_cell_run(results *r, const char *suite, const ps_cell *k)
{
    char dir[] = "/tmp/distref_mpips_XXXXXX", tf[1024], name[224], why[600] = "", cmd[1200];
    dr_run_config rc, vc;
    outcome m, oracle;
    bool free_run = strcmp(k->schedule, "free") == 0, pass;
    int code = -1;
    double t0 = now();   /* the cell's wall time: the launches and the oracle */
    memset(&m, 0, sizeof m);
    memset(&oracle, 0, sizeof oracle);
    snprintf(name, sizeof name, "parameter_server %s np=%u (%u workers, %u ps) S=%u seed=%llu G=%u E=%u l2=%g "
             "every=%u part=%s", k->schedule, 1 + k->W + k->P, k->W, k->P, k->S, (unsigned long long)k->seed, k->G,
             k->E, k->l2, k->every, k->partitioner[0] ? k->partitioner : "none");
    if (k->experiment[0]) {
        size_t len = strlen(name);
        snprintf(name + len, sizeof name - len, " %s %s BN", k->experiment, k->bn);
    }
    if (k->clip > 0 || k->decay) {
        size_t len = strlen(name);
        snprintf(name + len, sizeof name - len, " global_clipnorm=%g cosine decay=%u warmup=2", (double)k->clip,
                 k->decay);
    }
    ref_config(k, tf, sizeof tf, &rc);
    vc = rc;
    snprintf(vc.variant, sizeof vc.variant, "mpi");
    if (k->fail_worker[0] || k->fail_ps[0]) {
        size_t len = strlen(name);
        snprintf(name + len, sizeof name - len, " fail_worker=%s%s%s", k->fail_worker[0] ? k->fail_worker : "-",
                 k->fail_ps[0] ? " fail_ps=" : "", k->fail_ps);
    }
    if (k->steps) {
        size_t len = strlen(name);
        snprintf(name + len, sizeof name - len, " %u steps%s", k->steps, k->resume ? ", resumed from " : "");
        if (k->resume) snprintf(name + strlen(name), sizeof name - strlen(name), "%u", k->resume);
    }
    if (mkdtemp(dir)) {
        bool first_ok = true;   /* the --fail_ps run stopped naming the task; the rerun said it resumed */
        if (k->fail_ps[0]) {   /* the run that stops at the ps task's failure, naming it and the step */
            char want[160];
            snprintf(want, sizeof want, "parameter server /job:ps/replica:0/task:%.*s failed at step %s",
                     (int)strcspn(k->fail_ps, ":"), k->fail_ps, strchr(k->fail_ps, ':') + 1);
            code = ps_launch(r, k, NULL, 1 + k->W + k->P, dir, true, k->steps);
            first_ok = code != 0 && log_has(dir, want);
            if (!first_ok) snprintf(why, sizeof why, "with --fail_ps=%s: exit %d, want non-zero and \"%s\" in the log; ",
                                   k->fail_ps, code, want);
        }
        if (k->resume) {   /* the first run: k->resume steps, which the second resumes (it says so) */
            char want[64];
            snprintf(want, sizeof want, "resumed at step %u from", k->resume);
            code = ps_launch(r, k, NULL, 1 + k->W + k->P, dir, false, k->resume);
            if (code == 0) code = ps_launch(r, k, NULL, 1 + k->W + k->P, dir, false, k->steps);
            if (code == 0 && !log_has(dir, want)) {
                snprintf(why, sizeof why, "the rerun did not say \"%s\"; ", want);
                first_ok = false;
            }
        } else {
            code = ps_launch(r, k, NULL, 1 + k->W + k->P, dir, false, k->steps);
        }
        read_outcome(dir, &m);
        if (!first_ok && !m.error[0]) snprintf(m.error, sizeof m.error, "%s", why);
        if (code != 0 && !m.error[0]) snprintf(m.error, sizeof m.error, "mpirun exited with status %d", code);
        if (free_run) {   /* the oracle: the reference following the run's recorded order */
            snprintf(rc.replay_schedule, sizeof rc.replay_schedule, "%s/ps_schedule.jsonl", dir);
            run_fresh_case(&rc, &oracle);
        }
    } else {
        snprintf(m.error, sizeof m.error, "mkdtemp failed");
    }
    if (!free_run) run_case(&rc, &oracle);
    pass = outcome_same_why(&m, &oracle, why, sizeof why);
    record(r, suite, &vc, (int)k->W, pass, now() - t0, "%s: %s%s%s", name,
           free_run ? "bits = ref replaying its ps_schedule.jsonl" : "bits = ref parameter_server, same seed",
           pass ? "" : ": ", why);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (code != -1 && system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
    outcome_free(&m);
    outcome_free(&oracle);
    return !pass;
}

/* chief + 2 workers + 1 ps (4 tasks) under -np 3: exit 2, both named. */
static int ps_tf_config_mismatch(results *r)
{
    static const ps_cell k = { 2, 1, 0, 32, 64, 0, 1, 0.0, "", "seeded", "", "", 0.0f, 0, "", "", 0, 0 };
    char dir[] = "/tmp/distref_mpips_XXXXXX", tf[512], log[4096] = "", path[1100], cmd[1200];
    FILE *f;
    int code = -1;
    bool pass;
    if (mkdtemp(dir)) {
        ps_tf_config(2, 1, false, tf, sizeof tf);
        code = ps_launch(r, &k, tf, 3, dir, false, 0);
        snprintf(path, sizeof path, "%s/log.txt", dir);
        if ((f = fopen(path, "r"))) { size_t n = fread(log, 1, sizeof log - 1, f); log[n] = '\0'; fclose(f); }
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
    }
    pass = code == 2 && strstr(log, "= 4 tasks") && strstr(log, "started 3 ranks");
    record(r, "mpi", NULL, 3, pass, 0, "parameter_server TF_CONFIG of 4 tasks under -np 3: exit %d (want 2), message %s",
           code, pass ? "names both" : "missing");
    return !pass;
}

int mpi_ps_model_cells(results *r, const char *suite)
{
    int fails = 0;
    for (size_t i = 0; i < sizeof k_model_cells / sizeof k_model_cells[0]; i++) {
        fails += ps_cell_run(r, suite, &k_model_cells[i]);
        if (r->fault && fails) break;
    }
    return fails;
}

int suite_mpi_ps(results *r)
{
    int fails = 0;
    for (size_t i = 0; i < sizeof k_ps_cells / sizeof k_ps_cells[0]; i++) {
        fails += ps_cell_run(r, "mpi", &k_ps_cells[i]);
        if (r->fault && fails) break;
    }
    if (!r->fault || !fails) fails += mpi_ps_model_cells(r, "mpi");
    if (!r->fault) fails += ps_tf_config_mismatch(r);
    return fails;
}
