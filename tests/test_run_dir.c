/* A run directory never reports a result it did not compute (issue 26,
 * item 4; docs/RUN_DIRECTORY.md, "Running a directory again"). bin/distref
 * run twice on one --model_dir:
 *   same_settings         a finished run run again: "already complete at
 *                         step N; nothing run", exit 0, no result line, no
 *                         file changed; --mode=train_and_eval again goes on
 *                         from the last finished epoch; under opencl (no
 *                         inference pass) it evaluates through the reference
 *   other_topology_done   a finished run under another strategy, variant or
 *                         replica count: exit 2 naming the flag, nothing run
 *   other_hyperparameter  another learning rate, seed, global batch or
 *                         experiment: exit 2 naming the flag
 *   other_topology_resume an unfinished run continued under another exact
 *                         synchronous topology: says so, and its loss
 *                         curve, weights and train_accuracy_last_epoch are
 *                         the uninterrupted run's; summary.json lists both
 *                         segments with their steps
 *   numerics_resume       --numerics=fast on an exact checkpoint, another
 *                         topology on a fast one, a synchronous strategy on
 *                         a parameter_server one: exit 2 naming the flag
 *   world_size_resume     another replica count under tf_default, another
 *                         worker count under OFF: exit 2 naming both world
 *                         sizes and why
 * Run from the repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "shell.h"

#include <sys/wait.h>

#ifndef DR_BIN
#define DR_BIN "bin/distref"   /* the Makefile passes its build's CLI (SANITIZE=1: build/san/bin/distref) */
#endif
#define BIN DR_BIN
#define DATA "--synthetic_examples=200 --global_batch_size=16"
#define ONE "--distribution_strategy=one_device"
#define MIRRORED3 "--distribution_strategy=mirrored --num_gpus=3 --variant=openmp --threads=2"

static char g_tmp[64];
static char out[16384];

/* Runs a shell command; its output (both streams) in out; exit status. */
#define sh(...) shell_run(out, sizeof out, __VA_ARGS__)
#define expect(status, want, phrase) shell_expect(out, status, want, phrase)


/* "step:loss_bits " of every metrics.jsonl line. */
static void curve(const char *dir, char *dst, size_t n)
{
    const char *s = slurp(dir, "metrics.jsonl"), *b;
    size_t len = 0;
    dst[0] = 0;
    while ((b = strstr(s, "\"loss_bits\":\"")) && len + 12 < n) {
        memcpy(dst + len, b + 13, 10);
        len += 10;
        dst[len++] = ' ';
        dst[len] = 0;
        s = b + 13;
    }
}

/* A summary.json field's text up to the next comma. */
static void field(const char *dir, const char *key, char *dst, size_t n)
{
    const char *s = strstr(slurp(dir, "summary.json"), key);
    size_t len = 0;
    assert_non_null(s);
    while (s[len] && s[len] != ',' && len + 1 < n) len++;
    memcpy(dst, s, len);
    dst[len] = 0;
}

static void same_settings(void **st)
{
    char dir[128], metrics[1 << 16], summary[1 << 16];
    (void)st;
    snprintf(dir, sizeof dir, "%s/same", g_tmp);
    expect(sh(BIN " train --model_dir=%s " ONE " " DATA " --epochs=2", dir), 0, "train: steps=26 ");
    strcpy(metrics, slurp(dir, "metrics.jsonl"));
    strcpy(summary, slurp(dir, "summary.json"));
    expect(sh(BIN " train --model_dir=%s " ONE " " DATA " --epochs=2", dir), 0,
           "already complete at step 26 in ");
    assert_non_null(strstr(out, "; nothing run"));
    assert_null(strstr(out, "weights_sha256="));   /* no result line pretending to be fresh */
    assert_null(strstr(out, "loss="));
    assert_string_equal(slurp(dir, "metrics.jsonl"), metrics);
    assert_string_equal(slurp(dir, "summary.json"), summary);
    /* --mode=train_and_eval run again: the last epoch, already complete, evaluated again; never epoch 1 */
    snprintf(dir, sizeof dir, "%s/same_tae", g_tmp);
    expect(sh(BIN " --mode=train_and_eval --model_dir=%s " ONE " " DATA " --epochs=2", dir), 0, "evaluate epoch 2: ");
    expect(sh(BIN " --mode=train_and_eval --model_dir=%s " ONE " " DATA " --epochs=2", dir), 0,
           "train epoch 2: already complete at step 26 in ");
    assert_non_null(strstr(out, "evaluate epoch 2: checkpoint step=26 "));
    assert_null(strstr(out, "epoch 1"));
    expect(sh(BIN " --mode=train_and_eval --model_dir=%s " ONE " " DATA " --epochs=3", dir), 0,
           "train epoch 3: resumed at step 26 from ");
    assert_null(strstr(out, "epoch 2"));
    /* opencl evaluates each epoch through its own forward pass (the
     * backend's outputs op), whose exact bits are the reference's */
    snprintf(dir, sizeof dir, "%s/same_tae_cl", g_tmp);
    expect(sh(BIN " --mode=train_and_eval --model_dir=%s " ONE " " DATA " --variant=opencl --epochs=1", dir), 0,
           "evaluate epoch 1: checkpoint step=13 ");
    assert_null(strstr(out, "(reference)"));
    expect(sh(BIN " evaluate --model_dir=%s " ONE " " DATA " --variant=ref", dir), 0, "evaluate: checkpoint step=13 ");
    strcpy(metrics, slurp(dir, "eval.json"));
    expect(sh(BIN " evaluate --model_dir=%s " ONE " " DATA " --variant=opencl", dir), 0, "evaluate: checkpoint step=13 ");
    assert_string_equal(slurp(dir, "eval.json"), metrics);
    /* evaluate itself names what it cannot do, exit 2 */
    expect(sh(BIN " evaluate --model_dir=%s " ONE " " DATA " --numerics=fast", dir), 2,
           "not supported: --numerics=fast under --variant=ref: the reference is exact only");
}

static void other_topology_done(void **st)
{
    static const char *const other[][2] = {
        { MIRRORED3, "--distribution_strategy=mirrored, but the run in" },
        { "--distribution_strategy=one_device --variant=openmp", "--variant=openmp, but the run in" },
        { "--distribution_strategy=mirrored --num_gpus=2",
          "--distribution_strategy=mirrored, but the run in" },
    };
    char dir[128], summary[1 << 16];
    (void)st;
    snprintf(dir, sizeof dir, "%s/done", g_tmp);
    expect(sh(BIN " train --model_dir=%s " ONE " " DATA " --epochs=1", dir), 0, "train: steps=13 ");
    strcpy(summary, slurp(dir, "summary.json"));
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        expect(sh(BIN " train --model_dir=%s %s " DATA " --epochs=1", dir, other[i][0]), 2, other[i][1]);
        assert_non_null(strstr(out, "already complete at step 13 under --"));
        assert_non_null(strstr(out, "nothing run"));
        assert_null(strstr(out, "weights_sha256="));
        assert_string_equal(slurp(dir, "summary.json"), summary);
    }
    /* replicas alone: mirrored 2 -> mirrored 3 names the replica count */
    snprintf(dir, sizeof dir, "%s/done2", g_tmp);
    expect(sh(BIN " train --model_dir=%s --distribution_strategy=mirrored --num_gpus=2 " DATA " --epochs=1", dir), 0,
           NULL);
    expect(sh(BIN " train --model_dir=%s --distribution_strategy=mirrored --num_gpus=3 " DATA " --epochs=1", dir), 2,
           "3 replicas (--num_gpus, --tpu), but the run in");
}

static void other_hyperparameter(void **st)
{
    static const char *const other[][2] = {
        { "--learning_rate=0.05", "--learning_rate=0.05, but the checkpoint" },
        { "--seed=7", "--seed=7, but the checkpoint" },
        { "--experiment=mlp_synthetic --global_batch_size=32", "--global_batch_size=32, but the checkpoint" },
        { "--experiment=linear_wide", "--experiment=linear_wide, but the checkpoint" },
        /* another architecture: the first layer and dimension that differ named (issue 31) */
        { "--experiment=cnn_synthetic", "another architecture (layer 0's kind: conv2d 4 filters 3x3 stride 2 on "
          "28x28x1 here, dense 784 -> 128 in the checkpoint)" },
        { "--experiment=linear_wide", "another architecture (layer 0's input: dense 8 -> 1 here, dense 784 -> 128 "
          "in the checkpoint)" },
    };
    char dir[128];
    (void)st;
    snprintf(dir, sizeof dir, "%s/hyper", g_tmp);
    expect(sh(BIN " train --model_dir=%s " ONE " --synthetic_examples=200 --epochs=1", dir), 0, NULL);
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        expect(sh(BIN " train --model_dir=%s " ONE " --synthetic_examples=200 --epochs=1 %s", dir, other[i][0]), 2,
               other[i][1]);
        assert_null(strstr(out, "weights_sha256="));
    }
}

static void other_topology_resume(void **st)
{
    char a[128], b[128], c[128], ca[4096], cb[4096], fa[160], fb[160];
    (void)st;
    snprintf(a, sizeof a, "%s/uninterrupted", g_tmp);
    snprintf(b, sizeof b, "%s/epoch_boundary", g_tmp);
    snprintf(c, sizeof c, "%s/mid_epoch", g_tmp);
    expect(sh(BIN " train --model_dir=%s " ONE " " DATA " --epochs=3", a), 0, "train: steps=39 ");
    /* continued at an epoch's end and mid-epoch, under mirrored x3 on openmp */
    expect(sh(BIN " train --model_dir=%s " ONE " " DATA " --epochs=2", b), 0, NULL);
    expect(sh(BIN " train --model_dir=%s " MIRRORED3 " " DATA " --epochs=3", b), 0,
           "train: resumed at step 26 from ");
    assert_non_null(strstr(out, "steps up to 26 ran under one_device, 1 worker x 1 replica, ref, exact"));
    assert_non_null(strstr(out, "(summary.json lists the segments)"));
    assert_non_null(strstr(out, "mirrored, 1 worker x 3 replicas, openmp, exact)"));
    expect(sh(BIN " train --model_dir=%s " ONE " " DATA " --train_steps=20", c), 0, NULL);
    expect(sh(BIN " train --model_dir=%s " MIRRORED3 " " DATA " --epochs=3", c), 0, "resumed at step 20 ");
    curve(a, ca, sizeof ca);
    for (int k = 0; k < 2; k++) {
        const char *d = k ? c : b;
        curve(d, cb, sizeof cb);
        assert_string_equal(ca, cb);
        field(a, "\"weights_sha256\"", fa, sizeof fa);
        field(d, "\"weights_sha256\"", fb, sizeof fb);
        assert_string_equal(fa, fb);
        field(a, "\"train_accuracy_last_epoch\"", fa, sizeof fa);
        field(d, "\"train_accuracy_last_epoch\"", fb, sizeof fb);
        assert_string_equal(fa, fb);
    }
    {   /* the segments: one_device 1..26, then mirrored x3 on openmp 27..39 */
        const char *s = slurp(b, "summary.json"), *one = strstr(s, "\"segments\""), *two;
        assert_non_null(one);
        assert_non_null(one = strstr(one, "\"strategy\":\"one_device\""));
        assert_non_null(strstr(one, "\"first_step\":1,"));
        assert_non_null(two = strstr(one, "\"strategy\":\"mirrored\""));
        assert_non_null(strstr(one, "\"last_step\":26"));
        assert_true(strstr(one, "\"last_step\":26") < two);
        assert_non_null(strstr(two, "\"replicas_in_sync\":3"));
        assert_non_null(strstr(two, "\"variant\":\"openmp\""));
        assert_non_null(strstr(two, "\"first_step\":27"));
        assert_non_null(strstr(two, "\"last_step\":39"));
    }
    /* the uninterrupted run has one segment */
    assert_null(strstr(strstr(slurp(a, "summary.json"), "\"segments\""), "\"first_step\":27"));
}

/* Under auto_shard_policy=off each of 2 workers reads the whole training
 * set: an epoch trains 2 x 200 examples, and its checkpoint (epoch_examples
 * 400 > 200) must still load and resume (core/checkpoint.c's bounds). */
static void off_policy_resume(void **st)
{
    char dir[128];
    (void)st;
    snprintf(dir, sizeof dir, "%s/off", g_tmp);
    expect(sh("TF_CONFIG='{\"cluster\":{\"worker\":[\"a:1\",\"b:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}' "
              BIN " train --model_dir=%s --distribution_strategy=multi_worker_mirrored --num_gpus=2 "
              "--auto_shard_policy=off " DATA " --epochs=1", dir), 0, "examples=400");
    expect(sh("TF_CONFIG='{\"cluster\":{\"worker\":[\"a:1\",\"b:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}' "
              BIN " train --model_dir=%s --distribution_strategy=multi_worker_mirrored --num_gpus=2 "
              "--auto_shard_policy=off " DATA " --epochs=2", dir), 0, "resumed at step 25");
}

static void numerics_resume(void **st)
{
    char dir[128];
    (void)st;
    snprintf(dir, sizeof dir, "%s/numerics", g_tmp);
    expect(sh(BIN " train --model_dir=%s --distribution_strategy=one_device --variant=openmp " DATA " --train_steps=5",
              dir), 0, NULL);
    expect(sh(BIN " train --model_dir=%s --distribution_strategy=one_device --variant=openmp --numerics=fast " DATA
              " --train_steps=10", dir), 2, "--numerics=fast, but the checkpoint in");
    /* refused by the checkpoint's own numerics bit (core/checkpoint.c), before the segment check */
    /* fast, then another topology: fast's bits depend on it */
    snprintf(dir, sizeof dir, "%s/fast", g_tmp);
    expect(sh(BIN " train --model_dir=%s --distribution_strategy=one_device --variant=openmp --numerics=fast " DATA
              " --train_steps=5", dir), 0, NULL);
    expect(sh(BIN " train --model_dir=%s " MIRRORED3 " --numerics=fast " DATA " --train_steps=10", dir), 2,
           "--distribution_strategy=mirrored, but the checkpoint in");
    assert_non_null(strstr(out, "fast numerics' bits depend on the topology"));
    /* parameter_server's checkpoint under a synchronous strategy */
    snprintf(dir, sizeof dir, "%s/ps", g_tmp);
    expect(sh("TF_CONFIG='{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w:1\"],\"ps\":[\"p:1\"]},"
              "\"task\":{\"type\":\"chief\",\"index\":0}}' " BIN " train --model_dir=%s "
              "--distribution_strategy=parameter_server " DATA " --train_steps=4", dir), 0, NULL);
    expect(sh(BIN " train --model_dir=%s " ONE " " DATA " --train_steps=8", dir), 2,
           "--distribution_strategy=one_device, but the checkpoint in");
    assert_non_null(strstr(out, "parameter_server's asynchronous trajectory is not a synchronous strategy's"));
}

/* Where the bits depend on the world size, another world size is refused:
 * tf_default's divisor (the replicas), OFF's streams (the workers). */
static void world_size_resume(void **st)
{
    char dir[128];
    (void)st;
    snprintf(dir, sizeof dir, "%s/tf_default", g_tmp);
    expect(sh(BIN " train --model_dir=%s " ONE " --loss_reduction=tf_default " DATA " --train_steps=5", dir), 0, NULL);
    expect(sh(BIN " train --model_dir=%s " MIRRORED3 " --loss_reduction=tf_default " DATA " --train_steps=10", dir), 2,
           "1 worker x 3 replicas in sync, but the checkpoint in");
    assert_non_null(strstr(out, "--loss_reduction=tf_default divides each replica's loss by its own examples"));
    expect(sh(BIN " train --model_dir=%s --distribution_strategy=mirrored --num_gpus=1 --loss_reduction=tf_default "
              DATA " --train_steps=10", dir), 0, "resumed at step 5");   /* the same replica count */
    snprintf(dir, sizeof dir, "%s/off_workers", g_tmp);
    expect(sh("TF_CONFIG='{\"cluster\":{\"worker\":[\"a:1\",\"b:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}' "
              BIN " train --model_dir=%s --distribution_strategy=multi_worker_mirrored --num_gpus=2 "
              "--auto_shard_policy=off " DATA " --epochs=1", dir), 0, NULL);
    expect(sh(BIN " train --model_dir=%s --distribution_strategy=mirrored --num_gpus=2 --auto_shard_policy=off " DATA
              " --epochs=2", dir), 2, "1 worker x 2 replicas in sync, but the checkpoint in");
    assert_non_null(strstr(out, "a step's examples depend on the number of workers"));
}

SHELL_GROUP_FIXTURES(g_tmp, "/tmp/distref_run_dir_XXXXXX", BIN)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_settings), cmocka_unit_test(other_topology_done),
        cmocka_unit_test(other_hyperparameter), cmocka_unit_test(other_topology_resume),
        cmocka_unit_test(numerics_resume),
        cmocka_unit_test(off_policy_resume), cmocka_unit_test(world_size_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
