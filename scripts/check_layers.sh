#!/bin/sh
# The layer rules of docs/ARCHITECTURE.md, read from the source. Two rules,
# over every #include "..." of the repository's C files:
#
# 1. Imports. A layer's files (and its public headers) include headers of
#    that layer or of a layer it imports only:
#
#      core     imports core
#      ref      imports core, ref
#      engine   imports core, engine       (strategies/, devices/)
#      harness  imports everything         (cli/, conformance/, bench/, tests/ sit above it)
#
# 2. Public and private headers. include/distref/ holds the public headers:
#    any file may include them (as rule 1 allows). A header in a layer's
#    folder (core/*.h, ref/*.h, strategies/ or devices/ *.h, harness/*.h)
#    is that layer's private header: only files of the same layer include
#    it. Another layer, a public header, cli/, conformance/, fuzz/ and
#    examples/ may not. A header two layers need is public API: it moves to
#    include/distref/ and documents itself there.
#    Exceptions (folders that may include any layer's private header):
#      tests/   white-box unit tests of a layer's internals (the exact GEMM's
#               kernels, cpu_gemm_internal.h; the OpenMP backend's workspace;
#               the OpenCL backend; the TPU collective's order)
#      bench/   micro-benchmarks of the same internals
#    Neither is linked into the library or bin/distref.
#
# Prints FILE:LINE and the rule for each forbidden include and exits 1.
# ROOT (default: this checkout) is the tree to read, so that
# scripts/test_check_layers.sh can plant a violation in a copy.
#
#   sh scripts/check_layers.sh [ROOT]
set -u
root=${1:-"$(dirname "$0")/.."}
cd "$root" || exit 2

WHITE_BOX="tests bench"

# The layer of a header named in an include, or of a file, into $L (these
# set variables instead of printing: no subshell per include).
layer_of() {
    case "$1" in
        include/distref/ref.h|include/distref/ps.h|distref/ref.h|distref/ps.h) L=ref ;;
        include/distref/backend.h|include/distref/comm.h|include/distref/engine.h|include/distref/fastgemm.h|include/distref/opencl.h|\
        distref/backend.h|distref/comm.h|distref/engine.h|distref/fastgemm.h|distref/opencl.h) L=engine ;;
        include/distref/harness.h|distref/harness.h) L=harness ;;
        include/distref/*|distref/*|core/*) L=core ;;
        ref/*) L=ref ;;
        strategies/*|devices/*) L=engine ;;
        harness/*) L=harness ;;
        *) L=other ;;
    esac
}

allowed() {   # allowed FROM TO
    case "$1:$2" in
        core:core|ref:core|ref:ref|engine:core|engine:engine|harness:*) return 0 ;;
        *) return 1 ;;
    esac
}

# The layer whose private header an include names, into $P; empty for any other.
private_of() {
    case "$1" in
        core/*.h) P=core ;;
        ref/*.h) P=ref ;;
        strategies/*.h|devices/*.h) P=engine ;;
        harness/*.h) P=harness ;;
        *) P= ;;
    esac
}

# Who a file is for rule 2, into $O: its layer, "public", "white-box", or
# "program DIR/".
owner_of() {
    for w in $WHITE_BOX; do
        case "$1" in "$w"/*) O=white-box; return ;; esac
    done
    case "$1" in
        include/distref/*) O=public ;;
        core/*|ref/*|strategies/*|devices/*|harness/*) layer_of "$1"; O=$L ;;
        *) O="program ${1%%/*}/" ;;
    esac
}

out=$(mktemp "${TMPDIR:-/tmp}/check_layers.XXXXXX") || exit 2
trap 'rm -f "$out"' EXIT
# "file:line:name" for every #include "name", one grep and one sed for all
find core ref strategies devices harness include/distref cli conformance fuzz examples tests bench \
     \( -name '*.c' -o -name '*.h' \) -type f 2>/dev/null | LC_ALL=C sort |
    xargs grep -n -H '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' |
    sed 's/^\([^:]*:[0-9]*\):.*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1:\2/' |
    while IFS=: read -r f line name; do
        layer_of "$f"; from=$L
        layer_of "$name"; to=$L
        if [ "$from" != other ] && [ "$to" != other ] && ! allowed "$from" "$to"; then
            echo "$f:$line: $from/ may not include \"$name\" ($to layer); see docs/ARCHITECTURE.md"
        fi
        private_of "$name"
        [ -n "$P" ] || continue
        owner_of "$f"
        if [ "$O" != white-box ] && [ "$O" != "$P" ]; then
            echo "$f:$line: \"$name\" is the $P layer's private header; $O may include only public ones (include/distref/); see scripts/check_layers.sh"
        fi
    done > "$out" 2>&1
if [ -s "$out" ]; then
    cat "$out"
    echo "check-layers: $(wc -l < "$out") forbidden include(s)" >&2
    exit 1
fi
exit 0
