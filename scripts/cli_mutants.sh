#!/bin/sh
# The CLI's own promises, each held by a test that must catch its planted
# fault: the file is copied into the build folder with one sed patch,
# compiled (or, for a fault behind a seam, the file compiled with its
# DR_MUTANT_ macro), and bin/distref relinked with it before the archives (a mutant
# CLI of its own, $BUILD/cli_mutants/<name>/distref); the test is rebuilt
# with DR_BIN pointing at that CLI and must fail.
#
# The list (file, sed patch, test, what it breaks): tests/faults.tsv's rows
# of kind cli (finished_reports is issue 26's first defect).
#
#   CC=... CFLAGS=... LDLIBS=... BUILD=build/rel LIBS="<archives>" sh scripts/cli_mutants.sh [NAME...]
set -u
: "${CC:?}" "${BUILD:?}" "${LIBS:?}"
d="$BUILD/cli_mutants"; mkdir -p "$d"
caught=0; missed=""
run() {   # name file layer how test (how: a sed patch, or -DMACRO for a seam)
    name=$1; file=$2; layer=$3; how=$4; test=$5
    mkdir -p "$d/$name"
    case "$how" in
    -D*) # shellcheck disable=SC2086
         $CC $CFLAGS -DDR_LAYER_$layer "$how" -c "$file" -o "$d/$name/mutant.o" || exit 1 ;;
    *)   sed "$how" "$file" > "$d/$name/$(basename "$file")"
         if cmp -s "$file" "$d/$name/$(basename "$file")"; then echo "cli mutant $name: the patch no longer applies to $file" >&2; exit 1; fi
         # shellcheck disable=SC2086
         $CC $CFLAGS -DDR_LAYER_$layer -c "$d/$name/$(basename "$file")" -o "$d/$name/mutant.o" || exit 1 ;;
    esac
    # shellcheck disable=SC2086
    $CC -o "$d/$name/distref" "$BUILD/cli/main.o" "$d/$name/mutant.o" $LIBS $LDLIBS || exit 1
    # shellcheck disable=SC2086
    $CC $CFLAGS -DDR_BIN="\"$d/$name/distref\"" -o "$d/$name/$test" "tests/$test.c" $LIBS $LDLIBS || exit 1
    if "$d/$name/$test" >"$d/$name/out" 2>&1; then missed="$missed $name"
    else caught=$((caught + 1)); echo "cli mutant $name: caught by $test ($(grep -c 'FAILED  \]' "$d/$name/out") failing lines)"; fi
}
rows=$(sh scripts/faults.sh rows cli "$@") || exit 1
tab=$(printf '\t')
while IFS=$tab read -r name kind macro file seams test needs breaks patch; do
    case $macro in -) how=$patch ;; *) how=-D$macro ;; esac
    run "$name" "$file" "$(sh scripts/faults.sh layer "$file")" "$how" "$test" < /dev/null
done <<EOF
$rows
EOF
if [ -n "$missed" ]; then echo "cli mutants NOT caught:$missed" >&2; exit 1; fi
echo "cli mutants: all $caught caught"
