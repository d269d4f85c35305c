#!/bin/sh
# The seeds' MultiWorkerMirroredStrategy program: a TF_CONFIG cluster of two
# workers, two emulated GPUs each, started as two processes (task index 0
# and 1) as one would start them on two machines. Until distref has its MPI
# variant each process emulates the whole cluster with the reference, so
# both train the same 4 replicas and must agree with each other and with
# mirrored on 4 GPUs on one machine.
set -eu
COMMON="--experiment=mlp_synthetic --optimizer=adam --learning_rate=0.001 --from_logits=false
        --global_batch_size=64 --train_steps=10"
cluster='"cluster": {"worker": ["localhost:12345", "localhost:12346"]}'
for index in 0 1; do
    # shellcheck disable=SC2086
    TF_CONFIG="{$cluster, \"task\": {\"type\": \"worker\", \"index\": $index}}" \
        "$DISTREF" train --distribution_strategy=multi_worker_mirrored --num_gpus=2 $COMMON \
        --model_dir="$EXAMPLE_TMP/worker$index" > "$EXAMPLE_TMP/worker$index.log" 2>&1 &
    eval "pid$index=\$!"
done
# shellcheck disable=SC2154
wait "$pid0" && wait "$pid1"
# shellcheck disable=SC2086
"$DISTREF" train --distribution_strategy=mirrored --num_gpus=4 $COMMON \
    --model_dir="$EXAMPLE_TMP/mirrored" > "$EXAMPLE_TMP/mirrored.log" 2>&1
for run in worker0 worker1 mirrored; do
    sed "s/^/$run: /" "$EXAMPLE_TMP/$run.log"
    grep '^{"step":1,' "$EXAMPLE_TMP/$run/metrics.jsonl" | sed "s/^/$run metrics.jsonl: /"
    grep -E '"(num_workers|num_replicas_in_sync|cross_device_op|weights_sha256)"' "$EXAMPLE_TMP/$run/summary.json" |
        sed -e "s/^ */$run summary.json: /"
    grep -o '"device":"[^"]*GPU:1"' "$EXAMPLE_TMP/$run/summary.json" | sed "s/^/$run summary.json: /"
done
