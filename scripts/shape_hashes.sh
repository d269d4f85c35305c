#!/bin/sh
# The weights_sha256 of a fixed list of 30 short runs across strategies,
# variants, numerics, algorithms, packs and optimizers: a refactor that
# claims "no behaviour change" prints the same 30 lines before and after.
#
#   sh scripts/shape_hashes.sh [BIN] > hashes.txt     (BIN: bin/distref)
#   diff before.txt after.txt                          (no output: the same bits)
#
# Each line: the run's name and its weights_sha256 (or "FAILED rc=N" with
# the run's last log line). Fast numerics' bits are the float order's, so
# they are machine-dependent (OPENBLAS_CORETYPE); compare on one machine.
set -u
bin=${1:-bin/distref}
tmp=$(mktemp -d /tmp/distref_shape.XXXXXX) || exit 2
trap 'rm -rf "$tmp"' EXIT
MPI_ENV="env -u TF_CONFIG OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1"
COMMON="--train_steps=12 --synthetic_examples=1200 --seed=5 --l2=0.001"
n=0
run() {   # run NAME LAUNCHER FLAGS...
    name=$1; launcher=$2; shift 2
    n=$((n + 1)); d=$tmp/$n
    # shellcheck disable=SC2086
    $launcher "$bin" train --model_dir="$d" $COMMON "$@" > "$tmp/$n.log" 2>&1
    rc=$?
    sha=$(sed -n 's/^ *"weights_sha256":"\([0-9a-f]*\)".*/\1/p' "$d/summary.json" 2>/dev/null)
    if [ "$rc" -eq 0 ] && [ -n "$sha" ]; then printf '%-44s %s\n' "$name" "$sha"
    else printf '%-44s FAILED rc=%s: %s\n' "$name" "$rc" "$(tail -n 1 "$tmp/$n.log")"; fi
}
direct() { "$@"; }
mpi2() { $MPI_ENV mpirun --oversubscribe -np 2 "$@"; }
mpi3() { $MPI_ENV mpirun --oversubscribe -np 3 "$@"; }
mpi4() { $MPI_ENV mpirun --oversubscribe -np 4 "$@"; }
tf2='{"cluster": {"worker": ["w0:1", "w1:1"]}, "task": {"type": "worker", "index": 0}}'
mw2="--distribution_strategy=multi_worker_mirrored"

run ref/one_device                 direct --variant=ref --distribution_strategy=one_device
run ref/mirrored4                  direct --variant=ref --distribution_strategy=mirrored --num_gpus=4
run ref/tpu                        direct --variant=ref --distribution_strategy=tpu
run ref/adam_mirrored2             direct --variant=ref --distribution_strategy=mirrored --num_gpus=2 --optimizer=adam
run ref/mlp_linear_wide            direct --variant=ref --distribution_strategy=mirrored --num_gpus=2 --experiment=linear_wide
TF_CONFIG=$tf2 run ref/mwms2       direct --variant=ref $mw2 --num_gpus=1
run ref/layer_devices              direct --variant=ref --distribution_strategy=one_device --layer_devices=/gpu:0,/cpu:0
run openmp/one_device_exact        direct --variant=openmp --distribution_strategy=one_device
run openmp/one_device_fast         direct --variant=openmp --distribution_strategy=one_device --numerics=fast
run openmp/mirrored4_ring_exact    direct --variant=openmp --distribution_strategy=mirrored --num_gpus=4 --all_reduce_alg=nccl --num_packs=0
run openmp/mirrored4_ring_fast     direct --variant=openmp --distribution_strategy=mirrored --num_gpus=4 --all_reduce_alg=nccl --num_packs=0 --numerics=fast
run openmp/mirrored3_hier_exact    direct --variant=openmp --distribution_strategy=mirrored --num_gpus=3 --all_reduce_alg=hierarchical_copy --num_packs=2
run openmp/mirrored3_hier_fast     direct --variant=openmp --distribution_strategy=mirrored --num_gpus=3 --all_reduce_alg=hierarchical_copy --num_packs=2 --numerics=fast
run openmp/central_storage3_exact  direct --variant=openmp --distribution_strategy=central_storage --num_gpus=3
run openmp/central_storage3_fast   direct --variant=openmp --distribution_strategy=central_storage --num_gpus=3 --numerics=fast
run openmp/tpu_exact               direct --variant=openmp --distribution_strategy=tpu
run openmp/tpu_fast                direct --variant=openmp --distribution_strategy=tpu --numerics=fast
run openmp/adam_mirrored2_fast     direct --variant=openmp --distribution_strategy=mirrored --num_gpus=2 --optimizer=adam --numerics=fast
run openmp/adam_mirrored2_exact    direct --variant=openmp --distribution_strategy=mirrored --num_gpus=2 --optimizer=adam
TF_CONFIG=$tf2 run openmp/mwms2_exact  direct --variant=openmp $mw2 --num_gpus=2
TF_CONFIG=$tf2 run openmp/mwms2_fast   direct --variant=openmp $mw2 --num_gpus=2 --numerics=fast
run opencl/one_device_exact        direct --variant=opencl --distribution_strategy=one_device
run opencl/mirrored2_exact         direct --variant=opencl --distribution_strategy=mirrored --num_gpus=2
run opencl/mirrored2_fast          direct --variant=opencl --distribution_strategy=mirrored --num_gpus=2 --numerics=fast
run mpi/mwms2_exact                mpi2 --variant=mpi $mw2 --num_gpus=1
run mpi/mwms2_fast                 mpi2 --variant=mpi $mw2 --num_gpus=1 --numerics=fast
run mpi/mwms3x2_exact              mpi3 --variant=mpi $mw2 --num_gpus=2
run mpi/mwms3x2_fast               mpi3 --variant=mpi $mw2 --num_gpus=2 --numerics=fast
TF_CONFIG='{"cluster": {"chief": ["c:1"], "worker": ["w0:1", "w1:1"], "ps": ["p0:1"]}, "task": {"type": "chief", "index": 0}}' \
run ref/parameter_server           direct --variant=ref --distribution_strategy=parameter_server
TF_CONFIG='{"cluster": {"chief": ["c:1"], "worker": ["w0:1", "w1:1"], "ps": ["p0:1"]}}' \
run mpi/parameter_server           mpi4 --variant=mpi --distribution_strategy=parameter_server
