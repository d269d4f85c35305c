/* distref tests — run a shell command and look at what it printed (the
 * tests that drive bin/distref as a user would: test_run_dir, test_cli_details,
 * test_model_dir, test_inputs, test_durable). The caller owns the output
 * buffer; each test file keeps one and names it in a one-line macro. */
#ifndef DISTREF_TESTS_SHELL_H
#define DISTREF_TESTS_SHELL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

/* Runs the command fmt (printf-style) under /bin/sh with both streams into
 * out[0 .. nout) (NUL-terminated; what does not fit is dropped); returns its
 * exit status, or -1 when a signal ended it. A command longer than the
 * buffer fails the test rather than running cut short. */
static inline int shell_vrun(char *out, size_t nout, const char *fmt, va_list ap)
{
    char cmd[4096];
    int len = vsnprintf(cmd, sizeof cmd - sizeof " 2>&1", fmt, ap);
    if (len < 0 || (size_t)len >= sizeof cmd - sizeof " 2>&1")
        fail_msg("shell command longer than %zu bytes: %.200s...", sizeof cmd - sizeof " 2>&1", cmd);
    strcat(cmd, " 2>&1");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, nout - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static inline int shell_run(char *out, size_t nout, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = shell_vrun(out, nout, fmt, ap);
    va_end(ap);
    return st;
}

/* Fails the test unless the command's status is want and its output (out)
 * holds phrase (NULL: any output). */
static inline void shell_expect(const char *out, int status, int want, const char *phrase)
{
    if (status != want || (phrase && !strstr(out, phrase)))
        fail_msg("expected status %d and \"%s\"; got %d:\n%s", want, phrase ? phrase : "", status, out);
}

/* The whole content of dir/name (one of two static buffers, so that two
 * files can be compared), "" when missing; cut at 128 KiB. */
static inline const char *slurp(const char *dir, const char *name)
{
    static char buf[2][1 << 17];
    static int k;
    char path[512];
    FILE *f;
    size_t n = 0;
    k ^= 1;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if ((f = fopen(path, "rb"))) { n = fread(buf[k], 1, sizeof buf[k] - 1, f); fclose(f); }
    buf[k][n] = 0;
    return buf[k];
}

/* The group fixtures of a test file whose tests share one fresh directory:
 * dir is a char array, templ its mkdtemp template, bin the CLI the tests
 * run (setup fails when it is not built). Teardown removes the directory
 * with rm -rf, which does not follow the links the tests plant in it. */
#define SHELL_GROUP_FIXTURES(dir, templ, bin)                                         \
    static int setup(void **st)                                                       \
    {                                                                                 \
        (void)st;                                                                     \
        snprintf(dir, sizeof dir, "%s", templ);                                       \
        return access(bin, X_OK) == 0 && mkdtemp(dir) ? 0 : -1;                       \
    }                                                                                 \
    static int teardown(void **st)                                                    \
    {                                                                                 \
        char rm_out[256];                                                             \
        (void)st;                                                                     \
        return shell_run(rm_out, sizeof rm_out, "rm -rf '%s'", dir) == 0 ? 0 : -1;    \
    }

#endif
