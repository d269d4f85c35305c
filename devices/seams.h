/* distref engine (devices/) — the planted faults' seams, in one place.
 *
 * A library function reads as production code: where a planted fault can
 * change it, it calls a named seam, DR_SEAM_*, whose production body is
 * below, beside the faulty body a mutant build compiles in with
 * -DDR_MUTANT_<NAME> (tests/faults.tsv lists every fault, its harness and
 * the test or suite that must catch it; scripts/check_faults.sh checks the
 * list against these seams). No rule of a normal build defines a
 * DR_MUTANT_* name, so bin/distref and lib/libdistref.a hold no fault code.
 * Statement seams are ((void)0) in production.
 *
 * Not here yet (issue 28: the comm and the optimizer are being rewritten):
 * the #if seams of devices/comm/comm_elem.c, devices/mpi/comm_mpi*.c and
 * devices/cpu/openmp_backend.c. The OpenCL kernels' own seams stay in
 * devices/opencl/cl/kernels.cl (their build options,
 * DR_SEAM_CL_BUILD_OPTIONS, are here). The exact rounding's two are in
 * include/distref/round_avx512.h, which core and engine share.
 *
 * Include it after the file's other headers (some faulty bodies use them).
 */
#ifndef DISTREF_DEVICES_SEAMS_H
#define DISTREF_DEVICES_SEAMS_H

/* ---- cpu/cpu_gemm.c ---------------------------------------------------------- */

/* A compact dot's remainder loop stops early at B's last remainder. */
#if defined(DR_MUTANT_REM_COMPACT_LAST)   /* the compact path drops B's last remainder */
#define DR_SEAM_REM_STOP(compact, r, end) ((compact) && (r) + 1 == (end))
#else
#define DR_SEAM_REM_STOP(compact, r, end) 0
#endif

/* An all-zero row's product flags taken as +0 without looking at the signs. */
#if defined(DR_MUTANT_ZERO_ROW_SIGNS)     /* an all-zero row's products are taken as +0 */
#define DR_SEAM_ZERO_ROW_AS_POSITIVE 1
#else
#define DR_SEAM_ZERO_ROW_AS_POSITIVE 0
#endif

/* The direct path's shift of V below the accumulator's 2^-320. */
#if defined(DR_MUTANT_WIDE_SHIFT)         /* one bit short: the value doubles */
#define DR_SEAM_WIDE_SHIFT(shift) ((shift) - 1)
#else
#define DR_SEAM_WIDE_SHIFT(shift) (shift)
#endif

/* ---- cpu/cpu_gemm_element.c -------------------------------------------------- */

/* The sticky bit of the bits below the 64-bit window. */
#if defined(DR_MUTANT_WIDE_STICKY)        /* the bits below the window are dropped */
#define DR_SEAM_WIDE_STICKY(sticky) 0
#else
#define DR_SEAM_WIDE_STICKY(sticky) (sticky)
#endif

/* The certificate that every value within B of V rounds up. */
#if defined(DR_MUTANT_CERT_MIDPOINT)      /* the midpoint may lie within B */
#define DR_SEAM_ABOVE_MIDPOINT(rem, half, b) ((rem) + (b) > (half))
#else
#define DR_SEAM_ABOVE_MIDPOINT(rem, half, b) ((rem) > (half) + (b))
#endif

/* lo . lo's bound B (statement). */
#if defined(DR_MUTANT_LL_IGNORED)         /* lo . lo taken as zero */
#define DR_SEAM_LL_BOUND(B) ((B) = 0)
#else
#define DR_SEAM_LL_BOUND(B) ((void)0)
#endif

/* ---- cpu/cpu_gemm_crt.c, cpu_gemm_slice.c ------------------------------------ */

/* The moduli the bound needs. */
#if defined(DR_MUTANT_CRT_FEW_MODULI)     /* one modulus too few */
#define DR_SEAM_CRT_MODULI(n) ((n) - 1)
#else
#define DR_SEAM_CRT_MODULI(n) (n)
#endif

/* Modulus t's CRT coefficient x (mod m), of n moduli. */
#if defined(DR_MUTANT_CRT_COEFF)          /* the last one wrong */
#define DR_SEAM_CRT_COEFF(x, m, t, n) ((t) == (n) - 1 ? (x) % (m) + 1 : (x))
#else
#define DR_SEAM_CRT_COEFF(x, m, t, n) (x)
#endif

/* A vector's top bit counts in its width on the grid (1: it does). */
#if defined(DR_MUTANT_CRT_BITS_SHORT)     /* a bit short */
#define DR_SEAM_CRT_TOP_BIT 0
#else
#define DR_SEAM_CRT_TOP_BIT 1
#endif

/* ---- cpu/cpu_gemm_vnni.c ----------------------------------------------------- */

/* The VNNI kernel's groups of 4 k. */
#if defined(DR_MUTANT_CRT_KTAIL)          /* the last k < 4 dropped */
#define DR_SEAM_K_GROUPS(K) ((K) / 4)
#else
#define DR_SEAM_K_GROUPS(K) (((K) + 3) / 4)
#endif

/* The lanes with bits below the grid (or NaN). */
#if defined(DR_MUTANT_CRT_NO_REM)         /* bits below the grid go unnoticed */
#define DR_SEAM_BELOW_GRID(mask) 0
#else
#define DR_SEAM_BELOW_GRID(mask) (mask)
#endif

/* Modulus q's residues are centred (symmetric) for B. */
#if defined(DR_MUTANT_CRT_RESIDUE)        /* B's residues not centred for moduli 2.. */
#define DR_SEAM_RESIDUE_CENTRED(sym, q) ((sym) && (q) == 0)
#else
#define DR_SEAM_RESIDUE_CENTRED(sym, q) (sym)
#endif

/* The IFMA reconstruction's high half of y' Qa added into D1. */
#if defined(DR_MUTANT_CRT_IFMA_HI)        /* the high half dropped */
#define DR_SEAM_IFMA_HI(with_hi, without) (without)
#else
#define DR_SEAM_IFMA_HI(with_hi, without) (with_hi)
#endif

/* ---- cpu/cpu_gemm_round.c ---------------------------------------------------- */

/* The lowest bias exponent (relative to V's unit) taken as a vector. */
#if defined(DR_MUTANT_ROUND_BIAS_LOW)     /* a bias one bit below V's unit */
#define DR_SEAM_BIAS_LOWEST(zero) _mm512_set1_epi64(-1)
#else
#define DR_SEAM_BIAS_LOWEST(zero) (zero)
#endif

/* A bias's high word: its bits shifted in, and those crossing from the low. */
#if defined(DR_MUTANT_ROUND_BIAS_HI)      /* the bits that cross into V's high word are lost */
#define DR_SEAM_BIAS_HIGH(shifted, crossing) (shifted)
#else
#define DR_SEAM_BIAS_HIGH(shifted, crossing) _mm512_or_si512((shifted), (crossing))
#endif

/* The lanes whose compact accumulator is empty (mask: those tested). */
#if defined(DR_MUTANT_CACC_ROW_FULL)      /* an accumulator holding a term is overwritten */
#define DR_SEAM_CACC_EMPTY(mask) ((__mmask8)0xff)
#else
#define DR_SEAM_CACC_EMPTY(mask) (mask)
#endif

/* A term's trailing zeros (statement). */
#if defined(DR_MUTANT_CACC_ROW_TZ)        /* a trailing zero left in W */
#define DR_SEAM_ROW_TZ(tz, zero) ((tz) = _mm512_max_epi64(_mm512_sub_epi64((tz), _mm512_set1_epi64(1)), (zero)))
#else
#define DR_SEAM_ROW_TZ(tz, zero) ((void)0)
#endif

/* ---- cpu/openmp_kernels.c ---------------------------------------------------- */

/* A ReLU unit is active. */
#if defined(DR_MUTANT_RELU_AT_ZERO)       /* a unit with pre == 0 counts as active */
#define DR_SEAM_RELU_ACTIVE(pre) ((pre) >= 0.0f)
#else
#define DR_SEAM_RELU_ACTIVE(pre) ((pre) > 0.0f)
#endif

/* The bias gradient summed along the wrong axis (row j of dz, not column
 * j): 1 when the seam did the sum (exact, then float row r). */
#if defined(DR_MUTANT_BIAS_GRAD_AXIS)
static inline int dr_seam_bias_rows(dr_acc *gb, const float *dz, uint32_t n, uint32_t out)
{
    for (uint32_t j = 0; j < out && j < n; j++) dr_acc_add_sum(&gb[j], dz + (size_t)j * out, out);
    return 1;
}
static inline int dr_seam_bias_row_f32(float *gb, const float *row, uint32_t r, uint32_t out)
{
    if (r < out)
        for (uint32_t j = 0; j < out; j++) gb[r] = gb[r] + row[j];
    return 1;
}
#define DR_SEAM_BIAS_GRAD_BY_ROWS(gb, dz, n, out) dr_seam_bias_rows((gb), (dz), (n), (out))
#define DR_SEAM_BIAS_ROW_F32_BY_ROWS(gb, row, r, out) dr_seam_bias_row_f32((gb), (row), (r), (out))
#else
#define DR_SEAM_BIAS_GRAD_BY_ROWS(gb, dz, n, out) 0
#define DR_SEAM_BIAS_ROW_F32_BY_ROWS(gb, row, r, out) 0
#endif

/* ---- mpi/mpi_world.c --------------------------------------------------------- */

/* Under --enable-recovery, a failing rank ends its launcher (cond: it may). */
#if defined(DR_MUTANT_MPI_RECOVERY_EXIT_ZERO)   /* the old way, MPI_Abort alone (mpirun exits 0) */
#define DR_SEAM_END_LAUNCHER(cond) (0 && (cond))
#else
#define DR_SEAM_END_LAUNCHER(cond) (cond)
#endif

/* ---- opencl/opencl_program.c ---------------------------------------------------- */

/* The OpenCL program's build options for a planted kernel fault (the
 * kernels' seams in devices/opencl/cl/kernels.cl read the names it defines). */
#if defined(DR_MUTANT_CL_RELU_AT_ZERO)
#define DR_SEAM_CL_BUILD_OPTIONS " -DDR_MUTANT_RELU_AT_ZERO"
#elif defined(DR_MUTANT_CL_GEMM_EDGE)
#define DR_SEAM_CL_BUILD_OPTIONS " -DDR_MUTANT_GEMM_EDGE"
#elif defined(DR_MUTANT_CL_SKIP_LAST_GROUP)
#define DR_SEAM_CL_BUILD_OPTIONS " -DDR_MUTANT_SKIP_LAST_GROUP"
#elif defined(DR_MUTANT_CL_MAD_ENABLE)
/* a fast-math build, mad allowed and contraction left at OpenCL C's
 * default in the kernels (-cl-mad-enable alone changes no bit on PoCL's
 * x86 device: measured, docs/OPENCL.md) */
#define DR_SEAM_CL_BUILD_OPTIONS " -cl-mad-enable -DDR_MUTANT_CONTRACT"
#else
#define DR_SEAM_CL_BUILD_OPTIONS ""
#endif

#endif
