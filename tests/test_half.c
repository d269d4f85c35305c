/* distref tests — float16 / bfloat16 rounding (distref/half.h).
 *
 * The conversions against an oracle that knows nothing of bit tricks:
 * MPFR rounding the float (exact in MPFR) to 11 / 8 significant bits with
 * the dtype's exponent range and subnormals (mpfr_subnormalize), at the
 * boundaries (subnormals, the smallest normal, overflow to inf at the
 * midpoint above the largest finite value, ties to even) and on random
 * floats; round-trips of every float16 and bfloat16. The exact
 * accumulator rounded once to each dtype (dr_acc_round_div_dtype) against
 * MPFR's rounding of the same exact sum and quotient, including sums that a
 * rounding through float32 would double-round.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>
#include <mpfr.h>

#include "distref/half.h"

/* MPFR's correctly rounded value of (sum of terms) / d in the dtype. */
static float oracle(const float *x, int n, uint32_t d, dr_dtype t)
{
    int prec = t == DR_DTYPE_F16 ? 11 : 8;
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_t s, v;
    float out;
    mpfr_init2(s, 4000);
    mpfr_set_d(s, x[0], MPFR_RNDN);                                   /* keeps -0 */
    for (int i = 1; i < n; i++) mpfr_add_d(s, s, x[i], MPFR_RNDN);   /* exact at 4000 bits */
    mpfr_div_ui(s, s, d, MPFR_RNDN);   /* not exact for odd d: rounding at 4000 bits keeps the sign of the tie test */
    mpfr_init2(v, prec);
    if (t == DR_DTYPE_F16) { mpfr_set_emin(-23); mpfr_set_emax(16); }
    else                   { mpfr_set_emin(-132); mpfr_set_emax(128); }
    {
        int inex = mpfr_set(v, s, MPFR_RNDN);
        inex = mpfr_check_range(v, inex, MPFR_RNDN);
        mpfr_subnormalize(v, inex, MPFR_RNDN);
    }
    out = mpfr_get_flt(v, MPFR_RNDN);
    mpfr_set_emin(emin); mpfr_set_emax(emax);
    mpfr_clear(s); mpfr_clear(v);
    return out;
}

static uint32_t bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float flt(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

static void check_one(float x)
{
    float w16 = oracle(&x, 1, 1, DR_DTYPE_F16), wb = oracle(&x, 1, 1, DR_DTYPE_BF16);
    float g16 = dr_round_to_dtype(x, DR_DTYPE_F16), gb = dr_round_to_dtype(x, DR_DTYPE_BF16);
    if (bits(w16) != bits(g16) && !(x != x))
        fail_msg("f16 of %a (0x%08x): got %a want %a", (double)x, bits(x), (double)g16, (double)w16);
    if (bits(wb) != bits(gb) && !(x != x))
        fail_msg("bf16 of %a (0x%08x): got %a want %a", (double)x, bits(x), (double)gb, (double)wb);
}

static void test_boundaries(void **state)
{
    static const float xs[] = {
        0.0f, 1.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, 0x1p-14f, 0x1p-24f,
        0x1p-25f, 0x1.000002p-25f, 0x1.8p-24f, 0x1.4p-24f, 0x1.cp-24f, 0x1.ffcp-15f, 0x1.ffep-15f,
        0x1.002p0f, 0x1.006p0f, 0x1.001p0f, 0x1.003p0f, 0x1.0030p-14f, 0x1.0010p-14f,
        0x1.01p0f, 0x1.03p0f, 0x1.018p0f, 0x1.008p0f, 0x1.fep127f, 0x1.ffp127f, 0x1.fefffep127f,
        0x1p-133f, 0x1p-134f, 0x1.8p-133f, 0x1.8p-134f, 0x1p-126f, 0x1.fep-127f, 0x1.ffp-127f,
        0x1p-149f, 3.14159265f, 0.1f, 1e-8f, 6e-8f, 5.96e-8f, 2.98e-8f,
    };
    (void)state;
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) { check_one(xs[i]); check_one(-xs[i]); }
    assert_int_equal(dr_f32_to_f16(65504.0f), 0x7bffu);
    assert_int_equal(dr_f32_to_f16(65520.0f), 0x7c00u);                 /* tie to even: up to inf */
    assert_int_equal(dr_f32_to_f16(0x1.ffdffep15f), 0x7bffu);
    assert_int_equal(dr_f32_to_f16(0x1p-24f), 0x0001u);                 /* smallest subnormal */
    assert_int_equal(dr_f32_to_f16(0x1p-25f), 0x0000u);                 /* tie: to even, zero */
    assert_int_equal(dr_f32_to_f16(0x1.8p-24f), 0x0002u);               /* tie 1.5: to even 2 */
    assert_int_equal(dr_f32_to_f16(0x1.ff8p-15f), 0x03ffu);             /* largest subnormal */
    assert_int_equal(dr_f32_to_f16(0x1.ffcp-15f), 0x0400u);             /* tie: up (even) to the smallest normal */
    assert_int_equal(dr_f32_to_f16(0x1.ffbfep-15f), 0x03ffu);
    assert_int_equal(dr_f32_to_f16(0x1.002p0f), 0x3c00u);               /* tie down to even */
    assert_int_equal(dr_f32_to_f16(0x1.006p0f), 0x3c02u);               /* tie up to even */
    assert_int_equal(dr_f32_to_f16(-INFINITY), 0xfc00u);
    assert_true((dr_f32_to_f16(NAN) & 0x7fffu) > 0x7c00u);
    assert_int_equal(dr_f32_to_bf16(0x1.ffp127f), 0x7f80u);             /* tie: up to inf */
    assert_int_equal(dr_f32_to_bf16(0x1.fefffep127f), 0x7f7fu);
    assert_int_equal(dr_f32_to_bf16(0x1.01p0f), 0x3f80u);               /* tie down */
    assert_int_equal(dr_f32_to_bf16(0x1.03p0f), 0x3f82u);               /* tie up */
    assert_int_equal(dr_f32_to_bf16(0x1.8p-134f), 0x0000u + 1u);        /* 1.5 * 2^-134 = .75 ulp: up */
    assert_true((dr_f32_to_bf16(flt(0x7f800001u)) & 0x7fffu) > 0x7f80u);  /* a NaN stays NaN */
    assert_int_equal(dr_f32_to_bf16(flt(0x80000000u)), 0x8000u);
}

static void test_round_trips(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float a = dr_f16_to_f32((uint16_t)h), b = dr_bf16_to_f32((uint16_t)h);
        if (a == a) assert_int_equal(dr_f32_to_f16(a), h);
        if (b == b) assert_int_equal(dr_f32_to_bf16(b), h);
    }
    assert_true(dr_f16_to_f32(0x0001u) == 0x1p-24f);
    assert_true(dr_f16_to_f32(0x03ffu) == 0x1.ff8p-15f);
    assert_true(dr_f16_to_f32(0x7bffu) == 65504.0f);
}

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void test_random_floats(void **state)
{
    uint64_t s = 30;
    (void)state;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)next(&s);
        if (i & 1) u = (u & 0x80ffffffu) | (uint32_t)(100 + (int)(next(&s) % 50)) << 23;  /* near f16's range */
        check_one(flt(u));
    }
}

/* Sums a float32 rounding would double-round: x + tiny, where RN32(x+tiny)
 * lands on a dtype tie; and random sums and quotients. */
static void test_acc_round_once(void **state)
{
    uint64_t s = 7;
    (void)state;
    for (int i = 0; i < 40000; i++) {
        float x[4];
        int n = 1 + (int)(next(&s) % 4);
        uint32_t d = (i % 3 == 0) ? 1u : (uint32_t)(1 + next(&s) % 100000u);
        dr_acc a;
        dr_acc_init(&a);
        x[0] = flt(((uint32_t)next(&s) & 0x807fe000u) | (uint32_t)(110 + next(&s) % 30) << 23 | 0x1000u);
        for (int k = 1; k < n; k++)     /* below float32's ulp of x[0]: only a sticky bit */
            x[k] = flt(((uint32_t)next(&s) & 0x807fffffu) | (uint32_t)(60 + next(&s) % 40) << 23);
        for (int k = 0; k < n; k++) dr_acc_add(&a, x[k]);
        for (int t = 1; t <= 2; t++) {
            float want = oracle(x, n, d, (dr_dtype)t), got = dr_acc_round_div_dtype(&a, d, (dr_dtype)t);
            if (bits(want) != bits(got))
                fail_msg("%s of sum(%d terms, first %a)/%u: got %a want %a", dr_dtype_name((dr_dtype)t), n,
                         (double)x[0], d, (double)got, (double)want);
        }
    }
}

static void test_acc_edges(void **state)
{
    dr_acc a;
    float x[2] = { 0x1.002p0f, 0x1p-60f };   /* just above a float16 tie: up */
    (void)state;
    dr_acc_init(&a); dr_acc_add(&a, x[0]); dr_acc_add(&a, x[1]);
    assert_true(dr_acc_round_div_dtype(&a, 1, DR_DTYPE_F16) == 0x1.004p0f);
    assert_true(dr_acc_round_div(&a, 1) == 0x1.002p0f);   /* float32 alone loses it */
    x[1] = -0x1p-60f;                        /* just below: down */
    dr_acc_init(&a); dr_acc_add(&a, x[0]); dr_acc_add(&a, x[1]);
    assert_true(dr_acc_round_div_dtype(&a, 1, DR_DTYPE_F16) == 1.0f);
    dr_acc_init(&a); dr_acc_add_prod(&a, 0x1p-100f, 0x1p-100f);     /* 2^-200: a positive zero */
    assert_int_equal(bits(dr_acc_round_div_dtype(&a, 1, DR_DTYPE_BF16)), 0u);
    dr_acc_init(&a); dr_acc_add_prod(&a, -0x1p-100f, 0x1p-100f);
    assert_int_equal(bits(dr_acc_round_div_dtype(&a, 1, DR_DTYPE_F16)), 0x80000000u);
    dr_acc_init(&a); dr_acc_add_prod(&a, 0x1p-100f, 0x1p-100f); dr_acc_add(&a, 0x1p-140f);
    dr_acc_add(&a, -0x1p-140f);              /* a tiny value beside a cancelled pair: still positive */
    assert_int_equal(bits(dr_acc_round_div_odd(&a, 1)), 1u);
    dr_acc_init(&a); dr_acc_add(&a, 0x1p100f); dr_acc_add(&a, 1.5f); dr_acc_add(&a, -0x1p100f);
    dr_acc_add(&a, -1.5f);                   /* an exact zero from limbs far apart: +0, the odd rounding too */
    assert_int_equal(bits(dr_acc_round_div_odd(&a, 3)), 0u);
    assert_int_equal(bits(dr_acc_round_div_dtype(&a, 1, DR_DTYPE_F16)), 0u);
    dr_acc_init(&a); dr_acc_add(&a, 0x1p127f); dr_acc_add(&a, 0x1p127f);  /* 2^128: inf in bf16 */
    assert_true(isinf(dr_acc_round_div_dtype(&a, 1, DR_DTYPE_BF16)));
    assert_true(dr_acc_round_div_dtype(&a, 4, DR_DTYPE_BF16) == 0x1p126f);
    dr_acc_init(&a); dr_acc_add(&a, 60000.0f); dr_acc_add(&a, 6000.0f);   /* 66000: inf in f16 */
    assert_true(isinf(dr_acc_round_div_dtype(&a, 1, DR_DTYPE_F16)));
    assert_true(dr_acc_round_div_dtype(&a, 2, DR_DTYPE_F16) == 32992.0f);
    dr_acc_init(&a); dr_acc_add(&a, INFINITY); dr_acc_add(&a, -INFINITY);
    assert_true(isnan(dr_acc_round_div_dtype(&a, 1, DR_DTYPE_F16)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundaries),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_random_floats),
        cmocka_unit_test(test_acc_round_once),
        cmocka_unit_test(test_acc_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
