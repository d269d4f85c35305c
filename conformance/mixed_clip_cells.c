/* distref conformance — suite mixed_precision, --clip_semantics=tensorflow
 * with a mixed policy (docs/TRAINING_FEATURES.md, "--clip_semantics=tensorflow
 * with a mixed policy"; ref/mixed_step.c's reduce_clipped, strategies/mixed.c's
 * clip_replica).
 *
 * Keras 3 (measured: scripts/tf_mixed_clip.py) unscales and clips each
 * replica's gradient before the float32 all-reduce. The run: float16,
 * --mixed_reduction=tensorflow, --loss_scale=dynamic:2^20 (skipped steps,
 * so the scale each replica divides by moves), 10 steps of G=64 on 512
 * examples, --clip_semantics=tensorflow with each clipping flag:
 *   R=1         the reference one_device run = its --clip_semantics=exact
 *               run (one replica: per replica is the aggregate);
 *   bites       the reference mirrored R=2 run differs from its
 *               --clip_semantics=exact run (the per-replica clip changes the
 *               update) and is the oracle at R=2, the same bits again in a
 *               fresh run (deterministic for a given R);
 *   places      the reference under central_storage R=2 and each engine
 *               variant that runs it under mirrored R=2 and central_storage
 *               R=2 = the oracle; mpi -np 2 (multi_worker_mirrored 2 x 1)
 *               the same (--global_clipnorm).
 * Caught mutants: mixed_replica_clip_scaled, ref_mixed_replica_clip_scaled
 * (each replica clipped before its unscale); tests/faults.tsv.
 */
#include "conformance/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct clip_flag { const char *name; dr_clip clip; } clip_flag;

static const clip_flag k_flags[] = {
    { "--global_clipnorm=0.05", { 0, 0, 0.05f, true, false } },
    { "--clipnorm=0.02", { 0.02f, 0, 0, true, false } },
    { "--clipvalue=0.002", { 0, 0.002f, 0, true, false } },
};

static void setup(dr_run_config *c, const clip_flag *f, bool per_replica, const char *strategy, int gpus,
                  const char *variant)
{
    base_config(c, 512, 64, 0.0);
    c->epochs = 0;
    c->train_steps = 10;
    c->mixed.compute = DR_DTYPE_F16;
    c->mixed.loss_scale = DR_LOSS_SCALE_DYNAMIC;
    c->mixed.fixed_scale = 1048576.0f;
    c->mixed.tf_reduction = true;
    c->clip = f->clip;
    c->clip.per_replica = per_replica;
    set_strategy(c, strategy, gpus, strcmp(strategy, "mirrored") ? NULL : "nccl", 1);
    snprintf(c->variant, sizeof c->variant, "%s", variant);
}

/* The same bits as want (same) or not; what: the cell's words. */
static int compare(results *r, const dr_run_config *c, int replicas, const outcome *got, const outcome *want,
                   bool same, const char *what)
{
    char why[200] = "";
    bool eq = !got->error[0] && !want->error[0] && outcome_same_why(got, want, why, sizeof why);
    bool pass = !got->error[0] && !want->error[0] && eq == same;
    record(r, "mixed_precision", c, replicas, pass, got->seconds, "%s%s%.150s", what,
           got->error[0] || !pass ? ": " : "", got->error[0] ? got->error : !pass ? why : "");
    return !pass;
}

static int place_cell(results *r, const clip_flag *f, const char *variant, const char *strategy, const outcome *oracle)
{
    dr_run_config c;
    outcome got;
    char what[200];
    setup(&c, f, true, strategy, 2, variant);
    if (strcmp(variant, "ref") != 0 && !supported(r, "mixed_precision", &c, 2)) return 0;
    run_case(&c, &got);
    snprintf(what, sizeof what, "%s overflow float16 tensorflow %s --clip_semantics=tensorflow %s R=2: = the "
             "reference mirrored R=2 bits", variant, f->name, strategy);
    int fails = compare(r, &c, 2, &got, oracle, true, what);
    outcome_free(&got);
    return fails;
}

static int mpi_clip_cell(results *r, const outcome *oracle)
{
    dr_run_config c;
    outcome got;
    setup(&c, &k_flags[0], true, "multi_worker_mirrored", 1, "mpi");
    run_mpi_pair(r, "--global_batch_size=64 --synthetic_examples=512 --train_steps=10 --dtype_policy=mixed_float16 "
                 "--loss_scale=dynamic:1048576 --mixed_reduction=tensorflow --global_clipnorm=0.05 "
                 "--clip_semantics=tensorflow", &got);
    int fails = compare(r, &c, 2, &got, oracle, true, "mpi -np 2 multi_worker_mirrored overflow float16 tensorflow "
                        "--global_clipnorm=0.05 --clip_semantics=tensorflow: = the reference mirrored R=2 bits");
    outcome_free(&got);
    return fails;
}

/* One clipping flag: R=1, bites and determinism at R=2, then the places. */
static int flag_cells(results *r, const clip_flag *f, bool all_places)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    dr_run_config c;
    outcome a, b, oracle, again;
    char what[200];
    int fails = 0;
    setup(&c, f, true, "one_device", 0, "ref");
    run_case(&c, &a);
    setup(&c, f, false, "one_device", 0, "ref");
    run_case(&c, &b);
    snprintf(what, sizeof what, "ref overflow float16 %s --clip_semantics=tensorflow one_device: = its "
             "--clip_semantics=exact bits (one replica)", f->name);
    fails += compare(r, &c, 1, &a, &b, true, what);
    outcome_free(&a); outcome_free(&b);
    setup(&c, f, false, "mirrored", 2, "ref");
    run_case(&c, &b);
    setup(&c, f, true, "mirrored", 2, "ref");
    run_case(&c, &oracle);
    snprintf(what, sizeof what, "ref overflow float16 tensorflow %s mirrored R=2: --clip_semantics=tensorflow "
             "differs from exact (per replica bites)", f->name);
    fails += compare(r, &c, 2, &oracle, &b, false, what);
    run_fresh_case(&c, &again);
    snprintf(what, sizeof what, "ref overflow float16 tensorflow %s --clip_semantics=tensorflow mirrored R=2: "
             "deterministic (two runs, the same bits)", f->name);
    fails += compare(r, &c, 2, &again, &oracle, true, what);
    outcome_free(&b); outcome_free(&again);
    if (all_places) fails += place_cell(r, f, "ref", "central_storage", &oracle);
    for (size_t v = 0; v < nv; v++) {
        fails += place_cell(r, f, ev[v]->name, "mirrored", &oracle);
        if (all_places) fails += place_cell(r, f, ev[v]->name, "central_storage", &oracle);
    }
    if (all_places && !r->quick && !r->fault && (!r->variant || strcmp(r->variant, "mpi") == 0) &&
        system("command -v mpirun > /dev/null 2>&1") == 0)
        fails += mpi_clip_cell(r, &oracle);
    outcome_free(&oracle);
    return fails;
}

int mixed_clip_cells(results *r)
{
    int fails = 0;
    for (size_t i = 0; i < sizeof k_flags / sizeof k_flags[0]; i++)
        if (!r->quick || i == 0) fails += flag_cells(r, &k_flags[i], i == 0);
    return fails;
}
