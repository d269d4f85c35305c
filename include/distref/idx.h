/* distref — IDX files (the MNIST / Fashion-MNIST format), gzipped or plain.
 *
 * Layout: bytes 0,1 = 0; byte 2 = element type (0x08 = unsigned byte);
 * byte 3 = number of dimensions; then one big-endian uint32 per dimension;
 * then the elements. Everything is validated: a truncated or corrupt file,
 * a wrong magic, a wrong type or rank, dimensions that disagree with the
 * length, or trailing bytes give DR_EFORMAT with a message that names the
 * file and what was wrong. Data stays as bytes (60000 images = 47 MB).
 *
 * A gzip file may hold several gzip members one after the other (as gzip
 * allows); any other bytes after the last member are refused (zlib's gzread
 * would ignore them). Memory follows the file, not the header: the buffer
 * grows as data arrives, so a short file whose header claims 2 GiB costs
 * about 1 MiB and fails as truncated.
 */
#ifndef DISTREF_IDX_H
#define DISTREF_IDX_H

#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"

#define DR_IDX_UBYTE 0x08

typedef struct dr_idx {
    uint8_t  *data;     /* count bytes */
    uint32_t  ndim;
    uint32_t  dims[4];
    size_t    count;    /* product of dims */
} dr_idx;

/* Loads path (gzip detected by its magic, plain IDX accepted too) and checks
 * that its type is DR_IDX_UBYTE and its rank is expect_ndim. */
int  dr_idx_load(const char *path, uint32_t expect_ndim, dr_idx *out, dr_err *err);

/* dr_idx_load that also requires dims[1..expect_ndim-1] to equal
 * inner[0..expect_ndim-2] (the first dimension, the item count, is free),
 * checked from the header before any data is read; inner NULL checks
 * nothing. Images of 28x28: dr_idx_load_dims(path, 3, (uint32_t[]){28, 28}, ...). */
int  dr_idx_load_dims(const char *path, uint32_t expect_ndim, const uint32_t *inner,
                      dr_idx *out, dr_err *err);
void dr_idx_free(dr_idx *idx);

#endif
