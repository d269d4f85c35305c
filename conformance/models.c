/* distref conformance — suite `models`: models beyond the MLP (issue 31),
 * in the reference.
 *
 * cnn_synthetic (Conv2D stride 2 "same", BatchNormalization + ReLU, Conv2D,
 * a residual Add, MaxPooling2D, 1x1 and strided "valid" Conv2D, Flatten,
 * Dropout 0.25, Dense; 8 floats of BN state), 100 examples at G = 32:
 * three full steps and a short final batch of 4, which leaves replicas
 * empty at R = 8 (tpu v2-8) and splits unevenly at R = 3.
 *   sync     --batch_norm=sync (the default): the reference under mirrored
 *            R = 2 and 3, central_storage R = 2, multi_worker_mirrored
 *            2 workers x 2 GPUs and tpu v2-8 = one_device: every step's
 *            loss bits and the final weights (BN's moving statistics
 *            included);
 *   replica  --batch_norm=replica: one_device = mirrored R = 1, and not
 *            sync's bits (two-pass variance against sync's E[x^2]-E[x]^2, as
 *            TensorFlow 2.21 computes them, docs/MODELS.md); at R = 2 the
 *            same bits under mirrored and central_storage
 *            (deterministic for a given R); R = 2 and R = 3 differ (each
 *            replica's own statistics: the dependence on R it exists to show);
 *   engine   conformance/models_engine.c: each engine variant against the
 *            reference's bits (openmp, mpi, opencl); a strategy a variant
 *            does not run (opencl: tpu) answers "not supported" (a
 *            not-supported verdict).
 *   masks    conformance/models_masks.c: --dropout_masks over several
 *            workers (multi_worker_mirrored 2 x 2, ref and each engine
 *            variant, and mpi -np 2) = one_device from the same file.
 *   evaluate conformance/models_evaluate.c: evaluate and predict of a
 *            reference checkpoint (mlp, cnn, resnet) by each engine variant =
 *            the reference's files, byte for byte (fast: within a bound).
 *   accum    conformance/models_accum.c: --gradient_accumulation_steps=2
 *            and 3 (sync BN: R = 2 = one_device at the same k; at
 *            --learning_rate=0 k micro-steps = k plain steps; the engine's
 *            bits = the reference's).
 *   ps       conformance/models_ps.c: parameter_server (one worker = one_device
 *            for cnn and resnet; three workers deterministic; mpi refuses).
 * Dropout's masks are keyed by the global example id, so they never differ
 * between splits: the sync cells check that too.
 * --full adds mirrored R = 4 and 8 (sync), and resnet_synthetic (38 layers:
 * projection shortcuts, 19 BatchNormalizations, global average pooling)
 * under mirrored R = 3 = one_device, 2 steps of 32 (sync BN).
 * spatial  tpu v2-8 with --input_partition_dims (halo exchange between a
 *          replica's cores, docs/MODELS.md): sync BN 2,2 (R = 2) and 2,1
 *          (R = 4) = one_device; replica BN 2,2 = mirrored R = 2; --full adds
 *          replica BN 1,2 = mirrored R = 4 and resnet_synthetic 2,2 and 4,1
 *          (sync) = one_device.
 * Planted faults (tests/faults.tsv): ref_sync_bn_local (sync statistics
 * from replica 0's batch alone) and ref_dropout_by_row (masks keyed by the
 * row within a replica's batch, not the example) must fail `sync`;
 * ref_halo_row_short (a core's halo from below one row short) must fail
 * the spatial cells.
 */
#ifndef DR_BIN
#define DR_BIN "bin/distref"
#endif
#include "conformance/conformance.h"

#include <stdio.h>
#include <string.h>

#define MWMS_TF "{\"cluster\":{\"worker\":[\"h0:1\",\"h1:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}"

typedef struct cell { const char *name; int gpus; int replicas; bool quick, full_only; } cell;

static bool place(dr_run_config *c, const cell *s)
{
    dr_err err;
    c->tf_config = NULL;
    if (strcmp(s->name, "tpu") == 0) return dr_get_distribution_strategy("tpu", 0, NULL, 1, "v2-8", &c->strategy, &err) == DR_OK;
    if (strcmp(s->name, "multi_worker_mirrored") == 0) c->tf_config = MWMS_TF;
    return set_strategy(c, s->name, s->gpus, s->name[0] == 'm' && s->name[1] == 'i' ? "nccl" : NULL, 1);
}

static void cnn_config(dr_run_config *c, const char *bn)
{
    base_config(c, 100, 32, 0.0);
    snprintf(c->experiment, sizeof c->experiment, "cnn_synthetic");
    snprintf(c->batch_norm, sizeof c->batch_norm, "%s", bn);
}

static bool same_run(const outcome *a, const outcome *b)
{
    return a->weights && b->weights && outcome_same(a, b);
}

/* Spatial partitioning (tpu v2-8, --input_partition_dims, docs/MODELS.md):
 * each replica's cores hold tiles of the feature maps and exchange halos;
 * the bits must be the unpartitioned run's at the same replica count. */
static int spatial_cell(results *r, const dr_run_config *base, const char *dims, int replicas, const outcome *want,
                        const char *what)
{
    static const cell tpu = { "tpu", 0, 8, true, false };
    dr_run_config c = *base;
    outcome got;
    bool pass;
    place(&c, &tpu);
    snprintf(c.input_partition_dims, sizeof c.input_partition_dims, "%s", dims);
    if (!supported(r, "models", &c, replicas)) return 0;
    run_case(&c, &got);
    pass = same_run(&got, want);
    record(r, "models", &c, replicas, pass, got.seconds, "%s %s BN tpu v2-8 --input_partition_dims=%s (R=%d, halos): "
           "loss bits and weights = %s%s%.150s", c.experiment, c.batch_norm, dims, replicas, what,
           got.error[0] ? ": " : "", got.error);
    outcome_free(&got);
    return !pass;
}

static int sync_cells(results *r, const outcome *ref)
{
    static const cell cs[] = { { "mirrored", 2, 2, true, false }, { "mirrored", 3, 3, true, false },
                               { "central_storage", 2, 2, false, false }, { "multi_worker_mirrored", 2, 4, true, false },
                               { "tpu", 0, 8, false, false }, { "mirrored", 4, 4, false, true },
                               { "mirrored", 8, 8, false, true } };
    int fails = 0;
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
        dr_run_config c;
        outcome got;
        if ((r->quick && !cs[i].quick) || (cs[i].full_only && !r->full)) continue;
        cnn_config(&c, "sync");
        place(&c, &cs[i]);
        if (!supported(r, "models", &c, cs[i].replicas)) continue;
        run_case(&c, &got);
        bool pass = same_run(&got, ref);
        fails += !pass;
        record(r, "models", &c, cs[i].replicas, pass, got.seconds, "cnn_synthetic sync BN %s R=%d: loss bits and weights "
               "= one_device%s%.150s", cs[i].name, cs[i].replicas, got.error[0] ? ": " : "", got.error);
        outcome_free(&got);
    }
    {
        dr_run_config c;
        cnn_config(&c, "sync");
        fails += spatial_cell(r, &c, "2,2", 2, ref, "one_device");
        if (!r->quick) fails += spatial_cell(r, &c, "2,1", 4, ref, "one_device");
    }
    return fails;
}

static int replica_cells(results *r, const outcome *sync1)
{
    static const cell one = { "one_device", 0, 1, true, false }, m1 = { "mirrored", 1, 1, true, false }, m2 = { "mirrored", 2, 2, true, false },
                      m3 = { "mirrored", 3, 3, true, false }, cs2 = { "central_storage", 2, 2, false, false };
    dr_run_config c;
    outcome o1, a, b, d, e;
    int fails = 0;
    bool pass;
    cnn_config(&c, "replica"); place(&c, &one); run_case(&c, &o1);
    cnn_config(&c, "replica"); place(&c, &m1); run_case(&c, &e);
    pass = same_run(&o1, &e) && strcmp(o1.sha, sync1->sha) != 0;
    fails += !pass;
    record(r, "models", &c, 1, pass, o1.seconds + e.seconds, "cnn_synthetic replica BN one_device = mirrored R=1, "
           "not sync's bits (two-pass variance)%s%.150s", e.error[0] ? ": " : "", e.error);
    outcome_free(&e);
    cnn_config(&c, "replica"); place(&c, &m2); run_case(&c, &a);
    cnn_config(&c, "replica"); place(&c, &m3); run_case(&c, &b);
    pass = !a.error[0] && !b.error[0] && a.weights && b.weights && strcmp(a.sha, b.sha) != 0 && strcmp(a.sha, o1.sha) != 0;
    fails += !pass;
    record(r, "models", &c, 3, pass, a.seconds + b.seconds, "cnn_synthetic replica BN: mirrored R=2, R=3 and one_device "
           "differ (per-replica statistics)%s%.150s", b.error[0] ? ": " : "", b.error);
    cnn_config(&c, "replica");
    fails += spatial_cell(r, &c, "2,2", 2, &a, "mirrored R=2");
    if (r->full) {
        static const cell m4 = { "mirrored", 4, 4, false, true };
        cnn_config(&c, "replica"); place(&c, &m4); run_case(&c, &d);
        cnn_config(&c, "replica");
        fails += spatial_cell(r, &c, "1,2", 4, &d, "mirrored R=4");
        outcome_free(&d);
    }
    if (!r->quick) {
        cnn_config(&c, "replica"); place(&c, &cs2); run_case(&c, &d);
        pass = same_run(&d, &a);
        fails += !pass;
        record(r, "models", &c, 2, pass, d.seconds, "cnn_synthetic replica BN central_storage R=2 = mirrored R=2%s%.150s",
               d.error[0] ? ": " : "", d.error);
        outcome_free(&d);
    }
    outcome_free(&o1); outcome_free(&a); outcome_free(&b);
    return fails;
}

static int resnet_cell(results *r)
{
    static const cell one = { "one_device", 0, 1, true, false }, m3 = { "mirrored", 3, 3, true, false };
    dr_run_config c;
    outcome a, b;
    bool pass;
    cnn_config(&c, "sync");
    snprintf(c.experiment, sizeof c.experiment, "resnet_synthetic");
    c.synthetic_examples = 64; c.epochs = 0; c.train_steps = 2;
    place(&c, &one); run_case(&c, &a);
    place(&c, &m3); run_case(&c, &b);
    pass = same_run(&a, &b);
    record(r, "models", &c, 3, pass, a.seconds + b.seconds, "resnet_synthetic sync BN mirrored R=3 = one_device%s%.150s",
           b.error[0] ? ": " : "", b.error);
    cnn_config(&c, "sync");
    snprintf(c.experiment, sizeof c.experiment, "resnet_synthetic");
    c.synthetic_examples = 64; c.epochs = 0; c.train_steps = 2;
    int fails = !pass + spatial_cell(r, &c, "2,2", 2, &a, "one_device") + spatial_cell(r, &c, "4,1", 2, &a, "one_device");
    outcome_free(&a); outcome_free(&b);
    return fails;
}

int suite_models(results *r)
{
    static const cell one = { "one_device", 0, 1, true, false };
    dr_run_config c;
    outcome ref;
    int fails;
    printf("== models: cnn_synthetic (conv, BN, residual add, pooling, dropout) sync BN = one_device at every R\n");
    cnn_config(&c, "sync");
    place(&c, &one);
    run_case(&c, &ref);
    if (ref.error[0]) {
        record(r, "models", &c, 1, false, ref.seconds, "cnn_synthetic one_device: %.150s", ref.error);
        outcome_free(&ref);
        return 1;
    }
    fails = sync_cells(r, &ref) + replica_cells(r, &ref) + (r->full ? resnet_cell(r) : 0);
    fails += models_engine_cells(r, &ref);
    fails += models_accum_cells(r);
    fails += models_masks_cells(r);
    fails += models_evaluate_cells(r);
    fails += models_ps_cells(r);
    outcome_free(&ref);
    return fails;
}
