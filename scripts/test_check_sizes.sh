#!/bin/sh
# `make test`: library files and functions within their sizes
# (scripts/check_sizes.py), and the check fails on a planted offender: a
# copy of core/ with one function of 81 lines added.
set -u
python3 scripts/check_sizes.py || exit 1
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/core" && cp core/*.c core/*.h "$tmp/core/" || exit 2
{ echo 'int planted_long(int x)'; echo '{'; i=0; while [ $i -lt 79 ]; do echo '    x += 1;'; i=$((i + 1)); done; echo '}'; } >> "$tmp/core/rng.c"
if python3 scripts/check_sizes.py "$tmp" > "$tmp/out" 2>&1; then
    echo "sizes: a planted 82-line function MISSED"; exit 1
fi
grep -q 'planted_long is 82 lines' "$tmp/out" || { echo "sizes: the plant failed the check, but not by name:"; cat "$tmp/out"; exit 1; }
echo "sizes: planted 82-line function caught"
