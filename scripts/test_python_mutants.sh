#!/bin/sh
# `make test`'s Python check: the package's tests (python/tests,
# scripts/test_python.sh) against bin/distref, then against bin/distref
# built with each planted fault of tests/faults.tsv whose catcher is
# test_python (scripts/mutant_cli.sh), which must fail them. Where python3
# with NumPy is missing, test_python.sh says "not supported: <why>" and the
# mutants are skipped with a line saying so: never a pass.
#
#   sh scripts/test_python_mutants.sh DISTREF
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD (for the mutants).
set -u
: "${CC:?}" "${BUILD:?}"
bin=${1:?usage: test_python_mutants.sh DISTREF}
out=$(sh scripts/test_python.sh "$bin"); rc=$?
printf '%s\n' "$out"
[ "$rc" = 0 ] || exit 1
names=$(sh scripts/faults.sh rows script | awk -F'\t' '$6 == "test_python" { print $1 }')
case $out in *"not supported"*)
    for name in $names; do echo "mutant $name: skipped (python: not supported)"; done
    exit 0 ;;
esac
for name in $names; do
    if ! sh scripts/mutant_cli.sh "$name" > /dev/null; then echo "mutant $name: build failed" >&2; rc=1; continue; fi
    m="$BUILD/mutants/cli_$name/distref"
    if sh scripts/test_python.sh "$m" > "$BUILD/mutants/cli_$name/python.txt" 2>&1; then
        printf 'mutant %-26s must fail test_python      MISSED (the tests passed)\n' "$name"; rc=1
    else
        printf 'mutant %-26s must fail test_python      caught\n' "$name"
    fi
done
exit $rc
