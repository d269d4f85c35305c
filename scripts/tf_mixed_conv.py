"""Measure Keras 3 / TF mixed precision on the layers beyond Dense (issue 31).

Usage: /work/tfvenv/bin/python scripts/tf_mixed_conv.py
Prints what docs/TRAINING_FEATURES.md ("Mixed precision with the models
beyond Dense") records, for mixed_float16 and mixed_bfloat16:
  (a) the dtype of each layer's output in cnn_synthetic's Keras model
      (scripts/tf_conv.py's build) and of the loss;
  (b) Conv2D forward against a float64 oracle: is each output the exact
      dot product of the compute-dtype input and kernel plus the rounded
      bias, rounded once to the compute dtype (counts of elements that are,
      and of those that are only float32-then-c)?  Large channel counts so
      that an accumulation in the compute dtype would show;
  (c) Conv2D's backward (Conv2DBackpropInput / Filter in the compute dtype)
      against the same oracle: dx and dW rounded once from the exact sum?
  (d) BatchNormalization in training: the output against a float32
      computation on the compute-dtype input rounded once to c (Keras 3 casts
      float16/bfloat16 inputs to float32), the moving statistics' dtype;
  (e) GlobalAveragePooling2D (mean of c values): one rounding of the exact
      mean?  MaxPool, Add, Dropout: their output dtypes.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
import sys

import numpy as np
import tensorflow as tf
import keras

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tf_conv  # noqa: E402

print("tensorflow", tf.__version__, "keras", keras.__version__)
rng = np.random.default_rng(31)


def np_dtype(policy):
    return np.float16 if policy == "mixed_float16" else tf.bfloat16.as_numpy_dtype


def rn(a, policy):
    """Round float64 values once to the compute dtype (via float64 -> c directly)."""
    return tf.cast(tf.constant(np.asarray(a, np.float64)), tf.float16 if policy == "mixed_float16"
                   else tf.bfloat16).numpy().astype(np.float64)


def rn32(a, policy):
    """float64 -> float32 -> c: two roundings (what a float32 accumulator would give)."""
    return rn(np.asarray(a, np.float64).astype(np.float32).astype(np.float64), policy)


def conv64(x, w, stride, pad):
    """The exact (float64) NHWC x HWIO convolution."""
    return tf.nn.conv2d(tf.constant(x, tf.float64), tf.constant(w, tf.float64), stride, pad).numpy()


def agree(name, got, once, twice):
    got = np.asarray(got, np.float64)
    n = got.size
    a1 = int(np.sum(got == once))
    a2 = int(np.sum(got == twice))
    diff = np.abs(got - once)[got != once]
    print(f"{name}: {n} elements, = RN_c(exact) {a1}, = RN_c(RN_f32(exact)) {a2}, "
          f"max |got - RN_c(exact)| {float(diff.max()) if diff.size else 0.0:.3g}")


def probe_layers(policy):
    keras.mixed_precision.set_dtype_policy(policy)
    keras.utils.set_random_seed(1)
    model, _ = tf_conv.build(tf, tf_conv.CNN_SYNTHETIC, True)
    x = rng.standard_normal((4, 28, 28, 1)).astype(np.float32)
    outs = keras.Model(model.inputs, [l.output for l in model.layers[1:]])(x, training=True)
    names = [f"{l.__class__.__name__}:{o.dtype}" for l, o in zip(model.layers[1:], outs)]
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(np.zeros(4, np.int32), outs[-1])
    print(f"[a] {policy}: " + " ".join(names) + f" loss:{loss.dtype}")
    bn = [l for l in model.layers if isinstance(l, keras.layers.BatchNormalization)][0]
    print(f"[a] {policy}: BN variables " + " ".join(f"{v.name}:{v.dtype}" for v in bn.weights))
    keras.mixed_precision.set_dtype_policy("float32")


def probe_conv(policy):
    c = tf.float16 if policy == "mixed_float16" else tf.bfloat16
    for (ic, oc, k, s, pad) in ((64, 8, 3, 1, "SAME"), (256, 4, 3, 2, "VALID"), (4, 4, 3, 2, "SAME")):
        x = rn(rng.standard_normal((2, 9, 9, ic)), policy)
        w = rn(rng.standard_normal((k, k, ic, oc)) * 0.3, policy)
        b = rn(rng.standard_normal(oc), policy)
        keras.mixed_precision.set_dtype_policy(policy)
        layer = keras.layers.Conv2D(oc, k, strides=s, padding=pad.lower())
        layer.build((None, 9, 9, ic))
        layer.set_weights([w.astype(np.float32), b.astype(np.float32)])
        xv = tf.constant(x.astype(np.float32))
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(xv)
            y = layer(xv)
            dy = tf.constant(rn(rng.standard_normal(y.shape), policy), c)
            obj = tf.reduce_sum(tf.cast(y, tf.float32) * tf.cast(dy, tf.float32))
        keras.mixed_precision.set_dtype_policy("float32")
        exact = conv64(x, w, s, pad) + b
        tag = f"[b] {policy} conv ic={ic} oc={oc} k={k} s={s} {pad}"
        print(f"{tag}: output dtype {y.dtype}")
        agree(tag + " forward", y.numpy().astype(np.float64), rn(exact, policy), rn32(exact, policy))
        # the pre-bias sum: does TF add the bias to a rounded conv (two roundings)?
        agree(tag + " forward as RN_c(RN_c(conv) + b)", y.numpy().astype(np.float64),
              rn(rn(exact - b, policy) + b, policy), rn(exact, policy))
        gx, gw, gb = tape.gradient(obj, [xv, layer.kernel, layer.bias])
        dy64 = dy.numpy().astype(np.float64)
        with tf.GradientTape(persistent=True) as t2:
            x64, w64 = tf.Variable(x), tf.Variable(w)
            o64 = tf.reduce_sum(tf.nn.conv2d(x64, w64, s, pad) * dy64)
        ex_dx, ex_dw = t2.gradient(o64, [x64, w64])
        tag = tag.replace("[b]", "[c]")
        print(f"{tag}: grad dtypes x {gx.dtype} kernel {gw.dtype} bias {gb.dtype}")
        agree(tag + " dx", gx.numpy(), rn(ex_dx.numpy(), policy), rn32(ex_dx.numpy(), policy))
        agree(tag + " dW", gw.numpy(), rn(ex_dw.numpy(), policy), rn32(ex_dw.numpy(), policy))
        agree(tag + " db", gb.numpy(), rn(dy64.sum(axis=(0, 1, 2)), policy),
              rn32(dy64.sum(axis=(0, 1, 2)), policy))


def probe_bn(policy):
    c = 8
    x = rn(rng.standard_normal((4, 5, 5, c)) * 3 + 1, policy)
    keras.mixed_precision.set_dtype_policy(policy)
    bn = keras.layers.BatchNormalization(momentum=0.99, epsilon=1e-3)
    bn.build((None, 5, 5, c))
    g = rng.standard_normal(c).astype(np.float32)
    be = rng.standard_normal(c).astype(np.float32)
    bn.set_weights([g, be, np.zeros(c, np.float32), np.ones(c, np.float32)])
    xv = tf.constant(x.astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch(xv)
        y = bn(xv, training=True)
        dy = tf.constant(rn(rng.standard_normal(y.shape), policy), y.dtype)
        obj = tf.reduce_sum(tf.cast(y, tf.float32) * tf.cast(dy, tf.float32))
    gx, gg, gbeta = tape.gradient(obj, [xv, bn.gamma, bn.beta])
    keras.mixed_precision.set_dtype_policy("float32")
    # the float32 Keras computation on the same (compute-dtype) input
    bn32 = keras.layers.BatchNormalization(momentum=0.99, epsilon=1e-3)
    bn32.build((None, 5, 5, c))
    bn32.set_weights([g, be, np.zeros(c, np.float32), np.ones(c, np.float32)])
    with tf.GradientTape() as tape:
        tape.watch(xv)
        y32 = bn32(xv, training=True)
        obj = tf.reduce_sum(y32 * tf.constant(dy.numpy().astype(np.float32)))
    gx32, gg32, gbeta32 = tape.gradient(obj, [xv, bn32.gamma, bn32.beta])
    print(f"[d] {policy} BN: output {y.dtype}, moving mean {bn.moving_mean.dtype}, input grad {gx.dtype}")
    agree(f"[d] {policy} BN output vs RN_c(float32 BN)", y.numpy(), rn(y32.numpy(), policy), rn(y32.numpy(), policy))
    agree(f"[d] {policy} BN dx vs float32 BN's dx", gx.numpy(), gx32.numpy(), rn(gx32.numpy(), policy))
    agree(f"[d] {policy} BN dgamma vs float32", gg.numpy(), gg32.numpy(), gg32.numpy())
    agree(f"[d] {policy} BN dbeta vs float32", gbeta.numpy(), gbeta32.numpy(), gbeta32.numpy())
    print(f"[d] {policy} BN moving: equal to float32 BN's: "
          f"mean {np.array_equal(bn.moving_mean.numpy(), bn32.moving_mean.numpy())} "
          f"variance {np.array_equal(bn.moving_variance.numpy(), bn32.moving_variance.numpy())}")


def probe_pool(policy):
    c = tf.float16 if policy == "mixed_float16" else tf.bfloat16
    x = rn(rng.standard_normal((4, 7, 7, 16)) * 4, policy)
    keras.mixed_precision.set_dtype_policy(policy)
    xv = tf.constant(x.astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch(xv)
        y = keras.layers.GlobalAveragePooling2D()(xv)
        dy = tf.constant(rn(rng.standard_normal(y.shape) * 3, policy), c)
        obj = tf.reduce_sum(tf.cast(y, tf.float32) * tf.cast(dy, tf.float32))
    gx = tape.gradient(obj, xv)
    others = [keras.layers.MaxPooling2D(2)(xv[:, :6, :6]), keras.layers.Add()([xv, xv]),
              keras.layers.Dropout(0.25)(xv, training=True), keras.layers.Flatten()(xv)]
    keras.mixed_precision.set_dtype_policy("float32")
    print(f"[e] {policy}: GAP {y.dtype}, MaxPool {others[0].dtype}, Add {others[1].dtype}, "
          f"Dropout {others[2].dtype}, Flatten {others[3].dtype}")
    agree(f"[e] {policy} GAP forward", y.numpy(), rn(x.mean(axis=(1, 2)), policy), rn32(x.mean(axis=(1, 2)), policy))
    ex = np.broadcast_to(dy.numpy().astype(np.float64)[:, None, None, :] / 49.0, x.shape)
    agree(f"[e] {policy} GAP dx (dy / 49)", gx.numpy(), rn(ex, policy), rn32(ex, policy))
    kept = others[2].numpy()
    sc = kept[kept != 0] / x.astype(np.float32)[kept != 0]
    # columns: RN_c(x / 0.75) (one rounding of the exact quotient), RN_c(x * RN_c(1 / 0.75))
    agree(f"[e] {policy} Dropout kept", kept[kept != 0], rn(x[kept != 0] / 0.75, policy),
          rn(x[kept != 0] * rn(1 / 0.75, policy), policy))
    print(f"[e] {policy} Dropout kept scale range {sc.min():.6f}..{sc.max():.6f}")


for p in ("mixed_float16", "mixed_bfloat16"):
    probe_layers(p)
    probe_conv(p)
    probe_bn(p)
    probe_pool(p)


def probe_filter_length(policy):
    """(f) Conv2DBackpropFilter in c: the error of dW in ulps of c against
    RN_c(exact), as the reduction (examples x output pixels) grows: an
    accumulation in c grows with it, one rounding stays within 0.5 ulp."""
    c = tf.float16 if policy == "mixed_float16" else tf.bfloat16
    for n in (1, 8, 32):
        x = rn(rng.standard_normal((n, 14, 14, 4)), policy)
        dy = rn(rng.standard_normal((n, 14, 14, 4)) * 0.01, policy)
        got = tf.raw_ops.Conv2DBackpropFilter(input=tf.constant(x, c), filter_sizes=[3, 3, 4, 4],
                                              out_backprop=tf.constant(dy, c), strides=[1, 1, 1, 1],
                                              padding="SAME").numpy().astype(np.float64)
        ex = tf.raw_ops.Conv2DBackpropFilter(input=tf.constant(x), filter_sizes=[3, 3, 4, 4],
                                             out_backprop=tf.constant(dy), strides=[1, 1, 1, 1],
                                             padding="SAME").numpy()
        once = rn(ex, policy)
        ulp = np.abs(got - once) / np.maximum(np.abs(once) * (2.0 ** -10 if c == tf.float16 else 2.0 ** -7), 1e-30)
        print(f"[f] {policy} Conv2DBackpropFilter over {n * 196} products a weight: = RN_c(exact) "
              f"{int(np.sum(got == once))}/{got.size}, median {np.median(ulp):.2f} max {ulp.max():.1f} ulp of c")


for p in ("mixed_float16", "mixed_bfloat16"):
    probe_filter_length(p)
