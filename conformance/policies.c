/* distref conformance — the split's policy, the input mode and the loss's
 * divisor (docs/SEMANTICS.md §2, §6).
 *
 * Any divisor that does not depend on R keeps every replica count's bits:
 * under each auto-shard policy, each input mode and both R-free divisors
 * (global_batch_size, examples_in_step), the reference and every engine
 * variant with 3 and 4 replicas must give one_device's bits. TensorFlow's
 * own default divisor (tf_default) weighs each replica by its own size, so
 * its bits depend on R: there every variant must give the reference's bits
 * at the same R. 70 examples at G = 12 end every epoch in a short batch of
 * 10, split unevenly under every policy.
 */
#include "conformance/conformance.h"

#include <string.h>

static void setup(dr_run_config *c, const char *policy, const char *mode, const char *divisor)
{
    base_config(c, 70, 12, 1e-3);
    c->epochs = 2;
    snprintf(c->auto_shard_policy, sizeof c->auto_shard_policy, "%s", policy);
    snprintf(c->input_mode, sizeof c->input_mode, "%s", mode);
    snprintf(c->loss_reduction, sizeof c->loss_reduction, "%s", divisor);
}

int loss_curves_policies(results *r)
{
    static const struct { const char *policy, *mode, *divisor; } cs[] = {
        { "auto", "dataset", "global_batch_size" }, { "off", "dataset", "global_batch_size" },
        { "auto", "dataset", "examples_in_step" }, { "hint", "dataset", "examples_in_step" },
        { "auto", "function", "global_batch_size" },
    };
    static const int reps[] = { 3, 4 };
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    int fails = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        dr_run_config c;
        outcome ref, got;
        setup(&c, cs[i].policy, cs[i].mode, cs[i].divisor);
        set_strategy(&c, "one_device", 0, NULL, 1);
        run_case(&c, &ref);
        for (size_t v = 0; v <= nv; v++)
            for (size_t k = 0; k < 2; k++) {
                bool pass;
                if (cs[i].mode[0] == 'f' && 12 % reps[k]) continue;   /* function mode needs R | G */
                setup(&c, cs[i].policy, cs[i].mode, cs[i].divisor);
                snprintf(c.variant, sizeof c.variant, "%s", v ? ev[v - 1]->name : "ref");
                set_strategy(&c, "mirrored", reps[k], "nccl", 1);
                if (!supported(r, "loss_curves", &c, reps[k])) continue;
                run_case(&c, &got);
                pass = !got.error[0] && outcome_same(&got, &ref);
                fails += !pass;
                record(r, "loss_curves", &c, reps[k], pass, got.seconds, "%s mirrored R=%d, policy %s, input %s, "
                       "divisor %s vs one_device%s%s", c.variant, reps[k], cs[i].policy, cs[i].mode, cs[i].divisor,
                       got.error[0] ? ": " : "", got.error);
                outcome_free(&got);
            }
        outcome_free(&ref);
    }
    for (size_t k = 0; k < 2; k++) {   /* tf_default: the reference's bits at the same R */
        dr_run_config c;
        outcome ref, got;
        setup(&c, "auto", "dataset", "tf_default");
        set_strategy(&c, "mirrored", reps[k], "nccl", 1);
        run_case(&c, &ref);
        for (size_t v = 0; v < nv; v++) {
            bool pass;
            setup(&c, "auto", "dataset", "tf_default");
            snprintf(c.variant, sizeof c.variant, "%s", ev[v]->name);
            set_strategy(&c, "mirrored", reps[k], "nccl", 1);
            if (!supported(r, "loss_curves", &c, reps[k])) continue;
            run_case(&c, &got);
            pass = !got.error[0] && !ref.error[0] && outcome_same(&got, &ref);
            fails += !pass;
            record(r, "loss_curves", &c, reps[k], pass, got.seconds, "%s mirrored R=%d, divisor tf_default (each "
                   "replica's own size) vs ref mirrored R=%d%s%s", c.variant, reps[k], reps[k],
                   got.error[0] ? ": " : "", got.error);
            outcome_free(&got);
        }
        outcome_free(&ref);
    }
    return fails;
}
