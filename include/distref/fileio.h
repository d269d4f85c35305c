/* distref — files that are never half-written, and never written or read
 * through a link someone planted.
 *
 * dr_write_atomic writes a new temp file "<path>.tmp.<pid>" (or
 * "<path>.tmp.<pid>.<k>" when that name is taken), fsyncs it, renames it over
 * path and fsyncs the directory: a reader sees the old file or the new one,
 * never a torn one, even if the process dies mid-write. The temp file is
 * created O_EXCL | O_NOFOLLOW, so a file or symbolic link already at its name
 * (planted, or left by a dead process with the same pid) is never opened,
 * truncated or written through; the rename replaces a link at path itself
 * (never its target); a directory at path is refused.
 */
#ifndef DISTREF_FILEIO_H
#define DISTREF_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"

int dr_write_atomic(const char *path, const void *data, size_t n, dr_err *err);

/* Reads a whole file; *data is malloc'd (NUL-terminated for convenience, the
 * NUL not counted in *n). Files larger than max_bytes are rejected. */
int dr_read_file(const char *path, size_t max_bytes, uint8_t **data, size_t *n, dr_err *err);

/* dr_read_file for the files distref itself wrote (a model_dir's
 * checkpoint, metrics, schedule; a cache): a symbolic link at path, a FIFO,
 * a device or socket is refused with DR_EFORMAT and a message naming path
 * and what it is ("not a regular file (it is a FIFO)"), without blocking. */
int dr_read_regular(const char *path, size_t max_bytes, uint8_t **data, size_t *n, dr_err *err);

/* The pid in a temp file name of dr_write_atomic's: name is
 * "<prefix>.tmp.<pid>" or "<prefix>.tmp.<pid>.<k>" (prefix "" : any base
 * name); 0 when name is not one. */
long dr_temp_pid(const char *name, const char *prefix);

/* true when no process pid exists (kill(pid, 0) fails with ESRCH): its temp
 * files are leftovers that nobody will rename. A live pid, or one this
 * process may not signal, is not gone. */
bool dr_pid_gone(long pid);

/* mkdir -p; an existing directory is fine, an existing non-directory is an error. */
int dr_mkdirs(const char *path, dr_err *err);

/* Little-endian (de)serialization helpers for checkpoints and accumulators. */
void     dr_put_u32le(uint8_t *p, uint32_t v);
void     dr_put_u64le(uint8_t *p, uint64_t v);
uint32_t dr_get_u32le(const uint8_t *p);
uint64_t dr_get_u64le(const uint8_t *p);

#endif
