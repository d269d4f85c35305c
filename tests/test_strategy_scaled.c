/* Unit tests for core/strategy_scaled.c: strategy.reduce over exact
 * per-replica values (dr_strategy_reduce_scaled), as the examples' custom
 * training loop uses it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "distref/factory.h"
#include "distref/input.h"
#include "distref/strategy.h"
#include "distref/strategy_scaled.h"

static dr_strategy strategy;

static void make_mirrored(int num_gpus)
{
    dr_strategy_spec spec;
    dr_strategy_options opt;
    dr_err err = { 0, "" };
    memset(&opt, 0, sizeof opt);
    if (dr_get_distribution_strategy("mirrored", num_gpus, NULL, 1, NULL, &spec, &err) != DR_OK ||
        dr_strategy_create(&spec, &opt, &strategy, &err) != DR_OK)
        fail_msg("mirrored with %d GPUs: %s", num_gpus, err.msg);
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* compute_average_loss(global_batch_size=G) + scale_regularization_loss on
 * every replica of TensorFlow's split of G = 10 examples, reduced with SUM:
 * the same bits for 1 to 8 replicas, and the exact value sum/G + reg
 * rounded once. */
static void test_sum_is_the_same_bits_for_every_replica_count(void **state)
{
    (void)state;
    const float loss[10] = { 0.1f, 1e-8f, 3.3f, 0.7f, 1e7f, -2.5f, 0.3333333f, 1.0f / 3.0f, 9.5f, 1e-3f };
    const float reg = 0.0123f;
    uint32_t want = 0;
    for (int R = 1; R <= 8; R++) {
        make_mirrored(R);
        uint32_t sizes[8];
        dr_err err = { 0, "" };
        assert_int_equal(dr_batch_sizes_for_worker(10, 1, (uint32_t)R, 0, sizes, &err), DR_OK);
        dr_scaled per_replica[8], sum;
        uint32_t at = 0;
        for (int r = 0; r < R; r++) {
            dr_replica_ctx ctx = { &strategy, (uint32_t)r, (uint32_t)R, NULL, 10 };
            per_replica[r] = dr_compute_average_loss(&ctx, loss + at, sizes[r], 10);
            dr_scaled s = dr_scale_regularization_loss(&ctx, reg);
            assert_true(dr_scaled_add(&per_replica[r], &s));
            at += sizes[r];
        }
        assert_int_equal(at, 10);
        assert_int_equal(dr_strategy_reduce_scaled(&strategy, DR_REDUCE_SUM, per_replica, &sum, &err), DR_OK);
        uint32_t got = bits(dr_scaled_round(&sum));
        if (R == 1) {
            /* sum/10 + reg = (sum + 10 reg) / 10, exactly */
            dr_acc exact;
            dr_acc_init(&exact);
            dr_acc_add_sum(&exact, loss, 10);
            for (int i = 0; i < 10; i++) dr_acc_add(&exact, reg);
            want = bits(dr_acc_round_div(&exact, 10));
        }
        if (got != want) fail_msg("%d replicas: 0x%08x, expected 0x%08x", R, got, want);
    }
}

/* MEAN over axis=None divides the exact sum by the number of replicas:
 * (1 + 2 + 4) / 3 rounded once. */
static void test_mean_divides_by_replicas_once(void **state)
{
    (void)state;
    make_mirrored(3);
    dr_scaled v[3], out;
    dr_err err = { 0, "" };
    const float x[3] = { 1.0f, 2.0f, 4.0f };
    for (int r = 0; r < 3; r++) { dr_scaled_init(&v[r], 1); dr_acc_add(&v[r].num, x[r]); }
    assert_int_equal(dr_strategy_reduce_scaled(&strategy, DR_REDUCE_MEAN, v, &out, &err), DR_OK);
    assert_int_equal(bits(dr_scaled_round(&out)), bits(7.0f / 3.0f));
}

/* Denominators whose product passes 2^32 are refused, naming the replica. */
static void test_incompatible_denominators_refused(void **state)
{
    (void)state;
    make_mirrored(2);
    dr_scaled v[2], out;
    dr_err err = { 0, "" };
    dr_scaled_init(&v[0], 100000);
    dr_scaled_init(&v[1], 99999);
    dr_acc_add(&v[0].num, 1.0f);
    dr_acc_add(&v[1].num, 1.0f);
    assert_int_equal(dr_strategy_reduce_scaled(&strategy, DR_REDUCE_SUM, v, &out, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "replica 1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_is_the_same_bits_for_every_replica_count),
        cmocka_unit_test(test_mean_divides_by_replicas_once),
        cmocka_unit_test(test_incompatible_denominators_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
