/* distref conformance — suite mixed_precision, L2 cells: --l2 with a mixed
 * policy (docs/TRAINING_FEATURES.md, "L2 under a mixed policy";
 * ref/mixed_step.c, strategies/mixed.c, core/loss_scale.c's
 * dr_mixed_reduce_l2).
 *
 * The float32 gradient of the scaled L2 loss (scale * 2 l2 w) is added to the
 * compute-dtype gradient before the unscale: once to the reduced gradient
 * (exact), or each replica's 1/R share to its rounded partial (tensorflow,
 * TensorFlow's form). The oracle is the reference one_device float16 run with
 * --l2=0.01 and --loss_scale=dynamic:2^20 (skipped steps, so the scale the
 * term is multiplied by moves); it differs from the run without L2 (the term
 * bites). Exact: the reference under mirrored R=2, R=3 and
 * multi_worker_mirrored 2 x 2, each in-process engine variant that runs it
 * under one_device, R=2, R=3 and 2 x 2, and mpi -np 2 give its bits;
 * tensorflow: the reference at R=1 = the oracle, each engine variant at
 * mirrored R=2 = the reference at R=2. The reported loss adds the float32 L2
 * loss as the float32 step's does (Keras's reported loss): the oracle's step
 * 1 loss (the initial weights) within MIXED_LOSS_BOUND of the float32 run's
 * (without the L2 loss it is half of it). Caught mutants: mixed_l2_unscaled,
 * mixed_loss_no_reg, ref_mixed_loss_no_reg (tests/faults.tsv).
 */
#include "conformance/conformance.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WHAT "--l2=0.01"

static void l2_setup(dr_run_config *c)
{
    base_config(c, 512, 64, 0.01);
    c->epochs = 0;
    c->train_steps = 8;
}

static void plain_setup(dr_run_config *c)   /* the same without L2 */
{
    l2_setup(c);
    c->l2 = 0.0;
}

static int bites_cell(results *r, const outcome *oracle)
{
    dr_run_config c;
    outcome plain;
    mixed_place_config(&c, plain_setup, false, &k_mixed_places[0], "ref");
    run_case(&c, &plain);
    bool pass = !plain.error[0] && !oracle->error[0] && !outcome_same(&plain, oracle);
    record(r, "mixed_precision", &c, 1, pass, plain.seconds, "ref --l2=0.01 overflow float16 one_device: differs "
           "from the run without L2 (the term bites)%s%.150s", plain.error[0] ? ": " : "", plain.error);
    outcome_free(&plain);
    return !pass;
}

#define MIXED_LOSS_BOUND 1e-3   /* measured 7.8e-6: the float16 forward's rounding (docs/TRAINING_FEATURES.md) */
static int reported_loss_cell(results *r, const outcome *oracle)
{
    dr_run_config c;
    outcome f32;
    double rel = INFINITY;
    mixed_place_config(&c, l2_setup, false, &k_mixed_places[0], "ref");
    c.mixed.compute = DR_DTYPE_F32;
    c.mixed.loss_scale = DR_LOSS_SCALE_NONE;
    c.mixed.fixed_scale = 0.0f;
    run_case(&c, &f32);
    if (!f32.error[0] && !oracle->error[0] && f32.nsteps > 0 && oracle->nsteps > 0)
        rel = fabs((double)oracle->loss[0] - f32.loss[0]) / fabs((double)f32.loss[0]);
    bool pass = rel <= MIXED_LOSS_BOUND;
    record(r, "mixed_precision", &c, 1, pass, f32.seconds, "ref --l2=0.01 float16 one_device: step 1's reported loss "
           "(the L2 loss included) within %.0e of the float32 step's (%.2e)%s%.150s", MIXED_LOSS_BOUND, rel,
           f32.error[0] ? ": " : "", f32.error);
    outcome_free(&f32);
    return !pass;
}

static int mpi_l2_cell(results *r, const outcome *oracle)
{
    dr_run_config c;
    outcome got;
    char why[200] = "";
    mixed_place_config(&c, l2_setup, false, &k_mixed_places[3], "mpi");
    set_strategy(&c, "multi_worker_mirrored", 1, "ring", 1);
    run_mpi_pair(r, "--global_batch_size=64 --synthetic_examples=512 --train_steps=8 --l2=0.01 "
                 "--dtype_policy=mixed_float16 --loss_scale=dynamic:1048576", &got);
    bool pass = !got.error[0] && outcome_same_why(&got, oracle, why, sizeof why);
    record(r, "mixed_precision", &c, 2, pass, got.seconds, "mpi -np 2 multi_worker_mirrored --l2=0.01 overflow "
           "float16 exact: = the reference one_device bits%s%.150s", got.error[0] || !pass ? ": " : "",
           got.error[0] ? got.error : why);
    outcome_free(&got);
    return !pass;
}

int mixed_l2_cells(results *r)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    dr_run_config c;
    outcome oracle, tf2;
    int fails = 0;
    mixed_place_config(&c, l2_setup, false, &k_mixed_places[0], "ref");
    run_case(&c, &oracle);
    mixed_place_config(&c, l2_setup, true, &k_mixed_places[1], "ref");
    run_case(&c, &tf2);
    fails += bites_cell(r, &oracle);
    fails += reported_loss_cell(r, &oracle);
    fails += mixed_place_cells(r, l2_setup, WHAT, "ref", false, &oracle, 1, 3, "one_device");
    fails += mixed_place_cells(r, l2_setup, WHAT, "ref", true, &oracle, 0, 0, "one_device exact");
    for (size_t v = 0; v < nv; v++) {
        fails += mixed_place_cells(r, l2_setup, WHAT, ev[v]->name, false, &oracle, 0, 3, "one_device");
        fails += mixed_place_cells(r, l2_setup, WHAT, ev[v]->name, true, &tf2, 1, 1, "mirrored R=2");
    }
    if (!r->quick && !r->fault && (!r->variant || strcmp(r->variant, "mpi") == 0) &&
        system("command -v mpirun > /dev/null 2>&1") == 0)
        fails += mpi_l2_cell(r, &oracle);
    outcome_free(&oracle); outcome_free(&tf2);
    return fails;
}
