/* distref tests — reading a recorded schedule (core/ps_schedule_read.c):
 * what --replay_schedule and a --schedule=free resume trust. A valid
 * recording (a seeded plan's events, and one with a lost worker) loads; a
 * FIFO and /dev/zero are refused at once (alarm: a hang fails the test); a
 * valid line of 600 bytes loads and one over the limit is refused naming
 * the limit; a NUL byte, junk after the JSON, swapped dispatch/land lines,
 * version 2^64-1, an edited read_version and the file twice over are each
 * refused with a message naming the file, the line, the field and what
 * was expected. The planted faults replay_* of scripts/exact_mutants.sh
 * must fail it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "distref/ps_plan.h"
#include "ps_plan_fixture.h"

static char g_dir[] = "/tmp/dr_replay_file_XXXXXX";
static char g_path[64];

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(g_dir)) return -1;
    snprintf(g_path, sizeof g_path, "%s/ps_schedule.jsonl", g_dir);
    alarm(20);   /* a blocking open or an endless read fails the run */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(g_path);
    rmdir(g_dir);
    return 0;
}

/* The lines of a seeded plan (3 workers, staleness 2, 9 closures) into buf. */
static size_t plan_lines(char lines[][256])
{
    dr_ps_event *ev;
    size_t n = plan(3, 2, 4, 0, 0, 9, 0, &ev);
    assert_true(n < 64);
    for (size_t i = 0; i < n; i++) dr_ps_event_line(&ev[i], lines[i], 256);
    free(ev);
    return n;
}

static void write_lines(char lines[][256], size_t n, const char *tail)
{
    FILE *f = fopen(g_path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++) fputs(lines[i], f);
    if (tail) fputs(tail, f);
    fclose(f);
}

/* Loads g_path: must fail with code, naming the path and each of the words. */
static void refused(int code, const char *w1, const char *w2, const char *w3)
{
    dr_ps_event *ev = NULL;
    size_t m = 0;
    dr_err err;
    memset(&err, 0, sizeof err);
    assert_int_equal(dr_ps_schedule_load(g_path, &ev, &m, &err), code);
    assert_null(ev);
    if (!strstr(err.msg, g_path) || !strstr(err.msg, w1) || (w2 && !strstr(err.msg, w2)) || (w3 && !strstr(err.msg, w3)))
        fail_msg("message \"%s\" does not name %s, %s, %s, %s", err.msg, g_path, w1, w2 ? w2 : "", w3 ? w3 : "");
}

static size_t loads(void)
{
    dr_ps_event *ev = NULL;
    size_t m = 0;
    dr_err err;
    if (dr_ps_schedule_load(g_path, &ev, &m, &err) != DR_OK) fail_msg("refused: %s", err.msg);
    free(ev);
    return m;
}

static void valid_files_load(void **state)
{
    char lines[64][256], pad[820];
    size_t n = plan_lines(lines);
    (void)state;
    write_lines(lines, n, "\n  \n");   /* blank lines are skipped */
    assert_int_equal(loads(), n);
    /* a valid line of 600 bytes (JSON allows the spaces) */
    memset(pad, ' ', 560);
    snprintf(pad + 560, sizeof pad - 560, "%s", lines[3]);
    snprintf(lines[3], sizeof lines[3], "%.255s", "");
    write_lines(lines, 3, pad);
    {
        FILE *f = fopen(g_path, "a");
        assert_non_null(f);
        for (size_t i = 4; i < n; i++) fputs(lines[i], f);
        fclose(f);
    }
    assert_int_equal(loads(), n);
}

static void special_files_refused(void **state)
{
    char fifo[80];
    dr_ps_event *ev = NULL;
    size_t m = 0;
    dr_err err;
    (void)state;
    snprintf(fifo, sizeof fifo, "%s/fifo", g_dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(dr_ps_schedule_load(fifo, &ev, &m, &err), DR_EUSAGE);   /* no writer: would block */
    assert_non_null(strstr(err.msg, "--replay_schedule="));
    assert_non_null(strstr(err.msg, "a FIFO"));
    unlink(fifo);
    assert_int_equal(dr_ps_schedule_load("/dev/zero", &ev, &m, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "/dev/zero: not a regular file"));
    assert_int_equal(dr_ps_schedule_load(g_dir, &ev, &m, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "a directory"));
}

static void bad_bytes_refused(void **state)
{
    char lines[64][256], big[5000];
    size_t n = plan_lines(lines);
    FILE *f;
    (void)state;
    /* a line of NUL bytes is no blank line */
    assert_non_null(f = fopen(g_path, "w"));
    fputs(lines[0], f);
    for (int i = 0; i < 100; i++) fputc(0, f);
    fputc('\n', f);
    fclose(f);
    refused(DR_EFORMAT, "line 2", "NUL byte", NULL);
    /* junk after a NUL, and after the JSON */
    memcpy(strchr(lines[1], '\n'), "\0junk\n", 6);
    assert_non_null(f = fopen(g_path, "w"));
    fputs(lines[0], f);
    fwrite(lines[1], 1, strlen(lines[1]) + 6, f);
    fclose(f);
    refused(DR_EFORMAT, "line 2", "NUL byte", NULL);
    n = plan_lines(lines);
    strcpy(strchr(lines[2], '\n'), " junk\n");
    write_lines(lines, n, NULL);
    refused(DR_EFORMAT, "line 3", "JSON object", NULL);
    n = plan_lines(lines);
    strcpy(strchr(lines[2], '\n'), "{}\n");
    write_lines(lines, n, NULL);
    refused(DR_EFORMAT, "line 3", "JSON object", "column 7");
    /* over the limit: the message names it */
    n = plan_lines(lines);
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = 0;
    write_lines(lines, 2, big);
    refused(DR_EFORMAT, "line 3", "longer than 4096 bytes", NULL);
    /* an unknown field */
    n = plan_lines(lines);
    strcpy(strchr(lines[0], '}'), ",\"x\":1}\n");
    write_lines(lines, n, NULL);
    refused(DR_EFORMAT, "line 1", "expected {", NULL);
}

/* Index of the first landing followed by a dispatch. */
static size_t land_then_dispatch(char lines[][256], size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        if (strstr(lines[i], "\"land\"") && strstr(lines[i + 1], "\"dispatch\"")) return i;
    fail_msg("no landing before a dispatch in the plan");
    return 0;
}

static void events_checked(void **state)
{
    char lines[64][256], tmp[256], *p;
    size_t n = plan_lines(lines), i = land_then_dispatch(lines, n), k;
    (void)state;
    /* swapped dispatch/land lines */
    memcpy(tmp, lines[i], sizeof tmp);
    memcpy(lines[i], lines[i + 1], sizeof tmp);
    memcpy(lines[i + 1], tmp, sizeof tmp);
    write_lines(lines, n, NULL);
    snprintf(tmp, sizeof tmp, "line %zu", i + 1);
    refused(DR_EFORMAT, tmp, "field \"", "expected");
    /* version 2^64-1 on a landing */
    n = plan_lines(lines);
    p = strstr(lines[i], "\"version\":");
    strcpy(p, "\"version\":18446744073709551615}\n");
    write_lines(lines, n, NULL);
    snprintf(tmp, sizeof tmp, "line %zu", i + 1);
    refused(DR_EFORMAT, tmp, "field \"version\": expected", "got 18446744073709551615");
    /* an edited read_version on a landing */
    n = plan_lines(lines);
    {
        unsigned long long r;
        char *q = strstr(lines[i], "\"read_version\":");
        assert_int_equal(sscanf(q, "\"read_version\":%llu", &r), 1);
        snprintf(tmp, sizeof tmp, "%.*s\"read_version\":%llu%s", (int)(q - lines[i]), lines[i], r + 1,
                 strchr(q, ','));
        memcpy(lines[i], tmp, sizeof tmp);
    }
    write_lines(lines, n, NULL);
    snprintf(tmp, sizeof tmp, "line %zu", i + 1);
    refused(DR_EFORMAT, tmp, "field \"read_version\": expected", NULL);
    /* the file twice over */
    n = plan_lines(lines);
    for (k = 0; k < n; k++) memcpy(lines[n + k], lines[k], 256);
    write_lines(lines, 2 * n, NULL);
    snprintf(tmp, sizeof tmp, "line %zu", n + 1);
    refused(DR_EFORMAT, tmp, "field \"", "expected");
    /* a landing of a worker that runs nothing */
    n = plan_lines(lines);
    write_lines(lines, n, lines[i]);
    snprintf(tmp, sizeof tmp, "line %zu", n + 1);
    refused(DR_EFORMAT, tmp, "field \"worker\"", "runs no closure");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_files_load),
        cmocka_unit_test(special_files_refused),
        cmocka_unit_test(bad_bytes_refused),
        cmocka_unit_test(events_checked),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
