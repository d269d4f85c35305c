/* distref conformance — suite mixed_precision, accumulation cells:
 * --gradient_accumulation_steps=k with a mixed policy (docs/TRAINING_FEATURES.md,
 * "Mixed precision with clipping and accumulation"; ref/mixed_step.c,
 * strategies/mixed.c).
 *
 * Keras 3's measured order: each micro-step is reduced, checked, skipped or
 * unscaled on its own; the update comes after k finite micro-steps. The
 * oracle is the reference one_device run of float16 with
 * --loss_scale=dynamic:2^20 at k=3 (2 micro-steps skipped, so the updates
 * fall on micro-steps 5, 8, 11, off the multiples of k), 12 micro-batches of
 * 64. Exact reduction: the reference under mirrored R=2, R=3 and
 * multi_worker_mirrored 2 x 2, each in-process engine variant that runs the
 * mixed step under one_device, mirrored R=2, R=3 and 2 x 2, and mpi -np 2
 * give its bits (every step's loss, the loss-scale series, the weights);
 * --mixed_reduction=tensorflow: each engine variant at mirrored R=2 = the
 * reference at R=2. Caught mutant: mixed_accum_counts_skipped
 * (tests/faults.tsv).
 */
#include "conformance/conformance.h"

#include <stdlib.h>
#include <string.h>

#define ACC_K 3
#define WHAT "accumulation k=3"

static void acc_setup(dr_run_config *c)
{
    base_config(c, 512, 64, 0.0);
    c->epochs = 0;
    c->train_steps = 4 * ACC_K;
    c->gradient_accumulation_steps = ACC_K;
}

int mixed_accum_cells(results *r)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    dr_run_config c;
    outcome oracle, tf2;
    int fails = 0;
    mixed_place_config(&c, acc_setup, false, &k_mixed_places[0], "ref");
    run_case(&c, &oracle);
    mixed_place_config(&c, acc_setup, true, &k_mixed_places[1], "ref");
    run_case(&c, &tf2);
    fails += mixed_place_cells(r, acc_setup, WHAT, "ref", false, &oracle, 1, 3, "one_device");
    for (size_t v = 0; v < nv; v++) {
        fails += mixed_place_cells(r, acc_setup, WHAT, ev[v]->name, false, &oracle, 0, 3, "one_device");
        fails += mixed_place_cells(r, acc_setup, WHAT, ev[v]->name, true, &tf2, 1, 1, "mirrored R=2");
    }
    if (!r->quick && !r->fault && (!r->variant || strcmp(r->variant, "mpi") == 0) &&
        system("command -v mpirun > /dev/null 2>&1") == 0) {
        outcome got;
        char why[200] = "";
        mixed_place_config(&c, acc_setup, false, &k_mixed_places[3], "mpi");
        set_strategy(&c, "multi_worker_mirrored", 1, "ring", 1);
        run_mpi_pair(r, "--global_batch_size=64 --synthetic_examples=512 --train_steps=12 "
                     "--gradient_accumulation_steps=3 --dtype_policy=mixed_float16 --loss_scale=dynamic:1048576", &got);
        bool pass = !got.error[0] && outcome_same_why(&got, &oracle, why, sizeof why);
        fails += !pass;
        record(r, "mixed_precision", &c, 2, pass, got.seconds, "mpi -np 2 multi_worker_mirrored accumulation k=3 "
               "overflow float16 exact: = the reference one_device bits%s%.150s", got.error[0] || !pass ? ": " : "",
               got.error[0] ? got.error : why);
        outcome_free(&got);
    }
    outcome_free(&oracle); outcome_free(&tf2);
    return fails;
}
