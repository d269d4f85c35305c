/* distref nightly bench, MPI part — the exact all-reduce against
 * MPI_Allreduce, sampled for regression detection the way bench/nightly.c
 * samples its metrics (issue 15; scripts/nightly.py runs it under
 * `mpirun -np 2`, docs/NIGHTLY.md):
 *
 *   mpirun -np 2 build/rel/bench/nightly_mpi [--samples N] [--json FILE] [--only NAME[,NAME]] [--list]
 *
 * Each metric is a ratio of seconds, lower is better: the MPI comm's exact
 * all-reduce (dr_comm_mpi()->all_reduce over exact accumulators, one local
 * replica per rank, the ring over the DR_ACC_BYTES wire form; the final
 * rounding not timed) over MPI_Allreduce(MPI_FLOAT, MPI_SUM) of the same
 * float data, in the same run. The time of one call is the slowest rank's
 * (a barrier before it), the fastest of a few calls; the ratio equals MPI_Allreduce's busbw over the
 * exact all-reduce's (nccl-tests' busbw = size / time * 2 (n-1) / n, the
 * same factor for both). Every sample is made of neighbouring measurements,
 * the order alternating, the fastest of best_of pairs kept, as in
 * bench/nightly.c; the JSON has the same shape, so nightly.py reads both.
 *
 * The _cpu_vs_local row is timed by CPU seconds instead (see cpu_now and
 * time_local): each rank's own thread's CPU seconds of a call, the least of
 * the ranks kept, over the same element work done locally by each rank.
 *
 * The train_ row is issue 33 item 3's ratio (docs/PERFORMANCE.md): exact
 * multi_worker_mirrored training over the 2 ranks (--variant=mpi) against
 * one rank training alone (see time_one_rank), wall time of the steps
 * alone (two runs differenced: see train_run).
 *
 * DISTREF_NIGHTLY_PLANT=NAME:FRACTION plants a slowdown into the exact
 * all-reduce of metric NAME (every rank spins for FRACTION of its own call's
 * time inside the timed region: wall time, or for a CPU row its thread's CPU
 * time), read here only, as in bench/nightly.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "bench/bench_common.h"
#include "distref/cacc.h"
#include "distref/comm.h"
#include "distref/exact.h"
#include "distref/harness.h"
#include "distref/mpi.h"
#include "distref/rng.h"

#include <mpi.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct metric {
    const char *name;
    size_t bytes;               /* float data per rank */
    int exact_inner, mpi_inner; /* calls per measurement, the fastest kept */
    int base;                   /* the baseline: BASE_FLOATS or BASE_LOCAL */
    int op;                     /* the timed call: OP_RING (all_reduce of dr_acc), OP_GRAD (all_reduce_round)
                                   or OP_TRAIN (a training run, bench_train_run_with) */
    int cpu;                    /* 1: timed by CPU seconds, the least of the ranks' (time_local) */
} metric;

enum { BASE_FLOATS, BASE_LOCAL, BASE_ONE_RANK };
enum { OP_RING, OP_GRAD, OP_TRAIN };

/* The _vs_mpi rows are item 6's busbw against MPI_Allreduce of the floats:
 * a compute-bound kernel over a communication-bound baseline, so their
 * ratio moves with the machine's load (the exact ring, ~15-70 ms at 1 MB,
 * cannot escape the scheduler; MPI_Allreduce, ~0.1 ms, can).
 *
 * The 1 MB row that detects regressions is _cpu_vs_local (session 9,
 * docs/NIGHTLY.md). Wall time cannot: at load 5-8 on 2 cores a call of
 * 30-120 ms spans many time slices, and the scheduler pays the CPU spent in
 * one half back in the other (a planted 15% moved the wall ratio -3..+38%).
 * So it counts CPU seconds, which leave out the time a rank waits for a
 * core. Each rank's CPU seconds of a call are its share of the work plus
 * what it burnt waiting for the other rank (the comm spins CM_SPIN_S before
 * it yields): under load one rank, the one ahead, waits, and its CPU
 * seconds of the call jump (29 -> 45-64 ms summed over the ranks in half
 * the calls at load 5), while the least of the two ranks' stays within
 * -5..+7% of its median. So a call's cost is the least of the ranks' CPU
 * seconds. Its baseline is each rank's share of the same element work done
 * locally, without messages (time_local): as fixed as work gets, moved only
 * by what slows the core itself (clock, cache and memory contention). The
 * _vs_mpi_op row (session 8: over MPI_Allreduce doing the same work with a
 * user op) it replaces had a baseline whose CPU seconds were bimodal from
 * one run to the next (51 or 60 ms summed over the ranks, within a run
 * steady). 64 KB has no such row: its exchanges are latency, not work. */
/* The _grad_ rows are issue 33 item 2's ratio (docs/PERFORMANCE.md): the
 * exact gradient all-reduce rounded once (all_reduce_round over compact
 * partials of BENCH_GRAD_K products, what a replica's gradient holds; the native
 * endpoint; conversions included) against MPI_Allreduce of the floats, at
 * 1 MB and 16 MB, wall time as bench/mpi_allreduce's grad column. */
/* The _train_ row is item 3's (docs/PERFORMANCE.md): TRAIN_STEPS steps of
 * mlp_synthetic, exact, G = 256, multi_worker_mirrored over the 2 ranks
 * (--variant=mpi, one thread each) against the same steps on one rank
 * alone (the openmp variant's multi_worker_mirrored, one worker: the
 * engine's single-rank path, no comm), wall time. A run's seconds include
 * its start-up (the 4096 synthetic examples, the comm), which two ranks do
 * not shorten, so each call is two runs, TRAIN_STEPS and TRAIN_SHORT
 * steps, and counts the difference: the seconds of TRAIN_STEPS -
 * TRAIN_SHORT steps, as docs/PERFORMANCE.md differences 8 epochs and 1.
 * The ratio is one rank's speed over two ranks': item 3 asks for
 * <= 1/1.5. Both runs must end in the same weights (checked on every
 * call). */
static const metric metrics[] = {
    { "allreduce_exact_64k_np2_vs_mpi", 65536, 6, 30, BASE_FLOATS, OP_RING, 0 },
    { "allreduce_exact_1m_np2_vs_mpi", 1048576, 3, 10, BASE_FLOATS, OP_RING, 0 },
    { "allreduce_exact_1m_np2_cpu_vs_local", 1048576, 2, 2, BASE_LOCAL, OP_RING, 1 },
    { "allreduce_grad_1m_np2_vs_mpi", 1048576, 3, 10, BASE_FLOATS, OP_GRAD, 0 },
    { "allreduce_grad_16m_np2_vs_mpi", 16777216, 2, 6, BASE_FLOATS, OP_GRAD, 0 },
    { "train_exact_mwms_np2_vs_np1", 0, 1, 1, BASE_ONE_RANK, OP_TRAIN, 0 },
};
enum { TRAIN_G = 256, TRAIN_STEPS = 40, TRAIN_SHORT = 8 };
enum { NMETRICS = sizeof metrics / sizeof metrics[0], BEST_OF = 3 };

typedef struct buffers {
    size_t n;
    dr_acc *acc, *pristine;
    dr_cacc *part;              /* OP_GRAD: this rank's compact partials */
    float *x, *y;
    uint8_t *wire;              /* SEG * DR_ACC_BYTES: the local baseline's segment */
    dr_comm *ep;
    int train;                  /* OP_TRAIN: no buffers; the calls train */
    char sha[65];               /* OP_TRAIN: the last run's weights_sha256 */
} buffers;

/* This thread's CPU seconds: the rank's own work and its own waiting, not
 * the time it spent waiting for a core, nor Open MPI's helper threads. */
static double cpu_now(void) { return bench_cpu_seconds(CLOCK_THREAD_CPUTIME_ID); }

/* A call's cost across the ranks: the slowest rank's wall seconds, or
 * (cpu) the least of the ranks' CPU seconds. */
static double across_ranks(double t, int cpu)
{
    double m = t;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, cpu ? MPI_MIN : MPI_MAX, MPI_COMM_WORLD);
    return m;
}

static void fail(const char *what, const dr_err *err)
{
    fprintf(stderr, "nightly_mpi: %s: %s\n", what, err ? err->msg : "out of memory");
    dr_mpi_abort(1);
}

/* The world's TF_CONFIG (every rank a worker), as bin/distref derives it
 * under mpirun (dr_mpi_tf_config), for the runs over every rank. */
static char *world_tf_config;
static void over_the_world(dr_run_config *c) { c->tf_config = world_tf_config; }

/* One training run of `steps` steps: over every rank (--variant=mpi) or,
 * one_rank, on rank 0 alone (the openmp variant, one worker); its wall
 * seconds, start-up included. */
static double train_once(int one_rank, uint64_t steps, char sha[65])
{
    char why[512];
    double t = one_rank ? bench_train_run_with("nightly_mpi", "openmp", "exact", "multi_worker_mirrored", 1, TRAIN_G,
                                               steps, 1, NULL, sha, why, sizeof why)
                        : bench_train_run_with("nightly_mpi", "mpi", "exact", "multi_worker_mirrored", 1, TRAIN_G,
                                               steps, 1, over_the_world, sha, why, sizeof why);
    if (t < 0) {
        fprintf(stderr, "nightly_mpi: training (%s): %s\n", one_rank ? "one rank" : "all ranks", why);
        dr_mpi_abort(1);
    }
    return t;
}

/* OP_TRAIN's call: the seconds of TRAIN_STEPS - TRAIN_SHORT steps (two
 * runs differenced, so start-up cancels); the long run's weights are
 * checked against every other call's, one rank's and all ranks'. */
static double train_run(buffers *b, int one_rank)
{
    char sha[65], short_sha[65];
    double t_short = train_once(one_rank, TRAIN_SHORT, short_sha);
    double t = train_once(one_rank, TRAIN_STEPS, sha) - t_short;
    if (b->sha[0] && strcmp(sha, b->sha)) {
        fprintf(stderr, "nightly_mpi: training: weights_sha256 %.8s... on %s, %.8s... before\n", sha,
                one_rank ? "one rank" : "all ranks", b->sha);
        dr_mpi_abort(1);
    }
    memcpy(b->sha, sha, sizeof sha);
    return t > 0 ? t : 1e-9;   /* a run that start-up noise made shorter than the short one */
}

/* Seconds of one exact all-reduce (wall or CPU, across_ranks), the fastest
 * of inner calls (a call the scheduler interrupted is dropped); each rank's
 * call stretched by plant of its own time (a spin on the same clock). */
static double time_exact(buffers *b, int inner, double plant, int cpu)
{
    double (*clk)(void) = cpu ? cpu_now : dr_now;
    double best = 0;
    dr_err err;
    for (int k = 0; k < inner; k++) {
        double t0, t;
        memcpy(b->acc, b->pristine, b->n * sizeof *b->acc);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = clk();
        if (b->train) {   /* its own differenced wall seconds; the plant stretches them */
            t = train_run(b, 0);
            double s0 = dr_now();
            if (plant > 0)
                while (dr_now() < s0 + t * plant) {}
            t = across_ranks(t + (dr_now() - s0), 0);
            best = k == 0 || t < best ? t : best;
            continue;
        } else if (b->part) {   /* OP_GRAD: compact partials in, floats rounded once out (into y) */
            const dr_cacc *p = b->part;
            size_t over = 0;
            if (dr_comm_mpi()->all_reduce_round(b->ep, &p, NULL, b->n, 1, &b->y, &over, &err))
                fail("exact gradient all-reduce", &err);
        } else if (dr_comm_mpi()->all_reduce(b->ep, DR_FORM_ACC, (void *const *)&b->acc, b->n, &err)) {
            fail("exact all-reduce", &err);
        }
        t = clk() - t0;
        if (plant > 0)
            while (clk() < t0 + t * (1.0 + plant)) {}
        t = across_ranks(clk() - t0, cpu);
        best = k == 0 || t < best ? t : best;
    }
    return best;
}

/* The same for MPI_Allreduce of the floats. */
static double time_mpi(buffers *b, int inner)
{
    double best = 0;
    for (int k = 0; k < inner; k++) {
        double t0;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = dr_now();
        MPI_Allreduce(b->x, b->y, (int)b->n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t = across_ranks(dr_now() - t0, 0);
        best = k == 0 || t < best ? t : best;
    }
    return best;
}

/* The local baseline: a rank's share of the two-rank exact ring's element
 * work, without the messages: each of its n accumulators serialized to the
 * wire form and deserialized (the ring sends and receives n/2 in its
 * reduce-scatter and n/2 in its all-gather), n/2 of them merged (the
 * reduce-scatter's chunk), through a segment of the ring's message size.
 * CPU seconds, the least of the ranks', the fastest of inner calls. */
enum { SEG = 8192 };
static double time_local(buffers *b, int inner)
{
    double best = 0;
    for (int k = 0; k < inner; k++) {
        double t0, t;
        memcpy(b->acc, b->pristine, b->n * sizeof *b->acc);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = cpu_now();
        for (size_t i0 = 0; i0 < b->n; i0 += SEG) {
            size_t m = b->n - i0 < SEG ? b->n - i0 : SEG;
            for (size_t i = 0; i < m; i++) dr_acc_serialize(&b->pristine[i0 + i], b->wire + i * DR_ACC_BYTES);
            for (size_t i = 0; i < m; i++) {
                dr_acc a;
                if (!dr_acc_deserialize(&a, b->wire + i * DR_ACC_BYTES)) {
                    fprintf(stderr, "nightly_mpi: the local baseline: a corrupt accumulator\n");
                    dr_mpi_abort(1);
                }
                if (i0 + i < b->n / 2) dr_acc_merge(&b->acc[i0 + i], &a);
                else b->acc[i0 + i] = a;
            }
        }
        t = across_ranks(cpu_now() - t0, 1);
        best = k == 0 || t < best ? t : best;
    }
    return best;
}

/* The one-rank baseline: rank 0 trains alone while the others wait for it
 * asleep (a spinning MPI_Barrier would take a core from it on a shared
 * machine); rank 0's wall seconds, the fastest of inner runs. */
static double time_one_rank(buffers *b, int inner)
{
    uint32_t rank, W;
    double best = 0;
    dr_mpi_world(&rank, &W);
    for (int k = 0; k < inner; k++) {
        double t = 0;
        MPI_Request req;
        int done = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) t = train_run(b, 1);
        MPI_Ibarrier(MPI_COMM_WORLD, &req);
        while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
            struct timespec nap = { 0, 200000 };
            nanosleep(&nap, NULL);
        }
        t = across_ranks(t, 0);
        best = k == 0 || t < best ? t : best;
    }
    return best;
}

/* One measurement of the metric's baseline. */
static double time_base(const metric *w, buffers *b)
{
    if (w->base == BASE_ONE_RANK) return time_one_rank(b, w->mpi_inner);
    return w->base == BASE_LOCAL ? time_local(b, w->mpi_inner) : time_mpi(b, w->mpi_inner);
}

static int selected(const char *only, const char *name)
{
    size_t n = strlen(name);
    if (!only) return 1;
    for (const char *p = only; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

static void json_array(FILE *f, const char *key, const double *v, int n)
{
    fprintf(f, "\"%s\":[", key);
    for (int i = 0; i < n; i++) fprintf(f, "%s%.9g", i ? "," : "", v[i]);
    fputc(']', f);
}

static double median_of(const double *v, int n)
{
    double t[1024];
    int m = n < 1024 ? n : 1024;
    memcpy(t, v, (size_t)m * sizeof *t);
    qsort(t, (size_t)m, sizeof *t, cmp_double);
    return m % 2 ? t[m / 2] : 0.5 * (t[m / 2 - 1] + t[m / 2]);
}

int main(int argc, char **argv)
{
    int samples = 15, first = 1;
    const char *only = NULL, *json_path = NULL, *plant_env = getenv("DISTREF_NIGHTLY_PLANT");
    char plant_name[128] = "";
    double plant = 0, ratio[1024], tk[1024], tb[1024];
    uint32_t rank, W;
    FILE *json = NULL;
    dr_err err;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--samples") && i + 1 < argc) samples = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--list")) {
            for (int m = 0; m < NMETRICS; m++)
                if (metrics[m].op == OP_TRAIN)
                    printf("%-36s exact multi_worker_mirrored training, G = %d, steps %d-%d (two runs differenced), "
                           "2 ranks / 1 rank\n", metrics[m].name, TRAIN_G, TRAIN_SHORT + 1, TRAIN_STEPS);
                else printf("%-36s exact %sall-reduce %zu B, 2 ranks / %s\n", metrics[m].name,
                       metrics[m].op == OP_GRAD ? "gradient (rounded once) " : "", metrics[m].bytes,
                       metrics[m].base == BASE_LOCAL ? "its element work done locally (CPU s, least rank)"
                                                     : "MPI_Allreduce of the floats");
            return 0;
        } else {
            fprintf(stderr, "usage: mpirun -np 2 nightly_mpi [--samples N] [--json FILE] [--only NAME[,NAME]] [--list]\n");
            return 2;
        }
    }
    if (samples < 1 || samples > 1024) { fprintf(stderr, "nightly_mpi: --samples must be 1..1024\n"); return 2; }
    if (bench_parse_plant("nightly_mpi", plant_env, plant_name, sizeof plant_name, &plant)) return 2;
    if (dr_mpi_init(&argc, &argv, &err)) { fprintf(stderr, "nightly_mpi: %s\n", err.msg); return 1; }
    dr_mpi_world(&rank, &W);
    if (rank == 0) {
        for (int m = 0; plant > 0 && m < NMETRICS; m++)   /* (another program's metric: that one plants it) */
            if (!strcmp(metrics[m].name, plant_name))
                fprintf(stderr, "nightly_mpi: PLANTED slowdown: %s's timed call (%s) +%.1f%%\n", plant_name,
                        metrics[m].op == OP_TRAIN ? "the training over every rank" : "the exact all-reduce", 100 * plant);
        if (json_path && !(json = fopen(json_path, "w"))) {
            fprintf(stderr, "nightly_mpi: --json: cannot write %s\n", json_path);
            dr_mpi_abort(2);
        }
        printf("# nightly_mpi: %u ranks, %d interleaved samples per metric; ratio = exact all-reduce s / "
               "baseline s (_vs_mpi: MPI_Allreduce, = mpi busbw / exact busbw; _cpu_vs_local: CPU s, the "
               "ring's element work done locally; train_: the training over every rank s / on one rank s); lower "
               "is better\n", W, samples);
        if (json) fprintf(json, "{\"samples\":%d,\"ranks\":%u,\"plant\":\"%s\",\"plant_fraction\":%g,\"metrics\":[",
                          samples, W, plant_name, plant);
    }
    for (int m = 0; m < NMETRICS; m++) {
        const metric *w = &metrics[m];
        double p = strcmp(plant_name, w->name) ? 0 : plant;
        buffers b;
        dr_comm_config cc;
        uint32_t neps = 0;
        if (!selected(only, w->name)) continue;
        memset(&b, 0, sizeof b);
        b.n = w->bytes / sizeof(float);
        b.train = w->op == OP_TRAIN;
        if (b.train && !world_tf_config && dr_mpi_tf_config(NULL, false, &world_tf_config, &err)) fail("TF_CONFIG", &err);
        if (b.train) goto measure;
        b.acc = malloc(b.n * sizeof *b.acc);
        b.pristine = malloc(b.n * sizeof *b.pristine);
        b.x = malloc(b.n * sizeof *b.x);
        b.y = malloc(b.n * sizeof *b.y);
        b.wire = w->base == BASE_LOCAL ? malloc((size_t)SEG * DR_ACC_BYTES) : NULL;
        b.part = w->op == OP_GRAD ? malloc(b.n * sizeof *b.part) : NULL;
        if (!b.acc || !b.pristine || !b.x || !b.y || (w->base == BASE_LOCAL && !b.wire) || (w->op == OP_GRAD && !b.part))
            fail("buffers", NULL);
        for (size_t i = 0; i < b.n; i++) {
            b.x[i] = (2.0f * dr_rng_uniform(2026, rank, (uint64_t)i) - 1.0f) * (float)(1u << (i % 5));
            dr_acc_init(&b.pristine[i]);
            dr_acc_add(&b.pristine[i], b.x[i]);
            for (int k = 0; b.part && k < BENCH_GRAD_K; k++) {   /* bench/mpi_allreduce's grad column's data */
                float fa, fb;
                if (k == 0) dr_cacc_init(&b.part[i]);
                bench_grad_factors(rank, i, k, &fa, &fb);
                dr_cacc_add_prod(&b.part[i], fa, fb);
            }
        }
        memset(&cc, 0, sizeof cc);
        cc.num_ranks = W;
        cc.local_replicas = 1;
        cc.alg = DR_COMM_RING;
        cc.num_packs = 1;
        cc.ranks_alg = w->op == OP_GRAD ? DR_COMM_RANKS_NATIVE : DR_COMM_RANKS_RING;
        if (dr_comm_mpi()->open(&cc, &b.ep, &neps, &err)) fail("open", &err);
    measure:
        time_exact(&b, 1, 0, w->cpu);   /* warm-up: pages, the MPI library's buffers */
        time_base(w, &b);
        for (int s = 0; s < samples; s++) {
            for (int r = 0; r < BEST_OF; r++) {
                double k, bl;
                if ((s + r) % 2 == 0) {
                    k = time_exact(&b, w->exact_inner, p, w->cpu);
                    bl = time_base(w, &b);
                } else {
                    bl = time_base(w, &b);
                    k = time_exact(&b, w->exact_inner, p, w->cpu);
                }
                if (r == 0 || k < tk[s]) tk[s] = k;
                if (r == 0 || bl < tb[s]) tb[s] = bl;
            }
            ratio[s] = tb[s] > 0 ? tk[s] / tb[s] : 0;
        }
        if (b.ep) dr_comm_mpi()->close(&b.ep, neps);
        if (rank == 0) {
            char kname[192], bname[128];
            double lo = ratio[0], hi = ratio[0];
            for (int s = 1; s < samples; s++) { lo = ratio[s] < lo ? ratio[s] : lo; hi = ratio[s] > hi ? ratio[s] : hi; }
            printf("  %-36s %8.4g %8.4g %8.4g %12.4e %12.4e%s\n", w->name, median_of(ratio, samples), lo, hi,
                   median_of(tk, samples), median_of(tb, samples), p > 0 ? "  (planted)" : "");
            fflush(stdout);
            if (b.train)
                snprintf(kname, sizeof kname, "exact multi_worker_mirrored training (--variant=mpi) x %u ranks, "
                         "mlp_synthetic G = %d, steps %d-%d (two runs differenced), 1 thread each", W, TRAIN_G,
                         TRAIN_SHORT + 1, TRAIN_STEPS);
            else snprintf(kname, sizeof kname, "exact %s %zu B x %u ranks%s",
                     w->op == OP_GRAD ? "gradient all-reduce rounded once (all_reduce_round, compact partials)"
                                      : "all-reduce (dr_comm_mpi ring)", w->bytes, W,
                     w->cpu ? ": CPU s, the least rank's" : "");
            if (w->base == BASE_ONE_RANK)
                snprintf(bname, sizeof bname, "the same training on one rank (the openmp variant, 1 worker)");
            else if (w->base == BASE_LOCAL)
                snprintf(bname, sizeof bname, "the ring's element work on %zu accumulators done locally "
                         "(serialize, deserialize, merge half): CPU s, the least rank's", b.n);
            else
                snprintf(bname, sizeof bname, "MPI_Allreduce float %zu B x %u ranks", w->bytes, W);
            if (json) {
                fprintf(json, "%s\n{\"name\":\"%s\",\"kernel\":\"%s\",\"baseline\":\"%s\",\"unit\":\"ratio\",",
                        first ? "" : ",", w->name, kname, bname);
                json_array(json, "ratio", ratio, samples);
                fputc(',', json);
                json_array(json, "kernel_s", tk, samples);
                fputc(',', json);
                json_array(json, "baseline_s", tb, samples);
                fputc('}', json);
            }
            first = 0;
        }
        free(b.acc); free(b.pristine); free(b.x); free(b.y); free(b.wire); free(b.part);
    }
    if (json) { fputs("\n]}\n", json); fclose(json); }
    free(world_tf_config);
    dr_mpi_finalize();
    return 0;
}
