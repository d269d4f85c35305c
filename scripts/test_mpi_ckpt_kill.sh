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
if ! strace -f -o /dev/null true 2>/dev/null; then
    echo "mutant mpi_ckpt_first: skipped (strace cannot trace here; random kills cannot promise to land between the rename and the metrics)"
    exit $rc
fi
d="$BUILD/mutants/cli_mpi_ckpt_first"; mkdir -p "$d"
# shellcheck disable=SC2086
if $CC $CFLAGS -DDR_LAYER_CORE -DDR_MUTANT_CKPT_FIRST -c core/run_log.c -o "$d/run_log.o" &&
   $CC -o "$d/distref" "$d/run_log.o" "$BUILD/cli/main.o" "$BUILD/libharness.a" "$BUILD/libengine.a" \
       "$BUILD/libref.a" "$BUILD/libcore.a" $LDLIBS; then
    if sh tests/mpi_ckpt_kill.sh "$d/distref" "$points" > "$d/out.txt" 2>&1; then
        echo "mutant mpi_ckpt_first            must fail mpi_ckpt_kill    MISSED (the test passed)"
        rc=1
    else
        echo "mutant mpi_ckpt_first            must fail mpi_ckpt_kill    caught ($(grep -c DIFFERS "$d/out.txt") kills not bit-exact)"
    fi
else
    echo "mutant mpi_ckpt_first: build failed" >&2
    rc=1
fi
exit $rc
