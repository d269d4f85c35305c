#!/bin/sh
# Runs every bench binary; each prints its own table of ratios measured in
# this run. JSON copies go to reports/bench/ (one file per benchmark and run).
set -eu
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p reports/bench
for b in "$@"; do
    name=$(basename "$b")
    echo "== $name (rev $rev, $(uname -m), $(nproc) cores)"
    OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} "$b" --json "reports/bench/$name-$stamp-$rev.json"
done
# The MPI comm's all-reduce against MPI_Allreduce, 2 and 4 ranks (root
# allowed, as CI runs; 4 ranks oversubscribe a small machine).
if [ -n "${MPI_BENCH:-}" ] && [ -x "$MPI_BENCH" ] && command -v mpirun >/dev/null 2>&1; then
    for np in 2 4; do
        echo "== mpi_allreduce np=$np (rev $rev)"
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 \
            mpirun --oversubscribe -np "$np" "$MPI_BENCH" --json "reports/bench/mpi_allreduce_np$np-$stamp-$rev.json"
    done
fi
# The PyTorch CPU peer of the fast path, when a python with torch is here
# (make bench-peer installs one into build/torchvenv).
py=python3
[ -x build/torchvenv/bin/python ] && py=build/torchvenv/bin/python
if "$py" -c "import torch" 2>/dev/null; then
    echo "== peer_torch (rev $rev)"
    "$py" bench/peer_torch.py --distref "${DISTREF:-bin/distref}" --json "reports/bench/peer_torch-$stamp-$rev.json"
else
    echo "== peer_torch: skipped: no python with torch here (make bench-peer installs it into build/torchvenv)"
fi
