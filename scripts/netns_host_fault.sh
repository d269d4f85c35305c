#!/bin/sh
# A host frozen or killed mid-run (issue 32 item 5, network faults): 3
# namespace hosts (scripts/netns_cluster.sh) x 1 rank of
# multi_worker_mirrored under --variant=mpi over TCP; once the chief has
# written a metrics line, every process of host dr-h2 (its Open MPI daemon
# and its rank) gets SIGSTOP (freeze) or SIGKILL (kill). Each trial passes
# when every surviving rank (ranks 0 and 1, on dr-h0 and dr-h1) printed a
# "distref: error:" line naming rank 2, host dr-h2 and the step, and its
# process was gone within --collective_timeout + 5 s of the fault. Prints a
# line per trial (each survivor's detection and exit times, mpirun's exit)
# and "host_fault MODE: N/T"; exit 1 when N < T. mpirun itself is killed 30 s
# past the timeout when it waits on (for a frozen host) its daemon. The
# cluster is taken down on exit; refused (exit 2) when dr-h* namespaces
# already exist (another user's cluster).
#   sh scripts/netns_host_fault.sh freeze|kill [TRIALS] [COLLECTIVE_TIMEOUT] [BIN]
set -u
mode=${1:?usage: netns_host_fault.sh freeze|kill [TRIALS] [COLLECTIVE_TIMEOUT] [BIN]}
trials=${2:-1}; ct=${3:-3}
bin=$(cd "$(dirname "${4:-bin/distref}")" && pwd)/$(basename "${4:-bin/distref}")
case $mode in freeze) sig=STOP ;; kill) sig=KILL ;; *) echo "host_fault: expected freeze or kill, got '$mode'" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" != 0 ] || ! command -v ip > /dev/null 2>&1; then
    echo "host_fault: not supported: needs root and iproute2 (network namespaces)"; exit 0
fi
. "$here/netns_lock.sh"
netns_lock "netns_host_fault.sh $mode" || exit 2   # the hosts are ours until this script exits
if ip netns list 2>/dev/null | grep -q '^dr-h'; then
    echo "host_fault: dr-h* namespaces exist already (another cluster): not touching them" >&2; exit 2
fi
dir=$(mktemp -d /tmp/distref_hostfault.XXXXXX)
mp=
cleanup() {
    for p in $(ip netns pids dr-h2 2>/dev/null); do kill -CONT "$p" 2>/dev/null; done
    [ -n "$mp" ] && kill -KILL "$mp" 2>/dev/null
    sh "$here/netns_cluster.sh" down > /dev/null 2>&1; rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
sh "$here/netns_cluster.sh" up 3 > /dev/null || { echo "host_fault: not supported: netns_cluster.sh up 3 failed"; exit 0; }
sh "$here/netns_cluster.sh" hostfile "$dir/hosts" 1
rank_pid() {   # HOST -> the distref rank's pid in that namespace
    for p in $(ip netns pids "$1" 2>/dev/null); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = distref ] && echo "$p"
    done | head -1
}
now() { date +%s.%N; }
ok=0 total=0 i=1
while [ "$i" -le "$trials" ]; do
    rm -rf "$dir/run" "$dir/log"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 \
        sh "$here/netns_mpirun.sh" ${MPIRUN_EXTRA:-} --hostfile "$dir/hosts" -np 3 --bind-to none "$bin" train --variant=mpi \
        --distribution_strategy=multi_worker_mirrored --global_batch_size=64 --synthetic_examples=200000 --epochs=1 \
        --seed=7 --checkpoint_every=5 --collective_timeout="$ct" --model_dir="$dir/run" > "$dir/log" 2>&1 &
    mp=$!
    t=0
    until [ -s "$dir/run/metrics.jsonl" ]; do
        sleep 0.2; t=$((t + 1)); [ "$t" -lt 300 ] || break
    done
    p0=$(rank_pid dr-h0) p1=$(rank_pid dr-h1)
    if [ "$t" -ge 300 ] || [ -z "$p0" ] || [ -z "$p1" ]; then
        echo "trial $i: the run never started (or no rank found): $(tail -2 "$dir/log")"; kill -KILL "$mp"; wait "$mp" 2>/dev/null
        total=$((total + 1)); i=$((i + 1)); continue
    fi
    t0=$(now)
    for p in $(ip netns pids dr-h2); do kill -"$sig" "$p"; done
    e0='' e1='' d0='' d1='' n=0
    while [ $n -lt $(( (ct + 30) * 10 )) ]; do
        [ -z "$e0" ] && ! kill -0 "$p0" 2>/dev/null && e0=$(now)
        [ -z "$e1" ] && ! kill -0 "$p1" 2>/dev/null && e1=$(now)
        [ -z "$d0" ] && grep -qE "distref: (error: )?MPI rank 0 of" "$dir/log" && d0=$(now)
        [ -z "$d1" ] && grep -qE "distref: (error: )?MPI rank 1 of" "$dir/log" && d1=$(now)
        [ -n "$e0" ] && [ -n "$e1" ] && ! kill -0 "$mp" 2>/dev/null && break
        sleep 0.1; n=$((n + 1))
    done
    kill -0 "$mp" 2>/dev/null && { for p in $(ip netns pids dr-h2); do kill -CONT "$p" 2>/dev/null; done; kill -KILL "$mp"; }
    wait "$mp" 2>/dev/null; rc=$?
    for ns in dr-h0 dr-h1 dr-h2; do for p in $(ip netns pids "$ns" 2>/dev/null); do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done; done
    el() { [ -n "$1" ] && printf '%.1f' "$(echo "$1 - $t0" | bc)" || echo never; }
    l0=$(grep -m1 -E "distref: (error: )?MPI rank 0 of" "$dir/log") l1=$(grep -m1 -E "distref: (error: )?MPI rank 1 of" "$dir/log")
    names() { echo "$1" | grep -q 'rank 2' && echo "$1" | grep -q 'dr-h2' && echo "$1" | grep -q 'step [0-9]'; }
    within() { [ -n "$1" ] && [ "$(echo "$1 - $t0 <= $ct + 5" | bc)" = 1 ]; }
    pass=0
    names "$l0" && names "$l1" && within "$e0" && within "$e1" && pass=1
    echo "trial $i $mode: rank 0 said it $(el "$d0") s, exited $(el "$e0") s; rank 1 said it $(el "$d1") s, exited $(el "$e1") s after the fault; mpirun exit $rc; $([ $pass = 1 ] && echo ok || echo FAILED)"
    echo "    ${l0:-rank 0: no error line}" | cut -c1-230
    echo "    ${l1:-rank 1: no error line}" | cut -c1-230
    [ $pass = 1 ] || grep -v "^ *$" "$dir/log" | tail -25 | sed "s/^/    log: /" | cut -c1-200
    total=$((total + 1)); ok=$((ok + pass)); i=$((i + 1))
done
echo "host_fault $mode: $ok/$total (--collective_timeout=$ct, bound $ct + 5 s)"
[ "$ok" = "$total" ]
