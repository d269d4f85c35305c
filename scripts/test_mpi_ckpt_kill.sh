#!/bin/sh
# `make test`'s kill sweep of the MPI chief's checkpoints:
# tests/mpi_ckpt_kill.sh against bin/distref (POINTS kills per system call,
# each resumed bit-exact under the reference), then against distref built
# with the planted fault DR_MUTANT_CKPT_FIRST (core/run_log.c: the
# checkpoint renamed before the step's metrics are written), which must
# fail it. Skipped without mpirun.
#
#   sh scripts/test_mpi_ckpt_kill.sh DISTREF [POINTS]
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD (for the mutant).
set -u
: "${CC:?}" "${BUILD:?}"
bin=${1:?usage: test_mpi_ckpt_kill.sh DISTREF [POINTS]}
points=${2:-3}
if ! command -v mpirun >/dev/null 2>&1; then
    echo "mpi_ckpt_kill: skipped (no mpirun on PATH): the MPI chief's checkpoints are not kill-tested"
    exit 0
fi
rc=0
sh tests/mpi_ckpt_kill.sh "$bin" "$points" || rc=1
# The mutants: tests/faults.tsv's rows with catcher test_mpi_ckpt_kill.
for name in $(sh scripts/faults.sh rows script | awk -F'\t' '$6 == "test_mpi_ckpt_kill" { print $1 }'); do
    if ! strace -f -o /dev/null true 2>/dev/null; then
        echo "mutant $name: skipped (strace cannot trace here; random kills cannot promise to land between the rename and the metrics)"
        continue
    fi
    d="$BUILD/mutants/cli_$name"
    if sh scripts/mutant_cli.sh "$name" > /dev/null; then
        if sh tests/mpi_ckpt_kill.sh "$d/distref" "$points" > "$d/out.txt" 2>&1; then
            printf 'mutant %-26s must fail mpi_ckpt_kill    MISSED (the test passed)\n' "$name"
            rc=1
        else
            printf 'mutant %-26s must fail mpi_ckpt_kill    caught (%s kills not bit-exact)\n' "$name" "$(grep -c DIFFERS "$d/out.txt")"
        fi
    else
        echo "mutant $name: build failed" >&2
        rc=1
    fi
done
exit $rc
