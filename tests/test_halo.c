/* Spatial partitioning with halos in the reference (docs/MODELS.md "Spatial
 * partitioning with halos"), on a model that puts on the tiles what the
 * experiments' tiles do not reach: a 'valid' Conv2D (its output tiles are
 * offset from its input's: a halo each way), MaxPooling2D on the tiles, a
 * stride-2 'same' Conv2D (whose gradient halo flows the other way), a 1x1
 * Conv2D and a residual Add, then GlobalAveragePooling2D, where the maps are
 * gathered onto core 0.
 *   tiled_bits    2 replicas x 2x2, 2x1 and 1x2 cores, sync and replica BN:
 *                 the loss sums, every gradient accumulator and the BN state
 *                 are the untiled run's bits, and halos were sent
 *   plan          where the tiles end and why; refusals name the layer
 *                 (index and kind) and the dimension
 *   uneven        every shape that does not split (the experiments at each
 *                 dims, an odd map after a stride-2 conv or a pool, an odd
 *                 input): gathered at that layer with the reason, or
 *                 refused at layer 0. (A window reaching two tiles away
 *                 needs a kernel wider than 3, which dr_model_derive
 *                 refuses: that reason is kept for the plan's sake.)
 * Every core's input holds only its tile: a halo not sent reads 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "ref/halo.h"

#define N 3            /* examples a replica */
#define R 2            /* replicas */
#define PMAX 1024

static dr_model_spec model(void)
{
    dr_model_spec m = { .nlayers = 8, .loss = DR_LOSS_XENT_LOGITS, .in_h = 18, .in_w = 18, .in_c = 2,
        .layer = { { .kind = DR_LAYER_CONV2D, .filters = 4, .ksize = 3, .stride = 1, .act = DR_ACT_RELU },
                   { .kind = DR_LAYER_BATCH_NORM, .act = DR_ACT_RELU },
                   { .kind = DR_LAYER_MAX_POOL2D },
                   { .kind = DR_LAYER_CONV2D, .filters = 4, .ksize = 3, .stride = 2, .same = true },
                   { .kind = DR_LAYER_CONV2D, .filters = 4, .ksize = 1, .stride = 1, .act = DR_ACT_RELU },
                   { .kind = DR_LAYER_ADD, .from = 3, .act = DR_ACT_RELU },
                   { .kind = DR_LAYER_GLOBAL_AVG_POOL2D },
                   { .kind = DR_LAYER_DENSE, .out = 3 } } };
    dr_err err = { 0 };
    assert_int_equal(dr_model_derive(&m, &err), DR_OK);
    return m;
}

typedef struct run { dr_acc loss[R], grad[R][PMAX]; float state[64]; uint64_t correct[R]; } run;

static float xs[R * N * 18 * 18 * 2];
static const uint8_t ys[R * N] = { 0, 2, 1, 1, 0, 2 };

/* The step's exact sums with T = ph x pw cores a replica (1 x 1: untiled). */
static void step(const dr_model_spec *m, const float *p, bool sync, uint32_t ph, uint32_t pw, run *out, uint64_t *halo)
{
    static dr_spatial_plan plan;
    static dr_halo h;
    static float cx[R * DR_MAX_TILES][N * 18 * 18 * 2];
    dr_device dev[R * DR_MAX_TILES];
    dr_work w[R * DR_MAX_TILES];
    dr_graph_replica g[R * DR_MAX_TILES];
    dr_device_spec spec = { 0 };
    dr_err err = { 0 };
    uint32_t T = ph * pw, f = 18 * 18 * 2, S = (uint32_t)(dr_model_num_params(m) - dr_model_num_trainable(m));
    memset(out, 0, sizeof *out);
    memcpy(out->state, p + dr_model_num_trainable(m), S * sizeof(float));
    dr_graph_ctx ctx = { m, dr_model_ops_ref(), true, sync, 7, 1, out->state, T > 1 ? &h : NULL, NULL, NULL,
                         DR_DTYPE_F32, 0.0f, 0 };
    spec.replica = spec.task = -1;
    spec.has_type = 1;
    if (T > 1) {
        assert_int_equal(dr_spatial_plan_make(m, ph, pw, &plan, &err), DR_OK);
        memset(&h, 0, sizeof h);
        memset(cx, 0, sizeof cx);
        h.m = m; h.plan = &plan;
        h.send = malloc(N * f * 8 * sizeof(float)); h.recv = malloc(N * f * 8 * sizeof(float));
    }
    for (uint32_t e = 0; e < R * T; e++) {
        uint32_t r = e / T, c = e % T;
        const float *x = xs + (size_t)r * N * f;
        dr_device_init(&dev[e], &spec, 0);
        assert_int_equal(dr_work_init(&w[e], m, N, &err), DR_OK);
        if (T > 1) {   /* the core's input: its tile, nothing else */
            const uint32_t *t = plan.tile[c].rect[0];
            w[e].tile = &plan.tile[c];
            for (uint32_t i = 0; i < N * f; i++) {
                uint32_t px = i / 2, y = px / 18 % 18, xx = px % 18;
                if (y >= t[0] && y < t[1] && xx >= t[2] && xx < t[3]) cx[e][i] = x[i];
            }
            h.x[e] = cx[e]; h.dev[e] = &dev[e];
            x = cx[e];
        }
        dr_acc_init(&out->loss[r]);
        g[e] = (dr_graph_replica){ p, x, ys + r * N, NULL, NULL, N, &w[e], &out->loss[r], out->grad[r], &out->correct[r], c, 0 };
    }
    dr_graph_loss_grad(&ctx, g, R * T);
    for (uint32_t e = 0; e < R * T; e++) dr_work_free(&w[e]);
    *halo = 0;
    for (uint32_t c = 0; T > 1 && c < T; c++) *halo += h.halo_bytes[c];
    if (T > 1) { free(h.send); free(h.recv); }
}

static void same_bits(const dr_model_spec *m, run *a, run *b)
{
    size_t P = dr_model_num_params(m), S = P - dr_model_num_trainable(m);
    for (uint32_t r = 0; r < R; r++) {
        float la = dr_acc_round(&a->loss[r]), lb = dr_acc_round(&b->loss[r]);
        assert_memory_equal(&la, &lb, sizeof la);
        assert_int_equal(a->correct[r], b->correct[r]);
        for (size_t i = 0; i < P; i++) {
            float ga = dr_acc_round(&a->grad[r][i]), gb = dr_acc_round(&b->grad[r][i]);
            if (memcmp(&ga, &gb, sizeof ga)) fail_msg("replica %u gradient %zu: %a tiled, %a untiled", r, i, gb, ga);
        }
    }
    assert_memory_equal(a->state, b->state, S * sizeof(float));
}

static void test_tiled_bits(void **st)
{
    static const uint32_t dims[3][2] = { { 2, 2 }, { 2, 1 }, { 1, 2 } };
    static float p[PMAX];
    static run a, b;
    dr_model_spec m = model();
    uint64_t seed = 12345, bytes;
    (void)st;
    assert_true(dr_model_num_params(&m) <= PMAX);
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        xs[i] = (float)(int32_t)(seed >> 40) / 8388608.0f;
    }
    dr_model_init(&m, 3, p);
    for (int sync = 0; sync < 2; sync++) {
        step(&m, p, sync, 1, 1, &a, &bytes);
        for (int d = 0; d < 3; d++) {
            step(&m, p, sync, dims[d][0], dims[d][1], &b, &bytes);
            same_bits(&m, &a, &b);
            assert_true(bytes > 0);
        }
    }
}

static void test_plan(void **st)
{
    dr_model_spec m = model();
    dr_spatial_plan p;
    dr_err err = { 0 };
    (void)st;
    assert_int_equal(dr_spatial_plan_make(&m, 2, 2, &p, &err), DR_OK);
    assert_int_equal(p.lp, 6);
    assert_string_equal(p.stop, "layer 6 (global_avg_pool2d) reads the whole feature map");
    assert_true(p.gathered[6] && !p.gathered[5]);
    assert_int_equal(dr_spatial_plan_make(&m, 4, 1, &p, &err), DR_EUSAGE);
    if (!strstr(err.msg, "--input_partition_dims=4,1: model: layer 0 (conv2d): input height 18 does not split into 4 tiles"))
        fail_msg("%s", err.msg);
    m.in_h = m.in_w = 20;   /* 18x18 after the valid conv, 9x9 after the pool: the tiles end at the pool */
    assert_int_equal(dr_model_derive(&m, &err), DR_OK);
    assert_int_equal(dr_spatial_plan_make(&m, 2, 1, &p, &err), DR_OK);
    assert_int_equal(p.lp, 2);
    assert_string_equal(p.stop, "layer 2 (max_pool2d): output height 9 does not split into 2 tiles");
    assert_true(p.gathered[2] && !p.gathered[1]);
    assert_int_equal(dr_spatial_plan_make(&m, 1, 4, &p, &err), DR_EUSAGE);
    if (!strstr(err.msg, "layer 0 (conv2d): output width 18 does not split into 4 tiles")) fail_msg("%s", err.msg);
}

/* Every shape that does not split, on the experiments and on maps built to
 * reach each reason: where a map stops splitting (odd, or not a multiple
 * of the cores) the tiles end there and the maps are gathered onto core 0,
 * the reason naming the layer (index and kind) and the dimension; at layer
 * 0 the run is refused with the same words. distref does not pad uneven
 * tiles (XLA's SPMD would; docs/MODELS.md says why). */
static void expect_stop(const dr_model_spec *m, uint32_t ph, uint32_t pw, uint32_t lp, const char *why)
{
    dr_spatial_plan p;
    dr_err err = { 0 };
    int rc = dr_spatial_plan_make(m, ph, pw, &p, &err);
    if (lp == 0) {
        assert_int_equal(rc, DR_EUSAGE);
        if (!strstr(err.msg, why)) fail_msg("%ux%u: %s", ph, pw, err.msg);
        return;
    }
    assert_int_equal(rc, DR_OK);
    if (p.lp != lp || strcmp(p.stop, why) != 0) fail_msg("%ux%u: tiles end at %u: %s", ph, pw, p.lp, p.stop);
}

static void test_uneven(void **st)
{
    dr_experiment e;
    dr_err err = { 0 };
    (void)st;
    assert_int_equal(dr_experiment_lookup("cnn_synthetic", &e, &err), DR_OK);
    for (uint32_t d = 0; d < 3; d++)   /* 2,2 / 2,1 / 1,2: the pool's 14 -> 7 */
        expect_stop(&e.model, d == 2 ? 1 : 2, d == 1 ? 1 : 2, 4, d == 2 ? "layer 4 (max_pool2d): output width 7 does "
                    "not split into 2 tiles" : "layer 4 (max_pool2d): output height 7 does not split into 2 tiles");
    expect_stop(&e.model, 4, 1, 0, "layer 0 (conv2d): output height 14 does not split into 4 tiles");
    expect_stop(&e.model, 4, 2, 0, "layer 0 (conv2d): output height 14 does not split into 4 tiles");
    assert_int_equal(dr_experiment_lookup("resnet_synthetic", &e, &err), DR_OK);
    expect_stop(&e.model, 2, 2, 24, "layer 24 (conv2d): output height 7 does not split into 2 tiles");   /* stride 2 */
    expect_stop(&e.model, 4, 1, 12, "layer 12 (conv2d): output height 14 does not split into 4 tiles");
    expect_stop(&e.model, 1, 4, 12, "layer 12 (conv2d): output width 14 does not split into 4 tiles");
    dr_model_spec m = model();   /* 22x22: 20 after the valid conv, 10 after the pool, 5 after the stride-2 conv */
    m.in_h = m.in_w = 22;
    assert_int_equal(dr_model_derive(&m, &err), DR_OK);
    expect_stop(&m, 2, 1, 3, "layer 3 (conv2d): output height 5 does not split into 2 tiles");
    expect_stop(&m, 1, 2, 3, "layer 3 (conv2d): output width 5 does not split into 2 tiles");
    expect_stop(&m, 1, 4, 0, "layer 0 (conv2d): input width 22 does not split into 4 tiles");
    m.in_h = m.in_w = 21;   /* an odd input: layer 0's input does not split */
    assert_int_equal(dr_model_derive(&m, &err), DR_OK);
    expect_stop(&m, 2, 1, 0, "layer 0 (conv2d): input height 21 does not split into 2 tiles");
}

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_tiled_bits), cmocka_unit_test(test_plan),
                                        cmocka_unit_test(test_uneven) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
