#!/bin/sh
# The golden test (tests/test_golden.c: the reference against TensorFlow's
# own output) must fail when the reference goes back to distref's old rules:
# tests/faults.tsv's rows of kind golden (fill_in_order: the default AUTO
# split fills replicas in order, batch_sizes_for_worker, instead of
# TensorFlow's legacy ceil(B/R) slices; divide_by_count: the loss's divisor
# is the examples in the step, not the global batch size G). Each is a sed
# patch of a copy of its core/ or ref/ file in the build folder (the
# sources carry no fault code), compiled with that layer's define and
# linked before the archives. ref_bn_epsilon_torch (BatchNormalization's
# epsilon PyTorch's 1e-5, not Keras' 1e-3) and ref_bn_momentum_torch (the
# moving statistics at momentum 0.9, not 0.99: only the moving-statistics
# comparison sees it) are caught by the CNN and ResNet cases (docs/MODELS.md);
# ref_mixed_reduce_exact (--mixed_reduction=tensorflow reduced as exact) by
# the float16 overflow case at R = 4 (docs/TRAINING_FEATURES.md).
#   sh scripts/golden_mutants.sh [NAME...]
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD, LIBS.
set -u
: "${CC:?}" "${BUILD:?}" "${LIBS:?}"
d="$BUILD/golden_mutants"; mkdir -p "$d"
caught=0; missed=""
rows=$(sh scripts/faults.sh rows golden "$@") || exit 1
tab=$(printf '\t')
while IFS=$tab read -r name kind macro file seams test needs breaks patch; do
    sed "$patch" "$file" > "$d/$name.c"
    if cmp -s "$file" "$d/$name.c"; then echo "golden mutant $name: the patch no longer applies to $file" >&2; exit 1; fi
    case $file in ref/*) layer=DR_LAYER_REF ;; *) layer=DR_LAYER_CORE ;; esac
    $CC $CFLAGS -D$layer -c "$d/$name.c" -o "$d/$name.o" < /dev/null &&
        $CC $CFLAGS -o "$d/${test}_$name" "tests/$test.c" "$d/$name.o" $LIBS $LDLIBS < /dev/null || exit 1
    if "$d/${test}_$name" >"$d/$name.out" 2>&1 < /dev/null; then missed="$missed $name"
    else caught=$((caught + 1)); echo "golden mutant $name: caught ($(grep -c ' FAIL ' "$d/$name.out") golden cases fail, as they must)"; fi
done <<EOF
$rows
EOF
if [ -n "$missed" ]; then echo "golden mutants NOT caught:$missed" >&2; exit 1; fi
echo "golden mutants: $caught caught, 0 missed"
