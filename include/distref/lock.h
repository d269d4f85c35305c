/* distref — one run per model_dir: the lock (core/lock.c).
 *
 * Every command that writes into a model_dir (train, evaluate, predict,
 * export) holds an exclusive flock(2) on "<model_dir>/.lock" for the whole
 * run. The kernel drops a flock when its holder dies, however it dies, so a
 * lock is never left behind by a crash: "stale" only ever means a lock file
 * whose text names a process that no longer holds it (killed before it
 * could clear the file), and the next run takes it over with a note.
 *
 * The file's text, written after the flock is taken, names the holder for
 * the message a second run prints (one "key value" per line):
 *
 *     distref lock
 *     pid 12345
 *     host node7
 *     command bin/distref train --model_dir=m --learning_rate=0.05
 *
 * A holder clears the text (truncates the file) when it finishes; the file
 * itself is never removed: unlinking a lock file lets two processes lock
 * two different inodes of the same name.
 *
 * Under MPI (--variant=mpi) only the chief (rank 0) takes the flock: the
 * other ranks write nothing into model_dir, and their own flocks would
 * conflict with the chief's. Each of them checks the lock instead
 * (dr_lock_check_holder): the file must name the chief's pid and host, which
 * the chief broadcasts after locking (harness/run_lock.c).
 */
#ifndef DISTREF_LOCK_H
#define DISTREF_LOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"

#define DR_LOCK_FILE ".lock"
#define DR_LOCK_MAX_BYTES 4096          /* a longer lock file is not one of distref's */

typedef struct dr_lock_info {
    long pid;                           /* > 0 */
    char host[256];
    char command[2048];                 /* the holder's argv, joined with spaces */
} dr_lock_info;

typedef struct dr_dir_lock {
    int          fd;                    /* -1: nothing held by this process */
    bool         by_chief;              /* held for this job by its MPI chief (harness/run_lock.c) */
    char         path[1100];            /* model_dir/.lock */
    bool         took_over;             /* the file named a holder that is gone: */
    dr_lock_info stale;                 /* that holder, for the caller's note */
} dr_dir_lock;

/* Parses a lock file's text (any bytes: a reader of files others can
 * write). DR_EFORMAT naming the line and what was expected; empty text is
 * DR_EFORMAT "empty" (a holder that cleared it, or one that has not written
 * it yet). */
int dr_lock_parse(const uint8_t *text, size_t n, dr_lock_info *out, dr_err *err);

/* The text of info; newlines in its fields become spaces. Returns the length
 * (snprintf's: >= n means truncated). */
size_t dr_lock_format(const dr_lock_info *info, char *buf, size_t n);

/* Takes model_dir's lock for this process: O_NOFOLLOW open of
 * model_dir/.lock (created 0644), flock(LOCK_EX | LOCK_NB), then the text
 * with this process's pid, host and command line (/proc/self/cmdline).
 * create: make model_dir first (mkdir -p); otherwise a missing model_dir
 * holds nothing to protect: DR_OK with lk->fd = -1.
 * Held by another process: DR_EUSAGE "--model_dir=DIR is in use by another
 * distref run: pid P on HOST, `COMMAND` (DIR/.lock); ...". A link, FIFO or
 * device at .lock: DR_EFORMAT naming it. */
int dr_model_dir_lock(const char *model_dir, bool create, dr_dir_lock *lk, dr_err *err);

/* Clears the text and releases the lock (idempotent). */
void dr_model_dir_unlock(dr_dir_lock *lk);

/* For a process that does not hold the lock but runs under the holder (an
 * MPI rank under its chief): model_dir/.lock must name pid on host.
 * DR_EUSAGE naming both otherwise; DR_OK when model_dir/.lock does not exist
 * on this host (a directory that is not shared). */
int dr_lock_check_holder(const char *model_dir, long pid, const char *host, dr_err *err);

#endif
