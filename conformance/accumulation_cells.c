/* distref conformance — suite 11, accumulation: the cells beside the k·R
 * table (conformance/training_features.c says what the suite judges).
 *
 *   fallback  experiment linear_wide (features spanning 2^-60 .. 2^60: every
 *             compact total overflows its window), openmp mirrored R=2 at
 *             k=2 and G=16: the bits of the reference one_device run of one
 *             step of 32, and summary.json's exact_fallback_steps > 0 (the
 *             update's micro-batches were recomputed in full accumulators).
 *   features  Adam with --global_clipnorm=0.05, at k=4 mirrored R=2 (G=12)
 *             in each in-process engine variant: the reference one_device
 *             run of one step of 48 (the clip acts on the accumulated,
 *             aggregated gradient; Adam counts updates); and with a cosine
 *             schedule with warmup as well: the reference one_device run at
 *             the same k (the schedule reads the micro-step counter, as
 *             Keras 3's does, so no one-step run gives those bits). The
 *             default run: openmp; --full: each variant.
 */
#include "conformance/conformance.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

static long long fallback_steps(const char *dir)
{
    char path[1200];
    json_object *o, *v;
    long long n = -1;
    snprintf(path, sizeof path, "%s/summary.json", dir);
    if (!(o = json_object_from_file(path))) return -1;
    if (json_object_object_get_ex(o, "exact_fallback_steps", &v)) n = json_object_get_int64(v);
    json_object_put(o);
    return n;
}

static void wide(dr_run_config *c, uint32_t k)
{
    dr_run_config_defaults(c);
    strcpy(c->experiment, "linear_wide");
    c->global_batch_size = 32 / k;
    c->epochs = 0;
    c->train_steps = 6 * k;
    c->progress = false;
    if (k > 1) c->gradient_accumulation_steps = k;
}

int accumulation_fallback(results *r)
{
    dr_run_config c;
    outcome ref, got;
    char dir[] = "/tmp/distref_accw_XXXXXX", cmd[1200];
    long long n = -1;
    bool pass;
    if (r->variant && strcmp(r->variant, "openmp") != 0) return 0;
    wide(&c, 1);
    run_case(&c, &ref);
    wide(&c, 2);
    strcpy(c.variant, "openmp");
    set_strategy(&c, "mirrored", 2, "nccl", 1);
    if (!supported(r, "accumulation", &c, 2) || !mkdtemp(dir)) { outcome_free(&ref); return 0; }
    snprintf(c.model_dir, sizeof c.model_dir, "%s", dir);
    run_fresh_case(&c, &got);
    n = fallback_steps(dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
    pass = !got.error[0] && !ref.error[0] && strcmp(got.sha, ref.sha) == 0 && n > 0;
    record(r, "accumulation", &c, 2, pass, got.seconds, "linear_wide openmp k=2 mirrored R=2: weights = one_device "
           "one step of 32, %lld steps redone in full accumulators%s%.150s", n, got.error[0] ? ": " : "", got.error);
    outcome_free(&ref);
    outcome_free(&got);
    return !pass;
}

static void adam(dr_run_config *c, uint32_t k, bool schedule)
{
    base_config(c, 476, 48 / k, 1e-3);
    c->epochs = 0;
    c->train_steps = 12 * k;
    if (k > 1) c->gradient_accumulation_steps = k;
    strcpy(c->optimizer, "adam");
    c->clip.global_clipnorm = 0.05f;
    if (schedule) {
        c->lr_schedule.kind = DR_LR_COSINE; c->lr_schedule.warmup_steps = 6; c->lr_schedule.decay_steps = 30;
        c->lr_schedule.alpha = 0.1f; c->learning_rate = 0.01;
    }
}

int accumulation_features(results *r)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    int fails = 0;
    for (int schedule = 0; schedule <= (r->full ? 1 : 0) && !r->quick; schedule++) {   /* default: no schedule */
        dr_run_config c;
        outcome ref, got;
        adam(&c, schedule ? 4 : 1, schedule);
        run_case(&c, &ref);
        for (size_t v = 0; v < nv; v++) {
            if (!r->full && strcmp(ev[v]->name, "openmp") != 0) continue;   /* default: openmp; --full: each */
            adam(&c, 4, schedule);
            snprintf(c.variant, sizeof c.variant, "%s", ev[v]->name);
            set_strategy(&c, "mirrored", 2, "nccl", 1);
            if (!supported(r, "accumulation", &c, 2)) continue;
            run_case(&c, &got);
            bool pass = !got.error[0] && !ref.error[0] && strcmp(got.sha, ref.sha) == 0;
            fails += !pass;
            record(r, "accumulation", &c, 2, pass, got.seconds, "adam global_clipnorm=0.05%s %s k=4 mirrored R=2: "
                   "weights = %s%s%.150s", schedule ? " cosine warmup=6" : "", ev[v]->name,
                   schedule ? "the reference one_device run at k=4" : "one_device one step of 48",
                   got.error[0] ? ": " : "", got.error);
            outcome_free(&got);
        }
        outcome_free(&ref);
    }
    return fails;
}
