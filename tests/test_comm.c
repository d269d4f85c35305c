/* distref tests — the threads comm (devices/comm/comm_threads.c, comm_torus.c).
 *
 * Every collective is checked against a total computed here, independently:
 * all replicas' arrays merged into a fresh array, compared element by
 * element with dr_acc_equal (value and special flags). The byte counts are
 * compared with the reference's (dr_all_reduce, dr_reduce_to_device,
 * dr_tpu_all_reduce) run on an identical strategy, and the torus's emulated
 * seconds with the reference's, bit for bit. Ranks run as one pthread each.
 * Built with -DDR_MUTANT_CHUNK_OFF_BY_ONE on the comm, this suite must fail.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distref/comm.h"
#include "distref/factory.h"
#include "distref/ref.h"
#include "distref/rng.h"
#include "distref/strategy.h"
#include "distref/tpu.h"
#include "ref/tpu_collective.h"

#define MAXR 64
#define B ((uint64_t)DR_ACC_BYTES)

static const size_t odd_tensors[] = { 7, 3, 11, 2 };   /* 23 accumulators */

/* ---- data and the independent total ------------------------------------- */

/* Replica `rep`'s gradient: values over 40 binades, tiny terms, a -0 here
 * and there and an inf on replica 1, so flags travel too. */
static dr_acc *make(size_t n, uint32_t rep, uint64_t seed)
{
    dr_acc *a = calloc(n + 1, sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++) {
        dr_acc_add(&a[i], (dr_rng_uniform(seed, rep, i) - 0.5f) * ldexpf(1.0f, (int)(i % 40) - 20));
        dr_acc_add(&a[i], dr_rng_uniform(seed + 1, rep, i) * 1e-30f);
        if (i % 103 == 9) dr_acc_add(&a[i], -0.0f);
        if (i % 101 == 7 && rep == 1) dr_acc_add(&a[i], INFINITY);
    }
    return a;
}

static dr_acc *copy_of(const dr_acc *a, size_t n)
{
    dr_acc *c = malloc((n + 1) * sizeof *c);
    assert_non_null(c);
    memcpy(c, a, n * sizeof *c);
    return c;
}

static dr_acc *total_of(dr_acc *const *acc, uint32_t R, size_t n)
{
    dr_acc *t = calloc(n + 1, sizeof *t);
    assert_non_null(t);
    for (uint32_t r = 0; r < R; r++)
        for (size_t i = 0; i < n; i++) dr_acc_merge(&t[i], &acc[r][i]);
    return t;
}

static void expect_total(dr_acc *const *acc, uint32_t R, size_t n, const dr_acc *want, const char *what)
{
    for (uint32_t r = 0; r < R; r++)
        for (size_t i = 0; i < n; i++)
            if (!dr_acc_equal(&acc[r][i], &want[i]))
                fail_msg("%s: replica %u element %zu is not the total (%g, want %g)", what, r, i,
                         (double)dr_acc_round(&acc[r][i]), (double)dr_acc_round(&want[i]));
}

static void free_all(dr_acc **acc, uint32_t R)
{
    for (uint32_t r = 0; r < R; r++) free(acc[r]);
}

static uint64_t moved(const dr_strategy *s)
{
    uint64_t t = 0;
    for (uint32_t d = 0; d < s->num_devices; d++) t += s->device[d].bytes_in + s->device[d].bytes_out;
    return t;
}

static void expect_same_bytes(const dr_strategy *got, const dr_strategy *want, const char *what)
{
    assert_int_equal(got->num_devices, want->num_devices);
    for (uint32_t d = 0; d < got->num_devices; d++) {
        const dr_device *g = &got->device[d], *w = &want->device[d];
        if (g->bytes_in != w->bytes_in || g->bytes_out != w->bytes_out)
            fail_msg("%s: %s moved in %llu out %llu bytes, expected in %llu out %llu", what, g->name,
                     (unsigned long long)g->bytes_in, (unsigned long long)g->bytes_out,
                     (unsigned long long)w->bytes_in, (unsigned long long)w->bytes_out);
    }
}

/* ---- strategies and endpoints ------------------------------------------- */

static void make_strategy(dr_strategy *s, dr_strategy_kind kind, int gpus, dr_cross_device_op op,
                          int packs, uint32_t workers)
{
    dr_strategy_spec spec;
    dr_strategy_options opt;
    dr_err err;
    memset(&spec, 0, sizeof spec);
    memset(&opt, 0, sizeof opt);
    spec.kind = kind;
    spec.num_gpus = gpus;
    spec.cross_device_op = op;
    spec.num_packs = packs;
    opt.num_workers = workers;
    if (dr_strategy_create(&spec, &opt, s, &err) != DR_OK) fail_msg("strategy: %s", err.msg);
}

static dr_comm_config config(uint32_t W, uint32_t R, dr_comm_alg alg, int packs, const size_t *lens,
                             uint32_t nt, dr_strategy *s)
{
    dr_comm_config c;
    memset(&c, 0, sizeof c);
    c.num_ranks = W;
    c.local_replicas = R;
    c.alg = alg;
    c.num_packs = packs;
    c.tensor_len = lens;
    c.ntensors = nt;
    c.strategy = s;
    return c;
}

static void open_comm(const dr_comm_config *cfg, dr_comm **eps)
{
    uint32_t neps = 0;
    dr_err err;
    if (dr_comm_threads()->open(cfg, eps, &neps, &err) != DR_OK) fail_msg("open: %s", err.msg);
    assert_int_equal(neps, cfg->num_ranks);
    for (uint32_t w = 0; w < neps; w++) {
        assert_int_equal(dr_comm_threads()->rank(eps[w]), w);
        assert_int_equal(dr_comm_threads()->num_ranks(eps[w]), cfg->num_ranks);
    }
}

static const dr_comm_alg algs[] = { DR_COMM_RING, DR_COMM_HIERARCHICAL, DR_COMM_ONE_DEVICE };
static const dr_cross_device_op xdev[] = { DR_XDEV_NCCL, DR_XDEV_HIERARCHICAL_COPY, DR_XDEV_REDUCTION_TO_ONE_DEVICE };
static const char *alg_name[] = { "ring", "hierarchical", "one_device" };

/* ---- one rank: mirrored's algorithms ------------------------------------ */

/* R replicas in one rank: the total everywhere, and the reference's bytes. */
static void one_rank_case(uint32_t a, uint32_t R, int packs, const size_t *lens, uint32_t nt)
{
    static dr_strategy st, rs;
    dr_acc *acc[MAXR], *ref[MAXR], *want;
    dr_comm *ep;
    dr_comm_config cfg;
    dr_err err;
    size_t n = 0;
    char what[128];
    for (uint32_t t = 0; t < nt; t++) n += lens[t];
    snprintf(what, sizeof what, "%s R=%u num_packs=%d n=%zu", alg_name[a], R, packs, n);
    make_strategy(&st, DR_STRATEGY_MIRRORED, (int)R, xdev[a], packs, 0);
    make_strategy(&rs, DR_STRATEGY_MIRRORED, (int)R, xdev[a], packs, 0);
    for (uint32_t r = 0; r < R; r++) {
        acc[r] = make(n, r, 11 + R);
        ref[r] = copy_of(acc[r], n);
    }
    want = total_of(acc, R, n);
    cfg = config(1, R, algs[a], packs, lens, nt, &st);
    open_comm(&cfg, &ep);
    if (dr_comm_threads()->all_reduce(ep, DR_FORM_ACC, (void *const *)acc, n, &err) != DR_OK) fail_msg("%s: %s", what, err.msg);
    expect_total(acc, R, n, want, what);
    assert_int_equal(dr_all_reduce(&rs, ref, n, lens, nt, &err), DR_OK);
    expect_total(ref, R, n, want, "the reference");
    expect_same_bytes(&st, &rs, what);
    if (R > 1) assert_true(moved(&st) > 0);
    dr_comm_threads()->close(&ep, 1);
    assert_null(ep);
    free_all(acc, R);
    free_all(ref, R);
    free(want);
}

static void one_rank_algorithms(void **state)
{
    static const int packs[] = { 0, 1, 3 };
    (void)state;
    for (uint32_t a = 0; a < 3; a++)
        for (size_t p = 0; p < 3; p++)
            for (uint32_t R = 1; R <= 8; R++) one_rank_case(a, R, packs[p], odd_tensors, 4);
}

static void one_rank_big(void **state)
{
    static const size_t big[] = { 100003 }, split[] = { 60000, 40003 };
    (void)state;
    one_rank_case(0, 5, 3, split, 2);
    one_rank_case(0, 4, 0, big, 1);
    one_rank_case(1, 4, 0, split, 2);
    one_rank_case(2, 3, 1, big, 1);
}

/* Called from inside an OpenMP region, the comm's own regions get one
 * thread: the same total. */
static void one_rank_nested_openmp(void **state)
{
    static const size_t lens[] = { 3000, 2001 };
    enum { R = 4, N = 5001 };
    dr_acc *acc[R], *want;
    dr_comm *ep;
    dr_comm_config cfg = config(1, R, DR_COMM_RING, 0, lens, 2, NULL);
    int rc = -1;
    dr_err err;
    (void)state;
    for (uint32_t r = 0; r < R; r++) acc[r] = make(N, r, 5);
    want = total_of(acc, R, N);
    open_comm(&cfg, &ep);
    #pragma omp parallel num_threads(2)
    {
        #pragma omp single
        rc = dr_comm_threads()->all_reduce(ep, DR_FORM_ACC, (void *const *)acc, N, &err);
    }
    assert_int_equal(rc, DR_OK);
    expect_total(acc, R, N, want, "nested");
    dr_comm_threads()->close(&ep, 1);
    free_all(acc, R);
    free(want);
}

/* ---- ranks as threads --------------------------------------------------- */

typedef enum { OP_ALL_REDUCE, OP_REDUCE_TO } rank_op;

typedef struct rank_job {
    pthread_t  th;
    dr_comm   *ep;
    rank_op    op;
    dr_acc   **local;
    size_t     n;
    dr_acc    *dst;
    uint32_t   dst_device;
    int        rc, barrier_rc;
    dr_err     err;
} rank_job;

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    const dr_comm_ops *ops = dr_comm_threads();
    j->barrier_rc = ops->barrier(j->ep, &j->err);
    if (j->op == OP_ALL_REDUCE) j->rc = ops->all_reduce(j->ep, DR_FORM_ACC, (void *const *)j->local, j->n, &j->err);
    else j->rc = ops->reduce_to(j->ep, DR_FORM_ACC, (void *const *)j->local, j->n, j->dst_device, j->dst, &j->err);
    return NULL;
}

/* Runs every rank's call on its own thread; rank w's arrays are acc[w*R ..],
 * its n ns[w]. */
static void run_ranks(dr_comm **eps, uint32_t W, uint32_t R, rank_op op, dr_acc **acc, const size_t *ns,
                      dr_acc *dst, uint32_t dst_device, rank_job *jobs)
{
    for (uint32_t w = 0; w < W; w++) {
        rank_job *j = &jobs[w];
        memset(j, 0, sizeof *j);
        j->ep = eps[w];
        j->op = op;
        j->local = acc + w * R;
        j->n = ns[w];
        j->dst = w == 0 ? dst : NULL;
        j->dst_device = dst_device;
        assert_int_equal(pthread_create(&j->th, NULL, rank_main, j), 0);
    }
    for (uint32_t w = 0; w < W; w++) assert_int_equal(pthread_join(jobs[w].th, NULL), 0);
    for (uint32_t w = 0; w < W; w++) assert_int_equal(jobs[w].barrier_rc, DR_OK);
}

static void ranks_case(uint32_t W, uint32_t R, int packs, const size_t *lens, uint32_t nt)
{
    static dr_strategy st, rs;
    dr_acc *acc[MAXR], *ring[MAXR], *want;
    dr_comm *eps[8];
    rank_job jobs[8];
    size_t n = 0, ns[8];
    dr_comm_config cfg;
    dr_err err;
    char what[128];
    for (uint32_t t = 0; t < nt; t++) n += lens[t];
    for (uint32_t w = 0; w < W; w++) ns[w] = n;
    snprintf(what, sizeof what, "W=%u R=%u num_packs=%d n=%zu", W, R, packs, n);
    make_strategy(&st, DR_STRATEGY_MULTI_WORKER_MIRRORED, R == 1 ? 0 : (int)R, DR_XDEV_RING, packs, W);
    assert_int_equal(st.num_replicas, W * R);
    for (uint32_t r = 0; r < W * R; r++) acc[r] = make(n, r, 29 + W);
    want = total_of(acc, W * R, n);
    cfg = config(W, R, DR_COMM_RING, packs, lens, nt, &st);
    open_comm(&cfg, eps);
    run_ranks(eps, W, R, OP_ALL_REDUCE, acc, ns, NULL, 0, jobs);
    for (uint32_t w = 0; w < W; w++)
        if (jobs[w].rc != DR_OK) fail_msg("%s: rank %u: %s", what, w, jobs[w].err.msg);
    expect_total(acc, W * R, n, want, what);
    /* The ring over the ranks is the reference's ring over W one-replica
     * workers; gathering onto local[0] and copying back add n per replica. */
    make_strategy(&rs, DR_STRATEGY_MULTI_WORKER_MIRRORED, 0, DR_XDEV_RING, packs, W);
    for (uint32_t w = 0; w < W; w++) ring[w] = copy_of(acc[w * R], n);
    assert_int_equal(dr_all_reduce(&rs, ring, n, lens, nt, &err), DR_OK);
    for (uint32_t w = 0; w < W; w++)
        for (uint32_t r = 0; r < R; r++) {
            const dr_device *got = &st.device[st.replica_device[w * R + r]];
            const dr_device *cpu = &rs.device[rs.replica_device[w]];
            uint64_t in = r ? n * B : cpu->bytes_in + (R - 1) * n * B;
            uint64_t out = r ? n * B : cpu->bytes_out + (R - 1) * n * B;
            if (got->bytes_in != in || got->bytes_out != out)
                fail_msg("%s: %s moved in %llu out %llu, expected in %llu out %llu", what, got->name,
                         (unsigned long long)got->bytes_in, (unsigned long long)got->bytes_out,
                         (unsigned long long)in, (unsigned long long)out);
        }
    if (R == 1) expect_same_bytes(&st, &rs, what);
    dr_comm_threads()->close(eps, W);
    free_all(acc, W * R);
    free_all(ring, W);
    free(want);
}

static void ranks_all_reduce(void **state)
{
    static const size_t wide[] = { 1000, 2001, 5 };
    (void)state;
    for (uint32_t W = 2; W <= 3; W++)
        for (uint32_t R = 1; R <= 2; R++) {
            ranks_case(W, R, 0, odd_tensors, 4);
            ranks_case(W, R, 3, odd_tensors, 4);
            ranks_case(W, R, 1, wide, 3);
        }
}

/* A rank that refuses its arguments fails every rank, and none hangs. */
static void ranks_refuse_together(void **state)
{
    dr_acc *acc[4];
    dr_comm *eps[2];
    rank_job jobs[2];
    size_t lens[] = { 10 }, ns[2] = { 10, 9 };
    dr_comm_config cfg = config(2, 2, DR_COMM_RING, 0, lens, 1, NULL);
    (void)state;
    for (uint32_t r = 0; r < 4; r++) acc[r] = make(10, r, 3);
    open_comm(&cfg, eps);
    run_ranks(eps, 2, 2, OP_ALL_REDUCE, acc, ns, NULL, 0, jobs);   /* rank 1: 9 accumulators */
    for (uint32_t w = 0; w < 2; w++) {
        assert_int_equal(jobs[w].rc, DR_EUSAGE);
        assert_non_null(strstr(jobs[w].err.msg, "rank 1"));
    }
    ns[1] = 10;
    run_ranks(eps, 2, 2, OP_REDUCE_TO, acc, ns, NULL, 0, jobs);     /* rank 0 without a destination */
    for (uint32_t w = 0; w < 2; w++) {
        assert_int_equal(jobs[w].rc, DR_EUSAGE);
        assert_non_null(strstr(jobs[w].err.msg, "no destination"));
    }
    /* the group still works afterwards */
    run_ranks(eps, 2, 2, OP_ALL_REDUCE, acc, ns, NULL, 0, jobs);
    assert_int_equal(jobs[0].rc, DR_OK);
    assert_int_equal(jobs[1].rc, DR_OK);
    dr_comm_threads()->close(&eps[1], 1);   /* one by one */
    dr_comm_threads()->close(&eps[0], 1);
    free_all(acc, 4);
}

/* ---- reduce_to (central_storage) ---------------------------------------- */

static void reduce_to_case(uint32_t W, uint32_t R, uint32_t gpus, dr_strategy_kind kind, size_t n)
{
    static dr_strategy st, rs;
    dr_acc *acc[MAXR], *dst, *rdst, *want, *with_dst[MAXR + 1];
    dr_comm *eps[8];
    rank_job jobs[8];
    size_t ns[8], lens[1] = { n };
    dr_comm_config cfg;
    dr_err err;
    uint32_t dev;
    char what[96];
    snprintf(what, sizeof what, "reduce_to W=%u R=%u gpus=%u n=%zu", W, R, gpus, n);
    make_strategy(&st, kind, (int)gpus, DR_XDEV_DEFAULT, 0, W);
    make_strategy(&rs, kind, (int)gpus, DR_XDEV_DEFAULT, 0, W);
    dev = st.variable_device;
    for (uint32_t r = 0; r < W * R; r++) with_dst[r + 1] = acc[r] = make(n, r, 41);
    with_dst[0] = dst = make(n, 99, 41);   /* the variable's device already holds something */
    rdst = copy_of(dst, n);
    want = total_of(with_dst, W * R + 1, n);
    for (uint32_t w = 0; w < W; w++) ns[w] = n;
    cfg = config(W, R, DR_COMM_RING, 0, lens, 1, &st);
    open_comm(&cfg, eps);
    if (W == 1) {
        if (dr_comm_threads()->reduce_to(eps[0], DR_FORM_ACC, (void *const *)acc, n, dev, dst, &err)) fail_msg("%s: %s", what, err.msg);
    } else {
        run_ranks(eps, W, R, OP_REDUCE_TO, acc, ns, dst, dev, jobs);
        for (uint32_t w = 0; w < W; w++)
            if (jobs[w].rc != DR_OK) fail_msg("%s: rank %u: %s", what, w, jobs[w].err.msg);
    }
    expect_total(&dst, 1, n, want, what);
    assert_int_equal(dr_reduce_to_device(&rs, acc, n, dev, rdst, &err), DR_OK);
    expect_same_bytes(&st, &rs, what);
    dr_comm_threads()->close(eps, W);
    free_all(acc, W * R);
    free(dst);
    free(rdst);
    free(want);
}

static void reduce_to(void **state)
{
    (void)state;
    reduce_to_case(1, 3, 3, DR_STRATEGY_CENTRAL_STORAGE, 23);
    reduce_to_case(1, 1, 1, DR_STRATEGY_CENTRAL_STORAGE, 23);   /* variables on the replica's GPU: free */
    reduce_to_case(1, 4, 4, DR_STRATEGY_CENTRAL_STORAGE, 3000);
    reduce_to_case(2, 2, 2, DR_STRATEGY_MULTI_WORKER_MIRRORED, 1001);
    reduce_to_case(3, 1, 0, DR_STRATEGY_MULTI_WORKER_MIRRORED, 23);
}

/* ---- the torus (tpu) ---------------------------------------------------- */

static void torus_case(const dr_tpu_system *sys, const int shape[4], const size_t *ranges, uint32_t nr, size_t N)
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
        dr_acc *acc[MAXR], *ref[MAXR], *want;
        dr_comm *ep;
        dr_comm_config cfg = config(1, R, DR_COMM_TORUS, 0, NULL, 0, &st);
        double secs = 0.25, rsecs = 0.25;   /* both add to what is there */
        char what[128];
        snprintf(what, sizeof what, "torus %s shape [%d,%d,%d,%d] core %u, %u ranges", sys->topology.name,
                 shape[0], shape[1], shape[2], shape[3], l, nr);
        for (uint32_t r = 0; r < R; r++) {
            acc[r] = make(N, r, 77 + l);
            ref[r] = copy_of(acc[r], N);
        }
        want = total_of(acc, R, N);
        open_comm(&cfg, &ep);
        if (dr_comm_threads()->all_reduce_ranges(ep, DR_FORM_ACC, (void *const *)acc, ranges, nr, l, &secs, &err))
            fail_msg("%s: %s", what, err.msg);
        assert_int_equal(dr_tpu_all_reduce(&rs, ref, ranges, nr, l, &rsecs, &err), DR_OK);
        for (uint32_t r = 0; r < R; r++)
            for (size_t i = 0, q = 0; i < N; i++) {
                bool inside;
                while (q < nr && ranges[2 * q + 1] <= i) q++;
                inside = q < nr && ranges[2 * q] <= i;
                if (!dr_acc_equal(&acc[r][i], inside ? &want[i] : &ref[r][i]))
                    fail_msg("%s: replica %u element %zu (%s a range) is wrong", what, r, i,
                             inside ? "in" : "outside");
                if (inside) assert_true(dr_acc_equal(&ref[r][i], &want[i]));
            }
        if (memcmp(&secs, &rsecs, sizeof secs) != 0)
            fail_msg("%s: %.17g seconds, the reference %.17g", what, secs, rsecs);
        if (R > 1) assert_true(secs > 0.25);
        expect_same_bytes(&st, &rs, what);
        if (R > 1) assert_true((moved(&st) > 0) == (nr > 0));
        dr_comm_threads()->close(&ep, 1);
        free_all(acc, R);
        free_all(ref, R);
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
    memset(&sys, 0, sizeof sys);
    assert_int_equal(dr_tpu_initialize_system(&sys, "v2-8", NULL, 1.0, &err), DR_OK);
    torus_case(&sys, shapes[0], small, 2, 37);
    torus_case(&sys, shapes[1], wide, 3, 2000);
    torus_case(&sys, shapes[2], small, 0, 37);   /* nothing to reduce: only latency */
    assert_int_equal(dr_tpu_initialize_system(&sys, "v3-32", NULL, 1.0, &err), DR_OK);
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        torus_case(&sys, shapes[k], small, 2, 37);
        torus_case(&sys, shapes[k], wide, 3, 2000);
    }
}

/* ---- errors ------------------------------------------------------------- */

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

static void errors(void **state)
{
    static dr_strategy st, tpu;
    static const size_t lens[] = { 4, 5 }, ranges[] = { 0, 4, 3, 6 }, backwards[] = { 5, 2 };
    const dr_comm_ops *ops = dr_comm_threads();
    dr_acc *acc[2];
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

    /* lengths that do not sum to n; TORUS through all_reduce */
    cfg = config(1, 2, DR_COMM_RING, 0, lens, 2, NULL);
    open_comm(&cfg, &ep);
    acc[0] = make(10, 0, 1);
    acc[1] = make(10, 1, 1);
    assert_int_equal(ops->all_reduce(ep, DR_FORM_ACC, (void *const *)acc, 10, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "the 2 tensor lengths sum to 9, but the arrays hold 10 accumulators"));
    assert_int_equal(ops->all_reduce(ep, DR_FORM_ACC, (void *const *)(dr_acc *[]){ acc[0], NULL }, 9, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "local replica 1's array is NULL"));
    assert_int_equal(ops->all_reduce_ranges(ep, DR_FORM_ACC, (void *const *)acc, ranges, 1, 0, &secs, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "needs algorithm TORUS"));
    assert_int_equal(ops->reduce_to(ep, DR_FORM_ACC, (void *const *)acc, 9, 0, NULL, &err), DR_EUSAGE);
    assert_int_equal(ops->barrier(ep, &err), DR_OK);
    /* forms: the exact float sum is the MPI comm's alone; an unknown form is refused */
    assert_int_equal(ops->all_reduce(ep, DR_FORM_F32_EXACT, (void *const *)acc, 9, &err), DR_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "form f32_exact"));
    assert_int_equal(ops->reduce_to(ep, DR_FORM_F32_EXACT, (void *const *)acc, 9, 0, acc[0], &err), DR_EUNSUPPORTED);
    assert_int_equal(ops->all_reduce(ep, (dr_form_id)99, (void *const *)acc, 9, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "unknown number form 99"));
    assert_int_equal(ops->barrier(ep, &err), DR_OK);
    ops->close(&ep, 1);
    cfg = config(1, 2, DR_COMM_RING, 3, NULL, 0, NULL);   /* packs need no tensor lengths */
    open_comm(&cfg, &ep);
    assert_int_equal(ops->all_reduce(ep, DR_FORM_ACC, (void *const *)acc, 10, &err), DR_OK);
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
        dr_acc *a4[4] = { acc[0], acc[1], acc[0], acc[1] };
        assert_int_equal(ops->all_reduce(ep, DR_FORM_ACC, (void *const *)a4, 0, &err), DR_EUSAGE);
        assert_non_null(strstr(err.msg, "TORUS reduces by all_reduce_ranges"));
        assert_int_equal(ops->all_reduce_ranges(ep, DR_FORM_ACC, (void *const *)a4, ranges, 2, 0, &secs, &err), DR_EUSAGE);
        assert_non_null(strstr(err.msg, "ascending and disjoint"));
        assert_int_equal(ops->all_reduce_ranges(ep, DR_FORM_ACC, (void *const *)a4, backwards, 1, 0, &secs, &err), DR_EUSAGE);
        assert_int_equal(ops->all_reduce_ranges(ep, DR_FORM_ACC, (void *const *)a4, ranges, 1, 2, &secs, &err), DR_EUSAGE);
        assert_non_null(strstr(err.msg, "logical core 2; a replica has 2"));
        assert_int_equal(ops->all_reduce_ranges(ep, DR_FORM_ACC, (void *const *)a4, ranges, 1, 0, NULL, &err), DR_EUSAGE);
        assert_int_equal(ops->all_reduce_ranges(ep, DR_FORM_ACC, (void *const *)(dr_acc *[]){ acc[0], acc[1], NULL, acc[0] }, ranges, 1, 1,
                                                &secs, &err), DR_EUSAGE);
        assert_true(secs == 0);
        assert_int_equal(dr_tpu_initialize_system(&sys, "v2-8", NULL, 1.0, &err), DR_OK);   /* wipes HBM */
        assert_int_equal(ops->all_reduce_ranges(ep, DR_FORM_ACC, (void *const *)a4, ranges, 1, 0, &secs, &err), DR_ESTATE);
        assert_non_null(strstr(err.msg, "wiped its HBM"));
    }
    ops->close(&ep, 1);
    cfg = config(1, 4, DR_COMM_TORUS, 0, NULL, 0, &tpu);
    expect_open_error(&cfg, DR_ESTATE, "wiped its HBM");
    free_all(acc, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_rank_algorithms),
        cmocka_unit_test(one_rank_big),
        cmocka_unit_test(one_rank_nested_openmp),
        cmocka_unit_test(ranks_all_reduce),
        cmocka_unit_test(ranks_refuse_together),
        cmocka_unit_test(reduce_to),
        cmocka_unit_test(torus),
        cmocka_unit_test(errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
