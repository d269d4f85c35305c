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
 * Every fault of the engine's C code is here. The exceptions: the OpenCL
 * kernels' ten (cl_relu_at_zero, cl_gemm_edge, cl_skip_last_group,
 * cl_mad_enable, cl_mixed_double_round, cl_conv_grad_stride,
 * cl_pool_last_tie, cl_tile_contiguous, cl_mixed_conv_unrounded,
 * cl_mixed_fast_unrounded) keep #if seams in devices/opencl/cl/kernels.cl
 * (the fifth in cl/mixed.cl, the sixth, seventh and ninth in cl/graph.cl,
 * the tenth in both), OpenCL C that the OpenCL compiler builds at run time,
 * where this header is not seen: only their build options,
 * DR_SEAM_CL_BUILD_OPTIONS, are here, and they define the names the
 * kernels test. The exact rounding's two are in
 * include/distref/round_avx512.h, which core and engine share.
 *
 * Include it after the file's other headers (some faulty bodies use them).
 */
#ifndef DISTREF_DEVICES_SEAMS_H
#define DISTREF_DEVICES_SEAMS_H

/* ---- comm/comm_elem.c -------------------------------------------------------- */

/* Chunk c of n of a ring ends at *hi (lo: its start; statement on *hi). */
#if defined(DR_MUTANT_CHUNK_OFF_BY_ONE)   /* every chunk but the last ends one short: its last element never reduced */
#define DR_SEAM_CHUNK_END(lo, hi, c, n) ((c) + 1 < (n) && *(hi) > *(lo) ? (void)(*(hi))-- : (void)0)
#else
#define DR_SEAM_CHUNK_END(lo, hi, c, n) ((void)0)
#endif

/* ---- cpu/cpu_gemm.c ---------------------------------------------------------- */

/* Does a compact accumulator that the row kernel left to the scalar paths
 * start empty (beta 0: its memory holds anything)? */
#if defined(DR_MUTANT_FRESH_UNINIT)       /* no: it keeps the last step's sum */
#define DR_SEAM_FRESH_INIT(beta) ((void)(beta), 0)
#else
#define DR_SEAM_FRESH_INIT(beta) (!(beta))
#endif

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

/* ---- cpu/cpu_gemm_rem.c ------------------------------------------------------ */

/* Where the full accumulators' pass over B's remainders stops in a column
 * (end: past its last remainder). */
#if defined(DR_MUTANT_REM_PASS_LAST)      /* the pass drops each column's last remainder product */
#define DR_SEAM_REM_PASS_END(end) ((end) - ((end) > 0))
#else
#define DR_SEAM_REM_PASS_END(end) (end)
#endif

/* ---- cpu/cpu_gemm_cert.c ----------------------------------------------------- */

/* The margin a certified output's interval must keep from its rounding
 * interval's edges: the error bound e, inflated against the comparison's
 * own rounding. */
#if defined(DR_MUTANT_CERT_NO_BOUND)      /* no bound: DGEMM's sum taken as exact, a near-tie rounds wrong */
#define DR_SEAM_CERT_SLACK(e) ((void)(e), 0.0)
#else
#define DR_SEAM_CERT_SLACK(e) ((e) * (1.0 + 0x1p-40))
#endif

/* The product flags that decide the sign of a certified output whose row or
 * column is all zeros. */
#if defined(DR_MUTANT_CERT_ZERO_SIGN)     /* taken as +0 whatever the signs: -0 outputs come out +0 */
#define DR_SEAM_CERT_ZERO_FLAGS(f) ((f) | DR_ACC_F_NOT_NEG0)
#else
#define DR_SEAM_CERT_ZERO_FLAGS(f) (f)
#endif

/* The column of a transposed operand that widen's tile reads for its row
 * i0 + q. */
#if defined(DR_MUTANT_WIDEN_TILE_COL)     /* odd rows of a tile read their even neighbour's column */
#define DR_SEAM_WIDEN_TILE_COL(i0, q) ((i0) + ((q) & ~(size_t)1))
#else
#define DR_SEAM_WIDEN_TILE_COL(i0, q) ((i0) + (q))
#endif

/* The step between a row's (a column's) consecutive k in the compensated
 * second sum: 1, or the other dimension where the widened operand keeps a
 * transposed layout. */
#if defined(DR_MUTANT_REFINE_STEP)        /* every step 1: a transposed layout's sum of other elements */
#define DR_SEAM_REFINE_STEP(step) ((void)(step), (size_t)1)
#else
#define DR_SEAM_REFINE_STEP(step) (step)
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

/* ---- cpu/openmp_apply.c ------------------------------------------------------ */

/* The units of n items that a team's threads share (dr_omp_cut). */
#if defined(DR_MUTANT_CUT_DROPS_TAIL)      /* rounded down: the tail short of a whole unit is nobody's */
#define DR_SEAM_CUT_UNITS(n, unit) ((n) / (unit))
#else
#define DR_SEAM_CUT_UNITS(n, unit) (((n) + (unit) - 1) / (unit))
#endif

/* ---- cpu/openmp_backend.c ---------------------------------------------------- */

/* The regularization's share of a replica, x: its gradient g (or, in fast
 * numerics, its scale sr) and its loss, all over R = mult (statement on x). */
#if defined(DR_MUTANT_REG_NOT_SCALED)     /* not scaled by 1/R */
#define DR_SEAM_REG_SCALE(x, mult) ((x) = (x) * (float)(mult))
#elif defined(DR_MUTANT_REG_SCALED_TWICE) /* scaled by 1/R twice */
#define DR_SEAM_REG_SCALE(x, mult) ((x) = (x) / (float)(mult))
#else
#define DR_SEAM_REG_SCALE(x, mult) ((void)0)
#endif

/* The L2 term is part of the gradient share (1); under the fault it is
 * left out there and applied as weight decay after the optimizer step
 * (DR_SEAM_L2_AS_DECAY, in apply). */
#if defined(DR_MUTANT_MOMENTUM_BEFORE_L2)
#define DR_SEAM_L2_IN_GRADIENT 0
static inline void dr_seam_l2_as_decay(const dr_backend *b, const dr_optimizer *o, float *w)
{
    if (b->m.l2 != 0.0f) {
        const float decay = o->lr * (2.0f * b->m.l2);
        for (uint32_t l = 0; l < b->m.nlayers; l++) {
            size_t k0 = b->koff[l], nk = (size_t)b->m.layer[l].in * b->m.layer[l].out;
            for (size_t p = k0; p < k0 + nk; p++) w[p] = w[p] - decay * w[p];
        }
    }
}
#define DR_SEAM_L2_AS_DECAY(b, o, w) dr_seam_l2_as_decay((b), (o), (w))
#else
#define DR_SEAM_L2_IN_GRADIENT 1
#define DR_SEAM_L2_AS_DECAY(b, o, w) ((void)0)
#endif

/* A replica's exact share a, once complete (statement; the _COMPACT one on
 * a dr_cacc). d: its denominator, coef * mult. */
#if defined(DR_MUTANT_ROUND_PARTIAL)      /* rounded to a float before the reduction */
static inline void dr_seam_round_partial(dr_acc *a, uint32_t d)
{
    float v = dr_acc_round_div(a, d);
    dr_acc_init(a);
    dr_acc_add_prod(a, v, (float)d);
}
static inline void dr_seam_round_partial_compact(dr_cacc *a, uint32_t d)
{
    float v = dr_cacc_round_div(a, d);
    dr_cacc_init(a);
    dr_cacc_add_prod(a, v, (float)d);
}
#define DR_SEAM_SHARE_DONE(a, d) dr_seam_round_partial((a), (d))
#define DR_SEAM_SHARE_DONE_COMPACT(a, d) dr_seam_round_partial_compact((a), (d))
#define DR_SEAM_SHARE_DONE_ACTS 1   /* share_exact must visit every accumulator */
#else
#define DR_SEAM_SHARE_DONE(a, d) ((void)0)
#define DR_SEAM_SHARE_DONE_COMPACT(a, d) ((void)0)
#define DR_SEAM_SHARE_DONE_ACTS 0
#endif

/* ---- cpu/openmp_kernels.c ---------------------------------------------------- */

/* The power of two of the share's mult that a weight-gradient GEMM folds
 * into its compact accumulators (loss_grad; share then leaves it out). */
#if defined(DR_MUTANT_FOLD_LOST)          /* the GEMM leaves it out too: the kernels' sums short of x 2^k */
#define DR_SEAM_FOLD_GEMM(e2) ((void)(e2), 0)
#else
#define DR_SEAM_FOLD_GEMM(e2) (e2)
#endif

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

/* ---- mpi/comm_mpi.c ----------------------------------------------------------- */

/* A pack's chunk [lo, hi) as it goes on the wire (statement on hi). */
#if defined(DR_MUTANT_MPI_PACK_OFF_BY_ONE)   /* each pack's chunk ends one element early */
#define DR_SEAM_PACK_END(lo, hi) ((hi) - (lo) > 1 ? (void)(hi)-- : (void)0)
#else
#define DR_SEAM_PACK_END(lo, hi) ((void)0)
#endif

/* k partials of form f that arrived from the previous rank, in tmp, before
 * they are merged (merge: they will be; statement). */
#if defined(DR_MUTANT_MPI_ROUNDED)   /* each rounded to a float first */
static inline void dr_seam_round_partials(const dr_form *f, void *tmp, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        if (f->id == DR_FORM_ACC) {
            dr_acc *t = (dr_acc *)tmp + i;
            float r = dr_acc_round(t);
            dr_acc_init(t);
            dr_acc_add(t, r);
        } else {
            dr_cacc *t = (dr_cacc *)tmp + i;
            float r = dr_cacc_round_div(t, 1);
            dr_cacc_init(t);
            dr_cacc_add(t, r);
        }
    }
}
#define DR_SEAM_PARTIALS_IN(merge, f, tmp, k) ((merge) ? dr_seam_round_partials((f), (tmp), (k)) : (void)0)
#else
#define DR_SEAM_PARTIALS_IN(merge, f, tmp, k) ((void)0)
#endif

/* ---- mpi/comm_mpi_f32x.c, comm_mpi_native.c --------------------------------- */

/* The bits of an int64 digit of the exact float all-reduce. */
#if defined(DR_MUTANT_MPI_F32X_HEADROOM)   /* one headroom bit short: a digit sum can wrap */
#define DR_SEAM_F32X_DIGIT_BITS(bits) ((bits) + 1)
#else
#define DR_SEAM_F32X_DIGIT_BITS(bits) (bits)
#endif

/* A block of two terms is all finite (IEEE addition sums it exactly). */
#if defined(DR_MUTANT_MPI_F32X_SPECIAL)    /* inf and NaN added by the IEEE addition too */
#define DR_SEAM_F32X_FINITE(finite) (1 || (finite))
#else
#define DR_SEAM_F32X_FINITE(finite) (finite)
#endif

/* The most bits a compact partial may span to travel as a double-double
 * (comm_mpi_gradx.c: beyond it, an escape). */
#if defined(DR_MUTANT_MPI_GX_TRUNCATE)    /* up to 114 bits sent as a pair: the lowest bits rounded away */
#define DR_SEAM_GX_FITS(bits) ((bits) + 8)
#else
#define DR_SEAM_GX_FITS(bits) (bits)
#endif

/* The second term (lo) of a partial's double-double. */
#if defined(DR_MUTANT_MPI_GX_DROP_LO)     /* the expansion drops its last term */
#define DR_SEAM_GX_LO(lo) (0.0 * (lo))
#else
#define DR_SEAM_GX_LO(lo) (lo)
#endif

/* The first of a dr_dd_parts' escapes at an element or later, found by
 * binary search in its ascending esc_at (comm_mpi_gradx.c: gx_esc_from,
 * where each chunk's escapes start). */
#if defined(DR_MUTANT_MPI_GX_ESC_EARLY)   /* one entry early: a chunk takes its neighbour's last escape */
#define DR_SEAM_GX_ESC_FROM(j) ((j) > 0 ? (j) - 1 : (j))
#else
#define DR_SEAM_GX_ESC_FROM(j) (j)
#endif

/* The sources the all-zero shortcut of the exact gradient all-reduce checks
 * (comm_mpi_gradx.c: gx_zero). */
#if defined(DR_MUTANT_MPI_GX_ZERO_FIRST)  /* only the first source: another's nonzero partial rounded to 0 */
#define DR_SEAM_GX_ZERO_SOURCES(m) ((void)(m), 1u)
#else
#define DR_SEAM_GX_ZERO_SOURCES(m) (m)
#endif

/* An escape counted by the exact gradient all-reduce's owner in a peer's
 * pairs (comm_mpi_gradx.c: gx_count_esc, per vector width). */
#if defined(DR_MUTANT_MPI_GX_COUNT_NONE)  /* no escape counted: a peer's escaped accumulator taken for corrupt */
#define DR_SEAM_GX_COUNT_ESC(nan) ((void)(nan), 0)
#else
#define DR_SEAM_GX_COUNT_ESC(nan) (nan)
#endif

/* The bits of an int32 digit of the native compact all-reduce. */
#if defined(DR_MUTANT_MPI_NATIVE_HEADROOM) /* one headroom bit short: a digit sum can wrap */
#define DR_SEAM_NATIVE_DIGIT_BITS(bits) ((bits) + 1)
#else
#define DR_SEAM_NATIVE_DIGIT_BITS(bits) (bits)
#endif

/* ---- mpi/comm_mpi_wait.c ------------------------------------------------------- */

/* A wait's own process did not run for a while (stopped): not its peers' fault. */
#if defined(DR_MUTANT_CM_NO_STALL)   /* a resumed rank counts its own pause against its peers */
#define DR_SEAM_CM_STALLED(stalled) (0 && (stalled))
#else
#define DR_SEAM_CM_STALLED(stalled) (stalled)
#endif

/* ---- mpi/mpi_last_words.c ---------------------------------------------------- */

/* The step a rank's last words name: the one under way. */
#if defined(DR_MUTANT_LW_STALE_STEP)   /* the record keeps the first step it saw: stale after it */
#define DR_SEAM_LW_STEP(old, step) ((old) ? (old) : (step))
#else
#define DR_SEAM_LW_STEP(old, step) ((void)(old), (step))
#endif

/* ---- mpi/mpi_world.c --------------------------------------------------------- */

/* Under --enable-recovery, a failing rank ends its launcher (cond: it may). */
#if defined(DR_MUTANT_MPI_RECOVERY_EXIT_ZERO)   /* the old way, MPI_Abort alone (mpirun exits 0) */
#define DR_SEAM_END_LAUNCHER(cond) (0 && (cond))
#else
#define DR_SEAM_END_LAUNCHER(cond) (cond)
#endif

/* dr_mpi_gather0: where rank w's bytes go, as the k-th of the ranks (predict's lines in rank order). */
#if defined(DR_MUTANT_MPI_EVAL_GATHER_REVERSED)   /* the ranks' bytes concatenated last rank first */
#define DR_SEAM_GATHER_RANK(k, size) ((size) - 1 - (k))
#else
#define DR_SEAM_GATHER_RANK(k, size) (k)
#endif

/* ---- opencl/opencl_graph.c -------------------------------------------------------- */

/* The OpenCL inference BatchNormalization (evaluate, predict): the offsets
 * in params of the moving mean (the layer's state st, oc floats) and of the
 * moving variance after it. */
#if defined(DR_MUTANT_CL_BN_INFER_SWAPPED)   /* the halves swapped: the variances taken as the means */
#define DR_SEAM_CL_BN_INFER_STATE(st, oc, mean, var) ((mean) = (st) + (oc), (var) = (st))
#else
#define DR_SEAM_CL_BN_INFER_STATE(st, oc, mean, var) ((mean) = (st), (var) = (st) + (oc))
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
#elif defined(DR_MUTANT_CL_MIXED_DOUBLE_ROUND)
/* the mixed kernels (cl/mixed.cl) round each exact result to float32 first,
 * then to the compute dtype: two roundings, not one */
#define DR_SEAM_CL_BUILD_OPTIONS " -DDR_MUTANT_MIXED_DOUBLE_ROUND"
#elif defined(DR_MUTANT_CL_CONV_GRAD_STRIDE)
/* a strided conv's input gradient (cl/graph.cl's conv_dx) gathers with the
 * stride one short: the OpenCL twin of engine_conv_grad_stride */
#define DR_SEAM_CL_BUILD_OPTIONS " -DDR_MUTANT_CONV_GRAD_STRIDE"
#elif defined(DR_MUTANT_CL_POOL_LAST_TIE)
/* 2x2 max pooling (cl/graph.cl) sends a tie's gradient to the window's
 * last maximum: the OpenCL twin of engine_pool_last_tie */
#define DR_SEAM_CL_BUILD_OPTIONS " -DDR_MUTANT_POOL_LAST_TIE"
#elif defined(DR_MUTANT_CL_MIXED_CONV_UNROUNDED)
/* the mixed step's Conv2D output (cl/graph.cl's conv_fwd: RN_c(conv) + b)
 * left float32, not rounded to the compute dtype */
#define DR_SEAM_CL_BUILD_OPTIONS " -DDR_MUTANT_MIXED_CONV_UNROUNDED"
#elif defined(DR_MUTANT_CL_MIXED_FAST_UNROUNDED)
/* the fast mixed step's float32 conv and GEMM results (cl/graph.cl's
 * conv_fwd, cl/mixed.cl's mixed_gemm_fast) left float32, not rounded to
 * the compute dtype: the OpenCL twin of engine_mixed_fast_unrounded */
#define DR_SEAM_CL_BUILD_OPTIONS " -DDR_MUTANT_MIXED_FAST_UNROUNDED"
#elif defined(DR_MUTANT_CL_TILE_CONTIGUOUS)
/* the tpu tile kernels (kernels.cl's l0_*) read a tile's pixels as one run
 * from its first: right for tiles of whole rows (2,1), wrong for a 2,2 or
 * 1,2 tile, whose kernel rows are every 28th run of 14 */
#define DR_SEAM_CL_BUILD_OPTIONS " -DDR_MUTANT_TILE_CONTIGUOUS"
#else
#define DR_SEAM_CL_BUILD_OPTIONS ""
#endif

/* Whether a partitioned core's sums in the OpenCL graph ops (a conv's kernel
 * and bias gradients, BatchNormalization's statistics and gradient sums)
 * run over its tile (t) of a map: its kernels compute the whole map, and
 * outside the tile it holds values no sum may read. */
#if defined(DR_MUTANT_CL_SUMS_WHOLE_MAP)   /* over the whole map: the values outside the tile counted */
#define DR_SEAM_CL_TILE_SUMS(t) ((void)(t), false)
#else
#define DR_SEAM_CL_TILE_SUMS(t) (t)
#endif

/* The rows of a rectangle the OpenCL backend copies between a replica's
 * cores' maps on the device (opencl_halo.c: halos, gather and scatter). */
#if defined(DR_MUTANT_CL_HALO_RECT_ROW_SHORT)   /* one row short (of two or more): stale rows read across the cut */
#define DR_SEAM_CL_HALO_RECT_ROWS(rows) ((size_t)(rows) > 1 ? (size_t)(rows) - 1 : (size_t)(rows))
#else
#define DR_SEAM_CL_HALO_RECT_ROWS(rows) ((size_t)(rows))
#endif

/* The last row (exclusive) of a conv launch's rectangle on the OpenCL
 * backend (opencl_graph.c's launch_rect: a core's tile before the tiles
 * end; the whole map is not mutated). */
#if defined(DR_MUTANT_CL_TILE_LAUNCH_ROW_SHORT)   /* one row short: the tile's last row keeps stale values */
#define DR_SEAM_CL_TILE_LAUNCH_ROWS(r0, r1) ((r1) > (r0) + 1 ? (r1) - 1 : (r1))
#else
#define DR_SEAM_CL_TILE_LAUNCH_ROWS(r0, r1) (r1)
#endif

/* --dropout_masks on the OpenCL backend: the global batch's row of the
 * replica's row 0 that its masks are read from (rt->row0). */
#if defined(DR_MUTANT_CL_DROPOUT_MASK_ROW0)   /* every replica reads the file's first rows */
#define DR_SEAM_CL_DROPOUT_MASK_ROW0(row0) ((void)(row0), 0u)
#else
#define DR_SEAM_CL_DROPOUT_MASK_ROW0(row0) (row0)
#endif

/* The layer kinds whose kernel --l2 regularizes in the OpenCL share: Keras's
 * kernel_regularizer, Dense and Conv2D (not BatchNormalization's gamma, which
 * the layout keeps where a kernel would be). */
#if defined(DR_MUTANT_CL_L2_ON_GAMMA)   /* gamma regularized too */
#define DR_SEAM_CL_L2_KIND(k) ((k) == DR_LAYER_DENSE || (k) == DR_LAYER_CONV2D || (k) == DR_LAYER_BATCH_NORM)
#else
#define DR_SEAM_CL_L2_KIND(k) ((k) == DR_LAYER_DENSE || (k) == DR_LAYER_CONV2D)
#endif

/* The learning-rate schedule reads the step being applied (iterations =
 * step - 1, distref/schedule.h); under the fault it reads one step ahead,
 * as if iterations were read after the update (openmp and opencl apply). */
#if defined(DR_MUTANT_SCHEDULE_OFF_BY_ONE)
#define DR_SEAM_SCHEDULE_STEP(step) ((step) + 1)
#else
#define DR_SEAM_SCHEDULE_STEP(step) (step)
#endif

/* Clipping happens once, on the aggregated gradient (apply), unless
 * --clip_semantics=tensorflow asks for each replica's share to be clipped
 * before the all-reduce (Keras 3's way); under the fault the default
 * (aggregated) clip is done per replica as well. */
#if defined(DR_MUTANT_CLIP_BEFORE_AGGREGATION)
#define DR_SEAM_CLIP_PER_REPLICA(clip) dr_engine_clip_on(clip)
#else
#define DR_SEAM_CLIP_PER_REPLICA(clip) ((clip)->per_replica)
#endif

/* Whether applied_grad (--trajectory's gradient/) clips the rounded total
 * as apply does; under the fault it hands back the gradient before the
 * clipping. */
#if defined(DR_MUTANT_TRAJ_GRAD_UNCLIPPED)
#define DR_SEAM_RECORD_CLIPPED(clip) ((void)(clip), false)
#else
#define DR_SEAM_RECORD_CLIPPED(clip) (clip)
#endif


/* ---- cpu/openmp_graph.c, cpu/openmp_conv.c: models beyond Dense ---------------- */

/* Dropout's key of row r: its global example id (issue 31). */
#if defined(DR_MUTANT_ENGINE_DROPOUT_BY_ROW)   /* keyed by the row within the replica: masks depend on R */
#define DR_SEAM_DROPOUT_KEY(id, row) (row)
#else
#define DR_SEAM_DROPOUT_KEY(id, row) (id)
#endif

/* Inference's BatchNormalization (evaluate, predict): the layer's state,
 * the moving mean (oc floats) then the moving variance; mean and var are
 * where each is read. */
#if defined(DR_MUTANT_ENGINE_BN_INFER_SWAPPED)   /* the state's halves swapped: the variances taken as the means */
#define DR_SEAM_BN_INFER_STATE(st, oc, mean, var) ((mean) = (st) + (oc), (var) = (st))
#else
#define DR_SEAM_BN_INFER_STATE(st, oc, mean, var) ((mean) = (st), (var) = (st) + (oc))
#endif

/* --dropout_masks: the row, within the replica's slice of the file's global
 * batch (from rt->row0), that row r of the replica's n reads: r itself. */
#if defined(DR_MUTANT_ENGINE_DROPOUT_MASK_ROW)   /* the rows read in reverse: another example's mask */
#define DR_SEAM_DROPOUT_MASK_ROW(r, n) ((n) - 1 - (r))
#else
#define DR_SEAM_DROPOUT_MASK_ROW(r, n) ((void)(n), (r))
#endif

/* The padding a conv's input gradient gathers with (top, left). */
#if defined(DR_MUTANT_ENGINE_CONV_GRAD_PAD)    /* the backward gathers as if the padding were one less */
#define DR_SEAM_CONV_GRAD_PAD(p) ((p) > 0 ? (p) - 1 : (p))
#else
#define DR_SEAM_CONV_GRAD_PAD(p) (p)
#endif

/* The stride a conv's input gradient gathers with. */
#if defined(DR_MUTANT_ENGINE_CONV_GRAD_STRIDE) /* a strided conv's backward gathers with the stride one short */
#define DR_SEAM_CONV_GRAD_STRIDE(s) ((s) > 1 ? (s) - 1 : (s))
#else
#define DR_SEAM_CONV_GRAD_STRIDE(s) (s)
#endif

/* ---- cpu/openmp_graph.c, openmp_conv.c: fast sums on the team ------------------- */

/* How many partials (runs of rows) a fast conv's bias gradient and a fast
 * BN's sums take on the team: one an example, whatever the team's size. */
#if defined(DR_MUTANT_ENGINE_PARTS_BY_THREADS) /* one partial a thread: the float sum's order follows --threads */
#define DR_SEAM_SUM_PARTS(n) ((void)(n), (size_t)omp_get_max_threads())
#else
#define DR_SEAM_SUM_PARTS(n) ((size_t)(n))
#endif

/* Whether candidate x beats the window's best so far in 2x2 max pooling:
 * the first maximum in row-major order wins a tie, as TensorFlow's
 * gradient routes it (docs/MODELS.md). */
#if defined(DR_MUTANT_ENGINE_POOL_LAST_TIE)    /* the last maximum wins a tie */
#define DR_SEAM_POOL_BEATS(x, best) ((x) >= (best))
#else
#define DR_SEAM_POOL_BEATS(x, best) ((x) > (best))
#endif

/* ---- cpu/openmp_mixed.c, opencl/opencl_mixed.c: the fast mixed kernels -------- */

/* ---- devices/cpu/openmp_graph_mixed.c: the mixed step's GEMM ----------------- */

/* Whether a Conv2D's bias is added after the convolution's own rounding to
 * the compute dtype (TensorFlow's Conv2D then BiasAdd). */
#if defined(DR_MUTANT_ENGINE_MIXED_CONV_ONE_ROUNDING)   /* conv + bias rounded once: one rounding short */
#define DR_SEAM_MIXED_BIAS_AFTER(after) ((void)(after), false)
#else
#define DR_SEAM_MIXED_BIAS_AFTER(after) (after)
#endif

/* devices/cpu/openmp_conv.c: a training BatchNormalization's output in the
 * mixed step: its float32 result rounded to the compute dtype (Keras 3
 * computes a float16/bfloat16 input's BN in float32, then casts back). */
#if defined(DR_MUTANT_ENGINE_MIXED_BN_FLOAT32)   /* left float32: the next layer reads unrounded values */
#define DR_SEAM_MIXED_BN_OUT(rounded, f32) ((void)(rounded), (f32))
#else
#define DR_SEAM_MIXED_BN_OUT(rounded, f32) ((void)(f32), (rounded))
#endif

/* The bias a fast mixed forward GEMM adds to its float32 result (openmp's
 * host array, opencl's cl_mem: a null pointer of either type). The fault,
 * none (the fast forward drops the layer's bias), is planted per backend:
 * mixed_fast_no_bias in openmp_mixed.c, cl_mixed_fast_no_bias in
 * opencl_mixed.c. */
#if defined(DR_MUTANT_MIXED_FAST_NO_BIAS) || defined(DR_MUTANT_CL_MIXED_FAST_NO_BIAS)
#define DR_SEAM_MIXED_FAST_BIAS(bias) ((void)(bias), (void *)0)
#else
#define DR_SEAM_MIXED_FAST_BIAS(bias) (bias)
#endif

/* the fast mixed step's GEMM output (a layer's
 * float32 GEMM result, its bias added) rounded to the compute dtype, as the
 * exact step rounds its exact value. */
#if defined(DR_MUTANT_ENGINE_MIXED_FAST_UNROUNDED)   /* left float32: every layer's output one rounding short */
#define DR_SEAM_MIXED_FAST_ROUND(rounded, f32) ((void)(rounded), (f32))
#else
#define DR_SEAM_MIXED_FAST_ROUND(rounded, f32) ((void)(f32), (rounded))
#endif

/* ---- cpu/openmp_spatial.c: spatial partitioning's halo exchange ---------------- */

/* The last row (exclusive) a core receives from the core below: what its
 * windows read (nd1), beyond its tile's last row (own1). */
#if defined(DR_MUTANT_ENGINE_HALO_ROW_SHORT)   /* one row short: a window across the cut reads a hole */
#define DR_SEAM_HALO_BELOW(nd1, own1) ((nd1) > (own1) ? (nd1) - 1 : (nd1))
#else
#define DR_SEAM_HALO_BELOW(nd1, own1) (nd1)
#endif

/* The buffer of map k a core's halo exchange reads and writes: the map its
 * layers read (read; the mixed step's input map is the tile rounded to c),
 * f32 the core's float32 input (map 0's container). Two callers, a fault
 * each: openmp_spatial.c (engine_mixed_halo_input_f32) and opencl_halo.c
 * (cl_mixed_halo_input_f32), each mutant rebuilding its own file. */
#if defined(DR_MUTANT_ENGINE_MIXED_HALO_INPUT_F32) || defined(DR_MUTANT_CL_MIXED_HALO_INPUT_F32)
/* map 0's halo moved between the float32 inputs: the rounded map the mixed conv reads keeps holes */
#define DR_SEAM_MIXED_HALO_INPUT(read, f32, k) ((k) ? (read) : (f32))
#else
#define DR_SEAM_MIXED_HALO_INPUT(read, f32, k) ((void)(f32), (read))
#endif

#endif
