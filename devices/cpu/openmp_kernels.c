/* distref devices — the OpenMP backend's step kernels: forward, loss and
 * gradients, and the spatial partitioning of layer 0.
 *
 * Written for the contract of distref/backend.h, independently of the
 * reference. Layer by layer, on the whole batch at once:
 *
 *   forward     pre[l] = bias + in W, one exact GEMM rounded once per
 *               element (dr_gemm_f32_fast: Ozaki slices over DGEMM), then
 *               the activation over the rows (softmax: exact normalizer).
 *   loss        one pass over the examples (rows in parallel): each row's
 *               loss, d loss / d pre of the last layer, and whether its
 *               argmax is its label; the losses are then summed exactly.
 *   backward    per layer from the top: gW += in^T dz exactly straight into
 *               the accumulators (dr_gemm_acc_fast), gb += the column sums
 *               of dz (dz transposed, one exact dr_acc_add_sum per unit),
 *               and the delta below, round(dz W^T), masked by the ReLU.
 *
 * Only the first n rows enter the backward pass: the GEMMs read n rows, the
 * loss loop stops at n, so the padding rows of a static shape add nothing.
 * In fast numerics (TensorFlow's float path, distref/backend.h) the GEMMs
 * are cblas_sgemm, exp/log are libm's, grad and loss are float buffers: a
 * kernel gradient is one sgemm straight into grad, a bias gradient the
 * column sums of dz accumulated row by row in float, the loss and the
 * softmax normalizers float sums left to right. No exact accumulator is
 * touched on that path.
 */
#include "devices/cpu/openmp_backend.h"
#include "distref/elem.h"
#include "distref/fastgemm.h"
#include "devices/seams.h"

#include <cblas.h>
#include <omp.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define XENT_EPS 1e-7f          /* Keras' epsilon(): the clip of probabilities */
#define PAR_MIN  (1u << 14)     /* elements below which a loop stays on one thread */

/* ---- the two GEMMs, exact or fast ---------------------------------------- */

/* Fast numerics: C = beta C + op(A) op(B) by cblas_sgemm on one OpenBLAS
 * thread (the thread policy, engine.c). A product of at least
 * SGEMM_SLAB_MIN multiply-adds is cut into two slabs of C's rows (or
 * columns, when C is wider than tall), each a GEMM of its own over the
 * whole K, run side by side when the OpenMP team has two threads and one
 * after the other when it has one. The cut depends on the shape only:
 * OpenBLAS's Haswell kernels give a slab's elements other bits than the
 * whole product's (measured: a 256x128x784 cut at row 16 changes 3,095 of
 * 32,768), so cutting by the thread count would make the bits depend on
 * it; cut this way they do not (test_backend runs 1 and 2 threads). Below
 * the threshold one call does it: at G=64 a cut costs ~10% on one thread. */
#define SGEMM_SLAB_MIN (1u << 24)
#define SGEMM_UNROLL   16u   /* the cut on a multiple of the kernels' unroll */

/* With a bias: C's rows start as the bias, then C += op(A) op(B) (beta is
 * then 1), so a slab fills its own rows on its own thread. */
static void sgemm_one(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                      const float *B, size_t ldb, const float *bias, float beta, float *C, size_t ldc)
{
    if (bias) {
        for (size_t i = 0; i < M; i++) memcpy(C + i * ldc, bias, N * sizeof *C);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

size_t dr_omp_sgemm_cut(size_t M, size_t N, size_t K, bool *rows)
{
    const size_t E = M >= N ? M : N, cut = (E / 2 + SGEMM_UNROLL - 1) / SGEMM_UNROLL * SGEMM_UNROLL;
    *rows = M >= N;
    if ((double)M * N * K < SGEMM_SLAB_MIN || cut >= E) return 0;
    return cut;
}

static void sgemm_team(dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                       const float *B, size_t ldb, const float *bias, float beta, float *C, size_t ldc)
{
    bool rows;
    const size_t cut = dr_omp_sgemm_cut(M, N, K, &rows), E = rows ? M : N;
    if (cut == 0) {
        sgemm_one(ta, tb, M, N, K, A, lda, B, ldb, bias, beta, C, ldc);
        return;
    }
    #pragma omp parallel for schedule(static, 1) num_threads(2) if (!omp_in_parallel() && omp_get_max_threads() > 1)
    for (int t = 0; t < 2; t++) {
        size_t lo = t ? cut : 0, n = t ? E - cut : cut;
        if (rows)   /* rows lo.. of op(A) and C */
            sgemm_one(ta, tb, n, N, K, ta ? A + lo : A + lo * lda, lda, B, ldb, bias, beta, C + lo * ldc, ldc);
        else        /* columns lo.. of op(B) and C */
            sgemm_one(ta, tb, M, n, K, A, lda, tb ? B + lo * ldb : B + lo, ldb, bias ? bias + lo : NULL, beta,
                      C + lo, ldc);
    }
}

int dr_omp_gemm_f32(const dr_backend *b, dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                    const float *A, size_t lda, const float *B, size_t ldb, const float *bias,
                    float *C, size_t ldc)
{
    if (M == 0 || N == 0) return DR_OK;
    if (b->num == DR_NUMERICS_FAST) {   /* C = bias, then C += op(A) op(B); or C = op(A) op(B) */
        if (K) sgemm_team(ta, tb, M, N, K, A, lda, B, ldb, bias, 0.0f, C, ldc);
        else
            for (size_t i = 0; i < M; i++)
                for (size_t j = 0; j < N; j++) C[i * ldc + j] = bias ? bias[j] : 0.0f;
        return DR_OK;
    }
    return dr_gemm_f32_fast(ta, tb, M, N, K, A, lda, B, ldb, bias, C, ldc);
}

/* C[M x N] (ldc N) = beta C + op(A) op(B): exact accumulators (C += the
 * exact product; beta is then 1), or in fast numerics floats by one
 * cblas_sgemm (beta 0: C is overwritten; 1: added to). */
int dr_omp_gemm_acc(dr_numerics form, dr_trans ta, dr_trans tb, size_t M, size_t N, size_t K,
                    const float *A, size_t lda, const float *B, size_t ldb, void *C, float beta)
{
    if (M == 0 || N == 0) return DR_OK;
    if (form == DR_NUMERICS_EXACT_COMPACT)
        return K ? dr_gemm_cacc_fast(ta, tb, M, N, K, A, lda, B, ldb, C, 0, 1) : DR_OK;
    if (form != DR_NUMERICS_FAST)
        return K ? dr_gemm_acc_fast(ta, tb, M, N, K, A, lda, B, ldb, C) : DR_OK;
    if (K == 0) {
        if (beta == 0.0f) memset(C, 0, M * N * sizeof(float));
        return DR_OK;
    }
    sgemm_team(ta, tb, M, N, K, A, lda, B, ldb, NULL, beta, C, N);
    return DR_OK;
}

/* The sum of v[0..n): exact (rounded once), or in fast numerics a float sum
 * left to right. */
static inline float sum_of(int fast, const float *v, uint32_t n)
{
    float s = 0.0f;
    if (!fast) return dr_sum_f32(v, n);
    for (uint32_t i = 0; i < n; i++) s = s + v[i];
    return s;
}

static inline float exp_of(int fast, float x) { return fast ? expf(x) : dr_expf(x); }
static inline float log_of(int fast, float x) { return fast ? logf(x) : dr_logf(x); }

/* First index of the largest element (NaNs never win, as in `v > best`). */
static inline uint32_t argmax(const float *v, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++) if (v[i] > v[best]) best = i;
    return best;
}

/* ---- forward ------------------------------------------------------------- */

/* p = softmax(z) for one row: e = exp(z - max) written into p, p /= sum(e). */
static void softmax_row(int fast, const float *z, uint32_t n, float *p)
{
    float mx = z[argmax(z, n)], s;
    for (uint32_t i = 0; i < n; i++) p[i] = exp_of(fast, z[i] - mx);
    s = sum_of(fast, p, n);
    for (uint32_t i = 0; i < n; i++) p[i] = p[i] / s;
}

/* act[l] = activation(pre[l]) over `rows` rows. */
static void activate(const dr_backend *b, dr_omp_scratch *s, uint32_t l, uint32_t rows)
{
    const dr_dense *d = &b->m.layer[l];
    const float *pre = s->pre[l];
    float *out = s->act[l];
    size_t cells = (size_t)rows * d->out;
    int fast = b->num == DR_NUMERICS_FAST;
    switch (d->act) {
    case DR_ACT_LINEAR:
        memcpy(out, pre, cells * sizeof *out);
        break;
    case DR_ACT_RELU:   /* a select, not a branch: the signs of pre are noise to a predictor */
        #pragma omp parallel for simd schedule(static) if (parallel: cells >= PAR_MIN && !omp_in_parallel())
        for (size_t i = 0; i < cells; i++) out[i] = pre[i] > 0.0f ? pre[i] : 0.0f;
        break;
    case DR_ACT_SOFTMAX:
        #pragma omp parallel for schedule(static) if (cells >= PAR_MIN)
        for (uint32_t r = 0; r < rows; r++)
            softmax_row(fast, pre + (size_t)r * d->out, d->out, out + (size_t)r * d->out);
        break;
    }
}

static int need_scratch(const dr_replica_bufs *rb, uint32_t rows, dr_err *err)
{
    const dr_omp_scratch *s = rb ? rb->scratch : NULL;
    if (!s) return dr_fail(err, DR_ESTATE, "openmp backend: replica workspace not opened (replica_open)");
    if (rows > s->cap)
        return dr_fail(err, DR_EUSAGE, "openmp backend: %u rows, but the replica's workspace holds %u", rows, s->cap);
    return DR_OK;
}

int dr_omp_forward(dr_backend *b, dr_replica_bufs *rb, uint32_t rows, uint32_t first, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    dr_omp_scratch *s;
    const float *params;
    int rc;
    if ((rc = need_scratch(rb, rows, err))) return rc;
    s = rb->scratch;
    if (first > m->nlayers)   /* first == nlayers: layer0_finish already made the output */
        return dr_fail(err, DR_EUSAGE, "openmp backend: forward from layer %u of a %u-layer model", first, m->nlayers);
    if ((rc = dr_omp_need(rb->params, b->P * sizeof(float), "params", err))) return rc;
    if (first == 0 && (rc = dr_omp_need(rb->x, (size_t)rows * m->layer[0].in * sizeof(float), "x", err)))
        return rc;
    params = dr_omp_f32(rb->params);
    for (uint32_t l = first; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        const float *in = l ? s->act[l - 1] : dr_omp_f32(rb->x);
        const float *W = params + b->koff[l], *bias = W + (size_t)d->in * d->out;
        rc = dr_omp_gemm_f32(b, DR_NO_TRANS, DR_NO_TRANS, rows, d->out, d->in, in, d->in, W, d->out,
                      bias, s->pre[l], d->out);
        if (rc) return dr_fail(err, rc, "openmp backend: out of memory in layer %u's forward GEMM", l);
        activate(b, s, l, rows);
    }
    s->fwd_rows = rows;
    return DR_OK;
}

/* ---- loss ---------------------------------------------------------------- */

/* One example: its loss, and dz = d loss / d pre of the last layer. */
static float example(const dr_backend *b, const float *pre, const float *out, uint32_t label,
                     const float *target, float *dz, float *aux)
{
    uint32_t n = b->m.layer[b->m.nlayers - 1].out;
    int fast = b->num == DR_NUMERICS_FAST;
    switch (b->m.loss) {
    case DR_LOSS_XENT_LOGITS: {
        /* log sum exp(z - max) - (z_y - max); dz = softmax(z) - onehot(y) */
        float mx = pre[argmax(pre, n)], sum;
        for (uint32_t i = 0; i < n; i++) aux[i] = exp_of(fast, pre[i] - mx);
        sum = sum_of(fast, aux, n);
        for (uint32_t i = 0; i < n; i++) dz[i] = aux[i] / sum - (i == label ? 1.0f : 0.0f);
        return log_of(fast, sum) - (pre[label] - mx);
    }
    case DR_LOSS_XENT_PROBS: {
        /* -log(clip(p_y)); through the softmax: dz_i = p_i (g_i - p_y g_y) */
        float py = out[label];
        float q = py < XENT_EPS ? XENT_EPS : py > 1.0f - XENT_EPS ? 1.0f - XENT_EPS : py;
        float gy = (q == py) ? -1.0f / py : 0.0f, t = py * gy;
        for (uint32_t i = 0; i < n; i++) dz[i] = out[i] * ((i == label ? gy : 0.0f) - t);
        return -log_of(fast, q);
    }
    case DR_LOSS_MSE:
    default:
        /* mean over the outputs of (out - target)^2; dz = 2 (out - target) / n */
        for (uint32_t i = 0; i < n; i++) aux[i] = out[i] - target[i];
        for (uint32_t i = 0; i < n; i++) dz[i] = (2.0f * aux[i]) / (float)n;
        if (fast) {
            float s = 0.0f;
            for (uint32_t i = 0; i < n; i++) s = s + aux[i] * aux[i];
            return s / (float)n;
        }
        return dr_dot_f32(aux, aux, n) / (float)n;
    }
}

/* Per-example losses, the top delta into s->dz[0], and the hits. */
void dr_omp_loss_rows(const dr_backend *b, dr_omp_scratch *s, uint32_t n,
                      const uint8_t *labels, const float *targets)
{
    uint32_t L = b->m.nlayers, nout = b->m.layer[L - 1].out;
    #pragma omp parallel for schedule(static) if ((size_t)n * nout >= PAR_MIN / 4)
    for (uint32_t r = 0; r < n; r++) {
        size_t o = (size_t)r * nout;
        uint32_t label = labels ? labels[r] : 0;
        s->ex_loss[r] = example(b, s->pre[L - 1] + o, s->act[L - 1] + o, label,
                                targets ? targets + o : NULL, s->dz[0] + o, s->aux + o);
        s->hit[r] = labels && argmax(s->act[L - 1] + o, nout) == label;
    }
}

/* evaluate's and predict's: the losses loss_grad sums and the top map, of
 * the last forward pass (Dense's forward or the layer ops in inference) */
int dr_omp_outputs(dr_backend *b, dr_replica_bufs *rb, uint32_t n, float *loss, float *out, dr_err *err)
{
    dr_omp_scratch *s = rb ? rb->scratch : NULL;
    uint32_t L = b->m.nlayers, nout = b->m.layer[L - 1].out;
    if (!s || n > s->cap) return dr_fail(err, DR_EUSAGE, "openmp backend: outputs of %u rows, the workspace holds %u",
                                         n, s ? s->cap : 0);
    if (b->m.loss != DR_LOSS_MSE && !rb->labels)
        return dr_fail(err, DR_EUSAGE, "openmp backend: a cross-entropy loss needs labels");
    dr_omp_loss_rows(b, s, n, rb->labels ? (const uint8_t *)rb->labels->data : NULL,
                     rb->targets ? dr_omp_f32(rb->targets) : NULL);
    memcpy(loss, s->ex_loss, (size_t)n * sizeof *loss);
    memcpy(out, s->act[L - 1], (size_t)n * nout * sizeof *out);
    return DR_OK;
}

/* ---- backward ------------------------------------------------------------ */

/* gb[j] += sum over the n rows of dz[.][j], exactly. */
static void bias_grad(dr_acc *gb, const float *dz, uint32_t n, uint32_t out, float *colT)
{
    if (DR_SEAM_BIAS_GRAD_BY_ROWS(gb, dz, n, out)) return;
    #pragma omp parallel for schedule(static) if ((size_t)n * out >= PAR_MIN)
    for (uint32_t j = 0; j < out; j++) {   /* unit j's column of dz, then its exact sum */
        for (uint32_t r = 0; r < n; r++) colT[(size_t)j * n + r] = dz[(size_t)r * out + j];
        dr_acc_add_sum(&gb[j], colT + (size_t)j * n, n);
    }
}

/* The same into compact accumulators, times 2^e2: the few bias sums are
 * formed in full accumulators (by bias_grad, its seams included), merged
 * and scaled. */
static int bias_grad_compact(dr_cacc *gb, const float *dz, uint32_t n, uint32_t out, float *colT, int e2)
{
    dr_acc *t = calloc(out ? out : 1, sizeof *t);
    if (!t) return DR_ENOMEM;
    bias_grad(t, dz, n, out, colT);
    for (uint32_t j = 0; j < out; j++) {
        dr_cacc c;
        dr_cacc_from_acc(&c, &t[j]);
        dr_cacc_merge(&gb[j], &c);
        dr_cacc_mul_u32(&gb[j], 1u << e2);
    }
    free(t);
    return DR_OK;
}

/* Fast numerics: gb[j] = sum over the n rows of dz[.][j], float, row by row. */
static void bias_grad_f32(float *gb, const float *dz, uint32_t n, uint32_t out)
{
    memset(gb, 0, out * sizeof *gb);
    for (uint32_t r = 0; r < n; r++) {
        const float *row = dz + (size_t)r * out;
        if (DR_SEAM_BIAS_ROW_F32_BY_ROWS(gb, row, r, out)) continue;
        #pragma omp simd
        for (uint32_t j = 0; j < out; j++) gb[j] = gb[j] + row[j];
    }
}

/* The delta of a ReLU layer's output is zero where the unit was inactive. */
static void relu_mask(float *delta, const float *pre, size_t cells)
{
    #pragma omp parallel for simd schedule(static) if (parallel: cells >= PAR_MIN && !omp_in_parallel())
    for (size_t i = 0; i < cells; i++) {
        delta[i] = DR_SEAM_RELU_ACTIVE(pre[i]) ? delta[i] : 0.0f;
    }
}

/* grad: P accumulators (exact: dr_acc, or dr_cacc in form EXACT_COMPACT,
 * every one times 2^e2) or P floats (fast). */
static int backward(const dr_backend *b, dr_omp_scratch *s, const float *params, const float *x,
                    uint32_t n, bool kernel0, dr_numerics form, void *grad, int e2, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    const bool fast = form == DR_NUMERICS_FAST;
    const size_t gsz = dr_grad_bytes(form);
    float *dz = s->dz[0];
    int rc;
    for (uint32_t l = m->nlayers; l-- > 0;) {
        const dr_dense *d = &m->layer[l];
        const float *in = l ? s->act[l - 1] : x, *W = params + b->koff[l];
        size_t kb = b->koff[l], bb = kb + (size_t)d->in * d->out;
        void *gW = (char *)grad + kb * gsz;
        float *dprev = dz == s->dz[0] ? s->dz[1] : s->dz[0];
        if ((l > 0 || kernel0) && form == DR_NUMERICS_EXACT_COMPACT) {   /* n >= 1 here */
            rc = dr_gemm_cacc_fast(DR_TRANS, DR_NO_TRANS, d->in, d->out, n, in, d->in, dz, d->out, gW,
                                   DR_SEAM_FOLD_GEMM(e2), 0);   /* written whole: loss_grad zeroes around it */
            if (rc) return dr_fail(err, rc, "openmp backend: out of memory in layer %u's gradient GEMM", l);
        } else if (l > 0 || kernel0) {
            rc = dr_omp_gemm_acc(form, DR_TRANS, DR_NO_TRANS, d->in, d->out, n, in, d->in, dz, d->out, gW, 0.0f);
            if (rc) return dr_fail(err, rc, "openmp backend: out of memory in layer %u's gradient GEMM", l);
        }
        if (fast) bias_grad_f32((float *)grad + bb, dz, n, d->out);
        else if (form == DR_NUMERICS_EXACT_COMPACT) {
            if (bias_grad_compact((dr_cacc *)grad + bb, dz, n, d->out, s->colT, e2))
                return dr_fail(err, DR_ENOMEM, "openmp backend: out of memory in layer %u's bias gradient", l);
        } else bias_grad((dr_acc *)grad + bb, dz, n, d->out, s->colT);
        if (l == 0) break;
        rc = dr_omp_gemm_f32(b, DR_NO_TRANS, DR_TRANS, n, d->in, d->out, dz, d->out, W, d->out, NULL, dprev, d->in);
        if (rc) return dr_fail(err, rc, "openmp backend: out of memory in layer %u's delta GEMM", l);
        if (m->layer[l - 1].act == DR_ACT_RELU) relu_mask(dprev, s->pre[l - 1], (size_t)n * d->in);
        dz = dprev;
    }
    s->delta0 = dz;
    return DR_OK;
}

int dr_omp_loss_grad(dr_backend *b, dr_replica_bufs *rb, uint32_t n, bool kernel0, dr_err *err)
{
    const dr_numerics form = b->num;
    void *grad;
    const dr_model_spec *m = &b->m;
    uint32_t nout = m->layer[m->nlayers - 1].out;
    dr_omp_scratch *s;
    const uint8_t *labels;
    const float *targets;
    const bool fast = form == DR_NUMERICS_FAST;
    size_t esz = dr_sum_bytes(form), gsz = dr_grad_bytes(form);
    uint64_t correct = 0;
    int rc, e2;
    if ((rc = need_scratch(rb, n, err))) return rc;
    s = rb->scratch;
    if ((rc = dr_omp_need(rb->grad, b->P * gsz, "grad", err)) ||
        (rc = dr_omp_need(rb->loss, esz, "loss", err)) ||
        (rc = dr_omp_need(rb->params, b->P * sizeof(float), "params", err)))
        return rc;
    if (n > s->fwd_rows)
        return dr_fail(err, DR_EUSAGE, "openmp backend: loss over %u rows, but the last forward pass had %u",
                       n, s->fwd_rows);
    grad = rb->grad->data;
    /* exact: every accumulator zeroed, but a compact one's kernels that the
     * gradient GEMM writes whole (beta 0: n >= 1, kernel0 for layer 0);
     * fast: layer 0's kernel only when the caller forms it (every other
     * gradient is written whole below) */
    if (form == DR_NUMERICS_EXACT_COMPACT && n > 0)
        for (uint32_t l = 0; l < m->nlayers; l++) {
            size_t k0 = l > 0 || kernel0 ? b->koff[l] + b->ksz[l] : b->koff[l];
            memset((char *)grad + k0 * gsz, 0, (b->koff[l] + b->lsz[l] - k0) * gsz);
        }
    else if (!fast) memset(grad, 0, b->P * gsz);
    else if (!kernel0 || n == 0)
        memset(grad, 0, (n == 0 ? b->P : (size_t)m->layer[0].in * m->layer[0].out) * gsz);
    if (fast) *dr_omp_f32(rb->loss) = 0.0f;
    else dr_acc_init(dr_omp_acc(rb->loss));
    rb->correct = 0;
    s->grad_n = 0;
    s->folded = 1;
    s->delta0 = s->dz[0];
    if (n == 0) return DR_OK;

    labels = rb->labels ? (const uint8_t *)rb->labels->data : NULL;
    targets = dr_omp_f32(rb->targets);
    if (labels && (rc = dr_omp_need(rb->labels, n, "labels", err))) return rc;
    if (m->loss == DR_LOSS_MSE) {
        if ((rc = dr_omp_need(rb->targets, (size_t)n * nout * sizeof(float), "targets", err))) return rc;
    } else {
        if (!labels) return dr_fail(err, DR_EUSAGE, "openmp backend: a cross-entropy loss needs labels");
        for (uint32_t r = 0; r < n; r++)
            if (labels[r] >= nout)
                return dr_fail(err, DR_EUSAGE, "openmp backend: example %u has label %u, outside 0..%u",
                               r, labels[r], nout - 1);
    }
    if (kernel0 && (rc = dr_omp_need(rb->x, (size_t)n * m->layer[0].in * sizeof(float), "x", err))) return rc;

    dr_omp_loss_rows(b, s, n, labels, targets);
    if (fast) *dr_omp_f32(rb->loss) = sum_of(1, s->ex_loss, n);
    else dr_acc_add_sum(dr_omp_acc(rb->loss), s->ex_loss, n);
    for (uint32_t r = 0; r < n; r++) correct += s->hit[r];
    rb->correct = correct;
    /* The share's mult (R: 2 for two workers of multi_worker_mirrored) has
     * its power of two 2^k folded in here, as the reconstruction's exponent,
     * instead of share's pass over the P accumulators (the same words:
     * dr_gemm_cacc_fast); share multiplies by what is left. Only where every
     * accumulator is formed here (kernel0). */
    e2 = form == DR_NUMERICS_EXACT_COMPACT && kernel0 && rb->share_mult > 1 ? __builtin_ctz(rb->share_mult) : 0;
    if (e2 > 30) e2 = 0;
    rc = backward(b, s, dr_omp_f32(rb->params), kernel0 ? dr_omp_f32(rb->x) : NULL, n, kernel0, form,
                  grad, e2, err);
    if (rc == DR_OK) s->grad_n = n;
    if (rc == DR_OK) s->folded = 1u << e2;
    return rc;
}

/* ---- spatial partitioning of layer 0 -------------------------------------- */

static int check_pixels(const dr_backend *b, const uint32_t *pix, uint32_t len, dr_err *err)
{
    if (len && !pix) return dr_fail(err, DR_EUSAGE, "openmp backend: a tile of %u pixels without its list", len);
    for (uint32_t q = 0; q < len; q++)
        if (pix[q] >= b->m.layer[0].in)
            return dr_fail(err, DR_EUSAGE, "openmp backend: pixel %u of a tile is %u, outside 0..%u",
                           q, pix[q], b->m.layer[0].in - 1);
    return DR_OK;
}

int dr_omp_layer0_partial(dr_backend *b, const dr_buffer *xt, const uint32_t *pix, uint32_t len,
                          uint32_t rows, const dr_buffer *params, dr_buffer *z, dr_err *err)
{
    uint32_t out0 = b->m.layer[0].out;
    const float *W;
    float *Wt;
    int rc;
    if ((rc = check_pixels(b, pix, len, err)) ||
        (rc = dr_omp_need(xt, (size_t)rows * len * sizeof(float), "tile", err)) ||
        (rc = dr_omp_need(params, b->P * sizeof(float), "params", err)) ||
        (rc = dr_omp_need(z, (size_t)rows * out0 * dr_sum_bytes(b->num), "z", err)))
        return rc;
    if (rows == 0 || len == 0) return DR_OK;
    /* the tile's rows of the kernel, gathered: one GEMM for the tile */
    W = dr_omp_f32(params) + b->koff[0];
    if (!(Wt = malloc((size_t)len * out0 * sizeof *Wt)))
        return dr_fail(err, DR_ENOMEM, "openmp backend: out of memory for a tile's kernel rows");
    for (uint32_t q = 0; q < len; q++)
        memcpy(Wt + (size_t)q * out0, W + (size_t)pix[q] * out0, out0 * sizeof *Wt);
    rc = dr_omp_gemm_acc(b->num == DR_NUMERICS_FAST ? DR_NUMERICS_FAST : DR_NUMERICS_EXACT, DR_NO_TRANS, DR_NO_TRANS, rows, out0, len, dr_omp_f32(xt), len, Wt, out0, z->data, 1.0f);
    free(Wt);
    if (rc) return dr_fail(err, rc, "openmp backend: out of memory in a tile's GEMM");
    return DR_OK;
}

int dr_omp_layer0_finish(dr_backend *b, dr_replica_bufs *rb, const dr_buffer *z, uint32_t rows, dr_err *err)
{
    uint32_t out0 = b->m.layer[0].out;
    size_t cells = (size_t)rows * out0;
    dr_omp_scratch *s;
    const dr_acc *zz;
    const float *bias;
    int rc;
    if ((rc = need_scratch(rb, rows, err)) ||
        (rc = dr_omp_need(z, cells * dr_sum_bytes(b->num), "z", err)) ||
        (rc = dr_omp_need(rb->params, b->P * sizeof(float), "params", err)))
        return rc;
    s = rb->scratch;
    zz = dr_omp_acc(z);
    bias = dr_omp_f32(rb->params) + b->koff[0] + (size_t)b->m.layer[0].in * out0;
    if (b->num == DR_NUMERICS_FAST) {   /* the tiles' float partial sums, then the bias */
        const float *zf = dr_omp_f32(z);
        for (size_t i = 0; i < cells; i++) s->pre[0][i] = zf[i] + bias[i % out0];
    } else {
    #pragma omp parallel for schedule(static) if (cells >= PAR_MIN / 8)
    for (size_t i = 0; i < cells; i++) {
        dr_acc a = zz[i];                    /* the bias joins the exact sum: one rounding */
        dr_acc_add(&a, bias[i % out0]);
        s->pre[0][i] = dr_acc_round(&a);
    }
    }
    activate(b, s, 0, rows);
    s->fwd_rows = rows;
    return DR_OK;
}

int dr_omp_layer0_delta(dr_backend *b, dr_replica_bufs *rb, uint32_t n, float *out, dr_err *err)
{
    dr_omp_scratch *s;
    int rc;
    if ((rc = need_scratch(rb, n, err))) return rc;
    s = rb->scratch;
    if (n > s->grad_n)
        return dr_fail(err, DR_ESTATE, "openmp backend: layer 0's delta of %u rows asked, the last loss_grad had %u",
                       n, s->grad_n);
    if (n) memcpy(out, s->delta0, (size_t)n * b->m.layer[0].out * sizeof *out);
    return DR_OK;
}

int dr_omp_layer0_grad_rows(dr_backend *b, const dr_buffer *xt, const uint32_t *pix, uint32_t len,
                            uint32_t n, const dr_buffer *delta, dr_buffer *grad, dr_err *err)
{
    uint32_t out0 = b->m.layer[0].out;
    const bool fast = b->num == DR_NUMERICS_FAST;
    size_t esz = dr_sum_bytes(b->num);
    if (b->num == DR_NUMERICS_EXACT_COMPACT)
        return dr_fail(err, DR_EUNSUPPORTED, "openmp backend: layer 0's gradient rows (tpu) need full accumulators");
    char *g;
    void *tmp;
    bool run = true;
    int rc;
    if ((rc = check_pixels(b, pix, len, err)) ||
        (rc = dr_omp_need(xt, (size_t)n * len * sizeof(float), "tile", err)) ||
        (rc = dr_omp_need(delta, (size_t)n * out0 * sizeof(float), "delta", err)) ||
        (rc = dr_omp_need(grad, b->P * esz, "grad", err)))
        return rc;
    if (n == 0 || len == 0) return DR_OK;
    g = (char *)grad->data + b->koff[0] * esz;
    for (uint32_t q = 1; q < len && run; q++) run = pix[q] == pix[0] + q;
    if (run) {   /* consecutive pixels: their gradient rows are one block */
        rc = dr_omp_gemm_acc(b->num, DR_TRANS, DR_NO_TRANS, len, out0, n, dr_omp_f32(xt), len, dr_omp_f32(delta), out0,
                      g + (size_t)pix[0] * out0 * esz, 1.0f);
        return rc ? dr_fail(err, rc, "openmp backend: out of memory in a tile's gradient GEMM") : DR_OK;
    }
    /* otherwise one GEMM into a block of the tile's rows, merged row by row */
    if (!(tmp = calloc((size_t)len * out0, esz)))
        return dr_fail(err, DR_ENOMEM, "openmp backend: out of memory for a tile's gradient rows");
    rc = dr_omp_gemm_acc(b->num, DR_TRANS, DR_NO_TRANS, len, out0, n, dr_omp_f32(xt), len, dr_omp_f32(delta), out0, tmp, 0.0f);
    if (rc == DR_OK)
        for (uint32_t q = 0; q < len; q++)
            for (uint32_t j = 0; j < out0; j++) {
                size_t at = (size_t)pix[q] * out0 + j, from = (size_t)q * out0 + j;
                if (fast) ((float *)g)[at] = ((float *)g)[at] + ((const float *)tmp)[from];
                else dr_acc_merge(&((dr_acc *)g)[at], &((const dr_acc *)tmp)[from]);
            }
    free(tmp);
    return rc ? dr_fail(err, rc, "openmp backend: out of memory in a tile's gradient GEMM") : DR_OK;
}
