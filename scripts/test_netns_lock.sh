#!/bin/sh
# The namespace hosts' lock (scripts/netns_lock.sh, issue 32): on a private
# lock file (DR_NETNS_LOCK), so that it never touches a real user's hosts,
# and with no namespace made or removed (needs flock from util-linux only;
# no root). Checks:
#   1 a second user with DR_NETNS_WAIT=0 is refused at once (status 2), the
#     message naming the holder's pid and command;
#   2 one with DR_NETNS_WAIT=10 says whom it waits for, then gets the lock
#     once the holder exits (status 0, after at least 1 s);
#   3 one with DR_NETNS_WAIT=1 gives up after about 1 s naming the holder;
#   4 a child of the holder (the way a script's netns_cluster.sh up/down
#     runs) goes on under its parent's lock, at once;
#   5 `netns_cluster.sh holder` names the holder, and "free" after.
# Then the same checks against a copy of netns_lock.sh whose flock is
# planted away (`flock -n 9` -> `true`): they must fail, or the test could
# not fail (a test that cannot fail is not a test). Exit 0: all passed;
# prints "netns_lock: not supported: WHY" (exit 0) without flock.
set -u
here=$(cd "$(dirname "$0")" && pwd)
command -v flock > /dev/null 2>&1 || { echo "netns_lock: not supported: flock (util-linux) not found"; exit 0; }
tmp=$(mktemp -d /tmp/distref_netns_lock.XXXXXX)
holder_pid=
trap '[ -n "$holder_pid" ] && kill "$holder_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
export DR_NETNS_LOCK="$tmp/lock"
unset DR_NETNS_LOCK_FD

# checks LOCKLIB: runs 1-5 with that lock library; prints the failures, returns their count
checks() {
    lib=$1 fails=0
    rm -f "$DR_NETNS_LOCK"
    sh -c ". '$lib'; netns_lock 'the holder' || exit 2; echo held > '$tmp/held'; sleep 3" &
    holder_pid=$!
    i=0; until [ -s "$tmp/held" ] || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
    rm -f "$tmp/held"
    out=$(DR_NETNS_WAIT=0 sh -c ". '$lib'; netns_lock second" 2>&1); st=$?
    if [ $st != 2 ] || ! echo "$out" | grep -q "in use by pid $holder_pid (the holder"; then
        echo "  1 refused at once: status $st, '$out'"; fails=$((fails + 1)); fi
    out=$(sh "$here/netns_cluster.sh" holder 2>&1)
    echo "$out" | grep -q "held by pid $holder_pid" || { echo "  5 holder: '$out'"; fails=$((fails + 1)); }
    t0=$(date +%s.%N)
    out=$(DR_NETNS_WAIT=1 sh -c ". '$lib'; netns_lock third" 2>&1); st=$?
    dt=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
    if [ $st != 2 ] || ! awk -v d="$dt" 'BEGIN { exit !(d >= 0.9) }' || ! echo "$out" | grep -q "waited 1 s"; then
        echo "  3 gives up after 1 s: status $st after $dt s, '$out'"; fails=$((fails + 1)); fi
    t0=$(date +%s.%N)
    out=$(DR_NETNS_WAIT=10 sh -c ". '$lib'; netns_lock fourth && cat '$DR_NETNS_LOCK'" 2>&1); st=$?
    dt=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
    if [ $st != 0 ] || ! awk -v d="$dt" 'BEGIN { exit !(d >= 1) }' || ! echo "$out" | grep -q "waiting up to 10 s" ||
        ! echo "$out" | grep -q "^command fourth"; then
        echo "  2 waits, then holds: status $st after $dt s, '$out'"; fails=$((fails + 1)); fi
    wait "$holder_pid" 2>/dev/null; holder_pid=
    out=$(sh "$here/netns_cluster.sh" holder 2>&1)
    echo "$out" | grep -q "^free" || { echo "  5 free after: '$out'"; fails=$((fails + 1)); }
    out=$(DR_NETNS_WAIT=0 sh -c ". '$lib'; netns_lock parent || exit 2
        sh -c \". '$lib'; netns_lock child && echo child-ok\"" 2>&1); st=$?
    if [ $st != 0 ] || ! echo "$out" | grep -q child-ok; then
        echo "  4 a child under its parent's lock: status $st, '$out'"; fails=$((fails + 1)); fi
    return $fails
}

if checks "$here/netns_lock.sh"; then echo "netns_lock: 5 checks passed"; else echo "netns_lock: FAILED"; exit 1; fi
sed 's/if ! flock -n 9; then/if ! true; then/' "$here/netns_lock.sh" > "$tmp/planted.sh"
cmp -s "$here/netns_lock.sh" "$tmp/planted.sh" && { echo "netns_lock: the planted fault no longer applies"; exit 1; }
if checks "$tmp/planted.sh" > "$tmp/planted.out"; then
    echo "netns_lock: the planted fault (no flock) was NOT caught"; exit 1
fi
echo "netns_lock: planted fault (no flock) caught: $(grep -c '^  ' "$tmp/planted.out") checks failed ($(grep '^  ' "$tmp/planted.out" | cut -c3-4 | tr -d ' ' | tr '\n' ' '))"
