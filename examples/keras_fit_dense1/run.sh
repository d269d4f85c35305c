#!/bin/sh
# The guide's Model.fit toy: Dense(1), loss='mse', optimizer='sgd', a dataset
# of ([1.], [1.]) x 100 batched by 10, 2 epochs; under MirroredStrategy on 2
# emulated GPUs, on one device, and under CentralStorageStrategy on 4.
set -eu
for run in "mirrored 2" "one_device 1" "central_storage 4"; do
    # shellcheck disable=SC2086
    set -- $run
    "$DISTREF" train --experiment=linear_ones --l2=0.0001 --shuffle=false --distribution_strategy="$1" --num_gpus="$2" \
        --model_dir="$EXAMPLE_TMP/$1" | sed "s/^/$1: /"
    for step in 1 10 20; do
        grep "^{\"step\":$step," "$EXAMPLE_TMP/$1/metrics.jsonl" |
            sed -e "s/^/$1 metrics.jsonl: /" -e 's/,"replica_ids":.*}$/}/'
    done
done
