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
# The mutants: tests/faults.tsv's rows with catcher test_mpi_ckpt_kill, each
# caught only when a kill's resume is not bit-exact (DIFFERS).
if strace -f -o /dev/null true 2>/dev/null; then
    sh scripts/script_mutants.sh test_mpi_ckpt_kill tests/mpi_ckpt_kill.sh DIFFERS "$points" || rc=1
else
    echo "mutants of test_mpi_ckpt_kill: skipped (strace cannot trace here; random kills cannot promise to land between the rename and the metrics)"
fi
exit $rc
