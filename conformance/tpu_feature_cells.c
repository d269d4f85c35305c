/* distref conformance — gradient accumulation and --clip_semantics=
 * tensorflow under the tpu strategy (suites 10 and 11's tpu cells; the
 * features' semantics: docs/TRAINING_FEATURES.md). tpu v2-8: 8 replicas of
 * one core each, or with --input_partition_dims=2,1 4 replicas of 2 cores
 * (a replica's gradient is its cores' rows merged). The reference and each
 * in-process engine variant (openmp, opencl).
 *
 *   accumulation  k micro-steps of 48/k examples: weights_sha256 = the
 *                 reference one_device run of one step of 48 (the suite's
 *                 oracle): k=2 on 8 replicas (G=24, a short final
 *                 micro-batch of 20 padded to 3 rows a replica) and k=4 on
 *                 4 partitioned replicas (G=12); fast k=2 on 8 replicas
 *                 within the fast bounds of the reference's exact run at
 *                 k=2 (not under --quick).
 *   clipping      --global_clipnorm=0.05 --clip_semantics=tensorflow, 12
 *                 steps of 64: every step's loss and the weights = the
 *                 reference mirrored at the same R (8, and 4 partitioned):
 *                 a replica clips its own gradient before the all-reduce,
 *                 under tpu as under mirrored (Keras 3 clips in replica
 *                 context under TPUStrategy as under MirroredStrategy);
 *                 and that oracle differs from the aggregated clip's; fast
 *                 on 8 replicas within the fast bounds of that oracle (not
 *                 under --quick); and the same exact cells at
 *                 --gradient_accumulation_steps=2 (G=32: each replica
 *                 clips the mean of its own micro-steps at the update, as
 *                 Keras 3; not under --quick).
 * A planted fault, DR_MUTANT_TPU_ACCUM_LAST_ONLY (the engine's tpu step
 * accumulates nothing: an update applies its own micro-step's shares),
 * must fail accumulation.
 */
#include "conformance/conformance.h"

#include <stdio.h>
#include <string.h>

typedef struct tpu_place { const char *dims; int replicas; } tpu_place;
static const tpu_place k_places[] = { { "", 8 }, { "2,1", 4 } };

static bool place_tpu(dr_run_config *c, const tpu_place *p)
{
    dr_err err;
    snprintf(c->input_partition_dims, sizeof c->input_partition_dims, "%s", p->dims);
    return dr_get_distribution_strategy("tpu", 0, NULL, 1, "v2-8", &c->strategy, &err) == DR_OK;
}

static void acc_tpu_config(dr_run_config *c, uint32_t k, const char *variant, const char *numerics)
{
    base_config(c, 476, 48 / k, 1e-3);
    c->epochs = 0;
    c->train_steps = 12 * k;
    c->gradient_accumulation_steps = k;
    snprintf(c->variant, sizeof c->variant, "%s", variant);
    snprintf(c->numerics, sizeof c->numerics, "%s", numerics);
}

/* The variants a cell runs: the reference (unless --variant names an
 * engine one) and each in-process engine variant. */
static size_t cell_variants(const results *r, const char **names, size_t cap)
{
    size_t nv, n = 0;
    const dr_variant *const *ev = engine_variants(r, &nv);
    if (!r->variant || strcmp(r->variant, "ref") == 0) names[n++] = "ref";
    for (size_t v = 0; v < nv && n < cap; v++) names[n++] = ev[v]->name;
    return n;
}

int accumulation_tpu(results *r, const outcome *one_step)
{
    static const uint32_t ks[] = { 2, 4 };   /* k on k_places[i] */
    const char *names[8];
    size_t nn = cell_variants(r, names, 8);
    dr_run_config c;
    outcome got, exact_k;
    char what[256];
    int fails = 0;
    for (size_t i = 0; i < sizeof k_places / sizeof *k_places; i++)
        for (size_t v = 0; v < nn; v++) {
            acc_tpu_config(&c, ks[i], names[v], "exact");
            if (!place_tpu(&c, &k_places[i]) || !supported(r, "accumulation", &c, k_places[i].replicas)) continue;
            run_case(&c, &got);
            bool pass = !got.error[0] && !one_step->error[0] && strcmp(got.sha, one_step->sha) == 0;
            fails += !pass;
            record(r, "accumulation", &c, k_places[i].replicas, pass, got.seconds, "%s k=%u tpu v2-8%s%s R=%d (G=%u): "
                   "weights = one_device one step of 48%s%.150s", names[v], ks[i], k_places[i].dims[0] ?
                   " --input_partition_dims=" : "", k_places[i].dims, k_places[i].replicas, 48 / ks[i],
                   got.error[0] ? ": " : "", got.error);
            outcome_free(&got);
        }
    if (r->quick) return fails;
    acc_tpu_config(&c, 2, "ref", "exact");
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &exact_k);
    for (size_t v = 0; v < nn; v++) {
        if (strcmp(names[v], "ref") == 0) continue;   /* the reference has no fast numerics of its own */
        acc_tpu_config(&c, 2, names[v], "fast");
        if (!place_tpu(&c, &k_places[0]) || !supported(r, "accumulation", &c, 8)) continue;
        run_case(&c, &got);
        snprintf(what, sizeof what, "%s k=2 tpu v2-8 R=8 fast vs the reference's exact k=2", names[v]);
        fails += feature_judge(r, "accumulation", &c, 8, &got, &exact_k, false, what);
        outcome_free(&got);
    }
    outcome_free(&exact_k);
    return fails;
}

/* k > 1: --gradient_accumulation_steps=k over G = 64/k (each replica clips
 * the mean of its own k micro-steps at the update, Keras 3) */
static void clip_tpu_config(dr_run_config *c, bool per_replica, uint32_t k)
{
    base_config(c, 1000, 64 / k, 1e-3);
    c->epochs = 0;
    c->train_steps = 12 * k;
    if (k > 1) c->gradient_accumulation_steps = k;
    c->clip.global_clipnorm = 0.05f;
    c->clip.per_replica = per_replica;
}

/* One placement's cells at accumulation k (fast: unpartitioned, k = 1). */
static int clip_tpu_place(results *r, const char *const *names, size_t nn, const tpu_place *p, bool fast, uint32_t k)
{
    int fails = 0;
    dr_run_config c, d;
    outcome oracle, agg, got;
    char ks[16] = "";   /* the cells' names at k = 1 as before accumulation had cells here */
    if (k > 1) snprintf(ks, sizeof ks, " k=%u", k);
    clip_tpu_config(&c, true, k);
    set_strategy(&c, "mirrored", p->replicas, "nccl", 1);
    run_case(&c, &oracle);
    if (!r->fault) {   /* the oracle clips per replica: not the aggregated clip's bits */
        clip_tpu_config(&d, false, k);
        set_strategy(&d, "mirrored", p->replicas, "nccl", 1);
        run_case(&d, &agg);
        bool pass = !oracle.error[0] && !agg.error[0] && !outcome_same(&oracle, &agg);
        fails += !pass;
        record(r, "clipping", &c, p->replicas, pass, oracle.seconds, "global_clipnorm=0.05%s ref mirrored R=%d: "
               "tensorflow semantics differ from the aggregated clip's bits%s%.150s", ks, p->replicas,
               oracle.error[0] ? ": " : "", oracle.error);
        outcome_free(&agg);
    }
    for (size_t v = 0; v < nn; v++) {
        clip_tpu_config(&c, true, k);
        snprintf(c.variant, sizeof c.variant, "%s", names[v]);
        if (!place_tpu(&c, p) || !supported(r, "clipping", &c, p->replicas)) continue;
        run_case(&c, &got);
        bool pass = !got.error[0] && !oracle.error[0] && outcome_same(&got, &oracle);
        fails += !pass;
        record(r, "clipping", &c, p->replicas, pass, got.seconds, "global_clipnorm=0.05%s tensorflow semantics "
               "%s tpu v2-8%s%s R=%d exact vs ref mirrored at the same R%s%.150s", ks, names[v], p->dims[0] ?
               " --input_partition_dims=" : "", p->dims, p->replicas, got.error[0] ? ": " : "", got.error);
        outcome_free(&got);
    }
    for (size_t v = 0; fast && v < nn; v++) {   /* fast: each replica clips its float gradient */
        char what[256];
        if (strcmp(names[v], "ref") == 0) continue;
        clip_tpu_config(&c, true, k);
        snprintf(c.variant, sizeof c.variant, "%s", names[v]);
        strcpy(c.numerics, "fast");
        if (!place_tpu(&c, p) || !supported(r, "clipping", &c, p->replicas)) continue;
        run_case(&c, &got);
        snprintf(what, sizeof what, "global_clipnorm=0.05 tensorflow semantics %s tpu v2-8 R=%d fast vs ref "
                 "mirrored R=%d exact", names[v], p->replicas, p->replicas);
        fails += feature_judge(r, "clipping", &c, p->replicas, &got, &oracle, false, what);
        outcome_free(&got);
    }
    outcome_free(&oracle);
    return fails;
}

int clipping_tpu(results *r)
{
    const char *names[8];
    size_t nn = cell_variants(r, names, 8);
    int fails = 0;
    for (uint32_t k = 1; k <= 2; k++)   /* k = 2: --gradient_accumulation_steps (not under --quick) */
        for (size_t i = 0; i < sizeof k_places / sizeof *k_places && (k == 1 || !r->quick); i++)
            fails += clip_tpu_place(r, names, nn, &k_places[i], i == 0 && k == 1 && !r->quick, k);
    return fails;
}
