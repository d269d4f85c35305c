/* distref conformance — the five suites; here the first three, which judge
 * training runs: loss curves, batch splitting, regularization (reductions
 * and checkpoints: conformance/reductions_checkpoints.c).
 *
 *   loss_curves      every variant x strategy x replica count x all-reduce
 *                    algorithm, with and without L2, against ref one_device:
 *                    loss_bits per step and weights_sha256 (exact mode); fast
 *                    mode measured and held to docs/CONFORMANCE.md's bounds
 *   batch_splitting  which examples each replica got, per step, against
 *                    TensorFlow's rule (computed here a third time) and the ref
 *   regularization   the L2 term's effect on loss and weights for every R
 *   reductions       all-reduce results across threads, algorithms, packings;
 *                    one training step's gradient reduction
 *   checkpoints      save under one variant/strategy, resume under another
 * Every engine variant of the registry runs every cell; a cell a variant
 * does not support is recorded as "not supported" with its reason. In a
 * mutant build (make conformance builds one per planted fault) the same
 * suites run in quick mode and the fault's target suite must fail.
 */
#include "conformance/conformance.h"
#include "distref/engine.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef struct strat { const char *name; int gpus; const char *alg; int packs; int replicas; } strat;

static const strat matrix_full[] = {
    { "off", 0, NULL, 1, 1 }, { "one_device", 0, NULL, 1, 1 }, { "one_device", 1, NULL, 1, 1 },
    { "mirrored", 1, NULL, 1, 1 }, { "mirrored", 2, "nccl", 1, 2 }, { "mirrored", 3, NULL, 1, 3 },
    { "mirrored", 3, "hierarchical_copy", 2, 3 }, { "mirrored", 4, "nccl", 3, 4 },
    { "mirrored", 4, "hierarchical_copy", 0, 4 }, { "mirrored", 5, "nccl", 0, 5 },
    { "mirrored", 5, NULL, 1, 5 }, { "mirrored", 8, "hierarchical_copy", 1, 8 },
    { "mirrored", 8, "nccl", 2, 8 }, { "central_storage", 0, NULL, 1, 1 },
    { "central_storage", 1, NULL, 1, 1 }, { "central_storage", 2, NULL, 1, 2 },
    { "central_storage", 4, NULL, 1, 4 },
};
static const strat matrix_quick[] = {
    { "mirrored", 3, "nccl", 1, 3 }, { "mirrored", 4, "hierarchical_copy", 2, 4 },
    { "mirrored", 5, NULL, 1, 5 }, { "central_storage", 2, NULL, 1, 2 },
};

static void engine(results *r, dr_run_config *c, const char *numerics)
{
    (void)r;
    strcpy(c->variant, "openmp");
    strcpy(c->numerics, numerics);
}

static void write_curve(const char *outdir, const char *name, const outcome *o)
{
    char path[1200];
    FILE *f;
    snprintf(path, sizeof path, "%s/curve_%s.dat", outdir, name);
    if (!(f = fopen(path, "w"))) return;
    fprintf(f, "# step loss\n");
    for (uint32_t s = 0; s < o->nsteps; s++) fprintf(f, "%u %.9g\n", s + 1, (double)o->loss[s]);
    fclose(f);
}

/* ---- 1. loss curves ------------------------------------------------------ */

static int bit_identity(results *r, double l2)
{
    const strat *m = r->quick ? matrix_quick : matrix_full;
    size_t nm = r->quick ? sizeof matrix_quick / sizeof *m : sizeof matrix_full / sizeof *m;
    dr_run_config c;
    outcome ref, got;
    int fails = 0;
    base_config(&c, 63, 20, l2);
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    for (size_t v = r->quick || r->fault ? 1 : 0; v < nv + 1; v++) {
        for (size_t i = 0; i < nm; i++) {
            base_config(&c, 63, 20, l2);
            if (v) { engine(r, &c, "exact"); strcpy(c.variant, ev[v - 1]->name); }
            if (!set_strategy(&c, m[i].name, m[i].gpus, m[i].alg, m[i].packs)) continue;
            if (!supported(r, "loss_curves", &c, m[i].replicas)) continue;
            run_case(&c, &got);
            fails += !outcome_same(&got, &ref);
            record(r, "loss_curves", &c, m[i].replicas, outcome_same(&got, &ref), got.seconds,
                   "%s %s gpus=%d R=%d alg=%s packs=%d l2=%g%s%s", c.variant, m[i].name, m[i].gpus, m[i].replicas,
                   m[i].alg ? m[i].alg : "default", m[i].packs, dr_is_unset(l2) ? 0 : l2,
                   got.error[0] ? ": " : "", got.error);
            outcome_free(&got);
        }
    }
    outcome_free(&ref);
    return fails;
}

/* Fast mode: how far the engine's sgemm/libm run drifts from the reference,
 * held to the bounds of docs/CONFORMANCE.md. */
#define FAST_MAX_REL_LOSS 1e-4
#define FAST_P99_ULP      1024.0

static int fast_mode(results *r, const char *outdir, const outcome *ref, const char *variant)
{
    dr_run_config c;
    outcome got;
    double max_rel = INFINITY, p99 = INFINITY, maxulp = INFINITY, differ = 0;
    uint32_t first = 0;
    char path[1200];
    FILE *f;
    bool pass;
    base_config(&c, 2000, 64, 1e-3);
    c.epochs = 0; c.train_steps = ref->nsteps;
    engine(r, &c, "fast");
    snprintf(c.variant, sizeof c.variant, "%s", variant);
    set_strategy(&c, "mirrored", 4, "nccl", 1);
    if (!supported(r, "loss_curves", &c, 4)) return 0;
    run_case(&c, &got);
    if (!got.error[0] && outcome_drift(&got, ref, &max_rel, &p99, &maxulp, &differ)) {
        snprintf(path, sizeof path, "%s/fast_delta%s.dat", outdir, strcmp(variant, "openmp") ? "_opencl" : "");
        f = r->fault ? NULL : fopen(path, "w");
        if (f) fprintf(f, "# step |loss_fast - loss_ref|\n");
        for (uint32_t s = 0; s < got.nsteps && s < ref->nsteps; s++) {
            double d = fabs((double)got.loss[s] - (double)ref->loss[s]);
            if (!first && got.loss_bits[s] != ref->loss_bits[s]) first = s + 1;
            if (f) fprintf(f, "%u %.9g\n", s + 1, d > 0 ? d : 1e-12);
        }
        if (f) fclose(f);
        if (!r->fault) {
            char name[64];
            snprintf(name, sizeof name, "%s_fast_mirrored4", variant);
            write_curve(outdir, name, &got);
        }
    }
    pass = !got.error[0] && max_rel <= FAST_MAX_REL_LOSS && p99 <= FAST_P99_ULP;
    record(r, "loss_curves", &c, 4, pass, got.seconds,
           "%s fast mirrored R=4: first divergent step %u, max rel loss diff %.3g (bound %.0e), "
           "weights differing %.1f%%, ULP p99 %.0f (bound %.0f), max %.0f%s%s", variant, first, max_rel, FAST_MAX_REL_LOSS,
           100 * differ, p99, FAST_P99_ULP, maxulp, got.error[0] ? ": " : "", got.error);
    outcome_free(&got);
    return !pass;
}

/* FULL=1: the same demand on real data, 50 steps of Fashion-MNIST. */
static int fashion(results *r, double l2)
{
    static const strat cs[] = { { "mirrored", 3, "nccl", 2, 3 }, { "mirrored", 8, "hierarchical_copy", 1, 8 },
                                { "central_storage", 2, NULL, 1, 2 } };
    dr_run_config c;
    outcome ref, got;
    int fails = 0;
    base_config(&c, 0, 64, l2);
    strcpy(c.experiment, "mlp_fashion_mnist");
    c.epochs = 0; c.train_steps = 50;
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        engine(r, &c, "exact");
        set_strategy(&c, cs[i].name, cs[i].gpus, cs[i].alg, cs[i].packs);
        run_case(&c, &got);
        fails += !outcome_same(&got, &ref);
        record(r, "loss_curves", &c, cs[i].replicas, outcome_same(&got, &ref), got.seconds,
               "fashion_mnist 50 steps openmp %s R=%d l2=%g%s%s", cs[i].name, cs[i].replicas, dr_is_unset(l2) ? 0 : l2,
               got.error[0] ? ": " : "", got.error);
        outcome_free(&got);
    }
    outcome_free(&ref);
    return fails;
}

/* The tpu strategy, the reference and every engine variant, on three
 * slices, with and without spatial partitioning. 70 examples at G=32 end in
 * a short batch of 6, padded and masked on every slice. These cases carry
 * the planted fault too: the tpu step shares the split, the share scaling
 * and the divisor with the other strategies, and pad_unmasked lives here. */
static int tpu_identity(results *r, double l2)
{
    static const struct { const char *tpu, *dims; int replicas; } cases[] = {
        { "v2-8", "", 8 }, { "v3-8", "2,2", 2 }, { "v3-32", "2,2", 8 }, { "v3-32", "4,4", 2 },
    };
    dr_run_config c;
    outcome ref, got;
    int fails = 0;
    base_config(&c, 70, 32, l2);
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    size_t n = r->quick ? 2 : sizeof cases / sizeof cases[0];   /* planted faults: two slices */
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    for (size_t v = r->fault ? 1 : 0; v < nv + 1; v++)
    for (size_t i = 0; i < n; i++) {
        dr_err err;
        base_config(&c, 70, 32, l2);
        if (v) strcpy(c.variant, ev[v - 1]->name);
        if (dr_get_distribution_strategy("tpu", 0, NULL, 1, cases[i].tpu, &c.strategy, &err)) {
            record(r, "loss_curves", NULL, cases[i].replicas, false, 0, "tpu %s: %s", cases[i].tpu, err.msg);
            fails++;
            continue;
        }
        snprintf(c.input_partition_dims, sizeof c.input_partition_dims, "%s", cases[i].dims);
        if (!supported(r, "loss_curves", &c, cases[i].replicas)) continue;
        run_case(&c, &got);
        fails += !outcome_same(&got, &ref);
        record(r, "loss_curves", &c, cases[i].replicas, outcome_same(&got, &ref), got.seconds,
               "%s tpu %s partition=[%s] R=%d l2=%g%s%s", c.variant, cases[i].tpu, cases[i].dims[0] ? cases[i].dims : "1,1",
               cases[i].replicas, dr_is_unset(l2) ? 0 : l2, got.error[0] ? ": " : "", got.error);
        outcome_free(&got);
    }
    outcome_free(&ref);
    return fails;
}

#define PS_W1 "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w0:1\"],\"ps\":[\"p0:1\"]},\"task\":{\"type\":\"chief\",\"index\":0}}"

/* parameter_server (the reference; suite mpi runs it across ranks): one
 * worker is one_device's bits at any staleness, sharding and ps count;
 * three workers with stale reads are not, but the same --schedule_seed
 * must give the same bits twice. */
static int parameter_server(results *r)
{
    static const struct { uint32_t W, P, S; const char *part; } cases[] = {
        { 1, 1, 0, "" }, { 1, 2, 3, "fixed:3" }, { 1, 3, 1, "max_size:20000" },
    };
    dr_run_config c;
    outcome ref, got, again;
    char tf[512];
    int fails = 0;
    base_config(&c, 63, 20, 1e-3);
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] + 1; i++) {
        bool async = i == sizeof cases / sizeof cases[0];
        uint32_t W = async ? 3 : cases[i].W, P = async ? 2 : cases[i].P;
        size_t len;
        bool pass;
        base_config(&c, 63, 20, 1e-3);
        set_strategy(&c, "parameter_server", 0, NULL, 1);
        len = (size_t)snprintf(tf, sizeof tf, "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[");
        for (uint32_t w = 0; w < W; w++) len += (size_t)snprintf(tf + len, sizeof tf - len, "%s\"w%u:1\"", w ? "," : "", w);
        len += (size_t)snprintf(tf + len, sizeof tf - len, "],\"ps\":[");
        for (uint32_t p = 0; p < P; p++) len += (size_t)snprintf(tf + len, sizeof tf - len, "%s\"p%u:1\"", p ? "," : "", p);
        snprintf(tf + len, sizeof tf - len, "]},\"task\":{\"type\":\"chief\",\"index\":0}}");
        c.tf_config = tf;
        c.staleness = async ? 2 : cases[i].S;
        c.schedule_seed = 5;
        snprintf(c.ps_partitioner, sizeof c.ps_partitioner, "%s", async ? "fixed:2" : cases[i].part);
        run_case(&c, &got);
        if (async) {
            run_fresh_case(&c, &again);
            pass = !got.error[0] && outcome_same(&got, &again) && !outcome_same(&got, &ref);
            record(r, "loss_curves", &c, 1, pass, got.seconds, "ref parameter_server W=3 P=2 staleness 2: "
                   "schedule_seed 5 twice gives the same bits (and not one_device's)%s%s",
                   got.error[0] ? ": " : "", got.error);
            outcome_free(&again);
        } else {
            pass = outcome_same(&got, &ref);
            record(r, "loss_curves", &c, 1, pass, got.seconds, "ref parameter_server W=1 P=%u staleness %u "
                   "partitioner '%s' vs one_device, l2=0.001%s%s", P, c.staleness, c.ps_partitioner,
                   got.error[0] ? ": " : "", got.error);
        }
        fails += !pass;
        outcome_free(&got);
    }
    outcome_free(&ref);
    return fails;
}

/* loss_curves runs as parts, each a unit of work for conformance/lanes.c
 * (the table in conformance/main.c lists them in report order). */
int loss_curves_identity(results *r, const char *outdir) { (void)outdir; return bit_identity(r, DR_UNSET); }
int loss_curves_identity_l2(results *r, const char *outdir) { (void)outdir; return bit_identity(r, 1e-3); }
int loss_curves_tpu(results *r, const char *outdir)
{
    (void)outdir;
    return tpu_identity(r, DR_UNSET) + tpu_identity(r, 1e-3);
}

int loss_curves_long(results *r, const char *outdir)
{
    int fails = 0;
    if (!r->fault) {
        size_t nv;
        const dr_variant *const *ev = engine_variants(r, &nv);
        fails += parameter_server(r);
        for (size_t v = 0; v < nv; v++) {   /* shown in the matrix, supported or not */
            dr_run_config c;
            base_config(&c, 63, 20, 1e-3);
            set_strategy(&c, "parameter_server", 0, NULL, 1);
            snprintf(c.variant, sizeof c.variant, "%s", ev[v]->name);
            c.tf_config = PS_W1;
            if (supported(r, "loss_curves", &c, 1)) {
                outcome ref, got;
                set_strategy(&c, "one_device", 0, NULL, 1);
                c.tf_config = NULL;
                snprintf(c.variant, sizeof c.variant, "ref");
                run_case(&c, &ref);
                set_strategy(&c, "parameter_server", 0, NULL, 1);
                snprintf(c.variant, sizeof c.variant, "%s", ev[v]->name);
                c.tf_config = PS_W1;
                run_case(&c, &got);
                fails += !outcome_same(&got, &ref);
                record(r, "loss_curves", &c, 1, outcome_same(&got, &ref), got.seconds,
                       "%s parameter_server W=1 vs one_device", c.variant);
                outcome_free(&ref);
                outcome_free(&got);
            }
        }
    }
    if (r->full && !r->fault) fails += fashion(r, DR_UNSET) + fashion(r, 1e-3);
    dr_run_config c;
    outcome ref, got;
    base_config(&c, 2000, 64, 1e-3);       /* a longer run, for the plot and fast mode */
    c.epochs = 0; c.train_steps = r->quick ? 10 : 30;
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    if (!r->fault) write_curve(outdir, "ref_one_device", &ref);
    engine(r, &c, "exact");
    set_strategy(&c, "mirrored", 4, "nccl", 1);
    run_case(&c, &got);
    if (!r->fault) write_curve(outdir, "openmp_exact_mirrored4", &got);
    fails += !outcome_same(&got, &ref);
    record(r, "loss_curves", &c, 4, outcome_same(&got, &ref), got.seconds,
           "openmp exact mirrored R=4, %u steps on 2000 examples, G=64", c.train_steps > 0 ? (unsigned)c.train_steps : 0);
    outcome_free(&got);
    {
        size_t nv;
        const dr_variant *const *ev = engine_variants(r, &nv);
        for (size_t v = 0; v < nv; v++) fails += fast_mode(r, outdir, &ref, ev[v]->name);
    }
    outcome_free(&ref);
    return fails;
}

/* ---- 2. batch splitting -------------------------------------------------- */

/* TensorFlow 2.21's rule, a third time (docs/SEMANTICS.md §6). Under the
 * default policy (AUTO on in-memory data = DATA) a step of `count` examples
 * is cut into slices of ceil(count/R), trailing slices short or empty; under
 * OFF (FILE, HINT) the first G mod R replicas get one more and a short step
 * fills replicas in order. */
static void tf_sizes(bool slices, uint32_t count, uint32_t G, uint32_t R, uint32_t *out)
{
    uint32_t slice = (count + R - 1) / R;
    for (uint32_t i = 0; i < R; i++) {
        uint32_t want = slices ? slice : G / R + (i < G % R);
        out[i] = want < count ? want : count;
        count -= out[i];
    }
}

/* multi_worker_mirrored, the reference and every engine variant: W=2 workers x 2 GPUs, DATA sharding. Each global batch of B
 * is cut into N=4 slices of ceil(B/4); replica r of worker w takes slice
 * r*W + w (TensorFlow's legacy rebatch + shard). The weights must still be
 * one_device's. */
static int multi_worker(results *r, const char *variant)
{
    dr_run_config c;
    outcome ref, got;
    uint32_t bad = 0;
    base_config(&c, 63, 20, 1e-3);
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    set_strategy(&c, "multi_worker_mirrored", 2, "ring", 1);
    c.tf_config = "{\"cluster\":{\"worker\":[\"h0:1\",\"h1:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}";
    snprintf(c.variant, sizeof c.variant, "%s", variant);
    if (!supported(r, "loss_curves", &c, 4)) { outcome_free(&ref); return 0; }
    run_case(&c, &got);
    for (uint32_t s = 0; s < got.nsteps; s++) {
        uint32_t B = s + 1 < got.nsteps ? 20 : 3, slice = (B + 3) / 4;
        for (uint32_t w = 0; w < 2; w++)
            for (uint32_t k = 0; k < 2; k++) {
                uint32_t j = k * 2 + w, lo = j * slice < B ? j * slice : B, hi = lo + slice < B ? lo + slice : B;
                bad += got.sizes[s][w * 2 + k] != hi - lo;
            }
    }
    record(r, "batch_splitting", &c, 4, bad == 0 && !got.error[0], got.seconds,
           "%s multi_worker_mirrored W=2 x 2 GPUs: DATA shard slices r*W+w of ceil(B/N) (%u mismatches)%s%s",
           variant, bad, got.error[0] ? ": " : "", got.error);
    record(r, "loss_curves", &c, 4, outcome_same(&got, &ref), got.seconds,
           "%s multi_worker_mirrored W=2 x 2 GPUs (ring) vs one_device, l2=0.001", variant);
    bad += !outcome_same(&got, &ref);
    outcome_free(&ref);
    outcome_free(&got);
    return bad != 0;
}

/* Auto-shard OFF: each of W=2 workers (2 GPUs each) reads all n=20
 * examples and rebatches G=7 with its own size cycle, TensorFlow's
 * batch_sizes_for_worker: worker 0 [2,2,2,1], worker 1 the same rotated left
 * by R, [2,1,2,2]. Its replicas take the next R sizes each step until its
 * stream is spent. Then the identity that OFF implies: G = 2*20 with every
 * example twice is one_device at G = 20. */
static int unsharded(results *r, const char *variant)
{
    dr_run_config c;
    outcome ref, got;
    uint32_t bad = 0, pos[2] = { 0, 0 };
    static const uint32_t base[4] = { 2, 2, 2, 1 };
    const char *tf = "{\"cluster\":{\"worker\":[\"h0:1\",\"h1:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}";
    base_config(&c, 20, 7, DR_UNSET);
    set_strategy(&c, "multi_worker_mirrored", 2, "ring", 1);
    c.tf_config = tf;
    snprintf(c.auto_shard_policy, sizeof c.auto_shard_policy, "off");
    snprintf(c.variant, sizeof c.variant, "%s", variant);
    if (!supported(r, "batch_splitting", &c, 4)) return 0;
    run_case(&c, &got);
    for (uint32_t st = 0; st < got.nsteps; st++)
        for (uint32_t w = 0; w < 2; w++)
            for (uint32_t k = 0; k < 2; k++) {
                uint32_t want = base[(st * 2 + k + w * 2) % 4];
                if (want > 20 - pos[w]) want = 20 - pos[w];
                bad += got.sizes[st][w * 2 + k] != want;
                pos[w] += want;
            }
    bad += pos[0] != 20 || pos[1] != 20 || got.nsteps != 6;
    record(r, "batch_splitting", &c, 4, bad == 0 && !got.error[0], got.seconds,
           "%s multi_worker_mirrored W=2 x 2 GPUs, auto-shard OFF, G=7: each worker's own cycle (%u mismatches)%s%s",
           variant, bad, got.error[0] ? ": " : "", got.error);
    outcome_free(&got);
    base_config(&c, 63, 20, 1e-3);
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    base_config(&c, 63, 40, 1e-3);
    set_strategy(&c, "multi_worker_mirrored", 2, "ring", 1);
    c.tf_config = tf;
    snprintf(c.auto_shard_policy, sizeof c.auto_shard_policy, "off");
    snprintf(c.variant, sizeof c.variant, "%s", variant);
    run_case(&c, &got);
    record(r, "loss_curves", &c, 4, outcome_same(&got, &ref), got.seconds,
           "%s multi_worker_mirrored W=2 x 2 GPUs, auto-shard OFF, G=40 vs one_device G=20, l2=0.001%s%s",
           variant, got.error[0] ? ": " : "", got.error);
    bad += !outcome_same(&got, &ref);
    outcome_free(&ref);
    outcome_free(&got);
    return bad != 0;
}

/* split_<policy>_<k>.dat for the report's figure (reports/plots.gp): each
 * step's per-replica sizes as the engine took them (already checked
 * against TensorFlow's rule and the reference). */
static void write_split(const char *outdir, const char *policy, size_t k, const char *what, uint32_t R,
                        const outcome *got)
{
    char path[1200];
    outfile o;
    FILE *f = outfile_open(&o);
    if (!f) return;
    fprintf(f, "# step examples_of_replica_0..%u (%s), auto_shard_policy %s\n", R - 1, what, policy);
    for (uint32_t s = 0; s < got->nsteps; s++) {
        fprintf(f, "%u", s + 1);
        for (uint32_t i = 0; i < R; i++) fprintf(f, " %u", got->sizes[s][i]);
        fprintf(f, "\n");
    }
    snprintf(path, sizeof path, "%s/split_%s_%zu.dat", outdir, policy, k);
    outfile_commit(&o, path);
}

int suite_batch_splitting(results *r, const char *outdir)
{
    static const struct { uint32_t n, G, R; const char *what; } cases[] = {
        { 63, 20, 3, "G=20 over 3 replicas, final batch 3" },
        { 23, 10, 4, "G=10 over 4, final batch 3 < R" },
        { 15, 3, 5, "G=3 < R=5: empty replicas every step" },
    };
    static const char *const policies[] = { "auto", "off" };
    int fails = 0;
    for (size_t q = 0; q < 2 * sizeof cases / sizeof cases[0]; q++) {
        size_t k = q / 2;
        bool slices = q % 2 == 0;   /* auto: slices of ceil(B/R); off: batch_sizes_for_worker */
        dr_run_config c;
        outcome ref, got;
        uint32_t R = cases[k].R, bad = 0, steps = (cases[k].n + cases[k].G - 1) / cases[k].G;
        base_config(&c, cases[k].n, cases[k].G, DR_UNSET);
        snprintf(c.auto_shard_policy, sizeof c.auto_shard_policy, "%s", policies[q % 2]);
        set_strategy(&c, "mirrored", (int)R, "nccl", 1);
        run_case(&c, &ref);
        engine(r, &c, "exact");
        run_case(&c, &got);
        bad += got.nsteps != steps || ref.nsteps != steps;
        for (uint32_t s = 0; s < got.nsteps && s < ref.nsteps; s++) {
            uint32_t want[MAX_REPLICAS], left = cases[k].n - s * cases[k].G;
            tf_sizes(slices, left < cases[k].G ? left : cases[k].G, cases[k].G, R, want);
            for (uint32_t i = 0; i < R; i++) {
                bad += got.sizes[s][i] != want[i] || ref.sizes[s][i] != want[i];
                bad += strcmp(got.ids[s][i], ref.ids[s][i]) != 0;
            }
        }
        if (!r->fault) write_split(outdir, policies[q % 2], k, cases[k].what, R, &got);
        fails += bad != 0;
        record(r, "batch_splitting", &c, (int)R, bad == 0, got.seconds, "openmp vs TF rule and ref, policy %s: %s "
               "(%u mismatches)", policies[q % 2], cases[k].what, bad);
        outcome_free(&ref);
        outcome_free(&got);
    }
    {
        size_t nv;
        const dr_variant *const *ev = engine_variants(r, &nv);
        if (!r->fault) fails += multi_worker(r, "ref") + unsharded(r, "ref");
        for (size_t v = 0; v < nv; v++) fails += multi_worker(r, ev[v]->name) + unsharded(r, ev[v]->name);
    }
    return fails;
}

/* ---- 3. regularization scaling ------------------------------------------- */

int suite_regularization(results *r, const char *outdir)
{
    static const int reps[] = { 1, 2, 3, 4, 5, 8 };
    dr_run_config c;
    outcome base_l2, base_0;
    char path[1200];
    FILE *f;
    int fails = 0;
    base_config(&c, 63, 20, 0.01);
    c.epochs = 0; c.train_steps = 1;
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &base_l2);
    c.l2 = DR_UNSET;
    run_case(&c, &base_0);
    snprintf(path, sizeof path, "%s/reg.dat", outdir);
    f = r->fault ? NULL : fopen(path, "w");
    if (f) fprintf(f, "# replicas reg_term_in_loss reference\n");
    for (size_t i = 0; i < sizeof reps / sizeof reps[0]; i++) {
        outcome with, without;
        double term, want = (double)base_l2.loss[0] - (double)base_0.loss[0];
        bool pass;
        base_config(&c, 63, 20, 0.01);
        c.epochs = 0; c.train_steps = 1;
        engine(r, &c, "exact");
        set_strategy(&c, "mirrored", reps[i], "nccl", 1);
        run_case(&c, &with);
        c.l2 = DR_UNSET;
        run_case(&c, &without);
        term = (double)with.loss[0] - (double)without.loss[0];
        /* the term in the loss, and its gradient through the updated weights */
        pass = with.nsteps == 1 && term == want && strcmp(with.sha, base_l2.sha) == 0 &&
               strcmp(without.sha, base_0.sha) == 0;
        fails += !pass;
        if (f) fprintf(f, "%d %.9g %.9g\n", reps[i], term, want);
        record(r, "regularization", &c, reps[i], pass, with.seconds,
               "openmp mirrored R=%d: L2 term in the loss %.9g (one_device %.9g), weights %s", reps[i],
               term, want, strcmp(with.sha, base_l2.sha) == 0 ? "identical" : "differ");
        outcome_free(&with);
        outcome_free(&without);
    }
    if (f) fclose(f);
    outcome_free(&base_l2);
    outcome_free(&base_0);
    return fails;
}
