#!/bin/sh
# The README's commands on a fresh Debian 12, as a newcomer runs them.
#
#   sh scripts/fresh_machine.sh [--then 'CMD']... [--only 'CMD']... [--keep]
#
# Builds a bare Debian 12 root (mmdebstrap --variant=minbase bookworm; the
# tarball is cached as build/fresh/bookworm-minbase.tar), puts a clean clone
# of this checkout's HEAD (committed work only) in it as /root/distref, and
# runs in it, one after the other, the commands of the README's section
# "## The two commands" (its indented lines, comments dropped: the one
# prerequisite, then the two commands), in README order, as root, with an
# empty environment (PATH, HOME, TERM; and CI when it is set, so that CI's
# warnings-as-errors carry in). Each --then CMD runs after them, in the same
# root. Each command's wall time and exit status are printed; the first that
# fails stops the run, its log's first error lines are printed, and the
# script exits 1. Logs: build/fresh/logs/N.log; the clone's reports/ is
# copied to build/fresh/reports/.
#
# The root gets /proc, /sys, /dev, a fresh /dev/shm (hwloc, PoCL and Open
# MPI need them) and /dev/pts inside a private mount namespace (unshare -m), so no mount
# is seen by, or propagates to, the host; they are unmounted when the run
# ends, and the scratch folder is then removed with rm -rf --one-file-system,
# only after /proc/self/mountinfo shows nothing mounted under it. --keep
# leaves the root in place (build/fresh/run.*/root) for a look. --only CMD
# (repeatable) runs the README's first command (the prerequisite) and then
# only the --only commands: a quick check of one stage's install steps, e.g.
# --only 'make fuzz FUZZ_SECONDS=2'; it proves nothing about the others.
#
# Needs: root (mount, chroot), the network (apt inside the root), git,
# mmdebstrap (installed with apt-get when missing). About 2 GB of disk.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
fresh=$here/build/fresh
tarball=$fresh/bookworm-minbase.tar
PATH_IN=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

die() { echo "fresh: $*" >&2; exit 2; }

# ---- inside the private mount namespace: mount, run, unmount
if [ "${1:-}" = --inside ]; then
    root=$2; cmds=$3; logs=$4
    mounted=""
    unmount_all() {
        for m in $mounted; do umount "$root$m" || umount -l "$root$m" || echo "fresh: could not unmount $root$m" >&2; done
        mounted=""
    }
    trap 'unmount_all' EXIT
    trap 'exit 130' INT TERM
    mnt() {   # mnt TARGET mount-args...: mounted last is unmounted first
        t=$1; shift
        mount "$@" "$root$t" || { echo "fresh: mount $* $root$t failed" >&2; exit 2; }
        mounted="$t $mounted"
    }
    mnt /proc -t proc proc
    mnt /sys -t sysfs sysfs
    mnt /dev --bind /dev
    mnt /dev/shm -t tmpfs -o mode=1777,nosuid,nodev shm
    mnt /dev/pts -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts
    n=0; status=0
    while IFS= read -r cmd; do
        n=$((n + 1))
        log=$logs/$n.log
        echo "fresh: [$n] # $cmd"
        t0=$(date +%s)
        # shellcheck disable=SC2086
        chroot "$root" /usr/bin/env -i PATH="$PATH_IN" HOME=/root TERM=dumb ${CI:+CI="$CI"} \
            /bin/sh -c "cd /root/distref && $cmd" > "$log" 2>&1 < /dev/null
        rc=$?
        t=$(( $(date +%s) - t0 ))
        tr '\r' '\n' < "$log" | tail -n 8 | sed 's/^/    /'   # (dpkg's progress: \r)
        printf 'fresh: [%d] rc %d, wall %dm%02ds (%d s): %s\n' "$n" "$rc" $((t / 60)) $((t % 60)) "$t" "$cmd"
        if [ "$rc" -ne 0 ]; then
            echo "fresh: [$n] FAILED; the first error lines of $log:"
            grep -n -m 8 -E 'error:|\*\*\*|FAILED|MISSED|NOT caught|not found' "$log" | sed 's/^/    /'
            status=1
            break
        fi
    done < "$cmds"
    unmount_all
    exit "$status"
fi

# ---- outside: the root, the clone, the commands
then_cmds=""; only_cmds=""; keep=0
while [ $# -gt 0 ]; do
    case $1 in
        --then) [ $# -ge 2 ] || die "--then needs a command"
                then_cmds="$then_cmds$2
"; shift 2 ;;
        --only) [ $# -ge 2 ] || die "--only needs a command"
                only_cmds="$only_cmds$2
"; shift 2 ;;
        --keep) keep=1; shift ;;
        *) echo "usage: sh scripts/fresh_machine.sh [--then 'CMD']... [--only 'CMD']... [--keep]" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap, mount, chroot)"
command -v git >/dev/null 2>&1 || die "needs git (the clone of HEAD)"
command -v unshare >/dev/null 2>&1 || die "needs unshare (util-linux)"

# The commands, from the README: the indented lines of "## The two commands".
readme_cmds=$(awk '/^## /{ sec = ($0 == "## The two commands") ; next }
                   sec && /^    [^ ]/ { sub(/^    /, ""); sub(/[ \t]+#.*$/, ""); print }' "$here/README.md")
[ -n "$readme_cmds" ] || die "README.md has no indented commands under '## The two commands'"
if [ -n "$only_cmds" ]; then
    readme_cmds=$(printf '%s\n' "$readme_cmds" | head -n 1)
    then_cmds=$only_cmds
fi

mkdir -p "$fresh" || exit 2
if [ ! -s "$tarball" ]; then
    if ! command -v mmdebstrap >/dev/null 2>&1; then
        echo "fresh: installing mmdebstrap"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null || die "apt-get install mmdebstrap failed"
    fi
    echo "fresh: building $tarball (mmdebstrap --variant=minbase bookworm)"
    t0=$(date +%s)
    mmdebstrap --quiet --variant=minbase --format=tar bookworm "$tarball.tmp" || { rm -f "$tarball.tmp"; die "mmdebstrap failed"; }
    mv "$tarball.tmp" "$tarball" || die "could not rename $tarball.tmp"
    echo "fresh: minbase root built in $(( $(date +%s) - t0 )) s"
fi

work=$(mktemp -d "$fresh/run.XXXXXX") || die "mktemp failed"
root=$work/root
logs=$fresh/logs
cleanup() {
    [ "$keep" = 1 ] && { echo "fresh: root kept in $root"; return; }
    # Nothing may be mounted under the scratch folder when it is removed.
    if grep -q " $work[/ ]" /proc/self/mountinfo; then
        echo "fresh: still mounted under $work; not removed:" >&2
        grep " $work[/ ]" /proc/self/mountinfo >&2
        return
    fi
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$root" && rm -rf --one-file-system "$logs" && mkdir -p "$logs" || die "mkdir failed"
tar -C "$root" -xf "$tarball" || die "could not extract $tarball"
cp /etc/resolv.conf "$root/etc/resolv.conf" || die "no /etc/resolv.conf to copy"
# The clone: HEAD's commit, as `git clone` would give it.
head=$(git -C "$here" rev-parse HEAD) || die "not a git checkout"
[ -z "$(git -C "$here" status --porcelain --untracked-files=no)" ] ||
    echo "fresh: note: the work tree has uncommitted changes; the root gets HEAD ($head) only"
dst=$root/root/distref
git init -q "$dst" && git -C "$dst" fetch -q "$here" HEAD && git -C "$dst" checkout -q FETCH_HEAD &&
    git -C "$dst" remote add origin "$here" || die "could not clone HEAD into the root"
echo "fresh: root $root, distref at $(git -C "$dst" rev-parse --short HEAD)"

printf '%s\n%s' "$readme_cmds" "$then_cmds" | sed '/^$/d' > "$work/commands"
echo "fresh: commands (README.md, '## The two commands', in order; then --then):"
sed 's/^/    /' "$work/commands"
unshare -m --propagation private sh "$here/scripts/fresh_machine.sh" --inside "$root" "$work/commands" "$logs"
rc=$?
# The reports the commands wrote (reports/out, reports/mutants, ...), kept
# for a look after the root is gone.
rm -rf --one-file-system "$fresh/reports"
[ -d "$dst/reports" ] && cp -R "$dst/reports" "$fresh/reports"
echo "fresh: rc $rc (logs in $logs/, reports in $fresh/reports/)"
exit "$rc"
