"""Mixed precision in Keras 3 under MirroredStrategy (issue 30, item 3;
docs/TRAINING_FEATURES.md, "Mixed precision: TensorFlow's values"), for
scripts/tf_golden.py, and a probe of where distref's two reductions meet
TensorFlow's gradient:

    tf_mixed.py probe       step 1 of the MLP (70 examples, G = 16) under
                            mixed_float16 and mixed_bfloat16 at R = 1, 2, 4:
                            TensorFlow's all-reduced, unscaled gradient against
                            bin/distref's (the reference's trajectory) with
                            --mixed_reduction=exact and =tensorflow, in ulps of
                            the compute dtype (of the scaled gradient)

The training loop (train()): keras.mixed_precision.set_dtype_policy(policy)
before the model is built in the strategy's scope; the optimizer is
keras.optimizers.LossScaleOptimizer(SGD(...), initial_scale=S,
dynamic_growth_steps=2000); per replica
    loss   = tf.nn.compute_average_loss(per_example(y, logits), global_batch_size=G)
    grads  = tape.gradient(optimizer.scale_loss(loss), variables)
    optimizer.apply(grads, variables)
and the step's loss is strategy.reduce(SUM) of the (unscaled) losses. With
"l2" (--l2) the scaled loss adds tf.nn.scale_regularization_loss(l2 * sum of
the float32 kernels' squares) before scale_loss; the recorded loss is the
data loss plus the replica's scaled regularization loss, whose SUM over the
replicas is Keras's reported loss with the L2 term (distref's float32 and
mixed steps report it alike). Recorded
per step: the loss, the loss scale the step used, whether the step was
skipped (the optimizer's iterations did not advance) and, for each replica,
whether its own local gradient had a non-finite element (Keras 3.15 reads
replica 0's under MirroredStrategy: docs/TRAINING_FEATURES.md).
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DISTREF = os.path.join(ROOT, "bin", "distref")


def load_export(d, nlayers=2):
    import numpy as np
    x = np.load(os.path.join(d, "x.npy"))
    y = np.load(os.path.join(d, "y.npy")).astype(np.int32)
    order = np.load(os.path.join(d, "order.npy"))
    init = [np.load(os.path.join(d, "dense_%d_%s.npy" % (l, k))) for l in range(nlayers) for k in ("kernel", "bias")]
    return x, y, order, init


def build(tf, s, policy, init, lr, momentum, initial_scale, clip=None, fixed=None, growth_steps=2000):
    import keras
    keras.mixed_precision.set_dtype_policy(policy)
    with s.scope():
        model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(128, activation="relu"),
                                  keras.layers.Dense(10)])
        model.set_weights(init)
        kw = dict(clip or {})
        if fixed:
            kw["loss_scale_factor"] = fixed   # --loss_scale=<factor>: the inner optimizer's, no LossScaleOptimizer
        inner = keras.optimizers.SGD(learning_rate=lr, momentum=momentum, **kw)
        if fixed:
            opt = inner
        elif policy == "mixed_float16" or initial_scale:
            opt = keras.optimizers.LossScaleOptimizer(inner, initial_scale=initial_scale or 32768.0,
                                                      dynamic_growth_steps=growth_steps)
        else:
            opt = inner   # mixed_bfloat16 without a loss scale (Model Garden's default)
        opt.build(model.trainable_variables)
    keras.mixed_precision.set_dtype_policy("float32")
    return model, opt


def make_step(tf, s, model, opt, G, want_grads=False, l2=0.0):
    import keras
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    scaled = hasattr(opt, "dynamic_scale")

    def step_fn(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(per_example(yb, model(xb, training=True)), global_batch_size=G)
            total = loss
            if l2:   # --l2: float32, on the float32 kernels, 1/R per replica, scaled with the loss (fit's order)
                reg = l2 * tf.add_n([tf.reduce_sum(tf.square(layer.kernel)) for layer in model.layers])
                total = loss + tf.nn.scale_regularization_loss(reg)
            sl = opt.scale_loss(total)   # x dynamic_scale, x loss_scale_factor, or x 1
        grads = tape.gradient(sl, model.trainable_variables)
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
        if not want_grads:
            opt.apply(grads, model.trainable_variables)
        return total, finite, grads

    return step_fn, scaled


def train(tf, case, d, strategy):
    """One golden case: losses, the final flat weights, the loss-scale series."""
    import numpy as np
    x, y, order, init = load_export(d)
    R, G, m = case["num_gpus"], case["global_batch_size"], case["mixed"]
    s = strategy(tf, R)
    model, opt = build(tf, s, m["policy"], init, case.get("learning_rate", 0.01), 0.9, m.get("initial_scale"),
                       case.get("tf", {}).get("clip"), m.get("fixed_scale"), m.get("growth_steps", 2000))
    step_fn, scaled = make_step(tf, s, model, opt, G, l2=case.get("l2", 0.0))
    losses, scales, skipped, local_finite = [], [], [], []
    for e in range(case["epochs"]):
        ds = tf.data.Dataset.from_tensor_slices((x[order[e]], y[order[e]])).batch(G)
        for batch in s.experimental_distribute_dataset(ds):
            scale = float(opt.dynamic_scale.numpy()) if scaled else float(m.get("fixed_scale") or 1.0)
            it = int(opt.iterations.numpy())
            loss, fin, _ = s.run(step_fn, args=batch)
            losses.append(float(s.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None).numpy()))
            scales.append(scale)
            skipped.append(int(opt.iterations.numpy()) == it)
            local_finite.append([bool(v.numpy()) for v in s.experimental_local_results(fin)])
    flat = np.concatenate([w.reshape(-1) for w in model.get_weights()]).astype(np.float32)
    return losses, flat, {"loss_scales": scales, "skipped": skipped, "replica_finite": local_finite}


def distref_grad(flags, d):
    """bin/distref's (the reference's) step-1 gradient as applied, unscaled."""
    import numpy as np
    subprocess.run([DISTREF, "train", "--variant=ref", "--train_steps=1", "--trajectory=every:1",
                    "--model_dir=" + d] + flags, check=True, stdout=subprocess.DEVNULL)
    g = os.path.join(d, "trajectory", "step_00000001", "gradient")
    return [np.load(os.path.join(g, "dense_%d" % l, k + ".npy")).reshape(-1) for l in range(2)
            for k in ("kernel", "bias")]


def ulps(a, b, dt):
    """|a - b| in ulps of the compute dtype at max(|a|, |b|) (a, b: values of that dtype in float32)."""
    import numpy as np
    m = np.maximum(np.abs(a), np.abs(b)).astype(np.float64)
    mant = 10 if dt == "float16" else 7
    emin = -14 if dt == "float16" else -126
    e = np.floor(np.log2(np.where(m > 0, m, 1.0)))
    ulp = np.exp2(np.maximum(e, emin) - mant)
    return np.abs(a.astype(np.float64) - b.astype(np.float64)) / ulp


def probe_one(tf, policy, R):
    import numpy as np
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tf_golden
    base = ["--experiment=mlp_synthetic", "--synthetic_examples=70", "--global_batch_size=16",
            "--distribution_strategy=mirrored", "--num_gpus=%d" % R, "--dtype_policy=" + policy]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([DISTREF, "export", "--what=all", "--format=npy", "--model_dir=" + d, "--epochs=1"] + base[:5],
                       check=True, stdout=subprocess.DEVNULL)
        x, y, order, init = load_export(d)
    s = tf_golden.strategy(tf, R)
    model, opt = build(tf, s, policy, init, 0.01, 0.9, None)
    step_fn, scaled = make_step(tf, s, model, opt, 16, want_grads=True)
    ds = tf.data.Dataset.from_tensor_slices((x[order[0]], y[order[0]])).batch(16)
    batch = next(iter(s.experimental_distribute_dataset(ds)))
    _, _, grads = s.run(step_fn, args=batch)
    scale = float(opt.dynamic_scale.numpy()) if scaled else 1.0
    tfg = [s.reduce(tf.distribute.ReduceOp.SUM, g, axis=None).numpy().reshape(-1) / np.float32(scale) for g in grads]
    dt = policy[6:]
    out = {}
    for red in ("exact", "tensorflow"):
        with tempfile.TemporaryDirectory() as d:
            mine = distref_grad(base + ["--mixed_reduction=" + red], d)
        u = np.concatenate([ulps(a * scale, b * scale, dt) for a, b in zip(tfg, mine)])
        out[red] = (int((u > 0).sum()), float(u.max()), int(u.size))
    return out


def probe(tf):
    for policy in ("mixed_float16", "mixed_bfloat16"):
        for R in (1, 2, 4):
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "_probe", policy, str(R)],
                               check=True, stdout=subprocess.PIPE, text=True)
            res = json.loads(r.stdout.strip().splitlines()[-1])
            print("%s R=%d step-1 gradient vs TF: " % (policy, R) + "; ".join(
                "--mixed_reduction=%s: %d of %d elements differ, max %.3g ulp(%s)" % (k, v[0], v[2], v[1], policy[6:])
                for k, v in res.items()))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tf_golden
    if len(sys.argv) == 2 and sys.argv[1] == "probe":
        probe(None)
    elif len(sys.argv) == 4 and sys.argv[1] == "_probe":
        print(json.dumps(probe_one(tf_golden.tf_setup(), sys.argv[2], int(sys.argv[3]))))
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
