/* distref — elementwise float loops compiled for each vector width.
 *
 * DR_WIDE before a function definition compiles it twice, for AVX2 and
 * for the x86-64 baseline (SSE2), and the loader picks one by the CPU
 * (GCC's and clang's target_clones: an ifunc). A loop whose every lane
 * does the scalar code's IEEE operations (+ - * /, sqrt, conversions,
 * selects; nothing contracted under -ffp-contract=off, nothing
 * reassociated, no libm call) gives the same bits at either width; AVX2
 * does it in half the instructions.
 *
 * A DR_WIDE function holds no OpenMP region: the region's outlined body
 * would be compiled once, at the baseline's width. A team calls it once
 * per thread on the thread's share instead. -DDR_NO_WIDE (or another
 * architecture) leaves the baseline alone.
 */
#ifndef DISTREF_WIDE_H
#define DISTREF_WIDE_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(DR_NO_WIDE)
#define DR_WIDE __attribute__((target_clones("avx2", "default")))
#else
#define DR_WIDE
#endif

#endif
