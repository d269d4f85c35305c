/* distref reference — the mixed-precision step's shares for the models
 * beyond Dense (ref/mixed_step.c runs the rest of the step: the reduction,
 * the loss scale's decision, the update). Measured in TensorFlow 2.21 /
 * Keras 3.15 by scripts/tf_mixed_conv.py (docs/TRAINING_FEATURES.md, "Mixed
 * precision with the models beyond Dense"):
 *   the input, Conv2D's and Dense's kernels and biases rounded to the
 *   compute dtype c; BatchNormalization's gamma, beta and moving statistics
 *   stay float32 (Keras 3 computes its float16/bfloat16 input in float32);
 *   every layer's output in c (ref/layers.c: a Conv2D is RN_c(RN_c(conv) +
 *   b), BatchNormalization RN_c(its float32 result), Add RN_c(a + b),
 *   GlobalAveragePooling2D RN_c(exact mean), Dropout RN_c(x * RN_c(scale)));
 *   the loss float32 on the c logits; each input gradient in c, a fork's sum
 *   (AddN) rounded once; the kernel and bias gradients exact per replica
 *   (reduced and rounded to c by dr_mixed_reduce), BatchNormalization's
 *   gamma and beta gradients float32 (dr_ref_mixed_bn_grads).
 * TensorFlow's CPU float16 convolution backward accumulates in float16 (a
 * few ulps from the one rounding distref applies): the one deviation, kept
 * for exactness and replica-invariance.
 * The Dense mixed step's features run here as there (ref/mixed_step.c):
 * --l2 on the Conv2D and Dense kernels only (never BatchNormalization's
 * gamma and beta, as the float32 step; its loss added to the reported
 * loss); --gradient_accumulation_steps, each micro-step one such step (its
 * own BatchNormalization statistics and moving-statistics update, as the
 * float32 graph step); --mixed_reduction=tensorflow, each replica's partial
 * rounded to its variable's dtype first: c for the kernels and biases,
 * float32 for gamma and beta (dr_ref_mixed_bn_partial); tpu
 * (each replica's real rows, its padding rows left out, the gradients over
 * the torus by mixed_step.c's mixed_collective), also spatially partitioned
 * (--input_partition_dims, ref/tpu_spatial.c): each core's input map is its
 * tile of the rounded images and every core computes its tile with the
 * layers' per-element roundings, so tiling changes none of them; the halos
 * carry the maps (and their gradients) in c as the layers wrote them; the
 * exact BatchNormalization and kernel sums merge over the cores before the
 * one rounding, as in the float32 spatial step. */
#include "ref/trainer.h"
#include "ref/graph.h"
#include "ref/halo.h"

#include <stdlib.h>
#include <string.h>

/* The parameters a replica's layers read: Conv2D's and Dense's rounded to
 * c, BatchNormalization's (trainable and state) as they are. */
static void round_params(const dr_model_spec *m, const float *w, size_t P, dr_dtype c, float *out)
{
    memcpy(out, w, P * sizeof *out);
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        size_t at = dr_model_kernel_offset(m, l), n = dr_model_layer_params(m, l);
        if (!dr_layer_regularized(d)) continue;
        for (size_t i = at; i < at + n; i++) out[i] = dr_round_to_dtype(w[i], c);
    }
}

/* Replica r's cores' input maps under spatial partitioning: each its tile
 * of the rounded rows xc (the cast is per element: a tile of the cast
 * images is the cast of the tile), zeros elsewhere. */
static void load_tiles(trainer *t, uint32_t r, const float *xc, uint32_t n)
{
    tpu_run *tp = &t->tpu;
    size_t f = t->data->features;
    for (uint32_t c = 0; c < tp->tiles; c++) {
        float *x = tp->halo->x[r * tp->tiles + c];
        const uint32_t *pix = tp->tile_pixels + (size_t)c * tp->tile_len;
        memset(x, 0, (size_t)tp->local * f * sizeof *x);
        for (uint32_t e = 0; e < n; e++)
            for (uint32_t q = 0; q < tp->tile_len; q++) x[(size_t)e * f + pix[q]] = xc[(size_t)e * f + pix[q]];
    }
}

int dr_ref_mixed_graph_shares(trainer *t, dr_err *err)
{
    const dr_model_spec *m = &t->exp.model;
    dr_dtype c = t->cfg->mixed.compute;
    uint32_t R = t->strat.num_replicas, in = m->layer[0].in;
    uint32_t C = t->tpu.halo ? t->tpu.tiles : 1;   /* cores a replica (spatial partitioning) */
    size_t T = dr_model_num_trainable(m), S = t->P - T;
    dr_graph_replica g[DR_MAX_DEVICES];
    float *state = S ? malloc(S * sizeof *state) : NULL, *wc[DR_MAX_DEVICES] = { 0 }, *xc[DR_MAX_DEVICES] = { 0 };
    dr_graph_ctx ctx = { m, t->ops, true, !t->plan->bn_replica, t->cfg->seed, t->step, state, t->tpu.halo, &t->strat,
                         t->plan->dropout_masks, c, t->ls.scale, t->G };
    int rc = DR_OK;
    if (S && !state) return dr_fail(err, DR_ENOMEM, "out of host memory for the batch-norm state");
    if (S) memcpy(state, dr_trainer_params(t) + T, S * sizeof *state);
    if (S && t->plan->bn_replica && R > 1) dr_count_ring(&t->strat, S);   /* as dr_graph_shares */
    for (uint32_t r = 0; r < R && rc == DR_OK; r++) {
        replica *rp = &t->rep[r];
        uint32_t n = t->off[r + 1] - t->off[r];
        memset(rp->grad, 0, t->P * sizeof *rp->grad);
        dr_acc_init(&rp->loss);
        rp->correct = 0;
        wc[r] = malloc(t->P * sizeof(float));
        xc[r] = malloc(((size_t)n * in + 1) * sizeof(float));
        if (!wc[r] || !xc[r]) { rc = dr_fail(err, DR_ENOMEM, "out of memory for the mixed step's copies"); break; }
        round_params(m, rp->params, t->P, c, wc[r]);
        for (size_t i = 0; i < (size_t)n * in; i++) xc[r][i] = dr_round_to_dtype(rp->x[i], c);
        if (C > 1) load_tiles(t, r, xc[r], n);
        for (uint32_t k = 0; k < C; k++) {   /* spatial partitioning: each core of the replica on its tile */
            uint32_t e = r * C + k;
            g[e] = (dr_graph_replica){ wc[r], C > 1 ? t->tpu.halo->x[e] : xc[r], rp->labels, rp->targets,
                                       t->ids + t->off[r], n, C > 1 ? &t->tpu.core_work[e] : &rp->work, &rp->loss,
                                       rp->grad, &rp->correct, k, t->row0[r] };
        }
    }
    if (rc == DR_OK) {
        dr_graph_loss_grad(&ctx, g, R * C);
        for (uint32_t r = 0; r < R; r++) {
            if (t->mult[r] > 1) dr_acc_mul_u32(&t->rep[r].loss, t->mult[r]);
            if (m->l2 != 0.0f)   /* the reported loss: + the float32 L2 loss, as the Dense mixed step */
                dr_acc_add_prod(&t->rep[r].loss, (float)t->coef, dr_model_reg_loss(m, t->rep[r].params));
        }
        for (uint32_t r = 0; t->cfg->placement_log && !t->tpu.on && r < R; r++) dr_trainer_log_replica_ops(t, r);
        for (uint32_t r = 0; S && r < R; r++) memcpy(t->rep[r].params + T, state, S * sizeof *state);
        if (S && t->var) memcpy(t->var + T, state, S * sizeof *state);
    }
    for (uint32_t r = 0; r < R; r++) { free(wc[r]); free(xc[r]); }
    free(state);
    return rc;
}

/* BatchNormalization's gamma and beta of one replica's partial, as
 * --mixed_reduction=tensorflow moves them: float32 variables, so their
 * gradients are rounded to float32, not to c (out's other values kept). */
void dr_ref_mixed_bn_partial(const dr_model_spec *m, const dr_acc *part, float *out)
{
    for (uint32_t l = 0; l < m->nlayers; l++) {
        size_t at = dr_model_kernel_offset(m, l);
        if (m->layer[l].kind != DR_LAYER_BATCH_NORM) continue;
        for (size_t p = at; p < at + dr_model_layer_params(m, l); p++) out[p] = dr_acc_round(&part[p]);   /* gamma, beta */
    }
}

/* BatchNormalization's gamma and beta are float32 variables read as they
 * are: their gradients are float32 (exact: the global sum rounded once to
 * float32, not to c; tensorflow: the exact sum of each replica's float32
 * partial, rounded once). Returns whether the whole gradient is finite (the
 * skip decision, over c's values elsewhere and these). */
bool dr_ref_mixed_bn_grads(trainer *t, float *grad)
{
    const dr_model_spec *m = &t->exp.model;
    bool finite = true, tf = t->cfg->mixed.tf_reduction;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        size_t at = dr_model_kernel_offset(m, l);
        if (m->layer[l].kind != DR_LAYER_BATCH_NORM) continue;
        for (size_t p = at; p < at + dr_model_layer_params(m, l); p++) {   /* gamma, beta */
            dr_acc s;
            dr_acc_init(&s);
            for (uint32_t r = 0; r < t->strat.num_replicas; r++)
                if (tf) dr_acc_add(&s, dr_acc_round(&t->rep[r].grad[p]));
                else dr_acc_merge(&s, &t->rep[r].grad[p]);
            grad[p] = dr_acc_round(&s);
        }
    }
    for (size_t p = 0; p < t->P; p++) finite &= grad[p] - grad[p] == 0.0f;
    return finite;
}
