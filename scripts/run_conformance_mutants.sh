#!/bin/sh
# Planted faults, as compile-time mutants: each is the conformance program
# linked against an engine (or a reference) with one fault compiled in, and
# it must fail the suite that targets the fault. Only the files that carry
# the fault are recompiled; every other object is the release build's.
#
#   engine mutants   a `#if defined(DR_MUTANT_X)` seam in strategies/ or
#                    devices/, compiled in with -DDR_MUTANT_X; the OpenCL
#                    kernels' (cl_*) seams are in devices/opencl/cl/*.cl, and
#                    devices/opencl/opencl_program.c passes the fault to the
#                    OpenCL compiler (a build option) when built with it
#   ref mutant       a wrong softmax gradient: a sed patch applied to a copy
#                    of ref/model_math.c in the build folder (ref/ itself carries
#                    no fault code)
#
# `make conformance-mutants` runs it (and so `make test`); `make conformance`
# does not. Its record, which no conformance run writes over, is
# FAULTS (default reports/mutants/), read by the report (conformance/report.c,
# DR_FAULT_MATRIX_FILE):
#   faults.dat    a first line "# revision R date D" (R: git rev-parse
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

# name:macro:suite that must fail
ENGINE_MUTANTS="
reg_not_scaled:DR_MUTANT_REG_NOT_SCALED:regularization
reg_scaled_twice:DR_MUTANT_REG_SCALED_TWICE:regularization
mean_not_sum:DR_MUTANT_MEAN_NOT_SUM:reductions
wrong_split:DR_MUTANT_WRONG_SPLIT:batch_splitting
drop_short:DR_MUTANT_DROP_SHORT:batch_splitting
round_partial:DR_MUTANT_ROUND_PARTIAL:reductions
pad_unmasked:DR_MUTANT_PAD_UNMASKED:loss_curves
bias_grad_axis:DR_MUTANT_BIAS_GRAD_AXIS:loss_curves
momentum_before_l2:DR_MUTANT_MOMENTUM_BEFORE_L2:regularization
chunk_off_by_one:DR_MUTANT_CHUNK_OFF_BY_ONE:reductions
stage_wrong_replica:DR_MUTANT_STAGE_WRONG_REPLICA:loss_curves
relu_at_zero:DR_MUTANT_RELU_AT_ZERO:loss_curves
cacc_no_fallback:DR_MUTANT_CACC_NO_FALLBACK:compact
cl_relu_at_zero:DR_MUTANT_CL_RELU_AT_ZERO:loss_curves
cl_gemm_edge:DR_MUTANT_CL_GEMM_EDGE:loss_curves
cl_skip_last_group:DR_MUTANT_CL_SKIP_LAST_GROUP:loss_curves
cl_mad_enable:DR_MUTANT_CL_MAD_ENABLE:loss_curves
schedule_off_by_one:DR_MUTANT_SCHEDULE_OFF_BY_ONE:schedules
clip_before_aggregation:DR_MUTANT_CLIP_BEFORE_AGGREGATION:clipping
"

link() {   # link DIR: the conformance program against DIR's archives
    d=$1
    $CC -o "$d/conformance" $CONF_OBJ "$BUILD/libharness.a" "$d/libengine.a" "$d/libref.a" "$BUILD/libcore.a" $LDLIBS
}

build_engine_mutant() {   # name macro
    d="$MUT/$1"; mkdir -p "$d"
    cp "$BUILD/libengine.a" "$d/libengine.a"; cp "$BUILD/libref.a" "$d/libref.a"
    files=$(grep -l "defined($2)" strategies/*.c devices/*/*.c 2>/dev/null)
    [ -n "$files" ] || { echo "mutant $1: no seam $2 in strategies/ or devices/" >&2; return 1; }
    for f in $files; do
        o="$d/$(basename "$f" .c).o"
        $CC $CFLAGS -DDR_LAYER_ENGINE -D"$2" -c "$f" -o "$o" || return 1
        ar r "$d/libengine.a" "$o" 2>/dev/null || return 1
    done
    link "$d"
}

build_ref_mutant() {   # the wrong softmax gradient: dz = softmax - onehot loses its 1/sum
    d="$MUT/ref_softmax_grad"; mkdir -p "$d"
    cp "$BUILD/libengine.a" "$d/libengine.a"; cp "$BUILD/libref.a" "$d/libref.a"
    sed 's|dz\[i\] = aux\[i\] / s - (i == label ? 1.0f : 0.0f);|dz[i] = aux[i] - (i == label ? 1.0f : 0.0f);|' \
        ref/model_math.c > "$d/model.c"
    if cmp -s ref/model_math.c "$d/model.c"; then
        echo "mutant ref_softmax_grad: the patch no longer applies to ref/model_math.c" >&2; return 1
    fi
    $CC $CFLAGS -DDR_LAYER_REF -c "$d/model.c" -o "$d/model.o" && ar r "$d/libref.a" "$d/model.o" 2>/dev/null && link "$d"
}

# Gradient accumulation is built in the reference only, so its planted fault
# is the reference's: the accumulated total divided by k twice (a sed patch
# of a copy of ref/train_step.c, as above).
build_ref_accum_mutant() {
    d="$MUT/ref_accum_k_twice"; mkdir -p "$d"
    cp "$BUILD/libengine.a" "$d/libengine.a"; cp "$BUILD/libref.a" "$d/libref.a"
    sed 's|    t->den = den \* k;|    t->den = den * k * k;|' ref/train_step.c > "$d/train_step.c"
    if cmp -s ref/train_step.c "$d/train_step.c"; then
        echo "mutant ref_accum_k_twice: the patch no longer applies to ref/train_step.c" >&2; return 1
    fi
    $CC $CFLAGS -DDR_LAYER_REF -c "$d/train_step.c" -o "$d/train_step.o" &&
        ar r "$d/libref.a" "$d/train_step.o" 2>/dev/null && link "$d"
}

run_one() {   # name suite
    "$MUT/$1/conformance" --mutant "$1" --expect "$2" --out "$MUT/$1/out" 2>/dev/null | tail -1
}

list=""
for m in $ENGINE_MUTANTS; do
    name=${m%%:*}; rest=${m#*:}; macro=${rest%%:*}; suite=${rest#*:}
    build_engine_mutant "$name" "$macro" || { echo "mutant $name: build failed" >&2; exit 1; }
    list="$list $name:$suite"
done
build_ref_mutant || { echo "mutant ref_softmax_grad: build failed" >&2; exit 1; }
list="$list ref_softmax_grad:loss_curves"
build_ref_accum_mutant || { echo "mutant ref_accum_k_twice: build failed" >&2; exit 1; }
list="$list ref_accum_k_twice:accumulation"

# The durability suite's mutant: distref itself (not the conformance
# program) built with the old write order, the checkpoint renamed into place
# before the metrics (core/run_log.c, DR_MUTANT_CKPT_FIRST); the kill sweep
# must find a resume that differs.
durability_mutant() {
    d="$MUT/ckpt_first"; mkdir -p "$d"
    cp "$BUILD/libcore.a" "$d/libcore.a"
    $CC $CFLAGS -DDR_LAYER_CORE -DDR_MUTANT_CKPT_FIRST -c core/run_log.c -o "$d/run_log.o" &&
        ar r "$d/libcore.a" "$d/run_log.o" 2>/dev/null &&
        $CC -o "$d/distref" "$BUILD/cli/main.o" "$BUILD/libharness.a" "$BUILD/libengine.a" "$BUILD/libref.a" \
            "$d/libcore.a" $LDLIBS || return 1
    if sh scripts/durability.sh "$d/distref" 8 > "$d/out.txt" 2>&1; then
        echo "mutant ckpt_first             must fail durability       MISSED (failed: nothing)"
    else
        echo "mutant ckpt_first             must fail durability       caught (failed: durability)"
    fi
}

# The mpi suite's mutants (conformance/mpi.c): distref itself built with the
# fault (the suite launches it under mpirun), the suite run alone against it.
MPI_MUTANTS="
mpi_pack_off_by_one:DR_MUTANT_MPI_PACK_OFF_BY_ONE
mpi_rounded:DR_MUTANT_MPI_ROUNDED
mpi_shard_swap:DR_MUTANT_MPI_SHARD_SWAP
mpi_native_headroom:DR_MUTANT_MPI_NATIVE_HEADROOM
mpi_ps_drop_update:DR_MUTANT_MPI_PS_DROP_UPDATE
mpi_ps_recover_no_rebuild:DR_MUTANT_PS_RECOVER_NO_REBUILD
"
mpi_mutant() {   # name macro
    d="$MUT/$1"
    build_engine_mutant "$1" "$2" || return 1
    $CC -o "$d/distref" "$BUILD/cli/main.o" "$BUILD/libharness.a" "$d/libengine.a" "$BUILD/libref.a" \
        "$BUILD/libcore.a" $LDLIBS || return 1
    "$d/conformance" --mutant "$1" --expect mpi --only mpi --bin "$d/distref" --out "$d/out" 2>/dev/null | tail -1
}

# Two at a time (2-core CI machines); each line says caught or MISSED.
out="$MUT/results.txt"
# A mutant runs the engine variant that carries its fault: the OpenCL
# kernels' (cl_*) opencl, every other openmp (the shared step's faults
# reach both; one is enough to catch them, and it halves the time).
printf '%s\n' $list | xargs -P 2 -I{} sh -c 'n=${1%%:*}; s=${1#*:}; case $n in cl_*) v=opencl ;; *) v=openmp ;; esac; "'"$MUT"'/$n/conformance" --variant "$v" --mutant "$n" --expect "$s" --out "'"$MUT"'/$n/out" 2>/dev/null | tail -1' _ {} > "$out"
durability_mutant >> "$out" || { echo "mutant ckpt_first: build failed" >&2; exit 1; }
list="$list ckpt_first:durability"
for m in $MPI_MUTANTS; do
    name=${m%%:*}; macro=${m#*:}
    mpi_mutant "$name" "$macro" >> "$out" || { echo "mutant $name: build failed" >&2; exit 1; }
    list="$list $name:mpi"
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
{ printf '# revision %s date %s\n' "$rev" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" &&
    sort "$out" | awk '{ f = $NF; sub(/\)$/, "", f); print $2, $5, ($6 == "caught"), f }'; } > "$fdir/faults.dat.tmp" &&
    mv "$fdir/faults.dat.tmp" "$fdir/faults.dat" &&
    sort "$out" > "$fdir/results.txt.tmp" && mv "$fdir/results.txt.tmp" "$fdir/results.txt" ||
    { echo "mutants: could not write $fdir" >&2; exit 1; }
echo "mutants: fault matrix of revision $rev in $fdir/faults.dat (make conformance's report shows it)"
caught=$(grep -c ' caught ' "$out"); total=$(printf '%s\n' $list | wc -l)
missed=$((total - caught))
echo "mutants (conformance): $caught caught, $missed missed"
[ "$missed" -eq 0 ]
