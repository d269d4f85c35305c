/* distref harness — --trajectory: recording a run's steps
 * (harness/trajectory_rec.h). The index is written with each checkpoint
 * and at the end, so that it never names a step past the checkpoint a
 * crashed run resumes from; the resumed run drops the index's later steps
 * and writes them again. */
#include "harness/trajectory_rec.h"
#include "distref/fileio.h"
#include "distref/version.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *traj_settings(const dr_run_config *cfg, const dr_run_plan *plan, const char *variant, const char *what,
                    const char *gradients)
{
    json_object *o = json_object_new_object();
    const dr_optimizer *opt = &plan->exp.optimizer;
    char *text;
    json_object_object_add(o, "experiment", json_object_new_string(plan->exp.name));
    json_object_object_add(o, "what", json_object_new_string(what));
    json_object_object_add(o, "producer", json_object_new_string("distref " DR_VERSION));
    json_object_object_add(o, "variant", json_object_new_string(variant));
    json_object_object_add(o, "numerics", json_object_new_string(plan->exact ? "exact" : "fast"));
    json_object_object_add(o, "distribution_strategy", json_object_new_string(dr_strategy_kind_name(plan->spec.kind)));
    json_object_object_add(o, "num_gpus", json_object_new_int((int)plan->spec.num_gpus));
    json_object_object_add(o, "global_batch_size", json_object_new_int((int)plan->G));
    json_object_object_add(o, "seed", json_object_new_int64((int64_t)cfg->seed));
    json_object_object_add(o, "optimizer", json_object_new_string(opt->kind == DR_OPT_ADAM ? "adam" : "sgd"));
    json_object_object_add(o, "learning_rate", json_object_new_double((double)opt->lr));
    json_object_object_add(o, "momentum", json_object_new_double((double)opt->momentum));
    json_object_object_add(o, "l2", json_object_new_double((double)plan->exp.model.l2));
    json_object_object_add(o, "loss_reduction", json_object_new_string(cfg->loss_reduction));
    json_object_object_add(o, "trajectory", json_object_new_string(cfg->trajectory));
    if (gradients) json_object_object_add(o, "gradients", json_object_new_string(gradients));
    text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return text;
}

/* The index already there, cut to the steps up to start_step. */
static int keep_earlier(traj_rec *t, uint64_t start_step, dr_err *err)
{
    dr_traj_index old;
    int rc;
    char probe[1200];
    FILE *f;
    snprintf(probe, sizeof probe, "%s/index.json", t->dir);
    if (start_step == 0 || !(f = fopen(probe, "rb"))) return DR_OK;
    fclose(f);
    if ((rc = dr_traj_index_load(t->dir, &old, err))) return rc;
    for (uint32_t i = 0; i < old.nsteps && old.steps[i].step <= start_step; i++) {
        if (t->ix.nsteps == t->cap) {
            dr_traj_step *p = realloc(t->ix.steps, (t->cap = t->cap * 2 + 16) * sizeof *p);
            if (!p) { dr_traj_index_free(&old); return dr_fail(err, DR_ENOMEM, "trajectory: out of memory"); }
            t->ix.steps = p;
        }
        t->ix.steps[t->ix.nsteps++] = old.steps[i];
        t->last = old.steps[i].step;
        old.steps[i].tensors = NULL;   /* moved */
    }
    dr_traj_index_free(&old);
    return DR_OK;
}

int traj_rec_open(traj_rec *t, const dr_run_config *cfg, const dr_run_plan *plan, const dr_variant *v,
                  uint64_t start_step, dr_err *err)
{
    int rc;
    memset(t, 0, sizeof *t);
    t->last = UINT64_MAX;
    if ((rc = dr_traj_spec_parse(cfg->trajectory, &t->spec, err)) || t->spec.mode == DR_TRAJ_OFF) return rc;
    t->on = true;
    t->P = plan->P;
    snprintf(t->dir, sizeof t->dir, "%s/trajectory", cfg->model_dir);
    if (v->get_gradients && !(t->grads = malloc(plan->P * sizeof(float) + 1)))
        return dr_fail(err, DR_ENOMEM, "trajectory: out of memory");
    if ((rc = dr_traj_model_tensors(&plan->exp.model, &plan->exp.optimizer, t->grads != NULL, true, &t->ix, t->where,
                                    err)))
        return rc;
    if (!(t->ix.settings = traj_settings(cfg, plan, v->name, "trajectory",
                                         t->grads ? "recorded: as applied (after the all-reduce, the scaling, the "
                                                    "accumulation and the clipping, rounded once: what the optimizer "
                                                    "read); a step that applied no update holds none"
                                                  : "not recorded: this variant reduces and applies them inside its "
                                                    "backend and does not expose the rounded gradient")))
        return dr_fail(err, DR_ENOMEM, "trajectory: out of memory");
    if ((rc = dr_mkdirs(t->dir, err))) return rc;
    return keep_earlier(t, start_step, err);
}

int traj_rec_step(traj_rec *t, dr_session *s, const dr_variant *v, uint64_t step, const float *loss, float *params,
                  float *slots, dr_err *err)
{
    const float *grads = NULL;
    int rc;
    if (!t->on || step == t->last) return DR_OK;
    if ((rc = v->get_variables(s, params, slots, err))) return rc;
    if (step > 0 && t->grads) {   /* none on a step that applied no update */
        bool applied = false;
        if ((rc = v->get_gradients(s, t->grads, &applied, err))) return rc;
        if (applied) grads = t->grads;
    }
    if (t->ix.nsteps == t->cap) {
        dr_traj_step *p = realloc(t->ix.steps, (t->cap = t->cap * 2 + 16) * sizeof *p);
        if (!p) return dr_fail(err, DR_ENOMEM, "trajectory: out of memory");
        t->ix.steps = p;
    }
    if ((rc = dr_traj_write_step(t->dir, &t->ix, t->where, t->P, step, params, slots, grads, step > 0 ? loss : NULL,
                                 &t->ix.steps[t->ix.nsteps], err)))
        return rc;
    t->ix.nsteps++;
    t->last = step;
    return DR_OK;
}

int traj_rec_flush(traj_rec *t, dr_err *err)
{
    return t->on ? dr_traj_index_write(t->dir, &t->ix, err) : DR_OK;
}

void traj_rec_close(traj_rec *t)
{
    dr_traj_index_free(&t->ix);
    dr_traj_spec_free(&t->spec);
    free(t->grads);
    memset(t, 0, sizeof *t);
}
