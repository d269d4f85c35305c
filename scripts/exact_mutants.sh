#!/bin/sh
# The exact kernels' fast paths must each be caught by the MPFR-oracle and
# same-bits tests. Each mutant is one test binary linked against one object
# rebuilt with one fault: engine files (devices/) through a
# `#if defined(DR_MUTANT_X)` seam compiled with -DDR_MUTANT_X; core files
# (which carry no fault code, but for tfevents.c's seam) through a sed patch
# of a copy in the build folder. The mutated object is linked before the archives, so it replaces
# the release build's. Every mutant must make its test binary fail.
#
#   zero_row_signs  devices/cpu/cpu_gemm.c  an all-zero row's products taken as +0
#   wide_shift      devices/cpu/cpu_gemm.c  the direct path's shift below 2^-320 one bit short
#   wide_sticky     devices/cpu/cpu_gemm_element.c  the f32 direct path drops the bits below its top 64
#   ll_ignored      devices/cpu/cpu_gemm_element.c  the f32 path's three DGEMMs take lo . lo as zero
#   cert_midpoint   devices/cpu/cpu_gemm_element.c  the rounding certificate lets a midpoint lie within
#                                       lo . lo's bound
#   rem_compact_last devices/cpu/cpu_gemm.c a dot with remainders summed in its own dr_cacc
#                                       (remainder_sum) drops B's last remainder product
#   crt_few_moduli  devices/cpu/cpu_gemm_crt.c   one modulus fewer than the bound needs
#   crt_bits_short  devices/cpu/cpu_gemm_slice.c a narrow vector's integers counted a bit short of
#                                       their width on the grid (too few moduli for them)
#   crt_coeff       devices/cpu/cpu_gemm_crt.c   the last modulus's CRT coefficient off by one
#   crt_rem_portable devices/cpu/cpu_gemm_crt.c  the plain C packing misses bits below the grid
#   crt_ktail_portable devices/cpu/cpu_gemm_crt.c the plain C kernel drops the last group of 4 k
#   crt_residue     devices/cpu/cpu_gemm_vnni.c  B's residues not centred for moduli 2.. (wrap in s8)
#   crt_ktail       devices/cpu/cpu_gemm_vnni.c  the VNNI kernel drops the k past the last multiple of 4
#   crt_no_rem      devices/cpu/cpu_gemm_vnni.c  the VNNI packing misses bits below the grid
#   crt_rem_merge   devices/cpu/cpu_gemm_vnni.c  B's packing (shared by the OpenMP team) drops the
#                                       threads' remainder marks instead of OR-ing them in
#   crt_ifma_hi     devices/cpu/cpu_gemm_vnni.c  the IFMA reconstruction drops the high half of y' Q_t's low digit
#   round_odd       devices/cpu/cpu_gemm_round.c the f32 outputs' double truncated, not rounded to odd
#   round_sticky    devices/cpu/cpu_gemm_round.c the bits below the 64-bit window dropped (no sticky bit)
#   round_bias_hi   devices/cpu/cpu_gemm_round.c a bias's bits that cross into V's high word lost
#   round_bias_low  devices/cpu/cpu_gemm_round.c a bias one bit below V's unit taken (at the wrong scale)
#   cacc_row_tz     devices/cpu/cpu_gemm_round.c a GEMM term stored in an empty compact accumulator keeps a trailing zero
#   cacc_row_full   devices/cpu/cpu_gemm_round.c a compact accumulator already holding a term is overwritten
#   cacc_round_odd  core/cacc.c (distref/round_avx512.h's seam) dr_cacc_round_div_n's double truncated, not rounded to odd
#   cacc_round_rest core/cacc.c         dr_cacc_round_div_n drops the lowest word from the sticky bit
#   cacc_round_carry core/cacc.c        dr_cacc_round_div_n's negation loses the carry into the top word
#   cacc_round_negzero core/cacc.c      dr_cacc_round_div_n gives -0 for an exact zero that is +0
#   traj_nan_equal  core/traj_diff.c    diff takes two NaNs of other payloads as equal
#   traj_negzero    core/traj_diff.c    the ulp distance of -0 and +0 is 0 (so -0 vs +0 passes ulp=0)
#   traj_step_tail  core/traj_diff.c    a step missing at the end of one trajectory is not an error
#   npy_trailing    core/npy.c          a .npy with bytes past its shape's data is accepted
#   traj_first_late core/traj_diff.c    the "first" divergence is the last differing element
#   round_fast_sign core/acc.c          dr_acc_round_div loses the sign of a negative value
#   round_fast_top  core/acc.c          dr_acc_round_div drops the carry into the top digit
#   round_fast_lo   core/acc.c          dr_acc_round_div skips the lowest nonzero limb
#   round_pow2      core/acc.c          a power-of-two divisor shifts the exponent one bit short
#   cacc_sticky     core/cacc.c         dr_cacc_round_div drops the division's remainder (sticky bit)
#   cacc_align      core/cacc.c         a merge lines the later term up one bit short
#   cacc_trim       core/cacc.c         a term's trailing zeros move into the exponent one too many
#   sum_window_slack core/reduce.c      the AVX-512 window keeps (and loses) terms one binade below it
#   sum_negzero     core/reduce.c       the AVX-512 window takes -0 for +0 (the sign of a zero sum)
#   sum_upper_sign  core/reduce.c       the upper eight lanes take the lower eight's signs
#   sum_unit        core/reduce.c       the chunk's total goes in one binade too high
#   sum_special     core/reduce.c       a chunk holding inf or NaN stays on the window path
#   sgemm_cut_by_threads devices/cpu/openmp_kernels.c  fast mode cuts its large sgemms by the thread
#                                       count, not by shape (test_backend's sgemm_cut_by_shape asks
#                                       dr_omp_sgemm_cut under 1 and 2 threads: caught whatever
#                                       OPENBLAS_CORETYPE says; fast_threads' same-bits check sees
#                                       it only under Haswell kernels, whose slabs change the bits)
# and outside the kernels, by their seams:
#   cacc_merge_flag core/form.c             the compact collectives' merge drops the sender's
#                                       overflow flag (test_comm_compact: an element that leaves
#                                       the window on one replica must come out overflowed on all)
#   tfevents_no_start core/tfevents.c   a segment's event file has no SessionLog START, so
#                                       TensorBoard shows a resumed run's redone steps twice
#                                       (test_tfevents reads a resumed run's files with
#                                       TensorBoard's purge rule; no TensorBoard needed)
#   replay_nul_blank core/ps_schedule_read.c  a NUL byte read as the end of the line (a line of
#                                       NULs is blank: /dev/zero's endless loop)
#   replay_special  core/ps_schedule_read.c   any file but a directory opened (a FIFO, a device)
#   replay_version  core/ps_schedule_read.c   a landing's version taken as written
#   replay_511      core/ps_schedule_read.c   the old 511-byte line (a valid 600-byte line refused)
#                                       (each caught by test_replay_file)
#   omp_no_reexec   harness/omp_policy.c  the wait policy never re-executes the program, so
#                                       libgomp keeps its long spin (test_omp_policy runs itself
#                                       as a probe under three environments)
#   skip_as_pass    conformance/verdict.c  a cell a variant does not support is recorded as
#                                       passed, not "not supported" (test_report reads the tally,
#                                       results.json, junit.xml, matrix.dat and index.html)
# The sum_* mutants bite only where the AVX-512 kernel runs (avx512f in
# /proc/cpuinfo), the crt_* ones of cpu_gemm_vnni.c and the round_* ones only where the VNNI
# kernel runs (avx512_vnni); elsewhere they are skipped, with a line saying so.
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
run zero_row_signs devices/cpu/cpu_gemm.c ENGINE -DDR_MUTANT_ZERO_ROW_SIGNS test_fastgemm
run wide_shift     devices/cpu/cpu_gemm.c ENGINE -DDR_MUTANT_WIDE_SHIFT     test_fastgemm
run wide_sticky    devices/cpu/cpu_gemm_element.c ENGINE -DDR_MUTANT_WIDE_STICKY   test_fastgemm
run ll_ignored     devices/cpu/cpu_gemm_element.c ENGINE -DDR_MUTANT_LL_IGNORED    test_fastgemm
run cert_midpoint  devices/cpu/cpu_gemm_element.c ENGINE -DDR_MUTANT_CERT_MIDPOINT test_fastgemm
run rem_compact_last devices/cpu/cpu_gemm.c ENGINE -DDR_MUTANT_REM_COMPACT_LAST test_gemm_crt
run crt_few_moduli devices/cpu/cpu_gemm_crt.c ENGINE -DDR_MUTANT_CRT_FEW_MODULI test_gemm_crt
run crt_coeff      devices/cpu/cpu_gemm_crt.c ENGINE -DDR_MUTANT_CRT_COEFF test_gemm_crt
run crt_bits_short devices/cpu/cpu_gemm_slice.c ENGINE -DDR_MUTANT_CRT_BITS_SHORT test_gemm_crt
run crt_rem_portable devices/cpu/cpu_gemm_crt.c ENGINE 's/    \*rem |= t != x;/    (void)rem;/' test_gemm_crt
run crt_ktail_portable devices/cpu/cpu_gemm_crt.c ENGINE 's/    size_t G = (K + 3) \/ 4;/    size_t G = K \/ 4;/' test_gemm_crt
if grep -qw avx512_vnni /proc/cpuinfo 2>/dev/null; then
    run crt_residue devices/cpu/cpu_gemm_vnni.c ENGINE -DDR_MUTANT_CRT_RESIDUE test_gemm_crt
    run crt_ktail   devices/cpu/cpu_gemm_vnni.c ENGINE -DDR_MUTANT_CRT_KTAIL test_gemm_crt
    run crt_no_rem  devices/cpu/cpu_gemm_vnni.c ENGINE -DDR_MUTANT_CRT_NO_REM test_gemm_crt
    run crt_rem_merge devices/cpu/cpu_gemm_vnni.c ENGINE 's/        for (size_t j = 0; j < N; j++) has_rem\[j\] |= rem\[j\];/        (void)rem;/' test_gemm_crt
    if grep -qw avx512ifma /proc/cpuinfo 2>/dev/null; then
        run crt_ifma_hi devices/cpu/cpu_gemm_vnni.c ENGINE -DDR_MUTANT_CRT_IFMA_HI test_gemm_crt
    else
        echo "exact mutant crt_ifma_hi: skipped (no avx512ifma on this CPU: the IFMA reconstruction does not run)"
    fi
    run round_odd      devices/cpu/cpu_gemm_round.c ENGINE -DDR_MUTANT_ROUND_ODD test_fastgemm_round
    run round_sticky   devices/cpu/cpu_gemm_round.c ENGINE -DDR_MUTANT_ROUND_STICKY test_fastgemm_round
    run round_bias_hi  devices/cpu/cpu_gemm_round.c ENGINE -DDR_MUTANT_ROUND_BIAS_HI test_fastgemm_round
    run round_bias_low devices/cpu/cpu_gemm_round.c ENGINE -DDR_MUTANT_ROUND_BIAS_LOW test_fastgemm_round
    run cacc_row_tz    devices/cpu/cpu_gemm_round.c ENGINE -DDR_MUTANT_CACC_ROW_TZ test_fastgemm_round
    run cacc_row_full  devices/cpu/cpu_gemm_round.c ENGINE -DDR_MUTANT_CACC_ROW_FULL test_fastgemm_round
    run cacc_round_odd   core/cacc.c CORE -DDR_MUTANT_ROUND_ODD test_fastgemm_round
    run cacc_round_rest  core/cacc.c CORE 's/_mm512_sub_epi64(c64, s)), rest), all);/_mm512_sub_epi64(c64, s)), _mm512_and_si512(rest, zero)), all);/' test_fastgemm_round
    run cacc_round_carry core/cacc.c CORE 's/    w2 = _mm512_mask_add_epi64(w2, c1, w2, one);/    (void)c1;/' test_fastgemm_round
    run cacc_round_negzero core/cacc.c CORE 's/_mm512_set1_epi64((long long)DR_ACC_F_NONEMPTY << 32));/_mm512_set1_epi64((long long)(DR_ACC_F_NONEMPTY | DR_ACC_F_NOT_NEG0) << 32));/' test_fastgemm_round
else
    echo "exact mutants crt_residue, crt_ktail, crt_no_rem, crt_rem_merge, round_*, cacc_round_*: skipped (no avx512_vnni on this CPU: the VNNI kernel does not run)"
fi
run round_fast_sign core/acc.c CORE 's/            negative = 1;/            negative = 0;/' test_exact
run round_fast_top  core/acc.c CORE 's/top = a->limb\[t\] + carry;/top = a->limb[t];/' test_exact
run round_fast_lo   core/acc.c CORE 's/== 0) lo++;/== 0) { lo++; } lo += lo < TOP;/' test_exact
run round_pow2      core/acc.c CORE 's/while (divisor > 1u) { divisor >>= 1; eoff++; }/while (divisor > 2u) { divisor >>= 1; eoff++; }/' test_exact
run cacc_sticky    core/cacc.c CORE 's/            sticky |= n64 % d != 0;/            (void)0;/' test_cacc
run cacc_align     core/cacc.c CORE 's/x = (i128)((u128)x << d);/x = (i128)((u128)x << (d ? d - 1 : 0));/' test_cacc
run cacc_trim      core/cacc.c CORE 's/a->exp = e + tz;/a->exp = e + tz + 1;/' test_cacc
run sgemm_cut_by_threads devices/cpu/openmp_kernels.c ENGINE 's/    if ((double)M \* N \* K < SGEMM_SLAB_MIN || cut >= E) return 0;/    if ((double)M * N * K < SGEMM_SLAB_MIN || cut >= E || omp_get_max_threads() < 2) return 0;/' test_backend
run cacc_merge_flag core/form.c CORE -DDR_MUTANT_CACC_MERGE_FLAG test_comm_compact
run traj_nan_equal  core/traj_diff.c CORE 's/        if (ba == bb) continue;/        if (ba == bb || (x->data[i] != x->data[i] \&\& y->data[i] != y->data[i])) continue;/' test_trajectory
run traj_negzero    core/traj_diff.c CORE 's/    ka = a \& 0x80000000u ? ~a : a | 0x80000000u;/    ka = a \& 0x80000000u ? ~a + 1u : a | 0x80000000u;/' test_trajectory
run traj_step_tail  core/traj_diff.c CORE 's/    if (i == d->ia.nsteps \&\& i == d->ib.nsteps) return DR_OK;/    if (i == d->ia.nsteps || i == d->ib.nsteps) return DR_OK;/' test_trajectory
run npy_trailing    core/npy.c CORE 's/    if (n - start != out->count \* sizeof(float))/    if (n - start < out->count * sizeof(float))/' test_trajectory
run traj_first_late core/traj_diff.c CORE 's/        if (!d->first.set) note_element/        if (!d->first.set || i > d->first.flat) note_element/' test_trajectory
run tfevents_no_start core/tfevents.c CORE -DDR_MUTANT_TFEVENTS_NO_START test_tfevents
run replay_nul_blank core/ps_schedule_read.c CORE 's/        if (ch == 0) {/        if (ch == 0 \&\& 0) {/' test_replay_file
run replay_special core/ps_schedule_read.c CORE 's/!S_ISREG(st.st_mode)/S_ISDIR(st.st_mode)/' test_replay_file
run replay_version core/ps_schedule_read.c CORE 's/ev->version, h->lands + (ev->kind == DR_PS_LAND),/h->lands + (ev->kind == DR_PS_LAND), h->lands + (ev->kind == DR_PS_LAND),/' test_replay_file
run replay_511     core/ps_schedule_read.c CORE 's/if (\*len == DR_PS_SCHEDULE_LINE_MAX)/if (*len == 511)/' test_replay_file
run omp_no_reexec  harness/omp_policy.c HARNESS 's/    execv(self, argv);/    (void)argv;/' test_omp_policy
run skip_as_pass   conformance/verdict.c HARNESS -DDR_MUTANT_SKIP_AS_PASS test_report \
    "$BUILD/conformance/report.o $BUILD/conformance/report_matrix.o $BUILD/conformance/outfile.o"
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    run sum_window_slack core/reduce.c CORE 's/_mm512_mask_cmplt_epi32_mask(nonzero, sh, zero)/_mm512_mask_cmplt_epi32_mask(nonzero, sh, _mm512_set1_epi32(-1))/' test_exact
    run sum_negzero    core/reduce.c CORE 's/nn0 |= _mm512_mask_cmpneq_epi32_mask(live, u, negzero);/nn0 |= _mm512_mask_cmpneq_epi32_mask(live, u, zero);/' test_exact
    run sum_upper_sign core/reduce.c CORE 's/(__mmask8)(neg >> 8)/(__mmask8)neg/' test_exact
    run sum_unit       core/reduce.c CORE 's/F - 150 - WIN_S)/F - 149 - WIN_S)/' test_exact
    run sum_special    core/reduce.c CORE 's/if (F == 255) sum_chunk(a, x, len);/if (F == 256) sum_chunk(a, x, len);/' test_exact
else
    echo "exact mutants sum_*: skipped (no avx512f on this CPU: the window kernel does not run)"
fi
# The Python package's tests (python/tests, scripts/test_python.sh) against a
# bin/distref whose diff names the last differing element as the first:
# the NumPy port's report must then differ from the CLI's.
if sh scripts/test_python.sh bin/distref 2>/dev/null | grep -q 'not supported'; then
    echo "exact mutant py_first_late: skipped (python: not supported)"
else
    sed 's/        if (!d->first.set) note_element/        if (!d->first.set || i > d->first.flat) note_element/' \
        core/traj_diff.c > "$d/py_first_late.c"
    $CC $CFLAGS -DDR_LAYER_CORE -c "$d/py_first_late.c" -o "$d/py_first_late.o" || exit 1
    $CC $CFLAGS -o "$d/distref_py_first_late" "$BUILD/cli/main.o" "$d/py_first_late.o" $LIBS $LDLIBS || exit 1
    if sh scripts/test_python.sh "$d/distref_py_first_late" > "$d/py_first_late.out" 2>&1; then missed="$missed py_first_late"
    else caught=$((caught + 1)); echo "exact mutant py_first_late: caught by python/tests"; fi
fi
if [ -n "$missed" ]; then echo "exact mutants NOT caught:$missed" >&2; exit 1; fi
echo "exact mutants: $caught caught, 0 missed"
