#!/bin/sh
# `make test`'s kill sweep of every strategy and variant that checkpoints
# (scripts/durability.sh --all, POINTS kills per system call, spread over
# the run; the full sweep is `scripts/durability.sh --all DISTREF`), then
# the planted fault DR_MUTANT_PARTS_AFTER_CKPT (core/run_log.c: the
# parameter_server schedule renamed after ckpt.bin, a second commit, as
# before issue 27), which must fail the full parameter_server/ref sweep.
# Without strace (no ptrace) the sweep's random kills run and the mutant
# is skipped: random kills cannot promise to land between the two renames.
#
#   sh scripts/test_durability.sh DISTREF [POINTS]
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD (for the mutant).
set -u
: "${CC:?}" "${BUILD:?}"
bin=${1:?usage: test_durability.sh DISTREF [POINTS]}
points=${2:-1}
rc=0
out="$BUILD/durability_sample.txt"
mkdir -p "$BUILD"
if sh scripts/durability.sh --all "$bin" "$points" > "$out" 2>&1; then
    sed -n '/^strategy \/ variant/,$p' "$out"
else
    grep 'DIFFERS\|failed' "$out" | head -20
    sed -n '/^strategy \/ variant/,$p' "$out"
    echo "durability sweep (sampled): FAILED (all lines: $out)"
    rc=1
fi
# The mutants: tests/faults.tsv's rows with catcher test_durability.
for name in $(sh scripts/faults.sh rows script | awk -F'\t' '$6 == "test_durability" { print $1 }'); do
    if ! strace -f -o /dev/null true 2>/dev/null; then
        echo "mutant $name: skipped (strace cannot trace here)"
        continue
    fi
    d="$BUILD/mutants/cli_$name"
    if sh scripts/mutant_cli.sh "$name" > /dev/null; then
        if sh scripts/durability.sh --only parameter_server/ref "$d/distref" 0 > "$d/out.txt" 2>&1; then
            printf 'mutant %-26s must fail durability       MISSED (the sweep passed)\n' "$name"
            rc=1
        else
            printf 'mutant %-26s must fail durability       caught (%s kills not bit-exact)\n' "$name" "$(grep -c DIFFERS "$d/out.txt")"
        fi
    else
        echo "mutant $name: build failed" >&2
        rc=1
    fi
done
exit $rc
