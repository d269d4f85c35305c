/* distref tests — the exact GEMM by residues (devices/cpu/cpu_gemm_crt.c, the
 * int8 kernels in cpu_gemm_vnni.c and cpu_gemm_crt.c) must give the plain
 * exact GEMM's bits (core/gemm.c) on the cases that break residue schemes:
 * too few moduli for K (sums near the bound), elements exactly at and one
 * bit below a vector's grid (remainders), the kernel's K tail (K not a
 * multiple of 4), rows and columns not multiples of its 8 x 32 blocking,
 * transposed operands, exponent extremes, subnormals, zeros and inf/NaN.
 * Both kernels are run on every case: the plain C one directly through the
 * internal header, so it is tested on a VNNI machine too. The generic
 * random/special cases run over every path in test_fastgemm.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distref/exact.h"
#include "distref/cacc.h"
#include "distref/error.h"
#include "devices/cpu/cpu_gemm_internal.h"

typedef struct { uint64_t s; } trng;

static uint64_t next_u64(trng *r)
{
    r->s ^= r->s >> 12; r->s ^= r->s << 25; r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}

static const dr_gemm_path crt_paths[] = { DR_GEMM_PATH_CRT_PORTABLE, DR_GEMM_PATH_CRT_VNNI };

/* op(A) op(B) by both CRT paths against dr_gemm_f32 (with and without a
 * bias) and dr_gemm_acc, and the compact form against the full one. */
static void check_all(const char *what, int ta, int tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                      const float *B, size_t ldb, const float *bias)
{
    float *C1 = calloc(M * N + 1, 4), *C2 = calloc(M * N + 1, 4);
    dr_acc *X1 = calloc(M * N + 1, sizeof(dr_acc)), *X2 = calloc(M * N + 1, sizeof(dr_acc));
    dr_cacc *Y = calloc(M * N + 1, sizeof(dr_cacc));
    assert_non_null(C1); assert_non_null(C2); assert_non_null(X1); assert_non_null(X2); assert_non_null(Y);
    dr_gemm_acc((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, X1);
    for (size_t q = 0; q < 2; q++) {
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *bb = with_bias ? bias : NULL;
            int rc = dr_gemm_fast_path(crt_paths[q], (dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, bb, C2, N,
                                       NULL, NULL);
            if (rc == DR_EUNSUPPORTED && crt_paths[q] == DR_GEMM_PATH_CRT_VNNI) goto next_path;
            assert_int_equal(rc, 0);
            dr_gemm_f32((dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, bb, C1, N);
            for (size_t i = 0; i < M * N; i++) {
                uint32_t u, v;
                memcpy(&u, &C1[i], 4); memcpy(&v, &C2[i], 4);
                if (u != v && !(isnan(C1[i]) && isnan(C2[i]))) {
                    print_error("%s: path %d bias %d K=%zu element %zu: ref 0x%08x, crt 0x%08x\n", what,
                                (int)crt_paths[q], with_bias, K, i, u, v);
                    fail();
                }
            }
        }
        memset(X2, 0, M * N * sizeof(dr_acc));
        memset(Y, 0, M * N * sizeof(dr_cacc));
        assert_int_equal(dr_gemm_fast_path(crt_paths[q], (dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, NULL,
                                           NULL, 0, X2, NULL), 0);
        assert_int_equal(dr_gemm_fast_path(crt_paths[q], (dr_trans)ta, (dr_trans)tb, M, N, K, A, lda, B, ldb, NULL,
                                           NULL, 0, NULL, Y), 0);
        for (size_t i = 0; i < M * N; i++) {
            dr_acc back;
            if (!dr_acc_equal(&X1[i], &X2[i])) {
                print_error("%s: path %d K=%zu element %zu: accumulators differ\n", what, (int)crt_paths[q], K, i);
                fail();
            }
            if (dr_cacc_overflowed(&Y[i])) continue;   /* never wrong, only flagged */
            assert_true(dr_cacc_to_acc(&back, &Y[i]));
            assert_true(dr_acc_equal(&back, &X1[i]));
        }
    next_path:;
    }
    free(C1); free(C2); free(X1); free(X2); free(Y);
}

/* Pairwise coprime, and their product covers 2 K (2^2w - 1)^2 for every K
 * the path takes: one modulus too few lets V wrap. */
static void moduli_cover_the_bound(void **s)
{
    static const size_t Ks[] = { 1, 2, 3, 4, 5, 8, 9, 63, 64, 65, 127, 128, 129, 783, 784, 785, 1024, 1025,
                                 4096, 4097, 32768, 65535, 65536 };
    (void)s;
    for (int a = 0; a < DR_CRT_MAX_MODULI; a++) {
        int x = dr_crt_modulus(a);
        assert_true(x >= 2 && x <= 256);
        for (int b = a + 1; b < DR_CRT_MAX_MODULI; b++) {
            int u = x, v = dr_crt_modulus(b);
            while (v) { int t = u % v; u = v; v = t; }
            assert_int_equal(u, 1);
        }
    }
    assert_int_equal(dr_crt_width(0), 0);
    assert_int_equal(dr_crt_width(DR_CRT_K_MAX + 1), 0);
#if defined(__SIZEOF_INT128__)
    for (size_t i = 0; i < sizeof Ks / sizeof Ks[0]; i++) {
        size_t K = Ks[i];
        int w = dr_crt_width(K), n = dr_crt_moduli(K, w);
        dr_u128 g, bound, P = 1;
        assert_true(w >= 8 && 4 * w + 17 <= 107);
        assert_true(n >= 1 && n <= DR_CRT_MAX_MODULI);
        g = ((dr_u128)1 << (2 * w)) - 1u;
        bound = (dr_u128)K * g * g;
        for (int t = 0; t < n; t++) P *= (unsigned)dr_crt_modulus(t);
        if (!(P / 2 > bound)) {
            print_error("K=%zu w=%d: %d moduli do not cover 2 K (2^2w - 1)^2\n", K, w, n);
            fail();
        }
    }
#endif
}

/* Both kernels against sums formed here from the unpacked operands: K from
 * 1 to 41 (every K tail), rows 1 to 19 and 16 to 80 columns (every blocking
 * tail), random bytes and the extremes 255 x -128 (int32 sums near -2^31 at
 * K = 65536). */
static void kernels_agree_with_plain_sums(void **s)
{
    trng r = { 77 };
    (void)s;
    for (int trial = 0; trial < 300; trial++) {
        size_t K = trial < 299 ? 1 + next_u64(&r) % 41 : 65536, M = 1 + next_u64(&r) % 19;
        size_t Np = trial < 299 ? 16 * (1 + next_u64(&r) % 5) : 32, G = (K + 3) / 4, lda = 4 * G + 4 * (trial & 1);
        int extreme = trial % 7 == 0 || trial == 299;
        uint8_t *A = calloc(M * lda, 1), *Au = malloc(M * K);
        int8_t *B = calloc(Np * G * 4, 1), *Bu = malloc(K * Np);
        int32_t *C1 = malloc(M * Np * 4), *C2 = malloc(M * Np * 4);
        assert_true(A && Au && B && Bu && C1 && C2);
        for (size_t i = 0; i < M; i++)
            for (size_t k = 0; k < K; k++) A[i * lda + k] = Au[i * K + k] = extreme ? 255 : (uint8_t)next_u64(&r);
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < Np; j++) {
                int8_t v = extreme ? -128 : (int8_t)(uint8_t)next_u64(&r);
                Bu[k * Np + j] = v;
                B[(j / 16) * G * 64 + (k / 4) * 64 + (j % 16) * 4 + k % 4] = v;
            }
        dr_crt_kernel_portable(A, lda, B, M, Np, K, C1, Np);
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < Np; j++) {
                int64_t sum = 0;
                for (size_t k = 0; k < K; k++) sum += (int64_t)Au[i * K + k] * Bu[k * Np + j];
                assert_true(sum == C1[i * Np + j]);
            }
        if (dr_crt_have_vnni()) {
            dr_crt_kernel_vnni(A, lda, B, M, Np, K, C2, Np);
            for (size_t i = 0; i < M * Np; i++)
                if (C1[i] != C2[i]) {
                    print_error("K=%zu M=%zu Np=%zu element %zu: portable %d, vnni %d\n", K, M, Np, i, C1[i], C2[i]);
                    fail();
                }
        }
        free(A); free(Au); free(B); free(Bu); free(C1); free(C2);
    }
    if (!dr_crt_have_vnni()) print_message("(no avx512vnni here: the VNNI kernel was not run)\n");
}

/* A 24-bit mantissa, odd (its last bit set), at top exponent e. */
static float full(trng *r, int e)
{
    uint32_t m = (uint32_t)(next_u64(r) >> 40) | 0x800001u;
    return (next_u64(r) & 1 ? -1.0f : 1.0f) * ldexpf((float)m, e - 23);
}

/* K at every step of the moduli count and the grid width, every element a
 * full mantissa at its vector's top but one at the grid's last bit (so the
 * grid is the full 2w bits, not a narrow vector's: the test above): |V|
 * near K 2^4w, the bound the moduli must cover; the same signs in row 0 and
 * column 0 (no cancellation). */
static void sums_near_the_bound(void **s)
{
    static const size_t Ks[] = { 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 63, 64, 65, 127, 128, 129, 255, 256, 257, 783, 784,
                                 785, 1023, 1024, 1025, 2049, 4097 };
    trng r = { 5 };
    (void)s;
    for (size_t t = 0; t < sizeof Ks / sizeof Ks[0]; t++) {
        size_t K = Ks[t], M = 3, N = 17;
        float *A = malloc(M * K * 4), *B = malloc(K * N * 4), bias[17];
        for (size_t i = 0; i < M * K; i++) A[i] = full(&r, (int)(next_u64(&r) % 3) * 40 - 40);
        for (size_t i = 0; i < K * N; i++) B[i] = full(&r, 0);
        for (size_t j = 0; K > 1 && j < N; j++) B[(K - 1) * N + j] = full(&r, 24 - 2 * dr_crt_width(K));
        for (size_t k = 0; k < K; k++) { A[k] = fabsf(A[k]); B[k * N] = fabsf(B[k * N]); }
        for (size_t k = 0; k < K; k++) A[2 * K + k] = ldexpf((float)0xffffffu, -23);   /* the largest mantissa */
        for (size_t j = 0; j < N; j++) bias[j] = full(&r, (int)(j % 5) * 10 - 20);
        check_all("near the bound", 0, 0, M, N, K, A, K, B, N, bias);
        free(A); free(B);
    }
}

/* A vector whose elements span few binades sits on a grid that starts at
 * their lowest bit (dr_sliced_init): integers of 24 + s bits for a span of
 * s binades, fewer than 2w, so fewer moduli (dr_crt_moduli_bits). Sums at
 * that bound: K - 1 elements the largest mantissa at the top binade, one a
 * full mantissa s binades lower, in both vectors, for the K and s where
 * one bit less on each side would have taken one modulus fewer. The search
 * checks its own power: in some of those cases |V| is past the half
 * product of one modulus fewer (it would wrap there). */
static void narrow_vectors_at_their_bound(void **s)
{
    trng r = { 19 };
    int cases = 0, would_wrap = 0;
    (void)s;
    for (size_t K = 2; K <= 4096; K = K + 1 + K / 3)
        for (int sp = 0; sp <= 2 * dr_crt_width(K) - 24; sp += 3) {
            int b = 24 + sp, n = dr_crt_moduli_bits(K, b, b), top = (int)(next_u64(&r) % 60) - 30;
            size_t M = 2, N = 3, low = next_u64(&r) % K;
            float *A, *B, bias[3] = { 0.0f, 1.0f, -0.5f };
            dr_u128 V, P = 1;
            if (n == dr_crt_moduli_bits(K, b - 1, b - 1)) continue;
            A = malloc(M * K * 4); B = malloc(K * N * 4);
            assert_non_null(A); assert_non_null(B);
            for (size_t k = 0; k < K; k++) {
                float big = ldexpf((float)0xffffffu, top - 23), small = fabsf(full(&r, top - sp));
                A[k] = k == low ? small : big;                 /* row 0: every sign +, the largest sum */
                A[K + k] = (k & 1 ? -1.0f : 1.0f) * A[k];      /* row 1: signs alternating */
                for (size_t j = 0; j < N; j++) B[k * N + j] = k == (low + j) % K ? fabsf(full(&r, -sp)) : ldexpf((float)0xffffffu, -23);
            }
            check_all("narrow at their bound", 0, 0, M, N, K, A, K, B, N, bias);
            /* |V| of row 0 and column 0 on the grids, against one modulus fewer */
            V = (dr_u128)(K - 2) * 0xffffffu * 0xffffffu << (2 * sp);
            for (int t = 0; t < n - 1; t++) P *= (unsigned)dr_crt_modulus(t);
            would_wrap += V >= P / 2;
            cases++;
            free(A); free(B);
        }
    assert_true(cases >= 8);
    assert_true(would_wrap >= 1);
}

/* Dots with remainders summed in a dr_cacc of their own (remainder_sum in
 * cpu_gemm.c), at that path's edges: a sum that cancels to exactly zero
 * (the general path then decides the sign), products 150 to 200 binades
 * apart (inside the 189-bit window, and past it: the general path, or an
 * overflowed compact accumulator), remainders on both sides at the same k,
 * and biases that cancel V, sit below it, or are -0, in the f32 path. */
static void remainder_sums_at_the_edges(void **s)
{
    trng r = { 23 };
    (void)s;
    for (int trial = 0; trial < 48; trial++) {
        size_t M = 3, N = 5, K = 2 + (size_t)(trial % 7);
        int gap = 150 + 10 * (trial % 6);              /* binades between the two groups of products */
        float *A = calloc(M * K, 4), *B = calloc(K * N, 4), bias[5];
        for (size_t i = 0; i < M; i++)
            for (size_t k = 0; k < K; k++)   /* row i: its top at k = 0, the rest far below (remainders) */
                A[i * K + k] = k == 0 ? full(&r, 100) : full(&r, 100 - gap / 2 - (int)(next_u64(&r) % 8));
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < N; j++)   /* column j: the same, the other way round */
                B[k * N + j] = k == 0 ? full(&r, -20) : full(&r, -20 - gap / 2 - (int)(next_u64(&r) % 8));
        /* row 0 . column 0 cancels exactly: a_1 b_1 = -a_0 b_0, the rest zero */
        A[0] = 1.0f; B[0] = 1.0f; A[1] = -0x1p40f; B[N] = 0x1p-40f;
        for (size_t k = 2; k < K; k++) { A[k] = 0.0f; B[k * N] = -0.0f; }
        for (size_t j = 0; j < N; j++) bias[j] = j == 0 ? 0.0f : j == 1 ? -0.0f : full(&r, (int)(j * 40) - 120);
        check_all("remainder sums", 0, 0, M, N, K, A, K, B, N, bias);
        check_all("remainder sums, transposed", 1, 1, N, M, K, B, N, A, K, bias);
        free(A); free(B);
    }
}

/* Elements exactly at the grid's last bit (2w - 24 binades under the top:
 * no remainder) and one binade lower (a remainder of one bit), in A and in
 * B, at any k (the kernel's K tail included), both layouts of each side. */
static void grid_edge_and_below(void **s)
{
    trng r = { 11 };
    (void)s;
    for (int trial = 0; trial < 160; trial++) {
        int ta = trial & 1, tb = (trial >> 1) & 1;
        size_t M = 1 + next_u64(&r) % 11, N = 1 + next_u64(&r) % 37, K = 1 + next_u64(&r) % 70;
        size_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 3;
        int w = dr_crt_width(K), below = (trial >> 2) & 1, top = (int)(next_u64(&r) % 200) - 100;
        float *A = calloc((ta ? K : M) * lda, 4), *B = calloc((tb ? N : K) * ldb, 4), bias[37];
        for (size_t i = 0; i < M; i++)
            for (size_t k = 0; k < K; k++) {
                int e = k == 0 ? top : top - (int)(next_u64(&r) % 12);
                if (next_u64(&r) % 5 == 0) e = top - (2 * w - 24) - below;   /* the edge, or under it */
                if (e < -126) e = -126;
                A[ta ? k * lda + i : i * lda + k] = full(&r, e);
            }
        for (size_t j = 0; j < N; j++)
            for (size_t k = 0; k < K; k++) {
                int e = k == K - 1 ? 5 : 5 - (int)(next_u64(&r) % 9);
                if (next_u64(&r) % 6 == 0) e = 5 - (2 * w - 24) - below;
                B[tb ? j * ldb + k : k * ldb + j] = full(&r, e);
            }
        for (size_t j = 0; j < N; j++) bias[j] = full(&r, top);
        check_all("grid edge", ta, tb, M, N, K, A, lda, B, ldb, bias);
        free(A); free(B);
    }
}

/* Whole vectors of one kind: exponent extremes (products overflowing a
 * float, products far below 2^-149), subnormals only, signed zeros, inf and
 * NaN, next to ordinary ones; shapes past the kernel's blocking. */
static void extremes_zeros_specials(void **s)
{
    trng r = { 23 };
    (void)s;
    for (int trial = 0; trial < 120; trial++) {
        int ta = trial & 1, tb = (trial >> 1) & 1;
        size_t M = 1 + next_u64(&r) % 20, N = 1 + next_u64(&r) % 40, K = 1 + next_u64(&r) % 30;
        size_t lda = ta ? M : K, ldb = tb ? K : N;
        float *A = malloc((ta ? K : M) * lda * 4), *B = malloc((tb ? N : K) * ldb * 4), bias[40];
        for (size_t v = 0; v < M + N; v++) {
            int kind = (int)(next_u64(&r) % 9);
            for (size_t k = 0; k < K; k++) {
                float x;
                switch (kind) {
                case 0: x = full(&r, 127 - (int)(next_u64(&r) % 3)); break;      /* near FLT_MAX */
                case 1: x = ldexpf((float)(next_u64(&r) % 64), -149); break;     /* subnormals (and +0) */
                case 2: x = next_u64(&r) & 1 ? -0.0f : 0.0f; break;
                case 3: x = k == K / 2 ? (next_u64(&r) & 1 ? -INFINITY : NAN) : full(&r, 0); break;
                case 4: x = full(&r, -126 + (int)(next_u64(&r) % 4)); break;     /* smallest normals */
                case 5: x = full(&r, (int)(next_u64(&r) % 60) - 30); break;      /* remainders */
                default: x = full(&r, (int)(next_u64(&r) % 4)); break;
                }
                if (v < M) A[ta ? k * lda + v : v * lda + k] = x;
                else B[tb ? (v - M) * ldb + k : k * ldb + (v - M)] = x;
            }
        }
        for (size_t j = 0; j < N; j++) bias[j] = j % 4 == 0 ? -0.0f : j % 4 == 1 ? 0x1p-149f : full(&r, 0);
        check_all("extremes", ta, tb, M, N, K, A, lda, B, ldb, bias);
        free(A); free(B);
    }
}


/* Both vector reconstructions (32-bit digits; IFMA's 52-bit digits where
 * the CPU has it) against the V the sums came from: V at 0, +-1, the
 * bound K (2^2w - 1)^2 and random below it, for every modulus count the
 * path uses, each sum c_t any int32 with c_t = V (mod m_t) (the kernel's
 * sums are not reduced), every tail of eight columns. */
static void reconstruct_every_count(void **s)
{
    enum { M = 3, N = 13, Np = 16 };
    trng r = { 17 };
    int32_t C32[DR_CRT_MAX_MODULI * M * Np];
    dr_i128 V[M * N], got[M * N];
    static const size_t Ks[] = { 1, 2, 3, 4, 5, 8, 16, 33, 64, 100, 255, 256, 784, 1000, 4096, 5000, 16384,
                                 30000, 65535, 65536 };
    (void)s;
    if (!dr_crt_have_vnni()) { skip(); return; }
    for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
        size_t K = Ks[ki];
        int w = dr_crt_width(K), n = dr_crt_moduli(K, w);
        dr_u128 g = ((dr_u128)1 << (2 * w)) - 1u, bound = (dr_u128)K * g * g;
        dr_crt_plan c;
        dr_crt_plan_init(&c, n);
        for (int e = 0; e < M * N; e++) {
            dr_u128 mag = (dr_u128)next_u64(&r) << 64 | next_u64(&r);
            switch (e % 6) {
            case 0: mag = bound; break;
            case 1: mag = (dr_u128)(e / 6 % 2); break;
            default: mag %= bound + 1u; break;
            }
            V[e] = (next_u64(&r) & 1) ? -(dr_i128)mag : (dr_i128)mag;
            for (int t = 0; t < n; t++) {
                int m = dr_crt_modulus(t);
                int64_t res = (int64_t)(V[e] % m), lim = (int64_t)K * 255 * 128 / m;
                int64_t k = lim ? (int64_t)(next_u64(&r) % (uint64_t)(2 * lim + 1)) - lim : 0;
                int64_t cv = res + k * m;
                if (cv > INT32_MAX || cv < INT32_MIN) cv = res;
                C32[t * M * Np + (e / N) * Np + e % N] = (int32_t)cv;
            }
        }
        for (int which = 0; which < 2; which++) {
            if (which == 1 && !c.ifma) continue;
            memset(got, 0x5a, sizeof got);
            if (which) dr_crt_reconstruct_ifma(&c, C32, M, N, Np, got);
            else dr_crt_reconstruct_vnni(&c, C32, M, N, Np, got);
            for (int e = 0; e < M * N; e++)
                if (got[e] != V[e]) {
                    print_error("K=%zu n=%d %s: element %d: V %llx:%016llx, got %llx:%016llx\n", K, n,
                                which ? "IFMA" : "32-bit digits", e, (unsigned long long)((dr_u128)V[e] >> 64),
                                (unsigned long long)V[e], (unsigned long long)((dr_u128)got[e] >> 64),
                                (unsigned long long)got[e]);
                    fail();
                }
        }
    }
}

/* The MLP's GEMMs as the engine calls them (forward x W, the gradients
 * x^T dz and dz W^T), pixel-like and weight-like data. */
static void mlp_shapes_every_layout(void **s)
{
    trng r = { 3 };
    size_t G = 64, I = 784, O = 128;
    float *x = malloc(G * I * 4), *w = malloc(I * O * 4), *dz = malloc(G * O * 4), bias[784];
    (void)s;
    for (size_t i = 0; i < G * I; i++) x[i] = (next_u64(&r) & 3) ? (float)(next_u64(&r) % 256) / 255.0f : 0.0f;
    for (size_t i = 0; i < I * O; i++) w[i] = ldexpf((float)(int64_t)(next_u64(&r) >> 40) - 0x800000, -30);
    for (size_t i = 0; i < G * O; i++) dz[i] = full(&r, -(int)(next_u64(&r) % 20) - 6);
    for (size_t j = 0; j < I; j++) bias[j] = full(&r, -3);
    check_all("x W", 0, 0, G, O, I, x, I, w, O, bias);
    check_all("x^T dz", 1, 0, I, O, G, x, I, dz, O, bias);
    check_all("dz W^T", 0, 1, G, I, O, dz, O, w, O, bias);
    free(x); free(w); free(dz);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(moduli_cover_the_bound),
        cmocka_unit_test(kernels_agree_with_plain_sums),
        cmocka_unit_test(sums_near_the_bound),
        cmocka_unit_test(narrow_vectors_at_their_bound),
        cmocka_unit_test(grid_edge_and_below),
        cmocka_unit_test(remainder_sums_at_the_edges),
        cmocka_unit_test(extremes_zeros_specials),
        cmocka_unit_test(mlp_shapes_every_layout),
        cmocka_unit_test(reconstruct_every_count),
    };
    return cmocka_run_group_tests_name("gemm_crt", tests, NULL, NULL);
}
