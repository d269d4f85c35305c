/* distref devices — exact GEMM (see fastgemm.h for the scheme): the integer
 * products by DGEMM on slices (here) or by residues (cpu_gemm_crt.c), and
 * the per-element paths both share (the 128-bit direct path, remainders,
 * zeros, inf/NaN; the common f32 element in cpu_gemm_element.c), and the
 * choice between them. Checked bit for bit against
 * dr_gemm_f32 and dr_gemm_acc in tests/test_fastgemm.c, test_gemm_crt.c and
 * bench/bench_exact.c.
 */
#include "distref/fastgemm.h"
#include "distref/exact_parts.h"
#include "distref/cacc.h"
#include "distref/exact_bins.h"
#include "devices/cpu/cpu_gemm_internal.h"
#include "devices/seams.h"

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

/* ---- the four slice products and their exact combination ---------------- */


static void product_free(product *p)
{
    dr_sliced_free(&p->a);
    dr_sliced_free(&p->b);
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
    int w = crt ? dr_crt_width(K) : dr_slice_width(K);
    memset(p, 0, sizeof *p);
    if (dr_sliced_init(&p->a, A, ta ? 1 : lda, ta ? lda : 1, M, K, w, !crt) ||
        dr_sliced_init(&p->b, B, tb ? ldb : 1, tb ? 1 : ldb, N, K, w, !crt)) {
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
double dr_gemm_ll_value(const dr_product *p, size_t i, size_t j, size_t N)
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


/* Element k of vector v on its grid, a - r_a: the element itself where it
 * has no remainder, else its bits above the grid, trunc(a 2^-base) 2^base
 * (the division by the power of two 2^-base is exact), +0 when none are
 * left, as the float subtraction a - r_a gives. */
static inline float on_grid(const sliced *s, size_t v, size_t k)
{
    float x = elem(s, v, k);
    double t = (double)x * s->scale[v], g = trunc(t);
    if (g == t) return x;
    return g == 0.0 ? 0.0f : (float)(g / s->scale[v]);
}

/* The products that the remainders add to row i . column j beyond V, into
 * a full accumulator or a compact one (the other NULL): r_a * b for A's
 * remainders, (a - r_a) * r_b for B's (every product of two floats exact),
 * unless p->b_rems_added: then B's are in the caller's full accumulators
 * already (dr_gemm_b_remainders, cpu_gemm_rem.c). */
static void remainder_terms(const product *p, size_t i, size_t j, dr_acc *full, dr_cacc *compact)
{
    const sliced *a = &p->a, *b = &p->b;
    for (size_t r = a->rem_start[i]; r < a->rem_start[i + 1]; r++) {
        float x = a->rem_v[r], y = elem(b, j, a->rem_k[r]);
        if (full) dr_acc_add_prod(full, x, y);
        else dr_cacc_add_prod(compact, x, y);
    }
    if (full && p->b_rems_added) return;
    for (size_t r = b->rem_start[j]; r < b->rem_start[j + 1]; r++) {
        float ak = on_grid(a, i, b->rem_k[r]);
        if (DR_SEAM_REM_STOP(compact, r, b->rem_start[j + 1])) break;
        if (full) dr_acc_add_prod(full, ak, b->rem_v[r]);
        else dr_cacc_add_prod(compact, ak, b->rem_v[r]);
    }
}

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
        if (p->V[i * N + j] != 0) dr_gemm_add_wide(part, p->V[i * N + j], base);
    } else
#endif
    for (int q = 0; q < 4; q++) {
        double v = q == 3 ? dr_gemm_ll_value(p, i, j, N) : p->c[q][i * N + j];
        int shift = ((q & 2) ? 0 : w) + ((q & 1) ? 0 : w);
        if (v != 0.0) add_scaled(part, (int64_t)v, base + shift);
    }
    part->pending = 4;
    remainder_terms(p, i, j, part, NULL);
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
    if (DR_SEAM_ZERO_ROW_AS_POSITIVE) return DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
    if (sa == 3 && sb == 3)
        return dr_zero_dot_flags(p->a.base_ptr + i * p->a.inc_vec, p->a.inc_elem,
                                 p->b.base_ptr + j * p->b.inc_vec, p->b.inc_elem, p->a.K);
    return DR_ACC_F_NONEMPTY | ((sa & sb) ? DR_ACC_F_NOT_NEG0 : 0u);
}

#if defined(__SIZEOF_INT128__)
/* The direct path: a dot product without remainders is exactly
 * V * 2^(base_a + base_b), V = c0 2^2w + (c1 + c2) 2^w + c3 with |c| < 2^53 and
 * w <= 26, so |V| < 2^107: an __int128 holds it, and it goes into the
 * caller's accumulator as two int64 pieces, with no temporary accumulator,
 * no normalization and no merge. */

dr_i128 dr_gemm_slice_value(const dr_product *p, size_t i, size_t j, size_t N)
{
    int w = p->a.w;
    size_t ij = i * N + j;
    if (p->V) return p->V[ij];                     /* the CRT path's: |V| < K 2^4w < 2^107 */
    return (dr_i128)(int64_t)p->c[0][ij] * ((dr_i128)1 << (2 * w)) +
           ((dr_i128)(int64_t)p->c[1][ij] + (dr_i128)(int64_t)p->c[2][ij]) * ((dr_i128)1 << w) +
           (dr_i128)(int64_t)dr_gemm_ll_value(p, i, j, N);
}

/* The same without lo . lo, and a bound on what lo . lo can add. */
dr_i128 dr_gemm_slice_value_hi(const dr_product *p, size_t i, size_t j, size_t N, dr_i128 *bound)
{
    int w = p->a.w;
    size_t ij = i * N + j;
    int64_t unit = ((int64_t)1 << w) - 1;
    *bound = (dr_i128)p->a.K * unit * unit;        /* < 2^(L + 2w) <= 2^53 */
    return (dr_i128)(int64_t)p->c[0][ij] * ((dr_i128)1 << (2 * w)) +
           ((dr_i128)(int64_t)p->c[1][ij] + (dr_i128)(int64_t)p->c[2][ij]) * ((dr_i128)1 << w);
}

/* acc += V * 2^E exactly, V != 0, |V| < 2^125 (the products' V: 2^107).
 * E may lie below the accumulator's 2^-320: V * 2^E is a sum of float products, a multiple of
 * 2^-298, so the bits shifted out are zero (E >= -400: shift < 128). */
void dr_gemm_add_wide(dr_acc *acc, dr_i128 V, int E)
{
    int neg = V < 0;
    dr_u128 mag = neg ? (dr_u128)0 - (dr_u128)V : (dr_u128)V;
    uint64_t lo, hi;
    if (E < DR_ACC_LSB_EXP) {
        mag >>= DR_SEAM_WIDE_SHIFT(DR_ACC_LSB_EXP - E);
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
        dr_i128 v = dr_gemm_slice_value(p, i, j, N);
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
            dr_gemm_add_wide(acc, V, p->a.base[i] + p->b.base[j]);
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

#if defined(__SIZEOF_INT128__)
/* A CRT dot with remainders (no inf/NaN) as a compact sum of its own in
 * *c: V 2^E, the remainder products and (the f32 path) a finite bias, all
 * dr_cacc terms. true when the sum is nonzero (its flags are then
 * NONEMPTY | NOT_NEG0, as exact_dot's) and stayed in its window; false
 * when there is no V (the DGEMM path's slices), the sum is zero
 * (exact_dot decides its sign from the products) or it left the window:
 * the general path then. In training these are the rows and columns whose
 * elements span more than the grid, late in a run: delta columns of dW,
 * the logits' gradient rows of the delta GEMM (64 x 128 elements a step at
 * G=64), each a 168-byte dr_acc formed, normalized and converted before. */
static bool remainder_sum(const product *p, size_t i, size_t j, size_t N, const float *bias, dr_cacc *c)
{
    dr_i128 V;
    if (!p->V || p->a.special[i] || p->b.special[j] || (bias && dr_f32_is_special(dr_f32_bits(bias[j]))))
        return false;
    dr_cacc_init(c);
    if (bias) dr_cacc_add(c, bias[j]);
    V = p->V[i * N + j];
    if (V != 0) dr_cacc_add_scaled(c, (int64_t)(V >> 64), (uint64_t)V, p->a.base[i] + p->b.base[j]);
    remainder_terms(p, i, j, NULL, c);
    return !dr_cacc_overflowed(c) && (c->w[0] | c->w[1] | c->w[2]) != 0;
}
#endif

/* acc += row i . column j into a compact accumulator (distref/cacc.h): the
 * direct path's V * 2^E goes in as one 128-bit term, a CRT dot with
 * remainders as a compact sum of its own; otherwise (specials, the DGEMM
 * path, a zero sum) the dot is formed in a dr_acc first (the plain exact
 * path) and merged, exactly or as an overflow. Every term times 2^e2. */
static void dot_into_compact(const product *p, size_t i, size_t j, size_t N, dr_cacc *acc, dr_prod_bins *bins,
                             int e2)
{
    dr_acc part;
    dr_cacc c;
    if (!p->a.special[i] && !p->b.special[j]) {
#if defined(__SIZEOF_INT128__)
        dr_i128 V;
        int how = dot_direct(p, i, j, N, &acc->flags, &V);
        if (how == DOT_VALUE)
            dr_cacc_add_scaled(acc, (int64_t)(V >> 64), (uint64_t)V, p->a.base[i] + p->b.base[j] + e2);
        if (how == DOT_GENERAL && remainder_sum(p, i, j, N, NULL, &c)) {
            dr_cacc_mul_u32(&c, 1u << e2);
            dr_cacc_merge(acc, &c);
            return;
        }
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
    dr_cacc_mul_u32(&c, 1u << e2);
    dr_cacc_merge(acc, &c);
}

/* Columns j0 .. j0+8 of a row that the vector kernel left to the scalar
 * paths, a bit each: done[] (NULL: none done) has a bit per column. The
 * loops walk these bits, so a row done whole costs N/8 tests, not N
 * data-dependent branches. */
static inline unsigned columns_left(const uint8_t *done, size_t j0, size_t N)
{
    unsigned todo = (done ? ~(unsigned)done[j0 >> 3] : ~0u) & 0xffu;
    return N - j0 < 8 ? todo & ((1u << (N - j0)) - 1u) : todo;
}

/* Every element of the product into its accumulator (full or compact; a
 * compact one takes the product times 2^e2: the row kernel's exponent and
 * dot_into_compact's terms moved by e2; with beta 0 its old content is
 * never read: the row kernel writes the elements it forms whole, the
 * scalar paths start the rest from an empty accumulator, and no caller's
 * memset of the P accumulators comes first). */
static int gemm_into(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                     const float *B, size_t ldb, dr_acc *full, dr_cacc *compact, int crt, int e2, int beta)
{
    product p;
    uint8_t *done;
    int32_t *eb;
    int rc = product_init(&p, ta, tb, M, N, K, A, lda, B, ldb, 1, crt);
    if (rc) return rc;
    eb = compact ? dr_crt_vector_columns(&p, crt == 2, &done) : (done = NULL, NULL);
    if (full && p.b.nrem && (rc = dr_gemm_b_remainders(&p, N, full))) {
        free(eb);
        free(done);
        product_free(&p);
        return rc;
    }
    #pragma omp parallel
    {
        dr_prod_bins bins;
        dr_prod_bins_init(&bins);
        #pragma omp for schedule(static)
        for (size_t i = 0; i < M; i++) {
            const uint8_t *dn = NULL;
#if defined(__SIZEOF_INT128__)
            if (eb && dr_crt_row_clean(&p, i)) {
                dn = done + i * ((N + 7) / 8);
                dr_crt_cacc_row_avx512(p.V + i * N, N, p.a.base[i] + e2, eb, compact + i * N,
                                       done + i * ((N + 7) / 8), !beta);
            }
#endif
            for (size_t j0 = 0; j0 < N; j0 += 8)
            for (unsigned todo = columns_left(dn, j0, N); todo; todo &= todo - 1u) {
                const size_t j = j0 + (size_t)__builtin_ctz(todo);
                if (compact && DR_SEAM_FRESH_INIT(beta)) dr_cacc_init(&compact[i * N + j]);
                if (compact && K && (p.a.zero[i] || p.b.zero[j]) && !p.a.special[i] && !p.b.special[j])
                    compact[i * N + j].flags |= zero_product_flags(&p, i, j);   /* dot_direct's, inline */
                else if (compact) dot_into_compact(&p, i, j, N, &compact[i * N + j], &bins, e2);
                else dot_into(&p, i, j, N, &full[i * N + j], &bins);
            }
        }
    }
    free(eb);
    free(done);
    product_free(&p);
    return DR_OK;
}

/* bias + op(A) op(B) rounded once, element by element. */
static int gemm_f32(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                    const float *A, size_t lda, const float *B, size_t ldb,
                    const float *bias, float *C, size_t ldc, int crt)
{
    product p;
    size_t nb = (N + 7) / 8;
    int32_t *eb;
    uint8_t *done;
    int rc = product_init(&p, ta, tb, M, N, K, A, lda, B, ldb, 0, crt);
    if (rc) return rc;
    eb = dr_crt_vector_columns(&p, crt == 2, &done);
    #pragma omp parallel
    {
        dr_prod_bins bins;
        dr_prod_bins_init(&bins);
        #pragma omp for schedule(static)
        for (size_t i = 0; i < M; i++) {
            const uint8_t *dn = NULL;
#if defined(__SIZEOF_INT128__)
            if (eb && dr_crt_row_clean(&p, i)) {
                dr_crt_round_row_avx512(p.V + i * N, N, p.a.base[i], eb, bias, C + i * ldc, done + i * nb);
                dn = done + i * nb;
            }
#endif
            for (size_t j0 = 0; j0 < N; j0 += 8)
            for (unsigned todo = columns_left(dn, j0, N); todo; todo &= todo - 1u) {
                const size_t j = j0 + (size_t)__builtin_ctz(todo);
                dr_acc acc;
                if (!p.a.special[i] && !p.b.special[j] && dr_gemm_fast_element(&p, i, j, N, bias, &C[i * ldc + j]))
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
#if defined(__SIZEOF_INT128__)
                {
                    dr_cacc c;
                    if (remainder_sum(&p, i, j, N, bias, &c)) {   /* dr_acc_round's bits for the same sum */
                        C[i * ldc + j] = dr_cacc_round_div(&c, 1);
                        continue;
                    }
                }
#endif
                dr_acc_init(&acc);
                if (bias) dr_acc_add(&acc, bias[j]);
                dot_into(&p, i, j, N, &acc, &bins);
                C[i * ldc + j] = dr_acc_round(&acc);
            }
        }
    }
    free(eb);
    free(done);
    product_free(&p);
    return DR_OK;
}

/* 0: DGEMM; 1, 2: CRT (portable, VNNI kernel); -1: the forced path cannot run.
 * AUTO takes the VNNI kernel from M N K = 2^16 up: below, packing n moduli
 * costs more than the products (measured: 8^3 and 1 x 1000 x 1 slower by
 * residues, 64 x 128 x 10 faster; docs/history/PERFORMANCE.md). */
#define CRT_MIN_MNK 65536.0

static int path_code(dr_gemm_path path, size_t M, size_t N, size_t K)
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
    default: return crt_ok && (double)M * (double)N * (double)K >= CRT_MIN_MNK && dr_crt_have_vnni() ? 2 : 0;
    }
}

/* The certified path's range under AUTO: rounded outputs of a product big
 * enough that one DGEMM beats the residues' packing (the same 2^16 as the
 * CRT path), K >= 1 (K = 0 is the bias alone: the exact path's signed
 * zeros) and K < 2^24 (the bound's 2 (K + 2) 2^-53 stays far below 1). */
static int certified(dr_gemm_path path, size_t M, size_t N, size_t K)
{
    if (path == DR_GEMM_PATH_CERTIFIED) return K >= 1;
    return path == DR_GEMM_PATH_AUTO && K >= 1 && K < (1u << 24) && (double)M * (double)N * (double)K >= CRT_MIN_MNK;
}

int dr_gemm_fast_path(dr_gemm_path path, dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                      const float *A, size_t lda, const float *B, size_t ldb,
                      const float *bias, float *C, size_t ldc, dr_acc *full, dr_cacc *compact)
{
    int crt;
    if (C && certified(path, M, N, K)) return dr_gemm_f32_certified(ta, tb, M, N, K, A, lda, B, ldb, bias, C, ldc);
    if (path == DR_GEMM_PATH_CERTIFIED) path = DR_GEMM_PATH_AUTO;
    crt = path_code(path, M, N, K);
    if (crt < 0) return DR_EUNSUPPORTED;
    if (C) return gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, bias, C, ldc, crt);
    return gemm_into(ta, tb, M, N, K, A, lda, B, ldb, full, compact, crt, 0, 1);
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
                      const float *A, size_t lda, const float *B, size_t ldb, dr_cacc *Cacc, int e2, int beta)
{
    int crt = path_code(DR_GEMM_PATH_AUTO, M, N, K);   /* an accumulator output: never the certified path */
    if (e2 < 0 || e2 > 30 || (beta != 0 && beta != 1)) return DR_EUSAGE;
    if (crt < 0) return DR_EUNSUPPORTED;
    return gemm_into(ta, tb, M, N, K, A, lda, B, ldb, NULL, Cacc, crt, e2, beta);
}
