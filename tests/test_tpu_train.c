/* distref tests — training under the tpu strategy (ref/tpu_step.c,
 * ref/strategy_tpu.c, ref/tpu_collective.c).
 *
 * The promise: on any preset slice and computation shape, with or without
 * spatial partitioning and L2, the loss of every step and the final weights
 * are one_device's bits at the same global batch. The data (70 examples,
 * global batch 32) ends in a short batch of 6, smaller than most replica
 * counts here, so the padding and its mask are exercised. Besides the
 * identity: the torus all-reduce against a single-pass sum, the HBM limit,
 * initialize_tpu_system's contract, and every usage error of the strategy.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distref/factory.h"
#include "distref/rng.h"
#include "distref/strategy.h"
#include "distref/harness.h"
#include "distref/train.h"
#include "ref/tpu_collective.h"
#include "tests/tmpdir.h"

#define EXAMPLES 70    /* two steps of 32, then 6 */
#define BATCH 32

typedef struct run {
    char     losses[4096];     /* loss_bits of every step */
    char     sha[65];
    uint32_t nsteps;
    double   emulated;         /* summed emulated_step_s */
    double   merge;            /* summed emulated merge_s */
} run;

static void base_config(dr_run_config *c, double l2)
{
    dr_err err;
    dr_run_config_defaults(c);
    c->global_batch_size = BATCH;
    c->synthetic_examples = EXAMPLES;
    c->epochs = 1;
    c->l2 = l2;
    c->progress = false;
    assert_int_equal(dr_get_distribution_strategy("one_device", 0, NULL, 1, NULL, &c->strategy, &err), DR_OK);
}

static void set_tpu(dr_run_config *c, const char *tpu, const char *dims)
{
    dr_err err;
    assert_int_equal(dr_get_distribution_strategy("tpu", 0, NULL, 1, tpu, &c->strategy, &err), DR_OK);
    snprintf(c->input_partition_dims, sizeof c->input_partition_dims, "%s", dims);
}

static double field(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    return p ? strtod(p + strlen(key), NULL) : 0.0;
}

static void parse_metrics(const char *dir, run *out)
{
    char path[1200], line[8192];
    FILE *f;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    assert_non_null(f = fopen(path, "r"));
    memset(out->losses, 0, sizeof out->losses);
    out->nsteps = 0;
    out->emulated = out->merge = 0;
    while (fgets(line, sizeof line, f)) {
        char *bits = strstr(line, "\"loss_bits\":\"");
        assert_non_null(bits);
        strncat(out->losses, bits + 13, 10);
        out->emulated += field(line, "\"emulated_step_s\":");
        out->merge += field(line, "\"merge_s\":");
        out->nsteps++;
    }
    fclose(f);
}

/* Trains into a fresh directory; returns the code and, on success, the run. */
static int try_train(dr_run_config *c, run *out, dr_err *err)
{
    char dir[] = "/tmp/distref_tpu_XXXXXX";
    dr_run_result res;
    int rc;
    assert_non_null(mkdtemp(dir));
    snprintf(c->model_dir, sizeof c->model_dir, "%s", dir);
    rc = dr_run_train(c, &res, err);
    if (rc == DR_OK) {
        memcpy(out->sha, res.weights_sha256, 65);
        parse_metrics(dir, out);
    }
    remove_tree(dir);
    return rc;
}

static void train(dr_run_config *c, run *out)
{
    dr_err err;
    int rc = try_train(c, out, &err);
    if (rc) print_error("train: %s\n", err.msg);
    assert_int_equal(rc, DR_OK);
}

static bool same_run(const run *a, const run *b)
{
    return strcmp(a->losses, b->losses) == 0 && strcmp(a->sha, b->sha) == 0;
}

static void assert_same_run(const run *a, const run *b, const char *what)
{
    if (!same_run(a, b)) {
        print_error("%s: differs from one_device\n  losses %.40s...\n  vs     %.40s...\n", what, a->losses, b->losses);
        fail();
    }
}

/* ---- identity with one_device ------------------------------------------- */

static void matrix(double l2)
{
    static const struct { const char *tpu, *dims; } cases[] = {
        { "v2-8", "" }, { "v2-8", "1,2" }, { "v2-8", "2,2" },
        { "v3-8", "" }, { "v3-8", "2,1" }, { "v3-8", "2,2" }, { "v3-8", "2,4" },
        { "v3-32", "" }, { "v3-32", "2,2" }, { "v3-32", "4,4" },
    };
    dr_run_config c;
    run ref, got;
    base_config(&c, l2);
    train(&c, &ref);
    assert_int_equal(ref.nsteps, 3);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[96];
        set_tpu(&c, cases[i].tpu, cases[i].dims);
        train(&c, &got);
        snprintf(what, sizeof what, "tpu %s partition [%s] l2=%g", cases[i].tpu, cases[i].dims, l2);
        assert_same_run(&got, &ref, what);
        assert_true(got.emulated > 0);
        if (cases[i].dims[0] && strcmp(cases[i].dims, "1,1") != 0) assert_true(got.merge > 0);
        else assert_true(got.merge == 0);
    }
}

static void identity_no_l2(void **s) { (void)s; matrix(DR_UNSET); }
static void identity_l2(void **s) { (void)s; matrix(0.01); }

/* Adam and the guide's toy model too; local is the name of the default slice. */
static void identity_adam_and_toy(void **s)
{
    dr_run_config c;
    run ref, got;
    (void)s;
    base_config(&c, 0.001);
    snprintf(c.optimizer, sizeof c.optimizer, "adam");
    train(&c, &ref);
    set_tpu(&c, "local", "2,2");
    train(&c, &got);
    assert_same_run(&got, &ref, "adam on local [2,2]");
    base_config(&c, DR_UNSET);
    snprintf(c.experiment, sizeof c.experiment, "linear_ones");
    c.global_batch_size = 8;
    train(&c, &ref);
    set_tpu(&c, "v4-8", "");
    train(&c, &got);
    assert_same_run(&got, &ref, "linear_ones on v4-8");
}

/* ---- static shapes: drop or pad ----------------------------------------- */

static void short_batch_drop_or_pad(void **s)
{
    dr_run_config c;
    run pad_ref, drop_ref, pad, drop, faulty;
    (void)s;
    base_config(&c, 0.01);
    train(&c, &pad_ref);
    c.drop_remainder = true;
    train(&c, &drop_ref);
    assert_int_equal(drop_ref.nsteps, 2);
    set_tpu(&c, "v3-8", "");
    train(&c, &drop);
    assert_same_run(&drop, &drop_ref, "tpu with drop_remainder");
    c.drop_remainder = false;
    train(&c, &pad);
    assert_same_run(&pad, &pad_ref, "tpu padding the short batch");
    assert_int_equal(pad.nsteps, 3);
    /* The engine's tpu pads and masks the same way, partitioned or not. */
    snprintf(c.variant, sizeof c.variant, "openmp");
    train(&c, &faulty);
    assert_same_run(&faulty, &pad_ref, "openmp tpu padding the short batch");
    set_tpu(&c, "v3-8", "2,2");
    snprintf(c.variant, sizeof c.variant, "openmp");
    train(&c, &faulty);
    assert_same_run(&faulty, &pad_ref, "openmp tpu partitioned, padding the short batch");
}

/* ---- HBM ---------------------------------------------------------------- */

static void hbm_needs_partitioning(void **s)
{
    dr_run_config c;
    run ref, got;
    dr_err err;
    (void)s;
    base_config(&c, DR_UNSET);
    train(&c, &ref);
    set_tpu(&c, "v3-8", "");
    c.tpu_hbm_scale = 0.0007;   /* 12 MB per core: the 784-128-10 model with its slots and accumulators needs 17.9 */
    assert_int_equal(try_train(&c, &got, &err), DR_EDEVICE_OOM);
    assert_non_null(strstr(err.msg, "device:TPU:0: out of memory"));
    assert_non_null(strstr(err.msg, "logical core 0 needs 17928480 bytes"));
    assert_non_null(strstr(err.msg, "--input_partition_dims"));
    set_tpu(&c, "v3-8", "2,2");
    train(&c, &got);
    assert_same_run(&got, &ref, "partitioned within 12 MB per core");
}

/* ---- the torus all-reduce ----------------------------------------------- */

static void torus_all_reduce_sums(void **s)
{
    static const int shapes[][4] = { { 0, 0, 0, 0 }, { 1, 1, 1, 2 }, { 1, 2, 1, 2 }, { 2, 2, 1, 2 }, { 4, 2, 1, 2 } };
    enum { N = 37 };
    dr_tpu_system sys;
    dr_err err;
    (void)s;
    memset(&sys, 0, sizeof sys);
    assert_int_equal(dr_tpu_initialize_system(&sys, "v3-32", NULL, 1.0, &err), DR_OK);
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        static dr_strategy st;
        dr_strategy_options opt;
        dr_strategy_spec spec;
        dr_acc *acc[64], want[N];
        size_t ranges[] = { 3, 10, 20, 33 };   /* two ranges; the rest must stay untouched */
        double secs = 0;
        memset(&opt, 0, sizeof opt);
        memset(&spec, 0, sizeof spec);
        spec.kind = DR_STRATEGY_TPU;
        opt.tpu_system = &sys;
        memcpy(opt.tpu_computation_shape, shapes[k], sizeof shapes[k]);
        assert_int_equal(dr_strategy_create(&spec, &opt, &st, &err), DR_OK);
        memset(want, 0, sizeof want);
        for (uint32_t r = 0; r < st.num_replicas; r++) {
            acc[r] = calloc(N, sizeof(dr_acc));
            for (uint32_t i = 0; i < N; i++) {
                float v = (dr_rng_uniform(7, r, i) - 0.5f) * (float)(1 << (i % 24));
                dr_acc_add(&acc[r][i], v);
                dr_acc_add(&want[i], v);
            }
        }
        assert_int_equal(dr_tpu_all_reduce(&st, acc, ranges, 2, 0, &secs, &err), DR_OK);
        for (uint32_t r = 0; r < st.num_replicas; r++) {
            for (uint32_t i = 0; i < N; i++) {
                bool inside = (i >= 3 && i < 10) || (i >= 20 && i < 33);
                if (inside) assert_true(dr_acc_equal(&acc[r][i], &want[i]));
                else assert_true(dr_acc_round(&acc[r][i]) == (dr_rng_uniform(7, r, i) - 0.5f) * (float)(1 << (i % 24)));
            }
            free(acc[r]);
        }
        assert_true(st.num_replicas == 1 ? secs == 0 : secs > 0);
    }
}

/* ---- initialize_tpu_system ---------------------------------------------- */

static int noop_replica(const dr_replica_ctx *ctx, void *arg, dr_err *err)
{
    (void)ctx; (void)arg; (void)err;
    return DR_OK;
}

static void initialize_required_and_wipes(void **s)
{
    static dr_strategy st;
    dr_tpu_system sys;
    dr_strategy_options opt;
    dr_strategy_spec spec;
    dr_err err;
    (void)s;
    memset(&sys, 0, sizeof sys);
    memset(&opt, 0, sizeof opt);
    memset(&spec, 0, sizeof spec);
    spec.kind = DR_STRATEGY_TPU;
    assert_int_equal(dr_strategy_create(&spec, &opt, &st, &err), DR_ESTATE);
    assert_non_null(strstr(err.msg, "not initialized"));
    opt.tpu_system = &sys;
    assert_int_equal(dr_strategy_create(&spec, &opt, &st, &err), DR_ESTATE);
    assert_int_equal(dr_tpu_initialize_system(&sys, "grpc://10.0.0.2:8470", NULL, 1.0, &err), DR_EUSAGE);
    assert_false(sys.initialized);
    assert_int_equal(dr_tpu_initialize_system(&sys, "v2-8", NULL, 1.0, &err), DR_OK);
    assert_int_equal(dr_strategy_create(&spec, &opt, &st, &err), DR_OK);
    assert_int_equal(st.num_replicas, 8);
    assert_string_equal(st.device[1 + 5].name, "/job:worker/replica:0/task:0/device:TPU:5");
    assert_int_equal(st.device[1].capacity, 8ull << 30);
    assert_int_equal(dr_strategy_run(&st, 8, noop_replica, NULL, &err), DR_OK);
    assert_int_equal(dr_tpu_initialize_system(&sys, "v2-8", NULL, 1.0, &err), DR_OK);   /* wipes the HBM */
    assert_int_equal(dr_strategy_run(&st, 8, noop_replica, NULL, &err), DR_ESTATE);
    assert_non_null(strstr(err.msg, "wiped its HBM"));
    assert_int_equal(dr_strategy_create(&spec, &opt, &st, &err), DR_OK);
    assert_int_equal(dr_strategy_run(&st, 8, noop_replica, NULL, &err), DR_OK);
}

/* ---- usage errors ------------------------------------------------------- */

static void expect_error(dr_run_config *c, int code, const char *phrase)
{
    run got;
    dr_err err;
    int rc = try_train(c, &got, &err);
    if (rc != code || !strstr(err.msg, phrase)) {
        print_error("expected code %d with '%s', got %d: %s\n", code, phrase, rc, rc ? err.msg : "");
        fail();
    }
}

static void usage_errors(void **s)
{
    dr_run_config c;
    (void)s;
    base_config(&c, DR_UNSET);
    set_tpu(&c, "grpc://10.0.0.2:8470", "");
    expect_error(&c, DR_EUSAGE, "no remote TPU in emulation");
    set_tpu(&c, "v9-8", "");
    expect_error(&c, DR_EUSAGE, "unknown TPU");
    set_tpu(&c, "v3-8", "");
    snprintf(c.tpu_platform, sizeof c.tpu_platform, "v2");
    expect_error(&c, DR_EUSAGE, "disagrees");
    c.tpu_platform[0] = 0;
    c.global_batch_size = 20;
    expect_error(&c, DR_EUSAGE, "give a multiple of 8");
    c.global_batch_size = BATCH;
    set_tpu(&c, "v3-8", "3,1");
    expect_error(&c, DR_EUSAGE, "must be 1, 2, 4, 8 or 16; got 3");
    set_tpu(&c, "v3-8", "8,1");
    expect_error(&c, DR_EUSAGE, "8 does not divide the input dimension 28");
    set_tpu(&c, "v3-8", "2,x");
    expect_error(&c, DR_EUSAGE, "expected comma-separated positive integers");
    set_tpu(&c, "v2-8", "4,4");
    expect_error(&c, DR_EUSAGE, "computation footprint [4 2 1 2] does not fit in TPU topology shape [2 2 1 2]");
    set_tpu(&c, "v3-8", "2,2");
    snprintf(c.experiment, sizeof c.experiment, "linear_ones");
    expect_error(&c, DR_EUSAGE, "not a 28x28 image");
    snprintf(c.experiment, sizeof c.experiment, "mlp_synthetic");
    snprintf(c.layer_devices, sizeof c.layer_devices, "/gpu:0,/gpu:1");
    expect_error(&c, DR_EUSAGE, "--layer_devices: not with the tpu strategy");
    c.layer_devices[0] = 0;
    base_config(&c, DR_UNSET);
    snprintf(c.input_partition_dims, sizeof c.input_partition_dims, "2,2");
    expect_error(&c, DR_EUSAGE, "spatial partitioning needs --distribution_strategy=tpu, not one_device");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(identity_no_l2),
        cmocka_unit_test(identity_l2),
        cmocka_unit_test(identity_adam_and_toy),
        cmocka_unit_test(short_batch_drop_or_pad),
        cmocka_unit_test(hbm_needs_partitioning),
        cmocka_unit_test(torus_all_reduce_sums),
        cmocka_unit_test(initialize_required_and_wipes),
        cmocka_unit_test(usage_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
