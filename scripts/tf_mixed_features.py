"""Where Keras 3's LossScaleOptimizer unscales relative to clipping and
gradient accumulation (issue 30; docs/TRAINING_FEATURES.md, "Mixed precision
with clipping and accumulation"). Usage:
    build/tfvenv/bin/python scripts/tf_mixed_features.py
Prints:
  [clip]  one variable at [0, 0], SGD(1.0) with global_clipnorm=1.0 (also
          clipnorm, clipvalue) inside LossScaleOptimizer(initial_scale=1024),
          the scaled gradient 1024 * [3, 4]: w after one apply tells whether
          the clip saw the unscaled gradient (w = -[0.6, 0.8]), the scaled
          one (w = -[0.6, 0.8] / 1024) or none (w = -[3, 4]);
  [mirr]  the same under MirroredStrategy(2 logical CPUs), each replica's
          scaled gradient 1024 * [3, 4]: clipped per replica, w = -[1.2, 1.6];
          after the all-reduce, w = -[0.6, 0.8];
  [accum] SGD(1.0, gradient_accumulation_steps=2) inside the
          LossScaleOptimizer, scaled gradients of 1, inf, 3, 5, 7: w, the
          scale, the inner iterations after each.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
import keras

tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
print("tensorflow", tf.__version__, "keras", keras.__version__)
CLIPS = ({"global_clipnorm": 1.0}, {"clipnorm": 1.0}, {"clipvalue": 1.0})


def lso(**kw):
    return keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1.0, **kw), initial_scale=1024.0)


for kw in CLIPS:
    v = keras.Variable(np.zeros(2, np.float32))
    o = lso(**kw)
    o.apply([tf.constant(np.array([3.0, 4.0], np.float32) * 1024)], [v])
    print("[clip] inner %s: w=%s scale=%s" % (kw, v.numpy().tolist(), float(o.dynamic_scale.numpy())))
    try:
        v = keras.Variable(np.zeros(2, np.float32))
        o = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1.0), initial_scale=1024.0, **kw)
        o.apply([tf.constant(np.array([3.0, 4.0], np.float32) * 1024)], [v])
        print("[clip] on the LossScaleOptimizer %s: w=%s" % (kw, v.numpy().tolist()))
    except Exception as e:  # noqa: BLE001 - what Keras says is the measurement
        print("[clip] on the LossScaleOptimizer %s: %s: %s" % (kw, type(e).__name__, str(e).splitlines()[0]))

for kw in CLIPS:
    st = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with st.scope():
        v = keras.Variable(np.zeros(2, np.float32))
        o = lso(**kw)
        o.build([v])

    def step():
        o.apply([tf.constant(np.array([3.0, 4.0], np.float32) * 1024)], [v])
    st.run(step)
    print("[mirr] R=2 inner %s: w=%s" % (kw, [t.numpy().tolist() for t in st.experimental_local_results(v)][0]))

v = keras.Variable(np.zeros(1, np.float32))
inner = keras.optimizers.SGD(1.0, gradient_accumulation_steps=2)
o = keras.optimizers.LossScaleOptimizer(inner, initial_scale=1024.0, dynamic_growth_steps=2)
for g in (1.0, np.inf, 3.0, 5.0, 7.0):
    s = float(o.dynamic_scale.numpy()) if o.built else 1024.0
    o.apply([tf.constant(np.array([g], np.float32) * np.float32(s))], [v])
    print("[accum] scaled grad %s x %g: w=%s scale=%g inner.iterations=%d" %
          (g, s, v.numpy().tolist(), float(o.dynamic_scale.numpy()), int(inner.iterations.numpy())))
