/* distref tests — the VNNI path's rounding of its f32 outputs, eight at a
 * time (devices/cpu/cpu_gemm_round.c): bias + V 2^E, V the exact 128-bit dot
 * product, must round as the exact accumulator rounds it (core/acc.c,
 * tested against MPFR in test_exact), and must leave to the general path
 * exactly the cases its contract in cpu_gemm_internal.h names.
 *
 * Directly, on built values: ties to even at every width of V (1 to 96
 * bits), with the deciding bit just above, just below, between the
 * double's 53 bits and the 64-bit window, and only below the window (the
 * sticky bit); carries into the next binade; results in the subnormal
 * range and at overflow; biases whose unit lies 2 bits below V's up to 105
 * bits above it (the limits 0 and 100 on both sides), biases that make a
 * tie, subnormal biases, biases that cancel V (a zero: not taken), +-0,
 * inf and NaN biases; exponents past the path's limits; columns marked to
 * skip; every tail of the eight-lane step. Through the GEMM: sums 1 +
 * 2^-24 + tiny whose tiny bits decide the rounding, scaled to subnormal
 * and overflowing results, with and without a bias, against dr_gemm_f32.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distref/exact.h"
#include "distref/error.h"
#include "distref/cacc.h"
#include "distref/exact_parts.h"
#include "devices/cpu/cpu_gemm_internal.h"

#if defined(__SIZEOF_INT128__)
typedef struct { uint64_t s; } trng;

static uint64_t next_u64(trng *r)
{
    r->s ^= r->s >> 12; r->s ^= r->s << 25; r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}

static uint32_t bits_of(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }

/* bias + V 2^E by the exact accumulator; *zero when the sum is 0. */
static float oracle(dr_i128 V, int E, const float *bias, int *zero)
{
    dr_acc a;
    dr_u128 u = (dr_u128)V;
    dr_acc_init(&a);
    if (bias) dr_acc_add(&a, *bias);
    for (int l = 0; l < 3; l++) dr_acc_add_i64(&a, (int64_t)(uint32_t)(u >> (32 * l)), E + 32 * l);
    dr_acc_add_i64(&a, (int64_t)(int32_t)(uint32_t)(u >> 96), E + 96);
    a.flags |= DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
    dr_acc_normalize(&a);
    *zero = 1;
    for (int l = 0; l < DR_ACC_LIMBS; l++) *zero &= a.limb[l] == 0;
    return dr_acc_round(&a);
}

/* The unit of a finite float's last bit (2^-149 for subnormals). */
static int unit_exp(float x)
{
    return fabsf(x) >= 0x1p-126f ? ilogbf(x) - 23 : -149;
}

/* One lane: the value, its exponent, its bias (used when the row has one)
 * and whether its column is marked to skip. */
typedef struct lane { dr_i128 V; int E; float bias; int skip; } lane;

#define ROW 29                                     /* three full steps of eight and a tail of five */

static long taken, left;

/* Rounds a row of lanes (with and without the biases) and checks every
 * lane: taken exactly when the contract says, and then the oracle's bits. */
static void check_row(const lane *L, size_t n, trng *r)
{
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        dr_i128 V[ROW];
        int32_t eb[ROW];
        float bias[ROW], out[ROW];
        uint8_t done[(ROW + 7) / 8];
        int Ea = (int)(next_u64(r) % 101) - 50;
        for (size_t j = 0; j < n; j++) {
            V[j] = L[j].V;
            eb[j] = L[j].skip ? DR_ROUND_SKIP : L[j].E - Ea;
            bias[j] = L[j].bias;
            out[j] = 12345.0f;
        }
        dr_crt_round_row_avx512(V, n, Ea, eb, with_bias ? bias : NULL, out, done);
        for (size_t j = 0; j < n; j++) {
            int got = done[j / 8] >> (j % 8) & 1, want = !L[j].skip && L[j].E >= -900 && L[j].E <= 800, zero = 0;
            float b = bias[j], ref = 0.0f;
            if (with_bias && b != 0.0f)
                want &= isfinite(b) && unit_exp(b) - L[j].E >= 0 && unit_exp(b) - L[j].E <= 100;
            if (want) {
                ref = oracle(V[j], L[j].E, with_bias ? &bias[j] : NULL, &zero);
                want = !zero;
            }
            if (got != want) {
                print_error("lane %zu: V = %#llx:%016llx E = %d bias(%d) = %a: taken %d, should be %d\n", j,
                            (unsigned long long)((dr_u128)V[j] >> 64), (unsigned long long)V[j], L[j].E,
                            with_bias, (double)b, got, want);
                fail();
            }
            if (!got) {
                left++;
                assert_true(bits_of(out[j]) == bits_of(12345.0f));   /* left alone */
                continue;
            }
            taken++;
            if (bits_of(out[j]) != bits_of(ref)) {
                print_error("lane %zu: V = %#llx:%016llx E = %d bias(%d) = %a: got %a (0x%08x), exact %a (0x%08x)\n",
                            j, (unsigned long long)((dr_u128)V[j] >> 64), (unsigned long long)V[j], L[j].E,
                            with_bias, (double)b, (double)out[j], bits_of(out[j]), (double)ref, bits_of(ref));
                fail();
            }
        }
    }
}

/* A random value of exactly nb bits (1 <= nb <= 96). */
static dr_u128 random_bits(trng *r, int nb)
{
    dr_u128 v = (dr_u128)next_u64(r) << 64 | next_u64(r);
    v &= ((dr_u128)1 << nb) - 1u;
    return v | (dr_u128)1 << (nb - 1);
}

/* The values that decide a rounding at width nb: a random one, a tie
 * (24 bits, then the half bit, then zeros), the tie with one more bit at
 * the very bottom (below a 64-bit window when nb > 64), one bit less, the
 * tie plus a bit between the double's 53 bits and 64, the all-ones value
 * (it carries into the next binade) and the tie below the next power. */
static dr_u128 shaped(trng *r, int nb, int kind)
{
    dr_u128 m = (dr_u128)((next_u64(r) >> 40) | 0x800000u), tie;
    if (nb < 26 || kind == 0) return random_bits(r, nb);
    tie = (m << 1 | 1u) << (nb - 25);
    switch (kind) {
    case 1: return tie;
    case 2: return tie + 1u;
    case 3: return tie - 1u;
    case 4: return nb >= 61 ? tie + ((dr_u128)1 << (nb - 60)) : tie + 1u;
    case 5: return ((dr_u128)1 << nb) - 1u;
    default: return ((dr_u128)1 << nb) - ((dr_u128)1 << (nb - 25));
    }
}

/* A bias for a lane of exponent E: +-0, a unit s bits above V's (s from -2
 * to 105, the limits on both sides), a subnormal, inf or NaN. */
static float pick_bias(trng *r, int E, int *s_out)
{
    static const int ss[] = { -2, -1, 0, 1, 2, 23, 24, 25, 40, 52, 53, 63, 64, 65, 90, 99, 100, 101, 105 };
    uint64_t k = next_u64(r) % 24;
    int s;
    float m = (float)((next_u64(r) >> 40) | 0x800000u) * ((next_u64(r) & 1) ? -1.0f : 1.0f);
    *s_out = -1000;
    if (k == 19) return (next_u64(r) & 1) ? -0.0f : 0.0f;
    if (k == 20) return (next_u64(r) & 1) ? -INFINITY : INFINITY;
    if (k == 21) return NAN;
    if (k >= 22) {                                 /* a subnormal: unit 2^-149 */
        *s_out = -149 - E;
        return ldexpf((float)(next_u64(r) % 0x7fffff + 1) * ((k & 1) ? -1.0f : 1.0f), -149);
    }
    s = ss[k];
    if (E + s < -149 || E + s + 23 > 127) return 0.0f;   /* no such float */
    *s_out = s;
    return ldexpf(m, E + s);
}

static void direct_rounding(void **state)
{
    trng r = { 0x5eed1234u };
    lane L[ROW];
    size_t n = 0;
    (void)state;
    if (!dr_crt_have_vnni()) { skip(); return; }
    for (int pass = 0; pass < 12; pass++)
        for (int nb = 1; nb <= 96; nb++)
            for (int kind = 0; kind < 7; kind++) {
                lane *x = &L[n++];
                int cls = (int)(next_u64(&r) % 8), s;
                dr_u128 v = shaped(&r, nb, kind);
                x->V = (next_u64(&r) & 1) ? -(dr_i128)v : (dr_i128)v;
                switch (cls) {
                case 0: case 1: case 2: x->E = -nb + (int)(next_u64(&r) % 121) - 60; break;   /* normal */
                case 3: x->E = -nb - 126 - (int)(next_u64(&r) % 28); break;    /* subnormal, down to 0 */
                case 4: x->E = -nb + 126 + (int)(next_u64(&r) % 4); break;     /* FLT_MAX and overflow */
                case 5: x->E = -320 + (int)(next_u64(&r) % 8); break;          /* far below: +-0 or tiny */
                default: x->E = -nb + (int)(next_u64(&r) % 41) - 20; break;
                }
                if (x->E < -320) x->E = -320;
                x->bias = pick_bias(&r, x->E, &s);
                if (s >= 1 && s <= 96 && (next_u64(&r) & 3) == 0) {   /* a tie made by the bias, or nearly */
                    dr_u128 h = (dr_u128)1 << (s - 1);
                    int d = (int)(next_u64(&r) % 3) - 1;
                    x->V = (next_u64(&r) & 1) ? -(dr_i128)(h + (dr_u128)(dr_i128)d) : (dr_i128)(h + (dr_u128)(dr_i128)d);
                    if (x->V == 0) x->V = 1;
                }
                if (nb <= 24 && x->E >= -149 && x->E + nb <= 100 && (next_u64(&r) % 16) == 0)
                    x->bias = -ldexpf((float)(int64_t)x->V, x->E);      /* cancels: a zero, not taken */
                x->skip = next_u64(&r) % 32 == 0;
                if (n == ROW) { check_row(L, n, &r); n = 0; }
            }
    /* Exponents at and past the path's limits (no oracle needed: not taken). */
    for (int k = 0; k < ROW; k++) {
        L[k].V = (dr_i128)(k + 1);
        L[k].E = (k & 1) ? 801 + k : -901 - k;
        L[k].bias = 0.0f;
        L[k].skip = 0;
    }
    for (int tail = 1; tail <= ROW; tail++) check_row(L, (size_t)tail, &r);
    if (n) check_row(L, n, &r);
    /* the fast path did most of the work: the test is not vacuous */
    print_message("rounded by the fast path: %ld lanes; left to the general path: %ld\n", taken, left);
    assert_true(taken > 10 * left / 4);
}

/* Through the GEMM: row (1, 2^-24, t) . column (1, 1, u) = 1 + 2^-24 + t u
 * ties unless t u decides, t u from 2^-48 to 2^-78 (inside the 53 bits,
 * between 53 and 64, below the 64-bit window), both signs, scaled to
 * normal, subnormal and overflowing results, with biases that move or
 * cancel it; plus random rows of mixed binades. Against dr_gemm_f32. */
static void ties_through_products(void **state)
{
    enum { M = 6, N = 21, K = 5 };
    static const int tiny[] = { 24, 29, 30, 35, 38, 39 };
    static const int scale[][2] = { { 0, 0 }, { -70, -70 }, { -75, -74 }, { -60, -80 }, { 63, 64 }, { 64, 64 },
                                     { 60, 67 }, { -100, 20 } };
    trng r = { 77 };
    float A[M * K], B[K * N], bias[N], C1[M * N], C2[M * N];
    (void)state;
    if (!dr_crt_have_vnni()) { skip(); return; }
    for (size_t sc = 0; sc < sizeof scale / sizeof scale[0]; sc++)
        for (int rep = 0; rep < 6; rep++) {
            int ea = scale[sc][0], eb = scale[sc][1];
            for (int i = 0; i < M; i++) {
                float sg = (next_u64(&r) & 1) ? -1.0f : 1.0f;
                A[i * K + 0] = ldexpf(1.0f, ea);
                A[i * K + 1] = ldexpf(sg, ea - 24);
                A[i * K + 2] = ldexpf(sg * (float)((next_u64(&r) & 1) ? 1 : -1), ea - tiny[next_u64(&r) % 6]);
                A[i * K + 3] = rep & 1 ? ldexpf((float)(next_u64(&r) % 255), ea - 30) : 0.0f;
                A[i * K + 4] = 0.0f;
            }
            for (int j = 0; j < N; j++) {
                B[0 * N + j] = ldexpf((j & 1) ? -1.0f : 1.0f, eb);
                B[1 * N + j] = B[0 * N + j];
                B[2 * N + j] = ldexpf((float)(1 + (next_u64(&r) & 1)), eb - tiny[next_u64(&r) % 6]);
                B[3 * N + j] = ldexpf((float)(next_u64(&r) % 3), eb - 39);
                B[4 * N + j] = ldexpf((float)(next_u64(&r) % 7), eb - 20);
                switch (next_u64(&r) % 5) {
                case 0: bias[j] = 0.0f; break;
                case 1: bias[j] = ldexpf((float)((next_u64(&r) >> 40) | 1u), ea + eb - 24 - 23); break;
                case 2: bias[j] = -ldexpf(1.0f, ea + eb); break;                 /* cancels the leading 1 */
                case 3: bias[j] = ldexpf(3.0f, ea + eb - 25); break;             /* a half bit of its own */
                default: bias[j] = ldexpf(1.0f, ea + eb + 30); break;
                }
                if (!isfinite(bias[j])) bias[j] = 0.0f;
            }
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                const float *bb = with_bias ? bias : NULL;
                int rc = dr_gemm_fast_path(DR_GEMM_PATH_CRT_VNNI, DR_NO_TRANS, DR_NO_TRANS, M, N, K, A, K, B, N, bb,
                                           C2, N, NULL, NULL);
                assert_int_equal(rc, DR_OK);
                dr_gemm_f32(DR_NO_TRANS, DR_NO_TRANS, M, N, K, A, K, B, N, bb, C1, N);
                for (int e = 0; e < M * N; e++)
                    if (bits_of(C1[e]) != bits_of(C2[e]) && !(isnan(C1[e]) && isnan(C2[e]))) {
                        print_error("scale %d,%d bias %d element %d: exact %a, VNNI path %a\n", ea, eb, with_bias,
                                    e, (double)C1[e], (double)C2[e]);
                        fail();
                    }
            }
        }
}


/* ---- compact accumulators rounded eight at a time (core/cacc.c) ---------- */

static void set_bit192(uint64_t m[3], int b) { m[b >> 6] |= (uint64_t)1 << (b & 63); }

static void neg192(uint64_t m[3])
{
    uint64_t c = 1;
    for (int i = 0; i < 3; i++) { uint64_t t = ~m[i] + c; c = c && t == 0; m[i] = t; }
}

static void sub1_192(uint64_t m[3])
{
    for (int i = 0; i < 3; i++) { if (m[i]--) break; }
}

/* |W| of nb bits (1 <= nb <= 188) shaped as in shaped(): random, a tie
 * after 24 bits, the tie with a bit in the lowest word (below every
 * window), one less, a bit between 53 and 64 below the top, all ones. */
static void shaped192(trng *r, int nb, int kind, uint64_t m[3])
{
    uint32_t M = (uint32_t)((next_u64(r) >> 40) | 0x800000u);
    m[0] = m[1] = m[2] = 0;
    if (nb < 26 || kind == 0) {
        for (int i = 0; i < 3; i++) m[i] = next_u64(r);
        for (int b = nb; b < 192; b++) m[b >> 6] &= ~((uint64_t)1 << (b & 63));
        set_bit192(m, nb - 1);
        return;
    }
    if (kind == 5) { for (int b = 0; b < nb; b++) set_bit192(m, b); return; }
    for (int t = 0; t < 24; t++) if (M >> t & 1u) set_bit192(m, nb - 24 + t);
    set_bit192(m, nb - 25);
    if (kind == 2) set_bit192(m, 0);
    if (kind == 3) sub1_192(m);
    if (kind == 4 && nb >= 61) set_bit192(m, nb - 60);
}

/* dr_cacc_round_div_n against dr_cacc_round_div (and, where the value
 * fits a dr_acc, dr_acc_round_div): widths up to 2^188, ties decided by
 * the lowest word, results normal, subnormal, zero and overflowing,
 * exponents far past the vector path's range, the overflow flag, inf/NaN,
 * exact zeros of both signs; power-of-two divisors (the vector path) and
 * others; every batch length from 1 to 41. */
static void cacc_rounding(void **state)
{
    static const uint32_t ds[] = { 1, 2, 64, 256, 0x80000000u, 3, 96 };
    trng r = { 991 };
    dr_cacc a[41];
    float got[41];
    (void)state;
    for (int pass = 0; pass < 4000; pass++) {
        size_t n = 1 + (size_t)(next_u64(&r) % 41);
        uint32_t d = ds[next_u64(&r) % 7];
        for (size_t i = 0; i < n; i++) {
            uint64_t m[3];
            int nb = 1 + (int)(next_u64(&r) % 188), cls = (int)(next_u64(&r) % 12);
            shaped192(&r, nb, (int)(next_u64(&r) % 6), m);
            if (next_u64(&r) & 1) neg192(m);
            memcpy(a[i].w, m, sizeof m);
            a[i].flags = DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
            switch (cls) {
            case 0: case 1: case 2: case 3: a[i].exp = -nb + (int)(next_u64(&r) % 161) - 80; break;
            case 4: a[i].exp = -nb - 126 - (int)(next_u64(&r) % 30) + 6; break;       /* subnormal, zero */
            case 5: a[i].exp = -nb + 126 + (int)(next_u64(&r) % 6); break;           /* FLT_MAX, inf */
            case 6: a[i].exp = (int32_t)(next_u64(&r) % 400) - 1200; break;           /* past the range */
            case 7: a[i].exp = (int32_t)(next_u64(&r) % 400) + 700; break;
            case 8: a[i].exp = (next_u64(&r) & 1) ? (1 << 20) : -(1 << 20); break;   /* far past it */
            case 9: a[i].flags |= (uint32_t[]){ DR_CACC_F_OVERFLOW, DR_ACC_F_POS_INF, DR_ACC_F_NEG_INF,
                                                DR_ACC_F_NAN }[next_u64(&r) % 4];
                    a[i].exp = -nb; break;
            case 10: memset(a[i].w, 0, sizeof a[i].w);                                  /* exact zeros */
                     a[i].flags = (uint32_t)(next_u64(&r) % 3) * DR_ACC_F_NONEMPTY;
                     if (a[i].flags > DR_ACC_F_NONEMPTY) a[i].flags = DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
                     a[i].exp = 0; break;
            default: a[i].exp = -nb + 1 + (int)(next_u64(&r) % 3); break;               /* near 1 */
            }
        }
        dr_cacc_round_div_n(a, n, d, got);
        for (size_t i = 0; i < n; i++) {
            float ref = dr_cacc_round_div(&a[i], d);
            dr_acc x;
            if (bits_of(got[i]) != bits_of(ref) && !(isnan(got[i]) && isnan(ref))) {
                print_error("batch %zu lane %zu d=%u: W = %016llx:%016llx:%016llx exp %d flags %#x: got %a, one by "
                            "one %a\n", n, i, d, (unsigned long long)a[i].w[2], (unsigned long long)a[i].w[1],
                            (unsigned long long)a[i].w[0], a[i].exp, a[i].flags, (double)got[i], (double)ref);
                fail();
            }
            if (a[i].exp >= -320 && a[i].exp <= 100 && !(a[i].flags & DR_CACC_F_OVERFLOW) &&
                dr_cacc_to_acc(&x, &a[i])) {
                float viaacc = dr_acc_round_div(&x, d);
                assert_true(bits_of(viaacc) == bits_of(ref) || (isnan(viaacc) && isnan(ref)));
            }
        }
    }
}


/* The VNNI path's compact accumulators (eight at a time where they are
 * empty, cpu_gemm_round.c) must be the plain C path's byte for byte (its
 * elements go one by one through dr_cacc_add_scaled): the same value in
 * the same form (trailing zeros in the exponent), whatever they held
 * before: empty, a term, an exact -0 sum, the overflow flag. Rows and
 * columns with zeros, remainders and inf, every tail of eight. */
static void cacc_rows_match_scalar(void **state)
{
    enum { M = 13, K = 37, N = 43 };
    trng r = { 4242 };
    float A[M * K], B[K * N];
    dr_cacc Y1[M * N], Y2[M * N];
    dr_acc X[M * N];
    unsigned char fresh[M * N];
    (void)state;
    if (!dr_crt_have_vnni()) { skip(); return; }
    for (int rep = 0; rep < 40; rep++) {
        int e0 = (int)(next_u64(&r) % 200) - 100;
        for (int i = 0; i < M * K; i++) A[i] = ldexpf((float)(int64_t)(next_u64(&r) >> 40) - 0x800000, e0 - 23);
        for (int i = 0; i < K * N; i++) B[i] = ldexpf((float)(int64_t)(next_u64(&r) >> 40) - 0x800000, -30);
        for (int k = 0; k < K; k++) A[3 * K + k] = (k & 1) ? -0.0f : 0.0f;        /* a zero row */
        A[5 * K + 7] = ldexpf(1.0f, e0 - 60);                                     /* a remainder */
        for (int k = 0; k < K; k++) B[k * N + 9] = 0.0f;                          /* a zero column */
        B[4 * N + 17] = INFINITY;
        for (int k = 0; k < K; k++) B[k * N + 30] = ldexpf(1.0f, -40 * (k & 1) - (int)(k % 7));  /* trailing zeros */
        for (int e = 0; e < M * N; e++) {
            dr_cacc_init(&Y1[e]);
            fresh[e] = 0;
            switch (next_u64(&r) % 8) {
            case 0: dr_cacc_add(&Y1[e], ldexpf(3.0f, e0 - 40)); break;
            case 1: dr_cacc_add(&Y1[e], -0.0f); break;
            case 2: Y1[e].flags |= DR_CACC_F_OVERFLOW; break;
            case 3: Y1[e].exp = 77; fresh[e] = 1; break;                        /* empty, any exp */
            default: fresh[e] = 1; break;
            }
            Y2[e] = Y1[e];
        }
        assert_int_equal(dr_gemm_fast_path(DR_GEMM_PATH_CRT_VNNI, DR_NO_TRANS, DR_NO_TRANS, M, N, K, A, K, B, N,
                                           NULL, NULL, 0, NULL, Y1), DR_OK);
        assert_int_equal(dr_gemm_fast_path(DR_GEMM_PATH_CRT_PORTABLE, DR_NO_TRANS, DR_NO_TRANS, M, N, K, A, K, B, N,
                                           NULL, NULL, 0, NULL, Y2), DR_OK);
        memset(X, 0, sizeof X);
        dr_gemm_acc(DR_NO_TRANS, DR_NO_TRANS, M, N, K, A, K, B, N, X);
        for (int e = 0; e < M * N; e++) {
            dr_acc back;
            if (memcmp(&Y1[e], &Y2[e], sizeof Y1[e]) != 0) {
                print_error("rep %d element %d: VNNI %016llx:%016llx:%016llx exp %d flags %#x, plain C "
                            "%016llx:%016llx:%016llx exp %d flags %#x\n", rep, e, (unsigned long long)Y1[e].w[2],
                            (unsigned long long)Y1[e].w[1], (unsigned long long)Y1[e].w[0], Y1[e].exp, Y1[e].flags,
                            (unsigned long long)Y2[e].w[2], (unsigned long long)Y2[e].w[1],
                            (unsigned long long)Y2[e].w[0], Y2[e].exp, Y2[e].flags);
                fail();
            }
            if (fresh[e]) {   /* it held nothing before: now exactly the product */
                assert_true(dr_cacc_to_acc(&back, &Y1[e]));
                assert_true(dr_acc_equal(&back, &X[e]));
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(direct_rounding),
        cmocka_unit_test(ties_through_products),
        cmocka_unit_test(cacc_rounding),
        cmocka_unit_test(cacc_rows_match_scalar),
    };
    return cmocka_run_group_tests_name("fastgemm_round", tests, NULL, NULL);
}
#else
int main(void)
{
    puts("fastgemm_round: no __int128 here, the rounding path is not built");
    return 0;
}
#endif
