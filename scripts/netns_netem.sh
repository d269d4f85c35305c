#!/bin/sh
# A lossy and a slow link between namespace hosts (issue 32, network
# faults), without sch_netem: this kernel has no netem qdisc ("Specified
# qdisc kind is unknown", no /lib/modules), so netem's delay is not
# available at all; what works inside a namespace is
#   loss       nftables: every host drops that percentage of the TCP packets
#              it receives (`nft add rule inet drnet in meta l4proto tcp
#              numgen random mod 100 < P drop`, an input-hook chain): a
#              real loss for the sender, which retransmits
#   bandwidth  tc tbf on every host's eth0 (`tc qdisc add dev eth0 root tbf
#              rate R burst 32kb latency 400ms`): egress shaped to R
# Each condition runs multi_worker_mirrored --variant=mpi exact over 3
# namespace hosts x 1 rank, TCP only (scripts/netns_mpirun.sh), and must end
# with the bits of the reference one_device run (every step's loss_bits and
# weights_sha256). Prints a line per condition (wall time, bits) and exits
# 1 when any differs. Where root, iproute2's tc, nft or namespaces are
# missing: "netns_netem: not supported: WHY", exit 0, nothing run.
#
#   sh scripts/netns_netem.sh [BIN] [CONDITIONS]
# CONDITIONS (default "clean loss=1 loss=5 rate=100mbit loss=2,rate=100mbit"):
# a space-separated list of loss=P (percent, 0-50) and rate=R (tc's rate
# syntax), joined by commas. BENCH=1 runs build/rel/bench/mpi_allreduce
# (--only compact,f32x,mpi --max_mb BENCH_MB, default 1) on BENCH_HOSTS (2,
# default, or 3) hosts x 1 rank under each condition instead, with `ip
# netns list` and dr-h1's `ss -tnp` 4 s in. Holds the hosts' lock.
set -u
bin=$(cd "$(dirname "${1:-bin/distref}")" && pwd)/$(basename "${1:-bin/distref}")
conds=${2:-clean loss=1 loss=5 rate=100mbit loss=2,rate=100mbit}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
nope() { echo "netns_netem: not supported: $*"; exit 0; }
command -v mpirun > /dev/null 2>&1 || nope "no mpirun on PATH"
why=$(sh "$here/netns_cluster.sh" check 2>&1) || nope "${why#not supported: }"
command -v tc > /dev/null 2>&1 || nope "tc (iproute2) not found"
command -v nft > /dev/null 2>&1 || nope "nft (nftables) not found"
. "$here/netns_lock.sh"
netns_lock "netns_netem.sh" || exit 2
if ip netns list 2>/dev/null | grep -q '^dr-h'; then
    echo "netns_netem: dr-h* namespaces exist already (another cluster): not touching them" >&2; exit 2
fi
dir=$(mktemp -d /tmp/distref_netem.XXXXXX)
trap 'sh "$here/netns_cluster.sh" down > /dev/null 2>&1; rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM
H=3; [ "${BENCH:-0}" = 1 ] && H=${BENCH_HOSTS:-2}
case $H in 2|3) ;; *) echo "netns_netem: BENCH_HOSTS=$H: expected 2 or 3" >&2; exit 2 ;; esac
sh "$here/netns_cluster.sh" up $H > /dev/null || nope "netns_cluster.sh up $H failed"
sh "$here/netns_cluster.sh" hostfile "$dir/hosts" 1
# the rules work here, or not supported (checked on dr-h0 before anything runs)
ip netns exec dr-h0 nft add table inet drprobe 2>/dev/null && ip netns exec dr-h0 nft delete table inet drprobe ||
    nope "nft cannot add a table inside a namespace (nf_tables)"
ip netns exec dr-h0 tc qdisc add dev eth0 root tbf rate 1gbit burst 32kb latency 400ms 2>/dev/null &&
    ip netns exec dr-h0 tc qdisc del dev eth0 root || nope "tc tbf cannot shape a namespace's eth0 (sch_tbf)"

clear_all() {
    k=0; while [ $k -lt $H ]; do
        ip netns exec "dr-h$k" nft delete table inet drnet 2>/dev/null
        ip netns exec "dr-h$k" tc qdisc del dev eth0 root 2>/dev/null
        k=$((k + 1)); done; return 0
}
apply() {   # CONDITION: loss=P,rate=R
    clear_all
    for part in $(echo "$1" | tr ',' ' '); do
        k=0; while [ $k -lt $H ]; do ns=dr-h$k
            case $part in
                clean) ;;
                loss=*) p=${part#loss=}
                    ip netns exec $ns nft add table inet drnet &&
                    ip netns exec $ns nft add chain inet drnet in '{ type filter hook input priority 0; }' &&
                    ip netns exec $ns nft add rule inet drnet in meta l4proto tcp numgen random mod 100 '<' "$p" counter drop ||
                        { echo "netns_netem: $part: nft failed on $ns" >&2; return 1; } ;;
                rate=*) ip netns exec $ns tc qdisc add dev eth0 root tbf rate "${part#rate=}" burst 32kb latency 400ms ||
                        { echo "netns_netem: $part: tc failed on $ns" >&2; return 1; } ;;
                *) echo "netns_netem: condition '$part': expected clean, loss=P or rate=R" >&2; return 2 ;;
            esac
            k=$((k + 1)); done
    done
}
dropped() {   # TCP packets the loss rules dropped so far, all hosts (their counters)
    k=0; n=0; while [ $k -lt $H ]; do
        d=$(ip netns exec "dr-h$k" nft list chain inet drnet in 2>/dev/null | grep -o 'packets [0-9]*' | awk '{ s += $2 } END { print s + 0 }')
        n=$((n + d)); k=$((k + 1)); done; echo $n
}
now() { date +%s.%N; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

if [ "${BENCH:-0}" = 1 ]; then
    for c in $conds; do
        apply "$c" || exit 1
        echo "== $c ($H hosts x 1 rank, TCP): bench/mpi_allreduce --only compact,f32x,mpi --max_mb ${BENCH_MB:-1}"
        timeout -s KILL 600 sh "$here/netns_mpirun.sh" --hostfile "$dir/hosts" -np $H --bind-to none \
            "$root/build/rel/bench/mpi_allreduce" --only compact,f32x,mpi --max_mb "${BENCH_MB:-1}" > "$dir/bench.txt" 2>&1 &
        bp=$!
        sleep 4   # the ranks are up and connected: who talks to whom, from dr-h1
        echo "-- ip netns list:"; ip netns list | sed 's/^/   /'
        echo "-- ip netns exec dr-h1 ss -tnp (4 s in):"
        ip netns exec dr-h1 ss -tnp | sed 's/^/   /'
        wait $bp
        grep -v '^#' "$dir/bench.txt"
        echo "   TCP packets dropped: $(dropped)"
    done
    clear_all; exit 0
fi

# the reference: one_device, the same flags
run="train --experiment=mlp_synthetic --global_batch_size=37 --synthetic_examples=230 --epochs=2 --seed=11 --l2=0.001"
"$bin" $run --variant=ref --distribution_strategy=one_device --model_dir="$dir/ref" > "$dir/ref.log" 2>&1 ||
    { echo "netns_netem: the reference run failed: $(tail -1 "$dir/ref.log")"; exit 1; }
bits() { grep -o '"loss_bits":"[^"]*"' "$1/metrics.jsonl" | tr '\n' ' '; grep -o '"weights_sha256": *"[^"]*"' "$1/summary.json"; }
want=$(bits "$dir/ref")
fails=0
for c in $conds; do
    apply "$c" || { fails=$((fails + 1)); continue; }
    rm -rf "$dir/run"
    t0=$(now)
    timeout -s KILL 300 sh "$here/netns_mpirun.sh" --hostfile "$dir/hosts" -np 3 --bind-to none "$bin" $run \
        --variant=mpi --distribution_strategy=multi_worker_mirrored --all_reduce_alg=ring --collective_timeout=120 \
        --model_dir="$dir/run" > "$dir/log" 2>&1
    rc=$?
    dt=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
    got=$( [ -s "$dir/run/summary.json" ] && bits "$dir/run")
    drops=$(dropped)
    if [ $rc = 0 ] && [ -n "$got" ] && [ "$got" = "$want" ]; then verdict="bits = ref one_device"
    else verdict="FAILED (mpirun exit $rc; $(tail -1 "$dir/log" | cut -c1-160))"; fails=$((fails + 1)); fi
    printf 'netns_netem: %-20s 3 hosts x 1 rank, %s steps: %5.1f s, %s TCP packets dropped, %s\n' "$c" \
        "$(grep -c loss_bits "$dir/run/metrics.jsonl" 2>/dev/null || echo 0)" "$dt" "$drops" "$verdict"
done
clear_all
[ $fails = 0 ] || { echo "netns_netem: $fails condition(s) failed"; exit 1; }
echo "netns_netem: every condition ended with the reference's bits ($(echo "$want" | grep -o '[0-9a-f]\{12\}' | tail -1)...)"
