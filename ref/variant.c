/* distref reference — the reference as a variant: the table the harness
 * reaches ref/ through (distref/variant.h). */
#include "ref/trainer.h"

#include <stdlib.h>
#include <string.h>

struct dr_session {
    trainer   t;
    ps_run   *ps;        /* parameter_server: the coordinator's run instead */
    uint64_t  steps;     /* steps taken by this session (for the tpu's mean step time) */
    bool      applied;   /* the last step updated the variables (get_gradients) */
};

static int ref_supports(const dr_run_plan *plan, dr_err *err)
{
    if (!plan->exact)
        return dr_fail(err, DR_EUNSUPPORTED, "--numerics=fast: the reference is exact only; use --variant=openmp");
    if (plan->cfg->mixed.compute != DR_DTYPE_F32) return dr_ref_mixed_supports(plan, err);
    return DR_OK;
}

static int ref_open(const dr_run_plan *plan, const dr_dataset *data, dr_session **out, dr_err *err)
{
    dr_session *s = calloc(1, sizeof *s);
    int rc;
    if (!s) return dr_fail(err, DR_ENOMEM, "out of host memory for the run");
    if (plan->spec.kind == DR_STRATEGY_PARAMETER_SERVER) rc = dr_ps_open(plan, data, &s->ps, err);
    else rc = dr_trainer_open(&s->t, plan, data, err);
    if (rc) { free(s); return rc; }
    *out = s;
    return DR_OK;
}

static const dr_strategy *ref_strategy(const dr_session *s)
{
    return s->ps ? dr_ps_strategy(s->ps) : &s->t.strat;
}

static int ref_step(dr_session *s, const dr_dist_batch *b, uint64_t step, dr_step_report *out, dr_err *err)
{
    uint32_t k = s->t.cfg->gradient_accumulation_steps;
    uint64_t skipped = s->t.ls.skipped;
    int rc = dr_ref_step(&s->t, b, step, out, err);
    s->steps += rc == DR_OK;
    /* no update: a micro-step of --gradient_accumulation_steps, or a
     * mixed-precision step the loss scale skipped (non-finite gradients);
     * mixed with k > 1: the k-th finite micro-step (ref/mixed_step.c) */
    s->applied = rc == DR_OK && (s->t.cfg->mixed.compute != DR_DTYPE_F32 && k > 1 ? s->t.updated
                                 : k <= 1 || step % k == 0) && s->t.ls.skipped == skipped;
    return rc;
}

static int ref_get(dr_session *s, float *params, float *slots, dr_err *err)
{
    (void)err;
    if (s->ps) return dr_ps_variables(s->ps, params, slots);
    memcpy(params, dr_trainer_params(&s->t), s->t.P * sizeof(float));
    memcpy(slots, dr_trainer_slots(&s->t), s->t.P * (size_t)s->t.nslots * sizeof(float));
    return DR_OK;
}

static int ref_set(dr_session *s, const float *params, const float *slots, dr_err *err)
{
    if (s->ps) return dr_fail(err, DR_ESTATE, "parameter_server resumes its own checkpoints");
    memcpy(dr_trainer_params(&s->t), params, s->t.P * sizeof(float));
    memcpy(dr_trainer_slots(&s->t), slots, s->t.P * (size_t)s->t.nslots * sizeof(float));
    dr_trainer_broadcast(&s->t);
    return DR_OK;
}

/* Mixed precision's loss scale (ref/mixed_step.c), for a checkpoint: as the
 * first mixed step starts it when no step has run yet. */
static int ref_get_loss_scale(dr_session *s, dr_loss_scale *out, dr_err *err)
{
    const dr_mixed_config *mc = &s->t.cfg->mixed;
    (void)err;
    *out = s->t.ls;
    if (out->growth_steps) return DR_OK;
    dr_loss_scale_from_config(out, mc);
    return DR_OK;
}

static int ref_set_loss_scale(dr_session *s, const dr_loss_scale *ls, dr_err *err)
{
    if (s->ps) return dr_fail(err, DR_ESTATE, "parameter_server runs no mixed step");
    s->t.ls = *ls;
    return DR_OK;
}

/* The gradient dr_trainer_apply rounded and applied last (every replica's
 * is the same total, rounded once). */
static int ref_gradients(dr_session *s, float *grads, bool *applied, dr_err *err)
{
    *applied = false;
    if (s->ps) return dr_fail(err, DR_EUNSUPPORTED, "parameter_server: its gradients are applied per worker update");
    if (!s->applied) return DR_OK;
    memcpy(grads, s->t.grad, s->t.P * sizeof(float));
    *applied = true;
    return DR_OK;
}

/* Mirrored replicas must hold the same variables after every step. */
static bool replicas_identical(const trainer *t)
{
    for (uint32_t r = 1; t->strat.mirrored_variables && r < t->strat.num_replicas; r++)
        if (memcmp(t->rep[0].params, t->rep[r].params, t->P * sizeof(float))) return false;
    return true;
}

static void ref_summarize(dr_session *s, json_object *o)
{
    if (s->ps) {
        json_object_object_add(o, "replicas_in_sync", json_object_new_boolean(true));
        json_object_object_add(o, "devices", dr_devices_json(dr_ps_strategy(s->ps)));
        dr_ps_summarize(s->ps, o);
        return;
    }
    json_object_object_add(o, "replicas_in_sync", json_object_new_boolean(replicas_identical(&s->t)));
    json_object_object_add(o, "devices", dr_devices_json(&s->t.strat));
    if (s->t.tpu.on) json_object_object_add(o, "tpu", dr_tpu_report(&s->t, s->steps));
    if (s->t.cfg->mixed.compute != DR_DTYPE_F32) {   /* the loss scale at the end (ref/mixed_step.c) */
        json_object *m = json_object_new_object();
        json_object_object_add(m, "compute_dtype", json_object_new_string(dr_dtype_name(s->t.cfg->mixed.compute)));
        json_object_object_add(m, "reduction", json_object_new_string(s->t.cfg->mixed.tf_reduction ? "tensorflow"
                                                                                                  : "exact"));
        json_object_object_add(m, "loss_scale", json_object_new_double(s->t.ls.scale));
        json_object_object_add(m, "growth_counter", json_object_new_int64(s->t.ls.counter));
        json_object_object_add(m, "skipped_steps", json_object_new_int64((int64_t)s->t.ls.skipped));
        json_object_object_add(o, "mixed_precision", m);
    }
}

static void ref_close(dr_session *s)
{
    if (s->ps) dr_ps_close(s->ps);
    else dr_trainer_close(&s->t);
    free(s);
}

static int ref_train(dr_session *s, struct dr_run_log *log, dr_train_totals *out, dr_err *err)
{
    if (!s->ps) return dr_fail(err, DR_ESTATE, "the reference schedules its own steps for parameter_server only");
    return dr_ps_train(s->ps, log, out, err);
}

const dr_variant dr_variant_ref = {
    .name = "ref",
    .about = "the reference: every strategy and device type emulated in one process with plain loops; exact only",
    .launcher = "",
    .supports = ref_supports,
    .open = ref_open,
    .strategy = ref_strategy,
    .step = ref_step,
    .get_variables = ref_get,
    .set_variables = ref_set,
    .summarize = ref_summarize,
    .close = ref_close,
    .train = ref_train,
    .get_gradients = ref_gradients,
    .get_loss_scale = ref_get_loss_scale,
    .set_loss_scale = ref_set_loss_scale,
    .infer = &dr_ref_infer_ops,
};
