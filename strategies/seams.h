/* distref strategies — the planted faults' seams, in one place.
 *
 * A library function reads as production code: where a planted fault can
 * change it, it reads a named seam, DR_SEAM_*, whose production body is
 * below, beside the faulty body a mutant build compiles in with
 * -DDR_MUTANT_<NAME> (tests/faults.tsv lists every fault, its harness and
 * the test or suite that must catch it; scripts/check_faults.sh checks the
 * list against these seams). No rule of a normal build defines a
 * DR_MUTANT_* name. Statement seams are ((void)0) in production.
 *
 * Not here yet (issue 28: the step is being rewritten): the #if seams of
 * strategies/step.c.
 */
#ifndef DISTREF_STRATEGIES_SEAMS_H
#define DISTREF_STRATEGIES_SEAMS_H

/* ---- engine_tpu.c --------------------------------------------------------------- */

/* The examples of a padded replica batch of `rows` rows (statement on n). */
#if defined(DR_MUTANT_PAD_UNMASKED)   /* the padding counted as examples */
#define DR_SEAM_PAD_EXAMPLES(n, rows) ((n) = (rows))
#else
#define DR_SEAM_PAD_EXAMPLES(n, rows) ((void)0)
#endif

/* ---- ps_mpi.c ------------------------------------------------------------ */

/* The coordinator skips landed update ev (it is logged, never applied). */
#if defined(DR_MUTANT_MPI_PS_DROP_UPDATE)   /* drops the third landed update */
#define DR_SEAM_PS_SKIP_LANDED(ev) ((ev)->version == 3)
#else
#define DR_SEAM_PS_SKIP_LANDED(ev) 0
#endif

/* A resumed free run records the order it re-walks (record: it records). */
#if defined(DR_MUTANT_PS_FREE_RESUME_UNRECORDED)   /* the re-walked order left out */
#define DR_SEAM_PS_RECORD_REWALK(record) (0 && (record))
#else
#define DR_SEAM_PS_RECORD_REWALK(record) (record)
#endif

/* The batches a resumed worker skips (statement on skip). */
#if defined(DR_MUTANT_PS_RESUME_NO_SKIP)   /* starts its data over instead */
#define DR_SEAM_PS_RESUME_SKIP(skip) ((skip) = 0)
#else
#define DR_SEAM_PS_RESUME_SKIP(skip) ((void)0)
#endif

/* ---- ps_mpi_faults.c ----------------------------------------------------- */

/* A dead worker's closure, taken back into the queue (statement on the
 * schedule s). */
#if defined(DR_MUTANT_PS_DEAD_CLOSURE_DROPPED)   /* dropped instead of re-run */
#define DR_SEAM_PS_DEAD_CLOSURE(s) ((s)->qhead = ((s)->qhead + 1) % (s)->qcap, (s)->qlen--)
#else
#define DR_SEAM_PS_DEAD_CLOSURE(s) ((void)0)
#endif

/* A recovered worker starts its data over (rebuild: 1, statement). */
#if defined(DR_MUTANT_PS_RECOVER_NO_REBUILD)   /* keeps its iterator instead */
#define DR_SEAM_PS_RECOVER_REBUILD(rebuild) ((rebuild) = 0)
#else
#define DR_SEAM_PS_RECOVER_REBUILD(rebuild) ((void)0)
#endif

#endif
