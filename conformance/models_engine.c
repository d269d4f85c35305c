/* distref conformance — suite `models`, the engine's cells (issue 31): each
 * engine variant that has layer kernels for models beyond Dense against the
 * reference, bit for bit; one that has none answers "not supported".
 *
 *   sync     cnn_synthetic --batch_norm=sync (100 examples at G = 32, a short
 *            final batch of 4, dropout 0.25) under mirrored R = 3 (an uneven
 *            split): every step's loss bits and the final weights = the
 *            reference one_device (the engine's sync BN all-reduces its exact
 *            sums mid-pass, strategies/graph.c); not --quick: central_storage
 *            R = 2 and multi_worker_mirrored 2 workers x 2 GPUs
 *   replica  --batch_norm=replica, mirrored R = 2 = the reference at R = 2
 *            (each replica's own two-pass statistics; the moving statistics
 *            replica 0's)
 *   resnet   resnet_synthetic (projection shortcuts, GAP, 19 BNs), 2 steps
 *            of 32, mirrored R = 3 = the reference one_device (not --quick)
 *   tpu      tpu v2-8 sync BN, cnn_synthetic (and, not --quick,
 *            resnet_synthetic): unpartitioned and --input_partition_dims
 *            1,2 / 2,1 / 2,2 (each replica's maps on its cores' tiles with
 *            halos, strategies/graph_spatial.c) = the reference one_device;
 *            replica BN cnn_synthetic, the same four = the reference's run
 *            of the same flags; partitioned, summary.json's halo bytes per
 *            core, gather bytes, emulated seconds and tiles_end (the
 *            gather's layer and reason) = the reference's partitioned run's;
 *            unpartitioned, its emulated seconds = the reference's
 *   mpi      mpirun -np 2 multi_worker_mirrored, sync BN = one_device (not
 *            --quick, not under a planted fault)
 *   threads  resnet_synthetic fast one_device on 2 OpenMP threads = on 1,
 *            bit for bit (openmp; quick too)
 *   fast     --numerics=fast (sgemm convs, float gradients), cnn_synthetic
 *            sync BN 640 examples (20 steps) against the exact reference
 *            one_device: tpu v2-8 --input_partition_dims 2,2 and 2,1 and
 *            (not --quick) mirrored R=2, each within docs/CONFORMANCE.md's
 *            fast-mode loss bound (max relative loss difference <= 1e-4)
 *            and repeatable (a second run = its bits); the weights' ULP p99
 *            is reported, not bounded (docs/MODELS.md says why)
 *   l2       cnn_synthetic sync BN mirrored R=2 --l2=0.001 = the reference's
 *            bits (L2 on the Dense and Conv2D kernels, not BN's gamma)
 *   bytes    cnn_synthetic sync and replica BN mirrored R=2: summary.json's
 *            per-device bytes = the reference's (which counts the BN
 *            statistics as the engine's ring moves them)
 * Planted faults (tests/faults.tsv): engine_sync_bn_local (sync statistics
 * from each worker's first replica alone), engine_dropout_by_row (masks
 * keyed by the row within a replica), engine_conv_grad_pad (a conv's
 * input gradient gathered with the padding one short) and
 * engine_conv_grad_stride (a strided conv's, with the stride one short),
 * engine_bn_sums_core0 (a partitioned replica's BN sums of core 0's tile
 * alone), engine_halo_row_short (the halo from the core below one row short:
 * `tpu` at 2,1 and 2,2), engine_parts_by_threads (fast bias gradients' and BN sums' partials
 * one a thread: `threads`), and the OpenCL backend's cl_conv_grad_stride (the same in
 * cl/graph.cl), cl_l2_on_gamma (BN's gamma regularized) and
 * cl_sums_whole_map (a partitioned OpenCL core's conv gradient and BN sums
 * over its whole map, not its tile: the opencl `tpu` and `fast` cells with
 * --input_partition_dims) must fail the suite; ref_bn_bytes_backward_uncounted must fail `bytes`.
 */
#include "conformance/conformance.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MWMS_TF "{\"cluster\":{\"worker\":[\"h0:1\",\"h1:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}"

static void config(dr_run_config *c, const char *exp, const char *bn, const char *variant)
{
    base_config(c, 100, 32, 0.0);
    snprintf(c->experiment, sizeof c->experiment, "%s", exp);
    snprintf(c->batch_norm, sizeof c->batch_norm, "%s", bn);
    snprintf(c->variant, sizeof c->variant, "%s", variant);
    if (strcmp(exp, "resnet_synthetic") == 0) { c->synthetic_examples = 64; c->epochs = 0; c->train_steps = 2; }
}

/* The variant's run of (exp, bn) on `strategy` x gpus against the oracle. */
static int cell(results *r, const char *variant, const char *exp, const char *bn, const char *strategy, int gpus,
                int replicas, const outcome *want, const char *what)
{
    dr_run_config c;
    outcome got;
    char why[200] = "";
    config(&c, exp, bn, variant);
    if (strcmp(strategy, "multi_worker_mirrored") == 0) c.tf_config = MWMS_TF;
    set_strategy(&c, strategy, gpus, strcmp(strategy, "mirrored") == 0 ? "nccl" : NULL, 1);
    if (!supported(r, "models", &c, replicas)) return 0;
    run_case(&c, &got);
    bool pass = !got.error[0] && got.weights && want->weights && outcome_same_why(&got, want, why, sizeof why);
    record(r, "models", &c, replicas, pass, got.seconds, "%s: %s %s BN %s R=%d: loss bits and weights = the reference %s"
           "%s%.150s", variant, exp, bn, strategy, replicas, what, got.error[0] || !pass ? ": " : "", got.error[0] ? got.error : why);
    outcome_free(&got);
    return !pass;
}

/* The reference's run, the oracle. */
static void oracle(const char *exp, const char *bn, const char *strategy, int gpus, outcome *out)
{
    dr_run_config c;
    config(&c, exp, bn, "ref");
    set_strategy(&c, strategy, gpus, strcmp(strategy, "mirrored") == 0 ? "nccl" : NULL, 1);
    run_case(&c, out);
}

static int mpi_cell(results *r, const outcome *want)
{
    dr_run_config c;
    outcome got;
    char why[200] = "";
    config(&c, "cnn_synthetic", "sync", "mpi");
    set_strategy(&c, "multi_worker_mirrored", 1, "ring", 1);
    run_mpi_pair(r, "--experiment=cnn_synthetic --synthetic_examples=100 --global_batch_size=32 --epochs=1 "
                 "--batch_norm=sync", &got);
    bool pass = !got.error[0] && outcome_same_why(&got, want, why, sizeof why);
    record(r, "models", &c, 2, pass, got.seconds, "cnn_synthetic sync BN mpi -np 2 multi_worker_mirrored: = the "
           "reference one_device bits%s%.150s", got.error[0] || !pass ? ": " : "", got.error[0] ? got.error : why);
    outcome_free(&got);
    return !pass;
}

#define FAST_MAX_REL_LOSS 1e-4   /* docs/CONFORMANCE.md's fast-mode loss bound */

/* --numerics=fast (sgemm convs, float gradients), cnn_synthetic sync BN, 640
 * examples (20 steps), against the exact reference one_device: mirrored R=2
 * (not --quick) and the tpu strategy v2-8 partitioned 2,2 and 2,1 (each
 * core's float kernel-gradient partial added in core order, the BN sums in
 * double over a tile: bits of their own, docs/MODELS.md). Each within the
 * loss bound and repeatable: a second run gives the same loss bits and
 * weights. The weights' ULP p99 is reported, not bounded. */
static int fast_cells(results *r, const char *variant)
{
    static const char *const dims[] = { NULL, "2,2", "2,1" };   /* NULL: mirrored R=2 */
    static const int replicas[] = { 2, 2, 4 };
    dr_run_config c;
    dr_err err;
    outcome ref;
    int fails = 0;
    config(&c, "cnn_synthetic", "sync", "ref");
    c.synthetic_examples = 640;
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    for (size_t i = r->quick ? 1 : 0; i < sizeof dims / sizeof dims[0]; i++) {
        outcome got, again;
        double max_rel = INFINITY, p99 = INFINITY, max_ulp, differ;
        char why[200] = "";
        snprintf(c.variant, sizeof c.variant, "%s", variant);
        snprintf(c.numerics, sizeof c.numerics, "fast");
        if (!dims[i]) set_strategy(&c, "mirrored", 2, "nccl", 1);
        else if (dr_get_distribution_strategy("tpu", 0, NULL, 1, "v2-8", &c.strategy, &err) != DR_OK) { fails++; continue; }
        snprintf(c.input_partition_dims, sizeof c.input_partition_dims, "%s", dims[i] ? dims[i] : "");
        if (!supported(r, "models", &c, replicas[i])) continue;
        run_case(&c, &got);
        run_case(&c, &again);
        if (!got.error[0]) outcome_drift(&got, &ref, &max_rel, &p99, &max_ulp, &differ);
        bool same = !got.error[0] && got.weights && outcome_same_why(&again, &got, why, sizeof why);
        bool pass = !got.error[0] && max_rel <= FAST_MAX_REL_LOSS && same;
        fails += !pass;
        record(r, "models", &c, replicas[i], pass, got.seconds + again.seconds, "%s: cnn_synthetic fast %s%s (R=%d, "
               "20 steps): a second run %s; vs the exact reference one_device: max rel loss diff %.3g (bound %.0e), "
               "weights' ULP p99 %.0f (not bounded: docs/MODELS.md)%s%.150s", variant,
               dims[i] ? "tpu v2-8 --input_partition_dims=" : "mirrored", dims[i] ? dims[i] : "", replicas[i],
               same ? "= its bits" : "differs", max_rel, FAST_MAX_REL_LOSS, p99, got.error[0] || !same ? ": " : "",
               got.error[0] ? got.error : why);
        outcome_free(&got);
        outcome_free(&again);
    }
    outcome_free(&ref);
    return fails;
}

/* Fast numerics on 1 and 2 OpenMP threads (--threads): the same loss bits
 * and weights. The layers' loops run on the team, and every sum keeps an
 * order of the model's, never the team's (a conv's fast bias gradient and
 * BN sums: one partial an example, devices/cpu/openmp_graph.c and
 * openmp_conv.c), so the team's
 * size never reaches the bits. --threads is the openmp variant's flag. */
static int threads_cell(results *r, const char *variant)
{
    dr_run_config c;
    outcome one, two;
    char why[200] = "";
    if (strcmp(variant, "openmp") != 0) return 0;
    config(&c, "resnet_synthetic", "sync", variant);
    snprintf(c.numerics, sizeof c.numerics, "fast");
    set_strategy(&c, "one_device", 0, NULL, 1);
    if (!supported(r, "models", &c, 1)) return 0;
    c.threads = 1;
    run_case(&c, &one);
    c.threads = 2;
    run_case(&c, &two);
    bool pass = !one.error[0] && one.weights && outcome_same_why(&two, &one, why, sizeof why);
    record(r, "models", &c, 1, pass, one.seconds + two.seconds, "%s: resnet_synthetic fast one_device --threads=2: "
           "loss bits and weights = --threads=1's%s%.150s", variant, pass ? "" : ": ", pass ? "" : why);
    outcome_free(&one);
    outcome_free(&two);
    return !pass;
}

/* summary.json's tpu counters of a run: the spatial partitioning's halo
 * bytes per core and gather bytes (totals), where the tiles end and why
 * (tiled_layers, tiles_end: the gather naming the layer and the dimension),
 * the emulated seconds */
typedef struct tpu_counts {
    uint64_t halo[16], gather;
    uint32_t cores, tiled;
    char     end[200];
    double   emulated;
} tpu_counts;

/* c's run into a fresh model_dir (out: its outcome), its counters into *t. */
static void run_counted(dr_run_config *c, outcome *out, tpu_counts *t)
{
    char dir[] = "/tmp/distref_tpu_XXXXXX", path[1200];
    json_object *s, *tpu, *sp, *v;
    memset(t, 0, sizeof *t);
    if (!mkdtemp(dir)) { run_case(c, out); return; }
    snprintf(c->model_dir, sizeof c->model_dir, "%s", dir);
    run_case(c, out);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    if (!out->error[0] && (s = json_object_from_file(path))) {
        if (json_object_object_get_ex(s, "tpu", &tpu)) {
            if (json_object_object_get_ex(tpu, "emulated_seconds_total", &v)) t->emulated = json_object_get_double(v);
            if (json_object_object_get_ex(tpu, "spatial_partitioning", &sp)) {
                if (json_object_object_get_ex(sp, "gather_bytes_total", &v)) t->gather = (uint64_t)json_object_get_int64(v);
                if (json_object_object_get_ex(sp, "tiled_layers", &v)) t->tiled = (uint32_t)json_object_get_int(v);
                if (json_object_object_get_ex(sp, "tiles_end", &v))
                    snprintf(t->end, sizeof t->end, "%s", json_object_get_string(v));
                if (json_object_object_get_ex(sp, "halo_bytes_per_core_total", &v))
                    for (; t->cores < json_object_array_length(v) && t->cores < 16; t->cores++)
                        t->halo[t->cores] = (uint64_t)json_object_get_int64(json_object_array_get_idx(v, t->cores));
            }
        }
        json_object_put(s);
    }
    c->model_dir[0] = 0;
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    if (system(path) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
}

/* The tpu strategy (v2-8) on exp under bn: unpartitioned (8 replicas) and
 * with --input_partition_dims 1,2, 2,1 and 2,2 (4, 4 and 2 replicas, each
 * replica's maps on its cores' tiles with halos: graph_spatial.c) the engine
 * must give want's bits (sync BN: the reference one_device's) or, want NULL
 * (replica BN, whose statistics depend on R), the reference's run of the
 * same flags; partitioned, also the reference's partitioned run's halo bytes
 * per core, gather bytes, emulated seconds and where the tiles end and why
 * (summary.json: the engine gathers where the reference does). A halo the
 * engine gets wrong (planted fault engine_halo_row_short: the rows from the
 * core below one short) changes the bits at 2,1 and 2,2. */
static int tpu_cells(results *r, const char *variant, const char *exp, const char *bn, const outcome *want)
{
    static const char *const dims[] = { "", "1,2", "2,1", "2,2" };
    static const int replicas[] = { 8, 4, 4, 2 };
    int fails = 0;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        dr_run_config c;
        dr_err err;
        outcome got, ref;
        tpu_counts tg, tr;
        char why[200] = "";
        config(&c, exp, bn, variant);
        if (dr_get_distribution_strategy("tpu", 0, NULL, 1, "v2-8", &c.strategy, &err) != DR_OK) return 1;
        snprintf(c.input_partition_dims, sizeof c.input_partition_dims, "%s", dims[i]);
        if (!supported(r, "models", &c, replicas[i])) continue;
        run_counted(&c, &got, &tg);
        /* the reference's run of the same flags: its counters (unpartitioned: its emulated seconds) and,
         * want NULL, the oracle */
        snprintf(c.variant, sizeof c.variant, "ref");
        run_counted(&c, &ref, &tr);
        snprintf(c.variant, sizeof c.variant, "%s", variant);
        const outcome *w = want ? want : &ref;
        bool pass = !got.error[0] && got.weights && w->weights && outcome_same_why(&got, w, why, sizeof why);
        bool counts = !ref.error[0] && tr.emulated > 0 && (dims[i][0] ? tr.cores > 1 && tr.end[0] : 1) &&
                      memcmp(&tg, &tr, sizeof tg) == 0;
        if (pass && !counts) snprintf(why, sizeof why, "halo bytes core 0 %llu (ref %llu), gather %llu (ref %llu), "
                                      "emulated %.9g s (ref %.9g), tiles end at %u (ref %u: %.60s)",
                                      (unsigned long long)tg.halo[0], (unsigned long long)tr.halo[0],
                                      (unsigned long long)tg.gather, (unsigned long long)tr.gather, tg.emulated,
                                      tr.emulated, tg.tiled, tr.tiled, tr.end);
        pass = pass && counts;
        fails += !pass;
        record(r, "models", &c, replicas[i], pass, got.seconds, "%s: %s %s BN tpu v2-8%s%s (R=%d): loss bits and "
               "weights = the reference%s%s%s%.150s", variant, exp, bn, dims[i][0] ? " --input_partition_dims=" : "",
               dims[i], replicas[i], want ? " one_device" : "'s", dims[i][0] ? "; halo bytes per core, gather "
               "bytes, emulated seconds = the reference's partitioned run" : "; emulated seconds = the reference's",
               got.error[0] || !pass ? ": " : "", got.error[0] ? got.error : why);
        outcome_free(&got);
        outcome_free(&ref);
    }
    return fails;
}

/* Each engine variant that supports c gives want's bits (the reference's
 * run of c); a cell each, named "<variant>: <what>: = the reference's bits". */
static int engine_equals(results *r, const dr_variant *const *ev, size_t nv, dr_run_config *c, const outcome *want,
                         const char *what)
{
    int fails = 0;
    for (size_t v = 0; v < nv; v++) {
        char why[200] = "";
        outcome got;
        snprintf(c->variant, sizeof c->variant, "%s", ev[v]->name);
        if (!supported(r, "models", c, 2)) continue;
        run_case(c, &got);
        bool pass = !got.error[0] && got.weights && want->weights && outcome_same_why(&got, want, why, sizeof why);
        fails += !pass;
        record(r, "models", c, 2, pass, got.seconds, "%s: %s: = the reference's bits%s%.150s", ev[v]->name, what,
               got.error[0] || !pass ? ": " : "", got.error[0] ? got.error : why);
        outcome_free(&got);
    }
    return fails;
}

/* --clip_semantics=tensorflow (each replica's gradient clipped before the
 * all-reduce) on cnn_synthetic sync BN, mirrored R=2: the reference's run
 * must differ from one_device's unclipped bits (the clip bites: planted
 * fault ref_graph_clip_ignored drops it), and each engine variant must give
 * the reference's bits. */
static int clip_cells(results *r, const outcome *sync1, const dr_variant *const *ev, size_t nv)
{
    dr_run_config c;
    outcome want;
    int fails = 0;
    config(&c, "cnn_synthetic", "sync", "ref");
    c.clip.global_clipnorm = 0.05f;
    c.clip.per_replica = true;
    set_strategy(&c, "mirrored", 2, "nccl", 1);
    run_case(&c, &want);
    bool bites = !want.error[0] && want.weights && sync1->weights && !outcome_same(&want, sync1);
    fails += !bites;
    record(r, "models", &c, 2, bites, want.seconds, "ref: cnn_synthetic sync BN mirrored R=2 --global_clipnorm=0.05 "
           "--clip_semantics=tensorflow: differs from one_device's unclipped bits (each replica's clip bites)%s%.150s",
           want.error[0] ? ": " : "", want.error);
    fails += engine_equals(r, ev, nv, &c, &want, "cnn_synthetic sync BN mirrored R=2 --global_clipnorm=0.05 "
                           "--clip_semantics=tensorflow");
    outcome_free(&want);
    return fails;
}

/* --l2 on a model beyond Dense: Keras's kernel_regularizer, on the Dense and
 * Conv2D kernels only (not BatchNormalization's gamma), cnn_synthetic sync
 * BN mirrored R=2 --l2=0.001: each engine variant must give the
 * reference's bits (planted fault cl_l2_on_gamma: the OpenCL share
 * regularizes gamma too). */
static int l2_cells(results *r, const dr_variant *const *ev, size_t nv)
{
    dr_run_config c;
    outcome want;
    int fails = 0;
    config(&c, "cnn_synthetic", "sync", "ref");
    c.l2 = 0.001;
    set_strategy(&c, "mirrored", 2, "nccl", 1);
    run_case(&c, &want);
    fails += engine_equals(r, ev, nv, &c, &want, "cnn_synthetic sync BN mirrored R=2 --l2=0.001 (the Dense and "
                           "Conv2D kernels)");
    outcome_free(&want);
    return fails;
}

#define MAX_DEV 16

/* c's run into a fresh model_dir: summary.json's per-device bytes_in and
 * bytes_out into io[2 d], io[2 d + 1]; the number of devices (0: none read). */
static uint32_t device_bytes(dr_run_config *c, uint64_t *io)
{
    char dir[] = "/tmp/distref_bytes_XXXXXX", path[1200];
    json_object *s, *devs, *v;
    outcome o;
    uint32_t nd = 0;
    if (!mkdtemp(dir)) return 0;
    snprintf(c->model_dir, sizeof c->model_dir, "%s", dir);
    run_case(c, &o);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    if (!o.error[0] && (s = json_object_from_file(path))) {
        if (json_object_object_get_ex(s, "devices", &devs))
            for (; nd < json_object_array_length(devs) && nd < MAX_DEV; nd++) {
                json_object *d = json_object_array_get_idx(devs, nd);
                io[2 * nd] = json_object_object_get_ex(d, "bytes_in", &v) ? (uint64_t)json_object_get_int64(v) : 0;
                io[2 * nd + 1] = json_object_object_get_ex(d, "bytes_out", &v) ? (uint64_t)json_object_get_int64(v) : 0;
            }
        json_object_put(s);
    }
    outcome_free(&o);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    if (system(path) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
    return nd;
}

/* The BatchNormalization statistics' bytes: the reference merges them in
 * memory and counts what the engine's ring all-reduce of them moves
 * (dr_count_ring), so under mirrored R=2 (sync: 2 C accumulators a layer
 * each way; replica: the state handed from replica 0) summary.json's
 * per-device bytes must be the engine's (planted fault
 * ref_bn_bytes_backward_uncounted: the reference leaves the backward's out). */
static int bytes_cells(results *r, const dr_variant *const *ev, size_t nv)
{
    static const char *const bns[] = { "sync", "replica" };
    int fails = 0;
    for (size_t b = 0; b < 2; b++) {
        dr_run_config c;
        uint64_t want[2 * MAX_DEV], got[2 * MAX_DEV];
        uint32_t nw, ng;
        config(&c, "cnn_synthetic", bns[b], "ref");
        set_strategy(&c, "mirrored", 2, "nccl", 1);
        nw = device_bytes(&c, want);
        for (size_t v = 0; v < nv; v++) {
            config(&c, "cnn_synthetic", bns[b], ev[v]->name);
            set_strategy(&c, "mirrored", 2, "nccl", 1);
            if (!supported(r, "models", &c, 2)) continue;
            ng = device_bytes(&c, got);
            bool pass = nw > 1 && ng == nw && memcmp(got, want, 2 * nw * sizeof *got) == 0;
            fails += !pass;
            record(r, "models", &c, 2, pass, 0.0, "%s: cnn_synthetic %s BN mirrored R=2: summary.json's per-device "
                   "bytes_in/bytes_out = the reference's (GPU:0 %llu in: the BN statistics counted alike)%s",
                   ev[v]->name, bns[b], nw > 1 ? (unsigned long long)want[2] : 0ULL,
                   pass ? "" : ng == nw ? ": the counts differ" : ": no summary.json's devices");
        }
    }
    return fails;
}

int models_engine_cells(results *r, const outcome *sync1)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    outcome rep2, res1;
    int fails = 0;
    oracle("cnn_synthetic", "replica", "mirrored", 2, &rep2);
    memset(&res1, 0, sizeof res1);
    if (!r->quick) oracle("resnet_synthetic", "sync", "one_device", 0, &res1);
    for (size_t v = 0; v < nv; v++) {
        const char *n = ev[v]->name;
        fails += cell(r, n, "cnn_synthetic", "sync", "mirrored", 3, 3, sync1, "one_device");
        fails += cell(r, n, "cnn_synthetic", "replica", "mirrored", 2, 2, &rep2, "mirrored R=2");
        fails += tpu_cells(r, n, "cnn_synthetic", "sync", sync1);
        fails += tpu_cells(r, n, "cnn_synthetic", "replica", NULL);
        fails += threads_cell(r, n);
        fails += fast_cells(r, n);
        if (r->quick) continue;
        fails += tpu_cells(r, n, "resnet_synthetic", "sync", &res1);
        fails += cell(r, n, "cnn_synthetic", "sync", "central_storage", 2, 2, sync1, "one_device");
        fails += cell(r, n, "cnn_synthetic", "sync", "multi_worker_mirrored", 2, 4, sync1, "one_device");
        fails += cell(r, n, "resnet_synthetic", "sync", "mirrored", 3, 3, &res1, "one_device");
    }
    fails += clip_cells(r, sync1, ev, nv);   /* quick too: the mutant build runs --quick */
    fails += l2_cells(r, ev, nv);
    fails += bytes_cells(r, ev, nv);
    if (!r->quick && !r->fault && (!r->variant || strcmp(r->variant, "mpi") == 0) &&
        system("command -v mpirun > /dev/null 2>&1") == 0)
        fails += mpi_cell(r, sync1);
    outcome_free(&rep2);
    outcome_free(&res1);
    return fails;
}
