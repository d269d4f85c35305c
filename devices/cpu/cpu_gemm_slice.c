/* distref devices — the exact GEMM's slicing (see cpu_gemm_internal.h,
 * dr_sliced): per vector (a row of op(A) or a column of op(B)) its largest
 * exponent, its grid, its zeros, signs and inf/NaN, the slices hi and lo
 * for the DGEMM path, and the remainders below the grid.
 */
#include "devices/cpu/cpu_gemm_internal.h"
#include "distref/error.h"
#include "distref/exact_parts.h"
#include "devices/seams.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef dr_sliced sliced;

/* Exponent of the top bit of a finite nonzero element, from its bits. */
static inline int top_bit_exponent(uint32_t u)
{
    uint32_t field = (u >> 23) & 0xffu, frac = u & 0x7fffffu;
    if (field) return (int)field - 127;                /* normal: the exponent field says it */
#if defined(__GNUC__)
    return -150 + (32 - __builtin_clz(frac));          /* subnormal: its top bit */
#else
    { int t = -150; for (; frac; frac >>= 1) t++; return t; }
#endif
}

/* 2^e as a double, -1022 <= e <= 1023. */
static inline double pow2d(int e)
{
    uint64_t b = (uint64_t)(1023 + e) << 52;
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

/* The smaller exponent field of a nonzero magnitude g and e (0x7f800000:
 * none yet). */
static inline uint32_t min_field(uint32_t e, uint32_t g)
{
    uint32_t f = g & 0x7f800000u;
    return g && f < e ? f : e;
}

/* Pass 1, in memory order: per vector the largest magnitude's bits (float
 * magnitudes order as their bits; inf/NaN above every finite one), the OR
 * and AND of the bits (the signs present), and the smallest exponent field
 * of a nonzero element (*low: the exponent of the lowest bit any element
 * can hold). Plain max/or/and/min loops. */
static void scan_vectors(sliced *s, int *top, int *low, uint32_t *mx)
{
    size_t nv = s->nvec, K = s->K;
    uint32_t *orr = mx + nv + 1, *andd = orr + nv + 1, *mn = andd + nv + 1;
    if (dr_crt_have_vnni()) {
        dr_scan_avx512(s, mx, orr, andd, mn);    /* the same maxima and bits, 16 lanes at a time */
    } else if (!s->em) {
        for (size_t v = 0; v < nv; v++) {
            const float *x = s->base_ptr + v * s->inc_vec;
            uint32_t m = 0, o = 0, n = 0xffffffffu, e = 0x7f800000u;
            for (size_t k = 0; k < K; k++) {
                uint32_t u = dr_f32_bits(x[k]), g = u & 0x7fffffffu;
                m = g > m ? g : m;
                o |= u;
                n &= u;
                e = min_field(e, g);
            }
            mx[v] = m; orr[v] = o; andd[v] = n; mn[v] = e;
        }
    } else {
        for (size_t v = 0; v < nv; v++) { mx[v] = 0; orr[v] = 0; andd[v] = 0xffffffffu; mn[v] = 0x7f800000u; }
        for (size_t k = 0; k < K; k++) {
            const float *x = s->base_ptr + k * s->inc_elem;
            for (size_t v = 0; v < nv; v++) {
                uint32_t u = dr_f32_bits(x[v]), g = u & 0x7fffffffu;
                mx[v] = g > mx[v] ? g : mx[v];
                orr[v] |= u;
                andd[v] &= u;
                mn[v] = min_field(mn[v], g);
            }
        }
    }
    for (size_t v = 0; v < nv; v++) {
        int field = (int)(mn[v] >> 23);
        s->special[v] = mx[v] >= 0x7f800000u;
        s->signs[v] = (unsigned char)(K ? (!(andd[v] >> 31)) | (orr[v] >> 31) << 1 : 0);
        top[v] = (mx[v] == 0 || s->special[v]) ? INT32_MIN : top_bit_exponent(mx[v]);
        low[v] = (field > 1 ? field : 1) - 150;   /* a float's lowest bit: 2^(field - 150), subnormals 2^-149 */
    }
}

/* Pass 2, in memory order: t = x 2^-base (exact in a double, below 2^2w),
 * hi = trunc(t 2^-w), lo = trunc(t - hi 2^w), and what is left below lo's
 * unit, t - hi 2^w - lo, is the remainder (all of one sign, exact). Pass 3
 * lists the remainders vector by vector (rare: an element more than 2w bits
 * below its vector's largest). Vectors holding inf or NaN get zero slices
 * (they take the plain exact path). */
static inline int split_one(float x, double sc, double inv_w, double two_w, double *hi, double *lo)
{
    double t = (double)x * sc, h = (double)(int64_t)(t * inv_w), f = t - h * two_w, l = (double)(int64_t)f;
    *hi = h;
    *lo = l;
    return f != l;
}

static void split_all(sliced *s, unsigned char *has_rem)
{
    size_t nv = s->nvec, K = s->K;
    const double two_w = pow2d(s->w), inv_w = pow2d(-s->w);
    for (size_t v = 0; v < nv; v++) has_rem[v] = 0;
    if (!s->em) {
        for (size_t v = 0; v < nv; v++) {
            const float *x = s->base_ptr + v * s->inc_vec;
            double *hi = s->hi + v * K, *lo = s->lo + v * K, sc = s->scale[v];
            int r = 0;
            if (s->special[v]) {
                for (size_t k = 0; k < K; k++) hi[k] = lo[k] = 0.0;
                continue;
            }
            for (size_t k = 0; k < K; k++) r |= split_one(x[k], sc, inv_w, two_w, &hi[k], &lo[k]);
            has_rem[v] = (unsigned char)r;
        }
    } else {
        for (size_t k = 0; k < K; k++) {
            const float *x = s->base_ptr + k * s->inc_elem;
            double *hi = s->hi + k * nv, *lo = s->lo + k * nv;
            for (size_t v = 0; v < nv; v++) {
                if (s->special[v]) { hi[v] = lo[v] = 0.0; continue; }
                has_rem[v] |= (unsigned char)split_one(x[v], s->scale[v], inv_w, two_w, &hi[v], &lo[v]);
            }
        }
    }
    dr_sliced_rems(s, has_rem);
}

/* Pass 3: the remainders of the vectors flagged, listed vector by vector:
 * t - (hi 2^w + lo), or without slices (the CRT path) t - trunc(t). Vectors
 * holding inf or NaN have none (they take the plain path). */
void dr_sliced_rems(sliced *s, const unsigned char *has_rem)
{
    size_t nv = s->nvec, K = s->K;
    const double two_w = pow2d(s->w);
    s->nrem = 0;
    for (size_t v = 0; v < nv; v++) {
        s->rem_start[v] = s->nrem;
        if (!has_rem[v] || s->special[v]) continue;
        for (size_t k = 0; k < K; k++) {
            size_t at = s->em ? k * nv + v : v * K + k;
            double t = (double)s->base_ptr[v * s->inc_vec + k * s->inc_elem] * s->scale[v];
            double r = s->hi ? t - s->hi[at] * two_w - s->lo[at] : t - trunc(t);
            if (r != 0.0) {
                s->rem_k[s->nrem] = (uint32_t)k;
                s->rem_v[s->nrem++] = (float)(r * pow2d(s->base[v]));   /* exact: low bits of a float */
            }
        }
    }
    s->rem_start[nv] = s->nrem;
}

void dr_sliced_free(sliced *s)
{
    free(s->hi); free(s->lo); free(s->base); free(s->special); free(s->zero); free(s->signs);
    free(s->rem_start); free(s->rem_k); free(s->rem_v); free(s->scale);
}

int dr_slice_width(size_t K)
{
    int L = 0;
    while (((size_t)1 << L) < K) L++;
    return (53 - L) / 2;
}

/* Slices stored as the source lies: vector-major (nvec x K) when a vector's
 * elements are contiguous, element-major (K x nvec) otherwise, so every
 * pass reads the operand in memory order; the DGEMM takes either. */
int dr_sliced_init(sliced *s, const float *base, size_t inc_vec, size_t inc_elem,
                   size_t nvec, size_t K, int w, int slices)
{
    int *top, *low;
    unsigned char *has_rem;
    uint32_t *scan;
    memset(s, 0, sizeof *s);
    s->base_ptr = base; s->inc_vec = inc_vec; s->inc_elem = inc_elem;
    s->nvec = nvec; s->K = K; s->w = w;
    s->em = inc_elem != 1;
    if (slices) {
        s->hi = malloc(nvec * K * sizeof(double) + 8);
        s->lo = malloc(nvec * K * sizeof(double) + 8);
    }
    s->base = malloc(nvec * sizeof(int) + 8);
    s->scale = malloc(nvec * sizeof(double) + 8);
    s->special = calloc(nvec + 1, 1);
    s->zero = calloc(nvec + 1, 1);
    s->signs = calloc(nvec + 1, 1);
    s->rem_start = malloc((nvec + 1) * sizeof(size_t));
    s->rem_k = malloc(nvec * K * sizeof(uint32_t) + 8);
    s->rem_v = malloc(nvec * K * sizeof(float) + 8);
    top = malloc(2 * nvec * sizeof(int) + 8);
    low = top ? top + nvec : NULL;
    has_rem = malloc(nvec + 1);
    scan = malloc((nvec + 1) * 4 * sizeof(uint32_t));
    if (!scan || (slices && (!s->hi || !s->lo)) || !s->base || !s->scale || !s->special || !s->zero || !s->signs ||
        !s->rem_start || !s->rem_k || !s->rem_v || !top || !has_rem) {
        dr_sliced_free(s);
        free(top); free(has_rem); free(scan);
        return DR_ENOMEM;
    }
    scan_vectors(s, top, low, scan);
    s->bits = 1;
    for (size_t v = 0; v < nvec; v++) {
        s->zero[v] = top[v] == INT32_MIN && !s->special[v];
        s->base[v] = top[v] == INT32_MIN ? 0 : top[v] - 2 * s->w + 1;   /* exponent of lo's unit */
        /* The CRT path's grid starts no lower than the lowest bit an element
         * can hold: the same values on it, no remainder either way, but
         * integers of top - low + 1 bits, not 2w, so fewer moduli
         * (dr_crt_values). The DGEMM path keeps its 2w-bit grid. */
        if (!slices && top[v] != INT32_MIN && low[v] > s->base[v]) s->base[v] = low[v];
        if (top[v] != INT32_MIN && top[v] + DR_SEAM_CRT_TOP_BIT - s->base[v] > s->bits)
            s->bits = top[v] + DR_SEAM_CRT_TOP_BIT - s->base[v];
        s->scale[v] = pow2d(-s->base[v]);
    }
    if (slices) split_all(s, has_rem);   /* else the CRT path lists the remainders (dr_sliced_rems) */
    free(top); free(has_rem); free(scan);
    return DR_OK;
}

