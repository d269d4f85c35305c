"""Measure Keras 3 / TF mixed precision and LossScaleOptimizer (issue 30 item 3).

Usage: build/tfvenv/bin/python scripts/tf_mixed_probe.py
Prints what docs/TRAINING_FEATURES.md ("Mixed precision") records:
  (a) per policy (float32, mixed_float16, mixed_bfloat16): the variable and
      compute dtypes of a Dense layer, the dtype of each tensor of the MLP
      (Dense+ReLU, Dense logits, softmax cross-entropy), of the loss and of
      the gradients the tape returns for the float32 variables;
  (b) LossScaleOptimizer's defaults, its state after a finite step, after a
      non-finite step (weights, scale, step_counter, iterations), and the
      growth after dynamic_growth_steps finite steps;
  (c) under MirroredStrategy R=1,2 on logical CPU devices: whether each
      replica's gradient is float16-representable (rounded to float16 before
      the float32 all-reduce), and whether a non-finite gradient on one
      replica skips the step on every replica.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
import numpy as np
import tensorflow as tf
import keras

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * 2)
print("tensorflow", tf.__version__, "keras", keras.__version__,
      "strategy.run inside tf.function" if os.environ.get("PROBE_TF_FUNCTION") else "eager strategy.run")

rng = np.random.default_rng(7)
X = rng.standard_normal((8, 6)).astype(np.float32)
Y = rng.integers(0, 3, 8).astype(np.int32)


def model_for(policy):
    keras.mixed_precision.set_dtype_policy(policy)
    keras.utils.set_random_seed(1)
    m = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="relu"),
                          keras.layers.Dense(3)])
    return m


def probe_dtypes(policy):
    m = model_for(policy)
    lossf = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        h = m.layers[0](X)
        z = m.layers[1](h)
        loss = lossf(Y, z)
    g = tape.gradient(loss, m.trainable_variables)
    d0 = m.layers[0]
    print(f"[a] {policy}: variable_dtype={d0.dtype_policy.variable_dtype} "
          f"compute_dtype={d0.dtype_policy.compute_dtype} kernel={d0.kernel.dtype} "
          f"hidden={h.dtype} logits={z.dtype} loss={loss.dtype} "
          f"grads={[str(x.dtype) for x in g]}")
    if policy != "float32":
        cd = np.float16 if "float16" in policy else tf.bfloat16.as_numpy_dtype
        gn = [x.numpy() for x in g]
        rep = all(np.array_equal(a, a.astype(cd).astype(np.float32)) for a in gn)
        print(f"[a] {policy}: every gradient element representable in {policy[6:]}: {rep}")
    keras.mixed_precision.set_dtype_policy("float32")


def probe_lso():
    keras.mixed_precision.set_dtype_policy("mixed_float16")
    v = keras.Variable(np.ones(2, np.float32))
    inner = keras.optimizers.SGD(0.5)
    o = keras.optimizers.LossScaleOptimizer(inner, dynamic_growth_steps=2)
    print(f"[b] defaults: initial_scale={keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD()).initial_scale} "
          f"dynamic_growth_steps={keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD()).dynamic_growth_steps}")
    print(f"[b] scale_loss(1.0) before build = {float(o.scale_loss(1.0))}")
    seq = [[1.0, 2.0], [np.inf, 1.0], [np.nan, 0.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]
    for i, gv in enumerate(seq):
        o.apply([tf.constant(np.array(gv, np.float32) * np.float32(float(o.dynamic_scale.value) if o.built else 32768.0))], [v])
        print(f"[b] step {i} grad*scale of {gv}: w={v.numpy().tolist()} scale={float(o.dynamic_scale.value)} "
              f"step_counter={int(o.step_counter.value)} iterations={int(o.iterations.value)} "
              f"inner.iterations={int(inner.iterations.value)}")
    keras.mixed_precision.set_dtype_policy("float32")


# the replica whose gradient is made inf ([c]); -1: the last one
POISON = int(os.environ.get("PROBE_POISON_REPLICA", "-1"))


def probe_mirrored(R):
    devs = [f"/cpu:{i}" for i in range(R)]
    st = tf.distribute.MirroredStrategy(devs)
    keras.mixed_precision.set_dtype_policy("mixed_float16")
    with st.scope():
        keras.utils.set_random_seed(1)
        m = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="relu"),
                              keras.layers.Dense(3)])
        o = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    lossf = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="sum")
    def val(v):
        return [float(np.asarray(x)) for x in st.experimental_local_results(v)]

    def step(x, y, poison):
        with tf.GradientTape() as tape:
            z = m(x)
            loss = lossf(y, z) / 8.0
            sl = o.scale_loss(loss)
        g = tape.gradient(sl, m.trainable_variables)
        rid = tf.distribute.get_replica_context().replica_id_in_sync_group
        bad = tf.logical_and(poison, tf.equal(rid, POISON if POISON >= 0 else R - 1))
        g = [tf.where(bad, tf.fill(tf.shape(gg), np.float32(np.inf)), gg) for gg in g]
        o.apply(g, m.trainable_variables)
        return g

    ds = st.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((X, Y)).batch(8))
    run = st.run
    if os.environ.get("PROBE_TF_FUNCTION"):
        run = tf.function(lambda f, args: st.run(f, args=args))
        run = (lambda fn, args, _r=run: _r(fn, args))
    for xb, yb in ds:
        g = run(step, args=(xb, yb, tf.constant(False)))
        locs = [st.experimental_local_results(gg) for gg in g]
        rep = all(np.array_equal(t.numpy(), t.numpy().astype(np.float16).astype(np.float32))
                  for gg in locs for t in gg)
        print(f"[c] R={R}: per-replica grads dtype={locs[0][0].dtype}, every replica's "
              f"gradient float16-representable before the all-reduce: {rep}; "
              f"scale={val(o.dynamic_scale)} iterations={val(o.iterations)}")
        w0 = [w.numpy().copy() for w in m.trainable_variables]
        run(step, args=(xb, yb, tf.constant(True)))
        same = all(np.array_equal(a, b.numpy()) for a, b in zip(w0, m.trainable_variables))
        copies = [[t.numpy() for t in st.experimental_local_results(w)] for w in m.trainable_variables]
        fin = all(np.all(np.isfinite(c)) for cs in copies for c in cs)
        agree = all(np.array_equal(cs[0], c) for cs in copies for c in cs)
        print(f"[c] R={R}: inf on replica {POISON if POISON >= 0 else R - 1} only: weights unchanged={same} finite={fin} "
              f"replicas' copies identical={agree} uses_merge_call={st.extended._use_merge_call()} "
              f"per-replica scale={val(o.dynamic_scale)} "
              f"iterations={val(o.iterations)}")
    keras.mixed_precision.set_dtype_policy("float32")


for p in ("float32", "mixed_float16", "mixed_bfloat16"):
    probe_dtypes(p)
probe_lso()
for R in (1, 2):
    probe_mirrored(R)
