/* distref harness — Model Garden's train_and_eval (harness.h,
 * dr_run_train_and_eval), and whether an experiment has an accuracy. */
#include "distref/harness.h"
#include "distref/checkpoint.h"
#include "distref/mpi.h"

#include <stdio.h>
#include <string.h>

bool dr_classifier(const dr_run_config *cfg)
{
    dr_experiment exp;
    dr_err ignored;
    return dr_experiment_lookup(cfg->experiment, &exp, &ignored) == DR_OK && exp.model.loss != DR_LOSS_MSE;
}

/* The epochs model_dir's checkpoint has finished (0 without one): a run that
 * ended its epochs saved (epochs, position 0); one mid-epoch (e, p > 0). */
static uint32_t epochs_done(const dr_run_config *cfg)
{
    dr_checkpoint c;
    bool found = false;
    dr_err ignored;
    uint32_t done;
    if (dr_checkpoint_load(cfg->model_dir, &c, &found, &ignored) != DR_OK || !found) return 0;
    done = c.position > 0 && c.position >= c.examples ? c.epoch + 1 : c.epoch;
    dr_checkpoint_free(&c);
    return done;
}

int dr_run_train_and_eval(dr_run_config *cfg, FILE *out, dr_err *err)
{
    dr_experiment exp;
    dr_run_result res;
    uint32_t epochs, first = 1, done;
    bool accuracy = dr_classifier(cfg);
    uint32_t rank;
    int rc = dr_experiment_lookup(cfg->experiment, &exp, err);
    if (rc) return rc;
    dr_mpi_world(&rank, NULL);
    if (rank != 0) out = NULL;   /* under mpirun only rank 0 reports (every rank has the same numbers) */
    epochs = cfg->train_steps ? 1 : cfg->epochs ? cfg->epochs : exp.epochs;
    /* a directory run before: from the first epoch it has not finished, or,
     * when it finished them all, the last (which says "already complete"
     * and is evaluated again), not from epoch 1 */
    done = cfg->train_steps ? 0 : epochs_done(cfg);
    if (done > 0) first = done < epochs ? done + 1 : epochs;
    for (uint32_t e = first; e <= epochs; e++) {
        char what[32];
        if (!cfg->train_steps) cfg->epochs = e;
        if ((rc = dr_run_train(cfg, &res, err))) return rc;
        snprintf(what, sizeof what, "train epoch %u", e);
        if (e > first && !res.previous[0]) res.resumed_step = 0;   /* its own epoch-by-epoch resume: not news */
        if (out) dr_report_train(out, what, &res, cfg->model_dir, accuracy);
        /* the run's own variant's forward pass (every variant has one) */
        rc = dr_run_evaluate(cfg, &res, err);
        snprintf(what, sizeof what, "evaluate epoch %u", e);
        if (out && (rc == DR_OK || res.examples)) dr_report_evaluate(out, what, &res, accuracy);
        if (rc) return rc;
    }
    return DR_OK;
}
