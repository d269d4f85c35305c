/* distref reference — setting up a run: experiment, data, devices, buffers,
 * placement and resume. The step itself is in train.c. */
#include "ref/trainer.h"
#include "distref/checkpoint.h"
#include "distref/fileio.h"
#include "distref/engine.h"
#include "distref/cluster.h"

#include <omp.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

double dr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int dr_trainer_resolve(const dr_run_config *cfg, dr_experiment *exp, dr_err *err)
{
    dr_model_spec *m;
    int rc = dr_experiment_lookup(cfg->experiment, exp, err);
    if (rc) return rc;
    m = &exp->model;
    if (cfg->optimizer[0]) {
        if (strcmp(cfg->optimizer, "sgd") == 0) exp->optimizer.kind = DR_OPT_SGD;
        else if (strcmp(cfg->optimizer, "adam") == 0) exp->optimizer.kind = DR_OPT_ADAM;
        else return dr_fail(err, DR_EUSAGE, "--optimizer: expected sgd or adam, got '%s'", cfg->optimizer);
        if (exp->optimizer.kind == DR_OPT_ADAM) exp->optimizer.momentum = 0.0f;
    }
    if (cfg->learning_rate >= 0) exp->optimizer.lr = (float)cfg->learning_rate;
    if (cfg->momentum >= 0) exp->optimizer.momentum = (float)cfg->momentum;
    exp->optimizer.nesterov = cfg->nesterov;
    if (cfg->nesterov && exp->optimizer.momentum == 0.0f)
        return dr_fail(err, DR_EUSAGE, "--nesterov needs --momentum > 0 (SGD)");
    if (cfg->l2 >= 0) m->l2 = (float)cfg->l2;
    if (!cfg->from_logits) {
        if (m->loss != DR_LOSS_XENT_LOGITS)
            return dr_fail(err, DR_EUSAGE, "--from_logits=false: experiment %s has no classification loss", exp->name);
        m->layer[m->nlayers - 1].act = DR_ACT_SOFTMAX;
        m->loss = DR_LOSS_XENT_PROBS;
    }
    return DR_OK;
}

void openblas_set_num_threads(int);   /* OpenBLAS extension */

int dr_trainer_ops(const dr_run_config *cfg, const dr_model_ops **ops, bool *engine, dr_err *err)
{
    bool exact = strcmp(cfg->numerics, "exact") == 0;
    if (!exact && strcmp(cfg->numerics, "fast") != 0)
        return dr_fail(err, DR_EUSAGE, "--numerics: expected exact or fast, got '%s'", cfg->numerics);
    if (strcmp(cfg->variant, "ref") == 0) {
        if (!exact) return dr_fail(err, DR_EUSAGE, "--numerics=fast: the reference is exact only; "
                                   "use --variant=openmp");
        *ops = dr_model_ops_ref();
        *engine = false;
        return DR_OK;
    }
    if (strcmp(cfg->variant, "openmp") == 0) {
        *ops = exact ? dr_openmp_ops_exact() : dr_openmp_ops_fast();
        *engine = true;
        return DR_OK;
    }
    if (strcmp(cfg->variant, "opencl") == 0 || strcmp(cfg->variant, "mpi") == 0)
        return dr_fail(err, DR_EUNSUPPORTED, "--variant=%s: not built yet (ref and openmp are)", cfg->variant);
    return dr_fail(err, DR_EUSAGE, "--variant: expected ref or openmp, got '%s'", cfg->variant);
}

int dr_trainer_load_data(const dr_run_config *cfg, const char *dataset, int split,
                         dr_dataset *out, dr_err *err)
{
    if (strcmp(dataset, "toy") == 0) return dr_dataset_toy(out, err);
    if (strcmp(dataset, "synthetic") == 0) {
        uint32_t n = split ? (cfg->synthetic_examples + 3) / 4 : cfg->synthetic_examples;
        return dr_dataset_synthetic(cfg->seed, split, n, out, err);
    }
    return dr_dataset_fashion_mnist(cfg->data_dir, split, out, err);
}

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
    if (spec->type != DR_DEV_GPU || spec->index < s->spec.num_gpus || s->num_devices >= DR_MAX_DEVICES)
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
        if (l >= t->exp.model.nlayers) break;
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
        size_t bytes = dr_model_layer_params(&t->exp.model, l) * (sizeof(float) * (1 + (size_t)t->nslots) + sizeof(dr_acc));
        int rc = dr_device_reserve(&t->strat.device[t->layer_dev[l]], bytes, err);
        if (rc) return rc;
        t->layer_bytes[l] = bytes;   /* what close gives back */
    }
    return DR_OK;
}

void dr_trainer_count_layer_copies(trainer *t, replica *rp, uint32_t n)
{
    /* The reference runs every layer in one address space; what crosses a
     * device boundary is copied here, with the sizes the placement implies:
     * activations forward, deltas backward. */
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
    size_t P = t->P, f = t->data.features;
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
    if (t->data.labels && (rc = alloc_on(h, local, &rp->labels, err))) return rc;
    if (t->data.targets && (rc = alloc_on(h, (size_t)local * sizeof(float), &rp->targets, err))) return rc;
    return dr_work_init(&rp->work, &t->exp.model, local, err);
}

static int alloc_all(trainer *t, dr_err *err)
{
    uint32_t R = t->strat.num_replicas, local = (t->G + R - 1) / R;
    size_t f = t->data.features, widest = 0;
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
    t->grad = malloc(t->P * sizeof(float) + 1);
    t->host_x = malloc((size_t)local * f * sizeof(float) + 1);
    t->host_labels = malloc(local + 1);
    t->host_targets = malloc((size_t)local * sizeof(float) + 1);
    t->staging = malloc((size_t)local * widest * sizeof(float) + 1);
    if (!t->grad || !t->host_x || !t->host_labels || !t->host_targets || !t->staging)
        return dr_fail(err, DR_ENOMEM, "out of host memory for the batch buffers");
    /* Replicas already use the cores; BLAS threads inside them would only contend. */
    if (t->engine) openblas_set_num_threads(R > 1 ? 1 : omp_get_max_threads());
    return DR_OK;
}

void dr_trainer_load_batch(trainer *t, replica *rp, const uint32_t *ids, uint32_t n)
{
    dr_device *host = &t->strat.device[t->strat.input_device[rp - t->rep]];
    size_t f = t->data.features;
    dr_dataset_gather(&t->data, ids, n, t->host_x, t->data.labels ? t->host_labels : NULL,
                      t->data.targets ? t->host_targets : NULL);
    /* Input is prefetched to the replica's device: an explicit, counted copy. */
    dr_device_copy(rp->dev, rp->x, host, t->host_x, (size_t)n * f * sizeof(float));
    if (rp->labels) dr_device_copy(rp->dev, rp->labels, host, t->host_labels, n);
    if (rp->targets) dr_device_copy(rp->dev, rp->targets, host, t->host_targets, (size_t)n * sizeof(float));
}

/* ---- variables: init, broadcast, resume --------------------------------- */

static float *holder_params(trainer *t) { return t->var ? t->var : t->rep[0].params; }
static float *holder_slots(trainer *t) { return t->var ? t->var_slots : t->rep[0].slots; }

/* Mirrored variables start equal: the first replica's values are broadcast. */
static void broadcast_variables(trainer *t)
{
    for (uint32_t r = 1; t->strat.mirrored_variables && r < t->strat.num_replicas; r++) {
        dr_device_copy(t->rep[r].dev, t->rep[r].params, t->rep[0].dev, t->rep[0].params, t->P * sizeof(float));
        dr_device_copy(t->rep[r].dev, t->rep[r].slots, t->rep[0].dev, t->rep[0].slots, t->P * t->nslots * sizeof(float));
    }
}

static int check_field(dr_err *err, const char *dir, const char *field, int same,
                       const char *saved, const char *now)
{
    if (same) return DR_OK;
    return dr_fail(err, DR_EFORMAT, "checkpoint %s/ckpt.bin: %s is %s, this run has %s; "
                   "use another --model_dir or the same settings", dir, field, saved, now);
}

int dr_trainer_check_checkpoint(const trainer *t, const dr_checkpoint *c, dr_err *err)
{
    const char *dir = t->cfg->model_dir;
    char a[48], b[48];
    int rc = check_field(err, dir, "experiment", strcmp(c->experiment, t->exp.name) == 0, c->experiment, t->exp.name);
    snprintf(a, sizeof a, "%u parameters", c->nparams); snprintf(b, sizeof b, "%zu", t->P);
    if (!rc) rc = check_field(err, dir, "the model", c->nparams == t->P, a, b);
    snprintf(a, sizeof a, "%u slots/optimizer %u", c->nslots, c->optimizer);
    snprintf(b, sizeof b, "%d slots/optimizer %d", t->nslots, (int)t->exp.optimizer.kind);
    if (!rc) rc = check_field(err, dir, "the optimizer",
                              c->nslots == (uint32_t)t->nslots && c->optimizer == (uint32_t)t->exp.optimizer.kind, a, b);
    snprintf(a, sizeof a, "seed %llu", (unsigned long long)c->seed);
    snprintf(b, sizeof b, "seed %llu", (unsigned long long)t->cfg->seed);
    if (!rc) rc = check_field(err, dir, "the data order", c->seed == t->cfg->seed, a, b);
    snprintf(a, sizeof a, "%u", c->global_batch); snprintf(b, sizeof b, "%u", t->G);
    if (!rc) rc = check_field(err, dir, "global_batch_size", c->global_batch == t->G, a, b);
    snprintf(a, sizeof a, "%u examples", c->examples); snprintf(b, sizeof b, "%u", t->data.n);
    if (!rc) rc = check_field(err, dir, "the training set", c->examples == t->data.n, a, b);
    return rc;
}

static int resume(trainer *t, dr_err *err)
{
    dr_checkpoint c;
    bool found;
    int rc = dr_checkpoint_load(t->cfg->model_dir, &c, &found, err);
    if (rc || !found) return rc;
    rc = dr_trainer_check_checkpoint(t, &c, err);
    if (!rc && dr_dist_iter_seek(&t->it, c.epoch, c.position, c.step, err) != DR_OK)
        rc = dr_fail(err, DR_EFORMAT, "checkpoint %s/ckpt.bin: data position is invalid (%s); "
                     "nothing was loaded", t->cfg->model_dir, err->msg);
    if (!rc) {
        memcpy(holder_params(t), c.params, t->P * sizeof(float));
        memcpy(holder_slots(t), c.slots, t->P * t->nslots * sizeof(float));
        t->step = t->start_step = c.step;
        broadcast_variables(t);
    }
    dr_checkpoint_free(&c);
    return rc;
}

int dr_trainer_save(trainer *t, dr_err *err)
{
    dr_checkpoint c;
    int rc = dr_mkdirs(t->cfg->model_dir, err);
    if (rc) return rc;
    memset(&c, 0, sizeof c);
    snprintf(c.experiment, sizeof c.experiment, "%s", t->exp.name);
    c.seed = t->cfg->seed;
    c.global_batch = t->G;
    c.optimizer = (uint32_t)t->exp.optimizer.kind;
    c.step = t->step;
    c.examples = t->data.n;
    c.epoch = t->it.epoch;
    c.position = t->it.position;
    c.nparams = (uint32_t)t->P;
    c.nslots = (uint32_t)t->nslots;
    c.params = holder_params(t);
    c.slots = holder_slots(t);
    rc = dr_checkpoint_save(t->cfg->model_dir, &c, err);
    if (rc == DR_OK) {
        char path[1100];
        snprintf(path, sizeof path, "%s/metrics.jsonl", t->cfg->model_dir);
        rc = dr_write_atomic(path, t->metrics ? t->metrics : "", t->metrics_len, err);
    }
    return rc;
}

/* TF_CONFIG and, for multi_worker_mirrored, the workers, the shard policy
 * and the packing; fills *strat_opt and *spec for dr_strategy_create. */
static int cluster_setup(trainer *t, dr_strategy_spec *spec, dr_strategy_options *opt, dr_err *err)
{
    const dr_run_config *cfg = t->cfg;
    dr_cluster cl;
    dr_shard_policy policy;
    uint32_t files = strcmp(t->exp.dataset, "fashion_mnist") == 0 ? 1 : 0;
    int rc = dr_cluster_parse(cfg->tf_config, &cl, err);
    if (rc == DR_OK && cl.has_task) rc = dr_cluster_check(&cl, spec->kind, err);
    if (rc || spec->kind != DR_STRATEGY_MULTI_WORKER_MIRRORED) return rc;
    if (t->engine)
        return dr_fail(err, DR_EUNSUPPORTED, "--variant=%s: multi_worker_mirrored is not built yet in the "
                       "engine; use --variant=ref", cfg->variant);
    opt->num_workers = dr_cluster_worker_count(&cl);
    if ((rc = dr_shard_policy_parse(cfg->auto_shard_policy, &policy, err)) ||
        (rc = dr_shard_policy_resolve(policy, files, opt->num_workers, &policy, err)))
        return rc;
    t->shard_data = policy == DR_SHARD_DATA && opt->num_workers > 1;
    t->unsharded = policy == DR_SHARD_OFF && opt->num_workers > 1;
    if (cfg->bytes_per_pack) {   /* CommunicationOptions(bytes_per_pack): float gradients per pack */
        uint64_t per = cfg->bytes_per_pack / sizeof(float);
        uint64_t packs = per ? (t->P + per - 1) / per : t->P;
        spec->num_packs = (int)(packs < 1 ? 1 : packs > (1u << 20) ? (1u << 20) : packs);
    }
    return DR_OK;
}

int dr_trainer_open(trainer *t, const dr_run_config *cfg, dr_err *err)
{
    dr_strategy_spec spec;
    dr_strategy_options sopt;
    int rc;
    memset(t, 0, sizeof *t);
    t->cfg = cfg;
    t->t_start = dr_now();
    if ((rc = dr_trainer_resolve(cfg, &t->exp, err))) return rc;
    if ((rc = dr_trainer_ops(cfg, &t->ops, &t->engine, err))) return rc;
    if (t->engine && cfg->threads > 0) omp_set_num_threads(cfg->threads);
    t->G = cfg->global_batch_size ? cfg->global_batch_size : t->exp.global_batch;
    t->epochs = cfg->epochs ? cfg->epochs : t->exp.epochs;
    if ((rc = dr_trainer_load_data(cfg, t->exp.dataset, 0, &t->data, err))) return rc;
    if (cfg->drop_remainder && t->data.n < t->G) {
        rc = dr_fail(err, DR_EUSAGE, "--drop_remainder with --global_batch_size=%u: the training set has only "
                     "%u examples, so every batch would be dropped", t->G, t->data.n);
        goto fail;
    }
    t->P = dr_model_num_params(&t->exp.model);
    t->nslots = dr_optimizer_num_slots(&t->exp.optimizer);   /* the tpu setup reserves HBM for them */
    spec = cfg->strategy;
    sopt = cfg->memory;
    if ((rc = cluster_setup(t, &spec, &sopt, err))) goto fail;
    if (cfg->input_partition_dims[0] && spec.kind != DR_STRATEGY_TPU) {
        rc = dr_fail(err, DR_EUSAGE, "--input_partition_dims: spatial partitioning needs "
                     "--distribution_strategy=tpu, not %s", dr_strategy_kind_name(spec.kind));
        goto fail;
    }
    if (spec.kind == DR_STRATEGY_TPU && (rc = dr_tpu_run_init(t, &sopt, err))) goto fail;
    if ((rc = dr_strategy_create(&spec, &sopt, &t->strat, err))) goto fail;
    if (t->tpu.on && (rc = dr_tpu_run_open(t, err))) goto fail;
    for (uint32_t l = 0; l < t->exp.model.nlayers; l++) {
        t->tensor_len[t->ntensors++] = (size_t)t->exp.model.layer[l].in * t->exp.model.layer[l].out;
        t->tensor_len[t->ntensors++] = t->exp.model.layer[l].out;
    }
    if ((rc = parse_placement(t, err)) || (rc = reserve_layers(t, err)) || (rc = alloc_all(t, err))) goto fail;
    /* DATA sharding arranges each global batch itself: the iterator only batches. */
    if ((rc = dr_dist_iter_init(&t->it, t->data.n, t->G, t->shard_data ? 1 : t->strat.num_replicas,
                                cfg->seed, cfg->shuffle, cfg->drop_remainder, err))) goto fail;
    if (t->unsharded && (rc = dr_dist_iter_unsharded(&t->it, t->strat.num_workers, err))) goto fail;
    if (t->shard_data && !(t->sharded = malloc((size_t)t->G * sizeof *t->sharded + 4))) {
        rc = dr_fail(err, DR_ENOMEM, "out of memory for the sharded batch");
        goto fail;
    }
    dr_model_init(&t->exp.model, cfg->seed, holder_params(t));
    broadcast_variables(t);
    if ((rc = dr_trainer_load_metrics(t, err)) || (rc = resume(t, err))) goto fail;
    dr_trainer_trim_metrics(t);
    return DR_OK;
fail:
    dr_trainer_close(t);
    return rc;
}

void dr_trainer_close(trainer *t)
{
    for (uint32_t r = 0; r < t->strat.num_replicas; r++) {
        replica *rp = &t->rep[r];
        size_t f = t->data.features, local = (t->G + t->strat.num_replicas - 1) / t->strat.num_replicas;
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
    free(t->grad); free(t->host_x); free(t->host_labels); free(t->host_targets); free(t->staging);
    free(t->metrics);
    free(t->sharded);
    if (t->summary_extra) json_object_put(t->summary_extra);
    dr_dist_iter_free(&t->it);
    dr_dataset_free(&t->data);
    memset(t, 0, sizeof *t);
}
