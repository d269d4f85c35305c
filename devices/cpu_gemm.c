/* distref devices — exact GEMM by error-free splitting over DGEMM (see
 * fastgemm.h for the scheme). Checked bit for bit against dr_gemm_f32 and
 * dr_gemm_acc in tests/test_fastgemm.c and in bench/bench_exact.c.
 */
#include "distref/fastgemm.h"
#include "core/acc_internal.h"
#include "distref/cacc.h"
#include "core/bins.h"
#include "devices/cpu_gemm_internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef dr_sliced sliced;
typedef dr_product product;

static float elem(const sliced *s, size_t v, size_t k)
{
    return s->base_ptr[v * s->inc_vec + k * s->inc_elem];
}

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

/* Pass 1, in memory order: per vector the largest magnitude's bits (float
 * magnitudes order as their bits; inf/NaN above every finite one), and the
 * OR and AND of the bits (the signs present). Plain max/or/and loops. */
static void scan_vectors(sliced *s, int *top, uint32_t *mx)
{
    size_t nv = s->nvec, K = s->K;
    uint32_t *orr = mx + nv + 1, *andd = orr + nv + 1;
    if (!s->em) {
        for (size_t v = 0; v < nv; v++) {
            const float *x = s->base_ptr + v * s->inc_vec;
            uint32_t m = 0, o = 0, n = 0xffffffffu;
            for (size_t k = 0; k < K; k++) {
                uint32_t u = dr_f32_bits(x[k]), g = u & 0x7fffffffu;
                m = g > m ? g : m;
                o |= u;
                n &= u;
            }
            mx[v] = m; orr[v] = o; andd[v] = n;
        }
    } else {
        for (size_t v = 0; v < nv; v++) { mx[v] = 0; orr[v] = 0; andd[v] = 0xffffffffu; }
        for (size_t k = 0; k < K; k++) {
            const float *x = s->base_ptr + k * s->inc_elem;
            for (size_t v = 0; v < nv; v++) {
                uint32_t u = dr_f32_bits(x[v]), g = u & 0x7fffffffu;
                mx[v] = g > mx[v] ? g : mx[v];
                orr[v] |= u;
                andd[v] &= u;
            }
        }
    }
    for (size_t v = 0; v < nv; v++) {
        s->special[v] = mx[v] >= 0x7f800000u;
        s->signs[v] = (unsigned char)(K ? (!(andd[v] >> 31)) | (orr[v] >> 31) << 1 : 0);
        top[v] = (mx[v] == 0 || s->special[v]) ? INT32_MIN : top_bit_exponent(mx[v]);
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

static void sliced_free(sliced *s)
{
    free(s->hi); free(s->lo); free(s->base); free(s->special); free(s->zero); free(s->signs);
    free(s->rem_start); free(s->rem_k); free(s->rem_v); free(s->scale);
}

static int slice_width(size_t K)
{
    int L = 0;
    while (((size_t)1 << L) < K) L++;
    return (53 - L) / 2;
}

/* Slices stored as the source lies: vector-major (nvec x K) when a vector's
 * elements are contiguous, element-major (K x nvec) otherwise, so every
 * pass reads the operand in memory order; the DGEMM takes either. */
static int sliced_init(sliced *s, const float *base, size_t inc_vec, size_t inc_elem,
                       size_t nvec, size_t K, int w, int slices)
{
    int *top;
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
    top = malloc(nvec * sizeof(int) + 8);
    has_rem = malloc(nvec + 1);
    scan = malloc((nvec + 1) * 3 * sizeof(uint32_t));
    if (!scan || (slices && (!s->hi || !s->lo)) || !s->base || !s->scale || !s->special || !s->zero || !s->signs ||
        !s->rem_start || !s->rem_k || !s->rem_v || !top || !has_rem) {
        sliced_free(s);
        free(top); free(has_rem); free(scan);
        return DR_ENOMEM;
    }
    scan_vectors(s, top, scan);
    for (size_t v = 0; v < nvec; v++) {
        s->zero[v] = top[v] == INT32_MIN && !s->special[v];
        s->base[v] = top[v] == INT32_MIN ? 0 : top[v] - 2 * s->w + 1;   /* exponent of lo's unit */
        s->scale[v] = pow2d(-s->base[v]);
    }
    if (slices) split_all(s, has_rem);   /* else the CRT path lists the remainders (dr_sliced_rems) */
    free(top); free(has_rem); free(scan);
    return DR_OK;
}

/* ---- the four slice products and their exact combination ---------------- */


static void product_free(product *p)
{
    sliced_free(&p->a);
    sliced_free(&p->b);
    for (int q = 0; q < 4; q++) free(p->c[q]);
#if defined(__SIZEOF_INT128__)
    free(p->V);
#endif
}

/* The two sides sliced and their integer products formed: by four (three
 * without lo . lo) DGEMMs, or, crt > 0, by residues (cpu_gemm_crt.c; crt = 2
 * the VNNI kernel), exact integers either way. */
static int product_init(product *p, dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                        const float *A, size_t lda, const float *B, size_t ldb, int need_ll, int crt)
{
    int w = crt ? dr_crt_width(K) : slice_width(K);
    memset(p, 0, sizeof *p);
    if (sliced_init(&p->a, A, ta ? 1 : lda, ta ? lda : 1, M, K, w, !crt) ||
        sliced_init(&p->b, B, tb ? ldb : 1, tb ? 1 : ldb, N, K, w, !crt)) {
        product_free(p);
        return DR_ENOMEM;
    }
#if defined(__SIZEOF_INT128__)
    if (crt) {
        int rc = dr_crt_values(p, crt == 2);
        if (rc) product_free(p);
        return rc;
    }
#else
    need_ll = 1;
#endif
    for (int q = 0; q < 4 - !need_ll; q++) {
        const double *x = (q & 2) ? p->a.lo : p->a.hi, *y = (q & 1) ? p->b.lo : p->b.hi;
        p->c[q] = malloc(M * N * sizeof(double) + 8);
        if (!p->c[q]) { product_free(p); return DR_ENOMEM; }
        if (M && N && K)
            cblas_dgemm(CblasRowMajor, p->a.em ? CblasTrans : CblasNoTrans, p->b.em ? CblasNoTrans : CblasTrans,
                        (int)M, (int)N, (int)K, 1.0, x, (int)(p->a.em ? M : K), y, (int)(p->b.em ? N : K),
                        0.0, p->c[q], (int)N);
        else
            memset(p->c[q], 0, M * N * sizeof(double));
    }
    return DR_OK;
}

/* lo(row i) . lo(column j): the DGEMM's when it ran, else computed here
 * (integers below 2^w, products below 2^2w, the sum below 2^53: exact in
 * double, in any order). */
static double ll_value(const product *p, size_t i, size_t j, size_t N)
{
    const sliced *a = &p->a, *b = &p->b;
    size_t K = a->K;
    double s = 0.0;
    if (p->c[3]) return p->c[3][i * N + j];
    for (size_t k = 0; k < K; k++)
        s += a->lo[a->em ? k * a->nvec + i : i * K + k] * b->lo[b->em ? k * b->nvec + j : j * K + k];
    return s;
}

/* part += v * 2^e. Slice units can lie below the accumulator's 2^-320, but a
 * sum of slice products is a sum of float products, a multiple of 2^-298:
 * the bits shifted out here are zero. */
static void add_scaled(dr_acc *part, int64_t v, int e)
{
    if (e < DR_ACC_LSB_EXP) {
        int d = DR_ACC_LSB_EXP - e;
        v = d >= 63 ? 0 : v / ((int64_t)1 << d);
        e = DR_ACC_LSB_EXP;
    }
    if (v) dr_acc_add_i64(part, v, e);
}

#if defined(__SIZEOF_INT128__)
static void add_wide(dr_acc *acc, dr_i128 V, int E);
#endif

/* The exact dot product of row i and column j, as the plain path keeps it:
 * the value, and flags that only a zero sum needs the terms for. */
static void exact_dot(const product *p, size_t i, size_t j, size_t N, dr_acc *part)
{
    const sliced *a = &p->a, *b = &p->b;
    size_t K = a->K;
    int w = a->w, base = a->base[i] + b->base[j];
    int zero = 1;
    dr_acc_init(part);
    if (K == 0) return;
#if defined(__SIZEOF_INT128__)
    if (p->V) {
        if (p->V[i * N + j] != 0) add_wide(part, p->V[i * N + j], base);
    } else
#endif
    for (int q = 0; q < 4; q++) {
        double v = q == 3 ? ll_value(p, i, j, N) : p->c[q][i * N + j];
        int shift = ((q & 2) ? 0 : w) + ((q & 1) ? 0 : w);
        if (v != 0.0) add_scaled(part, (int64_t)v, base + shift);
    }
    part->pending = 4;
    for (size_t r = a->rem_start[i]; r < a->rem_start[i + 1]; r++)    /* r_a * b */
        dr_acc_add_prod(part, a->rem_v[r], elem(b, j, a->rem_k[r]));
    for (size_t r = b->rem_start[j]; r < b->rem_start[j + 1]; r++) {  /* (a - r_a) * r_b */
        size_t k = b->rem_k[r];
        float ak = elem(a, i, k), ra = 0.0f;
        for (size_t q = a->rem_start[i]; q < a->rem_start[i + 1]; q++) if (a->rem_k[q] == k) ra = a->rem_v[q];
        dr_acc_add_prod(part, ak - ra, b->rem_v[r]);
    }
    dr_acc_normalize(part);
    for (int l = 0; l < DR_ACC_LIMBS; l++) zero &= part->limb[l] == 0;
    part->flags = zero ? dr_zero_dot_flags(a->base_ptr + i * a->inc_vec, a->inc_elem,
                                           b->base_ptr + j * b->inc_vec, b->inc_elem, K)
                       : DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
}

/* NONEMPTY/NOT_NEG0 of the K >= 1 products of row i and column j when one
 * of them is all zeros: every product is a zero, and some product is +0
 * exactly when some a_k and b_k share a sign. One side with a single sign
 * decides it from the other side's signs; only two mixed sides need the terms. */
static uint32_t zero_product_flags(const product *p, size_t i, size_t j)
{
    unsigned sa = p->a.signs[i], sb = p->b.signs[j];
#if defined(DR_MUTANT_ZERO_ROW_SIGNS)
    (void)sa; (void)sb;   /* fault: an all-zero row's products are taken as +0 */
    return DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
#else
    if (sa == 3 && sb == 3)
        return dr_zero_dot_flags(p->a.base_ptr + i * p->a.inc_vec, p->a.inc_elem,
                                 p->b.base_ptr + j * p->b.inc_vec, p->b.inc_elem, p->a.K);
    return DR_ACC_F_NONEMPTY | ((sa & sb) ? DR_ACC_F_NOT_NEG0 : 0u);
#endif
}

#if defined(__SIZEOF_INT128__)
/* The direct path: a dot product without remainders is exactly
 * V * 2^(base_a + base_b), V = c0 2^2w + (c1 + c2) 2^w + c3 with |c| < 2^53 and
 * w <= 26, so |V| < 2^107: an __int128 holds it, and it goes into the
 * caller's accumulator as two int64 pieces, with no temporary accumulator,
 * no normalization and no merge. */

static dr_i128 slice_value(const product *p, size_t i, size_t j, size_t N)
{
    int w = p->a.w;
    size_t ij = i * N + j;
    if (p->V) return p->V[ij];                     /* the CRT path's: |V| < K 2^4w < 2^107 */
    return (dr_i128)(int64_t)p->c[0][ij] * ((dr_i128)1 << (2 * w)) +
           ((dr_i128)(int64_t)p->c[1][ij] + (dr_i128)(int64_t)p->c[2][ij]) * ((dr_i128)1 << w) +
           (dr_i128)(int64_t)ll_value(p, i, j, N);
}

/* The same without lo . lo, and a bound on what lo . lo can add. */
static dr_i128 slice_value_hi(const product *p, size_t i, size_t j, size_t N, dr_i128 *bound)
{
    int w = p->a.w;
    size_t ij = i * N + j;
    int64_t unit = ((int64_t)1 << w) - 1;
    *bound = (dr_i128)p->a.K * unit * unit;        /* < 2^(L + 2w) <= 2^53 */
    return (dr_i128)(int64_t)p->c[0][ij] * ((dr_i128)1 << (2 * w)) +
           ((dr_i128)(int64_t)p->c[1][ij] + (dr_i128)(int64_t)p->c[2][ij]) * ((dr_i128)1 << w);
}

/* acc += V * 2^E exactly, V != 0, |V| < 2^107. E may lie below the
 * accumulator's 2^-320: V * 2^E is a sum of float products, a multiple of
 * 2^-298, so the bits shifted out are zero (E >= -400: shift < 128). */
static void add_wide(dr_acc *acc, dr_i128 V, int E)
{
    int neg = V < 0;
    dr_u128 mag = neg ? (dr_u128)0 - (dr_u128)V : (dr_u128)V;
    uint64_t lo, hi;
    if (E < DR_ACC_LSB_EXP) {
#if defined(DR_MUTANT_WIDE_SHIFT)
        mag >>= DR_ACC_LSB_EXP - E - 1;   /* fault: one bit short: the value doubles */
#else
        mag >>= DR_ACC_LSB_EXP - E;
#endif
        E = DR_ACC_LSB_EXP;
    }
    lo = (uint64_t)mag & (((uint64_t)1 << 62) - 1u);
    hi = (uint64_t)(mag >> 62);
    if (lo) dr_acc_add_i64(acc, neg ? -(int64_t)lo : (int64_t)lo, E);
    if (hi) dr_acc_add_i64(acc, neg ? -(int64_t)hi : (int64_t)hi, E + 62);
    acc->pending += 2;
    if (acc->pending >= DR_ACC_MAX_PENDING) dr_acc_normalize(acc);
}
#endif

/* The cases both accumulator forms take alike, for a row and column without
 * inf or NaN: K == 0 or an all-zero side (flags only), and the direct path
 * without remainders (V * 2^(base_a + base_b), or flags when V = 0). */
enum { DOT_DONE, DOT_VALUE, DOT_GENERAL };

static int dot_direct(const product *p, size_t i, size_t j, size_t N, uint32_t *flags, void *V)
{
    if (p->a.K == 0) return DOT_DONE;
    if (p->a.zero[i] || p->b.zero[j]) {   /* every product is a zero: flags only */
        *flags |= zero_product_flags(p, i, j);
        return DOT_DONE;
    }
#if defined(__SIZEOF_INT128__)
    if (p->a.rem_start[i] == p->a.rem_start[i + 1] && p->b.rem_start[j] == p->b.rem_start[j + 1]) {
        dr_i128 v = slice_value(p, i, j, N);
        if (v == 0) {
            *flags |= dr_zero_dot_flags(p->a.base_ptr + i * p->a.inc_vec, p->a.inc_elem,
                                        p->b.base_ptr + j * p->b.inc_vec, p->b.inc_elem, p->a.K);
            return DOT_DONE;
        }
        memcpy(V, &v, sizeof v);
        return DOT_VALUE;
    }
#else
    (void)N; (void)V;
#endif
    return DOT_GENERAL;
}

/* acc += row i . column j, exactly, by whichever path the data allows. */
static void dot_into(const product *p, size_t i, size_t j, size_t N, dr_acc *acc, dr_prod_bins *bins)
{
    dr_acc part;
    int how;
    if (p->a.special[i] || p->b.special[j]) {
        dr_acc_add_dot_strided(acc, p->a.base_ptr + i * p->a.inc_vec, p->a.inc_elem,
                               p->b.base_ptr + j * p->b.inc_vec, p->b.inc_elem, p->a.K, bins);
        return;
    }
#if defined(__SIZEOF_INT128__)
    {
        dr_i128 V;
        how = dot_direct(p, i, j, N, &acc->flags, &V);
        if (how == DOT_VALUE) {
            add_wide(acc, V, p->a.base[i] + p->b.base[j]);
            acc->flags |= DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
        }
    }
#else
    how = dot_direct(p, i, j, N, &acc->flags, NULL);
#endif
    if (how != DOT_GENERAL) return;
    exact_dot(p, i, j, N, &part);
    dr_acc_merge(acc, &part);
}

/* acc += row i . column j into a compact accumulator (distref/cacc.h): the
 * direct path's V * 2^E goes in as one 128-bit term; a dot with remainders
 * or specials is formed in a dr_acc first (the plain exact path) and
 * merged, exactly or as an overflow. */
static void dot_into_compact(const product *p, size_t i, size_t j, size_t N, dr_cacc *acc, dr_prod_bins *bins)
{
    dr_acc part;
    dr_cacc c;
    if (!p->a.special[i] && !p->b.special[j]) {
#if defined(__SIZEOF_INT128__)
        dr_i128 V;
        int how = dot_direct(p, i, j, N, &acc->flags, &V);
        if (how == DOT_VALUE)
            dr_cacc_add_scaled(acc, (int64_t)(V >> 64), (uint64_t)V, p->a.base[i] + p->b.base[j]);
#else
        int how = dot_direct(p, i, j, N, &acc->flags, NULL);
#endif
        if (how != DOT_GENERAL) return;
    } else if (p->a.K == 0) {
        return;
    }
    dr_acc_init(&part);
    dot_into(p, i, j, N, &part, bins);
    dr_cacc_from_acc(&c, &part);
    dr_cacc_merge(acc, &c);
}

/* Every element of the product into its accumulator (full or compact). */
static int gemm_into(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                     const float *B, size_t ldb, dr_acc *full, dr_cacc *compact, int crt)
{
    product p;
    int rc = product_init(&p, ta, tb, M, N, K, A, lda, B, ldb, 1, crt);
    if (rc) return rc;
    #pragma omp parallel
    {
        dr_prod_bins bins;
        dr_prod_bins_init(&bins);
        #pragma omp for schedule(static)
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++) {
                if (compact) dot_into_compact(&p, i, j, N, &compact[i * N + j], &bins);
                else dot_into(&p, i, j, N, &full[i * N + j], &bins);
            }
    }
    product_free(&p);
    return DR_OK;
}

/* ---- the common case without an accumulator ---------------------------- */

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
#if defined(DR_MUTANT_WIDE_STICKY)
    sticky = 0;                                   /* fault: the bits below the window are dropped */
#else
    sticky = (lo & (((uint64_t)1 << s) - 1u)) != 0;
#endif
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
#if defined(DR_MUTANT_CERT_MIDPOINT)
    if (rem + b > half && rem + b < ((dr_u128)1 << k)) return true;   /* fault: the midpoint may lie within B */
#else
    if (rem > half + b && rem + b < ((dr_u128)1 << k)) return true;   /* all round up */
#endif
    return false;
}

/* Without the lo . lo DGEMM (the f32 path runs three): the value without
 * it, V, is exact, and lo . lo lies in [-B, B]. When no rounding boundary
 * lies within B of V (same_rounding), V + lo . lo rounds as V does; only
 * when one does (rare, about sqrt(K) 2^-2w relative) is lo . lo computed,
 * for this element alone. */
static bool fast_element(const product *p, size_t i, size_t j, size_t N, const float *bias, float *out)
{
    const sliced *a = &p->a, *b = &p->b;
    int E = a->base[i] + b->base[j], up = 0;
    dr_i128 V, B = 0;
    if (a->K == 0 || a->rem_start[i] != a->rem_start[i + 1] || b->rem_start[j] != b->rem_start[j + 1])
        return false;
    V = (p->V || p->c[3]) ? slice_value(p, i, j, N) : slice_value_hi(p, i, j, N, &B);   /* |V| < 2^107 */
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
#if defined(DR_MUTANT_LL_IGNORED)
    B = 0;                                         /* fault: lo . lo taken as zero */
#endif
    if (B != 0) {
        if (same_rounding(V, B, E)) { *out = round_wide(V, E); return true; }
        V += (dr_i128)(int64_t)ll_value(p, i, j, N) * ((dr_i128)1 << up);
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

static bool fast_element(const product *p, size_t i, size_t j, size_t N, const float *bias, float *out)
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

/* bias + op(A) op(B) rounded once, element by element. */
static int gemm_f32(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                    const float *A, size_t lda, const float *B, size_t ldb,
                    const float *bias, float *C, size_t ldc, int crt)
{
    product p;
    int rc = product_init(&p, ta, tb, M, N, K, A, lda, B, ldb, 0, crt);
    if (rc) return rc;
    #pragma omp parallel
    {
        dr_prod_bins bins;
        dr_prod_bins_init(&bins);
        #pragma omp for schedule(static)
        for (size_t i = 0; i < M; i++) {
            for (size_t j = 0; j < N; j++) {
                dr_acc acc;
                if (!p.a.special[i] && !p.b.special[j] && fast_element(&p, i, j, N, bias, &C[i * ldc + j]))
                    continue;
                if (K > 0 && (p.a.zero[i] || p.b.zero[j]) && !p.a.special[i] && !p.b.special[j]) {
                    /* bias + zeros: the bias itself when finite and nonzero, else a signed zero */
                    uint32_t bb = bias ? dr_f32_bits(bias[j]) : 0x80000000u;
                    if (!(bb & 0x7fffffffu)) {
                        int plus = (bias && bb == 0u) || (zero_product_flags(&p, i, j) & DR_ACC_F_NOT_NEG0);
                        C[i * ldc + j] = dr_bits_f32(plus ? 0u : 0x80000000u);
                        continue;
                    }
                    if (!dr_f32_is_special(bb)) { C[i * ldc + j] = bias[j]; continue; }
                }
                dr_acc_init(&acc);
                if (bias) dr_acc_add(&acc, bias[j]);
                dot_into(&p, i, j, N, &acc, &bins);
                C[i * ldc + j] = dr_acc_round(&acc);
            }
        }
    }
    product_free(&p);
    return DR_OK;
}

/* 0: DGEMM; 1, 2: CRT (portable, VNNI kernel); -1: the forced path cannot run. */
static int path_code(dr_gemm_path path, size_t K)
{
#if defined(__SIZEOF_INT128__)
    int crt_ok = dr_crt_width(K) > 0;
#else
    int crt_ok = 0;
#endif
    switch (path) {
    case DR_GEMM_PATH_DGEMM: return 0;
    case DR_GEMM_PATH_CRT_PORTABLE: return crt_ok ? 1 : -1;
    case DR_GEMM_PATH_CRT_VNNI: return crt_ok && dr_crt_have_vnni() ? 2 : -1;
    default: return crt_ok && dr_crt_have_vnni() ? 2 : 0;
    }
}

int dr_gemm_fast_path(dr_gemm_path path, dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                      const float *A, size_t lda, const float *B, size_t ldb,
                      const float *bias, float *C, size_t ldc, dr_acc *full, dr_cacc *compact)
{
    int crt = path_code(path, K);
    if (crt < 0) return DR_EUNSUPPORTED;
    if (C) return gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, bias, C, ldc, crt);
    return gemm_into(ta, tb, M, N, K, A, lda, B, ldb, full, compact, crt);
}

int dr_gemm_f32_fast(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                     const float *A, size_t lda, const float *B, size_t ldb,
                     const float *bias, float *C, size_t ldc)
{
    return dr_gemm_fast_path(DR_GEMM_PATH_AUTO, ta, tb, M, N, K, A, lda, B, ldb, bias, C, ldc, NULL, NULL);
}

int dr_gemm_acc_fast(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                     const float *A, size_t lda, const float *B, size_t ldb, dr_acc *Cacc)
{
    return dr_gemm_fast_path(DR_GEMM_PATH_AUTO, ta, tb, M, N, K, A, lda, B, ldb, NULL, NULL, 0, Cacc, NULL);
}

int dr_gemm_cacc_fast(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                      const float *A, size_t lda, const float *B, size_t ldb, dr_cacc *Cacc)
{
    return dr_gemm_fast_path(DR_GEMM_PATH_AUTO, ta, tb, M, N, K, A, lda, B, ldb, NULL, NULL, 0, NULL, Cacc);
}

void dr_gemm_f32_sgemm(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                       const float *A, size_t lda, const float *B, size_t ldb,
                       const float *bias, float *C, size_t ldc)
{
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) C[i * ldc + j] = bias ? bias[j] : 0.0f;
    if (M && N && K)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, 1.0f, C, (int)ldc);
}
