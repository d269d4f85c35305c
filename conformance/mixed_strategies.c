/* distref conformance — suite mixed_precision, the mixed step under
 * central_storage and tpu (docs/TRAINING_FEATURES.md, "Mixed precision under
 * central_storage and tpu"; ref/mixed_step.c, strategies/mixed.c,
 * strategies/engine_tpu.c).
 *
 * The run: float16 with --loss_scale=dynamic:2^20 (the first steps overflow
 * and are skipped, so the scale moves), 544 examples at G=64 over 10 steps:
 * step 9 is a short batch of 32, which tpu's static shapes pad (4 real rows
 * and 4 of padding on each of v2-8's 8 cores).
 *   exact       the reference and each in-process engine variant that runs
 *               it under central_storage R=2 and R=3 and tpu v2-8 (R=8) give
 *               the reference one_device run's bits (replica-invariant);
 *   tensorflow  each replica's partial rounded to float16 first: the
 *               reference and the engine under central_storage R=2 and tpu
 *               v2-8 give the reference mirrored run's bits at the same R
 *               (R=2, R=8).
 * Caught mutants: mixed_central_replica_copies, ref_mixed_central_replica_copies
 * (the update applied to the replicas' copies, not the variable device's),
 * mixed_tpu_padding, ref_mixed_tpu_padding (the short batch's padding rows
 * trained on); tests/faults.tsv.
 */
#include "conformance/conformance.h"

#include <stdio.h>
#include <string.h>

typedef struct strat_place { const char *name, *alg, *tpu; int gpus, replicas; } strat_place;

static const strat_place k_places[] = {
    { "central_storage", NULL, NULL, 2, 2 }, { "central_storage", NULL, NULL, 3, 3 }, { "tpu", NULL, "v2-8", 0, 8 },
};
static const strat_place k_one = { "one_device", NULL, NULL, 0, 1 }, k_mirrored2 = { "mirrored", "nccl", NULL, 2, 2 },
                         k_mirrored8 = { "mirrored", "nccl", NULL, 8, 8 };

/* The run at place p; false (err's message in why) when the strategy cannot be made. */
static bool setup(dr_run_config *c, const strat_place *p, bool tf, const char *variant, char *why, size_t n)
{
    dr_err err;
    base_config(c, 544, 64, 0.0);
    c->epochs = 0;
    c->train_steps = 10;
    c->mixed.compute = DR_DTYPE_F16;
    c->mixed.loss_scale = DR_LOSS_SCALE_DYNAMIC;
    c->mixed.fixed_scale = 1048576.0f;
    c->mixed.tf_reduction = tf;
    snprintf(c->variant, sizeof c->variant, "%s", variant);
    if (dr_get_distribution_strategy(p->name, p->gpus, p->alg, 1, p->tpu, &c->strategy, &err) == DR_OK) return true;
    snprintf(why, n, "%s", err.msg);
    return false;
}

static void run_at(const strat_place *p, bool tf, outcome *out)
{
    dr_run_config c;
    memset(out, 0, sizeof *out);
    if (setup(&c, p, tf, "ref", out->error, sizeof out->error)) run_case(&c, out);
}

/* variant's cell at place p (tf: --mixed_reduction=tensorflow) against oracle. */
static int cell(results *r, const char *variant, const strat_place *p, bool tf, const outcome *oracle,
                const char *oracle_what)
{
    dr_run_config c;
    outcome got;
    char why[200] = "";
    memset(&got, 0, sizeof got);
    if (!setup(&c, p, tf, variant, got.error, sizeof got.error)) {
        record(r, "mixed_precision", NULL, p->replicas, false, 0, "%s %s: %s", variant, p->name, got.error);
        return 1;
    }
    if (strcmp(variant, "ref") != 0 && !supported(r, "mixed_precision", &c, p->replicas)) return 0;
    run_case(&c, &got);
    bool pass = !got.error[0] && !oracle->error[0] && outcome_same_why(&got, oracle, why, sizeof why);
    record(r, "mixed_precision", &c, p->replicas, pass, got.seconds, "%s overflow float16 %s %s%s%s R=%d (short "
           "batch): = the reference %s bits%s%.150s", variant, tf ? "tensorflow" : "exact", p->name,
           p->tpu ? " " : "", p->tpu ? p->tpu : "", p->replicas, oracle_what, got.error[0] || !pass ? ": " : "",
           got.error[0] ? got.error : why);
    outcome_free(&got);
    return !pass;
}

int mixed_strategy_cells(results *r)
{
    size_t nv, np = sizeof k_places / sizeof k_places[0];
    const dr_variant *const *ev = engine_variants(r, &nv);
    outcome one, tf2, tf8;
    int fails = 0;
    run_at(&k_one, false, &one);
    run_at(&k_mirrored2, true, &tf2);
    run_at(&k_mirrored8, true, &tf8);
    for (size_t v = 0; v <= nv; v++) {
        const char *name = v ? ev[v - 1]->name : "ref";
        for (size_t i = 0; i < np; i++) fails += cell(r, name, &k_places[i], false, &one, "one_device");
        fails += cell(r, name, &k_places[0], true, &tf2, "mirrored R=2 tensorflow");
        fails += cell(r, name, &k_places[2], true, &tf8, "mirrored R=8 tensorflow");
    }
    outcome_free(&one); outcome_free(&tf2); outcome_free(&tf8);
    return fails;
}
