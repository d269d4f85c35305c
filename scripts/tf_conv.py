"""distref's convolutional experiments in Keras 3 (docs/MODELS.md), for
scripts/tf_golden.py: the layer lists of core/experiment.c and
core/experiment_resnet.c as Keras layers in distref's order, distref's flat
parameter vector (trainable tensors layer by layer in Keras shapes, then each
BatchNormalization's moving mean and variance) into and out of them, and a
custom MirroredStrategy loop in the seeds' recipe.

Keras layers: Conv2D (kernel HWIO, bias), BatchNormalization(momentum=0.99,
epsilon=1e-3, synchronized=True for --batch_norm=sync) followed by a ReLU
when distref's BN layer has one, MaxPooling2D(2), Flatten, Dense, Add (then
ReLU), GlobalAveragePooling2D. Dropout is left out in the cases that run
distref with --dropout=off (distref keys its masks by the global example id,
TensorFlow draws them from each replica's generator). A case with
"dropout_masks" keeps Keras' own Dropout(rate) and records the mask each
replica drew every step (MaskRecorder: kept where the output is not 0, every
input checked non-zero so that the mask is exact), the replicas' rows joined
in replica order (the global batch's, as MirroredStrategy splits it) and
written in distref's masks format (include/distref/dropout_masks.h) for
`--dropout_masks`.

A case's "tf" side gives the Keras optimizer's clipping ({"clip": {...}},
applied by Keras per replica before the all-reduce) and
gradient_accumulation_steps ({"accumulate": k}); "l2" adds
scale_regularization_loss(l2 * the Conv2D and Dense kernels' squares) to
each replica's loss (distref's --l2 leaves BatchNormalization out).
Accumulation runs under MirroredStrategy in this eager loop (apply_gradients
inside strategy.run, no tf.function; model.fit's graph raises, docs).

A case with "mixed" ({"policy", "initial_scale"}) builds the model under
Keras 3's dtype policy and wraps the optimizer in LossScaleOptimizer
(scale_loss, apply), recording the loss scale and the skipped steps
(scripts/tf_mixed.py's loop; docs/TRAINING_FEATURES.md, "Mixed precision
with the models beyond Dense").
"""
import os
import struct

# (kind, settings) as distref's layer list; src: 0 = previous output, k + 1 = layer k's;
# add: from = the layer whose output is added (-1 = the model's input)
CNN_SYNTHETIC = [("conv", dict(f=4, k=3, s=2, same=True, relu=False)), ("bn", dict(relu=True)),
                 ("conv", dict(f=4, k=3, s=1, same=True, relu=True)), ("add", dict(frm=1, relu=False)),
                 ("pool", {}), ("conv", dict(f=8, k=1, s=1, same=False, relu=True)),
                 ("conv", dict(f=8, k=3, s=2, same=False, relu=False)), ("flatten", {}), ("dropout", {}),
                 ("dense", dict(units=10))]


def resnet(width):
    """core/experiment_resnet.c's list."""
    m = []

    def push(kind, **kw):
        m.append((kind, kw))
        return len(m) - 1

    def conv(f, k, s, src=0):
        return push("conv", f=f, k=k, s=s, same=True, relu=False, src=src)

    def block(inp, f, stride):
        shortcut = inp
        if stride != 1:
            conv(f, 1, stride, inp + 1)
            shortcut = push("bn", relu=False)
        conv(f, 3, stride, inp + 1)
        push("bn", relu=True)
        conv(f, 3, 1)
        push("bn", relu=False)
        return push("add", frm=shortcut, relu=True)

    conv(width, 3, 1)
    last = push("bn", relu=True)
    for stage in range(3):
        for b in range(2):
            last = block(last, width << stage, 2 if stage > 0 and b == 0 else 1)
    push("gap")
    push("dense", units=10)
    return m


SPECS = {"cnn_synthetic": (CNN_SYNTHETIC, "sgd", 0.01, 0.9), "resnet_synthetic": (resnet(4), "adam", 0.001, 0.0)}


def mask_recorder(tf, rate):
    """Keras' own Dropout, recording each call's mask: TensorFlow's
    stateless_dropout computes where(keep, x * RN(1/(1-rate)), 0), so a unit
    is kept exactly where the output is not 0, given a non-zero input (checked:
    a zero input would hide its mask, which its gradient needs)."""
    class MaskRecorder(tf.keras.layers.Dropout):
        def __init__(self, **kw):
            super().__init__(rate, seed=31, **kw)
            self.masks = {}   # replica id -> its mask of every step

        def call(self, inputs, training=False):
            y = super().call(inputs, training=training)
            if training:
                import numpy as np
                x = np.asarray(inputs)
                assert np.all(x != 0), "a Dropout input of exactly 0: its mask cannot be read from the output"
                ctx = tf.distribute.get_replica_context()
                rid = int(ctx.replica_id_in_sync_group) if ctx is not None else 0
                self.masks.setdefault(rid, []).append((np.asarray(y) != 0).astype(np.uint8))
            return y
    return MaskRecorder()


def write_masks(path, steps, rows):
    """distref's masks file (include/distref/dropout_masks.h), one Dropout
    layer: steps[s] is step s's (n, units) 0/1 array, n <= rows (a short
    final batch's missing rows written as 0)."""
    import numpy as np
    units = steps[0].shape[1]
    with open(path, "wb") as f:
        f.write(b"DRMASKS\0" + struct.pack("<5I", 1, 1, len(steps), rows, units))
        for m in steps:
            block = np.zeros((rows, units), np.uint8)
            block[:m.shape[0]] = m
            f.write(block.tobytes())


def build(tf, layers, sync, dropout=None):
    """The Keras functional model; keras[l] is distref layer l's Keras layer
    holding weights (None for kinds without). dropout: the Dropout layers'
    rate (recording their masks, mask_recorder), or None for --dropout=off."""
    K = tf.keras.layers
    inp = tf.keras.Input((28, 28, 1))
    outs, keras = [], []
    for l, (kind, kw) in enumerate(layers):
        src = kw.get("src", 0)
        x = inp if (l == 0 and src == 0) else outs[src - 1] if src else outs[-1]
        lay = None
        if kind == "conv":
            lay = K.Conv2D(kw["f"], kw["k"], strides=kw["s"], padding="same" if kw["same"] else "valid",
                           activation="relu" if kw["relu"] else None)
            y = lay(x)
        elif kind == "bn":
            lay = K.BatchNormalization(momentum=0.99, epsilon=1e-3, synchronized=sync)
            y = lay(x)
            if kw["relu"]:
                y = K.ReLU()(y)
        elif kind == "add":
            y = K.Add()([x, inp if kw["frm"] < 0 else outs[kw["frm"]]])
            if kw["relu"]:
                y = K.ReLU()(y)
        elif kind == "pool":
            y = K.MaxPooling2D(2)(x)
        elif kind == "gap":
            y = K.GlobalAveragePooling2D()(x)
        elif kind == "flatten":
            y = K.Flatten()(x)
        elif kind == "dropout":
            if dropout is None:
                y = x   # --dropout=off
            else:
                lay = mask_recorder(tf, dropout)
                y = lay(x)
        else:
            lay = K.Dense(kw["units"])
            y = lay(x)
        outs.append(y)
        keras.append(lay)
    return tf.keras.Model(inp, outs[-1]), keras


def set_flat(keras, flat):
    """distref's flat vector into the Keras layers; returns the trainable count."""
    import numpy as np
    pos = 0
    for lay in keras:
        if lay is None or not lay.get_weights():
            continue
        ws = lay.get_weights()
        ntr = 2   # kernel, bias / gamma, beta
        for i in range(ntr):
            n = ws[i].size
            ws[i] = flat[pos:pos + n].reshape(ws[i].shape)
            pos += n
        lay.set_weights(ws)
    ntrain = pos
    for lay in keras:
        if lay is not None and len(lay.get_weights()) == 4:
            ws = lay.get_weights()
            for i in (2, 3):
                n = ws[i].size
                ws[i] = flat[pos:pos + n].reshape(ws[i].shape)
                pos += n
            lay.set_weights(ws)
    assert pos == flat.size, (pos, flat.size)
    return ntrain


def get_flat(keras):
    import numpy as np
    tr, st = [], []
    for lay in keras:
        if lay is None or not lay.get_weights():
            continue
        ws = lay.get_weights()
        tr += [w.reshape(-1) for w in ws[:2]]
        st += [w.reshape(-1) for w in ws[2:]]
    return np.concatenate(tr + st).astype(np.float32)


def train(tf, case, folder, strategy):
    """One case: losses per step, the final flat vector (distref's layout),
    the Dropout masks TensorFlow drew (a case with "dropout_masks"; else [])
    and a mixed case's loss-scale series (else {})."""
    import numpy as np
    layers, opt_kind, lr, momentum = SPECS[case["experiment"]]
    opt_kind = case.get("optimizer", opt_kind)
    lr = case.get("learning_rate", lr)
    momentum = case.get("momentum", momentum)
    x = np.load(os.path.join(folder, "x.npy")).reshape(-1, 28, 28, 1)
    y = np.load(os.path.join(folder, "y.npy")).astype(np.int32)
    order = np.load(os.path.join(folder, "order.npy"))
    init = np.load(os.path.join(folder, "params.npy"))
    R, G = case["num_gpus"], case["global_batch_size"]
    mixed = case.get("mixed")   # {"policy", "initial_scale"}: Keras 3's policy and LossScaleOptimizer
    s = strategy(tf, R)
    if mixed:
        tf.keras.mixed_precision.set_dtype_policy(mixed["policy"])
    with s.scope():
        rate = case.get("dropout_rate") if "dropout_masks" in case else None
        model, keras = build(tf, layers, case.get("batch_norm", "sync") == "sync", rate)
        ntrain = set_flat(keras, init)
        side = case.get("tf", {})   # Keras's clipping (per replica, inside apply) and accumulation
        kw = dict(side.get("clip", {}))
        if "accumulate" in side:
            kw["gradient_accumulation_steps"] = side["accumulate"]
        if opt_kind == "adam":
            opt = tf.keras.optimizers.Adam(learning_rate=lr, beta_1=0.9, beta_2=0.999, epsilon=1e-7, **kw)
        else:
            opt = tf.keras.optimizers.SGD(learning_rate=lr, momentum=momentum, **kw)
        if mixed:
            opt = tf.keras.optimizers.LossScaleOptimizer(opt, initial_scale=mixed.get("initial_scale") or 32768.0)
            opt.build(model.trainable_variables)
    tf.keras.mixed_precision.set_dtype_policy("float32")
    per_example = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    l2 = case.get("l2", 0.0)
    kernels = [lay.kernel for (kind, _), lay in zip(layers, keras) if kind in ("conv", "dense")]

    def step_fn(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(per_example(yb, model(xb, training=True)), global_batch_size=G)
            if l2:   # --l2: the Conv2D and Dense kernels (float32 variables), never BN's gamma and beta
                loss += tf.nn.scale_regularization_loss(l2 * tf.add_n([tf.reduce_sum(tf.square(k)) for k in kernels]))
            scaled = opt.scale_loss(loss) if mixed else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        if mixed:
            opt.apply(grads, model.trainable_variables)
        else:
            opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    losses, scales, skipped = [], [], []
    for e in range(case["epochs"]):
        ds = tf.data.Dataset.from_tensor_slices((x[order[e]], y[order[e]])).batch(G)
        for batch in s.experimental_distribute_dataset(ds):
            if mixed:
                scales.append(float(opt.dynamic_scale.numpy()))
                it = int(opt.iterations.numpy())
            per = s.run(step_fn, args=batch)
            losses.append(float(s.reduce(tf.distribute.ReduceOp.SUM, per, axis=None).numpy()))
            if mixed:
                skipped.append(int(opt.iterations.numpy()) == it)
    rec = [lay.masks for lay in keras if lay is not None and hasattr(lay, "masks")]
    masks = [np.concatenate([rec[0][r][s] for r in range(R)]) for s in range(len(losses))] if rec else []
    series = {"loss_scales": scales, "skipped": skipped} if mixed else {}
    return losses, get_flat(keras), ntrain, masks, series
