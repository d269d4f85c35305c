/* distref — exponent bins for exact products: core's dot products and GEMM
 * (core/reduce.c, core/gemm.c) and the engine's exact GEMM (devices/cpu/cpu_gemm.c).
 *
 * A product of two floats is M * 2^(idx - 298) with |M| < 2^48 and idx in
 * [0, 506]. Two interleaved sets of int64 bins absorb DR_PROD_CHUNK products
 * (2^13 per set, < 2^61 per bin, < 2^62 summed) before they must be folded
 * into an accumulator. lo..hi is the range touched since the last fold, so a
 * short dot product folds and clears only the exponents it used.
 */
#ifndef DISTREF_EXACT_BINS_H
#define DISTREF_EXACT_BINS_H

#include <stddef.h>
#include <stdint.h>
#include "distref/exact.h"

#define DR_PROD_BINS  512
#define DR_PROD_CHUNK ((size_t)1 << 14)

typedef struct dr_prod_bins {
    int64_t bin[2][DR_PROD_BINS];
    int     lo, hi;
} dr_prod_bins;

static inline void dr_prod_bins_init(dr_prod_bins *b)
{
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < DR_PROD_BINS; k++) b->bin[s][k] = 0;
    b->lo = DR_PROD_BINS;
    b->hi = -1;
}

static inline void dr_prod_bins_add(dr_prod_bins *b, size_t k, int64_t m, int idx)
{
    b->bin[k & 1][idx] += m;
    b->lo = idx < b->lo ? idx : b->lo;
    b->hi = idx > b->hi ? idx : b->hi;
}

/* Adds the bins to a, clears them. */
void dr_prod_bins_fold(dr_prod_bins *b, dr_acc *a);

/* a += sum_k x[k*incx] * y[k*incy], exactly; b must be clear (and is left clear). */
void dr_acc_add_dot_strided(dr_acc *a, const float *x, size_t incx,
                            const float *y, size_t incy, size_t n, dr_prod_bins *b);

/* NONEMPTY/NOT_NEG0 flags of n products whose exact sum is zero. */
uint32_t dr_zero_dot_flags(const float *x, size_t incx, const float *y, size_t incy, size_t n);

#endif
