/* distref core — deriving a model's shapes (NHWC, as Keras) from its input
 * and its layers' settings, and refusing those that do not fit: the one
 * place that knows how each layer kind maps its input shape to its output. */
#include "distref/model.h"

#include <stdio.h>

static int bad(dr_err *err, uint32_t l, const dr_dense *d, const char *what)
{
    return dr_fail(err, DR_EUSAGE, "model: layer %u (%s): %s", l, dr_layer_kind_name(d->kind), what);
}

static int conv_shape(dr_dense *d, uint32_t l, dr_err *err)
{
    char msg[160];
    if (d->ksize != 1 && d->ksize != 3) return bad(err, l, d, "kernel size must be 1 or 3");
    if (d->stride != 1 && d->stride != 2) return bad(err, l, d, "stride must be 1 or 2");
    if (d->filters == 0) return bad(err, l, d, "filters must be at least 1");
    if (d->act != DR_ACT_LINEAR && d->act != DR_ACT_RELU) return bad(err, l, d, "activation must be linear or relu");
    d->oc = d->filters;
    if (d->same) {
        uint32_t ph, pw;
        d->oh = (d->ih + d->stride - 1) / d->stride;
        d->ow = (d->iw + d->stride - 1) / d->stride;
        ph = (d->oh - 1) * d->stride + d->ksize > d->ih ? (d->oh - 1) * d->stride + d->ksize - d->ih : 0;
        pw = (d->ow - 1) * d->stride + d->ksize > d->iw ? (d->ow - 1) * d->stride + d->ksize - d->iw : 0;
        d->pad_top = ph / 2;
        d->pad_left = pw / 2;
        return DR_OK;
    }
    if (d->ih < d->ksize || d->iw < d->ksize) {
        snprintf(msg, sizeof msg, "input %ux%u is smaller than its %ux%u kernel (padding valid)",
                 d->ih, d->iw, d->ksize, d->ksize);
        return bad(err, l, d, msg);
    }
    d->oh = (d->ih - d->ksize) / d->stride + 1;
    d->ow = (d->iw - d->ksize) / d->stride + 1;
    d->pad_top = d->pad_left = 0;
    return DR_OK;
}

static int layer_shape(dr_model_spec *m, uint32_t l, dr_err *err)
{
    dr_dense *d = &m->layer[l];
    char msg[200];
    d->oh = d->ih; d->ow = d->iw; d->oc = d->ic;
    switch (d->kind) {
    case DR_LAYER_DENSE:
        if (d->ih != 1 || d->iw != 1) {
            snprintf(msg, sizeof msg, "input is a %ux%ux%u feature map; flatten it first", d->ih, d->iw, d->ic);
            return bad(err, l, d, msg);
        }
        if (d->in && d->in != d->ic) {
            snprintf(msg, sizeof msg, "input width %u, but the layer below gives %u", d->in, d->ic);
            return bad(err, l, d, msg);
        }
        if (d->out == 0) return bad(err, l, d, "units must be at least 1");
        d->oc = d->out;
        return DR_OK;
    case DR_LAYER_CONV2D: return conv_shape(d, l, err);
    case DR_LAYER_MAX_POOL2D:
        if (d->ih < 2 || d->iw < 2) {
            snprintf(msg, sizeof msg, "input %ux%u is smaller than its 2x2 window", d->ih, d->iw);
            return bad(err, l, d, msg);
        }
        d->oh = d->ih / 2; d->ow = d->iw / 2;
        return DR_OK;
    case DR_LAYER_GLOBAL_AVG_POOL2D: d->oh = d->ow = 1; return DR_OK;
    case DR_LAYER_FLATTEN: d->oh = d->ow = 1; d->oc = d->ih * d->iw * d->ic; return DR_OK;
    case DR_LAYER_BATCH_NORM:
        if (d->act != DR_ACT_LINEAR && d->act != DR_ACT_RELU) return bad(err, l, d, "activation must be linear or relu");
        if (d->ic > 256) {
            snprintf(msg, sizeof msg, "%u channels; at most 256 are supported", d->ic);
            return bad(err, l, d, msg);
        }
        return DR_OK;
    case DR_LAYER_DROPOUT:
        if (!(d->rate >= 0.0f && d->rate < 1.0f)) {
            snprintf(msg, sizeof msg, "rate %g is outside [0, 1)", (double)d->rate);
            return bad(err, l, d, msg);
        }
        return DR_OK;
    case DR_LAYER_ADD: {
        const dr_dense *f;
        if (d->from < -1 || d->from >= (int32_t)l - 1) return bad(err, l, d, "from must name an earlier layer's output (or -1, the input)");
        if (d->act != DR_ACT_LINEAR && d->act != DR_ACT_RELU) return bad(err, l, d, "activation must be linear or relu");
        if (d->from < 0) {
            if (m->in_h != d->ih || m->in_w != d->iw || m->in_c != d->ic) return bad(err, l, d, "the input's shape differs from this layer's input");
            return DR_OK;
        }
        f = &m->layer[d->from];
        if (f->oh != d->ih || f->ow != d->iw || f->oc != d->ic) {
            snprintf(msg, sizeof msg, "layer %d's output %ux%ux%u differs from this layer's input %ux%ux%u",
                     d->from, f->oh, f->ow, f->oc, d->ih, d->iw, d->ic);
            return bad(err, l, d, msg);
        }
        return DR_OK;
    }
    }
    return bad(err, l, d, "unknown layer kind");
}

int dr_model_derive(dr_model_spec *m, dr_err *err)
{
    uint32_t h = m->in_h ? m->in_h : 1, w = m->in_w ? m->in_w : 1;
    uint32_t c = m->in_h ? m->in_c : m->layer[0].in;
    if (m->nlayers == 0 || m->nlayers > DR_MAX_LAYERS)
        return dr_fail(err, DR_EUSAGE, "model: %u layers; expected 1 to %d", m->nlayers, DR_MAX_LAYERS);
    if (m->in_h && (m->in_w == 0 || m->in_c == 0))
        return dr_fail(err, DR_EUSAGE, "model: input %ux%ux%u has a zero dimension", m->in_h, m->in_w, m->in_c);
    for (uint32_t l = 0; l < m->nlayers; l++) {
        dr_dense *d = &m->layer[l];
        int rc;
        if (d->src) {
            const dr_dense *s;
            if (l == 0 || d->src > l) return bad(err, l, d, "src must name an earlier layer's output (1 + its index)");
            s = &m->layer[d->src - 1];
            h = s->oh; w = s->ow; c = s->oc;
        }
        d->ih = h; d->iw = w; d->ic = c;
        if ((rc = layer_shape(m, l, err))) return rc;
        if (d->oh == 0 || d->ow == 0 || d->oc == 0) return bad(err, l, d, "leaves an empty output");
        d->in = d->ih * d->iw * d->ic;
        d->out = d->oh * d->ow * d->oc;
        h = d->oh; w = d->ow; c = d->oc;
    }
    if (m->layer[m->nlayers - 1].kind != DR_LAYER_DENSE)
        return bad(err, m->nlayers - 1, &m->layer[m->nlayers - 1], "the last layer must be Dense (the loss reads its logits)");
    if (h != 1 || w != 1)
        return bad(err, m->nlayers - 1, &m->layer[m->nlayers - 1], "the last layer's output must be flat (the loss reads a vector)");
    return DR_OK;
}
