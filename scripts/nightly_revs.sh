#!/bin/sh
# make nightly REVS="a b c" (docs/NIGHTLY.md): one nightly run per revision,
# in the order given, each built in its own git worktree under
# build/nightly-revs/ (removed after its run) from that revision's library and THIS tree's
# bench/nightly.c and bench/nightly_mpi.c (so every revision is measured the
# same way; the conformance rows are left out), all
# appended to this tree's reports/bench/history.jsonl. Backfills history or
# bisects a regression: each run is compared with the runs before it.
# Exit status: 1 if any revision's run regressed (each named), 2 on errors.
#   nightly_revs.sh SAMPLES ONLY CC CFLAGS LDLIBS REV...   (ONLY: "" = every metric)
set -u
samples=$1; only=$2; cc=$3; cflags=$4; ldlibs=$5; shift 5
top=$(pwd)
regressed=""; status=0
for rev in "$@"; do
    full=$(git rev-parse --verify -q "$rev^{commit}") || { echo "nightly: no such revision: $rev" >&2; exit 2; }
    wt=$top/build/nightly-revs/$full
    echo "== nightly: revision $rev ($full)"
    if [ ! -d "$wt" ]; then
        git worktree add --detach -q "$wt" "$full" || exit 2
    fi
    mkdir -p "$wt/build/rel/bench" "$wt/build/bench"
    # This tree's bench sources and their headers: "bench/..." includes are
    # found beside the copied source first.
    cp bench/nightly.c "$wt/build/nightly_bench.c"
    cp bench/nightly_mpi.c "$wt/build/nightly_mpi_bench.c"
    cp bench/bench_common.h bench/bench_cl_gemm.h "$wt/build/bench/"
    libs="build/rel/libharness.a build/rel/libengine.a build/rel/libref.a build/rel/libcore.a"
    (cd "$wt" && make --no-print-directory -s $libs >/dev/null &&
        $cc $cflags -o build/rel/bench/nightly build/nightly_bench.c $libs $ldlibs) ||
        { echo "nightly: $rev: build failed" >&2; git worktree remove --force "$wt"; status=2; continue; }
    mpi=""
    if (cd "$wt" && $cc $cflags -o build/rel/bench/nightly_mpi build/nightly_mpi_bench.c $libs $ldlibs) 2>/dev/null; then
        mpi=build/rel/bench/nightly_mpi
    else
        echo "nightly: $rev: MPI rows skipped: bench/nightly_mpi.c does not build against this revision"
    fi
    # The conformance rows are this tree's only: an older bin/conformance
    # has no per-variant slices (--only SUITE, --variant ref).
    (cd "$wt" && python3 "$top/scripts/nightly.py" run --bench build/rel/bench/nightly --samples "$samples" \
        ${mpi:+--mpi-bench "$mpi"} --outdir "$top/reports/bench" --label "rev-$rev" ${only:+--only "$only"})
    rc=$?
    git worktree remove --force "$wt" || echo "nightly: could not remove the worktree $wt" >&2
    [ "$rc" -eq 1 ] && regressed="$regressed $rev"
    [ "$rc" -eq 2 ] && status=2
done
[ -n "$regressed" ] && { echo "nightly: revisions with a regression:$regressed"; [ "$status" -eq 0 ] && status=1; }
exit $status
