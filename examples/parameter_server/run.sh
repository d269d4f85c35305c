#!/bin/sh
# ParameterServerStrategy with a ClusterCoordinator (seeds/001): a TF_CONFIG
# cluster of a chief (the coordinator), two workers and two ps tasks;
# asynchronous training whose interleaving is drawn from --schedule_seed.
# Run twice with seed 7 (the same bits), once with seed 8 (other bits),
# then with one worker against one_device (the same bits). Then the same
# cluster as five processes (--variant=mpi under mpirun: chief, 2 workers,
# 2 ps tasks): the seeded schedule gives seed 7's bits again; a worker that
# fails running step 4 gives the reference's bits for the same failure; the
# free schedule (real arrival order) is recorded, and the reference
# replaying the recording gives its bits.
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
# The cluster as processes. CI runs as root; Open MPI refuses root unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
cluster='{"cluster": {"chief": ["c:1"], "worker": ["w0:1", "w1:1"], "ps": ["p0:1", "p1:1"]}}'   # each rank: its task
mpi() {
    name=$1; shift
    # shellcheck disable=SC2086
    TF_CONFIG="$cluster" mpirun --oversubscribe -np 5 "$DISTREF" train --variant=mpi \
        --distribution_strategy=parameter_server $COMMON --staleness=2 "$@" --model_dir="$EXAMPLE_TMP/$name" \
        > "$EXAMPLE_TMP/$name.log" 2>&1
    grep '^train:' "$EXAMPLE_TMP/$name.log" | sed "s/^/$name: /"
}
mpi mpi_seed7 --schedule=seeded --schedule_seed=7
ps fail_w1_step4 "$two" --staleness=2 --schedule_seed=7 --fail_worker=1:4
mpi mpi_fail_w1_step4 --schedule=seeded --schedule_seed=7 --fail_worker=1:4
grep -o '"\(worker_failures\|rerun_closures\|worker_recoveries\)":[0-9]*' "$EXAMPLE_TMP/mpi_fail_w1_step4/summary.json" |
    sed 's/^/mpi_fail_w1_step4 summary.json: /'
mpi mpi_free --schedule=free > /dev/null
ps replay "$two" --staleness=2 --replay_schedule="$EXAMPLE_TMP/mpi_free/ps_schedule.jsonl" > /dev/null
a=$(grep -o '"weights_sha256": *"[0-9a-f]*"' "$EXAMPLE_TMP/mpi_free/summary.json")
b=$(grep -o '"weights_sha256": *"[0-9a-f]*"' "$EXAMPLE_TMP/replay/summary.json")
echo "mpi_free: $(grep -c '"event":"land"' "$EXAMPLE_TMP/mpi_free/ps_schedule.jsonl") landings recorded; the reference replaying them: $([ -n "$a" ] && [ "$a" = "$b" ] && echo 'the same weights' || echo 'DIFFERENT weights')"
grep -E '"(num_workers|num_ps|staleness_bound|schedule_seed|updates_applied|max_staleness|mean_staleness)"' "$EXAMPLE_TMP/seed7/summary.json" | sed 's/^ */seed7 summary.json: /'
tr -d ' \n' < "$EXAMPLE_TMP/seed7/summary.json" | grep -o '"device":"/job:[a-z]*/replica:0/task:[0-9]/device:CPU:0"' |
    sed 's/^/seed7 summary.json: /'
tr -d ' \n' < "$EXAMPLE_TMP/seed7/summary.json" | grep -o '{"variable":[0-9]*,"part":[0-9]*,"ps_task":[0-9]*,"floats":[0-9]*}' |
    sed 's/^/seed7 summary.json: /'
