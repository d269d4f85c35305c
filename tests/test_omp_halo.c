/* The engine's halo exchange for spatial partitioning (devices/cpu/
 * openmp_spatial.c) and its tile kernels (dr_omp_im2col_rect,
 * dr_omp_grad_gather_rect, devices/cpu/openmp_conv.c), on the plan of
 * core/spatial_plan.c and test_halo.c's model (a 'valid' 3x3 Conv2D: a halo
 * each way; a stride-2 'same' Conv2D, whose gradient halo flows the other
 * way). Every core's buffer holds only its own tile, then what the exchange
 * brings it:
 *   forward_tiles   each core's im2col rows of its output tile are the whole
 *                   map's rows at those outputs (so the exact GEMM gives the
 *                   unpartitioned pre-activations' bits), at 1x2, 2x1 and
 *                   2x2 cores (4x1 does not divide 18 rows: refused), and
 *                   the halo bytes are what the windows read beyond the tile
 *   backward_tiles  each core's gradient gather rows of its input tile are
 *                   the whole map's
 * The planted fault engine_halo_row_short_tiles (tests/faults.tsv: the halo from
 * the core below one row short) fails forward_tiles; the stride-2 conv's
 * gradient halo comes from the core above, so backward_tiles still passes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "devices/cpu/openmp_graph.h"
#include "devices/cpu/openmp_spatial.h"

#define N 3   /* examples */

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

static const uint32_t grids[][2] = { { 1, 2 }, { 2, 1 }, { 2, 2 } };

static void fill(float *x, size_t len, uint32_t seed)
{
    for (size_t i = 0; i < len; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) % 2001u) / 1000.0f - 1.0f + 1.0f / 1024.0f;   /* never 0 */
    }
}

/* The bytes core c should receive: the needed rectangle less its own tile. */
static uint64_t expected_bytes(const uint32_t nd[4], const uint32_t own[4], uint32_t C)
{
    uint64_t rows = (own[0] > nd[0] ? own[0] - nd[0] : 0) + (nd[1] > own[1] ? nd[1] - own[1] : 0);
    uint64_t cols = (own[2] > nd[2] ? own[2] - nd[2] : 0) + (nd[3] > own[3] ? nd[3] - own[3] : 0);
    return ((uint64_t)(own[3] - own[2]) * rows + (uint64_t)(nd[1] - nd[0]) * cols) * C * N * sizeof(float);
}

/* Layer l at every grid: the tile rows from the exchanged buffers are the
 * whole map's; grad: the backward's gather, else the forward's im2col. */
static void check_layer(uint32_t l, bool grad)
{
    dr_model_spec m = model();
    const dr_dense *d = &m.layer[l];
    uint32_t k = grad ? l + 1 : (d->src ? d->src : l), H, W, C, need[DR_MAX_TILES][4];
    size_t len, kk = (size_t)d->ksize * d->ksize * (grad ? d->oc : d->ic), rows = (size_t)N * d->ih * d->iw;
    dr_model_map(&m, k, &H, &W, &C);
    len = (size_t)N * H * W * C;
    float *full = malloc(len * sizeof(float)), *a = malloc(rows * kk * sizeof(float)), *b = malloc(rows * kk * sizeof(float));
    fill(full, len, 7 + l);
    for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
        dr_spatial_plan p;
        dr_err err = { 0 };
        float *maps[DR_MAX_TILES];
        uint64_t bytes[DR_MAX_TILES] = { 0 }, any = 0;
        assert_int_equal(dr_spatial_plan_make(&m, grids[g][0], grids[g][1], &p, &err), DR_OK);
        if (l >= p.lp) fail_msg("%ux%u: tiles end at layer %u: %s", grids[g][0], grids[g][1], p.lp, p.stop);
        for (uint32_t c = 0; c < p.tiles; c++) {
            assert_non_null(maps[c] = calloc(len, sizeof(float)));
            dr_omp_halo_copy(H, W, C, N, full, maps[c], p.tile[c].rect[k]);
        }
        dr_omp_halo_need(&p, &m, l, grad, need);
        dr_omp_halo_exchange(&p, &m, k, N, maps, (const uint32_t (*)[4])need, bytes, NULL);
        for (uint32_t c = 0; c < p.tiles; c++) {
            const uint32_t *r = p.tile[c].rect[grad ? (d->src ? d->src : l) : l + 1];
            size_t q = (size_t)N * (r[1] - r[0]) * (r[3] - r[2]) * kk;
            if (grad) { dr_omp_grad_gather_rect(d, maps[c], N, r, a); dr_omp_grad_gather_rect(d, full, N, r, b); }
            else      { dr_omp_im2col_rect(d, maps[c], N, r, a);      dr_omp_im2col_rect(d, full, N, r, b); }
            if (memcmp(a, b, q * sizeof(float)))
                fail_msg("layer %u %s, %ux%u cores: core %u's rows differ from the whole map's", l,
                         grad ? "backward" : "forward", grids[g][0], grids[g][1], c);
            assert_int_equal(bytes[c], expected_bytes(need[c], p.tile[c].rect[k], C));
            any += bytes[c];
            free(maps[c]);
        }
        assert_true(any > 0);   /* every layer here reads across the cut */
    }
    free(full); free(a); free(b);
}

static void forward_tiles(void **state)
{
    (void)state;
    check_layer(0, false);
    check_layer(3, false);
}

static void backward_tiles(void **state)
{
    (void)state;
    check_layer(3, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forward_tiles),
        cmocka_unit_test(backward_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
