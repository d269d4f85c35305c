/* distref — IDX loader: see include/distref/idx.h.
 *
 * zlib's gzopen/gzread read both kinds of file: a file that starts with the
 * gzip magic 1f 8b is inflated, anything else is read as it is ("transparent"
 * mode). The gzip CRC and length trailer are only checked when inflate
 * reaches the end of the stream, so the loader always reads to EOF (that is
 * also how it finds trailing bytes) before it trusts the data.
 */
#include "distref/idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* The largest payload accepted: 2 GiB is 40x Fashion-MNIST's training
 * images, and it keeps every count well inside an int and a size_t. */
#define IDX_MAX_BYTES (UINT64_C(1) << 31)
#define IDX_MAX_NDIM  4
#define IDX_READ_CHUNK (1u << 30)   /* gzread takes an unsigned, returns an int */

/* An error from zlib: Z_ERRNO is the operating system's, the rest are
 * corrupt or cut-off gzip data. */
static int gz_failure(gzFile gz, const char *path, dr_err *err)
{
    int zcode = Z_OK;
    const char *zmsg = gzerror(gz, &zcode);
    if (zcode == Z_ERRNO)
        return dr_fail(err, DR_EIO, "%s: read error: %s", path, strerror(errno));
    /* zlib writes "<path>: <what>"; the path is already at our front. */
    size_t path_len = strlen(path);
    if (strncmp(zmsg, path, path_len) == 0 && strncmp(zmsg + path_len, ": ", 2) == 0)
        zmsg += path_len + 2;
    return dr_fail(err, DR_EFORMAT, "%s: corrupt gzip data: %s", path, zmsg);
}

/* Reads up to n bytes; *got < n only at the end of the file. Unexpected end
 * of a gzip stream is a short read to gzread, but an error here. */
static int read_bytes(gzFile gz, const char *path, uint8_t *buf, size_t n,
                      size_t *got, dr_err *err)
{
    *got = 0;
    while (*got < n) {
        size_t want = n - *got < IDX_READ_CHUNK ? n - *got : IDX_READ_CHUNK;
        int r = gzread(gz, buf + *got, (unsigned)want);
        if (r < 0)
            return gz_failure(gz, path, err);
        *got += (size_t)r;
        if ((size_t)r < want)
            break;
    }
    int zcode = Z_OK;
    gzerror(gz, &zcode);
    if (zcode != Z_OK)
        return gz_failure(gz, path, err);
    return DR_OK;
}

/* Counts what is left after the data; errors in it (a bad gzip CRC) win. */
static int count_trailing(gzFile gz, const char *path, uint64_t *extra, dr_err *err)
{
    uint8_t buf[4096];
    size_t got;
    *extra = 0;
    do {
        int rc = read_bytes(gz, path, buf, sizeof buf, &got, err);
        if (rc != DR_OK)
            return rc;
        *extra += got;
    } while (got == sizeof buf);
    return DR_OK;
}

/* "60000x28x28" */
static void format_dims(const dr_idx *idx, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t d = 0; d < idx->ndim && used < size; d++) {
        int w = snprintf(out + used, size - used, "%s%lu", d ? "x" : "",
                         (unsigned long)idx->dims[d]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* Magic 00 00 08 <ndim>, checked field by field for a precise message. */
static int check_magic(const uint8_t m[4], uint32_t expect_ndim, const char *path, dr_err *err)
{
    if (m[0] != 0 || m[1] != 0)
        return dr_fail(err, DR_EFORMAT,
                       "%s: not an IDX file: magic bytes %02x %02x %02x %02x, "
                       "expected 00 00 %02x %02x", path, m[0], m[1], m[2], m[3],
                       DR_IDX_UBYTE, (unsigned)expect_ndim);
    if (m[2] != DR_IDX_UBYTE)
        return dr_fail(err, DR_EFORMAT,
                       "%s: wrong element type 0x%02x, expected 0x%02x (unsigned byte)",
                       path, m[2], DR_IDX_UBYTE);
    if (m[3] != expect_ndim)
        return dr_fail(err, DR_EFORMAT, "%s: wrong number of dimensions %u, expected %u",
                       path, (unsigned)m[3], (unsigned)expect_ndim);
    return DR_OK;
}

/* Magic and dimensions; fills out->ndim, dims and count. */
static int read_header(gzFile gz, const char *path, uint32_t expect_ndim, dr_idx *out, dr_err *err)
{
    uint8_t magic[4];
    size_t got;
    int rc = read_bytes(gz, path, magic, sizeof magic, &got, err);
    if (rc != DR_OK)
        return rc;
    if (got < sizeof magic)
        return dr_fail(err, DR_EFORMAT, "%s: truncated header: file has %zu bytes, "
                       "expected at least 4 magic bytes", path, got);
    if ((rc = check_magic(magic, expect_ndim, path, err)) != DR_OK)
        return rc;

    uint8_t raw[4 * IDX_MAX_NDIM];
    size_t need = 4 * (size_t)expect_ndim;
    if ((rc = read_bytes(gz, path, raw, need, &got, err)) != DR_OK)
        return rc;
    if (got < need)
        return dr_fail(err, DR_EFORMAT, "%s: truncated header: %u dimensions need %zu bytes "
                       "after the magic, file has %zu", path, (unsigned)expect_ndim, need, got);

    out->ndim = expect_ndim;
    for (uint32_t d = 0; d < expect_ndim; d++) {
        const uint8_t *p = raw + 4 * d;     /* big-endian */
        out->dims[d] = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                       ((uint32_t)p[2] << 8) | p[3];
    }
    /* Checked at every step, so the product never overflows: it is at most
     * 2^31 before a multiplication by at most 2^32 - 1. */
    uint64_t count = 1;
    for (uint32_t d = 0; d < expect_ndim && count <= IDX_MAX_BYTES; d++)
        count *= out->dims[d];
    if (count > IDX_MAX_BYTES) {
        char shape[128];
        format_dims(out, shape, sizeof shape);
        return dr_fail(err, DR_EFORMAT, "%s: dimensions %s exceed the limit of %llu bytes",
                       path, shape, (unsigned long long)IDX_MAX_BYTES);
    }
    out->count = (size_t)count;
    return DR_OK;
}

/* The elements, then proof that nothing follows them. */
static int read_data(gzFile gz, const char *path, dr_idx *out, dr_err *err)
{
    char shape[128];
    format_dims(out, shape, sizeof shape);
    out->data = malloc(out->count > 0 ? out->count : 1);
    if (out->data == NULL)
        return dr_fail(err, DR_ENOMEM, "%s: out of memory for %s = %zu bytes",
                       path, shape, out->count);
    size_t got;
    int rc = read_bytes(gz, path, out->data, out->count, &got, err);
    if (rc != DR_OK)
        return rc;
    if (got < out->count)
        return dr_fail(err, DR_EFORMAT, "%s: truncated: header says %s = %zu bytes of data, "
                       "file has %zu", path, shape, out->count, got);
    uint64_t extra;
    if ((rc = count_trailing(gz, path, &extra, err)) != DR_OK)
        return rc;
    if (extra > 0)
        return dr_fail(err, DR_EFORMAT, "%s: %llu trailing bytes after the %s = %zu bytes "
                       "of data the header describes", path, (unsigned long long)extra,
                       shape, out->count);
    return DR_OK;
}

int dr_idx_load(const char *path, uint32_t expect_ndim, dr_idx *out, dr_err *err)
{
    memset(out, 0, sizeof *out);
    if (expect_ndim < 1 || expect_ndim > IDX_MAX_NDIM)
        return dr_fail(err, DR_EUSAGE, "%s: cannot load with %u dimensions, expected 1 to %d",
                       path, (unsigned)expect_ndim, IDX_MAX_NDIM);
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (gz == NULL) {
        if (errno == 0)         /* zlib could not allocate its state */
            return dr_fail(err, DR_ENOMEM, "%s: cannot open: out of memory", path);
        return dr_fail(err, DR_EIO, "%s: cannot open: %s", path, strerror(errno));
    }
    int rc = read_header(gz, path, expect_ndim, out, err);
    if (rc == DR_OK)
        rc = read_data(gz, path, out, err);
    gzclose(gz);
    if (rc != DR_OK)
        dr_idx_free(out);
    return rc;
}

void dr_idx_free(dr_idx *idx)
{
    if (idx == NULL)
        return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}
