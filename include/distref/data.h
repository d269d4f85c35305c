/* distref — datasets: the embedded synthetic problem, Fashion-MNIST, the toy.
 *
 * Image-like datasets keep their features as bytes (60000 x 784 = 47 MB) and
 * scale them to [0, 1] only when a batch is gathered (byte / 255.0f, one
 * correctly rounded division, identical everywhere).
 */
#ifndef DISTREF_DATA_H
#define DISTREF_DATA_H

#include <stdbool.h>
#include <stdint.h>
#include "distref/error.h"

#define DR_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct dr_dataset {
    char      name[32];
    uint32_t  n;          /* examples */
    uint32_t  features;   /* 784 for images, 1 for the toy */
    uint32_t  classes;    /* 10 for classification, 0 for regression (toy) */
    uint8_t  *pixels;     /* n * features bytes, or NULL */
    float    *values;     /* n * features floats (the toy), or NULL */
    uint8_t  *labels;     /* n class ids when classes > 0, else NULL */
    float    *targets;    /* n regression targets when classes == 0, else NULL */
} dr_dataset;

/* The embedded default: a deterministic 10-class problem with 784 byte-valued
 * features, a pure function of (seed, split, example index). Features are
 * uniform random bytes: example i of split s takes the 4 bytes (least
 * significant first) of dr_rng_u32(seed, DR_STREAM_DATA + s, 196 i + d),
 * d = 0..195. The teacher is 784 x 10 weights w[j][c] = 2 u - 1 with
 * u = dr_rng_uniform(seed, DR_STREAM_TEACHER, 10 j + c), the same for both
 * splits. The label of x is the lowest c maximizing dr_dot_f32(x/255 - 0.5,
 * w[.][c]) (x/255.0f, then - 0.5f: exact dot products, so the labels are the
 * same everywhere). No per-class bias is needed: with 784 inputs the ten
 * weight vectors have nearly equal norms, and each class gets 9-11% of
 * 20000 examples. split 0 = training set, 1 = test set: disjoint streams of
 * the same seed. DR_EUSAGE for a split other than 0 or 1, or n == 0. */
int  dr_dataset_synthetic(uint64_t seed, int split, uint32_t n, dr_dataset *out, dr_err *err);

/* Fashion-MNIST from the IDX files, gzipped (.gz) or unpacked in dir (train-* or t10k-*),
 * validated: 28x28 images, at least one, labels < 10, equal counts; errors
 * name the file (and for a bad label its index and value). split 0 = train
 * (60000), 1 = test (10000). */
int  dr_dataset_fashion_mnist(const char *dir, int split, dr_dataset *out, dr_err *err);

/* The guide's toy: inputs [1.], targets [1.], repeated 100 times
 * (n = 100, features = 1, classes = 0: values and targets all 1.0f). */
int  dr_dataset_toy(dr_dataset *out, dr_err *err);

/* A regression built to stress exact reductions (experiment linear_wide):
 * 256 examples of 8 features x = +-(1 + f) 2^e, e uniform in [-60, 60] and
 * f 23 random bits, targets uniform in [-1, 1), all from the seed. A
 * gradient element then sums products some 240 binades apart, beyond the
 * compact accumulator's window (distref/cacc.h): the engine's full
 * accumulators must take over without changing a bit. */
int  dr_dataset_wide(uint64_t seed, dr_dataset *out, dr_err *err);

void dr_dataset_free(dr_dataset *d);

/* Gathers examples ids[0..count) into x (count x features floats) and, as the
 * dataset has them, labels (count bytes) or targets (count floats); NULL
 * outputs are skipped. Pixels become (float)byte / 255.0f. Every id must be
 * < d->n (the iterators guarantee it). */
void dr_dataset_gather(const dr_dataset *d, const uint32_t *ids, uint32_t count,
                       float *x, uint8_t *labels, float *targets);

#endif
