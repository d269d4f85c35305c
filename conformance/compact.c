/* distref conformance — 8. compact accumulators: the window and its fallback.
 *
 * The engine keeps exact gradients in 32-byte compact accumulators
 * (distref/cacc.h) and redoes a step with full ones when an element leaves
 * the compact window. Two things are judged here, per in-process engine
 * variant:
 *
 *   fallback  experiment linear_wide (features spanning 2^-60 .. 2^60, so a
 *             gradient element sums products some 240 binades apart: every
 *             step overflows the window) under one_device, mirrored (ring;
 *             hierarchical copy with two packs) and central_storage: the
 *             reference one_device run's bits, and, where summary.json says
 *             the gradients were compact, at least one step redone with full
 *             accumulators (exact_fallback_steps > 0): the fallback ran and
 *             lost nothing. The same with --exact_accumulator=full.
 *   in use    on the default experiment, mirrored R=2: summary.json names
 *             the accumulators; for openmp they must be the compact ones
 *             (so the other suites judge the compact path), with no step
 *             redone (the window holds ordinary training).
 *
 * A planted fault, DR_MUTANT_CACC_NO_FALLBACK (an overflowed total goes on
 * to be rounded), must fail the first part.
 */
#include "conformance/conformance.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

/* summary.json's accumulator name and fallback count ("" and -1 when absent). */
static void read_summary(const char *dir, char *acc, size_t cap, long long *fallbacks)
{
    char path[1200];
    json_object *o, *v;
    acc[0] = '\0';
    *fallbacks = -1;
    snprintf(path, sizeof path, "%s/summary.json", dir);
    if (!(o = json_object_from_file(path))) return;
    if (json_object_object_get_ex(o, "exact_accumulator", &v)) snprintf(acc, cap, "%s", json_object_get_string(v));
    if (json_object_object_get_ex(o, "exact_fallback_steps", &v)) *fallbacks = json_object_get_int64(v);
    json_object_put(o);
}

static void remove_dir(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
}

/* One engine case in its own model_dir: outcome, accumulators, fallbacks. */
static void engine_case(const dr_run_config *c, outcome *got, char *acc, size_t cap, long long *fallbacks)
{
    char dir[] = "/tmp/distref_cacc_XXXXXX";
    dr_run_config k = *c;
    if (!mkdtemp(dir)) { memset(got, 0, sizeof *got); snprintf(got->error, sizeof got->error, "mkdtemp failed"); return; }
    snprintf(k.model_dir, sizeof k.model_dir, "%s", dir);
    run_case(&k, got);
    read_summary(dir, acc, cap, fallbacks);
    remove_dir(dir);
}

static int fallback_cases(results *r, const dr_variant *v)
{
    static const struct { const char *strategy; int gpus; const char *alg; int packs; } cfgs[] = {
        { "one_device", 0, NULL, 1 },
        { "mirrored", 2, "nccl", 1 },
        { "mirrored", 3, "hierarchical_copy", 2 },
        { "central_storage", 2, NULL, 1 },
    };
    dr_run_config c;
    outcome ref;
    int fails = 0;
    base_config(&c, 0, 0, 0.0);
    strcpy(c.experiment, "linear_wide");
    c.l2 = DR_UNSET;
    c.epochs = 2;
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        for (int full = 0; full < 2; full++) {
            outcome got;
            char acc[16];
            long long fb;
            bool pass;
            int R = cfgs[i].gpus ? cfgs[i].gpus : 1;
            base_config(&c, 0, 0, 0.0);
            strcpy(c.experiment, "linear_wide");
            c.l2 = DR_UNSET;
            c.epochs = 2;
            snprintf(c.variant, sizeof c.variant, "%s", v->name);
            c.full_accumulators = full;
            if (!set_strategy(&c, cfgs[i].strategy, cfgs[i].gpus, cfgs[i].alg, cfgs[i].packs) ||
                !supported(r, "compact", &c, R))
                continue;
            engine_case(&c, &got, acc, sizeof acc, &fb);
            pass = !got.error[0] && !ref.error[0] && outcome_same(&got, &ref) &&
                   (strcmp(acc, "compact") != 0 || fb > 0) && (!full || strcmp(acc, "compact") != 0);
            fails += !pass;
            record(r, "compact", &c, R, pass, got.seconds,
                   "%s %s R=%d%s%s, linear_wide: %s accumulators, %lld step(s) redone in full%s%s", v->name,
                   cfgs[i].strategy, R, cfgs[i].alg ? " " : "", cfgs[i].alg ? cfgs[i].alg : "",
                   acc[0] ? acc : "?", fb, got.error[0] ? ": " : "", got.error);
            outcome_free(&got);
        }
    }
    outcome_free(&ref);
    return fails;
}

static int in_use_case(results *r, const dr_variant *v)
{
    dr_run_config c;
    outcome got;
    char acc[16];
    long long fb;
    bool pass;
    base_config(&c, 256, 64, 1e-3);
    c.epochs = 0;
    c.train_steps = 3;
    snprintf(c.variant, sizeof c.variant, "%s", v->name);
    if (!set_strategy(&c, "mirrored", 2, "nccl", 1) || !supported(r, "compact", &c, 2)) return 0;
    engine_case(&c, &got, acc, sizeof acc, &fb);
    pass = !got.error[0] && acc[0] && fb == 0 && (strcmp(v->name, "openmp") != 0 || strcmp(acc, "compact") == 0);
    record(r, "compact", &c, 2, pass, got.seconds, "%s mirrored R=2, mlp_synthetic: %s accumulators, %lld step(s) "
           "redone in full%s%s", v->name, acc[0] ? acc : "none named", fb, got.error[0] ? ": " : "", got.error);
    outcome_free(&got);
    return !pass;
}

int suite_compact(results *r)
{
    size_t n;
    const dr_variant *const *v = engine_variants(r, &n);
    int fails = 0;
    for (size_t i = 0; i < n; i++) fails += fallback_cases(r, v[i]) + in_use_case(r, v[i]);
    return fails;
}
