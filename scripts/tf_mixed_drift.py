"""Where a mixed_float16 run and TensorFlow's part, step by step (issue 30;
docs/TRAINING_FEATURES.md, "Mixed precision: TensorFlow's values").

    build/tfvenv/bin/python scripts/tf_mixed_drift.py R L2 STEPS

The golden case mlp_mixed_l2 (scripts/tf_golden.py: the MLP, 70 synthetic
examples, G = 16, MirroredStrategy over R logical CPUs, float16,
--mixed_reduction=tensorflow, --l2=L2; scripts/tf_mixed.py's loop) run for
STEPS steps in TensorFlow and in bin/distref (the reference): for the last
step, how many elements of the all-reduced unscaled gradient differ and by
how much, and then of the weights after it. Step 1's gradient differs in a
handful of kernel elements by one float16 ulp of the scaled gradient
(TensorFlow's CPU float16 kernels are not correctly rounded; distref's
results are the exact value rounded once); from step 2 on, the weights'
float32 differences move the float16 roundings of the next forward pass,
and the same noise reaches every tensor, biases included, with or without
L2 and at every R.
"""
import glob
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
DISTREF = os.path.join(os.path.dirname(HERE), "bin", "distref")


def flat(d, what):
    import numpy as np
    return [np.load(os.path.join(d, what, "dense_%d" % l, k + ".npy")).reshape(-1) if what else
            np.load(os.path.join(d, "dense_%d" % l, k + ".npy")).reshape(-1) for l in range(2) for k in ("kernel", "bias")]


def main(R, l2, steps):
    import numpy as np
    import tf_golden
    import tf_mixed
    tf = tf_golden.tf_setup()
    base = ["--experiment=mlp_synthetic", "--synthetic_examples=70", "--global_batch_size=16",
            "--distribution_strategy=mirrored", "--num_gpus=%d" % R, "--dtype_policy=mixed_float16"]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([DISTREF, "export", "--what=all", "--format=npy", "--model_dir=" + d, "--epochs=1"] + base[:5],
                       check=True, stdout=subprocess.DEVNULL)
        x, y, order, init = tf_mixed.load_export(d)
    s = tf_golden.strategy(tf, R)
    model, opt = tf_mixed.build(tf, s, "mixed_float16", init, 0.01, 0.9, None)
    apply_fn, _ = tf_mixed.make_step(tf, s, model, opt, 16, l2=l2)
    grad_fn, _ = tf_mixed.make_step(tf, s, model, opt, 16, want_grads=True, l2=l2)
    batches = iter(s.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x[order[0]], y[order[0]])).batch(16)))
    for k in range(steps):
        b = next(batches)
        if k == steps - 1:
            _, _, g = s.run(grad_fn, args=b)
            scale = np.float32(opt.dynamic_scale.numpy())
            tf_grad = [s.reduce(tf.distribute.ReduceOp.SUM, v, axis=None).numpy().reshape(-1) / scale for v in g]
        s.run(apply_fn, args=b)
    tf_w = [w.reshape(-1) for w in model.get_weights()]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([DISTREF, "train", "--variant=ref", "--train_steps=%d" % steps, "--trajectory=every:1",
                        "--model_dir=" + d, "--mixed_reduction=tensorflow", "--l2=%g" % l2] + base,
                       check=True, stdout=subprocess.DEVNULL)
        last = sorted(glob.glob(os.path.join(d, "trajectory", "step_*")))[-1]
        mine_grad, mine_w = flat(last, "gradient"), flat(last, "")
    names = ["kernel 0", "bias 0", "kernel 1", "bias 1"]
    for what, a_all, b_all in (("gradient", tf_grad, mine_grad), ("weights", tf_w, mine_w)):
        for name, a, b in zip(names, a_all, b_all):
            dif = np.abs(a.astype(np.float64) - b)
            print("R=%d l2=%g step %d %s %s: %d of %d elements differ, max |diff| %.3g" % (
                R, l2, steps, what, name, int((dif > 0).sum()), dif.size, dif.max()))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.stderr.write(__doc__)
        sys.exit(2)
    main(int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]))
