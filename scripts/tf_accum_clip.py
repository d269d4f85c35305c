"""Where Keras 3 clips under gradient accumulation, per replica or after the
all-reduce (issue 31; docs/TRAINING_FEATURES.md, "Gradient accumulation with
--clip_semantics=tensorflow"). Usage:
    /work/tfvenv/bin/python scripts/tf_accum_clip.py
MirroredStrategy(1) and (2) over logical CPUs, the eager custom loop
(apply_gradients inside strategy.run, no tf.function: model.fit raises under
MirroredStrategy with accumulation), SGD(1.0, gradient_accumulation_steps=2)
and a clip, two variables (a "kernel" of 2 and a "bias" of 1) at 0. Each
replica r hands the optimizer its own constant gradient at micro-steps 1 and
2; the weights after the two micro-steps (one update) are compared, in
float64, with the candidate rules:
  replica_mean  each replica clips the mean of its own micro-steps,
                clip((g1 + g2) / 2), then the all-reduce sums the R results;
  replica_sum   each replica clips its sum, clip(g1 + g2) / 2, then sums;
  micro         each replica clips every micro-step, then means and sums;
  aggregate     the all-reduce's sum of the replicas' means, clipped.
Also prints each replica's accumulator after micro-step 1 (its own
gradient, not all-reduced) and the optimizer's iterations.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
import keras

tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
print("tensorflow", tf.__version__, "keras", keras.__version__)
# GRADS[r][m]: replica r's gradient at micro-step m, as (kernel[2], bias[1]).
GRADS = [[([3.0, 4.0], [2.0]), ([1.0, -2.0], [0.5])],
         [([0.3, 0.4], [-0.2]), ([0.6, 0.1], [0.05])]]
CLIPS = ({"clipnorm": 1.0}, {"global_clipnorm": 1.0}, {"clipvalue": 1.0})


def clip(kw, g):
    """Keras's rule on a list of float64 arrays."""
    if "clipnorm" in kw:
        return [x * min(1.0, kw["clipnorm"] / np.linalg.norm(x)) for x in g]
    if "global_clipnorm" in kw:
        n = np.sqrt(sum(float(np.sum(x * x)) for x in g))
        return [x * min(1.0, kw["global_clipnorm"] / n) for x in g]
    return [np.clip(x, -kw["clipvalue"], kw["clipvalue"]) for x in g]


def rules(kw, R):
    g = [[[np.array(t, np.float64) for t in m] for m in GRADS[r]] for r in range(R)]
    mean = lambda a, b: [(x + y) / 2 for x, y in zip(a, b)]
    add = lambda terms: [sum(t) for t in zip(*terms)]
    return {"replica_mean": add([clip(kw, mean(*g[r])) for r in range(R)]),
            "replica_sum": add([[x / 2 for x in clip(kw, add(g[r]))] for r in range(R)]),
            "micro": add([mean(clip(kw, g[r][0]), clip(kw, g[r][1])) for r in range(R)]),
            "aggregate": clip(kw, add([mean(*g[r]) for r in range(R)]))}


def run(kw, R):
    st = tf.distribute.MirroredStrategy(["/cpu:%d" % i for i in range(R)])
    with st.scope():
        vs = [keras.Variable(np.zeros(2, np.float32)), keras.Variable(np.zeros(1, np.float32))]
        o = keras.optimizers.SGD(1.0, gradient_accumulation_steps=2, **kw)
        o.build(vs)
    acc_after_1 = None
    for m in range(2):
        per = [[tf.constant(np.array(t, np.float32)) for t in GRADS[r][m]] for r in range(R)]

        def fn():
            r = tf.distribute.get_replica_context().replica_id_in_sync_group
            g = [per[0][i] if R == 1 else tf.where(tf.equal(r, 0), per[0][i], per[1][i]) for i in range(2)]
            o.apply_gradients(zip(g, vs))
        st.run(fn)   # eager: no tf.function
        if m == 0:
            acc_after_1 = [[x.numpy().tolist() for x in st.experimental_local_results(a.value)]
                           for a in o._accumulated_gradients]
    w = [np.concatenate([x.numpy() for x in [st.experimental_local_results(v)[0] for v in vs]])]
    return -w[0].astype(np.float64), acc_after_1, int(o.iterations.numpy())


for R in (1, 2):
    for kw in CLIPS:
        applied, acc, it = run(kw, R)
        print("R=%d %s: applied -w = %s (iterations %d); accumulators after micro-step 1, per replica: %s"
              % (R, kw, applied.tolist(), it, acc))
        for name, v in rules(kw, R).items():
            v = np.concatenate(v)
            err = float(np.max(np.abs(v - applied)))
            print("    %-12s %-60s max |diff| %.3g%s" % (name, v.tolist(), err, "  <= matches" if err < 1e-6 else ""))
