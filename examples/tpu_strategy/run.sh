#!/bin/sh
# The seeds' TPUStrategy program: the MLP with Adam, global batch 32*8 = 256
# with drop_remainder, on an emulated TPU v2-8 (8 cores, one replica each),
# then on one device; 5 steps each.
set -eu
COMMON="--experiment=mlp_synthetic --optimizer=adam --learning_rate=0.001
        --global_batch_size=256 --drop_remainder=true --train_steps=5"
# shellcheck disable=SC2086
"$DISTREF" train --distribution_strategy=tpu --tpu=v2-8 $COMMON --model_dir="$EXAMPLE_TMP/tpu" | sed 's/^/tpu: /'
# shellcheck disable=SC2086
"$DISTREF" train --distribution_strategy=one_device --num_gpus=1 $COMMON --model_dir="$EXAMPLE_TMP/one_device" |
    sed 's/^/one_device: /'
grep '^{"step":1,' "$EXAMPLE_TMP/tpu/metrics.jsonl" | sed -e 's/"replica_ids":\[[^]]*\],//' -e 's/^/tpu metrics.jsonl: /'
grep '^{"step":1,' "$EXAMPLE_TMP/one_device/metrics.jsonl" | sed -e 's/,"replica_ids":.*}$/}/' -e 's/^/one_device metrics.jsonl: /'
grep -E '"(topology|hbm_bytes_per_core|num_cores_per_replica|static_batch_per_replica|emulated_seconds_total|link_model)"' \
    "$EXAMPLE_TMP/tpu/summary.json" | sed 's/^ */tpu summary.json: /'
# The seed's resolver address: a remote TPU, refused in emulation (exit 2).
if "$DISTREF" train --distribution_strategy=tpu --tpu=grpc://10.240.1.2:8470 --train_steps=1 \
    --model_dir="$EXAMPLE_TMP/grpc" 2> "$EXAMPLE_TMP/grpc.err"; then
    echo "grpc: unexpectedly accepted"; exit 1
else
    echo "grpc: exit $?: $(cat "$EXAMPLE_TMP/grpc.err")"
fi
