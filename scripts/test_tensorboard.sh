#!/bin/sh
# TensorBoard reads distref's event files back (issue 16, item 4).
#
#   sh scripts/test_tensorboard.sh [BIN]     (BIN: bin/distref)
#
# A run of 15 steps with a checkpoint every 10 is killed (strace fault
# injection) at the rename of its second checkpoint: metrics.jsonl and the
# events file already hold steps 1..15, the checkpoint is still step 10.
# The same command resumed to 20 steps redoes 11..15 in a second event file
# that starts with a SessionLog START at step 11. TensorBoard's own
# EventAccumulator (scripts/read_tfevents.py) must then see steps 1..20 of
# loss, accuracy, learning_rate and examples_per_sec once each, the loss with
# metrics.jsonl's bits. TensorBoard is looked for in $TB_PYTHON,
# build/tbvenv, build/tfvenv, then python3; when none has it that check is
# skipped with a note (the tests never install it: `python3 -m venv
# build/tbvenv && build/tbvenv/bin/pip install tensorboard` makes it run).
set -eu
cd "$(dirname "$0")/.."
bin=${1:-bin/distref}
dir=$(mktemp -d /tmp/distref_tb_XXXXXX)
trap 'rm -rf "$dir"' EXIT
common="--distribution_strategy=mirrored --num_gpus=2 --experiment=mlp_synthetic --global_batch_size=32
        --checkpoint_every=10 --model_dir=$dir/run"
kill_at=""
if command -v strace >/dev/null 2>&1 && strace -f -o /dev/null true 2>/dev/null; then
    # renames per checkpoint: metrics.jsonl, the events file, ckpt.bin
    kill_at="strace -f -o /dev/null -e trace=rename,renameat,renameat2 -e inject=rename,renameat,renameat2:signal=SIGKILL:when=6"
fi
# shellcheck disable=SC2086
$kill_at "$bin" train $common --train_steps=15 > "$dir/out1" 2>&1 || true
if [ -n "$kill_at" ]; then
    if ! grep -q '"step":15,' "$dir/run/metrics.jsonl"; then
        echo "tensorboard: the kill at the checkpoint's rename did not happen (metrics.jsonl has no step 15)" >&2
        exit 1
    fi
else
    echo "tensorboard: strace cannot trace here; the resume is not interrupted"
fi
# shellcheck disable=SC2086
"$bin" train $common --train_steps=20 > "$dir/out2"
n=$(find "$dir/run" -name 'events.out.tfevents.*' | wc -l)
if [ "$n" != 2 ]; then
    echo "tensorboard: $n event files after two run segments, expected 2" >&2
    ls -l "$dir/run" >&2
    exit 1
fi
for py in "${TB_PYTHON:-}" build/tbvenv/bin/python build/tfvenv/bin/python python3; do
    [ -n "$py" ] || continue
    if "$py" -c 'import tensorboard.backend.event_processing.event_accumulator' 2>/dev/null; then
        rc=0
        # (TensorBoard logs its purge at the restart on stderr: shown on failure only)
        "$py" scripts/read_tfevents.py "$dir/run" 20 2> "$dir/py.err" || { rc=$?; cat "$dir/py.err" >&2; }
        exit $rc
    fi
done
echo "tensorboard: skipped (no python with tensorboard: TB_PYTHON, build/tbvenv, build/tfvenv, python3);" \
     "2 event files written, their records checked by tests/test_tfevents"
