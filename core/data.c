/* distref — datasets: see include/distref/data.h.
 *
 * Synthetic layout, all pure functions of (seed, split, index):
 *   pixel j of example i = byte (j % 4) (least significant first) of
 *       dr_rng_u32(seed, DR_STREAM_DATA + split, i * 196 + j / 4)
 *   teacher w[j][c] (784 x 10, row-major) = 2 * dr_rng_uniform(seed,
 *       DR_STREAM_TEACHER, j * 10 + c) - 1, exact: a multiple of 2^-23 in [-1, 1)
 *   label of i = the lowest c maximizing dr_dot_f32(x/255 - 0.5, w[.][c]).
 * Only the correctly rounded dot is compared, so the labels are the same
 * bits on every machine.
 */
#include "distref/data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "distref/idx.h"
#include "distref/rng.h"
#include "distref/wide.h"

#define IMAGE_SIDE     28u
#define IMAGE_FEATURES (IMAGE_SIDE * IMAGE_SIDE)   /* 784 */
#define DRAWS_PER_IMAGE (IMAGE_FEATURES / 4)       /* 4 bytes per 32-bit draw */
#define NUM_CLASSES    10u
#define TOY_N          100u
#define WIDE_N         256u
#define WIDE_F         8u

/* ---- shared helpers ------------------------------------------------------ */

/* byte / 255.0f: the one scaling of pixels, so gather and the teacher can
 * never disagree about it (one IEEE division, correctly rounded, whether a
 * loop runs it one byte or sixteen at a time). */
static inline float pixel_scale(uint8_t b)
{
    return (float)b / 255.0f;
}

static void pixel_scale_table(float table[256])
{
    for (int b = 0; b < 256; b++)
        table[b] = pixel_scale((uint8_t)b);
}

static void set_name(dr_dataset *d, const char *name)
{
    snprintf(d->name, sizeof d->name, "%s", name);
}

static int check_split(int split, dr_err *err)
{
    if (split != 0 && split != 1)
        return dr_fail(err, DR_EUSAGE, "split: expected 0 (train) or 1 (test), got %d", split);
    return DR_OK;
}

/* ---- synthetic ---------------------------------------------------------- */

/* The teacher's dot products, exactly and fast. dr_dot_f32 would take ~5 ns
 * a product (0.8 s for 20000 examples); but here every term is an integer
 * multiple of 2^-48, so the exact sum fits an int64 and one correctly rounded
 * conversion gives the very float dr_dot_f32 returns (tests/test_data.c
 * recomputes the labels with dr_dot_f32 itself):
 *   - w = 2u - 1 with u = k * 2^-24 is (k - 2^23) * 2^-23: |m| <= 2^23;
 *   - x/255 - 0.5 is a multiple of 2^-25 with |c| <= 2^24: fl(x/255) below
 *     0.25 gives a difference in [-0.5, -0.25] (ulp 2^-25); from 0.25 up the
 *     subtraction is exact (Sterbenz) and fl(x/255) has ulp >= 2^-25;
 *   - so |c * m| <= 2^47 and 784 of them stay below 2^57. */
#define CENTRED_SCALE 0x1p25f     /* x/255 - 0.5 in units of 2^-25 */
#define TEACHER_SCALE 0x1p23f     /* teacher weights in units of 2^-23 */
#define DOT_UNSCALE   0x1p-48f

typedef struct teacher {
    int32_t centred[256];                        /* byte -> x/255 - 0.5, fixed point */
    int32_t w[NUM_CLASSES * IMAGE_FEATURES];     /* class-major, fixed point */
    int32_t x[IMAGE_FEATURES];                   /* scratch: one centred input */
} teacher;

/* Drawn in the documented 784 x 10 order, stored class-major so that each
 * class's weights are contiguous. Every conversion below is exact. */
static void make_teacher(uint64_t seed, teacher *t)
{
    float scale[256];
    pixel_scale_table(scale);
    for (int b = 0; b < 256; b++)
        t->centred[b] = (int32_t)((scale[b] - 0.5f) * CENTRED_SCALE);
    for (uint32_t j = 0; j < IMAGE_FEATURES; j++)
        for (uint32_t c = 0; c < NUM_CLASSES; c++) {
            float u = dr_rng_uniform(seed, DR_STREAM_TEACHER, (uint64_t)j * NUM_CLASSES + c);
            float w = 2.0f * u - 1.0f;
            t->w[c * IMAGE_FEATURES + j] = (int32_t)(w * TEACHER_SCALE);
        }
}

static void draw_features(uint64_t seed, int split, uint32_t example, uint8_t *px)
{
    const uint64_t stream = DR_STREAM_DATA + (uint64_t)split;
    const uint64_t base = (uint64_t)example * DRAWS_PER_IMAGE;
    for (uint32_t d = 0; d < DRAWS_PER_IMAGE; d++) {
        uint32_t u = dr_rng_u32(seed, stream, base + d);
        for (uint32_t b = 0; b < 4; b++)
            px[4 * d + b] = (uint8_t)(u >> (8 * b));
    }
}

/* dr_dot_f32(x/255 - 0.5, w_c) for the centred input x (fixed point): the
 * exact sum, rounded once. C's integer to float conversion rounds to nearest
 * even (C11 F.4); the power-of-two scale is exact because a nonzero
 * |sum| >= 1 lands at or above 2^-48, a normal float. */
static float teacher_dot(const teacher *t, const int32_t *x, uint32_t c)
{
    const int32_t *w = t->w + c * IMAGE_FEATURES;
    int64_t sum = 0;
    for (uint32_t j = 0; j < IMAGE_FEATURES; j++)
        sum += (int64_t)x[j] * w[j];
    return (float)sum * DOT_UNSCALE;
}

/* The lowest class with the largest rounded dot (strict >). x is scratch:
 * the centred input, made once for the ten dot products. */
static uint8_t teacher_label(const teacher *t, const uint8_t *px, int32_t *x)
{
    for (uint32_t j = 0; j < IMAGE_FEATURES; j++)
        x[j] = t->centred[px[j]];
    uint8_t best = 0;
    float best_v = teacher_dot(t, x, 0);
    for (uint32_t c = 1; c < NUM_CLASSES; c++) {
        float v = teacher_dot(t, x, c);
        if (v > best_v) {
            best_v = v;
            best = (uint8_t)c;
        }
    }
    return best;
}

static void fill_synthetic(uint64_t seed, int split, dr_dataset *out, teacher *t)
{
    make_teacher(seed, t);
    for (uint32_t i = 0; i < out->n; i++) {
        uint8_t *px = out->pixels + (size_t)i * IMAGE_FEATURES;
        draw_features(seed, split, i, px);
        out->labels[i] = teacher_label(t, px, t->x);
    }
}

int dr_dataset_synthetic(uint64_t seed, int split, uint32_t n, dr_dataset *out, dr_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = check_split(split, err);
    if (rc != DR_OK)
        return rc;
    if (n == 0)
        return dr_fail(err, DR_EUSAGE, "n: the synthetic dataset needs at least 1 example");
    out->n = n;
    out->features = IMAGE_FEATURES;
    out->classes = NUM_CLASSES;
    set_name(out, "synthetic");
    out->pixels = malloc((size_t)n * IMAGE_FEATURES);
    out->labels = malloc(n);
    teacher *t = malloc(sizeof *t);      /* 35 KB: too big for some stacks */
    if (out->pixels == NULL || out->labels == NULL || t == NULL) {
        rc = dr_fail(err, DR_ENOMEM, "synthetic dataset: out of memory for %u examples", n);
        dr_dataset_free(out);
    } else {
        fill_synthetic(seed, split, out, t);
    }
    free(t);
    return rc;
}

/* ---- Fashion-MNIST ------------------------------------------------------ */

/* <dir>/<prefix>-<kind>.gz if it exists (or cannot be checked: loading it
 * then says why), else the unpacked <dir>/<prefix>-<kind>; when neither is
 * there the error names both. */
static int idx_path(char *path, size_t size, const char *dir, const char *prefix,
                    const char *kind, dr_err *err)
{
    char plain[4096];
    int len = snprintf(path, size, "%s/%s-%s.gz", dir, prefix, kind);
    if (len < 0 || (size_t)len >= size || (size_t)len >= sizeof plain)
        return dr_fail(err, DR_EUSAGE, "dir: path too long: %s", dir);
    memcpy(plain, path, (size_t)len - 3);          /* without the ".gz" */
    plain[len - 3] = '\0';
    struct stat st;
    if (stat(path, &st) == 0 || errno != ENOENT)
        return DR_OK;
    if (stat(plain, &st) == 0 || errno != ENOENT) {
        memcpy(path, plain, (size_t)len - 2);      /* shorter than path's ".gz" name */
        return DR_OK;
    }
    return dr_fail(err, DR_EIO, "%s: cannot open: %s (nor the unpacked %s); Debian's package "
                   "dataset-fashion-mnist installs the files in " DR_FASHION_MNIST_DIR " "
                   "(apt-get install dataset-fashion-mnist), or give --data_dir",
                   path, strerror(ENOENT), plain);
}

static int check_images(const char *path, const dr_idx *images, dr_err *err)
{
    if (images->dims[0] == 0)
        return dr_fail(err, DR_EFORMAT, "%s: holds no images", path);
    return DR_OK;
}

static int check_labels(const char *path, const dr_idx *labels, uint32_t n_images,
                        const char *images_path, dr_err *err)
{
    if (labels->dims[0] != n_images)
        return dr_fail(err, DR_EFORMAT, "%s: %u labels, but %s has %u images", path,
                       (unsigned)labels->dims[0], images_path, (unsigned)n_images);
    for (size_t i = 0; i < labels->count; i++)
        if (labels->data[i] >= NUM_CLASSES)
            return dr_fail(err, DR_EFORMAT, "%s: label %zu is %u, expected 0 to %u",
                           path, i, (unsigned)labels->data[i], NUM_CLASSES - 1);
    return DR_OK;
}

/* Finds, loads and validates both files, the images first (their errors
 * come first); on success the caller owns both. */
static int load_pair(const char *dir, const char *prefix,
                     dr_idx *images, dr_idx *labels, dr_err *err)
{
    memset(images, 0, sizeof *images);
    memset(labels, 0, sizeof *labels);
    char img_path[4096], lbl_path[4096];
    const uint32_t side[2] = { IMAGE_SIDE, IMAGE_SIDE };   /* from the header, before the data */
    int rc = idx_path(img_path, sizeof img_path, dir, prefix, "images-idx3-ubyte", err);
    if (rc == DR_OK)
        rc = dr_idx_load_dims(img_path, 3, side, images, err);
    if (rc == DR_OK)
        rc = check_images(img_path, images, err);
    if (rc == DR_OK)
        rc = idx_path(lbl_path, sizeof lbl_path, dir, prefix, "labels-idx1-ubyte", err);
    if (rc == DR_OK)
        rc = dr_idx_load(lbl_path, 1, labels, err);
    if (rc == DR_OK)
        rc = check_labels(lbl_path, labels, images->dims[0], img_path, err);
    if (rc != DR_OK) {
        dr_idx_free(images);
        dr_idx_free(labels);
    }
    return rc;
}

int dr_dataset_fashion_mnist(const char *dir, int split, dr_dataset *out, dr_err *err)
{
    memset(out, 0, sizeof *out);
    if (dir == NULL)
        return dr_fail(err, DR_EUSAGE, "dir: no Fashion-MNIST directory given");
    int rc = check_split(split, err);
    if (rc != DR_OK)
        return rc;
    dr_idx images, labels;
    rc = load_pair(dir, split == 0 ? "train" : "t10k", &images, &labels, err);
    if (rc != DR_OK)
        return rc;
    /* The IDX buffers are malloc'd bytes in exactly our layout: take them. */
    set_name(out, "fashion_mnist");
    out->n = images.dims[0];
    out->features = IMAGE_FEATURES;
    out->classes = NUM_CLASSES;
    out->pixels = images.data;
    out->labels = labels.data;
    return DR_OK;
}

/* ---- the toy ------------------------------------------------------------ */

int dr_dataset_toy(dr_dataset *out, dr_err *err)
{
    memset(out, 0, sizeof *out);
    set_name(out, "toy");
    out->n = TOY_N;
    out->features = 1;
    out->classes = 0;
    out->values = malloc(sizeof(float) * TOY_N);
    out->targets = malloc(sizeof(float) * TOY_N);
    if (out->values == NULL || out->targets == NULL) {
        dr_dataset_free(out);
        return dr_fail(err, DR_ENOMEM, "toy dataset: out of memory");
    }
    for (uint32_t i = 0; i < TOY_N; i++) {
        out->values[i] = 1.0f;
        out->targets[i] = 1.0f;
    }
    return DR_OK;
}

/* ---- the wide-range regression ---------------------------------------- */

int dr_dataset_wide(uint64_t seed, dr_dataset *out, dr_err *err)
{
    memset(out, 0, sizeof *out);
    set_name(out, "wide");
    out->n = WIDE_N;
    out->features = WIDE_F;
    out->classes = 0;
    out->values = malloc(sizeof(float) * WIDE_N * WIDE_F);
    out->targets = malloc(sizeof(float) * WIDE_N);
    if (out->values == NULL || out->targets == NULL) {
        dr_dataset_free(out);
        return dr_fail(err, DR_ENOMEM, "wide dataset: out of memory");
    }
    for (uint32_t i = 0; i < WIDE_N * WIDE_F; i++) {
        uint32_t u = dr_rng_u32(seed, DR_STREAM_DATA + 2, i);
        /* sign, 23 mantissa bits, and a binade in [-60, 60] */
        int e = (int)((u >> 24) % 121u) - 60;
        float m = 1.0f + (float)(u & 0x7fffffu) * 0x1p-23f;
        out->values[i] = ((u >> 23) & 1u ? -1.0f : 1.0f) * ldexpf(m, e);
    }
    for (uint32_t i = 0; i < WIDE_N; i++) {
        uint32_t u = dr_rng_u32(seed, DR_STREAM_DATA + 3, i);
        out->targets[i] = (float)(u >> 8) * 0x1p-23f - 1.0f;
    }
    return DR_OK;
}

void dr_dataset_free(dr_dataset *d)
{
    if (d == NULL)
        return;
    free(d->pixels);
    free(d->values);
    free(d->labels);
    free(d->targets);
    memset(d, 0, sizeof *d);
}

/* ---- batches ------------------------------------------------------------ */

DR_WIDE static void gather_features(const dr_dataset *d, const uint32_t *ids, uint32_t count, float *x)
{
    const size_t f = d->features;
    if (d->pixels != NULL) {
        /* computed, not looked up: a table lookup is a scalar load a byte,
         * 13% of a fast mlp_synthetic step at G = 64; the division runs
         * sixteen bytes at a time (thirty-two with AVX2: DR_WIDE) and
         * gives the table's bits */
        for (uint32_t k = 0; k < count; k++) {
            const uint8_t *src = d->pixels + (size_t)ids[k] * f;
            float *dst = x + (size_t)k * f;
            if (k + 1 < count)   /* the next example's row, from memory while this one converts */
                for (size_t j = 0; j < f; j += 64) __builtin_prefetch(d->pixels + (size_t)ids[k + 1] * f + j);
#pragma omp simd
            for (size_t j = 0; j < f; j++)
                dst[j] = pixel_scale(src[j]);
        }
    } else if (d->values != NULL) {
        for (uint32_t k = 0; k < count; k++)
            memcpy(x + (size_t)k * f, d->values + (size_t)ids[k] * f, sizeof(float) * f);
    }
}

void dr_dataset_gather(const dr_dataset *d, const uint32_t *ids, uint32_t count,
                       float *x, uint8_t *labels, float *targets)
{
    if (x != NULL)
        gather_features(d, ids, count, x);
    if (labels != NULL && d->labels != NULL)
        for (uint32_t k = 0; k < count; k++)
            labels[k] = d->labels[ids[k]];
    if (targets != NULL && d->targets != NULL)
        for (uint32_t k = 0; k < count; k++)
            targets[k] = d->targets[ids[k]];
}
