/* distref conformance — suite 7: the mpi variant under mpirun.
 *
 * Each cell launches `mpirun --oversubscribe -np W bin/distref train
 * --variant=mpi ...` (root allowed through OMPI_ALLOW_RUN_AS_ROOT*, as CI
 * runs) into a temporary model_dir, reads what the chief wrote, and
 * compares it with the reference run live in this process:
 *   exact  every step's loss_bits and the final weights equal the reference
 *          one_device run at the same global batch (DATA and AUTO sharding;
 *          OFF gives each worker its own stream, so there the reference's
 *          multi_worker_mirrored emulation is the oracle for the bits);
 *   shards every step's per-replica batch sizes and example-id hashes (what
 *          each rank really staged, gathered by the chief) equal the
 *          reference's multi_worker_mirrored emulation with W workers of L
 *          replicas and the same policy: TensorFlow's DATA / OFF sharding
 *          per example id;
 *   fast   loss_bits and weights equal the openmp variant's (threads comm)
 *          for the same W and L: the float order "across ranks" of comm.h;
 *   usage  a TF_CONFIG that disagrees with the MPI world exits 2, naming both;
 *   ckpt   a checkpoint written under mpi resumes under ref, one written
 *          under openmp resumes under mpi with another rank count, both
 *          equal to an uninterrupted reference run.
 * W = 1..4 ranks x L = 1..2 local replicas, uneven and short final batches,
 * L2 on and off, ring / nccl / auto (across ranks: ring the ring, nccl and
 * auto MPI_Iallreduce on exact integer digits, devices/mpi/comm_mpi_native.c),
 * one pack and many (bytes_per_pack), the default algorithm across ranks
 * (the comm's all-reduce rounded once, strategies/round_once.c; its divisor
 * off by one is a mutant), and the one-worker strategies
 * (one_device, mirrored with every algorithm and packing, central_storage)
 * under -np 1. Mutants (scripts/run_conformance_mutants.sh): a pack
 * boundary off by one on the wire, the cross-rank partial rounded to a
 * float, a rank taking the wrong replica's shard, the native sum's digits
 * one headroom bit short (a digit sum wraps); each must fail this suite. parameter_server over ranks (seeded
 * order = ref, free order = ref's replay of it): conformance/mpi_ps.c.
 */
#ifndef DR_BIN
#define DR_BIN "bin/distref"   /* the Makefile passes its build's CLI */
#endif
#include "conformance/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef struct cell {
    const char *strategy;
    uint32_t    W, L, G, E;
    double      l2;
    const char *alg;        /* NULL: the default */
    int         packs;      /* mirrored's --num_packs */
    uint64_t    bpp;        /* multi_worker_mirrored's --bytes_per_pack */
    const char *policy;
    const char *numerics;
    const char *experiment; /* NULL: mlp_synthetic */
} cell;

static const cell k_cells[] = {
    { "multi_worker_mirrored", 1, 1, 32, 200, 0.0, NULL, 1, 0, "auto", "exact", NULL },
    { "multi_worker_mirrored", 1, 2, 37, 230, 1e-3, "nccl", 1, 4096, "data", "exact", NULL },
    { "multi_worker_mirrored", 2, 1, 37, 230, 0.0, "ring", 1, 0, "data", "exact", NULL },
    { "multi_worker_mirrored", 2, 2, 32, 200, 1e-3, "nccl", 1, 4096, "off", "exact", NULL },
    { "multi_worker_mirrored", 2, 2, 37, 227, 1e-3, "ring", 1, 1000, "auto", "exact", NULL },
    { "multi_worker_mirrored", 3, 1, 37, 230, 1e-3, "ring", 1, 1000, "auto", "exact", NULL },
    { "multi_worker_mirrored", 3, 2, 32, 200, 0.0, "nccl", 1, 0, "off", "exact", NULL },
    { "multi_worker_mirrored", 4, 1, 32, 200, 1e-3, "ring", 1, 0, "data", "exact", NULL },
    { "multi_worker_mirrored", 4, 2, 37, 227, 0.0, "ring", 1, 4096, "data", "exact", NULL },
    { "mirrored", 1, 3, 37, 230, 1e-3, "hierarchical_copy", 0, 0, "auto", "exact", NULL },
    { "mirrored", 1, 2, 32, 200, 0.0, "nccl", 2, 0, "auto", "exact", NULL },
    { "one_device", 1, 1, 37, 230, 1e-3, NULL, 1, 0, "auto", "exact", NULL },
    { "central_storage", 1, 2, 37, 230, 1e-3, NULL, 1, 0, "auto", "exact", NULL },
    /* every step overflows the compact window: the ranks redo it in full together */
    { "multi_worker_mirrored", 2, 2, 32, 256, 0.0, "ring", 1, 0, "auto", "exact", "linear_wide" },
    { "multi_worker_mirrored", 3, 1, 37, 256, 0.0, "ring", 1, 64, "data", "exact", "linear_wide" },
    /* nccl: the compact sums through MPI_Iallreduce on integer digits (devices/mpi/comm_mpi_native.c) */
    { "multi_worker_mirrored", 2, 1, 37, 230, 1e-3, "nccl", 1, 1000, "data", "exact", NULL },
    { "multi_worker_mirrored", 3, 1, 37, 227, 0.0, "nccl", 1, 4096, "auto", "exact", NULL },
    { "multi_worker_mirrored", 4, 1, 37, 230, 1e-3, "nccl", 1, 0, "data", "exact", NULL },
    { "multi_worker_mirrored", 2, 2, 32, 256, 0.0, "nccl", 1, 0, "auto", "exact", "linear_wide" },
    { "multi_worker_mirrored", 3, 1, 37, 256, 0.0, "nccl", 1, 64, "data", "exact", "linear_wide" },
    /* the default algorithm: the comm rounds each exact total once (all_reduce_round, strategies/round_once.c);
     * G*R 74 and 111 are no power of two (every element summed exactly), 128 and 64 are; linear_wide: 5 of
     * its 16 steps overflow (redone in full), the others round through the comm */
    { "multi_worker_mirrored", 2, 1, 37, 230, 1e-3, NULL, 1, 0, "data", "exact", NULL },
    { "multi_worker_mirrored", 2, 2, 32, 200, 1e-3, NULL, 1, 0, "auto", "exact", NULL },
    { "multi_worker_mirrored", 3, 1, 37, 227, 0.0, NULL, 1, 0, "off", "exact", NULL },
    { "multi_worker_mirrored", 2, 2, 16, 256, 0.0, NULL, 1, 0, "auto", "exact", "linear_wide" },
    { "multi_worker_mirrored", 2, 2, 37, 230, 1e-3, "ring", 1, 4096, "auto", "fast", NULL },
    { "multi_worker_mirrored", 3, 1, 32, 200, 0.0, "ring", 1, 0, "data", "fast", NULL },
    { "multi_worker_mirrored", 4, 2, 37, 227, 1e-3, "ring", 1, 1000, "data", "fast", NULL },
};

/* one OpenMP thread per rank: up to 4 ranks share this machine's cores */
#define ENV "env -u TF_CONFIG OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "

static void tf_config_for(uint32_t W, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "{\"cluster\": {\"worker\": [");
    for (uint32_t w = 0; w < W; w++) len += (size_t)snprintf(buf + len, n - len, "%s\"w%u:2222\"", w ? ", " : "", w);
    snprintf(buf + len, n - len, "]}, \"task\": {\"type\": \"worker\", \"index\": 0}}");
}

/* The in-process configuration of a cell (variant, strategy, W via TF_CONFIG). */
static void config_of(const cell *k, const char *variant, const char *strategy, uint32_t L, char *tf, size_t ntf,
                      dr_run_config *c)
{
    base_config(c, k->E, k->G, k->l2);
    if (k->experiment) snprintf(c->experiment, sizeof c->experiment, "%s", k->experiment);
    snprintf(c->variant, sizeof c->variant, "%s", variant);
    snprintf(c->numerics, sizeof c->numerics, "%s", k->numerics);
    set_strategy(c, strategy, (int)L, strcmp(strategy, k->strategy) == 0 ? k->alg : NULL,
                 strcmp(strategy, k->strategy) == 0 ? k->packs : 1);
    if (strcmp(strategy, "one_device") != 0) snprintf(c->auto_shard_policy, sizeof c->auto_shard_policy, "%s", k->policy);
    if (strcmp(strategy, "multi_worker_mirrored") == 0) {
        c->bytes_per_pack = k->bpp;
        tf_config_for(k->W, tf, ntf);
        c->tf_config = tf;
    }
}

/* mpirun -np W bin/distref train --variant=mpi ... into a fresh directory. */
static int launch(const results *r, const cell *k, const char *tf_env, outcome *out, char *log, size_t nlog)
{
    char dir[] = "/tmp/distref_mpi_XXXXXX", cmd[2400], extra[256] = "";
    size_t len = 0;
    int st;
    FILE *f;
    memset(out, 0, sizeof *out);
    if (!mkdtemp(dir)) { snprintf(out->error, sizeof out->error, "mkdtemp failed"); return -1; }
    if (k->alg) len += (size_t)snprintf(extra + len, sizeof extra - len, " --all_reduce_alg=%s", k->alg);
    if (strcmp(k->strategy, "mirrored") == 0) len += (size_t)snprintf(extra + len, sizeof extra - len, " --num_packs=%d", k->packs);
    if (k->bpp) len += (size_t)snprintf(extra + len, sizeof extra - len, " --bytes_per_pack=%llu", (unsigned long long)k->bpp);
    if (strcmp(k->strategy, "one_device") != 0)
        len += (size_t)snprintf(extra + len, sizeof extra - len, " --auto_shard_policy=%s", k->policy);
    if (strcmp(k->strategy, "one_device") != 0)
        len += (size_t)snprintf(extra + len, sizeof extra - len, " --num_gpus=%u", k->L);
    if (k->experiment) snprintf(extra + len, sizeof extra - len, " --experiment=%s", k->experiment);
    snprintf(cmd, sizeof cmd, ENV "%s mpirun --oversubscribe -np %u %s train --variant=mpi --distribution_strategy=%s "
             "--global_batch_size=%u --synthetic_examples=%u --epochs=1 --seed=7 --l2=%g --numerics=%s%s "
             "--model_dir=%s > %s/log.txt 2>&1",
             tf_env ? tf_env : "", k->W, r->bin ? r->bin : DR_BIN, k->strategy, k->G, k->E, k->l2, k->numerics, extra,
             dir, dir);
    st = system(cmd);
    read_outcome(dir, out);
    if (log) {
        snprintf(cmd, sizeof cmd, "%s/log.txt", dir);
        log[0] = '\0';
        if ((f = fopen(cmd, "r"))) { size_t n = fread(log, 1, nlog - 1, f); log[n] = '\0'; fclose(f); }
    }
    if (st != 0 && !out->error[0]) snprintf(out->error, sizeof out->error, "mpirun exited with status %d", st);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool same_weights(const outcome *a, const outcome *b)
{
    return a->weights && b->weights && a->nweights == b->nweights &&
           memcmp(a->weights, b->weights, a->nweights * sizeof(float)) == 0;
}

/* Steps, per-replica sizes and id hashes. */
static bool same_shards(const outcome *a, const outcome *b, char *why, size_t n)
{
    if (a->nsteps != b->nsteps || a->nreplicas != b->nreplicas) {
        snprintf(why, n, "%u steps x %u replicas vs %u x %u", a->nsteps, a->nreplicas, b->nsteps, b->nreplicas);
        return false;
    }
    for (uint32_t s = 0; s < a->nsteps; s++)
        for (uint32_t q = 0; q < a->nreplicas; q++)
            if (a->sizes[s][q] != b->sizes[s][q] || strcmp(a->ids[s][q], b->ids[s][q]) != 0) {
                snprintf(why, n, "step %u replica %u: %u examples (ids %s) vs %u (%s)", s + 1, q, a->sizes[s][q],
                         a->ids[s][q], b->sizes[s][q], b->ids[s][q]);
                return false;
            }
    return true;
}

static uint32_t first_diff(const outcome *a, const outcome *b)
{
    for (uint32_t s = 0; s < a->nsteps && s < b->nsteps; s++)
        if (a->loss_bits[s] != b->loss_bits[s]) return s + 1;
    return 0;
}

static int run_cell(results *r, const cell *k)
{
    char tf[512], name[160], why[600] = "";
    dr_run_config oc, sc, vc;
    outcome m, oracle, shards;
    bool fast = strcmp(k->numerics, "fast") == 0, mw = strcmp(k->strategy, "multi_worker_mirrored") == 0;
    bool off = strcmp(k->policy, "off") == 0 && k->W > 1, pass;
    int fails = 0;
    snprintf(name, sizeof name, "%s %s np=%u L=%u G=%u E=%u l2=%g alg=%s packs=%d bpp=%llu %s%s%s", k->numerics,
             k->strategy, k->W, k->L, k->G, k->E, k->l2, k->alg ? k->alg : "auto", k->packs, (unsigned long long)k->bpp,
             k->policy, k->experiment ? " " : "", k->experiment ? k->experiment : "");
    config_of(k, "mpi", k->strategy, k->L, tf, sizeof tf, &vc);   /* (for the verdicts' columns) */
    launch(r, k, NULL, &m, NULL, 0);
    /* the bits' oracle: fast, openmp with the same W and L; exact, ref one_device (OFF: ref's emulation) */
    if (fast) config_of(k, "openmp", k->strategy, k->L, tf, sizeof tf, &oc);
    else if (off) config_of(k, "ref", k->strategy, k->L, tf, sizeof tf, &oc);
    else config_of(k, "ref", "one_device", 0, tf, sizeof tf, &oc);
    run_case(&oc, &oracle);
    pass = !m.error[0] && !oracle.error[0] && m.nsteps > 0 && outcome_same(&m, &oracle) && same_weights(&m, &oracle);
    if (!pass) {
        if (m.error[0] || oracle.error[0]) snprintf(why, sizeof why, "%s", m.error[0] ? m.error : oracle.error);
        else snprintf(why, sizeof why, "%u vs %u steps, first differing loss at step %u, weights %s", m.nsteps,
                      oracle.nsteps, first_diff(&m, &oracle), same_weights(&m, &oracle) ? "same" : "differ");
    }
    record(r, "mpi", &vc, (int)(k->W * k->L), pass, m.seconds, "%s: bits = %s %s%s%s", name, oc.variant,
           dr_strategy_kind_name(oc.strategy.kind), pass ? "" : ": ", why);
    fails += !pass;
    if (mw && !fast) {   /* every rank's shard: the reference's emulation of W workers x L */
        config_of(k, "ref", k->strategy, k->L, tf, sizeof tf, &sc);
        run_case(&sc, &shards);
        pass = !m.error[0] && !shards.error[0] && same_shards(&m, &shards, why, sizeof why);
        record(r, "mpi", &vc, (int)(k->W * k->L), pass, 0, "%s: shards per example id = ref's %u workers x %u%s%s",
               name, k->W, k->L, pass ? "" : ": ", pass ? "" : (m.error[0] ? m.error : why));
        fails += !pass;
        outcome_free(&shards);
    }
    outcome_free(&m);
    outcome_free(&oracle);
    return fails;
}

/* Checkpoints across variants and rank counts: 4 steps under mpi (2 ranks
 * x 2), resumed to 9 (past the epoch's end) by ref one_device; 5 steps
 * under openmp mirrored x 2, resumed to 9 by mpi with 3 ranks. Both must
 * equal an uninterrupted reference run of 9 steps, and must have resumed:
 * the first step's line (kept from the first leg) shows the first leg's
 * replica layout, unlike the last step's (a run that ignored the checkpoint
 * would give the same bits, exact as it is). */
static int checkpoints(results *r)
{
    static const char *const legs[2][2] = {
        { "mpirun --oversubscribe -np 2 %s train --variant=mpi --distribution_strategy=multi_worker_mirrored "
          "--num_gpus=2 --train_steps=4",
          "%s train --variant=ref --distribution_strategy=one_device --train_steps=9" },
        { "%s train --variant=openmp --distribution_strategy=mirrored --num_gpus=2 --train_steps=5",
          "mpirun --oversubscribe -np 3 %s train --variant=mpi --distribution_strategy=multi_worker_mirrored "
          "--train_steps=9" },
    };
    static const char *const names[2] = { "mpi 2x2, 4 steps -> ref one_device, 9 steps",
                                          "openmp mirrored x2, 5 steps -> mpi 3 ranks, 9 steps" };
    dr_run_config c;
    outcome ref;
    int fails = 0;
    base_config(&c, 230, 37, 1e-3);
    c.train_steps = 9;
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    for (int i = 0; i < 2; i++) {
        char dir[] = "/tmp/distref_mpick_XXXXXX", cmd[1600], leg[600];
        outcome m;
        bool pass;
        int st = -1;
        memset(&m, 0, sizeof m);
        if (mkdtemp(dir)) {
            st = 0;
            for (int k = 0; k < 2 && st == 0; k++) {
                snprintf(leg, sizeof leg, legs[i][k], r->bin ? r->bin : DR_BIN);
                snprintf(cmd, sizeof cmd, ENV "%s --global_batch_size=37 --synthetic_examples=230 --seed=7 --l2=0.001 "
                         "--epochs=1 --model_dir=%s > %s/log%d.txt 2>&1", leg, dir, dir, k);
                st = system(cmd);
            }
            read_outcome(dir, &m);
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
            if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
        }
        pass = st == 0 && outcome_same(&m, &ref) && same_weights(&m, &ref) && m.nsteps == 9 &&
               m.sizes[0][0] != m.sizes[8][0];
        snprintf(c.variant, sizeof c.variant, "mpi");
        record(r, "mpi", &c, 4, pass, 0, "checkpoint %s = ref one_device 9 steps%s", names[i],
               pass ? "" : st ? ": a leg failed" : m.nsteps == 9 && m.sizes[0][0] == m.sizes[8][0] ?
               ": the second leg did not resume" : ": bits differ");
        snprintf(c.variant, sizeof c.variant, "ref");
        fails += !pass;
        outcome_free(&m);
    }
    outcome_free(&ref);
    return fails;
}

/* A TF_CONFIG that names 3 workers under -np 2: exit 2, both numbers named. */
static int tf_config_mismatch(results *r)
{
    static const cell k = { "multi_worker_mirrored", 2, 1, 32, 64, 0.0, NULL, 1, 0, "auto", "exact", NULL };
    char log[4096];
    outcome m;
    int code = launch(r, &k, "TF_CONFIG='{\"cluster\": {\"worker\": [\"a:1\", \"b:1\", \"c:1\"]}, \"task\": "
                      "{\"type\": \"worker\", \"index\": 0}}'", &m, log, sizeof log);
    bool pass = code == 2 && strstr(log, "3 training workers") && strstr(log, "started 2 ranks");
    record(r, "mpi", NULL, 2, pass, m.seconds, "TF_CONFIG with 3 workers under -np 2: exit %d (want 2), message %s",
           code, pass ? "names both" : "missing");
    outcome_free(&m);
    return !pass;
}

int suite_mpi(results *r)
{
    int fails = 0;
    double t0 = now();
    if (r->fault && strncmp(r->fault, "mpi_", 4) != 0) return 0;   /* other faults are the in-process suites' */
    if (!r->fault && r->variant && strcmp(r->variant, "mpi") != 0) return 0;   /* --variant: another variant's slice */
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        record(r, "mpi", NULL, 0, false, 0, "mpirun not found (scripts/deps.sh installs openmpi-bin)");
        return 1;
    }
    printf("== mpi: the mpi variant under mpirun against the reference, live\n");
    if (r->fault && strncmp(r->fault, "mpi_eval_", 9) == 0) {   /* evaluate's faults: its cells alone */
        fails = suite_mpi_eval(r);
        printf("mpi: %.1f s\n", now() - t0);
        return fails;
    }
    for (size_t i = 0; !(r->fault && strncmp(r->fault, "mpi_ps_", 7) == 0) && i < sizeof k_cells / sizeof k_cells[0]; i++) {
        if (r->quick && strcmp(k_cells[i].numerics, "fast") == 0) continue;
        fails += run_cell(r, &k_cells[i]);
        if (r->fault && fails) break;   /* a mutant: caught, the rest would only repeat it */
    }
    if (!r->fault) fails += tf_config_mismatch(r) + checkpoints(r) + suite_mpi_eval(r);
    if (!(r->fault && fails)) fails += suite_mpi_ps(r);
    printf("mpi: %.1f s\n", now() - t0);
    return fails;
}
