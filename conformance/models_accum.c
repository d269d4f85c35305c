/* distref conformance — suite `models`, --gradient_accumulation_steps on a
 * model beyond Dense (issue 31): cnn_synthetic (BatchNormalization, dropout
 * 0.25), 100 examples at G = 32, 6 micro-steps (the epoch's short batch of
 * 4 inside an update at k = 2 and 3).
 *
 * Keras 3's rule, measured (scripts/tf_graph_accum.py, docs/MODELS.md):
 * each micro-step normalizes with its own micro-batch's statistics, moves
 * the moving statistics (k moves per optimizer update) and draws its own
 * dropout masks (distref's are keyed by the micro-step's number); only the
 * gradient waits for the k-th. So no invariance against one step of kG
 * holds (its statistics would be kG's and move once); what holds:
 *   r invariance  sync BN, k = 2 and 3: mirrored R = 2 = one_device at the
 *                 same k, every step's loss bits and the final variables
 *                 (each micro-step's statistics are its global micro-batch's,
 *                 exact sums); and one_device at k differs from k = 1 (the
 *                 accumulation bites)
 *   forward       --learning_rate=0 (the weights never move): k = 2 and 3
 *                 give k = 1's bits, moving statistics included: each
 *                 micro-step its own statistics, moving update and masks
 *   engine        each engine variant with layer kernels: sync BN mirrored
 *                 R = 2 at k = 2 and 3, one_device at k = 2 and replica BN
 *                 mirrored R = 2 at k = 2 (not --quick) = the reference's
 *                 bits; mpi -np 2 multi_worker_mirrored k = 2 (not --quick)
 * Planted faults (tests/faults.tsv): ref_graph_moving_per_update (the
 * reference keeps the moving statistics of an update's last micro-step
 * only) must fail `forward`; engine_bn_moving_per_update (the engine moves
 * them at the update's micro-step only) must fail `engine`.
 */
#include "conformance/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 6   /* a multiple of k = 2 and 3: the run ends on an update */

static void accum_config(dr_run_config *c, const char *variant, const char *bn, uint32_t k, const char *strategy,
                         int gpus)
{
    base_config(c, 100, 32, 0.0);
    snprintf(c->experiment, sizeof c->experiment, "cnn_synthetic");
    snprintf(c->batch_norm, sizeof c->batch_norm, "%s", bn);
    snprintf(c->variant, sizeof c->variant, "%s", variant);
    c->epochs = 0;
    c->train_steps = STEPS;
    c->gradient_accumulation_steps = k;
    set_strategy(c, strategy, gpus, strcmp(strategy, "mirrored") == 0 ? "nccl" : NULL, 1);
}

/* c's run against want, recorded as `what`. */
static int same_cell(results *r, const dr_run_config *c, int replicas, const outcome *want, const char *what)
{
    outcome got;
    char why[200] = "";
    if (!supported(r, "models", c, replicas)) return 0;
    run_case(c, &got);
    bool pass = !got.error[0] && got.weights && want->weights && outcome_same_why(&got, want, why, sizeof why);
    record(r, "models", c, replicas, pass, got.seconds, "%s: cnn_synthetic %s BN k=%u: %s%s%.150s", c->variant,
           c->batch_norm, c->gradient_accumulation_steps, what, got.error[0] || !pass ? ": " : "",
           got.error[0] ? got.error : why);
    outcome_free(&got);
    return !pass;
}

/* --learning_rate=0: k micro-steps = k plain steps (the forward's rule). */
static int forward_cells(results *r)
{
    dr_run_config c;
    outcome plain;
    int fails = 0;
    accum_config(&c, "ref", "sync", 1, "one_device", 0);
    c.learning_rate = 0.0;
    run_case(&c, &plain);
    for (uint32_t k = 2; k <= 3; k++) {
        accum_config(&c, "ref", "sync", k, "one_device", 0);
        c.learning_rate = 0.0;
        fails += same_cell(r, &c, 1, &plain, "--learning_rate=0 one_device = k=1's bits (each micro-step its own "
                           "statistics, moving update and dropout masks)");
    }
    outcome_free(&plain);
    return fails;
}

static int engine_cells(results *r, const outcome *one2, const outcome *one3)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    dr_run_config c;
    outcome rep2;
    int fails = 0;
    memset(&rep2, 0, sizeof rep2);
    if (!r->quick) {
        accum_config(&c, "ref", "replica", 2, "mirrored", 2);
        run_case(&c, &rep2);
    }
    for (size_t v = 0; v < nv; v++) {
        const char *n = ev[v]->name;
        accum_config(&c, n, "sync", 2, "mirrored", 2);
        fails += same_cell(r, &c, 2, one2, "mirrored R=2 = the reference one_device");
        accum_config(&c, n, "sync", 3, "mirrored", 2);
        fails += same_cell(r, &c, 2, one3, "mirrored R=2 = the reference one_device");
        if (r->quick) continue;
        accum_config(&c, n, "sync", 2, "one_device", 0);
        fails += same_cell(r, &c, 1, one2, "one_device = the reference one_device");
        accum_config(&c, n, "replica", 2, "mirrored", 2);
        fails += same_cell(r, &c, 2, &rep2, "mirrored R=2 = the reference mirrored R=2");
    }
    if (!r->quick && !r->fault && (!r->variant || strcmp(r->variant, "mpi") == 0) &&
        system("command -v mpirun > /dev/null 2>&1") == 0) {
        outcome got;
        char why[200] = "";
        accum_config(&c, "mpi", "sync", 2, "multi_worker_mirrored", 1);
        run_mpi_pair(r, "--experiment=cnn_synthetic --synthetic_examples=100 --global_batch_size=32 --epochs=0 "
                     "--train_steps=6 --gradient_accumulation_steps=2 --batch_norm=sync", &got);
        bool pass = !got.error[0] && outcome_same_why(&got, one2, why, sizeof why);
        fails += !pass;
        record(r, "models", &c, 2, pass, got.seconds, "mpi: cnn_synthetic sync BN k=2 mpi -np 2 multi_worker_mirrored "
               "= the reference one_device bits%s%.150s", got.error[0] || !pass ? ": " : "", got.error[0] ? got.error : why);
        outcome_free(&got);
    }
    outcome_free(&rep2);
    return fails;
}

int models_accum_cells(results *r)
{
    dr_run_config c;
    outcome plain, one[2];
    int fails = 0;
    accum_config(&c, "ref", "sync", 1, "one_device", 0);
    run_case(&c, &plain);
    for (uint32_t k = 2; k <= 3; k++) {
        outcome *o = &one[k - 2];
        accum_config(&c, "ref", "sync", k, "one_device", 0);
        run_case(&c, o);
        bool bites = !o->error[0] && o->weights && plain.weights && strcmp(o->sha, plain.sha) != 0;
        fails += !bites;
        record(r, "models", &c, 1, bites, o->seconds, "ref: cnn_synthetic sync BN k=%u one_device: not k=1's weights "
               "(the accumulation bites)%s%.150s", k, o->error[0] ? ": " : "", o->error);
        accum_config(&c, "ref", "sync", k, "mirrored", 2);
        fails += same_cell(r, &c, 2, o, "mirrored R=2 = one_device at the same k");
    }
    fails += forward_cells(r);
    fails += engine_cells(r, &one[0], &one[1]);
    outcome_free(&plain);
    outcome_free(&one[0]);
    outcome_free(&one[1]);
    return fails;
}
