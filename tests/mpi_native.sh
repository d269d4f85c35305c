#!/bin/sh
# The compact all-reduce across MPI ranks, ring and native, and the exact
# float all-reduce and the gradient all-reduce rounded once
# (tests/mpi_native_check.c), under mpirun -np 1, 2, 3 and 4;
# skipped with a note without mpirun. Exit status 0 when every run passes
# and every planted fault given fails the check: NP:MUTANT, the check
# linked against a fault (Makefile: MPI_CHECK_MUT), run on NP ranks
# (mpi_native_check_f32x_headroom: the int64 digits one headroom bit short,
# on 3 ranks, where three terms take the digits; ..._f32x_special: inf and
# NaN added by the IEEE addition on 2 ranks, where -inf + inf gives -NaN;
# ..._gx_drop_lo: the gradient all-reduce's double-double without its
# last term, on 2 ranks; ..._gx_truncate: partials of 107-114 bits sent as
# a double-double instead of escaped, on 3 ranks; ..._gx_esc_early: the
# double-double input form's escape list split one entry early, on 2 ranks).
#
#   sh tests/mpi_native.sh build/rel/tests/mpi_native_check [NP:MUTANT ...]
set -u
bin=${1:?usage: mpi_native.sh MPI_NATIVE_CHECK [NP:MUTANT ...]}
shift
if ! command -v mpirun > /dev/null 2>&1; then
    echo "mpi_native: mpirun not found, skipped (scripts/deps.sh installs openmpi-bin)"
    exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
st=0
for np in 1 2 3 4; do
    mpirun --oversubscribe -np "$np" "$bin" || st=1
done
[ "$st" -eq 0 ] && echo "mpi_native: ok" || echo "mpi_native: FAILED"
for m in "$@"; do
    np=${m%%:*}; mut=${m#*:}; name=${mut##*/mpi_native_check_}
    if mpirun --oversubscribe -np "$np" "$mut" > "$mut.out" 2>&1; then
        echo "mpi_native: planted fault mpi_$name MISSED (the check passed against it on $np ranks; $mut.out)"
        st=1
    else
        echo "mpi_native: planted fault mpi_$name caught ($(grep -c FAIL "$mut.out") configurations failed on $np ranks)"
    fi
done
exit "$st"
