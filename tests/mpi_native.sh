#!/bin/sh
# The compact all-reduce across MPI ranks, ring and native, and the exact
# float all-reduce (tests/mpi_native_check.c), under mpirun -np 2, 3 and 4;
# skipped with a note without mpirun. Exit status 0 when every run passes
# and, given MUTANT (the check linked against the planted fault
# mpi_f32x_headroom, Makefile: MPI_CHECK_MUT), when the fault fails it.
#
#   sh tests/mpi_native.sh build/rel/tests/mpi_native_check [MUTANT]
set -u
bin=${1:?usage: mpi_native.sh MPI_NATIVE_CHECK [MUTANT]}
mut=${2:-}
if ! command -v mpirun > /dev/null 2>&1; then
    echo "mpi_native: mpirun not found, skipped (scripts/deps.sh installs openmpi-bin)"
    exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
st=0
for np in 2 3 4; do
    mpirun --oversubscribe -np "$np" "$bin" || st=1
done
[ "$st" -eq 0 ] && echo "mpi_native: ok" || echo "mpi_native: FAILED"
if [ -n "$mut" ]; then   # np 3: three terms an element take the int64 digits
    if mpirun --oversubscribe -np 3 "$mut" > "$mut.out" 2>&1; then
        echo "mpi_native: planted fault mpi_f32x_headroom MISSED (the check passed against it; $mut.out)"
        st=1
    else
        echo "mpi_native: planted fault mpi_f32x_headroom caught ($(grep -c FAIL "$mut.out") configurations failed)"
    fi
fi
exit "$st"
