#!/bin/sh
# A rank killed (SIGKILL) in the middle of multi_worker_mirrored training
# under `mpirun -np 3`: every surviving rank must exit within 10 s with an
# error naming the dead rank and the step (docs/MPI.md, "When a rank dies").
#
#   sh tests/mpi_kill.sh [DISTREF] [TRIALS] [MODE] [ALG]
#
# ALG: --all_reduce_alg across the ranks (auto, the default, and nccl: the
# native sum, MPI_Iallreduce on integer digits; ring: distref's ring).
#
# MODE recovery (default): mpirun --enable-recovery, so that mpirun does not
# end the job itself and distref's own deadline (--collective_timeout, 5 s)
# has to detect the death; each trial passes when both survivors print
# "rank 1" and "step N" and the job ends within 10 s of the kill.
# MODE default: plain mpirun, which ends the job when a process dies; a
# trial passes when the job ends within 10 s (mpirun names the rank only).
# Prints one line per trial and "detected N/T"; exit status 0 when N = T.
set -u
. "$(dirname "$0")/mpi_kill_common.sh"
bin=${1:-bin/distref}
trials=${2:-10}
mode=${3:-recovery}
alg=${4:-auto}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
extra=""
[ "$mode" = recovery ] && extra="--enable-recovery"
algflag=""
[ "$alg" = auto ] || algflag="--all_reduce_alg=$alg"
ok=0
i=1
while [ "$i" -le "$trials" ]; do
    d=$(mktemp -d)
    # shellcheck disable=SC2086
    mpirun --oversubscribe $extra -np 3 "$bin" train --variant=mpi --distribution_strategy=multi_worker_mirrored \
        --global_batch_size=64 --synthetic_examples=20000 --epochs=100 $algflag --model_dir="$d/m" > "$d/out" 2> "$d/err" &
    mp=$!
    if ! kill_rank "$mp" 1 "$i"; then
        echo "trial $i: rank 1 not found (the run ended early?)"
        rm -rf "$d"; i=$((i + 1)); continue
    fi
    named=$(grep -c 'rank 1.*died or hangs\|rank 1, step' "$d/err")
    steps=$(grep -o 'step [0-9]*' "$d/err" | head -1)
    within=$(awk -v s="$secs" 'BEGIN { print (s <= 10.0) }')
    if [ "$mode" = recovery ]; then
        pass=$([ "$within" = 1 ] && [ "$named" -ge 2 ] && [ -n "$steps" ] && echo 1 || echo 0)
    else
        pass=$within
    fi
    echo "trial $i: killed rank 1 (pid $pid); job ended after $secs s; survivors naming rank 1: $named; ${steps:-no step}; $([ "$pass" = 1 ] && echo detected || echo MISSED)"
    [ "$pass" = 1 ] && ok=$((ok + 1))
    [ "$pass" = 1 ] || sed 's/^/    /' "$d/err" | head -8
    rm -rf "$d"
    i=$((i + 1))
done
echo "detected $ok/$trials ($mode, all_reduce_alg $alg)"
[ "$ok" -eq "$trials" ]
