/* distref tests — the MPI comm's compact all-reduce across ranks, both
 * algorithms (ring and native: devices/mpi/comm_mpi_native.c), against totals
 * computed independently. Run under mpirun (tests/mpi_native.sh, np 2..4):
 *
 *   mpirun -np W build/rel/tests/mpi_native_check
 *
 * Every rank builds every rank's inputs (a pure function of rank, replica
 * and element), so each knows the exact total: every replica's terms added
 * to a full dr_acc. Inputs cover the cases that travel differently: values
 * over 60 binades, exact zeros of both signs and cancellations to zero,
 * +-inf and NaN on some ranks, denormal-scale products next to normal
 * values (spans beyond the compact window), an element already overflowed
 * on one rank, elements empty everywhere or on some ranks only, values near
 * 2^256 and digit counts from 1 to many. For each algorithm, packing
 * (per tensor, 1 and 3 packs) and 1 or 2 local replicas, every element of
 * every replica must be either the exact total with the ORed flags
 * (dr_cacc_to_acc equals the dr_acc total, flags included, and rounds to
 * the same float) or overflowed, and overflowed only where it may be: some
 * rank's input was, or the total does not fit the window (the ring may
 * also overflow on a partial sum, so for it, where the inputs together
 * span more than the window; the native sum never does: it adds the
 * replicas' digits, not merged partials). Both
 * algorithms must agree wherever neither overflowed. Prints one line per
 * configuration; exit 1 on any failure.
 *
 * Then the exact float all-reduce (all_reduce of DR_FORM_F32_EXACT,
 * devices/mpi/comm_mpi_f32x.c), 1 and 2 local replicas: every element of every
 * replica must have the bits of dr_acc_round over all W L terms. Floats of
 * every kind: binades far apart (terms below the int64 grid), zeros of
 * both signs, +-inf and NaN, subnormal terms and sums, sums beyond
 * FLT_MAX, ties, and terms at the top of their binade with one sign (the
 * int64 digits' headroom: one bit less and their sum wraps).
 *
 * Then the exact gradient all-reduce rounded once (all_reduce_round,
 * devices/mpi/comm_mpi_gradx.c), 1 and 2 local replicas, divisors 1, 8
 * and 3, and element counts 1 (ranks with empty chunks), the tensors'
 * 2377 and 70001 (chunks of more than one message), the partials handed
 * over as compact accumulators and as double-doubles (dr_dd_parts, whose
 * escape lists the comm splits per chunk): the partials of
 * build() above and of gterms() (spans just under and over the 106 bits a
 * double-double holds, ties and near-ties of the float rounding, sums
 * that cancel to tiny values); every element of every replica must have
 * the bits of dr_acc_round_div of the exact total, except elements with
 * an overflowed partial: NaN, and counted alike on every rank.
 */
#include "distref/cacc.h"
#include "distref/comm.h"
#include "distref/exact.h"
#include "distref/mpi.h"
#include "distref/rng.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CASES 16

static const size_t tensors[] = { 5, 64, 1, 300, 7, 2000 };
#define NT 6

static size_t total_len(void)
{
    size_t n = 0;
    for (int t = 0; t < NT; t++) n += tensors[t];
    return n;
}

static float u01(uint64_t s, uint32_t a, uint64_t b) { return dr_rng_uniform(s, a, b); }

/* The float terms of replica q's element i: *n of them into x (products
 * x[2k] * x[2k+1] when *prod). */
static void terms(uint32_t q, size_t i, float *x, int *n, int *prod)
{
    int c = (int)(i % CASES);
    float u = u01(11, q, i) - 0.5f, v = u01(12, q, i) - 0.5f;
    *prod = 0;
    *n = 0;
    switch (c) {
    case 0: x[0] = u * ldexpf(1.0f, (int)(i % 60) - 30); x[1] = v * 1e-20f; *n = 2; break;
    case 1: x[0] = 0.0f; *n = 1; break;                                     /* +0 everywhere */
    case 2: x[0] = -0.0f; *n = 1; break;                                    /* -0 everywhere: -0 */
    case 3: x[0] = q % 2 ? -0.0f : 0.0f; *n = 1; break;
    case 4: x[0] = q == 1 ? INFINITY : u; *n = 1; break;
    case 5: x[0] = q == 0 ? INFINITY : q == 1 ? -INFINITY : u; *n = 1; break;   /* inf - inf: NaN */
    case 6: x[0] = q == 0 ? NAN : u; *n = 1; break;
    case 7: x[0] = (q % 2 ? -1.0f : 1.0f) * (float)(1 + i % 7) * 0.375f; *n = 1; break;   /* cancels for even R */
    case 8:   /* denormal-scale products on one rank, normal values on the others */
        *prod = 1;
        if (q == 0) { x[0] = ldexpf(1.0f + u, -140); x[1] = ldexpf(1.0f + v, -140); }
        else { x[0] = u; x[1] = 1.0f; }
        *n = 2;
        break;
    case 9:   /* overflowed on replica 1 already: 1e38 and a denormal product */
        *prod = 1;
        if (q == 1) { x[0] = 1e38f; x[1] = 1.0f; x[2] = ldexpf(1.0f, -149); x[3] = ldexpf(1.0f, -149); *n = 4; }
        else { x[0] = u; x[1] = v; *n = 2; }
        break;
    case 10: *n = 0; break;                                                 /* empty everywhere */
    case 11: if (q % 3 == 0) { x[0] = u; *n = 1; } break;                   /* empty on some */
    case 12: *prod = 1; x[0] = 3e38f * (0.5f + u); x[1] = 2e38f; *n = 2; break;   /* near 2^256 */
    case 13:   /* spans 120..200 bits across ranks: many digits, some overflow */
        x[0] = ldexpf(1.0f + u, (int)(i % 90) * (q % 2 ? 1 : -1)); *n = 1; break;
    case 14:   /* tiny products on every rank */
        *prod = 1; x[0] = ldexpf(1.0f + u, -130 - (int)(q % 5)); x[1] = ldexpf(1.0f + v, -140); *n = 2; break;
    default: x[0] = u; x[1] = v * 0x1p-24f; x[2] = -u; *n = 3; break;      /* cancels to a small remainder */
    }
}

static void build(uint32_t q, size_t n, dr_cacc *c, dr_acc *a)
{
    for (size_t i = 0; i < n; i++) {
        float x[4];
        int k, prod;
        dr_cacc_init(&c[i]);
        if (a) dr_acc_init(&a[i]);
        terms(q, i, x, &k, &prod);
        for (int j = 0; j < k; j += prod ? 2 : 1) {
            if (prod) { dr_cacc_add_prod(&c[i], x[j], x[j + 1]); if (a) dr_acc_add_prod(&a[i], x[j], x[j + 1]); }
            else { dr_cacc_add(&c[i], x[j]); if (a) dr_acc_add(&a[i], x[j]); }
        }
    }
}

typedef struct stats { size_t exact, overflowed, bad; char first[200]; } stats;

/* Bits of |W|. */
static int mag(const dr_cacc *c)
{
    int b = 0;
    uint64_t w[3] = { c->w[0], c->w[1], c->w[2] };
    if (w[2] >> 63) {
        uint64_t k = 1;
        for (int i = 0; i < 3; i++) { uint64_t t = ~w[i] + k; k = k && t == 0; w[i] = t; }
    }
    for (int i = 2; i >= 0 && !b; i--)
        if (w[i]) { b = 64 * i; while (w[i]) { w[i] >>= 1; b++; } }
    return b;
}

static void check(const dr_cacc *got, const dr_acc *want, const bool *in_over, const bool *wide, size_t n, stats *st,
                  const char *who)
{
    for (size_t i = 0; i < n; i++) {
        dr_acc g;
        dr_cacc fit;
        bool ok;
        dr_cacc_from_acc(&fit, &want[i]);
        if (dr_cacc_overflowed(&got[i])) {
            ok = in_over[i] || dr_cacc_overflowed(&fit) || (wide && wide[i]);
            st->overflowed++;
        } else {
            float a = dr_cacc_round_div(&got[i], 3), b = dr_acc_round_div(&want[i], 3);
            ok = !in_over[i] && dr_cacc_to_acc(&g, &got[i]) && dr_acc_equal(&g, &want[i]) &&
                 memcmp(&a, &b, sizeof a) == 0;
            st->exact++;
        }
        if (!ok && !st->bad++)
            snprintf(st->first, sizeof st->first, "%s element %zu (case %zu): %s", who, i, i % CASES,
                     dr_cacc_overflowed(&got[i]) ? "overflowed where the total fits" : "not the exact total");
    }
}

#define FCASES 16

/* Replica q's float of element i. */
static float fterm(uint32_t q, size_t i)
{
    float u = u01(21, q, i) - 0.5f;
    int c = (int)(i % FCASES);
    switch (c) {
    case 0: return u * ldexpf(1.0f, (int)(i % 60) - 30);
    case 1: return 0.0f;
    case 2: return -0.0f;
    case 3: return q % 2 ? -0.0f : 0.0f;
    case 4: return q == 1 ? INFINITY : u;
    case 5: return q == 0 ? INFINITY : q == 1 ? -INFINITY : u;   /* NaN */
    case 6: return q == 0 ? NAN : u;
    case 7: return (q % 2 ? -1.0f : 1.0f) * (float)(1 + i % 7) * 0.375f;   /* cancels for even R */
    case 8: return ldexpf(u, -125 - (int)(q % 5));                        /* subnormal terms and sums */
    case 9: return 3e38f * (0.75f + u / 2);                                /* beyond FLT_MAX for R >= 2 */
    case 10: return ldexpf(1.0f + u, (int)(i % 90) * (q % 2 ? 1 : -1));    /* far apart: below the grid */
    case 11: return ldexpf(0x1.fffffep0f, (int)(i % 40) - 20);             /* one sign, top of the binade */
    case 12: return q == 0 ? ldexpf(1.0f, -126) : -ldexpf(1.0f, -149) * (float)(q + i % 3);   /* at FLT_MIN */
    case 13: return q == 0 ? 1.0f : ldexpf(1.0f, -24 - (int)((q - 1) * (i % 3)));   /* ties */
    case 14: return (float)(int32_t)(u * 16777216.0f) * ldexpf(1.0f, (int)(i % 9));
    default: return u * (float)(1 + q);
    }
}

/* all_reduce_f32_exact with L local replicas against dr_acc_round; returns
 * the number of wrong elements over every rank. */
static unsigned long long check_f32x(uint32_t rank, uint32_t W, uint32_t L, size_t n)
{
    float *loc[2], *want = malloc(n * sizeof *want);
    unsigned long long bad = 0, all = 0;
    size_t first = n;
    dr_comm_config cc;
    dr_comm *ep[1];
    uint32_t neps = 0;
    dr_err err;
    for (size_t i = 0; i < n; i++) {
        dr_acc a;
        dr_acc_init(&a);
        for (uint32_t q = 0; q < W * L; q++) dr_acc_add(&a, fterm(q, i));
        want[i] = dr_acc_round(&a);
    }
    memset(&cc, 0, sizeof cc);
    cc.num_ranks = W;
    cc.local_replicas = L;
    cc.alg = DR_COMM_RING;
    cc.num_packs = 1;
    cc.timeout_s = 30;
    for (uint32_t r = 0; r < L; r++) {
        loc[r] = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) loc[r][i] = fterm(rank * L + r, i);
    }
    if (dr_comm_mpi()->open(&cc, ep, &neps, &err) || dr_comm_mpi()->all_reduce(ep[0], DR_FORM_F32_EXACT, (void *const *)loc, n, &err)) {
        fprintf(stderr, "mpi_native_check rank %u: %s\n", rank, err.msg);
        dr_mpi_abort(1);
    }
    dr_comm_mpi()->close(ep, neps);
    for (uint32_t r = 0; r < L; r++)
        for (size_t i = 0; i < n; i++)
            if (memcmp(&loc[r][i], &want[i], sizeof(float))) { bad++; if (first == n) first = i; }
    if (bad)
        fprintf(stderr, "rank %u: f32x element %zu (case %zu): %a, want %a\n", rank, first, first % FCASES,
                (double)loc[0][first], (double)want[first]);
    MPI_Allreduce(&bad, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (uint32_t r = 0; r < L; r++) free(loc[r]);
    free(want);
    return all;
}

/* A second set of partials for the gradient all-reduce: replica q's
 * terms of element i (products x[2k] * x[2k+1]). */
static void gterms(uint32_t q, size_t i, float *x, int *n)
{
    float u = u01(31, q, i) + 0.5f, v = u01(32, q, i) + 0.5f;
    int c = (int)(i % 9);
    *n = 2;
    x[1] = 1.0f;
    switch (c) {
    case 0: x[0] = q == 0 ? 1.0f : q == 1 ? 0x1p-24f : 0.0f; break;            /* a tie: to even */
    case 1: x[0] = q == 0 ? 1.0f : q == 1 ? 0x1p-24f : 0x1p-70f; break;        /* just past a tie */
    case 2: x[0] = q == 0 ? 1.0f : q == 1 ? 0x1p-24f : -0x1p-70f; break;       /* just before it */
    case 3:   /* two terms whose span is 100-112 bits: a pair or an escape */
        x[0] = u; x[2] = v * ldexpf(1.0f, -40 - (int)(i % 13)); x[3] = ldexpf(1.0f, -40); *n = 4;
        break;
    case 4: x[0] = (q % 2 ? -u : u) * 1024.0f; x[2] = v; x[3] = ldexpf(1.0f, -60 - (int)q); *n = 4; break;   /* cancels */
    case 5: x[0] = ldexpf(u, -120); x[1] = ldexpf(v, -30 - (int)(q % 3)); break;   /* subnormal totals */
    case 6: x[0] = u * 3e38f; x[1] = (q % 2 ? -1.0f : 1.0f) * v; break;            /* near the top */
    case 7:   /* replica 0: 1 + 2^-24 + 2^-54 + 2^-112 (113 bits: an escape), replica 1: -2^-54; the total
               * just past a tie, decided by the lowest bit alone */
        if (q == 0) {
            x[2] = 0x1p-24f; x[3] = 1.0f; x[4] = 0x1p-27f; x[5] = 0x1p-27f; x[6] = 0x1p-56f; x[7] = 0x1p-56f;
            x[0] = 1.0f;
            *n = 8;
        } else {
            x[0] = q == 1 ? -0x1p-27f : 0.0f;
            x[1] = 0x1p-27f;
        }
        break;
    default: x[0] = u; x[1] = v * ldexpf(1.0f, (int)(i % 31) - 15); break;
    }
}

static void gbuild(int set, uint32_t q, size_t n, dr_cacc *c, dr_acc *a)
{
    if (set == 0) { build(q, n, c, a); return; }
    for (size_t i = 0; i < n; i++) {
        float x[8];
        int k;
        dr_cacc_init(&c[i]);
        dr_acc_init(&a[i]);
        gterms(q, i, x, &k);
        for (int j = 0; j < k; j += 2) { dr_cacc_add_prod(&c[i], x[j], x[j + 1]); dr_acc_add_prod(&a[i], x[j], x[j + 1]); }
    }
}

/* all_reduce_round over the partials of set `set`, L local replicas, n
 * elements, divisor d, handed over as compact accumulators (dd false) or
 * as double-doubles (dr_dd_encode's dr_dd_parts): the number of wrong
 * elements over every rank. */
static unsigned long long check_grad(uint32_t rank, uint32_t W, uint32_t L, int set, size_t n, uint32_t d, bool dd)
{
    dr_acc *want = calloc(n, sizeof *want), *part = calloc(n, sizeof *part);
    dr_cacc *tmp = calloc(n, sizeof *tmp), *loc[2], *esc[2];
    double *pairs[2];
    uint32_t *at[2];
    dr_dd_parts parts[2];
    float *out[2];
    bool *over = calloc(n, sizeof *over);
    size_t nover = 0, got_over = 0, first = n;
    unsigned long long bad = 0, all = 0;
    dr_comm_config cc;
    dr_comm *ep[1];
    uint32_t neps = 0;
    dr_err err;
    for (uint32_t q = 0; q < W * L; q++) {
        gbuild(set, q, n, tmp, part);
        for (size_t i = 0; i < n; i++) {
            dr_acc_merge(&want[i], &part[i]);
            over[i] = over[i] || dr_cacc_overflowed(&tmp[i]);
        }
    }
    for (size_t i = 0; i < n; i++) nover += over[i];
    for (uint32_t r = 0; r < L; r++) {
        loc[r] = calloc(n, sizeof(dr_cacc));
        out[r] = malloc(n * sizeof(float));
        gbuild(set, rank * L + r, n, loc[r], part);
        pairs[r] = malloc(2 * n * sizeof(double));
        esc[r] = malloc(n * sizeof(dr_cacc));
        at[r] = malloc(n * sizeof(uint32_t));
        parts[r] = (dr_dd_parts){ pairs[r], esc[r], at[r], dr_dd_encode(loc[r], n, pairs[r], esc[r], at[r]) };
    }
    memset(&cc, 0, sizeof cc);
    cc.num_ranks = W;
    cc.local_replicas = L;
    cc.num_packs = 1;
    cc.timeout_s = 30;
    if (dr_comm_mpi()->open(&cc, ep, &neps, &err) ||
        dr_comm_mpi()->all_reduce_round(ep[0], dd ? NULL : (const dr_cacc *const *)loc, dd ? parts : NULL, n, d, out,
                                        &got_over, &err)) {
        fprintf(stderr, "mpi_native_check rank %u: %s\n", rank, err.msg);
        dr_mpi_abort(1);
    }
    dr_comm_mpi()->close(ep, neps);
    for (uint32_t r = 0; r < L; r++)
        for (size_t i = 0; i < n; i++) {
            float w = dr_acc_round_div(&want[i], d);
            bool ok = over[i] ? out[r][i] != out[r][i] : memcmp(&out[r][i], &w, sizeof w) == 0;
            if (!ok) { bad++; if (first == n) first = i; }
        }
    if (got_over != nover) bad++;
    if (bad)
        fprintf(stderr, "rank %u: grad set %d d=%u %s: %llu wrong, first element %zu: %a, want %a; overflowed %zu, "
                "want %zu\n", rank, set, d, dd ? "dd" : "cacc", bad, first, first < n ? (double)out[0][first] : 0.0,
                first < n ? (double)dr_acc_round_div(&want[first], d) : 0.0, got_over, nover);
    MPI_Allreduce(&bad, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (uint32_t r = 0; r < L; r++) { free(loc[r]); free(out[r]); free(pairs[r]); free(esc[r]); free(at[r]); }
    free(want); free(part); free(tmp); free(over);
    return all;
}

int main(int argc, char **argv)
{
    static const int packs[] = { 0, 1, 3 };
    uint32_t rank, W;
    size_t n = total_len();
    dr_err err;
    int fails = 0;
    if (dr_mpi_init(&argc, &argv, &err)) { fprintf(stderr, "mpi_native_check: %s\n", err.msg); return 1; }
    dr_mpi_world(&rank, &W);
    for (uint32_t L = 1; L <= 2; L++)
        for (int pi = 0; pi < 3; pi++) {
            dr_acc *want = calloc(n, sizeof *want), *part = calloc(n, sizeof *part);
            bool *in_over = calloc(n, sizeof *in_over), *wide = calloc(n, sizeof *wide);
            int *lo = malloc(n * sizeof *lo), *hi = malloc(n * sizeof *hi);
            dr_cacc *res[2][2], *tmp = calloc(n, sizeof *tmp);
            stats st[2];
            size_t agree = 0, both = 0;
            memset(st, 0, sizeof st);
            for (size_t i = 0; i < n; i++) { lo[i] = 1 << 20; hi[i] = -(1 << 20); }
            for (uint32_t q = 0; q < W * L; q++) {   /* the independent total */
                build(q, n, tmp, part);
                for (size_t i = 0; i < n; i++) {
                    dr_acc_merge(&want[i], &part[i]);
                    in_over[i] = in_over[i] || dr_cacc_overflowed(&tmp[i]);
                    if (!dr_cacc_overflowed(&tmp[i]) && mag(&tmp[i])) {
                        if (tmp[i].exp < lo[i]) lo[i] = tmp[i].exp;
                        if (tmp[i].exp + mag(&tmp[i]) > hi[i]) hi[i] = tmp[i].exp + mag(&tmp[i]);
                    }
                }
            }
            for (size_t i = 0; i < n; i++) wide[i] = hi[i] - lo[i] > DR_CACC_BITS - 2;
            for (int alg = 0; alg < 2; alg++) {
                dr_comm_config cc;
                dr_comm *ep[1];
                uint32_t neps = 0;
                memset(&cc, 0, sizeof cc);
                cc.num_ranks = W;
                cc.local_replicas = L;
                cc.alg = DR_COMM_RING;
                cc.num_packs = packs[pi];
                cc.tensor_len = tensors;
                cc.ntensors = NT;
                cc.timeout_s = 30;
                cc.ranks_alg = alg ? DR_COMM_RANKS_NATIVE : DR_COMM_RANKS_RING;
                for (uint32_t r = 0; r < L; r++) {
                    res[alg][r] = calloc(n, sizeof(dr_cacc));
                    build(rank * L + r, n, res[alg][r], NULL);
                }
                if (dr_comm_mpi()->open(&cc, ep, &neps, &err) ||
                    dr_comm_mpi()->all_reduce(ep[0], DR_FORM_CACC, (void *const *)res[alg], n, &err)) {
                    fprintf(stderr, "mpi_native_check rank %u: %s\n", rank, err.msg);
                    dr_mpi_abort(1);
                }
                dr_comm_mpi()->close(ep, neps);
                for (uint32_t r = 0; r < L; r++) check(res[alg][r], want, in_over, alg ? NULL : wide, n, &st[alg],
                                                        alg ? "native" : "ring");
            }
            for (uint32_t r = 0; r < L; r++)
                for (size_t i = 0; i < n; i++) {
                    dr_acc a, b;
                    if (dr_cacc_overflowed(&res[0][r][i]) || dr_cacc_overflowed(&res[1][r][i])) continue;
                    both++;
                    agree += dr_cacc_to_acc(&a, &res[0][r][i]) && dr_cacc_to_acc(&b, &res[1][r][i]) && dr_acc_equal(&a, &b);
                }
            {
                unsigned long long mine[3] = { st[0].bad, st[1].bad, both - agree }, all[3];
                MPI_Allreduce(mine, all, 3, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
                if (rank == 0)
                    printf("np=%u L=%u num_packs=%d: ring %zu exact %zu overflowed, native %zu exact %zu overflowed; "
                           "wrong: ring %llu native %llu; disagree %llu  %s\n", W, L, packs[pi], st[0].exact,
                           st[0].overflowed, st[1].exact, st[1].overflowed, all[0], all[1], all[2],
                           all[0] + all[1] + all[2] ? "FAIL" : "ok");
                if (st[0].bad) fprintf(stderr, "rank %u: %s\n", rank, st[0].first);
                if (st[1].bad) fprintf(stderr, "rank %u: %s\n", rank, st[1].first);
                fails += all[0] + all[1] + all[2] != 0;
            }
            for (int alg = 0; alg < 2; alg++) for (uint32_t r = 0; r < L; r++) free(res[alg][r]);
            free(want); free(part); free(in_over); free(wide); free(lo); free(hi); free(tmp);
        }
    for (uint32_t L = 1; L <= 2; L++)
        for (int k = 0; k < 2; k++) {   /* a small call, and one whose chunks take more than one message */
            size_t nf = k ? 140000 : 1000;
            unsigned long long wrong = check_f32x(rank, W, L, nf);
            if (rank == 0)
                printf("np=%u L=%u n=%zu: all_reduce_f32_exact wrong %llu  %s\n", W, L, nf, wrong, wrong ? "FAIL" : "ok");
            fails += wrong != 0;
        }
    for (uint32_t L = 1; L <= 2; L++)
        for (int set = 0; set < 2; set++)
            for (int k = 0; k < 3; k++)
                for (int di = 0; di < 3; di++)
                    for (int dd = 0; dd < 2; dd++) {
                        static const size_t counts[] = { 1, 2377, 70001 };
                        static const uint32_t divs[] = { 1, 8, 3 };
                        unsigned long long wrong;
                        if (k == 2 && di != 0) continue;   /* the long call once */
                        wrong = check_grad(rank, W, L, set, counts[k], divs[di], dd);
                        if (rank == 0)
                            printf("np=%u L=%u set=%d n=%zu d=%u %s: all_reduce_round wrong %llu  %s\n", W, L, set,
                                   counts[k], divs[di], dd ? "dd" : "cacc", wrong, wrong ? "FAIL" : "ok");
                        fails += wrong != 0;
                    }
    {   /* usage errors, refused by every rank before any message: a divisor of 0, too many elements, both
         * input forms, a dd escape list out of order */
        dr_comm_config cc;
        dr_comm *ep[1];
        uint32_t neps = 0;
        dr_cacc one = { { 0, 0, 0 }, 0, 0 }, *lp[2] = { &one, &one };
        const dr_cacc *const *cl = (const dr_cacc *const *)lp;
        float f[2], *fp[2] = { &f[0], &f[1] };
        size_t ov = 0;
        int r0, r1, r2, r3;
        memset(&cc, 0, sizeof cc);
        cc.num_ranks = W;
        cc.local_replicas = 1;
        cc.num_packs = 1;
        if (dr_comm_mpi()->open(&cc, ep, &neps, &err)) { fprintf(stderr, "mpi_native_check: %s\n", err.msg); dr_mpi_abort(1); }
        r0 = dr_comm_mpi()->all_reduce_round(ep[0], cl, NULL, 1, 0, fp, &ov, &err);
        r1 = dr_comm_mpi()->all_reduce_round(ep[0], cl, NULL, ((size_t)1 << 25) + 1, 1, fp, &ov, &err);
        {   /* both forms at once; a dd escape list out of order */
            static const double pairs[4] = { NAN, 0.0, NAN, 0.0 };
            static const uint32_t at[2] = { 1, 0 };
            dr_cacc e2[2] = { one, one };
            dr_dd_parts dd[2] = { { pairs, e2, at, 2 }, { pairs, e2, at, 2 } };
            r2 = dr_comm_mpi()->all_reduce_round(ep[0], cl, dd, 1, 1, fp, &ov, &err);
            r3 = dr_comm_mpi()->all_reduce_round(ep[0], NULL, dd, 2, 1, fp, &ov, &err);
        }
        dr_comm_mpi()->close(ep, neps);
        if (rank == 0)
            printf("np=%u: all_reduce_round d=0 %s, n=2^25+1 %s, both forms %s, escapes out of order %s  %s\n", W,
                   r0 == DR_EUSAGE ? "refused" : "ACCEPTED", r1 == DR_EUSAGE ? "refused" : "ACCEPTED",
                   r2 == DR_EUSAGE ? "refused" : "ACCEPTED", r3 == DR_EUSAGE ? "refused" : "ACCEPTED",
                   r0 == DR_EUSAGE && r1 == DR_EUSAGE && r2 == DR_EUSAGE && r3 == DR_EUSAGE ? "ok" : "FAIL");
        fails += r0 != DR_EUSAGE || r1 != DR_EUSAGE || r2 != DR_EUSAGE || r3 != DR_EUSAGE;
    }
    dr_mpi_finalize();
    return fails ? 1 : 0;
}
