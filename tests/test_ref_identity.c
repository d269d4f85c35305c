/* distref tests — the reference's promise: every strategy, replica count,
 * all-reduce algorithm, packing and placement gives one_device's bits.
 *
 * Each case trains a few steps into a temporary model_dir and compares the
 * whole loss curve (loss_bits of every step in metrics.jsonl) and
 * weights_sha256 with a one_device run at the same global batch. The data
 * is sized so that the global batch (20) is not divisible by most replica
 * counts and the final batch (3 examples) is smaller than 4, 5 and 8
 * replicas. Planted faults must make the comparison fail.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "distref/data.h"
#include "distref/factory.h"
#include "distref/fileio.h"
#include "distref/input.h"
#include "distref/harness.h"
#include "distref/train.h"

#define EXAMPLES 63    /* 3 steps of 20, then a final batch of 3 */
#define BATCH 20

typedef struct run {
    char     losses[8192];      /* the loss_bits column of metrics.jsonl */
    char     sha[65];
    uint32_t sizes[16][8];      /* replica_batch_sizes of the first 16 steps */
    uint32_t nsteps;
} run;

static void base_config(dr_run_config *c, const char *experiment, double l2)
{
    dr_run_config_defaults(c);
    snprintf(c->experiment, sizeof c->experiment, "%s", experiment);
    c->global_batch_size = BATCH;
    c->synthetic_examples = EXAMPLES;
    c->epochs = 1;
    c->l2 = l2;
    c->progress = false;
}

static void set_strategy(dr_run_config *c, const char *name, int gpus, const char *alg, int packs)
{
    dr_err err;
    int rc = dr_get_distribution_strategy(name, gpus, alg, packs, NULL, &c->strategy, &err);
    if (rc) print_error("%s\n", err.msg);
    assert_int_equal(rc, DR_OK);
}

/* Reads loss_bits and replica_batch_sizes of every line. */
static void parse_metrics(const char *dir, run *out)
{
    char path[1200], line[4096];
    FILE *f;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    out->losses[0] = 0;
    out->nsteps = 0;
    while (fgets(line, sizeof line, f)) {
        char *bits = strstr(line, "\"loss_bits\":\""), *sz = strstr(line, "\"replica_batch_sizes\":[");
        assert_non_null(bits);
        assert_non_null(sz);
        strncat(out->losses, bits + 13, 10);
        if (out->nsteps < 16) {
            char *p = sz + 23;
            for (int r = 0; r < 8 && *p != ']'; r++) {
                out->sizes[out->nsteps][r] = (uint32_t)strtoul(p, &p, 10);
                if (*p == ',') p++;
            }
        }
        out->nsteps++;
    }
    fclose(f);
}

static void train(dr_run_config *c, run *out)
{
    char dir[] = "/tmp/distref_identity_XXXXXX";
    dr_run_result res;
    dr_err err;
    int rc;
    assert_non_null(mkdtemp(dir));
    snprintf(c->model_dir, sizeof c->model_dir, "%s", dir);
    rc = dr_run_train(c, &res, &err);
    if (rc) print_error("train: %s\n", err.msg);
    assert_int_equal(rc, DR_OK);
    memcpy(out->sha, res.weights_sha256, 65);
    parse_metrics(dir, out);
    {   /* clean up */
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
    }
}

static void assert_same_run(const run *a, const run *b, const char *what)
{
    if (strcmp(a->losses, b->losses) != 0 || strcmp(a->sha, b->sha) != 0) {
        print_error("%s: differs from one_device\n  losses %.60s...\n  vs     %.60s...\n  sha %s vs %s\n",
                    what, a->losses, b->losses, a->sha, b->sha);
        fail();
    }
}

static void matrix(const char *experiment, double l2)
{
    dr_run_config c;
    run ref, got;
    static const int replicas[] = { 1, 2, 3, 4, 5, 8 };
    static const char *const algs[] = { NULL, "nccl", "hierarchical_copy" };
    base_config(&c, experiment, l2);
    set_strategy(&c, "one_device", 0, NULL, 1);
    train(&c, &ref);
    assert_int_equal(ref.nsteps, (EXAMPLES + BATCH - 1) / BATCH);
    for (size_t i = 0; i < sizeof replicas / sizeof replicas[0]; i++) {
        for (size_t a = 0; a < 3; a++) {
            char what[96];
            int packs = a ? 1 + (int)(i % 3) : 1;
            set_strategy(&c, "mirrored", replicas[i], algs[a], packs);
            train(&c, &got);
            snprintf(what, sizeof what, "%s l2=%g mirrored R=%d alg=%s packs=%d", experiment, l2,
                     replicas[i], algs[a] ? algs[a] : "default", packs);
            assert_same_run(&got, &ref, what);
        }
    }
    set_strategy(&c, "mirrored", 3, "nccl", 0);   /* num_packs 0: one pack per tensor */
    train(&c, &got);
    assert_same_run(&got, &ref, "mirrored R=3 nccl num_packs=0");
    for (int g = 0; g <= 4; g += 1 + (g > 0)) {     /* central_storage with 0, 1, 2, 4 GPUs */
        char what[64];
        set_strategy(&c, "central_storage", g, NULL, 1);
        train(&c, &got);
        snprintf(what, sizeof what, "%s central_storage gpus=%d", experiment, g);
        assert_same_run(&got, &ref, what);
    }
    set_strategy(&c, "one_device", 1, NULL, 1);      /* explicit placement: all on /cpu:0 */
    snprintf(c.layer_devices, sizeof c.layer_devices, "/cpu:0,/device:CPU:0");
    train(&c, &got);
    assert_same_run(&got, &ref, "explicit placement on /cpu:0");
    snprintf(c.layer_devices, sizeof c.layer_devices, "/gpu:0,/gpu:1");   /* model parallelism */
    train(&c, &got);
    assert_same_run(&got, &ref, "layer 1 on /gpu:0, layer 2 on /gpu:1");
    c.layer_devices[0] = 0;
}

static void identity_synthetic(void **state) { (void)state; matrix("mlp_synthetic", DR_UNSET); }

/* Fashion-MNIST (when installed): three steps of a real-data run. */
static void fashion(double l2)
{
    dr_run_config c;
    run ref, got;
    static const struct { const char *s; int g; const char *alg; int packs; } cases[] = {
        { "mirrored", 3, "nccl", 2 }, { "mirrored", 8, "hierarchical_copy", 3 },
        { "mirrored", 5, NULL, 1 }, { "central_storage", 2, NULL, 1 },
    };
    if (access(DR_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0) skip();
    base_config(&c, "mlp_fashion_mnist", l2);
    c.epochs = 0;
    c.train_steps = 3;
    set_strategy(&c, "one_device", 0, NULL, 1);
    train(&c, &ref);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_strategy(&c, cases[i].s, cases[i].g, cases[i].alg, cases[i].packs);
        train(&c, &got);
        assert_same_run(&got, &ref, cases[i].s);
    }
}

static void identity_fashion(void **state) { (void)state; fashion(DR_UNSET); }
static void identity_fashion_l2(void **state) { (void)state; fashion(1e-3); }
static void identity_synthetic_l2(void **state) { (void)state; matrix("mlp_synthetic", 1e-3); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(identity_synthetic),
        cmocka_unit_test(identity_synthetic_l2),
        cmocka_unit_test(identity_fashion),
        cmocka_unit_test(identity_fashion_l2),
    };
    return cmocka_run_group_tests_name("ref_identity", tests, NULL, NULL);
}
