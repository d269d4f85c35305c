/* distref core — a run as data (see include/distref/plan.h). */
#include "distref/plan.h"
#include "distref/cluster.h"
#include "distref/multiworker.h"
#include "distref/sha256.h"
#include "distref/shards.h"

#include <stdlib.h>
#include <string.h>

/* An optional real setting: DR_UNSET keeps the experiment's value; anything
 * else must lie in [0, max]. */
static int setting(const char *name, double v, double max, float *dst, dr_err *err)
{
    if (dr_is_unset(v)) return DR_OK;
    if (!(v >= 0 && v <= max))
        return dr_fail(err, DR_EUSAGE, "--%s: expected a value in [0, %g], got %g", name, max, v);
    *dst = (float)v;
    return DR_OK;
}

int dr_experiment_resolve(const dr_run_config *cfg, dr_experiment *exp, dr_err *err)
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
    if ((rc = setting("learning_rate", cfg->learning_rate, 1e6, &exp->optimizer.lr, err)) ||
        (rc = setting("momentum", cfg->momentum, 1, &exp->optimizer.momentum, err)) ||
        (rc = setting("l2", cfg->l2, 1e6, &m->l2, err)))
        return rc;
    if (exp->optimizer.kind == DR_OPT_ADAM && (!dr_is_unset(cfg->momentum) || cfg->nesterov))
        return dr_fail(err, DR_EUSAGE, "--%s is for --optimizer=sgd; experiment %s trains with adam",
                       cfg->nesterov ? "nesterov" : "momentum", exp->name);
    exp->optimizer.nesterov = cfg->nesterov;
    exp->optimizer.schedule = cfg->lr_schedule;
    exp->optimizer.clip = cfg->clip;
    exp->optimizer.accumulation_steps = cfg->gradient_accumulation_steps > 1 ? cfg->gradient_accumulation_steps : 1;
    if (cfg->nesterov && exp->optimizer.momentum == 0.0f)
        return dr_fail(err, DR_EUSAGE, "--nesterov needs --momentum > 0 (SGD)");
    if (!cfg->from_logits) {
        if (m->loss != DR_LOSS_XENT_LOGITS)
            return dr_fail(err, DR_EUSAGE, "--from_logits=false: experiment %s has no classification loss", exp->name);
        m->layer[m->nlayers - 1].act = DR_ACT_SOFTMAX;
        m->loss = DR_LOSS_XENT_PROBS;
    }
    return DR_OK;
}

static bool has_dropout(const dr_model_spec *m)
{
    for (uint32_t l = 0; l < m->nlayers; l++)
        if (m->layer[l].kind == DR_LAYER_DROPOUT) return true;
    return false;
}

/* --batch_norm, --dropout and what the models beyond Dense do not run with yet. */
static int model_options(const dr_run_config *cfg, dr_run_plan *p, dr_err *err)
{
    const dr_model_spec *m = &p->exp.model;
    bool bn = false, off = strcmp(cfg->dropout, "off") == 0;
    if (!off && strcmp(cfg->dropout, "model") != 0)
        return dr_fail(err, DR_EUSAGE, "--dropout: expected model or off, got '%s'", cfg->dropout);
    for (uint32_t l = 0; l < m->nlayers; l++) {
        bn |= m->layer[l].kind == DR_LAYER_BATCH_NORM;
        if (off && m->layer[l].kind == DR_LAYER_DROPOUT) {
            p->exp.model.layer[l].rate = 0.0f;
            p->dropout_off = true;
        }
    }
    if (cfg->dropout_masks[0] && (off || !has_dropout(m)))
        return dr_fail(err, DR_EUSAGE, "--dropout_masks=%s: %s", cfg->dropout_masks, off ? "--dropout=off sets "
                       "every rate to 0, so no mask is applied: give one of them" : "the model has no Dropout layer");
    if (strcmp(cfg->batch_norm, "replica") == 0) p->bn_replica = bn;
    else if (strcmp(cfg->batch_norm, "sync") != 0)
        return dr_fail(err, DR_EUSAGE, "--batch_norm: expected sync or replica, got '%s'", cfg->batch_norm);
    if (dr_model_is_dense(m)) return DR_OK;
    if (cfg->input_partition_dims[0] && p->spec.kind != DR_STRATEGY_TPU)
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: --input_partition_dims (spatial partitioning with "
                       "halos; the tpu strategy's) with a %s layer (experiment %s); models beyond Dense run the "
                       "other strategies without it so far",
                       dr_layer_kind_name(m->layer[dr_model_first_non_dense(m)].kind), p->exp.name);
    /* a mask file's rows are a synchronous step's global batch; a closure's
     * batch has no row there (docs/PARAMETER_SERVER.md) */
    if (cfg->dropout_masks[0] && p->spec.kind == DR_STRATEGY_PARAMETER_SERVER)
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: --dropout_masks with --distribution_strategy="
                       "parameter_server (a mask file's rows are the rows of a synchronous step's global batch; "
                       "a step function's Dropout is keyed by its closure and example ids)");
    if (bn && !p->bn_replica && strcmp(cfg->loss_reduction, "tf_default") == 0)
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: --loss_reduction=tf_default with --batch_norm=sync "
                       "(each replica's own divisor would weight the shared statistics' gradient unevenly); use "
                       "global_batch_size or --batch_norm=replica");
    return DR_OK;
}

int dr_load_dataset(const dr_run_config *cfg, const char *dataset, int split, dr_dataset *out, dr_err *err)
{
    if (strcmp(dataset, "toy") == 0) return dr_dataset_toy(out, err);
    if (strcmp(dataset, "wide") == 0) return dr_dataset_wide(cfg->seed + (uint64_t)split, out, err);
    if (strcmp(dataset, "synthetic") == 0) {
        uint32_t n = split ? (cfg->synthetic_examples + 3) / 4 : cfg->synthetic_examples;
        return dr_dataset_synthetic(cfg->seed, split, n, out, err);
    }
    return dr_dataset_fashion_mnist(cfg->data_dir, split, out, err);
}

/* The auto-shard policy of the strategies that distribute a dataset
 * (experimental_distribute_dataset: mirrored, central_storage,
 * multi_worker_mirrored, tpu), for one worker as for many. Measured on
 * TensorFlow 2.21 (docs/SEMANTICS.md §1): AUTO and DATA cut each global
 * batch into legacy ceil(B/N) slices; FILE, OFF and HINT keep
 * batch_sizes_for_worker. distref's synthetic and toy data are in memory
 * (from_tensor_slices: AUTO means DATA); Fashion-MNIST is read from one IDX
 * file pair (a file-based pipeline: AUTO means FILE for one worker and falls
 * back to DATA for more). */
static int input_setup(dr_run_plan *p, dr_err *err)
{
    dr_shard_policy policy;
    dr_strategy_kind k = p->spec.kind;
    uint32_t files = p->shard_files ? p->shard_files : strcmp(p->exp.dataset, "fashion_mnist") == 0 ? 1 : 0;
    uint32_t W = p->num_workers;
    int rc;
    if ((rc = dr_shard_policy_parse(p->cfg->auto_shard_policy, &policy, err))) return rc;
    if (strcmp(p->cfg->input_mode, "function") == 0) p->from_function = true;
    else if (strcmp(p->cfg->input_mode, "dataset") != 0)
        return dr_fail(err, DR_EUSAGE, "--input_mode: expected dataset or function, got '%s'", p->cfg->input_mode);
    if (k != DR_STRATEGY_MIRRORED && k != DR_STRATEGY_CENTRAL_STORAGE && k != DR_STRATEGY_MULTI_WORKER_MIRRORED &&
        k != DR_STRATEGY_TPU)
        return DR_OK;   /* one replica, or parameter_server's own per-worker input */
    if (p->from_function) {   /* the dataset_fn shards and batches itself: no auto-sharding, no rebatch */
        p->unsharded = W > 1;
        return DR_OK;
    }
    p->input_policy = DR_CKPT_POLICY_BASE + (uint32_t)policy;   /* as given: the checkpoint names the flag */
    if ((rc = dr_shard_policy_resolve(policy, files, W, &policy, err))) return rc;
    p->shard_data = policy == DR_SHARD_DATA;
    p->unsharded = policy != DR_SHARD_DATA && W > 1;
    p->file_sharded = policy == DR_SHARD_FILE && W > 1 && p->shard_files > 0;
    return DR_OK;
}

/* The shard set's identity: the SHA-256 of its index as distref writes it
 * (sha256sum of an exported shards.json), which holds every file's SHA-256. */
static int shards_digest(const dr_shard_index *ix, uint8_t out[32], dr_err *err)
{
    char *text = dr_shard_index_format(ix);
    dr_sha256_ctx h;
    if (!text) return dr_fail(err, DR_ENOMEM, "--dataset_shards: no memory for its index");
    dr_sha256_init(&h);
    dr_sha256_update(&h, text, strlen(text));
    dr_sha256_final(&h, out);
    free(text);
    return DR_OK;
}

/* parameter_server reads every shard file (its own per-worker input): only
 * the set's identity, for its checkpoints. */
static int ps_shards_digest(const dr_run_config *cfg, dr_run_plan *p, dr_err *err)
{
    dr_shard_index ix;
    int rc;
    if (!cfg->dataset_shards[0]) return DR_OK;
    if ((rc = dr_shard_index_load(cfg->dataset_shards, &ix, NULL, err))) return rc;
    rc = shards_digest(&ix, p->shards_sha256, err);
    dr_shard_index_free(&ix);
    return rc;
}

/* --dataset_shards: the index names the experiment's dataset; its file
 * count decides FILE (and AUTO) sharding. */
static int shards_setup(const dr_run_config *cfg, dr_run_plan *p, dr_err *err)
{
    dr_shard_index ix;
    int rc;
    if (!cfg->dataset_shards[0]) return DR_OK;
    if (strcmp(p->exp.dataset, "synthetic") && strcmp(p->exp.dataset, "fashion_mnist"))
        return dr_fail(err, DR_EUSAGE, "--dataset_shards with --experiment=%s: its %s data are not byte images; "
                       "shards hold synthetic or fashion_mnist", p->exp.name, p->exp.dataset);
    if ((rc = dr_shard_index_load(cfg->dataset_shards, &ix, NULL, err))) return rc;
    if ((rc = shards_digest(&ix, p->shards_sha256, err))) { dr_shard_index_free(&ix); return rc; }
    if (strcmp(ix.dataset, p->exp.dataset))
        rc = dr_fail(err, DR_EUSAGE, "--dataset_shards=%s: " DR_SHARDS_INDEX " holds the %s dataset, --experiment=%s "
                     "trains on %s", cfg->dataset_shards, ix.dataset, p->exp.name, p->exp.dataset);
    p->shard_files = ix.nfiles;
    dr_shard_index_free(&ix);
    return rc;
}

int dr_load_training_set(const dr_run_plan *p, uint32_t w, dr_dataset *out, dr_shard_reads *reads, dr_err *err)
{
    if (reads) memset(reads, 0, sizeof *reads);
    if (!p->cfg->dataset_shards[0]) return dr_load_dataset(p->cfg, p->exp.dataset, 0, out, err);
    /* FILE over W workers: this worker's files; otherwise (DATA, OFF, one worker) all of them */
    if (!p->file_sharded) w = DR_SHARDS_ALL;
    return dr_shards_load(p->cfg->dataset_shards, p->exp.dataset, p->num_workers, w, out, reads, err);
}

/* TF_CONFIG and, for multi_worker_mirrored, the workers and the packing
 * (CommunicationOptions(bytes_per_pack): floats per pack). */
static int cluster_setup(dr_run_plan *p, dr_err *err)
{
    const dr_run_config *cfg = p->cfg;
    dr_cluster cl;
    int rc = dr_cluster_parse(cfg->tf_config, &cl, err);
    if (rc) return rc;
    if (cl.has_task) rc = dr_cluster_check(&cl, p->spec.kind, err);
    p->num_workers = dr_cluster_worker_count(&cl);
    dr_cluster_free(&cl);
    if (rc || p->spec.kind != DR_STRATEGY_MULTI_WORKER_MIRRORED) {
        p->num_workers = 1;
        return rc;
    }
    p->sopt.num_workers = p->num_workers;
    if (cfg->bytes_per_pack) {
        uint64_t per = cfg->bytes_per_pack / sizeof(float);
        uint64_t packs = per ? (p->P + per - 1) / per : p->P;
        p->spec.num_packs = (int)(packs < 1 ? 1 : packs > (1u << 20) ? (1u << 20) : packs);
    }
    return DR_OK;
}

/* --gradient_accumulation_steps=k: an update every k steps, over all their
 * examples (docs/TRAINING_FEATURES.md). Updates must fall on the run's
 * checkpoints and end, and the k steps' common denominator must be one;
 * --clip_semantics=tensorflow then clips at the update (clip.at_update). */
static int accumulation_check(const dr_run_config *cfg, dr_run_plan *p, dr_err *err)
{
    uint32_t k = cfg->gradient_accumulation_steps;
    if (k <= 1) return DR_OK;
    if (p->spec.kind == DR_STRATEGY_PARAMETER_SERVER)
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: --gradient_accumulation_steps under parameter_server: "
                       "Keras 3, whose gradient_accumulation_steps distref reproduces, does not support "
                       "ParameterServerStrategy (keras-team/keras#18624), and each worker's updates land on their "
                       "own, so there is no common step to accumulate over");
    if (!cfg->train_steps || cfg->train_steps % k)
        return dr_fail(err, DR_EUSAGE, "--gradient_accumulation_steps=%u needs --train_steps, a multiple of it (got "
                       "%llu): the run must end on an update", k, (unsigned long long)cfg->train_steps);
    if (cfg->checkpoint_every % k)
        return dr_fail(err, DR_EUSAGE, "--checkpoint_every=%llu: a multiple of --gradient_accumulation_steps=%u "
                       "(a checkpoint falls on an update)", (unsigned long long)cfg->checkpoint_every, k);
    if (p->divide_by_count || p->divide_locally)
        return dr_fail(err, DR_EUSAGE, "--gradient_accumulation_steps with --loss_reduction=%s: the k steps need one "
                       "divisor; use global_batch_size", cfg->loss_reduction);
    /* --clip_semantics=tensorflow: Keras 3's eager loop under MirroredStrategy
     * clips each replica's mean of its own k micro-steps at the update, before
     * the all-reduce (scripts/tf_accum_clip.py); measured for float32 only */
    if (p->exp.optimizer.clip.per_replica && cfg->mixed.compute != DR_DTYPE_F32)
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: --gradient_accumulation_steps with "
                       "--clip_semantics=tensorflow and --dtype_policy=mixed_%s: where Keras 3's LossScaleOptimizer "
                       "unscales, checks and clips an accumulated mixed gradient per replica was not measured; use "
                       "--clip_semantics=exact", dr_dtype_name(cfg->mixed.compute));
    p->exp.optimizer.clip.at_update = p->exp.optimizer.clip.per_replica;
    return DR_OK;
}

int dr_run_plan_make(const dr_run_config *cfg, dr_run_plan *p, dr_err *err)
{
    int rc;
    memset(p, 0, sizeof *p);
    p->cfg = cfg;
    if ((rc = dr_experiment_resolve(cfg, &p->exp, err))) return rc;
    p->exact = strcmp(cfg->numerics, "exact") == 0;
    if (!p->exact && strcmp(cfg->numerics, "fast") != 0)
        return dr_fail(err, DR_EUSAGE, "--numerics: expected exact or fast, got '%s'", cfg->numerics);
    p->G = cfg->global_batch_size ? cfg->global_batch_size : p->exp.global_batch;
    p->epochs = cfg->epochs ? cfg->epochs : p->exp.epochs;
    p->P = dr_model_num_params(&p->exp.model);
    p->nslots = dr_optimizer_num_slots(&p->exp.optimizer);
    p->spec = cfg->strategy;
    p->sopt = cfg->memory;
    p->num_workers = 1;
    p->input_policy = DR_CKPT_POLICY_NONE;   /* until input_setup applies one */
    p->ntensors = dr_model_tensors(&p->exp.model, p->tensor_len, 4 * DR_MAX_LAYERS);
    if ((rc = model_options(cfg, p, err))) return rc;
    if (cfg->input_partition_dims[0] && p->spec.kind != DR_STRATEGY_TPU && p->spec.kind != DR_STRATEGY_PARAMETER_SERVER)
        return dr_fail(err, DR_EUSAGE, "--input_partition_dims: spatial partitioning needs "
                       "--distribution_strategy=tpu, not %s", dr_strategy_kind_name(p->spec.kind));
    if (strcmp(cfg->loss_reduction, "examples_in_step") == 0) p->divide_by_count = true;
    else if (strcmp(cfg->loss_reduction, "tf_default") == 0) p->divide_locally = true;
    else if (strcmp(cfg->loss_reduction, "global_batch_size") != 0)
        return dr_fail(err, DR_EUSAGE, "--loss_reduction: expected global_batch_size, examples_in_step or tf_default, "
                       "got '%s'", cfg->loss_reduction);
    if ((rc = accumulation_check(cfg, p, err))) return rc;
    if (p->spec.kind == DR_STRATEGY_PARAMETER_SERVER) {   /* its cluster is the ps run's */
        dr_shard_policy policy;
        if ((rc = dr_shard_policy_parse(cfg->auto_shard_policy, &policy, err))) return rc;
        return ps_shards_digest(cfg, p, err);
    }
    if ((rc = shards_setup(cfg, p, err))) return rc;
    if ((rc = cluster_setup(p, err))) return rc;
    return input_setup(p, err);
}

void dr_plan_checkpoint_settings(const dr_run_plan *p, dr_checkpoint *c)
{
    const dr_optimizer *o = &p->exp.optimizer;
    c->learning_rate = o->lr;
    c->momentum = o->momentum;
    c->l2 = p->exp.model.l2;
    c->flags = (p->cfg->shuffle ? DR_CKPT_SHUFFLE : 0) | (p->cfg->drop_remainder ? DR_CKPT_DROP_REMAINDER : 0) |
               (o->nesterov ? DR_CKPT_NESTEROV : 0) | (p->exact ? 0 : DR_CKPT_FAST_NUMERICS) |
               (p->bn_replica ? DR_CKPT_BN_REPLICA : 0) | (p->dropout_off ? DR_CKPT_DROPOUT_OFF : 0) |
               (p->cfg->dropout_masks[0] ? DR_CKPT_DROPOUT_MASKS : 0);
    c->loss_reduction = p->divide_locally ? 2 : p->divide_by_count ? 1 : 0;
    c->schedule = o->schedule;   /* only the parameters its kind reads (the rest at their defaults) */
    if (o->schedule.kind != DR_LR_POLYNOMIAL) c->schedule.end_learning_rate = c->schedule.power = 0.0f;
    if (o->schedule.kind != DR_LR_COSINE) c->schedule.alpha = 0.0f;
    if (o->schedule.kind != DR_LR_EXPONENTIAL) c->schedule.decay_rate = 0.0f;
    if (o->schedule.kind == DR_LR_CONSTANT || o->schedule.kind == DR_LR_PIECEWISE) c->schedule.decay_steps = 0;
    c->clip = o->clip;
    c->accumulation_steps = p->cfg->gradient_accumulation_steps > 1 ? p->cfg->gradient_accumulation_steps : 1;
    c->mixed_dtype = (uint32_t)p->cfg->mixed.compute;
    c->loss_scale_kind = (uint32_t)p->cfg->mixed.loss_scale;
    c->loss_scale_value = p->cfg->mixed.loss_scale == DR_LOSS_SCALE_NONE ? 0.0f : p->cfg->mixed.fixed_scale;
    c->mixed_tf_reduction = p->cfg->mixed.compute != DR_DTYPE_F32 && p->cfg->mixed.tf_reduction;
    c->ls_growth_steps = p->cfg->mixed.loss_scale == DR_LOSS_SCALE_DYNAMIC ? p->cfg->mixed.growth_steps : 0;
    c->input_policy = p->input_policy;
    memcpy(c->shards_sha256, p->shards_sha256, sizeof c->shards_sha256);
}

uint32_t dr_plan_divisor(const dr_run_plan *p, uint32_t count)
{
    return p->divide_by_count || p->divide_locally ? count : p->G;
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) { uint64_t t = a % b; a = b; b = t; }
    return a;
}

int dr_plan_step_scale(const dr_run_plan *p, const uint32_t *sizes, uint32_t R, uint32_t count, uint32_t *mult,
                       uint32_t *coef, uint32_t *den, dr_err *err)
{
    uint64_t L = 1;
    if (!p->divide_locally) {
        uint32_t D = dr_plan_divisor(p, count);
        for (uint32_t r = 0; r < R; r++) mult[r] = R;
        *coef = D;
        *den = D * R;
        return DR_OK;
    }
    for (uint32_t r = 0; r < R; r++) {
        if (sizes[r]) L = L / gcd64(L, sizes[r]) * sizes[r];
        if (L * R > (1u << 30))
            return dr_fail(err, DR_EUNSUPPORTED, "--loss_reduction=tf_default: the replicas' batch sizes need a "
                           "common denominator (their lcm %llu times %u replicas) above 2^30; use "
                           "global_batch_size", (unsigned long long)L, R);
    }
    for (uint32_t r = 0; r < R; r++) mult[r] = sizes[r] ? (uint32_t)(L / sizes[r]) : 1;
    *coef = (uint32_t)L;
    *den = (uint32_t)L * R;
    return DR_OK;
}
