#!/bin/sh
# The Python package's tests (python/tests) against bin/distref, when a
# python3 with NumPy is here: build/pyvenv's (make python-venv) or the
# system's. Otherwise says "not supported: <why>" and exits 0: never a pass.
#
#   sh scripts/test_python.sh [BIN]
set -u
bin=${1:-bin/distref}
py=
for cand in build/pyvenv/bin/python python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import numpy' >/dev/null 2>&1; then py=$cand; break; fi
done
if [ -z "$py" ]; then
    if command -v python3 >/dev/null 2>&1; then why="python3 has no numpy (make python-venv installs it in build/pyvenv)"
    else why="no python3"; fi
    echo "python: not supported: $why"
    exit 0
fi
out=$(DISTREF="$bin" "$py" -m unittest discover -s python/tests -p "test_*.py" 2>&1); rc=$?
n=$(printf '%s\n' "$out" | sed -n 's/^Ran \([0-9]*\) test.*/\1/p')
if [ "$rc" = 0 ]; then echo "python: ${n:-0} passed ($py)"; else printf '%s\n' "$out"; echo "python: FAILED ($py)"; fi
exit "$rc"
