/* distref devices — the exact GEMM's integer products by residues (Ozaki
 * scheme II: Ozaki, Uchino, Imamura 2025, here kept exact).
 *
 * cpu_gemm.c slices every row of op(A) and column of op(B) onto a grid of
 * 2w bits below its largest exponent (what falls below the grid is a listed
 * remainder, added exactly elsewhere), so the products needed are integer
 * dot products V = a . b, |a_k|, |b_k| < 2^2w, |V| <= K (2^2w - 1)^2. Here V
 * is formed modulo n pairwise coprime moduli m_t <= 256 whose product P
 * exceeds 2 K (2^2w - 1)^2 (with room: |V| / P < 1/2 - 2^-30):
 *
 *   a mod m_t as u8 in [0, m_t), b mod m_t as s8 in [-m_t/2, m_t/2), one
 *   int8 GEMM per modulus with int32 sums (|sum| <= K 255 128 < 2^31 for
 *   K <= 65536: no wrap), then per element the Chinese remainder theorem:
 *   y_t = c_t (P/m_t)^-1 mod m_t, S = sum y_t P/m_t (mod 2^128),
 *   q = round(sum y_t / m_t) (in double: V / P = sum y_t / m_t - q, far from
 *   the rounding boundary), V = S - q P, exact in 128-bit two's complement.
 *
 * Residues of an integer t, |t| < 2^41, in double: r = t - m floor(t/m + c)
 * with t/m computed as t * (1/m) (error below 2^-18, against margins of at
 * least 2^-10 that c leaves: c = 1/(2m) gives [0, m), c = 1/2 + 1/(4m) the
 * symmetric [-m/2, m/2)). The portable path and the VNNI path compute the
 * same residues and the same int32 sums (exact), so the same V.
 */
#include "devices/cpu/cpu_gemm_internal.h"
#include "distref/error.h"
#include "devices/seams.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Pairwise coprime: 2^8, 3*5*17, 11*23, 251, 13*19, 241, 239, 233, 229,
 * 227, 223, 7*31, 211, 199, 197, 193 (tests/test_gemm_crt.c checks it). */
static const int moduli[] = { 256, 255, 253, 251, 247, 241, 239, 233, 229, 227, 223, 217, 211, 199, 197, 193 };
#define CRT_MAX DR_CRT_MAX_MODULI
/* The grid: at most 2w = 40 bits (16 binades below a vector's largest
 * element before a remainder), and never wider than the DGEMM path's. */
#define CRT_W_MAX 20
#define CRT_MB 64                                  /* rows per block (a multiple of the kernel's 8) */

int dr_crt_modulus(int t)
{
    return t >= 0 && t < CRT_MAX ? moduli[t] : 0;
}

int dr_crt_width(size_t K)
{
    int L = 0, w;
    if (K == 0 || K > DR_CRT_K_MAX) return 0;
    while (((size_t)1 << L) < K) L++;
    w = (53 - L) / 2;
    return w < CRT_W_MAX ? w : CRT_W_MAX;
}

void dr_crt_kernel_portable(const uint8_t *A, size_t lda, const int8_t *B, size_t M, size_t Np,
                            size_t K, int32_t *C, size_t ldc)
{
    size_t G = (K + 3) / 4;
    for (size_t i = 0; i < M; i++)
        for (size_t q = 0; q < Np / 16; q++) {
            const uint8_t *a = A + i * lda;
            const int8_t *b = B + q * G * 64;
            int32_t acc[16] = { 0 };
            for (size_t g = 0; g < G; g++)
                for (int cc = 0; cc < 16; cc++)
                    for (int t = 0; t < 4; t++) acc[cc] += (int32_t)a[4 * g + t] * b[g * 64 + 4 * cc + t];
            memcpy(C + i * ldc + 16 * q, acc, sizeof acc);
        }
}

#if defined(__SIZEOF_INT128__)
int dr_crt_moduli(size_t K, int w)
{
    return dr_crt_moduli_bits(K, 2 * w, 2 * w);
}

int dr_crt_moduli_bits(size_t K, int bits_a, int bits_b)
{
    dr_u128 ga = ((dr_u128)1 << bits_a) - 1u, gb = ((dr_u128)1 << bits_b) - 1u, bound = (dr_u128)K * ga * gb, P = 1;
    for (int n = 1; n <= CRT_MAX; n++) {
        P *= (unsigned)moduli[n - 1];
        if (bound < (P >> 1) - (P >> 30)) {
            return DR_SEAM_CRT_MODULI(n);
        }
    }
    return 0;
}

typedef dr_crt_plan crt_plan;

/* q^-1 mod m, gcd(q, m) = 1, m > 1: extended Euclid, in [1, m). */
static unsigned inverse_mod(unsigned q, unsigned m)
{
    int r0 = (int)m, r1 = (int)(q % m), t0 = 0, t1 = 1;
    while (r1) {
        int k = r0 / r1, r = r0 - k * r1, t = t0 - k * t1;
        r0 = r1; r1 = r; t0 = t1; t1 = t;
    }
    return (unsigned)(t0 < 0 ? t0 + (int)m : t0);
}

void dr_crt_plan_init(crt_plan *c, int n)
{
    const dr_u128 m52 = ((dr_u128)1 << 52) - 1u;
    c->n = n;
    c->P = 1;
    for (int t = 0; t < n; t++) c->P *= (unsigned)moduli[t];
    for (int l = 0; l < 4; l++) c->Plimb[l] = (uint32_t)(c->P >> (32 * l));
    c->P52[0] = (uint64_t)(c->P & m52);
    c->P52[1] = (uint64_t)(c->P >> 52);
    c->ifma = (c->P >> 104) == 0 && dr_crt_have_vnni();
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(DR_NO_VNNI)
    c->ifma = c->ifma && __builtin_cpu_supports("avx512ifma");
#endif
    for (int t = 0; t < n; t++) {
        unsigned m = (unsigned)moduli[t], x;
        c->Q[t] = c->P / m;
        x = inverse_mod((unsigned)(c->Q[t] % m), m);   /* the inverse of Q_t mod m_t */
        x = DR_SEAM_CRT_COEFF(x, m, t, n);
        c->m[t] = (double)m;
        c->invm[t] = 1.0 / (double)m;
        c->inv[t] = (double)x;
        c->cu[t] = 0.5 * c->invm[t];
        c->cs[t] = 0.5 + 0.25 * c->invm[t];
        for (int l = 0; l < 4; l++) c->Qlimb[t][l] = (uint32_t)(c->Q[t] >> (32 * l));
        c->Q52[t][0] = (uint64_t)(c->Q[t] & m52);
        c->Q52[t][1] = (uint64_t)(c->Q[t] >> 52);
    }
}

/* t mod m_q in [0, m_q), t an integer, |t| < 2^41. */
static inline double res_u(const crt_plan *c, int q, double t)
{
    return t - c->m[q] * floor(t * c->invm[q] + c->cu[q]);
}

/* t mod m_q in [-m_q/2, m_q/2). */
static inline double res_s(const crt_plan *c, int q, double t)
{
    return t - c->m[q] * floor(t * c->invm[q] + c->cs[q]);
}

/* The integer part of element k of vector v on its grid, trunc(x 2^-base),
 * and whether bits fell below it (*rem); 0 for a vector holding inf or NaN
 * (its products take the plain path). */
static inline double grid_value(const dr_sliced *s, size_t v, size_t k, unsigned char *rem)
{
    double x, t;
    if (s->special[v]) return 0.0;
    x = (double)s->base_ptr[v * s->inc_vec + k * s->inc_elem] * s->scale[v];
    t = trunc(x);
    *rem |= t != x;
    return t;
}

/* Rows of op(A) as u8 residues: n planes of M x lda. */
static void pack_a(const crt_plan *c, const dr_sliced *s, uint8_t *Ap, size_t lda, unsigned char *has_rem)
{
    size_t M = s->nvec, K = s->K, plane = M * lda;
    memset(Ap, 0, (size_t)c->n * plane);
    for (size_t i = 0; i < M; i++)
        for (size_t k = 0; k < K; k++) {
            double t = grid_value(s, i, k, &has_rem[i]);
            for (int q = 0; q < c->n; q++)
                Ap[q * plane + i * lda + k] = (uint8_t)(int)res_u(c, q, t);
        }
}

/* Columns of op(B) as s8 residues in vpdpbusd's layout: n planes of Np/16
 * panels of G groups of 64 bytes (byte 4c + t of group g of panel q is
 * op(B)[4g + t][16q + c]). */
static void pack_b(const crt_plan *c, const dr_sliced *s, int8_t *Bp, size_t G, size_t Np, unsigned char *has_rem)
{
    size_t N = s->nvec, K = s->K, plane = Np * G * 4;
    memset(Bp, 0, (size_t)c->n * plane);
    for (size_t j = 0; j < N; j++)
        for (size_t k = 0; k < K; k++) {
            double t = grid_value(s, j, k, &has_rem[j]);
            size_t at = (j / 16) * G * 64 + (k / 4) * 64 + (j % 16) * 4 + k % 4;
            for (int q = 0; q < c->n; q++)
                Bp[q * plane + at] = (int8_t)(int)res_s(c, q, t);
        }
}

int dr_crt_have_vnni(void)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(DR_NO_VNNI)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512vnni");
#else
    return 0;
#endif
}

/* V of every element from its n int32 sums (planes of M x Np). */
static void reconstruct(const crt_plan *c, const int32_t *C32, size_t M, size_t N, size_t Np, dr_i128 *V)
{
    size_t plane = M * Np;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            dr_u128 S = 0;
            double f = 0.0;
            for (int t = 0; t < c->n; t++) {
                double y = res_u(c, t, (double)C32[t * plane + i * Np + j] * c->inv[t]);   /* |c inv| < 2^39 */
                S += (dr_u128)(uint64_t)y * c->Q[t];
                f += y * c->invm[t];
            }
            V[i * N + j] = (dr_i128)(S - (dr_u128)(uint64_t)floor(f + 0.5) * c->P);
        }
}

/* Rows r0 .. r0 + nr of a side, as a side of its own (shares the arrays). */
static dr_sliced rows_view(const dr_sliced *s, size_t r0, size_t nr)
{
    dr_sliced v = *s;
    v.base_ptr = s->base_ptr + r0 * s->inc_vec;
    v.nvec = nr;
    v.scale = s->scale + r0;
    v.base = s->base + r0;
    v.special = s->special + r0;
    return v;
}

/* A's packed row stride: the kernel's 4G bytes rounded up to an odd number
 * of 64-byte lines, so that the rows of a block fall into different cache
 * sets. At 4G a multiple of 16 lines, every row of a plane mapped to 4 of
 * the 64 sets: dW's K = 50,176 (784 lines), where the element-major
 * packing stores 4 bytes down a column of rows, missed L1 at every store.
 * The layout only: the same residues, the same sums. */
static size_t a_stride(size_t G)
{
    size_t lines = (4 * G + 63) / 64;
    return (lines | 1u) * 64;
}

int dr_crt_values(dr_product *p, int vnni)
{
    size_t M = p->a.nvec, N = p->b.nvec, K = p->a.K, G = (K + 3) / 4, Np = (N + 15) / 16 * 16;
    size_t lda = a_stride(G);
    size_t nt = (size_t)omp_get_max_threads(), per, bper, nblk, MB;
    int n = dr_crt_moduli_bits(K, p->a.bits, p->b.bits);
    crt_plan c;
    int8_t *Bp;
    uint8_t *work;
    unsigned char *ra, *rb;
    dr_crt_plan_init(&c, n);
    /* Per thread: a block's A residues (n MB lda bytes), its int32 sums
     * (n MB Np 4 bytes; 393 KB at n = 12, N = 128: they stay in L2 between
     * kernel and reconstruction) and packing scratch (n 4 MB bytes). */
    per = (size_t)n * CRT_MB * (lda + 4 * Np + 4) + 64;
    bper = ((size_t)n * (4 * Np + 4 * G) + N + 63) / 64 * 64;   /* B's packing scratch, a thread's */
    p->V = malloc(M * N * sizeof(dr_i128) + 16);
    Bp = malloc((size_t)n * Np * 4 * G + 64);
    work = malloc(nt * per + nt * bper + 64);
    ra = calloc(M + N + 2, 1);
    rb = ra ? ra + M + 1 : NULL;
    if (!p->V || !Bp || !work || !ra) {
        free(Bp); free(work); free(ra);
        return DR_ENOMEM;
    }
    if (vnni) dr_crt_pack_b_vnni(&c, &p->b, Bp, G, Np, work + nt * per, bper, rb);
    else pack_b(&c, &p->b, Bp, G, Np, rb);
    /* Blocks of at most CRT_MB rows, a multiple of 8, as many as a multiple
     * of the team's threads: the static schedule then gives every thread
     * the same rows (784 rows on 2 threads: 14 blocks of 56, not 13 of 64
     * split 7 and 6). V is exact whatever the blocks. */
    nblk = (M + CRT_MB - 1) / CRT_MB;
    nblk = (nblk + nt - 1) / nt * nt;
    MB = ((M + nblk - 1) / nblk + 7) / 8 * 8;
    #pragma omp parallel for schedule(static)
    for (size_t i0 = 0; i0 < M; i0 += MB) {
        size_t mb = M - i0 < MB ? M - i0 : MB;
        uint8_t *Ab = work + (size_t)omp_get_thread_num() * per, *tmp = Ab + (size_t)n * CRT_MB * lda;
        int32_t *blk;
        dr_sliced rows = rows_view(&p->a, i0, mb);
        blk = (int32_t *)(void *)(tmp + (size_t)n * 4 * CRT_MB);   /* after the scratch, 4-aligned */
        if (vnni) dr_crt_pack_a_vnni(&c, &rows, Ab, lda, tmp, ra + i0);
        else pack_a(&c, &rows, Ab, lda, ra + i0);
        for (int t = 0; t < n; t++) {
            const uint8_t *a = Ab + (size_t)t * mb * lda;
            const int8_t *b = Bp + (size_t)t * Np * 4 * G;
            if (vnni) dr_crt_kernel_vnni(a, lda, b, mb, Np, K, blk + (size_t)t * mb * Np, Np);
            else dr_crt_kernel_portable(a, lda, b, mb, Np, K, blk + (size_t)t * mb * Np, Np);
        }
        if (vnni && c.ifma) dr_crt_reconstruct_ifma(&c, blk, mb, N, Np, p->V + i0 * N);
        else if (vnni) dr_crt_reconstruct_vnni(&c, blk, mb, N, Np, p->V + i0 * N);
        else reconstruct(&c, blk, mb, N, Np, p->V + i0 * N);
    }
    dr_sliced_rems(&p->a, ra);
    dr_sliced_rems(&p->b, rb);
    free(Bp); free(work); free(ra);
    return DR_OK;
}
#else
int dr_crt_values(dr_product *p, int vnni) { (void)p; (void)vnni; return DR_EUNSUPPORTED; }
#endif
