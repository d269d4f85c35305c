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
# The mutants: tests/faults.tsv's rows with catcher mpi_ps_rerun, then mpi_ps_resume.
for name in $(sh scripts/faults.sh rows script | awk -F'\t' '$6 == "mpi_ps_rerun" { print $1 }'); do
    if sh scripts/mutant_cli.sh "$name" > /dev/null; then
        m="$BUILD/mutants/cli_$name/distref"
        out="$BUILD/mutants/cli_$name/out.txt"
        # Caught only for the fault's own reason: the killed worker's closure
        # not re-run, or the steps it owed missing. A trial that fails for
        # another reason (the run ended before the kill, a launcher error on a
        # loaded machine) proves nothing about the check.
        if sh tests/mpi_ps_rerun.sh "$m" 1 > "$out" 2>&1; then
            printf 'mutant %-26s must fail mpi_ps_rerun     MISSED (the test passed)\n' "$name"
            rc=1
        elif grep -q 'FAILED:.*\(not re-run on worker\|updates_applied\)' "$out"; then
            printf 'mutant %-26s must fail mpi_ps_rerun     caught (%s)\n' "$name" \
                "$(grep -o 'FAILED:.*' "$out" | head -1 | cut -c1-100)"
        else
            printf 'mutant %-26s must fail mpi_ps_rerun     MISSED (it failed, but not as the fault must: %s)\n' \
                "$name" "$(grep -m1 -o 'trial.*' "$out" | cut -c1-120)"
            rc=1
        fi
    else
        echo "mutant $name: build failed" >&2
        rc=1
    fi
done
sh tests/mpi_ps_resume.sh "$bin" || rc=1
for name in $(sh scripts/faults.sh rows script | awk -F'\t' '$6 == "mpi_ps_resume" { print $1 }'); do
    if sh scripts/mutant_cli.sh "$name" > /dev/null; then
        m="$BUILD/mutants/cli_$name/distref"
        if sh tests/mpi_ps_resume.sh "$m" > "$BUILD/mutants/cli_$name/out.txt" 2>&1; then
            printf 'mutant %-26s must fail mpi_ps_resume    MISSED (the test passed)\n' "$name"
            rc=1
        else
            printf 'mutant %-26s must fail mpi_ps_resume    caught (%s checks failed)\n' "$name" \
                "$(grep -c FAILED "$BUILD/mutants/cli_$name/out.txt")"
        fi
    else
        echo "mutant $name: build failed" >&2
        rc=1
    fi
done
exit $rc
