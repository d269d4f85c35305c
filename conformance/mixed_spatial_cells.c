/* distref conformance — suite mixed_precision, spatial partitioning (tpu
 * v2-8 --input_partition_dims, docs/MODELS.md "Spatial partitioning with
 * halos") of the models beyond Dense under the mixed step
 * (docs/TRAINING_FEATURES.md, "Mixed precision with the models beyond
 * Dense"; ref/mixed_graph.c, strategies/graph_spatial.c).
 *
 * Every rounding to the compute dtype is per element, so tiling the maps
 * changes none of them; the halos carry the rounded maps, the exact sums
 * merge over the cores before their one rounding. Cells, sync BN:
 *   bits   for each case (cnn_synthetic float16 with --loss_scale=
 *          dynamic:2^20, its first steps overflowing and skipped, at 2,2
 *          (R=2), 1,2 and 2,1 (R=4); cnn_synthetic bfloat16 at 2,2;
 *          resnet_synthetic float16 at 2,2 and 4,1 (R=2), bfloat16 at 1,2)
 *          the reference and each engine variant give the reference's
 *          unpartitioned tpu v2-8 run's bits: losses, loss scale, skipped
 *          steps, weights (opencl: its halo exchange moves each core's
 *          rounded input map, xc); cnn_synthetic 4,1 does not divide (its
 *          first conv's 14 rows into 4 tiles) and is left out;
 *   fast   each engine variant's --numerics=fast at 2,2 on the float16
 *          cnn case: its loss within MIXED_FAST_BOUND of the exact
 *          oracle's at every step, the same skipped steps, and a second
 *          run its bits (the fast GEMMs cut by the tile's shapes: not the
 *          unpartitioned fast run's bits).
 * Caught mutants: ref_mixed_tile_input_f32 (each core's tile of the
 * input left unrounded), engine_mixed_halo_input_f32 (the input map's halo
 * moved between the float32 inputs, the rounded map the conv reads keeping
 * holes) and its opencl twin cl_mixed_halo_input_f32 (tests/faults.tsv).
 */
#include "conformance/conformance.h"

#include <stdio.h>
#include <string.h>

static void cnn_setup(dr_run_config *c) { graph_config(c, "cnn_synthetic", 128, 8); }

/* 4 steps: overflow float16 skips steps 1, 2 and 4 */
static void resnet_setup(dr_run_config *c) { graph_config(c, "resnet_synthetic", 64, 4); }

typedef struct spatial_case {
    void (*setup)(dr_run_config *);
    dr_dtype    dtype;
    const char *dims[3];   /* NULL-terminated */
} spatial_case;

static const spatial_case k_cases[] = {
    { cnn_setup, DR_DTYPE_F16, { "2,2", "1,2", "2,1" } },
    { cnn_setup, DR_DTYPE_BF16, { "2,2", NULL, NULL } },
    { resnet_setup, DR_DTYPE_F16, { "2,2", "4,1", NULL } },
    { resnet_setup, DR_DTYPE_BF16, { "1,2", NULL, NULL } },
};

/* The case's run under tpu v2-8 (dims NULL or "": unpartitioned), float16
 * with the overflowing dynamic scale or bfloat16 without a loss scale. */
static bool spatial_config(dr_run_config *c, const spatial_case *k, const char *dims, const char *variant,
                           dr_err *err)
{
    mixed_place_config(c, k->setup, false, &k_mixed_places[0], variant);
    if (k->dtype != DR_DTYPE_F16) {
        c->mixed.compute = k->dtype;
        c->mixed.loss_scale = DR_LOSS_SCALE_NONE;
        c->mixed.fixed_scale = 0.0f;
    }
    snprintf(c->input_partition_dims, sizeof c->input_partition_dims, "%s", dims ? dims : "");
    return dr_get_distribution_strategy("tpu", 0, NULL, 1, "v2-8", &c->strategy, err) == DR_OK;
}

static int cores_of(const char *dims)
{
    return (dims[0] - '0') * (dims[2] - '0');
}

/* One partitioned run against the unpartitioned oracle's bits. */
static int bits_cell(results *r, const spatial_case *k, const char *dims, const char *variant, const outcome *want)
{
    dr_run_config c;
    outcome got;
    dr_err err;
    char why[200] = "";
    int R = 8 / cores_of(dims);
    if (!spatial_config(&c, k, dims, variant, &err)) {
        record(r, "mixed_precision", NULL, R, false, 0, "%s %s tpu v2-8 --input_partition_dims=%s: %s", variant,
               k->setup == cnn_setup ? "cnn_synthetic" : "resnet_synthetic", dims, err.msg);
        return 1;
    }
    if (strcmp(variant, "ref") != 0 && !supported(r, "mixed_precision", &c, R)) return 0;
    run_case(&c, &got);
    bool same = !got.error[0] && !want->error[0] && outcome_same_why(&got, want, why, sizeof why);
    record(r, "mixed_precision", &c, R, same, got.seconds, "%s %s sync BN %s tpu v2-8 --input_partition_dims=%s "
           "(R=%d, halos): = the reference's unpartitioned tpu v2-8 bits (losses, loss scale, skips, weights)%s%.150s",
           variant, c.experiment, k->dtype == DR_DTYPE_F16 ? "overflow float16" : "bfloat16", dims, R,
           got.error[0] || !same ? ": " : "", got.error[0] ? got.error : (want->error[0] ? want->error : why));
    outcome_free(&got);
    return !same;
}

/* --numerics=fast at 2,2 (the float16 cnn case): within the bound of the
 * exact oracle, the same skips, and repeatable. */
static int fast_cell(results *r, const char *variant, const outcome *oracle)
{
    dr_run_config c;
    outcome got, again;
    dr_err err;
    double rel = 1.0, p99, ulp, diff;
    bool skips = true;
    char why[200] = "";
    if (!spatial_config(&c, &k_cases[0], "2,2", variant, &err)) {
        record(r, "mixed_precision", NULL, 2, false, 0, "%s tpu v2-8 fast: %s", variant, err.msg);
        return 1;
    }
    snprintf(c.numerics, sizeof c.numerics, "fast");
    if (!supported(r, "mixed_precision", &c, 2)) return 0;
    run_case(&c, &got);
    run_fresh_case(&c, &again);
    for (uint32_t s = 0; s < got.nsteps && s < oracle->nsteps; s++) skips &= got.skipped[s] == oracle->skipped[s];
    bool pass = !got.error[0] && !oracle->error[0] && got.nsteps == oracle->nsteps && skips &&
                outcome_drift(&got, oracle, &rel, &p99, &ulp, &diff) && rel <= MIXED_FAST_BOUND &&
                outcome_same_why(&again, &got, why, sizeof why);
    record(r, "mixed_precision", &c, 2, pass, got.seconds + again.seconds, "%s cnn_synthetic sync BN overflow "
           "float16 fast tpu v2-8 --input_partition_dims=2,2: loss within %.0e of the exact unpartitioned run's (max "
           "%.2e), %s skipped steps, a second run its bits%s%.150s", variant, MIXED_FAST_BOUND, rel,
           skips ? "the same" : "other", got.error[0] || !pass ? ": " : "", got.error[0] ? got.error : why);
    outcome_free(&got);
    outcome_free(&again);
    return !pass;
}

int mixed_spatial_cells(results *r)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    int fails = 0;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const spatial_case *k = &k_cases[i];
        dr_run_config c;
        outcome want;
        dr_err err;
        if (r->quick && k->setup == resnet_setup && k->dtype != DR_DTYPE_F16) continue;
        if (!spatial_config(&c, k, NULL, "ref", &err)) {
            record(r, "mixed_precision", NULL, 8, false, 0, "ref tpu v2-8: %s", err.msg);
            fails++;
            continue;
        }
        run_case(&c, &want);
        for (size_t d = 0; d < 3 && k->dims[d]; d++) {
            fails += bits_cell(r, k, k->dims[d], "ref", &want);
            for (size_t v = 0; v < nv; v++) fails += bits_cell(r, k, k->dims[d], ev[v]->name, &want);
        }
        for (size_t v = 0; i == 0 && v < nv; v++) fails += fast_cell(r, ev[v]->name, &want);
        outcome_free(&want);
    }
    return fails;
}
