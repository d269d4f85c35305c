/* distref tests — the threads comm (devices/comm/comm_threads.c, comm_torus.c)
 * in every number form it reduces: one loop over forms (ACC, CACC, F32) x
 * algorithms (RING, HIERARCHICAL, ONE_DEVICE; TORUS for the tpu) x packs
 * (0, 1, k) x R x ranks (threads), each result checked against its form's
 * own expectation computed independently (tests/comm_fixture.h): exact forms
 * the exact sum of the terms (CACC: the planted element overflowed on every
 * replica once two of its terms meet); F32 the float order distref/comm.h
 * documents, bit for bit, and proof that the orders differ somewhere, so the
 * order is really tested; bytes the reference's (ref/) at the form's wire
 * size. F32_EXACT and unknown forms are refused. Built with
 * -DDR_MUTANT_CHUNK_OFF_BY_ONE on the comm, or -DDR_MUTANT_CACC_MERGE_FLAG on
 * core/form.c (scripts/exact_mutants.sh), this test must fail.
 *
 * It replaces test_comm.c (ACC), test_comm_f32.c and test_comm_compact.c:
 *   acc one_rank_algorithms, f32 one_rank_algorithms, cacc one_rank
 *                              -> all_reduce_one_rank (every form; the
 *                                 orders_differ check per algorithm)
 *   acc/f32 one_rank_big       -> all_reduce_big (the same cases, + CACC)
 *   acc one_rank_nested_openmp -> nested_openmp (every form)
 *   acc/f32 ranks_all_reduce, cacc ranks (all_reduce half)
 *                              -> all_reduce_ranks (every form and algorithm;
 *                                 bytes now checked for F32 and CACC too)
 *   acc ranks_refuse_together  -> ranks_refuse_together (every form)
 *   acc/f32 reduce_to, cacc ranks (reduce_to half)
 *                              -> reduce_to (every form, the union of cases)
 *   cacc overflow_everywhere   -> cacc_overflow (+ the ACC redo; and the
 *                                 planted element in every case above)
 *   acc/f32 torus              -> torus (every form; F32 now in the torus's
 *                                 documented order, bit for bit, besides the
 *                                 old error bound)
 *   acc errors, f32 errors     -> errors (the usage errors in every form)
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "comm_fixture.h"

/* Per form, tensors whose packs and chunks cut the form's blocks (exact:
 * 256 elements, F32: 4096), and past the exact forms' parallel threshold. */
static const size_t odd_exact[] = { 7, 3, 11, 2, 300 }, odd_f32[] = { 7, 3, 11, 2, 4099, 5000 };
static const size_t wide_exact[] = { 1000, 2001, 5 }, wide_f32[] = { 1000, 9001, 5 };
#define ODD(fi)  (fi == F_F32 ? odd_f32 : odd_exact), (fi == F_F32 ? 6u : 5u)
#define WIDE(fi) (fi == F_F32 ? wide_f32 : wide_exact), 3

/* ---- all_reduce: the sweep -------------------------------------------------- */

static int orders_differ[3];   /* per algorithm: elements where another algorithm's order gives other bits */

static void all_reduce_case(int fi, uint32_t a, uint32_t W, uint32_t R, int packs, const size_t *lens, uint32_t nt)
{
    static dr_strategy st, rs;
    void *x[MAXR];
    dr_acc *ref[MAXR], *want;
    float *orig[MAXR] = { NULL }, *wantf = NULL;
    dr_comm *eps[8];
    dr_comm_config cfg;
    dr_err err;
    size_t n = 0;
    uint64_t seed = 11 + 7 * W + R;
    char what[160];
    for (uint32_t t = 0; t < nt; t++) n += lens[t];
    snprintf(what, sizeof what, "%s %s W=%u R=%u num_packs=%d n=%zu", FORM_NAME[fi], ALG_NAME[a], W, R, packs, n);
    if (W == 1) {
        make_strategy(&st, DR_STRATEGY_MIRRORED, (int)R, XDEV[a], packs, 0);
        make_strategy(&rs, DR_STRATEGY_MIRRORED, (int)R, XDEV[a], packs, 0);
    } else {   /* the reference: a ring over W one-replica workers */
        make_strategy(&st, DR_STRATEGY_MULTI_WORKER_MIRRORED, R == 1 ? 0 : (int)R, DR_XDEV_RING, packs, W);
        make_strategy(&rs, DR_STRATEGY_MULTI_WORKER_MIRRORED, 0, DR_XDEV_RING, packs, W);
    }
    assert_int_equal(st.num_replicas, W * R);
    for (uint32_t r = 0; r < W * R; r++) x[r] = make(fi, n, r, seed);
    for (uint32_t q = 0; q < (W == 1 ? R : W); q++)   /* the reference's: only ACC's total is checked */
        assert_non_null(ref[q] = fi == F_ACC ? copy_of(F_ACC, x[q], n) : calloc(n + 1, sizeof(dr_acc)));
    want = fi == F_F32 ? NULL : exact_total(W * R, false, n, seed);
    if (fi == F_F32) {
        float *alt = malloc((n + 1) * sizeof *alt);
        wantf = malloc((n + 1) * sizeof *wantf);
        assert_true(alt && wantf);
        for (uint32_t r = 0; r < W * R; r++) orig[r] = copy_of(fi, x[r], n);
        f32_expected(orig, W, R, ALGS[a], packs, lens, nt, n, wantf);
        if (W == 1 && R > 2) {
            f32_expected(orig, W, R, a == 2 ? DR_COMM_RING : DR_COMM_ONE_DEVICE, packs, lens, nt, n, alt);
            for (size_t i = 0; i < n; i++) orders_differ[a] += memcmp(&alt[i], &wantf[i], 4) != 0;
        }
        free_all((void **)orig, W * R);
        free(alt);
    }
    cfg = config(W, R, ALGS[a], packs, lens, nt, &st);
    open_comm(&cfg, eps);
    call(eps, W, R, OP_ALL_REDUCE, fi, x, n, NULL, 0, what);
    expect_all(fi, x, W * R, n, want, wantf, W * R > 1, what);
    dr_comm_threads()->close(eps, W);
    assert_null(eps[0]);

    assert_int_equal(dr_all_reduce(&rs, ref, n, lens, nt, &err), DR_OK);
    if (W == 1) {
        if (fi == F_ACC) expect_all(F_ACC, (void *const *)ref, R, n, want, NULL, false, "the reference");
        expect_bytes(&st, &rs, WIRE[fi], what);
        if (R > 1) assert_true(moved(&st) > 0);
    } else {   /* gathering onto local[0] and copying back add n elements per replica */
        for (uint32_t w = 0; w < W; w++)
            for (uint32_t r = 0; r < R; r++) {
                const dr_device *got = &st.device[st.replica_device[w * R + r]];
                const dr_device *cpu = &rs.device[rs.replica_device[w]];
                uint64_t in = r ? n * WIRE[fi] : cpu->bytes_in / B * WIRE[fi] + (R - 1) * n * WIRE[fi];
                uint64_t out = r ? n * WIRE[fi] : cpu->bytes_out / B * WIRE[fi] + (R - 1) * n * WIRE[fi];
                if (got->bytes_in != in || got->bytes_out != out)
                    fail_msg("%s: %s moved in %llu out %llu, expected in %llu out %llu", what, got->name,
                             (unsigned long long)got->bytes_in, (unsigned long long)got->bytes_out,
                             (unsigned long long)in, (unsigned long long)out);
            }
        if (R == 1) expect_bytes(&st, &rs, WIRE[fi], what);
    }
    free_all(x, W * R);
    free_all((void **)ref, W == 1 ? R : W);
    free(want);
    free(wantf);
}

static void all_reduce_one_rank(void **state)
{
    static const int packs[] = { 0, 1, 3 };
    (void)state;
    memset(orders_differ, 0, sizeof orders_differ);
    for (int fi = 0; fi < NF; fi++)
        for (uint32_t a = 0; a < 3; a++)
            for (size_t p = 0; p < 3; p++)
                for (uint32_t R = 1; R <= 8; R++) all_reduce_case(fi, a, 1, R, packs[p], ODD(fi));
    for (uint32_t a = 0; a < 3; a++)   /* the order is really tested */
        if (orders_differ[a] == 0) fail_msg("f32 %s: no element whose bits another order changes", ALG_NAME[a]);
}

/* Ranks as threads: each rank's replicas onto its first, a ring over the
 * ranks; the algorithm does not apply across ranks. */
static void all_reduce_ranks(void **state)
{
    (void)state;
    for (int fi = 0; fi < NF; fi++)
        for (uint32_t a = 0; a < 3; a++)
            for (uint32_t W = 2; W <= 3; W++)
                for (uint32_t R = 1; R <= 2; R++) {
                    all_reduce_case(fi, a, W, R, 0, ODD(fi));
                    all_reduce_case(fi, a, W, R, 3, ODD(fi));
                    all_reduce_case(fi, a, W, R, 1, WIDE(fi));
                }
}

/* Above the parallel thresholds (exact: a block; F32: DR_CT_PAR_F32) the
 * blocks run on OpenMP threads: the same results. */
static void all_reduce_big(void **state)
{
    static const size_t big[] = { 100003 }, split[] = { 60000, 40003 };
    static const size_t fbig[] = { 300007 }, fsplit[] = { 200000, 100007 }, fbigger[] = { 600011 };
    static const struct { int fi; uint32_t a, W, R; int packs; const size_t *lens; uint32_t nt; } c[] = {
        { F_ACC, 0, 1, 5, 3, split, 2 },    { F_ACC, 0, 1, 4, 0, big, 1 },      { F_ACC, 1, 1, 4, 0, split, 2 },
        { F_ACC, 2, 1, 3, 1, big, 1 },      { F_CACC, 0, 1, 4, 0, big, 1 },     { F_CACC, 1, 2, 2, 2, split, 2 },
        { F_F32, 0, 1, 3, 0, fbig, 1 },     { F_F32, 0, 1, 4, 2, fsplit, 2 },   { F_F32, 1, 1, 3, 0, fbig, 1 },
        { F_F32, 1, 1, 4, 2, fsplit, 2 },   { F_F32, 2, 1, 3, 0, fbig, 1 },     { F_F32, 2, 1, 4, 2, fsplit, 2 },
        { F_F32, 0, 2, 2, 2, fbigger, 1 },
    };
    (void)state;
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++)
        all_reduce_case(c[k].fi, c[k].a, c[k].W, c[k].R, c[k].packs, c[k].lens, c[k].nt);
}

/* Called from inside an OpenMP region, the comm's own regions get one
 * thread: the same results. */
static void nested_openmp(void **state)
{
    static const size_t lens[] = { 3000, 2001 };
    enum { R = 4, N = 5001 };
    (void)state;
    for (int fi = 0; fi < NF; fi++) {
        void *x[R], *orig[R];
        float *wantf = malloc(N * sizeof *wantf);
        dr_acc *want = exact_total(R, false, N, 5);
        dr_comm *ep;
        dr_comm_config cfg = config(1, R, DR_COMM_RING, 0, lens, 2, NULL);
        int rc = -1;
        dr_err err;
        for (uint32_t r = 0; r < R; r++) {
            x[r] = make(fi, N, r, 5);
            orig[r] = copy_of(fi, x[r], N);
        }
        if (fi == F_F32) f32_expected((float *const *)orig, 1, R, DR_COMM_RING, 0, lens, 2, N, wantf);
        open_comm(&cfg, &ep);
        #pragma omp parallel num_threads(2)
        {
            #pragma omp single
            rc = dr_comm_threads()->all_reduce(ep, FORMS[fi], x, N, &err);
        }
        assert_int_equal(rc, DR_OK);
        expect_all(fi, x, R, N, want, wantf, true, "nested");
        dr_comm_threads()->close(&ep, 1);
        free_all(x, R);
        free_all(orig, R);
        free(want);
        free(wantf);
    }
}

/* A rank that refuses its arguments fails every rank, and none hangs. */
static void ranks_refuse_together(void **state)
{
    (void)state;
    for (int fi = 0; fi < NF; fi++) {
        void *x[4];
        dr_comm *eps[2];
        rank_job jobs[2];
        size_t lens[] = { 10 }, ns[2] = { 10, 9 };
        dr_comm_config cfg = config(2, 2, DR_COMM_RING, 0, lens, 1, NULL);
        for (uint32_t r = 0; r < 4; r++) x[r] = make(fi, 10, r, 3);
        open_comm(&cfg, eps);
        run_ranks(eps, 2, 2, OP_ALL_REDUCE, FORMS[fi], x, 0, ns, NULL, 0, jobs);   /* rank 1: 9 elements */
        for (uint32_t w = 0; w < 2; w++) {
            assert_int_equal(jobs[w].rc, DR_EUSAGE);
            assert_non_null(strstr(jobs[w].err.msg, "rank 1"));
        }
        ns[1] = 10;
        run_ranks(eps, 2, 2, OP_REDUCE_TO, FORMS[fi], x, 0, ns, NULL, 0, jobs);     /* rank 0 without a destination */
        for (uint32_t w = 0; w < 2; w++) {
            assert_int_equal(jobs[w].rc, DR_EUSAGE);
            assert_non_null(strstr(jobs[w].err.msg, "no destination"));
        }
        run_ranks(eps, 2, 2, OP_ALL_REDUCE, FORMS[fi], x, 0, ns, NULL, 0, jobs);   /* the group still works */
        assert_int_equal(jobs[0].rc, DR_OK);
        assert_int_equal(jobs[1].rc, DR_OK);
        dr_comm_threads()->close(&eps[1], 1);   /* one by one */
        dr_comm_threads()->close(&eps[0], 1);
        free_all(x, 4);
    }
}

/* ---- reduce_to (central_storage) -------------------------------------------- */

/* Exact forms add the sum to what dst holds; floats overwrite dst with
 * x_0 + x_1 + ... in global replica order. dev < 0: the variable device. */
static void reduce_to_case(int fi, uint32_t W, uint32_t R, uint32_t gpus, dr_strategy_kind kind, size_t n, int dev)
{
    static dr_strategy st, rs;
    void *x[MAXR], *dst;
    dr_acc *ref[MAXR], *rdst, *want;
    float *wantf = malloc((n + 1) * sizeof *wantf);
    dr_comm *eps[8];
    size_t lens[1] = { n };
    dr_comm_config cfg;
    dr_err err;
    uint64_t in = 0, out = 0, remote = 0;
    uint32_t d;
    char what[128];
    snprintf(what, sizeof what, "%s reduce_to W=%u R=%u gpus=%u n=%zu", FORM_NAME[fi], W, R, gpus, n);
    make_strategy(&st, kind, (int)gpus, DR_XDEV_DEFAULT, 0, W);
    make_strategy(&rs, kind, (int)gpus, DR_XDEV_DEFAULT, 0, W);
    d = dev < 0 ? st.variable_device : (uint32_t)dev;
    for (uint32_t r = 0; r < W * R; r++) {
        x[r] = make(fi, n, r, 41);
        ref[r] = make(F_ACC, n, r, 41);
    }
    dst = make(fi, n, 99, 41);   /* the destination already holds something */
    rdst = make(F_ACC, n, 99, 41);
    want = exact_total(W * R, true, n, 41);
    for (size_t i = 0; i < n && fi == F_F32; i++) wantf[i] = fold((float *const *)x, 0, W * R, i);
    cfg = config(W, R, DR_COMM_RING, 0, lens, 1, &st);
    open_comm(&cfg, eps);
    call(eps, W, R, OP_REDUCE_TO, fi, x, n, dst, d, what);
    expect_all(fi, &dst, 1, n, want, wantf, W * R > 1, what);
    assert_int_equal(dr_reduce_to_device(&rs, ref, n, d, rdst, &err), DR_OK);
    expect_bytes(&st, &rs, WIRE[fi], what);
    for (uint32_t k = 0; k < st.num_devices; k++) {   /* n elements from every other device */
        in += st.device[k].bytes_in;
        out += st.device[k].bytes_out;
    }
    for (uint32_t r = 0; r < W * R; r++) remote += st.replica_device[r] != d;
    assert_int_equal(in, remote * n * WIRE[fi]);
    assert_int_equal(out, remote * n * WIRE[fi]);
    dr_comm_threads()->close(eps, W);
    free_all(x, W * R);
    free_all((void **)ref, W * R);
    free(dst);
    free(rdst);
    free(want);
    free(wantf);
}

static void reduce_to(void **state)
{
    static const struct { uint32_t W, R, gpus; dr_strategy_kind kind; size_t n; int dev; } c[] = {
        { 1, 3, 3, DR_STRATEGY_CENTRAL_STORAGE, 23, -1 },
        { 1, 1, 1, DR_STRATEGY_CENTRAL_STORAGE, 23, -1 },   /* variables on the replica's GPU: free */
        { 1, 4, 4, DR_STRATEGY_CENTRAL_STORAGE, 3000, -1 },
        { 1, 4, 4, DR_STRATEGY_CENTRAL_STORAGE, 9000, -1 },
        { 2, 2, 2, DR_STRATEGY_MULTI_WORKER_MIRRORED, 1001, -1 },
        { 3, 1, 0, DR_STRATEGY_MULTI_WORKER_MIRRORED, 23, -1 },
        { 2, 1, 1, DR_STRATEGY_MULTI_WORKER_MIRRORED, 323, 0 },
        { 2, 2, 2, DR_STRATEGY_MULTI_WORKER_MIRRORED, 323, 0 },
        { 3, 1, 1, DR_STRATEGY_MULTI_WORKER_MIRRORED, 323, 0 },
        { 3, 2, 2, DR_STRATEGY_MULTI_WORKER_MIRRORED, 323, 0 },
    };
    (void)state;
    for (int fi = 0; fi < NF; fi++)
        for (size_t k = 0; k < sizeof c / sizeof c[0]; k++)
            reduce_to_case(fi, c[k].W, c[k].R, c[k].gpus, c[k].kind, c[k].n, c[k].dev);
}

/* ---- compact overflow ----------------------------------------------------------- */

/* An element already overflowed on one replica (2^120 beside its small
 * terms) comes out overflowed on every replica, never rounded, the others
 * exact; the caller's redo in ACC gives that element's exact total. */
static void cacc_overflow(void **state)
{
    static const size_t lens[] = { 323 };
    enum { N = 323 };
    void *c[3], *f[3];
    dr_acc *want = exact_total(3, false, N, 9);
    dr_comm *ep;
    dr_comm_config cfg = config(1, 3, DR_COMM_RING, 1, lens, 1, NULL);
    uint32_t one;
    dr_err err;
    (void)state;
    for (uint32_t r = 0; r < 3; r++) {
        c[r] = make(F_CACC, N, r, 9);
        f[r] = make(F_ACC, N, r, 9);
    }
    dr_cacc_add((dr_cacc *)c[2] + 200, 0x1p120f);
    dr_cacc_add((dr_cacc *)c[0] + 200, 0x1p-120f);
    dr_acc_add((dr_acc *)f[2] + 200, 0x1p120f);
    dr_acc_add((dr_acc *)f[0] + 200, 0x1p-120f);
    dr_acc_add(&want[200], 0x1p120f);
    dr_acc_add(&want[200], 0x1p-120f);
    assert_true(dr_cacc_overflowed((dr_cacc *)c[2] + 200));
    assert_int_equal(dr_comm_threads()->open(&cfg, &ep, &one, &err), DR_OK);
    assert_int_equal(dr_comm_threads()->all_reduce(ep, DR_FORM_CACC, c, N, &err), DR_OK);
    assert_int_equal(dr_comm_threads()->all_reduce(ep, DR_FORM_ACC, f, N, &err), DR_OK);
    for (uint32_t r = 0; r < 3; r++)
        for (size_t i = 0; i < N; i++) {
            if (i == 200) assert_true(dr_cacc_overflowed((dr_cacc *)c[r] + i));
            else expect_elem(F_CACC, c[r], i, want, NULL, true, "cacc overflow", r);
            expect_elem(F_ACC, f[r], i, want, NULL, true, "the redo in acc", r);
        }
    dr_comm_threads()->close(&ep, 1);
    free_all(c, 3);
    free_all(f, 3);
    free(want);
}

/* ---- the torus (tpu) ---------------------------------------------------------- */

/* Inside the ranges every replica holds the form's result (F32: the torus's
 * order, and within R u sum|x| of the exact sum); outside, its own bits.
 * Seconds: ACC's the reference's bit for bit, narrower wires no more. */
static void torus_case(int fi, const dr_tpu_system *sys, const int shape[4], const size_t *ranges, uint32_t nr,
                       size_t N)
{
    static dr_strategy st, rs;
    dr_strategy_spec spec;
    dr_strategy_options opt;
    dr_err err;
    uint32_t R, k;
    memset(&spec, 0, sizeof spec);
    memset(&opt, 0, sizeof opt);
    spec.kind = DR_STRATEGY_TPU;
    opt.tpu_system = sys;
    memcpy(opt.tpu_computation_shape, shape, sizeof opt.tpu_computation_shape);
    assert_int_equal(dr_strategy_create(&spec, &opt, &st, &err), DR_OK);
    assert_int_equal(dr_strategy_create(&spec, &opt, &rs, &err), DR_OK);
    R = st.num_replicas;
    k = (uint32_t)st.tpu_assignment.num_cores_per_replica;
    for (uint32_t l = 0; l < k; l++) {
        void *x[MAXR], *orig[MAXR];
        dr_acc *ref[MAXR], *want = exact_total(R, false, N, 77 + l);
        float *wantf[MAXR];
        dr_comm *ep;
        dr_comm_config cfg = config(1, R, DR_COMM_TORUS, 0, NULL, 0, &st);
        double secs = 0.25, rsecs = 0.25;   /* both add to what is there */
        char what[160];
        snprintf(what, sizeof what, "%s torus %s shape [%d,%d,%d,%d] core %u, %u ranges", FORM_NAME[fi],
                 sys->topology.name, shape[0], shape[1], shape[2], shape[3], l, nr);
        for (uint32_t r = 0; r < R; r++) {
            x[r] = make(fi, N, r, 77 + l);
            orig[r] = copy_of(fi, x[r], N);
            wantf[r] = fi == F_F32 ? copy_of(fi, x[r], N) : NULL;
            ref[r] = make(F_ACC, N, r, 77 + l);
        }
        if (fi == F_F32) f32_torus(&st, wantf, ranges, nr);
        open_comm(&cfg, &ep);
        if (dr_comm_threads()->all_reduce_ranges(ep, FORMS[fi], x, ranges, nr, l, &secs, &err))
            fail_msg("%s: %s", what, err.msg);
        assert_int_equal(dr_tpu_all_reduce(&rs, ref, ranges, nr, l, &rsecs, &err), DR_OK);
        for (size_t i = 0, q = 0; i < N; i++) {
            bool inside;
            while (q < nr && ranges[2 * q + 1] <= i) q++;
            inside = q < nr && ranges[2 * q] <= i;
            for (uint32_t r = 0; r < R; r++) {
                if (!inside && memcmp((char *)x[r] + i * SIZE[fi], (char *)orig[r] + i * SIZE[fi], SIZE[fi]))
                    fail_msg("%s: replica %u element %zu (outside the ranges) changed", what, r, i);
                if (inside) expect_elem(fi, x[r], i, want, wantf[0], R > 1, what, r);   /* F32: the same bits */
                if (inside && fi == F_ACC) assert_true(dr_acc_equal(&ref[r][i], &want[i]));
            }
            if (inside && fi == F_F32) {   /* a float sum of R terms errs by at most u sum |x| */
                float e = dr_acc_round(&want[i]), got = ((float *)x[0])[i];
                double mag = 0;
                for (uint32_t r = 0; r < R; r++) mag += fabs((double)((float *)orig[r])[i]);
                if (!(fabs((double)got - e) <= R * 0x1p-24 * mag) && !(isinf(got) && got == e))
                    fail_msg("%s: element %zu: %g, exact %g", what, i, (double)got, (double)e);
            }
        }
        if (fi == F_ACC && memcmp(&secs, &rsecs, sizeof secs) != 0)
            fail_msg("%s: %.17g seconds, the reference %.17g", what, secs, rsecs);
        assert_true(secs <= rsecs);
        if (R > 1) assert_true(secs > 0.25);
        expect_bytes(&st, &rs, WIRE[fi], what);
        if (R > 1) assert_true((moved(&st) > 0) == (nr > 0));
        dr_comm_threads()->close(&ep, 1);
        free_all(x, R);
        free_all(orig, R);
        free_all((void **)ref, R);
        if (fi == F_F32) free_all((void **)wantf, R);
        free(want);
    }
}

static void torus(void **state)
{
    static const int shapes[][4] = { { 0, 0, 0, 0 }, { 1, 1, 1, 2 }, { 1, 2, 1, 2 }, { 2, 2, 1, 2 }, { 4, 2, 1, 2 } };
    static const size_t small[] = { 3, 10, 20, 33 }, wide[] = { 0, 700, 800, 1900, 1900, 1901 };
    dr_tpu_system sys;
    dr_err err;
    (void)state;
    for (int fi = 0; fi < NF; fi++) {
        memset(&sys, 0, sizeof sys);
        assert_int_equal(dr_tpu_initialize_system(&sys, "v2-8", NULL, 1.0, &err), DR_OK);
        torus_case(fi, &sys, shapes[0], small, 2, 37);
        torus_case(fi, &sys, shapes[0], wide, 3, 2000);
        torus_case(fi, &sys, shapes[1], wide, 3, 2000);
        torus_case(fi, &sys, shapes[2], small, 0, 37);   /* nothing to reduce: only latency */
        assert_int_equal(dr_tpu_initialize_system(&sys, "v3-32", NULL, 1.0, &err), DR_OK);
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            torus_case(fi, &sys, shapes[k], small, 2, 37);
            torus_case(fi, &sys, shapes[k], wide, 3, 2000);
        }
    }
}

/* ---- errors ----------------------------------------------------------------------- */

static void expect_open_error(const dr_comm_config *cfg, int code, const char *phrase)
{
    dr_comm *eps[4] = { NULL };
    uint32_t neps = 7;
    dr_err err = { 0, "" };
    assert_int_equal(dr_comm_threads()->open(cfg, eps, &neps, &err), code);
    if (!strstr(err.msg, phrase)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, phrase);
    assert_null(eps[0]);
    assert_int_equal(neps, 7);
}

static void expect_rc(int got, int want, const dr_err *err, const char *phrase)
{
    assert_int_equal(got, want);
    if (phrase && !strstr(err->msg, phrase)) fail_msg("message \"%s\" lacks \"%s\"", err->msg, phrase);
}

/* Each form's usage errors on a 2-replica ring (lengths { 4, 5 }). */
static void form_errors(dr_comm *ep, int fi)
{
    static const size_t ranges[] = { 0, 4, 3, 6 };
    const dr_comm_ops *ops = dr_comm_threads();
    void *x[2] = { make(fi, 10, 0, 1), make(fi, 10, 1, 1) };
    double secs = 0;
    dr_err err;
    expect_rc(ops->all_reduce(ep, FORMS[fi], x, 10, &err), DR_EUSAGE, &err,
              "the 2 tensor lengths sum to 9, but the arrays hold 10 accumulators");
    expect_rc(ops->all_reduce(ep, FORMS[fi], (void *[]){ x[0], NULL }, 9, &err), DR_EUSAGE, &err,
              "local replica 1's array is NULL");
    expect_rc(ops->all_reduce_ranges(ep, FORMS[fi], x, ranges, 1, 0, &secs, &err), DR_EUSAGE, &err,
              "needs algorithm TORUS");
    expect_rc(ops->all_reduce_ranges(ep, FORMS[fi], x, NULL, 0, 0, NULL, &err), DR_EUSAGE, &err, NULL);
    expect_rc(ops->reduce_to(ep, FORMS[fi], x, 9, 0, NULL, &err), DR_EUSAGE, &err, "no destination");
    assert_int_equal(ops->barrier(ep, &err), DR_OK);
    free_all(x, 2);
}

static void errors(void **state)
{
    static dr_strategy st, tpu;
    static const size_t lens[] = { 4, 5 }, ranges[] = { 0, 4, 3, 6 }, backwards[] = { 5, 2 };
    const dr_comm_ops *ops = dr_comm_threads();
    void *x[2] = { make(F_ACC, 10, 0, 1), make(F_ACC, 10, 1, 1) };
    dr_comm *ep;
    dr_comm_config cfg;
    dr_tpu_system sys;
    dr_strategy_spec spec;
    dr_strategy_options opt;
    double secs = 0;
    dr_err err;
    (void)state;
    assert_string_equal(ops->name, "threads");
    cfg = config(0, 1, DR_COMM_RING, 0, lens, 2, NULL);
    expect_open_error(&cfg, DR_EUSAGE, "num_ranks must be at least 1, got 0");
    cfg = config(1, 0, DR_COMM_RING, 0, lens, 2, NULL);
    expect_open_error(&cfg, DR_EUSAGE, "local_replicas must be at least 1, got 0");
    cfg = config(1, 2, DR_COMM_RING, -1, lens, 2, NULL);
    expect_open_error(&cfg, DR_EUSAGE, "num_packs must be >= 0, got -1");
    cfg = config(1, 2, DR_COMM_RING, 0, NULL, 2, NULL);
    expect_open_error(&cfg, DR_EUSAGE, "no tensor lengths");
    cfg = config(1, 2, (dr_comm_alg)9, 0, lens, 2, NULL);
    expect_open_error(&cfg, DR_EUSAGE, "unknown algorithm 9");
    make_strategy(&st, DR_STRATEGY_MIRRORED, 3, DR_XDEV_NCCL, 0, 0);
    cfg = config(1, 2, DR_COMM_RING, 0, lens, 2, &st);
    expect_open_error(&cfg, DR_EUSAGE, "1 ranks x 2 local replicas, but the strategy has 3 replicas");
    cfg = config(1, 3, DR_COMM_TORUS, 0, NULL, 0, &st);
    expect_open_error(&cfg, DR_EUSAGE, "TORUS needs a tpu strategy");

    cfg = config(1, 2, DR_COMM_RING, 0, lens, 2, NULL);
    open_comm(&cfg, &ep);
    for (int fi = 0; fi < NF; fi++) form_errors(ep, fi);
    /* forms: the exact float sum is the MPI comm's alone; an unknown form is refused */
    expect_rc(ops->all_reduce(ep, DR_FORM_F32_EXACT, x, 9, &err), DR_EUNSUPPORTED, &err, "form f32_exact");
    expect_rc(ops->reduce_to(ep, DR_FORM_F32_EXACT, x, 9, 0, x[0], &err), DR_EUNSUPPORTED, &err, "form f32_exact");
    expect_rc(ops->all_reduce_ranges(ep, DR_FORM_F32_EXACT, x, ranges, 1, 0, &secs, &err), DR_EUNSUPPORTED, &err,
              "form f32_exact");
    expect_rc(ops->all_reduce(ep, (dr_form_id)99, x, 9, &err), DR_EUSAGE, &err, "unknown number form 99");
    expect_rc(ops->reduce_to(ep, (dr_form_id)99, x, 9, 0, x[0], &err), DR_EUSAGE, &err, "unknown number form 99");
    assert_int_equal(ops->barrier(ep, &err), DR_OK);
    ops->close(&ep, 1);
    cfg = config(1, 2, DR_COMM_RING, 3, NULL, 0, NULL);   /* packs need no tensor lengths */
    open_comm(&cfg, &ep);
    assert_int_equal(ops->all_reduce(ep, DR_FORM_ACC, x, 10, &err), DR_OK);
    ops->close(&ep, 1);
    ops->close(NULL, 3);

    /* the torus: its strategy, its ranges, a wiped system */
    memset(&sys, 0, sizeof sys);
    memset(&spec, 0, sizeof spec);
    memset(&opt, 0, sizeof opt);
    assert_int_equal(dr_tpu_initialize_system(&sys, "v2-8", NULL, 1.0, &err), DR_OK);
    spec.kind = DR_STRATEGY_TPU;
    opt.tpu_system = &sys;
    opt.tpu_computation_shape[0] = opt.tpu_computation_shape[1] = opt.tpu_computation_shape[2] = 1;
    opt.tpu_computation_shape[3] = 2;
    assert_int_equal(dr_strategy_create(&spec, &opt, &tpu, &err), DR_OK);   /* 4 replicas of 2 cores */
    cfg = config(2, 2, DR_COMM_TORUS, 0, NULL, 0, &tpu);
    expect_open_error(&cfg, DR_EUNSUPPORTED, "TORUS runs in one rank, not 2");
    cfg = config(1, 4, DR_COMM_TORUS, 0, NULL, 0, &tpu);
    open_comm(&cfg, &ep);
    {
        void *a4[4] = { x[0], x[1], x[0], x[1] };
        expect_rc(ops->all_reduce(ep, DR_FORM_ACC, a4, 0, &err), DR_EUSAGE, &err, "TORUS reduces by all_reduce_ranges");
        expect_rc(ops->all_reduce_ranges(ep, DR_FORM_ACC, a4, ranges, 2, 0, &secs, &err), DR_EUSAGE, &err,
                  "ascending and disjoint");
        expect_rc(ops->all_reduce_ranges(ep, DR_FORM_ACC, a4, backwards, 1, 0, &secs, &err), DR_EUSAGE, &err, NULL);
        expect_rc(ops->all_reduce_ranges(ep, DR_FORM_ACC, a4, ranges, 1, 2, &secs, &err), DR_EUSAGE, &err,
                  "logical core 2; a replica has 2");
        expect_rc(ops->all_reduce_ranges(ep, DR_FORM_ACC, a4, ranges, 1, 0, NULL, &err), DR_EUSAGE, &err, NULL);
        expect_rc(ops->all_reduce_ranges(ep, DR_FORM_ACC, (void *[]){ x[0], x[1], NULL, x[0] }, ranges, 1, 1, &secs,
                                         &err), DR_EUSAGE, &err, NULL);
        assert_true(secs == 0);
        assert_int_equal(dr_tpu_initialize_system(&sys, "v2-8", NULL, 1.0, &err), DR_OK);   /* wipes HBM */
        expect_rc(ops->all_reduce_ranges(ep, DR_FORM_ACC, a4, ranges, 1, 0, &secs, &err), DR_ESTATE, &err,
                  "wiped its HBM");
    }
    ops->close(&ep, 1);
    cfg = config(1, 4, DR_COMM_TORUS, 0, NULL, 0, &tpu);
    expect_open_error(&cfg, DR_ESTATE, "wiped its HBM");
    free_all(x, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_reduce_one_rank),
        cmocka_unit_test(all_reduce_ranks),
        cmocka_unit_test(all_reduce_big),
        cmocka_unit_test(nested_openmp),
        cmocka_unit_test(ranks_refuse_together),
        cmocka_unit_test(reduce_to),
        cmocka_unit_test(cacc_overflow),
        cmocka_unit_test(torus),
        cmocka_unit_test(errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
