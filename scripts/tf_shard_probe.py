# distref: what tf.data's auto-shard FILE and DATA policies give each worker of a
# dataset of 4 TFRecord files (3, 2, 3, 2 records, ids 0..9), through the
# rewrite multi-worker strategies apply per worker (_AutoShardDataset);
# docs/MPI.md, "Ranks that read only their shard".
#   build/tfvenv/bin/python scripts/tf_shard_probe.py
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import inspect
import tensorflow as tf
from tensorflow.python.data.experimental.ops import distribute as dist
print("tensorflow", tf.__version__, "_AutoShardDataset", inspect.signature(dist._AutoShardDataset.__init__))
import tempfile
tmp = tempfile.mkdtemp()
files, k = [], 0
for i, n in enumerate([3, 2, 3, 2]):
    files.append(os.path.join(tmp, f"f{i}.tfrecord"))
    with tf.io.TFRecordWriter(files[-1]) as w:
        for _ in range(n):
            w.write(str(k).encode())
            k += 1
P = tf.data.experimental.AutoShardPolicy
def make(kind, pol):
    if kind == "TFRecordDataset(files)": ds = tf.data.TFRecordDataset(files)
    else: ds = tf.data.Dataset.from_tensor_slices(files).interleave(tf.data.TFRecordDataset, cycle_length=1)
    o = tf.data.Options(); o.experimental_distribute.auto_shard_policy = getattr(P, pol)
    return ds.with_options(o)
for kind in ("TFRecordDataset(files)", "from_tensor_slices(files).interleave"):
    for pol in ("FILE", "DATA"):
        for W in (2, 3, 5):
            try:
                got = [[int(x) for x in dist._AutoShardDataset(make(kind, pol), W, w).as_numpy_iterator()] for w in range(W)]
                print(kind, pol, "W=%d" % W, got)
            except Exception as e:
                print(kind, pol, "W=%d" % W, "error:", type(e).__name__, str(e).split("Could not")[-1][:160].replace("\n", " "))
