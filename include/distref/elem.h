/* distref — deterministic float32 elementary functions.
 *
 * One source, two dialects: this header compiles as C11 and as OpenCL C 1.2,
 * and gives the same bits in both, on every platform and device
 * (docs/ARCHITECTURE.md, "Elementwise math is the same code everywhere").
 * It uses only
 *   + - * /  (each correctly rounded, round-to-nearest-even),
 *   explicit fma (fmaf in C, fma in OpenCL C; correctly rounded),
 *   comparisons, float<->int conversions of exact integers and
 *   integer manipulation of the float bit pattern.
 * No libm call other than fmaf, no double precision, no tables.
 *
 * Build requirements (the results are only bit-exact under them):
 *   C:      -ffp-contract=off, never -ffast-math, FLT_EVAL_METHOD == 0
 *           (checked below), default rounding mode, no flush-to-zero.
 *   OpenCL: #pragma OPENCL FP_CONTRACT OFF (set below) and
 *           -cl-fp32-correctly-rounded-divide-sqrt; a device whose fma is
 *           correctly rounded and that supports denormals (CL_FP_DENORM).
 *
 * Functions (algorithms and measured accuracy: docs/ELEMENTARY.md):
 *   dr_expf(x)   e^x,  max error 0.5191 ULP (at x = -0x1.9fd168p+4)
 *   dr_logf(x)   ln x, max error 0.5174 ULP (at x = 0x1.61a6fep-1)
 *                (measured over all 2^32 inputs; the test asserts <= 0.52)
 *   dr_powi_f32(b, n)   b^n by binary exponentiation (plain multiplies)
 *
 * Special values (IEEE-like; every NaN result is the canonical quiet NaN
 * 0x7fc00000 so that NaN bits too are device independent):
 *   exp: NaN -> NaN, +inf -> +inf, -inf -> +0, x > ~88.7228 -> +inf,
 *        x < ~-103.972 -> +0, subnormal results rounded once, directly on
 *        the subnormal grid (no double rounding).
 *   log: NaN -> NaN, x < 0 (incl. -inf) -> NaN, +-0 -> -inf, +inf -> +inf,
 *        subnormal inputs handled, log(1) = +0.
 */
#ifndef DISTREF_ELEM_H
#define DISTREF_ELEM_H

/* __OPENCL_VERSION__ is defined by every OpenCL C compiler for a device;
 * __OPENCL_C_VERSION__ (CL 1.2+) also by offline ones such as clang -x cl,
 * which leaves __OPENCL_VERSION__ undefined for a host target. */
#if defined(__OPENCL_VERSION__) || defined(__OPENCL_C_VERSION__)
/* ------------------------------------------------------------ OpenCL C */
#define DR_ELEM_OPENCL 1
#pragma OPENCL FP_CONTRACT OFF

#ifndef DR_ELEM_FN
#define DR_ELEM_FN          /* plain external definitions: valid in CL 1.1+ */
#endif
#define DR_FMA(a, b, c) fma((a), (b), (c))

typedef uint dr_elem_u32;
typedef int  dr_elem_i32;

DR_ELEM_FN dr_elem_u32 dr_elem_bits(float x) { return as_uint(x); }
DR_ELEM_FN float dr_elem_from_bits(dr_elem_u32 u) { return as_float(u); }

#else
/* ------------------------------------------------------------------ C */
#define DR_ELEM_OPENCL 0
#include <float.h>
#include <math.h>      /* fmaf only */
#include <stdint.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "distref/elem.h needs FLT_EVAL_METHOD == 0 (e.g. SSE2 math, not x87)"
#endif

#ifndef DR_ELEM_FN
#define DR_ELEM_FN static inline
#endif
#define DR_FMA(a, b, c) fmaf((a), (b), (c))

typedef uint32_t dr_elem_u32;
typedef int32_t  dr_elem_i32;

DR_ELEM_FN dr_elem_u32 dr_elem_bits(float x)
{
    dr_elem_u32 u;
    memcpy(&u, &x, sizeof u);
    return u;
}

DR_ELEM_FN float dr_elem_from_bits(dr_elem_u32 u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
#endif

/* ------------------------------------------------------- common helpers */

/* 2^k for -126 <= k <= 127, exactly. */
DR_ELEM_FN float dr_elem_pow2i(dr_elem_i32 k)
{
    return dr_elem_from_bits((dr_elem_u32)(k + 127) << 23);
}

#define DR_ELEM_QNAN    0x7fc00000u
#define DR_ELEM_PINF    0x7f800000u
#define DR_ELEM_NINF    0xff800000u

/* ------------------------------------------------------------------ exp */
/*
 * e^x = 2^k * e^r,  k = round(x / ln2),  r = x - k*ln2.
 *
 * - k by the 1.5*2^23 trick; r_hi = fma(-k, LN2_HI, x) is exact (LN2_HI is
 *   ln2 rounded to float; x - k*LN2_HI is a multiple of 2^-25 below 1/2 in
 *   magnitude). The rest, c = k*LN2_LO, enters as the factor (1 - c).
 * - e^r = 1 + r + r^2/2 + r^3 Q(r), Q a degree-5 minimax polynomial
 *   (|r| <= 0.3467, abs. error of r^3 Q < 2^-35), float coefficients.
 * - The sum is carried as hi + tail with 1 + r and + r^2/2 done by exact
 *   Fast2Sum and r^2 split exactly with fma, so the only sizeable rounding
 *   is the final one.
 * - Normal results: scale by 2^k in two exact steps. Subnormal results
 *   (k <= -127, or k == -126 and mantissa < 1): add B = 2^(-126-k), whose
 *   ulp is the subnormal spacing scaled by 2^-k, so the single final
 *   rounding happens directly on the subnormal grid (no double rounding);
 *   the remaining scaling is exact.
 */
DR_ELEM_FN float dr_expf(float x)
{
    const float LOG2E  = 0x1.715476p+0f;
    const float LN2_HI = 0x1.62e430p-1f;     /* ln2 rounded to float */
    const float LN2_LO = -0x1.05c610p-29f;   /* ln2 - LN2_HI */
    const float SHIFT  = 0x1.8p+23f;
    const float C3 = 0x1.555556p-3f,  C4 = 0x1.555556p-5f;
    const float C5 = 0x1.110fdap-7f,  C6 = 0x1.6c1670p-10f;
    const float C7 = 0x1.a2a3aap-13f, C8 = 0x1.a13694p-16f;

    float kf, r, c, r2h, r2l, q, small, hi, lo, hi2, lo2, tail, s;
    dr_elem_i32 k, k1;

    if (!(x <= 89.0f)) {
        if ((dr_elem_bits(x) & 0x7fffffffu) > DR_ELEM_PINF)   /* NaN */
            return dr_elem_from_bits(DR_ELEM_QNAN);
        return dr_elem_from_bits(DR_ELEM_PINF);       /* +inf, overflow */
    }
    if (x < -104.0f)
        return 0.0f;                                  /* -inf, underflow */

    kf = (x * LOG2E + SHIFT) - SHIFT;                 /* round(x/ln2) */
    k = (dr_elem_i32)kf;                              /* -150 <= k <= 128 */
    r = DR_FMA(-kf, LN2_HI, x);                       /* exact */
    c = kf * LN2_LO;

    r2h = r * r;
    r2l = DR_FMA(r, r, -r2h);                         /* r^2 = r2h + r2l */
    q = DR_FMA(C8, r, C7);
    q = DR_FMA(q, r, C6);
    q = DR_FMA(q, r, C5);
    q = DR_FMA(q, r, C4);
    q = DR_FMA(q, r, C3);
    small = DR_FMA(r2h * r, q, 0.5f * r2l);           /* r^3 Q + r2l/2 */

    hi = 1.0f + r;                                    /* Fast2Sum(1, r) */
    lo = r - (hi - 1.0f);
    hi2 = hi + 0.5f * r2h;                            /* Fast2Sum(hi, r2h/2) */
    lo2 = 0.5f * r2h - (hi2 - hi);
    tail = (lo + lo2) + small;                        /* e^r ~ hi2 + tail */
    tail = DR_FMA(-c, hi2 + tail, tail);              /* times (1 - c) */

    s = hi2 + tail;
    if (k > -126 || (k == -126 && s >= 1.0f)) {
        k1 = k / 2;
        return (s * dr_elem_pow2i(k1)) * dr_elem_pow2i(k - k1);
    } else {
        /* subnormal result: round once on the grid of spacing 2^(-149-k) */
        float B = dr_elem_from_bits((dr_elem_u32)(1 - k) << 23);
        float u = B + hi2;                            /* Fast2Sum(B, hi2) */
        float e = hi2 - (u - B);
        float y = u + (e + tail);
        float m = y - B;                              /* exact */
        return (m * 0x1p-64f) * dr_elem_pow2i(k + 64); /* both exact */
    }
}

/* ------------------------------------------------------------------ log */
/*
 * x = 2^e * m with m in [sqrt(1/2), sqrt(2)) (by integer arithmetic on the
 * bits; subnormals are first scaled by 2^23), f = m - 1 (exact),
 * ln x = e*ln2 + log1p(f).
 *
 * - s = f/(2+f) with a correction term: s = sh + sl, where the remainder
 *   fma(-sh, 2+f, f) is exact and 1/(2+f) = (1-s)/2 avoids a second division.
 * - log1p(f) = 2 atanh(s) = f - s*f + s*R(s^2), using 2s = f - s*f;
 *   R(z) = z*T(z), T a degree-3 minimax polynomial (|s| <= 0.1716,
 *   abs. error of s*R < 2^-37).
 * - s*f is formed exactly (fma), f - s*f by Fast2Sum, e*LN2_HI is exact
 *   (LN2_HI has 15 significant bits, |e| < 2^8) and joined by Fast2Sum, so
 *   the only sizeable rounding is the final one.
 */
DR_ELEM_FN float dr_logf(float x)
{
    const float LN2_HI = 0x1.62e400p-1f;     /* ln2 to 15 bits */
    const float LN2_LO = 0x1.7f7d1cp-20f;    /* ln2 - LN2_HI */
    const float T0 = 0x1.555554p-1f, T1 = 0x1.999beap-2f;
    const float T2 = 0x1.23e9e4p-2f, T3 = 0x1.ed73fep-3f;
    const dr_elem_u32 SQRTH = 0x3f3504f3u;  /* bits of ~sqrt(1/2) */

    dr_elem_u32 u = dr_elem_bits(x), w;
    dr_elem_i32 e, eadj = 0;
    float m, f, dh, de, sh, rr, sl, z, R, gh, gl, v, ve, A, wh, we, tail, ef;

    if (u - 0x00800000u >= 0x7f000000u) {   /* not a positive normal */
        if ((u & 0x7fffffffu) > DR_ELEM_PINF)          /* NaN */
            return dr_elem_from_bits(DR_ELEM_QNAN);
        if ((u & 0x7fffffffu) == 0u)                    /* +-0 */
            return dr_elem_from_bits(DR_ELEM_NINF);
        if (u >> 31)
            return dr_elem_from_bits(DR_ELEM_QNAN); /* x < 0, incl. -inf */
        if (u == DR_ELEM_PINF)
            return x;
        u = dr_elem_bits(x * 0x1p23f);                /* positive subnormal */
        eadj = -23;
    }

    w = u - SQRTH;
    e = (dr_elem_i32)((w + 0x40000000u) >> 23) - 128 + eadj;
    m = dr_elem_from_bits((w & 0x007fffffu) + SQRTH);
    f = m - 1.0f;                                     /* exact */

    dh = 2.0f + f;                                    /* Fast2Sum(2, f) */
    de = f - (dh - 2.0f);
    sh = f / dh;
    rr = DR_FMA(-sh, dh, f);                          /* exact remainder */
    sl = DR_FMA(-sh, de, rr) * (0.5f - 0.5f * sh);    /* s - sh */

    z = sh * sh;
    R = DR_FMA(T3, z, T2);
    R = DR_FMA(R, z, T1);
    R = DR_FMA(R, z, T0);
    R = R * z;

    gh = sh * f;                                      /* s*f = gh + gl */
    gl = DR_FMA(sl, f, DR_FMA(sh, f, -gh));

    v = f - gh;                                       /* Fast2Sum(f, -gh) */
    ve = (f - v) - gh;

    ef = (float)e;
    A = ef * LN2_HI;                                  /* exact */
    wh = A + v;                                       /* Fast2Sum(A, v) */
    we = v - (wh - A);

    /* s*R(s^2) = sh*R + 3*sl*R to first order in sl (sl/sh ~ 2^-23 here) */
    tail = DR_FMA(3.0f * sl, R, (we + ve) - gl);
    tail = DR_FMA(ef, LN2_LO, DR_FMA(sh, R, tail));
    return wh + tail;
}

/* ----------------------------------------------------------------- powi */
/*
 * base^n by left-to-right binary exponentiation with plain float
 * multiplies: a pure function of (base, n), the same bits everywhere.
 * Used for Adam's bias correction beta^t. powi(b, 0) = 1 for every b.
 */
DR_ELEM_FN float dr_powi_f32(float base, unsigned n)
{
    float acc = 1.0f;
    int i;
    for (i = 31; i >= 0; --i) {
        acc = acc * acc;
        if ((n >> i) & 1u)
            acc = acc * base;
    }
    return acc;
}

#endif /* DISTREF_ELEM_H */
