"""Measure Keras 3 / TF learning-rate schedules and gradient clipping.

Usage: build/tfvenv/bin/python scripts/tf_training_features.py
Prints the measurements that docs/TRAINING_FEATURES.md records:
  (a) each schedule's float32 value per step against a float32 emulation
      (Keras's ops in its order) and against double-evaluate-round-once;
      which step the optimizer reads (optimizer.iterations before the
      update: 0 at the first step);
  (b) clipnorm / clipvalue / global_clipnorm under MirroredStrategy: per
      replica (before the all-reduce) or after aggregation.
"""
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
import numpy as np
import tensorflow as tf
import keras

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * 4)
f32 = np.float32
S = keras.optimizers.schedules


def bits(x):
    return int(np.asarray(x, dtype=f32).view(np.uint32))


# ---- (a) schedules: TF's value per step vs two implementations ----------

def emu_f32(kind, p, step):
    """Keras's formula, op by op in float32 (math.cos/pow in double, then
    rounded, as a correctly rounded float32 cos/pow would give)."""
    s = f32(step)
    kind = kind.split("_")[0]   # cosine_from, polynomial_cycle, exponential_staircase: options in p
    if kind == "cosine":
        ws, wt, ds = p["warmup_steps"], p["warmup_target"], p["decay_steps"]
        init, alpha = f32(p["initial"]), f32(p["alpha"])
        s = min(s, f32(ds + ws))
        if s < f32(ws):
            frac = f32(s / f32(ws))
            return f32(f32(f32(f32(wt) - init) * frac) + init)
        t = f32(s - f32(ws))
        frac = f32(t / f32(ds))
        c = f32(f32(0.5) * f32(f32(1.0) + f32(math.cos(float(f32(f32(math.pi) * frac))))))
        dec = f32(f32(f32(f32(1.0) - alpha) * c) + alpha)
        return f32(f32(wt) * dec)
    if kind == "polynomial":
        init, end, pw, ds = f32(p["initial"]), f32(p["end"]), f32(p["power"]), f32(p["decay_steps"])
        if p.get("cycle"):
            ds = f32(ds * (f32(1.0) if s == 0 else f32(math.ceil(f32(s / ds)))))
        else:
            s = min(s, ds)
        q = f32(s / ds)
        return f32(f32(f32(init - end) * f32(float(f32(1.0) - q) ** float(pw))) + end)
    if kind == "exponential":
        init, dr, ds = f32(p["initial"]), f32(p["decay_rate"]), f32(p["decay_steps"])
        q = f32(s / ds)
        if p.get("staircase"):
            q = f32(math.floor(q))
        return f32(init * f32(float(dr) ** float(q)))
    if kind == "piecewise":
        b, v = p["boundaries"], p["values"]
        for i, bi in enumerate(b):
            if step <= bi:
                return f32(v[i])
        return f32(v[-1])


def emu_double(kind, p, step):
    """The same formula evaluated in double, rounded to float32 once."""
    s = float(step)
    if kind != kind.split("_")[0]:
        return None   # the options are compared with the float32 emulation only
    if kind == "cosine":
        ws, wt, ds, init, alpha = p["warmup_steps"], p["warmup_target"], p["decay_steps"], p["initial"], p["alpha"]
        s = min(s, ds + ws)
        if s < ws:
            return f32((wt - init) * (s / ws) + init)
        c = 0.5 * (1 + math.cos(math.pi * (s - ws) / ds))
        return f32(wt * ((1 - alpha) * c + alpha))
    if kind == "polynomial":
        s = min(s, p["decay_steps"])
        return f32((p["initial"] - p["end"]) * (1 - s / p["decay_steps"]) ** p["power"] + p["end"])
    if kind == "exponential":
        return f32(p["initial"] * p["decay_rate"] ** (s / p["decay_steps"]))
    return emu_f32(kind, p, step)


SCHEDULES = {
    "cosine": (dict(initial=0.0, warmup_target=0.1, warmup_steps=7, decay_steps=50, alpha=0.1),
               lambda p: S.CosineDecay(p["initial"], p["decay_steps"], alpha=p["alpha"],
                                       warmup_target=p["warmup_target"], warmup_steps=p["warmup_steps"])),
    "polynomial": (dict(initial=0.1, end=0.001, power=2.0, decay_steps=50),
                   lambda p: S.PolynomialDecay(p["initial"], p["decay_steps"], p["end"], power=p["power"])),
    "exponential": (dict(initial=0.1, decay_rate=0.9, decay_steps=7),
                    lambda p: S.ExponentialDecay(p["initial"], p["decay_steps"], p["decay_rate"])),
    "piecewise": (dict(boundaries=[5, 20], values=[0.1, 0.05, 0.01]),
                  lambda p: S.PiecewiseConstantDecay(p["boundaries"], p["values"])),
    # the options: a warmup from a rate other than 0, staircase, cycle
    "cosine_from": (dict(initial=0.02, warmup_target=0.1, warmup_steps=7, decay_steps=50, alpha=0.1),
                    lambda p: S.CosineDecay(p["initial"], p["decay_steps"], alpha=p["alpha"],
                                            warmup_target=p["warmup_target"], warmup_steps=p["warmup_steps"])),
    "polynomial_cycle": (dict(initial=0.1, end=0.001, power=2.0, decay_steps=15, cycle=True),
                         lambda p: S.PolynomialDecay(p["initial"], p["decay_steps"], p["end"], power=p["power"],
                                                     cycle=True)),
    "exponential_staircase": (dict(initial=0.1, decay_rate=0.9, decay_steps=7, staircase=True),
                              lambda p: S.ExponentialDecay(p["initial"], p["decay_steps"], p["decay_rate"],
                                                           staircase=True)),
}


def measure_schedules(steps=60):
    for kind, (p, make) in SCHEDULES.items():
        sched = make(p)
        n_f32 = n_dbl = 0
        diffs = []
        for k in range(steps):
            tf_v = sched(tf.constant(k, tf.int64)).numpy()
            a, b = emu_f32(kind, p, k), emu_double(kind, p, k)
            n_f32 += bits(tf_v) == bits(a)
            n_dbl += b is not None and bits(tf_v) == bits(b)
            if bits(tf_v) != bits(a) or (b is not None and bits(tf_v) != bits(b)):
                diffs.append((k, float(tf_v), bits(tf_v) - bits(a), None if b is None else bits(tf_v) - bits(b)))
        dbl = f"{n_dbl}/{steps}" if emu_double(kind, p, 0) is not None else "not computed"
        print(f"schedule {kind} {p}: dtype {sched(0).dtype}; steps 0..{steps - 1}: "
              f"bits = float32 emulation {n_f32}/{steps}, = double-round-once {dbl}")
        for d in diffs[:6]:
            print(f"   step {d[0]}: tf {d[1]!r} ulps(tf - f32 emu) {d[2]} ulps(tf - double) {d[3]}")


def measure_step_counter():
    """SGD on loss = sum(w * x) with x = 1: w_k = w_{k-1} - lr(step) exactly
    recoverable; which iterations value gives the lr of the first update."""
    sched = S.PiecewiseConstantDecay([0, 1, 2], [1.0, 2.0, 4.0, 8.0])  # lr(0)=1, lr(1)=2, lr(2)=4
    w = tf.Variable([0.0])
    opt = keras.optimizers.SGD(learning_rate=sched)
    out = []
    for _ in range(3):
        it = int(opt.iterations.numpy())
        opt.apply_gradients([(tf.constant([1.0]), w)])
        out.append((it, float(w.numpy()[0])))
    print("step counter: (optimizer.iterations before apply, w after)", out,
          "-> the k-th update (1-based) uses lr(iterations = k - 1)")


# ---- (b) clipping under MirroredStrategy --------------------------------

def clip_run(R, clip, X, Y, G):
    devs = [f"/cpu:{i}" for i in range(R)]
    strat = tf.distribute.MirroredStrategy(devs) if R > 1 else tf.distribute.OneDeviceStrategy("/cpu:0")
    with strat.scope():
        m = keras.Sequential([keras.Input((X.shape[1],)),
                              keras.layers.Dense(2, use_bias=True, kernel_initializer="zeros")])
        m.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0, **clip), loss="mse")
    ds = tf.data.Dataset.from_tensor_slices((X, Y)).batch(G)
    m.fit(ds, epochs=1, verbose=0, shuffle=False)
    return [v.numpy() for v in m.weights]


def measure_clipping():
    # replica 0's examples have a large gradient, replica 1's a small one: a
    # per-replica clip and a clip of the aggregate give different updates.
    X = np.array([[10.0, 0, 0], [10.0, 0, 0], [0, 0.1, 0], [0, 0.1, 0]], f32)
    Y = np.array([[30.0, -30.0], [30.0, -30.0], [0.1, 0.2], [0.1, 0.2]], f32)
    G = 4
    # the unclipped mean gradient of MSE (mean over 2 outputs and G examples)
    W0 = np.zeros((3, 2), f32); b0 = np.zeros(2, f32)

    def grad(x, y, D):
        e = (x @ W0 + b0 - y)          # (n,2)
        dz = 2.0 * e / (2 * D)
        return [x.T @ dz, dz.sum(0)]

    def clipped(gs, kind, c):
        if kind == "clipnorm":
            return [g * c / max(np.sqrt((g * g).sum()), c) for g in gs]
        if kind == "global_clipnorm":
            n = np.sqrt(sum((g * g).sum() for g in gs))
            return [g * c / max(n, c) for g in gs]
        return [np.clip(g, -c, c) for g in gs]

    for kind, c in (("clipnorm", 1.0), ("global_clipnorm", 1.0), ("clipvalue", 0.5)):
        agg = clipped(grad(X, Y, G), kind, c)
        per = [a + b for a, b in zip(clipped(grad(X[:2], Y[:2], G), kind, c),
                                     clipped(grad(X[2:], Y[2:], G), kind, c))]
        for R in (1, 2):
            w = clip_run(R, {kind: c}, X, Y, G)
            d_agg = max(float(np.abs(w[i] + agg[i]).max()) for i in range(2))
            d_per = max(float(np.abs(w[i] + per[i]).max()) for i in range(2))
            print(f"clip {kind}={c} R={R}: kernel[0]={w[0][0].tolist()} "
                  f"|w - after-aggregation| {d_agg:.3g}, |w - per-replica| {d_per:.3g} "
                  f"-> {'after aggregation' if d_agg < 1e-5 else 'per replica' if d_per < 1e-5 else 'neither'}")


if __name__ == "__main__":
    print("tensorflow", tf.__version__, "keras", keras.__version__, "numpy", np.__version__)
    what = sys.argv[1:] or ["schedules", "counter", "clipping"]
    if "schedules" in what: measure_schedules()
    if "counter" in what: measure_step_counter()
    if "clipping" in what: measure_clipping()


def golden_c(steps=60):
    """TF's schedule bits, steps 0..steps-1, as C arrays (tests/test_schedule.c)."""
    for kind, (p, make) in SCHEDULES.items():
        sched = make(p)
        vals = [bits(sched(tf.constant(k, tf.int64)).numpy()) for k in range(steps)]
        print(f"static const uint32_t TF_{kind.upper()}[{steps}] = {{")
        for i in range(0, steps, 6):
            print("    " + ", ".join(f"0x{v:08x}u" for v in vals[i:i + 6]) + ",")
        print("};")


if __name__ == "__main__" and "golden_c" in sys.argv[1:]:
    golden_c()


# ---- (c) gradient accumulation (Keras 3's gradient_accumulation_steps) ---

def measure_accumulation():
    # 1. what is averaged, when iterations and slots advance, the lr read
    sched = S.PiecewiseConstantDecay([0, 1, 2, 3], [1.0, 2.0, 4.0, 8.0, 16.0])
    for name, opt in (("sgd", keras.optimizers.SGD(learning_rate=sched, gradient_accumulation_steps=2)),
                      ("sgd_momentum", keras.optimizers.SGD(learning_rate=1.0, momentum=0.5,
                                                            gradient_accumulation_steps=2)),
                      ("adam", keras.optimizers.Adam(learning_rate=1.0, gradient_accumulation_steps=2))):
        w = tf.Variable([0.0])
        rows = []
        for g in (1.0, 3.0, 5.0, 7.0):
            opt.apply_gradients([(tf.constant([g]), w)])
            rows.append((g, int(opt.iterations.numpy()), float(w.numpy()[0])))
        print(f"accumulation k=2 {name}: (grad, iterations after, w after)", rows)
    # the Adam step Keras uses at the first update: w1 = -lr_t * m/(sqrt(v)+eps) with t = iterations + 1
    g = 2.0
    for t in (1, 2):
        m, v = 0.1 * g, 0.001 * g * g
        lr_t = math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        print(f"   adam first update of mean grad {g} if bias correction used t={t}: w = {-lr_t * m / (math.sqrt(v) + 1e-7)!r}")
    # 2. fit: a short final micro-batch; under MirroredStrategy
    X = np.arange(6, dtype=f32).reshape(6, 1) + 1
    Y = np.zeros((6, 1), f32)
    for R in (1, 2):
        devs = [f"/cpu:{i}" for i in range(R)]
        strat = tf.distribute.MirroredStrategy(devs) if R > 1 else tf.distribute.OneDeviceStrategy("/cpu:0")
        with strat.scope():
            m = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")])
            m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01, gradient_accumulation_steps=2), loss="mse")
        try:
            m.fit(tf.data.Dataset.from_tensor_slices((X, Y)).batch(4), epochs=1, verbose=0, shuffle=False)
        except Exception as e:   # measured: Keras 3 cannot accumulate under MirroredStrategy
            print(f"accumulation fit R={R}: {type(e).__name__}: {str(e).splitlines()[0][:60]!r} ... "
                  f"{'merge_call called while defining a new graph' in str(e) and '(merge_call inside the cond)'}")
            continue
        w = float(m.weights[0].numpy()[0, 0])
        gb = [2 * (X[i:j, 0] * X[i:j, 0]).sum() / (j - i) for i, j in ((0, 4), (4, 6))]   # d/dw mean (w x)^2 at w=1
        mean_of_means = 1 - 0.01 * (gb[0] + gb[1]) / 2
        global_mean = 1 - 0.01 * 2 * (X[:, 0] ** 2).sum() / 6
        print(f"accumulation fit R={R}, micro-batches [4, 2], k=2: w = {w!r}; mean of the micro-batches' mean "
              f"gradients -> {mean_of_means!r}; global mean over 6 -> {global_mean!r}")


if __name__ == "__main__" and "accumulation" in sys.argv[1:]:
    measure_accumulation()
