/* distref — the parts exact.h's sums are built from: float bits, a term
 * added to a dr_acc, rounding a window or digits once, the flags of
 * special values. For code that adds to a dr_acc directly: core's sums,
 * dot products and compact accumulators, and the engine's exact GEMM
 * (devices/cpu_gemm*.c) and exact float all-reduce (devices/mpi/comm_mpi_f32x.c).
 *
 * A finite float is m * 2^e with m a signed integer below 2^24 and e in
 * [-149, 104]; dr_split_f32 gives that pair. Everything exact in distref is
 * integer arithmetic on such pairs, placed into a dr_acc by dr_acc_add_i64.
 */
#ifndef DISTREF_EXACT_PARTS_H
#define DISTREF_EXACT_PARTS_H

#include <stdint.h>
#include <string.h>
#include "distref/exact.h"

#define DR_F32_EXP_MIN  (-149)          /* exponent of the smallest subnormal */
#define DR_ACC_MAX_PENDING (1u << 30)   /* digits stay far from 2^63 */

static inline uint32_t dr_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float dr_bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Biased exponent field 255: inf or NaN. */
static inline int dr_f32_is_special(uint32_t bits)
{
    return (bits & 0x7f800000u) == 0x7f800000u;
}

/* x = *m * 2^(*e) for a finite x; zero gives m = 0. */
static inline void dr_split_f32(uint32_t bits, int32_t *m, int32_t *e)
{
    uint32_t field = (bits >> 23) & 0xffu;
    uint32_t frac = bits & 0x7fffffu;
    int32_t mag = (int32_t)(field ? (frac | 0x800000u) : frac);
    *m = (bits >> 31) ? -mag : mag;
    *e = (field ? (int32_t)field : 1) - 150;
}

/* a += v * 2^e exactly, for |v| < 2^63 and e >= DR_ACC_LSB_EXP, with the
 * value below 2^(DR_ACC_LSB_EXP + 32*(DR_ACC_LIMBS-1)). Touches up to three limbs,
 * each by less than 2^32; does not count toward a->pending (callers do). */
static inline void dr_acc_add_i64(dr_acc *a, int64_t v, int32_t e)
{
    uint32_t s = (uint32_t)(e - DR_ACC_LSB_EXP);
    uint32_t i = s >> 5, o = s & 31u;
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    uint64_t p0 = (mag << o) & 0xffffffffu;
    uint64_t hi = o ? mag >> (32u - o) : mag >> 32;   /* floor(mag * 2^o / 2^32) */
    int64_t d0 = (int64_t)p0, d1 = (int64_t)(hi & 0xffffffffu), d2 = (int64_t)(hi >> 32);
    if (v < 0) { d0 = -d0; d1 = -d1; d2 = -d2; }
    a->limb[i] += d0;
    a->limb[i + 1] += d1;
    if (d2) a->limb[i + 2] += d2;   /* zero whenever i + 2 would be past the top */
}

/* Flags for one added term, from its sign and whether it is zero. */
static inline uint32_t dr_term_flags(int negative, int zero)
{
    return DR_ACC_F_NONEMPTY | ((negative && zero) ? 0u : DR_ACC_F_NOT_NEG0);
}

void dr_acc_normalize(dr_acc *a);

/* The number of significant bits of v (0 for 0). */
static inline int dr_bit_length(uint64_t v)
{
#if defined(__GNUC__)
    return v ? 64 - __builtin_clzll(v) : 0;
#else
    int n = 0;
    while (v) { v >>= 1; n++; }
    return n;
#endif
}


/* The float nearest to W * 2^E (+ a nonzero fraction below it when sticky),
 * ties to even, gradual underflow, overflow to inf; W != 0. */
float dr_round_window(uint64_t W, int E, int sticky, int negative);
/* Digits d[0..top] (32 bits each, d[i] weighted 2^(32 i + lsb_exp), at
 * least three of them, zero above top) of a magnitude, divided by divisor
 * and rounded once; the value must be nonzero. */
float dr_round_digits(const uint32_t *d, int top, int lsb_exp, uint32_t divisor, int negative);
/* The special value (NaN, +-inf) that the DR_ACC_F_ special flags give. */
float dr_round_special(uint32_t flags);
/* The flags of an inf or NaN term (bits of the float), or of a product with
 * an inf or NaN factor (NaN for NaN or inf * 0, else a signed inf); shared
 * by dr_acc and dr_cacc. */
uint32_t dr_special_sum_flags(uint32_t bits);
uint32_t dr_special_prod_flags(uint32_t xb, uint32_t yb);
void dr_acc_note_special_sum(dr_acc *a, uint32_t bits);
void dr_acc_note_special_prod(dr_acc *a, uint32_t xb, uint32_t yb);

#endif
