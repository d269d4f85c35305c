/* distref conformance — suite mixed_precision, the models beyond Dense:
 * cnn_synthetic (Conv2D, BatchNormalization, Add, MaxPool, Dropout, Dense)
 * under --dtype_policy=mixed_float16 (docs/TRAINING_FEATURES.md, "Mixed
 * precision with the models beyond Dense"; ref/mixed_graph.c).
 *
 * The oracle is the reference one_device run, float16 with
 * --loss_scale=dynamic:2^20 (the first steps overflow and are skipped),
 * dropout on, sync BatchNormalization. Cells:
 *   bites    it differs from the float32 run with the same flags and
 *            skips at least one step and applies at least one (the mixed
 *            step ran, and the loss scale moved);
 *   sync BN  the reference under mirrored R=2, R=3 and
 *            multi_worker_mirrored 2 x 2 gives the oracle's bits at every
 *            step and its weights (the statistics are the global batch's,
 *            each rounding is of an exact replica-invariant value);
 *   replica  --batch_norm=replica: mirrored R=2 twice gives the same bits
 *            and differs from the oracle (each replica's own statistics);
 *   engine   each in-process engine variant against the oracle at
 *            one_device, mirrored R=2 and R=3 (strategies/graph.c's lock
 *            step with the backend's ops' roundings: openmp's, and opencl's
 *            kernels with their compute-dtype argument), and under --batch_norm=replica at
 *            mirrored R=2 against the reference's replica-BN run (each
 *            replica's own statistics: the same bits), and central_storage
 *            R=2 (the one update on the variable device) against the oracle;
 *   mpi      without --quick: mpirun -np 2 --variant=mpi against the oracle;
 *   features the Dense mixed step's, on sync BN (feature_cells): --l2=0.01
 *            and accumulation k=2 (the reference at every place, each
 *            engine variant at one_device, R=2, R=3 and the two at
 *            central_storage R=2 = the feature's one_device bits),
 *            --l2=0.01 with the tensorflow reduction (R-dependent: at
 *            R=2 and R=3 each engine variant and central_storage R=2 = the
 *            reference mirrored run at that R); each run differs from the
 *            oracle without the feature;
 *   resnet   resnet_synthetic float16 (GAP, 19 BNs; 2 steps from the scale
 *            2^10, both applied): each engine variant at mirrored R=2 and
 *            R=3 = the reference one_device bits (resnet_cells);
 *   tpu      v2-8 with --l2=0.01 and a short batch, exact = one_device and
 *            tensorflow = mirrored R=8 (tpu_cells);
 *   fast     --numerics=fast mirrored R=2 (fast_cells: the same roundings
 *            of float32 GEMMs and fixed-order float sums): not the
 *            oracle's bits, its loss within MIXED_FAST_BOUND of the
 *            oracle's at every step and the same skipped steps; a second
 *            run and --threads=1 give its bits and weights (openmp), and
 *            without --quick mpirun -np 2 --variant=mpi its bits too
 *            (openmp, mpi and opencl: each engine's fast ops);
 *            bfloat16 within the bound of the reference's exact bfloat16
 *            run (a rounding left out is 8 times float16's there).
 * Caught mutants: ref_mixed_graph_bn_grad_replica0,
 * engine_mixed_conv_one_rounding, engine_mixed_bn_float32,
 * engine_mixed_bn_grad_c, ref_mixed_graph_tf_bn_c,
 * engine_mixed_tf_bn_partial_c, engine_mixed_fast_unrounded,
 * cl_mixed_conv_unrounded, cl_mixed_fast_unrounded (tests/faults.tsv).
 */
#include "conformance/conformance.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void cnn_setup(dr_run_config *c) { graph_config(c, "cnn_synthetic", 128, 8); }

static void cnn_replica_setup(dr_run_config *c)
{
    cnn_setup(c);
    snprintf(c->batch_norm, sizeof c->batch_norm, "replica");
}

static int bites_cell(results *r, const outcome *oracle)
{
    dr_run_config c;
    outcome f32;
    bool skipped = false, applied = false;
    mixed_place_config(&c, cnn_setup, false, &k_mixed_places[0], "ref");
    c.mixed.compute = DR_DTYPE_F32;
    c.mixed.loss_scale = DR_LOSS_SCALE_NONE;
    c.mixed.fixed_scale = 0.0f;
    run_case(&c, &f32);
    for (uint32_t s = 0; s < oracle->nsteps; s++) {
        skipped |= oracle->skipped[s] == 2;
        applied |= oracle->skipped[s] == 1;
    }
    bool pass = !f32.error[0] && !oracle->error[0] && !outcome_same(&f32, oracle) && skipped && applied;
    record(r, "mixed_precision", &c, 1, pass, f32.seconds, "ref cnn_synthetic overflow float16 one_device: differs "
           "from the float32 run, skipped %s and applied %s steps%s%.150s", skipped ? "some" : "no",
           applied ? "some" : "no", f32.error[0] ? ": " : "", f32.error);
    outcome_free(&f32);
    return !pass;
}

/* Each engine variant (with_ref: and the reference first) under `strategy`
 * with R = 2 (setup's flags, tf: the tensorflow reduction) against want's
 * bits, where it runs them. */
static int engine_cells(results *r, void (*setup)(dr_run_config *), bool tf, const char *strategy, const char *alg,
                        const outcome *want, const char *what, const char *want_what, bool with_ref,
                        const dr_variant *const *ev, size_t nv)
{
    int fails = 0;
    for (size_t v = with_ref ? 0 : 1; v <= nv; v++) {
        const char *name = v == 0 ? "ref" : ev[v - 1]->name;
        dr_run_config c;
        outcome got;
        char why[200] = "";
        mixed_place_config(&c, setup, tf, &k_mixed_places[0], name);
        set_strategy(&c, strategy, 2, alg, 1);
        if (v > 0 && !supported(r, "mixed_precision", &c, 2)) continue;
        run_case(&c, &got);
        bool same = !got.error[0] && !want->error[0] && outcome_same_why(&got, want, why, sizeof why);
        fails += !same;
        record(r, "mixed_precision", &c, 2, same, got.seconds, "%s cnn_synthetic %s overflow float16 %s %s R=2: = "
               "the reference's %s bits%s%.150s", name, what, tf ? "tensorflow" : "exact", strategy, want_what,
               got.error[0] || !same ? ": " : "", got.error[0] ? got.error : why);
        outcome_free(&got);
    }
    return fails;
}

/* mpi -np 2 multi_worker_mirrored (openmp's ops on each rank, the BN
 * statistics and gradients over MPI) against the oracle (exact), or
 * (--numerics=fast) against the openmp variant's fast mirrored R=2 run:
 * the same two replica partials, reduced exactly. */
static int mpi_cell(results *r, const outcome *oracle, bool fast, const char *oracle_what)
{
    dr_run_config c;
    outcome got;
    char why[200] = "", args[400];
    if (r->quick || r->fault || (r->variant && strcmp(r->variant, "mpi") != 0) ||
        system("command -v mpirun > /dev/null 2>&1") != 0)
        return 0;
    mixed_place_config(&c, cnn_setup, false, &k_mixed_places[0], "mpi");
    set_strategy(&c, "multi_worker_mirrored", 1, "ring", 1);
    if (fast) snprintf(c.numerics, sizeof c.numerics, "fast");
    snprintf(args, sizeof args, "--experiment=cnn_synthetic --batch_norm=sync --synthetic_examples=128 "
             "--global_batch_size=32 --train_steps=8 --dtype_policy=mixed_float16 --loss_scale=dynamic:1048576 "
             "--numerics=%s", fast ? "fast" : "exact");
    run_mpi_pair(r, args, &got);
    bool pass = !got.error[0] && !oracle->error[0] && outcome_same_why(&got, oracle, why, sizeof why);
    record(r, "mixed_precision", &c, 2, pass, got.seconds, "mpi -np 2 multi_worker_mirrored cnn_synthetic sync BN "
           "overflow float16 %s: = %s bits%s%.150s", fast ? "fast" : "exact", oracle_what,
           got.error[0] || !pass ? ": " : "", got.error[0] ? got.error : why);
    outcome_free(&got);
    return !pass;
}

/* Replica BN, mirrored R=2: the reference twice (its bits are its own), and
 * each engine variant that runs it against them. */
static int replica_cell(results *r, const outcome *oracle, const dr_variant *const *ev, size_t nv)
{
    dr_run_config c;
    outcome a, b;
    int fails;
    mixed_place_config(&c, cnn_replica_setup, false, &k_mixed_places[1], "ref");
    run_case(&c, &a);
    run_fresh_case(&c, &b);
    fails = engine_cells(r, cnn_replica_setup, false, "mirrored", "nccl", &a, "replica BN", "replica BN", false, ev,
                         nv);
    bool pass = !a.error[0] && !b.error[0] && outcome_same(&a, &b) && !outcome_same(&a, oracle);
    record(r, "mixed_precision", &c, 2, pass, a.seconds + b.seconds, "ref cnn_synthetic replica BN overflow float16 "
           "mirrored R=2: two runs the same bits, differing from the sync BN oracle%s%.150s", a.error[0] ? ": " : "",
           a.error[0] ? a.error : b.error);
    outcome_free(&a);
    outcome_free(&b);
    return fails + !pass;
}

/* The Dense mixed step's features on cnn_synthetic sync BN: --l2 (its
 * term on the Conv2D and Dense kernels only), accumulation (a skipped
 * micro-step dropped, each micro-step's own BN statistics), and the
 * tensorflow reduction (each replica's partial rounded first: c for the
 * kernels, float32 for gamma and beta), with --l2 (its 1/R term per
 * replica). */
static void cnn_l2_setup(dr_run_config *c)
{
    cnn_setup(c);
    c->l2 = 0.01;
}

static void cnn_accum_setup(dr_run_config *c)
{
    cnn_setup(c);
    c->gradient_accumulation_steps = 2;
}

static void cnn_tpu_setup(dr_run_config *c)   /* step 5 a short batch of 16: tpu pads 2 rows a core */
{
    cnn_l2_setup(c);
    c->synthetic_examples = 144;
}

typedef struct graph_feature { const char *what; void (*setup)(dr_run_config *); bool tf; } graph_feature;
static const graph_feature k_graph_features[] = {
    { "sync BN --l2=0.01", cnn_l2_setup, false },
    { "sync BN accumulation k=2", cnn_accum_setup, false },
    { "sync BN --l2=0.01", cnn_l2_setup, true },
};

/* Feature f's reference runs: at one_device (exact: the oracle of every
 * place) or, tensorflow's R-dependent reduction, at mirrored R=2 and R=3
 * (each its place's oracle); each differs from the run without the feature
 * (base: one_device exact, the same bits at every R) and each engine
 * variant gives its bits at the same place, and at central_storage R=2. */
static int feature_cells(results *r, const graph_feature *f, const outcome *base, const dr_variant *const *ev,
                         size_t nv)
{
    int fails = 0;
    for (size_t i = f->tf ? 1 : 0; i <= (f->tf ? 2u : 0u); i++) {
        const mixed_place *p = &k_mixed_places[i];
        const char *red = f->tf ? "tensorflow" : "exact";
        char what[96], want_what[96];
        dr_run_config c;
        outcome want;
        snprintf(what, sizeof what, "cnn_synthetic %s", f->what);
        snprintf(want_what, sizeof want_what, "%s %s R=%d", p->name, red, p->replicas);
        mixed_place_config(&c, f->setup, f->tf, p, "ref");
        run_case(&c, &want);
        bool bites = !want.error[0] && !base->error[0] && !outcome_same(&want, base);
        fails += !bites;
        record(r, "mixed_precision", &c, p->replicas, bites, want.seconds, "ref %s overflow float16 %s %s R=%d: "
               "differs from the exact run without it%s%.150s", what, red, p->name, p->replicas,
               want.error[0] ? ": " : "", want.error);
        if (!f->tf)   /* exact: the reference at every place = one_device */
            fails += mixed_place_cells(r, f->setup, what, "ref", false, &want, 1, MIXED_PLACES - 1, want_what);
        for (size_t v = 0; v < nv; v++)
            fails += mixed_place_cells(r, f->setup, what, ev[v]->name, f->tf, &want, f->tf ? i : 0, f->tf ? i : 2,
                                       want_what);
        if (i == (f->tf ? 1u : 0u))   /* central_storage R=2: the exact sum of the same partials */
            fails += engine_cells(r, f->setup, f->tf, "central_storage", NULL, &want, f->what, want_what, true, ev, nv);
        outcome_free(&want);
    }
    return fails;
}

/* tpu v2-8 (R=8, unpartitioned): the reference and each engine variant
 * under --l2 over 144 examples (4 rows a core; step 5's short batch 2 real
 * rows and 2 of padding) give the reference's bits: the exact reduction's
 * one_device run, tensorflow's mirrored R=8 run (each replica's partial
 * rounded first). */
static int tpu_cells(results *r, const dr_variant *const *ev, size_t nv)
{
    int fails = 0;
    for (int tf = 0; tf < 2; tf++) {
        dr_run_config c;
        outcome want;
        dr_err err;
        mixed_place_config(&c, cnn_tpu_setup, tf, &k_mixed_places[0], "ref");
        if (tf) set_strategy(&c, "mirrored", 8, "nccl", 1);
        run_case(&c, &want);
        for (size_t v = 0; v <= nv; v++) {
            const char *name = v == 0 ? "ref" : ev[v - 1]->name;
            outcome got;
            char why[200] = "";
            mixed_place_config(&c, cnn_tpu_setup, tf, &k_mixed_places[0], name);
            if (dr_get_distribution_strategy("tpu", 0, NULL, 1, "v2-8", &c.strategy, &err) != DR_OK) {
                fails++;
                record(r, "mixed_precision", NULL, 8, false, 0, "%s cnn_synthetic tpu v2-8: %s", name, err.msg);
                continue;
            }
            if (v > 0 && !supported(r, "mixed_precision", &c, 8)) continue;
            run_case(&c, &got);
            bool same = !got.error[0] && !want.error[0] && outcome_same_why(&got, &want, why, sizeof why);
            fails += !same;
            record(r, "mixed_precision", &c, 8, same, got.seconds, "%s cnn_synthetic sync BN --l2=0.01 overflow float16 "
                   "%s tpu v2-8 R=8 (short batch): = the reference %s bits%s%.150s", name, tf ? "tensorflow" : "exact",
                   tf ? "mirrored R=8 tensorflow" : "one_device", got.error[0] || !same ? ": " : "",
                   got.error[0] ? got.error : (want.error[0] ? want.error : why));
            outcome_free(&got);
        }
        outcome_free(&want);
    }
    return fails;
}

/* bfloat16 without a loss scale (setup's flags otherwise) */
static void bf16_config(dr_run_config *c)
{
    c->mixed.compute = DR_DTYPE_BF16;
    c->mixed.loss_scale = DR_LOSS_SCALE_NONE;
    c->mixed.fixed_scale = 0.0f;
}

/* One fast run c (R=2) against its exact oracle: its loss within
 * MIXED_FAST_BOUND at every step and the same skipped steps; differ: and
 * not the oracle's bits (the fast ops ran). got: the run, for the caller. */
static int fast_cell(results *r, const dr_run_config *c, const outcome *oracle, bool differ, const char *what,
                     outcome *got)
{
    double rel = INFINITY, p99, ulp, diff;
    bool skips = true;
    run_case(c, got);
    for (uint32_t s = 0; s < got->nsteps && s < oracle->nsteps; s++) skips &= got->skipped[s] == oracle->skipped[s];
    bool pass = !got->error[0] && !oracle->error[0] && (!differ || !outcome_same(got, oracle)) && skips &&
                got->nsteps == oracle->nsteps && outcome_drift(got, oracle, &rel, &p99, &ulp, &diff) &&
                rel <= MIXED_FAST_BOUND;
    record(r, "mixed_precision", c, 2, pass, got->seconds, "%s cnn_synthetic sync BN %s fast mirrored R=2: %sloss "
           "within %.0e of the reference one_device exact run's (max %.2e), %s skipped steps%s%.150s", c->variant, what,
           differ ? "not its bits, " : "", MIXED_FAST_BOUND, rel, skips ? "the same" : "other",
           got->error[0] ? ": " : "", got->error);
    return !pass;
}

/* --numerics=fast mirrored R=2 of each engine variant that runs it: the
 * overflow float16 run (the loss scale's skips) and bfloat16 (a rounding
 * to c left out moves its loss by 1e-4 and more: engine_mixed_fast_unrounded)
 * each within the bound of its exact oracle; (openmp, whose --threads sets
 * the team) the float16 run's bits again and at --threads=1. */
static int fast_cells(results *r, const outcome *oracle, const dr_variant *const *ev, size_t nv)
{
    dr_run_config c;
    outcome bf16, got;
    int fails = 0;
    mixed_place_config(&c, cnn_setup, false, &k_mixed_places[0], "ref");
    bf16_config(&c);
    run_case(&c, &bf16);
    for (size_t v = 0; v < nv; v++) {
        outcome again, one;
        char why[200] = "";
        mixed_place_config(&c, cnn_setup, false, &k_mixed_places[1], ev[v]->name);
        snprintf(c.numerics, sizeof c.numerics, "fast");
        if (strcmp(ev[v]->name, "openmp") == 0) c.threads = 2;   /* the replicas side by side on the team */
        if (!supported(r, "mixed_precision", &c, 2)) continue;
        fails += fast_cell(r, &c, oracle, true, "overflow float16", &got);
        if (c.threads == 2) {
            run_fresh_case(&c, &again);
            c.threads = 1;
            run_case(&c, &one);
            bool same = !got.error[0] && got.weights && outcome_same_why(&again, &got, why, sizeof why) &&
                        outcome_same_why(&one, &got, why, sizeof why);
            fails += !same;
            record(r, "mixed_precision", &c, 2, same, again.seconds + one.seconds, "%s cnn_synthetic sync BN overflow "
                   "float16 fast mirrored R=2 --threads=2: a second run and --threads=1 = its loss bits and weights"
                   "%s%.150s", ev[v]->name, same ? "" : ": ", same ? "" : why);
            outcome_free(&again);
            outcome_free(&one);
            fails += mpi_cell(r, &got, true, "the openmp fast mirrored R=2 run's");
        }
        outcome_free(&got);
        bf16_config(&c);
        fails += fast_cell(r, &c, &bf16, false, "bfloat16", &got);
        outcome_free(&got);
    }
    outcome_free(&bf16);
    return fails;
}

static void resnet_setup(dr_run_config *c) { graph_config(c, "resnet_synthetic", 64, 2); }

/* resnet_synthetic float16 (GAP and its gradient, 19 BNs, residual adds;
 * the dynamic scale from 2^10, so both steps apply): each engine variant at
 * mirrored R=2 and R=3 = the reference one_device run's bits. */
static int resnet_cells(results *r, const dr_variant *const *ev, size_t nv)
{
    dr_run_config c;
    outcome oracle, got;
    int fails = 0;
    bool applied = false;
    mixed_place_config(&c, resnet_setup, false, &k_mixed_places[0], "ref");
    c.mixed.fixed_scale = 1024.0f;
    run_case(&c, &oracle);
    for (uint32_t s = 0; s < oracle.nsteps; s++) applied |= oracle.skipped[s] == 1;   /* 1: "skipped": false */
    for (size_t v = 0; v < nv; v++)
        for (size_t i = 1; i <= 2; i++) {
            char why[200] = "";
            bool pass;
            mixed_place_config(&c, resnet_setup, false, &k_mixed_places[i], ev[v]->name);
            c.mixed.fixed_scale = 1024.0f;
            if (!supported(r, "mixed_precision", &c, k_mixed_places[i].replicas)) continue;
            run_case(&c, &got);
            pass = applied && !oracle.error[0] && outcome_same_why(&got, &oracle, why, sizeof why);
            fails += !pass;
            record(r, "mixed_precision", &c, k_mixed_places[i].replicas, pass, got.seconds, "%s resnet_synthetic sync "
                   "BN float16 exact %s R=%d: = the reference one_device bits%s%.150s", ev[v]->name,
                   k_mixed_places[i].name, k_mixed_places[i].replicas, pass ? "" : ": ",
                   pass ? "" : applied ? why : "the oracle applied no step");
            outcome_free(&got);
        }
    outcome_free(&oracle);
    return fails;
}

int mixed_graph_cells(results *r)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    dr_run_config c;
    outcome oracle;
    int fails = 0;
    mixed_place_config(&c, cnn_setup, false, &k_mixed_places[0], "ref");
    run_case(&c, &oracle);
    fails += bites_cell(r, &oracle);
    fails += mixed_place_cells(r, cnn_setup, "cnn_synthetic sync BN", "ref", false, &oracle, 1, MIXED_PLACES - 1,
                               "one_device");
    fails += replica_cell(r, &oracle, ev, nv);
    fails += engine_cells(r, cnn_setup, false, "central_storage", NULL, &oracle, "sync BN", "sync BN", false, ev,
                          nv);   /* one update */
    fails += mpi_cell(r, &oracle, false, "the reference one_device");
    for (size_t v = 0; v < nv; v++)
        fails += mixed_place_cells(r, cnn_setup, "cnn_synthetic sync BN", ev[v]->name, false, &oracle, 0,
                                   MIXED_PLACES - 1, "one_device");
    for (size_t f = 0; f < sizeof k_graph_features / sizeof k_graph_features[0]; f++)
        fails += feature_cells(r, &k_graph_features[f], &oracle, ev, nv);
    fails += tpu_cells(r, ev, nv);
    fails += fast_cells(r, &oracle, ev, nv);
    fails += resnet_cells(r, ev, nv);
    outcome_free(&oracle);
    return fails;
}
