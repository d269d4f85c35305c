/* distref tests — parameter_server: TensorFlow's partitioner arithmetic and
 * round-robin placement, the seeded schedule's invariants, the coordinator
 * API, bit identity with one_device for one worker, reproducibility for a
 * given --schedule_seed, worker and ps failures, and every usage error.
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
#include "distref/factory.h"
#include "distref/ps.h"
#include "distref/rng.h"
#include "distref/train.h"

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

static size_t plan(uint32_t W, uint32_t S, uint64_t seed, uint32_t fw, uint64_t fk, uint64_t n, uint64_t every,
                   dr_ps_event **ev)
{
    dr_ps_schedule_options o = { W, S, seed, fw, fk };
    size_t count;
    dr_err err;
    assert_int_equal(dr_ps_plan(&o, n, every, ev, &count, &err), DR_OK);
    return count;
}

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

/* --fail_worker=1:5 with 3 workers: worker 1 fails on the first closure >= 5
 * it runs; that closure goes back to the front of the queue, its next
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
    assert_true(lost >= 5);
    assert_int_equal(lands, 30);
    for (size_t i = 0; i < fail_at; i++)   /* it was worker 1's first closure >= 5 */
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
    dr_optimizer sgd = { DR_OPT_SGD, 1.0f, 0.0f, false, 0.9f, 0.999f, 1e-7f };
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
    assert_true(polls >= 1);
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

/* ---- training runs ------------------------------------------------------ */

#define EXAMPLES 63   /* 3 batches of 20 and a short one of 3 */
#define BATCH 20

typedef struct run {
    int      rc;
    char     msg[512];
    char     sha[65];
    char     losses[4096];      /* the loss_bits column */
    char    *metrics;           /* the whole metrics.jsonl */
    char     summary[8192];
    char     dir[64];
} run;

static void tf_config(char *buf, size_t n, uint32_t workers, uint32_t ps, bool chief)
{
    size_t len = (size_t)snprintf(buf, n, "{\"cluster\":{%s\"worker\":[", chief ? "\"chief\":[\"c:1\"]," : "");
    for (uint32_t w = 0; w < workers; w++) len += (size_t)snprintf(buf + len, n - len, "%s\"w%u:1\"", w ? "," : "", w);
    len += (size_t)snprintf(buf + len, n - len, "],\"ps\":[");
    for (uint32_t p = 0; p < ps; p++) len += (size_t)snprintf(buf + len, n - len, "%s\"p%u:1\"", p ? "," : "", p);
    snprintf(buf + len, n - len, "]},\"task\":{\"type\":\"%s\",\"index\":0}}", chief ? "chief" : "worker");
}

static void base(dr_run_config *c, const char *experiment, const char *strategy, uint32_t W, uint32_t P)
{
    dr_err err;
    dr_run_config_defaults(c);
    snprintf(c->experiment, sizeof c->experiment, "%s", experiment);
    c->global_batch_size = BATCH;
    c->synthetic_examples = EXAMPLES;
    c->epochs = 2;
    assert_int_equal(dr_get_distribution_strategy(strategy, 0, NULL, 1, NULL, &c->strategy, &err), DR_OK);
    if (W) tf_config(c->tf_config, sizeof c->tf_config, W, P, true);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long n;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc((size_t)n + 1, 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

/* Trains into out->dir (a new temporary one unless keep_dir) and reads back
 * metrics.jsonl and summary.json. */
static void train_in(dr_run_config *c, run *out, bool keep_dir)
{
    dr_run_result res;
    dr_err err;
    char path[1200], *s, *p;
    if (!keep_dir) {
        memset(out, 0, sizeof *out);
        strcpy(out->dir, "/tmp/distref_ps_XXXXXX");
        assert_non_null(mkdtemp(out->dir));
    }
    free(out->metrics);
    out->metrics = NULL;
    out->losses[0] = out->summary[0] = 0;
    snprintf(c->model_dir, sizeof c->model_dir, "%s", out->dir);
    out->rc = dr_run_train(c, &res, &err);
    snprintf(out->msg, sizeof out->msg, "%s", out->rc ? err.msg : "");
    if (out->rc == DR_OK) memcpy(out->sha, res.weights_sha256, 65);
    snprintf(path, sizeof path, "%s/metrics.jsonl", out->dir);
    out->metrics = slurp(path);
    for (p = out->metrics; p && (p = strstr(p, "\"loss_bits\":\"")); p += 13) strncat(out->losses, p + 13, 10);
    snprintf(path, sizeof path, "%s/summary.json", out->dir);
    if ((s = slurp(path))) { snprintf(out->summary, sizeof out->summary, "%s", s); free(s); }
}

static void train(dr_run_config *c, run *out) { train_in(c, out, false); }

static void done_with(run *r)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->dir);
    assert_int_equal(system(cmd), 0);
    free(r->metrics);
    r->metrics = NULL;
}

static long summary_int(const run *r, const char *key)
{
    char pat[64];
    const char *p;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    p = strstr(r->summary, pat);
    assert_non_null(p);
    return strtol(p + strlen(pat), NULL, 10);
}

static uint32_t count_lines(const char *s)
{
    uint32_t n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* One worker: bit-identical to one_device, step by step, at any staleness
 * bound and with any ps count and partitioner (sharding is elementwise). */
static void identity_case(const char *experiment, const char *optimizer, double l2)
{
    static const struct { uint32_t S, P; const char *part; } ps[] = {
        { 0, 1, "" }, { 3, 1, "" }, { 2, 3, "fixed:4" }, { 1, 2, "max_size:20000" },
    };
    dr_run_config c;
    run ref, got;
    base(&c, experiment, "one_device", 0, 0);
    snprintf(c.optimizer, sizeof c.optimizer, "%s", optimizer);
    c.l2 = l2;
    train(&c, &ref);
    assert_int_equal(ref.rc, DR_OK);
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        base(&c, experiment, "parameter_server", 1, ps[i].P);
        snprintf(c.optimizer, sizeof c.optimizer, "%s", optimizer);
        snprintf(c.ps_partitioner, sizeof c.ps_partitioner, "%s", ps[i].part);
        c.l2 = l2;
        c.staleness = ps[i].S;
        c.schedule_seed = 11 + i;
        train(&c, &got);
        if (got.rc) print_error("%s\n", got.msg);
        assert_int_equal(got.rc, DR_OK);
        if (strcmp(got.losses, ref.losses) || strcmp(got.sha, ref.sha)) {
            print_error("%s %s l2=%g S=%u P=%u '%s': differs from one_device\n  %.60s\n  %.60s\n",
                        experiment, optimizer, l2, ps[i].S, ps[i].P, ps[i].part, got.losses, ref.losses);
            fail();
        }
        assert_int_equal(count_lines(got.metrics), count_lines(ref.metrics));   /* 2 epochs, step for step */
        done_with(&got);
    }
    done_with(&ref);
}

static void identity_sgd(void **state) { (void)state; identity_case("mlp_synthetic", "sgd", -1); }
static void identity_sgd_l2(void **state) { (void)state; identity_case("mlp_synthetic", "sgd", 1e-3); }
static void identity_adam(void **state) { (void)state; identity_case("mlp_synthetic", "adam", -1); }
static void identity_adam_l2(void **state) { (void)state; identity_case("mlp_synthetic", "adam", 1e-3); }
static void identity_linear(void **state) { (void)state; identity_case("linear_ones", "", -1); }

static void async_config(dr_run_config *c, uint64_t seed)
{
    base(c, "mlp_synthetic", "parameter_server", 3, 2);
    c->staleness = 2;
    c->schedule_seed = seed;
    c->train_steps = 12;
}

/* W = 3, S = 2: the same --schedule_seed gives the same metrics.jsonl and
 * weights twice; another seed gives other bits; updates really were stale
 * (max_staleness > 0) and never beyond the bound. */
static void async_reproducible(void **state)
{
    dr_run_config c;
    run a, b, other;
    (void)state;
    async_config(&c, 7);
    train(&c, &a);
    train(&c, &b);
    assert_int_equal(a.rc, DR_OK);
    assert_int_equal(b.rc, DR_OK);
    assert_string_equal(a.metrics, b.metrics);
    assert_string_equal(a.sha, b.sha);
    assert_int_equal(count_lines(a.metrics), 12);
    assert_true(summary_int(&a, "max_staleness") > 0);
    assert_true(summary_int(&a, "max_staleness") <= 2);
    assert_int_equal(summary_int(&a, "num_workers"), 3);
    assert_int_equal(summary_int(&a, "num_ps"), 2);
    async_config(&c, 8);
    train(&c, &other);
    assert_int_equal(other.rc, DR_OK);
    assert_string_not_equal(other.sha, a.sha);
    assert_string_not_equal(other.losses, a.losses);
    done_with(&a); done_with(&b); done_with(&other);
}

/* The metrics line of closure `closure`: its worker and read version. */
static void landing_of(const run *r, uint64_t closure, uint32_t *worker, uint64_t *read, bool *rerun)
{
    char pat[48];
    const char *p, *eol;
    snprintf(pat, sizeof pat, "\"closure\":%llu,", (unsigned long long)closure);
    p = strstr(r->metrics, pat);
    assert_non_null(p);
    assert_null(strstr(p + 1, pat));   /* exactly one line: it was applied once */
    eol = strchr(p, '\n');
    *worker = (uint32_t)strtoul(strstr(p, "\"worker\":") + 9, NULL, 10);
    *read = strtoull(strstr(p, "\"read_version\":") + 15, NULL, 10);
    *rerun = strstr(p, "rerun_after_failure_of_worker") && strstr(p, "rerun_after_failure_of_worker") < eol;
}

/* --fail_worker=1:3, W = 3, S = 2, 12 steps. What holds:
 *   - the run completes with exactly 12 updates applied, one line each;
 *   - it matches the plan: the closure worker 1 lost (FAIL in dr_ps_plan)
 *     has one metrics line, from another worker, read at the version its
 *     rerun was dispatched at (so the lost result, computed at an earlier
 *     version, was never applied), and marked as a rerun;
 *   - summary: worker_failures 1, rerun_closures 1, worker_recoveries 1;
 *   - twice the same bits; different bits from the run without the failure. */
static void worker_failure(void **state)
{
    dr_run_config c;
    run a, b, clean;
    dr_ps_event *ev;
    size_t ne;
    uint64_t lost = 0, lost_read = 0, rerun_read = 0, read;
    uint32_t worker;
    bool rerun;
    (void)state;
    async_config(&c, 7);
    snprintf(c.fail_worker, sizeof c.fail_worker, "1:3");
    train(&c, &a);
    train(&c, &b);
    if (a.rc) print_error("%s\n", a.msg);
    assert_int_equal(a.rc, DR_OK);
    assert_int_equal(count_lines(a.metrics), 12);
    assert_int_equal(summary_int(&a, "updates_applied"), 12);
    assert_int_equal(summary_int(&a, "worker_failures"), 1);
    assert_int_equal(summary_int(&a, "rerun_closures"), 1);
    assert_int_equal(summary_int(&a, "worker_recoveries"), 1);
    ne = plan(3, 2, 7, 1, 3, 12, 0, &ev);
    for (size_t i = 0; i < ne; i++) {
        if (ev[i].kind == DR_PS_FAIL) { lost = ev[i].closure; lost_read = ev[i].read_version; }
        else if (lost && !rerun_read && ev[i].kind == DR_PS_DISPATCH) { assert_int_equal(ev[i].closure, lost); rerun_read = ev[i].version; }
    }
    free(ev);
    assert_true(lost >= 3);
    landing_of(&a, lost, &worker, &read, &rerun);
    assert_int_not_equal(worker, 1);
    assert_int_equal(read, rerun_read);
    assert_true(read > lost_read);
    assert_true(rerun);
    assert_string_equal(a.metrics, b.metrics);
    assert_string_equal(a.sha, b.sha);
    c.fail_worker[0] = 0;
    train(&c, &clean);
    assert_int_equal(clean.rc, DR_OK);
    assert_int_equal(summary_int(&clean, "worker_failures"), 0);
    assert_string_not_equal(clean.sha, a.sha);
    done_with(&a); done_with(&b); done_with(&clean);
}

/* One worker fails at step 3: it rejoins at once with its dataset rebuilt,
 * reruns closure 3 on the first batch of its data again (the ids of step
 * 1), and the run completes with 8 updates, no longer one_device's bits. */
static void worker_failure_single(void **state)
{
    dr_run_config c;
    run a, ref;
    char first[17], third[17];
    const char *p;
    (void)state;
    base(&c, "mlp_synthetic", "one_device", 0, 0);
    train(&c, &ref);
    base(&c, "mlp_synthetic", "parameter_server", 1, 1);
    snprintf(c.fail_worker, sizeof c.fail_worker, "0:3");
    train(&c, &a);
    assert_int_equal(a.rc, DR_OK);
    assert_int_equal(count_lines(a.metrics), 8);
    assert_int_equal(summary_int(&a, "worker_failures"), 1);
    p = strstr(a.metrics, "\"replica_ids\":[\"");
    memcpy(first, p + 16, 16); first[16] = 0;
    p = strstr(strstr(a.metrics, "\"step\":3,"), "\"replica_ids\":[\"");
    memcpy(third, p + 16, 16); third[16] = 0;
    assert_string_equal(first, third);
    assert_non_null(strstr(strstr(a.metrics, "\"step\":3,"), "\"rerun_after_failure_of_worker\":0"));
    assert_string_not_equal(a.sha, ref.sha);
    assert_memory_equal(a.losses, ref.losses, 20);   /* steps 1 and 2 are still one_device's */
    done_with(&a); done_with(&ref);
}

/* --fail_ps=1:7 with checkpoints every 4 steps: DR_EFAULT naming the task,
 * the step and the checkpoint to resume from; model_dir keeps the step-4
 * checkpoint and 4 metrics lines; a rerun without the fault completes and
 * equals, bit for bit and line for line, the run that never failed. */
static void ps_failure_resume(void **state)
{
    dr_run_config c;
    run whole, broken;
    dr_checkpoint ck;
    dr_err err;
    bool found;
    char want[256];
    (void)state;
    async_config(&c, 7);
    c.checkpoint_every = 4;
    snprintf(c.fail_worker, sizeof c.fail_worker, "1:3");   /* the replay must cross a worker failure too */
    train(&c, &whole);
    assert_int_equal(whole.rc, DR_OK);
    snprintf(c.fail_ps, sizeof c.fail_ps, "1:7");
    train(&c, &broken);
    assert_int_equal(broken.rc, DR_EFAULT);
    assert_non_null(strstr(broken.msg, "parameter server /job:ps/replica:0/task:1 failed at step 7 (UnavailableError); "
                                       "training stopped; rerun without the fault to resume from the last checkpoint in "));
    snprintf(want, sizeof want, "%s (step 4)", broken.dir);
    assert_non_null(strstr(broken.msg, want));
    assert_int_equal(dr_checkpoint_load(broken.dir, &ck, &found, &err), DR_OK);
    assert_true(found);
    assert_int_equal(ck.step, 4);
    dr_checkpoint_free(&ck);
    assert_int_equal(count_lines(broken.metrics), 4);
    c.fail_ps[0] = 0;
    c.schedule_seed = 8;   /* another plan would continue from positions never reached: refused */
    train_in(&c, &broken, true);
    assert_int_equal(broken.rc, DR_EFORMAT);
    assert_non_null(strstr(broken.msg, "ps_schedule.json: the checkpoint's schedule was"));
    assert_non_null(strstr(broken.msg, "\"schedule_seed\":7"));
    c.schedule_seed = 7;
    train_in(&c, &broken, true);
    assert_int_equal(broken.rc, DR_OK);
    assert_string_equal(broken.sha, whole.sha);
    assert_string_equal(broken.metrics, whole.metrics);
    assert_int_equal(summary_int(&broken, "worker_failures"), 1);   /* replayed, still counted */
    done_with(&whole); done_with(&broken);
    /* without checkpoints the message says the rerun starts over */
    async_config(&c, 7);
    snprintf(c.fail_ps, sizeof c.fail_ps, "0:2");
    train(&c, &broken);
    assert_int_equal(broken.rc, DR_EFAULT);
    assert_non_null(strstr(broken.msg, "has no checkpoint yet (use --checkpoint_every): a rerun starts from step 0"));
    done_with(&broken);
}

/* Every usage error of a parameter_server run: code and message. */
static void run_errors(void **state)
{
    static const struct { const char *field, *value; int code; const char *says; } bad[] = {
        { "tf_config", "", DR_EUSAGE, "TF_CONFIG: parameter_server needs a cluster with at least one 'worker' and one 'ps'" },
        { "tf_config", "{}", DR_EUSAGE, "it is empty" },
        { "tf_config", "{\"cluster\":{\"worker\":[\"a:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}", DR_EUSAGE,
          "TF_CONFIG: parameter_server needs at least one 'worker' and one 'ps' task" },
        { "tf_config", "{\"cluster\":{\"ps\":[\"a:1\"]},\"task\":{\"type\":\"ps\",\"index\":0}}", DR_EUSAGE,
          "at least one 'worker'" },
        { "fail_worker", "x", DR_EUSAGE, "--fail_worker: expected INDEX:STEP" },
        { "fail_worker", "1", DR_EUSAGE, "--fail_worker: expected INDEX:STEP" },
        { "fail_worker", "5:3", DR_EUSAGE, "--fail_worker=5:3: worker 5 does not exist; TF_CONFIG has 2" },
        { "fail_worker", "0:0", DR_EUSAGE, "--fail_worker=0:0: STEP must be" },
        { "fail_worker", "0:9", DR_EUSAGE, "--fail_worker=0:9: step 9 is beyond the 8 step functions" },
        { "fail_ps", "1:2", DR_EUSAGE, "--fail_ps=1:2: ps task 1 does not exist; TF_CONFIG has 1" },
        { "fail_ps", "0:x", DR_EUSAGE, "--fail_ps=0:x: STEP must be" },
        { "fail_ps", "0:100", DR_EUSAGE, "--fail_ps=0:100: step 100 is beyond the 8 steps" },
        { "ps_partitioner", "fixed:0", DR_EUSAGE, "--ps_partitioner=fixed:0" },
        { "variant", "openmp", DR_EUNSUPPORTED, "--variant=openmp: parameter_server is built in the reference only" },
        { "num_gpus", "1", DR_EUNSUPPORTED, "--num_gpus=1 with parameter_server" },
    };
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dr_run_config c;
        run r;
        base(&c, "mlp_synthetic", "parameter_server", 2, 1);
        if (!strcmp(bad[i].field, "tf_config")) snprintf(c.tf_config, sizeof c.tf_config, "%s", bad[i].value);
        if (!strcmp(bad[i].field, "fail_worker")) snprintf(c.fail_worker, sizeof c.fail_worker, "%s", bad[i].value);
        if (!strcmp(bad[i].field, "fail_ps")) snprintf(c.fail_ps, sizeof c.fail_ps, "%s", bad[i].value);
        if (!strcmp(bad[i].field, "ps_partitioner")) snprintf(c.ps_partitioner, sizeof c.ps_partitioner, "%s", bad[i].value);
        if (!strcmp(bad[i].field, "variant")) snprintf(c.variant, sizeof c.variant, "%s", bad[i].value);
        if (!strcmp(bad[i].field, "num_gpus")) c.strategy.num_gpus = 1;
        train(&c, &r);
        if (r.rc != bad[i].code || !strstr(r.msg, bad[i].says)) {
            print_error("%s=%s: got %d '%s'\n", bad[i].field, bad[i].value, r.rc, r.msg);
            fail();
        }
        done_with(&r);
    }
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
        cmocka_unit_test(identity_sgd),
        cmocka_unit_test(identity_sgd_l2),
        cmocka_unit_test(identity_adam),
        cmocka_unit_test(identity_adam_l2),
        cmocka_unit_test(identity_linear),
        cmocka_unit_test(async_reproducible),
        cmocka_unit_test(worker_failure),
        cmocka_unit_test(worker_failure_single),
        cmocka_unit_test(ps_failure_resume),
        cmocka_unit_test(run_errors),
    };
    return cmocka_run_group_tests_name("ps", tests, NULL, NULL);
}
