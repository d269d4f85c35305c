/* distref core — TensorBoard event files: scalars people already read.
 *
 * A training run writes model_dir/events.out.tfevents.<secs>.<usecs>.distref.<pid>
 * (the Unix time it started, fixed width, so names sort in run order), one
 * file per run segment: a resumed run starts a new one, as TensorFlow's
 * summary writer does, and TensorBoard reads them in name order. The file is
 * TensorFlow's TFRecord framing of `Event` protocol buffers, encoded by hand:
 *
 *   record   uint64 length (little-endian), uint32 masked CRC32C of the
 *            8 length bytes, the data, uint32 masked CRC32C of the data;
 *            masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8
 *   Event    1: wall_time (double)   2: step (int64)
 *            3: file_version (string, "brain.Event:2" in the first record)
 *            5: summary (Summary)    7: session_log (SessionLog)
 *   SessionLog 1: status (enum, START = 1)
 *   Summary  1: value (repeated Value)
 *   Value    1: tag (string)         2: simple_value (float)
 *
 * (tensorflow/core/util/event.proto and summary.proto; the framing is
 * tensorflow/core/lib/io/record_writer.cc.) The scalars per step are loss,
 * accuracy (classification experiments), learning_rate and examples_per_sec.
 *
 * The file is kept in memory and written atomically (dr_write_atomic) with
 * each checkpoint, before the checkpoint's commit, so it never holds a torn
 * record. A kill before the commit leaves events of steps the checkpoint
 * does not cover; the resume redoes them, and its file begins with a
 * SessionLog START at the first redone step, on which TensorBoard drops
 * every earlier event from that step on (its purge of orphaned data, as for
 * a restarted TensorFlow job). The crash-consistent record of a run stays
 * metrics.jsonl; these files are a view of it for TensorBoard.
 */
#ifndef DISTREF_TFEVENTS_H
#define DISTREF_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"

/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78) of n bytes,
 * continuing from crc (0 to start). */
uint32_t dr_crc32c(uint32_t crc, const void *data, size_t n);
/* TFRecord's masked CRC32C of n bytes. */
uint32_t dr_crc32c_masked(const void *data, size_t n);

typedef struct dr_tfevents {
    char    *path;         /* model_dir/events.out.tfevents.<secs>.<usecs>.distref.<pid> */
    uint8_t *buf;          /* the file's records so far */
    size_t   len, cap;
    uint64_t nscalars;     /* Events with a summary (0: nothing worth writing) */
} dr_tfevents;

/* Starts a segment's file in memory with its file_version record. */
int  dr_tfevents_open(dr_tfevents *ev, const char *model_dir, double wall_time, dr_err *err);
void dr_tfevents_free(dr_tfevents *ev);
/* One Event at `step` holding n scalars tags[i] = values[i]. */
int  dr_tfevents_scalars(dr_tfevents *ev, double wall_time, int64_t step, const char *const *tags,
                         const float *values, size_t n, dr_err *err);
/* A SessionLog START at `step`: the run (re)starts there. */
int  dr_tfevents_session_start(dr_tfevents *ev, double wall_time, int64_t step, dr_err *err);
/* Writes the file atomically (nothing if no scalars were added). */
int  dr_tfevents_write(const dr_tfevents *ev, dr_err *err);

/* Reading back (tests, tools): the record at *pos of a file's bytes, its CRCs
 * checked: DR_OK with the record in (*data, *len) and *pos advanced, or
 * DR_EFORMAT naming the byte offset of a short or corrupt record. At the
 * end of the bytes: DR_OK with *data NULL. */
int  dr_tfrecord_next(const uint8_t *file, size_t n, size_t *pos, const uint8_t **data, size_t *len, dr_err *err);

#endif
