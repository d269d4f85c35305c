/* distref — the compact exact accumulator: 32 bytes, exact, or overflowed.
 *
 * A dr_acc (exact.h) spans every float product that exists, 2^-320 ..
 * 2^320, in 168 bytes. A gradient element does not need that: the sum of
 * one parameter's products over a step spans far fewer bits. A dr_cacc holds
 * the value as W * 2^exp, W a 192-bit two's complement integer with
 * |W| < 2^DR_CACC_BITS, and exp chosen by the terms themselves: the first
 * term sets it (its lowest set bit), a later term below it moves the window
 * down when the top still fits. Every operation is exact, or, when the value
 * would leave the window (terms more than about 189 bits apart), marks the
 * accumulator DR_CACC_F_OVERFLOW and stops: an overflowed accumulator holds
 * nothing usable, and the caller redoes the work with full dr_acc
 * accumulators (the engine redoes the step: docs/ARCHITECTURE.md). Nothing
 * is ever rounded silently, so the contract of exact.h holds: the one
 * rounding, dr_cacc_round_div, gives dr_acc_round_div's bits for the same
 * exact value and flags.
 *
 * Overflow is a property of the value's span, not of the order of the terms
 * in any way that could change a bit: a merge that overflows in one order
 * may fit in another, but either way the result is the exact value or the
 * flag, and the flag leads to the full accumulator's exact value.
 *
 * Zero-filled memory is an empty accumulator. The flags are exact.h's
 * DR_ACC_F_* (specials, and the sign of an exact zero) plus the one below.
 */
#ifndef DISTREF_CACC_H
#define DISTREF_CACC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/exact.h"

#define DR_CACC_BITS        189        /* |W| < 2^189 always: two values add without wrapping */
#define DR_CACC_F_OVERFLOW  (1u << 5)  /* the value left the window: use a dr_acc */

/* Wire format (MPI messages, checkpoints of partial sums): the three words
 * of W little-endian, least significant first, then exp (int32) and flags
 * (uint32), little-endian: DR_CACC_BYTES in all. */
#define DR_CACC_BYTES 32

typedef struct dr_cacc {
    uint64_t w[3];    /* W, least significant word first */
    int32_t  exp;     /* value = W * 2^exp (any exp while W == 0) */
    uint32_t flags;   /* DR_ACC_F_* | DR_CACC_F_OVERFLOW */
} dr_cacc;

void  dr_cacc_init(dr_cacc *a);

/* a += v * 2^e, v a signed 128-bit integer given as hi * 2^64 + lo (hi
 * signed). A nonzero term marks the accumulator non-empty and not -0. */
void  dr_cacc_add_scaled(dr_cacc *a, int64_t hi, uint64_t lo, int32_t e);
void  dr_cacc_add(dr_cacc *a, float x);                 /* a += x */
void  dr_cacc_add_prod(dr_cacc *a, float x, float y);   /* a += x*y */
void  dr_cacc_merge(dr_cacc *dst, const dr_cacc *src);  /* dst += src */
void  dr_cacc_mul_u32(dr_cacc *a, uint32_t k);          /* a *= k, 1 <= k <= 2^30 */

static inline bool dr_cacc_overflowed(const dr_cacc *a)
{
    return (a->flags & DR_CACC_F_OVERFLOW) != 0;
}

/* round(value / d), d >= 1: dr_acc_round_div's bits for the same value.
 * NaN for an overflowed accumulator (check dr_cacc_overflowed first). */
float dr_cacc_round_div(const dr_cacc *a, uint32_t d);
/* out[i] = dr_cacc_round_div(&a[i], d) for i < n, the same bits; eight at
 * a time on AVX-512 when d is a power of two (the optimizer's gradients). */
void  dr_cacc_round_div_n(const dr_cacc *a, size_t n, uint32_t d, float *out);

/* Conversions, both exact: to a dr_acc always (false, *dst empty, for an
 * overflowed one); from a dr_acc when its value fits (else dst is marked
 * overflowed). */
bool  dr_cacc_to_acc(dr_acc *dst, const dr_cacc *src);
void  dr_cacc_from_acc(dr_cacc *dst, const dr_acc *src);

void  dr_cacc_serialize(const dr_cacc *a, uint8_t out[DR_CACC_BYTES]);
/* false for a corrupt buffer (unknown flag bits, |W| out of range), *a untouched */
bool  dr_cacc_deserialize(dr_cacc *a, const uint8_t in[DR_CACC_BYTES]);

#endif
