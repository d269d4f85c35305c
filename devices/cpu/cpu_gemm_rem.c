/* distref devices — the exact GEMM's remainders of op(B) for full
 * accumulators (dr_gemm_acc_fast): the products (a - r_a) r_b that a
 * column's elements below its grid add to every row, formed as integers.
 *
 * Row i's elements on its grid are integers times 2^base_a[i]: ia =
 * trunc(a 2^-base_a), |ia| < 2^2w (a row with remainders of its own
 * included: trunc drops them, as a - r_a does). A remainder of column j is
 * a float, ym 2^ye with |ym| < 2^24. The column's remainders are taken in
 * bands of 31 binades of ye: within a band starting at lo, r_b = (ym <<
 * (ye - lo)) 2^lo, below 2^54 2^lo, so that row i's products over the band
 * sum exactly in an __int128 (|ia ym'| < 2^(2w + 54) and at most K terms,
 * under 2^110 for every K either path takes: 2w <= 40 and K <= 2^16 on the
 * CRT path, 2w <= 53 - log2 K on the DGEMM path), added once a band to the
 * row's accumulator at 2^(base_a[i] + lo). An exact sum: the order and the
 * grouping change no bit.
 *
 * Where the time went before (issue 31): resnet_fashion_mnist's dW
 * GEMMs (im2col^T dz, M = 144, N = 16, K = 50,176 at stage 1) leave up to
 * 24k of a dz column's 50,176 elements below its grid; each of their
 * products took a dr_acc of its own per output (remainder_terms, a strided
 * element of op(A) each), then one exact integer add each.
 */
#include "devices/cpu/cpu_gemm_internal.h"
#include "distref/error.h"
#include "distref/exact_parts.h"
#include "devices/seams.h"

#include <stdlib.h>

#if defined(__SIZEOF_INT128__)
#define BAND 31          /* binades of ye per band: ym << (ye - lo) < 2^54 */
#define MAX_BANDS 9      /* a float's ye spans [-149, 104]: 254 binades */
#define REM_ROWS 256     /* rows per block: a thread's sums stay in L1 */

/* The remainders of column j in bands: kk[q], ym[q] for q in
 * [start[b], start[b + 1]), band b starting at binade lo + BAND b. The
 * number of bands, 0 when the column has none. */
static int column_bands(const dr_sliced *b, size_t j, uint32_t *kk, int64_t *ym, size_t *start, int *lo)
{
    size_t r0 = b->rem_start[j], r1 = DR_SEAM_REM_PASS_END(b->rem_start[j + 1]), fill[MAX_BANDS + 1];
    int32_t m, e, emin = INT32_MAX, emax = INT32_MIN, nb;
    for (size_t r = r0; r < r1; r++) {
        dr_split_f32(dr_f32_bits(b->rem_v[r]), &m, &e);
        emin = e < emin ? e : emin;
        emax = e > emax ? e : emax;
    }
    if (r0 >= r1) return 0;
    nb = (emax - emin) / BAND + 1;
    for (int q = 0; q <= nb; q++) fill[q] = 0;
    for (size_t r = r0; r < r1; r++) {
        dr_split_f32(dr_f32_bits(b->rem_v[r]), &m, &e);
        fill[(e - emin) / BAND + 1]++;
    }
    for (int q = 0; q < nb; q++) fill[q + 1] += fill[q];
    for (int q = 0; q <= nb; q++) start[q] = fill[q];
    for (size_t r = r0; r < r1; r++) {
        size_t at;
        dr_split_f32(dr_f32_bits(b->rem_v[r]), &m, &e);
        at = fill[(e - emin) / BAND]++;
        kk[at] = b->rem_k[r];
        ym[at] = (int64_t)m * ((int64_t)1 << ((e - emin) % BAND));
    }
    *lo = emin;
    return nb;
}

/* Band [q0, q1) of a column into rows i0 .. i1 (not zero, no inf/NaN) of
 * its accumulators, full[i N]. */
static void band_rows(const dr_sliced *a, size_t i0, size_t i1, const uint32_t *kk, const int64_t *ym,
                      size_t q0, size_t q1, int lo, dr_acc *full, size_t N)
{
    dr_i128 sum[REM_ROWS];
    for (size_t i = i0; i < i1; i++) sum[i - i0] = 0;
    for (size_t q = q0; q < q1; q++) {
        const float *x = a->base_ptr + (size_t)kk[q] * a->inc_elem;
        const int64_t y = ym[q];
        for (size_t i = i0; i < i1; i++)
            if (!a->special[i])
                sum[i - i0] += (dr_i128)(int64_t)((double)x[i * a->inc_vec] * a->scale[i]) * y;
    }
    for (size_t i = i0; i < i1; i++)
        if (sum[i - i0] != 0 && !a->zero[i] && !a->special[i])
            dr_gemm_add_wide(&full[i * N], sum[i - i0], a->base[i] + lo);
}

int dr_gemm_b_remainders(dr_product *p, size_t N, dr_acc *full)
{
    const dr_sliced *a = &p->a, *b = &p->b;
    size_t M = a->nvec, most = 0, start[MAX_BANDS + 1];
    uint32_t *kk;
    int64_t *ym;
    for (size_t j = 0; j < N; j++) {
        size_t n = b->rem_start[j + 1] - b->rem_start[j];
        most = n > most ? n : most;
    }
    kk = malloc(most * sizeof *kk + 8);
    ym = malloc(most * sizeof *ym + 8);
    if (!kk || !ym) {
        free(kk); free(ym);
        return DR_ENOMEM;
    }
    for (size_t j = 0; j < N; j++) {
        int lo, nb = column_bands(b, j, kk, ym, start, &lo);
        if (!nb) continue;
        #pragma omp parallel for schedule(static) if (M * (b->rem_start[j + 1] - b->rem_start[j]) >= (1u << 16))
        for (size_t i0 = 0; i0 < M; i0 += REM_ROWS) {
            size_t i1 = M - i0 < REM_ROWS ? M : i0 + REM_ROWS;
            for (int q = 0; q < nb; q++)
                if (start[q + 1] > start[q]) band_rows(a, i0, i1, kk, ym, start[q], start[q + 1], lo + BAND * q,
                                                       full + j, N);
        }
    }
    free(kk); free(ym);
    p->b_rems_added = 1;
    return DR_OK;
}
#else
int dr_gemm_b_remainders(dr_product *p, size_t N, dr_acc *full)
{
    (void)p; (void)N; (void)full;
    return DR_OK;   /* b_rems_added stays 0: remainder_terms adds them per output */
}
#endif
