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
 *   replica clip  --clip_semantics=tensorflow at k=2 (G=24): Keras 3 clips
 *             each replica's mean of its own k micro-steps at the update,
 *             before the all-reduce (measured: scripts/tf_accum_clip.py). The
 *             reference one_device run = its --clip_semantics=exact bits (one
 *             replica's clip is the aggregate's); the reference mirrored R=2
 *             run differs from its exact-clip bits and is the oracle: each
 *             in-process engine variant under mirrored R=2 and
 *             central_storage R=2, and mpirun -np 2 multi_worker_mirrored
 *             (one GPU a rank), give its bits; openmp fast within the fast
 *             bounds. --global_clipnorm=0.05 (--full: also --clipnorm=0.02
 *             and --clipvalue=0.002). Planted faults accum_clip_sum (the
 *             engine clips a replica's sum of its k gradients, then divides
 *             by k) and ref_accum_clip_sum (the reference) fail it.
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

/* ---- --clip_semantics=tensorflow under accumulation ---------------------- */

typedef struct clip_flag { const char *name, *flags; float global, norm, value; } clip_flag;
static const clip_flag k_replica_clips[] = {
    { "global_clipnorm=0.05", "--global_clipnorm=0.05", 0.05f, 0, 0 },
    { "clipnorm=0.02", "--clipnorm=0.02", 0, 0.02f, 0 },
    { "clipvalue=0.002", "--clipvalue=0.002", 0, 0, 0.002f },
};

static void replica_clip(dr_run_config *c, const clip_flag *f, bool per_replica, const char *strategy, int gpus)
{
    base_config(c, 476, 24, 1e-3);
    c->epochs = 0;
    c->train_steps = 24;
    c->gradient_accumulation_steps = 2;
    c->clip.global_clipnorm = f->global;
    c->clip.clipnorm = f->norm;
    c->clip.clipvalue = f->value;
    c->clip.per_replica = per_replica;
    set_strategy(c, strategy, gpus, strcmp(strategy, "mirrored") == 0 ? "nccl" : NULL, 1);
}

/* The reference's own cells: R = 1 gives the exact clip's bits, R = 2 not
 * (the clip really is per replica). */
static int replica_clip_ref(results *r, const clip_flag *f, int gpus, const outcome *tf)
{
    dr_run_config c;
    outcome agg;
    replica_clip(&c, f, false, gpus ? "mirrored" : "one_device", gpus);
    run_case(&c, &agg);
    bool same = !tf->error[0] && !agg.error[0] && outcome_same(tf, &agg);
    bool pass = gpus ? !same && !tf->error[0] && !agg.error[0] : same;
    c.clip.per_replica = true;
    record(r, "accumulation", &c, gpus ? gpus : 1, pass, tf->seconds, "%s k=2 tensorflow semantics ref %s: %s the "
           "exact clip's bits%s%.150s", f->name, gpus ? "mirrored R=2" : "one_device", gpus ? "differ from" : "equal",
           tf->error[0] ? ": " : "", tf->error);
    outcome_free(&agg);
    return !pass;
}

/* exact: the reference mirrored R=2's bits; fast: within the fast bounds */
static int replica_clip_judge(results *r, const dr_run_config *c, const outcome *got, const outcome *ref,
                              const char *what)
{
    if (strcmp(c->numerics, "fast") == 0) return feature_judge(r, "accumulation", c, 2, got, ref, false, what);
    bool pass = !got->error[0] && !ref->error[0] && outcome_same(got, ref);
    record(r, "accumulation", c, 2, pass, got->seconds, "%s: the reference mirrored R=2 bits%s%.150s", what,
           got->error[0] ? ": " : pass ? "" : ": bits differ", got->error);
    return !pass;
}

static int replica_clip_mpi(results *r, const clip_flag *f, const outcome *ref)
{
    dr_run_config c;
    outcome got;
    char args[600], what[200];
    if (r->fault || (r->variant && strcmp(r->variant, "mpi") != 0) || system("command -v mpirun > /dev/null 2>&1") != 0)
        return 0;
    replica_clip(&c, f, true, "multi_worker_mirrored", 1);
    strcpy(c.variant, "mpi");
    snprintf(args, sizeof args, "--l2=0.001 --synthetic_examples=476 --global_batch_size=24 --train_steps=24 "
             "--gradient_accumulation_steps=2 --numerics=exact --clip_semantics=tensorflow %s", f->flags);
    run_mpi_pair(r, args, &got);
    snprintf(what, sizeof what, "%s tensorflow clip k=2 mpi -np 2 multi_worker_mirrored exact", f->name);
    int fails = replica_clip_judge(r, &c, &got, ref, what);
    outcome_free(&got);
    return fails;
}

static int replica_clip_engines(results *r, const clip_flag *f, const outcome *ref)
{
    static const char *const strategies[] = { "mirrored", "central_storage" };
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    int fails = 0;
    for (size_t v = 0; v < nv; v++)
        for (size_t i = 0; i < 3; i++) {   /* mirrored, central_storage exact; mirrored fast (openmp) */
            dr_run_config c;
            outcome got;
            char what[200];
            bool fast = i == 2;
            if (fast && (r->quick || strcmp(ev[v]->name, "openmp") != 0)) continue;
            replica_clip(&c, f, true, strategies[i % 2], 2);
            snprintf(c.variant, sizeof c.variant, "%s", ev[v]->name);
            if (fast) strcpy(c.numerics, "fast");
            if (!supported(r, "accumulation", &c, 2)) continue;
            run_case(&c, &got);
            snprintf(what, sizeof what, "%s tensorflow clip k=2 %s %s R=2 %s", f->name, ev[v]->name,
                     strategies[i % 2], c.numerics);
            fails += replica_clip_judge(r, &c, &got, ref, what);
            outcome_free(&got);
        }
    return fails;
}

int accumulation_replica_clip(results *r)
{
    int fails = 0;
    size_t n = r->full ? sizeof k_replica_clips / sizeof *k_replica_clips : 1;
    for (size_t i = 0; i < n; i++) {
        const clip_flag *f = &k_replica_clips[i];
        dr_run_config c;
        outcome one, ref;
        replica_clip(&c, f, true, "one_device", 0);
        run_case(&c, &one);
        fails += replica_clip_ref(r, f, 0, &one);
        outcome_free(&one);
        replica_clip(&c, f, true, "mirrored", 2);
        run_case(&c, &ref);
        fails += replica_clip_ref(r, f, 2, &ref) + replica_clip_engines(r, f, &ref) + replica_clip_mpi(r, f, &ref);
        outcome_free(&ref);
    }
    return fails;
}
