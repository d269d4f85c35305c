/* distref reference — a model's layers in lock step over a step's replicas
 * (ref/graph.h). Everything but BatchNormalization is per example, hence
 * per replica; BatchNormalization's sums are taken per replica and, under
 * --batch_norm=sync, merged exactly across replicas (dr_acc_merge: the
 * order does not matter) before the one rounding, so every split of the
 * global batch gives the statistics of the whole batch. Their bytes are
 * counted as the engine's ring all-reduce of them would move them
 * (g->count: 2 C accumulators a layer, forward and backward).
 *
 * Statistics, as measured in TensorFlow 2.21 / Keras 3.15 (docs/MODELS.md):
 *   replica (synchronized=False): mean = sum(x)/N, var = sum((x-mean)^2)/N
 *   sync    (synchronized=True):  mean = sum(x)/N, var = sum(x^2)/N - mean^2
 *   moving = moving * 0.99f + stat * 0.01f   (N: examples x height x width)
 * and under replica BN the moving statistics end as replica 0's.
 *
 * Spatially partitioned (g->halo, the tpu strategy): the entries are each
 * replica's cores, each computing its tile of the maps; a replica's cores
 * are one statistics group, their exact sums merged before the rounding, so
 * the statistics are the whole image's; from the plan's lp on only core 0
 * runs (the whole maps, the loss); ref/halo.c moves the halos. */
#include "ref/graph.h"
#include "ref/halo.h"

#include <stdlib.h>
#include <string.h>

#define MOM_REST 0.01f   /* (float)(1.0 - 0.99): Keras computes 1 - momentum in double */

/* Spatial partitioning (ref/halo.h): each replica's cores are entries of
 * rp, one statistics group; without it, one entry a replica. */
static uint32_t group(const dr_graph_ctx *g) { return g->halo ? g->halo->plan->tiles : 1; }

/* Whether entry e computes layer l: it has examples, and l runs on its tile
 * or it is the core that holds the whole maps. */
static bool runs(const dr_graph_replica *e, uint32_t l)
{
    return e->n && (e->core == 0 || dr_layer_tiled(e->w, l));
}

/* The statistics' count of entry e at layer l: examples x the pixels it holds. */
static uint32_t stat_count(const dr_graph_ctx *g, uint32_t l, const dr_graph_replica *e)
{
    const dr_dense *d = &g->m->layer[l];
    uint32_t r[4];
    if (!runs(e, l)) return 0;
    dr_layer_region(e->w, l, l, d->ih, d->iw, r);
    return e->n * (r[1] - r[0]) * (r[3] - r[2]);
}

static void moving_update(const dr_graph_ctx *g, uint32_t l, const float *mean, const float *var)
{
    const dr_dense *d = &g->m->layer[l];
    float *s;
    if (!g->new_state) return;
    s = g->new_state + (dr_model_state_offset(g->m, l) - dr_model_num_trainable(g->m));
    for (uint32_t c = 0; c < d->oc; c++) {
        s[c] = s[c] * DR_BN_MOMENTUM + mean[c] * MOM_REST;
        s[d->oc + c] = s[d->oc + c] * DR_BN_MOMENTUM + var[c] * MOM_REST;
    }
}

/* Replica BN: each replica's two-pass statistics over its own examples
 * (spatially partitioned: its cores' exact sums combined, rounded once). */
static void bn_forward_replica(const dr_graph_ctx *g, uint32_t l, dr_graph_replica *rp, uint32_t R,
                               dr_acc *s1, dr_acc *s2, float *mean, float *var)
{
    const dr_dense *d = &g->m->layer[l];
    uint32_t T = group(g);
    for (uint32_t r0 = 0; r0 < R; r0 += T) {
        uint32_t N = 0;
        for (uint32_t c = 0; c < d->oc; c++) { dr_acc_init(&s1[c]); dr_acc_init(&s2[c]); }
        for (uint32_t r = r0; r < r0 + T; r++) N += stat_count(g, l, &rp[r]);
        if (N == 0) continue;
        for (uint32_t r = r0; r < r0 + T; r++) if (runs(&rp[r], l)) dr_bn_sums(g->m, l, rp[r].x, rp[r].n, rp[r].w, s1, NULL);
        for (uint32_t c = 0; c < d->oc; c++) mean[c] = dr_acc_round_div(&s1[c], N);
        for (uint32_t r = r0; r < r0 + T; r++) if (runs(&rp[r], l)) dr_bn_centered(g->m, l, rp[r].x, rp[r].n, rp[r].w, mean, s2);
        for (uint32_t c = 0; c < d->oc; c++) var[c] = dr_acc_round_div(&s2[c], N);
        for (uint32_t r = r0; r < r0 + T; r++)
            if (runs(&rp[r], l)) dr_bn_normalize(g->m, l, rp[r].params, rp[r].x, rp[r].n, rp[r].w, mean, var, true);
        if (r0 == 0) moving_update(g, l, mean, var);
    }
}

/* Sync BN: the sums of x and x^2 of every replica, merged exactly. */
static void bn_forward_sync(const dr_graph_ctx *g, uint32_t l, dr_graph_replica *rp, uint32_t R,
                            dr_acc *s1, dr_acc *s2, float *mean, float *var)
{
    const dr_dense *d = &g->m->layer[l];
    uint32_t N = 0;
    for (uint32_t c = 0; c < d->oc; c++) { dr_acc_init(&s1[c]); dr_acc_init(&s2[c]); }
    for (uint32_t r = 0; r < R; r++) {
        if (!runs(&rp[r], l)) continue;
        N += stat_count(g, l, &rp[r]);
        if (rp[r].n) dr_bn_sums(g->m, l, rp[r].x, rp[r].n, rp[r].w, s1, s2);
    }
    if (g->count) dr_count_ring(g->count, 2 * (size_t)d->oc);   /* the engine's all-reduce of s1, s2 */
    if (N == 0) return;
    for (uint32_t c = 0; c < d->oc; c++) {
        float ex2 = dr_acc_round_div(&s2[c], N);
        mean[c] = dr_acc_round_div(&s1[c], N);
        var[c] = ex2 - mean[c] * mean[c];
    }
    for (uint32_t r = 0; r < R; r++)
        if (runs(&rp[r], l)) dr_bn_normalize(g->m, l, rp[r].params, rp[r].x, rp[r].n, rp[r].w, mean, var, true);
    moving_update(g, l, mean, var);
}

void dr_graph_forward(const dr_graph_ctx *g, dr_graph_replica *rp, uint32_t R)
{
    const dr_model_spec *m = g->m;
    dr_acc s1[256], s2[256];
    float mean[256], var[256];
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        if (g->halo) dr_halo_before_forward(g->halo, l, rp, R);
        if (d->kind == DR_LAYER_BATCH_NORM && g->training) {
            if (g->sync_bn) bn_forward_sync(g, l, rp, R, s1, s2, mean, var);
            else bn_forward_replica(g, l, rp, R, s1, s2, mean, var);
            for (uint32_t r = 0; g->compute != DR_DTYPE_F32 && r < R; r++)   /* float32 BN, its output cast to c */
                dr_layer_round_output(m, l, rp[r].n, rp[r].w, g->compute);
            continue;
        }
        for (uint32_t r = 0; r < R; r++) {
            dr_layer_rt rt = { g->training, g->seed, g->step, rp[r].ids, g->masks, rp[r].row0, g->compute };
            if (runs(&rp[r], l)) dr_layer_forward(m, g->ops, l, rp[r].params, rp[r].x, rp[r].n, rp[r].w, &rt);
        }
    }
}

/* The backward sums of a statistics group (sync: every entry; replica: a
 * replica's cores), merged exactly, and each entry's input gradient. */
static void bn_backward_group(const dr_graph_ctx *g, uint32_t l, dr_graph_replica *rp, uint32_t r0, uint32_t r1)
{
    const dr_model_spec *m = g->m;
    const dr_dense *d = &m->layer[l];
    dr_acc s1[256], s2[256], *gg, *gb;
    float mdy[256], mdx[256];
    uint32_t N = 0;
    for (uint32_t c = 0; c < d->oc; c++) { dr_acc_init(&s1[c]); dr_acc_init(&s2[c]); }
    for (uint32_t r = r0; r < r1; r++) {
        dr_acc t1[256], t2[256];
        if (!runs(&rp[r], l)) continue;
        for (uint32_t c = 0; c < d->oc; c++) { dr_acc_init(&t1[c]); dr_acc_init(&t2[c]); }
        dr_bn_grad_sums(m, l, rp[r].n, rp[r].w, t1, t2);
        gg = rp[r].grad + dr_model_kernel_offset(m, l);
        gb = rp[r].grad + dr_model_bias_offset(m, l);
        for (uint32_t c = 0; c < d->oc; c++) {
            dr_acc_merge(&gg[c], &t2[c]);
            dr_acc_merge(&gb[c], &t1[c]);
            dr_acc_merge(&s1[c], &t1[c]);
            dr_acc_merge(&s2[c], &t2[c]);
        }
        N += stat_count(g, l, &rp[r]);
    }
    if (N == 0) return;
    for (uint32_t c = 0; c < d->oc; c++) { mdy[c] = dr_acc_round_div(&s1[c], N); mdx[c] = dr_acc_round_div(&s2[c], N); }
    for (uint32_t r = r0; r < r1; r++)
        if (runs(&rp[r], l))
            dr_bn_backward(m, l, rp[r].params, rp[r].n, rp[r].w, mdy, mdx, dr_layer_src(m, l) > 0, g->compute);
}

static void bn_backward(const dr_graph_ctx *g, uint32_t l, dr_graph_replica *rp, uint32_t R)
{
    uint32_t T = g->sync_bn ? R : group(g);
    if (g->sync_bn && g->count) dr_count_ring(g->count, 2 * (size_t)g->m->layer[l].oc);
    for (uint32_t r0 = 0; r0 < R; r0 += T) bn_backward_group(g, l, rp, r0, r0 + T);
}

/* The mixed step's loss (ref/mixed_step.c's): float32 on the logits in c;
 * dz_c holds the loss scale and 1 / G. */
static void mixed_loss_delta(const dr_graph_ctx *g, dr_graph_replica *e)
{
    const dr_model_spec *m = g->m;
    uint32_t L = m->nlayers, nout = m->layer[L - 1].out;
    dr_work *w = e->w;
    for (uint32_t r = 0; r < e->n; r++) {
        const float *z = w->pre[L - 1] + (size_t)r * nout;
        uint32_t best = 0;
        for (uint32_t i = 1; i < nout; i++) if (z[i] > z[best]) best = i;
        *e->correct += best == e->labels[r];
        dr_acc_add(e->loss, dr_mixed_example(z, nout, e->labels[r], g->loss_scale, g->G, g->compute, w->aux,
                                             w->dact[L] + (size_t)r * nout));
    }
}

void dr_graph_loss_grad(const dr_graph_ctx *g, dr_graph_replica *rp, uint32_t R)
{
    const dr_model_spec *m = g->m;
    uint32_t L = m->nlayers;
    dr_graph_forward(g, rp, R);
    for (uint32_t r = 0; r < R; r++) {
        dr_work *w = rp[r].w;
        if (!rp[r].n) continue;
        for (uint32_t l = 1; l < L; l++) memset(w->dact[l], 0, (size_t)rp[r].n * m->layer[l - 1].out * sizeof(float));
        if (rp[r].core) continue;   /* the loss is core 0's */
        if (g->compute != DR_DTYPE_F32) mixed_loss_delta(g, &rp[r]);
        else dr_model_loss_delta(m, g->ops, w, rp[r].n, rp[r].labels, rp[r].targets, rp[r].loss, w->dact[L], rp[r].correct);
    }
    for (uint32_t l = L; l-- > 0;) {
        if (g->halo) dr_halo_before_backward(g->halo, l, rp, R);
        for (uint32_t r = 0; g->compute != DR_DTYPE_F32 && r < R; r++)   /* a fork's gradients summed in c */
            if (rp[r].n) dr_layer_round_grad(m, l, rp[r].n, rp[r].w, g->compute);
        if (m->layer[l].kind == DR_LAYER_BATCH_NORM) { bn_backward(g, l, rp, R); continue; }
        for (uint32_t r = 0; r < R; r++)
            if (runs(&rp[r], l)) dr_layer_backward(m, g->ops, l, rp[r].params, rp[r].x, rp[r].n, rp[r].w, rp[r].grad,
                                           dr_layer_src(m, l) > 0, g->compute);
    }
}
