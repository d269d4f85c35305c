#!/bin/sh
# The chief (MPI rank 0, the rank that writes model_dir) killed with
# SIGKILL while multi_worker_mirrored training under `mpirun -np 2`
# checkpoints every step (docs/MPI.md, "When a rank dies"). The kill is
# planted by strace fault injection at the Nth write, fsync, rename or
# openat the chief makes (mpirun's MPMD form runs rank 0 under strace), at
# POINTS moments spread over the run for each call; where strace cannot
# trace, random kills stand in. Whatever call the kill lands on, model_dir
# must hold a whole checkpoint (or none) and a metrics.jsonl that agrees
# with it: each trial resumes the killed run under another variant,
# strategy and rank count (the reference, one_device) and requires the
# uninterrupted run's outcome, every step's loss_bits exactly once and in
# order and its weights_sha256, and no temporary file left after the resume.
#
#   sh tests/mpi_ckpt_kill.sh [DISTREF] [POINTS]
#
# Prints one line per kill and "mpi_ckpt_kill: N of T bit-exact"; exit
# status 1 when a resume differs or fails. make test runs it against
# bin/distref and against distref built with DR_MUTANT_CKPT_FIRST (the
# checkpoint renamed before the metrics are written), which it must catch.
# Skipped (exit 0, with a note) without mpirun.
set -u
if ! command -v mpirun >/dev/null 2>&1; then
    echo "mpi_ckpt_kill: skipped (no mpirun on PATH)"
    exit 0
fi
bin=${1:-bin/distref}
points=${2:-4}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# linear_ones: tiny steps, so the run is mostly its checkpoints
run="--experiment=linear_ones --global_batch_size=10 --epochs=0 --train_steps=24 --l2=0.001 --seed=5"
mpi="--variant=mpi --distribution_strategy=multi_worker_mirrored --checkpoint_every=1"
W=$(mktemp -d /tmp/distref_mpickpt_XXXXXX)
trap 'rm -rf "$W"' EXIT

outcome() {   # every step's loss_bits in order, and the weights
    sed -n 's/.*"step":\([0-9]*\).*"loss_bits":"\(0x[0-9a-f]*\)".*/\1 \2/p' "$1/metrics.jsonl" | tr '\n' ' '
    sed -n 's/.*"weights_sha256": *"\([0-9a-f]*\)".*/\1/p' "$1/summary.json"
}

# shellcheck disable=SC2086
"$bin" train --variant=ref --distribution_strategy=one_device --model_dir="$W/ref" $run > /dev/null 2>&1 ||
    { echo "mpi_ckpt_kill: the uninterrupted reference run failed" >&2; exit 1; }
want=$(outcome "$W/ref")
total=0 exact=0

check() {   # DIR LABEL: the killed run resumed under ref one_device, compared
    step=$(sed -n 's/.*"step":\([0-9]*\).*/\1/p' "$1/metrics.jsonl" 2>/dev/null | tail -1)
    # shellcheck disable=SC2086
    if "$bin" train --variant=ref --distribution_strategy=one_device --model_dir="$1" $run > /dev/null 2> "$W/err" &&
       [ "$(outcome "$1")" = "$want" ] && [ -z "$(find "$1" -name '*.tmp.*' 2>/dev/null)" ]; then
        exact=$((exact + 1)); echo "kill at $2 (step ${step:-0}): resumed under ref one_device, bit-exact"
    else
        echo "kill at $2 (step ${step:-0}): resume under ref one_device DIFFERS $(head -c 200 "$W/err")"
    fi
    total=$((total + 1))
}

if strace -f -o /dev/null true 2>/dev/null; then
    mode=strace
    for sc in write fsync rename openat; do
        # how often the chief makes this call in a whole run
        # shellcheck disable=SC2086
        env -u TF_CONFIG mpirun --oversubscribe -np 1 strace -f -e trace=$sc -o "$W/trace" "$bin" train $mpi \
            --model_dir="$W/count_$sc" $run : -np 1 "$bin" train $mpi --model_dir="$W/count_$sc" $run \
            > /dev/null 2>&1
        n=$(grep -c "$sc(" "$W/trace")
        k=1
        while [ "$k" -le "$points" ]; do
            i=$(( (n * k + points) / (points + 1) ))   # spread over the run, never the same call twice
            d="$W/k_${sc}_$i"
            # shellcheck disable=SC2086
            env -u TF_CONFIG mpirun --oversubscribe -np 1 strace -f -o /dev/null \
                -e inject=$sc:signal=SIGKILL:when=$i "$bin" train $mpi --model_dir="$d" $run \
                : -np 1 "$bin" train $mpi --model_dir="$d" $run > /dev/null 2>&1
            check "$d" "$sc #$i of $n"
            rm -rf "$d"
            k=$((k + 1))
        done
    done
else
    mode=random
    i=1
    while [ "$i" -le $((4 * points)) ]; do
        d="$W/k_random_$i"
        # shellcheck disable=SC2086
        env -u TF_CONFIG mpirun --oversubscribe -np 2 "$bin" train $mpi --model_dir="$d" $run > /dev/null 2>&1 &
        mp=$!
        sleep "$(awk -v s="$i" 'BEGIN { srand(s); printf "%.2f", 0.5 + rand() }')"
        for p in $(pgrep -P "$mp"); do
            if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=0"; then kill -9 "$p"; fi
        done
        wait "$mp" 2>/dev/null
        check "$d" "random point $i"
        rm -rf "$d"
        i=$((i + 1))
    done
fi
echo "mpi_ckpt_kill ($mode kills of the chief): $exact of $total bit-exact"
[ "$exact" -eq "$total" ] && [ "$total" -gt 0 ]
