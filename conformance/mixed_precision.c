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
 *   engine       each engine variant answers "not supported" (the mixed step
 *                is the reference's only).
 */
#include "conformance/conformance.h"

#include <stdio.h>
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
static int against(results *r, const char *what, dr_dtype t, bool tf, float initial, const outcome *oracle,
                   size_t first, size_t last, bool want_same)
{
    dr_run_config c;
    outcome got;
    int fails = 0;
    for (size_t i = first; i <= last; i++) {
        bool same, pass;
        if (r->quick && i == 3) continue;
        mixed_config(&c, t, tf, initial, &k_places[i]);
        run_case(&c, &got);
        same = !got.error[0] && !oracle->error[0] && outcome_same(&got, oracle);
        pass = !got.error[0] && !oracle->error[0] && same == want_same;
        fails += !pass;
        record(r, "mixed_precision", &c, k_places[i].replicas, pass, got.seconds, "%s %s %s R=%d: %s the reference "
               "one_device bits%s%.150s", what, dr_dtype_name(t), k_places[i].name, k_places[i].replicas,
               want_same ? "=" : "differs from", got.error[0] ? ": " : "", got.error);
        outcome_free(&got);
    }
    return fails;
}

int suite_mixed_precision(results *r)
{
    dr_run_config c;
    outcome oracle;
    int fails = 0;
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
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
    outcome_free(&oracle);
    for (size_t v = 0; v < nv; v++) {   /* the engine: not built */
        mixed_config(&c, DR_DTYPE_F16, false, 0, &k_places[1]);
        snprintf(c.variant, sizeof c.variant, "%s", ev[v]->name);
        if (supported(r, "mixed_precision", &c, 2)) {
            record(r, "mixed_precision", &c, 2, false, 0, "%s accepted a mixed policy it does not run", ev[v]->name);
            fails++;
        }
    }
    return fails;
}
