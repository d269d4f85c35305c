#!/bin/sh
# `make test`'s check that ranks read only their shard (issue 32 item 3):
# tests/mpi_shards.sh against bin/distref, then against bin/distref built
# with each planted fault of tests/faults.tsv whose catcher is mpi_shards
# (core/seams.h DR_SEAM_SHARD_OPENS: every rank reads every file; file i
# read by worker (i + 1) mod W), each of which must fail it, for its own
# reason: a rank's bytes or files, not a launcher error. Skipped without
# mpirun.
#
#   sh scripts/test_mpi_shards.sh DISTREF
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD (for the mutants).
set -u
: "${CC:?}" "${BUILD:?}"
bin=${1:?usage: test_mpi_shards.sh DISTREF}
if ! command -v mpirun >/dev/null 2>&1; then
    echo "mpi_shards: skipped (no mpirun on PATH): the bytes each rank reads are not checked"
    exit 0
fi
rc=0
sh tests/mpi_shards.sh "$bin" > "$BUILD/mpi_shards.txt" 2>&1 || rc=1
tail -1 "$BUILD/mpi_shards.txt"
[ $rc = 0 ] || grep FAILED "$BUILD/mpi_shards.txt"
for name in $(sh scripts/faults.sh rows script | awk -F'\t' '$6 == "mpi_shards" { print $1 }'); do
    if sh scripts/mutant_cli.sh "$name" > /dev/null; then
        out="$BUILD/mutants/cli_$name/out.txt"
        if sh tests/mpi_shards.sh "$BUILD/mutants/cli_$name/distref" > "$out" 2>&1; then
            printf 'mutant %-26s must fail mpi_shards       MISSED (the test passed)\n' "$name"
            rc=1
        elif grep -q 'FAILED  .* rank [0-9]* bytes' "$out"; then
            printf 'mutant %-26s must fail mpi_shards       caught (%s checks failed: %s)\n' "$name" \
                "$(grep -c FAILED "$out")" "$(grep -m1 -o 'FAILED  .* rank [0-9]* bytes: .*' "$out" | cut -c9-110)"
        else
            printf 'mutant %-26s must fail mpi_shards       MISSED (it failed, but no rank read the wrong bytes: %s)\n' \
                "$name" "$(grep -m1 FAILED "$out" | cut -c1-120)"
            rc=1
        fi
    else
        echo "mutant $name: build failed" >&2
        rc=1
    fi
done
exit $rc
