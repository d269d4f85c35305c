/* distref — exact matrix products: the plain triple loop over the accumulator.
 *
 * Each output element is one exact dot product (reduce.c's binning), so the
 * result cannot depend on blocking, threading or k-order; faster variants
 * (devices/) must reproduce these bits. Operands are split once into
 * (mantissa, exponent) pairs, row-major for op(A) and column-major for op(B),
 * so the inner loop is one integer multiply and one bin update per product.
 */
#include "distref/exact_parts.h"
#include "distref/exact_bins.h"

#include <stdlib.h>

typedef struct split { int32_t m, idx; } split;   /* x = m * 2^(idx - 149) */

#define SHORT_DOT 32   /* below this many products, skip the bins */

typedef struct operand {
    const float *base;
    size_t       inc_vec, inc_elem;   /* vector v, element k at base[v*inc_vec + k*inc_elem] */
    split       *packed;              /* NULL when allocation failed: slow path */
    unsigned char *special;           /* per vector: holds an inf or NaN */
} operand;

static void pack(operand *op, size_t nvec, size_t K)
{
    op->packed = malloc(nvec * K * sizeof *op->packed + 1);
    op->special = calloc(nvec + 1, 1);
    if (!op->packed || !op->special) {
        free(op->packed); free(op->special);
        op->packed = NULL; op->special = NULL;
        return;
    }
    for (size_t v = 0; v < nvec; v++) {
        for (size_t k = 0; k < K; k++) {
            uint32_t u = dr_f32_bits(op->base[v * op->inc_vec + k * op->inc_elem]);
            split *s = &op->packed[v * K + k];
            if (dr_f32_is_special(u)) { op->special[v] = 1; s->m = 0; s->idx = 0; continue; }
            dr_split_f32(u, &s->m, &s->idx);
            s->idx -= DR_F32_EXP_MIN;
        }
    }
}

static void unpack(operand *op)
{
    free(op->packed);
    free(op->special);
}

static operand rows_of(dr_trans t, const float *A, size_t ld)
{
    operand op = { A, t ? 1 : ld, t ? ld : 1, NULL, NULL };
    return op;
}

static operand cols_of(dr_trans t, const float *B, size_t ld)
{
    operand op = { B, t ? ld : 1, t ? 1 : ld, NULL, NULL };
    return op;
}

/* acc += row i of op(A) . column j of op(B), exactly. */
static void dot_into(dr_acc *acc, const operand *a, size_t i, const operand *b, size_t j,
                     size_t K, dr_prod_bins *bins)
{
    const float *x = a->base + i * a->inc_vec, *y = b->base + j * b->inc_vec;
    dr_acc part;
    int zero = 1;
    if (!a->packed || !b->packed || a->special[i] || b->special[j]) {
        dr_acc_add_dot_strided(acc, x, a->inc_elem, y, b->inc_elem, K, bins);
        return;
    }
    dr_acc_init(&part);
    if (K <= SHORT_DOT) {
        /* A few products: adding them directly beats folding a range of bins. */
        const split *ra = a->packed + i * K, *cb = b->packed + j * K;
        for (size_t k = 0; k < K; k++)
            if (ra[k].m && cb[k].m)
                dr_acc_add_i64(&part, (int64_t)ra[k].m * cb[k].m, ra[k].idx + cb[k].idx + 2 * DR_F32_EXP_MIN);
        part.pending = (uint32_t)K;
    } else for (size_t k0 = 0; k0 < K; k0 += DR_PROD_CHUNK) {
        const split *ra = a->packed + i * K, *cb = b->packed + j * K;
        size_t end = K - k0 < DR_PROD_CHUNK ? K : k0 + DR_PROD_CHUNK;
        for (size_t k = k0; k < end; k++)
            dr_prod_bins_add(bins, k, (int64_t)ra[k].m * cb[k].m, ra[k].idx + cb[k].idx);
        dr_prod_bins_fold(bins, &part);
    }
    if (K == 0) { dr_acc_merge(acc, &part); return; }
    dr_acc_normalize(&part);
    for (int l = 0; l < DR_ACC_LIMBS; l++) zero &= part.limb[l] == 0;
    part.flags |= zero ? dr_zero_dot_flags(x, a->inc_elem, y, b->inc_elem, K)
                       : DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0;
    dr_acc_merge(acc, &part);
}

void dr_gemm_acc(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                 const float *A, size_t lda, const float *B, size_t ldb, dr_acc *Cacc)
{
    operand a = rows_of(ta, A, lda), b = cols_of(tb, B, ldb);
    dr_prod_bins *bins = malloc(sizeof *bins);
    dr_prod_bins local;
    if (!bins) bins = &local;
    dr_prod_bins_init(bins);
    pack(&a, M, K);
    pack(&b, N, K);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) dot_into(&Cacc[i * N + j], &a, i, &b, j, K, bins);
    unpack(&a);
    unpack(&b);
    if (bins != &local) free(bins);
}

void dr_gemm_f32(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                 const float *A, size_t lda, const float *B, size_t ldb,
                 const float *bias, float *C, size_t ldc)
{
    operand a = rows_of(ta, A, lda), b = cols_of(tb, B, ldb);
    dr_prod_bins *bins = malloc(sizeof *bins);
    dr_prod_bins local;
    if (!bins) bins = &local;
    dr_prod_bins_init(bins);
    pack(&a, M, K);
    pack(&b, N, K);
    for (size_t i = 0; i < M; i++) {
        for (size_t j = 0; j < N; j++) {
            dr_acc acc;
            dr_acc_init(&acc);
            if (bias) dr_acc_add(&acc, bias[j]);
            dot_into(&acc, &a, i, &b, j, K, bins);
            C[i * ldc + j] = dr_acc_round(&acc);
        }
    }
    unpack(&a);
    unpack(&b);
    if (bins != &local) free(bins);
}
