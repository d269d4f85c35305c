/* distref tests — multi_worker_mirrored in the reference: TensorFlow's DATA
 * sharding split, the shard policies, TF_CONFIG's effect, and bit identity
 * with one_device for W = 1..4 workers x 0..2 GPUs x every communication
 * implementation, with and without L2. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distref/factory.h"
#include "distref/input.h"
#include "distref/multiworker.h"
#include "distref/harness.h"
#include "distref/train.h"

/* TensorFlow's input_lib test: 2 workers x 1 replica, batch(2) over 9
 * examples: worker 0 sees [0],[2],[4],[6],[8], worker 1 [1],[3],[5],[7],[]. */
static void data_sharding_tf_example(void **state)
{
    uint32_t ids[9], out[2], off[3];
    (void)state;
    for (uint32_t i = 0; i < 9; i++) ids[i] = i;
    for (uint32_t b = 0; b < 5; b++) {
        uint32_t count = b < 4 ? 2 : 1;
        dr_shard_data(ids + 2 * b, count, 2, 1, out, off);
        assert_int_equal(off[1] - off[0], 1);
        assert_int_equal(out[0], 2 * b);
        assert_int_equal(off[2] - off[1], b < 4 ? 1 : 0);
        if (b < 4) assert_int_equal(out[1], 2 * b + 1);
    }
}

/* The legacy rebatch: range(8).batch(4) over 3 replicas -> [0,1],[2,3],[];
 * with W=2, R=2 and 10 examples, slices of 3: replica (w,r) takes slice r*W+w. */
static void legacy_slices(void **state)
{
    uint32_t ids[10], out[10], off[5];
    (void)state;
    for (uint32_t i = 0; i < 10; i++) ids[i] = i;
    dr_shard_data(ids, 4, 1, 3, out, off);
    assert_int_equal(off[1], 2); assert_int_equal(off[2], 4); assert_int_equal(off[3], 4);
    dr_shard_data(ids, 10, 2, 2, out, off);
    /* worker 0: slices 0 and 2 = [0,1,2], [6,7,8]; worker 1: slices 1 and 3 = [3,4,5], [9] */
    assert_int_equal(off[1], 3); assert_int_equal(out[0], 0);
    assert_int_equal(off[2], 6); assert_int_equal(out[3], 6);
    assert_int_equal(off[3], 9); assert_int_equal(out[6], 3);
    assert_int_equal(off[4], 10); assert_int_equal(out[9], 9);
    /* each replica's first row of the global batch (--dropout_masks): where
     * its slice starts in ids, 0, 6, 3, 9; one worker: its offset */
    assert_int_equal(dr_shard_data_row(10, 2, 2, 0), 0); assert_int_equal(dr_shard_data_row(10, 2, 2, 1), 6);
    assert_int_equal(dr_shard_data_row(10, 2, 2, 2), 3); assert_int_equal(dr_shard_data_row(10, 2, 2, 3), 9);
    for (uint32_t i = 0; i < 4; i++) assert_int_equal(out[off[i]], ids[dr_shard_data_row(10, 2, 2, i)]);
    assert_int_equal(dr_shard_data_row(4, 1, 3, 2), 4);   /* an empty replica: the batch's end */
}

static void policies(void **state)
{
    dr_shard_policy p;
    dr_err err;
    (void)state;
    assert_int_equal(dr_shard_policy_parse("bogus", &p, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "--auto_shard_policy"));
    assert_int_equal(dr_shard_policy_resolve(DR_SHARD_AUTO, 0, 3, &p, &err), DR_OK);
    assert_int_equal(p, DR_SHARD_DATA);
    assert_int_equal(dr_shard_policy_resolve(DR_SHARD_FILE, 1, 2, &p, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "at least one file per worker"));
    assert_int_equal(dr_shard_policy_resolve(DR_SHARD_OFF, 0, 2, &p, &err), DR_OK);
    assert_int_equal(p, DR_SHARD_OFF);
}

/* Auto-shard OFF with TensorFlow's documented sizes for G=7, W=2, R=2:
 * worker 0 cycles [2,2,2,1], worker 1 [2,1,2,2]. Each worker reads all 20
 * examples itself, its two replicas taking the next two sizes each step. */
/* input_mode=function over W=2 workers x 1 replica, n=10, G=4: each
 * pipeline keeps shard(2, w) and batches it by G/N = 2; the workers'
 * replicas dequeue side by side (distribute_datasets_from_function with
 * the guide's dataset_fn). */
static void from_function_sharded(void **state)
{
    static const uint32_t want[3][2][2] = { { { 0, 2 }, { 1, 3 } }, { { 4, 6 }, { 5, 7 } }, { { 8, 99 }, { 9, 99 } } };
    static const uint32_t sizes[3] = { 2, 2, 1 };
    dr_dist_iter it;
    dr_dist_batch b;
    dr_err err;
    uint32_t steps = 0;
    (void)state;
    assert_int_equal(dr_dist_iter_init(&it, 10, 4, 2, 1, false, false, &err), DR_OK);
    assert_int_equal(dr_dist_iter_from_function(&it, 2, &err), DR_OK);
    while (dr_dist_iter_next(&it, &b)) {
        assert_true(steps < 3);
        for (uint32_t w = 0; w < 2; w++) {
            assert_int_equal(b.offset[w + 1] - b.offset[w], sizes[steps]);
            for (uint32_t i = 0; i < sizes[steps]; i++) assert_int_equal(b.ids[b.offset[w] + i], want[steps][w][i]);
        }
        steps++;
    }
    assert_int_equal(steps, 3);
    dr_dist_iter_free(&it);
    /* G not divisible by the replicas is TensorFlow's ValueError */
    assert_int_equal(dr_dist_iter_init(&it, 10, 5, 2, 1, false, false, &err), DR_OK);
    assert_int_equal(dr_dist_iter_from_function(&it, 2, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "not divisible by num_replicas_in_sync 2"));
    dr_dist_iter_free(&it);
}

static void unsharded_tf_example(void **state)
{
    static const uint32_t cycle[2][4] = { { 2, 2, 2, 1 }, { 2, 1, 2, 2 } };
    dr_dist_iter it, again;
    dr_dist_batch b;
    dr_err err;
    uint32_t pos[2] = { 0, 0 }, steps = 0, seen[2] = { 0, 0 };
    (void)state;
    assert_int_equal(dr_dist_iter_init(&it, 20, 7, 4, 1, false, false, &err), DR_OK);
    assert_int_equal(dr_dist_iter_unsharded(&it, 2, &err), DR_OK);
    while (dr_dist_iter_next(&it, &b)) {
        for (uint32_t w = 0; w < 2; w++)
            for (uint32_t r = 0; r < 2; r++) {
                uint32_t k = w * 2 + r, want = cycle[w][(steps * 2 + r) % 4];
                if (want > 20 - pos[w]) want = 20 - pos[w];
                assert_int_equal(b.offset[k + 1] - b.offset[k], want);
                for (uint32_t i = 0; i < want; i++) assert_int_equal(b.ids[b.offset[k] + i], pos[w] + i);
                pos[w] += want;
                seen[w] += want;
            }
        steps++;
    }
    assert_int_equal(seen[0], 20);   /* every worker read the whole epoch once */
    assert_int_equal(seen[1], 20);
    assert_int_equal(steps, 6);      /* worker 1 (7 per two steps) runs one step longer */
    /* Seeking replays the epoch: after 3 steps the next batch is the same. */
    dr_dist_iter_next_epoch(&it);
    for (int i = 0; i < 3; i++) assert_true(dr_dist_iter_next(&it, &b));
    assert_int_equal(dr_dist_iter_init(&again, 20, 7, 4, 1, false, false, &err), DR_OK);
    assert_int_equal(dr_dist_iter_unsharded(&again, 2, &err), DR_OK);
    assert_int_equal(dr_dist_iter_seek(&again, it.epoch, it.position, it.step, &err), DR_OK);
    assert_int_equal(dr_dist_iter_seek(&again, it.epoch, it.position + 1, it.step, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "position"));
    assert_int_equal(dr_dist_iter_seek(&again, it.epoch, it.position, it.step, &err), DR_OK);
    {
        dr_dist_batch b2;
        assert_true(dr_dist_iter_next(&it, &b));
        assert_true(dr_dist_iter_next(&again, &b2));
        assert_int_equal(b.count, b2.count);
        assert_memory_equal(b.ids, b2.ids, b.count * sizeof *b.ids);
        assert_memory_equal(b.offset, b2.offset, 5 * sizeof *b.offset);
    }
    assert_int_equal(dr_dist_iter_unsharded(&again, 3, &err), DR_EUSAGE);
    dr_dist_iter_free(&it);
    dr_dist_iter_free(&again);
}

typedef struct run { char sha[65]; char curve[1024]; int rc; char msg[512]; } run;

static void train_ex(const char *strategy, int gpus, const char *alg, const char *tf_config, double l2,
                     uint64_t bytes_per_pack, uint32_t G, const char *policy, run *out)
{
    dr_run_config c;
    dr_run_result res;
    dr_err err;
    char dir[] = "/tmp/distref_mwms_XXXXXX", path[1200], line[4096], cmd[1200];
    FILE *f;
    dr_run_config_defaults(&c);
    c.synthetic_examples = 63;
    c.global_batch_size = G;
    c.epochs = 1;
    c.l2 = l2;
    snprintf(c.auto_shard_policy, sizeof c.auto_shard_policy, "%s", policy);
    c.bytes_per_pack = bytes_per_pack;
    c.tf_config = tf_config;
    assert_int_equal(dr_get_distribution_strategy(strategy, gpus, alg, 1, NULL, &c.strategy, &err), DR_OK);
    assert_non_null(mkdtemp(dir));
    strcpy(c.model_dir, dir);
    memset(out, 0, sizeof *out);
    out->rc = dr_run_train(&c, &res, &err);
    if (out->rc) snprintf(out->msg, sizeof out->msg, "%s", err.msg);
    else {
        memcpy(out->sha, res.weights_sha256, 65);
        snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
        assert_non_null(f = fopen(path, "r"));
        while (fgets(line, sizeof line, f)) strncat(out->curve, strstr(line, "loss_bits") + 12, 10);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void train(const char *strategy, int gpus, const char *alg, const char *tf_config, double l2,
                  uint64_t bytes_per_pack, run *out)
{
    train_ex(strategy, gpus, alg, tf_config, l2, bytes_per_pack, 20, "auto", out);
}

static void cluster_of(uint32_t workers, bool chief, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "{\"cluster\":{%s\"worker\":[", chief ? "\"chief\":[\"c:1\"]," : "");
    for (uint32_t w = 0; w < workers - chief; w++) len += (size_t)snprintf(buf + len, n - len, "%s\"w%u:1\"", w ? "," : "", w);
    snprintf(buf + len, n - len, "]},\"task\":{\"type\":\"worker\",\"index\":0}}");
}

static void identity(double l2)
{
    static const char *const algs[] = { NULL, "ring", "nccl" };
    run ref, got;
    char tf[1024];
    train("one_device", 0, NULL, "", l2, 0, &ref);
    assert_int_equal(ref.rc, DR_OK);
    for (uint32_t W = 1; W <= 4; W++) {
        for (int g = 0; g <= 2; g++) {
            const char *alg = algs[(W + (uint32_t)g) % 3];
            cluster_of(W, W == 3, tf, sizeof tf);
            train("multi_worker_mirrored", g, alg, W == 1 ? "" : tf, l2, W == 2 ? 40000 : 0, &got);
            if (got.rc) print_error("W=%u gpus=%d: %s\n", W, g, got.msg);
            assert_int_equal(got.rc, DR_OK);
            if (strcmp(got.sha, ref.sha) || strcmp(got.curve, ref.curve)) {
                print_error("W=%u gpus=%d alg=%s l2=%g differs from one_device\n", W, g, alg ? alg : "auto", l2);
                fail();
            }
        }
    }
}

static void identity_plain(void **state) { (void)state; identity(DR_UNSET); }
static void identity_l2(void **state) { (void)state; identity(1e-3); }

/* Auto-shard OFF: W workers each train on all the data, so a global batch
 * of W*B holds every example of a B batch W times. The loss and gradients
 * are then exactly one_device's at batch B (the duplicates scale sum and
 * count alike), whatever the split over replicas. */
static void unsharded_identity(void **state)
{
    run ref, got;
    char tf[1024];
    (void)state;
    for (int l = 0; l < 2; l++) {
        double l2 = l ? 1e-3 : DR_UNSET;
        train("one_device", 0, NULL, "", l2, 0, &ref);
        for (uint32_t W = 2; W <= 3; W++)
            for (int g = 0; g <= 2; g += 2) {
                cluster_of(W, false, tf, sizeof tf);
                train_ex("multi_worker_mirrored", g, "ring", tf, l2, 0, 20 * W, "off", &got);
                if (got.rc) print_error("W=%u gpus=%d: %s\n", W, g, got.msg);
                assert_int_equal(got.rc, DR_OK);
                if (strcmp(got.sha, ref.sha) || strcmp(got.curve, ref.curve)) {
                    print_error("OFF W=%u gpus=%d l2=%g differs from one_device at G=20\n", W, g, l2);
                    fail();
                }
            }
    }
    /* The same data DATA-sharded is a different run: batches of 40 distinct examples. */
    cluster_of(2, false, tf, sizeof tf);
    train_ex("multi_worker_mirrored", 0, "ring", tf, DR_UNSET, 0, 40, "data", &got);
    assert_int_equal(got.rc, DR_OK);
    train("one_device", 0, NULL, "", DR_UNSET, 0, &ref);
    assert_string_not_equal(got.sha, ref.sha);
}

static void cluster_errors(void **state)
{
    run got;
    (void)state;
    train("multi_worker_mirrored", 0, NULL, "{\"cluster\":{\"worker\":[\"a:1\"],\"ps\":[\"p:1\"]},"
          "\"task\":{\"type\":\"worker\",\"index\":0}}", DR_UNSET, 0, &got);
    assert_int_equal(got.rc, DR_EUSAGE);
    assert_non_null(strstr(got.msg, "'ps'"));
    train("mirrored", 2, NULL, "{\"cluster\":{\"worker\":[\"a:1\"]},\"task\":{\"type\":\"worker\",\"index\":3}}",
          DR_UNSET, 0, &got);
    assert_int_equal(got.rc, DR_EUSAGE);
    assert_non_null(strstr(got.msg, "TF_CONFIG"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(data_sharding_tf_example),
        cmocka_unit_test(legacy_slices),
        cmocka_unit_test(policies),
        cmocka_unit_test(unsharded_tf_example),
        cmocka_unit_test(from_function_sharded),
        cmocka_unit_test(unsharded_identity),
        cmocka_unit_test(identity_plain),
        cmocka_unit_test(identity_l2),
        cmocka_unit_test(cluster_errors),
    };
    return cmocka_run_group_tests_name("mwms", tests, NULL, NULL);
}
