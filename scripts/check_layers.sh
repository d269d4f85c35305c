#!/bin/sh
# The layer rules of docs/ARCHITECTURE.md, read from the source: every
# #include "..." of a layer's files (and of its public headers) must name a
# header of that layer or of a layer it imports. Prints FILE:LINE for each
# forbidden include and exits 1.
#
#   core     imports core
#   ref      imports core, ref
#   engine   imports core, engine       (strategies/, devices/)
#   harness  imports everything         (cli/, conformance/, bench/, tests/ sit above it)
set -u
cd "$(dirname "$0")/.."

# The layer of a header named in an include, or of a file.
layer_of() {
    case "$1" in
        include/distref/ref.h|include/distref/ps.h|distref/ref.h|distref/ps.h) echo ref ;;
        include/distref/backend.h|include/distref/comm.h|include/distref/engine.h|include/distref/fastgemm.h|include/distref/opencl.h|\
        distref/backend.h|distref/comm.h|distref/engine.h|distref/fastgemm.h|distref/opencl.h) echo engine ;;
        include/distref/harness.h|distref/harness.h) echo harness ;;
        include/distref/*|distref/*|core/*) echo core ;;
        ref/*) echo ref ;;
        strategies/*|devices/*) echo engine ;;
        harness/*) echo harness ;;
        *) echo other ;;
    esac
}

allowed() {   # allowed FROM TO
    case "$1:$2" in
        core:core|ref:core|ref:ref|engine:core|engine:engine|harness:*) return 0 ;;
        *) return 1 ;;
    esac
}

bad=0
for f in core/*.[ch] ref/*.[ch] strategies/*.[ch] devices/*/*.[ch] harness/*.[ch] include/distref/*.h; do
    [ -f "$f" ] || continue
    from=$(layer_of "$f")
    # "file:line:#include "x"" for every quoted include
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r hit; do
        line=${hit%%:*}
        name=$(printf '%s\n' "$hit" | sed 's/.*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/')
        to=$(layer_of "$name")
        [ "$to" = other ] && continue
        if ! allowed "$from" "$to"; then
            echo "$f:$line: $from/ may not include \"$name\" ($to layer); see docs/ARCHITECTURE.md"
        fi
    done
done > build/check_layers.out 2>&1
if [ -s build/check_layers.out ]; then
    cat build/check_layers.out
    echo "check-layers: $(wc -l < build/check_layers.out) forbidden include(s)" >&2
    exit 1
fi
exit 0
