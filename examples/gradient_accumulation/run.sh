#!/bin/sh
# Keras 3's gradient_accumulation_steps: k micro-batches of G/k examples,
# one optimizer step over all of them. distref's claim: in exact numerics
# the k micro-steps give the bits of one step of the whole batch of G, for
# every k and every replica count R, in every variant. This script checks
# it: one step of 48 on one device (12 updates of the MLP, SGD with
# momentum and L2, 476 examples: an epoch of 9 full batches and one of 44),
# then the same 12 updates as k micro-steps of 48/k on R replicas, in the
# reference, the OpenMP engine, the OpenCL engine (PoCL) and two MPI ranks;
# every run's weights_sha256 must be the one-step run's, or it exits 1.
set -eu
COMMON="--experiment=mlp_synthetic --synthetic_examples=476 --l2=0.001 --seed=7"
hash_of() { sed -n 's/.*"weights_sha256": *"\([0-9a-f]*\)".*/\1/p' "$1/summary.json"; }
# shellcheck disable=SC2086
"$DISTREF" train $COMMON --global_batch_size=48 --train_steps=12 --model_dir="$EXAMPLE_TMP/one_step" |
    sed 's/^/one step of 48, one_device: /'
want=$(hash_of "$EXAMPLE_TMP/one_step")
fails=0
check() {   # check NAME K G ARGS...: k micro-steps of G, 12 updates
    name=$1 k=$2 g=$3
    shift 3
    # shellcheck disable=SC2086
    "$@" $COMMON --global_batch_size="$g" --train_steps=$((12 * k)) --gradient_accumulation_steps="$k" \
        --model_dir="$EXAMPLE_TMP/$name" > "$EXAMPLE_TMP/$name.log" 2>&1 || { cat "$EXAMPLE_TMP/$name.log"; fails=$((fails + 1)); return 0; }
    got=$(hash_of "$EXAMPLE_TMP/$name")
    if [ "$got" = "$want" ]; then same=yes; else same=NO; fails=$((fails + 1)); fi
    echo "$name: k=$k G=$g, $(grep -c '"step"' "$EXAMPLE_TMP/$name/metrics.jsonl") micro-steps, weights_sha256=$got, one step's: $same"
}
check ref_k4_one_device 4 12 "$DISTREF" train --variant=ref
check ref_k2_mirrored_3 2 24 "$DISTREF" train --variant=ref --distribution_strategy=mirrored --num_gpus=3
check openmp_k4_mirrored_2 4 12 "$DISTREF" train --variant=openmp --distribution_strategy=mirrored --num_gpus=2
check openmp_k3_central_storage_2 3 16 "$DISTREF" train --variant=openmp --distribution_strategy=central_storage --num_gpus=2
check opencl_k8_one_device 8 6 "$DISTREF" train --variant=opencl
# CI runs as root; Open MPI refuses root unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
check mpi_k2_two_ranks 2 24 env -u TF_CONFIG mpirun --oversubscribe -np 2 "$DISTREF" train --variant=mpi \
    --distribution_strategy=multi_worker_mirrored --num_gpus=1
# Without accumulation, 12 steps of 12 are another trajectory (4 times fewer examples).
# shellcheck disable=SC2086
"$DISTREF" train $COMMON --global_batch_size=12 --train_steps=12 --model_dir="$EXAMPLE_TMP/plain_12" > /dev/null
[ "$(hash_of "$EXAMPLE_TMP/plain_12")" != "$want" ] && echo "12 plain steps of 12: other weights, as they must be"
echo "gradient accumulation: $fails runs differ from one step of 48"
[ "$fails" -eq 0 ]
