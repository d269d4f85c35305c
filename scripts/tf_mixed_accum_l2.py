"""Keras 3's LossScaleOptimizer with gradient accumulation (the schedule's
counter) and with a kernel_regularizer (issue 30; docs/TRAINING_FEATURES.md,
"Mixed precision with clipping and accumulation"). Usage:
    build/tfvenv/bin/python scripts/tf_mixed_accum_l2.py
Prints:
  [sched] SGD(PiecewiseConstantDecay([0,1,2,3,4], [1,2,4,8,16,32]),
          gradient_accumulation_steps=2) in LossScaleOptimizer(initial_scale=
          1024, dynamic_growth_steps=2): unscaled gradients 1, inf, 3, 5, 7, 9;
          w, the scale and the iterations after each: which counter the
          schedule reads when a micro-step is skipped;
  [l2]    Dense(2, kernel_regularizer=L2(l)) under mixed_float16: the dtype
          of model.losses, and whether Keras's train_step scales it (the
          kernel's gradient of scale_loss(loss + reg) against the float32
          formula 2 l w scale + cast gradient).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
import keras

print("tensorflow", tf.__version__, "keras", keras.__version__)
lr = keras.optimizers.schedules.PiecewiseConstantDecay([0, 1, 2, 3, 4], [1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
inner = keras.optimizers.SGD(lr, gradient_accumulation_steps=2)
o = keras.optimizers.LossScaleOptimizer(inner, initial_scale=1024.0, dynamic_growth_steps=2)
v = keras.Variable(np.zeros(1, np.float32))
for g in (1.0, np.inf, 3.0, 5.0, 7.0, 9.0):
    s = float(o.dynamic_scale.numpy()) if o.built else 1024.0
    o.apply([tf.constant(np.array([g], np.float32) * np.float32(s))], [v])
    print("[sched] grad %s x %g: w=%s scale=%g iterations=%d" %
          (g, s, v.numpy().tolist(), float(o.dynamic_scale.numpy()), int(inner.iterations.numpy())))

keras.mixed_precision.set_dtype_policy("mixed_float16")
l2 = 0.01
layer = keras.layers.Dense(2, use_bias=False, kernel_regularizer=keras.regularizers.L2(l2))
model = keras.Sequential([keras.Input((3,)), layer])
model.layers[0].kernel.assign(np.array([[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]], np.float32))
opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1.0), initial_scale=1024.0)
x = np.array([[1.0, 2.0, 3.0]], np.float32)
y = np.array([[0.5, -0.5]], np.float32)
with tf.GradientTape() as tape:
    out = model(x, training=True)
    data_loss = keras.losses.MeanSquaredError()(y, out)
    reg = model.losses
    print("[l2] output dtype", out.dtype, "data loss dtype", data_loss.dtype,
          "reg losses", [(r.dtype.name, float(r)) for r in reg])
    loss = opt.scale_loss(data_loss + tf.add_n(reg))
k = model.layers[0].kernel
gk = tape.gradient(loss, [k.value])[0].numpy()
w = k.numpy()
with tf.GradientTape() as t2:
    out = model(x, training=True)
    dl = opt.scale_loss(keras.losses.MeanSquaredError()(y, out))
gd = t2.gradient(dl, [k.value])[0].numpy()
print("[l2] kernel grad of scale*(loss+reg):", gk.ravel().tolist())
print("[l2] kernel grad of scale*loss:      ", gd.ravel().tolist())
f32 = np.float32
print("[l2] minus 2*l*w*scale in float32 = ", (gk - gd).ravel().tolist(), "vs",
      (f32(2 * l2) * w * f32(1024)).ravel().tolist(), "(scaled), ", (f32(2 * l2) * w).ravel().tolist(), "(unscaled)")
print("[l2] each grad element float16-representable:",
      bool(np.all(gk.astype(np.float16).astype(np.float32) == gk)), "(with reg)",
      bool(np.all(gd.astype(np.float16).astype(np.float32) == gd)), "(without)")
# What model.fit's train_step does: compute_loss adds model.losses, then scale_loss.
keras.mixed_precision.set_dtype_policy("mixed_float16")
m2 = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, use_bias=False,
                                                             kernel_regularizer=keras.regularizers.L2(l2))])
m2.layers[0].kernel.assign(w)
o2 = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1.0), initial_scale=1024.0)
m2.compile(optimizer=o2, loss="mse")
m2.fit(x, y, batch_size=1, epochs=1, verbose=0)
print("[l2] fit: w after - w before =", (m2.layers[0].kernel.numpy() - w).ravel().tolist())
print("[l2] expected -(gk/1024) =     ", (-(gk / f32(1024))).ravel().tolist())
# The order of the float32 ops, bit for bit: TF's Square gradient g * (2 w)
# with g = scale * l2 (both float32), added to the cast's gradient.
sl = f32(1024) * f32(l2)
for name, cand in (("gd + (scale*l2)*(2w)", gd + sl * (f32(2) * w)),
                   ("gd + scale*(l2*(2w))", gd + f32(1024) * (f32(l2) * (f32(2) * w))),
                   ("gd + (2*l2*w)*scale", gd + (f32(2 * l2) * w) * f32(1024))):
    print("[l2] kernel grad == %s in float32: %s" % (name, bool(np.array_equal(cand.astype(np.float32), gk))))
