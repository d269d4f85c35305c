#!/bin/sh
# `make test`'s checks of parameter_server over MPI ranks that need
# mpirun and a killed rank or a second run:
#   tests/mpi_ps_rerun.sh against bin/distref (TRIALS trials; a killed
#   worker's closure re-runs and the run equals the reference's replay), then
#   against bin/distref built with the planted fault
#   DR_MUTANT_PS_DEAD_CLOSURE_DROPPED (the dead worker's closure dropped
#   instead of re-run, strategies/ps_mpi_faults.c), which must fail it;
#   tests/mpi_ps_resume.sh (checkpoints across ref and mpi), then against
#   DR_MUTANT_PS_RESUME_NO_SKIP (a resumed worker does not skip the batches
#   it took) and DR_MUTANT_PS_FREE_RESUME_UNRECORDED (a resumed free run
#   leaves the re-walked order out of its recording), each of which must
#   fail it.
# Skipped without mpirun.
#
#   sh scripts/test_mpi_ps_rerun.sh DISTREF [TRIALS]
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD (for the mutant).
set -u
: "${CC:?}" "${BUILD:?}"
bin=${1:?usage: test_mpi_ps_rerun.sh DISTREF [TRIALS]}
trials=${2:-2}
if ! command -v mpirun >/dev/null 2>&1; then
    echo "mpi_ps_rerun: skipped (no mpirun on PATH): a dead worker's closure re-run is not checked"
    exit 0
fi
rc=0
sh tests/mpi_ps_rerun.sh "$bin" "$trials" || rc=1
# The mutants: tests/faults.tsv's rows with catcher mpi_ps_rerun, then
# mpi_ps_resume. mpi_ps_rerun's are caught only for the fault's own reason:
# the killed worker's closure not re-run, or the steps it owed missing. A
# trial that fails for another reason (the run ended before the kill, a
# launcher error on a loaded machine) proves nothing about the check.
sh scripts/script_mutants.sh mpi_ps_rerun tests/mpi_ps_rerun.sh 'FAILED:.*(not re-run on worker|updates_applied)' 1 || rc=1
sh tests/mpi_ps_resume.sh "$bin" || rc=1
sh scripts/script_mutants.sh mpi_ps_resume tests/mpi_ps_resume.sh 'FAILED' || rc=1
exit $rc
