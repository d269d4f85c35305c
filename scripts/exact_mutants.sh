#!/bin/sh
# The exact kernels' fast paths must each be caught by the MPFR-oracle and
# same-bits tests. Each mutant is one test binary linked against one object
# rebuilt with one fault: a file whose seam (a DR_SEAM_* macro of its
# layer's seams.h) reads DR_MUTANT_X is
# compiled with -DDR_MUTANT_X; the others (core files, mostly, which carry no
# fault code) through the registry's sed patch of a copy in the build
# folder. The mutated object is linked before the archives, so it replaces
# the release build's. Every mutant must make its test binary fail.
#
# The list, each fault's file, macro or sed patch, test and what it breaks,
# is tests/faults.tsv's rows of kind exact (scripts/faults.sh rows exact).
# Outside the kernels they include, by their seams: the compact collectives'
# merge flag (test_comm), tfevents.c's START (test_tfevents reads a
# resumed run's files with TensorBoard's purge rule), the replay file's
# reader (test_replay_file), the OpenMP wait policy's re-exec
# (test_omp_policy runs itself as a probe under three environments) and the
# report's verdicts (skip_as_pass: test_report reads the tally,
# results.json, junit.xml, matrix.dat and index.html), and the runner's
# lanes (lane_lost_unit_dropped: test_lanes kills a lane mid-unit).
# sgemm_cut_by_threads: test_backend's sgemm_cut_by_shape asks
# dr_omp_sgemm_cut under 1 and 2 threads, caught whatever OPENBLAS_CORETYPE
# says (fast_threads' same-bits check sees it only under Haswell kernels).
# A fault whose needs (CPU flags: avx512f for the sum_* window kernel,
# avx512_vnni for the VNNI kernel's crt_* and round_*, avx512ifma for the
# IFMA reconstruction) this CPU lacks is skipped, with a line saying so.
#
#   sh scripts/exact_mutants.sh [NAME...]    only the NAMEd faults
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD, LIBS.
set -u
: "${CC:?}" "${BUILD:?}" "${LIBS:?}"
d="$BUILD/exact_mutants"; mkdir -p "$d"
caught=0; missed=""
run() {   # name file layer how test [objects the test links besides the archives]
    name=$1; file=$2; layer=$3; how=$4; test=$5; extra=${6:-}
    case "$how" in
    -D*) $CC $CFLAGS -DDR_LAYER_$layer "$how" -c "$file" -o "$d/$name.o" || exit 1 ;;
    *)   sed "$how" "$file" > "$d/$name.c"
         if cmp -s "$file" "$d/$name.c"; then echo "exact mutant $name: the patch no longer applies to $file" >&2; exit 1; fi
         $CC $CFLAGS -DDR_LAYER_$layer -c "$d/$name.c" -o "$d/$name.o" || exit 1 ;;
    esac
    $CC $CFLAGS -o "$d/${test}_$name" "tests/$test.c" "$d/$name.o" $extra $LIBS $LDLIBS || exit 1
    if "$d/${test}_$name" >"$d/$name.out" 2>&1; then missed="$missed $name"
    else caught=$((caught + 1)); echo "exact mutant $name: caught by $test ($(grep -c 'FAILED  \]' "$d/$name.out") failing lines)"; fi
}
rows=$(sh scripts/faults.sh rows exact "$@") || exit 1
tab=$(printf '\t')
while IFS=$tab read -r name kind macro file seams test needs breaks patch; do
    missing=""
    for flag in $(echo "$needs" | tr ',' ' '); do
        [ "$flag" = - ] || grep -qw "$flag" /proc/cpuinfo 2>/dev/null || missing="$missing $flag"
    done
    if [ -n "$missing" ]; then echo "exact mutant $name: skipped (no$missing on this CPU: the kernel it plants in does not run)"; continue; fi
    # an OpenCL fault's row names its kernels' macro after a comma: the C
    # build defines the first, whose seam passes the second as a build option
    case $macro in -) how=$patch ;; *) how=-D${macro%%,*} ;; esac
    extra=""
    [ "$test" = test_report ] && extra="$BUILD/conformance/report.o $BUILD/conformance/report_matrix.o $BUILD/conformance/outfile.o"
    [ "$test" = test_lanes ] && extra="$BUILD/conformance/verdict.o"
    run "$name" "$file" "$(sh scripts/faults.sh layer "$file")" "$how" "$test" "$extra" < /dev/null
done <<EOF
$rows
EOF
if [ -n "$missed" ]; then echo "exact mutants NOT caught:$missed" >&2; exit 1; fi
echo "exact mutants: $caught caught, 0 missed"
