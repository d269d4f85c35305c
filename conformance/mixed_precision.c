/* distref conformance — suite mixed_precision: --dtype_policy=mixed_float16 /
 * mixed_bfloat16 with loss scaling (docs/TRAINING_FEATURES.md, "Mixed
 * precision"; the step: ref/mixed_step.c).
 *
 * The oracle is the reference one_device run with the policy:
 *   exact        --mixed_reduction=exact (float16 and bfloat16): the reference
 *                under mirrored R=2, R=3 and multi_worker_mirrored W=2 x 2
 *                GPUs gives the oracle's loss bits at every step and its
 *                weights (replica-invariant);
 *   tensorflow   --mixed_reduction=tensorflow (float16): R=1 = the exact
 *                oracle; R=2 and R=3 differ from it (each replica's partial
 *                gradient rounded to float16 first, as TensorFlow) and a
 *                second R=2 run gives the same bits (deterministic for a
 *                given R);
 *   overflow     --loss_scale=dynamic:1048576 (2^20: the first steps overflow
 *                float16 and are skipped, halving the scale): mirrored R=2, R=3
 *                and multi_worker_mirrored give the oracle's bits, so every
 *                strategy took the same skip decisions;
 *   scale        bfloat16 (float32's exponent range) with --loss_scale=dynamic:1024
 *                = without a loss scale: a power of two, undone before apply,
 *                changes no bit;
 *   engine       the engine (strategies/mixed.c) in each in-process variant
 *                that runs it (openmp): exact float16 one_device, mirrored
 *                R=2, R=3, multi_worker_mirrored 2 x 2 and bfloat16 R=2 = the
 *                oracle's bits; the overflow run (skipped steps) at R=2, 3,
 *                2 x 2 = the reference's; tensorflow at R=2 = the reference
 *                mirrored R=2; mpi under mpirun -np 2 (overflow, tensorflow)
 *                the same; --numerics=fast R=2 (the fast mixed kernels)
 *                within a bound of the overflow oracle's loss curve, not its
 *                bits; bfloat16 also at R=3. opencl
 *                (devices/opencl/opencl_mixed.c, its kernels in OpenCL C)
 *                the same cells as openmp, fast included. Caught mutants:
 *                mixed_local_skip, mixed_unscale_twice, mixed_unscale_none,
 *                mixed_clip_scaled, cl_mixed_double_round, mixed_fast_no_bias,
 *                cl_mixed_fast_no_bias (tests/faults.tsv);
 *   clipping     the overflow run with --global_clipnorm, --clipnorm,
 *                --clipvalue (clip_cells): ref and engine = the reference
 *                one_device bits, the clip after the unscale;
 *   accumulation --gradient_accumulation_steps=3 with skipped micro-steps
 *                (conformance/mixed_accum_cells.c);
 *   l2           --l2=0.01 in exact and tensorflow (conformance/mixed_l2_cells.c);
 *   strategies   central_storage and tpu (conformance/mixed_strategies.c);
 *   clip per     --clip_semantics=tensorflow: each replica unscaled and clipped
 *   replica      before the all-reduce (conformance/mixed_clip_cells.c);
 *   models       cnn_synthetic, with --l2, accumulation, the tensorflow
 *                reduction, tpu and --numerics=fast too
 *                (conformance/mixed_graph_cells.c);
 *   spatial      tpu --input_partition_dims on cnn_synthetic and
 *                resnet_synthetic: the unpartitioned bits
 *                (conformance/mixed_spatial_cells.c, its own unit).
 */
#ifndef DR_BIN
#define DR_BIN "bin/distref"
#endif
#include "conformance/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MWMS_TF "{\"cluster\":{\"worker\":[\"h0:1\",\"h1:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}"

typedef struct placement { const char *name; int gpus; const char *alg; int packs, replicas; } placement;

static const placement k_places[] = {
    { "one_device", 0, NULL, 1, 1 }, { "mirrored", 2, "nccl", 1, 2 },
    { "mirrored", 3, "hierarchical_copy", 2, 3 }, { "multi_worker_mirrored", 2, "ring", 1, 4 },
};

static void mixed_config(dr_run_config *c, dr_dtype t, bool tf, float initial, const placement *p)
{
    base_config(c, 512, 64, 0.0);
    c->epochs = 0;
    c->train_steps = 10;
    c->mixed.compute = t;
    c->mixed.loss_scale = t == DR_DTYPE_F16 ? DR_LOSS_SCALE_DYNAMIC : DR_LOSS_SCALE_NONE;
    c->mixed.fixed_scale = initial;
    c->mixed.tf_reduction = tf;
    c->tf_config = strcmp(p->name, "multi_worker_mirrored") == 0 ? MWMS_TF : NULL;
    set_strategy(c, p->name, p->gpus, p->alg, p->packs);
}

/* Runs every placement but one_device against the oracle; want_same: the
 * cells pass on equal bits (else on different bits). */
static int against_on(results *r, const char *variant, const char *what, dr_dtype t, bool tf, float initial,
                      const outcome *oracle, size_t first, size_t last, bool want_same, const char *oracle_what)
{
    dr_run_config c;
    outcome got;
    int fails = 0;
    for (size_t i = first; i <= last; i++) {
        bool same, pass;
        if (r->quick && i == 3) continue;
        mixed_config(&c, t, tf, initial, &k_places[i]);
        snprintf(c.variant, sizeof c.variant, "%s", variant);
        if (strcmp(variant, "ref") != 0 && !supported(r, "mixed_precision", &c, k_places[i].replicas)) continue;
        run_case(&c, &got);
        same = !got.error[0] && !oracle->error[0] && outcome_same(&got, oracle);
        pass = !got.error[0] && !oracle->error[0] && same == want_same;
        fails += !pass;
        record(r, "mixed_precision", &c, k_places[i].replicas, pass, got.seconds, "%s%s%s %s %s R=%d: %s the "
               "reference %s bits%s%.150s", strcmp(variant, "ref") ? variant : "", strcmp(variant, "ref") ? " " : "",
               what, dr_dtype_name(t), k_places[i].name, k_places[i].replicas, want_same ? "=" : "differs from",
               oracle_what, got.error[0] ? ": " : "", got.error);
        outcome_free(&got);
    }
    return fails;
}

static int against(results *r, const char *what, dr_dtype t, bool tf, float initial, const outcome *oracle,
                   size_t first, size_t last, bool want_same)
{
    return against_on(r, "ref", what, t, tf, initial, oracle, first, last, want_same, "one_device");
}

static int mpi_cell(results *r, const char *args, const char *what, const outcome *oracle)
{
    dr_run_config c;
    outcome got;
    char why[200] = "", full[1600];
    mixed_config(&c, DR_DTYPE_F16, strstr(args, "tensorflow") != NULL, 0, &k_places[3]);
    strcpy(c.variant, "mpi");
    set_strategy(&c, "multi_worker_mirrored", 1, "ring", 1);
    snprintf(full, sizeof full, "--global_batch_size=64 --synthetic_examples=512 --train_steps=10 "
             "--dtype_policy=mixed_float16 %s", args);
    run_mpi_pair(r, full, &got);
    bool pass = !got.error[0] && outcome_same_why(&got, oracle, why, sizeof why);
    record(r, "mixed_precision", &c, 2, pass, got.seconds, "mpi -np 2 multi_worker_mirrored %s%s%.150s", what,
           got.error[0] || !pass ? ": " : "", got.error[0] ? got.error : why);
    outcome_free(&got);
    return !pass;
}

/* --numerics=fast. Every backend with the mixed kernel has fast ones
 * (devices/cpu/openmp_mixed.c, devices/opencl/cl/mixed.cl: float32 GEMMs on
 * the dtype-rounded operands, each result rounded to the dtype; the
 * replicas' float partials summed exactly): the overflow run at R=2 must
 * differ from the oracle (the fast kernels ran) and stay within
 * MIXED_FAST_BOUND of its loss curve, the same skipped steps included. */
/* MIXED_FAST_BOUND (conformance.h): measured openmp 2.8e-6, opencl 8.7e-6 (docs/TRAINING_FEATURES.md) */
static int fast_cell(results *r, const char *variant, const outcome *oracle)
{
    dr_run_config c;
    outcome got;
    double rel = INFINITY, p99, ulp, differ;
    mixed_config(&c, DR_DTYPE_F16, false, 1048576.0f, &k_places[1]);
    snprintf(c.variant, sizeof c.variant, "%s", variant);
    snprintf(c.numerics, sizeof c.numerics, "fast");
    if (!supported(r, "mixed_precision", &c, 2)) return 0;
    run_case(&c, &got);
    bool pass = !got.error[0] && !outcome_same(&got, oracle) &&
                outcome_drift(&got, oracle, &rel, &p99, &ulp, &differ) && rel <= MIXED_FAST_BOUND;
    record(r, "mixed_precision", &c, 2, pass, got.seconds, "%s fast kernels, overflow float16 R=2: not ref's bits, "
           "loss within %.0e (max %.2e)%s%.150s", variant, MIXED_FAST_BOUND, rel, got.error[0] ? ": " : "", got.error);
    outcome_free(&got);
    return !pass;
}

/* The engine (strategies/mixed.c): each in-process variant that runs the
 * mixed step (openmp, opencl) gives the reference's bits (exact: one_device's,
 * float16 and bfloat16, with and without skipped steps; tensorflow: the
 * reference at the same R); the mpi variant under mpirun -np 2 the same. */
static int engine_cells(results *r)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    dr_run_config c;
    outcome f16, bf16, over, tf2;
    int fails = 0;
    mixed_config(&c, DR_DTYPE_F16, false, 0, &k_places[0]);
    run_case(&c, &f16);
    mixed_config(&c, DR_DTYPE_BF16, false, 0, &k_places[0]);
    run_case(&c, &bf16);
    mixed_config(&c, DR_DTYPE_F16, false, 1048576.0f, &k_places[0]);
    run_case(&c, &over);
    mixed_config(&c, DR_DTYPE_F16, true, 0, &k_places[1]);
    run_case(&c, &tf2);
    for (size_t v = 0; v < nv; v++) {
        const char *n = ev[v]->name;
        mixed_config(&c, DR_DTYPE_F16, false, 0, &k_places[1]);
        snprintf(c.variant, sizeof c.variant, "%s", n);
        if (!supported(r, "mixed_precision", &c, 2)) continue;
        fails += against_on(r, n, "mixed_reduction=exact", DR_DTYPE_F16, false, 0, &f16, 0, 3, true, "one_device");
        if (!r->quick)
            fails += against_on(r, n, "mixed_reduction=exact", DR_DTYPE_BF16, false, 0, &bf16, 1, 2, true, "one_device");
        fails += against_on(r, n, "overflow (loss_scale=dynamic:2^20, skipped steps)", DR_DTYPE_F16, false, 1048576.0f,
                            &over, 1, 3, true, "one_device");
        fails += against_on(r, n, "mixed_reduction=tensorflow", DR_DTYPE_F16, true, 0, &tf2, 1, 1, true,
                            "mirrored R=2");
        fails += fast_cell(r, n, &over);
    }
    if (!r->quick && !r->fault && (!r->variant || strcmp(r->variant, "mpi") == 0) &&
        system("command -v mpirun > /dev/null 2>&1") == 0) {
        fails += mpi_cell(r, "--loss_scale=dynamic:1048576", "overflow (loss_scale=dynamic:2^20, skipped steps) "
                          "float16 exact: = the reference one_device bits", &over);
        fails += mpi_cell(r, "--mixed_reduction=tensorflow", "mixed_reduction=tensorflow float16: = the reference "
                          "mirrored R=2 bits", &tf2);
    }
    outcome_free(&f16); outcome_free(&bf16); outcome_free(&over); outcome_free(&tf2);
    return fails;
}

/* Clipping (issue 30 item 2): --global_clipnorm, --clipnorm, --clipvalue on
 * the aggregated gradient after the one skip decision and the unscale (Keras
 * 3's LossScaleOptimizer unscales, then its inner optimizer clips:
 * scripts/tf_mixed_features.py). The overflow run (skipped steps) clipped:
 * the reference one_device run is the oracle and differs from the unclipped
 * one (the clip bites); the reference and each engine variant under mirrored
 * R=2, R=3 and multi_worker_mirrored 2 x 2 give its bits (--clipnorm and
 * --clipvalue at R=3 only); mpi -np 2 with --global_clipnorm the same. */
typedef struct clip_case { const char *name, *flag; dr_clip clip; } clip_case;

static int clip_cells_on(results *r, const char *variant, const clip_case *k, const outcome *oracle, size_t first,
                         size_t last)
{
    dr_run_config c;
    outcome got;
    int fails = 0;
    for (size_t i = first; i <= last; i++) {
        if (r->quick && i == 3) continue;
        mixed_config(&c, DR_DTYPE_F16, false, 1048576.0f, &k_places[i]);
        c.clip = k->clip;
        snprintf(c.variant, sizeof c.variant, "%s", variant);
        if (strcmp(variant, "ref") != 0 && !supported(r, "mixed_precision", &c, k_places[i].replicas)) continue;
        run_case(&c, &got);
        bool pass = !got.error[0] && !oracle->error[0] && outcome_same(&got, oracle);
        fails += !pass;
        record(r, "mixed_precision", &c, k_places[i].replicas, pass, got.seconds, "%s overflow float16 --%s %s R=%d: "
               "= the reference one_device bits (clipped after the unscale)%s%.150s", variant, k->name,
               k_places[i].name, k_places[i].replicas, got.error[0] ? ": " : "", got.error);
        outcome_free(&got);
    }
    return fails;
}

static int clip_cells(results *r, const outcome *unclipped)
{
    static const clip_case k[] = { { "global_clipnorm=0.05", "--global_clipnorm=0.05", { 0, 0, 0.05f, false, false } },
                                   { "clipnorm=0.02", "--clipnorm=0.02", { 0.02f, 0, 0, false, false } },
                                   { "clipvalue=0.002", "--clipvalue=0.002", { 0, 0.002f, 0, false, false } } };
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    dr_run_config c;
    outcome oracle;
    int fails = 0;
    for (size_t j = 0; j < sizeof k / sizeof k[0]; j++) {
        size_t first = j == 0 ? 1 : 2, last = j == 0 ? 3 : 2;
        char args[160];
        mixed_config(&c, DR_DTYPE_F16, false, 1048576.0f, &k_places[0]);
        c.clip = k[j].clip;
        run_case(&c, &oracle);
        bool bites = !oracle.error[0] && !unclipped->error[0] && !outcome_same(&oracle, unclipped);
        fails += !bites;
        record(r, "mixed_precision", &c, 1, bites, oracle.seconds, "ref overflow float16 --%s one_device: differs "
               "from the unclipped run (the clip bites)%s%.150s", k[j].name, oracle.error[0] ? ": " : "", oracle.error);
        fails += clip_cells_on(r, "ref", &k[j], &oracle, first, last);
        for (size_t v = 0; v < nv; v++) fails += clip_cells_on(r, ev[v]->name, &k[j], &oracle, first, last);
        snprintf(args, sizeof args, "--loss_scale=dynamic:1048576 %s", k[j].flag);
        if (j == 0 && !r->quick && !r->fault && (!r->variant || strcmp(r->variant, "mpi") == 0) &&
            system("command -v mpirun > /dev/null 2>&1") == 0)
            fails += mpi_cell(r, args, "overflow float16 --global_clipnorm=0.05: = the reference one_device bits",
                              &oracle);
        outcome_free(&oracle);
    }
    return fails;
}

int suite_mixed_precision(results *r)
{
    dr_run_config c;
    outcome oracle;
    int fails = 0;
    printf("== mixed_precision: mixed_float16 / mixed_bfloat16, loss scaling, exact and tensorflow reductions\n");
    for (int t = DR_DTYPE_F16; t <= DR_DTYPE_BF16; t++) {
        if (r->quick && t == DR_DTYPE_BF16) continue;
        mixed_config(&c, (dr_dtype)t, false, 0, &k_places[0]);
        run_case(&c, &oracle);
        fails += against(r, "mixed_reduction=exact", (dr_dtype)t, false, 0, &oracle, 1, 3, true);
        if (t == DR_DTYPE_F16) {   /* tensorflow: = the oracle at R=1, not at R=2, 3 */
            fails += against(r, "mixed_reduction=tensorflow", DR_DTYPE_F16, true, 0, &oracle, 0, 0, true);
            fails += against(r, "mixed_reduction=tensorflow", DR_DTYPE_F16, true, 0, &oracle, 1, 2, false);
        }
        outcome_free(&oracle);
    }
    {   /* tensorflow at R=2 twice: the same bits */
        outcome a, b;
        mixed_config(&c, DR_DTYPE_F16, true, 0, &k_places[1]);
        run_case(&c, &a);
        run_fresh_case(&c, &b);
        bool pass = !a.error[0] && outcome_same(&a, &b);
        fails += !pass;
        record(r, "mixed_precision", &c, 2, pass, b.seconds, "mixed_reduction=tensorflow float16 mirrored R=2: "
               "deterministic (two runs, the same bits)");
        outcome_free(&a); outcome_free(&b);
    }
    {   /* bfloat16 has float32's exponent range: a power-of-two loss scale, undone, changes no bit */
        outcome a, b;
        mixed_config(&c, DR_DTYPE_BF16, false, 0, &k_places[1]);
        run_case(&c, &a);
        c.mixed.loss_scale = DR_LOSS_SCALE_DYNAMIC;
        c.mixed.fixed_scale = 1024.0f;
        run_case(&c, &b);
        /* the scale series differ by construction (none vs 1024, no step skipped): compare the bits only */
        memset(a.loss_scale, 0, sizeof a.loss_scale); memset(a.skipped, 0, sizeof a.skipped);
        memset(b.loss_scale, 0, sizeof b.loss_scale); memset(b.skipped, 0, sizeof b.skipped);
        bool pass = !a.error[0] && !b.error[0] && outcome_same(&a, &b);
        fails += !pass;
        record(r, "mixed_precision", &c, 2, pass, b.seconds, "bfloat16 mirrored R=2 --loss_scale=dynamic:1024 = no "
               "loss scale (a power of two, undone before apply, changes no bit)%s%.150s", b.error[0] ? ": " : "",
               b.error);
        outcome_free(&a); outcome_free(&b);
    }
    mixed_config(&c, DR_DTYPE_F16, false, 1048576.0f, &k_places[0]);   /* overflow: skipped steps */
    run_case(&c, &oracle);
    fails += against(r, "overflow (loss_scale=dynamic:2^20)", DR_DTYPE_F16, false, 1048576.0f, &oracle, 1, 3, true);
    fails += clip_cells(r, &oracle);
    outcome_free(&oracle);
    fails += engine_cells(r);
    fails += mixed_accum_cells(r);
    fails += mixed_l2_cells(r);
    fails += mixed_strategy_cells(r);
    fails += mixed_clip_cells(r);
    fails += mixed_graph_cells(r);
    return fails;
}
