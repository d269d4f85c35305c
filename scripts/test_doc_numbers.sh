#!/bin/sh
# `make test`: the numbers the docs state about the code agree with the code
# (scripts/doc_numbers.py), and the check fails on a planted disagreement:
# a copy of docs/ARCHITECTURE.md with dr_comm_ops' function count changed.
set -u
python3 scripts/doc_numbers.py || exit 1
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
sed 's|\(numbers: members dr_comm_ops include/distref/comm.h -->\)\([0-9]*\)|\1999|' docs/ARCHITECTURE.md > "$tmp/ARCHITECTURE.md"
if cmp -s docs/ARCHITECTURE.md "$tmp/ARCHITECTURE.md"; then
    echo "doc numbers: the planted disagreement no longer applies (no dr_comm_ops count in docs/ARCHITECTURE.md)"; exit 1
fi
if python3 scripts/doc_numbers.py "$tmp/ARCHITECTURE.md" > "$tmp/out" 2>&1; then
    echo "doc numbers: a planted disagreement (dr_comm_ops: 999 functions) MISSED"; exit 1
fi
grep -q 'the doc says: 999' "$tmp/out" || { echo "doc numbers: the planted disagreement failed, but not naming it:"; cat "$tmp/out"; exit 1; }
echo "doc numbers: planted disagreement (dr_comm_ops: 999 functions) caught"
