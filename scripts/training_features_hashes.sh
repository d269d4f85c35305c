#!/bin/sh
# weights_sha256 of each learning-rate schedule and clipping flag across
# variants and strategies, exact numerics (docs/TRAINING_FEATURES.md): on
# each feature's line every column must be the same hash.
#
#   sh scripts/training_features_hashes.sh [BIN]      (BIN: bin/distref)
set -u
bin=${1:-bin/distref}
tmp=$(mktemp -d /tmp/distref_feat.XXXXXX) || exit 2
trap 'rm -rf "$tmp"' EXIT
MPI="env -u TF_CONFIG OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 mpirun --oversubscribe -np 2"
COMMON="--train_steps=12 --synthetic_examples=1000 --global_batch_size=64 --seed=7 --l2=0.001"
sha() {   # sha LAUNCHER FLAGS...: the run's weights_sha256, first 16 hex digits
    launcher=$1; shift
    d=$(mktemp -d "$tmp/run.XXXXXX")   # a subshell: no counter survives it
    # shellcheck disable=SC2086
    $launcher "$bin" train --model_dir="$d/m" $COMMON "$@" < /dev/null > "$d/log" 2>&1 || { echo "FAILED"; return; }
    sed -n 's/^ *"weights_sha256":"\([0-9a-f]\{16\}\).*/\1/p' "$d/m/summary.json"
}
direct() { "$@"; }
printf '%-32s %-16s %-16s %-16s %-16s %-16s %-16s\n' feature ref/one_device ref/mirrored4 openmp/mirrored3 \
    openmp/central2 opencl/mirrored2 mpi-np2/mwms
while IFS='|' read -r name flags; do
    [ -n "$name" ] || continue
    printf '%-32s %-16s %-16s %-16s %-16s %-16s %-16s\n' "$name" \
        "$(sha direct --distribution_strategy=one_device $flags)" \
        "$(sha direct --distribution_strategy=mirrored --num_gpus=4 $flags)" \
        "$(sha direct --variant=openmp --distribution_strategy=mirrored --num_gpus=3 --all_reduce_alg=hierarchical_copy $flags)" \
        "$(sha direct --variant=openmp --distribution_strategy=central_storage --num_gpus=2 $flags)" \
        "$(sha direct --variant=opencl --distribution_strategy=mirrored --num_gpus=2 $flags)" \
        "$(sha "$MPI" --variant=mpi --distribution_strategy=multi_worker_mirrored --num_gpus=1 $flags)"
done <<'LIST'
cosine+warmup|--lr_schedule=cosine --warmup_steps=3 --decay_steps=8 --alpha=0.1 --learning_rate=0.1
piecewise|--lr_schedule=piecewise --boundaries=2,5 --values=0.1,0.05,0.02
polynomial|--lr_schedule=polynomial --decay_steps=10 --power=2 --end_learning_rate=0.001 --learning_rate=0.1
exponential|--lr_schedule=exponential --decay_steps=3 --decay_rate=0.7 --learning_rate=0.1
constant+warmup|--warmup_steps=5 --learning_rate=0.05
staircase+warmup_from|--lr_schedule=exponential --decay_steps=3 --decay_rate=0.7 --staircase --warmup_steps=2 --warmup_learning_rate=0.02 --learning_rate=0.1
polynomial+cycle|--lr_schedule=polynomial --decay_steps=4 --power=2 --end_learning_rate=0.001 --cycle --learning_rate=0.1
global_clipnorm|--global_clipnorm=0.05
clipnorm|--clipnorm=0.02
clipvalue|--clipvalue=0.002
cosine+global_clipnorm (adam)|--optimizer=adam --learning_rate=0.01 --lr_schedule=cosine --decay_steps=10 --global_clipnorm=0.05
LIST
