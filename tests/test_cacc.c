/* distref tests — the compact accumulator against the full one.
 *
 * The oracle is dr_acc (checked against MPFR in test_exact.c): the same
 * terms go into a dr_cacc and a dr_acc, and wherever the compact one did not
 * overflow, both must hold the same exact value (dr_cacc_to_acc then
 * dr_acc_equal) and round to the same bits for many divisors. Terms far
 * apart must overflow, never round. Merges in random trees, multiplication,
 * signed zeros and specials, the wire format, conversions.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "distref/cacc.h"
#include "distref/exact.h"
#include "distref/exact_parts.h"   /* dr_acc_add_i64: the oracle's side of a 128-bit term */

typedef struct { uint64_t s; } trng;

static uint64_t next_u64(trng *r)
{
    r->s ^= r->s >> 12; r->s ^= r->s << 25; r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}

static uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* A float of magnitude about 2^e, random sign and mantissa (e in the normal range). */
static float rand_at(trng *r, int e)
{
    uint32_t u = (uint32_t)next_u64(r);
    uint32_t field = (uint32_t)(e + 127);
    return bits_f((u & 0x80000000u) | field << 23 | (u & 0x7fffffu));
}

static const uint32_t divisors[] = { 1, 2, 3, 7, 64, 100, 6144, 1000003, 1u << 30 };

/* Same exact value and same rounding as the full accumulator. */
static void assert_same(const dr_cacc *c, const dr_acc *a)
{
    dr_acc back;
    assert_false(dr_cacc_overflowed(c));
    assert_true(dr_cacc_to_acc(&back, c));
    assert_true(dr_acc_equal(&back, a));
    for (size_t k = 0; k < sizeof divisors / sizeof *divisors; k++) {
        float x = dr_cacc_round_div(c, divisors[k]), y = dr_acc_round_div(a, divisors[k]);
        if (f_bits(x) != f_bits(y))
            fail_msg("divisor %u: compact %a (0x%08x), full %a (0x%08x)", divisors[k], (double)x, f_bits(x),
                     (double)y, f_bits(y));
    }
}

/* One random term into both: a float, a product, or a 128-bit integer at an exponent. */
static void add_random(trng *r, int lo, int hi, dr_cacc *c, dr_acc *a)
{
    int e = lo + (int)(next_u64(r) % (uint64_t)(hi - lo + 1));
    switch (next_u64(r) % 3) {
    case 0: {
        float x = rand_at(r, e);
        dr_cacc_add(c, x); dr_acc_add(a, x);
        break;
    }
    case 1: {
        float x = rand_at(r, e / 2), y = rand_at(r, e - e / 2);
        dr_cacc_add_prod(c, x, y); dr_acc_add_prod(a, x, y);
        break;
    }
    default: {   /* V * 2^ee, |V| < 2^107 as the GEMM's slices give */
        uint64_t lo64 = next_u64(r) >> (next_u64(r) % 64);
        int64_t hi64 = (int64_t)(next_u64(r) >> (21 + next_u64(r) % 43));
        int ee = e - 106;
        if (next_u64(r) & 1) {   /* negate the 128-bit value */
            hi64 = -hi64 - (lo64 != 0);
            lo64 = (uint64_t)0 - lo64;
        }
        dr_cacc_add_scaled(c, hi64, lo64, ee);
        /* the same into dr_acc: hi64 * 2^(ee+64) + two 32-bit pieces of lo64 */
        dr_acc_add_i64(a, (int64_t)(lo64 & 0xffffffffu), ee);
        dr_acc_add_i64(a, (int64_t)(lo64 >> 32), ee + 32);
        dr_acc_add_i64(a, hi64, ee + 64);
        dr_acc_normalize(a);
        if (hi64 || lo64) a->flags |= DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
        break;
    }
    }
}

/* Terms within a span the window holds: the compact value is the full one. */
static void random_terms_match(void **state)
{
    trng r = { 0x9e3779b97f4a7c15ull };
    (void)state;
    for (int t = 0; t < 3000; t++) {
        dr_cacc c;
        dr_acc a;
        int n = 1 + (int)(next_u64(&r) % 40), base = -90 + (int)(next_u64(&r) % 150);
        dr_cacc_init(&c);
        dr_acc_init(&a);
        for (int i = 0; i < n; i++) add_random(&r, base - 20, base + 20, &c, &a);
        assert_same(&c, &a);
    }
}

/* Massive cancellation and exact ties: results far below the terms. */
static void cancellation_and_ties(void **state)
{
    trng r = { 12345 };
    (void)state;
    for (int t = 0; t < 2000; t++) {
        dr_cacc c;
        dr_acc a;
        float x = rand_at(&r, -10 + (int)(next_u64(&r) % 20)), y = rand_at(&r, -40);
        float tiny = ldexpf(1.0f, -60 - (int)(next_u64(&r) % 30));
        dr_cacc_init(&c);
        dr_acc_init(&a);
        dr_cacc_add(&c, x); dr_acc_add(&a, x);
        dr_cacc_add_prod(&c, y, tiny); dr_acc_add_prod(&a, y, tiny);
        dr_cacc_add(&c, -x); dr_acc_add(&a, -x);
        if (t & 1) { dr_cacc_add(&c, tiny); dr_acc_add(&a, tiny); }   /* ties and near-ties */
        assert_same(&c, &a);
    }
}

/* Quotients on a tie but for the division's remainder: X = q d + r with q
 * odd and 25 bits wide (its last bit the half-ulp), so X / d rounds up for
 * r > 0 and to even for r = 0; only the remainder tells them apart (for a
 * large d and r = 1, it leaves no trace in the quotient's guard bits). */
static void division_remainder(void **state)
{
    static const uint32_t ds[] = { 3, 5, 7, 100, 6144, 1000003, 1073741789u };
    trng r = { 31337 };
    (void)state;
    for (size_t k = 0; k < sizeof ds / sizeof *ds; k++)
        for (int t = 0; t < 200; t++) {
            uint64_t q = ((uint64_t)1 << 24) | ((next_u64(&r) & 0x7fffffu) << 1) | 1u;
            /* no remainder, the smallest (its trace below the quotient's guard
             * bits only in the sticky bit), or any */
            uint64_t rem = t % 3 == 0 ? 0 : t % 3 == 1 ? 1 : 1 + next_u64(&r) % (ds[k] - 1);
            uint64_t X = q * ds[k] + rem;
            int e = (int)(next_u64(&r) % 41) - 20;
            dr_cacc c;
            dr_acc a;
            float x, y;
            dr_cacc_init(&c);
            dr_acc_init(&a);
            dr_cacc_add_scaled(&c, 0, X, e - 30);
            dr_acc_add_i64(&a, (int64_t)X, e - 30);
            dr_acc_normalize(&a);
            a.flags |= DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
            x = dr_cacc_round_div(&c, ds[k]);
            y = dr_acc_round_div(&a, ds[k]);
            if (f_bits(x) != f_bits(y))
                fail_msg("X = %llu * 2^%d over %u: compact 0x%08x, full 0x%08x", (unsigned long long)X, e - 30,
                         ds[k], f_bits(x), f_bits(y));
        }
}

/* Terms too far apart leave the window: flagged, never rounded. */
static void far_terms_overflow(void **state)
{
    dr_cacc c;
    dr_acc back;
    (void)state;
    dr_cacc_init(&c);
    dr_cacc_add(&c, 0x1p100f);
    dr_cacc_add(&c, 0x1p-100f);
    assert_true(dr_cacc_overflowed(&c));
    assert_false(dr_cacc_to_acc(&back, &c));
    assert_true(isnan(dr_cacc_round_div(&c, 1)));
    /* the other order too: the window cannot move down past the top */
    dr_cacc_init(&c);
    dr_cacc_add(&c, 0x1p-100f);
    dr_cacc_add(&c, 0x1p100f);
    assert_true(dr_cacc_overflowed(&c));
    /* and a merge of the two */
    {
        dr_cacc hi, lo;
        dr_cacc_init(&hi); dr_cacc_init(&lo);
        dr_cacc_add(&hi, 0x1p120f);
        dr_cacc_add(&lo, 0x1p-120f);
        dr_cacc_merge(&hi, &lo);
        assert_true(dr_cacc_overflowed(&hi));
    }
    /* within reach: 2^100 + 2^-60 is 161 bits, held exactly */
    dr_cacc_init(&c);
    dr_cacc_add(&c, 0x1p100f);
    dr_cacc_add(&c, 0x1p-60f);
    assert_false(dr_cacc_overflowed(&c));
    assert_true(dr_cacc_to_acc(&back, &c));
    {
        dr_acc a;
        dr_acc_init(&a);
        dr_acc_add(&a, 0x1p100f);
        dr_acc_add(&a, 0x1p-60f);
        assert_same(&c, &a);
    }
}

/* Random splits merged in random orders: the same value as one accumulator. */
static void merge_trees(void **state)
{
    trng r = { 777 };
    (void)state;
    for (int t = 0; t < 1000; t++) {
        dr_cacc part[8];
        dr_acc a;
        int k = 1 + (int)(next_u64(&r) % 8), base = -60 + (int)(next_u64(&r) % 120);
        dr_acc_init(&a);
        for (int j = 0; j < k; j++) dr_cacc_init(&part[j]);
        for (int i = 0; i < 64; i++) add_random(&r, base - 25, base + 25, &part[next_u64(&r) % (uint64_t)k], &a);
        while (k > 1) {   /* merge a random pair into the first, drop the second */
            int x = (int)(next_u64(&r) % (uint64_t)k), y = (int)(next_u64(&r) % (uint64_t)(k - 1));
            if (y >= x) y++;
            dr_cacc_merge(&part[x], &part[y]);
            part[y] = part[k - 1];
            if (x == k - 1) x = y;
            k--;
        }
        assert_same(&part[0], &a);
    }
}

static void multiply(void **state)
{
    trng r = { 4242 };
    (void)state;
    for (int t = 0; t < 2000; t++) {
        dr_cacc c;
        dr_acc a;
        uint32_t k = 1 + (uint32_t)(next_u64(&r) % (1u << 30));
        if (t % 4 == 0) k = 1u << (next_u64(&r) % 31);
        dr_cacc_init(&c);
        dr_acc_init(&a);
        for (int i = 0; i < 10; i++) add_random(&r, -10, 10, &c, &a);   /* 127 bits, times k: fits */
        dr_cacc_mul_u32(&c, k);
        dr_acc_mul_u32(&a, k);
        assert_same(&c, &a);
    }
}

/* The sign of an exact zero, and the specials, as IEEE addition. */
static void zeros_and_specials(void **state)
{
    dr_cacc c;
    (void)state;
    dr_cacc_init(&c);
    assert_int_equal(f_bits(dr_cacc_round_div(&c, 1)), 0u);              /* empty: +0 */
    dr_cacc_add(&c, -0.0f);
    dr_cacc_add_prod(&c, 0.0f, -3.0f);
    assert_int_equal(f_bits(dr_cacc_round_div(&c, 7)), 0x80000000u);    /* all -0: -0 */
    dr_cacc_add(&c, 0.0f);
    assert_int_equal(f_bits(dr_cacc_round_div(&c, 7)), 0u);
    dr_cacc_init(&c);
    dr_cacc_add(&c, 1.5f);
    dr_cacc_add(&c, -1.5f);
    assert_int_equal(f_bits(dr_cacc_round_div(&c, 1)), 0u);              /* x - x: +0 */
    dr_cacc_add(&c, INFINITY);
    assert_true(dr_cacc_round_div(&c, 3) == INFINITY);
    dr_cacc_add_prod(&c, -INFINITY, 2.0f);
    assert_true(isnan(dr_cacc_round_div(&c, 3)));
    dr_cacc_init(&c);
    dr_cacc_add_prod(&c, INFINITY, 0.0f);
    assert_true(isnan(dr_cacc_round_div(&c, 1)));
    /* zero-filled memory is an empty accumulator */
    {
        dr_cacc z[4];
        memset(z, 0, sizeof z);
        dr_cacc_add(&z[2], 0.25f);
        assert_true(dr_cacc_round_div(&z[2], 1) == 0.25f);
        assert_int_equal(f_bits(dr_cacc_round_div(&z[1], 1)), 0u);
    }
    assert_int_equal(sizeof(dr_cacc), 32);
}

/* Extremes: the largest and smallest floats and products, overflow to inf. */
static void extremes(void **state)
{
    float big = 0x1.fffffep127f, sub = 0x1p-149f;
    dr_cacc c;
    dr_acc a;
    (void)state;
    dr_cacc_init(&c); dr_acc_init(&a);
    dr_cacc_add_prod(&c, big, big); dr_acc_add_prod(&a, big, big);
    assert_same(&c, &a);                                                  /* +inf */
    dr_cacc_init(&c); dr_acc_init(&a);
    dr_cacc_add_prod(&c, sub, sub); dr_acc_add_prod(&a, sub, sub);
    dr_cacc_add_prod(&c, sub, 0x1p-100f); dr_acc_add_prod(&a, sub, 0x1p-100f);
    assert_same(&c, &a);                                                  /* +0 by rounding */
    dr_cacc_init(&c); dr_acc_init(&a);
    dr_cacc_add(&c, sub); dr_acc_add(&a, sub);
    dr_cacc_add(&c, 0x1p-140f); dr_acc_add(&a, 0x1p-140f);
    assert_same(&c, &a);                                                  /* subnormal results */
    dr_cacc_init(&c); dr_acc_init(&a);
    dr_cacc_add(&c, big); dr_acc_add(&a, big);
    dr_cacc_add(&c, big); dr_acc_add(&a, big);
    dr_cacc_add(&c, -big); dr_acc_add(&a, -big);
    assert_same(&c, &a);                                                  /* overflow on the way, back */
}

static void conversions(void **state)
{
    trng r = { 99 };
    (void)state;
    for (int t = 0; t < 2000; t++) {
        dr_cacc c, c2;
        dr_acc a, back;
        int base = -200 + (int)(next_u64(&r) % 400), span = 1 + (int)(next_u64(&r) % 200);
        dr_acc_init(&a);
        dr_cacc_init(&c);
        for (int i = 0; i < 6; i++) {
            float x = rand_at(&r, (base + (int)(next_u64(&r) % (uint64_t)span)) / 2);
            float y = rand_at(&r, (base + (int)(next_u64(&r) % (uint64_t)span)) / 2);
            dr_acc_add_prod(&a, x, y);
            dr_cacc_add_prod(&c, x, y);
        }
        dr_cacc_from_acc(&c2, &a);
        if (!dr_cacc_overflowed(&c)) assert_false(dr_cacc_overflowed(&c2));   /* what fits converts */
        if (!dr_cacc_overflowed(&c2)) {
            assert_same(&c2, &a);
            assert_true(dr_cacc_to_acc(&back, &c2));
            assert_true(dr_acc_equal(&back, &a));
        }
        if (!dr_cacc_overflowed(&c)) assert_same(&c, &a);
    }
}

static void wire_format(void **state)
{
    trng r = { 5 };
    uint8_t buf[DR_CACC_BYTES];
    dr_cacc c, d;
    dr_acc a;
    (void)state;
    for (int t = 0; t < 500; t++) {
        dr_cacc_init(&c);
        dr_acc_init(&a);
        for (int i = 0; i < 8; i++) add_random(&r, -40, 40, &c, &a);
        dr_cacc_serialize(&c, buf);
        memset(&d, 0xa5, sizeof d);
        assert_true(dr_cacc_deserialize(&d, buf));
        assert_memory_equal(&c, &d, sizeof c);
        assert_same(&d, &a);
    }
    /* little-endian, fixed layout: 2^-3 as W = 1, exp = -3 */
    dr_cacc_init(&c);
    dr_cacc_add(&c, 0.125f);
    dr_cacc_serialize(&c, buf);
    assert_int_equal(buf[0], 1);
    assert_int_equal(buf[24], 0xfd);
    assert_int_equal(buf[27], 0xff);
    /* corrupt: an unknown flag bit, a W beyond the window */
    buf[31] = 0x80;
    assert_false(dr_cacc_deserialize(&d, buf));
    buf[31] = 0;
    buf[23] = 0x40;
    assert_false(dr_cacc_deserialize(&d, buf));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_terms_match),
        cmocka_unit_test(cancellation_and_ties),
        cmocka_unit_test(division_remainder),
        cmocka_unit_test(far_terms_overflow),
        cmocka_unit_test(merge_trees),
        cmocka_unit_test(multiply),
        cmocka_unit_test(zeros_and_specials),
        cmocka_unit_test(extremes),
        cmocka_unit_test(conversions),
        cmocka_unit_test(wire_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
