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
sh scripts/script_mutants.sh mpi_shards tests/mpi_shards.sh 'FAILED  .* rank [0-9]* bytes' || rc=1
exit $rc
