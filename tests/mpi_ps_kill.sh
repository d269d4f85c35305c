#!/bin/sh
# A rank killed (SIGKILL) in the middle of parameter_server training over
# MPI ranks (`mpirun -np 4`: the chief, workers at ranks 1-2, the ps task at
# rank 3): the job must end within 10 s (docs/MPI.md, "parameter_server
# over ranks"; under --schedule=free and --enable-recovery a dead worker's
# closure re-runs instead: tests/mpi_ps_rerun.sh).
#
#   sh tests/mpi_ps_kill.sh [DISTREF] [TRIALS] [MODE] [RANK] [SCHEDULE]
#
# MODE default: plain mpirun, which ends the job when a process dies (it
# names the rank, not the step). MODE recovery: mpirun --enable-recovery, so
# the chief's own deadline (--collective_timeout, 5 s) has to see it; a
# trial then passes when the chief's error names a step (RANK 0, the chief
# itself: when a survivor's error names the chief). RANK: 3 (the ps task,
# default), 1 (a worker) or 0 (the chief). SCHEDULE: seeded (default) or
# free (where a dead worker's closure re-runs instead: tests/mpi_ps_rerun.sh).
# Prints one line per trial and "detected N/T"; exit status 0 when N = T.
set -u
. "$(dirname "$0")/mpi_kill_common.sh"
bin=${1:-bin/distref}
trials=${2:-5}
mode=${3:-default}
rank=${4:-3}
schedule=${5:-seeded}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
extra=""
[ "$mode" = recovery ] && extra="--enable-recovery"
ok=0
i=1
while [ "$i" -le "$trials" ]; do
    d=$(mktemp -d)
    # shellcheck disable=SC2086
    mpirun --oversubscribe $extra -np 4 "$bin" train --variant=mpi --distribution_strategy=parameter_server \
        --schedule="$schedule" \
        --staleness=2 --global_batch_size=64 --synthetic_examples=20000 --epochs=100 --model_dir="$d/m" \
        > "$d/out" 2> "$d/err" &
    mp=$!
    if ! kill_rank "$mp" "$rank" "$i"; then
        echo "trial $i: rank $rank not found (the run ended early?)"
        rm -rf "$d"; i=$((i + 1)); continue
    fi
    named=$(grep -c "rank $rank" "$d/err")
    steps=$(grep -o 'step [0-9][0-9]*' "$d/err" | head -1)
    [ "$rank" = 0 ] && grep -q 'the chief (MPI rank 0) died' "$d/err" && steps="the chief named"
    within=$(awk -v s="$secs" 'BEGIN { print (s <= 10.0) }')
    if [ "$mode" = recovery ]; then
        pass=$([ "$within" = 1 ] && [ -n "$steps" ] && echo 1 || echo 0)
    else
        pass=$within
    fi
    echo "trial $i: killed rank $rank (pid $pid); job ended after $secs s; lines naming rank $rank: $named; ${steps:-no step}; $([ "$pass" = 1 ] && echo detected || echo MISSED)"
    [ "$pass" = 1 ] && ok=$((ok + 1))
    grep -h 'distref: error' "$d/err" | head -2 | sed 's/^/    /'
    rm -rf "$d"
    i=$((i + 1))
done
echo "detected $ok/$trials ($mode, rank $rank, $schedule)"
[ "$ok" -eq "$trials" ]
