"""Keras 3's gradient accumulation with BatchNormalization and Dropout
(docs/MODELS.md, "Gradient accumulation"): model.fit with
SGD(gradient_accumulation_steps=2), one update of two micro-batches of 4.

Measures (printed with the versions):
  bn stats   whether the applied gradient is the mean of each micro-batch's
             gradient with that micro-batch's statistics (or the 8 examples')
  moving     whether the moving mean/variance move at every micro-step (two
             updates of 0.99/0.01) or once per optimizer update
  dropout    how many draws the Dropout layer's seed generator makes in the
             update (one per micro-step: a new mask each)
Run: /work/tfvenv/bin/python scripts/tf_graph_accum.py
"""
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
import keras


def model(seed, rate):
    keras.utils.set_random_seed(seed)
    inp = keras.Input((6, 6, 1))
    x = keras.layers.Conv2D(3, 3, padding="same")(inp)
    x = keras.layers.BatchNormalization(momentum=0.99, epsilon=1e-3)(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dropout(rate, seed=seed)(x)
    return keras.Model(inp, keras.layers.Dense(4)(x))


def main():
    print("tensorflow", tf.__version__, "keras", keras.__version__)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 6, 6, 1)).astype(np.float32) * np.arange(1, 9, dtype=np.float32)[:, None, None, None]
    y = rng.integers(0, 4, 8)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    lr = 0.5
    m = model(1, 0.0)
    w0 = [v.numpy() for v in m.weights]
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=lr, gradient_accumulation_steps=2), loss=loss)
    m.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    bn = m.layers[2]
    k0 = m.layers[1].kernel.numpy()
    # the candidates, on a fresh copy: gradients per micro-batch (its own statistics) or of the 8 at once
    c = model(1, 0.0)
    for v, a in zip(c.weights, w0):
        v.assign(a)

    def grad(xb, yb):
        with tf.GradientTape() as t:
            lo = loss(yb, c(xb, training=True))
        return t.gradient(lo, c.layers[1].kernel).numpy()
    g1, g2, g8 = grad(x[:4], y[:4]), grad(x[4:], y[4:]), grad(x, y)
    micro = c.layers[1].kernel.numpy() * 0 + w0[0] - lr * (g1 + g2) / 2
    whole = w0[0] - lr * g8
    print("bn stats: |fit - mean of micro-batch gradients (own stats)| =", float(np.abs(k0 - micro).max()),
          "; |fit - one gradient of the 8 (their stats)| =", float(np.abs(k0 - whole).max()))
    conv = keras.Model(m.inputs, m.layers[1].output)
    for v, a in zip(conv.weights, w0[:2]):
        v.assign(a)
    h1 = conv(x[:4]).numpy().reshape(-1, 3)
    h2 = conv(x[4:]).numpy().reshape(-1, 3)
    mm0, mv0 = np.zeros(3, np.float32), np.ones(3, np.float32)
    mean1, mean2, var1, var2 = h1.mean(0), h2.mean(0), h1.var(0), h2.var(0)
    per = (mm0 * 0.99 + mean1 * 0.01) * 0.99 + mean2 * 0.01
    once_last = mm0 * 0.99 + mean2 * 0.01
    perv = (mv0 * 0.99 + var1 * 0.01) * 0.99 + var2 * 0.01
    print("moving mean after the update:", bn.moving_mean.numpy())
    print("  two updates (per micro-step):", per, "max diff", float(np.abs(bn.moving_mean.numpy() - per).max()))
    print("  one update (last micro-batch):", once_last, "max diff",
          float(np.abs(bn.moving_mean.numpy() - once_last).max()))
    print("moving variance:", bn.moving_variance.numpy(), "two updates:", perv,
          "max diff", float(np.abs(bn.moving_variance.numpy() - perv).max()))
    print("optimizer iterations:", int(m.optimizer.iterations.numpy()))
    d = model(1, 0.5)
    drop = d.layers[5]
    s0 = drop.seed_generator.state.numpy().copy()
    d.compile(optimizer=keras.optimizers.SGD(learning_rate=lr, gradient_accumulation_steps=2), loss=loss)
    d.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    s1 = drop.seed_generator.state.numpy()
    print("dropout seed generator state (seed, counter) before", s0.tolist(), "after the update", s1.tolist(),
          "(draws:", int(s1[1] - s0[1]), "for 2 micro-steps)")


if __name__ == "__main__":
    main()
