/* distref OpenCL kernels — float16 and bfloat16 in OpenCL C: core/half.c
 * (distref/half.h) rewritten for the device, bit for bit.
 *
 * dtype c: 0 float32, 1 float16, 2 bfloat16 (dr_dtype). Values travel in
 * float containers (every float16 and bfloat16 value is a float exactly).
 *   half_round(x, c)          x rounded to c, ties to even, gradual
 *                             underflow, overflow to inf (dr_round_to_dtype);
 *   acc_round_div_odd(a, d)   the exact a / d rounded to odd in float32
 *                             (dr_acc_round_div_odd): exact when a float,
 *                             else the neighbour with its last bit 1;
 *   acc_round_div_dtype(a, d, c)  a / d rounded once to c: to odd, then to
 *                             c (no double rounding: 24 >= 11 + 2 and
 *                             24 >= 8 + 2 bits; Boldo and Melquiond 2008).
 * Integer code only, apart from exact power-of-two scalings.
 */
#pragma OPENCL FP_CONTRACT OFF

/* m (24 significant bits at most) with its low `shift` bits dropped, ties to even. */
uint half_rne_shift(uint m, int shift)
{
    uint q, rest, hb;
    if (shift <= 0) return m << -shift;
    if (shift > 31) return 0u;
    q = m >> shift;
    rest = m & ((1u << shift) - 1u);
    hb = 1u << (shift - 1);
    if (rest > hb || (rest == hb && (q & 1u))) q++;
    return q;
}

uint half_from_f32(float x)
{
    uint u = as_uint(x), sign = (u >> 16) & 0x8000u, e = (u >> 23) & 0xffu, f = u & 0x7fffffu, m, q;
    int ex;
    if (e == 0xffu) return sign | 0x7c00u | (f ? 0x200u | (f >> 13) : 0u);
    if (e == 0u && f == 0u) return sign;
    m = e ? f | 0x800000u : f;
    ex = e ? (int)e - 127 : -126;
    if (ex >= 16) return sign | 0x7c00u;
    if (ex >= -14) {             /* normal float16: 11 bits kept, a carry lands in the exponent */
        q = half_rne_shift(m, 13) + ((uint)(ex + 14) << 10);
        return q >= 0x7c00u ? sign | 0x7c00u : sign | q;
    }
    return sign | half_rne_shift(m, -1 - ex);   /* subnormal float16: units of 2^-24 */
}

float half_to_f32(uint h)
{
    uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, f = h & 0x3ffu;
    int s = 0;
    if (e == 0x1fu) return as_float(sign | 0x7f800000u | (f << 13));
    if (e) return as_float(sign | (e + 112u) << 23 | f << 13);
    if (!f) return as_float(sign);
    while (!(f & 0x400u)) { f <<= 1; s++; }      /* subnormal: f 2^-24, a float exactly */
    return as_float(sign | (uint)(113 - s) << 23 | (f & 0x3ffu) << 13);
}

uint bf16_from_f32(float x)
{
    uint u = as_uint(x), low = u & 0xffffu, q = u >> 16;
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) return q | 0x40u;   /* NaN: quiet */
    if (low > 0x8000u || (low == 0x8000u && (q & 1u))) q++;
    return q;
}

float half_round(float x, uint c)
{
    if (c == 1u) return half_to_f32(half_from_f32(x));
    if (c == 2u) return as_float(bf16_from_f32(x) << 16);
    return x;
}

/* sign(a / d - f) for a finite nonzero float f: the residual a - f d, exact
 * (d = hi 2^12 + lo, each product exact). */
int acc_residual_sign(const acc_t *a, float f, uint d)
{
    acc_t r = *a;
    float hi = (float)(d >> 12), lo = (float)(d & 0xfffu), g = f < 0.0f ? -f : f, res;
    if (g < 0x1p100f) acc_add_prod(&r, -f * 0x1p12f, hi);
    else acc_add_prod(&r, -f * 0x1p-12f, hi * 0x1p24f);
    acc_add_prod(&r, -f, lo);
    res = acc_round(&r);
    return res > 0.0f ? 1 : res < 0.0f ? -1 : 0;
}

/* The sign of a nonzero exact value below 2^-150 (rounds to zero): scaled
 * up by 2^30 at a time, exactly, until a float shows it (0: zero). */
float acc_tiny_sign(const acc_t *a)
{
    acc_t z = *a;
    for (int i = 0; i < 7; i++) {
        acc_t c;
        float v;
        acc_mul_u32(&z, 1u << 30);
        c = z;
        v = acc_round(&c);
        if (v != 0.0f) return v > 0.0f ? 1.0f : -1.0f;
    }
    return 0.0f;
}

float acc_round_div_odd(const acc_t *a, uint d)
{
    acc_t c = *a;
    float f = acc_round_div(&c, d), t;
    uint u = as_uint(f);
    int s;
    if ((u & 0x7f800000u) == 0x7f800000u) {
        if (u & 0x7fffffu) return f;                                 /* NaN */
        if (a->flags & (ACC_F_POS_INF | ACC_F_NEG_INF)) return f;    /* a true infinity */
        return as_float((u & 0x80000000u) | 0x7f7fffffu);            /* beyond the range: +-FLT_MAX, odd */
    }
    if (u & 1u) return f;
    if (f == 0.0f) {
        t = acc_tiny_sign(a);
        return t == 0.0f ? f : t * 0x1p-149f;
    }
    s = acc_residual_sign(a, f, d);
    if (s == 0) return f;                                            /* exact */
    return as_float((s > 0) == (f > 0.0f) ? u + 1u : u - 1u);       /* the odd neighbour toward it */
}

float acc_round_div_dtype(const acc_t *a, uint d, uint c)
{
    if (c == 0u) {
        acc_t k = *a;
        return acc_round_div(&k, d);
    }
    return half_round(acc_round_div_odd(a, d), c);
}
