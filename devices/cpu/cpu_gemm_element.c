/* distref devices — the exact GEMM's common f32 element (cpu_gemm.c's
 * gemm_f32 asks here first): bias + row i . column j rounded once straight
 * from the integer product V, without an accumulator, when neither vector
 * has remainders or inf/NaN. With 128-bit integers: V (and the bias) in an
 * __int128, rounded from its top 64 bits, and on the DGEMM path without
 * its lo . lo product unless a rounding boundary lies within lo . lo's
 * bound; without them, four 32-bit digits. false sends the element to the
 * general path (a zero sum, whose sign needs it, or a bias too far away).
 */
#include "devices/cpu/cpu_gemm_internal.h"
#include "distref/exact_parts.h"
#include "devices/seams.h"

#include <stdbool.h>
#include <string.h>

typedef dr_sliced sliced;
typedef dr_product product;

/* bias + row i . column j when neither has remainders or specials. */
#if defined(__SIZEOF_INT128__)
/* The correctly rounded float of V * 2^E, V != 0, |V| < 2^127: the top 64
 * bits of |V| and whether anything below them is nonzero. */
static float round_wide(dr_i128 V, int E)
{
    int neg = V < 0;
    dr_u128 mag = neg ? (dr_u128)0 - (dr_u128)V : (dr_u128)V;
    uint64_t hi = (uint64_t)(mag >> 64), lo = (uint64_t)mag;
    int s, sticky;
    if (hi == 0) return dr_round_window(lo, E, 0, neg);
    s = 64 - __builtin_clzll(hi);                 /* bits of hi: the window moves up by s */
    if (s == 64) return dr_round_window(hi, E + 64, lo != 0, neg);
    sticky = DR_SEAM_WIDE_STICKY((lo & (((uint64_t)1 << s) - 1u)) != 0);
    return dr_round_window(hi << (64 - s) | lo >> s, E + s, sticky, neg);
}

/* Whether every V + t, |t| <= B, rounds to the float V rounds to:
 * with 2^k the float's ulp in V's units (k >= 1), the bits of |V| below it,
 * rem, keep more than B away from 0, from the midpoint 2^(k-1) and from
 * 2^k, so no rounding boundary, binade change or sign change lies within B.
 * (Subnormal results: the ulp is 2^-149, k = -149 - E.) */
static bool same_rounding(dr_i128 V, dr_i128 B, int E)
{
    dr_u128 mag = V < 0 ? (dr_u128)0 - (dr_u128)V : (dr_u128)V, b = (dr_u128)B, rem, half;
    uint64_t top = (uint64_t)(mag >> 64);
    int n, k;
    if (mag == 0) return false;                    /* V = 0: the sign of V + t is open */
    n = top ? 128 - __builtin_clzll(top) : 64 - __builtin_clzll((uint64_t)mag);
    k = n - 24;
    if (k < -149 - E) k = -149 - E;
    if (k < 1 || k > 126) return false;
    rem = mag & (((dr_u128)1 << k) - 1u);
    half = (dr_u128)1 << (k - 1);
    if (rem > b && rem + b < half) return true;                    /* all round down */
    if (DR_SEAM_ABOVE_MIDPOINT(rem, half, b) && rem + b < ((dr_u128)1 << k)) return true;   /* all round up */
    return false;
}

/* Without the lo . lo DGEMM (the f32 path runs three): the value without
 * it, V, is exact, and lo . lo lies in [-B, B]. When no rounding boundary
 * lies within B of V (same_rounding), V + lo . lo rounds as V does; only
 * when one does (rare, about sqrt(K) 2^-2w relative) is lo . lo computed,
 * for this element alone. */
bool dr_gemm_fast_element(const dr_product *p, size_t i, size_t j, size_t N, const float *bias, float *out)
{
    const sliced *a = &p->a, *b = &p->b;
    int E = a->base[i] + b->base[j], up = 0;
    dr_i128 V, B = 0;
    if (a->K == 0 || a->rem_start[i] != a->rem_start[i + 1] || b->rem_start[j] != b->rem_start[j + 1])
        return false;
    V = (p->V || p->c[3]) ? dr_gemm_slice_value(p, i, j, N) : dr_gemm_slice_value_hi(p, i, j, N, &B);   /* |V| < 2^107 */
    if (bias && dr_f32_is_special(dr_f32_bits(bias[j]))) return false;   /* inf/NaN: the full path */
    if (bias && bias[j] != 0.0f) {
        int32_t m, e;
        dr_split_f32(dr_f32_bits(bias[j]), &m, &e);
        if (e >= E) {                              /* m 2^(e-E) < 2^124: the sum stays below 2^125 */
            if (e - E > 100) return false;
            V += (dr_i128)m * ((dr_i128)1 << (e - E));
        } else {                                   /* the bias sets the unit: V 2^(E-e) < 2^126 */
            if (E - e > 19) return false;
            up = E - e;
            V = V * ((dr_i128)1 << up) + m;
            B *= (dr_i128)1 << up;
            E = e;
        }
    }
    DR_SEAM_LL_BOUND(B);
    if (B != 0) {
        if (same_rounding(V, B, E)) { *out = round_wide(V, E); return true; }
        V += (dr_i128)(int64_t)dr_gemm_ll_value(p, i, j, N) * ((dr_i128)1 << up);
    }
    if (V == 0) return false;                      /* the sign of zero needs the full path */
    *out = round_wide(V, E);
    return true;
}
#else
/* A 128-bit two's complement number in four 32-bit digits (carry-save in
 * int64): room for c0*2^2w + (c1+c2)*2^w + c3 + bias, |c| < 2^53, w <= 26. */
typedef struct small { int64_t d[4]; } small;

static bool small_add(small *x, int64_t v, int sh)
{
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int i = sh >> 5, o = sh & 31;
    uint64_t p0 = (mag << o) & 0xffffffffu, hi = o ? mag >> (32 - o) : mag >> 32;
    int64_t d[3] = { (int64_t)p0, (int64_t)(hi & 0xffffffffu), (int64_t)(hi >> 32) };
    if (i + 2 > 3 && d[2]) return false;
    if (i + 1 > 3 && d[1]) return false;
    for (int k = 0; k < 3 && i + k < 4; k++) x->d[i + k] += v < 0 ? -d[k] : d[k];
    return true;
}

/* Rounds x * 2^E; false when it is zero (the caller takes the full path for
 * the sign of zero). */
static bool small_round(small *x, int E, float *out)
{
    int64_t carry = 0;
    uint64_t dig[4], W;
    int neg, top = 3, s;
    for (int k = 0; k < 4; k++) {
        int64_t v = x->d[k] + carry, low = (int64_t)((uint64_t)v & 0xffffffffu);
        carry = (v - low) / ((int64_t)1 << 32);
        dig[k] = (uint64_t)low;
    }
    neg = carry < 0;                              /* the sign of the 128-bit value */
    if (neg) {                                    /* magnitude = two's complement */
        uint64_t c = 1;
        for (int k = 0; k < 4; k++) { uint64_t t = (~dig[k] & 0xffffffffu) + c; dig[k] = t & 0xffffffffu; c = t >> 32; }
    }
    while (top >= 0 && dig[top] == 0) top--;
    if (top < 0) return false;
    if (top == 0) { *out = dr_round_window(dig[0], E, 0, neg); return true; }
    W = dig[top] << 32 | dig[top - 1];
    s = (top - 1) * 32;
    for (int k = top - 2; k >= 0; k--) {          /* keep 64 bits, the rest is sticky */
        if (dig[k]) { *out = dr_round_window(W, E + s, 1, neg); return true; }
    }
    *out = dr_round_window(W, E + s, 0, neg);
    return true;
}

bool dr_gemm_fast_element(const dr_product *p, size_t i, size_t j, size_t N, const float *bias, float *out)
{
    const sliced *a = &p->a, *b = &p->b;
    int w = a->w, E = a->base[i] + b->base[j];
    small x = { { 0, 0, 0, 0 } };
    if (a->K == 0 || a->rem_start[i] != a->rem_start[i + 1] || b->rem_start[j] != b->rem_start[j + 1])
        return false;
    for (int q = 0; q < 4; q++) {
        double v = p->c[q][i * N + j];
        if (v != 0.0) small_add(&x, (int64_t)v, ((q & 2) ? 0 : w) + ((q & 1) ? 0 : w));
    }
    if (bias && dr_f32_is_special(dr_f32_bits(bias[j]))) return false;   /* inf/NaN: the full path */
    if (bias && bias[j] != 0.0f) {
        int32_t m, e;
        dr_split_f32(dr_f32_bits(bias[j]), &m, &e);
        if (e < E || e - E > 96 || !small_add(&x, m, e - E)) return false;
    }
    return small_round(&x, E, out);
}

#endif
