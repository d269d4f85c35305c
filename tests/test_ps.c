/* distref tests — parameter_server training runs: bit identity with
 * one_device for one worker, reproducibility for a given --schedule_seed,
 * worker and ps failures with resume, and every usage error of a run.
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
#include "distref/harness.h"
#include "distref/train.h"
#include "tests/ps_plan_fixture.h"
#include "tests/tmpdir.h"


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
    static char tf[4096];   /* outlives the run, as dr_run_config.tf_config must */
    if (W) {
        tf_config(tf, sizeof tf, W, P, true);
        c->tf_config = tf;
    }
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
    remove_tree(r->dir);
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
static void identity_case(const char *experiment, const char *optimizer, double l2, const char *bn)
{
    static const struct { uint32_t S, P; const char *part; } ps[] = {
        { 0, 1, "" }, { 3, 1, "" }, { 2, 3, "fixed:4" }, { 1, 2, "max_size:20000" },
    };
    dr_run_config c;
    run ref, got;
    base(&c, experiment, "one_device", 0, 0);
    snprintf(c.optimizer, sizeof c.optimizer, "%s", optimizer);
    snprintf(c.batch_norm, sizeof c.batch_norm, "%s", bn);
    c.l2 = l2;
    train(&c, &ref);
    assert_int_equal(ref.rc, DR_OK);
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        base(&c, experiment, "parameter_server", 1, ps[i].P);
        snprintf(c.optimizer, sizeof c.optimizer, "%s", optimizer);
        snprintf(c.ps_partitioner, sizeof c.ps_partitioner, "%s", ps[i].part);
        snprintf(c.batch_norm, sizeof c.batch_norm, "%s", bn);
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

static void identity_sgd(void **state) { (void)state; identity_case("mlp_synthetic", "sgd", DR_UNSET, "sync"); }
static void identity_sgd_l2(void **state) { (void)state; identity_case("mlp_synthetic", "sgd", 1e-3, "sync"); }
static void identity_adam(void **state) { (void)state; identity_case("mlp_synthetic", "adam", DR_UNSET, "sync"); }
static void identity_adam_l2(void **state) { (void)state; identity_case("mlp_synthetic", "adam", 1e-3, "sync"); }
static void identity_linear(void **state) { (void)state; identity_case("linear_ones", "", DR_UNSET, "sync"); }
/* Models beyond Dense: BatchNormalization's moving statistics live on the ps
 * tasks and take each landing's increment; Dropout is keyed by the closure. */
static void identity_cnn(void **state) { (void)state; identity_case("cnn_synthetic", "sgd", DR_UNSET, "sync"); }
static void identity_cnn_replica_adam_l2(void **state)
{
    (void)state;
    identity_case("cnn_synthetic", "adam", 1e-3, "replica");
}
static void identity_resnet(void **state) { (void)state; identity_case("resnet_synthetic", "adam", DR_UNSET, "sync"); }

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

/* cnn_synthetic over three workers, S = 2: the same bits twice; a ps
 * failure and a rerun give the uninterrupted run's bits (the moving
 * statistics are variables of the checkpoint), and they moved off their
 * initial values (mean 0, variance 1). */
static void graph_async_resume(void **state)
{
    dr_run_config c;
    run whole, again, broken;
    dr_checkpoint ck;
    dr_err err;
    bool found, moved = false;
    (void)state;
    async_config(&c, 7);
    snprintf(c.experiment, sizeof c.experiment, "cnn_synthetic");
    c.checkpoint_every = 4;
    train(&c, &whole);
    train(&c, &again);
    assert_int_equal(whole.rc, DR_OK);
    assert_string_equal(whole.metrics, again.metrics);
    assert_string_equal(whole.sha, again.sha);
    assert_true(summary_int(&whole, "max_staleness") > 0);
    snprintf(c.fail_ps, sizeof c.fail_ps, "0:6");
    train(&c, &broken);
    assert_int_equal(broken.rc, DR_EFAULT);
    assert_int_equal(dr_checkpoint_load(broken.dir, &ck, &found, &err), DR_OK);
    assert_true(found);
    for (uint32_t i = ck.nparams - 16; i < ck.nparams; i++)   /* cnn_synthetic's 8 + 8 floats of BN state */
        moved |= ck.params[i] != (i < ck.nparams - 8 ? 0.0f : 1.0f);
    assert_true(moved);
    dr_checkpoint_free(&ck);
    c.fail_ps[0] = 0;
    train_in(&c, &broken, true);
    assert_int_equal(broken.rc, DR_OK);
    assert_string_equal(broken.sha, whole.sha);
    assert_string_equal(broken.metrics, whole.metrics);
    done_with(&whole); done_with(&again); done_with(&broken);
}

/* Resume rules: a finished run continues with more steps (the resumed step
 * is a join of both plans) to the bits of one longer run; a checkpoint of
 * another strategy resumes under three workers only with an error. */
static void resume_rules(void **state)
{
    dr_run_config c;
    run longer, grown;
    (void)state;
    async_config(&c, 7);
    c.checkpoint_every = 4;
    train(&c, &longer);
    assert_int_equal(longer.rc, DR_OK);
    c.train_steps = 8;
    train(&c, &grown);
    assert_int_equal(grown.rc, DR_OK);
    c.train_steps = 12;
    train_in(&c, &grown, true);
    assert_int_equal(grown.rc, DR_OK);
    assert_string_equal(grown.sha, longer.sha);
    assert_string_equal(grown.metrics, longer.metrics);
    done_with(&grown);
    base(&c, "mlp_synthetic", "one_device", 0, 0);
    c.train_steps = 2;
    train(&c, &grown);
    assert_int_equal(grown.rc, DR_OK);
    async_config(&c, 7);
    train_in(&c, &grown, true);
    assert_int_equal(grown.rc, DR_EFORMAT);
    assert_non_null(strstr(grown.msg, "has no ps_schedule.json beside it: it was not written by a "
                                      "parameter_server run, and one with 3 workers resumes only its own"));
    done_with(&grown);
    done_with(&longer);
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
        { "variant", "openmp", DR_EUNSUPPORTED, "--variant=openmp: parameter_server runs in the reference and under mpirun only" },
        { "num_gpus", "1", DR_EUNSUPPORTED, "--num_gpus=1 with parameter_server" },
        { "input_partition_dims", "2,2", DR_EUSAGE, "--input_partition_dims: not with --distribution_strategy=parameter_server" },
        { "layer_devices", "/gpu:0,/gpu:1", DR_EUSAGE, "--layer_devices: not with --distribution_strategy=parameter_server" },
        { "dropout_masks", "masks.bin", DR_EUNSUPPORTED, "not supported: --dropout_masks with --distribution_strategy="
          "parameter_server" },
    };
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dr_run_config c;
        run r;
        base(&c, "mlp_synthetic", "parameter_server", 2, 1);
        if (!strcmp(bad[i].field, "tf_config")) c.tf_config = bad[i].value;
        if (!strcmp(bad[i].field, "fail_worker")) snprintf(c.fail_worker, sizeof c.fail_worker, "%s", bad[i].value);
        if (!strcmp(bad[i].field, "fail_ps")) snprintf(c.fail_ps, sizeof c.fail_ps, "%s", bad[i].value);
        if (!strcmp(bad[i].field, "ps_partitioner")) snprintf(c.ps_partitioner, sizeof c.ps_partitioner, "%s", bad[i].value);
        if (!strcmp(bad[i].field, "variant")) snprintf(c.variant, sizeof c.variant, "%s", bad[i].value);
        if (!strcmp(bad[i].field, "num_gpus")) c.strategy.num_gpus = 1;
        if (!strcmp(bad[i].field, "input_partition_dims"))
            snprintf(c.input_partition_dims, sizeof c.input_partition_dims, "%s", bad[i].value);
        if (!strcmp(bad[i].field, "layer_devices")) snprintf(c.layer_devices, sizeof c.layer_devices, "%s", bad[i].value);
        if (!strcmp(bad[i].field, "dropout_masks")) {
            snprintf(c.experiment, sizeof c.experiment, "cnn_synthetic");
            snprintf(c.dropout_masks, sizeof c.dropout_masks, "%s", bad[i].value);
        }
        train(&c, &r);
        if (r.rc != bad[i].code || !strstr(r.msg, bad[i].says)) {
            print_error("%s=%s: got %d '%s'\n", bad[i].field, bad[i].value, r.rc, r.msg);
            fail();
        }
        done_with(&r);
    }
}

/* A cluster larger than the emulator's 64 workers (issue 27 #1): refused
 * with its message, and the error path frees only what it allocated. Before
 * the fix close_run walked r->wk[] up to the TF_CONFIG's count: UBSan's
 * "index 65 out of bounds for type 'ps_worker [64]'" at 66 workers, and at
 * 70 a free() of bytes past the array (exit 139 in a release build). */
static void too_many_workers(void **state)
{
    static const uint32_t counts[] = { 64, 65, 66, 70, 128, 300 };
    static char tf[8192];   /* outlives the run, as dr_run_config.tf_config must */
    (void)state;
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        dr_run_config c;
        run r;
        base(&c, "mlp_synthetic", "parameter_server", 1, 1);
        tf_config(tf, sizeof tf, counts[i], 1, true);
        c.tf_config = tf;
        train(&c, &r);
        if (r.rc != DR_EUSAGE || !strstr(r.msg, "TF_CONFIG: ") || !strstr(r.msg, " workers")) {
            print_error("%u workers: got %d '%s'\n", counts[i], r.rc, r.msg);
            fail();
        }
        done_with(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(identity_sgd),
        cmocka_unit_test(identity_sgd_l2),
        cmocka_unit_test(identity_adam),
        cmocka_unit_test(identity_adam_l2),
        cmocka_unit_test(identity_linear),
        cmocka_unit_test(identity_cnn),
        cmocka_unit_test(identity_cnn_replica_adam_l2),
        cmocka_unit_test(identity_resnet),
        cmocka_unit_test(graph_async_resume),
        cmocka_unit_test(async_reproducible),
        cmocka_unit_test(worker_failure),
        cmocka_unit_test(worker_failure_single),
        cmocka_unit_test(ps_failure_resume),
        cmocka_unit_test(resume_rules),
        cmocka_unit_test(run_errors),
        cmocka_unit_test(too_many_workers),
    };
    return cmocka_run_group_tests_name("ps", tests, NULL, NULL);
}
