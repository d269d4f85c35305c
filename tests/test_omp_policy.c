/* distref tests — the OpenMP wait policy's re-exec (harness/omp_policy.c).
 *
 * libgomp reads GOMP_SPINCOUNT once, when the program loads, so a distref
 * program that wants the short spin re-executes itself with it set, unless
 * the caller chose a policy. This binary is also its own probe: run as
 * `test_omp_policy --probe ARG`, it calls dr_omp_short_spin_reexec first
 * thing (as bin/distref's main does) and prints GOMP_SPINCOUNT, its pid and
 * its argument. The tests start the probe under three environments and read
 * that line: the variable set to 1000 by the re-exec, in the same process
 * (fork's pid) with the same arguments; or the caller's choice kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "distref/harness.h"

static char self[4096];   /* this binary's path (the tests' only state, set once in main) */

static int probe(char **argv)
{
    const char *spin;
    dr_omp_short_spin_reexec(argv);
    spin = getenv("GOMP_SPINCOUNT");
    printf("spin=%s pid=%ld arg=%s\n", spin ? spin : "(unset)", (long)getpid(), argv[2] ? argv[2] : "(none)");
    return 0;
}

/* The probe under the environment envp: its output line into out, its pid
 * (fork's) into *pid. */
static void run_probe(char *const envp[], char *out, size_t n, pid_t *pid)
{
    char *const args[] = { self, "--probe", "two words", NULL };
    int fd[2], status = 0;
    size_t len = 0;
    ssize_t got;
    assert_int_equal(pipe(fd), 0);
    *pid = fork();
    assert_true(*pid >= 0);
    if (*pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execve(self, args, envp);
        _exit(127);
    }
    close(fd[1]);
    while (len + 1 < n && (got = read(fd[0], out + len, n - 1 - len)) > 0) len += (size_t)got;
    out[len] = '\0';
    close(fd[0]);
    assert_int_equal(waitpid(*pid, &status, 0), *pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void short_spin_by_default(void **s)
{
    char *const env[] = { "PATH=/usr/bin:/bin", NULL };
    char out[256], want[256];
    pid_t pid;
    (void)s;
    run_probe(env, out, sizeof out, &pid);
    snprintf(want, sizeof want, "spin=1000 pid=%ld arg=two words\n", (long)pid);
    assert_string_equal(out, want);   /* re-executed in place, arguments intact */
}

static void a_chosen_policy_is_kept(void **s)
{
    char *const passive[] = { "PATH=/usr/bin:/bin", "OMP_WAIT_POLICY=passive", NULL };
    char *const spin[] = { "PATH=/usr/bin:/bin", "GOMP_SPINCOUNT=77", NULL };
    char out[256], want[256];
    pid_t pid;
    (void)s;
    run_probe(passive, out, sizeof out, &pid);
    snprintf(want, sizeof want, "spin=(unset) pid=%ld arg=two words\n", (long)pid);
    assert_string_equal(out, want);
    run_probe(spin, out, sizeof out, &pid);
    snprintf(want, sizeof want, "spin=77 pid=%ld arg=two words\n", (long)pid);
    assert_string_equal(out, want);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(short_spin_by_default),
        cmocka_unit_test(a_chosen_policy_is_kept),
    };
    ssize_t n;
    if (argc >= 2 && strcmp(argv[1], "--probe") == 0) return probe(argv);
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || (size_t)n >= sizeof self - 1) {
        printf("test_omp_policy: skipped: no /proc/self/exe here (the re-exec needs it too)\n");
        return 0;
    }
    self[n] = '\0';
    return cmocka_run_group_tests(tests, NULL, NULL);
}
