/* distref — the compute dtypes of mixed precision: float16 and bfloat16.
 *
 * Mixed precision (docs/TRAINING_FEATURES.md, "Mixed precision") keeps
 * float32 master weights and computes each op in the policy's compute dtype,
 * the op's result defined as the correctly rounded (round to nearest, ties
 * to even) value of its exact result. The exact result comes from a dr_acc
 * (distref/exact.h); dr_acc_round_div_dtype rounds it once to the dtype.
 *
 * float16: 1 sign, 5 exponent, 10 fraction bits; largest finite 65504,
 * smallest normal 2^-14, smallest subnormal 2^-24; a value at or above
 * 65520 (the midpoint to 2^16) rounds to inf.
 * bfloat16: 1 sign, 8 exponent, 7 fraction bits (float32's top half);
 * largest finite (2 - 2^-7) 2^127, smallest subnormal 2^-133.
 * NaN stays NaN (quiet, sign kept); values travel in float containers
 * (every float16 and bfloat16 value is a float exactly).
 */
#ifndef DISTREF_HALF_H
#define DISTREF_HALF_H

#include <stdint.h>

#include "distref/exact.h"

typedef enum dr_dtype {
    DR_DTYPE_F32 = 0,
    DR_DTYPE_F16 = 1,
    DR_DTYPE_BF16 = 2
} dr_dtype;

/* "float32", "float16", "bfloat16". */
const char *dr_dtype_name(dr_dtype t);

/* Correctly rounded conversions (ties to even, gradual underflow, overflow
 * to inf), and the exact ones back. */
uint16_t dr_f32_to_f16(float x);
float    dr_f16_to_f32(uint16_t h);
uint16_t dr_f32_to_bf16(float x);
float    dr_bf16_to_f32(uint16_t h);

/* x rounded to the dtype, returned as the float that holds it exactly
 * (DR_DTYPE_F32: x itself). */
float dr_round_to_dtype(float x, dr_dtype t);

/* The exact value of a, divided by d (d >= 1), rounded to odd in float32:
 * exact when it is a float, otherwise the one of the two floats around it
 * whose last fraction bit is 1 (beyond the float range: +-FLT_MAX).
 * Rounding that to a format of at most 22 significant bits and float32's
 * exponent range or less is the correctly rounded result (no double
 * rounding: Boldo and Melquiond, "Emulation of FMA and correctly rounded
 * sums: proved algorithms using rounding to odd", 2008). */
float dr_acc_round_div_odd(const dr_acc *a, uint32_t d);

/* The exact value of a / d, rounded once to the dtype (as a float). */
float dr_acc_round_div_dtype(const dr_acc *a, uint32_t d, dr_dtype t);

#endif
