#!/bin/sh
# The golden test (tests/test_golden.c: the reference against TensorFlow's
# own output) must fail when the reference goes back to distref's old rules:
#   fill_in_order     the default (AUTO, in-memory) split fills replicas in
#                     order (batch_sizes_for_worker) instead of TensorFlow's
#                     legacy ceil(B/R) slices
#   divide_by_count   the loss's divisor is the examples in the step, not
#                     the global batch size G
# Each is a sed patch of a copy of core/plan.c in the build folder (the
# sources carry no fault code), linked before the core archive.
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD, LIBS.
set -u
: "${CC:?}" "${BUILD:?}" "${LIBS:?}"
d="$BUILD/golden_mutants"; mkdir -p "$d"
caught=0; missed=""
for m in "fill_in_order|s/p->shard_data = policy == DR_SHARD_DATA;/p->shard_data = false;/" \
         "divide_by_count|s/return p->divide_by_count || p->divide_locally ? count : p->G;/return (void)p, count;/"; do
    name=${m%%|*}; patch=${m#*|}
    sed "$patch" core/plan.c > "$d/$name.c"
    if cmp -s core/plan.c "$d/$name.c"; then echo "golden mutant $name: the patch no longer applies to core/plan.c" >&2; exit 1; fi
    $CC $CFLAGS -DDR_LAYER_CORE -c "$d/$name.c" -o "$d/$name.o" &&
        $CC $CFLAGS -o "$d/test_golden_$name" tests/test_golden.c "$d/$name.o" $LIBS $LDLIBS || exit 1
    if "$d/test_golden_$name" >"$d/$name.out" 2>&1; then missed="$missed $name"
    else caught=$((caught + 1)); echo "golden mutant $name: caught ($(grep -c ' FAIL ' "$d/$name.out") golden cases fail, as they must)"; fi
done
if [ -n "$missed" ]; then echo "golden mutants NOT caught:$missed" >&2; exit 1; fi
echo "golden mutants: $caught caught, 0 missed"
