"""The op names and devices TensorFlow prints for distref's cnn_synthetic
(scripts/tf_conv.py's Keras model) with tf.debugging.set_log_device_placement
(True): one custom-loop SGD step under MirroredStrategy on R logical CPU
devices (OneDeviceStrategy for R = 1), synchronized or per-replica
BatchNormalization. What ref/placement_graph.c's names are measured against
(docs/MODELS.md, "--log_device_placement").

    build/tfvenv/bin/python scripts/tf_placement_conv.py R sync|replica

Prints each distinct "name: (type): device" line of the traced step that
computes (ReadVariableOp, Identity, Const, Shape and the like left out),
in TensorFlow's order.
"""
import os
import re
import subprocess
import sys


def step(R, sync):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tensorflow as tf
    import tf_conv
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * max(R, 2))
    tf.debugging.set_log_device_placement(True)
    layers, _, lr, momentum = tf_conv.SPECS["cnn_synthetic"]
    strategy = (tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(R)]) if R > 1
                else tf.distribute.OneDeviceStrategy("/cpu:0"))
    with strategy.scope():
        model, _ = tf_conv.build(tf, layers, sync)
        opt = tf.keras.optimizers.SGD(lr, momentum=momentum)
        opt.build(model.trainable_variables)   # its slots outside the traced step
    x = tf.random.uniform((8, 28, 28, 1))
    y = tf.constant([1, 2, 3, 4, 5, 6, 7, 8])
    ds = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(8))
    xent = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    @tf.function
    def train(batch):
        def fn(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(xent(yb, model(xb, training=True))) / 8.0
            g = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(g, model.trainable_variables))
            return loss
        return strategy.run(fn, args=batch)
    train(next(iter(ds)))


def main():
    if len(sys.argv) == 4 and sys.argv[3] == "--child":
        step(int(sys.argv[1]), sys.argv[2] == "sync")
        return
    if len(sys.argv) != 3 or sys.argv[2] not in ("sync", "replica") or not sys.argv[1].isdigit():
        sys.exit("usage: tf_placement_conv.py R sync|replica")
    err = subprocess.run([sys.executable, __file__, sys.argv[1], sys.argv[2], "--child"],
                         capture_output=True, text=True, check=True).stderr
    skip = re.compile(r"ReadVariableOp|Identity|Const|Shape|_Arg|_Retval|NoOp|Squeeze|Reshape/shape")
    seen = set()
    for m in re.finditer(r"\] ([A-Za-z_0-9][^ ]*/[^ ]*: \([A-Za-z0-9]+\): \S+)", err):
        line = re.sub(r"^cond/(then|else)/_\d+/cond/StatefulPartitionedCall/", "", m.group(1))
        if not skip.search(line) and line not in seen:
            seen.add(line)
            print(line)


if __name__ == "__main__":
    main()
