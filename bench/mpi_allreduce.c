/* distref bench — the MPI comm's all-reduce against MPI_Allreduce, in the
 * style of nccl-tests' all_reduce_perf, in one run:
 *
 *   mpirun -np 2 build/rel/bench/mpi_allreduce [--json FILE] [--max_mb 16] [--grad_form cacc|dd]
 *
 * For each size (float data, 1 KB .. 16 MB, x4 steps) every rank holds
 * count = size/4 floats x_w[i]. Three all-reduces of them:
 *   exact   dr_comm_mpi()->all_reduce over exact accumulators (one local
 *           replica per rank, one pack): the ring over the DR_ACC_BYTES wire
 *           form, rounded once afterwards (the rounding is not timed)
 *   compact all_reduce of DR_FORM_CACC: the same ring over compact accumulators
 *           (distref/cacc.h, DR_CACC_BYTES on the wire), what the engine's
 *           exact gradients use (--all_reduce_alg=ring)
 *   native  all_reduce of DR_FORM_CACC through MPI_Iallreduce on exact integer
 *           digits (devices/mpi/comm_mpi_native.c; --all_reduce_alg=nccl, auto)
 *   f32x    all_reduce of DR_FORM_F32_EXACT: floats in, the exact sum rounded once
 *           out, through one int32 digit an element on an agreed grid
 *           (devices/mpi/comm_mpi_f32x.c)
 *   grad    all_reduce_round: the exact gradient all-reduce rounded once
 *           (devices/mpi/comm_mpi_gradx.c): each rank's partials are compact
 *           accumulators of BENCH_GRAD_K products (what a replica's gradient
 *           share is), travelling as double-doubles with an escape list;
 *           timed from the accumulators to every rank's rounded floats
 *           (the conversions included). #wrong against the exact sum of
 *           every rank's products in a dr_acc, rounded once.
 *           --grad_form dd: the same partials handed over already as
 *           double-doubles (dr_dd_parts, encoded before the timer: what a
 *           replica whose GEMM gives double-doubles would hand over), timed
 *           from those to the rounded floats
 *   ring32  all_reduce of DR_FORM_F32: the same ring moving floats
 *   mpi     MPI_Allreduce(MPI_FLOAT, MPI_SUM): the MPI library's own
 * time: the median over iterations of the slowest rank's time (a barrier
 * before each); algbw = size / time, busbw = algbw * 2 (n-1) / n (nccl-tests'
 * definitions, size being the float data); ratio = busbw / mpi's busbw.
 * #wrong counts elements that differ from the correctly rounded sum,
 * computed independently: the x_w[i] are floats in [-16, 16) with at most
 * 28 bits between their largest and smallest bit, so their sum in double is
 * exact and one conversion to float rounds it once.
 */
#include "bench/bench_common.h"
#include "distref/cacc.h"
#include "distref/comm.h"
#include "distref/mpi.h"
#include "distref/rng.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITERS_MAX 30

static float value(uint32_t w, size_t i)
{
    float u = dr_rng_uniform(2026, w, (uint64_t)i) * 2.0f - 1.0f;   /* [-1, 1) on a 2^-24 grid */
    return u * (float)(1u << (i % 5));                                 /* times 1 .. 16 */
}

static double slowest(double t)
{
    double m = t;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/* Whether column col runs (--only: a comma-separated list; all by default). */
static bool want(const char *only, const char *col)
{
    size_t n = strlen(col);
    for (const char *p = only; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
        if (strncmp(p, col, n) == 0 && (p[n] == ',' || p[n] == 0)) return true;
    }
    return only == NULL;
}

static double median(double *t, int n)
{
    if (!t[0]) return 0;   /* a column not run (--only) */
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

int main(int argc, char **argv)
{
    const char *json = NULL, *only = NULL, *grad_form = "cacc";
    double max_mb = 16;
    uint32_t rank, W;
    dr_err err;
    FILE *jf = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) json = argv[++i];
        else if (strcmp(argv[i], "--max_mb") == 0 && i + 1 < argc) max_mb = atof(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
        else if (strcmp(argv[i], "--grad_form") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "cacc") == 0 || strcmp(argv[i + 1], "dd") == 0)) grad_form = argv[++i];
        else {
            fprintf(stderr, "usage: mpirun -np N mpi_allreduce [--json FILE] [--max_mb MB] [--only COL[,COL]] "
                    "[--grad_form cacc|dd] (COL: exact, compact, native, f32x, grad, ring32; mpi always runs; "
                    "grad_form: the grad column's partials, compact accumulators or double-doubles)\n");
            return 2;
        }
    }
    if (dr_mpi_init(&argc, &argv, &err)) { fprintf(stderr, "mpi_allreduce: %s\n", err.msg); return 1; }
    dr_mpi_world(&rank, &W);
    if (rank == 0) {
        printf("# all-reduce, %u ranks, float data; exact = distref's exact ring (DR_ACC_BYTES=%d per element on the "
               "wire), compact/native = the compact accumulators' ring / MPI_Iallreduce on digits, f32x = the exact "
               "float all-reduce, ring32 = the ring on floats, mpi = MPI_Allreduce(MPI_FLOAT, MPI_SUM); grad's partials: %s\n", W,
               DR_ACC_BYTES, strcmp(grad_form, "dd") == 0 ? "dd (double-doubles, encoded before the timer)" : "cacc (compact accumulators)");
        printf("%10s %10s | %10s %8s %8s %6s %7s | %10s %8s %6s %7s | %10s %8s %6s %7s | %10s %8s %6s %7s | %10s "
               "%8s %6s %7s | %10s %8s %7s | %10s %8s %7s\n", "size(B)", "count", "exact(us)", "algbw", "busbw", "ratio",
               "#wrong", "compact(us)", "busbw", "ratio", "#wrong", "native(us)", "busbw", "ratio", "#wrong", "f32x(us)",
               "busbw", "ratio", "#wrong", "grad(us)", "busbw", "ratio", "#wrong", "ring32(us)", "busbw", "#wrong",
               "mpi(us)", "busbw", "#wrong");
        if (json && (jf = fopen(json, "w")))
            fprintf(jf, "{\"benchmark\": \"mpi_allreduce\", \"ranks\": %u, \"grad_form\": \"%s\", \"rows\": [", W, grad_form);
    }
    for (size_t bytes = 1024; bytes <= (size_t)(max_mb * 1048576.0); bytes *= 4) {
        size_t n = bytes / sizeof(float);
        int iters = (int)(64.0 * 1048576.0 / (double)bytes);
        dr_acc *acc = malloc(n * sizeof *acc), *pristine = malloc(n * sizeof *pristine);
        dr_cacc *cacc = malloc(n * sizeof *cacc), *cpristine = malloc(n * sizeof *cpristine);
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *f = malloc(n * sizeof *f);
        float *expect = malloc(n * sizeof *expect), *gexpect = malloc(n * sizeof *gexpect), *g = malloc(n * sizeof *g);
        dr_cacc *gpart = malloc(n * sizeof *gpart), *gesc = malloc(n * sizeof *gesc);
        double *gpairs = malloc(2 * n * sizeof *gpairs);
        uint32_t *gat = malloc(n * sizeof *gat);
        dr_dd_parts gdd = { gpairs, gesc, gat, 0 };
        const bool dd = strcmp(grad_form, "dd") == 0;
        size_t gover = 0;
        double t[ITERS_MAX], te, tc, tn, tx, tr, tm, tg, busf = 2.0 * (W - 1) / (double)(W > 1 ? W : 1);
        uint64_t wrong_e = 0, wrong_c = 0, wrong_n = 0, wrong_x = 0, wrong_r = 0, wrong_m = 0, wrong_g = 0;
        dr_comm_config cc;
        dr_comm *ep[1], *nep[1];
        uint32_t neps = 0, nneps = 0;
        if (iters < 3) iters = 3;
        if (iters > ITERS_MAX) iters = ITERS_MAX;
        if (!acc || !pristine || !cacc || !cpristine || !x || !y || !f || !expect || !gexpect || !g || !gpart || !gesc || !gpairs || !gat) { fprintf(stderr, "mpi_allreduce: out of memory\n"); dr_mpi_abort(1); }
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            x[i] = value(rank, i);
            dr_acc_init(&pristine[i]);
            dr_acc_add(&pristine[i], x[i]);
            dr_cacc_init(&cpristine[i]);
            dr_cacc_add(&cpristine[i], x[i]);
            for (uint32_t w = 0; w < W; w++) s += (double)value(w, i);
            expect[i] = (float)s;
        }
        for (size_t i = 0; want(only, "grad") && i < n; i++) {   /* partials, and the total independently */
            dr_acc tot;
            dr_acc_init(&tot);
            dr_cacc_init(&gpart[i]);
            for (uint32_t w = 0; w < W; w++)
                for (int k = 0; k < BENCH_GRAD_K; k++) {
                    float a, b;
                    bench_grad_factors(w, i, k, &a, &b);
                    dr_acc_add_prod(&tot, a, b);
                    if (w == rank) dr_cacc_add_prod(&gpart[i], a, b);
                }
            gexpect[i] = dr_acc_round(&tot);
        }
        if (dd && want(only, "grad")) gdd.nesc = dr_dd_encode(gpart, n, gpairs, gesc, gat);
        memset(&cc, 0, sizeof cc);
        cc.num_ranks = W;
        cc.local_replicas = 1;
        cc.alg = DR_COMM_RING;
        cc.num_packs = 1;
        cc.ranks_alg = DR_COMM_RANKS_RING;
        if (dr_comm_mpi()->open(&cc, ep, &neps, &err)) { fprintf(stderr, "mpi_allreduce: %s\n", err.msg); dr_mpi_abort(1); }
        cc.ranks_alg = DR_COMM_RANKS_NATIVE;
        if (dr_comm_mpi()->open(&cc, nep, &nneps, &err)) { fprintf(stderr, "mpi_allreduce: %s\n", err.msg); dr_mpi_abort(1); }
        t[0] = 0;
        for (int k = 0; want(only, "exact") && k < iters; k++) {   /* exact */
            double t0;
            memcpy(acc, pristine, n * sizeof *acc);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = dr_now();
            if (dr_comm_mpi()->all_reduce(ep[0], DR_FORM_ACC, (void *const *)&acc, n, &err)) { fprintf(stderr, "mpi_allreduce: %s\n", err.msg); dr_mpi_abort(1); }
            t[k] = slowest(dr_now() - t0);
        }
        te = median(t, iters);
        for (size_t i = 0; te && i < n; i++) wrong_e += dr_acc_round(&acc[i]) != expect[i];
        t[0] = 0;
        for (int k = 0; want(only, "compact") && k < iters; k++) {   /* compact */
            double t0;
            memcpy(cacc, cpristine, n * sizeof *cacc);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = dr_now();
            if (dr_comm_mpi()->all_reduce(ep[0], DR_FORM_CACC, (void *const *)&cacc, n, &err)) {
                fprintf(stderr, "mpi_allreduce: %s\n", err.msg);
                dr_mpi_abort(1);
            }
            t[k] = slowest(dr_now() - t0);
        }
        tc = median(t, iters);
        for (size_t i = 0; tc && i < n; i++) wrong_c += dr_cacc_round_div(&cacc[i], 1) != expect[i];
        t[0] = 0;
        for (int k = 0; want(only, "native") && k < iters; k++) {   /* native: MPI_Iallreduce on integer digits */
            double t0;
            memcpy(cacc, cpristine, n * sizeof *cacc);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = dr_now();
            if (dr_comm_mpi()->all_reduce(nep[0], DR_FORM_CACC, (void *const *)&cacc, n, &err)) {
                fprintf(stderr, "mpi_allreduce: %s\n", err.msg);
                dr_mpi_abort(1);
            }
            t[k] = slowest(dr_now() - t0);
        }
        tn = median(t, iters);
        for (size_t i = 0; tn && i < n; i++) wrong_n += dr_cacc_round_div(&cacc[i], 1) != expect[i];
        t[0] = 0;
        for (int k = 0; want(only, "f32x") && k < iters; k++) {   /* exact floats: one int32 digit an element */
            double t0;
            memcpy(f, x, n * sizeof *f);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = dr_now();
            if (dr_comm_mpi()->all_reduce(nep[0], DR_FORM_F32_EXACT, (void *const *)&f, n, &err)) {
                fprintf(stderr, "mpi_allreduce: %s\n", err.msg);
                dr_mpi_abort(1);
            }
            t[k] = slowest(dr_now() - t0);
        }
        tx = median(t, iters);
        t[0] = 0;
        for (int k = 0; want(only, "grad") && k < iters; k++) {   /* partials in (grad_form), rounded floats out */
            double t0;
            const dr_cacc *gp = gpart;
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = dr_now();
            if (dr_comm_mpi()->all_reduce_round(nep[0], dd ? NULL : &gp, dd ? &gdd : NULL, n, 1, &g, &gover, &err)) {
                fprintf(stderr, "mpi_allreduce: %s\n", err.msg);
                dr_mpi_abort(1);
            }
            t[k] = slowest(dr_now() - t0);
        }
        tg = median(t, iters);
        for (size_t i = 0; tg && i < n; i++) wrong_g += memcmp(&g[i], &gexpect[i], sizeof *g) != 0 || gover;
        for (size_t i = 0; tx && i < n; i++) wrong_x += memcmp(&f[i], &expect[i], sizeof *f) != 0;
        t[0] = 0;
        for (int k = 0; want(only, "ring32") && k < iters; k++) {   /* the same ring on floats */
            double t0;
            memcpy(f, x, n * sizeof *f);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = dr_now();
            if (dr_comm_mpi()->all_reduce(ep[0], DR_FORM_F32, (void *const *)&f, n, &err)) { fprintf(stderr, "mpi_allreduce: %s\n", err.msg); dr_mpi_abort(1); }
            t[k] = slowest(dr_now() - t0);
        }
        tr = median(t, iters);
        for (size_t i = 0; tr && i < n; i++) wrong_r += f[i] != expect[i];
        for (int k = 0; k < iters; k++) {   /* MPI_Allreduce */
            double t0;
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = dr_now();
            MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t[k] = slowest(dr_now() - t0);
        }
        tm = median(t, iters);
        for (size_t i = 0; i < n; i++) wrong_m += y[i] != expect[i];
        dr_comm_mpi()->close(ep, neps);
        dr_comm_mpi()->close(nep, nneps);
        {   /* #wrong summed over ranks (each rank checks its own copy of the result) */
            uint64_t mine[7] = { wrong_e, wrong_c, wrong_r, wrong_m, wrong_n, wrong_x, wrong_g }, all[7];
            MPI_Allreduce(mine, all, 7, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
            wrong_g = all[6];
            wrong_e = all[0]; wrong_c = all[1]; wrong_r = all[2]; wrong_m = all[3]; wrong_n = all[4]; wrong_x = all[5];
        }
        if (rank == 0) {
            double ae = bytes / te / 1e9, be = ae * busf, br = bytes / tr / 1e9 * busf, bm = bytes / tm / 1e9 * busf;
            double bc = bytes / tc / 1e9 * busf, bn = bytes / tn / 1e9 * busf, bx = bytes / tx / 1e9 * busf;
            double bg = bytes / tg / 1e9 * busf;
            printf("%10zu %10zu | %10.1f %8.3f %8.3f %6.3f %7llu | %10.1f %8.3f %6.3f %7llu | %10.1f %8.3f %6.3f %7llu | "
                   "%10.1f %8.3f %6.3f %7llu | %10.1f %8.3f %6.3f %7llu | %10.1f %8.3f %7llu | %10.1f %8.3f %7llu\n",
                   bytes, n, te * 1e6, ae, be,
                   W > 1 ? be / bm : 0.0, (unsigned long long)wrong_e, tc * 1e6, bc, W > 1 ? bc / bm : 0.0,
                   (unsigned long long)wrong_c, tn * 1e6, bn, W > 1 ? bn / bm : 0.0, (unsigned long long)wrong_n,
                   tx * 1e6, bx, W > 1 ? bx / bm : 0.0, (unsigned long long)wrong_x,
                   tg * 1e6, bg, W > 1 ? bg / bm : 0.0, (unsigned long long)wrong_g, tr * 1e6, br,
                   (unsigned long long)wrong_r, tm * 1e6, bm, (unsigned long long)wrong_m);
            if (jf)
                fprintf(jf, "%s{\"bytes\": %zu, \"grad_us\": %.3f, \"grad_busbw\": %.4f, \"grad_wrong\": %llu, "
                        "\"f32x_us\": %.3f, \"f32x_busbw\": %.4f, \"f32x_wrong\": %llu, "
                        "\"native_us\": %.3f, \"native_busbw\": %.4f, \"native_wrong\": %llu, "
                        "\"compact_us\": %.3f, \"compact_busbw\": %.4f, \"compact_wrong\": %llu, "
                        "\"exact_us\": %.3f, \"exact_busbw\": %.4f, \"exact_wrong\": %llu, "
                        "\"ring32_us\": %.3f, \"ring32_busbw\": %.4f, \"ring32_wrong\": %llu, \"mpi_us\": %.3f, "
                        "\"mpi_busbw\": %.4f, \"mpi_wrong\": %llu}", bytes == 1024 ? "" : ", ", bytes, tg * 1e6, bg,
                        (unsigned long long)wrong_g, tx * 1e6, bx,
                        (unsigned long long)wrong_x, tn * 1e6, bn,
                        (unsigned long long)wrong_n, tc * 1e6, bc,
                        (unsigned long long)wrong_c, te * 1e6, be,
                        (unsigned long long)wrong_e, tr * 1e6, br, (unsigned long long)wrong_r, tm * 1e6, bm,
                        (unsigned long long)wrong_m);
        }
        free(acc); free(pristine); free(cacc); free(cpristine); free(x); free(y); free(f); free(expect);
        free(gexpect); free(g); free(gpart); free(gesc); free(gpairs); free(gat);
    }
    if (jf) { fprintf(jf, "]}\n"); fclose(jf); }
    if (rank == 0) printf("# busbw in GB/s; ratio = exact busbw / mpi busbw; #wrong over all ranks' copies\n");
    dr_mpi_finalize();
    return 0;
}
