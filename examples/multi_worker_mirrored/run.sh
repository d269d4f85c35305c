#!/bin/sh
# The seeds' MultiWorkerMirroredStrategy program: a TF_CONFIG cluster of two
# workers, two emulated GPUs each, started as two processes (task index 0
# and 1) as one would start them on two machines.
#
# 1. The MPI variant: mpirun starts the two workers as two ranks, each with
#    its own TF_CONFIG (checked against the MPI world) and only its own two
#    replicas; the gradients cross between the processes as exact
#    accumulators. Only the chief (rank 0) writes model_dir.
# 2. The reference's emulation: two independent processes, each emulating
#    the whole cluster (all 4 replicas) in one process.
# 3. mirrored on 4 GPUs on one machine.
# All must agree to the bit.
set -eu
COMMON="--experiment=mlp_synthetic --optimizer=adam --learning_rate=0.001 --from_logits=false
        --global_batch_size=64 --train_steps=10"
cluster='"cluster": {"worker": ["localhost:12345", "localhost:12346"]}'
tf_config() { echo "{$cluster, \"task\": {\"type\": \"worker\", \"index\": $1}}"; }

# CI runs as root; Open MPI refuses root unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI_ARGS="train --variant=mpi --distribution_strategy=multi_worker_mirrored --num_gpus=2 $COMMON
          --model_dir=$EXAMPLE_TMP/mpi --print_tf_config"
# shellcheck disable=SC2086
mpirun --oversubscribe -np 1 -x TF_CONFIG="$(tf_config 0)" "$DISTREF" $MPI_ARGS \
                     : -np 1 -x TF_CONFIG="$(tf_config 1)" "$DISTREF" $MPI_ARGS > "$EXAMPLE_TMP/mpi.log" 2>&1
# the two ranks print their TF_CONFIG in either order
grep '^TF_CONFIG' "$EXAMPLE_TMP/mpi.log" | sort | sed 's/^/mpi: /'
grep -v '^TF_CONFIG' "$EXAMPLE_TMP/mpi.log" > "$EXAMPLE_TMP/mpi.rest" || true
mv "$EXAMPLE_TMP/mpi.rest" "$EXAMPLE_TMP/mpi.log"

for index in 0 1; do
    # shellcheck disable=SC2086
    TF_CONFIG="$(tf_config $index)" \
        "$DISTREF" train --distribution_strategy=multi_worker_mirrored --num_gpus=2 $COMMON \
        --model_dir="$EXAMPLE_TMP/worker$index" > "$EXAMPLE_TMP/worker$index.log" 2>&1 &
    eval "pid$index=\$!"
done
# shellcheck disable=SC2154
wait "$pid0" && wait "$pid1"
# shellcheck disable=SC2086
"$DISTREF" train --distribution_strategy=mirrored --num_gpus=4 $COMMON \
    --model_dir="$EXAMPLE_TMP/mirrored" > "$EXAMPLE_TMP/mirrored.log" 2>&1
for run in mpi worker0 worker1 mirrored; do
    sed "s/^/$run: /" "$EXAMPLE_TMP/$run.log"
    grep '^{"step":1,' "$EXAMPLE_TMP/$run/metrics.jsonl" | sed "s/^/$run metrics.jsonl: /"
    grep -E '"(num_workers|num_replicas_in_sync|cross_device_op|weights_sha256)"' "$EXAMPLE_TMP/$run/summary.json" |
        sed -e "s/^ */$run summary.json: /"
    grep -o '"device":"[^"]*GPU:1"' "$EXAMPLE_TMP/$run/summary.json" | sed "s/^/$run summary.json: /"
done
