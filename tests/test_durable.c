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
 * The kill-at-every-write sweep is the durability suite of make
 * conformance (scripts/durability.sh). Run from the repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BIN "./bin/distref"
#define RUNF "--distribution_strategy=mirrored --num_gpus=2 --synthetic_examples=200 --global_batch_size=16"

static char g_tmp[64];
static char out[16384];

/* Runs a shell command; its output (both streams) in out; exit status. */
static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    FILE *p;
    size_t n;
    int st;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
    p = popen(cmd, "r");
    assert_non_null(p);
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The whole content of a file (static buffer), "" when missing. */
static const char *slurp(const char *dir, const char *name)
{
    static char buf[2][1 << 16];
    static int k;
    char path[256];
    FILE *f;
    size_t n = 0;
    k ^= 1;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if ((f = fopen(path, "rb"))) { n = fread(buf[k], 1, sizeof buf[k] - 1, f); fclose(f); }
    buf[k][n] = 0;
    return buf[k];
}

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
    char dir[128], before[3][1 << 16];
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

/* Starts a run, signals it once the first steps are logged, waits. */
static int interrupted(const char *dir, int sig)
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
        execl("/bin/sh", "sh", "-c", "exec " BIN " train \"$0\" " RUNF " --epochs=12", arg, (char *)NULL);
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

static void negative_values(void **st)
{
    static const char *const flags[] = { "--learning_rate=-0.5", "--momentum=-0.1", "--l2=-0.001" };
    (void)st;
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(sh(BIN " train --model_dir=%s/neg --experiment=linear_ones %s", g_tmp, flags[i]), 2);
        assert_non_null(strstr(out, "distref: error: --"));
    }
}

static int setup(void **st)
{
    (void)st;
    strcpy(g_tmp, "/tmp/distref_test_durable.XXXXXX");
    return access(BIN, X_OK) == 0 && mkdtemp(g_tmp) ? 0 : -1;
}

static int teardown(void **st)
{
    (void)st;
    return sh("rm -rf '%s'", g_tmp) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fifo_checkpoint), cmocka_unit_test(finished_run), cmocka_unit_test(settings_on_resume),
        cmocka_unit_test(stale_temps), cmocka_unit_test(signals), cmocka_unit_test(negative_values),
    };
    return cmocka_run_group_tests_name("durable", tests, setup, teardown);
}
