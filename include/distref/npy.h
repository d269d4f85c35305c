/* distref core — NumPy .npy files of float32 (format 1.0 written; 1.0 and
 * 2.0 read), the unit of a trajectory (distref/trajectory.h, docs/JUDGING.md).
 *
 * Written: magic "\x93NUMPY", version 1.0, a little-endian u16 header
 * length, the header dict {'descr': '<f4', 'fortran_order': False,
 * 'shape': (...), } padded with spaces to a multiple of 64 bytes and ended
 * by '\n', then the data, little-endian, C order. What np.save writes for a
 * C-contiguous float32 array; np.load reads it.
 *
 * Read: the same, with either quote, any key order and whitespace; every
 * refusal names the file and the field (dtype other than '<f4' and named,
 * fortran_order True, a shape that is not a tuple of non-negative integers,
 * more than DR_NPY_MAX_DIMS dimensions, data shorter or longer than the
 * shape says).
 */
#ifndef DISTREF_NPY_H
#define DISTREF_NPY_H

#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"

#define DR_NPY_MAX_DIMS 8
/* Largest array a reader accepts: 2^31 elements (8 GiB of float32). */
#define DR_NPY_MAX_COUNT (1ull << 31)

typedef struct dr_npy {
    uint32_t ndim;                     /* 0: a scalar (shape ()) */
    uint64_t shape[DR_NPY_MAX_DIMS];
    uint64_t count;                    /* product of the shape (1 for a scalar) */
    float   *data;                     /* count floats, malloc'd */
} dr_npy;

/* The header for a float32 array of ndim dims (the magic, version, length,
 * dict and padding): written to out (cap bytes), its length returned, 0 if
 * it does not fit. */
size_t dr_npy_header(uint32_t ndim, const uint64_t *shape, char *out, size_t cap);

/* Writes a float32 array to path atomically (distref/fileio.h). */
int dr_npy_write_f32(const char *path, uint32_t ndim, const uint64_t *shape, const float *data, dr_err *err);

/* Parses a whole .npy file held in buf[0..n); name (the file's path) goes
 * into every message. On success out->data is the caller's (dr_npy_free). */
int dr_npy_parse(const uint8_t *buf, size_t n, const char *name, dr_npy *out, dr_err *err);

/* dr_npy_parse of the file at path (a regular file). */
int dr_npy_load(const char *path, dr_npy *out, dr_err *err);

void dr_npy_free(dr_npy *a);

#endif
