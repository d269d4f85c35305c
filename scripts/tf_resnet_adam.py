"""Why the ResNet under Adam does not agree with TensorFlow to float32
rounding (docs/MODELS.md, "The ResNet under Adam"): step 1's gradient of
resnet_synthetic (8 examples, one batch, R = 1, dropout off) from Keras 3 in
float32 and in float64 (the oracle: the same Keras model with floatx
float64), and bin/distref's (the reference's trajectory, exact mode), per
tensor: the largest |gradient| and each one's largest distance from the
float64 gradient.

Usage: /work/tfvenv/bin/python scripts/tf_resnet_adam.py
"""
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = os.path.dirname(os.path.abspath(__file__))
DISTREF = os.path.join(os.path.dirname(HERE), "bin", "distref")
FLAGS = ["--experiment=resnet_synthetic", "--global_batch_size=8", "--epochs=1", "--distribution_strategy=mirrored",
         "--num_gpus=1", "--synthetic_examples=8"]


def tf_gradient(floatx, out):
    """One process a dtype: Keras's floatx holds for the layers built after it is set."""
    import numpy as np
    import keras
    import tensorflow as tf
    sys.path.insert(0, HERE)
    import tf_conv
    keras.config.set_floatx(floatx)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([DISTREF, "export", "--what=all", "--format=npy", "--model_dir=" + d] + FLAGS, check=True,
                       stdout=subprocess.DEVNULL)
        x = np.load(os.path.join(d, "x.npy")).reshape(-1, 28, 28, 1)
        y = np.load(os.path.join(d, "y.npy")).astype(np.int32)
        order = np.load(os.path.join(d, "order.npy"))
        init = np.load(os.path.join(d, "params.npy"))
    layers = tf_conv.SPECS["resnet_synthetic"][0]
    model, kl = tf_conv.build(tf, layers, False)
    tf_conv.set_flat(kl, init.astype(floatx))
    xb, yb = x[order[0]].astype(floatx), y[order[0]]
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(per_example(yb, model(xb, training=True)))
    vs = [w for lay in kl if lay is not None for w in lay.trainable_weights]
    assert all(v.dtype == floatx for v in vs), "floatx did not take"
    np.savez(out, *[g.numpy() for g in tape.gradient(loss, vs)])


def main():
    import numpy as np
    sys.path.insert(0, HERE)
    import tf_conv
    layers = tf_conv.SPECS["resnet_synthetic"][0]
    with tempfile.TemporaryDirectory() as d:
        for fx in ("float32", "float64"):
            subprocess.run([sys.executable, os.path.abspath(__file__), "_grad", fx, os.path.join(d, fx + ".npz")],
                           check=True)
        t32, t64 = np.load(os.path.join(d, "float32.npz")), np.load(os.path.join(d, "float64.npz"))
        subprocess.run([DISTREF, "train", "--variant=ref", "--dropout=off", "--trajectory=every:1",
                        "--model_dir=" + os.path.join(d, "m")] + FLAGS, check=True, stdout=subprocess.DEVNULL)
        st = os.path.join(d, "m", "trajectory", "step_00000001", "gradient")
        i = 0
        for l, (kind, _) in enumerate(layers):
            if kind not in ("conv", "dense", "bn"):
                continue
            name = {"conv": "conv2d", "dense": "dense", "bn": "batch_norm"}[kind]
            for w in (("gamma", "beta") if kind == "bn" else ("kernel", "bias")):
                dr = np.load(os.path.join(st, "%s_%d" % (name, l), w + ".npy")).reshape(-1).astype(np.float64)
                e = t64["arr_%d" % i].reshape(-1)
                tf32 = t32["arr_%d" % i].reshape(-1).astype(np.float64)
                i += 1
                print("%s_%d/%s: max |g| %.2e; max |g - float64's|: distref %.2e, tensorflow float32 %.2e"
                      % (name, l, w, np.abs(e).max(), np.abs(dr - e).max(), np.abs(tf32 - e).max()))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "_grad":
        tf_gradient(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 1:
        main()
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
