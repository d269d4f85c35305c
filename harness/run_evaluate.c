/* distref harness — evaluate and predict: the reference's forward pass over
 * the test split, whichever variant trained the checkpoint (its variables
 * are the same numbers under every variant and strategy). */
#include "distref/harness.h"
#include "distref/checkpoint.h"
#include "distref/ref.h"
#include "harness/run_lock.h"

#include <string.h>

/* --variant and --numerics are checked as for training, then ignored. */
static int check(const dr_run_config *cfg, dr_err *err)
{
    const dr_variant *v;
    if (strcmp(cfg->numerics, "exact") != 0 && strcmp(cfg->numerics, "fast") != 0)
        return dr_fail(err, DR_EUSAGE, "--numerics: expected exact or fast, got '%s'", cfg->numerics);
    return dr_variant_lookup(cfg->variant, &v, err);
}

/* The step of the checkpoint that was evaluated (res->steps). */
static void checkpoint_step(const dr_run_config *cfg, dr_run_result *res)
{
    dr_checkpoint c;
    bool found = false;
    dr_err ignored;
    if (dr_checkpoint_load(cfg->model_dir, &c, &found, &ignored) != DR_OK || !found) return;
    res->steps = c.step;
    dr_checkpoint_free(&c);
}

int dr_run_evaluate(const dr_run_config *cfg, dr_run_result *res, dr_err *err)
{
    dr_dir_lock lock;
    int rc = check(cfg, err);
    memset(res, 0, sizeof *res);   /* examples stays 0 unless a result was computed */
    if (rc || (rc = dr_run_lock(cfg, false, &lock, err))) return rc;   /* it writes eval.json */
    rc = dr_ref_evaluate(cfg, res, err);
    dr_run_unlock(&lock);
    if (res->examples) checkpoint_step(cfg, res);
    return rc;
}

int dr_run_predict(const dr_run_config *cfg, dr_run_result *res, dr_err *err)
{
    dr_dir_lock lock;
    int rc = check(cfg, err);
    if (rc || (rc = dr_run_lock(cfg, false, &lock, err))) return rc;   /* it writes predictions.jsonl */
    rc = dr_ref_predict(cfg, res, err);
    dr_run_unlock(&lock);
    if (!rc) checkpoint_step(cfg, res);
    return rc;
}
