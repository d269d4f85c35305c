/* distref core — a model as data: the layers' shapes, the parameter layout,
 * initial values, and the optimizer's slot count (see
 * include/distref/model.h). This is the one place that derives shapes and
 * offsets. The math that trains a model is not here: the reference has its
 * own (ref/model_math.c, ref/layers.c, ref/graph.c) and the engine its own
 * (devices/, Dense only so far). */
#include "distref/model.h"
#include "distref/rng.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *dr_layer_kind_name(dr_layer_kind k)
{
    static const char *names[] = { "dense", "conv2d", "max_pool2d", "global_avg_pool2d", "flatten",
                                   "batch_norm", "dropout", "add" };
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "unknown";
}

uint32_t dr_model_layer_kinds(const dr_model_spec *m)
{
    uint32_t k = 0;
    for (uint32_t l = 0; l < m->nlayers; l++) k |= 1u << m->layer[l].kind;
    return k;
}

const char *dr_layer_kinds_first(uint32_t kinds)
{
    for (uint32_t k = 0; k < 32; k++) if (kinds >> k & 1u) return dr_layer_kind_name((dr_layer_kind)k);
    return "none";
}

bool dr_layer_regularized(const dr_dense *d)
{
    return d->kind == DR_LAYER_DENSE || d->kind == DR_LAYER_CONV2D;
}

/* One layer in words: its kind and the settings that shape it. */
static void layer_words(const dr_dense *d, char *buf, size_t cap)
{
    switch (d->kind) {
    case DR_LAYER_DENSE: snprintf(buf, cap, "dense %u -> %u", d->in, d->out); break;
    case DR_LAYER_CONV2D:
        snprintf(buf, cap, "conv2d %u filters %ux%u stride %u on %ux%ux%u", d->filters, d->ksize, d->ksize, d->stride,
                 d->ih, d->iw, d->ic);
        break;
    default: snprintf(buf, cap, "%s on %ux%ux%u", dr_layer_kind_name(d->kind), d->ih, d->iw, d->ic); break;
    }
}

bool dr_model_first_difference(const dr_model_spec *a, const dr_model_spec *b, const char *other, char *buf,
                               size_t cap)
{
    uint32_t n = a->nlayers < b->nlayers ? a->nlayers : b->nlayers;
    char wa[96], wb[96];
    if (cap) buf[0] = 0;
    for (uint32_t l = 0; l < n; l++) {
        const dr_dense *x = &a->layer[l], *y = &b->layer[l];
        const bool conv = x->kind == DR_LAYER_CONV2D;
        const char *dim = x->kind != y->kind ? "kind"
                        : x->ih != y->ih || x->iw != y->iw || x->ic != y->ic || x->in != y->in ? "input"
                        : conv && x->filters != y->filters ? "filters" : conv && x->ksize != y->ksize ? "kernel size"
                        : conv && x->stride != y->stride ? "stride" : conv && x->same != y->same ? "padding"
                        : x->out != y->out ? (conv ? "output" : "units") : x->act != y->act ? "activation"
                        : x->from != y->from || x->src != y->src ? "input layer" : x->rate != y->rate ? "rate" : NULL;
        if (!dim) continue;
        layer_words(x, wa, sizeof wa);
        layer_words(y, wb, sizeof wb);
        snprintf(buf, cap, "layer %u's %s: %s here, %s in %s", l, dim, wa, wb, other);
        return true;
    }
    if (a->nlayers == b->nlayers) return false;
    snprintf(buf, cap, "%u layers here, %u in %s", a->nlayers, b->nlayers, other);
    return true;
}

bool dr_model_is_dense(const dr_model_spec *m)
{
    return dr_model_first_non_dense(m) == m->nlayers;
}

uint32_t dr_model_first_non_dense(const dr_model_spec *m)
{
    uint32_t l = 0;
    while (l < m->nlayers && m->layer[l].kind == DR_LAYER_DENSE) l++;
    return l;
}

/* Trainable tensors of a layer: kernel-like (L2-regularized) then bias-like. */
static size_t kernel_len(const dr_dense *d)
{
    switch (d->kind) {
    case DR_LAYER_DENSE: return (size_t)d->in * d->out;
    case DR_LAYER_CONV2D: return (size_t)d->ksize * d->ksize * d->ic * d->oc;
    case DR_LAYER_BATCH_NORM: return d->oc;
    default: return 0;
    }
}

static size_t bias_len(const dr_dense *d)
{
    switch (d->kind) {
    case DR_LAYER_DENSE: return d->out;
    case DR_LAYER_CONV2D: case DR_LAYER_BATCH_NORM: return d->oc;
    default: return 0;
    }
}

size_t dr_model_kernel_size(const dr_model_spec *m, uint32_t layer)
{
    return kernel_len(&m->layer[layer]);
}

size_t dr_model_kernel_offset(const dr_model_spec *m, uint32_t layer)
{
    size_t off = 0;
    for (uint32_t l = 0; l < layer; l++) off += dr_model_layer_params(m, l);
    return off;
}

size_t dr_model_bias_offset(const dr_model_spec *m, uint32_t layer)
{
    return dr_model_kernel_offset(m, layer) + kernel_len(&m->layer[layer]);
}

size_t dr_model_layer_params(const dr_model_spec *m, uint32_t layer)
{
    return kernel_len(&m->layer[layer]) + bias_len(&m->layer[layer]);
}

size_t dr_model_num_trainable(const dr_model_spec *m)
{
    return dr_model_kernel_offset(m, m->nlayers);
}

static size_t state_len(const dr_dense *d)
{
    return d->kind == DR_LAYER_BATCH_NORM ? 2 * (size_t)d->oc : 0;
}

size_t dr_model_state_offset(const dr_model_spec *m, uint32_t layer)
{
    size_t off = dr_model_num_trainable(m);
    for (uint32_t l = 0; l < layer; l++) off += state_len(&m->layer[l]);
    return off;
}

size_t dr_model_num_state(const dr_model_spec *m)
{
    return dr_model_state_offset(m, m->nlayers) - dr_model_num_trainable(m);
}

size_t dr_model_num_params(const dr_model_spec *m)
{
    return dr_model_state_offset(m, m->nlayers);
}

uint32_t dr_model_tensors(const dr_model_spec *m, size_t *len, uint32_t max)
{
    uint32_t n = 0;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        size_t k = kernel_len(&m->layer[l]), b = bias_len(&m->layer[l]);
        if (k) { if (n < max) len[n] = k; n++; }
        if (b) { if (n < max) len[n] = b; n++; }
    }
    for (uint32_t l = 0; l < m->nlayers; l++) {
        if (!state_len(&m->layer[l])) continue;
        if (n < max) len[n] = m->layer[l].oc;
        n++;
        if (n < max) len[n] = m->layer[l].oc;
        n++;
    }
    return n;
}

void dr_model_init(const dr_model_spec *m, uint64_t seed, float *params)
{
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        size_t nk = kernel_len(d), nb = bias_len(d);
        float *w = params + dr_model_kernel_offset(m, l), limit;
        if (d->kind == DR_LAYER_BATCH_NORM) {
            float *s = params + dr_model_state_offset(m, l);
            for (size_t k = 0; k < nk; k++) { w[k] = 1.0f; w[nk + k] = 0.0f; s[k] = 0.0f; s[nk + k] = 1.0f; }
            continue;
        }
        if (d->kind != DR_LAYER_DENSE && d->kind != DR_LAYER_CONV2D) continue;
        limit = d->kind == DR_LAYER_DENSE ? sqrtf(6.0f / (float)(d->in + d->out))
              : sqrtf(6.0f / (float)(d->ksize * d->ksize * (d->ic + d->oc)));
        for (size_t k = 0; k < nk; k++)
            w[k] = (2.0f * dr_rng_uniform(seed, DR_STREAM_INIT + l, k) - 1.0f) * limit;
        memset(w + nk, 0, nb * sizeof *w);
    }
}

int dr_optimizer_num_slots(const dr_optimizer *o)
{
    if (o->kind == DR_OPT_ADAM) return 2;
    return o->momentum != 0.0f ? 1 : 0;
}
