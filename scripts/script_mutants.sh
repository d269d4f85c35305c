#!/bin/sh
# The planted faults of a make test script's test: each fault of kind
# script in tests/faults.tsv whose catcher is CATCHER, built into a
# bin/distref of its own (scripts/mutant_cli.sh), must make `sh TEST` fail
# for its own reason: a line of its output matching REASON (grep -E), not a
# launcher error. Prints "mutant NAME must fail CATCHER caught (SUMMARY)"
# (SUMMARY: the first match of REASON, cut to 100 characters) or MISSED with
# why; exits 1 when a fault is missed or does not build. ARGS after REASON
# follow the mutant's binary on TEST's command line.
#
#   sh scripts/script_mutants.sh CATCHER TEST REASON [ARGS...]
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD.
set -u
: "${BUILD:?}"
catcher=${1:?usage: script_mutants.sh CATCHER TEST REASON}
test=${2:?usage: script_mutants.sh CATCHER TEST REASON}
reason=${3:?usage: script_mutants.sh CATCHER TEST REASON}
shift 3
rc=0
for name in $(sh scripts/faults.sh rows script | awk -F'\t' -v c="$catcher" '$6 == c { print $1 }'); do
    if ! sh scripts/mutant_cli.sh "$name" > /dev/null; then
        echo "mutant $name: build failed" >&2
        rc=1
        continue
    fi
    out="$BUILD/mutants/cli_$name/out.txt"
    if sh "$test" "$BUILD/mutants/cli_$name/distref" "$@" > "$out" 2>&1; then
        printf 'mutant %-26s must fail %-16s MISSED (the test passed)\n' "$name" "$catcher"
        rc=1
    elif grep -Eq "$reason" "$out"; then
        printf 'mutant %-26s must fail %-16s caught (%s)\n' "$name" "$catcher" \
            "$(grep -Eo -m1 "$reason.*" "$out" | cut -c1-100)"
    else
        printf 'mutant %-26s must fail %-16s MISSED (it failed, but not for its reason: %s)\n' "$name" "$catcher" \
            "$(tail -1 "$out" | cut -c1-120)"
        rc=1
    fi
done
exit $rc
