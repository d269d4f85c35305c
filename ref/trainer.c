/* distref reference — setting up a run: devices, buffers, placement, the
 * variables. The step itself is in train_step.c. */
#include "ref/trainer.h"
#include "ref/layers.h"

#include <stdlib.h>
#include <string.h>

/* ---- placement ---------------------------------------------------------- */

/* The device a placement names. GPUs named there are emulated even beyond
 * --num_gpus: a single replica spread over two GPUs is what model
 * parallelism is, and Model Garden's factory allows no strategy with one
 * replica and two GPUs. */
static int placement_device(trainer *t, const dr_device_spec *spec, const char *tok,
                            uint32_t *out, dr_err *err)
{
    dr_strategy *s = &t->strat;
    for (uint32_t d = 0; d < s->num_devices; d++)
        if (s->device[d].spec.type == spec->type && s->device[d].spec.index == spec->index) { *out = d; return DR_OK; }
    if (spec->type != DR_DEV_GPU || spec->index < s->spec.num_gpus || spec->index > DR_MAX_DEVICES - 2 ||
        s->num_devices >= DR_MAX_DEVICES)
        return dr_fail(err, DR_EUSAGE, "--layer_devices: device '%s' cannot be emulated here "
                       "(CPU:0 and GPU:0..%d only)", tok, DR_MAX_DEVICES - 2);
    {
        dr_device_spec g = *spec;
        g.job[0] = 0; g.replica = -1; g.task = -1;
        dr_device_init(&s->device[s->num_devices], &g, t->cfg->memory.gpu_memory_bytes);
        *out = s->num_devices++;
    }
    return DR_OK;
}

/* --layer_devices=/gpu:0,/gpu:1: layer l computes on the l-th device. */
static int parse_placement(trainer *t, dr_err *err)
{
    char list[sizeof t->cfg->layer_devices], *save = NULL, *tok;
    uint32_t l = 0;
    if (!t->cfg->layer_devices[0]) return DR_OK;
    if (t->strat.num_replicas != 1)
        return dr_fail(err, DR_EUSAGE, "--layer_devices: layer placement needs a single replica "
                       "(off or one_device), not %u replicas", t->strat.num_replicas);
    strcpy(list, t->cfg->layer_devices);
    for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save), l++) {
        dr_device_spec spec;
        uint32_t d = 0;
        int rc = dr_device_parse(tok, &spec, err);
        if (rc) return dr_fail_wrap(err, "--layer_devices");
        if (l >= t->exp.model.nlayers) continue;   /* counted: too many is refused below */
        if ((rc = placement_device(t, &spec, tok, &d, err))) return rc;
        t->layer_dev[l] = d;
    }
    if (l != t->exp.model.nlayers)
        return dr_fail(err, DR_EUSAGE, "--layer_devices: %u devices for %u layers; give one per layer",
                       l, t->exp.model.nlayers);
    t->placed = true;
    return DR_OK;
}

/* Each layer's variables, slots and gradient accumulators are reserved on
 * the device that computes it, so capacity errors name the right device. */
static int reserve_layers(trainer *t, dr_err *err)
{
    for (uint32_t l = 0; t->placed && l < t->exp.model.nlayers; l++) {
        const dr_layer *d = &t->exp.model.layer[l];
        size_t bytes = dr_model_layer_params(&t->exp.model, l) * (sizeof(float) * (1 + (size_t)t->nslots) + sizeof(dr_acc)) +
                       (d->kind == DR_LAYER_BATCH_NORM ? 2 * (size_t)d->oc * sizeof(float) : 0);   /* moving statistics */
        int rc = dr_device_reserve(&t->strat.device[t->layer_dev[l]], bytes, err);
        if (rc) return rc;
        t->layer_bytes[l] = bytes;   /* what close gives back */
    }
    return DR_OK;
}

/* A model beyond Dense: map k (0 the input, k layer k-1's output) lives on
 * the device of the layer that made it (the input: layer 0's); each layer
 * that reads it on another device gets it copied there once per step and
 * device (as TensorFlow's send/recv pairs), and its gradient copied back
 * (none for the input). */
static void count_map_copies(trainer *t, replica *rp, uint32_t n)
{
    const dr_model_spec *m = &t->exp.model;
    for (uint32_t k = 0; k < m->nlayers; k++) {
        uint32_t from = t->layer_dev[k ? k - 1 : 0];
        size_t bytes = (size_t)n * (k ? m->layer[k - 1].out : m->layer[0].in) * sizeof(float);
        bool sent[DR_MAX_DEVICES] = { false };
        for (uint32_t l = 0; l < m->nlayers; l++) {
            const dr_layer *d = &m->layer[l];
            uint32_t to = t->layer_dev[l];
            bool reads = dr_layer_src(m, l) == k || (d->kind == DR_LAYER_ADD && (uint32_t)(d->from + 1) == k);
            if (!reads || to == from || sent[to]) continue;
            sent[to] = true;
            dr_device_copy(&t->strat.device[to], t->staging, &t->strat.device[from], k ? rp->work.act[k] : rp->x,
                           bytes);
            if (k) dr_device_copy(&t->strat.device[from], t->staging, &t->strat.device[to], rp->work.dact[k], bytes);
        }
    }
}

void dr_trainer_count_layer_copies(trainer *t, replica *rp, uint32_t n)
{
    /* The reference runs every layer in one address space; what crosses a
     * device boundary is copied here, with the sizes the placement implies:
     * activations forward, deltas backward. */
    if (t->placed && !dr_model_is_dense(&t->exp.model)) {
        count_map_copies(t, rp, n);
        return;
    }
    for (uint32_t l = 0; t->placed && l + 1 < t->exp.model.nlayers; l++) {
        dr_device *a = &t->strat.device[t->layer_dev[l]], *b = &t->strat.device[t->layer_dev[l + 1]];
        size_t bytes = (size_t)n * t->exp.model.layer[l].out * sizeof(float);
        dr_device_copy(b, t->staging, a, rp->work.act[l + 1], bytes);
        dr_device_copy(a, t->staging, b, rp->work.delta[0], bytes);
    }
}

/* ---- buffers ------------------------------------------------------------ */

/* Zero-byte buffers still get a (1-byte) allocation, so release mirrors it. */
static int alloc_on(dr_device *d, size_t bytes, void *out, dr_err *err)
{
    return dr_device_alloc(d, bytes ? bytes : 1, (void **)out, err);
}

static void release(dr_device *d, void *p, size_t bytes)
{
    if (p) dr_device_free(d, p, bytes ? bytes : 1);
}

/* Where a replica's buffers are allocated: its device, except under the
 * tpu strategy, whose cores' HBM is reserved per core (ref/tpu_step.c) and
 * backed by host memory. */
static dr_device *home(trainer *t, replica *rp)
{
    return t->tpu.on ? &t->tpu.backing : rp->dev;
}

static int alloc_replica(trainer *t, uint32_t r, uint32_t local, dr_err *err)
{
    replica *rp = &t->rep[r];
    size_t P = t->P, f = t->data->features;
    bool holds = t->strat.mirrored_variables || t->strat.num_replicas == 1;
    dr_device *h;
    int rc;
    rp->dev = &t->strat.device[t->placed ? t->layer_dev[0] : t->strat.replica_device[r]];
    h = home(t, rp);
    if ((rc = alloc_on(h, P * sizeof(float), &rp->params, err))) return rc;
    if (holds && t->strat.spec.kind != DR_STRATEGY_CENTRAL_STORAGE)
        if ((rc = alloc_on(h, P * t->nslots * sizeof(float), &rp->slots, err))) return rc;
    if ((rc = alloc_on(h, P * sizeof(dr_acc), &rp->grad, err))) return rc;
    if ((rc = alloc_on(h, (size_t)local * f * sizeof(float), &rp->x, err))) return rc;
    if (t->data->labels && (rc = alloc_on(h, local, &rp->labels, err))) return rc;
    if (t->data->targets && (rc = alloc_on(h, (size_t)local * sizeof(float), &rp->targets, err))) return rc;
    return dr_work_init(&rp->work, &t->exp.model, local, err);
}

static int alloc_all(trainer *t, dr_err *err)
{
    uint32_t R = t->strat.num_replicas, local = (t->G + R - 1) / R;
    size_t f = t->data->features, widest = 0;
    int rc;
    for (uint32_t r = 0; r < R; r++)
        if ((rc = alloc_replica(t, r, local, err))) return rc;
    if (t->strat.spec.kind == DR_STRATEGY_CENTRAL_STORAGE) {
        dr_device *vd = &t->strat.device[t->strat.variable_device];
        if ((rc = alloc_on(vd, t->P * sizeof(float), &t->var, err))) return rc;
        if ((rc = alloc_on(vd, t->P * t->nslots * sizeof(float), &t->var_slots, err))) return rc;
        if ((rc = alloc_on(vd, t->P * sizeof(dr_acc), &t->central, err))) return rc;
    }
    for (uint32_t l = 0; l < t->exp.model.nlayers; l++)
        if (t->exp.model.layer[l].out > widest) widest = t->exp.model.layer[l].out;
    if (f > widest) widest = f;   /* a model beyond Dense copies its input map too */
    t->grad = malloc(t->P * sizeof(float) + 1);
    for (uint32_t r = 0; t->cfg->gradient_accumulation_steps > 1 && r < R; r++)
        if (!(t->accum[r] = calloc(t->P, sizeof(dr_acc))))
            return dr_fail(err, DR_ENOMEM, "out of host memory for the accumulated gradients");
    t->host_x = malloc((size_t)local * f * sizeof(float) + 1);
    t->host_labels = malloc(local + 1);
    t->host_targets = malloc((size_t)local * sizeof(float) + 1);
    t->staging = malloc((size_t)local * widest * sizeof(float) + 1);
    if (!t->grad || !t->host_x || !t->host_labels || !t->host_targets || !t->staging)
        return dr_fail(err, DR_ENOMEM, "out of host memory for the batch buffers");
    return DR_OK;
}

void dr_trainer_load_batch(trainer *t, replica *rp, const uint32_t *ids, uint32_t n)
{
    dr_device *host = &t->strat.device[t->strat.input_device[rp - t->rep]];
    size_t f = t->data->features;
    dr_dataset_gather(t->data, ids, n, t->host_x, t->data->labels ? t->host_labels : NULL,
                      t->data->targets ? t->host_targets : NULL);
    /* Input is prefetched to the replica's device: an explicit, counted copy. */
    dr_device_copy(rp->dev, rp->x, host, t->host_x, (size_t)n * f * sizeof(float));
    if (rp->labels) dr_device_copy(rp->dev, rp->labels, host, t->host_labels, n);
    if (rp->targets) dr_device_copy(rp->dev, rp->targets, host, t->host_targets, (size_t)n * sizeof(float));
}

/* ---- variables: init, broadcast, resume --------------------------------- */

float *dr_trainer_params(trainer *t) { return t->var ? t->var : t->rep[0].params; }
float *dr_trainer_slots(trainer *t) { return t->var ? t->var_slots : t->rep[0].slots; }

/* Mirrored variables start equal: the first replica's values are broadcast. */
void dr_trainer_broadcast(trainer *t)
{
    for (uint32_t r = 1; t->strat.mirrored_variables && r < t->strat.num_replicas; r++) {
        dr_device_copy(t->rep[r].dev, t->rep[r].params, t->rep[0].dev, t->rep[0].params, t->P * sizeof(float));
        dr_device_copy(t->rep[r].dev, t->rep[r].slots, t->rep[0].dev, t->rep[0].slots, t->P * t->nslots * sizeof(float));
    }
}

int dr_trainer_open(trainer *t, const dr_run_plan *plan, const dr_dataset *data, dr_err *err)
{
    dr_strategy_spec spec = plan->spec;
    dr_strategy_options sopt = plan->sopt;
    int rc;
    memset(t, 0, sizeof *t);
    t->plan = plan;
    t->cfg = plan->cfg;
    t->exp = plan->exp;
    t->ops = dr_model_ops_ref();
    t->data = data;
    t->G = plan->G;
    t->P = plan->P;
    t->nslots = plan->nslots;   /* the tpu setup reserves HBM for them */
    if (spec.kind == DR_STRATEGY_TPU && (rc = dr_tpu_run_init(t, &sopt, err))) goto fail;
    if ((rc = dr_strategy_create(&spec, &sopt, &t->strat, err))) goto fail;
    if (t->tpu.on && (rc = dr_tpu_run_open(t, err))) goto fail;
    if ((rc = parse_placement(t, err)) || (rc = reserve_layers(t, err)) || (rc = alloc_all(t, err))) goto fail;
    if (plan->shard_data && !(t->sharded = malloc((size_t)t->G * sizeof *t->sharded + 4))) {
        rc = dr_fail(err, DR_ENOMEM, "out of memory for the sharded batch");
        goto fail;
    }
    dr_model_init(&t->exp.model, t->cfg->seed, dr_trainer_params(t));
    dr_trainer_broadcast(t);
    return DR_OK;
fail:
    dr_trainer_close(t);
    return rc;
}

void dr_trainer_close(trainer *t)
{
    for (uint32_t r = 0; r < t->strat.num_replicas; r++) {
        replica *rp = &t->rep[r];
        size_t f = t->data->features, local = (t->G + t->strat.num_replicas - 1) / t->strat.num_replicas;
        dr_device *h;
        if (!rp->dev) continue;
        h = home(t, rp);
        release(h, rp->params, t->P * sizeof(float));
        release(h, rp->slots, t->P * t->nslots * sizeof(float));
        release(h, rp->grad, t->P * sizeof(dr_acc));
        release(h, rp->x, local * f * sizeof(float));
        release(h, rp->labels, local);
        release(h, rp->targets, local * sizeof(float));
        dr_work_free(&rp->work);
    }
    if (t->var) {
        dr_device *vd = &t->strat.device[t->strat.variable_device];
        release(vd, t->var, t->P * sizeof(float));
        release(vd, t->var_slots, t->P * t->nslots * sizeof(float));
        release(vd, t->central, t->P * sizeof(dr_acc));
    }
    for (uint32_t l = 0; l < DR_MAX_LAYERS; l++)
        if (t->layer_bytes[l]) dr_device_unreserve(&t->strat.device[t->layer_dev[l]], t->layer_bytes[l]);
    if (t->tpu.on) dr_tpu_run_close(t);
    for (uint32_t r = 0; r < DR_MAX_DEVICES; r++) free(t->accum[r]);
    free(t->grad); free(t->host_x); free(t->host_labels); free(t->host_targets); free(t->staging);
    free(t->sharded);
    memset(t, 0, sizeof *t);
}
