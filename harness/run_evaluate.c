/* distref harness — evaluate and predict over a distributed test set,
 * through the forward pass of --variant (its dr_infer_ops: the reference's
 * under ref, the engine's kernels under openmp, mpi and opencl).
 *
 * The checkpoint in model_dir supplies the weights (any strategy and variant
 * may have written it: its variables are the same numbers everywhere).
 * Examples are split over the replicas by the same rule as in training,
 * without shuffling and keeping the final short batch; the loss is the exact
 * sum of per-example losses over the examples seen plus the regularization
 * loss, rounded once; accuracy is correct / total. So every variant that
 * computes the reference's per-example losses and outputs (exact numerics)
 * writes the reference's eval.json and predictions.jsonl, byte for byte.
 * Under `mpirun -np W ... evaluate --variant=mpi` each rank evaluates a
 * contiguous run of the global batches (its dr_infer_ops.share) and the
 * loss sums and counts combine exactly (its combine), so rank 0 writes the
 * one-process eval.json for every W; predict's lines are gathered to
 * rank 0 in rank order (its gather), the one-process predictions.jsonl.
 */
#include "distref/harness.h"
#include "distref/checkpoint.h"
#include "distref/fileio.h"
#include "distref/mpi.h"
#include "distref/plan.h"
#include "distref/run_log.h"
#include "harness/run_lock.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

typedef struct evaluator {
    dr_experiment exp;
    dr_dataset    data;
    dr_strategy   strat;
    const dr_infer_ops *inf;
    void         *is;        /* the variant's inference state */
    float        *params, *x, *targets, *loss, *out;
    uint8_t      *labels;
    uint32_t     *pred;
    uint32_t      G, nout;
    uint64_t      step;      /* the checkpoint's */
    dr_tpu_system tpu;
} evaluator;

static void ev_close(evaluator *e)
{
    if (e->is) e->inf->close(e->is);
    free(e->params); free(e->x); free(e->targets); free(e->loss); free(e->out); free(e->labels); free(e->pred);
    dr_dataset_free(&e->data);
}

/* The variant's forward pass; --numerics as for training. */
static int ev_variant(evaluator *e, const dr_run_config *cfg, dr_err *err)
{
    const dr_variant *v;
    int rc;
    if (strcmp(cfg->numerics, "exact") != 0 && strcmp(cfg->numerics, "fast") != 0)
        return dr_fail(err, DR_EUSAGE, "--numerics: expected exact or fast, got '%s'", cfg->numerics);
    if ((rc = dr_variant_lookup(cfg->variant, &v, err))) return rc;
    if (!v->infer)
        return dr_fail(err, DR_EUSAGE, "not supported: evaluate and predict under --variant=%s: it has no "
                       "inference pass; --variant=openmp gives the reference's numbers", v->name);
    e->inf = v->infer;
    return DR_OK;
}

/* The strategy that splits the test set: the run's, except that
 * parameter_server evaluates inline on the coordinator (one replica), and
 * tpu initializes its own emulated system. */
static int ev_strategy(evaluator *e, const dr_run_config *cfg, dr_err *err)
{
    dr_strategy_spec spec = cfg->strategy;
    dr_strategy_options opt = cfg->memory;
    if (spec.kind == DR_STRATEGY_PARAMETER_SERVER) {
        spec.kind = DR_STRATEGY_ONE_DEVICE;
        spec.num_gpus = 0;
    } else if (spec.kind == DR_STRATEGY_TPU) {
        int part[2];
        uint32_t tiles;
        int rc = dr_tpu_options(cfg, &e->exp, &e->tpu, &opt, part, &tiles, err);
        if (rc) return rc;
    }
    return dr_strategy_create(&spec, &opt, &e->strat, err);
}

static int ev_open(evaluator *e, const dr_run_config *cfg, dr_err *err)
{
    dr_checkpoint c;
    bool found;
    size_t f;
    int rc;
    memset(e, 0, sizeof *e);
    if ((rc = ev_variant(e, cfg, err)) || (rc = dr_experiment_resolve(cfg, &e->exp, err))) return rc;
    if ((rc = ev_strategy(e, cfg, err))) return rc;
    if ((rc = dr_checkpoint_load(cfg->model_dir, &c, &found, err))) return rc;
    if (!found)
        return dr_fail(err, DR_EUSAGE, "--model_dir %s: no checkpoint (%s) to evaluate; train first",
                       cfg->model_dir, DR_CHECKPOINT_FILE);
    if (strcmp(c.experiment, e->exp.name) != 0 || c.nparams != dr_model_num_params(&e->exp.model)) {
        rc = dr_fail(err, DR_EFORMAT, "checkpoint %s/%s: holds experiment %s with %u parameters, "
                     "not %s", cfg->model_dir, DR_CHECKPOINT_FILE, c.experiment, c.nparams, e->exp.name);
        dr_checkpoint_free(&c);
        return rc;
    }
    e->G = cfg->global_batch_size ? cfg->global_batch_size : e->exp.global_batch;
    e->nout = e->exp.model.layer[e->exp.model.nlayers - 1].out;
    e->params = c.params;
    e->step = c.step;
    free(c.slots);
    /* a replica's batch is at most G (the reference's workspace too) */
    if ((rc = e->inf->open(&e->exp.model, cfg, e->params, e->G, &e->is, err))) {
        e->is = NULL;
        ev_close(e);
        return rc;
    }
    if ((rc = dr_load_dataset(cfg, e->exp.dataset, 1, &e->data, err))) { ev_close(e); return rc; }
    f = e->data.features;
    e->x = malloc((size_t)e->G * f * sizeof(float) + 1);
    e->targets = malloc((size_t)e->G * e->nout * sizeof(float) + 1);
    e->loss = malloc((size_t)e->G * sizeof(float) + 1);
    e->out = malloc((size_t)e->G * e->nout * sizeof(float) + 1);
    e->labels = malloc(e->G + 1);
    e->pred = malloc((size_t)e->G * sizeof(uint32_t) + 1);
    if (!e->x || !e->targets || !e->loss || !e->out || !e->labels || !e->pred) {
        ev_close(e);
        return dr_fail(err, DR_ENOMEM, "out of memory for evaluation batches");
    }
    return DR_OK;
}

/* Runs fn over every replica batch of the test set, or, where the variant
 * shares the batches over processes (mpi under mpirun), over this
 * process's contiguous run of them. */
typedef int (*batch_fn)(evaluator *e, const uint32_t *ids, uint32_t n, void *arg, dr_err *err);

static int for_each_batch(evaluator *e, const dr_run_config *cfg, bool shared, batch_fn fn, void *arg, dr_err *err)
{
    dr_dist_iter it;
    dr_dist_batch b;
    uint64_t k = 0, lo = 0, hi = UINT64_MAX;
    int rc = dr_dist_iter_init(&it, e->data.n, e->G, e->strat.num_replicas, cfg->seed, false, false, err);
    if (shared && e->inf->share) e->inf->share(e->is, ((uint64_t)e->data.n + e->G - 1) / e->G, &lo, &hi);
    for (; rc == DR_OK && dr_dist_iter_next(&it, &b); k++)
        for (uint32_t r = 0; rc == DR_OK && k >= lo && k < hi && r < b.num_replicas; r++)
            rc = fn(e, b.ids + b.offset[r], b.offset[r + 1] - b.offset[r], arg, err);
    dr_dist_iter_free(&it);
    return rc;
}

/* Only MPI rank 0 (the only process otherwise) writes model_dir. */
static bool writer(void)
{
    uint32_t rank;
    dr_mpi_world(&rank, NULL);
    return rank == 0;
}

/* The class: the output's first maximum (as training counts a correct one). */
static int forward(evaluator *e, const uint32_t *ids, uint32_t n, dr_err *err)
{
    int rc;
    dr_dataset_gather(&e->data, ids, n, e->x, e->data.labels ? e->labels : NULL,
                      e->data.targets ? e->targets : NULL);
    rc = e->inf->batch(e->is, e->x, e->data.labels ? e->labels : NULL, e->data.targets ? e->targets : NULL, n,
                       e->loss, e->out, err);
    for (uint32_t i = 0; rc == DR_OK && i < n; i++) {
        const float *o = e->out + (size_t)i * e->nout;
        uint32_t best = 0;
        for (uint32_t k = 1; k < e->nout; k++) if (o[k] > o[best]) best = k;
        e->pred[i] = best;
    }
    return rc;
}

typedef struct totals { dr_acc loss; uint64_t correct, seen; } totals;

static int eval_batch(evaluator *e, const uint32_t *ids, uint32_t n, void *arg, dr_err *err)
{
    totals *t = arg;
    int rc;
    if (n == 0) return DR_OK;
    if ((rc = forward(e, ids, n, err))) return rc;
    dr_acc_add_sum(&t->loss, e->loss, n);
    for (uint32_t i = 0; i < n; i++) t->correct += e->data.labels && e->pred[i] == e->labels[i];
    t->seen += n;
    return DR_OK;
}

static int write_eval(const dr_run_config *cfg, const evaluator *e, const dr_run_result *res, dr_err *err)
{
    char path[1100], num[40];
    json_object *o = json_object_new_object();
    int rc;
    json_object_object_add(o, "experiment", json_object_new_string(e->exp.name));
    snprintf(num, sizeof num, "%.9g", (double)res->loss);
    json_object_object_add(o, "loss", json_object_new_double_s((double)res->loss, num));
    json_object_object_add(o, "accuracy", json_object_new_double((double)res->accuracy));
    json_object_object_add(o, "examples", json_object_new_int64((int64_t)res->examples));
    json_object_object_add(o, "weights_sha256", json_object_new_string(res->weights_sha256));
    snprintf(path, sizeof path, "%s/eval.json", cfg->model_dir);
    {
        const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);
        rc = dr_write_atomic(path, text, strlen(text), err);
    }
    json_object_put(o);
    return rc;
}

static void weights_sha(const evaluator *e, dr_run_result *res)
{
    dr_weights_sha256(e->params, dr_model_num_params(&e->exp.model), res->weights_sha256);
    res->steps = e->step;   /* the step of the checkpoint that was evaluated */
}

static int evaluate(const dr_run_config *cfg, dr_run_result *res, dr_err *err)
{
    evaluator e;
    totals t;
    dr_scaled loss, reg;
    double t0 = dr_now();
    int rc = ev_open(&e, cfg, err);
    if (rc) return rc;
    memset(&t, 0, sizeof t);
    rc = for_each_batch(&e, cfg, true, eval_batch, &t, err);
    if (rc == DR_OK && e.inf->combine) {   /* every process's share: the one-process totals, exactly */
        uint64_t counts[2] = { t.correct, t.seen };
        rc = e.inf->combine(e.is, &t.loss, counts, 2, err);
        t.correct = counts[0];
        t.seen = counts[1];
    }
    if (rc) { ev_close(&e); return rc; }
    /* mean data loss + regularization, over one denominator, rounded once */
    dr_scaled_init(&loss, (uint32_t)t.seen);
    loss.num = t.loss;
    dr_scaled_init(&reg, 1);
    dr_acc_add(&reg.num, e.inf->reg_loss(e.is));
    dr_scaled_add(&loss, &reg);
    res->loss = dr_scaled_round(&loss);
    res->accuracy = t.seen ? (float)t.correct / (float)t.seen : 0.0f;
    res->examples = t.seen;
    res->seconds = dr_now() - t0;
    weights_sha(&e, res);
    if (writer()) rc = write_eval(cfg, &e, res, err);
    ev_close(&e);
    return rc;
}

typedef struct sink { char *buf; size_t len, cap; uint64_t index; } sink;

static int predict_batch(evaluator *e, const uint32_t *ids, uint32_t n, void *arg, dr_err *err)
{
    sink *s = arg;
    int rc;
    if (n == 0) return DR_OK;
    if ((rc = forward(e, ids, n, err))) return rc;
    for (uint32_t i = 0; i < n; i++) {
        char line[96];
        int len = e->data.labels
            ? snprintf(line, sizeof line, "{\"index\":%u,\"class\":%u}\n", ids[i], e->pred[i])
            : snprintf(line, sizeof line, "{\"index\":%u,\"value\":%.9g}\n", ids[i],
                       (double)e->out[(size_t)i * e->nout]);
        if (s->len + (size_t)len + 1 > s->cap) {
            char *p = realloc(s->buf, (s->cap + (size_t)len + 1) * 2);
            if (!p) return dr_fail(err, DR_ENOMEM, "no memory for predictions");
            s->buf = p;
            s->cap = (s->cap + (size_t)len + 1) * 2;
        }
        memcpy(s->buf + s->len, line, (size_t)len + 1);
        s->len += (size_t)len;
        s->index++;
    }
    return DR_OK;
}

/* Across processes (the variant's gather): each predicts its share, and
 * rank 0 gets the lines in rank order, which is the batches' order: the
 * one-process file. */
static int predict(const dr_run_config *cfg, dr_run_result *res, dr_err *err)
{
    evaluator e;
    sink s = { NULL, 0, 0, 0 };
    char path[1100];
    int rc = ev_open(&e, cfg, err);
    if (rc) return rc;
    rc = for_each_batch(&e, cfg, e.inf->gather != NULL, predict_batch, &s, err);
    if (rc == DR_OK && e.inf->gather) {
        void *all = NULL;
        size_t len = 0;
        if ((rc = e.inf->gather(e.is, s.buf ? s.buf : "", s.len, &all, &len, err)) == DR_OK) {
            free(s.buf);
            s.buf = all;
            s.len = len;
            s.index = 0;   /* the lines of every process */
            for (size_t i = 0; all && i < len; i++) s.index += s.buf[i] == '\n';
        }
    }
    snprintf(path, sizeof path, "%s/predictions.jsonl", cfg->model_dir);
    if (rc == DR_OK && writer()) rc = dr_write_atomic(path, s.buf ? s.buf : "", s.len, err);
    res->examples = s.index;
    weights_sha(&e, res);
    free(s.buf);
    ev_close(&e);
    return rc;
}

int dr_run_evaluate(const dr_run_config *cfg, dr_run_result *res, dr_err *err)
{
    dr_dir_lock lock;
    int rc;
    memset(res, 0, sizeof *res);   /* examples stays 0 unless a result was computed */
    if ((rc = dr_run_lock(cfg, false, &lock, err))) return rc;   /* it writes eval.json */
    rc = evaluate(cfg, res, err);
    dr_run_unlock(&lock);
    return rc;
}

int dr_run_predict(const dr_run_config *cfg, dr_run_result *res, dr_err *err)
{
    dr_dir_lock lock;
    int rc;
    memset(res, 0, sizeof *res);
    if ((rc = dr_run_lock(cfg, false, &lock, err))) return rc;   /* it writes predictions.jsonl */
    rc = predict(cfg, res, err);
    dr_run_unlock(&lock);
    return rc;
}
