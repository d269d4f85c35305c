/* distref devices — the exact GEMM's certified path for rounded outputs
 * (dr_gemm_f32_fast, distref/fastgemm.h): one DGEMM and an error bound
 * that proves each output's rounding, the exact product only where it
 * cannot.
 *
 * A product of two floats is exact in double (48 bits of 53), so DGEMM's
 * d[i][j] = bias[j] + sum_k a_ik b_kj differs from the exact sum S only by
 * the rounding of its K additions, in whatever order OpenBLAS adds (with
 * FMA or not): |d - S| <= gamma_(K+1) (|bias| + sum_k |a_ik b_kj|), gamma_n
 * = n u / (1 - n u), u = 2^-53 (Higham, Accuracy and Stability of Numerical
 * Algorithms, 2nd ed., section 3.1). Cauchy-Schwarz bounds the sum of
 * magnitudes by |a_i| |b_j|, the vectors' 2-norms, which cost O((M + N) K)
 * instead of a second GEMM. The bound used is twice that, which covers the
 * rounding of the norms, the square roots and the products that form it.
 *
 * With f = RN_float(d): when d - e and d + e lie strictly inside f's
 * rounding interval (the midpoints between f and its neighbours, exact in
 * double), every value within e of d -- S among them -- rounds to f, so f is
 * the correctly rounded S: the exact GEMM's bits. Otherwise (near a
 * midpoint, f zero, whose sign the exact sum decides, f at the edge of the
 * float range, anything not finite) the element's sum is formed again,
 * compensated, with a bound about 2^-50 of |S| (refine), and what that
 * cannot decide either takes the plain exact path (dr_gemm_f32 on its row
 * and column): the same bits by construction. Random 256 x 784 x 128 data
 * leave 38 of 32768 elements to the second test and none to the exact
 * path (docs/PERFORMANCE.md).
 */
#include "devices/cpu/cpu_gemm_internal.h"
#include "distref/error.h"
#include "distref/exact_bins.h"
#include "distref/exact_parts.h"
#include "devices/seams.h"
#include "distref/wide.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* f = RN_float(d) when every value within e of d rounds to it; 0 otherwise.
 * The neighbours of |f| are its bit pattern -1 and +1 (integer steps, no
 * libm: this runs once an output). */
static int certain(double d, double e, float *out)
{
    float f = (float)d, m = fabsf(f), dn, up;
    uint32_t bits;
    double ad = fabs(d), slack = DR_SEAM_CERT_SLACK(e);
    if (!(slack < INFINITY) || !(m < FLT_MAX) || m == 0.0f) return 0;   /* also NaN d */
    memcpy(&bits, &m, sizeof bits);
    bits--; memcpy(&dn, &bits, sizeof dn);
    bits += 2; memcpy(&up, &bits, sizeof up);
    /* the midpoints between |f| and its neighbours: exact in double */
    if (!(ad - ((double)m + dn) * 0.5 > slack && ((double)m + up) * 0.5 - ad > slack)) return 0;
    *out = f;
    return 1;
}

/* The second chance of an element the first bound could not decide: its
 * sum again, compensated (Sum2 of Ogita, Rump and Oishi, "Accurate sum and
 * dot product", SIAM J. Sci. Comput. 26(6), 2005, with the products exact:
 * |r - S| <= u |S| + gamma_(n-1)^2 sum |p|, n = K + 1 terms with the bias),
 * which leaves undecided only values within about 2^-50 of a midpoint. */
static int refine(const double *a, size_t ka, const double *b, size_t kb, size_t K, double bias, float *out)
{
    double s = bias, c = 0.0, sa = fabs(bias), r, g = (double)(K + 2) * 0x1p-53;
    for (size_t k = 0; k < K; k++) {
        double p = a[k * ka] * b[k * kb], t = s + p, z = t - s;   /* TwoSum(s, p): t + (error) = s + p exactly */
        c += (s - (t - z)) + (p - z);
        s = t;
        sa += fabs(p);
    }
    r = s + c;
    return certain(r, 2.0 * (0x1p-53 * fabs(r) + g * g * sa), out);
}

/* Columns c0 .. c0 + n of a K x rows X (ld) as doubles in dst (K x rows,
 * X's own layout) and their 2-norms in nrm: each k reads n consecutive
 * floats and writes n consecutive doubles, n independent sums of squares,
 * each adding its k in order (the norms keep their bits), compiled per
 * vector width (DR_WIDE: `omp simd` does each lane's IEEE operations). */
#define WIDEN_COLS 64
DR_WIDE static void widen_cols(const float *X, size_t ld, size_t K, size_t rows, size_t c0, size_t n, double *dst,
                               double *nrm)
{
    double s[WIDEN_COLS] = { 0.0 };
    for (size_t k = 0; k < K; k++) {
        const float *x = X + k * ld;
        double *d = dst + k * rows;
        #pragma omp simd
        for (size_t q = 0; q < n; q++) {
            double v = x[DR_SEAM_WIDEN_TILE_COL(c0, q)];
            d[c0 + q] = v;
            s[q] += v * v;
        }
    }
    for (size_t q = 0; q < n; q++) nrm[c0 + q] = sqrt(s[q]);
}

/* X as doubles in dst, in X's own layout (rows x K when !t, K x rows when t:
 * the DGEMM takes the same transposition flag, so a transposed operand --
 * the forward's weights, every step -- is converted, not transposed:
 * widen_cols, WIDEN_COLS of X's columns a thread's call), and in nrm the
 * 2-norm of each row of op(X) (rows x K). X's leading dimension is ld;
 * dst's is K, or rows when t. Not transposed, a tile of WIDEN_TILE rows by
 * WIDEN_KB of their k at a time: the tile's 16 sums of squares are
 * independent chains instead of one row's K dependent additions, each
 * still adding its k in order. */
#define WIDEN_TILE 16
#define WIDEN_KB 8
static void widen(int t, size_t rows, size_t K, const float *X, size_t ld, double *dst, double *nrm)
{
    const size_t w = t ? WIDEN_COLS : WIDEN_TILE, tiles = (rows + w - 1) / w;
    #pragma omp parallel for schedule(static) if (rows * K >= (1u << 16))
    for (size_t b = 0; b < tiles; b++) {
        const size_t i0 = b * w, n = rows - i0 < w ? rows - i0 : w;
        double s[WIDEN_TILE] = { 0.0 };
        if (t) {
            widen_cols(X, ld, K, rows, i0, n, dst, nrm);
            continue;
        }
        for (size_t k0 = 0; k0 < K; k0 += WIDEN_KB) {
            const size_t k1 = K - k0 < WIDEN_KB ? K : k0 + WIDEN_KB;
            for (size_t q = 0; q < n; q++)
                for (size_t k = k0; k < k1; k++) {
                    double v = X[(i0 + q) * ld + k];
                    dst[(i0 + q) * K + k] = v;
                    s[q] += v * v;
                }
        }
        for (size_t q = 0; q < n; q++) nrm[i0 + q] = sqrt(s[q]);
    }
}

/* An output whose row of op(A) or column of op(B) is all zeros (a 2-norm
 * of 0: a nonzero float's square is above 2^-300, nonzero in double) while
 * the other side is finite: every product is a signed zero, so the exact
 * path gives the bias when it is finite and nonzero, else the zero the
 * signs decide: +0 when the bias is +0 or some product is not -0 (no bias
 * counts as -0). Decided here rather than by the exact path on that one
 * element (its row and column packed and freed): resnet_fashion_mnist's
 * stride-2 shortcuts leave 3/4 of their input pixels without a tap, the
 * stem's background patches are zeros (about 10^6 such outputs a step,
 * 2 x 10^6 in two steps). 0: not such an output, or a bias of inf or NaN. */
static int zero_side(double na, double nb, const float *a, size_t ia, const float *b, size_t ib, size_t K,
                     const float *bias, float *out)
{
    uint32_t bb = bias ? dr_f32_bits(*bias) : 0x80000000u, f;
    if (!((na == 0.0 && isfinite(nb)) || (nb == 0.0 && isfinite(na))) || dr_f32_is_special(bb)) return 0;
    if (bb & 0x7fffffffu) {
        *out = *bias;
        return 1;
    }
    f = DR_SEAM_CERT_ZERO_FLAGS(dr_zero_dot_flags(a, ia, b, ib, K));
    *out = bb == 0u || (f & DR_ACC_F_NOT_NEG0) ? 0.0f : -0.0f;
    return 1;
}

int dr_gemm_f32_certified(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                          const float *B, size_t ldb, const float *bias, float *C, size_t ldc)
{
    double *Ad = malloc(M * K * sizeof(double) + 8), *Bd = malloc(N * K * sizeof(double) + 8);
    double *D = malloc(M * N * sizeof(double) + 8), *na = malloc(M * sizeof(double) + 8);
    double *nb = malloc(N * sizeof(double) + 8);
    const double g = 2.0 * (double)(K + 2) * 0x1p-53;   /* twice gamma_(K+1), rounded up generously */
    if (!Ad || !Bd || !D || !na || !nb) {
        free(Ad); free(Bd); free(D); free(na); free(nb);
        return DR_ENOMEM;
    }
    /* Ad and Bd keep A's and B's layouts (widen): op(A)'s row i starts at
     * Ad + i as, its k a step ak apart; op(B)'s column j at Bd + j bs, step bk. */
    const size_t as = ta == DR_TRANS ? 1 : K, ak = ta == DR_TRANS ? M : 1;
    const size_t bs = tb == DR_TRANS ? K : 1, bk = tb == DR_TRANS ? 1 : N;
    widen(ta == DR_TRANS, M, K, A, lda, Ad, na);
    widen(tb != DR_TRANS, N, K, B, ldb, Bd, nb);
    cblas_dgemm(CblasRowMajor, ta == DR_TRANS ? CblasTrans : CblasNoTrans, tb == DR_TRANS ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, 1.0, Ad, ta == DR_TRANS ? (int)M : (int)K, Bd, tb == DR_TRANS ? (int)K : (int)N,
                0.0, D, (int)N);
    #pragma omp parallel for schedule(dynamic, 8)
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double b = bias ? (double)bias[j] : 0.0;
            double d = D[i * N + j] + b, e = g * (fabs(b) + na[i] * nb[j]);
            const float *ai = ta == DR_TRANS ? A + i : A + i * lda, *bj = tb == DR_TRANS ? B + j * ldb : B + j;
            if (certain(d, e, &C[i * ldc + j])
                || zero_side(na[i], nb[j], ai, ta == DR_TRANS ? lda : 1, bj, tb == DR_TRANS ? 1 : ldb, K,
                             bias ? bias + j : NULL, &C[i * ldc + j])
                || refine(Ad + i * as, DR_SEAM_REFINE_STEP(ak), Bd + j * bs, DR_SEAM_REFINE_STEP(bk), K, b,
                          &C[i * ldc + j]))
                continue;
            dr_gemm_f32(ta, tb, 1, 1, K, ai, lda, bj, ldb, bias ? bias + j : NULL, &C[i * ldc + j], 1);
        }
    free(Ad); free(Bd); free(D); free(na); free(nb);
    return DR_OK;
}
