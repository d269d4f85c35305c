#!/bin/sh
# The seeds' Keras MNIST MLP (784-128-10, softmax, CategoricalCrossentropy,
# Adam 0.001, batch 64) under MirroredStrategy on 4 emulated GPUs, then on one
# device, 10 steps each; then the two runs' metrics side by side.
set -eu
COMMON="--experiment=mlp_synthetic --optimizer=adam --learning_rate=0.001 --from_logits=false
        --global_batch_size=64 --train_steps=10"
# shellcheck disable=SC2086
"$DISTREF" train --distribution_strategy=mirrored --num_gpus=4 $COMMON --model_dir="$EXAMPLE_TMP/mirrored"
# shellcheck disable=SC2086
"$DISTREF" train --distribution_strategy=one_device --num_gpus=1 $COMMON --model_dir="$EXAMPLE_TMP/one_device"
for run in mirrored one_device; do
    for step in 1 10; do
        grep "^{\"step\":$step," "$EXAMPLE_TMP/$run/metrics.jsonl" |
            sed -e "s/^/$run metrics.jsonl: /" -e 's/,"replica_ids":.*}$/}/'
    done
    grep -E '"(num_replicas_in_sync|weights_sha256)"' "$EXAMPLE_TMP/$run/summary.json" | sed -e "s/^ */$run summary.json: /"
done
