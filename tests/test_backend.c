/* distref tests — the OpenMP backend (devices/openmp_*.c) against the
 * reference (ref/model_math.c, ref/optim.c), bit for bit in exact numerics.
 *
 * Each case computes one replica's share (forward, loss_grad, share) or a
 * whole training run (share, all-reduce by merging, apply) with both, and
 * compares every accumulator with dr_acc_equal and every float by its bits:
 * 784-128-10 ReLU + logits, 784-128-10 softmax + probabilities (also
 * saturated, so that the clip acts), 784-64-32-10, the Dense(1) MSE toy and
 * a small MSE net; l2 0 and 1e-3; R 1 and 3 with G 20; padding rows holding
 * NaN, inf and huge values; n == 0; examples whose ReLU inputs are exactly
 * 0; SGD, momentum, Nesterov and Adam for 7 steps (R = 3 against the
 * reference, and against R = 1); layer 0 partitioned into 2x2 and 4x1 tiles
 * of the 28x28 image. Fast numerics (float grad and loss, already scaled by
 * share): loss within 1e-4 relative of exact, every gradient within 1e-4
 * relative (plus 1e-6 of the largest), R = 1 and R = 3 with L2; fast
 * apply bit for bit against the reference's optimizer on float gradients.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distref/backend.h"
#include "distref/ref.h"
#include "distref/rng.h"
#include "devices/cpu/openmp_backend.h"   /* the replica workspace, to read activations */
#include "devices/cpu/openmp_graph.h"     /* the engine's max pooling */

#define SEED 20240607u

static const dr_optimizer SGD = { DR_OPT_SGD, 0.1f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 };

static dr_model_spec mlp(dr_activation last, dr_loss_kind loss, float l2)
{
    dr_model_spec m = { .nlayers = 2, .layer = { { .in = 784, .out = 128, .act = DR_ACT_RELU }, { .in = 128, .out = 10, .act = last } }, .loss = loss, .l2 = l2 };
    return m;
}

static void must(int rc, const dr_err *e)
{
    if (rc) fail_msg("backend error %d: %s", rc, e->msg);
}

/* ---- data ------------------------------------------------------------------ */

static uint32_t nout_of(const dr_model_spec *m) { return m->layer[m->nlayers - 1].out; }

/* Weights from dr_model_init, small random biases (or zero), the last
 * kernel scaled by wscale. */
static void init_params(const dr_model_spec *m, uint64_t seed, bool zero_bias, float wscale, float *params)
{
    uint32_t L = m->nlayers;
    dr_model_init(m, seed, params);
    for (uint32_t l = 0; l < L && !zero_bias; l++)
        for (uint32_t j = 0; j < m->layer[l].out; j++)
            params[dr_model_bias_offset(m, l) + j] = (dr_rng_uniform(seed, 77 + l, j) - 0.5f) * 0.1f;
    for (size_t k = 0; k < (size_t)m->layer[L - 1].in * m->layer[L - 1].out; k++)
        params[dr_model_kernel_offset(m, L - 1) + k] *= wscale;
}

/* n real examples (image-like: 30% zeros), then rows - n padding rows of garbage. */
static void gen_batch(const dr_model_spec *m, uint64_t seed, uint32_t n, uint32_t rows,
                      float *x, uint8_t *labels, float *targets)
{
    static const float junk[] = { NAN, INFINITY, -INFINITY, -1e30f, 3.5f, -0.0f, 1e-40f };
    uint32_t in0 = m->layer[0].in, nout = nout_of(m);
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t k = 0; k < in0; k++) {
            size_t i = (size_t)r * in0 + k;
            float u = dr_rng_uniform(seed, DR_STREAM_DATA, i);
            x[i] = r < n ? (u < 0.3f ? 0.0f : u) : junk[i % 7];
        }
        if (labels) labels[r] = r < n ? (uint8_t)dr_rng_below(seed, DR_STREAM_TEACHER, r, nout) : 255;
        for (uint32_t j = 0; targets && j < nout; j++)
            targets[(size_t)r * nout + j] = r < n ? 2.0f * dr_rng_uniform(seed, 0x6000, (size_t)r * nout + j) - 1.0f
                                                  : junk[j % 7];
    }
}

/* ---- the backend side ------------------------------------------------------ */

typedef struct bk {
    const dr_backend_ops *ops;
    dr_backend *b;
    dr_model_spec m;
    dr_optimizer o;
    size_t P;
    bool mse;
} bk;

static bk bk_open(const dr_model_spec *m, const dr_optimizer *o, dr_numerics num)
{
    bk k = { dr_backend_openmp(), NULL, *m, *o, dr_model_num_params(m), m->loss == DR_LOSS_MSE };
    dr_err e = { 0, "" };
    dr_backend_params p = { .model = m, .optimizer = o, .numerics = num, .places = 1, .platform = -1 };
    must(k.ops->open(&p, &k.b, &e), &e);
    return k;
}

static dr_buffer *bk_alloc(bk *k, size_t bytes)
{
    dr_buffer *buf;
    dr_err e = { 0, "" };
    must(k->ops->alloc(k->b, bytes, &buf, &e), &e);
    return buf;
}

static void rep_open(bk *k, dr_replica_bufs *rb, uint32_t rows)
{
    size_t nslots = (size_t)dr_optimizer_num_slots(&k->o);
    dr_err e = { 0, "" };
    memset(rb, 0, sizeof *rb);
    rb->params = bk_alloc(k, k->P * sizeof(float));
    rb->slots = nslots ? bk_alloc(k, nslots * k->P * sizeof(float)) : NULL;
    rb->grad = bk_alloc(k, k->P * sizeof(dr_acc));
    rb->loss = bk_alloc(k, sizeof(dr_acc));
    rb->x = bk_alloc(k, (size_t)rows * k->m.layer[0].in * sizeof(float));
    if (k->mse) rb->targets = bk_alloc(k, (size_t)rows * nout_of(&k->m) * sizeof(float));
    else rb->labels = bk_alloc(k, rows);
    must(k->ops->replica_open(k->b, rb, rows, &e), &e);
}

static void rep_close(bk *k, dr_replica_bufs *rb)
{
    dr_buffer *bufs[] = { rb->params, rb->slots, rb->grad, rb->loss, rb->x, rb->labels, rb->targets };
    k->ops->replica_close(k->b, rb);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) if (bufs[i]) k->ops->release(k->b, bufs[i]);
}

static void bk_close(bk *k) { k->ops->close(k->b); }

/* Stages a batch (rows, padding included) and runs forward + loss_grad(n) + share. */
static int bk_step(bk *k, dr_replica_bufs *rb, const float *x, const uint8_t *labels, const float *targets,
                   uint32_t n, uint32_t rows, uint32_t R, uint32_t G, dr_err *e)
{
    const dr_backend_ops *o = k->ops;
    int rc = o->upload(k->b, rb->x, 0, x, (size_t)rows * k->m.layer[0].in * sizeof(float), e);
    if (!rc && k->mse) rc = o->upload(k->b, rb->targets, 0, targets, (size_t)rows * nout_of(&k->m) * sizeof(float), e);
    if (!rc && !k->mse) rc = o->upload(k->b, rb->labels, 0, labels, rows, e);
    if (!rc) rc = o->forward(k->b, rb, rows, 0, e);
    if (!rc) rc = o->loss_grad(k->b, rb, n, true, e);
    if (!rc) rc = o->share(k->b, rb, R, G, G * R, e);
    return rc;
}

/* ---- the reference side ---------------------------------------------------- */

static void ref_scale(const dr_model_spec *m, const float *params, uint32_t R, uint32_t G, dr_acc *grad, dr_acc *loss)
{
    size_t P = dr_model_num_params(m);
    for (size_t p = 0; p < P; p++) {
        float g = dr_model_reg_grad(m, params, p);
        if (R > 1) dr_acc_mul_u32(&grad[p], R);
        if (g != 0.0f) dr_acc_add_prod(&grad[p], (float)G, g);
    }
    if (R > 1) dr_acc_mul_u32(loss, R);
    dr_acc_add_prod(loss, (float)G, dr_model_reg_loss(m, params));
}

static void ref_share(const dr_model_spec *m, const float *params, const float *x, const uint8_t *labels,
                      const float *targets, uint32_t n, uint32_t R, uint32_t G,
                      dr_acc *grad, dr_acc *loss, uint64_t *correct)
{
    dr_work w;
    dr_err e = { 0, "" };
    memset(grad, 0, dr_model_num_params(m) * sizeof *grad);
    dr_acc_init(loss);
    *correct = 0;
    must(dr_work_init(&w, m, n, &e), &e);
    dr_model_loss_grad(m, dr_model_ops_ref(), params, x, labels, targets, n, &w, loss, grad, correct);
    dr_work_free(&w);
    ref_scale(m, params, R, G, grad, loss);
}

static void expect_same_acc(const dr_acc *want, const dr_acc *got, size_t n, const char *what)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) if (!dr_acc_equal(&want[i], &got[i]) && !bad++) first = i;
    if (bad) fail_msg("%s: %zu of %zu accumulators differ, first at %zu (ref %a, backend %a)", what, bad, n,
                      first, (double)dr_acc_round(&want[first]), (double)dr_acc_round(&got[first]));
}

static void expect_same_f32(const float *want, const float *got, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&want[i], &got[i], sizeof(float)))
            fail_msg("%s: element %zu of %zu differs (ref %a, backend %a)", what, i, n, (double)want[i], (double)got[i]);
}

/* ---- one replica's share ------------------------------------------------------ */

typedef struct share_case {
    dr_model_spec m;
    uint32_t n, rows, R, G;
    bool zero_bias;          /* with zero_rows: pre-activations exactly 0 */
    uint32_t zero_rows;      /* the first examples all-zero */
    float wscale;            /* last kernel scale (saturates a softmax) */
} share_case;

static void check_share(const share_case *c)
{
    const dr_model_spec *m = &c->m;
    uint32_t L = m->nlayers, nout = nout_of(m), in0 = m->layer[0].in, rows = c->rows;
    bk k = bk_open(m, &SGD, DR_NUMERICS_EXACT);
    dr_replica_bufs rb;
    float *params = malloc(k.P * sizeof(float)), *x = calloc((size_t)rows * in0 + 1, sizeof(float));
    float *targets = k.mse ? malloc((size_t)rows * nout * sizeof(float)) : NULL;
    uint8_t *labels = k.mse ? NULL : malloc(rows + 1);
    dr_acc *grad = malloc(k.P * sizeof(dr_acc)), loss;
    uint64_t correct;
    dr_err e = { 0, "" };
    dr_work w;
    const dr_omp_scratch *s;

    init_params(m, SEED + c->n, c->zero_bias, c->wscale ? c->wscale : 1.0f, params);
    gen_batch(m, SEED + rows, c->n, rows, x, labels, targets);
    memset(x, 0, (size_t)c->zero_rows * in0 * sizeof(float));
    rep_open(&k, &rb, rows);
    must(k.ops->upload(k.b, rb.params, 0, params, k.P * sizeof(float), &e), &e);
    must(bk_step(&k, &rb, x, labels, targets, c->n, rows, c->R, c->G, &e), &e);

    ref_share(m, params, x, labels, targets, c->n, c->R, c->G, grad, &loss, &correct);
    expect_same_acc(grad, k.ops->host_ptr(rb.grad), k.P, "gradient share");
    expect_same_acc(&loss, k.ops->host_ptr(rb.loss), 1, "loss share");
    assert_int_equal(rb.correct, correct);

    /* the forward pass itself, row by row, for the n real examples */
    s = rb.scratch;
    must(dr_work_init(&w, m, c->n, &e), &e);
    dr_model_forward(m, dr_model_ops_ref(), params, x, c->n, &w);
    for (uint32_t l = 0; l < L; l++) {
        expect_same_f32(w.pre[l], s->pre[l], (size_t)c->n * m->layer[l].out, "pre-activations");
        expect_same_f32(w.act[l + 1], s->act[l], (size_t)c->n * m->layer[l].out, "activations");
    }
    if (m->loss == DR_LOSS_XENT_PROBS && c->wscale > 1.0f) {   /* the clip acts on some example */
        uint32_t clipped = 0;
        for (uint32_t r = 0; r < c->n; r++) {
            float py = s->act[L - 1][(size_t)r * nout + labels[r]];
            clipped += py < 1e-7f || py > 1.0f - 1e-7f;
        }
        assert_true(clipped > 0);
    }
    if (c->zero_rows && c->zero_bias && c->n) {   /* the case is what it says: some pre == 0 exactly */
        size_t zeros = 0;
        for (size_t i = 0; i < (size_t)c->n * m->layer[0].out; i++) zeros += s->pre[0][i] == 0.0f;
        assert_true(zeros >= (size_t)c->zero_rows * m->layer[0].out);
    }
    dr_work_free(&w);
    rep_close(&k, &rb);
    bk_close(&k);
    free(params); free(x); free(targets); free(labels); free(grad);
}

/* n = 20 in one replica, n = 7 of G = 20 in one of three; l2 0 and 1e-3. */
static void check_grid(dr_model_spec m, uint32_t pad, float wscale)
{
    for (int reg = 0; reg < 2; reg++) {
        for (uint32_t R = 1; R <= 3; R += 2) {
            share_case c = { m, R == 1 ? 20 : 7, 0, R, 20, false, 0, wscale };
            c.m.l2 = reg ? 1e-3f : 0.0f;
            c.rows = c.n + pad;
            check_share(&c);
        }
    }
}

static void relu_logits(void **st) { (void)st; check_grid(mlp(DR_ACT_LINEAR, DR_LOSS_XENT_LOGITS, 0), 0, 1); }
static void softmax_probs(void **st) { (void)st; check_grid(mlp(DR_ACT_SOFTMAX, DR_LOSS_XENT_PROBS, 0), 0, 1); }
/* Logits in the hundreds: p_y is 0 or 1 to float precision and the clip acts. */
static void softmax_probs_saturated(void **st) { (void)st; check_grid(mlp(DR_ACT_SOFTMAX, DR_LOSS_XENT_PROBS, 0), 3, 400); }

static void three_layers(void **st)
{
    dr_model_spec m = { .nlayers = 3, .layer = { { .in = 784, .out = 64, .act = DR_ACT_RELU }, { .in = 64, .out = 32, .act = DR_ACT_RELU }, { .in = 32, .out = 10, .act = DR_ACT_LINEAR } },
                        .loss = DR_LOSS_XENT_LOGITS, .l2 = 0 };
    (void)st;
    check_grid(m, 5, 1);
}

static void mse_toy_and_net(void **st)
{
    dr_model_spec toy = { .nlayers = 1, .layer = { { .in = 1, .out = 1, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_MSE, .l2 = 0 };
    dr_model_spec net = { .nlayers = 2, .layer = { { .in = 5, .out = 4, .act = DR_ACT_RELU }, { .in = 4, .out = 3, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_MSE, .l2 = 0 };
    (void)st;
    check_grid(toy, 0, 1);
    check_grid(toy, 2, 1);
    check_grid(net, 4, 1);
}

/* Padding rows (NaN, inf, 1e30, labels 255) change nothing, in every loss. */
static void padding_rows(void **st)
{
    (void)st;
    check_grid(mlp(DR_ACT_LINEAR, DR_LOSS_XENT_LOGITS, 0), 4, 1);
    check_grid(mlp(DR_ACT_SOFTMAX, DR_LOSS_XENT_PROBS, 0), 11, 1);
}

/* An empty batch still carries its regularization share. */
static void empty_batch(void **st)
{
    (void)st;
    for (int reg = 0; reg < 2; reg++)
        for (uint32_t R = 1; R <= 3; R += 2) {
            share_case c = { mlp(DR_ACT_LINEAR, DR_LOSS_XENT_LOGITS, reg ? 1e-3f : 0.0f), 0, 6, R, 20, false, 0, 1 };
            check_share(&c);
        }
}

/* A compact gradient's share with loss_grad's fold (rb->share_mult): the
 * same words as without one, whether share's mult is the announced one, a
 * multiple of its power of two (what is left multiplied in share) or not
 * (the fold taken back), with and without a regularization term. */
static void compact_fold(void **st)
{
    static const uint32_t cases[][2] = { { 2, 2 }, { 8, 8 }, { 2, 6 }, { 4, 6 }, { 4, 2 }, { 3, 3 } };
    const uint32_t n = 12, G = 24;
    (void)st;
    for (int reg = 0; reg < 2; reg++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            dr_model_spec m = mlp(DR_ACT_LINEAR, DR_LOSS_XENT_LOGITS, reg ? 1e-3f : 0.0f);
            bk k = bk_open(&m, &SGD, DR_NUMERICS_EXACT_COMPACT);
            dr_replica_bufs plain, folded;
            float *params = malloc(k.P * sizeof(float)), *x = calloc((size_t)n * 784 + 1, sizeof(float));
            uint8_t *labels = malloc(n + 1);
            dr_err e = { 0, "" };
            init_params(&m, SEED + 5, false, 1.0f, params);
            gen_batch(&m, SEED + 6, n, n, x, labels, NULL);
            rep_open(&k, &plain, n);
            rep_open(&k, &folded, n);
            folded.share_mult = cases[c][0];
            must(k.ops->upload(k.b, plain.params, 0, params, k.P * sizeof(float), &e), &e);
            must(k.ops->upload(k.b, folded.params, 0, params, k.P * sizeof(float), &e), &e);
            must(bk_step(&k, &plain, x, labels, NULL, n, n, cases[c][1], G, &e), &e);
            must(bk_step(&k, &folded, x, labels, NULL, n, n, cases[c][1], G, &e), &e);
            assert_memory_equal(k.ops->host_ptr(plain.grad), k.ops->host_ptr(folded.grad), k.P * sizeof(dr_cacc));
            rep_close(&k, &plain);
            rep_close(&k, &folded);
            bk_close(&k);
            free(params); free(x); free(labels);
        }
}

/* All-zero examples with zero biases: ReLU inputs exactly 0, whose delta
 * must be masked (0 is inactive). */
/* The engine's 2x2 max pooling routes a tie to the first maximum in
 * row-major order, TensorFlow 2.21's rule (docs/MODELS.md: all equal -> the
 * top left; [[0,2],[2,1]] -> the top right). In training the rule rarely
 * shows: a tie of distinct patches behind a conv with random weights has
 * probability zero, and a tie of ReLU zeros sends a gradient the ReLU then
 * stops; so it is checked here, on the window index the backward uses. */
static void pool_tie_first(void **st)
{
    (void)st;
    dr_dense d = { .in = 8, .out = 2, .kind = DR_LAYER_MAX_POOL2D, .ih = 2, .iw = 2, .ic = 2, .oh = 1, .ow = 1,
                   .oc = 2 };
    /* channel 0: all equal; channel 1: [[0,2],[2,1]] (NHWC: channels innermost) */
    const float x[8] = { 1.0f, 0.0f, 1.0f, 2.0f, 1.0f, 2.0f, 1.0f, 1.0f };
    float out[2];
    uint32_t win[2];
    dr_omp_maxpool(&d, x, 1, (const uint32_t[4]){ 0, d.oh, 0, d.ow }, out, win);
    assert_true(out[0] == 1.0f && out[1] == 2.0f);
    assert_int_equal(win[0], 0);   /* (0, 0), channel 0 */
    assert_int_equal(win[1], 3);   /* (0, 1), channel 1 */
}

static void relu_at_zero(void **st)
{
    share_case c = { mlp(DR_ACT_LINEAR, DR_LOSS_XENT_LOGITS, 0), 10, 12, 1, 10, true, 3, 1 };
    (void)st;
    check_share(&c);
    c.m.l2 = 1e-3f; c.R = 3; c.G = 30;
    check_share(&c);
}

/* ---- training: share, all-reduce, apply ------------------------------------- */

#define MAX_R 4

/* `steps` steps of G examples over R replicas, each step compared with the
 * reference (params, slots and loss bits); the final weights into out. */
static void train(const dr_model_spec *m, const dr_optimizer *o, uint32_t R, uint32_t G, uint32_t steps, float *out)
{
    bk k = bk_open(m, o, DR_NUMERICS_EXACT);
    size_t P = k.P, nslots = (size_t)dr_optimizer_num_slots(o), in0 = m->layer[0].in;
    uint32_t per = (G + R - 1) / R, rows = per + 2;
    dr_replica_bufs rb[MAX_R];
    dr_buffer *total = bk_alloc(&k, P * sizeof(dr_acc)), *ltotal = bk_alloc(&k, sizeof(dr_acc));
    float *p_ref = malloc(P * sizeof(float)), *s_ref = calloc(nslots * P + 1, sizeof(float));
    float *g_ref = malloc(P * sizeof(float)), *got = malloc((nslots * P + P) * sizeof(float));
    float *x = malloc((size_t)G * in0 * sizeof(float)), *xr[MAX_R];
    uint8_t *labels = malloc(G), *lr[MAX_R];
    dr_acc *t_ref = malloc(P * sizeof(dr_acc)), *g_rep = malloc(P * sizeof(dr_acc));
    dr_err e = { 0, "" };

    init_params(m, SEED, false, 1.0f, p_ref);
    for (uint32_t r = 0; r < R; r++) {
        rep_open(&k, &rb[r], rows);
        must(k.ops->upload(k.b, rb[r].params, 0, p_ref, P * sizeof(float), &e), &e);
        xr[r] = malloc((size_t)rows * in0 * sizeof(float));
        lr[r] = malloc(rows);
    }
    for (uint32_t step = 1; step <= steps; step++) {
        dr_acc l_ref, *tot = k.ops->host_ptr(total), *lt = k.ops->host_ptr(ltotal);
        float loss_b, loss_r;
        int bad = 0;
        gen_batch(m, SEED * 31u + step, G, G, x, labels, NULL);
        for (uint32_t r = 0; r < R; r++) {   /* the replica's examples, then garbage padding */
            uint32_t a = r * per < G ? r * per : G, n = G - a < per ? G - a : per;
            gen_batch(m, step, 0, rows, xr[r], lr[r], NULL);
            memcpy(xr[r], x + (size_t)a * in0, (size_t)n * in0 * sizeof(float));
            memcpy(lr[r], labels + a, n);
        }
        #pragma omp parallel for schedule(dynamic) reduction(+ : bad)
        for (uint32_t r = 0; r < R; r++) {
            uint32_t a = r * per < G ? r * per : G, n = G - a < per ? G - a : per;
            dr_err le = { 0, "" };
            bad += bk_step(&k, &rb[r], xr[r], lr[r], NULL, n, rows, R, G, &le) != DR_OK;
        }
        assert_int_equal(bad, 0);
        memset(tot, 0, P * sizeof *tot);
        dr_acc_init(lt);
        memset(t_ref, 0, P * sizeof *t_ref);
        dr_acc_init(&l_ref);
        for (uint32_t r = 0; r < R; r++) {
            uint32_t a = r * per < G ? r * per : G, n = G - a < per ? G - a : per;
            const dr_acc *g = k.ops->host_ptr(rb[r].grad);
            dr_acc lrep;
            uint64_t c;
            for (size_t p = 0; p < P; p++) dr_acc_merge(&tot[p], &g[p]);
            dr_acc_merge(lt, k.ops->host_ptr(rb[r].loss));
            ref_share(m, p_ref, x + (size_t)a * in0, labels + a, NULL, n, R, G, g_rep, &lrep, &c);
            for (size_t p = 0; p < P; p++) dr_acc_merge(&t_ref[p], &g_rep[p]);
            dr_acc_merge(&l_ref, &lrep);
        }
        expect_same_acc(t_ref, tot, P, "all-reduced gradient");
        #pragma omp parallel for schedule(dynamic) reduction(+ : bad)
        for (uint32_t r = 0; r < R; r++) {
            dr_err le = { 0, "" };
            bad += k.ops->apply(k.b, total, G * R, step, rb[r].params, rb[r].slots, &le) != DR_OK;
        }
        assert_int_equal(bad, 0);
        must(k.ops->round_loss(k.b, ltotal, G * R, &loss_b, &e), &e);
        dr_acc_round_array(t_ref, P, G * R, g_ref);
        dr_optimizer_apply(o, step, p_ref, g_ref, s_ref, P);
        loss_r = dr_acc_round_div(&l_ref, G * R);
        if (memcmp(&loss_b, &loss_r, sizeof loss_b)) fail_msg("step %u: loss %a, reference %a", step, (double)loss_b, (double)loss_r);
        for (uint32_t r = 0; r < R; r++) {
            must(k.ops->download(k.b, got, rb[r].params, 0, P * sizeof(float), &e), &e);
            expect_same_f32(p_ref, got, P, step == 1 ? "weights after step 1" : "weights after a later step");
            if (nslots) {
                must(k.ops->download(k.b, got, rb[r].slots, 0, nslots * P * sizeof(float), &e), &e);
                expect_same_f32(s_ref, got, nslots * P, "optimizer slots");
            }
        }
    }
    memcpy(out, p_ref, P * sizeof(float));
    for (uint32_t r = 0; r < R; r++) { rep_close(&k, &rb[r]); free(xr[r]); free(lr[r]); }
    k.ops->release(k.b, total);
    k.ops->release(k.b, ltotal);
    bk_close(&k);
    free(p_ref); free(s_ref); free(g_ref); free(got); free(x); free(labels); free(t_ref); free(g_rep);
}

static void optimizers(void **st)
{
    const dr_optimizer opt[] = {
        { DR_OPT_SGD, 0.1f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 },
        { DR_OPT_SGD, 0.05f, 0.9f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 },
        { DR_OPT_SGD, 0.05f, 0.9f, true, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 },
        { DR_OPT_ADAM, 0.01f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 },
    };
    dr_model_spec m = mlp(DR_ACT_LINEAR, DR_LOSS_XENT_LOGITS, 1e-3f);
    size_t P = dr_model_num_params(&m);
    float *w3 = malloc(P * sizeof(float)), *w1 = malloc(P * sizeof(float));
    (void)st;
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
        train(&m, &opt[i], 3, 20, 7, w3);
        train(&m, &opt[i], 1, 20, 7, w1);
        expect_same_f32(w1, w3, P, "R = 1 and R = 3 after 7 steps");
    }
    free(w3); free(w1);
}

/* ---- spatial partitioning of layer 0 ----------------------------------------- */

/* tiles along y and x of the 28x28 image; also in fast numerics (loss only). */
static void check_tiles(dr_model_spec m, uint32_t ty, uint32_t tx, dr_numerics num)
{
    const uint32_t n = 9, rows = 12, R = 2, G = 18, out0 = m.layer[0].out, T = ty * tx, len = 784 / T;
    bk k = bk_open(&m, &SGD, num);
    dr_replica_bufs whole, tiled;
    float *params = malloc(k.P * sizeof(float)), *x = malloc(rows * 784 * sizeof(float));
    float *xt = malloc((size_t)rows * len * sizeof(float)), *delta = malloc(n * out0 * sizeof(float));
    uint8_t labels[12];
    uint32_t *pix = malloc(784 * sizeof *pix);
    dr_buffer *z = bk_alloc(&k, (size_t)rows * out0 * sizeof(dr_acc)), *xtb[16], *dbuf = bk_alloc(&k, n * out0 * sizeof(float));
    dr_err e = { 0, "" };
    float lw, lt;

    init_params(&m, SEED, false, 1.0f, params);
    gen_batch(&m, SEED + 5, n, rows, x, labels, NULL);
    rep_open(&k, &whole, rows);
    rep_open(&k, &tiled, rows);   /* its x stays zero: the tiled path must not read it */
    must(k.ops->upload(k.b, whole.params, 0, params, k.P * sizeof(float), &e), &e);
    must(k.ops->upload(k.b, tiled.params, 0, params, k.P * sizeof(float), &e), &e);
    must(k.ops->upload(k.b, tiled.labels, 0, labels, rows, &e), &e);
    must(bk_step(&k, &whole, x, labels, NULL, n, rows, R, G, &e), &e);

    for (uint32_t t = 0, q = 0; t < T; t++) {   /* tile t: its pixels, its columns of x */
        uint32_t th = 28 / ty, tw = 28 / tx, i = t / tx, j = t % tx;
        for (uint32_t yy = 0; yy < th; yy++)
            for (uint32_t xx = 0; xx < tw; xx++) pix[q++] = (i * th + yy) * 28 + j * tw + xx;
        for (uint32_t r = 0; r < rows; r++)
            for (uint32_t c = 0; c < len; c++) xt[r * len + c] = x[r * 784 + pix[t * len + c]];
        xtb[t] = bk_alloc(&k, (size_t)rows * len * sizeof(float));
        must(k.ops->upload(k.b, xtb[t], 0, xt, (size_t)rows * len * sizeof(float), &e), &e);
        must(k.ops->layer0_partial(k.b, xtb[t], pix + t * len, len, rows, tiled.params, z, &e), &e);
    }
    must(k.ops->layer0_finish(k.b, &tiled, z, rows, &e), &e);
    must(k.ops->forward(k.b, &tiled, rows, 1, &e), &e);
    must(k.ops->loss_grad(k.b, &tiled, n, false, &e), &e);
    must(k.ops->layer0_delta(k.b, &tiled, n, delta, &e), &e);
    must(k.ops->upload(k.b, dbuf, 0, delta, n * out0 * sizeof(float), &e), &e);
    for (uint32_t t = 0; t < T; t++)
        must(k.ops->layer0_grad_rows(k.b, xtb[t], pix + t * len, len, n, dbuf, tiled.grad, &e), &e);
    must(k.ops->share(k.b, &tiled, R, G, G * R, &e), &e);
    must(k.ops->round_loss(k.b, whole.loss, G * R, &lw, &e), &e);
    must(k.ops->round_loss(k.b, tiled.loss, G * R, &lt, &e), &e);

    if (num == DR_NUMERICS_EXACT) {
        dr_work w;
        dr_acc lref, *g0 = calloc(k.P, sizeof(dr_acc));
        uint64_t c = 0;
        const float *d0;
        ref_share(&m, params, x, labels, NULL, n, R, G, g0, &lref, &c);
        expect_same_acc(g0, k.ops->host_ptr(tiled.grad), k.P, "tiled gradient share vs the reference");
        expect_same_acc(&lref, k.ops->host_ptr(tiled.loss), 1, "tiled loss share vs the reference");
        expect_same_acc(k.ops->host_ptr(whole.grad), k.ops->host_ptr(tiled.grad), k.P, "tiled gradient share");
        expect_same_acc(k.ops->host_ptr(whole.loss), k.ops->host_ptr(tiled.loss), 1, "tiled loss share");
        expect_same_f32(((dr_omp_scratch *)whole.scratch)->pre[0], ((dr_omp_scratch *)tiled.scratch)->pre[0],
                        (size_t)rows * out0, "layer 0 pre-activations (padding rows included)");
        assert_int_equal(whole.correct, tiled.correct);
        must(dr_work_init(&w, &m, n, &e), &e);   /* the reference's delta of layer 0 */
        dr_acc_init(&lref);
        memset(g0, 0, k.P * sizeof *g0);
        dr_model_forward(&m, dr_model_ops_ref(), params, x, n, &w);
        d0 = dr_model_backward(&m, dr_model_ops_ref(), params, x, labels, NULL, n, &w, &lref, g0, &c, false);
        expect_same_f32(d0, delta, n * out0, "layer 0 delta");
        dr_work_free(&w);
        free(g0);
    }
    if (!(fabsf(lw - lt) <= 1e-4f * fabsf(lw))) fail_msg("tiled loss %g, whole %g", (double)lt, (double)lw);
    for (uint32_t t = 0; t < T; t++) k.ops->release(k.b, xtb[t]);
    k.ops->release(k.b, z);
    k.ops->release(k.b, dbuf);
    rep_close(&k, &whole);
    rep_close(&k, &tiled);
    bk_close(&k);
    free(params); free(x); free(xt); free(delta); free(pix);
}

static void tiles_2x2(void **st)
{
    dr_model_spec one = { .nlayers = 1, .layer = { { .in = 784, .out = 10, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_XENT_LOGITS, .l2 = 1e-3f };
    (void)st;
    check_tiles(mlp(DR_ACT_LINEAR, DR_LOSS_XENT_LOGITS, 1e-3f), 2, 2, DR_NUMERICS_EXACT);
    check_tiles(one, 2, 2, DR_NUMERICS_EXACT);   /* layer0_finish makes the output */
}

static void tiles_4x1(void **st)   /* bands of whole image rows: contiguous pixels */
{
    (void)st;
    check_tiles(mlp(DR_ACT_SOFTMAX, DR_LOSS_XENT_PROBS, 0), 4, 1, DR_NUMERICS_EXACT);
}

/* ---- fast numerics ------------------------------------------------------------- */

static void fast_mode(void **st)
{
    dr_model_spec m = mlp(DR_ACT_LINEAR, DR_LOSS_XENT_LOGITS, 1e-3f);
    const dr_optimizer adam = { DR_OPT_ADAM, 0.001f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 };
    bk k = bk_open(&m, &adam, DR_NUMERICS_FAST);
    dr_replica_bufs rb;
    float *params = malloc(k.P * sizeof(float)), *x = malloc(24 * 784 * sizeof(float)), lf, lr;
    uint8_t labels[24];
    dr_acc *grad = malloc(k.P * sizeof(dr_acc)), lref;
    uint64_t c;
    dr_err e = { 0, "" };
    (void)st;
    init_params(&m, SEED, false, 1.0f, params);
    gen_batch(&m, SEED + 9, 20, 24, x, labels, NULL);
    rep_open(&k, &rb, 24);
    must(k.ops->upload(k.b, rb.params, 0, params, k.P * sizeof(float), &e), &e);
    for (uint32_t R = 1; R <= 3; R += 2) {   /* one replica's share of a step of G = 20 over R */
        const float *gf = k.ops->host_ptr(rb.grad);
        float gmax = 0;
        must(bk_step(&k, &rb, x, labels, NULL, 20, 24, R, 20, &e), &e);
        must(k.ops->round_loss(k.b, rb.loss, 1, &lf, &e), &e);   /* fast: already over G*R */
        ref_share(&m, params, x, labels, NULL, 20, R, 20, grad, &lref, &c);
        lr = dr_acc_round_div(&lref, 20 * R);
        if (!(fabsf(lf - lr) <= 1e-4f * fabsf(lr))) fail_msg("R %u: fast loss %.9g, exact %.9g", R, (double)lf, (double)lr);
        for (size_t p = 0; p < k.P; p++) {
            float g = dr_acc_round_div(&grad[p], 20 * R);
            if (fabsf(g) > gmax) gmax = fabsf(g);
        }
        for (size_t p = 0; p < k.P; p++) {
            float g = dr_acc_round_div(&grad[p], 20 * R);
            if (!(fabsf(gf[p] - g) <= 1e-4f * fabsf(g) + 1e-6f * gmax))
                fail_msg("R %u: fast gradient %zu is %.9g, exact %.9g", R, p, (double)gf[p], (double)g);
        }
    }
    must(k.ops->apply(k.b, rb.grad, 1, 1, rb.params, rb.slots, &e), &e);
    for (size_t p = 0; p < k.P; p++) assert_true(isfinite(((float *)k.ops->host_ptr(rb.params))[p]));
    rep_close(&k, &rb);
    bk_close(&k);
    free(params); free(x); free(grad);
    check_tiles(m, 2, 2, DR_NUMERICS_FAST);
}

/* Fast numerics on 1 and 2 OpenMP threads: the same bits. The step's
 * large GEMMs are cut into two slabs by shape, never by the thread count
 * (openmp_kernels.c: sgemm_team); a cut that followed the threads would
 * give other bits under OpenBLAS's Haswell kernels (the mutant
 * sgemm_cut_by_threads in scripts/exact_mutants.sh). G = 256 rows, 250 of
 * them real, so both layer 0 GEMMs pass the cut's threshold. */
void openblas_set_num_threads(int);   /* OpenBLAS extensions */
int  openblas_get_num_threads(void);

static void fast_threads(void **st)
{
    dr_model_spec m = mlp(DR_ACT_LINEAR, DR_LOSS_XENT_LOGITS, 1e-3f);
    enum { ROWS = 256, N = 250 };
    bk k = bk_open(&m, &SGD, DR_NUMERICS_FAST);
    dr_replica_bufs rb[2];
    float *params = malloc(k.P * sizeof(float)), *x = malloc((size_t)ROWS * 784 * sizeof(float)), loss[2];
    uint8_t labels[ROWS];
    const int saved = omp_get_max_threads(), blas_saved = openblas_get_num_threads();
    dr_err e = { 0, "" };
    (void)st;
    openblas_set_num_threads(1);   /* the engine's thread policy (strategies/engine.c) */
    init_params(&m, SEED, false, 1.0f, params);
    gen_batch(&m, SEED + 11, N, ROWS, x, labels, NULL);
    for (int t = 0; t < 2; t++) {
        rep_open(&k, &rb[t], ROWS);
        must(k.ops->upload(k.b, rb[t].params, 0, params, k.P * sizeof(float), &e), &e);
        omp_set_num_threads(t + 1);
        must(bk_step(&k, &rb[t], x, labels, NULL, N, ROWS, 1, N, &e), &e);
        must(k.ops->round_loss(k.b, rb[t].loss, 1, &loss[t], &e), &e);
    }
    omp_set_num_threads(saved);
    openblas_set_num_threads(blas_saved);
    assert_memory_equal(&loss[0], &loss[1], sizeof(float));
    expect_same_f32(k.ops->host_ptr(rb[0].grad), k.ops->host_ptr(rb[1].grad), k.P, "fast gradient, 2 threads vs 1");
    for (int t = 0; t < 2; t++) rep_close(&k, &rb[t]);
    bk_close(&k);
    free(params); free(x);
}

/* Fast numerics' apply against the reference's optimizer (ref/optim.c)
 * on the same float gradients, bit for bit: SGD, momentum, Nesterov and
 * Adam, 3 steps, on 1 and 2 threads. The apply runs per vector width
 * (distref/wide.h) on each thread's share of the 101,770 parameters
 * (dr_omp_cut), a share ending off a 64-parameter chunk: the last 10. */
static void fast_apply_bits(void **st)
{
    const dr_optimizer opt[] = {
        { DR_OPT_SGD, 0.1f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 },
        { DR_OPT_SGD, 0.05f, 0.9f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 },
        { DR_OPT_SGD, 0.05f, 0.9f, true, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 },
        { DR_OPT_ADAM, 0.01f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 },
    };
    dr_model_spec m = mlp(DR_ACT_LINEAR, DR_LOSS_XENT_LOGITS, 0.0f);
    const int saved = omp_get_max_threads();
    dr_err e = { 0, "" };
    (void)st;
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
        for (int t = 1; t <= 2; t++) {
            bk k = bk_open(&m, &opt[i], DR_NUMERICS_FAST);
            size_t P = k.P, nslots = (size_t)dr_optimizer_num_slots(&opt[i]);
            dr_replica_bufs rb;
            float *w = malloc(P * sizeof(float)), *s = calloc(nslots * P + 1, sizeof(float));
            float *g = malloc(P * sizeof(float));
            init_params(&m, SEED, false, 1.0f, w);
            rep_open(&k, &rb, 1);
            must(k.ops->upload(k.b, rb.params, 0, w, P * sizeof(float), &e), &e);
            if (nslots) must(k.ops->fill_zero(k.b, rb.slots, 0, nslots * P * sizeof(float), &e), &e);
            omp_set_num_threads(t);
            for (uint64_t step = 1; step <= 3; step++) {
                for (size_t p = 0; p < P; p++)   /* gradients over many binades, both signs */
                    g[p] = (dr_rng_uniform(SEED, 0x7000 + step, p) - 0.5f) * ldexpf(1.0f, (int)(p % 23) - 11);
                must(k.ops->upload(k.b, rb.grad, 0, g, P * sizeof(float), &e), &e);
                must(k.ops->apply(k.b, rb.grad, 1, step, rb.params, rb.slots, &e), &e);
                dr_optimizer_apply(&opt[i], step, w, g, s, P);
            }
            omp_set_num_threads(saved);
            expect_same_f32(w, k.ops->host_ptr(rb.params), P, "fast apply vs the reference's optimizer");
            if (nslots) expect_same_f32(s, k.ops->host_ptr(rb.slots), nslots * P, "fast apply's slots");
            rep_close(&k, &rb);
            bk_close(&k);
            free(w); free(s); free(g);
        }
}

/* The cut's decision itself, where it lives: the same for 1 and 2 threads,
 * and a real cut (two slabs) for the step's large GEMMs. This holds
 * whatever OpenBLAS kernels run (OPENBLAS_CORETYPE unset, Haswell or
 * SkylakeX); fast_threads above sees a thread-dependent cut only where the
 * kernels' slabs change the bits (Haswell). Shapes: layer 0's forward and
 * weight gradient at G = 256 (both past the threshold), a G = 64 forward
 * (below it), and a wide product cut by columns. */
static void sgemm_cut_by_shape(void **st)
{
    static const size_t shape[][3] = { { 256, 128, 784 }, { 784, 128, 256 }, { 64, 128, 784 }, { 128, 784, 256 } };
    const int saved = omp_get_max_threads();
    (void)st;
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
        size_t cut[2];
        bool rows[2];
        for (int t = 0; t < 2; t++) {
            omp_set_num_threads(t + 1);
            cut[t] = dr_omp_sgemm_cut(shape[i][0], shape[i][1], shape[i][2], &rows[t]);
        }
        omp_set_num_threads(saved);
        assert_int_equal(cut[0], cut[1]);
        assert_int_equal(rows[0], rows[1]);
        assert_int_equal(rows[0], shape[i][0] >= shape[i][1]);
        if (i == 2) assert_int_equal(cut[0], 0);
        else {   /* half of the longer side, up to the kernels' unroll of 16 */
            const size_t E = rows[0] ? shape[i][0] : shape[i][1];
            assert_int_equal(cut[0], (E / 2 + 15) / 16 * 16);
        }
    }
}

/* ---- the table's plumbing --------------------------------------------------------- */

static void api(void **st)
{
    const dr_backend_ops *o = dr_backend_openmp();
    dr_backend_query q = { DR_STRATEGY_MIRRORED, DR_NUMERICS_EXACT, 4, 1, true, 0 };
    dr_backend_query conv = { DR_STRATEGY_ONE_DEVICE, DR_NUMERICS_EXACT, 1, 1, false,
                              1u << DR_LAYER_DENSE | 1u << DR_LAYER_CONV2D };
    dr_model_spec m = mlp(DR_ACT_LINEAR, DR_LOSS_XENT_LOGITS, 0);
    bk k = bk_open(&m, &SGD, DR_NUMERICS_EXACT);
    dr_replica_bufs rb;
    dr_buffer *a = bk_alloc(&k, 16), *b = bk_alloc(&k, 16);
    unsigned char buf[16], zero[16] = { 0 };
    uint8_t bad_label = 10;
    dr_err e = { 0, "" };
    (void)st;
    assert_string_equal(o->name, "openmp");
    for (int s = DR_STRATEGY_OFF; s <= DR_STRATEGY_TPU; s++) {
        q.strategy = (dr_strategy_kind)s;
        assert_int_equal(o->supports(&q, &e), s == DR_STRATEGY_PARAMETER_SERVER ? DR_EUNSUPPORTED : DR_OK);
    }
    assert_non_null(strstr(e.msg, "parameter_server"));
    assert_int_equal(o->supports(&conv, &e), DR_OK);   /* a model beyond Dense: the layer ops (openmp_graph.c) */
    conv.strategy = DR_STRATEGY_TPU;                    /* tpu unpartitioned: the graph step */
    assert_int_equal(o->supports(&conv, &e), DR_OK);
    conv.tiles = 4;                                     /* partitioned: the cores' tiles (graph_spatial.c) */
    assert_int_equal(o->supports(&conv, &e), DR_OK);
    assert_non_null(o->set_tile);
    assert_non_null(o->spatial_exchange);
    conv.tiles = 1;
    conv.strategy = DR_STRATEGY_MIRRORED; conv.numerics = DR_NUMERICS_EXACT_COMPACT;
    assert_int_equal(o->supports(&conv, &e), DR_EUNSUPPORTED);
    assert_non_null(strstr(e.msg, "compact gradients are built for Dense models only"));
    q.strategy = DR_STRATEGY_TPU; q.numerics = DR_NUMERICS_FAST; q.tiles = 4;
    assert_int_equal(o->supports(&q, &e), DR_OK);
    q.tiles = 0;
    assert_int_equal(o->supports(&q, &e), DR_EUNSUPPORTED);

    assert_memory_equal(o->host_ptr(a), zero, 16);   /* zero-filled */
    for (int i = 0; i < 16; i++) buf[i] = (unsigned char)i;
    must(o->upload(k.b, a, 0, buf, 16, &e), &e);
    must(o->copy(k.b, b, 4, a, 0, 8, &e), &e);
    must(o->fill_zero(k.b, a, 8, 8, &e), &e);
    must(o->download(k.b, buf, b, 0, 16, &e), &e);
    assert_int_equal(buf[4], 0); assert_int_equal(buf[11], 7); assert_int_equal(buf[12], 0);
    assert_int_equal(((unsigned char *)o->host_ptr(a))[9], 0);
    assert_int_equal(o->upload(k.b, a, 9, buf, 8, &e), DR_EUSAGE);
    assert_int_equal(o->download(k.b, buf, a, 17, 0, &e), DR_EUSAGE);
    assert_int_equal(o->sync(k.b, &e), DR_OK);
    o->release(k.b, a);
    o->release(k.b, b);

    rep_open(&k, &rb, 4);
    assert_int_equal(o->forward(k.b, &rb, 5, 0, &e), DR_EUSAGE);      /* beyond the workspace */
    must(o->forward(k.b, &rb, 2, 0, &e), &e);
    assert_int_equal(o->loss_grad(k.b, &rb, 3, true, &e), DR_EUSAGE); /* beyond the forward pass */
    must(o->upload(k.b, rb.labels, 0, &bad_label, 1, &e), &e);
    assert_int_equal(o->loss_grad(k.b, &rb, 1, true, &e), DR_EUSAGE); /* label outside 0..9 */
    assert_int_equal(o->layer0_delta(k.b, &rb, 1, (float *)buf, &e), DR_ESTATE);
    rep_close(&k, &rb);
    bk_close(&k);
    m.layer[1].in = 64;
    dr_backend_params p = { .model = &m, .optimizer = &SGD, .numerics = DR_NUMERICS_EXACT, .places = 1, .platform = -1 };
    assert_int_equal(o->open(&p, &k.b, &e), DR_EUSAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(api),
        cmocka_unit_test(relu_logits),
        cmocka_unit_test(softmax_probs),
        cmocka_unit_test(softmax_probs_saturated),
        cmocka_unit_test(three_layers),
        cmocka_unit_test(mse_toy_and_net),
        cmocka_unit_test(padding_rows),
        cmocka_unit_test(empty_batch),
        cmocka_unit_test(compact_fold),
        cmocka_unit_test(relu_at_zero),
        cmocka_unit_test(optimizers),
        cmocka_unit_test(tiles_2x2),
        cmocka_unit_test(tiles_4x1),
        cmocka_unit_test(fast_mode),
        cmocka_unit_test(fast_threads),
        cmocka_unit_test(fast_apply_bits),
        cmocka_unit_test(sgemm_cut_by_shape),
        cmocka_unit_test(pool_tie_first),
    };
    return cmocka_run_group_tests_name("backend", tests, NULL, NULL);
}
