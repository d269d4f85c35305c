"""Measures TensorFlow/Keras semantics that distref's reference layers match
(docs/MODELS.md): the batch-norm variance formulas (per replica and
synchronized), the moving-statistics update, how replica BN's moving
statistics combine under MirroredStrategy, and MaxPooling2D's gradient tie
rule. Run: build/tfvenv/bin/python scripts/tf_layer_probe.py (CPU, 2 logical
devices)."""
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
import keras

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
print("tensorflow", tf.__version__, "keras", keras.__version__)

f32 = np.float32
rng = np.random.default_rng(1)
# a large offset: E[x^2]-E[x]^2 and the two-pass variance differ visibly in float32
x = (f32(3000.0) + rng.standard_normal((8, 1)).astype(f32)).astype(f32)


def formulas(v):
    v = v.astype(f32)
    mean = f32(np.sum(v.astype(np.float64)) / v.size)
    two_pass = f32(np.sum(((v - mean) ** 2).astype(np.float64)) / v.size)
    ex2 = f32(np.sum((v.astype(np.float64)) ** 2) / v.size)
    one_pass = f32(ex2 - mean * mean)
    return mean, two_pass, one_pass


def run(sync, R):
    strat = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"][:R])
    with strat.scope():
        bn = keras.layers.BatchNormalization(momentum=0.99, epsilon=1e-3, synchronized=sync)
        bn.build((None, 1))
    xs = tf.constant(x)

    @tf.function
    def step():
        def fn(ctx_x):
            ctx = tf.distribute.get_replica_context()
            i = ctx.replica_id_in_sync_group
            n = x.shape[0] // R
            return bn(xs[i * n:(i + 1) * n], training=True)
        return strat.run(fn, args=(None,))
    step()
    return bn.moving_mean.numpy()[0], bn.moving_variance.numpy()[0]


mean, tp, op = formulas(x[:, 0])
for sync in (False, True):
    mm, mv = run(sync, 2)
    print(f"synchronized={sync} R=2 moving_mean={mm!r} moving_variance={mv!r}")
print("global: mean", repr(mean), "two-pass var", repr(tp), "E[x2]-E[x]2 var", repr(op))
for h in (0, 1):
    m_h, tp_h, op_h = formulas(x[4 * h:4 * h + 4, 0])
    print(f"half {h}: mean {m_h!r} two-pass {tp_h!r} one-pass {op_h!r}")
mom = f32(0.99)
for name, var in (("two-pass", tp), ("one-pass", op)):
    a = f32(f32(1.0) * mom + var * f32(1 - mom))
    b = f32(f32(1.0) - (f32(1.0) - var) * f32(1 - mom))
    print(f"moving_variance if {name}: m*mom+v*(1-mom)={a!r}  m-(m-v)*(1-mom)={b!r}")
a = f32(f32(0.0) * mom + mean * f32(1 - mom))
b = f32(f32(0.0) - (f32(0.0) - mean) * f32(1 - mom))
print(f"moving_mean: m*mom+mean*(1-mom)={a!r}  m-(m-mean)*(1-mom)={b!r}")
mm1, mv1 = run(False, 1)
print(f"R=1 (one device) moving_mean={mm1!r} moving_variance={mv1!r}")

# MaxPooling2D gradient with ties: a 2x2 window of equal values
pool = keras.layers.MaxPooling2D(2)
v = tf.constant(np.array([[[[1.0], [1.0]], [[1.0], [1.0]]]], dtype=f32))
with tf.GradientTape() as tape:
    tape.watch(v)
    y = tf.reduce_sum(pool(v))
print("maxpool tie grad (2x2 all equal):", tape.gradient(y, v).numpy().reshape(2, 2).tolist())
v = tf.constant(np.array([[[[0.0], [2.0]], [[2.0], [1.0]]]], dtype=f32))
with tf.GradientTape() as tape:
    tape.watch(v)
    y = tf.reduce_sum(pool(v))
print("maxpool tie grad ([[0,2],[2,1]]):", tape.gradient(y, v).numpy().reshape(2, 2).tolist())
