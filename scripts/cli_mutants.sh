#!/bin/sh
# The CLI's own promises, each held by a test that must catch its planted
# fault: the file is copied into the build folder with one sed patch,
# compiled, and bin/distref relinked with it before the archives (a mutant
# CLI of its own, $BUILD/cli_mutants/<name>/distref); the test is rebuilt
# with DR_BIN pointing at that CLI and must fail.
#
#   finished_reports   harness/train_loop.c a finished run run again reports its old result as if
#                                           computed (issue 26's first defect)   test_run_dir
#   finished_resegment harness/segment.c    a finished run under another topology is let through
#                                                                                  test_run_dir
#   flagfile_no_cycle  core/flags_file.c    a flagfile that includes itself is not named (only the
#                                           depth bound stops it)                  test_cli_details
#   choices_ignored    core/flags_usage.c   an enum flag takes any value (no list of names on a
#                                           typo)                                  test_cli_details
#
#   CC=... CFLAGS=... LDLIBS=... BUILD=build/rel LIBS="<archives>" sh scripts/cli_mutants.sh
set -u
: "${CC:?}" "${BUILD:?}" "${LIBS:?}"
d="$BUILD/cli_mutants"; mkdir -p "$d"
caught=0; missed=""
run() {   # name file layer sed test
    name=$1; file=$2; layer=$3; how=$4; test=$5
    mkdir -p "$d/$name"
    sed "$how" "$file" > "$d/$name/$(basename "$file")"
    if cmp -s "$file" "$d/$name/$(basename "$file")"; then echo "cli mutant $name: the patch no longer applies to $file" >&2; exit 1; fi
    # shellcheck disable=SC2086
    $CC $CFLAGS -DDR_LAYER_$layer -c "$d/$name/$(basename "$file")" -o "$d/$name/mutant.o" || exit 1
    # shellcheck disable=SC2086
    $CC -o "$d/$name/distref" "$BUILD/cli/main.o" "$d/$name/mutant.o" $LIBS $LDLIBS || exit 1
    # shellcheck disable=SC2086
    $CC $CFLAGS -DDR_BIN="\"$d/$name/distref\"" -o "$d/$name/$test" "tests/$test.c" $LIBS $LDLIBS || exit 1
    if "$d/$name/$test" >"$d/$name/out" 2>&1; then missed="$missed $name"
    else caught=$((caught + 1)); echo "cli mutant $name: caught by $test ($(grep -c 'FAILED  \]' "$d/$name/out") failing lines)"; fi
}
run finished_reports   harness/train_loop.c HARNESS 's/    res->already_complete = nothing_ran(r);/    res->already_complete = nothing_ran(r) \&\& 0;/' test_run_dir
run finished_resegment harness/segment.c  HARNESS 's/    if (finished)$/    if (finished \&\& 0)/' test_run_dir
run flagfile_no_cycle  core/flags_file.c  CORE    's/    for (int i = 0; i < st->depth; i++)$/    for (int i = 0; i < 0; i++)/' test_cli_details
run choices_ignored    core/flags_usage.c CORE    's/^bool dr_flag_choice_ok(const dr_flag \*f, const char \*s)$/bool dr_flag_choice_ok(const dr_flag *f, const char *s) { (void)f; (void)s; return true; }\nstatic inline bool unused_choice_ok(const dr_flag *f, const char *s)/' test_cli_details
if [ -n "$missed" ]; then echo "cli mutants NOT caught:$missed" >&2; exit 1; fi
echo "cli mutants: all $caught caught"
