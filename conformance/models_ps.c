/* distref conformance — suite `models`, parameter_server with the models
 * beyond Dense (issue 31; docs/PARAMETER_SERVER.md, "Models beyond Dense").
 *
 *   identity  one worker, two ps tasks (fixed:2), staleness 2: the
 *             schedule is sequential, so every loss and the final weights
 *             (BatchNormalization's moving statistics, applied at landing on
 *             the ps, included) are one_device's bits: cnn_synthetic sync BN
 *             and replica BN, resnet_synthetic sync BN (2 steps);
 *   async     three workers, staleness 2: the same bits twice (the seeded
 *             schedule decides, not threads) and not one_device's;
 *   resume    two workers, --checkpoint_every=4: 4 steps, resumed to 7,
 *             = 7 steps straight;
 *   mpi       `mpirun ... --variant=mpi` (the worker ranks run the engine's
 *             graph step, the ps ranks land the moving statistics) gives
 *             `--variant=ref`'s bits: cnn_synthetic sync BN W = 1, 2,
 *             replica BN W = 3, resnet_synthetic W = 1, 2; the free
 *             schedule replayed by the reference (cnn_synthetic sync BN
 *             W = 2, replica BN W = 3, resnet_synthetic W = 2);
 *             --fail_worker=1:3; with --fail_ps=0:5 too, the stopped run's
 *             rerun resumed = the uninterrupted run; 4 steps resumed to 7
 *             = the reference's 7 straight (conformance/mpi_ps.c's model
 *             cells, also in suite mpi).
 * Planted faults (tests/faults.tsv): ref_ps_bn_increment_dropped (the ps
 * never adds the worker's moving-statistics increment) and
 * ref_ps_dropout_by_read_version (Dropout keyed by the read version, not the
 * closure) must fail `identity`; ref_ps_moving_from_read (the increment
 * taken onto the version the worker read, not the ps's value at landing)
 * only differs with several workers, where the reference judges only
 * itself: the mpi cells catch it (a mutant build runs them whatever
 * --variant); mpi_ps_moving_not_sent (the engine's worker sends no
 * increments) must fail the mpi cells (suite mpi).
 */
#include "conformance/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PS1_TF "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w0:1\"],\"ps\":[\"p0:1\",\"p1:1\"]}," \
               "\"task\":{\"type\":\"chief\",\"index\":0}}"
#define PS2_TF "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w0:1\",\"w1:1\"],\"ps\":[\"p0:1\",\"p1:1\"]}," \
               "\"task\":{\"type\":\"chief\",\"index\":0}}"
#define PS3_TF "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w0:1\",\"w1:1\",\"w2:1\"],\"ps\":[\"p0:1\"," \
               "\"p1:1\"]},\"task\":{\"type\":\"chief\",\"index\":0}}"

/* experiment's config: cnn_synthetic 100 examples at G = 32 (a short last
 * batch), resnet_synthetic 2 steps of 32 (38 layers: kept short) */
static void config(dr_run_config *c, const char *experiment, const char *bn)
{
    base_config(c, 100, 32, 0.0);
    snprintf(c->experiment, sizeof c->experiment, "%s", experiment);
    snprintf(c->batch_norm, sizeof c->batch_norm, "%s", bn);
    if (strcmp(experiment, "resnet_synthetic") == 0) { c->synthetic_examples = 64; c->epochs = 0; c->train_steps = 2; }
}

static void as_ps(dr_run_config *c, const char *tf)
{
    set_strategy(c, "parameter_server", 0, NULL, 1);
    c->tf_config = tf;
    c->staleness = 2;
    c->schedule_seed = 7;
    snprintf(c->ps_partitioner, sizeof c->ps_partitioner, "fixed:2");
}

static int identity_cell(results *r, const char *experiment, const char *bn)
{
    dr_run_config c;
    outcome one, ps;
    char why[160] = "";
    bool pass;
    config(&c, experiment, bn);
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &one);
    config(&c, experiment, bn);
    as_ps(&c, PS1_TF);
    run_case(&c, &ps);
    pass = !one.error[0] && !ps.error[0] && one.weights && ps.weights && outcome_same_why(&ps, &one, why, sizeof why);
    record(r, "models", &c, 1, pass, one.seconds + ps.seconds, "%s %s BN ref parameter_server 1 worker, 2 ps "
           "(fixed:2) S=2 = one_device: loss bits and weights%s%.150s%.150s", experiment, bn,
           pass ? "" : ": ", one.error[0] ? one.error : ps.error, why);
    outcome_free(&one); outcome_free(&ps);
    return !pass;
}

static int async_cell(results *r)
{
    dr_run_config c;
    outcome a, b, one;
    bool pass;
    config(&c, "cnn_synthetic", "sync");
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &one);
    config(&c, "cnn_synthetic", "sync");
    as_ps(&c, PS3_TF);
    run_case(&c, &a);
    run_case(&c, &b);
    pass = !a.error[0] && a.weights && one.weights && outcome_same(&a, &b) && strcmp(a.sha, one.sha) != 0;
    record(r, "models", &c, 3, pass, a.seconds + b.seconds, "cnn_synthetic sync BN ref parameter_server 3 workers "
           "S=2: the same bits twice, not one_device's%s%.150s", a.error[0] ? ": " : "", a.error);
    outcome_free(&a); outcome_free(&b); outcome_free(&one);
    return !pass;
}

/* Two workers, --checkpoint_every=4: 4 steps, then the rerun resumes them
 * to 7 (crossing the epoch's end) = 7 steps straight. The moving
 * statistics travel in the checkpoint with the rest (ps variables). */
static int resume_cell(results *r)
{
    char dir[] = "/tmp/distref_psres_XXXXXX", cmd[1200];
    dr_run_config c;
    outcome straight, got;
    char why[160] = "";
    bool pass;
    config(&c, "cnn_synthetic", "sync");
    as_ps(&c, PS2_TF);
    c.epochs = 0;
    c.checkpoint_every = 4;
    c.train_steps = 7;
    run_case(&c, &straight);
    memset(&got, 0, sizeof got);
    if (mkdtemp(dir)) {
        snprintf(c.model_dir, sizeof c.model_dir, "%s", dir);
        c.train_steps = 4;
        run_case(&c, &got);
        outcome_free(&got);
        c.train_steps = 7;
        run_case(&c, &got);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
    } else {
        snprintf(got.error, sizeof got.error, "mkdtemp failed");
    }
    pass = !straight.error[0] && straight.nsteps == 7 && outcome_same_why(&got, &straight, why, sizeof why);
    record(r, "models", &c, 2, pass, got.seconds + straight.seconds, "cnn_synthetic sync BN ref parameter_server "
           "2 workers, 2 ps S=2 every=4: 4 steps resumed to 7 = 7 straight%s%.150s%.150s", pass ? "" : ": ",
           straight.error[0] ? straight.error : got.error, why);
    outcome_free(&straight); outcome_free(&got);
    return !pass;
}

int models_ps_cells(results *r)
{
    dr_run_config c;
    int fails = identity_cell(r, "cnn_synthetic", "sync") + identity_cell(r, "cnn_synthetic", "replica") +
                identity_cell(r, "resnet_synthetic", "sync");
    if (!r->quick) fails += async_cell(r);
    fails += resume_cell(r);
    /* a mutant build runs the mpi cells whatever --variant: they judge the
     * reference's faults that only show with several workers against the
     * engine's independent bits (ref_ps_moving_from_read) */
    if ((r->variant && strcmp(r->variant, "mpi") != 0 && !r->fault) || (r->fault && r->fault_failures)) return fails;
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {   /* not run: never a pass */
        config(&c, "cnn_synthetic", "sync");
        as_ps(&c, PS1_TF);
        strcpy(c.variant, "mpi");
        record_not_supported(r, "models", &c, 1, "mpirun not found (scripts/deps.sh installs openmpi-bin)",
                             "cnn_synthetic, resnet_synthetic mpi parameter_server");
        return fails;
    }
    return fails + mpi_ps_model_cells(r, "models");
}
