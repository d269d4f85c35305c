/* distref tests — learning-rate schedules and the exact norm (distref/schedule.h).
 *
 * schedules: dr_lr_at against TensorFlow 2.21 / Keras 3.15's values, bit for
 * bit, steps 0..59 of four schedules and three options (a warmup from 0.02,
 * cycle, staircase) (the arrays below are
 * `build/tfvenv/bin/python scripts/tf_training_features.py golden_c`);
 * update k reads iteration k - 1. warmup and piecewise edges.
 * acc_sqrt: dr_acc_sqrt of exact sums of squares against MPFR's correctly
 * rounded sqrt of the same exact value (random spans of magnitude, tiny,
 * huge, exact squares and midpoints, specials).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>
#include <mpfr.h>

#include "distref/schedule.h"
#include "distref/exact.h"

static const uint32_t TF_COSINE[60] = {
    0x00000000u, 0x3c6a0ea2u, 0x3cea0ea2u, 0x3d2f8af9u, 0x3d6a0ea2u, 0x3d924925u,
    0x3daf8af9u, 0x3dcccccdu, 0x3dcc9e3fu, 0x3dcc12c4u, 0x3dcb2ae7u, 0x3dc9e795u,
    0x3dc84a14u, 0x3dc65405u, 0x3dc40764u, 0x3dc16683u, 0x3dbe7409u, 0x3dbb32f2u,
    0x3db7a687u, 0x3db3d25fu, 0x3dafba56u, 0x3dab628fu, 0x3da6cf6fu, 0x3da20594u,
    0x3d9d09d6u, 0x3d97e13bu, 0x3d9290fdu, 0x3d8d1e77u, 0x3d878f2cu, 0x3d81e8b8u,
    0x3d7861a3u, 0x3d6cda82u, 0x3d6147adu, 0x3d55b4dbu, 0x3d4a2db6u, 0x3d3ebdebu,
    0x3d337104u, 0x3d28526bu, 0x3d1d6d62u, 0x3d12cce3u, 0x3d087bafu, 0x3cfd0863u,
    0x3ce9e0fdu, 0x3cd79478u, 0x3cc63563u, 0x3cb5d540u, 0x3ca6849au, 0x3c9852efu,
    0x3c8b4e93u, 0x3c7f0960u, 0x3c6a0252u, 0x3c579d47u, 0x3c47ecd2u, 0x3c3b00c2u,
    0x3c30e637u, 0x3c29a757u, 0x3c254b7cu, 0x3c23d70bu, 0x3c23d70bu, 0x3c23d70bu,
};
static const uint32_t TF_POLYNOMIAL[60] = {
    0x3dcccccdu, 0x3dc4c562u, 0x3dbce77cu, 0x3db5331eu, 0x3dada845u, 0x3da646f1u,
    0x3d9f0f25u, 0x3d9800deu, 0x3d911c1eu, 0x3d8a60e2u, 0x3d83cf2eu, 0x3d7acdfau,
    0x3d6e50abu, 0x3d622666u, 0x3d564f2cu, 0x3d4acafeu, 0x3d3f99deu, 0x3d34bbc8u,
    0x3d2a30c0u, 0x3d1ff8c4u, 0x3d1613d3u, 0x3d0c81f0u, 0x3d034316u, 0x3cf4ae91u,
    0x3ce37d12u, 0x3cd2f1aau, 0x3cc30c5au, 0x3cb3cd20u, 0x3ca53402u, 0x3c9740fbu,
    0x3c89f409u, 0x3c7a9a66u, 0x3c6298e7u, 0x3c4be397u, 0x3c367a7bu, 0x3c225d8eu,
    0x3c0f8ccfu, 0x3bfc1087u, 0x3bdb9fcfu, 0x3bbdc779u, 0x3ba2877eu, 0x3b89dfe8u,
    0x3b67a168u, 0x3b40b3b8u, 0x3b1ef6d1u, 0x3b026aabu, 0x3ad61e84u, 0x3ab1c93cu,
    0x3a97d576u, 0x3a884330u, 0x3a83126fu, 0x3a83126fu, 0x3a83126fu, 0x3a83126fu,
    0x3a83126fu, 0x3a83126fu, 0x3a83126fu, 0x3a83126fu, 0x3a83126fu, 0x3a83126fu,
};
static const uint32_t TF_EXPONENTIAL[60] = {
    0x3dcccccdu, 0x3dc9bd94u, 0x3dc6ba0eu, 0x3dc3c20fu, 0x3dc0d56au, 0x3dbdf3f4u,
    0x3dbb1d83u, 0x3db851ebu, 0x3db59105u, 0x3db2daa6u, 0x3db02ea7u, 0x3dad8cdfu,
    0x3daaf528u, 0x3da8675cu, 0x3da5e353u, 0x3da368ebu, 0x3da0f7fbu, 0x3d9e9063u,
    0x3d9c31fbu, 0x3d99dca4u, 0x3d979039u, 0x3d954c97u, 0x3d93119fu, 0x3d90df2fu,
    0x3d8eb525u, 0x3d8c9363u, 0x3d8a79c7u, 0x3d886833u, 0x3d865e88u, 0x3d845ca9u,
    0x3d826277u, 0x3d806fd5u, 0x3d7d094au, 0x3d794198u, 0x3d75885bu, 0x3d71dd5bu,
    0x3d6e4063u, 0x3d6ab13bu, 0x3d672fb2u, 0x3d63bb8fu, 0x3d6054a2u, 0x3d5cfab8u,
    0x3d59ad9fu, 0x3d566d25u, 0x3d53391bu, 0x3d501152u, 0x3d4cf59au, 0x3d49e5c4u,
    0x3d46e1a5u, 0x3d43e90fu, 0x3d40fbd5u, 0x3d3e19ccu, 0x3d3b42cau, 0x3d3876a3u,
    0x3d35b530u, 0x3d32fe47u, 0x3d3051c0u, 0x3d2daf72u, 0x3d2b1737u, 0x3d2888e8u,
};
static const uint32_t TF_PIECEWISE[60] = {
    0x3dcccccdu, 0x3dcccccdu, 0x3dcccccdu, 0x3dcccccdu, 0x3dcccccdu, 0x3dcccccdu,
    0x3d4ccccdu, 0x3d4ccccdu, 0x3d4ccccdu, 0x3d4ccccdu, 0x3d4ccccdu, 0x3d4ccccdu,
    0x3d4ccccdu, 0x3d4ccccdu, 0x3d4ccccdu, 0x3d4ccccdu, 0x3d4ccccdu, 0x3d4ccccdu,
    0x3d4ccccdu, 0x3d4ccccdu, 0x3d4ccccdu, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au,
    0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au,
    0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au,
    0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au,
    0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au,
    0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au,
    0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au, 0x3c23d70au,
};

static const uint32_t TF_COSINE_FROM[60] = {
    0x3ca3d70au, 0x3d00bb3fu, 0x3d2f8af8u, 0x3d5e5ab2u, 0x3d869536u, 0x3d9dfd13u,
    0x3db564f0u, 0x3dcccccdu, 0x3dcc9e3fu, 0x3dcc12c4u, 0x3dcb2ae7u, 0x3dc9e795u,
    0x3dc84a14u, 0x3dc65405u, 0x3dc40764u, 0x3dc16683u, 0x3dbe7409u, 0x3dbb32f2u,
    0x3db7a687u, 0x3db3d25fu, 0x3dafba56u, 0x3dab628fu, 0x3da6cf6fu, 0x3da20594u,
    0x3d9d09d6u, 0x3d97e13bu, 0x3d9290fdu, 0x3d8d1e77u, 0x3d878f2cu, 0x3d81e8b8u,
    0x3d7861a3u, 0x3d6cda82u, 0x3d6147adu, 0x3d55b4dbu, 0x3d4a2db6u, 0x3d3ebdebu,
    0x3d337104u, 0x3d28526bu, 0x3d1d6d62u, 0x3d12cce3u, 0x3d087bafu, 0x3cfd0863u,
    0x3ce9e0fdu, 0x3cd79478u, 0x3cc63563u, 0x3cb5d540u, 0x3ca6849au, 0x3c9852efu,
    0x3c8b4e93u, 0x3c7f0960u, 0x3c6a0252u, 0x3c579d47u, 0x3c47ecd2u, 0x3c3b00c2u,
    0x3c30e637u, 0x3c29a757u, 0x3c254b7cu, 0x3c23d70bu, 0x3c23d70bu, 0x3c23d70bu,
};
static const uint32_t TF_POLYNOMIAL_CYCLE[60] = {
    0x3dcccccdu, 0x3db2aae3u, 0x3d9a5659u, 0x3d83cf2eu, 0x3d5e2ac3u, 0x3d3851eau,
    0x3d1613d3u, 0x3ceee0f3u, 0x3cb8cfbfu, 0x3c89f409u, 0x3c449ba5u, 0x3c03ba34u,
    0x3ba2877eu, 0x3b34e11eu, 0x3abcbe62u, 0x3a83126fu, 0x3cb8cfbfu, 0x3ca07b36u,
    0x3c89f409u, 0x3c6a747eu, 0x3c449ba5u, 0x3c225d8eu, 0x3c03ba34u, 0x3bd16336u,
    0x3ba2877eu, 0x3b75c292u, 0x3b34e11eu, 0x3b026aabu, 0x3abcbe62u, 0x3a917d6du,
    0x3a83126fu, 0x3c2d610eu, 0x3c17c092u, 0x3c03ba34u, 0x3be29be1u, 0x3bc0f793u,
    0x3ba2877eu, 0x3b874ba1u, 0x3b5e87f8u, 0x3b34e11eu, 0x3b11a2b3u, 0x3ae99974u,
    0x3abcbe62u, 0x3a9cb430u, 0x3a897adfu, 0x3a83126fu, 0x3bd16336u, 0x3bb90ea8u,
    0x3ba2877eu, 0x3b8dcdb4u, 0x3b75c292u, 0x3b538474u, 0x3b34e11eu, 0x3b19d884u,
    0x3b026aabu, 0x3add2f18u, 0x3abcbe62u, 0x3aa38329u, 0x3a917d6du, 0x3a86ad2eu,
};
static const uint32_t TF_EXPONENTIAL_STAIRCASE[60] = {
    0x3dcccccdu, 0x3dcccccdu, 0x3dcccccdu, 0x3dcccccdu, 0x3dcccccdu, 0x3dcccccdu,
    0x3dcccccdu, 0x3db851ebu, 0x3db851ebu, 0x3db851ebu, 0x3db851ebu, 0x3db851ebu,
    0x3db851ebu, 0x3db851ebu, 0x3da5e353u, 0x3da5e353u, 0x3da5e353u, 0x3da5e353u,
    0x3da5e353u, 0x3da5e353u, 0x3da5e353u, 0x3d954c97u, 0x3d954c97u, 0x3d954c97u,
    0x3d954c97u, 0x3d954c97u, 0x3d954c97u, 0x3d954c97u, 0x3d865e88u, 0x3d865e88u,
    0x3d865e88u, 0x3d865e88u, 0x3d865e88u, 0x3d865e88u, 0x3d865e88u, 0x3d71dd5bu,
    0x3d71dd5bu, 0x3d71dd5bu, 0x3d71dd5bu, 0x3d71dd5bu, 0x3d71dd5bu, 0x3d71dd5bu,
    0x3d59ad9fu, 0x3d59ad9fu, 0x3d59ad9fu, 0x3d59ad9fu, 0x3d59ad9fu, 0x3d59ad9fu,
    0x3d59ad9fu, 0x3d43e90fu, 0x3d43e90fu, 0x3d43e90fu, 0x3d43e90fu, 0x3d43e90fu,
    0x3d43e90fu, 0x3d43e90fu, 0x3d3051c0u, 0x3d3051c0u, 0x3d3051c0u, 0x3d3051c0u,
};

static uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void check(const dr_lr_schedule *s, float lr, const uint32_t *tf, const char *what)
{
    for (uint32_t k = 0; k < 60; k++) {
        float v = dr_lr_at(s, lr, k + 1);   /* update k + 1 reads iterations = k */
        if (f_bits(v) != tf[k]) fail_msg("%s step %u: distref %a, tf %a", what, k, (double)v, (double)bits_f(tf[k]));
    }
}

static void schedules_match_tf(void **state)
{
    (void)state;
    dr_lr_schedule s;
    memset(&s, 0, sizeof s);
    s.kind = DR_LR_COSINE; s.warmup_steps = 7; s.decay_steps = 50; s.alpha = 0.1f;
    check(&s, 0.1f, TF_COSINE, "cosine");
    memset(&s, 0, sizeof s);
    s.kind = DR_LR_POLYNOMIAL; s.decay_steps = 50; s.end_learning_rate = 0.001f; s.power = 2.0f;
    check(&s, 0.1f, TF_POLYNOMIAL, "polynomial");
    memset(&s, 0, sizeof s);
    s.kind = DR_LR_EXPONENTIAL; s.decay_steps = 7; s.decay_rate = 0.9f;
    check(&s, 0.1f, TF_EXPONENTIAL, "exponential");
    memset(&s, 0, sizeof s);
    s.kind = DR_LR_PIECEWISE; s.nboundaries = 2; s.boundaries[0] = 5; s.boundaries[1] = 20;
    s.values[0] = 0.1f; s.values[1] = 0.05f; s.values[2] = 0.01f;
    check(&s, 0.5f, TF_PIECEWISE, "piecewise");
    memset(&s, 0, sizeof s);
    s.kind = DR_LR_COSINE; s.warmup_steps = 7; s.decay_steps = 50; s.alpha = 0.1f; s.warmup_lr = 0.02f;
    check(&s, 0.1f, TF_COSINE_FROM, "cosine, warmup from 0.02");
    memset(&s, 0, sizeof s);
    s.kind = DR_LR_POLYNOMIAL; s.decay_steps = 15; s.end_learning_rate = 0.001f; s.power = 2.0f; s.cycle = true;
    check(&s, 0.1f, TF_POLYNOMIAL_CYCLE, "polynomial, cycle");
    memset(&s, 0, sizeof s);
    s.kind = DR_LR_EXPONENTIAL; s.decay_steps = 7; s.decay_rate = 0.9f; s.staircase = true;
    check(&s, 0.1f, TF_EXPONENTIAL_STAIRCASE, "exponential, staircase");
}

static void warmup_and_constant(void **state)
{
    (void)state;
    dr_lr_schedule s;
    memset(&s, 0, sizeof s);
    assert_true(dr_lr_at(&s, 0.25f, 1) == 0.25f && dr_lr_at(&s, 0.25f, 1000) == 0.25f);
    s.warmup_steps = 4;
    assert_true(dr_lr_at(&s, 0.2f, 1) == 0.0f);                    /* iteration 0 */
    assert_true(dr_lr_at(&s, 0.2f, 3) == 0.2f * 0.5f);             /* iteration 2 of 4 */
    assert_true(dr_lr_at(&s, 0.2f, 5) == 0.2f);                    /* warmup over */
    dr_err err;
    s.kind = DR_LR_COSINE;
    assert_int_equal(dr_lr_schedule_check(&s, &err), DR_EUSAGE);    /* decay_steps 0 */
    s.kind = DR_LR_PIECEWISE; s.nboundaries = 2; s.boundaries[0] = 5; s.boundaries[1] = 5;
    assert_int_equal(dr_lr_schedule_check(&s, &err), DR_EUSAGE);    /* not increasing */
    memset(&s, 0, sizeof s);
    s.kind = DR_LR_POLYNOMIAL; s.decay_steps = 3; s.staircase = true;
    assert_int_equal(dr_lr_schedule_check(&s, &err), DR_EUSAGE);    /* staircase is exponential's */
    s.kind = DR_LR_EXPONENTIAL; s.decay_rate = 0.5f; s.cycle = true; s.staircase = false;
    assert_int_equal(dr_lr_schedule_check(&s, &err), DR_EUSAGE);    /* cycle is polynomial's */
    s.cycle = false; s.warmup_lr = 0.1f;
    assert_int_equal(dr_lr_schedule_check(&s, &err), DR_EUSAGE);    /* a warmup start without a warmup */
    s.warmup_steps = 2;
    assert_int_equal(dr_lr_schedule_check(&s, &err), DR_OK);
}

/* MPFR's correctly rounded float sqrt of the exact sum of x[i]^2. */
static float oracle(const float *x, size_t n)
{
    mpfr_t s, t;
    mpfr_init2(s, 2000); mpfr_init2(t, 2000);
    mpfr_set_zero(s, 1);
    for (size_t i = 0; i < n; i++) { mpfr_set_flt(t, x[i], MPFR_RNDN); mpfr_sqr(t, t, MPFR_RNDN); mpfr_add(s, s, t, MPFR_RNDN); }
    mpfr_t r;
    mpfr_init2(r, 24);
    mpfr_set_emin(-148); mpfr_set_emax(128);
    int inex = mpfr_sqrt(r, s, MPFR_RNDN);
    mpfr_subnormalize(r, inex, MPFR_RNDN);
    float out = mpfr_get_flt(r, MPFR_RNDN);
    mpfr_set_emin(mpfr_get_emin_min()); mpfr_set_emax(mpfr_get_emax_max());
    mpfr_clears(s, t, r, (mpfr_ptr)0);
    return out;
}

static float norm(const float *x, size_t n)
{
    dr_acc a;
    dr_acc_init(&a);
    dr_acc_add_dot(&a, x, x, n);
    return dr_acc_sqrt(&a);
}

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)rs; }

static void acc_sqrt_vs_mpfr(void **state)
{
    (void)state;
    float x[64];
    for (int trial = 0; trial < 3000; trial++) {
        size_t n = 1 + rnd() % 64;
        int base = (int)(rnd() % 250) - 140, span = (int)(rnd() % 60);
        for (size_t i = 0; i < n; i++) {
            int e = base + (int)(rnd() % (unsigned)(span + 1));
            if (e > 120) e = 120;
            float m = bits_f(0x3f800000u | (rnd() & 0x7fffffu));   /* [1, 2) */
            x[i] = ldexpf(m, e) * ((rnd() & 1) ? -1.0f : 1.0f);
        }
        float got = norm(x, n), want = oracle(x, n);
        if (f_bits(got) != f_bits(want)) fail_msg("trial %d n %zu: %a, mpfr %a", trial, n, (double)got, (double)want);
    }
    /* exact squares, a value just above one, subnormal and huge results, specials */
    float three[] = { 3.0f, 4.0f }, tiny[] = { 0x1p-149f }, big[] = { 0x1p127f, 0x1p127f, 0x1p127f, 0x1p127f };
    assert_true(norm(three, 2) == 5.0f);
    assert_true(norm(tiny, 1) == oracle(tiny, 1));
    assert_true(isinf(norm(big, 4)) && isinf(oracle(big, 4)));
    float just[] = { 1.0f, 0x1p-80f };
    assert_true(norm(just, 2) == oracle(just, 2));
    float z[] = { 0.0f, -0.0f }, nanv[] = { 1.0f, NAN }, inf[] = { INFINITY };
    assert_true(norm(z, 2) == 0.0f && isnan(norm(nanv, 2)) && isinf(norm(inf, 1)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schedules_match_tf),
        cmocka_unit_test(warmup_and_constant),
        cmocka_unit_test(acc_sqrt_vs_mpfr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
