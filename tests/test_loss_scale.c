/* distref tests — the loss scale (distref/loss_scale.h) against Keras 3.15's
 * LossScaleOptimizer as scripts/tf_mixed_probe.py measured it ([b] lines,
 * docs/TRAINING_FEATURES.md): dynamic_growth_steps=2, SGD(0.5), w = [1, 1],
 * gradients (times the scale) [1,2], [inf,1], [nan,0], [1,1] x 3:
 *   w        [.5,0] [.5,0] [.5,0] [0,-.5] [-.5,-1] [-1,-1.5]
 *   scale    32768  16384  8192   8192    16384    16384
 *   counter  1      0      0      1       0        1
 *   iterations 1    1      1      2       3        4
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "distref/loss_scale.h"

static void test_keras_sequence(void **state)
{
    static const float g[6][2] = { { 1, 2 }, { INFINITY, 1 }, { NAN, 0 }, { 1, 1 }, { 1, 1 }, { 1, 1 } };
    static const float want_w[6][2] = { { .5f, 0 }, { .5f, 0 }, { .5f, 0 }, { 0, -.5f }, { -.5f, -1 }, { -1, -1.5f } };
    static const float want_scale[6] = { 32768, 16384, 8192, 8192, 16384, 16384 };
    static const uint32_t want_counter[6] = { 1, 0, 0, 1, 0, 1 }, want_it[6] = { 1, 1, 1, 2, 3, 4 };
    dr_loss_scale ls;
    float w[2] = { 1, 1 };
    uint32_t it = 0;
    (void)state;
    dr_loss_scale_init(&ls, true, 0);
    ls.growth_steps = 2;
    assert_true(ls.scale == 32768.0f);
    for (int s = 0; s < 6; s++) {
        float sg[2] = { g[s][0] * ls.scale, g[s][1] * ls.scale }, u[2];
        bool finite = isfinite(sg[0]) && isfinite(sg[1]);
        u[0] = dr_loss_scale_unscale(&ls, sg[0]);   /* unscaled with the scale before the update */
        u[1] = dr_loss_scale_unscale(&ls, sg[1]);
        if (dr_loss_scale_step(&ls, finite)) {
            w[0] -= 0.5f * u[0]; w[1] -= 0.5f * u[1]; it++;
        }
        assert_true(w[0] == want_w[s][0] && w[1] == want_w[s][1]);
        assert_true(ls.scale == want_scale[s]);
        assert_int_equal(ls.counter, want_counter[s]);
        assert_int_equal(it, want_it[s]);
    }
    assert_int_equal(ls.skipped, 2);
}

static void test_defaults_and_fixed(void **state)
{
    dr_loss_scale ls;
    (void)state;
    dr_loss_scale_init(&ls, true, 0);
    assert_int_equal(ls.growth_steps, 2000);
    for (int i = 0; i < 1999; i++) assert_true(dr_loss_scale_step(&ls, true));
    assert_true(ls.scale == 32768.0f);
    assert_true(dr_loss_scale_step(&ls, true));            /* the 2000th finite step doubles */
    assert_true(ls.scale == 65536.0f);
    assert_int_equal(ls.counter, 0);
    dr_loss_scale_init(&ls, false, 128.0f);
    assert_true(dr_loss_scale_step(&ls, false));           /* fixed: never skips */
    assert_true(ls.scale == 128.0f);
    assert_int_equal(ls.skipped, 0);
    assert_true(dr_loss_scale_unscale(&ls, 3.0f) == 3.0f / 128.0f);
}

/* dr_mixed_reduce: exact is split-invariant, tensorflow rounds each
 * replica's partial first (R-dependent), and the one finite flag. */
static void test_mixed_reduce(void **state)
{
    dr_acc a[4], b[4], one[1];
    const dr_acc *p2[2] = { a, b }, *p1[1] = { one };
    float e2[4], t2[4], e1[4], t1[4];
    (void)state;
    for (int i = 0; i < 4; i++) { dr_acc_init(&a[i]); dr_acc_init(&b[i]); }
    dr_acc_add(&a[0], 0x1.002p0f); dr_acc_add(&b[0], 0x1p-11f);     /* 1 + 2^-11 (a float16 tie) + 2^-11 */
    dr_acc_add(&a[1], 40000.0f);   dr_acc_add(&b[1], 40000.0f);     /* each finite in float16, the sum not */
    dr_acc_add(&a[2], 3.0f);       dr_acc_add(&b[2], -1.0f);
    dr_acc_add(&a[3], 0x1p-30f);   dr_acc_add(&b[3], 0x1p-30f);     /* below float16's subnormals each */
    assert_false(dr_mixed_reduce(p2, 2, 4, 1, DR_DTYPE_F16, false, e2));
    assert_true(e2[0] == 0x1.004p0f && isinf(e2[1]) && e2[2] == 2.0f && e2[3] == 0.0f);
    assert_true(dr_mixed_reduce(p2, 2, 4, 1, DR_DTYPE_F16, true, t2));
    assert_true(t2[0] == 0x1.002p0f && t2[1] == 80000.0f && t2[2] == 2.0f && t2[3] == 0.0f);
    for (int i = 0; i < 4; i++) {    /* R = 1 with the same terms: both reductions are the exact one */
        dr_acc_init(&one[0]);
        dr_acc_merge(&one[0], &a[i]); dr_acc_merge(&one[0], &b[i]);
        dr_mixed_reduce(p1, 1, 1, 1, DR_DTYPE_F16, false, &e1[i]);
        dr_mixed_reduce(p1, 1, 1, 1, DR_DTYPE_F16, true, &t1[i]);
        assert_true(e1[i] == t1[i] || (isinf(e1[i]) && isinf(t1[i])));
        assert_true(e1[i] == e2[i] || (isinf(e1[i]) && isinf(e2[i])));
    }
    assert_true(dr_mixed_reduce(p2, 2, 1, 4, DR_DTYPE_BF16, false, e2));   /* over a divisor */
    assert_true(e2[0] == 0x1p-2f);   /* (1 + 2^-10) / 4 in bfloat16 */
}

/* --l2 under a mixed policy: the L2 gradient of the scaled loss, divided by
 * a power-of-two scale, is exactly 2 l2 w (the float32 path's term), so the
 * unscaled sum is RN(g/s + 2 l2 w); the term is added to kernels only. */
static void test_mixed_l2(void **state)
{
    static const float ws[] = { 0.3f, -1.7f, 0x1.234568p-3f, 5.0f };
    static const float ss[] = { 1.0f, 1024.0f, 32768.0f, 0x1p20f };
    dr_model_spec m;
    float w[6] = { 0.3f, -1.7f, 0.25f, 9.0f, 1.0f, 2.0f }, g[6] = { 0 };
    (void)state;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            float s = ss[j], gc = 3.0f * s, l2 = 0.01f;
            assert_true(dr_mixed_l2_term(s, 1, l2, ws[i]) == s * ((2.0f * l2) * ws[i]));
            assert_true((gc + dr_mixed_l2_term(s, 1, l2, ws[i])) / s == 3.0f + (2.0f * l2) * ws[i]);
            assert_true(dr_mixed_l2_term(s, 2, l2, ws[i]) == 0.5f * dr_mixed_l2_term(s, 1, l2, ws[i]));
        }
    memset(&m, 0, sizeof m);   /* Dense 2 -> 2 (kernel 4, bias 2) */
    m.nlayers = 1;
    m.l2 = 0.5f;
    m.layer[0].kind = DR_LAYER_DENSE;
    m.layer[0].in = 2;
    m.layer[0].out = 2;
    assert_true(dr_mixed_add_l2(&m, w, 2.0f, 1, g));
    assert_true(g[0] == 2.0f * w[0] && g[3] == 18.0f && g[4] == 0.0f && g[5] == 0.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keras_sequence),
        cmocka_unit_test(test_defaults_and_fixed),
        cmocka_unit_test(test_mixed_reduce),
        cmocka_unit_test(test_mixed_l2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
