#!/usr/bin/env python3
"""TensorFlow as the outside truth for distref's reference.

    tf_golden.py generate OUT.json [CASE...]   run TensorFlow, write the golden
                                               values (only the training cases
                                               named, when some are)
    tf_golden.py merge GOLDEN NEW.json         put NEW's training cases into GOLDEN
                                               (replacing those of the same name,
                                               in TRAIN_CASES' order); both from
                                               the same TensorFlow, same splits
    tf_golden.py trajectory OUT R [STEPS]
                                     train mlp_synthetic under MirroredStrategy(R)
                                     and write its trajectory (docs/JUDGING.md's
                                     format, with python/distref's Trajectory) to OUT

`make tf-crosscheck` generates them live from the installed TensorFlow and
runs tests/test_golden.c's comparison against that file instead of the
committed one.

Needs tensorflow (make tf-crosscheck installs tensorflow-cpu into a
virtualenv under build/) and bin/distref. Never part of `make test`: the
committed tests/golden/tensorflow.json is what tests/test_golden.c holds the
reference to without TensorFlow.

What is recorded:
  splits    tf.data.Dataset.range(n).batch(G) through
            MirroredStrategy(R logical CPUs).experimental_distribute_dataset
            under each AutoShardPolicy: the example ids of every replica at
            every step.
  training  the same initial weights, data and example order as distref
            (from `bin/distref export`), trained by a custom loop in the
            seeds' recipe: per replica
              loss = tf.nn.compute_average_loss(per_example, global_batch_size=G)
                   + tf.nn.scale_regularization_loss(l2 * sum of squared kernels)
            (global_batch_size=None in the tf_default cases)
            gradients by GradientTape, optimizer.apply_gradients inside
            strategy.run; the step's loss is strategy.reduce(SUM). Per-step
            losses and a sample of the final weights (every 97th parameter
            in distref's flat order, and all of them for small models).
            Mixed-precision cases (scripts/tf_mixed.py) add the loss scale
            each step used, whether it was skipped, and each replica's own
            finite flag.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DISTREF = os.path.join(ROOT, "bin", "distref")
MAX_R = 4

SPLIT_CASES = [(23, 10, 4), (50, 50, 8), (8, 4, 3), (10, 3, 4), (64, 16, 3)]
POLICIES = ["auto", "data", "off", "file", "hint"]
FUNCTION_CASES = [(23, 12, 4), (64, 16, 4), (10, 4, 4), (23, 10, 4)]

TRAIN_CASES = []
for R in (1, 2, 4):
    TRAIN_CASES.append({"name": "toy_R%d" % R, "experiment": "linear_ones", "global_batch_size": 16,
                        "epochs": 2, "num_gpus": R})
for R in (1, 2, 4):
    for l2 in (0.0, 1e-3):
        TRAIN_CASES.append({"name": "mlp_R%d_l2_%g" % (R, l2), "experiment": "mlp_synthetic",
                            "synthetic_examples": 70, "global_batch_size": 16, "epochs": 2, "num_gpus": R, "l2": l2})
TRAIN_CASES.append({"name": "mlp_adam_R2_l2", "experiment": "mlp_synthetic", "synthetic_examples": 70,
                    "global_batch_size": 16, "epochs": 2, "num_gpus": 2, "l2": 1e-3, "optimizer": "adam",
                    "learning_rate": 1e-3})
for R, l2 in ((3, 0.0), (4, 1e-3)):   # TensorFlow's default divisor: each replica's own size x R
    TRAIN_CASES.append({"name": "mlp_tf_default_R%d" % R, "experiment": "mlp_synthetic", "synthetic_examples": 70,
                        "global_batch_size": 16, "epochs": 2, "num_gpus": R, "l2": l2, "loss_reduction": "tf_default"})
TRAIN_CASES.append({"name": "mlp_nesterov_R4", "experiment": "mlp_synthetic", "synthetic_examples": 70,
                    "global_batch_size": 16, "epochs": 2, "num_gpus": 4, "nesterov": True})

# Training features (issue 30; docs/TRAINING_FEATURES.md): distref's flags
# ("extra") beside what the Keras optimizer gets ("tf"). Keras 3 clips each
# replica's gradient before the all-reduce (measured), which distref's
# --clip_semantics=tensorflow reproduces; model.fit cannot accumulate under
# MirroredStrategy (measured: it raises), the eager loop here can (below).
COSINE = (["--lr_schedule=cosine", "--warmup_steps=3", "--decay_steps=8", "--alpha=0.1", "--learning_rate=0.1"],
          {"schedule": ["cosine", {"initial_learning_rate": 0.0, "decay_steps": 8, "alpha": 0.1,
                                   "warmup_target": 0.1, "warmup_steps": 3}]})
PIECEWISE = (["--lr_schedule=piecewise", "--boundaries=2,5", "--values=0.1,0.05,0.02"],
             {"schedule": ["piecewise", {"boundaries": [2, 5], "values": [0.1, 0.05, 0.02]}]})
FEATURES = [("cosine", COSINE, (1, 2, 4)), ("piecewise", PIECEWISE, (2,))]
for kind, c, Rs in (("global_clipnorm", 0.05, (1, 2, 4)), ("clipnorm", 0.02, (2,)), ("clipvalue", 0.002, (2,))):
    FEATURES.append((kind, (["--%s=%g" % (kind, c), "--clip_semantics=tensorflow"], {"clip": {kind: c}}), Rs))
for name, (extra, tf_side), Rs in FEATURES:
    for R in Rs:
        TRAIN_CASES.append({"name": "mlp_%s_R%d" % (name, R), "experiment": "mlp_synthetic", "synthetic_examples": 70,
                            "global_batch_size": 16, "epochs": 2, "num_gpus": R, "extra": extra, "tf": tf_side})
# Mixed precision (issue 30 item 3; scripts/tf_mixed.py): Keras 3's policies and
# LossScaleOptimizer (initial scale 2^15, or 2^24 so that the first steps
# overflow and are skipped) against distref's --mixed_reduction=tensorflow
# (each replica's gradient rounded to the compute dtype before the sum, as
# TensorFlow's per-replica float16 matmul): TensorFlow's result depends on R.
for name, policy, scale, Rs in (("mixed_float16", "mixed_float16", None, (1, 2, 4)),
                                ("mixed_bfloat16", "mixed_bfloat16", None, (1, 2, 4)),
                                ("mixed_overflow", "mixed_float16", 16777216.0, (1, 2, 4))):
    for R in Rs:
        extra = ["--dtype_policy=" + policy, "--mixed_reduction=tensorflow"]
        if scale:
            extra.append("--loss_scale=dynamic:%d" % scale)
        TRAIN_CASES.append({"name": "mlp_%s_R%d" % (name, R), "experiment": "mlp_synthetic", "synthetic_examples": 70,
                            "global_batch_size": 16, "epochs": 2, "num_gpus": R, "extra": extra,
                            "mixed": {"policy": policy, "initial_scale": scale}})
# Clipping under a mixed policy: Keras 3's inner optimizer clips the unscaled
# gradient (measured, scripts/tf_mixed_features.py), per replica under
# MirroredStrategy; distref's mixed step clips the aggregated one, so R = 1.
TRAIN_CASES.append({"name": "mlp_mixed_global_clipnorm_R1", "experiment": "mlp_synthetic", "synthetic_examples": 70,
                    "global_batch_size": 16, "epochs": 2, "num_gpus": 1,
                    "extra": ["--dtype_policy=mixed_float16", "--loss_scale=dynamic:16777216", "--global_clipnorm=0.05"],
                    "mixed": {"policy": "mixed_float16", "initial_scale": 16777216.0},
                    "tf": {"clip": {"global_clipnorm": 0.05}}})
# --dynamic_growth_steps=2 (Keras's dynamic_growth_steps): the overflow run's
# scale halves on the skipped steps and doubles after every 2 finite ones, so
# the trajectory moves both ways. R = 1: at R = 2 this run's step 5 overflows
# on replica 1 only, which Keras 3's replica-0 check applies (the weights turn
# non-finite) and distref's check over every replica skips (docs).
TRAIN_CASES.append({"name": "mlp_mixed_growth2_R1", "experiment": "mlp_synthetic", "synthetic_examples": 70,
                    "global_batch_size": 16, "epochs": 2, "num_gpus": 1,
                    "extra": ["--dtype_policy=mixed_float16", "--mixed_reduction=tensorflow",
                              "--loss_scale=dynamic:8192", "--dynamic_growth_steps=2"],
                    "mixed": {"policy": "mixed_float16", "initial_scale": 8192.0, "growth_steps": 2}})
# --clip_semantics=tensorflow with a mixed policy: each replica's unscaled
# gradient clipped before the all-reduce, as Keras 3's LossScaleOptimizer
# under MirroredStrategy (scripts/tf_mixed_clip.py); R = 2.
TRAIN_CASES.append({"name": "mlp_mixed_replica_clip_R2", "experiment": "mlp_synthetic", "synthetic_examples": 70,
                    "global_batch_size": 16, "epochs": 2, "num_gpus": 2,
                    "extra": ["--dtype_policy=mixed_float16", "--mixed_reduction=tensorflow",
                              "--loss_scale=dynamic:16777216", "--global_clipnorm=0.05",
                              "--clip_semantics=tensorflow"],
                    "mixed": {"policy": "mixed_float16", "initial_scale": 16777216.0},
                    "tf": {"clip": {"global_clipnorm": 0.05}}})
# A fixed loss scale (--loss_scale=1024): Keras 3's loss_scale_factor on the
# optimizer (scale_loss multiplies, apply divides; never checks or skips).
TRAIN_CASES.append({"name": "mlp_mixed_fixed_scale_R2", "experiment": "mlp_synthetic", "synthetic_examples": 70,
                    "global_batch_size": 16, "epochs": 2, "num_gpus": 2,
                    "extra": ["--dtype_policy=mixed_float16", "--loss_scale=1024", "--mixed_reduction=tensorflow"],
                    "mixed": {"policy": "mixed_float16", "fixed_scale": 1024.0}})
# L2 under a mixed policy: the float32 regularization gradient of the scaled
# loss added to each replica's float16 partial before the all-reduce
# (--mixed_reduction=tensorflow; docs/TRAINING_FEATURES.md "Built: L2 under a
# mixed policy"); R = 2 (RN(1/R) and TensorFlow's division by R agree). R = 1
# is left out: its trajectory carries the float16 noise of TensorFlow's
# kernels (not correctly rounded) to 1.3e-3 in 10 steps, where R = 2's stays
# at 6e-5: the same per-step noise (scripts/tf_mixed_drift.py; docs).
for R in (2,):
    TRAIN_CASES.append({"name": "mlp_mixed_l2_R%d" % R, "experiment": "mlp_synthetic", "synthetic_examples": 70,
                        "global_batch_size": 16, "epochs": 2, "num_gpus": R, "l2": 0.01,
                        "extra": ["--dtype_policy=mixed_float16", "--mixed_reduction=tensorflow"],
                        "mixed": {"policy": "mixed_float16", "initial_scale": None}})
# Accumulation at R = 2 too: model.fit raises under MirroredStrategy, this
# eager loop (apply_gradients inside strategy.run) runs Keras's accumulation.
for R in (1, 2):
    TRAIN_CASES.append({"name": "mlp_accumulate2_R%d" % R, "experiment": "mlp_synthetic", "synthetic_examples": 64,
                        "global_batch_size": 16, "epochs": 2, "num_gpus": R,
                        "extra": ["--gradient_accumulation_steps=2", "--train_steps=8"], "tf": {"accumulate": 2}})
# Accumulation with --clip_semantics=tensorflow: Keras 3 clips each replica's
# mean of its own micro-steps at the update, before the all-reduce (measured:
# scripts/tf_accum_clip.py); thresholds small enough that every update clips.
for kind, c in (("clipnorm", 0.02), ("global_clipnorm", 0.05), ("clipvalue", 0.002)):
    TRAIN_CASES.append({"name": "mlp_accumulate2_%s_R2" % kind, "experiment": "mlp_synthetic", "synthetic_examples": 64,
                        "global_batch_size": 16, "epochs": 2, "num_gpus": 2,
                        "extra": ["--gradient_accumulation_steps=2", "--train_steps=8", "--%s=%g" % (kind, c),
                                  "--clip_semantics=tensorflow"],
                        "tf": {"accumulate": 2, "clip": {kind: c}}})

# The convolutional experiments (issue 31; docs/MODELS.md, scripts/tf_conv.py):
# replica BN (each replica's own statistics, MirroredStrategy's default) and
# sync BN (BatchNormalization(synchronized=True)) at R = 1, 2, 4, dropout off
# (distref's masks are keyed by the global example id, TensorFlow's by each
# replica's generator). Small, so that test_golden stays fast: the CNN over
# 72 examples at G = 32 (a short final batch of 8: 2 per replica at R = 4),
# the ResNet over 16 at G = 8 (two full steps). Not a short batch of 4 for
# the ResNet: one example per replica at R = 4 makes TensorFlow 2.21's
# oneDNN Conv2DBackpropFilter abort ("could not create a primitive
# descriptor for the reorder primitive", measured).
# The ResNet runs SGD with momentum 0.9 (--optimizer=sgd), not its Adam: the
# bias of a Conv2D followed by BatchNormalization has a gradient that is 0 in
# real arithmetic (the batch mean subtracts it), so each framework's is
# rounding noise, and Adam divides it by its own square root: an update of
# up to lr in a direction the noise picks (measured: those biases differ by
# 1.7e-4 after 2 Adam steps, the losses by 1.7e-7; docs/MODELS.md).
for exp, n, G, opt in (("cnn_synthetic", 72, 32, []), ("resnet_synthetic", 16, 8, ["sgd", 0.01, 0.9])):
    for bn in ("replica", "sync"):
        for R in (1, 2, 4):
            case = {"name": "%s_%s_bn_R%d" % (exp.split("_")[0], bn, R), "experiment": exp, "synthetic_examples": n,
                    "global_batch_size": G, "epochs": 1, "num_gpus": R, "batch_norm": bn,
                    "extra": ["--batch_norm=" + bn, "--dropout=off"]}
            if opt:
                case.update({"optimizer": opt[0], "learning_rate": opt[1], "momentum": opt[2]})
                case["extra"].append("--momentum=%g" % opt[2])
            TRAIN_CASES.append(case)
# Dropout on, through TensorFlow's own masks (issue 31 item 4): Keras'
# Dropout(0.25) recording the mask each replica drew every step
# (scripts/tf_conv.py MaskRecorder), the replicas' rows joined in global-batch
# order and written to the masks file the case's --dropout_masks reads; the
# files are committed beside tensorflow.json (the recorder's seed is fixed,
# so a regeneration writes the same bytes). TensorFlow's masks depend on R
# (each replica draws its own), so each R has its file.
for R in (1, 2, 4):
    masks = "tests/golden/cnn_dropout_masks_R%d.masks" % R
    TRAIN_CASES.append({"name": "cnn_dropout_masks_R%d" % R, "experiment": "cnn_synthetic", "synthetic_examples": 72,
                        "global_batch_size": 32, "epochs": 1, "num_gpus": R, "batch_norm": "sync",
                        "dropout_masks": masks, "dropout_rate": 0.25,
                        "extra": ["--batch_norm=sync", "--dropout_masks=" + masks]})

# Mixed precision on the CNN (docs/TRAINING_FEATURES.md, "Mixed precision with
# the models beyond Dense"; scripts/tf_mixed_conv.py): mixed_float16 with
# Keras's LossScaleOptimizer, sync BN, dropout off, at R = 1 and 2; distref's
# exact reduction (TensorFlow rounds each replica's gradient to float16 and
# sums in float32: at R = 2 that is within the same bounds). Their own bounds
# (tests/test_golden.c's bounds_of): measured 7.5e-5 loss, 3.0e-4 weights,
# 1.1e-5 BN moving statistics at R = 1 and 2, about 3x that here.
CNN_MIXED_BOUNDS = {"loss_rel": 4e-4, "weight_abs": 1e-3, "state_abs": 5e-5,
                    "why": "TensorFlow 2.21's CPU float16 Conv2DBackpropFilter/Input accumulate in float16 "
                           "(scripts/tf_mixed_conv.py [c], [f]: a median 1.2-3.3 ulp of float16 from the exact "
                           "sum rounded once, which distref applies)"}
for R in (1, 2):
    TRAIN_CASES.append({"name": "cnn_mixed_sync_bn_R%d" % R, "experiment": "cnn_synthetic", "synthetic_examples": 72,
                        "global_batch_size": 32, "epochs": 1, "num_gpus": R, "batch_norm": "sync",
                        "extra": ["--batch_norm=sync", "--dropout=off", "--dtype_policy=mixed_float16"],
                        "mixed": {"policy": "mixed_float16", "initial_scale": None}, "bounds": CNN_MIXED_BOUNDS})
# The same overflowing on purpose (initial scale 2^20, G = 16, 2 epochs): the
# float16 gradients of the convolutions overflow, and the loss scale and the
# skipped steps must be TensorFlow's at every step (a float32 run skips none).
# R = 1 only: at R = 2 TensorFlow checks each replica's own float16 gradient
# (half the sum: its step 7 does not overflow, distref's exact global sum
# does; measured), which --mixed_reduction=tensorflow models for Dense and
# which is not built for these models.
for R in (1,):
    TRAIN_CASES.append({"name": "cnn_mixed_overflow_R%d" % R, "experiment": "cnn_synthetic", "synthetic_examples": 72,
                        "global_batch_size": 16, "epochs": 2, "num_gpus": R, "batch_norm": "sync",
                        "extra": ["--batch_norm=sync", "--dropout=off", "--dtype_policy=mixed_float16",
                                  "--loss_scale=dynamic:1048576"],
                        "mixed": {"policy": "mixed_float16", "initial_scale": 1048576.0}, "bounds": CNN_MIXED_BOUNDS})

# Gradient accumulation on the CNN (issue 31): Keras 3's
# gradient_accumulation_steps=2 in the eager custom loop (model.fit's graph
# raises under MirroredStrategy; this loop does not, measured), 64 examples
# at G = 16 (4 micro-steps, 2 updates, no short batch). Each micro-step
# normalizes with its own statistics and moves the moving statistics (Keras 3,
# scripts/tf_graph_accum.py), as distref; sync BN at R = 1 and 2, replica BN
# at R = 2.
for bn, R in (("sync", 1), ("sync", 2), ("replica", 2)):
    TRAIN_CASES.append({"name": "cnn_accumulate2_%s_bn_R%d" % (bn, R), "experiment": "cnn_synthetic",
                        "synthetic_examples": 64, "global_batch_size": 16, "epochs": 1, "num_gpus": R,
                        "batch_norm": bn, "tf": {"accumulate": 2},
                        "extra": ["--batch_norm=" + bn, "--dropout=off", "--gradient_accumulation_steps=2",
                                  "--train_steps=4"]})
# ... and with --clip_semantics=tensorflow (each replica clips the mean of its
# own micro-steps' gradients at the update, scripts/tf_accum_clip.py), R = 2.
TRAIN_CASES.append({"name": "cnn_accumulate2_global_clipnorm_R2", "experiment": "cnn_synthetic",
                    "synthetic_examples": 64, "global_batch_size": 16, "epochs": 1, "num_gpus": 2,
                    "batch_norm": "sync", "tf": {"accumulate": 2, "clip": {"global_clipnorm": 0.1}},
                    "extra": ["--batch_norm=sync", "--dropout=off", "--gradient_accumulation_steps=2",
                              "--train_steps=4", "--global_clipnorm=0.1", "--clip_semantics=tensorflow"]})
# The mixed-precision features on the CNN at R = 2, as the MLP's mlp_mixed_*:
# --mixed_reduction=tensorflow (each replica's gradient rounded to its
# variable's dtype before the sum: TensorFlow's per-replica float16 Conv2D and
# Dense gradients, float32 for BN's gamma and beta), then with --l2 (the
# float32 regularization gradient added to each replica's partial) and with
# --clip_semantics=tensorflow (Keras's inner optimizer clips each replica's
# unscaled gradient before the all-reduce). The default initial scale 2^15:
# no step overflows (an overflow at R = 2 is replica 0's check in Keras,
# cnn_mixed_overflow's comment).
for name, l2, more, tf_side in (("reduction_tf", 0.0, [], {}), ("l2", 0.01, [], {}),
                                ("replica_clip", 0.0, ["--global_clipnorm=0.1", "--clip_semantics=tensorflow"],
                                 {"clip": {"global_clipnorm": 0.1}})):
    case = {"name": "cnn_mixed_%s_R2" % name, "experiment": "cnn_synthetic", "synthetic_examples": 72,
            "global_batch_size": 32, "epochs": 1, "num_gpus": 2, "batch_norm": "sync",
            "extra": ["--batch_norm=sync", "--dropout=off", "--dtype_policy=mixed_float16",
                      "--mixed_reduction=tensorflow"] + more,
            "mixed": {"policy": "mixed_float16", "initial_scale": None}, "bounds": CNN_MIXED_BOUNDS, "tf": tf_side}
    if l2:
        case["l2"] = l2
    TRAIN_CASES.append(case)

# distref's experiments (core/experiment.c), as the TensorFlow side needs them
EXPERIMENTS = {
    "linear_ones": {"layers": [(1, 1, "linear")], "loss": "mse", "opt": "sgd", "lr": 0.01, "momentum": 0.0},
    "mlp_synthetic": {"layers": [(784, 128, "relu"), (128, 10, "linear")], "loss": "xent", "opt": "sgd",
                      "lr": 0.01, "momentum": 0.9},
}


def flags_of(case):
    f = ["--experiment=" + case["experiment"], "--global_batch_size=%d" % case["global_batch_size"],
         "--epochs=%d" % case["epochs"], "--distribution_strategy=mirrored", "--num_gpus=%d" % case["num_gpus"]]
    for k in ("synthetic_examples", "l2", "optimizer", "learning_rate", "loss_reduction"):
        if k in case:
            f.append("--%s=%s" % (k, case[k]))
    if case.get("nesterov"):
        f.append("--nesterov=true")
    return f + case.get("extra", [])


def optimizer_of(tf, case, exp, lr):
    """The Keras optimizer of a case: its schedule, clipping, accumulation."""
    side = case.get("tf", {})
    kw = dict(side.get("clip", {}))
    if "accumulate" in side:
        kw["gradient_accumulation_steps"] = side["accumulate"]
    if "schedule" in side:
        kind, p = side["schedule"]
        S = tf.keras.optimizers.schedules
        lr = S.CosineDecay(**p) if kind == "cosine" else S.PiecewiseConstantDecay(p["boundaries"], p["values"])
    if case.get("optimizer", exp["opt"]) == "adam":
        return tf.keras.optimizers.Adam(learning_rate=lr, beta_1=0.9, beta_2=0.999, epsilon=1e-7, **kw)
    return tf.keras.optimizers.SGD(learning_rate=lr, momentum=exp["momentum"], nesterov=case.get("nesterov", False),
                                   **kw)


def tf_setup():
    import tensorflow as tf
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 8)
    return tf


def strategy(tf, R):
    return tf.distribute.MirroredStrategy(["/cpu:%d" % i for i in range(R)])


def tf_splits(tf):
    P = tf.data.experimental.AutoShardPolicy
    names = {"auto": P.AUTO, "data": P.DATA, "off": P.OFF, "file": P.FILE, "hint": P.HINT}
    out = []
    for n, G, R in SPLIT_CASES:
        s = strategy(tf, R)
        for pol in POLICIES:
            ds = tf.data.Dataset.range(n).batch(G)
            o = tf.data.Options()
            o.experimental_distribute.auto_shard_policy = names[pol]
            ds = ds.with_options(o)
            steps = [[v.numpy().tolist() for v in s.experimental_local_results(x)]
                     for x in s.experimental_distribute_dataset(ds)]
            out.append({"n": n, "global_batch_size": G, "num_replicas": R, "policy": pol, "ids": steps})
    # distribute_datasets_from_function with the guide's dataset_fn
    for n, G, R in FUNCTION_CASES:
        s = strategy(tf, R)

        def fn(ctx, n=n, G=G):
            return tf.data.Dataset.range(n).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(
                ctx.get_per_replica_batch_size(G))
        case = {"n": n, "global_batch_size": G, "num_replicas": R, "policy": "auto", "input_mode": "function"}
        try:
            case["ids"] = [[v.numpy().tolist() for v in s.experimental_local_results(x)]
                           for x in s.distribute_datasets_from_function(fn)]
        except ValueError as e:
            case["error"] = str(e).strip()
        out.append(case)
    return out


def export(case, what, folder):   # the training features' flags are for training only
    base = {k: v for k, v in case.items() if k != "extra"}
    subprocess.run([DISTREF, "export", "--what=" + what, "--format=npy", "--model_dir=" + folder] + flags_of(base),
                   check=True, stdout=subprocess.DEVNULL)


def tf_train_conv(tf, case):
    """A convolutional case (scripts/tf_conv.py): every BatchNormalization
    state entry and a sample of the trainable ones."""
    import tf_conv
    with tempfile.TemporaryDirectory() as d:
        export(case, "all", d)
        losses, flat, ntrain, masks, series = tf_conv.train(tf, case, d, strategy)
    if "dropout_masks" in case:
        tf_conv.write_masks(os.path.join(ROOT, case["dropout_masks"]), masks, case["global_batch_size"])
    step = 3 if flat.size < 4000 else 11
    idx = list(range(0, ntrain, step)) + list(range(ntrain, flat.size))
    out = {"name": case["name"], "flags": flags_of(case), "losses": losses, "weight_index": idx,
           "weights": [float(flat[i]) for i in idx], "num_params": int(flat.size), "num_trainable": ntrain}
    out.update(series)
    if "bounds" in case:
        out["bounds"] = case["bounds"]
    return out


def tf_train_mixed(tf, case):
    """A mixed-precision case (scripts/tf_mixed.py): also the loss scale each
    step used, whether it was skipped, and which replicas' own gradients
    were finite."""
    import tf_mixed
    with tempfile.TemporaryDirectory() as d:
        export(case, "all", d)
        losses, flat, series = tf_mixed.train(tf, case, d, strategy)
    idx = list(range(0, flat.size, 97))
    out = {"name": case["name"], "flags": flags_of(case), "losses": losses, "weight_index": idx,
           "weights": [float(flat[i]) for i in idx], "num_params": int(flat.size)}
    out.update(series)
    return out


def tf_train(tf, case):
    import numpy as np
    if case["experiment"] not in EXPERIMENTS:
        return tf_train_conv(tf, case)
    if "mixed" in case:
        return tf_train_mixed(tf, case)
    exp = EXPERIMENTS[case["experiment"]]
    with tempfile.TemporaryDirectory() as d:
        export(case, "all", d)
        x = np.load(os.path.join(d, "x.npy"))
        y = np.load(os.path.join(d, "y.npy"))
        order = np.load(os.path.join(d, "order.npy"))
        init = []
        for l in range(len(exp["layers"])):
            init.append(np.load(os.path.join(d, "dense_%d_kernel.npy" % l)))
            init.append(np.load(os.path.join(d, "dense_%d_bias.npy" % l)))
    R, G = case["num_gpus"], case["global_batch_size"]
    l2 = case.get("l2", 0.0)
    lr = case.get("learning_rate", exp["lr"])
    s = strategy(tf, R)
    with s.scope():
        layers = [tf.keras.layers.Dense(o, activation=None if a == "linear" else a) for (_, o, a) in exp["layers"]]
        model = tf.keras.Sequential([tf.keras.Input((exp["layers"][0][0],))] + layers)
        model.set_weights(init)
        opt = optimizer_of(tf, case, exp, lr)
    if exp["loss"] == "xent":
        per_example = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    else:
        per_example = tf.keras.losses.MeanSquaredError(reduction="none")

    def step_fn(xb, yb):
        with tf.GradientTape() as tape:
            out = model(xb, training=True)
            gbs = None if case.get("loss_reduction") == "tf_default" else G
            loss = tf.nn.compute_average_loss(per_example(yb, out), global_batch_size=gbs)
            if l2:
                reg = l2 * tf.add_n([tf.reduce_sum(tf.square(k)) for k in model.trainable_variables[0::2]])
                loss += tf.nn.scale_regularization_loss(reg)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    def dist_step(batch):   # eager: a tf.function retraced for the short batch trips Keras 3's SGD (TF 2.21)
        per = s.run(step_fn, args=batch)
        return s.reduce(tf.distribute.ReduceOp.SUM, per, axis=None)

    losses = []
    ycol = y.astype(np.int32) if exp["loss"] == "xent" else y.reshape(-1, 1)
    for e in range(case["epochs"]):
        ds = tf.data.Dataset.from_tensor_slices((x[order[e]], ycol[order[e]])).batch(G)
        for batch in s.experimental_distribute_dataset(ds):
            losses.append(float(dist_step(batch).numpy()))
    flat = np.concatenate([w.reshape(-1) for w in model.get_weights()]).astype(np.float32)
    idx = list(range(flat.size)) if flat.size <= 64 else list(range(0, flat.size, 97))
    return {"name": case["name"], "flags": flags_of(case), "losses": losses,
            "weight_index": idx, "weights": [float(flat[i]) for i in idx], "num_params": int(flat.size)}


TRAJ_FLAGS = ["--experiment=mlp_synthetic", "--synthetic_examples=1000", "--global_batch_size=64"]


def tf_trajectory(tf, out, R, steps):
    """mlp_synthetic (1000 examples, G = 64: step 16 of each epoch is a
    short batch of 40) under MirroredStrategy(R logical CPUs), every step
    recorded in distref's trajectory format: the variables, Keras's momentum
    slots, the gradient as applied and the loss. The gradient is
    strategy.reduce(SUM) of the replicas' gradients of the scaled loss (the
    sum apply_gradients applies, computed beside it: TensorFlow does not
    hand out the one it reduces inside); the loss is strategy.reduce(SUM) of
    the replicas' compute_average_loss(global_batch_size=G)."""
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import distref
    strat = ["--distribution_strategy=one_device"] if R == 1 else \
        ["--distribution_strategy=mirrored", "--num_gpus=%d" % R]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([DISTREF, "export", "--what=all", "--format=npy", "--model_dir=" + d,
                        "--train_steps=%d" % steps] + TRAJ_FLAGS + strat, check=True, stdout=subprocess.DEVNULL)
        x = np.load(os.path.join(d, "x.npy"))
        y = np.load(os.path.join(d, "y.npy")).astype(np.int32)
        order = np.load(os.path.join(d, "order.npy"))
        init = [np.load(os.path.join(d, "dense_%d_%s.npy" % (l, k))) for l in range(2) for k in ("kernel", "bias")]
    G = 64
    s = strategy(tf, R)
    with s.scope():
        model = tf.keras.Sequential([tf.keras.Input((784,)), tf.keras.layers.Dense(128, activation="relu"),
                                     tf.keras.layers.Dense(10)])
        model.set_weights(init)
        opt = tf.keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
        opt.build(model.trainable_variables)
    per_example = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    names = ["dense_%d/%s" % (l, k) for l in range(2) for k in ("kernel", "bias")]

    def step_fn(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(per_example(yb, model(xb, training=True)), global_batch_size=G)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss, grads

    def state():
        t = {n: v.numpy() for n, v in zip(names, model.trainable_variables)}
        t.update({"optimizer/momentum/" + n: m.numpy() for n, m in zip(names, opt.momentums)})
        return t

    traj = distref.Trajectory(out, settings={"experiment": "mlp_synthetic", "synthetic_examples": 1000,
                                             "global_batch_size": G, "seed": 42, "optimizer": "sgd",
                                             "learning_rate": 0.01, "momentum": 0.9,
                                             "written_by": "scripts/tf_golden.py trajectory",
                                             "framework": "tensorflow %s MirroredStrategy(%d logical CPUs)"
                                                          % (tf.__version__, R)})
    traj.record(0, state())
    step = 0
    for e in range(order.shape[0]):
        ds = tf.data.Dataset.from_tensor_slices((x[order[e]], y[order[e]])).batch(G)
        for batch in s.experimental_distribute_dataset(ds):
            if step == steps:
                return
            loss, grads = s.run(step_fn, args=batch)
            t = state()
            t.update({"gradient/" + n: s.reduce(tf.distribute.ReduceOp.SUM, g, axis=None).numpy()
                      for n, g in zip(names, grads)})
            step += 1
            traj.record(step, t, loss=s.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None).numpy())


def train_in_child(case):
    """One training case per process: strategies of different sizes in one
    process collide in TensorFlow's collective groups ("joining a group
    with size 4, but that group has size 2")."""
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "_train", json.dumps(case)],
                       check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def write_json(doc, path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def merge(path, new_path):
    doc, new = json.load(open(path)), json.load(open(new_path))
    if doc["tensorflow"] != new["tensorflow"] or doc["splits"] != new["splits"]:
        sys.stderr.write("tf_golden.py merge: %s is from TensorFlow %s, %s from %s (or their splits differ)\n"
                         % (path, doc["tensorflow"], new_path, new["tensorflow"]))
        sys.exit(1)
    cases = {c["name"]: c for c in doc["training"]}
    cases.update({c["name"]: c for c in new["training"]})
    rank = {c["name"]: i for i, c in enumerate(TRAIN_CASES)}
    doc["training"] = sorted(cases.values(), key=lambda c: rank.get(c["name"], len(rank)))
    write_json(doc, path)
    print("merged %d cases of %s into %s (%d training cases)" % (len(new["training"]), new_path, path,
                                                                len(doc["training"])))


def generate(path, only=()):
    tf = tf_setup()
    unknown = set(only) - {c["name"] for c in TRAIN_CASES}
    if unknown:
        sys.stderr.write("tf_golden.py: no training case named %s\n" % ", ".join(sorted(unknown)))
        sys.exit(2)
    doc = {"tensorflow": tf.__version__, "generated_by": "scripts/tf_golden.py generate",
           "devices": "MirroredStrategy over logical CPU devices",
           "splits": tf_splits(tf), "training": [train_in_child(c) for c in TRAIN_CASES if not only or c["name"] in only]}
    write_json(doc, path)
    print("wrote %s (TensorFlow %s: %d split cases, %d training cases)" %
          (path, tf.__version__, len(doc["splits"]), len(doc["training"])))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "generate":
        generate(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 4 and sys.argv[1] == "merge":
        merge(sys.argv[2], sys.argv[3])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "trajectory":
        tf_trajectory(tf_setup(), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) == 5 else 200)
    elif len(sys.argv) == 3 and sys.argv[1] == "_train":
        print(json.dumps(tf_train(tf_setup(), json.loads(sys.argv[2]))))
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
