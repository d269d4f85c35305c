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

/* The variables under prefix ("" or "optimizer/momentum/" ...). */
static void add_variables(const dr_model_spec *m, dr_traj_index *ix, dr_traj_where *where, const char *prefix,
                          dr_traj_src src, uint32_t slot)
{
    char name[DR_TRAJ_NAME_MAX];
    for (uint32_t l = 0; l < m->nlayers; l++) {
        snprintf(name, sizeof name, "%sdense_%u/kernel", prefix, l);
        add(ix, where, name, 2, m->layer[l].in, m->layer[l].out, src, slot, dr_model_kernel_offset(m, l));
        snprintf(name, sizeof name, "%sdense_%u/bias", prefix, l);
        add(ix, where, name, 1, m->layer[l].out, 0, src, slot, dr_model_bias_offset(m, l));
    }
}

int dr_traj_model_tensors(const dr_model_spec *m, const dr_optimizer *o, bool grads, bool loss, dr_traj_index *ix,
                          dr_traj_where *where, dr_err *err)
{
    static const char *const adam[] = { "optimizer/momentum/", "optimizer/velocity/" };
    int nslots = dr_optimizer_num_slots(o);
    if (!dr_model_is_dense(m))
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: --trajectory with a %s layer (its tensors are named for "
                       "Dense layers so far, docs/MODELS.md)", dr_layer_kind_name(m->layer[dr_model_first_non_dense(m)].kind));
    free(ix->tensors);
    ix->ntensors = 0;
    if (!(ix->tensors = calloc(DR_TRAJ_MAX_TENSORS, sizeof *ix->tensors))) return dr_fail(err, DR_ENOMEM, "trajectory: out of memory");
    add_variables(m, ix, where, "", DR_TRAJ_SRC_PARAMS, 0);
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
