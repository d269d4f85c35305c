/* distref OpenCL kernels — the exact accumulator in OpenCL C.
 *
 * The same fixed-point number as core/acc.c (distref/exact.h): 20 signed
 * 64-bit limbs, limb i weighted 2^(32 i - 320), carry-save, then u32 pending
 * and u32 flags: 168 bytes, the host's dr_acc layout, so a gradient buffer
 * written here is read by the engine's host collectives as it is.
 * Accumulators are written to global memory normalized (digits 0..18 in
 * [0, 2^32), the top limb signed, pending 0), the canonical form.
 *
 * Only integer arithmetic: a float is m * 2^e (|m| < 2^24), a product of two
 * floats the 48-bit integer mx * my times 2^(ex + ey), so no double
 * precision is needed on the device. Rounding is core/acc.c's algorithm
 * (round_digits, round_window), rewritten here for OpenCL C.
 */
#define ACC_LIMBS 20
#define ACC_TOP   19
#define ACC_LSB   (-320)
#define ACC_F_POS_INF  1u
#define ACC_F_NEG_INF  2u
#define ACC_F_NAN      4u
#define ACC_F_NONEMPTY 8u
#define ACC_F_NOT_NEG0 16u

typedef struct acc_t {
    long limb[ACC_LIMBS];
    uint pending;
    uint flags;
} acc_t;

void acc_init(acc_t *a)
{
    for (int i = 0; i < ACC_LIMBS; i++) a->limb[i] = 0;
    a->pending = 0;
    a->flags = 0;
}

/* a += v * 2^e exactly (|v| < 2^63, e >= ACC_LSB). */
void acc_add_i64(acc_t *a, long v, int e)
{
    uint s = (uint)(e - ACC_LSB);
    uint i = s >> 5, o = s & 31u;
    ulong mag = v < 0 ? (ulong)0 - (ulong)v : (ulong)v;
    ulong p0 = (mag << o) & 0xffffffffUL;
    ulong hi = o ? mag >> (32u - o) : mag >> 32;
    long d0 = (long)p0, d1 = (long)(hi & 0xffffffffUL), d2 = (long)(hi >> 32);
    if (v < 0) { d0 = -d0; d1 = -d1; d2 = -d2; }
    a->limb[i] += d0;
    a->limb[i + 1] += d1;
    if (d2) a->limb[i + 2] += d2;
}

void acc_split(uint bits, int *m, int *e)
{
    uint field = (bits >> 23) & 0xffu;
    uint frac = bits & 0x7fffffu;
    int mag = (int)(field ? (frac | 0x800000u) : frac);
    *m = (bits >> 31) ? -mag : mag;
    *e = (field ? (int)field : 1) - 150;
}

uint acc_term_flags(int negative, int zero)
{
    return ACC_F_NONEMPTY | ((negative && zero) ? 0u : ACC_F_NOT_NEG0);
}

void acc_add(acc_t *a, float x)
{
    uint bits = as_uint(x);
    int m, e;
    if ((bits & 0x7f800000u) == 0x7f800000u) {
        a->flags |= ACC_F_NONEMPTY | ACC_F_NOT_NEG0;
        if (bits & 0x007fffffu) a->flags |= ACC_F_NAN;
        else a->flags |= (bits >> 31) ? ACC_F_NEG_INF : ACC_F_POS_INF;
        return;
    }
    acc_split(bits, &m, &e);
    a->flags |= acc_term_flags((int)(bits >> 31), m == 0);
    if (m == 0) return;
    acc_add_i64(a, (long)m, e);
    a->pending++;
}

void acc_add_prod(acc_t *a, float x, float y)
{
    uint xb = as_uint(x), yb = as_uint(y);
    int xm, xe, ym, ye;
    if ((xb & 0x7f800000u) == 0x7f800000u || (yb & 0x7f800000u) == 0x7f800000u) {
        uint xa = xb & 0x7fffffffu, ya = yb & 0x7fffffffu;
        a->flags |= ACC_F_NONEMPTY | ACC_F_NOT_NEG0;
        if (xa > 0x7f800000u || ya > 0x7f800000u || xa == 0 || ya == 0) a->flags |= ACC_F_NAN;
        else a->flags |= ((xb ^ yb) >> 31) ? ACC_F_NEG_INF : ACC_F_POS_INF;
        return;
    }
    acc_split(xb, &xm, &xe);
    acc_split(yb, &ym, &ye);
    a->flags |= acc_term_flags((int)((xb ^ yb) >> 31), xm == 0 || ym == 0);
    if (xm == 0 || ym == 0) return;
    acc_add_i64(a, (long)xm * (long)ym, xe + ye);
    a->pending++;
}

/* floor(v / 2^32) and v mod 2^32. */
long acc_carry_of(long v, long *digit)
{
    long low = (long)((ulong)v & 0xffffffffUL);
    *digit = low;
    return (v - low) / ((long)1 << 32);
}

void acc_normalize(acc_t *a)
{
    long carry = 0;
    for (int i = 0; i < ACC_TOP; i++) {
        long digit;
        carry = acc_carry_of(a->limb[i] + carry, &digit);
        a->limb[i] = digit;
    }
    a->limb[ACC_TOP] += carry;
    a->pending = 0;
}

/* dst += src for two normalized (or lightly loaded) accumulators. */
void acc_merge_g(acc_t *dst, __global const acc_t *src)
{
    for (int i = 0; i < ACC_LIMBS; i++) dst->limb[i] += src->limb[i];
    dst->pending += src->pending + 1u;
    dst->flags |= src->flags;
    if (dst->pending >= (1u << 29)) acc_normalize(dst);
}

void acc_load(acc_t *a, __global const acc_t *g)
{
    for (int i = 0; i < ACC_LIMBS; i++) a->limb[i] = g->limb[i];
    a->pending = g->pending;
    a->flags = g->flags;
}

/* Writes the canonical (normalized) form. */
void acc_store(__global acc_t *g, acc_t *a)
{
    acc_normalize(a);
    for (int i = 0; i < ACC_LIMBS; i++) g->limb[i] = a->limb[i];
    g->pending = 0;
    g->flags = a->flags;
}

/* a *= k exactly, 1 <= k <= 2^30 (core/acc.c's dr_acc_mul_u32). */
void acc_mul_u32(acc_t *a, uint k)
{
    ulong after = ((ulong)a->pending + 1UL) * k;
    if (after < (1UL << 30)) {
        for (int i = 0; i < ACC_LIMBS; i++) a->limb[i] *= (long)k;
        a->pending = after ? (uint)after - 1u : 0u;
        return;
    }
    acc_normalize(a);
    for (int i = 0; i < ACC_LIMBS; i++) a->limb[i] *= (long)k;
    acc_normalize(a);
}

/* ---- rounding (core/acc.c: dr_round_window, round_digits) ------------------ */

int acc_bit_length(ulong v) { return v ? 64 - (int)clz(v) : 0; }

float acc_round_window(ulong W, int E, int sticky, int negative)
{
    uint sign = negative ? 0x80000000u : 0u;
    int top = acc_bit_length(W) - 1, lsb, shift, biased;
    ulong m, halfbit = 0;
    lsb = E + top - 23;
    if (lsb < -149) lsb = -149;
    shift = lsb - E;
    if (shift <= 0) {
        m = W << -shift;
    } else if (shift <= 64) {
        m = shift == 64 ? 0 : W >> shift;
        halfbit = (W >> (shift - 1)) & 1UL;
        sticky |= shift > 1 && (W & ((1UL << (shift - 1)) - 1UL)) != 0;
    } else {
        m = 0;
        sticky |= 1;
    }
    if (halfbit && (sticky || (m & 1UL))) m++;
    if (m == (1UL << 24)) { m >>= 1; lsb++; }
    if (m < (1UL << 23)) return as_float(sign | (uint)m);
    biased = lsb + 150;
    if (biased >= 255) return as_float(sign | 0x7f800000u);
    return as_float(sign | (uint)biased << 23 | ((uint)m & 0x7fffffu));
}

float acc_round_digits(const uint *d, uint divisor, int negative)
{
    int t = ACC_TOP, sticky, eoff = 0;
    ulong rem = 0, q[3];
    while (t > 0 && d[t] == 0) t--;
    if (t < 2) t = 2;
    if ((divisor & (divisor - 1u)) == 0) {
        while (divisor > 1u) { divisor >>= 1; eoff++; }
        q[0] = d[t]; q[1] = d[t - 1]; q[2] = d[t - 2];
    } else {
        for (int k = 0; k < 3; k++) {
            ulong cur = rem << 32 | (ulong)d[t - k];
            q[k] = cur / divisor;
            rem = cur % divisor;
        }
    }
    sticky = rem != 0;
    for (int i = t - 3; i >= 0 && !sticky; i--) sticky = d[i] != 0;
    if (q[0] == 0 && q[1] == 0 && q[2] == 0) return as_float(negative ? 0x80000000u : 0u);
    if (q[0] == 0)
        return acc_round_window(q[1] << 32 | q[2], 32 * (t - 2) + ACC_LSB - eoff, sticky, negative);
    {
        int s = acc_bit_length(q[0]);
        sticky |= (q[2] & ((1UL << s) - 1UL)) != 0;
        return acc_round_window(q[0] << (64 - s) | q[1] << (32 - s) | q[2] >> s,
                                32 * (t - 2) + s + ACC_LSB - eoff, sticky, negative);
    }
}

/* The correctly rounded float of a / divisor (divisor >= 1); a is consumed. */
float acc_round_div(acc_t *a, uint divisor)
{
    uint d[ACC_LIMBS];
    int negative = 0, any = 0;
    if (a->flags & (ACC_F_POS_INF | ACC_F_NEG_INF | ACC_F_NAN)) {
        int pos = (a->flags & ACC_F_POS_INF) != 0, neg = (a->flags & ACC_F_NEG_INF) != 0;
        if ((a->flags & ACC_F_NAN) || (pos && neg)) return as_float(0x7fc00000u);
        return as_float(pos ? 0x7f800000u : 0xff800000u);
    }
    if (divisor == 0) return as_float(0x7fc00000u);
    acc_normalize(a);
    if (a->limb[ACC_TOP] < 0) {   /* the magnitude: two's complement over all digits */
        ulong c = 1;
        for (int i = 0; i < ACC_TOP; i++) {
            ulong x = (ulong)(~(uint)a->limb[i]) + c;
            d[i] = (uint)x;
            c = x >> 32;
        }
        d[ACC_TOP] = (uint)(-a->limb[ACC_TOP] - 1 + (long)c);
        negative = 1;
    } else {
        for (int i = 0; i < ACC_TOP; i++) d[i] = (uint)a->limb[i];
        d[ACC_TOP] = (uint)a->limb[ACC_TOP];
    }
    for (int i = 0; i < ACC_LIMBS; i++) any |= d[i] != 0;
    if (any) return acc_round_digits(d, divisor, negative);
    {
        int neg0 = (a->flags & ACC_F_NONEMPTY) && !(a->flags & ACC_F_NOT_NEG0);
        return as_float(neg0 ? 0x80000000u : 0u);
    }
}

float acc_round(acc_t *a) { return acc_round_div(a, 1u); }
