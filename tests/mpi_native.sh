#!/bin/sh
# The compact all-reduce across MPI ranks, ring and native
# (tests/mpi_native_check.c), under mpirun -np 2, 3 and 4; skipped with a
# note without mpirun. Exit status 0 when every run passes.
#
#   sh tests/mpi_native.sh build/rel/tests/mpi_native_check
set -u
bin=${1:?usage: mpi_native.sh MPI_NATIVE_CHECK}
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
exit "$st"
