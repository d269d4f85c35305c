/* bin/distref's details as a newcomer meets them (issue 26, item 5), one
 * test each:
 *   honest_lines    train shows the topology; a regression shows no
 *                   accuracy; evaluate shows the checkpoint's step;
 *                   predict shows what it wrote, no loss or accuracy
 *   valid_names     a typo in an enum flag lists the values (and the nearest)
 *   ranges          "expected an integer in 0..64"
 *   usage_exit_2    combinations no variant runs exit 2, not 1
 *   training_features  the schedule and clipping flags: values, scopes,
 *                   combinations, not supported, a resume that changes them
 *   version         --version
 *   help            every line at most 100 columns, tf_default, and every
 *                   flag of bin/distref's table (core/cli_flags.c) listed
 *   mpirun_once     under mpirun a usage error is said once, without
 *                   MPI_Abort, and every rank exits 2
 *   worker_hosts    Model Garden's --worker_hosts/--task_index give TF_CONFIG
 *   flagfile        absl's --flagfile: comments, nesting, override, errors
 *                   naming the file and line
 *   fashion_package a missing Fashion-MNIST file names the Debian package
 * Run from the repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "shell.h"

#include <sys/wait.h>

#include "distref/cli_flags.h"

#ifndef DR_BIN
#define DR_BIN "bin/distref"   /* the Makefile passes its build's CLI (SANITIZE=1: build/san/bin/distref) */
#endif
#define BIN DR_BIN

/* Open MPI leaks in MPI_Init/MPI_Finalize (its plugins, unloaded by then,
 * so no suppression can name them); under SANITIZE=1 a clean exit through
 * MPI_Finalize would report them, so these runs leave leak checking off
 * (ASan's other checks stay on). */
#define NO_LSAN "ASAN_OPTIONS=detect_leaks=0 "
#define MPIRUN NO_LSAN "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -x ASAN_OPTIONS " \
               "--oversubscribe -np 2 "

static char g_tmp[64];
static char out[1 << 16];

/* Runs a shell command; its output (both streams) in out; exit status. */
#define sh(...) shell_run(out, sizeof out, __VA_ARGS__)
#define expect(status, want, phrase) shell_expect(out, status, want, phrase)


static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

static void honest_lines(void **st)
{
    (void)st;
    expect(sh(BIN " train --model_dir=%s/lin --experiment=linear_ones --distribution_strategy=one_device "
              "--train_steps=3", g_tmp), 0, "train: steps=3 examples=30 loss=");
    assert_null(strstr(out, "accuracy="));   /* a regression */
    assert_non_null(strstr(out, " s; one_device, 1 worker x 1 replica, ref, exact)\n"));
    expect(sh(BIN " evaluate --model_dir=%s/lin --experiment=linear_ones --distribution_strategy=one_device", g_tmp),
           0, "evaluate: checkpoint step=3 examples=");
    assert_null(strstr(out, "accuracy="));
    expect(sh(BIN " train --model_dir=%s/mlp --distribution_strategy=mirrored --num_gpus=2 --variant=openmp "
              "--threads=2 --synthetic_examples=200 --train_steps=4", g_tmp), 0, "train: steps=4 ");
    assert_non_null(strstr(out, " accuracy="));
    assert_non_null(strstr(out, " s; mirrored, 1 worker x 2 replicas, openmp, exact)\n"));
    expect(sh(BIN " evaluate --model_dir=%s/mlp --distribution_strategy=one_device --synthetic_examples=200", g_tmp),
           0, "evaluate: checkpoint step=4 examples=50 loss=");
    assert_non_null(strstr(out, " accuracy="));
    expect(sh(BIN " predict --model_dir=%s/mlp --distribution_strategy=one_device --synthetic_examples=200", g_tmp),
           0, "predict: checkpoint step=4 examples=50 predictions=");
    assert_null(strstr(out, "loss="));
    assert_null(strstr(out, "accuracy="));
}

static void valid_names(void **st)
{
    static const char *const cases[][2] = {
        { "--distribution_strategy=mirored", "--distribution_strategy: expected one of off, one_device, mirrored, "
          "central_storage, multi_worker_mirrored, parameter_server, tpu; got 'mirored' (did you mean mirrored?)" },
        { "--experiment=mlp_synth", "--experiment: expected one of linear_ones, linear_wide, mlp_synthetic, "
          "mlp_fashion_mnist, cnn_synthetic, cnn_fashion_mnist, "
           "resnet_synthetic, resnet_fashion_mnist; got 'mlp_synth'" },
        { "--variant=opnemp", "--variant: expected one of ref, openmp, opencl, mpi; got 'opnemp' (did you mean openmp?)" },
        { "--optimizer=adm", "--optimizer: expected one of \"\", sgd, adam; got 'adm' (did you mean adam?)" },
        { "--numerics=exakt", "--numerics: expected one of exact, fast; got 'exakt' (did you mean exact?)" },
        { "--distribution_strategy=tpu --tpu=v9", "--tpu=v9: unknown TPU; expected local, v2-8, v3-8, v3-32, v4-8" },
    };
    (void)st;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect(sh(BIN " train --model_dir=%s/unused %s", g_tmp, cases[i][0]), 2, cases[i][1]);
}

static void ranges(void **st)
{
    (void)st;
    expect(sh(BIN " train --model_dir=%s/unused --num_gpus=100", g_tmp), 2,
           "distref: error: --num_gpus: expected an integer in 0..64, got '100'");
    expect(sh(BIN " train --model_dir=%s/unused --variant=openmp --threads=2000", g_tmp), 2,
           "--threads: expected an integer in 0..1024, got '2000'");
    expect(sh(BIN " train --model_dir=%s/unused --seed=9007199254740993", g_tmp), 2,
           "--seed: expected an integer in 0..2^53, got '9007199254740993'");
}

static void usage_exit_2(void **st)
{
    (void)st;
    expect(sh(BIN " train --model_dir=%s/unused --numerics=fast", g_tmp), 2,
           "--numerics=fast: the reference is exact only");
    expect(sh("TF_CONFIG='{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w:1\"],\"ps\":[\"p:1\"]},\"task\":"
              "{\"type\":\"chief\",\"index\":0}}' " BIN " train --model_dir=%s/unused --variant=openmp "
              "--distribution_strategy=parameter_server", g_tmp), 2, "parameter_server runs in the reference and under mpirun only");
    expect(sh(NO_LSAN BIN " train --model_dir=%s/unused --variant=mpi --distribution_strategy=tpu", g_tmp), 2,
           "--variant=mpi: the tpu strategy runs in one process");
}

/* Models beyond the MLP (docs/MODELS.md): --batch_norm's and --dropout's values, the
 * engine's refusals (opencl: no tpu strategy; openmp: no halos under tpu, naming the layer), a resume under the other BN mode and a
 * checkpoint of another architecture, each exit 2 (openmp with
 * --input_partition_dims that layer 0 cannot split too); the tpu strategy's
 * spatial partitioning of a conv model: tiles that layer 0 cannot split
 * refused naming the layer and the dimension, 2,2 trains and reports the
 * halo bytes of its 4 cores and each core's HBM (tiles and halos; the
 * numbers docs/MODELS.md derives by hand);
 * mixed_float16 trains in the reference, and what it and the engine refuse
 * with these models is named. */
static void models(void **st)
{
    (void)st;
    expect(sh(BIN " train --model_dir=%s/unused --experiment=cnn_synthetic --batch_norm=local", g_tmp), 2,
           "--batch_norm: expected one of sync, replica; got 'local'");
    expect(sh(BIN " train --model_dir=%s/unused --experiment=cnn_synthetic --variant=opencl --distribution_strategy=tpu "
              "--input_partition_dims=4,1", g_tmp), 2,
           "--input_partition_dims=4,1: model: layer 0 (conv2d): output height 14 does not split into 4 tiles");
    expect(sh(BIN " train --model_dir=%s/unused --experiment=cnn_synthetic --variant=openmp "
              "--distribution_strategy=tpu --input_partition_dims=4,1", g_tmp), 2,
           "--input_partition_dims=4,1: model: layer 0 (conv2d): output height 14 does not split into 4 tiles");
    expect(sh(BIN " train --model_dir=%s/unused --experiment=cnn_synthetic --distribution_strategy=tpu "
              "--input_partition_dims=4,1", g_tmp), 2, "--input_partition_dims=4,1: model: layer 0 (conv2d): output "
           "height 14 does not split into 4 tiles");
    expect(sh(BIN " train --model_dir=%s/unused --experiment=cnn_synthetic --distribution_strategy=tpu "
              "--input_partition_dims=1,4", g_tmp), 2, "model: layer 0 (conv2d): output width 14 does not split into 4 tiles");
    expect(sh(BIN " train --model_dir=%s/tiles --experiment=cnn_synthetic --distribution_strategy=tpu --tpu=v2-8 "
              "--input_partition_dims=2,2 --train_steps=1 --synthetic_examples=64 >/dev/null && "
              "grep -o '\"halo_bytes_per_core\":[^]]*]' %s/tiles/metrics.jsonl", g_tmp, g_tmp),
           0, "\"halo_bytes_per_core\":[9536,8576,8576,7680]");   /* 16 examples a replica: docs/MODELS.md */
    /* each core's HBM: its input tile and its tiles of the maps with their halos (core 3: 16 x (196 + 4 x 392 +
     * 60) floats); core 0 also the variables and the whole maps from the gather on (docs/MODELS.md) */
    expect(sh("tr -d ' \\n' < %s/tiles/summary.json | grep -o 'TPU:[0-3]\",\"peak_bytes\":[0-9]*' | tr '\\n' ' '",
              g_tmp), 0, "TPU:0\",\"peak_bytes\":534624 TPU:1\",\"peak_bytes\":117632 TPU:2\",\"peak_bytes\":117632 "
           "TPU:3\",\"peak_bytes\":116736");
    expect(sh(BIN " train --model_dir=%s/bn --experiment=cnn_synthetic --train_steps=1 --synthetic_examples=64 "
              "--batch_norm=replica", g_tmp), 0, "train: steps=1");
    expect(sh(BIN " train --model_dir=%s/bn --experiment=cnn_synthetic --train_steps=2 --synthetic_examples=64", g_tmp),
           2, "--batch_norm=sync, but the checkpoint in");
    expect(sh(BIN " train --model_dir=%s/bn --experiment=mlp_synthetic --train_steps=2 --synthetic_examples=64", g_tmp),
           2, "--experiment");
    /* mixed precision on these models: the reference runs it, the engine exact and fast */
    expect(sh(BIN " train --model_dir=%s/mixed --experiment=cnn_synthetic --train_steps=1 --synthetic_examples=32 "
              "--dtype_policy=mixed_float16", g_tmp), 0, "train: steps=1");
    expect(sh(BIN " train --model_dir=%s/mixed_omp --experiment=cnn_synthetic --train_steps=1 --synthetic_examples=32 "
              "--dtype_policy=mixed_float16 --variant=openmp", g_tmp), 0, "train: steps=1");
    expect(sh(BIN " train --model_dir=%s/mixed_fast --experiment=cnn_synthetic --train_steps=1 --synthetic_examples=32 "
              "--dtype_policy=mixed_float16 --variant=openmp --numerics=fast", g_tmp), 0, "train: steps=1");
    /* the Dense mixed step's features run on these models too, tpu included (ref/mixed_graph.c) */
    expect(sh(BIN " train --model_dir=%s/mixed_feat --experiment=cnn_synthetic --train_steps=2 --synthetic_examples=32 "
              "--dtype_policy=mixed_float16 --mixed_reduction=tensorflow --l2=0.01 --gradient_accumulation_steps=2 "
              "--distribution_strategy=mirrored --num_gpus=2 --variant=openmp", g_tmp), 0, "train: steps=2");
    expect(sh(BIN " train --model_dir=%s/mixed_tpu --experiment=cnn_synthetic --train_steps=1 --synthetic_examples=32 "
              "--dtype_policy=mixed_float16 --distribution_strategy=tpu --tpu=v2-8 --variant=openmp", g_tmp), 0,
           "train: steps=1");
    /* --dropout=off (the TensorFlow comparisons): its values, its scope, a resume under the other value */
    expect(sh(BIN " train --model_dir=%s/unused --experiment=cnn_synthetic --dropout=0", g_tmp), 2,
           "--dropout: expected one of model, off; got '0'");
    expect(sh(BIN " evaluate --model_dir=%s/bn --experiment=cnn_synthetic --dropout=off", g_tmp), 2,
           "--dropout does not apply to evaluate: it is only for training");
    expect(sh(BIN " train --model_dir=%s/drop --experiment=cnn_synthetic --train_steps=1 --synthetic_examples=64 "
              "--dropout=off", g_tmp), 0, "train: steps=1");
    expect(sh(BIN " train --model_dir=%s/drop --experiment=cnn_synthetic --train_steps=2 --synthetic_examples=64",
              g_tmp), 2, "--dropout=model, but the checkpoint in");
}

/* --log_device_placement with a model beyond Dense (ref/placement_graph.c):
 * Keras's layer names, each replica's ops on its device, the synchronized
 * BatchNormalization's all-reduce forward and backward only under sync, one
 * update per trainable variable (cnn_synthetic: 6 layers with kernel and
 * bias or gamma and beta), no input gradient for layer 0. */
static void placement_graph(void **st)
{
    const char *run = BIN " train --model_dir=%s/%s --experiment=cnn_synthetic --distribution_strategy=mirrored "
                          "--num_gpus=2 --synthetic_examples=32 --global_batch_size=16 --train_steps=1 --epochs=0 "
                          "--log_device_placement %s";
    (void)st;
    expect(sh(run, g_tmp, "pl_sync", ""), 0,
           "step 1: replica_1/functional/conv2d_1/convolution: (Conv2D): /job:localhost/replica:0/task:0/device:GPU:1");
    assert_int_equal(count(out, "functional/batch_normalization/CollectiveReduceV2: (CollectiveReduceV2)"), 4);
    assert_int_equal(count(out, "sgd/AssignAddVariableOp_11: "), 2);
    assert_int_equal(count(out, "sgd/AssignAddVariableOp_12: "), 0);
    assert_int_equal(count(out, "functional/conv2d/convolution/Conv2DBackpropInput"), 0);
    assert_int_equal(count(out, "functional/conv2d_1/convolution/Conv2DBackpropInput"), 2);
    assert_int_equal(count(out, "functional/re_lu/ReluGrad: (ReluGrad): /job:localhost/replica:0/task:0/device:GPU:0"), 1);
    assert_int_equal(count(out, "functional/dropout/stateless_dropout/SelectV2: (SelectV2)"), 4);
    expect(sh(run, g_tmp, "pl_replica", "--batch_norm=replica --dropout=off"), 0,
           "step 1: functional/batch_normalization/moments/variance: (Mean): /job:localhost/replica:0/task:0/device:GPU:0");
    assert_int_equal(count(out, "CollectiveReduceV2"), 0);
    assert_int_equal(count(out, "dropout"), 0);
}

/* --layer_devices with a model beyond Dense (ref/trainer.c count_map_copies):
 * cnn_synthetic's layers 0-3 on /gpu:0 and 4-9 on /gpu:1 give one_device's
 * bits; only the Add's output (16 x 14 x 14 x 4 floats a step) crosses, and
 * its gradient back; the log shows each layer's device. */
static void layer_devices_graph(void **st)
{
    const char *run = BIN " train --model_dir=%s/%s --experiment=cnn_synthetic --synthetic_examples=64 "
                          "--global_batch_size=16 --train_steps=3 --epochs=0 --num_gpus=1 %s";
    char want[160], tail[256];
    (void)st;
    expect(sh(run, g_tmp, "ld_one", ""), 0, "train: steps=3");
    snprintf(want, sizeof want, "%.80s", strstr(out, "weights_sha256="));
    snprintf(tail, sizeof tail, "--layer_devices=/gpu:0,/gpu:0,/gpu:0,/gpu:0,/gpu:1,/gpu:1,/gpu:1,/gpu:1,/gpu:1,"
             "/gpu:1 && tr -d ' \\n' < %s/ld_two/summary.json", g_tmp);
    expect(sh(run, g_tmp, "ld_two", tail), 0, want);
    assert_int_equal(count(out, "device:GPU:0\",\"peak_bytes\":358928,\"bytes_in\":301104,\"bytes_out\":150528}"), 1);
    assert_int_equal(count(out, "device:GPU:1\",\"peak_bytes\":238304,\"bytes_in\":150528,\"bytes_out\":150528}"), 1);
    expect(sh(run, g_tmp, "ld_log", "--layer_devices=/gpu:0,/gpu:0,/gpu:0,/gpu:0,/gpu:1,/gpu:1,/gpu:1,"
              "/gpu:1,/gpu:1,/gpu:1 --log_device_placement"), 0,
           "step 1: functional/max_pooling2d/MaxPool2d: (MaxPool): /job:localhost/replica:0/task:0/device:GPU:1");
    assert_int_equal(count(out, "functional/add/Add: (AddV2): /job:localhost/replica:0/task:0/device:GPU:0"), 3);
}

/* The schedule and clipping flags (docs/TRAINING_FEATURES.md): values,
 * scopes, combinations, variants and strategies that cannot run them. */
static void training_features(void **st)
{
    (void)st;
    expect(sh(BIN " train --model_dir=%s/unused --clipnorm=0", g_tmp), 2,
           "--clipnorm=0: expected a float > 0");
    expect(sh(BIN " train --model_dir=%s/unused --clipnorm=1 --global_clipnorm=1", g_tmp), 2,
           "--clipnorm and --global_clipnorm: at most one clipping flag");
    expect(sh(BIN " train --model_dir=%s/unused --alpha=0.1", g_tmp), 2,
           "--alpha is a parameter of --lr_schedule=cosine; this run has --lr_schedule=constant");
    expect(sh(BIN " train --model_dir=%s/unused --lr_schedule=cosine", g_tmp), 2,
           "--lr_schedule=cosine needs --decay_steps > 0");
    expect(sh(BIN " train --model_dir=%s/unused --lr_schedule=piecewise --boundaries=3,2 --values=1,2,3", g_tmp), 2,
           "--boundaries: must increase strictly (3 then 2)");
    expect(sh(BIN " train --model_dir=%s/unused --lr_schedule=piecewise --boundaries=3 --values=1", g_tmp), 2,
           "--values: 1 rates for 1 boundaries; expected 2");
    expect(sh(BIN " train --model_dir=%s/unused --clip_semantics=tensorflow", g_tmp), 2,
           "--clip_semantics applies to a clipping flag");
    expect(sh(BIN " train --model_dir=%s/tpuclip --distribution_strategy=tpu --tpu=v2-8 --clipnorm=1 --train_steps=2 "
              "--synthetic_examples=256 --clip_semantics=tensorflow", g_tmp), 0, "train: steps=2");
    /* gradient accumulation: the engine's variants run it (issue 30 item 1), tpu's step too */
    expect(sh(BIN " train --model_dir=%s/acc --variant=openmp --train_steps=2 --synthetic_examples=256 "
              "--gradient_accumulation_steps=2", g_tmp), 0, "train: steps=2");
    expect(sh(BIN " train --model_dir=%s/tpuacc --variant=openmp --distribution_strategy=tpu --tpu=v2-8 "
              "--train_steps=2 --synthetic_examples=256 --gradient_accumulation_steps=2", g_tmp), 0, "train: steps=2");
    /* with --clip_semantics=tensorflow: each replica clips its mean at the update (float32); mixed refused */
    expect(sh(BIN " train --model_dir=%s/accclip --variant=openmp --distribution_strategy=mirrored --num_gpus=2 "
              "--train_steps=2 --synthetic_examples=256 --gradient_accumulation_steps=2 --global_clipnorm=0.05 "
              "--clip_semantics=tensorflow", g_tmp), 0, "train: steps=2");
    expect(sh(BIN " train --model_dir=%s/unused --distribution_strategy=mirrored --num_gpus=2 --train_steps=2 "
              "--gradient_accumulation_steps=2 --global_clipnorm=0.05 --clip_semantics=tensorflow "
              "--dtype_policy=mixed_float16 --mixed_reduction=tensorflow", g_tmp), 2,
           "not supported: --gradient_accumulation_steps with --clip_semantics=tensorflow and "
           "--dtype_policy=mixed_float16");
    expect(sh("TF_CONFIG='{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w0:1\"],\"ps\":[\"p0:1\"]},"
              "\"task\":{\"type\":\"chief\",\"index\":0}}' " BIN " train --model_dir=%s/unused "
              "--distribution_strategy=parameter_server --train_steps=2 --gradient_accumulation_steps=2", g_tmp), 2,
           "Keras 3, whose gradient_accumulation_steps distref reproduces, does not support ParameterServerStrategy");
    expect(sh(BIN " evaluate --model_dir=%s/unused --lr_schedule=cosine", g_tmp), 2,
           "--lr_schedule does not apply to evaluate");
    /* a resume that would change the trajectory names the flag */
    expect(sh(BIN " train --model_dir=%s/sched --train_steps=2 --synthetic_examples=256 --lr_schedule=cosine "
              "--decay_steps=8 --clipnorm=0.5", g_tmp), 0, "train: steps=2");
    expect(sh(BIN " train --model_dir=%s/sched --train_steps=4 --synthetic_examples=256 --lr_schedule=cosine "
              "--decay_steps=9 --clipnorm=0.5", g_tmp), 2, "--decay_steps=9, but the checkpoint in");
    expect(sh(BIN " train --model_dir=%s/sched --train_steps=4 --synthetic_examples=256 --lr_schedule=cosine "
              "--decay_steps=8 --clipnorm=0.5 --clip_semantics=tensorflow", g_tmp), 2,
           "--clip_semantics=tensorflow, but the checkpoint in");
}

/* Mixed precision's flags (core/cli_mixed_flags.c): values, aliases, scope,
 * the refusals of what a variant does not run (opencl; central_storage),
 * and an openmp run. */
static void mixed_precision(void **st)
{
    (void)st;
    expect(sh(BIN " train --model_dir=%s/unused --dtype_policy=float16", g_tmp), 2,
           "--dtype_policy: expected one of float32, mixed_float16, mixed_bfloat16");
    expect(sh(BIN " train --model_dir=%s/unused --dtype=fp16 --dtype_policy=mixed_bfloat16", g_tmp), 2,
           "--dtype=fp16 and --dtype_policy=mixed_bfloat16 disagree");
    expect(sh(BIN " train --model_dir=%s/unused --loss_scale=128", g_tmp), 2,
           "--loss_scale applies to a mixed policy");
    expect(sh(BIN " train --model_dir=%s/unused --dtype_policy=mixed_bfloat16 --dynamic_growth_steps=3", g_tmp), 2,
           "--dynamic_growth_steps applies to a dynamic loss scale");
    expect(sh(BIN " train --model_dir=%s/unused --dtype_policy=mixed_float16 --dynamic_growth_steps=0", g_tmp), 2,
           "--dynamic_growth_steps");
    expect(sh(BIN " train --model_dir=%s/grow --dtype_policy=mixed_float16 --dynamic_growth_steps=3 --train_steps=2 "
              "--synthetic_examples=128", g_tmp), 0, "train: steps=2");
    expect(sh(BIN " train --model_dir=%s/grow --dtype_policy=mixed_float16 --train_steps=4 --synthetic_examples=128",
              g_tmp), 2, "--dynamic_growth_steps=2000, but the checkpoint in");
    expect(sh(BIN " train --model_dir=%s/unused --dtype_policy=mixed_float16 --loss_scale=0", g_tmp), 2,
           "--loss_scale=0: expected dynamic, dynamic:<initial scale> or a finite float > 0");
    expect(sh(BIN " train --model_dir=%s/unused --dtype_policy=mixed_float16 --loss_scale=1e39", g_tmp), 2,
           "--loss_scale=1e39: expected dynamic, dynamic:<initial scale>");
    expect(sh(BIN " train --model_dir=%s/unused --dtype_policy=mixed_float16 --loss_scale=2x", g_tmp), 2,
           "--loss_scale=2x: expected dynamic, dynamic:<initial scale>");
    expect(sh(BIN " train --model_dir=%s/unused --mixed_reduction=tensorflow", g_tmp), 2,
           "--mixed_reduction applies to a mixed policy");
    /* central_storage and tpu: built; tpu's spatial partitioning of a Dense model refused (the models beyond
     * Dense run it: suite mixed_precision) */
    expect(sh(BIN " train --model_dir=%s/mx_cs_cl --train_steps=1 --synthetic_examples=256 --dtype=bf16 "
              "--mixed_reduction=tensorflow --variant=opencl --distribution_strategy=central_storage --num_gpus=2",
              g_tmp), 0, "train: steps=1");
    expect(sh(BIN " train --model_dir=%s/mx_cs_omp --train_steps=1 --synthetic_examples=256 "
              "--dtype_policy=mixed_float16 --variant=openmp --distribution_strategy=central_storage --num_gpus=2",
              g_tmp), 0, "train: steps=1");
    expect(sh(BIN " train --model_dir=%s/unused --dtype_policy=mixed_float16 --variant=openmp "
              "--distribution_strategy=tpu --input_partition_dims=2,2", g_tmp), 2,
           "not supported: --dtype_policy=mixed_float16 under --variant=openmp with tpu: --input_partition_dims with a "
           "Dense model is not built into it");
    expect(sh(BIN " train --model_dir=%s/unused --dtype_policy=mixed_float16 --distribution_strategy=tpu "
              "--input_partition_dims=2,2", g_tmp), 2,
           "not supported: --dtype_policy=mixed_float16 under --variant=ref with tpu: --input_partition_dims with a "
           "Dense model is not built into it");
    expect(sh(BIN " train --model_dir=%s/mx_omp --train_steps=1 --synthetic_examples=256 --dtype=bf16 "
              "--mixed_reduction=tensorflow --variant=openmp", g_tmp), 0, "train: steps=1");
    expect(sh(BIN " train --model_dir=%s/mx_tpu --train_steps=1 --synthetic_examples=256 "
              "--dtype_policy=mixed_float16 --loss_scale=dynamic --distribution_strategy=tpu", g_tmp), 0,
           "train: steps=1");
    expect(sh(BIN " train --model_dir=%s/unused --dtype_policy=mixed_float16 --global_clipnorm=0.05 "
              "--clip_semantics=tensorflow --variant=openmp --num_gpus=2", g_tmp), 2,
           "not supported: --dtype_policy=mixed_float16 under --variant=openmp with mirrored: --clip_semantics=tensorflow "
           "needs --mixed_reduction=tensorflow");
    expect(sh(BIN " train --model_dir=%s/mx_clip_tf --dtype_policy=mixed_float16 --global_clipnorm=0.05 "
              "--clip_semantics=tensorflow --mixed_reduction=tensorflow --variant=openmp --num_gpus=2 --train_steps=2 "
              "--synthetic_examples=256", g_tmp), 0, "train: steps=2");   /* per replica, after the unscale: built */
    expect(sh(BIN " train --model_dir=%s/mx_l2 --dtype_policy=mixed_float16 --l2=0.001 --train_steps=2 "
              "--synthetic_examples=256", g_tmp), 0, "train: steps=2");   /* --l2 under a mixed policy: built */
    expect(sh(BIN " train --model_dir=%s/mx_l2_omp --dtype_policy=mixed_float16 --l2=0.001 --train_steps=2 "
              "--synthetic_examples=256 --variant=openmp --num_gpus=2 --mixed_reduction=tensorflow", g_tmp), 0,
           "train: steps=2");
    /* accumulation: 3 of 12 micro-steps skipped, so a finite one waits at the end; its resume is refused */
    expect(sh(BIN " train --model_dir=%s/mx_acc --dtype_policy=mixed_float16 --loss_scale=dynamic:1048576 "
              "--gradient_accumulation_steps=2 --train_steps=12 --global_batch_size=32 --synthetic_examples=512",
              g_tmp), 0, "train: steps=12");
    expect(sh(BIN " train --model_dir=%s/mx_acc --dtype_policy=mixed_float16 --loss_scale=dynamic:1048576 "
              "--gradient_accumulation_steps=2 --train_steps=14 --global_batch_size=32 --synthetic_examples=512 "
              "--variant=openmp", g_tmp), 2, "cannot resume --dtype_policy=mixed_float16 with "
           "--gradient_accumulation_steps=2 at step 12: 1 finite micro-steps were accumulated");
    expect(sh(BIN " train --model_dir=%s/mx_clip --train_steps=2 --synthetic_examples=256 --dtype=fp16 "
              "--clipvalue=0.002 --variant=openmp --num_gpus=2", g_tmp), 0, "train: steps=2");
    expect(sh(BIN " evaluate --model_dir=%s/unused --dtype_policy=mixed_float16", g_tmp), 2,
           "--dtype_policy does not apply to evaluate");
    expect(sh(BIN " train --model_dir=%s/f32 --train_steps=1 --synthetic_examples=256 --dtype=fp32", g_tmp), 0,
           "train: steps=1");
}

static void version(void **st)
{
    (void)st;
    expect(sh(BIN " --version"), 0, "distref 0.9.0 (git ");
    assert_int_equal(count(out, "\n"), 1);
}

/* Every flag of bin/distref's table (core/cli_flags.c, linked) in --help,
 * and nothing else. */
static void help(void **st)
{
    static dr_cli_flags c;
    dr_flag f[DR_CLI_MAX_FLAGS];
    int n = dr_cli_flag_table(&c, f, NULL);
    (void)st;
    expect(sh(BIN " --help"), 0, "--loss_reduction=global_batch_size|examples_in_step|tf_default");
    for (char *line = out; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > 100) fail_msg("a help line of %zu columns: %.*s", len, (int)len, line);
        line += len + (nl != NULL);
    }
    for (int i = 0; i < n; i++) {
        char want[80];
        snprintf(want, sizeof want, "\n  --%s=", f[i].name);
        if (!strstr(out, want)) fail_msg("--%s is in the table but not in --help", f[i].name);
    }
    assert_true(n >= 50);
    assert_int_equal(n, count(out, "\n  --"));   /* and nothing else */
    assert_non_null(strstr(out, "\n  --version=bool"));
    assert_non_null(strstr(out, "\n  --flagfile=string"));
}


static void mpirun_once(void **st)
{
    (void)st;
    if (sh("command -v mpirun") != 0) { skip(); return; }
    /* before MPI_Init: the flag parser */
    expect(sh(MPIRUN "-q " BIN " train --variant=mpi --distribution_strategy=mirored"), 2,
           "distref: error: --distribution_strategy: expected one of");
    assert_int_equal(count(out, "distref: error:"), 1);
    assert_int_equal(count(out, "\n"), 1);   /* nothing else: no MPI_Abort notice */
    /* after it: what the variant refuses, agreed by the ranks */
    expect(sh(MPIRUN "-q " BIN " train --variant=mpi --distribution_strategy=tpu --model_dir=%s/unused", g_tmp), 2,
           "distref: error: --variant=mpi: the tpu strategy runs in one process");
    assert_int_equal(count(out, "\n"), 1);
    /* without -q, Open MPI adds its own note on the exit status; distref's message is still one */
    expect(sh(MPIRUN BIN " train --variant=mpi --distribution_strategy=mirored"), 2, NULL);
    assert_int_equal(count(out, "distref: error:"), 1);
    assert_null(strstr(out, "MPI_ABORT"));
}

/* --cluster_resolver=slurm: TF_CONFIG from Slurm's variables (each rank's
 * SLURM_PROCID from its MPI rank, as srun would set it), and every
 * disagreement an exit 2 naming the variable. */
#define SLURM_ENV "SLURM_NTASKS=2 SLURM_STEP_TASKS_PER_NODE='1(x2)' OMP_NUM_THREADS=1 "
#define PER_RANK "sh -c 'SLURM_PROCID=$OMPI_COMM_WORLD_RANK exec " BIN " \"$@\"' sh "
static void slurm_resolver(void **st)
{
    (void)st;
    if (sh("command -v mpirun") != 0) { skip(); return; }
    expect(sh(SLURM_ENV "SLURM_STEP_NODELIST='gpu[07-08]' " MPIRUN "-q " PER_RANK "train --variant=mpi "
              "--distribution_strategy=multi_worker_mirrored --cluster_resolver=slurm --print_tf_config "
              "--train_steps=2 --synthetic_examples=99 --model_dir=%s/slurm", g_tmp), 0,
           "TF_CONFIG (MPI rank 1 of 2): {\"cluster\": {\"worker\": [\"gpu07:8888\", \"gpu08:8888\"]}, "
           "\"task\": {\"type\": \"worker\", \"index\": 1}}");
    assert_non_null(strstr(out, "multi_worker_mirrored, 2 workers x 1 replica, mpi, exact)"));
    expect(sh(SLURM_ENV "SLURM_STEP_NODELIST='gpu[07-08' " MPIRUN "-q " PER_RANK "train --variant=mpi "
              "--distribution_strategy=multi_worker_mirrored --cluster_resolver=slurm --model_dir=%s/unused", g_tmp),
           2, "distref: error: SLURM_STEP_NODELIST='gpu[07-08': a '[' without its ']'");
    expect(sh("SLURM_NTASKS=3 SLURM_STEP_TASKS_PER_NODE='2,1' SLURM_STEP_NODELIST='gpu[07-08]' " MPIRUN "-q " PER_RANK
              "train --variant=mpi --distribution_strategy=multi_worker_mirrored --cluster_resolver=slurm "
              "--model_dir=%s/unused", g_tmp), 2, "SLURM_NTASKS=3 and SLURM_PROCID=0, but mpirun started 2 ranks");
    expect(sh(SLURM_ENV "SLURM_PROCID=1 SLURM_STEP_NODELIST='a,b' TF_CONFIG='{\"cluster\": {\"worker\": "
              "[\"a:1\", \"b:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}' " BIN " train "
              "--cluster_resolver=slurm --distribution_strategy=multi_worker_mirrored --model_dir=%s/unused", g_tmp), 2,
           "TF_CONFIG disagrees with Slurm: it has 2 training workers and this task is id 0, but SLURM_NTASKS=2 and "
           "SLURM_PROCID=1");
    expect(sh(SLURM_ENV "SLURM_PROCID=0 SLURM_GPUS_PER_TASK=2 SLURM_STEP_NODELIST='a,b' " BIN " train "
              "--cluster_resolver=slurm --distribution_strategy=multi_worker_mirrored --num_gpus=1 "
              "--model_dir=%s/unused", g_tmp), 2, "SLURM_GPUS_PER_TASK=2 but --num_gpus=1");
    expect(sh(SLURM_ENV BIN " train --cluster_resolver=slurm --model_dir=%s/unused", g_tmp), 2,
           "SLURM_PROCID=(unset): expected a non-negative integer");
}

static void worker_hosts(void **st)
{
    (void)st;
    expect(sh(BIN " train --model_dir=%s/hosts --distribution_strategy=multi_worker_mirrored "
              "--worker_hosts=a:1,b:2,c:3 --task_index=0 --print_tf_config --train_steps=2 --synthetic_examples=99",
              g_tmp), 0, "TF_CONFIG: { \"cluster\": { \"worker\": [ \"a:1\", \"b:2\", \"c:3\" ] }, "
              "\"task\": { \"type\": \"worker\", \"index\": 0 } }");
    assert_non_null(strstr(out, "multi_worker_mirrored, 3 workers x 1 replica, ref, exact)"));
    expect(sh(BIN " train --model_dir=%s/unused --worker_hosts=solo:1 --print_tf_config --train_steps=1 "
              "--distribution_strategy=multi_worker_mirrored --synthetic_examples=20", g_tmp), 0,
           "\"task\": { \"type\": \"worker\", \"index\": 0 }");   /* one worker: index 0 */
    expect(sh("TF_CONFIG='{\"cluster\":{\"worker\":[\"a:1\"]}}' " BIN " train --model_dir=%s/unused "
              "--worker_hosts=a:1", g_tmp), 2, "--worker_hosts and TF_CONFIG both give the cluster");
    expect(sh(BIN " train --model_dir=%s/unused --worker_hosts=a:1,b:1", g_tmp), 2,
           "--worker_hosts lists 2 workers: give --task_index (0..1)");
    expect(sh(BIN " train --model_dir=%s/unused --worker_hosts=a:1,b:1 --task_index=2", g_tmp), 2,
           "--task_index=2: --worker_hosts lists 2 workers, so expected 0..1");
    expect(sh(BIN " train --model_dir=%s/unused --task_index=1", g_tmp), 2, "--task_index=1 without --worker_hosts");
}

static void put(const char *name, const char *text)
{
    char path[160];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    assert_non_null(f = fopen(path, "w"));
    fputs(text, f);
    fclose(f);
}

static void flagfile(void **st)
{
    (void)st;
    put("run.flags", "# a comment\n// another\n\n--distribution_strategy=one_device\n  --experiment=linear_ones  \n"
                     "--train_steps=3\n");
    put("outer.flags", "--flagfile=run.flags\n--seed=7\n");
    put("loop.flags", "--seed=1\n--flagfile=outer2.flags\n");
    put("outer2.flags", "--flagfile=loop.flags\n");
    put("bad.flags", "--train_steps=3\n\n--seed=x\n");
    expect(sh("cd %s && %s/" BIN " train --model_dir=ff1 --flagfile=outer.flags", g_tmp, getenv("PWD")), 0,
           "train: steps=3 examples=30 ");
    /* a later flag overrides the file's */
    expect(sh("cd %s && %s/" BIN " train --model_dir=ff2 --flagfile=outer.flags --train_steps=5", g_tmp,
              getenv("PWD")), 0, "train: steps=5 ");
    expect(sh("cd %s && %s/" BIN " train --model_dir=ff3 --flagfile=bad.flags", g_tmp, getenv("PWD")), 2,
           "distref: error: bad.flags:3: --seed: expected an integer, got 'x'");
    expect(sh("cd %s && %s/" BIN " train --model_dir=ff3 --flagfile=loop.flags", g_tmp, getenv("PWD")), 2,
           "distref: error: outer2.flags:1: --flagfile=loop.flags includes itself");
    expect(sh("cd %s && %s/" BIN " train --model_dir=ff3 --flagfile=nope.flags", g_tmp, getenv("PWD")), 2,
           "command line: --flagfile=nope.flags: cannot open: no such file");
    expect(sh("cd %s && %s/" BIN " train --model_dir=ff3 --seed=2 --flagfile=outer.flags", g_tmp, getenv("PWD")), 2,
           "outer.flags:2: --seed: given twice");
}

static void fashion_package(void **st)
{
    (void)st;
    expect(sh(BIN " train --model_dir=%s/unused --experiment=mlp_fashion_mnist --data_dir=%s/none "
              "--distribution_strategy=one_device", g_tmp, g_tmp), 1,
           "Debian's package dataset-fashion-mnist installs the files in /usr/share/datasets/fashion-mnist");
}

SHELL_GROUP_FIXTURES(g_tmp, "/tmp/distref_cli_details_XXXXXX", BIN)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(honest_lines), cmocka_unit_test(valid_names), cmocka_unit_test(ranges),
        cmocka_unit_test(usage_exit_2),
        cmocka_unit_test(models),
        cmocka_unit_test(placement_graph), cmocka_unit_test(layer_devices_graph), cmocka_unit_test(training_features), cmocka_unit_test(mixed_precision),
        cmocka_unit_test(version),
        cmocka_unit_test(help),
        cmocka_unit_test(mpirun_once), cmocka_unit_test(slurm_resolver), cmocka_unit_test(worker_hosts),
        cmocka_unit_test(flagfile),
        cmocka_unit_test(fashion_package),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
