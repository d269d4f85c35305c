#!/bin/sh
# "Hosts" on one machine: N network namespaces joined by a private bridge,
# for running distref's mpi variant across separate network stacks over TCP
# (issue 32; docs/MPI.md "Across hosts on one machine").
#
#   sh scripts/netns_cluster.sh up N     N hosts dr-h0 .. dr-h(N-1) (1..8)
#   sh scripts/netns_cluster.sh down     remove every dr-* namespace, the hub, /etc/netns/dr-*
#   sh scripts/netns_cluster.sh status   the hosts, their addresses and links
#   sh scripts/netns_cluster.sh check    exit 0 when this machine can do it, else
#                                        print "not supported: WHY" and exit 3
#   sh scripts/netns_cluster.sh hostfile F SLOTS   write an Open MPI hostfile of the up hosts
#   sh scripts/netns_cluster.sh with N CMD...      up N, CMD (the hosts locked for it), down
#   sh scripts/netns_cluster.sh holder   who holds the hosts' lock now
#
# One user at a time (scripts/netns_lock.sh): up, down and with take the
# hosts' flock (or go on under their caller's, when the caller holds it); a
# second user waits up to DR_NETNS_WAIT s (default 120), then exit 2 naming
# the holder's pid. A script that uses the hosts holds the lock for its
# whole run; by hand, use `with` (a bare `up` holds it only while it runs).
#
# Layout (nothing in the root namespace changes, nothing is routed off the
# machine): a hub namespace dr-hub holds the bridge dr-br0 and no address; host
# dr-hK is a namespace with a loopback and eth0, one end of a veth pair whose
# other end (dr-hK-p, in dr-hub) is a bridge port; eth0 has 10.77.0.(10+K)/24
# and no default route; its net.ipv4.tcp_retries2 is 5. /etc/netns/dr-hK/hosts names every host (ip netns exec
# bind-mounts it over /etc/hosts), so "dr-h1" resolves inside the hosts.
#
# Each host also needs its own host name (Open MPI tells nodes apart by
# name): scripts/netns_rsh.sh, the rsh agent, runs the remote orted as
# `ip netns exec dr-hK unshare --uts` with the host name set to dr-hK; mpirun
# itself runs the same way on dr-h0 (scripts/netns_mpirun.sh).
#
# `up` is idempotent (an existing cluster of another size is taken down
# first) and takes down what it built when a step fails. Root only.
set -u
PREFIX=dr-h
HUB=dr-hub
BR=dr-br0
NET=10.77.0

die() { echo "netns_cluster: $*" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_lock.sh"

# Why this machine cannot run the hosts (empty: it can).
why_not() {
    [ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; return; }
    command -v ip > /dev/null 2>&1 || { echo "ip (iproute2) not found"; return; }
    command -v unshare > /dev/null 2>&1 || { echo "unshare (util-linux) not found"; return; }
    probe=dr-probe$$
    if ! ip netns add "$probe" > /dev/null 2>&1; then echo "ip netns add fails here (no network namespaces)"; return; fi
    if ! ip netns exec "$probe" unshare --uts true > /dev/null 2>&1; then
        ip netns del "$probe" > /dev/null 2>&1; echo "unshare --uts fails inside a namespace"; return
    fi
    if ! ip netns exec "$probe" ip link add dr-probe-b type bridge > /dev/null 2>&1; then
        ip netns del "$probe" > /dev/null 2>&1; echo "no bridge support (ip link add type bridge fails)"; return
    fi
    if ! ip netns exec "$probe" ip link add dr-probe-v type veth peer name dr-probe-w > /dev/null 2>&1; then
        ip netns del "$probe" > /dev/null 2>&1; echo "no veth support (ip link add type veth fails)"; return
    fi
    ip netns del "$probe" > /dev/null 2>&1
}

hosts_up() { ip netns list 2>/dev/null | awk '{ print $1 }' | grep "^$PREFIX[0-9]*\$" | sort -t h -k 2 -n; }

down() {
    # what a run left in a host (an orted cut off from mpirun, a stopped rank): only
    # processes inside these namespaces, by their ids, then the namespaces
    for ns in $(hosts_up); do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    done
    for ns in $(hosts_up); do ip netns del "$ns" 2>/dev/null; rm -rf "/etc/netns/$ns"; done
    ip netns list 2>/dev/null | grep -q "^$HUB\\b" && ip netns del "$HUB"
    for d in /etc/netns/$PREFIX*; do [ -d "$d" ] && rm -rf "$d"; done
    return 0
}

up() {
    n=$1
    case $n in [1-8]) ;; *) die "up N: N must be 1..8, got '$n'" ;; esac
    w=$(why_not); [ -z "$w" ] || { echo "not supported: $w"; exit 3; }
    if [ "$(hosts_up | wc -l)" = "$n" ] && ip netns list | grep -q "^$HUB\\b" &&
        ip netns exec "$PREFIX$((n - 1))" ip -4 addr show eth0 2>/dev/null | grep -q "$NET.$((n + 9))/"; then
        return 0   # already up with this size
    fi
    down
    trap 'down; exit 1' INT TERM
    if ! build "$n"; then down; die "up $n failed; cleaned up"; fi
    trap - INT TERM
}

build() {
    n=$1
    ip netns add "$HUB" || return 1
    ip -n "$HUB" link add "$BR" type bridge || return 1
    ip -n "$HUB" link set "$BR" up || return 1
    ip -n "$HUB" link set lo up || return 1
    k=0
    while [ "$k" -lt "$n" ]; do
        ns=$PREFIX$k
        ip netns add "$ns" || return 1
        ip -n "$HUB" link add "$ns-p" type veth peer name eth0 netns "$ns" || return 1
        ip -n "$HUB" link set "$ns-p" master "$BR" up || return 1
        ip -n "$ns" link set lo up || return 1
        ip -n "$ns" addr add "$NET.$((10 + k))/24" dev eth0 || return 1
        ip -n "$ns" link set eth0 up || return 1
        # a connection with unacknowledged data over a cut link gives up after 5
        # retransmissions (about 13 s), not the default 15 (about 15 min): mpirun's
        # channel to a cut host's daemon ends, and mpirun with it (docs/MPI.md)
        ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=5 || return 1
        k=$((k + 1))
    done
    k=0
    while [ "$k" -lt "$n" ]; do
        mkdir -p "/etc/netns/$PREFIX$k" || return 1
        { printf '127.0.0.1\tlocalhost\n'
          j=0; while [ "$j" -lt "$n" ]; do printf '%s.%d\t%s%d\n' "$NET" $((10 + j)) "$PREFIX" "$j"; j=$((j + 1)); done
        } > "/etc/netns/$PREFIX$k/hosts" || return 1
        k=$((k + 1))
    done
    # every port forwards (no STP on dr-br0: at once; a moment for carrier)
    k=0
    while [ "$k" -lt "$n" ]; do
        t=0
        until ip -n "$HUB" -d link show dev "$PREFIX$k-p" 2>/dev/null | grep -q "bridge_slave state forwarding"; do
            t=$((t + 1)); [ "$t" -lt 50 ] || { echo "netns_cluster: $PREFIX$k's port never forwards" >&2; return 1; }
            sleep 0.1
        done
        k=$((k + 1))
    done
}

status() {
    hs=$(hosts_up)
    [ -n "$hs" ] || { echo "netns_cluster: no hosts up"; return 0; }
    for ns in $hs; do
        printf '%s\t%s\t%s\n' "$ns" "$(ip -n "$ns" -4 -o addr show eth0 | awk '{ print $4 }')" \
            "$(ip -n "$ns" -o link show eth0 | grep -o 'state [A-Z]*')"
    done
}

case ${1:-} in
    up) [ $# = 2 ] || die "usage: up N"; netns_lock "netns_cluster.sh up $2" || exit 2; up "$2" ;;
    down) netns_lock "netns_cluster.sh down" || exit 2; down ;;
    with)
        [ $# -ge 3 ] || die "usage: with N CMD..."
        n=$2; shift 2
        netns_lock "netns_cluster.sh with $n $*" || exit 2
        up "$n"
        trap 'down; exit 130' INT TERM
        "$@"; rc=$?
        down; exit $rc ;;
    holder)
        if [ -e "$NETNS_LOCK" ] && ! flock -n "$NETNS_LOCK" true 2>/dev/null; then echo "held by $(netns_lock_holder)"
        else echo "free ($NETNS_LOCK)"; fi ;;
    status) status ;;
    check) w=$(why_not); [ -z "$w" ] || { echo "not supported: $w"; exit 3; } ;;
    hostfile)
        [ $# = 3 ] || die "usage: hostfile FILE SLOTS"
        hs=$(hosts_up); [ -n "$hs" ] || die "hostfile: no hosts up (run up N first)"
        for ns in $hs; do echo "$ns slots=$3"; done > "$2.tmp" && mv "$2.tmp" "$2" ;;
    *) die "usage: netns_cluster.sh up N | down | status | check | hostfile FILE SLOTS | with N CMD... | holder" ;;
esac
