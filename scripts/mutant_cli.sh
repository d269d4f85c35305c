#!/bin/sh
# One planted fault in a CLI of its own: bin/distref relinked with an engine
# whose strategies/ and devices/ files carrying the seam DR_MUTANT_<NAME>
# are recompiled with it (the faults of scripts/run_conformance_mutants.sh,
# e.g. reg_not_scaled, mean_not_sum, wrong_split). For showing what a fault
# does to a run (docs/TUTORIAL.md); the conformance suites catch them all.
#
#   make mutant-cli MUTANT=reg_not_scaled   ->  $BUILD/mutants/cli_reg_not_scaled/distref
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD.
set -eu
: "${CC:?}" "${BUILD:?}"
name=${1:?usage: mutant_cli.sh NAME (e.g. reg_not_scaled)}
case $name in *[!a-z0-9_]*) echo "mutant-cli: MUTANT=$name: expected a name like reg_not_scaled" >&2; exit 2 ;; esac
macro=DR_MUTANT_$(echo "$name" | tr 'a-z' 'A-Z')
files=$(grep -l "defined($macro)" strategies/*.c devices/*/*.c 2>/dev/null || true)
if [ -z "$files" ]; then
    echo "mutant-cli: MUTANT=$name: no seam $macro in strategies/ or devices/; the faults are:" >&2
    grep -ho 'defined(DR_MUTANT_[A-Z0-9_]*)' strategies/*.c devices/*/*.c | sed 's/defined(DR_MUTANT_\(.*\))/\1/' |
        tr 'A-Z' 'a-z' | sort -u | sed 's/^/  /' >&2
    exit 2
fi
d="$BUILD/mutants/cli_$name"
mkdir -p "$d"
cp "$BUILD/libengine.a" "$d/libengine.a"
for f in $files; do
    o="$d/$(basename "$f" .c).o"
    # shellcheck disable=SC2086
    $CC $CFLAGS -DDR_LAYER_ENGINE -D"$macro" -c "$f" -o "$o"
    ar r "$d/libengine.a" "$o" 2>/dev/null
done
# shellcheck disable=SC2086
$CC -o "$d/distref" "$BUILD/cli/main.o" "$BUILD/libharness.a" "$d/libengine.a" "$BUILD/libref.a" "$BUILD/libcore.a" $LDLIBS
echo "mutant-cli: $d/distref (the engine with $macro)"
