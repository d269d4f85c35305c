/* distref conformance — suite `models`, evaluate and predict through the
 * engine (issue 31): a checkpoint the reference trained (one_device),
 * evaluated and predicted under mirrored R = 3 (an uneven split of the test
 * set, a short final batch) by the reference and by each engine variant.
 *
 *   exact    --numerics=exact: eval.json and predictions.jsonl byte for
 *            byte the reference's (the engine's own forward kernels in
 *            inference: BN with the moving statistics, Dropout off; the
 *            loss's exact sum rounded once), for mlp_synthetic (Dense),
 *            cnn_synthetic (conv, sync BN, residual add, pooling, Dropout
 *            0.25) and resnet_synthetic (19 BNs, GAP)
 *   fast     --numerics=fast, cnn_synthetic: the loss within
 *            FAST_MAX_REL_LOSS of the reference's (relative) and the
 *            accuracy within FAST_MAX_ACC
 * openmp and opencl (its backend's own kernels, the outputs op's loss
 * kernel that training runs) both; a variant with no inference pass would
 * answer "not supported". Planted faults (tests/faults.tsv):
 * engine_bn_infer_swapped (inference BN reads the moving variance as the
 * mean; its OpenCL twin cl_bn_infer_swapped) and engine_infer_training
 * (Dropout on in inference) must fail `exact`.
 */
#include "conformance/conformance.h"
#include "distref/fileio.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAST_MAX_REL_LOSS 1e-4   /* docs/CONFORMANCE.md's fast-mode loss bound */
#define FAST_MAX_ACC      0.01   /* one example in a hundred */

/* What evaluate and predict wrote (text, malloc'd; NULL on an error). */
typedef struct written { char *eval, *pred; size_t neval, npred; double seconds; char error[520]; } written;

static void written_free(written *w) { free(w->eval); free(w->pred); }

static void evaluate_dir(dr_run_config *c, written *w)
{
    char path[1200];
    dr_run_result res;
    dr_err err;
    double t0 = now();
    memset(w, 0, sizeof *w);
    if (dr_run_evaluate(c, &res, &err) != DR_OK || dr_run_predict(c, &res, &err) != DR_OK) {
        snprintf(w->error, sizeof w->error, "%s", err.msg);
        return;
    }
    w->seconds = now() - t0;
    snprintf(path, sizeof path, "%s/eval.json", c->model_dir);
    if (dr_read_file(path, 1u << 20, (uint8_t **)&w->eval, &w->neval, &err) != DR_OK)
        snprintf(w->error, sizeof w->error, "%s", err.msg);
    snprintf(path, sizeof path, "%s/predictions.jsonl", c->model_dir);
    if (!w->error[0] && dr_read_file(path, 1u << 26, (uint8_t **)&w->pred, &w->npred, &err) != DR_OK)
        snprintf(w->error, sizeof w->error, "%s", err.msg);
}

static double json_number(const char *text, size_t n, const char *key)
{
    json_tokener *t = json_tokener_new();
    json_object *o = t ? json_tokener_parse_ex(t, text, (int)n) : NULL, *v;
    double x = json_object_object_get_ex(o, key, &v) ? json_object_get_double(v) : NAN;
    json_object_put(o);
    if (t) json_tokener_free(t);
    return x;
}

static bool same_bytes(const char *a, size_t na, const char *b, size_t nb)
{
    return a && b && na == nb && memcmp(a, b, na) == 0;
}

/* The engine variant's evaluate and predict of the checkpoint in c against
 * the reference's. */
static int engine_cell(results *r, dr_run_config *c, const dr_variant *v, const char *numerics, const written *want)
{
    written got;
    bool pass;
    snprintf(c->variant, sizeof c->variant, "%s", v->name);
    snprintf(c->numerics, sizeof c->numerics, "%s", numerics);
    if (!v->infer) {
        record_not_supported(r, "models", c, 3, "no inference pass (its backend has no outputs op)",
                             "%s: evaluate and predict %s %s", v->name, c->experiment, numerics);
        return 0;
    }
    evaluate_dir(c, &got);
    if (strcmp(numerics, "exact") == 0) {
        pass = !got.error[0] && same_bytes(got.eval, got.neval, want->eval, want->neval) &&
               same_bytes(got.pred, got.npred, want->pred, want->npred);
        record(r, "models", c, 3, pass, got.seconds, "%s: evaluate and predict %s exact mirrored R=3: eval.json and "
               "predictions.jsonl = the reference's, byte for byte%s%.150s", v->name, c->experiment,
               pass ? "" : ": ", got.error[0] ? got.error : pass ? "" : "they differ");
    } else {
        double l0 = json_number(want->eval, want->neval, "loss"), a0 = json_number(want->eval, want->neval, "accuracy");
        double l1 = got.eval ? json_number(got.eval, got.neval, "loss") : NAN;
        double a1 = got.eval ? json_number(got.eval, got.neval, "accuracy") : NAN;
        double rel = fabs(l1 - l0) / fabs(l0);
        pass = !got.error[0] && rel <= FAST_MAX_REL_LOSS && fabs(a1 - a0) <= FAST_MAX_ACC;
        record(r, "models", c, 3, pass, got.seconds, "%s: evaluate %s fast mirrored R=3: loss within %g of the "
               "reference's (%.3g), accuracy within %g (%.4f vs %.4f)%s%.150s", v->name, c->experiment,
               FAST_MAX_REL_LOSS, rel, FAST_MAX_ACC, a1, a0, got.error[0] ? ": " : "", got.error);
    }
    written_free(&got);
    return !pass;
}

/* Trains exp under the reference (one_device) into a fresh directory, then
 * the reference's and each engine variant's evaluate and predict of it. */
static int experiment_cells(results *r, const char *exp, bool fast)
{
    const dr_variant *const *ev;
    size_t nv;
    dr_run_config c;
    dr_run_result res;
    dr_err err;
    written want;
    char dir[] = "/tmp/distref_eval_XXXXXX", cmd[200];
    int fails = 0;
    base_config(&c, 100, 32, 0.0);
    snprintf(c.experiment, sizeof c.experiment, "%s", exp);
    if (strcmp(exp, "resnet_synthetic") == 0) { c.synthetic_examples = 64; c.epochs = 0; c.train_steps = 2; }
    set_strategy(&c, "one_device", 0, NULL, 1);
    if (!mkdtemp(dir)) { record(r, "models", &c, 1, false, 0, "evaluate %s: mkdtemp failed", exp); return 1; }
    snprintf(c.model_dir, sizeof c.model_dir, "%s", dir);
    if (dr_run_train(&c, &res, &err) != DR_OK) {
        record(r, "models", &c, 1, false, 0, "evaluate %s: the reference's training: %.150s", exp, err.msg);
        fails = 1;
    } else {
        set_strategy(&c, "mirrored", 3, "nccl", 1);
        evaluate_dir(&c, &want);
        if (want.error[0]) {
            record(r, "models", &c, 3, false, want.seconds, "evaluate %s: the reference's: %.150s", exp, want.error);
            fails = 1;
        }
        ev = engine_variants(r, &nv);
        for (size_t i = 0; !want.error[0] && i < nv; i++)
            fails += engine_cell(r, &c, ev[i], "exact", &want) + (fast ? engine_cell(r, &c, ev[i], "fast", &want) : 0);
        written_free(&want);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
    return fails;
}

int models_evaluate_cells(results *r)
{
    return experiment_cells(r, "mlp_synthetic", false) + experiment_cells(r, "cnn_synthetic", true) +
           experiment_cells(r, "resnet_synthetic", false);
}
