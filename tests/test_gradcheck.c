/* distref tests — the reference's backward pass against finite differences.
 *
 * dr_model_loss_grad (ref/model_math.c) returns the exact sum over a batch of the
 * per-example losses and gradients, each computed in float32. This file has
 * its own forward pass, independent of ref/: plain double loops, z = x W + b,
 * ReLU or linear, then softmax cross-entropy on logits (log-sum-exp shifted
 * by the max) or MSE. The summed loss f is differentiated numerically by
 * central differences (f(w+h) - f(w-h)) / 2h, in double, for every bias and
 * a sample of kernel entries of every layer, and compared with the
 * reference's gradient sums rounded once (dr_acc_round_array).
 *
 * Models: 12-8-5 ReLU + logits, 10-9-7-4 ReLU + logits (deltas through two
 * ReLUs), the Dense(1) 6-1 linear MSE toy, 784-128-10 ReLU + logits on a
 * few examples. A parameter whose +-h perturbation changes the sign of any
 * ReLU pre-activation (a kink, where f is not differentiable) is skipped;
 * the double pass detects that. A negative control scales one reference
 * gradient by 1.01 and requires the same check to flag exactly that one.
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
#include "distref/model.h"
#include "distref/ref.h"
#include "distref/rng.h"

#define SEED          20240611u
#define STREAM_X      0x7a00u   /* test-local streams of SEED */
#define STREAM_Y      0x7a01u
#define STREAM_BIAS   0x7a02u
#define STREAM_PICK   0x7a10u   /* + layer */

/* Step: h = H_REL * max(1, |w|), in double. Truncation error of the central
 * difference is ~h^2 |f'''| / 6 ~ 1e-9 relative; its cancellation error is
 * ~1e-16 |f| / h ~ 1e-11 for |f| ~ 40. So FD is the exact derivative of the
 * double function to ~1e-8: whatever disagreement remains is the
 * reference's float32 arithmetic.
 *
 * Tolerance: |fd - g| <= RTOL * max(|fd|, |g|) + ATOL_PER_EX * b.
 * The reference rounds every pre-activation, activation, softmax term,
 * dz = p - onehot and back-propagated delta to float32 (2^-24 = 6e-8
 * relative each, a handful in sequence per example and layer); only the sum
 * over examples is exact. So each example's contribution is off by a few
 * float32 ulps of its own size, which is O(1) here (|dz| <= 1 for logits,
 * inputs in [-1, 1), activations O(1)): ~1e-7 absolute per example. The sum
 * over b examples can cancel to far less than its terms, so the absolute
 * part grows with b, and a relative part covers large sums. Observed (the
 * printed summaries): at most 4e-8 absolute per example and 4e-7 relative
 * (on gradients >= REL_FLOOR per example). ATOL_PER_EX = 3e-7 (5 ulps of 1)
 * and RTOL = 1e-5 leave ~8x and ~25x headroom on each part (no parameter
 * uses more than 2% of its tolerance); a 1% error in a gradient (the
 * negative control) is 1000x RTOL, and even FD's own truncation error at
 * h = 3e-2 (~1e-4 relative) exceeds it. */
#define H_REL        1e-4
#define RTOL         1e-5
#define ATOL_PER_EX  3e-7
#define REL_FLOOR    1e-2    /* |gradient| per example above which relative error is reported */
#define KERNEL_PICKS 200     /* kernel entries per model, spread over the layers */

typedef struct gc_case {
    const char   *name;
    dr_model_spec m;
    uint32_t      b;
} gc_case;

typedef struct gc_stats {
    size_t checked, skipped, mismatches, last_bad, nrel;
    double max_rel, max_abs, max_use;
} gc_stats;

/* ---- the independent double forward pass --------------------------------- */

/* Summed loss over b examples. pat, when not NULL, gets one byte per ReLU
 * unit per example: whether its pre-activation is > 0. scratch: 2 * widest. */
static double dforward(const dr_model_spec *m, const double *p, const float *x, const uint8_t *labels,
                       const float *targets, uint32_t b, uint8_t *pat, double *scratch, size_t widest)
{
    double total = 0.0;
    size_t npat = 0;
    for (uint32_t r = 0; r < b; r++) {
        double *a = scratch, *z = scratch + widest;
        uint32_t in0 = m->layer[0].in, n;
        for (uint32_t i = 0; i < in0; i++) a[i] = x[(size_t)r * in0 + i];
        for (uint32_t l = 0; l < m->nlayers; l++) {
            const dr_dense *d = &m->layer[l];
            const double *W = p + dr_model_kernel_offset(m, l), *bias = p + dr_model_bias_offset(m, l);
            double *t;
            for (uint32_t j = 0; j < d->out; j++) {
                double s = bias[j];
                for (uint32_t i = 0; i < d->in; i++) s += a[i] * W[(size_t)i * d->out + j];
                if (d->act == DR_ACT_RELU) {
                    if (pat) pat[npat] = s > 0.0;
                    npat++;
                    if (!(s > 0.0)) s = 0.0;
                }
                z[j] = s;
            }
            t = a; a = z; z = t;   /* a = this layer's output */
        }
        n = m->layer[m->nlayers - 1].out;
        if (m->loss == DR_LOSS_XENT_LOGITS) {
            double mx = a[0], s = 0.0;
            for (uint32_t j = 1; j < n; j++) if (a[j] > mx) mx = a[j];
            for (uint32_t j = 0; j < n; j++) s += exp(a[j] - mx);
            total += log(s) - (a[labels[r]] - mx);
        } else {
            double s = 0.0;
            for (uint32_t j = 0; j < n; j++) {
                double e = a[j] - targets[(size_t)r * n + j];
                s += e * e;
            }
            total += s / n;
        }
    }
    return total;
}

/* ---- the comparison -------------------------------------------------------- */

/* True when the analytic gradient g agrees with the finite difference fd for
 * a batch of b examples; *use gets the share of the tolerance used,
 * |fd - g| / (RTOL * max(|fd|, |g|) + ATOL_PER_EX * b), <= 1 when they agree. */
static bool grad_close(double fd, double g, uint32_t b, double *use)
{
    double diff = fabs(fd - g), allowed = RTOL * fmax(fabs(fd), fabs(g)) + ATOL_PER_EX * b;
    *use = diff / allowed;
    return diff <= allowed;
}

/* Runs one model. tamper: scale the largest checked reference gradient by
 * 1.01 (in a copy) before comparing, for the negative control; its index is
 * returned in *tampered. */
static void check_case(const gc_case *c, gc_stats *st, bool tamper, size_t *tampered)
{
    const dr_model_spec *m = &c->m;
    const uint32_t L = m->nlayers, in0 = m->layer[0].in, nout = m->layer[L - 1].out, b = c->b;
    size_t P = dr_model_num_params(m), widest = in0, nrelu = 0, nidx = 0, *idx;
    float *params = malloc(P * sizeof *params), *g = malloc(P * sizeof *g);
    float *x = malloc((size_t)b * in0 * sizeof *x), *targets = NULL;
    uint8_t *labels = NULL, *pat0, *pat1;
    double *pd = malloc(P * sizeof *pd), *scratch, f0;
    dr_acc *gacc = calloc(P, sizeof *gacc), loss;
    dr_work w;
    dr_err e;
    uint64_t correct = 0;

    assert_non_null(params); assert_non_null(g); assert_non_null(x); assert_non_null(pd); assert_non_null(gacc);
    for (uint32_t l = 0; l < L; l++) {
        if (m->layer[l].out > widest) widest = m->layer[l].out;
        if (m->layer[l].act == DR_ACT_RELU) nrelu += m->layer[l].out;
    }
    /* Glorot kernels, biases uniform in +-[0.05, 0.2) so that no ReLU input
     * sits at an exact 0; inputs uniform in [-1, 1). */
    dr_model_init(m, SEED, params);
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t j = 0; j < m->layer[l].out; j++) {
            float u = dr_rng_uniform(SEED, STREAM_BIAS, dr_model_bias_offset(m, l) + j);
            params[dr_model_bias_offset(m, l) + j] = (u < 0.5f ? -1.0f : 1.0f) * (0.05f + 0.3f * fabsf(u - 0.5f));
        }
    for (size_t i = 0; i < (size_t)b * in0; i++) x[i] = 2.0f * dr_rng_uniform(SEED, STREAM_X, i) - 1.0f;
    if (m->loss == DR_LOSS_MSE) {
        targets = malloc((size_t)b * nout * sizeof *targets);
        assert_non_null(targets);
        for (size_t i = 0; i < (size_t)b * nout; i++) targets[i] = 2.0f * dr_rng_uniform(SEED, STREAM_Y, i) - 1.0f;
    } else {
        labels = malloc(b);
        assert_non_null(labels);
        for (uint32_t r = 0; r < b; r++) labels[r] = (uint8_t)dr_rng_below(SEED, STREAM_Y, r, nout);
    }

    /* The reference: exact sums, rounded once. */
    assert_int_equal(dr_work_init(&w, m, b, &e), DR_OK);
    dr_acc_init(&loss);
    dr_model_loss_grad(m, dr_model_ops_ref(), params, x, labels, targets, b, &w, &loss, gacc, &correct);
    dr_acc_round_array(gacc, P, 1, g);
    dr_work_free(&w);

    /* The sample: every bias, and KERNEL_PICKS kernel entries shared evenly
     * by the layers (all of a layer's when it has fewer): one drawn at random
     * in each of `per` equal strides of the layer's kernel. */
    idx = malloc((P + KERNEL_PICKS) * sizeof *idx);
    assert_non_null(idx);
    for (uint32_t l = 0; l < L; l++) {
        size_t nk = (size_t)m->layer[l].in * m->layer[l].out, k0 = dr_model_kernel_offset(m, l);
        size_t per = KERNEL_PICKS / L;
        if (nk <= per) for (size_t k = 0; k < nk; k++) idx[nidx++] = k0 + k;
        else for (size_t k = 0; k < per; k++)
            idx[nidx++] = k0 + k * nk / per + dr_rng_below(SEED, STREAM_PICK + l, k, (uint32_t)(nk / per));
        for (uint32_t j = 0; j < m->layer[l].out; j++) idx[nidx++] = dr_model_bias_offset(m, l) + j;
    }

    scratch = malloc(2 * widest * sizeof *scratch);
    pat0 = malloc(nrelu * b + 1); pat1 = malloc(nrelu * b + 1);
    assert_non_null(scratch); assert_non_null(pat0); assert_non_null(pat1);
    for (size_t p = 0; p < P; p++) pd[p] = params[p];
    f0 = dforward(m, pd, x, labels, targets, b, pat0, scratch, widest);
    /* The losses agree too, to the float32 forward's accuracy. */
    assert_true(fabs(f0 - dr_acc_round(&loss)) <= 1e-5 * fmax(1.0, fabs(f0)));

    if (tamper) {   /* the largest checked gradient, wrong by 1% */
        size_t best = idx[0];
        for (size_t k = 1; k < nidx; k++) if (fabsf(g[idx[k]]) > fabsf(g[best])) best = idx[k];
        g[best] *= 1.01f;
        *tampered = best;
    }

    memset(st, 0, sizeof *st);
    for (size_t k = 0; k < nidx; k++) {
        size_t p = idx[k];
        double w0 = pd[p], h = H_REL * fmax(1.0, fabs(w0)), fp, fm, fd, use, diff, mag;
        bool kink;
        pd[p] = w0 + h;
        fp = dforward(m, pd, x, labels, targets, b, pat1, scratch, widest);
        kink = memcmp(pat0, pat1, nrelu * b) != 0;
        pd[p] = w0 - h;
        fm = dforward(m, pd, x, labels, targets, b, pat1, scratch, widest);
        kink = kink || memcmp(pat0, pat1, nrelu * b) != 0;
        pd[p] = w0;
        if (kink) { st->skipped++; continue; }
        fd = (fp - fm) / (2.0 * h);
        diff = fabs(fd - g[p]); mag = fmax(fabs(fd), fabs(g[p]));
        st->checked++;
        if (!grad_close(fd, g[p], b, &use)) {
            st->mismatches++;
            st->last_bad = p;
            if (!tamper) print_error("%s: param %zu: fd %.9g ref %.9g (%.3g of the tolerance)\n",
                                     c->name, p, fd, (double)g[p], use);
        }
        if (use > st->max_use) st->max_use = use;
        if (diff > st->max_abs) st->max_abs = diff;
        if (mag >= REL_FLOOR * b) {
            st->nrel++;
            if (diff / mag > st->max_rel) st->max_rel = diff / mag;
        }
    }
    printf("gradcheck %-20s %6zu params: %3zu checked, %zu skipped (kinks), %zu mismatched%s;"
           " max rel %.2e (of %zu), max abs %.2e (%.2e/example), max %.3f of the tolerance\n",
           c->name, P, st->checked, st->skipped, st->mismatches, tamper ? " [tampered]" : "",
           st->max_rel, st->nrel, st->max_abs, st->max_abs / b, st->max_use);

    free(params); free(g); free(x); free(targets); free(labels); free(pd); free(gacc);
    free(idx); free(scratch); free(pat0); free(pat1);
}

/* ---- cases ------------------------------------------------------------------- */

static const gc_case MLP_SMALL = {
    "12-8-5 relu xent", { .nlayers = 2, .layer = { { .in = 12, .out = 8, .act = DR_ACT_RELU }, { .in = 8, .out = 5, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_XENT_LOGITS, .l2 = 0.0f }, 16 };
static const gc_case MLP_DEEP = {
    "10-9-7-4 relu xent",
    { .nlayers = 3, .layer = { { .in = 10, .out = 9, .act = DR_ACT_RELU }, { .in = 9, .out = 7, .act = DR_ACT_RELU }, { .in = 7, .out = 4, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_XENT_LOGITS, .l2 = 0.0f }, 16 };
static const gc_case LINEAR_MSE = {
    "6-1 linear mse", { .nlayers = 1, .layer = { { .in = 6, .out = 1, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_MSE, .l2 = 0.0f }, 16 };
static const gc_case MNIST_SHAPE = {
    "784-128-10 relu xent", { .nlayers = 2, .layer = { { .in = 784, .out = 128, .act = DR_ACT_RELU }, { .in = 128, .out = 10, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_XENT_LOGITS, .l2 = 0.0f }, 4 };

static void run_ok(const gc_case *c, size_t min_checked)
{
    gc_stats st;
    check_case(c, &st, false, NULL);
    assert_int_equal(st.mismatches, 0);
    assert_true(st.checked >= min_checked);
}

static void small_mlp_xent(void **state)  { (void)state; run_ok(&MLP_SMALL, 130); }
static void deep_mlp_xent(void **state)   { (void)state; run_ok(&MLP_DEEP, 150); }
static void linear_mse(void **state)      { (void)state; run_ok(&LINEAR_MSE, 7); }
static void mnist_shape_xent(void **state) { (void)state; run_ok(&MNIST_SHAPE, 300); }

/* The check can fail: one gradient 1% wrong is flagged, and only that one. */
static void negative_control(void **state)
{
    gc_stats st;
    size_t bad = 0;
    (void)state;
    check_case(&MLP_SMALL, &st, true, &bad);
    assert_int_equal(st.mismatches, 1);
    assert_int_equal(st.last_bad, bad);
    check_case(&MNIST_SHAPE, &st, true, &bad);
    assert_int_equal(st.mismatches, 1);
    assert_int_equal(st.last_bad, bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_mlp_xent),
        cmocka_unit_test(deep_mlp_xent),
        cmocka_unit_test(linear_mse),
        cmocka_unit_test(mnist_shape_xent),
        cmocka_unit_test(negative_control),
    };
    return cmocka_run_group_tests_name("gradcheck", tests, NULL, NULL);
}
