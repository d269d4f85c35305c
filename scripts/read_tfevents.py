"""Reads a run's TensorBoard event files back with TensorBoard's own loader
and checks them against metrics.jsonl (scripts/test_tensorboard.sh).

    python read_tfevents.py MODEL_DIR STEPS

Exits 0 when every step 1..STEPS has the four scalars and its loss has the
bits of metrics.jsonl's loss_bits; 1 otherwise, saying what differs.
"""
import json
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator


def main():
    model_dir, steps = sys.argv[1], int(sys.argv[2])
    acc = event_accumulator.EventAccumulator(model_dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = sorted(acc.Tags()["scalars"])
    want = ["accuracy", "examples_per_sec", "learning_rate", "loss"]
    if tags != want:
        print(f"tensorboard: scalar tags {tags}, expected {want}")
        return 1
    bits = {}
    with open(os.path.join(model_dir, "metrics.jsonl"), encoding="utf-8") as f:
        for line in f:
            m = json.loads(line)
            bits[m["step"]] = int(m["loss_bits"], 16)
    for tag in want:
        got = [e.step for e in acc.Scalars(tag)]
        if got != list(range(1, steps + 1)):
            print(f"tensorboard: {tag} has steps {got[:5]}... ({len(got)}), expected 1..{steps}")
            return 1
    for e in acc.Scalars("loss"):
        b = struct.unpack("<I", struct.pack("<f", e.value))[0]
        if b != bits[e.step]:
            print(f"tensorboard: loss at step {e.step} is 0x{b:08x}, metrics.jsonl has 0x{bits[e.step]:08x}")
            return 1
    lr = {e.value for e in acc.Scalars("learning_rate")}
    print(f"tensorboard: steps 1..{steps} of {', '.join(want)} read back from "
          f"{len([n for n in os.listdir(model_dir) if 'tfevents' in n])} event files; "
          f"loss has metrics.jsonl's bits at every step; learning_rate {sorted(lr)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
