#!/bin/sh
# What mpirun's exit status and the ranks' messages say when one rank of a
# multi_worker_mirrored job under `mpirun -np 3` is killed (SIGKILL) or
# stopped (SIGSTOP, then SIGCONT once the others have given up on it), with
# and without --enable-recovery (docs/MPI.md, "When a rank dies").
#
#   sh tests/mpi_exit_status.sh [DISTREF] [TRIALS]
#
# Each trial passes when the job ends within 30 s, mpirun exits non-zero, every distref error line
# names rank 1 or, from rank 1 itself, says it blames no rank (a rank
# resumed after a stop blames no live peer), and no rank prints its error
# twice. Prints one line per trial (mode, signal, mpirun's status, the
# distref lines) and "exit_status N/T"; exit 1 when N < T. Skipped without
# mpirun.
set -u
if ! command -v mpirun >/dev/null 2>&1; then echo "mpi_exit_status: skipped (no mpirun on PATH)"; exit 0; fi
bin=${1:-bin/distref}
trials=${2:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
ok=0 total=0
rank_pid() {   # MPIRUN_PID RANK
    for _p in $(pgrep -P "$1"); do
        if tr '\0' '\n' < "/proc/$_p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo "$_p"; fi
    done
}
for mode in ${MODES:-recovery plain}; do
    for sig in ${SIGS:-KILL STOP}; do
        i=1
        while [ "$i" -le "$trials" ]; do
            d=$(mktemp -d)
            extra=""; [ "$mode" = recovery ] && extra="--enable-recovery"
            # shellcheck disable=SC2086
            mpirun --oversubscribe $extra -np 3 "$bin" train --variant=mpi --distribution_strategy=multi_worker_mirrored \
                --global_batch_size=64 --synthetic_examples=20000 --epochs=100 --model_dir="$d/m" > "$d/out" 2> "$d/err" &
            mp=$!
            sleep 2.5
            pid=$(rank_pid "$mp" 1)
            if [ -z "$pid" ]; then echo "trial $mode $sig $i: rank 1 not found"; kill "$mp"; wait "$mp"; rm -rf "$d"; i=$((i + 1)); continue; fi
            kill -"$sig" "$pid"
            if [ "$sig" = STOP ]; then   # resumed once the others gave up on it (their deadline is 5 s)
                n=0; while [ "$n" -lt 70 ] && [ "$(grep -c 'distref: error' "$d/err")" -lt 1 ]; do sleep 0.1; n=$((n + 1)); done
                sleep 0.3
                kill -CONT "$pid" 2>/dev/null
            fi
            n=0; while kill -0 "$mp" 2>/dev/null && [ "$n" -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
            hung=0
            if kill -0 "$mp" 2>/dev/null; then
                hung=1; for p in $(pgrep -P "$mp"); do kill -9 "$p"; done; kill -9 "$mp"
            fi
            wait "$mp"; status=$?
            lines=$(grep 'distref: ' "$d/err")
            blames_live=$(echo "$lines" | grep -v 'rank 1 died or hangs\|nothing from rank 1\|rank 1 does not answer\|blames no rank' | grep -c 'distref: error')
            dup=$(echo "$lines" | grep -o 'MPI rank [0-9]* of' | sort | uniq -d | wc -l)
            pass=$([ "$hung" = 0 ] && [ "$status" -ne 0 ] && [ "$blames_live" -eq 0 ] && [ "$dup" -eq 0 ] && echo 1 || echo 0)
            echo "trial $mode $sig $i: mpirun exit $status$([ "$hung" = 1 ] && echo ' (HUNG: killed after 30 s)'); distref lines: $(echo "$lines" | grep -c .), blaming a live rank: $blames_live, repeated: $dup; $([ "$pass" = 1 ] && echo ok || echo FAILED)"
            echo "$lines" | sed 's/^/    /' | cut -c1-220
            [ "$pass" = 1 ] && ok=$((ok + 1))
            total=$((total + 1))
            rm -rf "$d"
            i=$((i + 1))
        done
    done
done
echo "exit_status $ok/$total"
[ "$ok" -eq "$total" ]
