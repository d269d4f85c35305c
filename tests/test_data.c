/* Unit tests for common/data.c: the synthetic dataset against its documented
 * definition (dr_rng_u32 bytes, dr_dot_f32 teacher), Fashion-MNIST (real
 * files when installed, broken ones written here), the toy, gathering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <cmocka.h>

#include "tests/tmpdir.h"

#include "distref/data.h"
#include "distref/exact.h"
#include "distref/rng.h"

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- synthetic ---------------------------------------------------------- */

static void test_synthetic_is_a_pure_function(void **state)
{
    (void)state;
    dr_dataset a, b;
    dr_err err = { 0 };
    assert_int_equal(dr_dataset_synthetic(11, 0, 200, &a, &err), DR_OK);
    assert_string_equal(a.name, "synthetic");
    assert_int_equal(a.features, 784);
    assert_int_equal(a.classes, 10);
    assert_true(a.values == NULL && a.targets == NULL);
    /* A shorter set is a prefix: each example depends only on its index. */
    assert_int_equal(dr_dataset_synthetic(11, 0, 50, &b, &err), DR_OK);
    assert_int_equal(memcmp(a.pixels, b.pixels, 50 * 784), 0);
    assert_int_equal(memcmp(a.labels, b.labels, 50), 0);
    dr_dataset_free(&b);
    assert_int_equal(dr_dataset_synthetic(11, 1, 200, &b, &err), DR_OK);
    assert_true(memcmp(a.pixels, b.pixels, 200 * 784) != 0);   /* test split differs */
    dr_dataset_free(&b);
    assert_int_equal(dr_dataset_synthetic(12, 0, 200, &b, &err), DR_OK);
    assert_true(memcmp(a.pixels, b.pixels, 200 * 784) != 0);   /* seed matters */
    dr_dataset_free(&b);
    /* Byte layout: 4 bytes per draw, least significant first. */
    for (int split = 0; split < 2; split++) {
        assert_int_equal(dr_dataset_synthetic(11, split, 4, &b, &err), DR_OK);
        for (uint32_t j = 0; j < 784; j++) {
            uint32_t u = dr_rng_u32(11, DR_STREAM_DATA + (uint64_t)split, 3 * 196 + j / 4);
            assert_int_equal(b.pixels[3 * 784 + j], (u >> (8 * (j % 4))) & 0xff);
        }
        dr_dataset_free(&b);
    }
    dr_dataset_free(&a);
}

/* The labels, recomputed straight from the definition in data.h with
 * dr_dot_f32 (data.c uses an exact fixed-point shortcut; this is its proof).
 * 3000 examples x 784 pixels exercise every byte value. */
static void check_labels_by_definition(uint64_t seed, int split, uint32_t n)
{
    float *w = malloc(sizeof(float) * 10 * 784);     /* class-major copy */
    float x[784];
    dr_dataset d;
    dr_err err = { 0 };
    assert_non_null(w);
    assert_int_equal(dr_dataset_synthetic(seed, split, n, &d, &err), DR_OK);
    for (uint32_t j = 0; j < 784; j++)
        for (uint32_t c = 0; c < 10; c++)
            w[c * 784 + j] = 2.0f * dr_rng_uniform(seed, DR_STREAM_TEACHER, 10 * j + c) - 1.0f;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < 784; j++)
            x[j] = (float)d.pixels[784 * i + j] / 255.0f - 0.5f;
        uint32_t best = 0;
        float best_v = dr_dot_f32(x, w, 784);
        for (uint32_t c = 1; c < 10; c++) {
            float v = dr_dot_f32(x, w + 784 * c, 784);
            if (v > best_v) {
                best_v = v;
                best = c;
            }
        }
        assert_int_equal(d.labels[i], best);
    }
    dr_dataset_free(&d);
    free(w);
}

static void test_synthetic_labels_by_definition(void **state)
{
    (void)state;
    check_labels_by_definition(0, 0, 3000);
    check_labels_by_definition(UINT64_C(0xdeadbeefcafe), 1, 1000);
}

static void test_synthetic_balance_and_speed(void **state)
{
    (void)state;
    dr_dataset d;
    dr_err err = { 0 };
    for (uint64_t seed = 0; seed < 3; seed++) {
        double t0 = seconds_now();
        assert_int_equal(dr_dataset_synthetic(seed, 0, 20000, &d, &err), DR_OK);
        double dt = seconds_now() - t0;
        uint32_t count[10] = { 0 };
        for (uint32_t i = 0; i < d.n; i++) {
            assert_true(d.labels[i] < 10);
            count[d.labels[i]]++;
        }
        printf("synthetic seed %llu: 20000 examples in %.3f s; classes",
               (unsigned long long)seed, dt);
        for (int c = 0; c < 10; c++) {
            printf(" %u", count[c]);
            assert_true(count[c] >= 600 && count[c] <= 5000);  /* 3% .. 25% */
        }
        printf("\n");
        dr_dataset_free(&d);
    }
}

static void test_synthetic_errors(void **state)
{
    (void)state;
    dr_dataset d;
    dr_err err = { 0 };
    assert_int_equal(dr_dataset_synthetic(1, 2, 10, &d, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "split"));
    assert_int_equal(dr_dataset_synthetic(1, -1, 10, &d, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "split"));
    assert_int_equal(dr_dataset_synthetic(1, 0, 0, &d, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "n:"));
    assert_null(d.pixels);
    dr_dataset_free(&d);
}

/* ---- Fashion-MNIST: the installed files --------------------------------- */

static void test_fashion_mnist_real(void **state)
{
    (void)state;
    if (access(DR_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0)
        skip();
    const uint32_t want_n[2] = { 60000, 10000 };
    for (int split = 0; split < 2; split++) {
        dr_dataset d;
        dr_err err = { 0 };
        double t0 = seconds_now();
        int rc = dr_dataset_fashion_mnist(DR_FASHION_MNIST_DIR, split, &d, &err);
        double dt = seconds_now() - t0;
        if (rc != DR_OK)
            fail_msg("%s", err.msg);
        printf("fashion-mnist split %d: %u examples in %.3f s\n", split, d.n, dt);
        assert_string_equal(d.name, "fashion_mnist");
        assert_int_equal(d.n, want_n[split]);
        assert_int_equal(d.features, 784);
        assert_int_equal(d.classes, 10);
        assert_int_equal(d.labels[0], 9);       /* both files start with an ankle boot */
        uint32_t count[10] = { 0 };
        for (uint32_t i = 0; i < d.n; i++)
            count[d.labels[i]]++;
        for (int c = 0; c < 10; c++)
            assert_int_equal(count[c], d.n / 10);   /* the classes are exactly balanced */
        dr_dataset_free(&d);
    }
}

/* ---- Fashion-MNIST: broken files in a temp directory -------------------- */

static int make_temp_dir(void **state) { return temp_dir_from(state, "/tmp/distref_data_XXXXXX"); }

static void path_in(const char *dir, const char *name, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", dir, name);
}

/* A ubyte IDX file, gzipped if name ends in ".gz", plain otherwise; element
 * k of the data is fill(k); fill NULL writes the header alone. */
static void write_idx(const char *dir, const char *name, uint32_t ndim, const uint32_t *dims,
                      uint8_t (*fill)(size_t))
{
    char path[256];
    path_in(dir, name, path, sizeof path);
    size_t name_len = strlen(name);
    int gzip = name_len > 3 && strcmp(name + name_len - 3, ".gz") == 0;
    gzFile gz = gzopen(path, gzip ? "wb" : "wbT");          /* T: written as it is */
    assert_non_null(gz);
    uint8_t head[4 + 4 * 3] = { 0, 0, 0x08, (uint8_t)ndim };
    size_t count = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        for (int k = 0; k < 4; k++)
            head[4 + 4 * d + (uint32_t)k] = (uint8_t)(dims[d] >> (24 - 8 * k));
        count *= dims[d];
    }
    assert_int_equal(gzwrite(gz, head, 4 + 4 * ndim), (int)(4 + 4 * ndim));
    for (size_t k = 0; fill != NULL && k < count; k++) {
        uint8_t b = fill(k);
        assert_int_equal(gzwrite(gz, &b, 1), 1);
    }
    assert_int_equal(gzclose(gz), Z_OK);
}

static uint8_t fill_pixel(size_t k) { return (uint8_t)(k * 7); }
static uint8_t fill_label(size_t k) { return (uint8_t)(k % 10); }
static uint8_t fill_bad_label(size_t k) { return k == 2 ? 10 : (uint8_t)(k % 10); }

static void write_images(const char *dir, uint32_t n, uint32_t rows, uint32_t cols)
{
    const uint32_t dims[3] = { n, rows, cols };
    write_idx(dir, "train-images-idx3-ubyte.gz", 3, dims, fill_pixel);
}

static void write_labels(const char *dir, uint32_t n, uint8_t (*fill)(size_t))
{
    write_idx(dir, "train-labels-idx1-ubyte.gz", 1, &n, fill);
}

static void expect_load_error(const char *dir, int code, const char *part1, const char *part2)
{
    dr_dataset d;
    dr_err err = { 0 };
    assert_int_equal(dr_dataset_fashion_mnist(dir, 0, &d, &err), code);
    if (strstr(err.msg, part1) == NULL || strstr(err.msg, part2) == NULL)
        fail_msg("message \"%s\" lacks \"%s\" or \"%s\"", err.msg, part1, part2);
    assert_null(d.pixels);
    assert_null(d.labels);
}

static void test_fashion_mnist_small_file(void **state)
{
    const char *dir = *state;
    write_images(dir, 3, 28, 28);
    write_labels(dir, 3, fill_label);
    dr_dataset d;
    dr_err err = { 0 };
    assert_int_equal(dr_dataset_fashion_mnist(dir, 0, &d, &err), DR_OK);
    assert_int_equal(d.n, 3);
    assert_int_equal(d.pixels[2 * 784 + 5], (uint8_t)((2 * 784 + 5) * 7));
    assert_int_equal(d.labels[2], 2);
    dr_dataset_free(&d);
}

static void test_fashion_mnist_errors(void **state)
{
    const char *dir = *state;
    expect_load_error(dir, DR_EIO, "train-images-idx3-ubyte.gz", "cannot open");
    write_images(dir, 3, 27, 28);
    write_labels(dir, 3, fill_label);
    expect_load_error(dir, DR_EFORMAT, "train-images-idx3-ubyte.gz", "27x28");
    write_images(dir, 3, 28, 28);
    write_labels(dir, 4, fill_label);
    expect_load_error(dir, DR_EFORMAT, "train-labels-idx1-ubyte.gz", "4 labels");
    write_labels(dir, 3, fill_bad_label);
    expect_load_error(dir, DR_EFORMAT, "train-labels-idx1-ubyte.gz", "label 2 is 10");
    write_images(dir, 0, 28, 28);
    write_labels(dir, 0, fill_label);
    expect_load_error(dir, DR_EFORMAT, "train-images-idx3-ubyte.gz", "no images");

    dr_dataset d;
    dr_err err = { 0 };
    assert_int_equal(dr_dataset_fashion_mnist(dir, 2, &d, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "split"));
    assert_int_equal(dr_dataset_fashion_mnist(dir, 1, &d, &err), DR_EIO);  /* no t10k here */
    assert_non_null(strstr(err.msg, "t10k-images-idx3-ubyte.gz"));
}

/* Unpacked files (train-images-idx3-ubyte, no .gz) are found too; the .gz
 * file wins when both are there; with neither, the message names both. */
static void test_fashion_mnist_unpacked(void **state)
{
    const char *dir = *state;
    const uint32_t dims[3] = { 4, 28, 28 };
    uint32_t n = 4;
    write_idx(dir, "train-images-idx3-ubyte", 3, dims, fill_pixel);
    write_idx(dir, "train-labels-idx1-ubyte", 1, &n, fill_label);
    dr_dataset d;
    dr_err err = { 0 };
    if (dr_dataset_fashion_mnist(dir, 0, &d, &err) != DR_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(d.n, 4);
    assert_int_equal(d.pixels[3 * 784 + 9], (uint8_t)((3 * 784 + 9) * 7));
    assert_int_equal(d.labels[3], 3);
    dr_dataset_free(&d);

    /* .gz images (3 of them) beside the unpacked ones (4): the .gz is read,
     * the unpacked labels still are */
    write_images(dir, 3, 28, 28);
    expect_load_error(dir, DR_EFORMAT, "train-labels-idx1-ubyte:", "4 labels, but");
    write_labels(dir, 3, fill_label);
    assert_int_equal(dr_dataset_fashion_mnist(dir, 0, &d, &err), DR_OK);
    assert_int_equal(d.n, 3);
    dr_dataset_free(&d);

    /* an unpacked file is checked like a gzipped one */
    char path[256];
    path_in(dir, "train-images-idx3-ubyte.gz", path, sizeof path);
    assert_int_equal(unlink(path), 0);
    path_in(dir, "train-labels-idx1-ubyte.gz", path, sizeof path);
    assert_int_equal(unlink(path), 0);
    const uint32_t narrow[3] = { 4, 28, 27 };
    write_idx(dir, "train-images-idx3-ubyte", 3, narrow, fill_pixel);
    expect_load_error(dir, DR_EFORMAT, "train-images-idx3-ubyte:", "4x28x27, expected 28x28");

    /* neither: both names in the message */
    char gz_name[300], plain_name[300];
    snprintf(gz_name, sizeof gz_name, "%s/t10k-images-idx3-ubyte.gz", dir);
    snprintf(plain_name, sizeof plain_name, "nor the unpacked %s/t10k-images-idx3-ubyte", dir);
    assert_int_equal(dr_dataset_fashion_mnist(dir, 1, &d, &err), DR_EIO);
    if (strstr(err.msg, gz_name) == NULL || strstr(err.msg, plain_name) == NULL ||
        strstr(err.msg, "cannot open: No such file or directory") == NULL)
        fail_msg("message \"%s\" should name %s and %s", err.msg, gz_name, plain_name);
    assert_null(d.pixels);
}

/* A header that claims more than the file holds is refused without
 * allocating what it claims: wrong sides from the header alone, a
 * plausible shape as truncated. */
static void test_fashion_mnist_huge_header(void **state)
{
    const char *dir = *state;
    uint32_t n = 3;
    write_labels(dir, n, fill_label);
    const uint32_t wide[3] = { 1, 2, UINT32_C(1) << 30 };      /* 2 GiB of "images" */
    write_idx(dir, "train-images-idx3-ubyte.gz", 3, wide, NULL);
    expect_load_error(dir, DR_EFORMAT, "train-images-idx3-ubyte.gz",
                      "dimensions 1x2x1073741824, expected 28x28 after the first");
    const uint32_t many[3] = { 2000000, 28, 28 };              /* 1.5 GB claimed */
    write_idx(dir, "train-images-idx3-ubyte", 3, many, NULL);
    char path[256];
    path_in(dir, "train-images-idx3-ubyte.gz", path, sizeof path);
    assert_int_equal(unlink(path), 0);
    expect_load_error(dir, DR_EFORMAT, "train-images-idx3-ubyte:",
                      "truncated: header says 2000000x28x28 = 1568000000 bytes of data, file has 0");
}

/* ---- the toy, gathering, freeing ---------------------------------------- */

static void test_toy(void **state)
{
    (void)state;
    dr_dataset d;
    dr_err err = { 0 };
    assert_int_equal(dr_dataset_toy(&d, &err), DR_OK);
    assert_string_equal(d.name, "toy");
    assert_int_equal(d.n, 100);
    assert_int_equal(d.features, 1);
    assert_int_equal(d.classes, 0);
    assert_true(d.pixels == NULL && d.labels == NULL);
    for (uint32_t i = 0; i < d.n; i++)
        assert_true(d.values[i] == 1.0f && d.targets[i] == 1.0f);
    const uint32_t ids[3] = { 99, 0, 42 };
    float x[3], t[3];
    uint8_t labels[3] = { 7, 7, 7 };
    dr_dataset_gather(&d, ids, 3, x, labels, t);
    for (int k = 0; k < 3; k++)
        assert_true(x[k] == 1.0f && t[k] == 1.0f && labels[k] == 7);  /* no labels: untouched */
    dr_dataset_free(&d);
}

static void test_gather_pixels(void **state)
{
    (void)state;
    uint8_t pixels[3 * 4] = { 0, 255, 51, 128,  1, 2, 3, 4,  10, 20, 30, 40 };
    uint8_t stored_labels[3] = { 4, 5, 6 };
    dr_dataset d = { .n = 3, .features = 4, .classes = 10,
                     .pixels = pixels, .labels = stored_labels };
    const uint32_t ids[2] = { 2, 0 };
    float x[8];
    uint8_t labels[2];
    float targets[2] = { -1.0f, -1.0f };
    dr_dataset_gather(&d, ids, 2, x, labels, targets);
    for (int j = 0; j < 4; j++) {
        assert_true(x[j] == (float)pixels[8 + j] / 255.0f);
        assert_true(x[4 + j] == (float)pixels[j] / 255.0f);
    }
    assert_true(x[4] == 0.0f && x[5] == 1.0f && x[6] == 0.2f);
    assert_int_equal(labels[0], 6);
    assert_int_equal(labels[1], 4);
    assert_true(targets[0] == -1.0f);                       /* no targets: untouched */
    dr_dataset_gather(&d, ids, 2, NULL, labels, NULL);      /* NULL outputs skipped */
    dr_dataset_gather(&d, ids, 0, x, labels, targets);      /* empty batch */
}

static void test_free_is_idempotent(void **state)
{
    (void)state;
    dr_dataset d;
    dr_err err = { 0 };
    assert_int_equal(dr_dataset_synthetic(3, 0, 5, &d, &err), DR_OK);
    dr_dataset_free(&d);
    dr_dataset_free(&d);
    dr_dataset_free(NULL);
    assert_int_equal(d.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic_is_a_pure_function),
        cmocka_unit_test(test_synthetic_labels_by_definition),
        cmocka_unit_test(test_synthetic_balance_and_speed),
        cmocka_unit_test(test_synthetic_errors),
        cmocka_unit_test(test_fashion_mnist_real),
        cmocka_unit_test_setup_teardown(test_fashion_mnist_small_file, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_fashion_mnist_errors, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_fashion_mnist_unpacked, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_fashion_mnist_huge_header, make_temp_dir, drop_temp_dir),
        cmocka_unit_test(test_toy),
        cmocka_unit_test(test_gather_pixels),
        cmocka_unit_test(test_free_is_idempotent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
