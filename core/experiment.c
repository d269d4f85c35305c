/* distref core — the experiments by name and the run defaults. */
#include "distref/train.h"

#include <string.h>

static const dr_experiment experiments[] = {
    /* The guide's toy: Dense(1), MSE, SGD, dataset of [1.] -> [1.] x 100, batch 10. */
    { "linear_ones", "toy",
      { 1, { { 1, 1, DR_ACT_LINEAR } }, DR_LOSS_MSE, 0.0f },
      10, 2, { DR_OPT_SGD, 0.01f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false }, 1 } },
    /* Exact reductions under extreme dynamic range: Dense(1) on 8 features
     * spanning 2^-60 .. 2^60 (dr_dataset_wide), MSE, SGD at 2^-120. */
    { "linear_wide", "wide",
      { 1, { { 8, 1, DR_ACT_LINEAR } }, DR_LOSS_MSE, 0.0f },
      32, 1, { DR_OPT_SGD, 0x1p-120f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false }, 1 } },
    /* The default: 784-128-10 on the embedded synthetic data. */
    { "mlp_synthetic", "synthetic",
      { 2, { { 784, 128, DR_ACT_RELU }, { 128, 10, DR_ACT_LINEAR } }, DR_LOSS_XENT_LOGITS, 0.0f },
      64, 3, { DR_OPT_SGD, 0.01f, 0.9f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false }, 1 } },
    /* The seeds' Keras MNIST model on Fashion-MNIST: Adam 0.001. */
    { "mlp_fashion_mnist", "fashion_mnist",
      { 2, { { 784, 128, DR_ACT_RELU }, { 128, 10, DR_ACT_LINEAR } }, DR_LOSS_XENT_LOGITS, 0.0f },
      64, 10, { DR_OPT_ADAM, 0.001f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false }, 1 } },
};

const char *dr_experiment_name(size_t i)
{
    return i < sizeof experiments / sizeof experiments[0] ? experiments[i].name : NULL;
}

int dr_experiment_lookup(const char *name, dr_experiment *out, dr_err *err)
{
    for (size_t i = 0; i < sizeof experiments / sizeof experiments[0]; i++) {
        if (strcmp(name, experiments[i].name) == 0) { *out = experiments[i]; return DR_OK; }
    }
    return dr_fail(err, DR_EUSAGE, "--experiment: unknown experiment '%s'; expected one of "
                   "linear_ones, linear_wide, mlp_synthetic, mlp_fashion_mnist", name);
}

void dr_run_config_defaults(dr_run_config *c)
{
    memset(c, 0, sizeof *c);
    strcpy(c->experiment, "mlp_synthetic");
    c->strategy.kind = DR_STRATEGY_ONE_DEVICE;
    c->strategy.num_packs = 1;
    c->memory.gpu_memory_bytes = (uint64_t)16 << 30;
    c->learning_rate = DR_UNSET;
    c->momentum = DR_UNSET;
    c->l2 = DR_UNSET;
    c->seed = 42;
    c->from_logits = true;
    strcpy(c->data_dir, "/usr/share/datasets/fashion-mnist");
    c->synthetic_examples = 20000;
    c->shuffle = true;
    strcpy(c->auto_shard_policy, "auto");
    strcpy(c->loss_reduction, "global_batch_size");
    strcpy(c->input_mode, "dataset");
    strcpy(c->variant, "ref");
    strcpy(c->numerics, "exact");
    strcpy(c->schedule, "seeded");
    c->opencl_platform = -1;
    c->opencl_device[0] = 0;
    c->opencl_mapping[0] = 0;
    c->tpu_hbm_scale = 1.0;
    c->staleness = 2;
}
