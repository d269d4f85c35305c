/* distref core — the planted faults' seams, in one place.
 *
 * A library function reads as production code: where a planted fault can
 * change it, it reads a named seam, DR_SEAM_*, whose production body is
 * below, beside the faulty body a mutant build compiles in with
 * -DDR_MUTANT_<NAME> (tests/faults.tsv lists every fault, its harness and
 * the test or suite that must catch it; scripts/check_faults.sh checks the
 * list against these seams). No rule of a normal build defines a
 * DR_MUTANT_* name. Include it after the file's other headers (a faulty
 * body may use them). The core's other planted faults are sed patches of
 * copies (tests/faults.tsv's patch field): the sources carry none of them.
 */
#ifndef DISTREF_CORE_SEAMS_H
#define DISTREF_CORE_SEAMS_H

/* ---- run_log.c: the order of a commit's renames ----------------------------
 * production: metrics, event file, parts, checkpoint (the checkpoint last:
 * everything it stands for is in place before it). */
#if defined(DR_MUTANT_CKPT_FIRST)
/* the durability suite's mutant: the old order, the checkpoint renamed into
 * place before the metrics that lead up to it (and no event file) */
#define DR_SEAM_CKPT_BEFORE_METRICS 1
#define DR_SEAM_EVENTS_WITH_METRICS 0
#else
#define DR_SEAM_CKPT_BEFORE_METRICS 0
#define DR_SEAM_EVENTS_WITH_METRICS 1
#endif
#if defined(DR_MUTANT_PARTS_AFTER_CKPT)
/* scripts/test_durability.sh's mutant: the parts renamed after the
 * checkpoint again, a second commit */
#define DR_SEAM_CKPT_BEFORE_PARTS 1
#else
#define DR_SEAM_CKPT_BEFORE_PARTS 0
#endif
#define DR_SEAM_CKPT_LAST (!DR_SEAM_CKPT_BEFORE_METRICS && !DR_SEAM_CKPT_BEFORE_PARTS)

/* ---- form.c ------------------------------------------------------------- */

/* The compact form's merge of a sender's accumulator s into d (statement). */
#if defined(DR_MUTANT_CACC_MERGE_FLAG)   /* the sender's overflow flag is lost */
static inline void dr_seam_cacc_merge_drops_flag(dr_cacc *d, const dr_cacc *s)
{
    uint32_t had = d->flags & DR_CACC_F_OVERFLOW;
    dr_cacc_merge(d, s);
    d->flags = (d->flags & ~DR_CACC_F_OVERFLOW) | had;
}
#define DR_SEAM_CACC_MERGE(d, s) dr_seam_cacc_merge_drops_flag((d), (s))
#else
#define DR_SEAM_CACC_MERGE(d, s) dr_cacc_merge((d), (s))
#endif

/* ---- tfevents.c --------------------------------------------------------- */

/* A segment's event file starts with a SessionLog START (1: it does). */
#if defined(DR_MUTANT_TFEVENTS_NO_START)
/* no START, so TensorBoard keeps an interrupted segment's events past its
 * checkpoint twice (test_tfevents) */
#define DR_SEAM_SESSION_START 0
#else
#define DR_SEAM_SESSION_START 1
#endif

/* ---- shards.c ----------------------------------------------------------- */

/* Whether worker w of W opens shard file i under FILE sharding (production:
 * file i is worker i mod W's, tf.data's shard(W, w) of the file list). */
#if defined(DR_MUTANT_SHARD_READ_ALL)
/* every worker reads every file and keeps its own: the same bits, W times
 * the bytes (tests/mpi_shards.sh's bytes check) */
#define DR_SEAM_SHARD_OPENS(i, W, w) ((void)(i), (void)(W), (void)(w), 1)
#elif defined(DR_MUTANT_SHARD_FILE_SHIFT)
/* file i read by worker (i + 1) mod W: a rank trains on examples it never read */
#define DR_SEAM_SHARD_OPENS(i, W, w) (dr_shard_file_worker((i) + 1, (W)) == (w))
#else
#define DR_SEAM_SHARD_OPENS(i, W, w) (dr_shard_file_worker((i), (W)) == (w))
#endif

#endif
