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
