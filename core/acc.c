/* distref — the exact accumulator: add, merge, serialize, round once.
 *
 * Representation (see exact.h): value = sum_i limb[i] * 2^(32 i - 320), limbs
 * signed 64-bit in carry-save form. Normalizing propagates carries so that
 * limbs 0..18 are digits in [0, 2^32) and limb 19 carries the sign (two's
 * complement in spirit): a canonical form, so equality, serialization and
 * rounding all work on it.
 */
#include "distref/exact_parts.h"

#include <string.h>

#define TOP (DR_ACC_LIMBS - 1)
#define DIGIT 4294967296.0

void dr_acc_init(dr_acc *a)
{
    memset(a, 0, sizeof *a);
}

/* floor(v / 2^32) and v mod 2^32, without shifting negative numbers. */
static inline int64_t carry_of(int64_t v, int64_t *digit)
{
    int64_t low = (int64_t)((uint64_t)v & 0xffffffffu);
    *digit = low;
    return (v - low) / ((int64_t)1 << 32);
}

void dr_acc_normalize(dr_acc *a)
{
    int64_t carry = 0;
    for (int i = 0; i < TOP; i++) {
        int64_t digit;
        carry = carry_of(a->limb[i] + carry, &digit);
        a->limb[i] = digit;
    }
    a->limb[TOP] += carry;
    a->pending = 0;
}

static inline void count_one(dr_acc *a)
{
    if (++a->pending >= DR_ACC_MAX_PENDING) dr_acc_normalize(a);
}

uint32_t dr_special_sum_flags(uint32_t bits)
{
    uint32_t f = DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
    if (bits & 0x007fffffu) return f | DR_ACC_F_NAN;
    return f | ((bits >> 31) ? DR_ACC_F_NEG_INF : DR_ACC_F_POS_INF);
}

/* x*y where x or y is inf or NaN: NaN for NaN or inf * 0, else a signed inf. */
uint32_t dr_special_prod_flags(uint32_t xb, uint32_t yb)
{
    uint32_t xm = xb & 0x7fffffffu, ym = yb & 0x7fffffffu, f = DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
    if (xm > 0x7f800000u || ym > 0x7f800000u || xm == 0 || ym == 0) return f | DR_ACC_F_NAN;
    return f | (((xb ^ yb) >> 31) ? DR_ACC_F_NEG_INF : DR_ACC_F_POS_INF);
}

void dr_acc_note_special_sum(dr_acc *a, uint32_t bits)
{
    a->flags |= dr_special_sum_flags(bits);
}

void dr_acc_note_special_prod(dr_acc *a, uint32_t xb, uint32_t yb)
{
    a->flags |= dr_special_prod_flags(xb, yb);
}

void dr_acc_add(dr_acc *a, float x)
{
    uint32_t bits = dr_f32_bits(x);
    int32_t m, e;
    if (dr_f32_is_special(bits)) { dr_acc_note_special_sum(a, bits); return; }
    dr_split_f32(bits, &m, &e);
    a->flags |= dr_term_flags((int)(bits >> 31), m == 0);
    if (m == 0) return;
    dr_acc_add_i64(a, m, e);
    count_one(a);
}

void dr_acc_add_prod(dr_acc *a, float x, float y)
{
    uint32_t xb = dr_f32_bits(x), yb = dr_f32_bits(y);
    int32_t xm, xe, ym, ye;
    if (dr_f32_is_special(xb) || dr_f32_is_special(yb)) {
        dr_acc_note_special_prod(a, xb, yb);
        return;
    }
    dr_split_f32(xb, &xm, &xe);
    dr_split_f32(yb, &ym, &ye);
    a->flags |= dr_term_flags((int)((xb ^ yb) >> 31), xm == 0 || ym == 0);
    if (xm == 0 || ym == 0) return;
    dr_acc_add_i64(a, (int64_t)xm * ym, xe + ye);
    count_one(a);
}

void dr_acc_merge(dr_acc *dst, const dr_acc *src)
{
    dr_acc tmp;
    if ((uint64_t)dst->pending + src->pending + 1 >= DR_ACC_MAX_PENDING) {
        dr_acc_normalize(dst);
        if (src->pending + 1u >= DR_ACC_MAX_PENDING / 2) {
            tmp = *src;
            dr_acc_normalize(&tmp);
            src = &tmp;
        }
    }
    for (int i = 0; i < DR_ACC_LIMBS; i++) dst->limb[i] += src->limb[i];
    dst->pending += src->pending + 1;
    dst->flags |= src->flags;
}

void dr_acc_mul_u32(dr_acc *a, uint32_t k)
{
    /* A limb holds at most (pending + 1) * 2^32; when k times that stays
     * within the carry-save headroom, one pass of multiplies is enough. */
    uint64_t after = ((uint64_t)a->pending + 1) * k;
    if (after < DR_ACC_MAX_PENDING) {
        for (int i = 0; i < DR_ACC_LIMBS; i++) a->limb[i] *= (int64_t)k;
        a->pending = after ? (uint32_t)after - 1 : 0;
        return;
    }
    /* Otherwise normalize first: digits below 2^32 times k < 2^62, and the
     * carry pass below cannot overflow. */
    dr_acc_normalize(a);
    for (int i = 0; i < DR_ACC_LIMBS; i++) a->limb[i] *= (int64_t)k;
    dr_acc_normalize(a);
}

bool dr_acc_equal(const dr_acc *a, const dr_acc *b)
{
    dr_acc x = *a, y = *b;
    dr_acc_normalize(&x);
    dr_acc_normalize(&y);
    return x.flags == y.flags && memcmp(x.limb, y.limb, sizeof x.limb) == 0;
}

/* ---- serialization ------------------------------------------------------ */

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#define KNOWN_FLAGS (DR_ACC_F_POS_INF | DR_ACC_F_NEG_INF | DR_ACC_F_NAN | \
                     DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0)

void dr_acc_serialize(const dr_acc *a, uint8_t out[DR_ACC_BYTES])
{
    dr_acc n = *a;
    dr_acc_normalize(&n);
    put_u32(out, n.flags);
    for (int i = 0; i < TOP; i++) put_u32(out + 4 + 4 * i, (uint32_t)n.limb[i]);
    /* |value| < 2^319 always, so the top limb fits a signed 32-bit digit. */
    put_u32(out + 4 + 4 * TOP, (uint32_t)(int32_t)n.limb[TOP]);
}

bool dr_acc_deserialize(dr_acc *a, const uint8_t in[DR_ACC_BYTES])
{
    dr_acc n;
    uint32_t flags = get_u32(in);
    if (flags & ~(uint32_t)KNOWN_FLAGS) return false;
    memset(&n, 0, sizeof n);
    n.flags = flags;
    for (int i = 0; i < TOP; i++) n.limb[i] = (int64_t)get_u32(in + 4 + 4 * i);
    n.limb[TOP] = (int64_t)(int32_t)get_u32(in + 4 + 4 * TOP);
    *a = n;
    return true;
}

/* ---- rounding ----------------------------------------------------------- */

/* Rounds W * 2^E (plus a nonzero fraction below it when sticky) to a float:
 * ties to even, gradual underflow, overflow to inf. W != 0. */
float dr_round_window(uint64_t W, int E, int sticky, int negative)
{
    uint32_t sign = negative ? 0x80000000u : 0u;
    int top, lsb, shift, biased;
    uint64_t m, half = 0;
    top = dr_bit_length(W) - 1;
    lsb = E + top - 23;                            /* exponent of the result's ulp */
    if (lsb < DR_F32_EXP_MIN) lsb = DR_F32_EXP_MIN;
    shift = lsb - E;                               /* low bits of W below the ulp */
    if (shift <= 0) {
        m = W << -shift;                           /* exact: at most 24 bits */
    } else if (shift <= 64) {
        m = shift == 64 ? 0 : W >> shift;
        half = (W >> (shift - 1)) & 1u;
        sticky |= shift > 1 && (W & (((uint64_t)1 << (shift - 1)) - 1u)) != 0;
    } else {
        m = 0;
        sticky |= 1;
    }
    if (half && (sticky || (m & 1u))) m++;
    if (m == (uint64_t)1 << 24) { m >>= 1; lsb++; }
    if (m < (uint64_t)1 << 23) return dr_bits_f32(sign | (uint32_t)m);   /* subnormal or zero */
    biased = lsb + 150;
    if (biased >= 255) return dr_bits_f32(sign | 0x7f800000u);
    return dr_bits_f32(sign | (uint32_t)biased << 23 | ((uint32_t)m & 0x7fffffu));
}

/* The value of the digits divided by divisor, rounded. Only the top three
 * nonzero digits are divided in full (a quotient of at least 33 significant
 * bits, more than the 25 rounding needs); the rest only decides stickiness.
 * A power-of-two divisor 2^s divides nothing: it lowers the exponent by s
 * (the one rounding, subnormals included, is dr_round_window's). */
float dr_round_digits(const uint32_t *d, int top, int lsb_exp, uint32_t divisor, int negative)
{
    int t = top, sticky = 0, eoff = 0;
    uint64_t rem = 0, q[3];
    while (t > 0 && d[t] == 0) t--;
    if (t < 2) t = 2;
    if ((divisor & (divisor - 1u)) == 0) {
        while (divisor > 1u) { divisor >>= 1; eoff++; }
        q[0] = d[t]; q[1] = d[t - 1]; q[2] = d[t - 2];
    } else {
        for (int k = 0; k < 3; k++) {
            uint64_t cur = rem << 32 | d[t - k];
            q[k] = cur / divisor;
            rem = cur % divisor;
        }
    }
    sticky = rem != 0;
    for (int i = t - 3; i >= 0 && !sticky; i--) sticky = d[i] != 0;
    if (q[0] == 0 && q[1] == 0 && q[2] == 0) {
        /* Below 2^(32(t-2)-320) with t == 2: far below the smallest subnormal. */
        return dr_bits_f32(negative ? 0x80000000u : 0u);
    }
    if (q[0] == 0) {
        return dr_round_window(q[1] << 32 | q[2], 32 * (t - 2) + lsb_exp - eoff, sticky, negative);
    }
    /* q0 (< 2^32) over the 64 bits below: keep the top 64 bits, the rest is sticky. */
    {
        int s = dr_bit_length(q[0]);                  /* bits in q0 */
        sticky |= (q[2] & (((uint64_t)1 << s) - 1u)) != 0;
        return dr_round_window(q[0] << (64 - s) | q[1] << (32 - s) | q[2] >> s,
                            32 * (t - 2) + s + lsb_exp - eoff, sticky, negative);
    }
}

float dr_round_special(uint32_t flags)
{
    int pos = (flags & DR_ACC_F_POS_INF) != 0, neg = (flags & DR_ACC_F_NEG_INF) != 0;
    if ((flags & DR_ACC_F_NAN) || (pos && neg)) return dr_bits_f32(0x7fc00000u);
    return dr_bits_f32(pos ? 0x7f800000u : 0xff800000u);
}

/* The magnitude's digits without a copy of the accumulator or a second
 * normalization: carries run only from the lowest nonzero limb lo to just
 * above the highest one hi (the limbs beyond are zero, so the carry out of
 * hi is the value's signed top digit), and a negative value is complemented
 * over the same digits. A gradient's accumulator spans a few limbs, so this
 * touches a few limbs instead of copying and normalizing twenty twice. */
float dr_acc_round_div(const dr_acc *a, uint32_t divisor)
{
    uint32_t d[DR_ACC_LIMBS] = { 0 };
    int lo = 0, hi = TOP, t, negative = 0;
    int64_t carry = 0, top;
    if (a->flags & (DR_ACC_F_POS_INF | DR_ACC_F_NEG_INF | DR_ACC_F_NAN))
        return dr_round_special(a->flags);
    if (divisor == 0) return dr_bits_f32(0x7fc00000u);
    while (lo <= TOP && a->limb[lo] == 0) lo++;
    if (lo <= TOP) {
        while (a->limb[hi] == 0) hi--;
        t = hi < TOP ? hi + 1 : TOP;
        for (int i = lo; i < t; i++) {
            int64_t digit;
            carry = carry_of(a->limb[i] + carry, &digit);
            d[i] = (uint32_t)digit;
        }
        top = a->limb[t] + carry;                  /* |top| < 2^31: the value is below 2^319 */
        if (top < 0) {                             /* magnitude: two's complement of lo..t */
            uint64_t c = 1;
            for (int i = lo; i < t; i++) {
                uint64_t x = (uint64_t)(~d[i]) + c;
                d[i] = (uint32_t)x;
                c = x >> 32;
            }
            top = -top - 1 + (int64_t)c;
            negative = 1;
        }
        d[t] = (uint32_t)top;
        for (int i = lo; i <= t; i++)
            if (d[i]) return dr_round_digits(d, TOP, DR_ACC_LSB_EXP, divisor, negative);
    }
    {   /* An exact zero: -0 only for a non-empty all-(-0) sum, as IEEE. */
        int neg0 = (a->flags & DR_ACC_F_NONEMPTY) && !(a->flags & DR_ACC_F_NOT_NEG0);
        return dr_bits_f32(neg0 ? 0x80000000u : 0u);
    }
}

float dr_acc_round(const dr_acc *a)
{
    return dr_acc_round_div(a, 1);
}

void dr_acc_round_array(const dr_acc *a, size_t n, uint32_t divisor, float *out)
{
    for (size_t i = 0; i < n; i++) out[i] = dr_acc_round_div(&a[i], divisor);
}
