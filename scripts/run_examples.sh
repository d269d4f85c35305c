#!/bin/sh
# distref — make examples: run every examples/*/run.sh and check its output
# against the ```expected blocks of the folder's README.md
# (scripts/check_example.sh), then show that the check has teeth: a copy of
# each README with one digit of an expected line changed must fail it.
#
#   DISTREF=bin/distref EXAMPLES_BIN=build/rel/examples sh scripts/run_examples.sh
#
# Each run.sh runs from the repository root with DISTREF (the CLI),
# EXAMPLES_BIN (the built example programs, examples/NAME/NAME.c ->
# $EXAMPLES_BIN/NAME/NAME) and EXAMPLE_TMP (an empty folder of its own).
# Output goes to build/examples/NAME.out. A folder's expected lines are in
# its README.md, or in the file its EXPECTED_IN names. Ends with
# "examples: N passed, N failed" and "examples drift: N caught, N missed".
set -u
: "${DISTREF:=bin/distref}"
: "${EXAMPLES_BIN:=build/rel/examples}"
OUTDIR=build/examples
mkdir -p "$OUTDIR"
passed=0 failed=0 caught=0 missed=0

# Examples may include distref's public headers only.
bad=$(grep -n '#include "' examples/*/*.c 2>/dev/null | grep -v '#include "distref/' || true)
if [ -n "$bad" ]; then
    echo "examples: an example includes a header that is not public (include/distref/):"
    echo "$bad"
    failed=$((failed + 1))
fi

# The file with a folder's ```expected blocks: its README.md, or the file
# its EXPECTED_IN names (the tutorial's are in docs/TUTORIAL.md).
expected_in() {
    if [ -f "$1/EXPECTED_IN" ]; then cat "$1/EXPECTED_IN"; else echo "$1/README.md"; fi
}

for run in examples/*/run.sh; do
    dir=$(dirname "$run")
    name=$(basename "$dir")
    tmp="$OUTDIR/$name.tmp"
    rm -rf "$tmp"; mkdir -p "$tmp"
    start=$(date +%s)
    if DISTREF="$DISTREF" EXAMPLES_BIN="$EXAMPLES_BIN" EXAMPLE_TMP="$tmp" \
        sh "$run" > "$OUTDIR/$name.out" 2> "$OUTDIR/$name.err"; then
        if sh scripts/check_example.sh "$OUTDIR/$name.out" "$(expected_in "$dir")" > "$OUTDIR/$name.check" 2>&1; then
            echo "example $name: ok ($(tail -n 1 "$OUTDIR/$name.check" | sed 's/.*: //'), $(( $(date +%s) - start )) s)"
            passed=$((passed + 1))
        else
            echo "example $name: FAILED: its README does not match its output ($OUTDIR/$name.out):"
            sed 's/^/  /' "$OUTDIR/$name.check"
            failed=$((failed + 1))
        fi
    else
        echo "example $name: FAILED: $run exited non-zero; its stderr ($OUTDIR/$name.err) ends:"
        tail -n 5 "$OUTDIR/$name.err" | sed 's/^/  /'
        failed=$((failed + 1))
    fi
done

# Drift: for every expected line of every README that holds a digit, a
# copy of the README with that line's first digit changed (0 -> 1, d -> d-1)
# must fail against the same output.
for run in examples/*/run.sh; do
    dir=$(dirname "$run")
    name=$(basename "$dir")
    [ -s "$OUTDIR/$name.out" ] || continue
    drifted="$OUTDIR/$name.drift.md"
    nlines=$(awk '/^```expected[ \t]*$/ { b = 1; next } b && /^```/ { b = 0; next } b && /[0-9]/ { n++ } END { print n + 0 }' "$(expected_in "$dir")")
    i=1
    while [ "$i" -le "$nlines" ]; do
        awk -v want="$i" '
            /^```expected[ \t]*$/ { inblock = 1; print; next }
            inblock && /^```/ { inblock = 0; print; next }
            inblock && /[0-9]/ && ++seen == want && match($0, /[0-9]/) {
                d = substr($0, RSTART, 1); d = (d == "0") ? 1 : d - 1
                $0 = substr($0, 1, RSTART - 1) d substr($0, RSTART + 1)
                print "drift: " $0 > "/dev/stderr"
            }
            { print }' "$(expected_in "$dir")" > "$drifted" 2> "$OUTDIR/$name.drift.line"
        if sh scripts/check_example.sh "$OUTDIR/$name.out" "$drifted" > /dev/null 2>&1; then
            echo "example $name: drift MISSED: a README stating \"$(sed 's/^drift: //' "$OUTDIR/$name.drift.line")\" still passes"
            missed=$((missed + 1))
        else
            caught=$((caught + 1))
        fi
        i=$((i + 1))
    done
done

echo "examples: $passed passed, $failed failed"
echo "examples drift: $caught caught, $missed missed (each expected line with a digit changed must fail)"
[ "$failed" -eq 0 ] && [ "$missed" -eq 0 ]
