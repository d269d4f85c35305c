/* distref core — the experiments by name and the run defaults. */
#include "distref/train.h"

#include <string.h>

static const dr_experiment experiments[] = {
    /* The guide's toy: Dense(1), MSE, SGD, dataset of [1.] -> [1.] x 100, batch 10. */
    { "linear_ones", "toy",
      { .nlayers = 1, .layer = { { .in = 1, .out = 1, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_MSE, .l2 = 0.0f },
      10, 2, { DR_OPT_SGD, 0.01f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 } },
    /* Exact reductions under extreme dynamic range: Dense(1) on 8 features
     * spanning 2^-60 .. 2^60 (dr_dataset_wide), MSE, SGD at 2^-120. */
    { "linear_wide", "wide",
      { .nlayers = 1, .layer = { { .in = 8, .out = 1, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_MSE, .l2 = 0.0f },
      32, 1, { DR_OPT_SGD, 0x1p-120f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 } },
    /* The default: 784-128-10 on the embedded synthetic data. */
    { "mlp_synthetic", "synthetic",
      { .nlayers = 2, .layer = { { .in = 784, .out = 128, .act = DR_ACT_RELU }, { .in = 128, .out = 10, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_XENT_LOGITS, .l2 = 0.0f },
      64, 3, { DR_OPT_SGD, 0.01f, 0.9f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 } },
    /* The seeds' Keras MNIST model on Fashion-MNIST: Adam 0.001. */
    { "mlp_fashion_mnist", "fashion_mnist",
      { .nlayers = 2, .layer = { { .in = 784, .out = 128, .act = DR_ACT_RELU }, { .in = 128, .out = 10, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_XENT_LOGITS, .l2 = 0.0f },
      64, 10, { DR_OPT_ADAM, 0.001f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 } },
    /* Small and fast, every layer kind but GlobalAveragePooling2D in one model
     * (docs/MODELS.md): 28x28x1 -> Conv2D(4, 3, stride 2, same) -> BN+ReLU ->
     * Conv2D(4, 3, same, ReLU) -> Add(BN's output) -> MaxPool -> Conv2D(8, 1, ReLU)
     * -> Conv2D(8, 3, stride 2, valid) -> Flatten -> Dropout(0.25) -> Dense(10). */
    { "cnn_synthetic", "synthetic",
      { .nlayers = 10, .layer = { { .kind = DR_LAYER_CONV2D, .filters = 4, .ksize = 3, .stride = 2, .same = true },
              { .kind = DR_LAYER_BATCH_NORM, .act = DR_ACT_RELU },
              { .kind = DR_LAYER_CONV2D, .filters = 4, .ksize = 3, .stride = 1, .same = true, .act = DR_ACT_RELU },
              { .kind = DR_LAYER_ADD, .from = 1 },
              { .kind = DR_LAYER_MAX_POOL2D },
              { .kind = DR_LAYER_CONV2D, .filters = 8, .ksize = 1, .stride = 1, .act = DR_ACT_RELU },
              { .kind = DR_LAYER_CONV2D, .filters = 8, .ksize = 3, .stride = 2 },
              { .kind = DR_LAYER_FLATTEN },
              { .kind = DR_LAYER_DROPOUT, .rate = 0.25f },
              { .kind = DR_LAYER_DENSE, .out = 10 } },
        .loss = DR_LOSS_XENT_LOGITS, .l2 = 0.0f, .in_h = 28, .in_w = 28, .in_c = 1 },
      32, 1, { DR_OPT_SGD, 0.01f, 0.9f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 } },
    /* TensorFlow's distributed-training tutorial: Conv2D(32, 3, ReLU) ->
     * MaxPooling2D -> Flatten -> Dense(64, ReLU) -> Dense(10), Adam 0.001;
     * 347,146 parameters. */
    { "cnn_fashion_mnist", "fashion_mnist",
      { .nlayers = 5, .layer = { { .kind = DR_LAYER_CONV2D, .filters = 32, .ksize = 3, .stride = 1, .act = DR_ACT_RELU },
             { .kind = DR_LAYER_MAX_POOL2D },
             { .kind = DR_LAYER_FLATTEN },
             { .kind = DR_LAYER_DENSE, .out = 64, .act = DR_ACT_RELU },
             { .kind = DR_LAYER_DENSE, .out = 10 } },
        .loss = DR_LOSS_XENT_LOGITS, .l2 = 0.0f, .in_h = 28, .in_w = 28, .in_c = 1 },
      64, 12, { DR_OPT_ADAM, 0.001f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 } },
    /* The small ResNet (core/experiment_resnet.c, built at lookup): widths 4, 8, 16
     * for tests; 16, 32, 64 on Fashion-MNIST. Adam 0.001. */
    { "resnet_synthetic", "synthetic", { .nlayers = 0 },
      32, 1, { DR_OPT_ADAM, 0.001f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 } },
    { "resnet_fashion_mnist", "fashion_mnist", { .nlayers = 0 },
      64, 10, { DR_OPT_ADAM, 0.001f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 } },
};

const char *dr_experiment_name(size_t i)
{
    return i < sizeof experiments / sizeof experiments[0] ? experiments[i].name : NULL;
}

int dr_experiment_lookup(const char *name, dr_experiment *out, dr_err *err)
{
    for (size_t i = 0; i < sizeof experiments / sizeof experiments[0]; i++) {
        if (strcmp(name, experiments[i].name) == 0) {
            *out = experiments[i];
            if (out->model.nlayers == 0) dr_resnet_spec(&out->model, strcmp(name, "resnet_synthetic") == 0 ? 4 : 16);
            return dr_model_derive(&out->model, err);
        }
    }
    return dr_fail(err, DR_EUSAGE, "--experiment: unknown experiment '%s'; expected one of "
                   "linear_ones, linear_wide, mlp_synthetic, mlp_fashion_mnist, cnn_synthetic, "
                   "cnn_fashion_mnist, resnet_synthetic, resnet_fashion_mnist", name);
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
    strcpy(c->batch_norm, "sync");
    strcpy(c->dropout, "model");
}
