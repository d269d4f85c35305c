/* A model_dir someone else can write into (issue 27 #3, #5): bin/distref
 * against planted links, other processes' temp files and a second run.
 *   planted_links   a link planted at a temp name (eval.json.tmp.$PID, the
 *                   pid of the distref about to run) or at the final name
 *                   never lets a write reach its target; the files end
 *                   regular; a checkpoint or metrics file that is a link is
 *                   refused naming it
 *   live_temps      start-up cleanup removes a dead writer's temp file and
 *                   keeps a live process's
 *   second_run      while a run holds model_dir/.lock, train, evaluate,
 *                   predict and export on the directory exit 2 naming its
 *                   pid and command; after it is killed (-9) the next run
 *                   takes the lock over with a note; a link at .lock is
 *                   refused
 *   mpi_second_run  the same under mpirun --variant=mpi: the chief locks,
 *                   a second job exits 2 naming the holder
 *   lock_text       the lock file's reader and writer (dr_lock_parse)
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

#include "distref/lock.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef DR_BIN
#define DR_BIN "bin/distref"   /* the Makefile passes its build's CLI (SANITIZE=1: build/san/bin/distref) */
#endif
#define BIN DR_BIN
#define LIN "--experiment=linear_ones"
#define PS_TF "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w0:1\",\"w1:1\"],\"ps\":[\"p0:1\"]}," \
              "\"task\":{\"type\":\"chief\",\"index\":0}}"

static char g_tmp[64];
static char out[16384];

/* Runs a shell command; its output (both streams) in out; exit status. */
#define sh(...) shell_run(out, sizeof out, __VA_ARGS__)

/* "dir/name": what it is ('f' regular, 'l' link, '-' absent, '?' else). */
static char kind(const char *dir, const char *name)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (lstat(path, &st) != 0) return '-';
    return S_ISREG(st.st_mode) ? 'f' : S_ISLNK(st.st_mode) ? 'l' : '?';
}

/* g_tmp/victim holds "victim\n"; dir is a model_dir trained 2 steps. */
static void setup_run(char *dir, size_t n, const char *name)
{
    snprintf(dir, n, "%s/%s", g_tmp, name);
    assert_int_equal(sh("echo victim > %s/victim", g_tmp), 0);
    assert_int_equal(sh(BIN " train --model_dir=%s " LIN " --train_steps=2", dir), 0);
}

static void victim_untouched(void)
{
    assert_int_equal(sh("cat %s/victim", g_tmp), 0);
    if (strcmp(out, "victim\n") != 0) fail_msg("the victim was written through a planted link: %.200s", out);
}

/* The command run by "sh -c 'ln -s VICTIM DIR/NAME.tmp.$$; exec distref ...'":
 * the link carries the pid the distref process will have. */
static int planted(const char *dir, const char *names, const char *cmd)
{
    return sh("sh -c 'for n in %s; do ln -s %s/victim %s/$n.tmp.$$ || exit 9; done; exec " BIN " %s --model_dir=%s "
              LIN "'", names, g_tmp, dir, cmd, dir);
}

static void planted_links(void **st)
{
    char dir[128];
    (void)st;
    setup_run(dir, sizeof dir, "links");
    /* the case: evaluate */
    assert_int_equal(planted(dir, "eval.json", "evaluate"), 0);
    victim_untouched();
    assert_int_equal(kind(dir, "eval.json"), 'f');
    /* predict, a training run's every file, export */
    assert_int_equal(planted(dir, "predictions.jsonl", "predict"), 0);
    victim_untouched();
    assert_int_equal(kind(dir, "predictions.jsonl"), 'f');
    assert_int_equal(planted(dir, "ckpt.bin metrics.jsonl summary.json", "train --train_steps=4"), 0);
    victim_untouched();
    assert_int_equal(kind(dir, "ckpt.bin"), 'f');
    assert_int_equal(kind(dir, "metrics.jsonl"), 'f');
    assert_int_equal(kind(dir, "summary.json"), 'f');
    assert_int_equal(planted(dir, "batches.json", "export --what=batches --format=json"), 0);
    victim_untouched();
    assert_int_equal(kind(dir, "batches.json"), 'f');
    /* a link at the final name is replaced, not written through */
    assert_int_equal(sh("ln -sf %s/victim %s/eval.json", g_tmp, dir), 0);
    assert_int_equal(sh(BIN " evaluate --model_dir=%s " LIN, dir), 0);
    victim_untouched();
    assert_int_equal(kind(dir, "eval.json"), 'f');
    /* model_dir files read back are never links, FIFOs or devices */
    assert_int_equal(sh("cp %s/metrics.jsonl %s/m.copy && ln -sf %s/m.copy %s/metrics.jsonl", dir, g_tmp, g_tmp, dir), 0);
    assert_int_equal(sh("timeout 20 " BIN " train --model_dir=%s " LIN " --train_steps=6", dir), 1);
    assert_non_null(strstr(out, "metrics.jsonl: not a regular file (it is a symbolic link)"));
    assert_int_equal(sh("rm %s/metrics.jsonl && cp %s/m.copy %s/metrics.jsonl", dir, g_tmp, dir), 0);
    assert_int_equal(sh("mv %s/ckpt.bin %s/c.copy && ln -s %s/c.copy %s/ckpt.bin", dir, g_tmp, g_tmp, dir), 0);
    assert_int_equal(sh("timeout 20 " BIN " train --model_dir=%s " LIN " --train_steps=6", dir), 1);
    assert_non_null(strstr(out, "ckpt.bin: not a regular file (it is a symbolic link)"));
    assert_int_equal(sh("rm %s/ckpt.bin && mkfifo %s/ckpt.bin", dir, dir), 0);
    assert_int_equal(sh("timeout 20 " BIN " train --model_dir=%s " LIN " --train_steps=6", dir), 1);
    assert_non_null(strstr(out, "ckpt.bin: not a regular file (it is a FIFO)"));
    /* a parameter_server run's schedule beside its checkpoint: a planted link is refused, not followed */
    snprintf(dir, sizeof dir, "%s/ps_link", g_tmp);
    assert_int_equal(sh("TF_CONFIG='" PS_TF "' " BIN " train --distribution_strategy=parameter_server --model_dir=%s "
                        LIN " --train_steps=4", dir), 0);
    assert_int_equal(sh("mv %s/ps_schedule.json %s/s.copy && ln -s %s/s.copy %s/ps_schedule.json", dir, g_tmp, g_tmp,
                        dir), 0);
    assert_int_equal(sh("TF_CONFIG='" PS_TF "' timeout 20 " BIN " train --distribution_strategy=parameter_server "
                        "--model_dir=%s " LIN " --train_steps=6", dir), 1);
    assert_non_null(strstr(out, "ps_schedule.json: not a regular file (it is a symbolic link)"));
}

/* A temp file whose writer is alive is not stale; a dead writer's is. */
static void live_temps(void **st)
{
    char dir[128], live[256], dead[256];
    struct stat sb;
    pid_t sleeper, gone;
    (void)st;
    setup_run(dir, sizeof dir, "temps");
    fflush(NULL);
    sleeper = fork();
    assert_true(sleeper >= 0);
    if (sleeper == 0) { fclose(stdout); fclose(stderr); alarm(120); pause(); _exit(0); }
    gone = fork();
    assert_true(gone >= 0);
    if (gone == 0) _exit(0);
    assert_int_equal(waitpid(gone, NULL, 0), gone);
    snprintf(live, sizeof live, "%s/ckpt.bin.tmp.%ld", dir, (long)sleeper);
    snprintf(dead, sizeof dead, "%s/summary.json.tmp.%ld.3", dir, (long)gone);
    assert_int_equal(sh("echo half > %s && echo half > %s", live, dead), 0);
    assert_int_equal(sh(BIN " train --model_dir=%s " LIN " --train_steps=4", dir), 0);
    assert_int_equal(stat(live, &sb), 0);        /* a live writer's: kept */
    assert_int_not_equal(stat(dead, &sb), 0);    /* a dead writer's: removed */
    kill(sleeper, SIGKILL);
    waitpid(sleeper, NULL, 0);
}

/* Starts `distref train` on dir in the background; returns once the lock
 * file names it. */
static pid_t start_holder(const char *dir)
{
    char arg[200], lock[200];
    pid_t pid;
    snprintf(arg, sizeof arg, "--model_dir=%s", dir);
    snprintf(lock, sizeof lock, "%s/.lock", dir);
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execl(BIN, BIN, "train", arg, "--experiment=mlp_synthetic", "--synthetic_examples=20000", "--epochs=50",
              (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 600; i++) {   /* up to a minute on a loaded machine */
        char want[32];
        struct timespec t = { 0, 100000000 };
        nanosleep(&t, NULL);
        snprintf(want, sizeof want, "pid %ld\n", (long)pid);
        if (sh("cat %s", lock) == 0 && strstr(out, want)) return pid;
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fail_msg("the run never named itself in %s", lock);
    return -1;
}

static void second_run(void **st)
{
    static const char *const cmds[] = { "train --experiment=mlp_synthetic", "evaluate --experiment=mlp_synthetic",
                                        "predict --experiment=mlp_synthetic",
                                        "export --what=batches --format=json --experiment=mlp_synthetic" };
    char dir[128], want[256];
    pid_t holder;
    (void)st;
    snprintf(dir, sizeof dir, "%s/locked", g_tmp);
    holder = start_holder(dir);
    snprintf(want, sizeof want, "is in use by another distref run: pid %ld on ", (long)holder);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int rc = sh(BIN " %s --model_dir=%s", cmds[i], dir);
        if (rc != 2 || !strstr(out, want) || !strstr(out, "train --model_dir=") || !strstr(out, "/.lock"))
            fail_msg("%s beside a running train: exit %d, %.400s", cmds[i], rc, out);
    }
    assert_int_equal(kill(holder, SIGKILL), 0);
    assert_int_equal(waitpid(holder, NULL, 0), holder);
    assert_int_equal(sh(BIN " train --model_dir=%s --experiment=mlp_synthetic --synthetic_examples=20000 "
                        "--epochs=50 --train_steps=1", dir), 0);
    snprintf(want, sizeof want, "distref: note: %s/.lock named pid %ld", dir, (long)holder);
    if (!strstr(out, want) || !strstr(out, "taking the lock over")) fail_msg("no takeover note: %.400s", out);
    /* a clean end clears the text: no note the next time */
    assert_int_equal(sh(BIN " train --model_dir=%s --experiment=mlp_synthetic --synthetic_examples=20000 "
                        "--epochs=50 --train_steps=2", dir), 0);
    assert_null(strstr(out, "note:"));
    /* a link at .lock is not followed */
    assert_int_equal(sh("rm %s/.lock && ln -s %s/victim %s/.lock", dir, g_tmp, dir), 0);
    assert_int_equal(sh(BIN " train --model_dir=%s --experiment=mlp_synthetic --synthetic_examples=20000 "
                        "--epochs=50 --train_steps=3", dir), 1);
    assert_non_null(strstr(out, ".lock: not a regular file (it is a symbolic link)"));
}

/* --variant=mpi: the chief locks; beside a running train the second job's
 * chief exits naming the holder, the other rank defers to it, mpirun exits
 * 2; on a free directory the job trains (its non-chief rank checks .lock
 * names the chief). Skipped without mpirun. */
static void mpi_second_run(void **st)
{
    char dir[128], want[256];
    pid_t holder;
    (void)st;
    if (sh("command -v mpirun") != 0) skip();
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    /* SANITIZE=1: libmpi's own allocations (ompi_op_base_op_select, ...) are
     * never freed; LeakSanitizer would fail every MPI run for them */
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    snprintf(dir, sizeof dir, "%s/mpi_locked", g_tmp);
    holder = start_holder(dir);
    int rc = sh("env -u TF_CONFIG timeout 120 mpirun --oversubscribe -np 2 " BIN " train --variant=mpi "
                "--distribution_strategy=multi_worker_mirrored --experiment=mlp_synthetic --model_dir=%s", dir);
    snprintf(want, sizeof want, "--model_dir=%s is in use by another distref run: pid %ld", dir,
             (long)holder);
    if (rc != 2 || !strstr(out, want)) fail_msg("mpirun beside a running train: exit %d, %.600s", rc, out);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    rc = sh("env -u TF_CONFIG timeout 120 mpirun --oversubscribe -np 2 " BIN " train --variant=mpi "
            "--distribution_strategy=multi_worker_mirrored --experiment=mlp_synthetic --synthetic_examples=20000 "
            "--epochs=50 --train_steps=1 --model_dir=%s", dir);
    if (rc != 0 || !strstr(out, "taking the lock over")) fail_msg("mpirun after the holder died: exit %d, %.600s", rc, out);
    unsetenv("ASAN_OPTIONS");
}

static void lock_text(void **st)
{
    static const struct { const char *text, *says; } bad[] = {
        { "", "empty" },
        { "distref lock\n", "line 2: no newline" },
        { "distref lock\npid 12\nhost h\ncommand c", "line 4: no newline" },
        { "distref  lock\npid 12\nhost h\ncommand c\n", "line 1: expected 'distref lock'" },
        { "distref lock\npid 0\nhost h\ncommand c\n", "line 2: pid '0' is not a process id" },
        { "distref lock\npid -5\nhost h\ncommand c\n", "pid '-5'" },
        { "distref lock\npid 12x\nhost h\ncommand c\n", "pid '12x'" },
        { "distref lock\npid 99999999999999999999\nhost h\ncommand c\n", "not a process id" },
        { "distref lock\npid 12\nhost \ncommand c\n", "line 3: expected 'host <value>'" },
        { "distref lock\npid 12\nhost h\tx\ncommand c\n", "line 3: host has a control byte 0x09" },
        { "distref lock\npid 12\nhost h\ncommand c\nmore\n", "5 bytes after the 4 lines" },
        { "distref lock\npid 12\nhost h\ncmd c\n", "line 4: expected 'command <value>'" },
    };
    dr_lock_info info, back;
    dr_err err;
    char text[DR_LOCK_MAX_BYTES];
    (void)st;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = dr_lock_parse((const uint8_t *)bad[i].text, strlen(bad[i].text), &info, &err);
        if (rc != DR_EFORMAT || !strstr(err.msg, bad[i].says)) fail_msg("'%s': %d %s", bad[i].text, rc, err.msg);
    }
    memset(&info, 0, sizeof info);
    info.pid = 4242;
    strcpy(info.host, "node7");
    strcpy(info.command, "bin/distref train\n--model_dir=m");   /* a newline in argv: written as a space */
    size_t n = dr_lock_format(&info, text, sizeof text);
    assert_true(n < sizeof text);
    assert_int_equal(dr_lock_parse((const uint8_t *)text, n, &back, &err), DR_OK);
    assert_int_equal(back.pid, 4242);
    assert_string_equal(back.host, "node7");
    assert_string_equal(back.command, "bin/distref train --model_dir=m");
}

SHELL_GROUP_FIXTURES(g_tmp, "/tmp/distref_test_model_dir.XXXXXX", BIN)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(planted_links),
        cmocka_unit_test(live_temps),
        cmocka_unit_test(second_run),
        cmocka_unit_test(mpi_second_run),
        cmocka_unit_test(lock_text),
    };
    return cmocka_run_group_tests_name("model_dir", tests, setup, teardown);
}
