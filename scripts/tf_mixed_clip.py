"""Where Keras 3's LossScaleOptimizer clips, unscales and checks a mixed
policy's gradient under MirroredStrategy (issue 30, item 2 of the places
follow-up; docs/TRAINING_FEATURES.md, "--clip_semantics=tensorflow with a
mixed policy"). Usage:
    /work/tfvenv/bin/python scripts/tf_mixed_clip.py
Prints, over MirroredStrategy(2 logical CPUs):
  [dtype]  a mixed_float16 Dense layer's gradient as the replica hands it to
           the optimizer (dtype of the kernel's gradient, the variable's),
           and the dtype the optimizer's all-reduce sums;
  [clip]   one float32 variable at [0, 0], LossScaleOptimizer(SGD(1.0, clip),
           initial_scale=1024); replica 0's scaled gradient 1024 * [3, 4],
           replica 1's 1024 * [0.3, 0.4]: each replica unscaled and clipped
           before the all-reduce gives w = -([0.6, 0.8] + [0.3, 0.4]) =
           -[0.9, 1.2]; the aggregate clipped, w = -[0.6, 0.8];
  [finite] replica 0 or replica 1 alone gives inf: whether the step was
           skipped (w unmoved, the scale halved) -- which replica's finite
           check decides.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
import keras

tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
print("tensorflow", tf.__version__, "keras", keras.__version__)
st = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
CLIPS = ({"global_clipnorm": 1.0}, {"clipnorm": 1.0}, {"clipvalue": 1.0})

# [dtype]: the replica's gradient of a mixed_float16 Dense layer, and what the all-reduce sums.
keras.mixed_precision.set_dtype_policy("mixed_float16")
with st.scope():
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
keras.mixed_precision.set_dtype_policy("float32")
seen = {}
real_all_reduce = tf.distribute.ReplicaContext.all_reduce


def spy(self, op, value, options=None):
    seen.setdefault("all_reduce", sorted({str(v.dtype.name) for v in tf.nest.flatten(value)}))
    return real_all_reduce(self, op, value, options)


tf.distribute.ReplicaContext.all_reduce = spy
with st.scope():
    o = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.0), initial_scale=1024.0)
    o.build(layer.trainable_variables)


@tf.function
def dtype_step():
    def fn():
        with tf.GradientTape() as tape:
            y = layer(tf.ones((4, 3)))
            loss = o.scale_loss(tf.reduce_sum(tf.cast(y, tf.float32)))
        g = tape.gradient(loss, layer.trainable_variables)
        seen.setdefault("compute", str(y.dtype.name))
        seen.setdefault("grad", [str(x.dtype.name) for x in g])
        o.apply(g, layer.trainable_variables)
    st.run(fn)


dtype_step()
tf.distribute.ReplicaContext.all_reduce = real_all_reduce
print("[dtype] layer output %s; replica's gradients (kernel, bias) %s; the optimizer's all-reduce sums %s"
      % (seen["compute"], seen["grad"], seen["all_reduce"]))


def run_two(kw, g0, g1):
    with st.scope():
        v = keras.Variable(np.zeros(2, np.float32))
        o = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1.0, **kw), initial_scale=1024.0)
        o.build([v])
    per = [tf.constant(np.array(g0, np.float32) * 1024), tf.constant(np.array(g1, np.float32) * 1024)]

    @tf.function
    def step():
        def fn():
            r = tf.distribute.get_replica_context().replica_id_in_sync_group
            o.apply([tf.where(tf.equal(r, 0), per[0], per[1])], [v])
        st.run(fn)
    step()
    return [t.numpy().tolist() for t in st.experimental_local_results(v)][0], float(o.dynamic_scale.numpy())


for kw in CLIPS:
    w, s = run_two(kw, [3.0, 4.0], [0.3, 0.4])
    print("[clip] %s replica 0 1024*[3,4], replica 1 1024*[0.3,0.4]: w=%s scale=%g" % (kw, w, s))
for kw in ({}, {"clipvalue": 1.0}):
    for bad in (0, 1):
        g = [[3.0, 4.0], [0.3, 0.4]]
        g[bad] = [np.inf, 4.0]
        w, s = run_two(kw, g[0], g[1])
        print("[finite] %s replica %d's gradient has inf: w=%s scale=%g" % (kw, bad, w, s))
