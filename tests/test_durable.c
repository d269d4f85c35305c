/* Nothing lost (issue 11): bin/distref against a hostile run directory and
 * a user who interrupts it. Each test is one defect of the list:
 *   fifo_checkpoint      ckpt.bin as a FIFO is refused, not waited on; a
 *                        DRCKPT02 checkpoint is refused naming the version
 *   finished_run         running a finished run again reports its results
 *                        and changes no file; --train_steps below the
 *                        checkpoint is a usage error saying so
 *   settings_on_resume   a resume with another learning rate, L2, shuffle
 *                        or loss divisor is refused naming both values
 *   stale_temps          *.tmp.<pid> files of a killed write are removed
 *   signals              SIGINT and SIGTERM checkpoint and exit 130/143;
 *                        the resume gives the uninterrupted run's bits,
 *                        train_accuracy_last_epoch included (the epoch's
 *                        counters are in the checkpoint)
 *   negative_values      --learning_rate, --momentum, --l2 below 0 are
 *                        refused, not read as "the default"
 *   flag_scopes          a flag for another strategy, variant or command
 *                        is refused naming the flag and what it is for
 *   unknown_command      `distref fly` says "unknown command"
 *   tf_config_text       TF_CONFIG null / 42 name their JSON type; 1,000
 *                        workers (20 KB) are fine; no "--TF_CONFIG" prefix;
 *                        an evaluator task does not train
 *   evaluate_unwritable  evaluate prints its result even when eval.json
 *                        cannot be written, then fails naming the file
 *   parameter_server     the same for the self-scheduled strategy: a
 *                        finished run reports its results and writes
 *                        nothing, a resume with another learning rate is
 *                        refused, SIGINT stops at a join and resumes to
 *                        the uninterrupted run's bits
 *   position_message     a checkpoint with an impossible data position is
 *                        refused with a readable message (it was formatted
 *                        into itself)
 * The kill-at-every-write sweep is the durability suite of make
 * conformance (scripts/durability.sh). Run from the repository root. */
#include "distref/checkpoint.h"

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

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef DR_BIN
#define DR_BIN "bin/distref"   /* the Makefile passes its build's CLI (SANITIZE=1: build/san/bin/distref) */
#endif
#define BIN DR_BIN
#define RUNF "--distribution_strategy=mirrored --num_gpus=2 --synthetic_examples=200 --global_batch_size=16"

static char g_tmp[64];
static char out[16384];

/* Runs a shell command; its output (both streams) in out; exit status. */
#define sh(...) shell_run(out, sizeof out, __VA_ARGS__)

/* summary.json without its wall_seconds (the only field that may differ). */
static void summary_core(const char *dir, char *dst, size_t n)
{
    const char *s = slurp(dir, "summary.json"), *w = strstr(s, "\"wall_seconds\"");
    snprintf(dst, n, "%.*s", w ? (int)(w - s) : (int)strlen(s), s);
}

static void fifo_checkpoint(void **st)
{
    char dir[128], path[160];
    (void)st;
    snprintf(dir, sizeof dir, "%s/fifo", g_tmp);
    snprintf(path, sizeof path, "%s/ckpt.bin", dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_equal(mkfifo(path, 0644), 0);
    assert_int_equal(sh("timeout 20 " BIN " train --model_dir=%s --experiment=linear_ones", dir), 1);
    assert_non_null(strstr(out, "ckpt.bin: not a regular file"));
    /* a checkpoint of the previous format is refused naming its version */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(sh("head -c 400 /dev/zero | sed 's/^/DRCKPT02/' > %s", path), 0);
    assert_int_equal(sh(BIN " train --model_dir=%s --experiment=linear_ones", dir), 1);
    assert_non_null(strstr(out, "written by another distref version"));
}

static void finished_run(void **st)
{
    char dir[128], before[3][1 << 17];
    (void)st;
    snprintf(dir, sizeof dir, "%s/done", g_tmp);
    assert_int_equal(sh(BIN " train --model_dir=%s " RUNF " --epochs=2", dir), 0);
    memcpy(before[0], slurp(dir, "ckpt.bin"), 64);
    strcpy(before[1], slurp(dir, "metrics.jsonl"));
    strcpy(before[2], slurp(dir, "summary.json"));
    const char *first = strstr(before[2], "\"final_loss_bits\"");
    assert_non_null(first);
    assert_int_equal(sh(BIN " train --model_dir=%s " RUNF " --epochs=2", dir), 0);
    assert_null(strstr(out, "loss=0 (0x00000000)"));
    assert_string_equal(slurp(dir, "metrics.jsonl"), before[1]);
    assert_string_equal(slurp(dir, "summary.json"), before[2]);
    assert_memory_equal(slurp(dir, "ckpt.bin"), before[0], 64);
    assert_int_equal(sh(BIN " train --model_dir=%s " RUNF " --epochs=1", dir), 2);
    assert_non_null(strstr(out, "--epochs=1: the checkpoint in"));
    assert_int_equal(sh(BIN " train --model_dir=%s/steps --experiment=linear_ones --train_steps=6", g_tmp), 0);
    assert_int_equal(sh(BIN " train --model_dir=%s/steps --experiment=linear_ones --train_steps=4", g_tmp), 2);
    assert_non_null(strstr(out, "--train_steps=4: the checkpoint in"));
    assert_non_null(strstr(out, "already at step 6"));
}

static void settings_on_resume(void **st)
{
    static const char *const changed[][2] = {
        { "--learning_rate=0.05", "--learning_rate=0.05, but the checkpoint" },
        { "--l2=0.001", "--l2=0.001, but the checkpoint" },
        { "--shuffle=false", "--shuffle=false, but the checkpoint" },
        { "--loss_reduction=examples_in_step", "--loss_reduction=examples_in_step, but the checkpoint" },
        { "--momentum=0.5", "--momentum=0.5, but the checkpoint" },
    };
    char dir[128];
    (void)st;
    snprintf(dir, sizeof dir, "%s/settings", g_tmp);
    assert_int_equal(sh(BIN " train --model_dir=%s --train_steps=3", dir), 0);
    for (size_t i = 0; i < sizeof changed / sizeof changed[0]; i++) {
        assert_int_equal(sh(BIN " train --model_dir=%s --train_steps=5 %s", dir, changed[i][0]), 2);
        if (!strstr(out, changed[i][1])) fail_msg("%s: %s", changed[i][0], out);
    }
}

static void stale_temps(void **st)
{
    char dir[128], path[200];
    struct stat sb;
    FILE *f;
    (void)st;
    snprintf(dir, sizeof dir, "%s/temps", g_tmp);
    assert_int_equal(sh(BIN " train --model_dir=%s --experiment=linear_ones --train_steps=2", dir), 0);
    snprintf(path, sizeof path, "%s/ckpt.bin.tmp.999999", dir);
    assert_non_null(f = fopen(path, "w"));
    fputs("a killed write", f);
    fclose(f);
    assert_int_equal(sh(BIN " train --model_dir=%s --experiment=linear_ones --train_steps=4", dir), 0);
    assert_int_not_equal(stat(path, &sb), 0);
}

/* Starts a run, signals it a second into its ~8 s (mid-epoch, before any
 * checkpoint), waits; the run's flags follow the model_dir. */
static int interrupted_run(const char *dir, int sig, const char *flags)
{
    char arg[160], path[200];
    struct stat sb;
    int status;
    snprintf(arg, sizeof arg, "--model_dir=%s", dir);
    snprintf(path, sizeof path, "%s/ckpt.bin", dir);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execl("/bin/sh", "sh", "-c", "exec " BIN " train \"$0\" $1", arg, flags, (char *)NULL);
        _exit(127);
    }
    {   /* a second into its ~8 s: mid-epoch, before any checkpoint */
        struct timespec t = { 1, 0 };
        nanosleep(&t, NULL);
    }
    kill(pid, sig);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(stat(path, &sb), 0);   /* it checkpointed */
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int interrupted(const char *dir, int sig) { return interrupted_run(dir, sig, RUNF " --epochs=12"); }

static void signals(void **st)
{
    char ref[128], dir[128], a[4096], b[4096];
    (void)st;
    snprintf(ref, sizeof ref, "%s/sig_ref", g_tmp);
    assert_int_equal(sh(BIN " train --model_dir=%s " RUNF " --epochs=12", ref), 0);
    for (int k = 0; k < 2; k++) {   /* scripts in the closing note ran 20 */
        int sig = k % 2 ? SIGTERM : SIGINT;
        snprintf(dir, sizeof dir, "%s/sig_%d", g_tmp, k);
        assert_int_equal(interrupted(dir, sig), 128 + sig);
        assert_int_equal(sh(BIN " train --model_dir=%s " RUNF " --epochs=12", dir), 0);
        assert_string_equal(slurp(dir, "metrics.jsonl"), slurp(ref, "metrics.jsonl"));
        summary_core(ref, a, sizeof a);
        summary_core(dir, b, sizeof b);
        assert_string_equal(a, b);   /* weights, final loss and train_accuracy_last_epoch */
    }
}

#define PS_TF "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w:1\"],\"ps\":[\"p:1\",\"q:1\"]},\"task\":{\"type\":\"chief\",\"index\":0}}"
#define PSF "--distribution_strategy=parameter_server --ps_partitioner=fixed:2 --synthetic_examples=200 --global_batch_size=16"

static void parameter_server(void **st)
{
    char ref[128], dir[128], a[4096], b[4096], before[2][1 << 17];
    (void)st;
    assert_int_equal(setenv("TF_CONFIG", PS_TF, 1), 0);
    snprintf(ref, sizeof ref, "%s/ps_ref", g_tmp);
    assert_int_equal(sh(BIN " train --model_dir=%s " PSF " --epochs=12", ref), 0);
    strcpy(before[0], slurp(ref, "metrics.jsonl"));
    strcpy(before[1], slurp(ref, "summary.json"));
    assert_int_equal(sh(BIN " train --model_dir=%s " PSF " --epochs=12", ref), 0);   /* finished: report only */
    assert_null(strstr(out, "loss=0 (0x00000000)"));
    assert_string_equal(slurp(ref, "metrics.jsonl"), before[0]);
    assert_string_equal(slurp(ref, "summary.json"), before[1]);
    assert_int_equal(sh(BIN " train --model_dir=%s " PSF " --epochs=12 --learning_rate=0.5", ref), 2);
    assert_non_null(strstr(out, "--learning_rate=0.5, but the checkpoint"));
    snprintf(dir, sizeof dir, "%s/ps_sig", g_tmp);
    assert_int_equal(interrupted_run(dir, SIGINT, PSF " --epochs=12"), 130);
    assert_int_equal(sh(BIN " train --model_dir=%s " PSF " --epochs=12", dir), 0);
    assert_int_equal(unsetenv("TF_CONFIG"), 0);
    assert_string_equal(slurp(dir, "metrics.jsonl"), slurp(ref, "metrics.jsonl"));
    summary_core(ref, a, sizeof a);
    summary_core(dir, b, sizeof b);
    assert_string_equal(a, b);
}

static void negative_values(void **st)
{
    static const char *const flags[] = { "--learning_rate=-0.5", "--momentum=-0.1", "--l2=-0.001" };
    (void)st;
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(sh(BIN " train --model_dir=%s/neg --experiment=linear_ones %s", g_tmp, flags[i]), 2);
        assert_non_null(strstr(out, "distref: error: --"));
    }
}

/* Item 7: every flag that does not apply is refused, naming it and the
 * strategy, variant or command; where it applies it is accepted. */
static void flag_scopes(void **st)
{
    static const struct { const char *args, *want; } bad[] = {
        { "train --distribution_strategy=mirrored --tpu=v3-8",
          "--tpu does not apply to --distribution_strategy=mirrored: it is only for --distribution_strategy=tpu" },
        { "train --distribution_strategy=one_device --all_reduce_alg=bogus",
          "--all_reduce_alg does not apply to --distribution_strategy=one_device" },
        { "train --distribution_strategy=one_device --auto_shard_policy=data",
          "--auto_shard_policy does not apply to --distribution_strategy=one_device" },
        { "train --distribution_strategy=mirrored --bytes_per_pack=100",
          "--bytes_per_pack does not apply to --distribution_strategy=mirrored" },
        { "train --distribution_strategy=multi_worker_mirrored --num_packs=2",
          "--num_packs does not apply to --distribution_strategy=multi_worker_mirrored" },
        { "train --distribution_strategy=tpu --num_gpus=2", "--num_gpus does not apply to --distribution_strategy=tpu" },
        { "train --distribution_strategy=one_device --staleness=2",
          "--staleness does not apply to --distribution_strategy=one_device" },
        { "train --distribution_strategy=one_device --threads=2", "--threads does not apply to --variant=ref" },
        { "train --distribution_strategy=one_device --what=init", "--what does not apply to train: it is only for export" },
        { "evaluate --distribution_strategy=one_device --checkpoint_every=5", "--checkpoint_every does not apply to evaluate" },
        { "train --distribution_strategy=one_device --optimizer=adam --momentum=0.9",
          "--momentum is for --optimizer=sgd" },
        { "train --distribution_strategy=mirrored --all_reduce_alg=bogus", "valid values for all_reduce_alg are" },
    };
    (void)st;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = sh(BIN " %s --model_dir=%s/scope --experiment=linear_ones", bad[i].args, g_tmp);
        if (rc != 2 || !strstr(out, bad[i].want)) fail_msg("%s: status %d, output %s", bad[i].args, rc, out);
    }
    /* the same flags where they apply */
    assert_int_equal(sh(BIN " train --model_dir=%s/scope_ok --experiment=linear_ones --train_steps=1 "
                        "--distribution_strategy=mirrored --num_gpus=2 --all_reduce_alg=nccl --num_packs=2 "
                        "--auto_shard_policy=off --variant=openmp --threads=1 --checkpoint_every=1", g_tmp), 0);
}

static void unknown_command(void **st)
{
    (void)st;
    assert_int_equal(sh(BIN " fly --model_dir=%s/fly", g_tmp), 2);
    assert_non_null(strstr(out, "unknown command 'fly'"));
    assert_null(strstr(out, "--model_dir is required"));
}

static void tf_config_text(void **st)
{
    static char big[32768];
    size_t n = 0;
    (void)st;
    assert_int_equal(sh("TF_CONFIG=null " BIN " train --model_dir=%s/tfc --experiment=linear_ones", g_tmp), 2);
    assert_non_null(strstr(out, "distref: error: TF_CONFIG: expected a JSON object with \"cluster\" and \"task\", got null"));
    assert_int_equal(sh("TF_CONFIG=42 " BIN " train --model_dir=%s/tfc --experiment=linear_ones", g_tmp), 2);
    assert_non_null(strstr(out, "got int"));
    n += (size_t)snprintf(big + n, sizeof big - n, "{\"cluster\":{\"worker\":[");
    for (int w = 0; w < 1000; w++) n += (size_t)snprintf(big + n, sizeof big - n, "%s\"host%d:2222\"", w ? "," : "", w);
    snprintf(big + n, sizeof big - n, "]},\"task\":{\"type\":\"worker\",\"index\":0}}");
    assert_true(strlen(big) > 3 * 4096);   /* the old cap was 4,095 */
    assert_int_equal(setenv("TF_CONFIG", big, 1), 0);
    /* mirrored reads a cluster but runs on one machine, as TensorFlow's does */
    int rc = sh(BIN " train --model_dir=%s/tfc_big --experiment=linear_ones --train_steps=1", g_tmp);
    assert_int_equal(unsetenv("TF_CONFIG"), 0);
    if (rc != 0) fail_msg("1,000-worker TF_CONFIG: status %d: %s", rc, out);
    assert_int_equal(sh("TF_CONFIG='{\"cluster\":{\"worker\":[\"a:1\",\"a:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}' "
                        BIN " train --model_dir=%s/tfc --experiment=linear_ones", g_tmp), 2);
    assert_null(strstr(out, "--TF_CONFIG"));
    assert_non_null(strstr(out, "distref: error: TF_CONFIG: cluster.worker[1]"));
    assert_int_equal(sh("TF_CONFIG='{\"cluster\":{\"worker\":[\"a:1\",\"b:1\"]},\"task\":{\"type\":\"evaluator\",\"index\":0}}' "
                        BIN " train --distribution_strategy=multi_worker_mirrored --model_dir=%s/tfc --experiment=linear_ones", g_tmp), 2);
    assert_non_null(strstr(out, "task.type is 'evaluator', which does not train"));
}

static void evaluate_unwritable(void **st)
{
    char dir[128];
    (void)st;
    snprintf(dir, sizeof dir, "%s/eval", g_tmp);
    assert_int_equal(sh(BIN " train --model_dir=%s --experiment=mlp_synthetic --synthetic_examples=64 "
                        "--global_batch_size=32 --train_steps=2", dir), 0);
    /* eval.json a non-empty directory: the atomic rename cannot replace it
     * (root ignores a read-only directory's mode, so this stands in for it) */
    assert_int_equal(sh("mkdir -p %s/eval.json/x", dir), 0);
    assert_int_equal(sh(BIN " evaluate --model_dir=%s --experiment=mlp_synthetic --synthetic_examples=64 "
                        "--global_batch_size=32", dir), 1);
    assert_non_null(strstr(out, "evaluate: checkpoint step="));
    assert_non_null(strstr(out, "distref: error:"));
    assert_non_null(strstr(out, "eval.json"));
}

static void position_message(void **st)
{
    char dir[128];
    dr_checkpoint c;
    bool found = false;
    dr_err err = { 0, "" };
    (void)st;
    snprintf(dir, sizeof dir, "%s/pos", g_tmp);
    assert_int_equal(sh(BIN " train --model_dir=%s --experiment=linear_ones --train_steps=2", dir), 0);
    assert_int_equal(dr_checkpoint_load(dir, &c, &found, &err), DR_OK);
    assert_true(found);
    c.position = 3;   /* not a multiple of the global batch, not the epoch's end */
    assert_int_equal(dr_checkpoint_save(dir, &c, &err), DR_OK);
    dr_checkpoint_free(&c);
    assert_int_equal(sh(BIN " train --model_dir=%s --experiment=linear_ones --train_steps=4", dir), 1);
    assert_non_null(strstr(out, "ckpt.bin: data position is invalid, nothing was loaded: position: 3 is neither a "
                                "multiple of global_batch_size"));
}

SHELL_GROUP_FIXTURES(g_tmp, "/tmp/distref_test_durable.XXXXXX", BIN)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fifo_checkpoint), cmocka_unit_test(finished_run), cmocka_unit_test(settings_on_resume),
        cmocka_unit_test(stale_temps), cmocka_unit_test(signals), cmocka_unit_test(negative_values),
        cmocka_unit_test(flag_scopes), cmocka_unit_test(unknown_command), cmocka_unit_test(tf_config_text),
        cmocka_unit_test(evaluate_unwritable), cmocka_unit_test(position_message),
        cmocka_unit_test(parameter_server),
    };
    return cmocka_run_group_tests_name("durable", tests, setup, teardown);
}
