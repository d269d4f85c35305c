#!/bin/sh
# Issue 33 item 3 (docs/PERFORMANCE.md): exact multi_worker_mirrored over 2
# MPI ranks against 1, mlp_synthetic, G = 256, one thread a rank. Each
# figure is a run of 8 epochs less a run of 1, over 7 (seconds an epoch,
# start-up cancelled), the two launches alternating round by round; every
# run must end in the same weights_sha256 as its counterpart.
#
#   sh scripts/bench_mwms_ranks.sh [BIN] [ROUNDS]     (bin/distref 3)
set -u
bin=${1:-bin/distref}
rounds=${2:-3}
tmp=$(mktemp -d /tmp/distref_mwms.XXXXXX) || exit 2
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {   # run NP EPOCHS: "wall_seconds sha8" of one run
    d=$(mktemp -d "$tmp/run.XXXXXX")
    env -u TF_CONFIG mpirun --oversubscribe -x OMP_NUM_THREADS=1 -np "$1" "$bin" train --variant=mpi \
        --distribution_strategy=multi_worker_mirrored --num_gpus=1 --global_batch_size=256 --epochs="$2" \
        --threads=1 --model_dir="$d" > "$d.log" 2>&1 || { echo "FAILED: -np $1 --epochs=$2" >&2; tail -n 3 "$d.log" >&2; exit 1; }
    printf '%s %s\n' "$(sed -n 's/^ *"wall_seconds":\([0-9.e+-]*\).*/\1/p' "$d/summary.json" | head -n 1)" \
        "$(sed -n 's/^ *"weights_sha256":"\([0-9a-f]\{8\}\).*/\1/p' "$d/summary.json")"
}
echo "# exact multi_worker_mirrored, 2 ranks vs 1, G = 256, (8 epochs - 1 epoch) / 7; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; load: $(uptime | sed 's/.*load average: //')"
r=1
while [ "$r" -le "$rounds" ]; do
    a1=$(run 1 1) || exit 1; a8=$(run 1 8) || exit 1; b1=$(run 2 1) || exit 1; b8=$(run 2 8) || exit 1
    echo "$r $a1 $a8 $b1 $b8" | awk '{
        one = ($4 - $2) / 7; two = ($8 - $6) / 7
        same = ($3 == $7 && $5 == $9) ? "same bits" : "BITS DIFFER"
        printf "round %d: one rank %.3f s an epoch, two ranks %.3f s: %.2fx one rank (%s %s, %s)\n", $1, one, two, one / two, $3, $5, same
        if (same != "same bits") exit 1 }' || exit 1
    r=$((r + 1))
done
