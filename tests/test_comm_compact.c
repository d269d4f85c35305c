/* distref tests — the threads comm over compact accumulators.
 *
 * all_reduce and reduce_to of DR_FORM_CACC run the same algorithms, packs
 * and ranks as the dr_acc collectives (tests/test_comm.c). Checked here
 * against totals computed independently: every replica's array converted
 * to dr_acc and merged, then compared with each result converted back
 * (dr_cacc_to_acc, dr_acc_equal); bytes are the dr_acc collective's, run on
 * an identical strategy, times DR_CACC_BYTES / DR_ACC_BYTES. An element
 * that leaves the window on one replica comes out overflowed on all.
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

#include "distref/cacc.h"
#include "distref/comm.h"
#include "distref/factory.h"
#include "distref/rng.h"
#include "distref/strategy.h"

#define MAXR 8

static const size_t tensors[] = { 7, 3, 11, 2, 300 };   /* 323 elements */
#define NT 5
#define N  323

/* Replica rep's compact gradient: values over 40 binades, small terms, a -0
 * and an inf here and there, so flags travel too. */
static dr_cacc *make(uint32_t rep, uint64_t seed)
{
    dr_cacc *a = calloc(N + 1, sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < N; i++) {
        dr_cacc_add(&a[i], (dr_rng_uniform(seed, rep, (uint32_t)i) - 0.5f) * ldexpf(1.0f, (int)(i % 40) - 20));
        dr_cacc_add(&a[i], dr_rng_uniform(seed + 1, rep, (uint32_t)i) * 1e-30f);
        if (i % 103 == 9) dr_cacc_add(&a[i], -0.0f);
        if (i % 101 == 7 && rep == 1) dr_cacc_add(&a[i], INFINITY);
    }
    return a;
}

static dr_acc *total_of(dr_cacc *const *c, uint32_t R)
{
    dr_acc *t = calloc(N + 1, sizeof *t), x;
    assert_non_null(t);
    for (uint32_t r = 0; r < R; r++)
        for (size_t i = 0; i < N; i++) {
            assert_true(dr_cacc_to_acc(&x, &c[r][i]));
            dr_acc_merge(&t[i], &x);
        }
    return t;
}

static void expect_total(dr_cacc *const *c, uint32_t R, const dr_acc *want, const char *what)
{
    for (uint32_t r = 0; r < R; r++)
        for (size_t i = 0; i < N; i++) {
            dr_acc x;
            if (!dr_cacc_to_acc(&x, &c[r][i]) || !dr_acc_equal(&x, &want[i]))
                fail_msg("%s: replica %u element %zu is not the total", what, r, i);
        }
}

/* The dr_acc arrays holding the same values (for the byte reference). */
static dr_acc *as_acc(const dr_cacc *c)
{
    dr_acc *a = calloc(N + 1, sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < N; i++) assert_true(dr_cacc_to_acc(&a[i], &c[i]));
    return a;
}

static void make_strategy(dr_strategy *s, dr_strategy_kind kind, int gpus, dr_cross_device_op op, int packs,
                          uint32_t workers)
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

static dr_comm_config config(uint32_t W, uint32_t R, dr_comm_alg alg, int packs, dr_strategy *s)
{
    dr_comm_config c;
    memset(&c, 0, sizeof c);
    c.num_ranks = W;
    c.local_replicas = R;
    c.alg = alg;
    c.num_packs = packs;
    c.tensor_len = tensors;
    c.ntensors = NT;
    c.strategy = s;
    return c;
}

static void expect_scaled_bytes(const dr_strategy *got, const dr_strategy *full, const char *what)
{
    for (uint32_t d = 0; d < got->num_devices; d++) {
        uint64_t in = full->device[d].bytes_in / DR_ACC_BYTES * DR_CACC_BYTES;
        uint64_t out = full->device[d].bytes_out / DR_ACC_BYTES * DR_CACC_BYTES;
        if (got->device[d].bytes_in != in || got->device[d].bytes_out != out)
            fail_msg("%s: device %u moved in %llu out %llu, expected in %llu out %llu", what, d,
                     (unsigned long long)got->device[d].bytes_in, (unsigned long long)got->device[d].bytes_out,
                     (unsigned long long)in, (unsigned long long)out);
    }
}

/* ---- one rank: mirrored's algorithms ------------------------------------- */

static const dr_comm_alg algs[] = { DR_COMM_RING, DR_COMM_HIERARCHICAL, DR_COMM_ONE_DEVICE };
static const dr_cross_device_op xdev[] = { DR_XDEV_NCCL, DR_XDEV_HIERARCHICAL_COPY,
                                           DR_XDEV_REDUCTION_TO_ONE_DEVICE };

static void one_rank(void **state)
{
    static const int packs[] = { 0, 1, 3 };
    (void)state;
    for (uint32_t a = 0; a < 3; a++)
        for (size_t p = 0; p < 3; p++)
            for (uint32_t R = 1; R <= 6; R++) {
                static dr_strategy st, sf;
                dr_cacc *c[MAXR];
                dr_acc *f[MAXR], *want;
                dr_comm *ep, *epf;
                dr_comm_config cfg, cff;
                uint32_t one;
                dr_err err;
                char what[96];
                snprintf(what, sizeof what, "alg %u packs %d R=%u", a, packs[p], R);
                make_strategy(&st, DR_STRATEGY_MIRRORED, (int)R, xdev[a], packs[p], 0);
                make_strategy(&sf, DR_STRATEGY_MIRRORED, (int)R, xdev[a], packs[p], 0);
                for (uint32_t r = 0; r < R; r++) { c[r] = make(r, 3 + R); f[r] = as_acc(c[r]); }
                want = total_of(c, R);
                cfg = config(1, R, algs[a], packs[p], &st);
                cff = config(1, R, algs[a], packs[p], &sf);
                assert_int_equal(dr_comm_threads()->open(&cfg, &ep, &one, &err), DR_OK);
                assert_int_equal(dr_comm_threads()->open(&cff, &epf, &one, &err), DR_OK);
                if (dr_comm_threads()->all_reduce(ep, DR_FORM_CACC, (void *const *)c, N, &err)) fail_msg("%s: %s", what, err.msg);
                assert_int_equal(dr_comm_threads()->all_reduce(epf, DR_FORM_ACC, (void *const *)f, N, &err), DR_OK);
                expect_total(c, R, want, what);
                expect_scaled_bytes(&st, &sf, what);
                dr_comm_threads()->close(&ep, 1);
                dr_comm_threads()->close(&epf, 1);
                for (uint32_t r = 0; r < R; r++) { free(c[r]); free(f[r]); }
                free(want);
            }
}

/* ---- ranks as threads ---------------------------------------------------- */

typedef struct job {
    pthread_t th;
    dr_comm  *ep;
    dr_cacc **local;
    dr_cacc  *dst;
    bool      reduce_to;
    int       rc;
    dr_err    err;
} job;

static void *job_main(void *arg)
{
    job *j = arg;
    j->rc = j->reduce_to ? dr_comm_threads()->reduce_to(j->ep, DR_FORM_CACC, (void *const *)j->local, N, 0, j->dst, &j->err)
                         : dr_comm_threads()->all_reduce(j->ep, DR_FORM_CACC, (void *const *)j->local, N, &j->err);
    return NULL;
}

static void ranks(void **state)
{
    (void)state;
    for (uint32_t W = 2; W <= 3; W++)
        for (uint32_t L = 1; L <= 2; L++)
            for (int rt = 0; rt < 2; rt++) {
                static dr_strategy st;
                dr_cacc *c[MAXR], *dst = calloc(N + 1, sizeof *dst);
                dr_acc *want;
                dr_comm *eps[4];
                dr_comm_config cfg;
                job jobs[4];
                uint32_t neps;
                dr_err err;
                char what[64];
                snprintf(what, sizeof what, "%s W=%u L=%u", rt ? "reduce_to" : "all_reduce", W, L);
                make_strategy(&st, DR_STRATEGY_MULTI_WORKER_MIRRORED, (int)L, DR_XDEV_DEFAULT, 1, W);
                for (uint32_t r = 0; r < W * L; r++) c[r] = make(r, 17 + W);
                want = total_of(c, W * L);
                cfg = config(W, L, DR_COMM_RING, 1, &st);
                assert_int_equal(dr_comm_threads()->open(&cfg, eps, &neps, &err), DR_OK);
                for (uint32_t w = 0; w < W; w++) {
                    jobs[w] = (job){ .ep = eps[w], .local = c + w * L, .dst = w == 0 ? dst : NULL, .reduce_to = rt };
                    assert_int_equal(pthread_create(&jobs[w].th, NULL, job_main, &jobs[w]), 0);
                }
                for (uint32_t w = 0; w < W; w++) pthread_join(jobs[w].th, NULL);
                for (uint32_t w = 0; w < W; w++) if (jobs[w].rc) fail_msg("%s: %s", what, jobs[w].err.msg);
                if (rt) expect_total(&dst, 1, want, what);
                else expect_total(c, W * L, want, what);
                dr_comm_threads()->close(eps, neps);
                for (uint32_t r = 0; r < W * L; r++) free(c[r]);
                free(want);
                free(dst);
            }
}

/* One replica's element far from the others': overflowed on every replica,
 * never rounded; the other elements are still exact. */
static void overflow_everywhere(void **state)
{
    dr_cacc *c[3];
    dr_comm *ep;
    dr_comm_config cfg = config(1, 3, DR_COMM_RING, 1, NULL);
    uint32_t one;
    dr_err err;
    (void)state;
    for (uint32_t r = 0; r < 3; r++) c[r] = make(r, 9);
    dr_cacc_add(&c[2][200], 0x1p120f);
    dr_cacc_add(&c[0][200], 0x1p-120f);
    assert_int_equal(dr_comm_threads()->open(&cfg, &ep, &one, &err), DR_OK);
    assert_int_equal(dr_comm_threads()->all_reduce(ep, DR_FORM_CACC, (void *const *)c, N, &err), DR_OK);
    for (uint32_t r = 0; r < 3; r++) {
        assert_true(dr_cacc_overflowed(&c[r][200]));
        assert_false(dr_cacc_overflowed(&c[r][199]));
    }
    dr_comm_threads()->close(&ep, 1);
    for (uint32_t r = 0; r < 3; r++) free(c[r]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_rank),
        cmocka_unit_test(ranks),
        cmocka_unit_test(overflow_everywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
