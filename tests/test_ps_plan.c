/* distref tests — parameter_server's pieces: TensorFlow's partitioner
 * arithmetic and round-robin placement, the flags of injected failures, the
 * seeded schedule's invariants, and the coordinator API.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distref/checkpoint.h"
#include "distref/ref.h"
#include "distref/factory.h"
#include "distref/ps.h"
#include "distref/rng.h"
#include "distref/train.h"
#include "tests/ps_plan_fixture.h"

/* ---- partitioners ------------------------------------------------------- */

static uint64_t shards(const char *text, uint64_t dim0, uint64_t row_bytes)
{
    dr_partitioner p;
    dr_err err;
    uint64_t k = 0;
    assert_int_equal(dr_partitioner_parse(text, &p, &err), DR_OK);
    assert_int_equal(dr_partition_shards(&p, dim0, row_bytes, &k, &err), DR_OK);
    return k;
}

/* FixedShardsPartitioner: min(num_shards, dim0); "div" rows, extras first. */
static void partition_fixed(void **state)
{
    (void)state;
    assert_int_equal(shards("fixed:2", 10, 12), 2);          /* TF's docstring: [10, 3] -> [2, 1] */
    assert_int_equal(shards("fixed:4", 10, 4), 4);
    assert_int_equal(dr_partition_shard_rows(10, 4, 0), 3);  /* 10 rows, 4 shards: 3, 3, 2, 2 */
    assert_int_equal(dr_partition_shard_rows(10, 4, 1), 3);
    assert_int_equal(dr_partition_shard_rows(10, 4, 2), 2);
    assert_int_equal(dr_partition_shard_rows(10, 4, 3), 2);
    assert_int_equal(shards("fixed:20", 10, 4), 10);         /* never more shards than rows */
    assert_int_equal(shards("", 784, 512), 1);
}

/* MinSizePartitioner: max(1, min(dim0, max_shards, ceil(total_bytes / min_shard_bytes))). */
static void partition_min_size(void **state)
{
    (void)state;
    assert_int_equal(shards("min_size:4:2", 6, 4), 2);     /* docstring: (4, max 2) on [6, 1] -> 2 */
    assert_int_equal(shards("min_size:4:10", 6, 4), 6);    /* (4, max 10) -> 6 */
    /* [1024, 1024] float32 = 4 MiB over 256 KiB = 16 (the min_max_variable_partitioner example) */
    assert_int_equal(shards("min_size:262144:100", 1024, 4096), 16);
    assert_int_equal(shards("min_size:262144:8", 1024, 4096), 8);
    assert_int_equal(shards("min_size:262144", 1024, 4096), 1);   /* max_shards defaults to 1 */
    /* the 784 x 128 kernel, 401408 bytes over 100000: ceil(4.01) = 5 */
    assert_int_equal(shards("min_size:100000:64", 784, 512), 5);
}

/* MaxSizePartitioner: per = max(1, floor(max_shard_bytes / row_bytes)), ceil(dim0 / per),
 * then min(max_shards, .). */
static void partition_max_size(void **state)
{
    (void)state;
    assert_int_equal(shards("max_size:4", 6, 4), 6);       /* docstring: 4 bytes on [6, 1] -> 6 */
    assert_int_equal(shards("max_size:4:2", 6, 4), 2);     /* max_shards=2 -> 2 */
    assert_int_equal(shards("max_size:1024", 6, 4), 1);    /* 1024 bytes -> 1 */
    assert_int_equal(shards("max_size:100000", 784, 512), 5);  /* per = 195 rows: ceil(784/195) = 5 */
    assert_int_equal(shards("max_size:1", 10, 4), 10);     /* a row larger than the limit: one row each */
}

/* _create_variable_round_robin: one counter over all variables and shards. */
static void placement_round_robin(void **state)
{
    dr_ps_variable v[3] = { { 0, 10, 1 }, { 10, 4, 3 }, { 22, 2, 1 } };
    dr_partitioner p;
    dr_ps_layout l;
    dr_err err;
    static const uint32_t two[] = { 0, 1, 0, 1, 0, 1 }, three[] = { 0, 1, 2, 0, 1, 2 };
    (void)state;
    assert_int_equal(dr_partitioner_parse("fixed:2", &p, &err), DR_OK);
    assert_int_equal(dr_ps_place_variables(v, 3, &p, 2, &l, &err), DR_OK);
    assert_int_equal(l.num_shards, 6);
    for (uint32_t i = 0; i < 6; i++) assert_int_equal(l.shard[i].ps_task, two[i]);
    assert_int_equal(l.shard[2].offset, 10);   /* variable 1's first 2 rows of 3 */
    assert_int_equal(l.shard[2].length, 6);
    assert_int_equal(l.shard[3].offset, 16);
    dr_ps_layout_free(&l);
    assert_int_equal(dr_ps_place_variables(v, 3, &p, 3, &l, &err), DR_OK);
    for (uint32_t i = 0; i < 6; i++) assert_int_equal(l.shard[i].ps_task, three[i]);
    dr_ps_layout_free(&l);
    assert_int_equal(dr_partitioner_parse("fixed:4", &p, &err), DR_OK);
    assert_int_equal(dr_ps_place_variables(v, 1, &p, 3, &l, &err), DR_OK);
    assert_int_equal(l.num_shards, 4);
    assert_int_equal(l.shard[0].length, 3); assert_int_equal(l.shard[1].length, 3);
    assert_int_equal(l.shard[2].length, 2); assert_int_equal(l.shard[3].offset, 8);
    assert_int_equal(l.shard[3].ps_task, 0);
    dr_ps_layout_free(&l);
    memset(&p, 0, sizeof p);   /* no partitioner: whole variables, still round-robin */
    assert_int_equal(dr_ps_place_variables(v, 3, &p, 2, &l, &err), DR_OK);
    assert_int_equal(l.num_shards, 3);
    assert_int_equal(l.shard[2].ps_task, 0);
    dr_ps_layout_free(&l);
}

static void partitioner_errors(void **state)
{
    static const struct { const char *text, *says; } bad[] = {
        { "x", "expected fixed:N" }, { "fixed", "expected fixed:N" }, { "fixed:0", "N (the number of shards)" },
        { "fixed:-1", "got '-1'" }, { "fixed:2:3", "fixed takes one number" },
        { "min_size:0", "BYTES" }, { "min_size:10:0", "MAX_SHARDS" }, { "max_size:abc", "got 'abc'" },
        { "max_size:", "BYTES" }, { "bogus:3", "unknown partitioner 'bogus'" },
        { "fixed:99999999999999999999", "2^53" },
    };
    dr_partitioner p;
    dr_err err;
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dr_partitioner_parse(bad[i].text, &p, &err), DR_EUSAGE);
        assert_non_null(strstr(err.msg, "--ps_partitioner"));
        if (!strstr(err.msg, bad[i].says)) { print_error("'%s': %s\n", bad[i].text, err.msg); fail(); }
    }
    assert_int_equal(dr_partitioner_parse("min_size:100", &p, &err), DR_OK);
    assert_int_equal(p.max_shards, 1);
    assert_int_equal(dr_partitioner_parse("max_size:100", &p, &err), DR_OK);
    assert_int_equal(p.max_shards, 0);
}

static void failure_flag_errors(void **state)
{
    static const struct { const char *flag, *text, *says; } bad[] = {
        { "fail_worker", "x", "expected INDEX:STEP" }, { "fail_worker", "1", "expected INDEX:STEP" },
        { "fail_worker", "5:3", "worker 5 does not exist; TF_CONFIG has 2 (0..1)" },
        { "fail_worker", "0:0", "STEP must be an integer from 1" }, { "fail_worker", "a:1", "INDEX must be" },
        { "fail_worker", ":1", "INDEX must be" }, { "fail_ps", "2:1", "ps task 2 does not exist" },
        { "fail_ps", "0:", "STEP must be" }, { "fail_ps", "0:-3", "STEP must be" },
    };
    uint32_t i;
    uint64_t k;
    dr_err err;
    (void)state;
    for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) {
        char flag[32];
        snprintf(flag, sizeof flag, "--%s", bad[j].flag);
        assert_int_equal(dr_ps_parse_failure(bad[j].flag, bad[j].text, 2, &i, &k, &err), DR_EUSAGE);
        assert_non_null(strstr(err.msg, flag));
        if (!strstr(err.msg, bad[j].says)) { print_error("'%s': %s\n", bad[j].text, err.msg); fail(); }
    }
    assert_int_equal(dr_ps_parse_failure("fail_worker", "0:3", 2, &i, &k, &err), DR_OK);
    assert_int_equal(i, 0); assert_int_equal(k, 3);
    assert_int_equal(dr_ps_parse_failure("fail_worker", "", 2, &i, &k, &err), DR_OK);
    assert_int_equal(k, 0);
}

/* ---- the schedule ------------------------------------------------------- */


static void schedule_seeded(void **state)
{
    dr_ps_event *a, *b, *c;
    size_t na, nb, nc;
    (void)state;
    na = plan(3, 2, 7, 0, 0, 50, 0, &a);
    nb = plan(3, 2, 7, 0, 0, 50, 0, &b);
    nc = plan(3, 2, 8, 0, 0, 50, 0, &c);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);                        /* same seed, same plan */
    assert_true(na != nc || memcmp(a, c, na * sizeof *a) != 0);     /* another seed, another plan */
    /* the rule's first draw: nothing in flight, three idle workers to choose from */
    assert_int_equal(a[0].kind, DR_PS_DISPATCH);
    assert_int_equal(a[0].worker, dr_rng_below(7, DR_STREAM_SCHEDULE, 0, 3));
    free(a); free(b); free(c);
}

/* Over many (W, S, seed, join interval): every closure lands exactly once,
 * no landing is staler than S, at most S + 1 closures are ever in flight,
 * versions count landings, and a join leaves nothing in flight. */
static void schedule_invariants(void **state)
{
    (void)state;
    for (uint32_t W = 1; W <= 6; W++)
        for (uint32_t S = 0; S <= 4; S++)
            for (uint64_t seed = 0; seed < 12; seed++) {
                uint64_t n = 40, every = seed % 3 == 0 ? 0 : 5 + seed % 4, version = 0, maxs = 0;
                uint8_t landed[41] = { 0 };
                uint32_t inflight = 0;
                dr_ps_event *ev;
                size_t ne = plan(W, S, seed, 0, 0, n, every, &ev);
                for (size_t i = 0; i < ne; i++) {
                    if (ev[i].kind == DR_PS_DISPATCH) {
                        inflight++;
                        assert_true(inflight <= S + 1);
                        assert_true(inflight <= W);
                        assert_int_equal(ev[i].read_version, version);
                    } else if (ev[i].kind == DR_PS_LAND) {
                        inflight--;
                        assert_int_equal(ev[i].version, ++version);
                        assert_int_equal(ev[i].staleness, version - 1 - ev[i].read_version);
                        assert_true(ev[i].staleness <= S);
                        if (ev[i].staleness > maxs) maxs = ev[i].staleness;
                        assert_int_equal(landed[ev[i].closure]++, 0);
                        if (every && version % every == 0) assert_int_equal(inflight, 0);
                    } else {
                        fail();   /* no failures injected */
                    }
                }
                assert_int_equal(version, n);
                if (S == 0 || W == 1) assert_int_equal(maxs, 0);   /* lock-step / sequential */
                if (W == 1)   /* sequential: dispatch, land, dispatch, land, ... in order */
                    for (size_t i = 0; i < ne; i++) {
                        assert_int_equal(ev[i].kind, i % 2 ? DR_PS_LAND : DR_PS_DISPATCH);
                        assert_int_equal(ev[i].closure, i / 2 + 1);
                    }
                free(ev);
            }
}

/* Somewhere asynchrony must show: W = 3, S = 2 reaches staleness 2. */
static void schedule_is_asynchronous(void **state)
{
    dr_ps_event *ev;
    size_t ne = plan(3, 2, 1, 0, 0, 200, 0, &ev);
    uint64_t maxs = 0;
    (void)state;
    for (size_t i = 0; i < ne; i++) if (ev[i].kind == DR_PS_LAND && ev[i].staleness > maxs) maxs = ev[i].staleness;
    assert_int_equal(maxs, 2);
    free(ev);
}

/* --fail_worker=1:5 with 3 workers: worker 1 fails running closure 5 (only
 * it may take closure 5); that closure goes back to the front of the queue, its next
 * dispatch (on a live worker) is the one that lands; worker 1 rejoins after
 * DR_PS_RECOVERY_LANDINGS landings; exactly n updates land, each closure once. */
static void schedule_worker_failure(void **state)
{
    dr_ps_event *ev;
    size_t ne = plan(3, 2, 3, 1, 5, 30, 0, &ev), fail_at = 0, fails = 0;
    uint64_t lost = 0, lands = 0, after = 0, lands_since = 0;
    uint8_t landed[31] = { 0 };
    (void)state;
    for (size_t i = 0; i < ne; i++) {
        if (ev[i].kind == DR_PS_FAIL) { fails++; fail_at = i; lost = ev[i].closure; assert_int_equal(ev[i].worker, 1); }
        if (ev[i].kind == DR_PS_LAND) { lands++; assert_int_equal(landed[ev[i].closure]++, 0); }
    }
    assert_int_equal(fails, 1);
    assert_int_equal(lost, 5);
    assert_int_equal(lands, 30);
    for (size_t i = 0; i < fail_at; i++)   /* closure 5 went to worker 1 and nowhere else */
        if (ev[i].kind == DR_PS_DISPATCH && ev[i].worker == 1) assert_true(ev[i].closure < 5 || ev[i].closure == lost);
    for (size_t i = fail_at + 1; i < ne; i++) {
        if (ev[i].kind == DR_PS_DISPATCH && !after) {   /* the next dispatch is the lost closure, elsewhere */
            assert_int_equal(ev[i].closure, lost);
            assert_int_not_equal(ev[i].worker, 1);
            after = 1;
        }
        if (ev[i].kind == DR_PS_LAND) lands_since++;
        if (ev[i].kind == DR_PS_RECOVER) {
            assert_int_equal(ev[i].worker, 1);
            assert_int_equal(lands_since, DR_PS_RECOVERY_LANDINGS);
            break;
        }
    }
    free(ev);
    /* Even the last closure: for any seed, worker 1 fails on closure 9 of 9. */
    for (uint64_t seed = 1; seed <= 20; seed++) {
        size_t k = plan(3, 2, seed, 1, 9, 9, 0, &ev), nfail = 0;
        for (size_t i = 0; i < k; i++)
            if (ev[i].kind == DR_PS_FAIL) {
                nfail++;
                assert_int_equal(ev[i].closure, 9);
                assert_int_equal(ev[i].worker, 1);
            }
        assert_int_equal(nfail, 1);
        free(ev);
    }
    /* one worker: it fails, rejoins at once (nobody else can progress) and reruns the closure */
    ne = plan(1, 3, 3, 0, 2, 4, 0, &ev);
    assert_int_equal(ev[2].kind, DR_PS_DISPATCH); assert_int_equal(ev[2].closure, 2);
    assert_int_equal(ev[3].kind, DR_PS_FAIL);
    assert_int_equal(ev[4].kind, DR_PS_RECOVER);
    assert_int_equal(ev[5].kind, DR_PS_DISPATCH); assert_int_equal(ev[5].closure, 2);
    assert_int_equal(ev[6].kind, DR_PS_LAND); assert_int_equal(ev[6].version, 2);
    free(ev);
}

/* ---- the coordinator API ------------------------------------------------ */

/* Each worker's dataset: its shard of 0..9 (w, w + W, ...), the epoch added
 * as 100 * epoch so passes can be told apart. */
static int tiny_fn(const dr_input_context *ctx, uint32_t epoch, void *user, uint32_t **ids, uint32_t *n, dr_err *err)
{
    uint32_t k = 0;
    (void)user; (void)err;
    *ids = malloc(10 * sizeof **ids);
    for (uint32_t i = ctx->input_pipeline_id; i < 10; i += ctx->num_input_pipelines) (*ids)[k++] = i + 100 * epoch;
    *n = k;
    return DR_OK;
}

typedef struct tiny { dr_per_worker_dataset *ds; uint32_t seen[64]; uint32_t nseen; uint32_t lands, stale; } tiny;

/* Every landing's value is what its step function read: the variables of
 * its read version (not the fresher ones it lands on). */
static int tiny_event(const dr_ps_event *ev, float result, void *user, dr_err *err)
{
    tiny *t = user;
    (void)err;
    if (ev->kind != DR_PS_LAND) return DR_OK;
    assert_true(result == (float)ev->read_version);
    t->lands++;
    t->stale += ev->staleness > 0;
    return DR_OK;
}

/* gradient = -1 everywhere (SGD, lr 1: every landing adds 1, so variable 0
 * counts applied updates); result = variable 0 as the worker read it. */
static int tiny_step(const dr_worker_ctx *ctx, void *arg, float *result, dr_err *err)
{
    tiny *t = arg;
    dr_worker_batch b;
    int rc = dr_per_worker_dataset_next(t->ds, ctx, &b, err);
    if (rc) return rc;
    if (ctx->replay) return DR_OK;
    for (uint32_t i = 0; i < b.count; i++) assert_int_equal(b.ids[i] % 100 % ctx->num_workers, ctx->worker);
    for (int p = 0; p < 4; p++) ctx->gradient[p] = -1.0f;
    *result = ctx->variables[0];   /* what it read: the number of updates applied before its read */
    t->seen[t->nseen++] = b.ids[0];
    return DR_OK;
}

static void coordinator_api(void **state)
{
    dr_strategy_spec spec;
    dr_strategy_options sopt = { 0 };
    dr_strategy s;
    dr_coordinator_options o = { 0 };
    dr_coordinator *c;
    dr_ps_variable var = { 0, 4, 1 };
    dr_optimizer sgd = { DR_OPT_SGD, 1.0f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 };
    float params[4] = { 0 }, slots[1], v;
    uint64_t id[6];
    bool done = false;
    int polls = 0;
    dr_err err;
    tiny t = { 0 };
    (void)state;
    assert_int_equal(dr_get_distribution_strategy("parameter_server", 0, NULL, 1, NULL, &spec, &err), DR_OK);
    sopt.num_workers = 2;
    sopt.num_ps = 2;
    assert_int_equal(dr_strategy_create(&spec, &sopt, &s, &err), DR_OK);
    assert_int_equal(s.num_devices, 5);
    assert_string_equal(s.device[0].name, "/job:chief/replica:0/task:0/device:CPU:0");
    assert_string_equal(s.device[dr_ps_worker_device(1)].name, "/job:worker/replica:0/task:1/device:CPU:0");
    assert_string_equal(s.device[dr_ps_task_device(&s, 1)].name, "/job:ps/replica:0/task:1/device:CPU:0");
    assert_int_equal(dr_strategy_num_replicas(&s), 1);
    o.staleness = 1;
    o.schedule_seed = 5;
    o.on_event = tiny_event;
    o.user = &t;
    assert_int_equal(dr_coordinator_create(&s, &o, &c, &err), DR_OK);
    assert_int_equal(dr_coordinator_schedule(c, tiny_step, &t, &id[0], &err), DR_ESTATE);   /* no variables yet */
    assert_int_equal(dr_coordinator_create_variables(c, &var, 1, &sgd, params, slots, &err), DR_OK);
    assert_int_equal(dr_coordinator_create_per_worker_dataset(c, tiny_fn, NULL, 2, &t.ds, &err), DR_OK);
    for (int i = 0; i < 6; i++) assert_int_equal(dr_coordinator_schedule(c, tiny_step, &t, &id[i], &err), DR_OK);
    assert_int_equal(id[0], 1); assert_int_equal(id[5], 6);
    assert_int_equal(dr_remote_value_fetch(c, 3, &v, &err), DR_OK);   /* runs the schedule until 3 lands */
    while (!done) { assert_int_equal(dr_coordinator_done(c, &done, &err), DR_OK); polls++; }
    assert_int_equal(t.lands, 6);   /* polling done() alone ran the rest, one event per poll */
    assert_true(polls > 1);
    assert_int_equal(dr_coordinator_join(c, &err), DR_OK);
    dr_coordinator_read_variables(c, params, slots);
    for (int p = 0; p < 4; p++) assert_true(params[p] == 6.0f);   /* six updates landed, none lost */
    assert_int_equal(t.nseen, 6);
    assert_int_equal(t.lands, 6);
    assert_true(t.stale > 0);   /* some update landed on variables newer than it read */
    for (int i = 1; i <= 6; i++) assert_int_equal(dr_remote_value_fetch(c, (uint64_t)i, &v, &err), DR_OK);
    assert_int_equal(dr_remote_value_fetch(c, 7, &v, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "remote value id 7"));
    dr_coordinator_free(c);
    /* the coordinator rejects other strategies and ps tasks that do not exist */
    o.fail_ps = 2; o.fail_ps_step = 1;
    assert_int_equal(dr_coordinator_create(&s, &o, &c, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "--fail_ps: ps task 2 does not exist"));
    spec.num_gpus = 1;
    assert_int_equal(dr_strategy_create(&spec, &sopt, &s, &err), DR_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "--num_gpus=1 with parameter_server"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(partition_fixed),
        cmocka_unit_test(partition_min_size),
        cmocka_unit_test(partition_max_size),
        cmocka_unit_test(placement_round_robin),
        cmocka_unit_test(partitioner_errors),
        cmocka_unit_test(failure_flag_errors),
        cmocka_unit_test(schedule_seeded),
        cmocka_unit_test(schedule_invariants),
        cmocka_unit_test(schedule_is_asynchronous),
        cmocka_unit_test(schedule_worker_failure),
        cmocka_unit_test(coordinator_api),
    };
    return cmocka_run_group_tests_name("ps_plan", tests, NULL, NULL);
}
