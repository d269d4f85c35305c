#!/bin/sh
# Keras 3's mixed_float16 policy with LossScaleOptimizer's dynamic loss
# scaling, started too high (2^20) so the first steps overflow and are
# skipped. distref's claims, each checked here (exit 1 if one fails; no
# recorded bits are compared, only runs against each other):
# - exact reduction: the same weights_sha256 and the same per-step
#   (loss_scale, skipped) series on one_device, openmp mirrored R=2 and
#   R=3, and two MPI ranks where mpirun exists; some steps are skipped;
# - --mixed_reduction=tensorflow: R=2 and R=3 give different bits, R=2
#   twice gives the same bits.
set -eu
COMMON="--experiment=mlp_synthetic --dtype_policy=mixed_float16 --loss_scale=dynamic:1048576 --train_steps=10 --global_batch_size=64 --synthetic_examples=512 --seed=7"
hash_of() { sed -n 's/.*"weights_sha256": *"\([0-9a-f]*\)".*/\1/p' "$1/summary.json"; }
series_of() { sed -n 's/.*"loss_scale": *\([^,}]*\).*"skipped": *\(true\|false\).*/\1 \2/p' "$1/metrics.jsonl" | tr '\n' ';'; }
fails=0
run() {   # run NAME ARGS...: train into $EXAMPLE_TMP/NAME
    name=$1
    shift
    # shellcheck disable=SC2086
    "$@" $COMMON --model_dir="$EXAMPLE_TMP/$name" > "$EXAMPLE_TMP/$name.log" 2>&1 || { cat "$EXAMPLE_TMP/$name.log"; fails=$((fails + 1)); return 1; }
}
run one_device "$DISTREF" train --variant=ref
want=$(hash_of "$EXAMPLE_TMP/one_device")
want_series=$(series_of "$EXAMPLE_TMP/one_device")
skipped=$(grep -c '"skipped": *true' "$EXAMPLE_TMP/one_device/metrics.jsonl" || true)
echo "one_device (ref): $skipped of 10 steps skipped, weights_sha256=$want"
echo "one_device (ref): loss_scale skipped per step: $want_series"
[ "$skipped" -gt 0 ] || { echo "no step skipped: the scale did not start too high"; fails=$((fails + 1)); }
check() {   # check NAME ARGS...: same weights and same loss-scale series as one_device
    name=$1
    run "$@" || return 0
    got=$(hash_of "$EXAMPLE_TMP/$name")
    same=yes
    [ "$got" = "$want" ] || { same=NO; fails=$((fails + 1)); }
    sser=yes
    [ "$(series_of "$EXAMPLE_TMP/$name")" = "$want_series" ] || { sser=NO; fails=$((fails + 1)); }
    echo "$name: weights one_device's: $same, loss_scale and skipped series one_device's: $sser"
}
check openmp_mirrored_2 "$DISTREF" train --variant=openmp --distribution_strategy=mirrored --num_gpus=2
check openmp_mirrored_3 "$DISTREF" train --variant=openmp --distribution_strategy=mirrored --num_gpus=3
# CI runs as root; Open MPI refuses root unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
if command -v mpirun > /dev/null 2>&1; then
    check mpi_two_ranks env -u TF_CONFIG mpirun --oversubscribe -np 2 "$DISTREF" train --variant=mpi \
        --distribution_strategy=multi_worker_mirrored --num_gpus=1
else
    echo "mpi_two_ranks: no mpirun, not run"
fi
# The tensorflow reduction: each replica's partial rounded to float16 first.
TFR="--variant=openmp --distribution_strategy=mirrored --mixed_reduction=tensorflow"
# shellcheck disable=SC2086
run tf_r2 "$DISTREF" train $TFR --num_gpus=2 || true
# shellcheck disable=SC2086
run tf_r2_again "$DISTREF" train $TFR --num_gpus=2 || true
# shellcheck disable=SC2086
run tf_r3 "$DISTREF" train $TFR --num_gpus=3 || true
r2=$(hash_of "$EXAMPLE_TMP/tf_r2") r2b=$(hash_of "$EXAMPLE_TMP/tf_r2_again") r3=$(hash_of "$EXAMPLE_TMP/tf_r3")
if [ -n "$r2" ] && [ "$r2" = "$r2b" ]; then echo "tensorflow reduction, R=2 twice: the same bits"; else echo "tensorflow reduction, R=2 twice: DIFFERENT"; fails=$((fails + 1)); fi
if [ -n "$r3" ] && [ "$r2" != "$r3" ]; then echo "tensorflow reduction, R=2 and R=3: different bits, as they must be"; else echo "tensorflow reduction, R=2 and R=3: the same bits"; fails=$((fails + 1)); fi
echo "mixed precision: $fails checks failed"
[ "$fails" -eq 0 ]
