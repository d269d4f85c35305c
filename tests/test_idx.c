/* Unit tests for core/idx.c: small IDX files written here, plain and
 * gzipped, then every way a file can be wrong; real Fashion-MNIST if present. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <zlib.h>
#include <cmocka.h>

#include "tests/tmpdir.h"

#include "distref/idx.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

/* ---- a fresh temp directory per test ----------------------------------- */

static int make_temp_dir(void **state) { return temp_dir_from(state, "/tmp/distref_idx_XXXXXX"); }

/* ---- building IDX files ------------------------------------------------- */

typedef struct bytes {
    uint8_t *p;
    size_t   n;
} bytes;

/* Header (magic 00 00 type ndim, big-endian dims) followed by `fill` data
 * bytes with a recognizable, not very compressible pattern. */
static bytes make_idx(uint8_t type, uint32_t ndim, const uint32_t *dims, size_t fill)
{
    bytes b = { malloc(4 + 4 * (size_t)ndim + fill + 1), 4 + 4 * (size_t)ndim + fill };
    assert_non_null(b.p);
    b.p[0] = 0;
    b.p[1] = 0;
    b.p[2] = type;
    b.p[3] = (uint8_t)ndim;
    for (uint32_t d = 0; d < ndim; d++)
        for (int k = 0; k < 4; k++)
            b.p[4 + 4 * d + (uint32_t)k] = (uint8_t)(dims[d] >> (24 - 8 * k));
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < fill; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        b.p[4 + 4 * ndim + i] = (uint8_t)(i % 7 == 0 ? x : i);
    }
    return b;
}

static void write_plain(const char *path, bytes b)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b.p, 1, b.n, f), b.n);
    assert_int_equal(fclose(f), 0);
}

static void write_gz(const char *path, bytes b)
{
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, b.p, (unsigned)b.n), (int)b.n);
    assert_int_equal(gzclose(gz), Z_OK);
}

static void join(char *out, size_t size, const char *dir, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

/* Loading must fail with code, a message naming the file and the phrase,
 * and leave nothing allocated. */
static void expect_failure(const char *path, uint32_t ndim, int code, const char *phrase)
{
    dr_idx idx;
    dr_err err = { 0 };
    assert_int_equal(dr_idx_load(path, ndim, &idx, &err), code);
    assert_int_equal(err.code, code);
    if (strstr(err.msg, path) == NULL || strstr(err.msg, phrase) == NULL)
        fail_msg("message \"%s\" should name %s and say \"%s\"", err.msg, path, phrase);
    assert_null(idx.data);
    dr_idx_free(&idx);
}

/* ---- good files --------------------------------------------------------- */

static void check_loads(const char *path, bytes b, uint32_t ndim, const uint32_t *dims, size_t count)
{
    dr_idx idx;
    dr_err err = { 0 };
    int rc = dr_idx_load(path, ndim, &idx, &err);
    if (rc != DR_OK)
        fail_msg("%s: %s", path, err.msg);
    assert_int_equal(idx.ndim, ndim);
    for (uint32_t d = 0; d < ndim; d++)
        assert_int_equal(idx.dims[d], dims[d]);
    assert_int_equal(idx.count, count);
    assert_non_null(idx.data);
    if (count > 0)
        assert_memory_equal(idx.data, b.p + 4 + 4 * ndim, count);
    dr_idx_free(&idx);
    assert_null(idx.data);
}

static void test_load_plain_and_gzip(void **state)
{
    char plain[512], gz[512];
    const uint32_t label_dims[1] = { 10 };
    const uint32_t image_dims[3] = { 5, 4, 3 };
    const uint32_t four_dims[4] = { 2, 3, 4, 5 };
    const uint32_t empty_dims[3] = { 0, 28, 28 };
    struct { uint32_t ndim; const uint32_t *dims; size_t count; } cases[] = {
        { 1, label_dims, 10 }, { 3, image_dims, 60 }, { 4, four_dims, 120 }, { 3, empty_dims, 0 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        bytes b = make_idx(DR_IDX_UBYTE, cases[c].ndim, cases[c].dims, cases[c].count);
        snprintf(plain, sizeof plain, "%s/case%zu-idx", (char *)*state, c);
        snprintf(gz, sizeof gz, "%s/case%zu-idx.gz", (char *)*state, c);
        write_plain(plain, b);
        write_gz(gz, b);
        check_loads(plain, b, cases[c].ndim, cases[c].dims, cases[c].count);
        check_loads(gz, b, cases[c].ndim, cases[c].dims, cases[c].count);
        free(b.p);
    }
}

/* ---- one test per way a file can be wrong ------------------------------ */

static void test_wrong_magic(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "magic-idx1-ubyte");
    const uint32_t dims[1] = { 4 };
    bytes b = make_idx(DR_IDX_UBYTE, 1, dims, 4);
    b.p[0] = 0x1f;
    b.p[1] = 0x8c;
    write_plain(path, b);
    expect_failure(path, 1, DR_EFORMAT, "not an IDX file: magic bytes 1f 8c 08 01, expected 00 00 08 01");
    free(b.p);
}

static void test_wrong_type(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "float-idx1.gz");
    const uint32_t dims[1] = { 4 };
    bytes b = make_idx(0x0d, 1, dims, 16);
    write_gz(path, b);
    expect_failure(path, 1, DR_EFORMAT, "element type 0x0d, expected 0x08");
    free(b.p);
}

static void test_wrong_ndim(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "images-idx3-ubyte");
    const uint32_t dims[3] = { 2, 2, 2 };
    bytes b = make_idx(DR_IDX_UBYTE, 3, dims, 8);
    write_plain(path, b);
    expect_failure(path, 1, DR_EFORMAT, "number of dimensions 3, expected 1");
    expect_failure(path, 0, DR_EUSAGE, "expected 1 to 4");   /* a caller bug */
    expect_failure(path, 5, DR_EUSAGE, "expected 1 to 4");
    free(b.p);
}

static void test_truncated_header(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "short-header");
    const uint32_t dims[3] = { 60000, 28, 28 };
    bytes b = make_idx(DR_IDX_UBYTE, 3, dims, 0);
    b.n = 3;                                    /* not even the magic */
    write_plain(path, b);
    expect_failure(path, 3, DR_EFORMAT, "truncated header");
    b.n = 4 + 4 * 2 + 1;                        /* magic, 2 of 3 dims, a byte */
    write_plain(path, b);
    expect_failure(path, 3, DR_EFORMAT, "truncated header");
    b.n = 0;
    write_plain(path, b);
    expect_failure(path, 3, DR_EFORMAT, "truncated header");
    free(b.p);
}

static void test_truncated_data(void **state)
{
    char plain[512], gz[512];
    join(plain, sizeof plain, *state, "train-images-idx3-ubyte");
    join(gz, sizeof gz, *state, "train-images-idx3-ubyte.gz");
    const uint32_t dims[3] = { 60000, 28, 28 };
    bytes b = make_idx(DR_IDX_UBYTE, 3, dims, 1234);
    write_plain(plain, b);
    write_gz(gz, b);
    const char *phrase = "truncated: header says 60000x28x28 = 47040000 bytes of data, file has 1234";
    expect_failure(plain, 3, DR_EFORMAT, phrase);
    expect_failure(gz, 3, DR_EFORMAT, phrase);
    free(b.p);
}

static void test_trailing_bytes(void **state)
{
    char plain[512], gz[512];
    join(plain, sizeof plain, *state, "labels-idx1-ubyte");
    join(gz, sizeof gz, *state, "labels-idx1-ubyte.gz");
    const uint32_t dims[1] = { 100 };
    bytes b = make_idx(DR_IDX_UBYTE, 1, dims, 103);
    write_plain(plain, b);
    write_gz(gz, b);
    expect_failure(plain, 1, DR_EFORMAT, "3 trailing bytes");
    expect_failure(gz, 1, DR_EFORMAT, "3 trailing bytes");
    free(b.p);
}

static void test_oversized_dims(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "huge-idx3-ubyte");
    const uint32_t dims[3] = { 60000, 60000, 60000 };   /* 2^47 bytes */
    bytes b = make_idx(DR_IDX_UBYTE, 3, dims, 16);
    write_plain(path, b);
    expect_failure(path, 3, DR_EFORMAT, "exceed the limit");
    const uint32_t wide[3] = { 0xffffffffu, 0xffffffffu, 0xffffffffu };
    free(b.p);
    b = make_idx(DR_IDX_UBYTE, 3, wide, 16);            /* would overflow 64 bits */
    write_plain(path, b);
    expect_failure(path, 3, DR_EFORMAT, "exceed the limit");
    free(b.p);
}

/* Reads a whole (small) file into memory, for corrupting it. */
static bytes slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    bytes b = { malloc(1 << 16), 0 };
    assert_non_null(b.p);
    b.n = fread(b.p, 1, 1 << 16, f);
    fclose(f);
    return b;
}

static void test_corrupt_gzip(void **state)
{
    char good[512], bad[512];
    join(good, sizeof good, *state, "good-idx3-ubyte.gz");
    join(bad, sizeof bad, *state, "bad-idx3-ubyte.gz");
    const uint32_t dims[3] = { 8, 28, 28 };
    bytes b = make_idx(DR_IDX_UBYTE, 3, dims, 8 * 28 * 28);
    write_gz(good, b);
    free(b.p);

    bytes gz = slurp(good);
    assert_true(gz.n > 200);
    for (size_t i = gz.n / 2; i < gz.n / 2 + 8; i++)     /* clear of header and trailer */
        gz.p[i] ^= 0xa5;
    write_plain(bad, gz);
    expect_failure(bad, 3, DR_EFORMAT, "corrupt gzip data");

    free(gz.p);

    bytes cut = slurp(good);
    cut.n = cut.n * 3 / 4;                                /* cut off: no trailer */
    write_plain(bad, cut);
    expect_failure(bad, 3, DR_EFORMAT, "corrupt gzip data: unexpected end of file");
    free(cut.p);
}

/* ---- memory follows the file, not the header ------------------------- */

/* Loads path in a child process whose address space may grow by only
 * 512 MiB; 0 when the child got DR_EFORMAT with "truncated" in the message
 * (no crash, no DR_ENOMEM). The limit is relative to what the child already
 * maps, so AddressSanitizer's shadow reservations do not count against it. */
static int load_under_rlimit(const char *path, uint32_t ndim, char *msg, size_t msg_size)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        unsigned long long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (f == NULL || fscanf(f, "%llu", &pages) != 1)
            _exit(3);
        fclose(f);
        struct rlimit lim;
        lim.rlim_cur = lim.rlim_max = (rlim_t)(pages * (unsigned long long)sysconf(_SC_PAGESIZE))
                                      + ((rlim_t)512 << 20);
        if (setrlimit(RLIMIT_AS, &lim) != 0)
            _exit(3);
        dr_idx idx;
        dr_err err = { 0 };
        int rc = dr_idx_load(path, ndim, &idx, &err);
        ssize_t w = write(fds[1], err.msg, strlen(err.msg));
        (void)w;
        _exit(rc == DR_EFORMAT && strstr(err.msg, "truncated") != NULL && idx.data == NULL ? 0 : 1);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], msg, msg_size - 1);
    msg[n > 0 ? (size_t)n : 0] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
        return 3;                               /* no /proc or no setrlimit: skipped */
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_header_larger_than_file(void **state)
{
    char plain[512], gz[512], some[512], msg[512];
    join(plain, sizeof plain, *state, "huge-idx1-ubyte");
    join(gz, sizeof gz, *state, "huge-idx1-ubyte.gz");
    join(some, sizeof some, *state, "some-idx1-ubyte");
    const uint32_t dims[1] = { UINT32_C(1) << 31 };          /* the 2 GiB limit itself */
    bytes b = make_idx(DR_IDX_UBYTE, 1, dims, 0);            /* 8 bytes: the header alone */
    write_plain(plain, b);
    write_gz(gz, b);
    free(b.p);
    b = make_idx(DR_IDX_UBYTE, 1, dims, (size_t)3 << 20);    /* header and 3 MiB of data */
    write_plain(some, b);
    free(b.p);
    expect_failure(plain, 1, DR_EFORMAT, "truncated: header says 2147483648 = 2147483648 bytes "
                   "of data, file has 0");
    expect_failure(gz, 1, DR_EFORMAT, "truncated: header says 2147483648 = 2147483648 bytes "
                   "of data, file has 0");
    expect_failure(some, 1, DR_EFORMAT, "file has 3145728");
#if defined(__linux__)
    const char *paths[3] = { plain, gz, some };
    for (int i = 0; i < 3; i++) {
        int rc = load_under_rlimit(paths[i], 1, msg, sizeof msg);
        if (rc == 3)
            skip();
        if (rc != 0)
            fail_msg("%s under a 512 MiB address-space limit: child status %d, message \"%s\"",
                     paths[i], rc, msg);
    }
#else
    (void)msg;
#endif
}

/* ---- gzip: members, trailing garbage, checks ---------------------------- */

/* b[from, to) as one gzip member, appended to the file at path. */
static void append_member(const char *path, const uint8_t *p, size_t n)
{
    gzFile gz = gzopen(path, "ab");
    assert_non_null(gz);
    if (n > 0)
        assert_int_equal(gzwrite(gz, p, (unsigned)n), (int)n);
    assert_int_equal(gzclose(gz), Z_OK);
}

static void append_raw(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void test_gzip_trailing_garbage(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "labels-idx1-ubyte.gz");
    const uint32_t dims[1] = { 100 };
    bytes b = make_idx(DR_IDX_UBYTE, 1, dims, 100);
    struct { const char *bytes; size_t n; const char *phrase; } cases[] = {
        { "garbage", 7, "7 trailing bytes of garbage after the last gzip member" },
        { "\x1f", 1, "1 trailing bytes of garbage" },
        { "\0\0\0\0", 4, "4 trailing bytes of garbage" },
        { "\x1f\x8b\x08\0junk", 8, "corrupt gzip data" },     /* a broken second member */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        unlink(path);
        write_gz(path, b);
        append_raw(path, cases[c].bytes, cases[c].n);
        expect_failure(path, 1, DR_EFORMAT, cases[c].phrase);
    }
    /* 64 KiB of garbage: more than one read's worth, all counted */
    unlink(path);
    write_gz(path, b);
    uint8_t *junk = calloc(70000, 1);
    assert_non_null(junk);
    junk[0] = 'x';
    append_raw(path, junk, 70000);
    free(junk);
    expect_failure(path, 1, DR_EFORMAT, "70000 trailing bytes of garbage");
    free(b.p);
}

static void test_gzip_concatenated_members(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "images-idx3-ubyte.gz");
    const uint32_t dims[3] = { 3, 28, 28 };
    bytes b = make_idx(DR_IDX_UBYTE, 3, dims, 3 * 28 * 28);
    /* cut in the magic, in the dims, at the data, in the data; with an
     * empty member too */
    const size_t cuts[] = { 2, 9, 16, 1000, b.n - 1 };
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        unlink(path);
        append_member(path, b.p, cuts[c]);
        if (c == 2)
            append_member(path, b.p, 0);
        append_member(path, b.p + cuts[c], b.n - cuts[c]);
        check_loads(path, b, 3, dims, 3 * 28 * 28);
    }
    /* three members, the last one making the data too long */
    unlink(path);
    append_member(path, b.p, 500);
    append_member(path, b.p + 500, b.n - 500);
    append_member(path, (const uint8_t *)"abc", 3);
    expect_failure(path, 3, DR_EFORMAT, "3 trailing bytes after the 3x28x28 = 2352 bytes");
    free(b.p);
}

static void test_gzip_checks(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "crc-idx1-ubyte.gz");
    const uint32_t dims[1] = { 300 };
    bytes b = make_idx(DR_IDX_UBYTE, 1, dims, 300);
    write_gz(path, b);
    bytes gz = slurp(path);
    free(b.p);
    /* the trailer: CRC-32, then the length, little-endian */
    gz.p[gz.n - 8] ^= 0x01;
    write_plain(path, gz);
    expect_failure(path, 1, DR_EFORMAT, "corrupt gzip data: incorrect data check");
    gz.p[gz.n - 8] ^= 0x01;
    gz.p[gz.n - 4] ^= 0x01;
    write_plain(path, gz);
    expect_failure(path, 1, DR_EFORMAT, "corrupt gzip data: incorrect length check");
    gz.p[gz.n - 4] ^= 0x01;
    /* a bad CRC in the second of two members */
    write_plain(path, gz);
    gz.p[gz.n - 8] ^= 0x01;
    append_raw(path, gz.p, gz.n);
    expect_failure(path, 1, DR_EFORMAT, "incorrect data check");
    /* the gzip magic and nothing else; a broken compression method */
    write_plain(path, (bytes){ (uint8_t *)"\x1f\x8b", 2 });
    expect_failure(path, 1, DR_EFORMAT, "corrupt gzip data: unexpected end of file");
    gz.p[gz.n - 8] ^= 0x01;
    gz.p[2] = 7;
    write_plain(path, gz);
    expect_failure(path, 1, DR_EFORMAT, "corrupt gzip data: unknown compression method");
    free(gz.p);
}

/* ---- expected dimensions, from the header ------------------------------ */

static void test_load_dims(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "images-idx3-ubyte");
    const uint32_t side[2] = { 28, 28 };
    const uint32_t good[3] = { 2, 28, 28 };
    bytes b = make_idx(DR_IDX_UBYTE, 3, good, 2 * 28 * 28);
    write_plain(path, b);
    dr_idx idx;
    dr_err err = { 0 };
    if (dr_idx_load_dims(path, 3, side, &idx, &err) != DR_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(idx.count, 2 * 28 * 28);
    assert_memory_equal(idx.data, b.p + 16, 2 * 28 * 28);
    dr_idx_free(&idx);
    free(b.p);

    /* wrong sides, refused from the 16-byte header alone */
    const uint32_t wide[3] = { 1, 2, UINT32_C(1) << 30 };
    b = make_idx(DR_IDX_UBYTE, 3, wide, 0);
    write_plain(path, b);
    assert_int_equal(dr_idx_load_dims(path, 3, side, &idx, &err), DR_EFORMAT);
    if (strstr(err.msg, path) == NULL ||
        strstr(err.msg, "dimensions 1x2x1073741824, expected 28x28 after the first") == NULL)
        fail_msg("unexpected message \"%s\"", err.msg);
    assert_null(idx.data);
    expect_failure(path, 3, DR_EFORMAT, "truncated: header says 1x2x1073741824");  /* no dims check */
    free(b.p);
}

static void test_missing_file(void **state)
{
    char path[512];
    join(path, sizeof path, *state, "t10k-labels-idx1-ubyte.gz");
    expect_failure(path, 1, DR_EIO, "No such file or directory");
}

/* ---- the real data, when the dataset package is installed --------------- */

static void test_fashion_mnist_train_labels(void **state)
{
    (void)state;
    const char *path = FASHION_DIR "/train-labels-idx1-ubyte.gz";
    if (access(path, R_OK) != 0)
        skip();
    dr_idx idx;
    dr_err err = { 0 };
    if (dr_idx_load(path, 1, &idx, &err) != DR_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(idx.dims[0], 60000);
    assert_int_equal(idx.count, 60000);
    long per_class[10] = { 0 };
    for (size_t i = 0; i < idx.count; i++) {
        assert_true(idx.data[i] < 10);
        per_class[idx.data[i]]++;
    }
    for (int c = 0; c < 10; c++)
        assert_int_equal(per_class[c], 6000);      /* Fashion-MNIST is balanced */
    dr_idx_free(&idx);
}

static void test_fashion_mnist_test_images(void **state)
{
    (void)state;
    const char *path = FASHION_DIR "/t10k-images-idx3-ubyte.gz";
    if (access(path, R_OK) != 0)
        skip();
    dr_idx idx;
    dr_err err = { 0 };
    if (dr_idx_load(path, 3, &idx, &err) != DR_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(idx.ndim, 3);
    assert_int_equal(idx.dims[0], 10000);
    assert_int_equal(idx.dims[1], 28);
    assert_int_equal(idx.dims[2], 28);
    assert_int_equal(idx.count, 10000 * 28 * 28);
    dr_idx_free(&idx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_load_plain_and_gzip, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_wrong_magic, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_wrong_type, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_wrong_ndim, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_truncated_header, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_truncated_data, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_trailing_bytes, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_oversized_dims, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_corrupt_gzip, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_missing_file, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_header_larger_than_file, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_gzip_trailing_garbage, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_gzip_concatenated_members, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_gzip_checks, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_load_dims, make_temp_dir, drop_temp_dir),
        cmocka_unit_test(test_fashion_mnist_train_labels),
        cmocka_unit_test(test_fashion_mnist_test_images),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
