/* distref tests — the engine's exact GEMM (devices/cpu/cpu_gemm.c) must return
 * the reference's bits (numerics/gemm.c) for every input: random, wide
 * dynamic range inside a row (remainders below the slices), subnormals,
 * zeros of both signs, inf and NaN, every transpose, with and without bias,
 * K from 0 to 1000, near-ties hidden by cancellation. A wrong slice width, a
 * dropped remainder or a certified rounding without its bound fails here. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distref/exact.h"
#include "distref/fastgemm.h"
#include "distref/cacc.h"
#include "devices/cpu/cpu_gemm_internal.h"

/* Every way of forming the integer products (cpu_gemm_internal.h): the
 * public entry points (AUTO), DGEMM slices, residues with the plain C
 * kernel and with the VNNI kernel (skipped where the CPU lacks it), and the
 * certified DGEMM of rounded outputs (near-ties: same_bits_wide_ties), each
 * against the plain exact GEMM. */
static const dr_gemm_path paths[] = { DR_GEMM_PATH_AUTO, DR_GEMM_PATH_DGEMM, DR_GEMM_PATH_CRT_PORTABLE,
                                      DR_GEMM_PATH_CRT_VNNI, DR_GEMM_PATH_CERTIFIED };
#define NPATHS (sizeof paths / sizeof paths[0])

/* The forced path's results; 0 when it ran, 1 when it cannot run here. */
static int run_path(dr_gemm_path path, int ta, int tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                    const float *B, size_t ldb, const float *bias, float *C, size_t ldc, dr_acc *X, dr_cacc *Y)
{
    int rc;
    if (path == DR_GEMM_PATH_AUTO) {
        assert_int_equal(dr_gemm_f32_fast((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, bias, C, ldc), 0);
        assert_int_equal(dr_gemm_acc_fast((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, X), 0);
        assert_int_equal(dr_gemm_cacc_fast((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, Y, 0, 1), 0);
        {   /* times 2^e2 (a share's power of two, folded in): Y's words after dr_cacc_mul_u32, on every
             * path the elements take (the row kernel, remainders, specials, zeros) */
            dr_cacc *Y3 = calloc(M * N + 1, sizeof *Y3);
            assert_non_null(Y3);
            assert_int_equal(dr_gemm_cacc_fast((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, Y3, 3, 1), 0);
            for (int beta = 1; beta >= 0; beta--) {   /* beta 0: over garbage, never read */
                if (!beta) {
                    memset(Y3, 0xa5, M * N * sizeof *Y3);
                    assert_int_equal(dr_gemm_cacc_fast((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, Y3, 3,
                                                       0), 0);
                }
                for (size_t i = 0; i < M * N; i++) {
                    dr_cacc y = Y[i];
                    dr_cacc_mul_u32(&y, 8);
                    assert_memory_equal(&y, &Y3[i], sizeof y);
                }
            }
            assert_int_equal(dr_gemm_cacc_fast((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, Y3, 31, 1),
                             DR_EUSAGE);
            free(Y3);
        }
        return 0;
    }
    rc = dr_gemm_fast_path(path, (dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, bias, C, ldc, NULL, NULL);
    if (rc == DR_EUNSUPPORTED) {   /* no VNNI here, or K outside the CRT path's range */
        assert_true(path == DR_GEMM_PATH_CRT_VNNI || dr_crt_width(K) == 0);
        return 1;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(dr_gemm_fast_path(path, (dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, NULL, NULL, 0,
                                       X, NULL), 0);
    assert_int_equal(dr_gemm_fast_path(path, (dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, NULL, NULL, 0,
                                       NULL, Y), 0);
    return 0;
}

typedef struct { uint64_t s; } trng;

static uint64_t next_u64(trng *r)
{
    r->s ^= r->s >> 12; r->s ^= r->s << 25; r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}

static float value(trng *r, int mode)
{
    uint64_t u = next_u64(r);
    double x = (double)(u >> 11) * 0x1p-53 * 2.0 - 1.0;
    switch (mode) {
    case 0: case 5: return (float)x;                                   /* one binade-ish */
    case 1: return (float)ldexp(x, (int)(next_u64(r) % 60) - 30);      /* wide range: remainders */
    case 4: return 0.5f + (float)(u >> 40) * 0x1p-25f;                /* positive, full mantissas: */
                                                                       /* DGEMM sums near 2^53 */
    case 2: return (u & 7) == 0 ? ((u & 8) ? -0.0f : 0.0f) : (float)ldexp(x, -140);  /* subnormals, zeros */
    default: {                                                         /* anything finite, some specials */
        uint32_t b = (uint32_t)u;
        if ((u >> 40) % 97 == 0) return (u >> 50) & 1 ? INFINITY : NAN;
        if ((b & 0x7f800000u) == 0x7f800000u) b &= 0xbfffffffu;
        memcpy(&x, &(float){0}, 0);
        { float f; memcpy(&f, &b, 4); return f; }
    }
    }
}

/* Whole rows of op(A) and columns of op(B) rewritten with one pattern each:
 * the direct paths' edges (all +0, all -0, zeros of mixed signs, exact
 * cancellation, exponent extremes, subnormals only, one inf or NaN). */
static float pattern(trng *r, int kind, size_t k)
{
    uint64_t u = next_u64(r);
    float x = (float)((double)(u >> 40) * 0x1p-24) + 0.25f;
    switch (kind) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return (u & 1) ? -0.0f : 0.0f;
    case 3: return (k & 1) ? -ldexpf(1.0f, (int)(k / 2 % 5)) : ldexpf(1.0f, (int)(k / 2 % 5));  /* pairs cancel */
    case 4: return ldexpf((u & 1) ? -x : x, 100);                     /* products near 2^200: inf when rounded */
    case 5: return ldexpf((u & 1) ? -x : x, -148);                    /* subnormal: products below 2^-320 */
    case 6: return (u & 1) ? -0x1p-149f : 0x1p-149f;                  /* the smallest subnormal */
    case 7: return ldexpf((u & 1) ? -x : x, (int)(u >> 58) - 40);     /* wide: remainders */
    case 8: return k == 0 ? ((u & 1) ? INFINITY : NAN) : x;
    default: return (u & 1) ? -x : x;
    }
}

static void apply_patterns(trng *r, float *A, size_t M, size_t K, size_t lda, int ta, int rows)
{
    for (size_t i = 0; i < M; i++) {
        int kind = (int)(next_u64(r) % 12);
        if (kind > 8) continue;
        for (size_t k = 0; k < K; k++) {
            float v = pattern(r, kind, k);
            if (rows) A[ta ? k * lda + i : i * lda + k] = v;   /* op(A)[i][k] */
            else A[ta ? i * lda + k : k * lda + i] = v;        /* op(B)[k][i] */
        }
    }
}

static void compare(int mode, int trials, size_t kmax)
{
    trng r = { 0x1234567ull + (uint64_t)mode };
    for (int t = 0; t < trials; t++) {
        int ta = t & 1, tb = (t >> 1) & 1, bias_on = (t >> 2) & 1;
        size_t M = 1 + next_u64(&r) % 7, N = 1 + next_u64(&r) % 7, K = next_u64(&r) % (kmax + 1);
        size_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N;
        float *A = calloc((ta ? K : M) * lda + 1, 4), *B = calloc((tb ? N : K) * ldb + 1, 4);
        float *C1 = calloc(M * N, 4), *C2 = calloc(M * N, 4), bias[8];
        dr_acc *X1 = calloc(M * N, sizeof(dr_acc)), *X2 = calloc(M * N, sizeof(dr_acc));
        dr_cacc *X3 = calloc(M * N, sizeof(dr_cacc));
        for (size_t i = 0; i < (ta ? K : M) * lda; i++) A[i] = value(&r, mode);
        for (size_t i = 0; i < (tb ? N : K) * ldb; i++) B[i] = value(&r, mode);
        for (size_t j = 0; j < N; j++) bias[j] = value(&r, mode == 3 ? 1 : mode);
        if (mode == 5) {
            apply_patterns(&r, A, M, K, lda, ta, 1);
            apply_patterns(&r, B, N, K, ldb, tb, 0);
            for (size_t j = 0; j < N; j++) {
                uint64_t u = next_u64(&r) % 6;
                bias[j] = u == 0 ? 0.0f : u == 1 ? -0.0f : u == 2 ? 0x1p-149f : u == 3 ? NAN : bias[j];
            }
        }
        dr_gemm_f32((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, bias_on ? bias : NULL, C1, ldc);
        dr_gemm_acc((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, X1);
        for (size_t q = 0; q < NPATHS; q++) {
            memset(X2, 0, M * N * sizeof(dr_acc));
            memset(X3, 0, M * N * sizeof(dr_cacc));
            if (run_path(paths[q], ta, tb, M, N, K, A, lda, B, ldb, bias_on ? bias : NULL, C2, ldc, X2, X3)) continue;
            for (size_t i = 0; i < M * N; i++) {   /* compact: the same value, or flagged (never wrong) */
                dr_acc back;
                if (dr_cacc_overflowed(&X3[i])) {
                    if (mode == 0 || mode == 4) fail_msg("mode %d trial %d: element %zu overflowed", mode, t, i);
                    continue;
                }
                assert_true(dr_cacc_to_acc(&back, &X3[i]));
                assert_true(dr_acc_equal(&back, &X1[i]));
                for (uint32_t d = 1; d <= 7; d += 2) {
                    float u = dr_cacc_round_div(&X3[i], d), v = dr_acc_round_div(&X1[i], d);
                    assert_true(memcmp(&u, &v, 4) == 0 || (isnan(u) && isnan(v)));
                }
            }
            for (size_t i = 0; i < M * N; i++) {
                uint32_t a, b;
                memcpy(&a, &C1[i], 4); memcpy(&b, &C2[i], 4);
                if (!(isnan(C1[i]) && isnan(C2[i])) && a != b) {
                    print_error("path %d mode %d trial %d K=%zu element %zu: ref 0x%08x, fast 0x%08x\n",
                                (int)paths[q], mode, t, K, i, a, b);
                    fail();
                }
                if (!dr_acc_equal(&X1[i], &X2[i])) {
                    print_error("path %d mode %d trial %d K=%zu element %zu: accumulators differ\n",
                                (int)paths[q], mode, t, K, i);
                    fail();
                }
            }
        }
        free(A); free(B); free(C1); free(C2); free(X1); free(X2); free(X3);
    }
}

/* B's remainders summed in bands of 31 binades as __int128s
 * (cpu_gemm_rem.c) at the edges of its bound: columns with one element at
 * 2^100 and the rest full 24-bit mantissas spread over every binade down
 * to subnormals (all nine bands, their boundaries), rows of full mantissas
 * (integers near 2^2w on the grid) with a few remainders of their own at
 * the same k, K up to the CRT path's 65,536; every path's accumulators
 * against the plain exact GEMM's. */
static void same_bits_remainder_bands(void **s)
{
    static const size_t Ks[] = { 97, 4096, 65536 };
    trng r = { 0x5eedull };
    (void)s;
    for (size_t t = 0; t < 2 * sizeof Ks / sizeof Ks[0]; t++) {
        const size_t M = 5, N = 3, K = Ks[t / 2];
        const int ta = (int)(t & 1), tb = (int)(t & 1);
        const size_t lda = ta ? M : K, ldb = tb ? K : N;
        float *A = malloc(M * K * 4), *B = malloc(N * K * 4), C[M * N];
        dr_acc X1[M * N], X2[M * N];
        dr_cacc X3[M * N];
        for (size_t k = 0; k < K; k++) {
            for (size_t i = 0; i < M; i++) {
                uint64_t u = next_u64(&r);
                float x = ldexpf((float)((u >> 40) | 0x800000u), -23);   /* [1, 2), a full mantissa */
                if (k % 7 == 3) x = ldexpf(x, -20 - (int)(u % 40));      /* A's own remainders */
                A[ta ? k * lda + i : i * lda + k] = (u & 1) ? -x : x;
            }
            for (size_t j = 0; j < N; j++) {
                uint64_t u = next_u64(&r);
                int e = k == 0 ? 100 : -149 + (int)((k * 31 + j) % 237);   /* every binade, band edges included */
                float y = ldexpf((float)((u >> 40) | 0x800000u), e - 23);
                B[tb ? j * ldb + k : k * ldb + j] = (u & 1) ? -y : y;
            }
        }
        memset(X1, 0, sizeof X1);
        dr_gemm_acc((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, X1);
        for (size_t q = 0; q < NPATHS; q++) {
            memset(X2, 0, sizeof X2);
            memset(X3, 0, sizeof X3);
            if (run_path(paths[q], ta, tb, M, N, K, A, lda, B, ldb, NULL, C, N, X2, X3)) continue;
            for (size_t i = 0; i < M * N; i++)
                if (!dr_acc_equal(&X1[i], &X2[i])) {
                    print_error("path %d K=%zu ta=%d element %zu: accumulators differ\n", (int)paths[q], K, ta, i);
                    fail();
                }
        }
        free(A); free(B);
    }
}

static void same_bits_random(void **s) { (void)s; compare(0, 200, 1000); }
static void same_bits_wide_range(void **s) { (void)s; compare(1, 200, 300); }
static void same_bits_subnormal_zero(void **s) { (void)s; compare(2, 200, 300); }
static void same_bits_anything(void **s) { (void)s; compare(3, 200, 100); }
/* A slice one bit too wide lets DGEMM round here; this must catch it. */
static void same_bits_sums_near_2_53(void **s) { (void)s; compare(4, 40, 1024); }

/* Rows and columns of one pattern each: all +0, all -0, mixed zeros (the
 * sign of an all-zero product row), exact cancellation, products near 2^200
 * and below 2^-320 (the direct path's shift), subnormals, inf and NaN. */
static void same_bits_patterned_rows(void **s) { (void)s; compare(5, 600, 40); }

/* The direct f32 path rounds an __int128 V * 2^E: ties decided by bits far
 * below the top 64 (1 + 2^-24 + 2^-k rounds up, 1 + 2^-24 alone to even),
 * negative ties, and a bias above, at and below the products' unit. */
static void same_bits_wide_ties(void **s)
{
    (void)s;
    for (int k = 25; k <= 90; k++) {
        for (int sg = 0; sg < 2; sg++) {
            for (int bk = 0; bk < 6; bk++) {
                float sign = sg ? -1.0f : 1.0f;
                float A[3] = { sign, sign * 0x1p-24f, sign * ldexpf(1.0f, -k / 2) };
                float B[3] = { 1.0f, 1.0f, ldexpf(1.0f, -(k - k / 2)) };
                float bias[1], C1[1], C2[1];
                static const float biases[6] = { 0.0f, 0x1p-30f, -0x1p-60f, 0x1p-80f, 0x1p-149f, 3.0f };
                uint32_t u1, u2;
                bias[0] = biases[bk];
                if (k % 3 == 0) A[2] = 0.0f;   /* the tie itself: to even */
                dr_gemm_f32(DR_NO_TRANS, DR_NO_TRANS, 1, 1, 3, A, 3, B, 1, bk ? bias : NULL, C1, 1);
                for (size_t q = 1; q < NPATHS; q++) {
                    int rc = dr_gemm_fast_path(paths[q], DR_NO_TRANS, DR_NO_TRANS, 1, 1, 3, A, 3, B, 1,
                                               bk ? bias : NULL, C2, 1, NULL, NULL);
                    if (rc == DR_EUNSUPPORTED) continue;
                    assert_int_equal(rc, 0);
                    memcpy(&u1, C1, 4); memcpy(&u2, C2, 4);
                    if (u1 != u2) {
                        print_error("path %d k=%d sign=%d bias %d: ref 0x%08x, fast 0x%08x\n", (int)paths[q], k, sg,
                                    bk, u1, u2);
                        fail();
                    }
                }
            }
        }
    }
}

/* Cancellation hides a near-tie from a double sum: 2^30 + 1 + t - 2^30 in
 * that order is 1 in double when t < 2^-23, while the exact value rounds
 * above 1 once t passes 2^-24. The certified path must not trust DGEMM's
 * 1 (its bound is ~2^-18 here), and must find the right float through its
 * second, compensated sum. A 3 x 4 by 4 x 3 product in each of the four
 * layouts, element (i, j) the near-tie times a sign per row and 2^j per
 * column: the second sum walks op(A)'s rows and op(B)'s columns in the
 * layouts the certified path keeps (a wrong step sums other elements). */
static void same_bits_cancelled_near_tie(void **s)
{
    enum { M = 3, N = 3, K = 4 };
    (void)s;
    for (int q = 25; q <= 60; q++)
        for (int lay = 0; lay < 4; lay++) {
            const int ta = lay & 1, tb = lay >> 1;
            const size_t lda = ta ? M : K, ldb = tb ? K : N;
            float t = 0x1p-24f + ldexpf(1.0f, -q);
            float pa[K] = { 0x1p15f, 1.0f, t, -0x1p15f }, pb[K] = { 0x1p15f, 1.0f, 1.0f, 0x1p15f };
            float A[M * K], B[K * N], C1[M * N], C2[M * N];
            if (q > 47) pa[2] = 0x1p-24f;   /* the tie itself (t not a float past 2^-47): to even */
            for (size_t i = 0; i < M; i++)
                for (size_t k = 0; k < K; k++) A[ta ? k * lda + i : i * lda + k] = (i == 1 ? -1.0f : 1.0f) * pa[k];
            for (size_t k = 0; k < K; k++)
                for (size_t j = 0; j < N; j++) B[tb ? j * ldb + k : k * ldb + j] = ldexpf(pb[k], (int)j);
            dr_gemm_f32((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, NULL, C1, N);
            for (size_t p = 1; p < NPATHS; p++) {
                int rc = dr_gemm_fast_path(paths[p], (dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, NULL, C2,
                                           N, NULL, NULL);
                if (rc == DR_EUNSUPPORTED) continue;
                assert_int_equal(rc, 0);
                if (memcmp(C1, C2, sizeof C1) != 0) {
                    print_error("path %d q=%d ta=%d tb=%d: the certified bits differ\n", (int)paths[p], q, ta, tb);
                    fail();
                }
            }
        }
}

/* The MLP's shapes, forward and gradient, as the engine calls them. */
static void same_bits_mlp_shapes(void **s)
{
    trng r = { 99 };
    size_t B = 64, I = 784, O = 128;
    float *x = malloc(B * I * 4), *w = malloc(I * O * 4), *y1 = malloc(B * O * 4), *y2 = malloc(B * O * 4);
    dr_acc *g1 = calloc(I * O, sizeof(dr_acc)), *g2 = calloc(I * O, sizeof(dr_acc));
    (void)s;
    for (size_t i = 0; i < B * I; i++) x[i] = (next_u64(&r) & 3) ? (float)(next_u64(&r) % 256) / 255.0f : 0.0f;
    for (size_t i = 0; i < I * O; i++) w[i] = value(&r, 0) * 0.08f;
    dr_gemm_f32(DR_NO_TRANS, DR_NO_TRANS, B, O, I, x, I, w, O, NULL, y1, O);
    assert_int_equal(dr_gemm_f32_fast(DR_NO_TRANS, DR_NO_TRANS, B, O, I, x, I, w, O, NULL, y2, O), 0);
    assert_memory_equal(y1, y2, B * O * 4);
    dr_gemm_acc(DR_TRANS, DR_NO_TRANS, I, O, B, x, I, y1, O, g1);
    assert_int_equal(dr_gemm_acc_fast(DR_TRANS, DR_NO_TRANS, I, O, B, x, I, y1, O, g2), 0);
    for (size_t i = 0; i < I * O; i++) assert_true(dr_acc_equal(&g1[i], &g2[i]));
    {   /* the compact gradient times 2 (two workers' share, folded in; the row kernel's path), over
         * garbage (beta 0) */
        dr_cacc *c1 = calloc(I * O, sizeof(dr_cacc)), *c2 = calloc(I * O, sizeof(dr_cacc));
        assert_true(c1 && c2);
        assert_int_equal(dr_gemm_cacc_fast(DR_TRANS, DR_NO_TRANS, I, O, B, x, I, y1, O, c1, 0, 1), 0);
        memset(c2, 0xa5, I * O * sizeof(dr_cacc));   /* beta 0: never read */
        assert_int_equal(dr_gemm_cacc_fast(DR_TRANS, DR_NO_TRANS, I, O, B, x, I, y1, O, c2, 1, 0), 0);
        for (size_t i = 0; i < I * O; i++) dr_cacc_mul_u32(&c1[i], 2);
        assert_memory_equal(c1, c2, I * O * sizeof(dr_cacc));
        free(c1); free(c2);
    }
    free(x); free(w); free(y1); free(y2); free(g1); free(g2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_bits_random),
        cmocka_unit_test(same_bits_wide_range),
        cmocka_unit_test(same_bits_subnormal_zero),
        cmocka_unit_test(same_bits_remainder_bands),
        cmocka_unit_test(same_bits_anything),
        cmocka_unit_test(same_bits_sums_near_2_53),
        cmocka_unit_test(same_bits_patterned_rows),
        cmocka_unit_test(same_bits_wide_ties),
        cmocka_unit_test(same_bits_cancelled_near_tie),
        cmocka_unit_test(same_bits_mlp_shapes),
    };
    return cmocka_run_group_tests_name("fastgemm", tests, NULL, NULL);
}
