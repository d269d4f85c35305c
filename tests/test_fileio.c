/* Unit tests for common/fileio.c (and the dr_err helpers it reports with). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/tmpdir.h"

#include "distref/error.h"
#include "distref/fileio.h"
#include "distref/sealed.h"

/* ---- a fresh temp directory per test ----------------------------------- */

static int make_temp_dir(void **state) { return temp_dir_from(state, "/tmp/distref_fileio_XXXXXX"); }

/* Number of entries in dir other than . and .. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void join(char *out, size_t size, const char *dir, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

/* ---- dr_write_atomic + dr_read_file ------------------------------------- */

static void test_round_trip(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "hello.txt");
    dr_err err = { 0 };
    assert_int_equal(dr_write_atomic(path, "hello", 5, &err), DR_OK);

    uint8_t *data = NULL;
    size_t n = 0;
    assert_int_equal(dr_read_file(path, 1000, &data, &n, &err), DR_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(data, "hello", 5);
    assert_int_equal(data[5], '\0');            /* NUL-terminated, not counted */
    free(data);

    assert_int_equal(dr_write_atomic(path, NULL, 0, &err), DR_OK);
    assert_int_equal(dr_read_file(path, 0, &data, &n, &err), DR_OK);
    assert_int_equal(n, 0);
    assert_int_equal(data[0], '\0');
    free(data);
    assert_int_equal(count_entries(*state), 1);  /* no temp file left */
}

static void test_overwrite_keeps_complete_file(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "weights.bin");
    enum { BIG = 100000 };
    uint8_t *big = malloc(BIG);
    assert_non_null(big);
    for (size_t i = 0; i < BIG; i++)
        big[i] = (uint8_t)(i * 31 + 7);
    dr_err err = { 0 };
    assert_int_equal(dr_write_atomic(path, big, BIG, &err), DR_OK);
    assert_int_equal(dr_write_atomic(path, "short", 5, &err), DR_OK);

    uint8_t *data = NULL;
    size_t n = 0;
    assert_int_equal(dr_read_file(path, BIG, &data, &n, &err), DR_OK);
    assert_int_equal(n, 5);                     /* not the tail of the old file */
    assert_memory_equal(data, "short", 5);
    free(data);

    assert_int_equal(dr_write_atomic(path, big, BIG, &err), DR_OK);
    assert_int_equal(dr_read_file(path, BIG, &data, &n, &err), DR_OK);
    assert_int_equal(n, BIG);
    assert_memory_equal(data, big, BIG);
    free(data);
    free(big);
    assert_int_equal(count_entries(*state), 1);
}

static void test_write_into_missing_dir_fails(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "no/such/dir/out.json");
    dr_err err = { 0 };
    assert_int_equal(dr_write_atomic(path, "x", 1, &err), DR_EIO);
    assert_int_equal(err.code, DR_EIO);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "No such file or directory"));
    assert_int_equal(count_entries(*state), 0);
}

/* The temp file is written, then the rename over a directory fails:
 * the temp file must be gone afterwards. */
static void test_failed_rename_leaves_no_temp(void **state)
{
    char path[512], inside[600];
    join(path, sizeof path, *state, "target");
    assert_int_equal(mkdir(path, 0755), 0);
    join(inside, sizeof inside, path, "keep");
    dr_err err = { 0 };
    assert_int_equal(dr_write_atomic(inside, "k", 1, &err), DR_OK);

    assert_int_equal(dr_write_atomic(path, "data", 4, &err), DR_EIO);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "rename"));
    assert_int_equal(count_entries(*state), 1);  /* just "target" */
    assert_int_equal(count_entries(path), 1);    /* just "keep" */
}

static void test_read_missing_names_path(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "absent.ckpt");
    dr_err err = { 0 };
    uint8_t *data = (uint8_t *)"sentinel";
    size_t n = 77;
    assert_int_equal(dr_read_file(path, 100, &data, &n, &err), DR_EIO);
    assert_null(data);
    assert_int_equal(n, 0);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "No such file or directory"));

    assert_int_equal(dr_read_file(*state, 100, &data, &n, &err), DR_EIO);  /* a directory */
    assert_non_null(strstr(err.msg, *state));
}

static void test_read_size_cap(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "hundred.bin");
    uint8_t bytes[100];
    memset(bytes, 'z', sizeof bytes);
    dr_err err = { 0 };
    assert_int_equal(dr_write_atomic(path, bytes, sizeof bytes, &err), DR_OK);

    uint8_t *data = NULL;
    size_t n = 0;
    assert_int_equal(dr_read_file(path, 99, &data, &n, &err), DR_EFORMAT);
    assert_null(data);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "limit of 99"));

    assert_int_equal(dr_read_file(path, 100, &data, &n, &err), DR_OK);
    assert_int_equal(n, 100);
    free(data);
}

/* Files whose size is not known up front (size 0 in stat) still read fully
 * and still respect the cap. */
static void test_read_unsized_files(void **state)
{
    (void)state;
    dr_err err = { 0 };
    uint8_t *data = NULL;
    size_t n = 0;
    assert_int_equal(dr_read_file("/dev/null", 10, &data, &n, &err), DR_OK);
    assert_int_equal(n, 0);
    free(data);

    if (access("/proc/self/status", R_OK) != 0)
        skip();
    assert_int_equal(dr_read_file("/proc/self/status", 1 << 20, &data, &n, &err), DR_OK);
    assert_true(n > 100);
    assert_int_equal(strlen((char *)data), n);
    assert_non_null(strstr((char *)data, "Name:"));
    free(data);
    assert_int_equal(dr_read_file("/proc/self/status", 10, &data, &n, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "/proc/self/status"));
    assert_null(data);
}

/* ---- planted links and special files (issue 27 #3) ---------------------- */

/* dir/m is the "model_dir", dir/victim a file outside it holding "victim". */
static void victim_setup(const char *dir, char *m, char *victim, size_t size)
{
    FILE *f;
    join(m, size, dir, "m");
    join(victim, size, dir, "victim");
    assert_int_equal(mkdir(m, 0755), 0);
    assert_non_null(f = fopen(victim, "w"));
    fputs("victim", f);
    fclose(f);
}

static void assert_content(const char *path, const char *want)
{
    uint8_t *data = NULL;
    size_t n = 0;
    dr_err err = { 0 };
    assert_int_equal(dr_read_file(path, 1 << 20, &data, &n, &err), DR_OK);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(data, want, n);
    free(data);
}

static void assert_regular(const char *path)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
}

/* `ln -s /tmp/victim M/eval.json.tmp.$PID`, then a write of M/eval.json:
 * the victim is untouched and eval.json is a regular file (before: the
 * victim was overwritten and eval.json became a link to it). The same with
 * a planted regular file, and with a link at eval.json itself. */
static void test_planted_temp_link(void **state)
{
    char m[512], victim[512], path[600], tmp[700];
    dr_err err = { 0 };
    victim_setup(*state, m, victim, sizeof m);
    join(path, sizeof path, m, "eval.json");
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(dr_write_atomic(path, "{\"loss\":1}", 10, &err), DR_OK);
    assert_content(victim, "victim");
    assert_regular(path);
    assert_content(path, "{\"loss\":1}");
    assert_int_equal(count_entries(m), 2);        /* eval.json and the planted link, no other temp */

    /* a second write finds .tmp.<pid> (and .tmp.<pid>.1) taken: still fine */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.1", path, (long)getpid());
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(dr_write_atomic(path, "again", 5, &err), DR_OK);
    assert_content(victim, "victim");
    assert_content(path, "again");

    /* a planted regular file at the temp name is neither truncated nor renamed */
    char ps[600], pst[700];
    join(ps, sizeof ps, m, "ps_schedule.json");
    snprintf(pst, sizeof pst, "%s.tmp.%ld", ps, (long)getpid());
    FILE *f = fopen(pst, "w");
    assert_non_null(f);
    fputs("planted", f);
    fclose(f);
    assert_int_equal(dr_write_atomic(ps, "sched", 5, &err), DR_OK);
    assert_content(pst, "planted");
    assert_content(ps, "sched");

    /* a link at the final name: replaced by the file, its target untouched */
    char ex[600];
    join(ex, sizeof ex, m, "batches.json");
    assert_int_equal(symlink(victim, ex), 0);
    assert_int_equal(dr_write_atomic(ex, "[]", 2, &err), DR_OK);
    assert_regular(ex);
    assert_content(victim, "victim");
}

/* dr_read_regular refuses a link, a FIFO (without waiting for a writer), a
 * device and a directory, naming the file and what it is. */
static void test_read_regular_refuses(void **state)
{
    char m[512], victim[512], link[600], fifo[600], ok[600];
    dr_err err = { 0 };
    uint8_t *data = NULL;
    size_t n = 0;
    victim_setup(*state, m, victim, sizeof m);
    join(link, sizeof link, m, "ckpt.bin");
    assert_int_equal(symlink(victim, link), 0);
    assert_int_equal(dr_read_regular(link, 100, &data, &n, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, link));
    assert_non_null(strstr(err.msg, "symbolic link"));
    assert_null(data);
    assert_int_equal(dr_read_file(link, 100, &data, &n, &err), DR_OK);   /* the general reader follows */
    free(data);

    join(fifo, sizeof fifo, m, "metrics.jsonl");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    alarm(10);   /* a blocking open would hang here */
    assert_int_equal(dr_read_regular(fifo, 100, &data, &n, &err), DR_EFORMAT);
    alarm(0);
    assert_non_null(strstr(err.msg, fifo));
    assert_non_null(strstr(err.msg, "not a regular file (it is a FIFO)"));

    assert_int_equal(dr_read_regular("/dev/zero", 100, &data, &n, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "/dev/zero: not a regular file (it is a character device)"));
    assert_int_equal(dr_read_regular(m, 100, &data, &n, &err), DR_EIO);
    assert_non_null(strstr(err.msg, "is a directory"));

    join(ok, sizeof ok, m, "summary.json");
    assert_int_equal(dr_write_atomic(ok, "{}", 2, &err), DR_OK);
    assert_int_equal(dr_read_regular(ok, 100, &data, &n, &err), DR_OK);
    assert_int_equal(n, 2);
    free(data);
}

/* Temp names and their writers: only a dead writer's temp file is stale. */
static void test_temp_owner(void **state)
{
    (void)state;
    assert_int_equal(dr_temp_pid("ckpt.bin.tmp.1234", "ckpt.bin"), 1234);
    assert_int_equal(dr_temp_pid("ckpt.bin.tmp.1234.7", "ckpt.bin"), 1234);
    assert_int_equal(dr_temp_pid("ckpt.bin.tmp.1234.", "ckpt.bin"), 0);
    assert_int_equal(dr_temp_pid("ckpt.bin.tmp.12x", "ckpt.bin"), 0);
    assert_int_equal(dr_temp_pid("ckpt.bin.tmp.", "ckpt.bin"), 0);
    assert_int_equal(dr_temp_pid("ckpt.bin.tmp.0", "ckpt.bin"), 0);
    assert_int_equal(dr_temp_pid("ckpt.bin.tmp.99999999999999", "ckpt.bin"), 0);
    assert_int_equal(dr_temp_pid("ckpt.binx.tmp.12", "ckpt.bin"), 0);
    assert_int_equal(dr_temp_pid("ckpt.bin", "ckpt.bin"), 0);
    assert_int_equal(dr_temp_pid("events.out.tfevents.1.host.tmp.55", ""), 55);
    assert_false(dr_pid_gone(getpid()));
    assert_false(dr_pid_gone(0));
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(0);
    assert_int_equal(waitpid(child, NULL, 0), child);
    assert_true(dr_pid_gone(child));   /* reaped: gone (unless reused in between) */
}

/* ---- sealed blobs (the OpenCL kernel cache's files) --------------------- */

static void test_sealed(void **state)
{
    uint8_t key[32], other[32], *file = NULL;
    const uint8_t *payload;
    size_t n = 0, pn = 0;
    dr_err err = { 0 };
    (void)state;
    memset(key, 7, sizeof key);
    memset(other, 8, sizeof other);
    assert_int_equal(dr_sealed_make(key, "binary!", 7, &file, &n, &err), DR_OK);
    assert_int_equal(n, DR_SEALED_HEADER + 7);
    assert_int_equal(dr_sealed_open(file, n, key, &payload, &pn, &err), DR_OK);
    assert_int_equal(pn, 7);
    assert_memory_equal(payload, "binary!", 7);
    for (size_t cut = 0; cut < n; cut++) {   /* every truncation is refused */
        assert_int_equal(dr_sealed_open(file, cut, key, &payload, &pn, &err), DR_EFORMAT);
        assert_null(payload);
    }
    assert_non_null(strstr(err.msg, "the header says 7 bytes of payload, the file has 6"));
    assert_int_equal(dr_sealed_open(file, n, other, &payload, &pn, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "another key"));
    file[DR_SEALED_HEADER + 3] ^= 1;
    assert_int_equal(dr_sealed_open(file, n, key, &payload, &pn, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "SHA-256"));
    file[0] = 'X';
    assert_int_equal(dr_sealed_open(file, n, key, &payload, &pn, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "magic"));
    free(file);
}

/* ---- dr_mkdirs ---------------------------------------------------------- */

static void test_mkdirs(void **state)
{
    char path[512], file[600];
    struct stat st;
    dr_err err = { 0 };
    join(path, sizeof path, *state, "a/b//c/");
    assert_int_equal(dr_mkdirs(path, &err), DR_OK);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(dr_mkdirs(path, &err), DR_OK);      /* exists: fine */

    join(file, sizeof file, *state, "a/plain");
    assert_int_equal(dr_write_atomic(file, "p", 1, &err), DR_OK);
    assert_int_equal(dr_mkdirs(file, &err), DR_EIO);     /* exists, not a dir */
    assert_non_null(strstr(err.msg, file));
    assert_non_null(strstr(err.msg, "not a directory"));

    join(path, sizeof path, *state, "a/plain/sub");
    assert_int_equal(dr_mkdirs(path, &err), DR_EIO);     /* a file on the way */
    assert_non_null(strstr(err.msg, path));

    assert_int_equal(dr_mkdirs("", &err), DR_EUSAGE);
}

/* ---- little-endian helpers and dr_err ----------------------------------- */

static void test_little_endian(void **state)
{
    (void)state;
    uint8_t b[8];
    dr_put_u32le(b, 0x11223344u);
    const uint8_t want32[4] = { 0x44, 0x33, 0x22, 0x11 };
    assert_memory_equal(b, want32, 4);
    assert_int_equal(dr_get_u32le(b), 0x11223344u);

    dr_put_u64le(b, UINT64_C(0x0102030405060708));
    const uint8_t want64[8] = { 8, 7, 6, 5, 4, 3, 2, 1 };
    assert_memory_equal(b, want64, 8);
    assert_true(dr_get_u64le(b) == UINT64_C(0x0102030405060708));
    dr_put_u64le(b, UINT64_MAX);
    assert_true(dr_get_u64le(b) == UINT64_MAX);
}

static void test_error_helpers(void **state)
{
    (void)state;
    dr_err err = { 0 };
    assert_int_equal(dr_fail(&err, DR_EFORMAT, "field %s: expected %d", "dims", 3), DR_EFORMAT);
    assert_int_equal(err.code, DR_EFORMAT);
    assert_string_equal(err.msg, "field dims: expected 3");
    assert_int_equal(dr_fail_wrap(&err, "reading %s", "foo.idx"), DR_EFORMAT);
    assert_string_equal(err.msg, "reading foo.idx: field dims: expected 3");
    assert_int_equal(dr_fail(NULL, DR_EIO, "ignored"), DR_EIO);

    char longer[700];
    memset(longer, 'q', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    dr_fail_wrap(&err, "%s", longer);               /* truncates, stays terminated */
    assert_int_equal(strlen(err.msg), sizeof err.msg - 1);

    assert_string_equal(dr_code_name(DR_OK), "DR_OK");
    assert_string_equal(dr_code_name(DR_EUSAGE), "DR_EUSAGE");
    assert_string_equal(dr_code_name(DR_EFAULT), "DR_EFAULT");
    assert_non_null(dr_code_name(1000));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_overwrite_keeps_complete_file, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_write_into_missing_dir_fails, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_failed_rename_leaves_no_temp, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_read_missing_names_path, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_read_size_cap, make_temp_dir, drop_temp_dir),
        cmocka_unit_test(test_read_unsized_files),
        cmocka_unit_test_setup_teardown(test_planted_temp_link, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_read_regular_refuses, make_temp_dir, drop_temp_dir),
        cmocka_unit_test(test_temp_owner),
        cmocka_unit_test(test_sealed),
        cmocka_unit_test_setup_teardown(test_mkdirs, make_temp_dir, drop_temp_dir),
        cmocka_unit_test(test_little_endian),
        cmocka_unit_test(test_error_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
