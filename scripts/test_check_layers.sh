#!/bin/sh
# scripts/check_layers.sh's own test: the C files of this checkout copied
# to a scratch folder pass it; then one forbidden include at a time is
# planted in the copy and must be refused, naming the file and line, and
# removed again. A white-box test including a private header must pass.
# make check-layers runs it after the check itself.
#
#   sh scripts/test_check_layers.sh
set -u
cd "$(dirname "$0")/.."
check=$(pwd)/scripts/check_layers.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_layers_test.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
find core ref strategies devices harness include/distref cli conformance fuzz examples tests bench \
     \( -name '*.c' -o -name '*.h' \) -type f 2>/dev/null | tar -cf - -T - | tar -xf - -C "$tmp"

failed=0
if ! sh "$check" "$tmp" > "$tmp/out" 2>&1; then
    echo "test_check_layers: the copy of this checkout is refused:" >&2
    cat "$tmp/out" >&2
    exit 1
fi

# plant FILE INCLUDE EXPECT: the include as FILE's first line must fail the
# check with a line starting "FILE:1: " and containing EXPECT (EXPECT empty:
# it must pass).
plant() {
    file=$1; inc=$2; expect=$3
    cp "$tmp/$file" "$tmp/saved"
    { printf '#include "%s"\n' "$inc"; cat "$tmp/saved"; } > "$tmp/$file"
    if sh "$check" "$tmp" > "$tmp/out" 2>&1; then rc=0; else rc=1; fi
    cp "$tmp/saved" "$tmp/$file"
    if [ -z "$expect" ]; then
        if [ $rc = 0 ]; then echo "check-layers test: allowed, as it must be: $file includes \"$inc\""
        else echo "check-layers test: REFUSED $file including \"$inc\", which is allowed:" >&2; cat "$tmp/out" >&2; failed=1; fi
        return
    fi
    if [ $rc = 1 ] && grep -q "^$file:1: .*$expect" "$tmp/out"; then
        echo "check-layers test: refused, as it must be: $(grep "^$file:1: " "$tmp/out" | head -n 1)"
    else
        echo "check-layers test: NOT refused as expected ($expect): $file including \"$inc\"; it printed:" >&2
        cat "$tmp/out" >&2
        failed=1
    fi
}
plant ref/ps.c                "core/strategy_kinds.h"     "the core layer's private header; ref may include"
plant devices/cpu/cpu_gemm.c      "core/flags_internal.h"     "the core layer's private header; engine may include"
plant harness/train_loop.c    "ref/trainer.h"             "the ref layer's private header; harness may include"
plant core/gemm.c             "devices/cpu/cpu_gemm_internal.h" "core/ may not include"
plant include/distref/exact.h "core/flags_internal.h"     "private header; public may include"
plant cli/main.c              "devices/opencl/opencl_backend.h"  "private header; program cli/ may include"
plant conformance/runner.c    "ref/trainer.h"             "private header; program conformance/ may include"
plant strategies/step.c       "distref/ref.h"             "engine/ may not include \"distref/ref.h\""
plant strategies/step.c       "devices/comm/comm_internal.h"   ""
plant tests/test_flags.c      "core/flags_internal.h"     ""
[ $failed = 0 ] || { echo "check-layers test: FAILED" >&2; exit 1; }
echo "check-layers test: 8 planted violations refused, 2 allowed includes passed"
