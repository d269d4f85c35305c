/* distref tests — the threads comm's float collectives (DR_FORM_F32 through devices/comm/comm_threads.c,
 * the float torus of devices/comm/comm_torus.c): fast numerics' all-reduce.
 *
 * Every result is compared bit for bit with a float sum computed here with
 * a plain loop in the order distref/comm.h documents for the algorithm
 * (RING: chunk c from member c on; HIERARCHICAL: each half in replica
 * order, then the two; ONE_DEVICE: replica order; across ranks: each rank's
 * replicas in order, then the ring over the ranks; reduce_to: global
 * replica order), for every algorithm, packing (0, 1, 3 packs), R = 1..8,
 * and W = 2, 3 ranks. The values span 40 binades, so another order would
 * give other bits (checked: the orders disagree somewhere). Every replica
 * must hold the same bits. Bytes are the exact collective's at 4 bytes per
 * element instead of DR_ACC_BYTES. The torus: every replica the same bits,
 * within R u sum|x| of the exact sum, untouched outside the ranges, its
 * bytes those of 4-byte elements and its seconds no more than the exact's.
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
#include "distref/rng.h"
#include "distref/strategy.h"
#include "distref/tpu.h"

#define MAXR 64

static const size_t odd_tensors[] = { 7, 3, 11, 2, 4099, 5000 };   /* 9122 floats: blocks of 4096 cut a pack */

static float value(uint32_t rep, size_t i)
{
    return (dr_rng_uniform(1234, rep, i) - 0.5f) * ldexpf(1.0f, (int)(i % 40) - 20);
}

static float *make(size_t n, uint32_t rep)
{
    float *a = malloc((n + 1) * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++) a[i] = value(rep, i);
    return a;
}

static void free_all(float **a, uint32_t R)
{
    for (uint32_t r = 0; r < R; r++) free(a[r]);
}

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
}

/* Every device's bytes: got must be want's at 4 bytes per element instead
 * of DR_ACC_BYTES. */
static void expect_f32_bytes(const dr_strategy *got, const dr_strategy *want, const char *what)
{
    for (uint32_t d = 0; d < got->num_devices; d++) {
        const dr_device *g = &got->device[d], *w = &want->device[d];
        if (g->bytes_in * DR_ACC_BYTES != w->bytes_in * 4 || g->bytes_out * DR_ACC_BYTES != w->bytes_out * 4)
            fail_msg("%s: %s moved in %llu out %llu bytes; the exact collective in %llu out %llu", what, g->name,
                     (unsigned long long)g->bytes_in, (unsigned long long)g->bytes_out,
                     (unsigned long long)w->bytes_in, (unsigned long long)w->bytes_out);
    }
}

/* Where element i lies: its pack's [off, off + len). */
static void pack_of(size_t i, size_t n, int packs, const size_t *lens, uint32_t nt, size_t *off, size_t *len)
{
    uint32_t np = packs > 0 ? (uint32_t)packs : nt;
    size_t o = 0;
    for (uint32_t p = 0; p < np; p++) {
        size_t l = packs == 0 ? lens[p] : (p + 1 < np ? n / np : n - o);
        if (i < o + l || p + 1 == np) { *off = o; *len = l; return; }
        o += l;
    }
}

/* The chunk of a ring of m members holding position j of len. */
static uint32_t chunk_of(size_t j, size_t len, uint32_t m)
{
    for (uint32_t c = 0; c < m; c++)
        if (j < ((size_t)c + 1) * len / m) return c;
    return m - 1;
}

/* x_lo + ... + x_{hi-1}, left to right (element i of arrays v). */
static float fold(float *const *v, uint32_t lo, uint32_t hi, size_t i)
{
    float s = v[lo][i];
    for (uint32_t r = lo + 1; r < hi; r++) s = s + v[r][i];
    return s;
}

/* The documented order within one rank. */
static float expected_local(dr_comm_alg alg, float *const *x, uint32_t R, size_t i, size_t j, size_t len)
{
    uint32_t h = R / 2, c;
    float s;
    if (R == 1) return x[0][i];
    switch (alg) {
    case DR_COMM_RING:
        c = chunk_of(j, len, R);
        s = x[c][i];
        for (uint32_t k = 1; k < R; k++) s = s + x[(c + k) % R][i];
        return s;
    case DR_COMM_HIERARCHICAL:
        return h ? fold(x, 0, h, i) + fold(x, h, R, i) : fold(x, 0, R, i);
    default:
        return fold(x, 0, R, i);
    }
}

static void expect_all(float *const *x, uint32_t R, size_t n, const float *want, const char *what)
{
    for (uint32_t r = 0; r < R; r++)
        for (size_t i = 0; i < n; i++)
            if (memcmp(&x[r][i], &want[i], sizeof(float)) != 0)
                fail_msg("%s: replica %u element %zu is %a, expected %a", what, r, i, (double)x[r][i],
                         (double)want[i]);
}

static const dr_comm_alg algs[] = { DR_COMM_RING, DR_COMM_HIERARCHICAL, DR_COMM_ONE_DEVICE };
static const dr_cross_device_op xdev[] = { DR_XDEV_NCCL, DR_XDEV_HIERARCHICAL_COPY, DR_XDEV_REDUCTION_TO_ONE_DEVICE };
static const char *alg_name[] = { "ring", "hierarchical", "one_device" };

/* ---- one rank ------------------------------------------------------------- */

static int orders_differ;   /* elements where ring and one_device's orders give other bits */

static void one_rank_case(uint32_t a, uint32_t R, int packs, const size_t *lens, uint32_t nt)
{
    static dr_strategy st, rs;
    float *x[MAXR], *orig[MAXR], *want;
    dr_acc *acc[MAXR];
    dr_comm *ep;
    dr_comm_config cfg;
    dr_err err;
    size_t n = 0;
    char what[128];
    for (uint32_t t = 0; t < nt; t++) n += lens[t];
    snprintf(what, sizeof what, "f32 %s R=%u num_packs=%d n=%zu", alg_name[a], R, packs, n);
    make_strategy(&st, DR_STRATEGY_MIRRORED, (int)R, xdev[a], packs, 0);
    make_strategy(&rs, DR_STRATEGY_MIRRORED, (int)R, xdev[a], packs, 0);
    for (uint32_t r = 0; r < R; r++) {
        x[r] = make(n, r);
        orig[r] = make(n, r);
        acc[r] = calloc(n + 1, sizeof(dr_acc));
        assert_non_null(acc[r]);
    }
    want = malloc(n * sizeof *want);
    for (size_t i = 0; i < n; i++) {
        size_t off = 0, len = n;
        pack_of(i, n, packs, lens, nt, &off, &len);
        want[i] = expected_local(algs[a], orig, R, i, i - off, len);
        if (a == 0 && R > 2) {
            float one = fold(orig, 0, R, i);
            orders_differ += memcmp(&one, &want[i], sizeof one) != 0;
        }
    }
    cfg = config(1, R, algs[a], packs, lens, nt, &st);
    open_comm(&cfg, &ep);
    if (dr_comm_threads()->all_reduce(ep, DR_FORM_F32, (void *const *)x, n, &err) != DR_OK) fail_msg("%s: %s", what, err.msg);
    expect_all(x, R, n, want, what);
    dr_comm_threads()->close(&ep, 1);
    cfg = config(1, R, algs[a], packs, lens, nt, &rs);   /* the exact collective's bytes */
    open_comm(&cfg, &ep);
    assert_int_equal(dr_comm_threads()->all_reduce(ep, DR_FORM_ACC, (void *const *)acc, n, &err), DR_OK);
    dr_comm_threads()->close(&ep, 1);
    expect_f32_bytes(&st, &rs, what);
    free_all(x, R);
    free_all(orig, R);
    for (uint32_t r = 0; r < R; r++) free(acc[r]);
    free(want);
}

static void one_rank_algorithms(void **state)
{
    static const int packs[] = { 0, 1, 3 };
    (void)state;
    orders_differ = 0;
    for (uint32_t a = 0; a < 3; a++)
        for (size_t p = 0; p < 3; p++)
            for (uint32_t R = 1; R <= 8; R++) one_rank_case(a, R, packs[p], odd_tensors, 6);
    assert_true(orders_differ > 0);   /* the order is really tested */
}

/* Above the float form's threshold (DR_CT_PAR_F32) the blocks run on OpenMP threads:
 * the same bits. */
static void one_rank_big(void **state)
{
    static const size_t big[] = { 300007 }, split[] = { 200000, 100007 };
    (void)state;
    for (uint32_t a = 0; a < 3; a++) {
        one_rank_case(a, 3, 0, big, 1);
        one_rank_case(a, 4, 2, split, 2);
    }
}

/* ---- across ranks ---------------------------------------------------------- */

typedef struct rank_job {
    pthread_t th;
    dr_comm  *ep;
    bool      to;        /* reduce_to, else all_reduce (DR_FORM_F32) */
    float   **local;
    size_t    n;
    float    *dst;
    uint32_t  dst_device;
    int       rc;
    dr_err    err;
} rank_job;

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    const dr_comm_ops *ops = dr_comm_threads();
    if (j->to) j->rc = ops->reduce_to(j->ep, DR_FORM_F32, (void *const *)j->local, j->n, j->dst_device, j->dst, &j->err);
    else j->rc = ops->all_reduce(j->ep, DR_FORM_F32, (void *const *)j->local, j->n, &j->err);
    return NULL;
}

static void run_ranks(dr_comm **eps, uint32_t W, uint32_t R, bool to, float **x, size_t n, float *dst,
                      uint32_t dst_device)
{
    rank_job jobs[8];
    for (uint32_t w = 0; w < W; w++) {
        rank_job *j = &jobs[w];
        memset(j, 0, sizeof *j);
        j->ep = eps[w];
        j->to = to;
        j->local = x + w * R;
        j->n = n;
        j->dst = w == 0 ? dst : NULL;
        j->dst_device = dst_device;
        assert_int_equal(pthread_create(&j->th, NULL, rank_main, j), 0);
    }
    for (uint32_t w = 0; w < W; w++) assert_int_equal(pthread_join(jobs[w].th, NULL), 0);
    for (uint32_t w = 0; w < W; w++)
        if (jobs[w].rc != DR_OK) fail_msg("rank %u: %s", w, jobs[w].err.msg);
}

static void ranks_case(uint32_t W, uint32_t R, int packs, const size_t *lens, uint32_t nt)
{
    static dr_strategy st;
    float *x[MAXR], *orig[MAXR], *y[8], *want;
    dr_comm *eps[8];
    dr_comm_config cfg;
    size_t n = 0;
    char what[128];
    for (uint32_t t = 0; t < nt; t++) n += lens[t];
    snprintf(what, sizeof what, "f32 W=%u R=%u num_packs=%d n=%zu", W, R, packs, n);
    make_strategy(&st, DR_STRATEGY_MULTI_WORKER_MIRRORED, R == 1 ? 0 : (int)R, DR_XDEV_RING, packs, W);
    for (uint32_t r = 0; r < W * R; r++) {
        x[r] = make(n, r);
        orig[r] = make(n, r);
    }
    for (uint32_t w = 0; w < W; w++) {   /* each rank's replicas in order */
        y[w] = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) y[w][i] = fold(orig, w * R, w * R + R, i);
    }
    want = malloc(n * sizeof *want);
    for (size_t i = 0; i < n; i++) {   /* then the ring over the ranks */
        size_t off = 0, len = n;
        pack_of(i, n, packs, lens, nt, &off, &len);
        want[i] = expected_local(DR_COMM_RING, y, W, i, i - off, len);
    }
    cfg = config(W, R, DR_COMM_RING, packs, lens, nt, &st);
    open_comm(&cfg, eps);
    run_ranks(eps, W, R, false, x, n, NULL, 0);
    expect_all(x, W * R, n, want, what);
    dr_comm_threads()->close(eps, W);
    free_all(x, W * R);
    free_all(orig, W * R);
    free_all(y, W);
    free(want);
}

static void ranks_all_reduce(void **state)
{
    static const size_t wide[] = { 1000, 9001, 5 };
    (void)state;
    for (uint32_t W = 2; W <= 3; W++)
        for (uint32_t R = 1; R <= 2; R++) {
            ranks_case(W, R, 0, odd_tensors, 6);
            ranks_case(W, R, 3, odd_tensors, 6);
            ranks_case(W, R, 1, wide, 3);
        }
    {   /* above the parallel threshold */
        static const size_t big[] = { 600011 };
        ranks_case(2, 2, 2, big, 1);
    }
}

/* reduce_to of DR_FORM_F32: dst = the sum in global replica order, on every rank count. */
static void reduce_to_case(uint32_t W, uint32_t R, uint32_t gpus, dr_strategy_kind kind, size_t n)
{
    static dr_strategy st;
    float *x[MAXR], *dst = make(n, 99);
    dr_comm *eps[8];
    size_t lens[1] = { n };
    dr_comm_config cfg;
    dr_err err;
    char what[96];
    uint64_t moved = 0;
    snprintf(what, sizeof what, "f32 reduce_to W=%u R=%u gpus=%u n=%zu", W, R, gpus, n);
    make_strategy(&st, kind, (int)gpus, DR_XDEV_DEFAULT, 0, W);
    for (uint32_t r = 0; r < W * R; r++) x[r] = make(n, r);
    cfg = config(W, R, DR_COMM_RING, 0, lens, 1, &st);
    open_comm(&cfg, eps);
    if (W == 1) {
        if (dr_comm_threads()->reduce_to(eps[0], DR_FORM_F32, (void *const *)x, n, st.variable_device, dst, &err))
            fail_msg("%s: %s", what, err.msg);
    } else {
        run_ranks(eps, W, R, true, x, n, dst, st.variable_device);
    }
    for (size_t i = 0; i < n; i++) {
        float want = fold(x, 0, W * R, i);
        if (memcmp(&want, &dst[i], sizeof want) != 0) fail_msg("%s: element %zu", what, i);
    }
    for (uint32_t d = 0; d < st.num_devices; d++) moved += st.device[d].bytes_in;
    for (uint32_t r = 0; r < W * R; r++)
        if (st.replica_device[r] != st.variable_device) moved -= 4 * n;
    assert_int_equal(moved, 0);   /* 4 bytes per element from every other device */
    dr_comm_threads()->close(eps, W);
    free_all(x, W * R);
    free(dst);
}

static void reduce_to(void **state)
{
    (void)state;
    reduce_to_case(1, 3, 3, DR_STRATEGY_CENTRAL_STORAGE, 23);
    reduce_to_case(1, 4, 4, DR_STRATEGY_CENTRAL_STORAGE, 9000);
    reduce_to_case(2, 2, 2, DR_STRATEGY_MULTI_WORKER_MIRRORED, 1001);
    reduce_to_case(3, 1, 0, DR_STRATEGY_MULTI_WORKER_MIRRORED, 23);
}

/* ---- the torus ---------------------------------------------------------------- */

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
        float *x[MAXR], *orig[MAXR];
        dr_acc *acc[MAXR];
        dr_comm *ep;
        dr_comm_config cfg = config(1, R, DR_COMM_TORUS, 0, NULL, 0, &st), rcfg = cfg;
        double secs = 0, esecs = 0;
        rcfg.strategy = &rs;
        for (uint32_t r = 0; r < R; r++) {
            x[r] = make(N, r + 7 * l);
            orig[r] = make(N, r + 7 * l);
            acc[r] = calloc(N + 1, sizeof(dr_acc));
            for (size_t i = 0; i < N; i++) dr_acc_add(&acc[r][i], orig[r][i]);
        }
        open_comm(&cfg, &ep);
        if (dr_comm_threads()->all_reduce_ranges(ep, DR_FORM_F32, (void *const *)x, ranges, nr, l, &secs, &err))
            fail_msg("torus f32: %s", err.msg);
        dr_comm_threads()->close(&ep, 1);
        open_comm(&rcfg, &ep);
        assert_int_equal(dr_comm_threads()->all_reduce_ranges(ep, DR_FORM_ACC, (void *const *)acc, ranges, nr, l, &esecs, &err), DR_OK);
        dr_comm_threads()->close(&ep, 1);
        for (size_t i = 0, q = 0; i < N; i++) {
            bool inside;
            while (q < nr && ranges[2 * q + 1] <= i) q++;
            inside = q < nr && ranges[2 * q] <= i;
            for (uint32_t r = 0; r < R; r++) {
                const float *want = inside ? &x[0][i] : &orig[r][i];
                if (memcmp(&x[r][i], want, sizeof(float)) != 0)
                    fail_msg("torus f32 core %u: replica %u element %zu (%s a range) differs", l, r, i,
                             inside ? "in" : "outside");
            }
            if (inside) {
                float e = dr_acc_round(&acc[0][i]);
                double mag = 0;   /* a float sum of R terms errs by at most u sum |x| */
                for (uint32_t r = 0; r < R; r++) mag += fabs((double)orig[r][i]);
                if (!(fabs((double)x[0][i] - e) <= R * 0x1p-24 * mag))
                    fail_msg("torus f32 core %u element %zu: %g, exact %g", l, i, (double)x[0][i], (double)e);
            }
        }
        expect_f32_bytes(&st, &rs, "torus f32");
        assert_true(secs <= esecs);
        free_all(x, R);
        free_all(orig, R);
        for (uint32_t r = 0; r < R; r++) free(acc[r]);
    }
}

static void torus(void **state)
{
    static const int shapes[][4] = { { 0, 0, 0, 0 }, { 1, 1, 1, 2 }, { 2, 2, 1, 2 } };
    static const size_t small[] = { 3, 10, 20, 33 }, wide[] = { 0, 700, 800, 1900, 1900, 1901 };
    dr_tpu_system sys;
    dr_err err;
    (void)state;
    memset(&sys, 0, sizeof sys);
    assert_int_equal(dr_tpu_initialize_system(&sys, "v2-8", NULL, 1.0, &err), DR_OK);
    torus_case(&sys, shapes[0], wide, 3, 2000);
    assert_int_equal(dr_tpu_initialize_system(&sys, "v3-32", NULL, 1.0, &err), DR_OK);
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        torus_case(&sys, shapes[k], small, 2, 37);
        torus_case(&sys, shapes[k], wide, 3, 2000);
    }
}

/* ---- errors ------------------------------------------------------------------- */

static void errors(void **state)
{
    static const size_t lens[] = { 5 };
    float a[5] = { 0 }, *x[2] = { a, NULL };
    dr_comm *ep;
    dr_comm_config cfg = config(1, 2, DR_COMM_RING, 0, lens, 1, NULL);
    dr_err err;
    (void)state;
    open_comm(&cfg, &ep);
    assert_int_equal(dr_comm_threads()->all_reduce(ep, DR_FORM_F32, (void *const *)x, 5, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "NULL"));
    x[1] = a;
    assert_int_equal(dr_comm_threads()->all_reduce(ep, DR_FORM_F32, (void *const *)x, 4, &err), DR_EUSAGE);   /* lengths sum to 5 */
    assert_int_equal(dr_comm_threads()->all_reduce_ranges(ep, DR_FORM_F32, (void *const *)x, NULL, 0, 0, NULL, &err), DR_EUSAGE);
    assert_int_equal(dr_comm_threads()->reduce_to(ep, DR_FORM_F32, (void *const *)x, 5, 0, NULL, &err), DR_EUSAGE);
    dr_comm_threads()->close(&ep, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_rank_algorithms),
        cmocka_unit_test(one_rank_big),
        cmocka_unit_test(ranks_all_reduce),
        cmocka_unit_test(reduce_to),
        cmocka_unit_test(torus),
        cmocka_unit_test(errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
