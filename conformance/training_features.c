/* distref conformance — suites 9, 10 and 11: learning-rate schedules,
 * gradient clipping and gradient accumulation, every strategy x variant,
 * exact and fast (accumulation: the section at the end of this file, its
 * other cells in conformance/accumulation_cells.c).
 *
 *   schedules  --lr_schedule=cosine (with --warmup_steps), piecewise,
 *              polynomial, exponential, and a constant rate with warmup;
 *   clipping   --global_clipnorm, --clipnorm, --clipvalue, at thresholds the
 *              MLP's aggregated gradient exceeds (so they act at every step).
 * For each feature the oracle is the reference one_device run with it:
 *   exact  the reference under mirrored R=3; each in-process engine variant
 *          (openmp, opencl) under one_device, mirrored R=2 (ring) and R=3
 *          (hierarchical copy, 2 packs), central_storage R=2,
 *          multi_worker_mirrored W=2 x 2 GPUs, and tpu v2-8 (openmp); the
 *          mpi variant under `mpirun -np 2` (multi_worker_mirrored, 2 ranks x
 *          1 GPU): every step's loss_bits and the final weights equal the
 *          oracle's;
 *   fast   each in-process engine variant under mirrored R=4 and mpi -np 2:
 *          max relative loss difference <= 1e-4 and the weights' ULP p99
 *          <= 1024 against the exact oracle (loss_curves' fast bounds).
 * That whole matrix (8 features x 16-18 runs, about 3.5 minutes on two
 * cores) runs under --full (make conformance FULL=1). The default run, part
 * of the main job's five minutes, keeps every feature against the
 * reference but rotates the engine cells: feature i runs one exact cell,
 * the (variant, strategy) pair i of the list above, and one fast cell
 * (mirrored R=4) on variant i mod 2; the first feature of each suite also
 * runs the reference's mirrored R=3 and mpi -np 2, exact and fast. Over the 8 features that covers every
 * strategy, both in-process variants, mpi, and both numerics.
 * --quick (and a planted fault): two schedules, one clipping flag, the
 * strategies one_device, mirrored R=2 and R=3, multi_worker_mirrored.
 * Planted faults (scripts/run_conformance_mutants.sh): the engine reads the
 * schedule one step ahead (DR_MUTANT_SCHEDULE_OFF_BY_ONE, devices/cpu/
 * openmp_backend.c and devices/opencl/opencl_backend.c) and must fail
 * `schedules`; each replica clips its own share before the all-reduce
 * (DR_MUTANT_CLIP_BEFORE_AGGREGATION, devices/cpu/openmp_backend.c: what
 * Keras 3 does under MirroredStrategy) and must fail `clipping`.
 * clipping also judges --clip_semantics=tensorflow (that per-replica clip,
 * as an option): every engine variant = the reference at the same strategy
 * and R; at R = 1 = the default's bits, at R = 2 not; under tpu (its cells
 * in conformance/tpu_feature_cells.c) = the reference mirrored at the same R.
 */
#ifndef DR_BIN
#define DR_BIN "bin/distref"
#endif
#include "conformance/conformance.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef struct feature {
    const char *name;      /* the cell's words */
    const char *flags;     /* the same as bin/distref flags (the mpi cells) */
    void (*set)(dr_run_config *c);
} feature;

static void f_cosine(dr_run_config *c)
{
    c->lr_schedule.kind = DR_LR_COSINE; c->lr_schedule.warmup_steps = 3; c->lr_schedule.decay_steps = 8;
    c->lr_schedule.alpha = 0.1f; c->learning_rate = 0.1;
}
static void f_piecewise(dr_run_config *c)
{
    c->lr_schedule.kind = DR_LR_PIECEWISE; c->lr_schedule.nboundaries = 2;
    c->lr_schedule.boundaries[0] = 2; c->lr_schedule.boundaries[1] = 5;
    c->lr_schedule.values[0] = 0.1f; c->lr_schedule.values[1] = 0.05f; c->lr_schedule.values[2] = 0.02f;
}
static void f_polynomial(dr_run_config *c)
{
    c->lr_schedule.kind = DR_LR_POLYNOMIAL; c->lr_schedule.decay_steps = 10; c->lr_schedule.power = 2.0f;
    c->lr_schedule.end_learning_rate = 0.001f; c->learning_rate = 0.1;
}
static void f_exponential(dr_run_config *c)
{
    c->lr_schedule.kind = DR_LR_EXPONENTIAL; c->lr_schedule.decay_steps = 3; c->lr_schedule.decay_rate = 0.7f;
    c->learning_rate = 0.1;
}
static void f_staircase(dr_run_config *c)
{
    f_exponential(c);
    c->lr_schedule.staircase = true; c->lr_schedule.warmup_steps = 2; c->lr_schedule.warmup_lr = 0.02f;
}
static void f_cycle(dr_run_config *c)
{
    f_polynomial(c);
    c->lr_schedule.decay_steps = 4; c->lr_schedule.cycle = true;
}
static void f_warmup(dr_run_config *c) { c->lr_schedule.warmup_steps = 5; c->learning_rate = 0.05; }
static void f_global(dr_run_config *c) { c->clip.global_clipnorm = 0.05f; }
static void f_clipnorm(dr_run_config *c) { c->clip.clipnorm = 0.02f; }
static void f_clipvalue(dr_run_config *c) { c->clip.clipvalue = 0.002f; }

static const feature k_schedules[] = {
    { "cosine warmup=3 decay=8 alpha=0.1", "--lr_schedule=cosine --warmup_steps=3 --decay_steps=8 --alpha=0.1 "
      "--learning_rate=0.1", f_cosine },
    { "piecewise 2,5: 0.1,0.05,0.02", "--lr_schedule=piecewise --boundaries=2,5 --values=0.1,0.05,0.02", f_piecewise },
    { "polynomial decay=10 power=2", "--lr_schedule=polynomial --decay_steps=10 --power=2 --end_learning_rate=0.001 "
      "--learning_rate=0.1", f_polynomial },
    { "exponential decay=3 rate=0.7", "--lr_schedule=exponential --decay_steps=3 --decay_rate=0.7 --learning_rate=0.1",
      f_exponential },
    { "constant warmup=5", "--warmup_steps=5 --learning_rate=0.05", f_warmup },
    { "exponential staircase, warmup from 0.02", "--lr_schedule=exponential --decay_steps=3 --decay_rate=0.7 "
      "--staircase --warmup_steps=2 --warmup_learning_rate=0.02 --learning_rate=0.1", f_staircase },
    { "polynomial cycle decay=4", "--lr_schedule=polynomial --decay_steps=4 --power=2 --end_learning_rate=0.001 "
      "--cycle --learning_rate=0.1", f_cycle },
};
static const feature k_clips[] = {
    { "global_clipnorm=0.05", "--global_clipnorm=0.05", f_global },
    { "clipnorm=0.02", "--clipnorm=0.02", f_clipnorm },
    { "clipvalue=0.002", "--clipvalue=0.002", f_clipvalue },
};

typedef struct strat { const char *name; int gpus; const char *alg; int packs; int replicas; bool quick; } strat;
#define NSCHEDULES (sizeof k_schedules / sizeof *k_schedules)
static const strat k_strats[] = {   /* quick (planted faults): the first three and multi_worker_mirrored */
    { "one_device", 0, NULL, 1, 1, true }, { "mirrored", 2, "nccl", 1, 2, true },
    { "mirrored", 3, "hierarchical_copy", 2, 3, true }, { "central_storage", 2, NULL, 1, 2, false },
    { "multi_worker_mirrored", 2, "ring", 1, 4, true }, { "tpu", 0, NULL, 1, 8, false },
};
#define PS_TF "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w0:1\"],\"ps\":[\"p0:1\",\"p1:1\"]}," \
              "\"task\":{\"type\":\"chief\",\"index\":0}}"
#define MWMS_TF "{\"cluster\":{\"worker\":[\"h0:1\",\"h1:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}"
#define STEPS 12
#define FAST_MAX_REL 1e-4
#define FAST_P99 1024.0

static void base(dr_run_config *c, const feature *f)
{
    base_config(c, 1000, 64, 1e-3);
    c->epochs = 0;
    c->train_steps = STEPS;
    f->set(c);
}

static bool place(dr_run_config *c, const strat *s)
{
    dr_err err;
    c->tf_config = NULL;
    if (strcmp(s->name, "tpu") == 0) return dr_get_distribution_strategy("tpu", 0, NULL, 1, "v2-8", &c->strategy, &err) == DR_OK;
    if (strcmp(s->name, "multi_worker_mirrored") == 0) c->tf_config = MWMS_TF;
    return set_strategy(c, s->name, s->gpus, s->alg, s->packs);
}

/* Fast: within loss_curves' bounds of the exact oracle. */
static bool within(const outcome *got, const outcome *ref, char *why, size_t n)
{
    double rel, p99, max_ulp, differ;
    if (got->error[0] || !outcome_drift(got, ref, &rel, &p99, &max_ulp, &differ)) {
        snprintf(why, n, "%.150s", got->error[0] ? got->error : "no weights or steps to compare");
        return false;
    }
    snprintf(why, n, "max rel loss diff %.3g (bound %.0e), weights ULP p99 %.0f (bound %.0f)", rel, FAST_MAX_REL, p99,
             FAST_P99);
    return rel <= FAST_MAX_REL && p99 <= FAST_P99;
}

static void mpi_case(const results *r, const feature *f, const char *numerics, outcome *out)
{
    char args[1600];
    snprintf(args, sizeof args, "--l2=0.001 --global_batch_size=64 --synthetic_examples=1000 --train_steps=%d "
             "--numerics=%s %s", STEPS, numerics, f->flags);
    run_mpi_pair(r, args, out);
}

int feature_judge(results *r, const char *suite, const dr_run_config *c, int R, const outcome *got,
                  const outcome *ref, bool exact, const char *what)
{
    char why[200] = "";
    bool pass = exact ? !got->error[0] && outcome_same(got, ref) : within(got, ref, why, sizeof why);
    if (exact && !pass) snprintf(why, sizeof why, "%.150s", got->error[0] ? got->error : "bits differ from the oracle");
    record(r, suite, c, R, pass, got->seconds, "%s: %s%s%s", what, exact ? "reference one_device bits" : "fast",
           why[0] ? ", " : "", why);
    return !pass;
}

/* The default run's rotation: feature number k's one exact cell is pair k
 * of (engine variant, strategy), its fast cell variant k mod nv. */
static bool rotated_in(const results *r, size_t k, size_t v, size_t i, size_t nv)
{
    size_t ns = sizeof k_strats / sizeof *k_strats;
    if (r->full || r->quick) return true;
    return i == SIZE_MAX ? v == k % nv : (k % (nv * ns)) == v * ns + i;
}

static int engine_cells(results *r, const char *suite, const feature *f, size_t k, const outcome *ref)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    dr_run_config c;
    outcome got;
    char what[256];
    int fails = 0;
    for (size_t v = 0; v < nv; v++) {
        for (size_t i = 0; i < sizeof k_strats / sizeof *k_strats; i++) {
            const strat *s = &k_strats[i];
            if ((r->quick && !s->quick) || !rotated_in(r, k, v, i, nv)) continue;
            base(&c, f);
            snprintf(c.variant, sizeof c.variant, "%s", ev[v]->name);
            if (!place(&c, s) || !supported(r, suite, &c, s->replicas)) continue;
            run_case(&c, &got);
            snprintf(what, sizeof what, "%s %s %s R=%d exact", f->name, ev[v]->name, s->name, s->replicas);
            fails += feature_judge(r, suite, &c, s->replicas, &got, ref, true, what);
            outcome_free(&got);
        }
        if (!rotated_in(r, k, v, SIZE_MAX, nv)) continue;
        base(&c, f);
        snprintf(c.variant, sizeof c.variant, "%s", ev[v]->name);
        strcpy(c.numerics, "fast");
        place(&c, &(strat){ "mirrored", 4, "nccl", 1, 4, true });
        if (!supported(r, suite, &c, 4)) continue;
        run_case(&c, &got);
        snprintf(what, sizeof what, "%s %s mirrored R=4 fast", f->name, ev[v]->name);
        fails += feature_judge(r, suite, &c, 4, &got, ref, false, what);
        outcome_free(&got);
    }
    return fails;
}

static int feature_cells(results *r, const char *suite, const feature *f, size_t k, bool wide)
{
    dr_run_config c;
    outcome ref, got;
    char what[256];
    int fails = 0;
    base(&c, f);
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    if (ref.error[0]) {
        record(r, suite, &c, 1, false, ref.seconds, "%s: the reference one_device run failed: %s", f->name, ref.error);
        outcome_free(&ref);
        return 1;
    }
    bool with_mpi = wide && !r->fault;
    if ((wide || r->quick) && (!r->variant || strcmp(r->variant, "ref") == 0)) {   /* the reference's own strategies */
        base(&c, f);
        set_strategy(&c, "mirrored", 3, "nccl", 1);
        run_case(&c, &got);
        snprintf(what, sizeof what, "%s ref mirrored R=3 exact", f->name);
        fails += feature_judge(r, suite, &c, 3, &got, &ref, true, what);
        outcome_free(&got);
        base(&c, f);   /* one worker: the sequential schedule, one_device's order and bits */
        set_strategy(&c, "parameter_server", 0, NULL, 1);
        c.tf_config = PS_TF;
        snprintf(c.ps_partitioner, sizeof c.ps_partitioner, "fixed:2");
        run_case(&c, &got);
        snprintf(what, sizeof what, "%s ref parameter_server 1 worker, 2 ps (fixed:2) exact", f->name);
        fails += feature_judge(r, suite, &c, 1, &got, &ref, true, what);
        outcome_free(&got);
    }
    fails += engine_cells(r, suite, f, k, &ref);
    if (with_mpi && (!r->variant || strcmp(r->variant, "mpi") == 0) &&
        system("command -v mpirun > /dev/null 2>&1") == 0) {
        for (int exact = 1; exact >= 0; exact--) {
            base(&c, f);
            strcpy(c.variant, "mpi");
            strcpy(c.numerics, exact ? "exact" : "fast");
            set_strategy(&c, "multi_worker_mirrored", 1, "ring", 1);
            mpi_case(r, f, c.numerics, &got);
            snprintf(what, sizeof what, "%s mpi -np 2 multi_worker_mirrored %s", f->name, c.numerics);
            fails += feature_judge(r, suite, &c, 2, &got, &ref, exact, what);
            outcome_free(&got);
        }
    }
    outcome_free(&ref);
    return fails;
}

int suite_schedules(results *r)
{
    int fails = 0;
    size_t n = r->quick ? 2 : sizeof k_schedules / sizeof *k_schedules;
    printf("== schedules: --lr_schedule and --warmup_steps, every strategy x variant, against the reference\n");
    for (size_t i = 0; i < n; i++)
        fails += feature_cells(r, "schedules", &k_schedules[i], i, r->full || i == 0);
    return fails;
}

/* --clip_semantics=tensorflow: each replica clips its own gradient (Keras 3
 * under MirroredStrategy). The oracle is the reference with the same
 * strategy and R; at R = 1 it equals the default semantics; at R = 2 it
 * must differ from it (the clip really is per replica). */
/* The per-replica clip across MPI ranks (the first clipping flag): mpirun
 * -np 2, multi_worker_mirrored with one GPU a rank, must give the reference
 * mirrored R=2's per-replica bits (the same split of each batch). */
static int per_replica_mpi(results *r, const feature *f, size_t k)
{
    dr_run_config c;
    outcome ref, got;
    char args[1600];
    bool pass;
    if (k > 0 || r->fault || (r->variant && strcmp(r->variant, "mpi") != 0) ||
        system("command -v mpirun > /dev/null 2>&1") != 0)
        return 0;
    base(&c, f);
    c.clip.per_replica = true;
    set_strategy(&c, "mirrored", 2, "nccl", 1);
    run_case(&c, &ref);
    snprintf(args, sizeof args, "--l2=0.001 --global_batch_size=64 --synthetic_examples=1000 --train_steps=%d "
             "--numerics=exact --clip_semantics=tensorflow %s", STEPS, f->flags);
    run_mpi_pair(r, args, &got);
    strcpy(c.variant, "mpi");
    pass = !got.error[0] && !ref.error[0] && outcome_same(&got, &ref);
    record(r, "clipping", &c, 2, pass, got.seconds, "%s tensorflow semantics mpi -np 2 multi_worker_mirrored exact vs "
           "ref mirrored R=2%s%.150s", f->name, got.error[0] ? ": " : "", got.error);
    outcome_free(&got);
    outcome_free(&ref);
    return !pass;
}

static int per_replica_cells(results *r, const feature *f, size_t k)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    int fails = 0;
    for (size_t i = 0; i < 5; i++) {   /* k_strats without tpu (its own cells: tpu_feature_cells.c) */
        const strat *s = &k_strats[i];
        dr_run_config c;
        outcome ref, got;
        char what[256];
        if (r->quick && !s->quick) continue;
        if (!r->full && !r->quick && (k > 0 || s->replicas > 2)) continue;   /* default: the first flag, R <= 2 */
        base(&c, f);
        c.clip.per_replica = true;
        place(&c, s);
        run_case(&c, &ref);
        if (s->replicas <= 2 && !r->fault) {   /* R = 1: the default's bits; R = 2: not */
            dr_run_config d = c;
            outcome agg;
            d.clip.per_replica = false;
            run_case(&d, &agg);
            bool same = !ref.error[0] && !agg.error[0] && outcome_same(&ref, &agg);
            bool pass = s->replicas == 1 ? same : !same && !ref.error[0] && !agg.error[0];
            fails += !pass;
            record(r, "clipping", &c, s->replicas, pass, ref.seconds, "%s ref %s R=%d: tensorflow semantics %s the "
                   "aggregated clip's bits%s%s", f->name, s->name, s->replicas, s->replicas == 1 ? "equal" :
                   "differ from", ref.error[0] ? ": " : "", ref.error);
            outcome_free(&agg);
        }
        for (size_t v = 0; v < nv; v++) {
            dr_run_config e = c;
            if (!r->full && !r->quick && v != i % nv) continue;   /* default: one variant per strategy, in turn */
            snprintf(e.variant, sizeof e.variant, "%s", ev[v]->name);
            if (!supported(r, "clipping", &e, s->replicas)) continue;
            run_case(&e, &got);
            snprintf(what, sizeof what, "%s tensorflow semantics %s %s R=%d exact vs ref at the same R", f->name,
                     ev[v]->name, s->name, s->replicas);
            bool pass = !got.error[0] && !ref.error[0] && outcome_same(&got, &ref);
            fails += !pass;
            record(r, "clipping", &e, s->replicas, pass, got.seconds, "%s%s%.150s", what, got.error[0] ? ": " : "",
                   got.error);
            outcome_free(&got);
        }
        outcome_free(&ref);
    }
    return fails + per_replica_mpi(r, f, k);
}

int suite_clipping(results *r)
{
    int fails = 0;
    size_t n = r->quick ? 1 : sizeof k_clips / sizeof *k_clips;
    printf("== clipping: clipping of the aggregated gradient, every strategy x variant, against the reference\n");
    for (size_t i = 0; i < n; i++)   /* numbered after the schedules, so the rotation goes on */
        fails += feature_cells(r, "clipping", &k_clips[i], NSCHEDULES + i, r->full || i == 0);
    for (size_t i = 0; i < n; i++) fails += per_replica_cells(r, &k_clips[i], i);
    return fails + clipping_tpu(r);
}

/* ---- accumulation: --gradient_accumulation_steps, the k·R invariance ---- */

/* k micro-steps of G = 48/k examples on R replicas must give the bits of
 * one step of 48 on one device: the oracle is the reference one_device run
 * at G = 48 (SGD with momentum and L2, 476 examples: a short final batch
 * of 44, which each k splits into k micro-batches (the precondition), 12
 * updates across an epoch boundary). Cells:
 *   table     k in {2, 3, 4, 8} x one_device, mirrored R=2 (ring), R=3
 *             (hierarchical copy, 2 packs), R=8, central_storage R=2,
 *             multi_worker_mirrored W=2 x 2, x the reference and each
 *             in-process engine variant (openmp, opencl): weights_sha256
 *             = the oracle's;
 *   mpi       k=2 under mpirun -np 2 (multi_worker_mirrored, 2 ranks x 1
 *             GPU): exact = the oracle's bits; fast within the fast bounds;
 *   fast      k=4, mirrored R=2, each in-process engine variant: every
 *             micro-step's loss and the final weights within loss_curves'
 *             fast bounds (max relative loss difference 1e-4, weights ULP
 *             p99 1024) of the reference's exact run at the same k;
 *   fallback  linear_wide (every compact total overflows), openmp k=2
 *             mirrored R=2: the oracle's bits (one step of 32), with the
 *             update's micro-batches recomputed in full accumulators
 *             (summary.json's exact_fallback_steps > 0);
 *   features  Adam, --global_clipnorm (the clip acts on the accumulated,
 *             aggregated gradient) and a cosine schedule with warmup (it
 *             reads the micro-step counter, Adam the updates): each engine
 *             variant at k=4 mirrored R=2 = the reference one_device run at
 *             the same k, and without the schedule = one step of 48.
 * The whole table runs under --full; the default run takes each strategy
 * once, with k and the variant in turn, and every other cell once (about
 * 25 s on two cores). The tpu strategy's cells (k=2 on v2-8, k=4 with
 * spatial partitioning, fast): conformance/tpu_feature_cells.c. A planted
 * fault, DR_MUTANT_ACCUM_K_TWICE (the engine divides the accumulated total
 * by k twice), must fail it, and so must ref_accum_k_twice (the same in the
 * reference) and DR_MUTANT_TPU_ACCUM_LAST_ONLY (tpu accumulates nothing). */
static const strat k_acc_strats[] = {
    { "one_device", 0, NULL, 1, 1, true }, { "mirrored", 2, "nccl", 1, 2, true },
    { "mirrored", 3, "hierarchical_copy", 2, 3, false }, { "mirrored", 8, "nccl", 1, 8, false },
    { "central_storage", 2, NULL, 1, 2, false }, { "multi_worker_mirrored", 2, "ring", 1, 4, true } };

static void acc_config(dr_run_config *c, uint32_t k)
{
    base_config(c, 476, 48 / k, 1e-3);
    c->epochs = 0;
    c->train_steps = 12 * k;
    if (k > 1) c->gradient_accumulation_steps = k;
}

static int acc_judge(results *r, const dr_run_config *c, int R, const outcome *got, const outcome *ref,
                     const char *what)
{
    bool pass = !got->error[0] && !ref->error[0] && got->weights && ref->weights && strcmp(got->sha, ref->sha) == 0;
    record(r, "accumulation", c, R, pass, got->seconds, "%s%s%.150s", what, got->error[0] ? ": " : "", got->error);
    return !pass;
}

static int acc_table(results *r, const outcome *ref)
{
    static const uint32_t ks[] = { 2, 3, 4, 8 };
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    dr_run_config c;
    outcome got;
    char what[256];
    int fails = 0;
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        for (size_t j = 0; j < sizeof k_acc_strats / sizeof *k_acc_strats; j++) {
            const strat *st = &k_acc_strats[j];
            if (r->quick && (i > 1 || !st->quick)) continue;
            /* default: each strategy once, k in turn, but R=8 (8 s: --full), whose k=8 runs on one_device */
            if (!r->full && !r->quick && (j % 4 != i || j == 3) && !(i == 3 && j == 0)) continue;
            for (size_t v = 0; v <= nv; v++) {
                if (!r->full && !r->quick && v != (i + j) % (nv + 1)) continue;   /* and one variant (nv: ref) */
                acc_config(&c, ks[i]);
                if (v < nv) snprintf(c.variant, sizeof c.variant, "%s", ev[v]->name);
                place(&c, st);
                if (!supported(r, "accumulation", &c, st->replicas)) continue;
                run_case(&c, &got);
                snprintf(what, sizeof what, "%s k=%u %s R=%d (G=%u): weights = one_device one step of 48", c.variant,
                         ks[i], st->name, st->replicas, 48 / ks[i]);
                fails += acc_judge(r, &c, st->replicas, &got, ref, what);
                outcome_free(&got);
            }
        }
    return fails;
}

/* The mpi variant under mpirun -np 2, k = 2: exact = one step of 48, fast
 * within the bounds of the reference's exact run at k = 2. */
static int acc_mpi(results *r, const outcome *ref)
{
    dr_run_config c;
    outcome got, exact_k;
    char args[512], what[200];
    int fails = 0;
    if (r->fault || (r->variant && strcmp(r->variant, "mpi") != 0) || system("command -v mpirun > /dev/null 2>&1") != 0)
        return 0;
    acc_config(&c, 2);
    run_case(&c, &exact_k);
    for (int exact = 1; exact >= 0; exact--) {
        acc_config(&c, 2);
        strcpy(c.variant, "mpi");
        strcpy(c.numerics, exact ? "exact" : "fast");
        set_strategy(&c, "multi_worker_mirrored", 1, "ring", 1);
        snprintf(args, sizeof args, "--l2=0.001 --synthetic_examples=476 --global_batch_size=24 --train_steps=24 "
                 "--gradient_accumulation_steps=2 --numerics=%s", c.numerics);
        run_mpi_pair(r, args, &got);
        snprintf(what, sizeof what, "mpi -np 2 k=2 multi_worker_mirrored %s", c.numerics);
        if (exact) {
            strcat(what, ": weights = one_device one step of 48");
            fails += acc_judge(r, &c, 2, &got, ref, what);
        } else {
            fails += feature_judge(r, "accumulation", &c, 2, &got, &exact_k, false, what);
        }
        outcome_free(&got);
    }
    outcome_free(&exact_k);
    return fails;
}

/* Fast numerics, k = 4, mirrored R = 2: within the fast bounds of the
 * reference's exact run at k = 4 (every micro-step's loss, the weights). */
static int acc_fast(results *r)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    dr_run_config c;
    outcome exact_k, got;
    char what[200];
    int fails = 0;
    if (r->quick || nv == 0) return 0;
    acc_config(&c, 4);
    run_case(&c, &exact_k);
    for (size_t v = 0; v < nv; v++) {
        if (!r->full && v > 0) break;   /* default: the first engine variant; --full: each */
        acc_config(&c, 4);
        snprintf(c.variant, sizeof c.variant, "%s", ev[v]->name);
        strcpy(c.numerics, "fast");
        set_strategy(&c, "mirrored", 2, "nccl", 1);
        if (!supported(r, "accumulation", &c, 2)) continue;
        run_case(&c, &got);
        snprintf(what, sizeof what, "%s k=4 mirrored R=2 fast", ev[v]->name);
        fails += feature_judge(r, "accumulation", &c, 2, &got, &exact_k, false, what);
        outcome_free(&got);
    }
    outcome_free(&exact_k);
    return fails;
}

int suite_accumulation(results *r)
{
    dr_run_config c;
    outcome ref;
    int fails = 0;
    printf("== accumulation: k micro-steps on R replicas = one step of the whole batch\n");
    acc_config(&c, 1);
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    if (ref.error[0]) {
        record(r, "accumulation", &c, 1, false, ref.seconds, "the reference one_device run of 48 failed: %.150s",
               ref.error);
        outcome_free(&ref);
        return 1;
    }
    fails += acc_table(r, &ref) + acc_mpi(r, &ref) + acc_fast(r);
    fails += accumulation_fallback(r) + accumulation_features(r) + accumulation_replica_clip(r);
    fails += accumulation_tpu(r, &ref);
    outcome_free(&ref);
    return fails;
}
