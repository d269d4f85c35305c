#!/bin/sh
# The seeds' layer-wise model parallelism: Dense(128, relu) on one GPU,
# Dense(10) on a second, the activations copied between them; against the
# same model on one device. 3 steps of batch 64 each.
set -eu
COMMON="--experiment=mlp_synthetic --global_batch_size=64 --train_steps=3"
# shellcheck disable=SC2086
"$DISTREF" train --distribution_strategy=one_device --num_gpus=1 --layer_devices=/gpu:0,/gpu:1 $COMMON \
    --model_dir="$EXAMPLE_TMP/layers" | sed 's/^/layers on two GPUs: /'
# shellcheck disable=SC2086
"$DISTREF" train --distribution_strategy=one_device --num_gpus=1 $COMMON \
    --model_dir="$EXAMPLE_TMP/one_gpu" | sed 's/^/one GPU: /'
# Each device's bytes copied in and out, from summary.json.
tr -d ' \n' < "$EXAMPLE_TMP/layers/summary.json" | grep -o '{"device":"[^"]*","peak_bytes":[0-9]*,"bytes_in":[0-9]*,"bytes_out":[0-9]*}' |
    sed -e 's/{"device":"\([^"]*\)","peak_bytes":[0-9]*,"bytes_in":\([0-9]*\),"bytes_out":\([0-9]*\)}/\1 bytes_in \2 bytes_out \3/' \
        -e 's/^/layers on two GPUs: /'
# The placement log of one step of the layer-placed run (stderr, as
# TensorFlow's): every op of the step and the device it ran on.
# shellcheck disable=SC2086
"$DISTREF" train --distribution_strategy=one_device --num_gpus=1 --layer_devices=/gpu:0,/gpu:1 \
    --experiment=mlp_synthetic --global_batch_size=64 --train_steps=1 --log_device_placement \
    --model_dir="$EXAMPLE_TMP/log" 2>&1 >/dev/null | sed 's/^/placement log: /'
# The seed's first program: tf.random.normal on /CPU:0 and /GPU:0, a matmul
# pinned to the GPU and a reduce_sum to the CPU (device_placement.c).
"$EXAMPLES_BIN/device_placement/device_placement" | sed 's/^/explicit placement: /'
