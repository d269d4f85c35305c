#!/bin/sh
# Planted faults, as compile-time mutants: each is the conformance program
# linked against an engine (or a reference) with one fault compiled in, and
# it must fail the suite that targets the fault. Only the files that carry
# the fault are recompiled; every other object is the release build's.
#
#   engine mutants   a named seam (DR_SEAM_*, devices/seams.h,
#                    strategies/seams.h) reading DR_MUTANT_X: the
#                    registry's files compiled with -DDR_MUTANT_X; the
#                    OpenCL kernels' (cl_*) seams are in
#                    devices/opencl/cl/kernels.cl, and
#                    devices/opencl/opencl_program.c passes the fault to the
#                    OpenCL compiler (a build option) when built with it
#   ref mutant       a wrong softmax gradient: a sed patch applied to a copy
#                    of ref/model_math.c in the build folder (ref/ itself
#                    carries no fault code)
#
# `make conformance-mutants` runs it (and so `make test`); `make conformance`
# does not. Its record, which no conformance run writes over, is
# FAULTS (default reports/mutants/), read by the report (conformance/report.c,
# DR_FAULT_MATRIX_FILE):
#   faults.dat    a first line "# revision R date D suites S" (S: expected,
#                 or all under MUTANT_MATRIX=full; R: git rev-parse
#                 --short HEAD, "-dirty" when the work tree differs,
#                 "unknown" outside a git checkout; D: UTC), then one line a
#                 mutant: "fault expected_suite caught suites_that_failed"
#   results.txt   the mutants' own lines, caught or MISSED
# Each file is written whole and renamed into place.
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD, CONF_OBJ.
set -u
: "${CC:?}" "${BUILD:?}" "${CONF_OBJ:?}"
MUT="$BUILD/mutants"
mkdir -p "$MUT"

# The list: tests/faults.tsv's rows of kind conformance (name, macro or sed
# patch, the files rebuilt with it, the suite that must fail); NAMEs given
# run only those.
#   sh scripts/run_conformance_mutants.sh [NAME...]
tab=$(printf '\t')
ROWS=$(sh scripts/faults.sh rows conformance "$@") || exit 1
field() {   # field NAME COLUMN: one field of a row of ROWS
    printf '%s\n' "$ROWS" | awk -F'\t' -v n="$1" -v c="$2" '$1 == n { print $c }'
}
select_rows() {   # select_rows AWK-CONDITION: "name:suite" of the rows matching it
    printf '%s\n' "$ROWS" | awk -F'\t' "NF && ($1) { print \$1 \":\" \$6 }"
}
ENGINE_MUTANTS=$(select_rows '$6 != "mpi" && $6 != "hosts" && $6 != "durability" && $9 == "-"')
PATCH_MUTANTS=$(select_rows '$9 != "-"')

link() {   # link DIR: the conformance program against DIR's archives
    d=$1
    $CC -o "$d/conformance" $CONF_OBJ "$BUILD/libharness.a" "$d/libengine.a" "$d/libref.a" "$BUILD/libcore.a" $LDLIBS
}

build_engine_mutant() {   # name: its registry files rebuilt with its macro
    d="$MUT/$1"; mkdir -p "$d"
    cp "$BUILD/libengine.a" "$d/libengine.a"; cp "$BUILD/libref.a" "$d/libref.a"
    macro=$(field "$1" 3); macro=${macro%%,*}
    files=$(field "$1" 4 | tr ',' ' ')
    [ -n "$files" ] || { echo "mutant $1: no files in tests/faults.tsv" >&2; return 1; }
    for f in $files; do
        o="$d/$(basename "$f" .c).o"
        $CC $CFLAGS -DDR_LAYER_ENGINE -D"$macro" -c "$f" -o "$o" || return 1
        ar r "$d/libengine.a" "$o" 2>/dev/null || return 1
    done
    link "$d"
}

build_ref_mutant() {   # name: a sed patch of a copy of a ref/ file (ref_softmax_grad)
    d="$MUT/$1"; mkdir -p "$d"
    cp "$BUILD/libengine.a" "$d/libengine.a"; cp "$BUILD/libref.a" "$d/libref.a"
    f=$(field "$1" 4); c="$d/$(basename "$f")"
    case $f in ref/*) ;; *) echo "mutant $1: a patch mutant of $f: only ref/ files are patched here" >&2; return 1 ;; esac
    sed "$(field "$1" 9)" "$f" > "$c"
    if cmp -s "$f" "$c"; then
        echo "mutant $1: the patch no longer applies to $f" >&2; return 1
    fi
    $CC $CFLAGS -DDR_LAYER_REF -c "$c" -o "${c%.c}.o" && ar r "$d/libref.a" "${c%.c}.o" 2>/dev/null && link "$d"
}

run_one() {   # name suite
    "$MUT/$1/conformance" --mutant "$1" --expect "$2" --out "$MUT/$1/out" 2>/dev/null | tail -1
}

list=""
for m in $ENGINE_MUTANTS; do
    build_engine_mutant "${m%%:*}" || { echo "mutant ${m%%:*}: build failed" >&2; exit 1; }
    list="$list $m"
done
for m in $PATCH_MUTANTS; do
    build_ref_mutant "${m%%:*}" || { echo "mutant ${m%%:*}: build failed" >&2; exit 1; }
    list="$list $m"
done

# The durability suite's mutant: distref itself (not the conformance
# program) built with the old write order, the checkpoint renamed into place
# before the metrics (core/run_log.c, DR_MUTANT_CKPT_FIRST); the kill sweep
# must find a resume that differs.
durability_mutant() {   # name (ckpt_first): its core file rebuilt with its macro
    d="$MUT/$1"; mkdir -p "$d"
    cp "$BUILD/libcore.a" "$d/libcore.a"
    f=$(field "$1" 4)
    $CC $CFLAGS -DDR_LAYER_CORE -D"$(field "$1" 3)" -c "$f" -o "$d/$(basename "$f" .c).o" &&
        ar r "$d/libcore.a" "$d/$(basename "$f" .c).o" 2>/dev/null &&
        $CC -o "$d/distref" "$BUILD/cli/main.o" "$BUILD/libharness.a" "$BUILD/libengine.a" "$BUILD/libref.a" \
            "$d/libcore.a" $LDLIBS || return 1
    if sh scripts/durability.sh "$d/distref" 8 > "$d/out.txt" 2>&1; then
        printf 'mutant %-22s must fail durability       MISSED (failed: nothing)\n' "$1"
    else
        printf 'mutant %-22s must fail durability       caught (failed: durability)\n' "$1"
    fi
}

# The mpi and hosts suites' mutants (conformance/mpi.c, conformance/hosts.c):
# distref itself built with the fault (the suite launches it under mpirun),
# the suite run alone against it. Where the machine cannot make network
# namespaces, a hosts mutant is "not_supported" (neither caught nor missed).
MPI_MUTANTS=$(select_rows '$6 == "mpi" || $6 == "hosts"')
mpi_mutant() {   # name suite
    d="$MUT/$1"
    if [ "$2" = hosts ] && ! why=$(sh scripts/netns_cluster.sh check 2>&1); then
        printf 'mutant %-22s must fail %-16s not_supported (%s)\n' "$1" "$2" "${why#not supported: }"
        return 0
    fi
    build_engine_mutant "$1" || return 1
    $CC -o "$d/distref" "$BUILD/cli/main.o" "$BUILD/libharness.a" "$d/libengine.a" "$BUILD/libref.a" \
        "$BUILD/libcore.a" $LDLIBS || return 1
    "$d/conformance" --mutant "$1" --expect "$2" --only "$2" --bin "$d/distref" --out "$d/out" 2>/dev/null | tail -1
}

# Two at a time (2-core CI machines); each line says caught or MISSED.
out="$MUT/results.txt"
# A mutant runs the engine variant that carries its fault: the OpenCL
# kernels' (cl_*) opencl, every other openmp (the shared step's faults
# reach both; one is enough to catch them, and it halves the time).
# It runs only the suite that must fail (--only SUITE): that is the test.
# MUTANT_MATRIX=full runs every quick suite against every mutant instead,
# so the fault matrix also shows which other suites notice each fault
# (2.5x the time: 23 s against 54 s for one loss_curves mutant, 33 s
# against 112 s for an OpenCL one, on the 2-core machine).
case ${MUTANT_MATRIX:-expected} in
    full) only=0 ;;
    expected) only=1 ;;
    *) echo "mutants: MUTANT_MATRIX: expected 'expected' or 'full', got '$MUTANT_MATRIX'" >&2; exit 2 ;;
esac
: > "$out"
[ -z "$list" ] || printf '%s\n' $list | xargs -P 2 -I{} sh -c 'n=${1%%:*}; s=${1#*:}; case $n in cl_*) v=opencl ;; *) v=openmp ;; esac; if [ '"$only"' = 1 ]; then set -- --only "$s"; else set --; fi; "'"$MUT"'/$n/conformance" --variant "$v" "$@" --mutant "$n" --expect "$s" --out "'"$MUT"'/$n/out" 2>/dev/null | tail -1' _ {} >> "$out"
for m in $(select_rows '$6 == "durability"'); do
    durability_mutant "${m%%:*}" >> "$out" || { echo "mutant ${m%%:*}: build failed" >&2; exit 1; }
    list="$list $m"
done
for m in $MPI_MUTANTS; do
    mpi_mutant "${m%%:*}" "${m#*:}" >> "$out" || { echo "mutant ${m%%:*}: build failed" >&2; exit 1; }
    list="$list $m"
done
sort "$out"
# The fault matrix (reports/plots.gp: "fault suite caught failed_suites"),
# with the revision and date it was measured at.
fdir="${FAULTS:-reports/mutants}"
mkdir -p "$fdir" || exit 1
rev=$(git rev-parse --short HEAD 2>/dev/null) || rev=unknown
if [ "$rev" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    rev="$rev-dirty"
fi
{ printf '# revision %s date %s suites %s\n' "$rev" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$([ "$only" = 1 ] && echo expected || echo all)" &&
    sort "$out" | grep -v ' not_supported ' | awk '{ f = $NF; sub(/\)$/, "", f); print $2, $5, ($6 == "caught"), f }'; } > "$fdir/faults.dat.tmp" &&
    mv "$fdir/faults.dat.tmp" "$fdir/faults.dat" &&
    sort "$out" > "$fdir/results.txt.tmp" && mv "$fdir/results.txt.tmp" "$fdir/results.txt" ||
    { echo "mutants: could not write $fdir" >&2; exit 1; }
echo "mutants: fault matrix of revision $rev in $fdir/faults.dat (make conformance's report shows it)"
caught=$(grep -c ' caught ' "$out"); total=$(echo $list | wc -w)
unsupported=$(grep -c ' not_supported ' "$out")
missed=$((total - caught - unsupported))
echo "mutants (conformance): $caught caught, $missed missed, $unsupported not supported here"
[ "$missed" -eq 0 ]
