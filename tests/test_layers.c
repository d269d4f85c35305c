/* distref tests — the reference's layers beyond Dense (ref/layers.c, ref/bn.c,
 * ref/graph.c) against an independent computation.
 *
 * This file has its own forward pass in double, written from the layers'
 * definitions (Keras' NHWC Conv2D with TensorFlow's "same" padding, 2x2 max
 * pooling, global average pooling, BatchNormalization with the batch's
 * two-pass statistics, a layer reading an earlier layer's output (a
 * projection shortcut), Add, Dropout with the documented mask key, Dense,
 * softmax cross-entropy), not from ref/. Its summed loss is differentiated
 * by central differences in double and compared with the reference's exact
 * gradient sums (dr_model_loss_grad: one replica, replica statistics) for
 * every parameter. Forward values are compared with the double pass too.
 * Also: the max-pool gradient's tie rule (TensorFlow 2.21: the first maximum
 * in row-major order), the moving-statistics update, the shapes' refusals,
 * and a negative control (one gradient off by 1% is flagged); the mixed
 * step's float16 roundings layer by layer (test_mixed_roundings).
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
#include "distref/half.h"
#include "distref/model.h"
#include "distref/ref.h"
#include "distref/rng.h"
#include "ref/graph.h"

#define NB 3   /* examples */

/* ---- the double forward ------------------------------------------------- */

static double dropout_keep(const dr_dense *d, uint32_t l, uint32_t r, uint32_t u)
{
    if (d->rate == 0.0f) return 1.0;
    /* the documented key: (seed 0, stream 0x6000 + layer + (step 0 << 24), id * units + unit) */
    return dr_rng_uniform(0, 0x6000u + l, (uint64_t)r * d->out + u) >= d->rate ? 1.0 / (1.0 - (double)d->rate) : 0.0;
}

static void layer_d(const dr_model_spec *m, uint32_t l, const double *p, double **act, const double *x)
{
    const dr_dense *d = &m->layer[l];
    uint32_t src = d->src ? d->src : l;
    const double *in = src ? act[src] : x, *W = p + dr_model_kernel_offset(m, l), *B = p + dr_model_bias_offset(m, l);
    double *out = act[l + 1];
    for (uint32_t n = 0; n < NB; n++) {
        const double *xi = in + (size_t)n * d->in;
        double *yo = out + (size_t)n * d->out;
        if (d->kind == DR_LAYER_DENSE)
            for (uint32_t j = 0; j < d->out; j++) {
                double s = B[j];
                for (uint32_t i = 0; i < d->in; i++) s += xi[i] * W[(size_t)i * d->out + j];
                yo[j] = s;
            }
        else if (d->kind == DR_LAYER_CONV2D)
            for (uint32_t oy = 0; oy < d->oh; oy++) for (uint32_t ox = 0; ox < d->ow; ox++) for (uint32_t f = 0; f < d->oc; f++) {
                double s = B[f];
                for (uint32_t ky = 0; ky < d->ksize; ky++) for (uint32_t kx = 0; kx < d->ksize; kx++) {
                    int iy = (int)(oy * d->stride + ky) - (int)d->pad_top, ix = (int)(ox * d->stride + kx) - (int)d->pad_left;
                    if (iy < 0 || ix < 0 || iy >= (int)d->ih || ix >= (int)d->iw) continue;
                    for (uint32_t c = 0; c < d->ic; c++)
                        s += xi[((size_t)iy * d->iw + (size_t)ix) * d->ic + c] * W[(((size_t)ky * d->ksize + kx) * d->ic + c) * d->oc + f];
                }
                yo[((size_t)oy * d->ow + ox) * d->oc + f] = s;
            }
        else if (d->kind == DR_LAYER_MAX_POOL2D)
            for (uint32_t oy = 0; oy < d->oh; oy++) for (uint32_t ox = 0; ox < d->ow; ox++) for (uint32_t c = 0; c < d->oc; c++) {
                double best = -INFINITY;
                for (uint32_t k = 0; k < 4; k++) {
                    double v = xi[((size_t)(2 * oy + k / 2) * d->iw + 2 * ox + k % 2) * d->ic + c];
                    if (v > best) best = v;
                }
                yo[((size_t)oy * d->ow + ox) * d->oc + c] = best;
            }
        else if (d->kind == DR_LAYER_GLOBAL_AVG_POOL2D)
            for (uint32_t c = 0; c < d->ic; c++) {
                double s = 0;
                for (uint32_t q = 0; q < d->ih * d->iw; q++) s += xi[(size_t)q * d->ic + c];
                yo[c] = s / (d->ih * d->iw);
            }
        else if (d->kind == DR_LAYER_FLATTEN) memcpy(yo, xi, d->out * sizeof *yo);
        else if (d->kind == DR_LAYER_DROPOUT) for (uint32_t u = 0; u < d->out; u++) yo[u] = xi[u] * dropout_keep(d, l, n, u);
        else if (d->kind == DR_LAYER_ADD) {
            const double *o = (d->from < 0 ? x : act[d->from + 1]) + (size_t)n * d->in;
            for (uint32_t u = 0; u < d->out; u++) yo[u] = xi[u] + o[u];
        }
    }
    if (d->kind == DR_LAYER_BATCH_NORM) {
        size_t pix = (size_t)NB * d->ih * d->iw;
        const double *S = NULL;
        for (uint32_t c = 0; c < d->oc; c++) {
            double mean = 0, var = 0;
            for (size_t q = 0; q < pix; q++) mean += in[q * d->oc + c];
            mean /= (double)pix;
            for (size_t q = 0; q < pix; q++) var += (in[q * d->oc + c] - mean) * (in[q * d->oc + c] - mean);
            var /= (double)pix;
            for (size_t q = 0; q < pix; q++)
                out[q * d->oc + c] = (in[q * d->oc + c] - mean) / sqrt(var + 1e-3) * W[c] + B[c];
        }
        (void)S;
    }
    if (d->act == DR_ACT_RELU) for (size_t i = 0; i < (size_t)NB * d->out; i++) if (out[i] < 0) out[i] = 0;
}

static double loss_d(const dr_model_spec *m, const double *p, const double *x, const uint8_t *y, double *logits)
{
    double *act[DR_MAX_LAYERS + 1], f = 0;
    uint32_t L = m->nlayers, K = m->layer[L - 1].out;
    for (uint32_t l = 0; l < L; l++) act[l + 1] = calloc((size_t)NB * m->layer[l].out, sizeof(double));
    for (uint32_t l = 0; l < L; l++) layer_d(m, l, p, act, x);
    for (uint32_t n = 0; n < NB; n++) {
        const double *z = act[L] + (size_t)n * K;
        double mx = z[0], s = 0;
        for (uint32_t k = 1; k < K; k++) if (z[k] > mx) mx = z[k];
        for (uint32_t k = 0; k < K; k++) s += exp(z[k] - mx);
        f += log(s) - (z[y[n]] - mx);
    }
    if (logits) memcpy(logits, act[L], (size_t)NB * K * sizeof *logits);
    for (uint32_t l = 0; l < L; l++) free(act[l + 1]);
    return f;
}

/* ---- the check ---------------------------------------------------------- */

/* Returns the number of parameters whose reference gradient disagrees. */
static int check_model(dr_model_spec *m, int corrupt)
{
    dr_err err = { 0 };
    assert_int_equal(dr_model_derive(m, &err), DR_OK);
    size_t P = dr_model_num_params(m), in = m->layer[0].in;
    uint32_t L = m->nlayers, K = m->layer[L - 1].out;
    float *pf = malloc(P * sizeof *pf), *xf = malloc(NB * in * sizeof *xf), *g = malloc(P * sizeof *g);
    double *pd = malloc(P * sizeof *pd), *xd = malloc(NB * in * sizeof *xd), *logits = malloc(NB * K * sizeof *logits);
    dr_acc *grad = calloc(P, sizeof *grad), loss;
    uint8_t y[NB] = { 1, 0, 2 };
    dr_work w;
    int bad = 0;
    dr_model_init(m, 7, pf);
    for (size_t i = 0; i < dr_model_num_trainable(m); i++)   /* biases, gamma, beta away from 0 and 1 */
        pf[i] += 0.25f * (dr_rng_uniform(3, 0x7b00, i) - 0.5f);
    for (size_t i = 0; i < NB * in; i++) xf[i] = 2.0f * dr_rng_uniform(3, 0x7b01, i) - 1.0f;
    for (size_t i = 0; i < P; i++) pd[i] = pf[i];
    for (size_t i = 0; i < NB * in; i++) xd[i] = xf[i];
    assert_int_equal(dr_work_init(&w, m, NB, &err), DR_OK);
    dr_acc_init(&loss);
    dr_model_loss_grad(m, dr_model_ops_ref(), pf, xf, y, NULL, NB, &w, &loss, grad, NULL);
    dr_acc_round_array(grad, P, 1, g);
    if (corrupt >= 0) g[corrupt] *= 1.01f;
    {   /* forward: the logits, and the loss */
        double f = loss_d(m, pd, xd, y, logits);
        for (size_t i = 0; i < (size_t)NB * K; i++)
            assert_true(fabs(w.pre[L - 1][i] - logits[i]) <= 1e-5 * (1 + fabs(logits[i])));
        assert_true(fabs(dr_acc_round(&loss) - f) <= 1e-5 * (1 + fabs(f)));
    }
    for (size_t i = 0; i < dr_model_num_trainable(m); i++) {
        double h = 1e-6, keep = pd[i], fp, fm, fd;
        pd[i] = keep + h; fp = loss_d(m, pd, xd, y, NULL);
        pd[i] = keep - h; fm = loss_d(m, pd, xd, y, NULL);
        pd[i] = keep;
        fd = (fp - fm) / (2 * h);
        if (fabs(g[i] - fd) > 2e-4 + 2e-4 * fabs(fd)) {
            if (corrupt < 0) fprintf(stderr, "param %zu: reference %.9g, finite differences %.9g\n", i, g[i], fd);
            bad++;
        }
    }
    for (size_t i = dr_model_num_trainable(m); i < P; i++) assert_true(g[i] == 0.0f);   /* the state */
    dr_work_free(&w);
    free(pf); free(xf); free(g); free(pd); free(xd); free(logits); free(grad);
    return bad;
}

static dr_model_spec conv_model(void)
{
    dr_model_spec m = { .nlayers = 7, .loss = DR_LOSS_XENT_LOGITS, .in_h = 5, .in_w = 5, .in_c = 2,
        .layer = { { .kind = DR_LAYER_CONV2D, .filters = 3, .ksize = 3, .stride = 1, .same = true },
                   { .kind = DR_LAYER_BATCH_NORM },
                   { .kind = DR_LAYER_ADD, .from = 0 },
                   { .kind = DR_LAYER_CONV2D, .filters = 2, .ksize = 3, .stride = 2 },
                   { .kind = DR_LAYER_MAX_POOL2D },
                   { .kind = DR_LAYER_FLATTEN },
                   { .kind = DR_LAYER_DENSE, .out = 3 } } };
    return m;
}

static void test_conv_bn_add_pool(void **state)
{
    dr_model_spec m = conv_model();
    (void)state;
    assert_int_equal(check_model(&m, -1), 0);
}

static void test_strided_same_gap_dropout(void **state)
{
    dr_model_spec m = { .nlayers = 6, .loss = DR_LOSS_XENT_LOGITS, .in_h = 6, .in_w = 5, .in_c = 2,
        .layer = { { .kind = DR_LAYER_CONV2D, .filters = 4, .ksize = 3, .stride = 2, .same = true },
                   { .kind = DR_LAYER_CONV2D, .filters = 3, .ksize = 1, .stride = 1 },
                   { .kind = DR_LAYER_BATCH_NORM },
                   { .kind = DR_LAYER_GLOBAL_AVG_POOL2D },
                   { .kind = DR_LAYER_DROPOUT, .rate = 0.4f },
                   { .kind = DR_LAYER_DENSE, .out = 3 } } };
    (void)state;
    assert_int_equal(check_model(&m, -1), 0);
    assert_int_equal(m.layer[0].oh, 3);   /* ceil(6 / 2) */
    assert_int_equal(m.layer[0].ow, 3);
    assert_int_equal(m.layer[0].pad_top, 0);    /* TensorFlow: (3-1)*2 + 3 - 6 = 1 row, at the bottom */
    assert_int_equal(m.layer[0].pad_left, 1);   /* (3-1)*2 + 3 - 5 = 2 columns, one each side */
}

/* A branch (a ResNet's projection shortcut): layer 3 reads layer 0's output. */
static void test_projection_branch(void **state)
{
    dr_model_spec m = { .nlayers = 7, .loss = DR_LOSS_XENT_LOGITS, .in_h = 4, .in_w = 4, .in_c = 2,
        .layer = { { .kind = DR_LAYER_CONV2D, .filters = 2, .ksize = 3, .stride = 1, .same = true, .act = DR_ACT_LINEAR },
                   { .kind = DR_LAYER_CONV2D, .filters = 3, .ksize = 1, .stride = 2, .same = true },
                   { .kind = DR_LAYER_BATCH_NORM },
                   { .kind = DR_LAYER_CONV2D, .filters = 3, .ksize = 3, .stride = 2, .same = true, .src = 1 },
                   { .kind = DR_LAYER_ADD, .from = 2 },
                   { .kind = DR_LAYER_GLOBAL_AVG_POOL2D },
                   { .kind = DR_LAYER_DENSE, .out = 3 } } };
    (void)state;
    assert_int_equal(check_model(&m, -1), 0);
    assert_int_equal(m.layer[3].ih, 4);
    assert_int_equal(m.layer[3].oh, 2);
}

static void test_negative_control(void **state)
{
    dr_model_spec m = conv_model();
    (void)state;
    assert_int_equal(check_model(&m, 5), 1);
}

/* TensorFlow 2.21: a tie's gradient goes to the first maximum in row-major order. */
static void test_pool_tie(void **state)
{
    dr_model_spec m = { .nlayers = 3, .loss = DR_LOSS_XENT_LOGITS, .in_h = 2, .in_w = 2, .in_c = 1,
        .layer = { { .kind = DR_LAYER_MAX_POOL2D }, { .kind = DR_LAYER_FLATTEN }, { .kind = DR_LAYER_DENSE, .out = 2 } } };
    dr_err err = { 0 };
    float x[4] = { 0.0f, 2.0f, 2.0f, 1.0f }, p[4] = { 1.0f, -1.0f, 0.0f, 0.0f };
    dr_work w;
    (void)state;
    assert_int_equal(dr_model_derive(&m, &err), DR_OK);
    assert_int_equal(dr_work_init(&w, &m, 1, &err), DR_OK);
    dr_model_forward(&m, dr_model_ops_ref(), p, x, 1, &w);
    assert_int_equal(w.idx[0][0], 1);
    x[0] = x[1] = x[2] = x[3] = 1.0f;
    dr_model_forward(&m, dr_model_ops_ref(), p, x, 1, &w);
    assert_int_equal(w.idx[0][0], 0);
    dr_work_free(&w);
}

/* TensorFlow 2.21's BatchNormalization (scripts/tf_layer_probe.py, docs/MODELS.md):
 * 8 values 3000 + N(0,1) (numpy default_rng(1)), split 4 + 4 over 2 replicas,
 * one training step from moving mean 0, variance 1. TF measured:
 *   R=1 (two-pass)              moving_mean 30.001987  moving_variance 0.99491304
 *   synchronized, R=2 (E[x2]-E[x]2) moving_mean 30.001987  moving_variance 1.0
 *   replica R=2: replica 0's update, moving_variance 0.99648124 */
static void bn_state(uint32_t R, bool sync, float *mm, float *mv)
{
    static const float x[8] = { 0x1.770b1p+11f, 0x1.771a4ap+11f, 0x1.770a92p+11f, 0x1.76d64cp+11f,
                                0x1.771cf8p+11f, 0x1.770e48p+11f, 0x1.76eed2p+11f, 0x1.771298p+11f };
    dr_model_spec m = { .nlayers = 2, .loss = DR_LOSS_XENT_LOGITS, .in_h = 1, .in_w = 1, .in_c = 1,
        .layer = { { .kind = DR_LAYER_BATCH_NORM }, { .kind = DR_LAYER_DENSE, .out = 2 } } };
    dr_err err = { 0 };
    float p[16], state[2];
    uint8_t y[8] = { 0 };
    dr_work w[2];
    dr_acc loss[2], grad[2][16];
    uint64_t correct[2] = { 0, 0 };
    dr_graph_replica rp[2];
    assert_int_equal(dr_model_derive(&m, &err), DR_OK);
    assert_int_equal(dr_model_num_params(&m), 8);
    dr_model_init(&m, 1, p);
    memcpy(state, p + dr_model_num_trainable(&m), sizeof state);
    dr_graph_ctx g = { &m, dr_model_ops_ref(), true, sync, 0, 1, state, NULL, NULL, NULL, DR_DTYPE_F32, 0.0f, 0 };
    memset(grad, 0, sizeof grad);
    for (uint32_t r = 0; r < R; r++) {
        uint32_t n = 8 / R;
        assert_int_equal(dr_work_init(&w[r], &m, n, &err), DR_OK);
        dr_acc_init(&loss[r]);
        rp[r] = (dr_graph_replica){ p, x + r * n, y, NULL, NULL, n, &w[r], &loss[r], grad[r], &correct[r], 0, 0 };
    }
    dr_graph_loss_grad(&g, rp, R);
    for (uint32_t r = 0; r < R; r++) dr_work_free(&w[r]);
    *mm = state[0];
    *mv = state[1];
}

static void test_bn_tensorflow(void **st)
{
    float mm, mv;
    (void)st;
    bn_state(1, false, &mm, &mv);
    assert_true(mm == 30.001987f && mv == 0.99491304f);
    bn_state(2, true, &mm, &mv);
    assert_true(mm == 30.001987f && mv == 1.0f);
    bn_state(1, true, &mm, &mv);   /* sync at R = 1: the one-pass formula still */
    assert_true(mv == 1.0f);
    bn_state(2, false, &mm, &mv);
    assert_true(mv == 0.99648124f);   /* replica 0's: its two-pass variance 0.64812195 */
    assert_true(fabsf(mm - 30.000483f) <= 4e-6f);   /* TF's float32 mean of the half is 2 ulp off the exact one */
}

/* The mixed step's roundings (ref/mixed_graph.c, docs/TRAINING_FEATURES.md
 * "Mixed precision with the models beyond Dense", measured in TensorFlow
 * 2.21): from float16 inputs and Conv2D/Dense parameters, each layer's
 * pre-activation against the double pass of that layer on the reference's
 * own input maps: Conv2D RN16(RN16(conv) + b), Dense RN16(x W + b), GAP
 * RN16(mean), Add RN16(a + b), Dropout RN16(x RN16(1 / (1 - rate))),
 * MaxPool the maximum, BatchNormalization the float32 layer cast to float16
 * (within float16's rounding of the double one); and every map's gradient
 * (the loss's delta with the scale and 1 / G inside, each layer's input
 * gradient, a fork's sum) a float16 value. */
static float rn16(double v) { return dr_round_to_dtype((float)v, DR_DTYPE_F16); }
static bool is16(float v) { return rn16(v) == v; }

static double expect_mixed(const dr_model_spec *m, uint32_t l, const double *pd, double **act, const double *x,
                           size_t i, double *zero_bias)
{
    const dr_dense *d = &m->layer[l];
    dr_model_spec lin = *m;
    lin.layer[l].act = DR_ACT_LINEAR;
    if (d->kind == DR_LAYER_CONV2D) {   /* the convolution alone, then its bias in float16 */
        double b = pd[dr_model_bias_offset(m, l) + i % d->oc];
        layer_d(&lin, l, zero_bias, act, x);
        return rn16((double)rn16(act[l + 1][i]) + b);
    }
    layer_d(&lin, l, pd, act, x);
    if (d->kind == DR_LAYER_DROPOUT) {
        const double *in = d->src ? act[d->src] : act[l];
        float keep = rn16(1.0 / (1.0 - (double)d->rate));
        return act[l + 1][i] == 0.0 ? 0.0 : rn16(in[i] * keep);
    }
    return d->kind == DR_LAYER_BATCH_NORM ? act[l + 1][i] : rn16(act[l + 1][i]);
}

static void check_mixed(dr_model_spec *m)
{
    dr_err err = { 0 };
    assert_int_equal(dr_model_derive(m, &err), DR_OK);
    size_t P = dr_model_num_params(m), in = m->layer[0].in;
    uint32_t L = m->nlayers;
    float *pf = malloc(P * sizeof *pf), *xf = malloc(NB * in * sizeof *xf);
    double *pd = malloc(P * sizeof *pd), *zb = malloc(P * sizeof *zb), *xd = malloc(NB * in * sizeof *xd);
    double *act[DR_MAX_LAYERS + 1];
    dr_acc *grad = calloc(P, sizeof *grad), loss;
    uint8_t y[NB] = { 1, 0, 2 };
    uint64_t correct = 0;
    dr_work w;
    dr_model_init(m, 7, pf);
    for (size_t i = 0; i < dr_model_num_trainable(m); i++) pf[i] += 0.25f * (dr_rng_uniform(3, 0x7b00, i) - 0.5f);
    for (uint32_t l = 0; l < L; l++)   /* Conv2D's and Dense's parameters in float16, BN's float32 */
        for (size_t i = dr_model_kernel_offset(m, l); m->layer[l].kind != DR_LAYER_BATCH_NORM &&
             i < dr_model_kernel_offset(m, l) + dr_model_layer_params(m, l); i++)
            pf[i] = rn16(pf[i]);
    for (size_t i = 0; i < NB * in; i++) xf[i] = rn16(2.0f * dr_rng_uniform(3, 0x7b01, i) - 1.0f);
    for (size_t i = 0; i < P; i++) pd[i] = pf[i];
    for (size_t i = 0; i < P; i++) zb[i] = pd[i];
    for (uint32_t l = 0; l < L; l++)
        if (m->layer[l].kind == DR_LAYER_CONV2D)
            for (uint32_t c = 0; c < m->layer[l].oc; c++) zb[dr_model_bias_offset(m, l) + c] = 0.0;
    for (size_t i = 0; i < NB * in; i++) xd[i] = xf[i];
    assert_int_equal(dr_work_init(&w, m, NB, &err), DR_OK);
    dr_acc_init(&loss);
    dr_graph_ctx g = { m, dr_model_ops_ref(), true, false, 0, 0, NULL, NULL, NULL, NULL, DR_DTYPE_F16,
                       1024.0f, NB };
    dr_graph_replica rp = { pf, xf, y, NULL, NULL, NB, &w, &loss, grad, &correct, 0, 0 };
    dr_graph_loss_grad(&g, &rp, 1);
    for (uint32_t l = 0; l < L; l++) act[l + 1] = malloc((size_t)NB * m->layer[l].out * sizeof(double));
    for (uint32_t l = 0; l < L; l++) {
        size_t n = (size_t)NB * m->layer[l].out;
        for (uint32_t k = 1; k <= l; k++)   /* the reference's own input maps */
            for (size_t i = 0; i < (size_t)NB * m->layer[k - 1].out; i++) act[k][i] = w.act[k][i];
        for (size_t i = 0; i < n; i++) {
            double want = expect_mixed(m, l, pd, act, xd, i, zb), got = w.pre[l][i];
            bool ok = is16(w.pre[l][i]) && is16(w.act[l + 1][i]) &&
                      (m->layer[l].kind == DR_LAYER_BATCH_NORM ? fabs(got - want) <= 1e-3 * (1 + fabs(want))
                                                                : got == want);
            if (!ok) fail_msg("layer %u (kind %d) element %zu: %.9g, want %.9g", l, (int)m->layer[l].kind, i, got, want);
        }
    }
    for (uint32_t k = 1; k <= L; k++)
        for (size_t i = 0; i < (size_t)NB * m->layer[k - 1].out; i++)
            if (!is16(w.dact[k][i])) fail_msg("d(loss)/d(map %u)[%zu] = %.9g is not a float16", k, i, w.dact[k][i]);
    for (uint32_t l = 0; l < L; l++) free(act[l + 1]);
    dr_work_free(&w);
    free(pf); free(xf); free(pd); free(zb); free(xd); free(grad);
}

static void test_mixed_roundings(void **state)
{
    dr_model_spec a = conv_model(), b = { .nlayers = 6, .loss = DR_LOSS_XENT_LOGITS, .in_h = 6, .in_w = 5, .in_c = 2,
        .layer = { { .kind = DR_LAYER_CONV2D, .filters = 4, .ksize = 3, .stride = 2, .same = true },
                   { .kind = DR_LAYER_CONV2D, .filters = 3, .ksize = 1, .stride = 1 },
                   { .kind = DR_LAYER_BATCH_NORM },
                   { .kind = DR_LAYER_GLOBAL_AVG_POOL2D },
                   { .kind = DR_LAYER_DROPOUT, .rate = 0.4f },
                   { .kind = DR_LAYER_DENSE, .out = 3 } } };
    (void)state;
    check_mixed(&a);
    check_mixed(&b);
}

static void refused(dr_model_spec m, const char *want)
{
    dr_err err = { 0 };
    assert_int_equal(dr_model_derive(&m, &err), DR_EUSAGE);
    if (!strstr(err.msg, want)) fail_msg("'%s' does not name '%s'", err.msg, want);
}

static void test_shapes_refused(void **state)
{
    dr_model_spec m = conv_model();
    (void)state;
    m.layer[3].ksize = 3; m.in_h = 2; m.in_w = 2;
    refused(m, "layer 3 (conv2d): input 2x2 is smaller than its 3x3 kernel");
    m = conv_model(); m.layer[0].stride = 3;
    refused(m, "layer 0 (conv2d): stride must be 1 or 2");
    m = conv_model(); m.layer[2].from = 1;
    refused(m, "layer 2 (add): from must name an earlier layer");
    m = conv_model(); m.layer[5].kind = DR_LAYER_DROPOUT; m.layer[5].rate = 1.0f;
    refused(m, "layer 5 (dropout): rate 1 is outside [0, 1)");
    m = conv_model(); m.layer[5].kind = DR_LAYER_GLOBAL_AVG_POOL2D; m.layer[6].in = 7;
    refused(m, "layer 6 (dense): input width 7, but the layer below gives 2");
    m = conv_model(); m.layer[4].kind = DR_LAYER_BATCH_NORM; m.layer[5].kind = DR_LAYER_BATCH_NORM;
    refused(m, "layer 6 (dense): input is a 2x2x2 feature map; flatten it first");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_bn_add_pool),
        cmocka_unit_test(test_strided_same_gap_dropout),
        cmocka_unit_test(test_projection_branch),
        cmocka_unit_test(test_negative_control),
        cmocka_unit_test(test_pool_tie),
        cmocka_unit_test(test_bn_tensorflow),
        cmocka_unit_test(test_shapes_refused),
        cmocka_unit_test(test_mixed_roundings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
