# shellcheck shell=sh
# One user of the namespace hosts at a time (issue 32): sourced, not run.
#
#   . scripts/netns_lock.sh
#   netns_lock "WHAT" || exit 2     # holds the lock on fd 9 until this shell exits
#
# The hosts (dr-h*, dr-hub) are machine-wide, so two runs that both call
# `netns_cluster.sh up` would take each other's cluster down. Every script
# that uses the hosts holds an flock(2) on $NETNS_LOCK
# (/run/lock/distref-netns.lock; DR_NETNS_LOCK overrides) for its whole
# life; netns_cluster.sh up/down take it for their own run. The holder writes
# "pid P", "command C", "since T" into the file.
#
# Decided: a second user waits up to DR_NETNS_WAIT seconds (default 120;
# 0: not at all), saying once whom it waits for, then gives up with an error
# naming the holder's pid and command (netns_lock returns 2). A child of the
# holder (netns_cluster.sh run by a script that holds the lock) inherits
# fd 9 and DR_NETNS_LOCK_FD=9 and goes on under its parent's lock (flock on
# the same open file is not a second lock), instead of waiting for itself.
# conformance/hosts.c takes the same lock with flock(2) and passes it down
# the same way.
NETNS_LOCK=${DR_NETNS_LOCK:-/run/lock/distref-netns.lock}
[ -d "$(dirname "$NETNS_LOCK")" ] || NETNS_LOCK=/tmp/distref-netns.lock

# "pid P (command C, since T)" of the holder, from the lock file
netns_lock_holder() {
    awk '/^pid / { p = $2 } /^command / { sub(/^command /, ""); c = $0 } /^since / { sub(/^since /, ""); s = $0 }
         END { if (p == "") print "an unknown process (no pid in the lock file)"; else printf "pid %s (%s, since %s)\n", p, c, s }' \
        "$NETNS_LOCK" 2>/dev/null
}

netns_lock() {
    what=${1:-$0}
    if [ "${DR_NETNS_LOCK_FD:-}" = 9 ] &&
        [ "$(readlink "/proc/$$/fd/9" 2>/dev/null)" = "$(readlink -f "$NETNS_LOCK")" ] && flock -n 9 2>/dev/null; then
        return 0   # the parent's lock, passed down
    fi
    command -v flock > /dev/null 2>&1 || { echo "netns_lock: flock (util-linux) not found" >&2; return 2; }
    exec 9>> "$NETNS_LOCK" || { echo "netns_lock: cannot open $NETNS_LOCK" >&2; return 2; }
    if ! flock -n 9; then
        wait_s=${DR_NETNS_WAIT:-120}
        holder=$(netns_lock_holder)
        if [ "$wait_s" -gt 0 ] 2>/dev/null; then
            echo "netns_lock: the namespace hosts are in use by $holder; waiting up to $wait_s s (DR_NETNS_WAIT)" >&2
        fi
        if [ "$wait_s" -le 0 ] 2>/dev/null || ! flock -w "$wait_s" 9; then
            echo "netns_lock: the namespace hosts are in use by $(netns_lock_holder) ($NETNS_LOCK); waited ${wait_s} s: not touching them (DR_NETNS_WAIT=SECONDS waits longer)" >&2
            exec 9>&-
            return 2
        fi
    fi
    printf 'pid %s\ncommand %s\nsince %s\n' "$$" "$what" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$NETNS_LOCK"
    DR_NETNS_LOCK_FD=9
    export DR_NETNS_LOCK_FD
    return 0
}
