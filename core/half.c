/* distref — float16 and bfloat16: correctly rounded conversions, and the
 * exact accumulator rounded once to them (distref/half.h). */
#include "distref/half.h"
#include "distref/elem.h"
#include "distref/exact_parts.h"

#include <float.h>
#include <string.h>

const char *dr_dtype_name(dr_dtype t)
{
    return t == DR_DTYPE_F16 ? "float16" : t == DR_DTYPE_BF16 ? "bfloat16" : "float32";
}

/* Magnitude m (24 significant bits at most) times 2^e, rounded to drop the
 * low `shift` bits, ties to even. */
static uint32_t rne_shift(uint32_t m, int shift)
{
    uint32_t q, rest, half;
    if (shift <= 0) return m << -shift;
    if (shift > 31) return 0;
    q = m >> shift;
    rest = m & ((1u << shift) - 1u);
    half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) q++;
    return q;
}

uint16_t dr_f32_to_f16(float x)
{
    uint32_t u = dr_elem_bits(x), sign = (u >> 16) & 0x8000u, e = (u >> 23) & 0xffu, f = u & 0x7fffffu;
    int exp;
    uint32_t m, q;
    if (e == 0xffu) return (uint16_t)(sign | 0x7c00u | (f ? 0x200u | (f >> 13) : 0u));
    if (e == 0u && f == 0u) return (uint16_t)sign;
    /* value = m * 2^(exp - 23), m < 2^24 */
    m = e ? f | 0x800000u : f;
    exp = e ? (int)e - 127 : -126;
    if (exp >= 16) return (uint16_t)(sign | 0x7c00u);
    if (exp >= -14) {            /* normal range of float16: keep 11 bits */
        q = rne_shift(m, 13);    /* (1 + frac) * 2^10, or 2^11 after a carry */
        /* biased exponent exp + 15 over frac q - 2^10: the sum is
         * (exp + 14) 2^10 + q, and a carry (q == 2^11) lands in the exponent */
        q += (uint32_t)(exp + 14) << 10;
        if (q >= 0x7c00u) return (uint16_t)(sign | 0x7c00u);
        return (uint16_t)(sign | q);
    }
    /* subnormal float16: units of 2^-24; value / 2^-24 = m * 2^(exp - 23 + 24) */
    q = rne_shift(m, -1 - exp);
    return (uint16_t)(sign | q);          /* q == 0x400 is the smallest normal, correctly */
}

float dr_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, f = h & 0x3ffu;
    if (e == 0x1fu) return dr_elem_from_bits(sign | 0x7f800000u | (f << 13));
    if (e) return dr_elem_from_bits(sign | (e + 112u) << 23 | f << 13);
    if (!f) return dr_elem_from_bits(sign);
    {   /* subnormal: f * 2^-24, exactly a float */
        int s = 0;
        while (!(f & 0x400u)) { f <<= 1; s++; }
        return dr_elem_from_bits(sign | (uint32_t)(113 - s) << 23 | (f & 0x3ffu) << 13);
    }
}

uint16_t dr_f32_to_bf16(float x)
{
    uint32_t u = dr_elem_bits(x), low = u & 0xffffu, q = u >> 16;
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu))
        return (uint16_t)(q | 0x40u);                  /* NaN: quiet, sign kept */
    if (low > 0x8000u || (low == 0x8000u && (q & 1u))) q++;   /* carries into the exponent, up to inf */
    return (uint16_t)q;
}

float dr_bf16_to_f32(uint16_t h)
{
    return dr_elem_from_bits((uint32_t)h << 16);
}

float dr_round_to_dtype(float x, dr_dtype t)
{
    if (t == DR_DTYPE_F16) return dr_f16_to_f32(dr_f32_to_f16(x));
    if (t == DR_DTYPE_BF16) return dr_bf16_to_f32(dr_f32_to_bf16(x));
    return x;
}

/* sign(a/d - f) for a finite nonzero float f: the residual a - f*d, exact
 * (d split as hi * 2^12 + lo, each product exact). */
static int residual_sign(const dr_acc *a, float f, uint32_t d)
{
    dr_acc r = *a;
    float hi = (float)(d >> 12), lo = (float)(d & 0xfffu), g = f < 0 ? -f : f, res;
    if (g < 0x1p100f) {
        dr_acc_add_prod(&r, -f * 0x1p12f, hi);
    } else {
        dr_acc_add_prod(&r, -f * 0x1p-12f, hi * 0x1p24f);
    }
    dr_acc_add_prod(&r, -f, lo);
    res = dr_acc_round(&r);
    return res > 0 ? 1 : res < 0 ? -1 : 0;
}

/* The sign of a nonzero exact value that rounds to zero (below 2^-150):
 * scaled up by 2^30 at a time (exactly) until a float shows it. */
static float tiny_sign(const dr_acc *a)
{
    dr_acc z = *a;
    int64_t any = 0;
    dr_acc_normalize(&z);   /* digits: zero exactly when every limb is (a dead unit's gradient) */
    for (int i = 0; i < DR_ACC_LIMBS; i++) any |= z.limb[i];
    if (!any) return 0.0f;
    for (int i = 0; i < 7; i++) {
        float v;
        dr_acc_mul_u32(&z, 1u << 30);
        v = dr_acc_round(&z);
        if (v != 0.0f) return v > 0 ? 1.0f : -1.0f;
    }
    return 0.0f;
}

float dr_acc_round_div_odd(const dr_acc *a, uint32_t d)
{
    float f = dr_acc_round_div(a, d), t;
    uint32_t u = dr_elem_bits(f);
    int s;
    if ((u & 0x7f800000u) == 0x7f800000u) {
        if (u & 0x7fffffu) return f;                                     /* NaN */
        if (a->flags & (DR_ACC_F_POS_INF | DR_ACC_F_NEG_INF)) return f;  /* a true infinity */
        return (u >> 31) ? -FLT_MAX : FLT_MAX;               /* finite, beyond the range: odd */
    }
    if (u & 1u) return f;                                    /* odd already */
    if (f == 0.0f) {             /* zero, or a nonzero value below 2^-150: +-2^-149 (odd) */
        t = tiny_sign(a);
        return t == 0.0f ? f : t * 0x1p-149f;
    }
    s = residual_sign(a, f, d);
    if (s == 0) return f;                                    /* exact */
    return dr_elem_from_bits((s > 0) == (f > 0) ? u + 1u : u - 1u);   /* the odd neighbour toward it */
}

float dr_acc_round_div_dtype(const dr_acc *a, uint32_t d, dr_dtype t)
{
    if (t == DR_DTYPE_F32) return dr_acc_round_div(a, d);
    return dr_round_to_dtype(dr_acc_round_div_odd(a, d), t);
}
