/* distref — fast exact sums and dot products.
 *
 * Adding every term straight into the 20-limb accumulator costs three limb
 * updates per term. Instead, terms are first binned by exponent (the "large
 * accumulator" idea of Neal, arXiv:1505.05571): a float is m * 2^e with
 * |m| < 2^24, so all terms of one exponent add exactly in an int64, and only
 * the bins are folded into the accumulator at the end of a chunk. Chunks are
 * sized so that no bin can overflow. Interleaved bin sets break the
 * load-add-store dependency when consecutive terms share an exponent.
 */
#include "core/acc_internal.h"
#include "core/bins.h"

#include <string.h>

/* ---- sums --------------------------------------------------------------- */

/* 256 exponent fields x 4 sets; |m| < 2^24, so a chunk of 2^32 terms puts at
 * most 2^30 * 2^24 into one bin and 2^56 into the sum of one field. */
#define SUM_SETS 4
#define SUM_CHUNK ((size_t)1 << 32)

static void sum_chunk(dr_acc *a, const float *x, size_t n)
{
    int64_t bin[SUM_SETS][256];
    uint32_t not_neg0 = 0;
    memset(bin, 0, sizeof bin);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = dr_f32_bits(x[i]);
        uint32_t field = (u >> 23) & 0xffu;
        int64_t mag = (int64_t)((u & 0x7fffffu) | (uint32_t)(field != 0) << 23);
        int64_t s = -(int64_t)(u >> 31);            /* 0 or -1 */
        if (field == 255) { dr_acc_note_special_sum(a, u); continue; }
        bin[i & (SUM_SETS - 1)][field] += (mag ^ s) - s;
        not_neg0 |= (u != 0x80000000u);
    }
    for (int f = 0; f < 256; f++) {
        int64_t total = 0;
        for (int k = 0; k < SUM_SETS; k++) total += bin[k][f];
        if (total) {
            dr_acc_add_i64(a, total, (f ? f : 1) - 150);
            if (++a->pending >= DR_ACC_MAX_PENDING) dr_acc_normalize(a);
        }
    }
    a->flags |= DR_ACC_F_NONEMPTY | (not_neg0 ? DR_ACC_F_NOT_NEG0 : 0u);
}

void dr_acc_add_sum(dr_acc *a, const float *x, size_t n)
{
    if (n < 64) {               /* clearing the bins would cost more than the terms */
        for (size_t i = 0; i < n; i++) dr_acc_add(a, x[i]);
        return;
    }
    while (n > 0) {
        size_t len = n < SUM_CHUNK ? n : SUM_CHUNK;
        sum_chunk(a, x, len);
        x += len;
        n -= len;
    }
}

float dr_sum_f32(const float *x, size_t n)
{
    dr_acc a;
    dr_acc_init(&a);
    dr_acc_add_sum(&a, x, n);
    return dr_acc_round(&a);
}

/* ---- dot products ------------------------------------------------------- */

void dr_prod_bins_fold(dr_prod_bins *b, dr_acc *a)
{
    for (int k = b->lo; k <= b->hi; k++) {
        int64_t total = b->bin[0][k] + b->bin[1][k];
        b->bin[0][k] = b->bin[1][k] = 0;
        if (total) {
            dr_acc_add_i64(a, total, k + 2 * DR_F32_EXP_MIN);
            if (++a->pending >= DR_ACC_MAX_PENDING) dr_acc_normalize(a);
        }
    }
    b->lo = DR_PROD_BINS;
    b->hi = -1;
}

/* Flags of n products that sum to an exact zero (the rare case where the
 * sign of zero needs the terms themselves). */
uint32_t dr_zero_dot_flags(const float *x, size_t incx, const float *y, size_t incy, size_t n)
{
    uint32_t flags = n ? DR_ACC_F_NONEMPTY : 0u;
    for (size_t k = 0; k < n; k++) {
        uint32_t xb = dr_f32_bits(x[k * incx]), yb = dr_f32_bits(y[k * incy]);
        int zero = !(xb & 0x7fffffffu) || !(yb & 0x7fffffffu);
        if (!(zero && ((xb ^ yb) >> 31))) flags |= DR_ACC_F_NOT_NEG0;
    }
    return flags;
}

void dr_acc_add_dot_strided(dr_acc *a, const float *x, size_t incx,
                            const float *y, size_t incy, size_t n, dr_prod_bins *b)
{
    size_t done = 0;
    dr_acc part;
    dr_acc_init(&part);
    while (done < n) {
        size_t end = n - done < DR_PROD_CHUNK ? n : done + DR_PROD_CHUNK;
        for (size_t k = done; k < end; k++) {
            uint32_t xb = dr_f32_bits(x[k * incx]), yb = dr_f32_bits(y[k * incy]);
            int32_t xm, xe, ym, ye;
            if (dr_f32_is_special(xb) || dr_f32_is_special(yb)) {
                dr_acc_note_special_prod(&part, xb, yb);
                continue;
            }
            dr_split_f32(xb, &xm, &xe);
            dr_split_f32(yb, &ym, &ye);
            dr_prod_bins_add(b, k, (int64_t)xm * ym, xe + ye - 2 * DR_F32_EXP_MIN);
        }
        dr_prod_bins_fold(b, &part);
        done = end;
    }
    if (n) {
        int zero = 1;
        dr_acc_normalize(&part);
        for (int i = 0; i < DR_ACC_LIMBS; i++) zero &= part.limb[i] == 0;
        part.flags |= zero ? dr_zero_dot_flags(x, incx, y, incy, n)
                           : DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
    }
    dr_acc_merge(a, &part);
}

void dr_acc_add_dot(dr_acc *a, const float *x, const float *y, size_t n)
{
    dr_prod_bins b;
    dr_prod_bins_init(&b);
    dr_acc_add_dot_strided(a, x, 1, y, 1, n, &b);
}

float dr_dot_f32(const float *x, const float *y, size_t n)
{
    dr_acc a;
    dr_acc_init(&a);
    dr_acc_add_dot(&a, x, y, n);
    return dr_acc_round(&a);
}
