#!/bin/sh
# A host's link cut mid-run (issue 32, network faults): 2 namespace hosts x 1
# rank of multi_worker_mirrored under --variant=mpi; once the chief has
# written a metrics line, dr-h1's eth0 goes down. Prints how long after the
# cut a surviving rank reported it (its "distref: error:" line) and mpirun
# exited (killed 30 s past the timeout: mpirun's own channel to the cut
# host is down, so it waits for that host's daemon), its exit status and
# the ranks' error lines. The
# cluster is taken down on exit (trap), whatever happens.
#   [MPIRUN_EXTRA="--mca oob_tcp_keepalive_time 2 ..."] [TCP_RETRIES2=4] \
#   sh scripts/netns_link_cut.sh [COLLECTIVE_TIMEOUT] [BIN]
# (docs/MPI.md "Network faults": what makes mpirun exit after a cut.)
set -u
ct=${1:-3}; bin=$(cd "$(dirname "${2:-bin/distref}")" && pwd)/$(basename "${2:-bin/distref}")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_lock.sh"
netns_lock "netns_link_cut.sh" || exit 2   # the hosts are ours until this script exits
dir=$(mktemp -d /tmp/distref_cut.XXXXXX)
mp=
cleanup() { [ -n "$mp" ] && kill -KILL "$mp" 2>/dev/null; sh "$here/netns_cluster.sh" down; rm -rf "$dir"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
sh "$here/netns_cluster.sh" up 2 > /dev/null || exit 2
sh "$here/netns_cluster.sh" hostfile "$dir/hosts" 1
# TCP_RETRIES2=N: every host's net.ipv4.tcp_retries2 (per namespace) set to N, so that
# a connection with unacknowledged data over the cut link gives up after N
# retransmissions (about 3 s for 4) instead of the default 15 (about 15 min)
if [ -n "${TCP_RETRIES2:-}" ]; then
    for ns in dr-h0 dr-h1; do ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2="$TCP_RETRIES2" || exit 2; done
fi
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 \
    sh "$here/netns_mpirun.sh" ${MPIRUN_EXTRA:-} --hostfile "$dir/hosts" -np 2 --bind-to none "$bin" train --variant=mpi \
    --distribution_strategy=multi_worker_mirrored --global_batch_size=64 --synthetic_examples=200000 --epochs=1 \
    --seed=7 --checkpoint_every=5 --collective_timeout="$ct" --model_dir="$dir/run" > "$dir/log" 2>&1 &
mp=$!
t=0
until [ -s "$dir/run/metrics.jsonl" ]; do
    sleep 0.2; t=$((t + 1)); [ "$t" -lt 300 ] || { echo "link_cut: the run never started"; exit 1; }
done
t0=$(date +%s.%N)
ip -n dr-h1 link set eth0 down
i=0; td=; tx=
rank_left() {   # is a distref process (the surviving rank 0) left in dr-h0?
    for p in $(ip netns pids dr-h0 2>/dev/null); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = distref ] && return 0
    done
    return 1
}
while kill -0 "$mp" 2>/dev/null; do
    sleep 0.1; i=$((i + 1))
    if [ -z "$td" ] && grep -q "distref: error:" "$dir/log"; then
        td=$(date +%s.%N)
        printf 'link_cut: a surviving rank reported the failure %.1f s after the cut\n' "$(echo "$td - $t0" | bc)"
    fi
    if [ -z "$tx" ] && ! rank_left; then
        tx=$(date +%s.%N)
        printf 'link_cut: the surviving rank (dr-h0) exited %.1f s after the cut\n' "$(echo "$tx - $t0" | bc)"
    fi
    [ "$i" -lt $(( (ct + 30) * 10 )) ] || { echo "link_cut: mpirun still running $((ct + 30)) s after the cut: killed"; kill -KILL "$mp"; break; }
done
wait "$mp" 2>/dev/null; rc=$?
t1=$(date +%s.%N)
printf 'link_cut: --collective_timeout=%s, mpirun exited %s after %.1f s\n' "$ct" "$rc" "$(echo "$t1 - $t0" | bc)"
grep -i "error\|died\|hangs\|nothing from" "$dir/log" | head -5
for ns in dr-h0 dr-h1; do   # what is left in the hosts (a rank, an orted cut off from mpirun)
    left=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    [ -z "$left" ] || echo "link_cut: still running in $ns after mpirun: $left(killed)"
done
