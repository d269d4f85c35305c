/* distref core — a distref model's tensors in a trajectory: their Keras
 * names and where each lives, and writing one step (distref/trajectory.h). */
#include "distref/trajectory.h"
#include "distref/fileio.h"
#include "distref/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add(dr_traj_index *ix, dr_traj_where *where, const char *name, uint32_t ndim, uint64_t d0, uint64_t d1,
                dr_traj_src src, uint32_t slot, size_t offset)
{
    dr_traj_tensor *t = &ix->tensors[ix->ntensors];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    where[ix->ntensors].src = src;
    where[ix->ntensors].slot = slot;
    where[ix->ntensors].offset = offset;
    ix->ntensors++;
}

static void add4(dr_traj_index *ix, dr_traj_where *where, const char *name, const uint64_t *shape, uint32_t ndim,
                 dr_traj_src src, uint32_t slot, size_t offset)
{
    add(ix, where, name, ndim, shape[0], ndim > 1 ? shape[1] : 0, src, slot, offset);
    for (uint32_t d = 2; d < ndim; d++) ix->tensors[ix->ntensors - 1].shape[d] = shape[d];
}

/* Layer l's trainable variables under prefix ("" or "optimizer/momentum/"
 * ...), named <kind>_<l>/<variable> with Keras's shapes: Dense kernel
 * (in, units), Conv2D kernel (kh, kw, in channels, filters) as Keras's
 * HWIO layout, which distref's is, BatchNormalization gamma and beta (C). */
static void add_layer(const dr_model_spec *m, uint32_t l, dr_traj_index *ix, dr_traj_where *where, const char *prefix,
                      dr_traj_src src, uint32_t slot)
{
    const dr_layer *d = &m->layer[l];
    const char *kind = dr_layer_kind_name(d->kind), *kname = "kernel", *bname = "bias";
    char name[DR_TRAJ_NAME_MAX];
    uint64_t ks[4] = { d->in, d->out, 0, 0 }, bs[1] = { d->out };
    uint32_t kdim = 2;
    switch (d->kind) {
    case DR_LAYER_DENSE: break;
    case DR_LAYER_CONV2D:
        ks[0] = ks[1] = d->ksize; ks[2] = d->ic; ks[3] = d->filters; kdim = 4; bs[0] = d->filters;
        break;
    case DR_LAYER_BATCH_NORM:
        kname = "gamma"; bname = "beta"; ks[0] = bs[0] = d->oc; kdim = 1;
        break;
    default: return;   /* no variables */
    }
    snprintf(name, sizeof name, "%s%s_%u/%s", prefix, kind, l, kname);
    add4(ix, where, name, ks, kdim, src, slot, dr_model_kernel_offset(m, l));
    snprintf(name, sizeof name, "%s%s_%u/%s", prefix, kind, l, bname);
    add4(ix, where, name, bs, 1, src, slot, dr_model_bias_offset(m, l));
}

/* The trainable variables under prefix, layer by layer. */
static void add_variables(const dr_model_spec *m, dr_traj_index *ix, dr_traj_where *where, const char *prefix,
                          dr_traj_src src, uint32_t slot)
{
    for (uint32_t l = 0; l < m->nlayers; l++) add_layer(m, l, ix, where, prefix, src, slot);
}

/* The non-trainable state (BatchNormalization's moving mean and variance,
 * Keras's names): in the parameters after the trainable ones. */
static void add_state(const dr_model_spec *m, dr_traj_index *ix, dr_traj_where *where)
{
    char name[DR_TRAJ_NAME_MAX];
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_layer *d = &m->layer[l];
        uint64_t c[1] = { d->oc };
        if (d->kind != DR_LAYER_BATCH_NORM) continue;
        snprintf(name, sizeof name, "%s_%u/moving_mean", dr_layer_kind_name(d->kind), l);
        add4(ix, where, name, c, 1, DR_TRAJ_SRC_PARAMS, 0, dr_model_state_offset(m, l));
        snprintf(name, sizeof name, "%s_%u/moving_variance", dr_layer_kind_name(d->kind), l);
        add4(ix, where, name, c, 1, DR_TRAJ_SRC_PARAMS, 0, dr_model_state_offset(m, l) + d->oc);
    }
}

/* How many tensors the model's trajectory holds. */
static uint32_t count_tensors(const dr_model_spec *m, int nslots, bool grads, bool loss)
{
    uint32_t vars = 0, state = 0;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        dr_layer_kind k = m->layer[l].kind;
        vars += k == DR_LAYER_DENSE || k == DR_LAYER_CONV2D || k == DR_LAYER_BATCH_NORM ? 2 : 0;
        state += k == DR_LAYER_BATCH_NORM ? 2 : 0;
    }
    return vars * (1u + (uint32_t)nslots + (grads ? 1u : 0u)) + state + (loss ? 1u : 0u);
}

int dr_traj_model_tensors(const dr_model_spec *m, const dr_optimizer *o, bool grads, bool loss, dr_traj_index *ix,
                          dr_traj_where *where, dr_err *err)
{
    static const char *const adam[] = { "optimizer/momentum/", "optimizer/velocity/" };
    int nslots = dr_optimizer_num_slots(o);
    uint32_t n = count_tensors(m, nslots, grads, loss);
    if (n > DR_TRAJ_MAX_TENSORS)
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: --trajectory of a model with %u tensors (at most %d)", n,
                       DR_TRAJ_MAX_TENSORS);
    free(ix->tensors);
    ix->ntensors = 0;
    if (!(ix->tensors = calloc(DR_TRAJ_MAX_TENSORS, sizeof *ix->tensors))) return dr_fail(err, DR_ENOMEM, "trajectory: out of memory");
    add_variables(m, ix, where, "", DR_TRAJ_SRC_PARAMS, 0);
    add_state(m, ix, where);
    for (int k = 0; k < nslots; k++)
        add_variables(m, ix, where, o->kind == DR_OPT_ADAM ? adam[k] : "optimizer/momentum/", DR_TRAJ_SRC_SLOT, (uint32_t)k);
    if (grads) add_variables(m, ix, where, "gradient/", DR_TRAJ_SRC_GRAD, 0);
    if (loss) add(ix, where, "loss", 0, 0, 0, DR_TRAJ_SRC_LOSS, 0, 0);
    return DR_OK;
}

static const float *source(const dr_traj_where *w, size_t P, const float *params, const float *slots,
                           const float *grads, const float *loss)
{
    switch (w->src) {
    case DR_TRAJ_SRC_PARAMS: return params + w->offset;
    case DR_TRAJ_SRC_SLOT: return slots ? slots + (size_t)w->slot * P + w->offset : NULL;
    case DR_TRAJ_SRC_GRAD: return grads ? grads + w->offset : NULL;
    default: return loss;
    }
}

int dr_traj_write_step(const char *dir, const dr_traj_index *ix, const dr_traj_where *where, size_t P, uint64_t step,
                       const float *params, const float *slots, const float *grads, const float *loss,
                       dr_traj_step *st, dr_err *err)
{
    char path[2048];
    int rc = DR_OK;
    memset(st, 0, sizeof *st);
    st->step = step;
    snprintf(st->dir, sizeof st->dir, "step_%08llu", (unsigned long long)step);
    if (!(st->tensors = malloc(ix->ntensors * sizeof *st->tensors + 1))) return dr_fail(err, DR_ENOMEM, "trajectory: out of memory");
    for (uint32_t i = 0; rc == DR_OK && i < ix->ntensors; i++) {
        const float *data = source(&where[i], P, params, slots, grads, loss);
        char *slash;
        if (!data) continue;
        dr_traj_path(dir, st, ix->tensors[i].name, path, sizeof path);
        slash = strrchr(path, '/');
        *slash = '\0';
        rc = dr_mkdirs(path, err);
        *slash = '/';
        if (rc == DR_OK) rc = dr_npy_write_f32(path, ix->tensors[i].ndim, ix->tensors[i].shape, data, err);
        st->tensors[st->ntensors++] = (uint16_t)i;
    }
    if (rc) { free(st->tensors); st->tensors = NULL; }
    return rc;
}
