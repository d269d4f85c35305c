/* distref tests — exact sums, dot products, accumulators and GEMM.
 *
 * The oracle is MPFR: terms are added at a precision wide enough to hold the
 * exact result, then rounded once to float (mpfr_get_flt, round to nearest).
 * Inputs are random and adversarial: massive cancellation, the full exponent
 * range, subnormals, exact ties in both directions, overflow and back,
 * inf/NaN, n = 0, 1, 2 and n >= 10^7. Invariance tests split, serialize and
 * merge in random trees. Built with -DDR_MUTANT=..., SUM/DOT become wrong
 * implementations and this program must fail (tests/mutants.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpfr.h>

#include "distref/exact.h"
#include "tests/mutants.h"

#define ORACLE_PREC 1400   /* > 2^256 .. 2^-298 span plus 2^40 terms of headroom */

/* ---- helpers ------------------------------------------------------------ */

typedef struct { uint64_t s; } trng;   /* test-local xorshift64* */

static uint64_t next_u64(trng *r)
{
    r->s ^= r->s >> 12; r->s ^= r->s << 25; r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}

static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* Uniform in [-1, 1) scaled by 2^e. */
static float rand_scaled(trng *r, int e)
{
    double u = (double)(next_u64(r) >> 11) * 0x1p-53 * 2.0 - 1.0;
    return (float)ldexp(u, e);
}

/* Any finite float, every exponent equally likely (subnormals included). */
static float rand_any_finite(trng *r)
{
    for (;;) {
        uint32_t u = (uint32_t)next_u64(r);
        if ((u & 0x7f800000u) != 0x7f800000u) return bits_f(u);
    }
}

static float oracle_sum(const float *x, size_t n)
{
    mpfr_t s;
    float out;
    mpfr_init2(s, ORACLE_PREC);
    mpfr_set_zero(s, 1);
    for (size_t i = 0; i < n; i++) mpfr_add_d(s, s, x[i], MPFR_RNDN);
    out = mpfr_get_flt(s, MPFR_RNDN);
    mpfr_clear(s);
    return out;
}

static float oracle_dot(const float *x, const float *y, size_t n)
{
    mpfr_t s, p;
    float out;
    mpfr_inits2(ORACLE_PREC, s, p, (mpfr_ptr)0);
    mpfr_set_zero(s, 1);
    for (size_t i = 0; i < n; i++) {
        mpfr_set_d(p, x[i], MPFR_RNDN);
        mpfr_mul_d(p, p, y[i], MPFR_RNDN);
        mpfr_add(s, s, p, MPFR_RNDN);
    }
    out = mpfr_get_flt(s, MPFR_RNDN);
    mpfr_clears(s, p, (mpfr_ptr)0);
    return out;
}

/* Bit equality, with every NaN equal to every NaN. */
static void assert_same_float(float got, float want, const char *what, size_t n)
{
    if (isnan(got) && isnan(want)) return;
    if (f_bits(got) != f_bits(want)) {
        print_error("%s (n=%zu): got %a (0x%08x), want %a (0x%08x)\n", what, n,
                    (double)got, f_bits(got), (double)want, f_bits(want));
        fail();
    }
}

static void check_sum(const float *x, size_t n, const char *what)
{
    assert_same_float(SUM(x, n), oracle_sum(x, n), what, n);
}

static void check_dot(const float *x, const float *y, size_t n, const char *what)
{
    assert_same_float(DOT(x, y, n), oracle_dot(x, y, n), what, n);
}

static void shuffle(float *x, size_t n, trng *r)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = next_u64(r) % i;
        float t = x[i - 1]; x[i - 1] = x[j]; x[j] = t;
    }
}

/* ---- sums --------------------------------------------------------------- */

static void sum_small_n(void **state)
{
    float x[2] = { 1.5f, -0x1p-30f };
    (void)state;
    assert_same_float(SUM(x, 0), 0.0f, "n=0 is +0", 0);
    assert_int_equal(f_bits(SUM(x, 0)), 0u);
    check_sum(x, 1, "n=1");
    check_sum(x, 2, "n=2");
}

static void sum_random_vs_oracle(void **state)
{
    trng r = { 0x9e3779b97f4a7c15ull };
    float x[1000];
    (void)state;
    for (int trial = 0; trial < 300; trial++) {
        size_t n = 1 + next_u64(&r) % 1000;
        int spread = (int)(next_u64(&r) % 60);
        for (size_t i = 0; i < n; i++) x[i] = rand_scaled(&r, (int)(next_u64(&r) % (spread + 1)) - spread / 2);
        check_sum(x, n, "random");
    }
}

static void sum_full_exponent_range(void **state)
{
    trng r = { 12345 };
    float x[257];
    (void)state;
    for (int trial = 0; trial < 300; trial++) {
        size_t n = 1 + next_u64(&r) % 257;
        for (size_t i = 0; i < n; i++) x[i] = rand_any_finite(&r);
        check_sum(x, n, "full range");
    }
}

/* x, -x pairs in random order leave only a small residue: catastrophic for
 * any rounding accumulator, trivial for an exact one. */
static void sum_massive_cancellation(void **state)
{
    trng r = { 777 };
    float x[2001];
    (void)state;
    for (int trial = 0; trial < 50; trial++) {
        for (int i = 0; i < 1000; i++) {
            x[2 * i] = rand_scaled(&r, (int)(next_u64(&r) % 200) - 60);
            x[2 * i + 1] = -x[2 * i];
        }
        x[2000] = rand_scaled(&r, -(int)(next_u64(&r) % 100));
        shuffle(x, 2001, &r);
        assert_same_float(SUM(x, 2001), oracle_sum(x, 2001), "cancellation", 2001);
    }
    {
        float y[4] = { 0x1p100f, 1.0f, -0x1p100f, 0x1p-100f };
        check_sum(y, 4, "1e30 + 1 - 1e30");
        assert_same_float(SUM(y, 4), 1.0f + 0x1p-100f, "residue", 4);
    }
}

static void sum_subnormals(void **state)
{
    trng r = { 4242 };
    float x[300];
    (void)state;
    for (int trial = 0; trial < 200; trial++) {
        size_t n = 1 + next_u64(&r) % 300;
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)(next_u64(&r) % 0x01000000u);  /* subnormal or smallest normals */
            x[i] = bits_f(u | (uint32_t)(next_u64(&r) & 1) << 31);
        }
        check_sum(x, n, "subnormals");
    }
}

/* Results exactly halfway between two floats, both tie directions, and the
 * smallest nudge either way. */
static void sum_exact_ties(void **state)
{
    (void)state;
    struct { float a, b, c; float want; const char *what; } cases[] = {
        { 1.0f, 0x1p-24f, 0.0f, 1.0f, "1 + half ulp: tie to even (down)" },
        { 1.0f + 0x1p-23f, 0x1p-24f, 0.0f, 1.0f + 0x1p-22f, "odd + half ulp: tie to even (up)" },
        { 1.0f, 0x1p-24f, 0x1p-120f, 1.0f + 0x1p-23f, "just above the tie rounds up" },
        { 1.0f, 0x1p-24f, -0x1p-120f, 1.0f, "just below the tie rounds down" },
        { -1.0f, -0x1p-24f, 0.0f, -1.0f, "negative tie to even" },
        { -1.0f - 0x1p-23f, -0x1p-24f, 0.0f, -1.0f - 0x1p-22f, "negative odd tie" },
        { 0x1p-149f, 0x1p-149f, 0x1p-149f, 0x1.8p-148f, "subnormal exact" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float x[3] = { cases[i].a, cases[i].b, cases[i].c };
        assert_same_float(SUM(x, 3), cases[i].want, cases[i].what, 3);
        check_sum(x, 3, cases[i].what);
    }
}

static void sum_overflow_and_back(void **state)
{
    float up[2] = { FLT_MAX, FLT_MAX };
    float back[3] = { FLT_MAX, FLT_MAX, -FLT_MAX };
    float down[2] = { -FLT_MAX, -FLT_MAX };
    float tie[2] = { FLT_MAX, 0x1p103f };       /* FLT_MAX + half ulp: to even = 2^128 = inf */
    float below[2] = { FLT_MAX, 0x1p102f };     /* less than half an ulp: stays FLT_MAX */
    (void)state;
    assert_same_float(SUM(up, 2), INFINITY, "overflow", 2);
    assert_same_float(SUM(down, 2), -INFINITY, "negative overflow", 2);
    assert_same_float(SUM(back, 3), FLT_MAX, "overflow and back", 3);
    assert_same_float(SUM(tie, 2), INFINITY, "tie at FLT_MAX rounds to inf", 2);
    assert_same_float(SUM(below, 2), FLT_MAX, "below the tie stays finite", 2);
}

static void sum_inf_nan(void **state)
{
    float a[3] = { INFINITY, 1.0f, -5.0f };
    float b[2] = { INFINITY, -INFINITY };
    float c[3] = { 1.0f, NAN, 2.0f };
    float d[2] = { -INFINITY, -1.0f };
    float z[3] = { -0.0f, -0.0f, -0.0f };
    float zz[2] = { -0.0f, 0.0f };
    float cancel[2] = { -1.0f, 1.0f };
    (void)state;
    assert_same_float(SUM(a, 3), INFINITY, "inf + finite", 3);
    assert_true(isnan(SUM(b, 2)));
    assert_true(isnan(SUM(c, 3)));
    assert_same_float(SUM(d, 2), -INFINITY, "-inf", 2);
    assert_int_equal(f_bits(SUM(z, 3)), 0x80000000u);   /* -0 + -0 + -0 = -0 */
    assert_int_equal(f_bits(SUM(zz, 2)), 0u);           /* -0 + +0 = +0 */
    assert_int_equal(f_bits(SUM(cancel, 2)), 0u);       /* x - x = +0 */
}

/* n >= 10^7 against the oracle, and a long cancelling stream whose exact
 * sum is known by construction. */
/* The window kernel's edges (core/reduce.c, chunks of 4096 terms summed as
 * integers below the chunk's largest exponent): terms exactly 26..29 binades
 * below the largest (the window's last bit and the first one outside it),
 * subnormals under a normal maximum and on their own, the largest finite
 * exponents (overflow to inf), chunk boundaries, inf/NaN in a later chunk,
 * all -0 and mixed zeros, and cancellation across chunks. The oracle rounds;
 * dr_acc_equal also checks the accumulator itself (value and flags) against
 * one dr_acc_add per term. */
static void check_sum_acc(const float *x, size_t n, const char *what, int all_neg0)
{
    dr_acc a, b;
    if (all_neg0) assert_same_float(SUM(x, n), -0.0f, what, n);   /* IEEE: -0 + -0 = -0 (MPFR starts at +0) */
    else check_sum(x, n, what);
    dr_acc_init(&a); dr_acc_init(&b);
    dr_acc_add_sum(&a, x, n);
    for (size_t i = 0; i < n; i++) dr_acc_add(&b, x[i]);
    if (!dr_acc_equal(&a, &b)) { print_error("%s (n=%zu): accumulators differ\n", what, n); fail(); }
}

static void sum_window_edges(void **state)
{
    static const size_t sizes[] = { 64, 100, 4095, 4096, 4097, 8192 + 17, 3 * 4096 + 5 };
    trng r = { 31337 };
    (void)state;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        float *x = malloc(n * sizeof *x);
        assert_non_null(x);
        for (int kind = 0; kind < 11; kind++) {
            for (size_t i = 0; i < n; i++) {
                uint64_t u = next_u64(&r);
                float sign = (u & 1) ? -1.0f : 1.0f;
                switch (kind) {
                case 0:   /* one term at 2^0, the rest 26..29 binades below, odd mantissas */
                    x[i] = i % 997 == 0 ? 1.0f : sign * ldexpf(1.0f + (float)(u >> 41) * 0x1p-23f, -26 - (int)(u >> 62));
                    break;
                case 1: x[i] = i == n / 2 ? 0x1p-10f : sign * bits_f((uint32_t)(u >> 8) & 0x7fffffu); break;  /* subnormals under a normal */
                case 2: x[i] = sign * bits_f((uint32_t)(u >> 8) & 0x7fffffu); break;                          /* subnormals only */
                case 3: x[i] = sign * ldexpf(1.0f + (float)(u >> 41) * 0x1p-23f, 127 - (int)(u >> 61)); break; /* near FLT_MAX */
                case 4: x[i] = (i & 1) ? 0x1.fffffep127f : 0x1.fffffep126f; break;                           /* overflows to inf */
                case 5: x[i] = -0.0f; break;
                case 6: x[i] = (u & 2) ? -0.0f : 0.0f; break;
                case 7: x[i] = i == n - 1 ? (u & 2 ? INFINITY : NAN) : rand_scaled(&r, 0); break;          /* special in the last chunk */
                case 8:   /* cancellation across chunks: x, later -x, plus one tiny survivor */
                    x[i] = i < n / 2 ? rand_scaled(&r, (int)(u >> 59) - 8) : -x[i - n / 2];
                    break;
                case 9: x[i] = rand_scaled(&r, (int)(u % 254) - 126); break;                                   /* anything, wide */
                default: x[i] = i % 2 ? 0x1p-149f : ldexpf(sign, (int)(u % 60) - 30); break;                  /* 2^-149 under a wide max */
                }
            }
            if (kind == 8) x[n - 1] = 0x1.000002p-100f;
            check_sum_acc(x, n, "window edges", kind == 5);
            shuffle(x, n, &r);
            check_sum_acc(x, n, "window edges, shuffled", kind == 5);
        }
        free(x);
    }
}

static void sum_large_n(void **state)
{
    size_t n = 10000019;
    float *x = malloc(n * sizeof *x);
    trng r = { 99 };
    (void)state;
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = rand_scaled(&r, (int)(next_u64(&r) % 40) - 20);
    check_sum(x, n, "n = 10^7 + 19");
    for (size_t i = 0; i + 1 < n; i += 2) { x[i] = rand_scaled(&r, 30); x[i + 1] = -x[i]; }
    x[n - 1] = 0x1.000002p-40f;
    shuffle(x, n, &r);
    assert_same_float(SUM(x, n), 0x1.000002p-40f, "10^7 cancelling terms", n);
    free(x);
}

/* ---- dot products ------------------------------------------------------- */

static void dot_random_and_adversarial(void **state)
{
    trng r = { 31337 };
    float x[600] = { 0 }, y[600] = { 0 };
    (void)state;
    assert_int_equal(f_bits(DOT(x, y, 0)), 0u);
    for (int trial = 0; trial < 300; trial++) {
        size_t n = 1 + next_u64(&r) % 600;
        int mode = trial % 3;
        for (size_t i = 0; i < n; i++) {
            x[i] = mode == 2 ? rand_any_finite(&r) : rand_scaled(&r, (int)(next_u64(&r) % 40) - 20);
            y[i] = mode == 2 ? rand_any_finite(&r) : rand_scaled(&r, (int)(next_u64(&r) % 40) - 20);
        }
        if (mode == 1 && n > 2) {     /* products cancel pairwise */
            for (size_t i = 0; i + 1 < n; i += 2) { x[i + 1] = x[i]; y[i + 1] = -y[i]; }
        }
        check_dot(x, y, n, mode == 2 ? "dot full range" : mode ? "dot cancelling" : "dot random");
    }
    {
        float a[2] = { 0x1p-75f, 0x1p-75f }, b[2] = { 0x1p-75f, 0x1p-75f };
        float c[1] = { 0x1p-75f }, d[1] = { 0x1.8p-74f };   /* 3 * 2^-150: tie up to 2^-148 */
        assert_same_float(DOT(a, b, 1), 0.0f, "2^-150 ties to even zero", 1);
        assert_same_float(DOT(a, b, 2), 0x1p-149f, "2 * 2^-150", 2);
        assert_same_float(DOT(c, d, 1), 0x1p-148f, "3 * 2^-150 ties to even", 1);
    }
    {
        float a[2] = { INFINITY, 1.0f }, b[2] = { 0.0f, 1.0f };
        float c[2] = { -0.0f, 0.0f }, d[2] = { 1.0f, -1.0f };
        assert_true(isnan(DOT(a, b, 2)));                    /* inf * 0 */
        assert_int_equal(f_bits(DOT(c, d, 2)), 0x80000000u); /* -0 + -0 */
        assert_same_float(DOT(a, d, 2), INFINITY, "inf * 1 - 1", 2);
    }
}

/* ---- the accumulator ---------------------------------------------------- */

static void acc_round_div_vs_oracle(void **state)
{
    trng r = { 2024 };
    (void)state;
    for (int trial = 0; trial < 2000; trial++) {
        dr_acc a;
        mpfr_t s;
        float x[8];
        uint32_t d = trial < 1000 ? 1 + (uint32_t)(next_u64(&r) % 16) : (uint32_t)next_u64(&r) | 1u;
        size_t n = 1 + next_u64(&r) % 8;
        dr_acc_init(&a);
        mpfr_init2(s, ORACLE_PREC + 64);
        mpfr_set_zero(s, 1);
        for (size_t i = 0; i < n; i++) {
            x[i] = trial % 2 ? rand_any_finite(&r) : rand_scaled(&r, 0);
            dr_acc_add(&a, x[i]);
            mpfr_add_d(s, s, x[i], MPFR_RNDN);
        }
        mpfr_div_ui(s, s, d, MPFR_RNDN);
        assert_same_float(dr_acc_round_div(&a, d), mpfr_get_flt(s, MPFR_RNDN), "round_div", n);
        mpfr_clear(s);
    }
}

/* dr_acc_round_div's fast path (digits from the lowest nonzero limb up,
 * complemented in place, power-of-two divisors as an exponent shift):
 * carry-save limbs from many unnormalized adds, negative values whose
 * complement runs through every digit, products near 2^254 (the top limb)
 * and down to 2^-298, quotients that underflow to subnormals or zero and
 * that overflow, exact cancellation to zero, ties, and divisors from 1 to
 * 2^32 - 1 (G*R as the engine passes it: 64, 192, 2^30). */
static void acc_round_div_adversarial(void **state)
{
    static const uint32_t divs[] = { 1, 2, 3, 7, 64, 192, 256, 1u << 30, 1u << 31, 0xffffffffu, 640, 1000 };
    trng r = { 4242 };
    (void)state;
    for (int trial = 0; trial < 6000; trial++) {
        dr_acc a;
        mpfr_t s, p;
        uint32_t d = divs[trial % 12], k = 1;
        size_t n = 1 + next_u64(&r) % 10;
        int style = (int)((trial / 12) % 6);
        dr_acc_init(&a);
        mpfr_inits2(ORACLE_PREC + 64, s, p, (mpfr_ptr)0);
        mpfr_set_zero(s, 1);
        for (size_t i = 0; i < n; i++) {
            float x, y;
            switch (style) {
            case 0: x = rand_any_finite(&r); y = rand_any_finite(&r); break;
            case 1: x = rand_scaled(&r, 127); y = rand_scaled(&r, 127); break;            /* near 2^254 */
            case 2: x = rand_scaled(&r, -126); y = bits_f(1u + (uint32_t)(next_u64(&r) % 8)); break;  /* tiny */
            case 3: x = rand_scaled(&r, (int)(next_u64(&r) % 200) - 100); y = 1.0f; break;
            case 4: x = rand_any_finite(&r); y = (next_u64(&r) & 1) ? -1.0f : 1.0f; break;
            default: x = rand_scaled(&r, 0); y = rand_scaled(&r, -20); break;
            }
            dr_acc_add_prod(&a, x, y);
            mpfr_set_d(p, x, MPFR_RNDN);
            mpfr_mul_d(p, p, y, MPFR_RNDN);
            mpfr_add(s, s, p, MPFR_RNDN);
            if (next_u64(&r) % 4 == 0) {                   /* and take it back: cancellation */
                dr_acc_add_prod(&a, -x, y);
                mpfr_sub(s, s, p, MPFR_RNDN);
            }
        }
        if (trial % 5 == 1) {                              /* a negative value's complement */
            dr_acc_add(&a, -0x1p-149f);
            mpfr_sub_d(s, s, 0x1p-149, MPFR_RNDN);
        }
        if (trial % 7 == 3) k = 1u + (uint32_t)(next_u64(&r) % (1u << 20));   /* carry-save limbs */
        if (k > 1) { dr_acc_mul_u32(&a, k); mpfr_mul_ui(s, s, k, MPFR_RNDN); }
        mpfr_div_ui(s, s, d, MPFR_RNDN);
        assert_same_float(dr_acc_round_div(&a, d), mpfr_get_flt(s, MPFR_RNDN), "round_div adversarial", n);
        mpfr_clears(s, p, (mpfr_ptr)0);
    }
}

/* Ties after the division: (2m+1) * 2^e over a power of two lands exactly
 * between two floats, and the even one wins; one unit below 2^-298 more
 * breaks the tie. */
static void acc_round_div_ties(void **state)
{
    (void)state;
    for (int e = -149; e <= 100; e += 7) {
        for (uint32_t sh = 0; sh <= 30; sh += 6) {
            for (int sticky = 0; sticky < 2; sticky++) {
                dr_acc a;
                mpfr_t s;
                float m = (float)(2 * (int)(0x800000u + (uint32_t)e * 37u % 0x7fffffu) + 1);  /* 25 bits, odd */
                dr_acc_init(&a);
                mpfr_init2(s, ORACLE_PREC + 64);
                dr_acc_add_prod(&a, m, ldexpf(1.0f, e < -125 ? -125 : e));
                mpfr_set_d(s, m, MPFR_RNDN);
                mpfr_mul_2si(s, s, e < -125 ? -125 : e, MPFR_RNDN);
                if (e < -125) {                          /* scale down further with the divisor */
                    dr_acc_add_prod(&a, -0x1p-149f, 0x1p-149f);
                    dr_acc_add_prod(&a, 0x1p-149f, 0x1p-149f);
                }
                if (sticky) {
                    dr_acc_add_prod(&a, 0x1p-149f, 0x1p-149f);
                    mpfr_t t;
                    mpfr_init2(t, 64);
                    mpfr_set_d(t, 0x1p-149, MPFR_RNDN);
                    mpfr_mul_2si(t, t, -149, MPFR_RNDN);
                    mpfr_add(s, s, t, MPFR_RNDN);
                    mpfr_clear(t);
                }
                mpfr_div_2ui(s, s, sh, MPFR_RNDN);
                assert_same_float(dr_acc_round_div(&a, 1u << sh), mpfr_get_flt(s, MPFR_RNDN), "round_div tie", sh);
                dr_acc_mul_u32(&a, 3);
                mpfr_mul_2ui(s, s, sh, MPFR_RNDN);            /* back to the value, times 3 */
                mpfr_mul_ui(s, s, 3, MPFR_RNDN);
                mpfr_div_ui(s, s, 3u << sh, MPFR_RNDN);
                assert_same_float(dr_acc_round_div(&a, 3u << sh), mpfr_get_flt(s, MPFR_RNDN), "round_div tie /3", sh);
                mpfr_clear(s);
            }
        }
    }
}

/* Split n terms into k parts at random, accumulate each part, push every
 * part through the wire format, merge in a random tree: same bits. */
static void acc_split_serialize_merge_invariance(void **state)
{
    trng r = { 55 };
    enum { N = 4000 };
    static float x[N], y[N];
    (void)state;
    for (int trial = 0; trial < 60; trial++) {
        size_t k = 1 + next_u64(&r) % 64, cut[65];
        dr_acc parts[64], whole;
        float want;
        for (size_t i = 0; i < N; i++) {
            x[i] = trial % 3 ? rand_scaled(&r, (int)(next_u64(&r) % 80) - 40) : rand_any_finite(&r);
            y[i] = rand_scaled(&r, (int)(next_u64(&r) % 20) - 10);
        }
        dr_acc_init(&whole);
        dr_acc_add_sum(&whole, x, N);
        dr_acc_add_dot(&whole, x, y, N);
        want = dr_acc_round(&whole);
        cut[0] = 0; cut[k] = N;
        for (size_t p = 1; p < k; p++) cut[p] = next_u64(&r) % (N + 1);
        for (size_t p = 1; p < k; p++)           /* sort cut points; empty parts allowed */
            for (size_t q = p; q > 1 && cut[q - 1] > cut[q]; q--) { size_t t = cut[q]; cut[q] = cut[q - 1]; cut[q - 1] = t; }
        for (size_t p = 0; p < k; p++) {
            uint8_t wire[DR_ACC_BYTES];
            size_t len = cut[p + 1] - cut[p];
            dr_acc_init(&parts[p]);
            if (p % 2) {
                for (size_t i = cut[p]; i < cut[p + 1]; i++) { dr_acc_add(&parts[p], x[i]); dr_acc_add_prod(&parts[p], x[i], y[i]); }
            } else {
                dr_acc_add_sum(&parts[p], x + cut[p], len);
                dr_acc_add_dot(&parts[p], x + cut[p], y + cut[p], len);
            }
            dr_acc_serialize(&parts[p], wire);
            assert_true(dr_acc_deserialize(&parts[p], wire));
        }
        while (k > 1) {                           /* merge a random pair until one is left */
            size_t i = next_u64(&r) % k, j = next_u64(&r) % (k - 1);
            if (j >= i) j++;
            dr_acc_merge(&parts[i], &parts[j]);
            parts[j] = parts[--k];
        }
        assert_true(dr_acc_equal(&parts[0], &whole));
        assert_same_float(dr_acc_round(&parts[0]), want, "split/serialize/merge", N);
    }
}

static void acc_permutation_invariance(void **state)
{
    trng r = { 8 };
    enum { N = 3000 };
    static float x[N];
    (void)state;
    for (size_t i = 0; i < N; i++) x[i] = rand_any_finite(&r);
    {
        float want = SUM(x, N);
        for (int trial = 0; trial < 20; trial++) {
            shuffle(x, N, &r);
            assert_same_float(SUM(x, N), want, "permuted", N);
        }
    }
}

static void acc_wire_format(void **state)
{
    dr_acc a, b;
    uint8_t wire[DR_ACC_BYTES];
    (void)state;
    dr_acc_init(&a);
    dr_acc_add(&a, 1.0f);                    /* 2^0 = digit 1 of limb 10 */
    dr_acc_serialize(&a, wire);
    assert_int_equal(wire[0], DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0);
    for (int i = 1; i < DR_ACC_BYTES; i++) assert_int_equal(wire[i], i == 4 + 4 * 10 ? 1 : 0);
    dr_acc_add(&a, -2.0f);                   /* -1: all ones, two's complement */
    dr_acc_serialize(&a, wire);
    for (int i = 4; i < 4 + 4 * 10; i++) assert_int_equal(wire[i], 0);
    for (int i = 4 + 4 * 10; i < DR_ACC_BYTES; i++) assert_int_equal(wire[i], 0xff);
    assert_true(dr_acc_deserialize(&b, wire));
    assert_same_float(dr_acc_round(&b), -1.0f, "wire round trip", 1);
    wire[0] |= 0x80;                         /* unknown flag bit: corrupt */
    assert_false(dr_acc_deserialize(&b, wire));
}

static void acc_zero_fill_is_empty(void **state)
{
    dr_acc *a = calloc(4, sizeof *a);
    (void)state;
    assert_non_null(a);
    assert_int_equal(f_bits(dr_acc_round(&a[3])), 0u);
    dr_acc_add_prod(&a[3], 3.0f, -0.5f);
    assert_same_float(dr_acc_round(&a[3]), -1.5f, "calloc'd accumulator", 1);
    free(a);
}

/* ---- GEMM --------------------------------------------------------------- */

static float elem(const float *X, size_t ld, int t, size_t i, size_t k)
{
    return t ? X[k * ld + i] : X[i * ld + k];
}

static void gemm_vs_oracle(void **state)
{
    trng r = { 606 };
    (void)state;
    for (int trial = 0; trial < 24; trial++) {
        int ta = trial & 1, tb = (trial >> 1) & 1, with_bias = (trial >> 2) & 1;
        size_t M = 1 + next_u64(&r) % 9, N = 1 + next_u64(&r) % 9, K = next_u64(&r) % 70;
        size_t lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
        float *A = calloc((ta ? K : M) * lda + 1, 4), *B = calloc((tb ? N : K) * ldb + 1, 4);
        float *C = calloc(M * ldc, 4), bias[9], row[71], col[71];
        dr_acc *Cacc = calloc(M * N, sizeof *Cacc);
        for (size_t i = 0; i < (ta ? K : M) * lda; i++) A[i] = rand_scaled(&r, (int)(next_u64(&r) % 30) - 15);
        for (size_t i = 0; i < (tb ? N : K) * ldb; i++) B[i] = rand_scaled(&r, (int)(next_u64(&r) % 30) - 15);
        for (size_t j = 0; j < N; j++) bias[j] = rand_scaled(&r, 0);
        dr_gemm_f32((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, with_bias ? bias : NULL, C, ldc);
        dr_gemm_acc((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, Cacc);
        for (size_t i = 0; i < M; i++) {
            for (size_t j = 0; j < N; j++) {
                for (size_t k = 0; k < K; k++) { row[k] = elem(A, lda, ta, i, k); col[k] = elem(B, ldb, !tb, j, k); }
                row[K] = with_bias ? bias[j] : 0.0f; col[K] = 1.0f;
                assert_same_float(C[i * ldc + j], oracle_dot(row, col, K + (size_t)with_bias), "gemm", K);
                assert_same_float(dr_acc_round(&Cacc[i * N + j]), oracle_dot(row, col, K), "gemm_acc", K);
            }
        }
        free(A); free(B); free(C); free(Cacc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sum_small_n),
        cmocka_unit_test(sum_random_vs_oracle),
        cmocka_unit_test(sum_full_exponent_range),
        cmocka_unit_test(sum_massive_cancellation),
        cmocka_unit_test(sum_subnormals),
        cmocka_unit_test(sum_exact_ties),
        cmocka_unit_test(sum_overflow_and_back),
        cmocka_unit_test(sum_inf_nan),
        cmocka_unit_test(sum_window_edges),
        cmocka_unit_test(sum_large_n),
        cmocka_unit_test(dot_random_and_adversarial),
        cmocka_unit_test(acc_round_div_vs_oracle),
        cmocka_unit_test(acc_round_div_adversarial),
        cmocka_unit_test(acc_round_div_ties),
        cmocka_unit_test(acc_split_serialize_merge_invariance),
        cmocka_unit_test(acc_permutation_invariance),
        cmocka_unit_test(acc_wire_format),
        cmocka_unit_test(acc_zero_fill_is_empty),
        cmocka_unit_test(gemm_vs_oracle),
    };
    /* Built twice: with the library's exact sums (their AVX-512 kernels where
     * the CPU has them), and as test_exact_portable against core/reduce.c
     * compiled with -DDR_EXACT_NO_SIMD (the portable path): the same bits. */
#if defined(DR_EXACT_NO_SIMD)
    return cmocka_run_group_tests_name("exact, portable path", tests, NULL, NULL);
#else
    return cmocka_run_group_tests_name("exact", tests, NULL, NULL);
#endif
}
