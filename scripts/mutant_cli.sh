#!/bin/sh
# One planted fault in a CLI of its own: bin/distref relinked with copies of
# the layer archives whose registry files (tests/faults.tsv's files field)
# are rebuilt with the fault: its macro defined, or its sed patch applied
# to a copy (e.g. reg_not_scaled, mean_not_sum, wrong_split; any fault of
# the registry but the unit ones). For showing what a fault does to a run
# (docs/TUTORIAL.md), and for the make test scripts whose tests launch
# bin/distref (scripts/test_durability.sh, test_mpi_ckpt_kill.sh,
# test_mpi_ps_rerun.sh).
#
#   make mutant-cli MUTANT=reg_not_scaled   ->  $BUILD/mutants/cli_reg_not_scaled/distref
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD.
set -eu
: "${CC:?}" "${BUILD:?}"
name=${1:?usage: mutant_cli.sh NAME (e.g. reg_not_scaled)}
case $name in *[!a-z0-9_]*) echo "mutant-cli: MUTANT=$name: expected a name like reg_not_scaled" >&2; exit 2 ;; esac
if ! row=$(sh scripts/faults.sh rows all "$name" 2>/dev/null) || [ -z "$row" ] ||
   [ "$(printf '%s\n' "$row" | cut -f2)" = unit ]; then
    echo "mutant-cli: MUTANT=$name: no such fault in tests/faults.tsv; the faults are:" >&2
    sh scripts/faults.sh rows all | awk -F'\t' '$2 != "unit" { print "  " $1 " (" $2 ": " $8 ")" }' >&2
    exit 2
fi
macro=$(printf '%s\n' "$row" | cut -f3); macro=${macro%%,*}
files=$(printf '%s\n' "$row" | cut -f4 | tr ',' ' ')
patch=$(printf '%s\n' "$row" | cut -f9)
d="$BUILD/mutants/cli_$name"
mkdir -p "$d"
for a in harness engine ref core; do cp "$BUILD/lib$a.a" "$d/lib$a.a"; done
for f in $files; do
    layer=$(sh scripts/faults.sh layer "$f")
    o="$d/$(basename "$f" .c).o"
    if [ "$macro" != - ]; then
        # shellcheck disable=SC2086
        $CC $CFLAGS -DDR_LAYER_$layer -D"$macro" -c "$f" -o "$o"
    else
        sed "$patch" "$f" > "$d/$(basename "$f")"
        if cmp -s "$f" "$d/$(basename "$f")"; then echo "mutant-cli: $name: the patch no longer applies to $f" >&2; exit 1; fi
        # shellcheck disable=SC2086
        $CC $CFLAGS -DDR_LAYER_$layer -c "$d/$(basename "$f")" -o "$o"
    fi
    ar r "$d/lib$(echo "$layer" | tr 'A-Z' 'a-z').a" "$o" 2>/dev/null
done
# shellcheck disable=SC2086
$CC -o "$d/distref" "$BUILD/cli/main.o" "$d/libharness.a" "$d/libengine.a" "$d/libref.a" "$d/libcore.a" $LDLIBS
echo "mutant-cli: $d/distref (built with ${macro#-}${patch#-})"
