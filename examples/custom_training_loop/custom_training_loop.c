/* The distributed training guide's custom training loop, in distref's C API.
 *
 * TensorFlow (seeds/001, "Use tf.distribute.Strategy with custom training
 * loops"): a Dense(1) model with an L2 kernel regularizer, SGD, a dataset of
 * ([1.], [1.]) x 1000 batched by the global batch size, BinaryCrossentropy
 * from logits with reduction NONE, train_step under strategy.run and the
 * per-replica losses added with strategy.reduce(SUM). Each block below is
 * headed by the Python it stands for; examples/custom_training_loop/README.md
 * sets the two side by side.
 *
 *   custom_training_loop [--num_gpus=N] [--global_batch_size=G] [--print_every=K]
 *
 * Prints the strategy, each printed step's loss with its bits and the
 * per-replica batch sizes, and the final weights with their SHA-256, which
 * is the same for every N (the point of distref: examples/README.md).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distref/elem.h"
#include "distref/error.h"
#include "distref/factory.h"
#include "distref/input.h"
#include "distref/model.h"
#include "distref/sha256.h"
#include "distref/strategy.h"
#include "distref/strategy_scaled.h"

#define MAX_BATCH     1000
#define NUM_EXAMPLES  1000          /* .repeat(1000) */
#define L2_FACTOR     1e-4f         /* kernel_regularizer=tf.keras.regularizers.L2(1e-4) */
#define LEARNING_RATE 0.01f         /* tf.keras.optimizers.SGD(): learning_rate=0.01 */

/* A Dense(1) layer's variables: kernel (1 x 1) and bias, in distref's flat
 * layout (distref/model.h). One copy per replica: mirrored variables. */
typedef struct dense1 { float params[2]; } dense1;
enum { KERNEL = 0, BIAS = 1, NUM_VARS = 2 };

typedef struct mirrored_model {
    dense1 replica[DR_MAX_DEVICES - 1];
} mirrored_model;

/* What strategy.run hands train_step, and what it returns per replica. */
typedef struct step_io {
    const dr_dist_batch *dist_inputs;
    mirrored_model      *model;
    uint32_t             global_batch_size;
    dr_scaled            per_replica_loss[DR_MAX_DEVICES - 1];
    dr_scaled            per_replica_grad[DR_MAX_DEVICES - 1][NUM_VARS];
} step_io;

/* The dataset: tf.data.Dataset.from_tensors(([1.], [1.])).repeat(1000):
 * every element is feature 1, label 1. */
static void dataset_element(uint32_t id, float *feature, float *label)
{
    (void)id;
    *feature = 1.0f;
    *label = 1.0f;
}

/* tf.keras.losses.BinaryCrossentropy(from_logits=True, reduction=NONE) on
 * one example, as sigmoid_cross_entropy_with_logits writes it:
 * max(x, 0) - x * z + log(1 + exp(-|x|)). */
static float binary_crossentropy_from_logits(float z, float x)
{
    float relu = x > 0.0f ? x : 0.0f;
    float absx = x < 0.0f ? -x : x;
    return (relu - x * z) + dr_logf(1.0f + dr_expf(-absx));
}

/* Its derivative in the logit: sigmoid(x) - z. */
static float binary_crossentropy_grad(float z, float x)
{
    return 1.0f / (1.0f + dr_expf(-x)) - z;
}

/* def train_step(inputs): */
static int train_step(const dr_replica_ctx *ctx, void *arg, dr_err *err)
{
    step_io *io = arg;
    uint32_t r = ctx->replica_id_in_sync_group;
    const dr_dist_batch *inputs = io->dist_inputs;
    const float *w = io->model->replica[r].params;
    float features[MAX_BATCH] = { 0 }, labels[MAX_BATCH] = { 0 }, predictions[MAX_BATCH] = { 0 },
          per_example_loss[MAX_BATCH] = { 0 };

    /*   features, labels = inputs */
    uint32_t n = inputs->offset[r + 1] - inputs->offset[r];
    if (n > MAX_BATCH) return dr_fail(err, DR_EUSAGE, "batch of %u examples: at most %u", n, MAX_BATCH);
    for (uint32_t i = 0; i < n; i++)
        dataset_element(inputs->ids[inputs->offset[r] + i], &features[i], &labels[i]);

    /*   with tf.GradientTape() as tape:
     *     predictions = model(features, training=True) */
    for (uint32_t i = 0; i < n; i++)
        predictions[i] = features[i] * w[KERNEL] + w[BIAS];
    /*     per_example_loss = loss_object(labels, predictions) */
    for (uint32_t i = 0; i < n; i++)
        per_example_loss[i] = binary_crossentropy_from_logits(labels[i], predictions[i]);
    /*     loss = tf.nn.compute_average_loss(per_example_loss,
     *                                       global_batch_size=GLOBAL_BATCH_SIZE) */
    dr_scaled loss = dr_compute_average_loss(ctx, per_example_loss, n, io->global_batch_size);
    /*     model_losses = model.losses
     *     if model_losses:
     *       loss += tf.nn.scale_regularization_loss(tf.add_n(model_losses)) */
    float model_losses = L2_FACTOR * (w[KERNEL] * w[KERNEL]);
    dr_scaled reg = dr_scale_regularization_loss(ctx, model_losses);
    dr_scaled_add(&loss, &reg);

    /*   gradients = tape.gradient(loss, model.trainable_variables)
     * by hand: d loss / d logit_i = (sigmoid(logit_i) - label_i) / G, summed
     * exactly over this replica's examples; the regularizer adds
     * 2 * 1e-4 * kernel / R. Exact values, like the loss. */
    dr_scaled *g = io->per_replica_grad[r];
    dr_scaled_init(&g[KERNEL], io->global_batch_size);
    dr_scaled_init(&g[BIAS], io->global_batch_size);
    for (uint32_t i = 0; i < n; i++) {
        float dlogit = binary_crossentropy_grad(labels[i], predictions[i]);
        dr_acc_add_prod(&g[KERNEL].num, dlogit, features[i]);
        dr_acc_add(&g[BIAS].num, dlogit);
    }
    dr_scaled dreg = dr_scale_regularization_loss(ctx, (2.0f * L2_FACTOR) * w[KERNEL]);
    dr_scaled_add(&g[KERNEL], &dreg);

    /*   return loss */
    io->per_replica_loss[r] = loss;
    return DR_OK;
}

/* optimizer.apply_gradients(zip(gradients, model.trainable_variables)):
 * under a strategy it "performs a sum-over-all-replicas of the gradients"
 * first. distref's replicas run one after another, so the sum happens here,
 * after strategy.run, once per variable: exact, rounded once, then SGD's
 * var -= lr * grad on every replica's copy. */
static int apply_gradients(const dr_strategy *strategy, step_io *io, dr_err *err)
{
    for (int v = 0; v < NUM_VARS; v++) {
        dr_scaled per_replica[DR_MAX_DEVICES - 1], sum;
        for (uint32_t r = 0; r < strategy->num_replicas; r++) per_replica[r] = io->per_replica_grad[r][v];
        int rc = dr_strategy_reduce_scaled(strategy, DR_REDUCE_SUM, per_replica, &sum, err);
        if (rc != DR_OK) return rc;
        float grad = dr_scaled_round(&sum);
        for (uint32_t r = 0; r < strategy->num_replicas; r++)
            io->model->replica[r].params[v] -= LEARNING_RATE * grad;
    }
    return DR_OK;
}

/* def distributed_train_step(dist_inputs):
 *   per_replica_losses = mirrored_strategy.run(train_step, args=(dist_inputs,))
 *   return mirrored_strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses,
 *                                   axis=None) */
static int distributed_train_step(dr_strategy *mirrored_strategy, step_io *io,
                                  const dr_dist_batch *dist_inputs, float *loss, dr_err *err)
{
    io->dist_inputs = dist_inputs;
    int rc = dr_strategy_run(mirrored_strategy, dist_inputs->count, train_step, io, err);
    if (rc == DR_OK) rc = apply_gradients(mirrored_strategy, io, err);
    dr_scaled sum;
    if (rc == DR_OK) rc = dr_strategy_reduce_scaled(mirrored_strategy, DR_REDUCE_SUM, io->per_replica_loss, &sum, err);
    if (rc == DR_OK) *loss = dr_scaled_round(&sum);
    return rc;
}

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static int flag_u32(const char *arg, const char *name, uint32_t *out)
{
    size_t len = strlen(name);
    if (strncmp(arg, name, len) != 0 || arg[len] != '=') return 0;
    char *end;
    unsigned long v = strtoul(arg + len + 1, &end, 10);
    if (*end != '\0' || v == 0 || v > 1000) {
        fprintf(stderr, "%s: expected an integer in 1..1000, got '%s'\n", name, arg + len + 1);
        exit(2);
    }
    *out = (uint32_t)v;
    return 1;
}

int main(int argc, char **argv)
{
    uint32_t num_gpus = 2, global_batch_size = 10, print_every = 1;
    for (int i = 1; i < argc; i++) {
        if (!flag_u32(argv[i], "--num_gpus", &num_gpus) &&
            !flag_u32(argv[i], "--global_batch_size", &global_batch_size) &&
            !flag_u32(argv[i], "--print_every", &print_every)) {
            fprintf(stderr, "usage: %s [--num_gpus=N] [--global_batch_size=G] [--print_every=K]\n", argv[0]);
            return 2;
        }
    }
    dr_err err = { 0, "" };
    static dr_strategy mirrored_strategy;
    static mirrored_model model;
    static step_io io;

    /* mirrored_strategy = tf.distribute.MirroredStrategy()   (N emulated GPUs) */
    dr_strategy_spec spec;
    dr_strategy_options options = { 0 };
    if (dr_get_distribution_strategy("mirrored", (int)num_gpus, NULL, 1, NULL, &spec, &err) != DR_OK ||
        dr_strategy_create(&spec, &options, &mirrored_strategy, &err) != DR_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    uint32_t R = dr_strategy_num_replicas(&mirrored_strategy);
    printf("strategy mirrored num_replicas_in_sync %" PRIu32 " devices", R);
    for (uint32_t r = 0; r < R; r++)
        printf(" %s", mirrored_strategy.device[mirrored_strategy.replica_device[r]].name);
    printf("\n");

    /* with mirrored_strategy.scope():
     *   model = tf.keras.Sequential([
     *       tf.keras.layers.Dense(1, input_shape=(1,),
     *                             kernel_regularizer=tf.keras.regularizers.L2(1e-4))])
     *   optimizer = tf.keras.optimizers.SGD()
     * Glorot-uniform kernel and zero bias from seed 42, the same on every replica. */
    dr_model_spec dense = { .nlayers = 1, .layer = { { .in = 1, .out = 1, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_MSE, .l2 = L2_FACTOR };
    for (uint32_t r = 0; r < R; r++) dr_model_init(&dense, 42, model.replica[r].params);
    io.model = &model;
    io.global_batch_size = global_batch_size;

    /* dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(1000).batch(
     *     global_batch_size)
     * dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset) */
    dr_dist_iter dist_dataset;
    if (dr_dist_iter_init(&dist_dataset, NUM_EXAMPLES, global_batch_size, R, 42, false, false, &err) != DR_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }

    /* for dist_inputs in dist_dataset:
     *   print(distributed_train_step(dist_inputs)) */
    dr_dist_batch dist_inputs;
    while (dr_dist_iter_next(&dist_dataset, &dist_inputs)) {
        float loss;
        if (distributed_train_step(&mirrored_strategy, &io, &dist_inputs, &loss, &err) != DR_OK) {
            fprintf(stderr, "error: %s\n", err.msg);
            dr_dist_iter_free(&dist_dataset);
            return 1;
        }
        uint64_t step = dist_inputs.step + 1;
        if (step == 1 || step % print_every == 0) {
            printf("step %" PRIu64 " loss %.9g loss_bits 0x%08" PRIx32 " per_replica_batch", step,
                   (double)loss, float_bits(loss));
            for (uint32_t r = 0; r < R; r++)
                printf("%s%" PRIu32, r ? "," : " ", dist_inputs.offset[r + 1] - dist_inputs.offset[r]);
            printf("\n");
        }
    }
    dr_dist_iter_free(&dist_dataset);

    char hex[65];
    const float *w = model.replica[0].params;
    for (uint32_t r = 1; r < R; r++) {
        if (memcmp(model.replica[r].params, w, sizeof model.replica[r].params) != 0) {
            fprintf(stderr, "error: replica %" PRIu32 "'s mirrored variables differ from replica 0's\n", r);
            return 1;
        }
    }
    dr_sha256_hex(w, sizeof model.replica[0].params, hex);
    printf("kernel %.9g (0x%08" PRIx32 ") bias %.9g (0x%08" PRIx32 ")\n",
           (double)w[KERNEL], float_bits(w[KERNEL]), (double)w[BIAS], float_bits(w[BIAS]));
    printf("weights_sha256 %s\n", hex);
    return 0;
}
