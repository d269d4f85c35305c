#!/bin/sh
# Model Garden's flag-driven strategies (seeds/000, "Practical Examples"):
# the same training run chosen by --distribution_strategy, --num_gpus,
# --tpu, TF_CONFIG and spatial partitioning, 5 steps of batch 64 each; then
# the factory's refusals, worded as get_distribution_strategy words them.
set -eu
COMMON="--experiment=mlp_synthetic --global_batch_size=64 --train_steps=5"
run() {
    name=$1; shift
    # shellcheck disable=SC2086
    "$@" $COMMON --model_dir="$EXAMPLE_TMP/$name" | sed "s/^/$name: /"
    grep -E '"(distribution_strategy|num_replicas_in_sync)"' "$EXAMPLE_TMP/$name/summary.json" | tr -d ' \n' |
        sed -e "s/^/$name summary.json: /" -e 's/$/\n/'
}
run cpu            "$DISTREF" train --distribution_strategy=mirrored --num_gpus=0
run one_gpu        "$DISTREF" train --distribution_strategy=mirrored --num_gpus=1
run four_gpus      "$DISTREF" train --distribution_strategy=mirrored --num_gpus=4
grep -o '"device":"[^"]*GPU:[0-9]*"' "$EXAMPLE_TMP/four_gpus/summary.json" | sed 's/^/four_gpus summary.json: /'
TF_CONFIG='{"cluster": {"worker": ["host0:12345", "host1:12345"]}, "task": {"type": "worker", "index": 0}}' \
run multi_worker   "$DISTREF" train --distribution_strategy=multi_worker_mirrored --num_gpus=2
run tpu_spatial    "$DISTREF" train --distribution_strategy=tpu --tpu=v3-8 --input_partition_dims=2,2
for bad in "--distribution_strategy=off --num_gpus=2" \
           "--distribution_strategy=one_device --num_gpus=2" \
           "--distribution_strategy=mirrored --num_gpus=2 --all_reduce_alg=ring" \
           "--distribution_strategy=mirrored --num_gpus=-1" \
           "--distribution_strategy=Mirrored_Typo"; do
    # shellcheck disable=SC2086
    if "$DISTREF" train $bad --model_dir="$EXAMPLE_TMP/bad" 2> "$EXAMPLE_TMP/bad.err"; then
        echo "refused: $bad: unexpectedly accepted"; exit 1
    else
        echo "refused: $bad: exit $?: $(cat "$EXAMPLE_TMP/bad.err")"
    fi
done
