/* distref tests — the comm test's fixtures (tests/test_comm.c): the data of
 * every number form, the results computed here independently of the comm,
 * strategies and endpoints, ranks as threads, byte counts. Include after
 * cmocka.h.
 *
 * Data: element i of replica rep is a few float terms (terms()): values over
 * 40 binades, a tiny term, a -0 here and there, an inf on replica 1, and one
 * planted element P_OVF, 2^120 on replica 1 and 2^-120 on every other
 * replica: its exact sum leaves a compact accumulator's window (DR_CACC_BITS)
 * as soon as replica 1 and any other term meet, in any order. An ACC element
 * holds its terms (dr_acc_add), a CACC element the same (dr_cacc_add), an
 * F32 element their float sum.
 *
 * The oracles, plain loops that share no code with the comm:
 *   exact      dr_acc_add of every participant's terms, last replica first
 *              (never dr_acc_merge, which the collectives use);
 *   F32        the float order distref/comm.h documents, per algorithm
 *              (f32_expected; the torus: f32_torus);
 *   bytes      the reference's (ref/: dr_all_reduce, dr_reduce_to_device,
 *              dr_tpu_all_reduce) on an identical strategy, which count
 *              DR_ACC_BYTES per element, rescaled to the form's wire bytes
 *              (WIRE[], written here, not read from the form table).
 */
#ifndef DISTREF_TESTS_COMM_FIXTURE_H
#define DISTREF_TESTS_COMM_FIXTURE_H

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distref/cacc.h"
#include "distref/comm.h"
#include "distref/factory.h"
#include "distref/ref.h"
#include "distref/rng.h"
#include "distref/strategy.h"
#include "distref/tpu.h"
#include "ref/tpu_collective.h"

#define MAXR  64
#define B     ((uint64_t)DR_ACC_BYTES)
#define P_OVF 5
#define NF    3   /* the forms the threads comm reduces (F32_EXACT is the MPI comm's) */

static const dr_form_id FORMS[NF] = { DR_FORM_ACC, DR_FORM_CACC, DR_FORM_F32 };
enum { F_ACC, F_CACC, F_F32 };
static const char *const FORM_NAME[NF] = { "acc", "cacc", "f32" };
static const uint64_t WIRE[NF] = { DR_ACC_BYTES, DR_CACC_BYTES, 4 };
static const size_t SIZE[NF] = { sizeof(dr_acc), sizeof(dr_cacc), sizeof(float) };
static const dr_comm_alg ALGS[] = { DR_COMM_RING, DR_COMM_HIERARCHICAL, DR_COMM_ONE_DEVICE };
static const dr_cross_device_op XDEV[] = { DR_XDEV_NCCL, DR_XDEV_HIERARCHICAL_COPY, DR_XDEV_REDUCTION_TO_ONE_DEVICE };
static const char *const ALG_NAME[] = { "ring", "hierarchical", "one_device" };

/* ---- data and the exact oracle ------------------------------------------------ */

static int terms(uint32_t rep, size_t i, uint64_t seed, float t[4])
{
    int k = 0;
    if (i == P_OVF) {
        t[0] = rep == 1 ? 0x1p120f : 0x1p-120f;
        return 1;
    }
    t[k++] = (dr_rng_uniform(seed, rep, i) - 0.5f) * ldexpf(1.0f, (int)(i % 40) - 20);
    t[k++] = dr_rng_uniform(seed + 1, rep, i) * 1e-30f;
    if (i % 103 == 9) t[k++] = -0.0f;
    if (i % 101 == 7 && rep == 1) t[k++] = INFINITY;
    return k;
}

/* Replica rep's array of n elements of form fi (one spare element). */
static void *make(int fi, size_t n, uint32_t rep, uint64_t seed)
{
    char *a = calloc(n + 1, SIZE[fi]);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++) {
        float t[4];
        int k = terms(rep, i, seed, t);
        if (fi == F_F32) {
            float s = t[0];
            for (int j = 1; j < k; j++) s = s + t[j];
            ((float *)a)[i] = s;
        }
        for (int j = 0; j < k && fi != F_F32; j++) {
            if (fi == F_ACC) dr_acc_add((dr_acc *)a + i, t[j]);
            else dr_cacc_add((dr_cacc *)a + i, t[j]);
        }
    }
    return a;
}

static void *copy_of(int fi, const void *a, size_t n)
{
    void *c = malloc((n + 1) * SIZE[fi]);
    assert_non_null(c);
    memcpy(c, a, n * SIZE[fi]);
    return c;
}

static void free_all(void **a, uint32_t R)
{
    for (uint32_t r = 0; r < R; r++) free(a[r]);
}

/* The exact sum of the terms of replicas reps[0..nreps) (and of replica 99, the
 * destination's own, when dst99). */
static dr_acc *exact_total(uint32_t nreps, bool dst99, size_t n, uint64_t seed)
{
    dr_acc *t = calloc(n + 1, sizeof *t);
    assert_non_null(t);
    for (size_t i = 0; i < n; i++) {
        float x[4];
        for (uint32_t q = nreps + dst99; q-- > 0;) {
            int k = terms(q == nreps ? 99 : q, i, seed, x);
            for (int j = 0; j < k; j++) dr_acc_add(&t[i], x[j]);
        }
    }
    return t;
}

/* Element i of form fi at got: the exact total want[i] (CACC: element P_OVF
 * overflowed when ovf, never rounded), or the float wantf[i], bit for bit. */
static void expect_elem(int fi, const void *got, size_t i, const dr_acc *want, const float *wantf, bool ovf,
                        const char *what, uint32_t r)
{
    dr_acc x;
    if (fi == F_F32) {
        if (memcmp((const float *)got + i, &wantf[i], sizeof(float)) != 0)
            fail_msg("%s: replica %u element %zu is %a, expected %a", what, r, i, (double)((const float *)got)[i],
                     (double)wantf[i]);
    } else if (fi == F_ACC) {
        if (!dr_acc_equal((const dr_acc *)got + i, &want[i]))
            fail_msg("%s: replica %u element %zu is not the total (%g, want %g)", what, r, i,
                     (double)dr_acc_round((const dr_acc *)got + i), (double)dr_acc_round(&want[i]));
    } else {
        const dr_cacc *c = (const dr_cacc *)got + i;
        bool o = i == P_OVF && ovf;
        if (dr_cacc_overflowed(c) != o)
            fail_msg("%s: replica %u element %zu %s overflowed", what, r, i, o ? "is not" : "is");
        if (!o && (!dr_cacc_to_acc(&x, c) || !dr_acc_equal(&x, &want[i])))
            fail_msg("%s: replica %u element %zu is not the total", what, r, i);
    }
}

static void expect_all(int fi, void *const *x, uint32_t R, size_t n, const dr_acc *want, const float *wantf,
                       bool ovf, const char *what)
{
    for (uint32_t r = 0; r < R; r++)
        for (size_t i = 0; i < n; i++) expect_elem(fi, x[r], i, want, wantf, ovf, what, r);
}

/* ---- the float orders (distref/comm.h) ------------------------------------------ */

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

/* Ring: chunk c from member c on, x_c + x_{c+1} + ... + x_{c-1} (mod m). */
static float ring_order(float *const *x, const uint32_t *m, uint32_t n, uint32_t c, size_t i)
{
    float s = x[m[c]][i];
    for (uint32_t k = 1; k < n; k++) s = s + x[m[(c + k) % n]][i];
    return s;
}

/* The documented order within one rank. */
static float local_order(dr_comm_alg alg, float *const *x, uint32_t R, size_t i, size_t j, size_t len)
{
    uint32_t h = R / 2, id[MAXR];
    if (R == 1) return x[0][i];
    switch (alg) {
    case DR_COMM_RING:
        for (uint32_t r = 0; r < R; r++) id[r] = r;
        return ring_order(x, id, R, chunk_of(j, len, R), i);
    case DR_COMM_HIERARCHICAL:
        return fold(x, 0, h, i) + fold(x, h, R, i);
    default:
        return fold(x, 0, R, i);
    }
}

/* want[0..n): the all-reduce of x (W ranks of R replicas, rank-major) in the
 * documented order: one rank, its algorithm's; more, each rank's replicas in
 * order, then the ring over the ranks (the algorithm does not apply). */
static void f32_expected(float *const *x, uint32_t W, uint32_t R, dr_comm_alg alg, int packs, const size_t *lens,
                         uint32_t nt, size_t n, float *want)
{
    float *y[8];
    for (uint32_t w = 0; w < W && W > 1; w++) {
        y[w] = malloc((n + 1) * sizeof(float));
        assert_non_null(y[w]);
        for (size_t i = 0; i < n; i++) y[w][i] = fold(x, w * R, w * R + R, i);
    }
    for (size_t i = 0; i < n; i++) {
        size_t off = 0, len = n;
        pack_of(i, n, packs, lens, nt, &off, &len);
        want[i] = W == 1 ? local_order(alg, x, R, i, i - off, len) : local_order(DR_COMM_RING, y, W, i, i - off, len);
    }
    for (uint32_t w = 0; w < W && W > 1; w++) free(y[w]);
}

/* The torus's order (distref/comm.h, devices/comm/comm_torus.c's header):
 * replica r's position in dimension d is the lowest coordinate of its cores
 * there over a replica's extent in d; a line of d is the replicas agreeing on
 * every other dimension, in ring order by position (ties by replica number);
 * dimension after dimension every line runs RING's order over the elements
 * of the ranges packed together. x is updated in place. */
static void f32_torus(const dr_strategy *s, float *const *x, const size_t *ranges, uint32_t nr)
{
    uint32_t R = s->num_replicas, k = (uint32_t)s->tpu_assignment.num_cores_per_replica;
    int pos[MAXR][DR_TPU_RANK];
    size_t len = 0;
    for (uint32_t r = 0; r < R; r++) {
        int lo[DR_TPU_RANK], hi[DR_TPU_RANK], xyz[DR_TPU_RANK];
        for (int d = 0; d < DR_TPU_RANK; d++) { lo[d] = INT_MAX; hi[d] = INT_MIN; }
        for (uint32_t j = 0; j < k; j++) {
            dr_tpu_core_coords(&s->tpu_system->topology, s->tpu_assignment.core[r * k + j], xyz);
            for (int d = 0; d < DR_TPU_RANK; d++) {
                if (xyz[d] < lo[d]) lo[d] = xyz[d];
                if (xyz[d] > hi[d]) hi[d] = xyz[d];
            }
        }
        for (int d = 0; d < DR_TPU_RANK; d++) pos[r][d] = lo[d] / (hi[d] - lo[d] + 1);
    }
    for (uint32_t q = 0; q < nr; q++) len += ranges[2 * q + 1] - ranges[2 * q];
    for (int d = 0; d < DR_TPU_RANK; d++)
        for (uint32_t r = 0; r < R; r++) {
            uint32_t m[MAXR], n = 0;
            bool first = true;
            for (uint32_t q = 0; q < R; q++) {   /* r's line, sorted; r must be its lowest member */
                bool same = true;
                for (int e = 0; e < DR_TPU_RANK; e++) same = same && (e == d || pos[q][e] == pos[r][e]);
                if (!same) continue;
                if (q < r) first = false;
                m[n++] = q;
            }
            if (!first || n < 2) continue;
            for (uint32_t a = 1; a < n; a++)
                for (uint32_t b = a; b > 0 && pos[m[b - 1]][d] > pos[m[b]][d]; b--) {
                    uint32_t t = m[b]; m[b] = m[b - 1]; m[b - 1] = t;
                }
            for (uint32_t q = 0, p = 0; q < nr; q++)
                for (size_t i = ranges[2 * q]; i < ranges[2 * q + 1]; i++, p++) {
                    float sum = ring_order(x, m, n, chunk_of(p, len, n), i);
                    for (uint32_t j = 0; j < n; j++) x[m[j]][i] = sum;
                }
        }
}

/* ---- strategies, endpoints, bytes ----------------------------------------------- */

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

static dr_comm_config config(uint32_t W, uint32_t R, dr_comm_alg alg, int packs, const size_t *lens, uint32_t nt,
                             dr_strategy *s)
{
    return (dr_comm_config){ .num_ranks = W, .local_replicas = R, .alg = alg, .num_packs = packs,
                             .tensor_len = lens, .ntensors = nt, .strategy = s };
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

static uint64_t moved(const dr_strategy *s)
{
    uint64_t t = 0;
    for (uint32_t d = 0; d < s->num_devices; d++) t += s->device[d].bytes_in + s->device[d].bytes_out;
    return t;
}

/* Every device moved the reference's bytes at `wire` bytes an element
 * instead of DR_ACC_BYTES. */
static void expect_bytes(const dr_strategy *got, const dr_strategy *ref, uint64_t wire, const char *what)
{
    assert_int_equal(got->num_devices, ref->num_devices);
    for (uint32_t d = 0; d < got->num_devices; d++) {
        const dr_device *g = &got->device[d], *w = &ref->device[d];
        if (g->bytes_in * B != w->bytes_in * wire || g->bytes_out * B != w->bytes_out * wire)
            fail_msg("%s: %s moved in %llu out %llu bytes; the reference in %llu out %llu at %llu bytes an "
                     "element", what, g->name, (unsigned long long)g->bytes_in, (unsigned long long)g->bytes_out,
                     (unsigned long long)w->bytes_in, (unsigned long long)w->bytes_out, (unsigned long long)B);
    }
}

/* ---- ranks as threads ------------------------------------------------------------- */

typedef enum { OP_ALL_REDUCE, OP_REDUCE_TO } rank_op;

typedef struct rank_job {
    pthread_t   th;
    dr_comm    *ep;
    rank_op     op;
    dr_form_id  form;
    void      **local;
    size_t      n;
    void       *dst;
    uint32_t    dst_device;
    int         rc, barrier_rc;
    dr_err      err;
} rank_job;

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    const dr_comm_ops *ops = dr_comm_threads();
    j->barrier_rc = ops->barrier(j->ep, &j->err);
    if (j->op == OP_ALL_REDUCE) j->rc = ops->all_reduce(j->ep, j->form, (void *const *)j->local, j->n, &j->err);
    else j->rc = ops->reduce_to(j->ep, j->form, (void *const *)j->local, j->n, j->dst_device, j->dst, &j->err);
    return NULL;
}

/* Every rank's call on its own thread: rank w's arrays are x[w*R ..], its n
 * ns[w] (NULL: n), rank 0's destination dst. */
static void run_ranks(dr_comm **eps, uint32_t W, uint32_t R, rank_op op, dr_form_id form, void **x, size_t n,
                      const size_t *ns, void *dst, uint32_t dst_device, rank_job *jobs)
{
    for (uint32_t w = 0; w < W; w++) {
        rank_job *j = &jobs[w];
        *j = (rank_job){ .ep = eps[w], .op = op, .form = form, .local = x + w * R, .n = ns ? ns[w] : n,
                         .dst = w == 0 ? dst : NULL, .dst_device = dst_device };
        assert_int_equal(pthread_create(&j->th, NULL, rank_main, j), 0);
    }
    for (uint32_t w = 0; w < W; w++) assert_int_equal(pthread_join(jobs[w].th, NULL), 0);
    for (uint32_t w = 0; w < W; w++) assert_int_equal(jobs[w].barrier_rc, DR_OK);
}

/* One collective on W ranks of R replicas: W == 1 calls it here, more run
 * as threads; every rank must succeed. */
static void call(dr_comm **eps, uint32_t W, uint32_t R, rank_op op, int fi, void **x, size_t n, void *dst,
                 uint32_t dst_device, const char *what)
{
    rank_job jobs[8];
    dr_err err;
    int rc;
    if (W > 1) {
        run_ranks(eps, W, R, op, FORMS[fi], x, n, NULL, dst, dst_device, jobs);
        for (uint32_t w = 0; w < W; w++)
            if (jobs[w].rc != DR_OK) fail_msg("%s: rank %u: %s", what, w, jobs[w].err.msg);
        return;
    }
    rc = op == OP_ALL_REDUCE ? dr_comm_threads()->all_reduce(eps[0], FORMS[fi], (void *const *)x, n, &err)
                             : dr_comm_threads()->reduce_to(eps[0], FORMS[fi], (void *const *)x, n, dst_device, dst, &err);
    if (rc != DR_OK) fail_msg("%s: %s", what, err.msg);
}

#endif
