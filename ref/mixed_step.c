/* distref reference — the mixed-precision step (--dtype_policy=mixed_float16
 * or mixed_bfloat16; docs/TRAINING_FEATURES.md, "Mixed precision").
 *
 * float32 master weights; every op's result is its exact value rounded once
 * to the compute dtype c:
 *   forward   x_c = RN_c(x), W_c = RN_c(W), b_c = RN_c(b); each layer's
 *             pre-activation RN_c(exact x_c W_c + b_c); ReLU; the logits in c;
 *             the softmax cross-entropy in float32 on them (Keras's float32 loss);
 *   backward  per example dz_c = RN_c(scale * (softmax - onehot) / G); each
 *             layer below gets RN_c(exact dz_c W_c^T), masked by its ReLU; the
 *             weight gradients stay exact per replica (dr_acc);
 *   reduce    dr_mixed_reduce: exact (the global sum rounded once to c) or
 *             tensorflow (each replica's partial rounded to c first), and one
 *             finite flag over every replica's values;
 *   apply     the loss scale's one decision (dr_loss_scale_step): skipped, or
 *             g / scale in float32, clipped (--clipnorm, --clipvalue,
 *             --global_clipnorm on the aggregated, unscaled gradient: Keras 3's
 *             LossScaleOptimizer unscales, then its inner optimizer clips), and
 *             the optimizer at the applied-step count (Keras's iterations) on
 *             every replica's copy.
 * --gradient_accumulation_steps=k (Keras 3's measured order: each micro-step
 * is checked, and skipped or unscaled, on its own): a finite micro-step's
 * unscaled float32 gradient is added exactly to one accumulator; the update
 * comes after k finite micro-steps and applies their exact sum / k rounded
 * once (then clipped); a skipped micro-step is dropped. The schedule reads
 * the finite micro-steps, Adam the updates.
 * --l2: the float32 gradient of the scaled L2 loss (dr_mixed_l2_term) added
 * to the compute-dtype gradient before the unscale: exact adds it once to
 * the reduced gradient, tensorflow to each replica's rounded partial.
 * Built for the mirrored family in one process, central_storage and tpu
 * (a Dense model unpartitioned; the models beyond Dense also with
 * --input_partition_dims, ref/mixed_graph.c), with the global_batch_size
 * reduction, linear/ReLU hidden layers and logits cross-entropy (core/plan.c and dr_ref_mixed_supports
 * refuse the rest). --clip_semantics=tensorflow (with the tensorflow
 * reduction): each replica unscaled and clipped before the all-reduce
 * (reduce_clipped). --l2: the reported loss adds the float32 L2 loss, as
 * the float32 step's. The reduction is computed on
 * the host from the replicas' exact partials: what an exact all-reduce would
 * give. Where the strategy's float32 step moves its exact partials through a
 * counted collective, the mixed step runs the same one over them for its
 * traffic (mixed_collective): central_storage reduces them to the variable
 * device (which alone holds the variables and slots: every replica copies
 * them in, the one update runs there), tpu all-reduces them along the torus
 * (its emulated step time in metrics.jsonl). */
#include "ref/trainer.h"
#include "ref/graph.h"

#include "distref/elem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dr_ref_mixed_supports(const dr_run_plan *p, dr_err *err)
{
    const dr_experiment *e = &p->exp;
    const char *why = NULL;
    if (p->spec.kind == DR_STRATEGY_PARAMETER_SERVER)
        why = "Keras 3, whose LossScaleOptimizer distref reproduces, does not support ParameterServerStrategy "
              "(keras-team/keras#18624): there is no loss-scale semantics across asynchronous workers to measure "
              "(the mixed step runs one_device, mirrored, multi_worker_mirrored, central_storage and tpu)";
    else if (dr_tpu_partition_cores(p->cfg->input_partition_dims) > 1 && dr_model_is_dense(&e->model))
        why = "--input_partition_dims with a Dense model is not built into it (the partitioned first layer merges "
              "float32 partial sums across a replica's cores; the Dense mixed step's layers run whole on one core; "
              "the models beyond Dense, whose maps are tiled, run it)";
    else if (p->divide_by_count || p->divide_locally) why = "it needs --loss_reduction=global_batch_size";
    else if (e->model.loss != DR_LOSS_XENT_LOGITS) why = "it is built for the logits cross-entropy";
    else if (e->optimizer.clip.per_replica && !p->cfg->mixed.tf_reduction)
        why = "--clip_semantics=tensorflow needs --mixed_reduction=tensorflow (Keras 3 unscales and clips each "
              "replica's own compute-dtype gradient before the all-reduce; the exact reduction rounds only the "
              "global sum, so there is no replica gradient to clip)";
    else if (p->cfg->layer_devices[0]) why = "--layer_devices is not built into it";
    for (uint32_t l = 0; !why && l < e->model.nlayers; l++)
        if (e->model.layer[l].act == DR_ACT_SOFTMAX) why = "a softmax layer is not built into it";
    if (!why) return DR_OK;
    return dr_fail(err, DR_EUNSUPPORTED, "not supported: --dtype_policy=mixed_%s under --variant=ref with %s: %s",
                   dr_dtype_name(p->cfg->mixed.compute), dr_strategy_kind_name(p->spec.kind), why);
}

static void round_all(const dr_acc *a, size_t n, uint32_t d, dr_dtype c, float *out)
{
    for (size_t i = 0; i < n; i++) out[i] = dr_acc_round_div_dtype(&a[i], d, c);
}

/* pre = RN_c(in W_c + b_c), exact inside; act = ReLU or the identity. */
static void layer_forward(const dr_dense *d, const float *in, const float *Wc, uint32_t b, dr_dtype c,
                          dr_acc *tmp, float *pre, float *act)
{
    size_t n = (size_t)b * d->out;
    memset(tmp, 0, n * sizeof *tmp);
    dr_gemm_acc(DR_NO_TRANS, DR_NO_TRANS, b, d->out, d->in, in, d->in, Wc, d->out, tmp);
    for (uint32_t r = 0; r < b; r++)
        for (uint32_t j = 0; j < d->out; j++) dr_acc_add(&tmp[(size_t)r * d->out + j], Wc[(size_t)d->in * d->out + j]);
    round_all(tmp, n, 1, c, pre);
    for (size_t i = 0; i < n; i++) act[i] = d->act == DR_ACT_RELU ? (pre[i] > 0.0f ? pre[i] : 0.0f) : pre[i];
}

typedef struct mixed_scratch {
    float  *Wc, *xc, *act[DR_MAX_LAYERS + 1], *pre[DR_MAX_LAYERS], *dz[2], *aux;
    dr_acc *tmp;
} mixed_scratch;

static void scratch_free(mixed_scratch *s)
{
    free(s->Wc); free(s->xc); free(s->dz[0]); free(s->dz[1]); free(s->aux); free(s->tmp);
    for (int l = 0; l < DR_MAX_LAYERS; l++) { free(s->pre[l]); free(s->act[l + 1]); }
}

static int scratch_alloc(mixed_scratch *s, const dr_model_spec *m, size_t P, uint32_t n, dr_err *err)
{
    size_t widest = m->layer[0].in, b = n ? n : 1;
    bool ok;
    memset(s, 0, sizeof *s);
    for (uint32_t l = 0; l < m->nlayers; l++) {
        if (m->layer[l].out > widest) widest = m->layer[l].out;
        s->pre[l] = malloc(b * m->layer[l].out * sizeof(float));
        s->act[l + 1] = malloc(b * m->layer[l].out * sizeof(float));
    }
    s->Wc = malloc(P * sizeof(float));
    s->xc = malloc(b * m->layer[0].in * sizeof(float));
    s->dz[0] = malloc(b * widest * sizeof(float));
    s->dz[1] = malloc(b * widest * sizeof(float));
    s->aux = malloc(widest * sizeof(float));
    s->tmp = malloc(b * widest * sizeof(dr_acc));
    ok = s->Wc && s->xc && s->dz[0] && s->dz[1] && s->aux && s->tmp;
    for (uint32_t l = 0; l < m->nlayers; l++) ok = ok && s->pre[l] && s->act[l + 1];
    if (ok) return DR_OK;
    scratch_free(s);
    return dr_fail(err, DR_ENOMEM, "out of memory for the mixed step's scratch (%u examples)", n);
}

/* Replica r's loss share (mult * sum of its losses) and exact gradient
 * partials (the loss scale and 1/G inside dz_c). */
static int replica_mixed(trainer *t, replica *rp, uint32_t r, uint32_t n, dr_err *err)
{
    const dr_model_spec *m = &t->exp.model;
    dr_dtype c = t->cfg->mixed.compute;
    uint32_t L = m->nlayers, nout = m->layer[L - 1].out;
    mixed_scratch s;
    const float *in;
    float *dz;
    int rc;
    memset(rp->grad, 0, t->P * sizeof *rp->grad);
    dr_acc_init(&rp->loss);
    rp->correct = 0;
    if (n == 0) return DR_OK;
    if ((rc = scratch_alloc(&s, m, t->P, n, err))) return rc;
    for (size_t p = 0; p < t->P; p++) s.Wc[p] = dr_round_to_dtype(rp->params[p], c);
    for (size_t i = 0; i < (size_t)n * m->layer[0].in; i++) s.xc[i] = dr_round_to_dtype(rp->x[i], c);
    s.act[0] = s.xc;
    for (uint32_t l = 0; l < L; l++)
        layer_forward(&m->layer[l], s.act[l], s.Wc + dr_model_kernel_offset(m, l), n, c, s.tmp, s.pre[l], s.act[l + 1]);
    dz = s.dz[0];
    for (uint32_t e = 0; e < n; e++) {
        const float *z = s.pre[L - 1] + (size_t)e * nout;
        uint32_t best = 0;
        for (uint32_t i = 1; i < nout; i++) if (z[i] > z[best]) best = i;
        rp->correct += best == rp->labels[e];
        dr_acc_add(&rp->loss, dr_mixed_example(z, nout, rp->labels[e], t->ls.scale, t->G, c, s.aux, dz + (size_t)e * nout));
    }
    if (t->mult[r] > 1) dr_acc_mul_u32(&rp->loss, t->mult[r]);
    for (uint32_t l = L; l-- > 0;) {
        const dr_dense *d = &m->layer[l];
        const float *Wc = s.Wc + dr_model_kernel_offset(m, l);
        dr_acc *gW = rp->grad + dr_model_kernel_offset(m, l), *gb = gW + (size_t)d->in * d->out;
        float *dprev = s.dz[(L - l) & 1];
        in = s.act[l];
        dr_gemm_acc(DR_TRANS, DR_NO_TRANS, d->in, d->out, n, in, d->in, dz, d->out, gW);
        for (uint32_t e = 0; e < n; e++)
            for (uint32_t j = 0; j < d->out; j++) dr_acc_add(&gb[j], dz[(size_t)e * d->out + j]);
        if (l == 0) break;
        memset(s.tmp, 0, (size_t)n * d->in * sizeof *s.tmp);
        dr_gemm_acc(DR_NO_TRANS, DR_TRANS, n, d->in, d->out, dz, d->out, Wc, d->out, s.tmp);
        round_all(s.tmp, (size_t)n * d->in, 1, c, dprev);
        if (m->layer[l - 1].act == DR_ACT_RELU)
            for (size_t i = 0; i < (size_t)n * d->in; i++) if (!(s.pre[l - 1][i] > 0.0f)) dprev[i] = 0.0f;
        dz = dprev;
    }
    scratch_free(&s);
    return DR_OK;
}

static int mixed_replica_step(const dr_replica_ctx *ctx, void *arg, dr_err *err)
{
    trainer *t = arg;
    uint32_t r = ctx->replica_id_in_sync_group, n = t->off[r + 1] - t->off[r];
    replica *rp = &t->rep[r];
    int rc;
    dr_trainer_load_batch(t, rp, t->ids + t->off[r], n);   /* tpu: its padding rows would add nothing */
    if (t->var)   /* central_storage: the variables come to the replica */
        dr_device_copy(rp->dev, rp->params, &t->strat.device[t->strat.variable_device], t->var, t->P * sizeof(float));
    if (!dr_model_is_dense(&t->exp.model)) return DR_OK;   /* the layers run in lock step: dr_ref_mixed_graph_shares */
    rc = replica_mixed(t, rp, r, n, err);
    if (rc == DR_OK && t->exp.model.l2 != 0.0f)   /* the reported loss: + the float32 L2 loss, as the float32 step */
        dr_acc_add_prod(&rp->loss, (float)t->coef, dr_model_reg_loss(&t->exp.model, rp->params));
    if (t->cfg->placement_log && !t->tpu.on) dr_trainer_log_replica_ops(t, r);
    return rc;
}

/* The strategy's own collective over the replicas' exact partials, for the
 * bytes it moves (and tpu's emulated time); the values are the host's
 * reduction, taken before it (an exact collective gives the same sum). */
static int mixed_collective(trainer *t, dr_err *err)
{
    dr_acc *acc[DR_MAX_DEVICES];
    if (t->cfg->placement_log && !t->tpu.on) dr_trainer_log_update_ops(t);
    for (uint32_t r = 0; r < t->strat.num_replicas; r++) acc[r] = t->rep[r].grad;
    if (t->tpu.on) return dr_tpu_reduce_timed(t, acc, err);
    if (!t->var) return DR_OK;
    memset(t->central, 0, t->P * sizeof *t->central);
    return dr_reduce_to_device(&t->strat, acc, t->P, t->strat.variable_device, t->central, err);
}

static void loss_scale_start(trainer *t)
{
    const dr_mixed_config *mc = &t->cfg->mixed;
    if (t->ls.growth_steps) return;
    dr_loss_scale_from_config(&t->ls, mc);
}

/* A finite micro-step's unscaled gradient (t->grad): with k > 1 added to
 * the update's exact accumulator, and on the k-th finite one replaced by
 * RN(sum / k); then clipped and applied. applied: finite micro-steps so far. */
static void mixed_apply(trainer *t, const dr_optimizer *o, uint64_t applied)
{
    uint32_t k = t->cfg->gradient_accumulation_steps > 1 ? t->cfg->gradient_accumulation_steps : 1;
    if (k > 1) {
        for (size_t p = 0; p < t->P; p++) dr_acc_add(&t->accum[0][p], t->grad[p]);
        if (applied % k) return;
        dr_acc_round_array(t->accum[0], t->P, k, t->grad);
        memset(t->accum[0], 0, t->P * sizeof(dr_acc));
    }
    t->updated = true;
    if (!o->clip.per_replica)   /* unscaled, then clipped: Keras's inner optimizer */
        dr_optimizer_clip(o, &t->exp.model, t->grad, t->P);
    for (uint32_t r = 0; r < (t->var ? 1 : t->strat.num_replicas); r++)   /* central_storage: once, there */
        dr_optimizer_apply_lr(o, dr_lr_at(&o->schedule, o->lr, applied), applied / k,
                              t->var ? t->var : t->rep[r].params, t->grad, t->var ? t->var_slots : t->rep[r].slots,
                              t->P);
}

/* --clip_semantics=tensorflow (Keras 3 under MirroredStrategy, measured by
 * scripts/tf_mixed_clip.py): replica r's gradient is its partial rounded to
 * c (BatchNormalization's gamma and beta to float32) plus its 1/R L2 term
 * (--mixed_reduction=tensorflow's), checked, unscaled in float32 and
 * clipped on its own; the all-reduce sums the R clipped
 * gradients exactly, rounded once to float32 (into out). The one skip
 * decision: every replica's scaled gradient and the total finite (Keras
 * reads replica 0's alone). The partials are overwritten. */
static bool reduce_clipped(trainer *t, float *out)
{
    const dr_model_spec *m = &t->exp.model;
    uint32_t R = t->strat.num_replicas;
    bool finite = true;
    for (uint32_t r = 0; r < R; r++) {
        dr_acc *part = t->rep[r].grad;
        for (size_t p = 0; p < t->P; p++) out[p] = dr_acc_round_div_dtype(&part[p], 1, t->cfg->mixed.compute);
        if (!dr_model_is_dense(m)) dr_ref_mixed_bn_partial(m, part, out);   /* gamma, beta: float32 */
        dr_mixed_add_l2(m, t->rep[r].params, t->ls.scale, R, out);
        for (size_t p = 0; p < t->P; p++) finite &= out[p] - out[p] == 0.0f;
        for (size_t p = 0; p < t->P; p++) out[p] = dr_loss_scale_unscale(&t->ls, out[p]);
        dr_optimizer_clip(&t->exp.optimizer, m, out, t->P);
        for (size_t p = 0; p < t->P; p++) { dr_acc_init(&part[p]); dr_acc_add(&part[p], out[p]); }
    }
    for (size_t p = 0; p < t->P; p++) {
        dr_acc s;
        dr_acc_init(&s);
        for (uint32_t r = 0; r < R; r++) dr_acc_merge(&s, &t->rep[r].grad[p]);
        out[p] = dr_acc_round(&s);
        finite &= out[p] - out[p] == 0.0f;
    }
    return finite;
}

/* A resumed run's accumulator is empty: refuse a checkpoint taken while
 * finite micro-steps were waiting for their update (a skip moved the
 * updates off the multiples of k; checkpoints do not hold the sums). */
static int resume_check(trainer *t, uint64_t step, dr_err *err)
{
    uint32_t k = t->cfg->gradient_accumulation_steps;
    uint64_t held = (step - 1 - t->ls.skipped) % (k ? k : 1);
    if (k <= 1 || t->mixed_steps || held == 0) { t->mixed_steps++; return DR_OK; }
    return dr_fail(err, DR_EUSAGE, "cannot resume --dtype_policy=mixed_%s with "
                   "--gradient_accumulation_steps=%u at step %llu: %llu finite micro-steps were accumulated "
                   "toward an update (a skipped micro-step moved the updates) and a checkpoint does not hold them",
                   dr_dtype_name(t->cfg->mixed.compute), k, (unsigned long long)step - 1, (unsigned long long)held);
}

int dr_ref_mixed_step(trainer *t, const dr_dist_batch *b, uint64_t step, dr_step_report *rep, dr_err *err)
{
    uint32_t R = t->strat.num_replicas;
    const dr_acc *parts[DR_MAX_DEVICES];
    const float *w[DR_MAX_DEVICES];
    const dr_optimizer *o = &t->exp.optimizer;
    dr_loss_scale before;
    bool finite;
    int rc;
    loss_scale_start(t);
    t->updated = false;
    if ((rc = resume_check(t, step, err)) || (rc = dr_trainer_begin_step(t, b, step, rep, err)) ||
        (rc = dr_strategy_run(&t->strat, t->count, mixed_replica_step, t, err)) ||
        (!dr_model_is_dense(&t->exp.model) && (rc = dr_ref_mixed_graph_shares(t, err))))
        return rc;
    for (uint32_t r = 0; r < R; r++) { parts[r] = t->rep[r].grad; w[r] = t->rep[r].params; }
    if (o->clip.per_replica)
        finite = reduce_clipped(t, t->grad);   /* unscaled and clipped per replica */
    else
        finite = dr_mixed_reduce_l2(parts, R, t->P, t->cfg->mixed.compute, t->cfg->mixed.tf_reduction, &t->exp.model,
                                    w,   /* --l2: its float32 term, scaled, before the unscale */
                                    t->ls.scale, t->grad);
    if (!dr_model_is_dense(&t->exp.model)) finite = dr_ref_mixed_bn_grads(t, t->grad);
    rep->extra[0] = 0;
    if ((rc = mixed_collective(t, err))) return rc;
    before = t->ls;
    size_t n = strlen(rep->extra);
    snprintf(rep->extra + n, sizeof rep->extra - n, ",\"loss_scale\":%.9g,\"skipped\":%s", before.scale,
             finite || !before.dynamic ? "false" : "true");
    if (dr_loss_scale_step(&t->ls, finite)) {
        if (!o->clip.per_replica)   /* per replica: unscaled before the all-reduce (reduce_clipped) */
            for (size_t p = 0; p < t->P; p++) t->grad[p] = dr_loss_scale_unscale(&before, t->grad[p]);
        mixed_apply(t, o, step - t->ls.skipped);   /* Keras's iterations: applied (micro-)steps only */
    }
    dr_trainer_end_step(t);
    return DR_OK;
}
