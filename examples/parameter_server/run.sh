#!/bin/sh
# ParameterServerStrategy with a ClusterCoordinator (seeds/001): a TF_CONFIG
# cluster of a chief (the coordinator), two workers and two ps tasks;
# asynchronous training whose interleaving is drawn from --schedule_seed.
# Run twice with seed 7 (the same bits), once with seed 8 (other bits),
# then with one worker against one_device (the same bits).
set -eu
COMMON="--experiment=mlp_synthetic --global_batch_size=64 --train_steps=10"
two='{"cluster": {"chief": ["c:1"], "worker": ["w0:1", "w1:1"], "ps": ["p0:1", "p1:1"]}, "task": {"type": "chief", "index": 0}}'
one='{"cluster": {"chief": ["c:1"], "worker": ["w0:1"], "ps": ["p0:1"]}, "task": {"type": "chief", "index": 0}}'
ps() {
    name=$1; config=$2; shift 2
    # shellcheck disable=SC2086
    TF_CONFIG="$config" "$DISTREF" train --distribution_strategy=parameter_server $COMMON "$@" \
        --model_dir="$EXAMPLE_TMP/$name" | sed "s/^/$name: /"
}
ps seed7       "$two" --staleness=2 --schedule_seed=7
ps seed7_again "$two" --staleness=2 --schedule_seed=7
ps seed8       "$two" --staleness=2 --schedule_seed=8
ps one_worker  "$one" --staleness=2 --schedule_seed=7
# shellcheck disable=SC2086
"$DISTREF" train --distribution_strategy=one_device --num_gpus=0 $COMMON --model_dir="$EXAMPLE_TMP/one_device" |
    sed "s/^/one_device: /"
grep -E '"(num_workers|num_ps|staleness_bound|schedule_seed|updates_applied|max_staleness|mean_staleness)"' "$EXAMPLE_TMP/seed7/summary.json" | sed 's/^ */seed7 summary.json: /'
tr -d ' \n' < "$EXAMPLE_TMP/seed7/summary.json" | grep -o '"device":"/job:[a-z]*/replica:0/task:[0-9]/device:CPU:0"' |
    sed 's/^/seed7 summary.json: /'
tr -d ' \n' < "$EXAMPLE_TMP/seed7/summary.json" | grep -o '{"variable":[0-9]*,"part":[0-9]*,"ps_task":[0-9]*,"floats":[0-9]*}' |
    sed 's/^/seed7 summary.json: /'
