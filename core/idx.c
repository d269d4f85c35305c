/* distref — IDX loader: see include/distref/idx.h.
 *
 * The file is read raw. One that starts with the gzip magic 1f 8b is
 * inflated member after member with zlib's inflate (a gzip file may be
 * several members one after the other); anything else is plain IDX. zlib's
 * gzread would also silently drop whatever follows the last member if it is
 * not another member: here such bytes are an error. The gzip CRC and length
 * trailer of a member are checked when inflate reaches its end, so the
 * loader always reads to the end of the file (that is also how it finds
 * trailing bytes) before it trusts the data.
 *
 * The data buffer grows as the data arrives (1 MiB, then doubling up to the
 * header's count), so a short file whose header claims 2 GiB costs 1 MiB,
 * never more than about twice what the file really holds.
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
#define IDX_FIRST_ALLOC ((size_t)1 << 20)  /* the data buffer's first size */
#define IDX_READ_CHUNK (1u << 30)          /* inflate counts in a uInt */
#define IDX_IN_BUF    (1u << 16)           /* raw bytes read at a time */

/* The open file: raw bytes go through in[] (zs.next_in, zs.avail_in). */
typedef struct idx_src {
    FILE       *f;
    const char *path;
    int         gz;        /* gzip: inflated */
    int         zlive;     /* inflateInit2 succeeded: inflateEnd is due */
    int         between;   /* at the end of a gzip member */
    int         eof;       /* fread has reached the end of the file */
    uint64_t    offset;    /* raw bytes read from the file so far */
    z_stream    zs;
    uint8_t     in[IDX_IN_BUF];
} idx_src;

/* Moves the unread input to the front of in[] and reads more after it. */
static int fill_in(idx_src *s, dr_err *err)
{
    if (s->zs.avail_in > 0 && s->zs.next_in != s->in)
        memmove(s->in, s->zs.next_in, s->zs.avail_in);
    s->zs.next_in = s->in;
    size_t room = sizeof s->in - s->zs.avail_in;
    size_t r = fread(s->in + s->zs.avail_in, 1, room, s->f);
    s->zs.avail_in += (uInt)r;
    s->offset += r;
    if (r < room) {
        if (ferror(s->f))
            return dr_fail(err, DR_EIO, "%s: read error: %s", s->path, strerror(errno));
        s->eof = 1;
    }
    return DR_OK;
}

/* Bytes after the last gzip member that do not start another one. */
static int trailing_garbage(idx_src *s, dr_err *err)
{
    uint64_t at = s->offset - s->zs.avail_in;
    uint64_t extra = s->zs.avail_in;
    while (!s->eof) {
        s->zs.avail_in = 0;
        int rc = fill_in(s, err);
        if (rc != DR_OK)
            return rc;
        extra += s->zs.avail_in;
    }
    return dr_fail(err, DR_EFORMAT, "%s: %llu trailing bytes of garbage after the last gzip "
                   "member (at offset %llu): expected the end of the file or another gzip "
                   "member (1f 8b)", s->path, (unsigned long long)extra, (unsigned long long)at);
}

static int gz_read(idx_src *s, uint8_t *buf, size_t n, size_t *got, dr_err *err)
{
    int rc;
    while (*got < n) {
        if (s->zs.avail_in < 2 && !s->eof && (rc = fill_in(s, err)) != DR_OK)
            return rc;
        if (s->between) {
            if (s->zs.avail_in == 0)
                return DR_OK;                           /* the end of the file */
            if (s->zs.avail_in < 2 || s->zs.next_in[0] != 0x1f || s->zs.next_in[1] != 0x8b)
                return trailing_garbage(s, err);
            if (inflateReset(&s->zs) != Z_OK)
                return dr_fail(err, DR_EFORMAT, "%s: corrupt gzip data: cannot restart "
                               "inflate at offset %llu", s->path,
                               (unsigned long long)(s->offset - s->zs.avail_in));
            s->between = 0;
        }
        size_t want = n - *got < IDX_READ_CHUNK ? n - *got : IDX_READ_CHUNK;
        s->zs.next_out = buf + *got;
        s->zs.avail_out = (uInt)want;
        int z = inflate(&s->zs, Z_NO_FLUSH);
        *got += want - s->zs.avail_out;
        if (z == Z_STREAM_END)
            s->between = 1;
        else if (z == Z_MEM_ERROR)
            return dr_fail(err, DR_ENOMEM, "%s: out of memory inflating gzip data", s->path);
        else if (z == Z_BUF_ERROR && s->zs.avail_in == 0 && s->eof)
            return dr_fail(err, DR_EFORMAT, "%s: corrupt gzip data: unexpected end of file",
                           s->path);
        else if (z != Z_OK && z != Z_BUF_ERROR)
            return dr_fail(err, DR_EFORMAT, "%s: corrupt gzip data: %s", s->path,
                           s->zs.msg != NULL ? s->zs.msg : "compressed data error");
    }
    return DR_OK;
}

/* Reads up to n bytes of IDX (inflated if gzip); *got < n only at the end
 * of the file. An unexpected end of a gzip member is an error. */
static int src_read(idx_src *s, uint8_t *buf, size_t n, size_t *got, dr_err *err)
{
    *got = 0;
    if (s->gz)
        return gz_read(s, buf, n, got, err);
    size_t take = s->zs.avail_in < n ? s->zs.avail_in : n;  /* the magic probe's bytes */
    if (take > 0)
        memcpy(buf, s->zs.next_in, take);
    s->zs.next_in += take;
    s->zs.avail_in -= (uInt)take;
    *got = take;
    if (*got < n && !s->eof) {
        size_t r = fread(buf + *got, 1, n - *got, s->f);
        *got += r;
        if (*got < n) {
            if (ferror(s->f))
                return dr_fail(err, DR_EIO, "%s: read error: %s", s->path, strerror(errno));
            s->eof = 1;
        }
    }
    return DR_OK;
}

/* Counts what is left after the data; errors in it (a bad gzip CRC) win. */
static int count_trailing(idx_src *s, uint64_t *extra, dr_err *err)
{
    uint8_t buf[4096];
    size_t got;
    *extra = 0;
    do {
        int rc = src_read(s, buf, sizeof buf, &got, err);
        if (rc != DR_OK)
            return rc;
        *extra += got;
    } while (got == sizeof buf);
    return DR_OK;
}

/* "60000x28x28" (from dims[first] on) */
static void format_dims(const uint32_t *dims, uint32_t first, uint32_t ndim, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t d = first; d < ndim && used < size; d++) {
        int w = snprintf(out + used, size - used, "%s%lu", d > first ? "x" : "",
                         (unsigned long)dims[d]);
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

/* Every dimension after the first must be inner[d - 1] (inner may be NULL). */
static int check_inner(const dr_idx *idx, const uint32_t *inner, const char *path, dr_err *err)
{
    if (inner == NULL || memcmp(idx->dims + 1, inner, sizeof *inner * (idx->ndim - 1)) == 0)
        return DR_OK;
    char got[128], want[128];
    format_dims(idx->dims, 0, idx->ndim, got, sizeof got);
    format_dims(inner, 0, idx->ndim - 1, want, sizeof want);
    return dr_fail(err, DR_EFORMAT, "%s: dimensions %s, expected %s after the first",
                   path, got, want);
}

/* Magic and dimensions; fills out->ndim, dims and count. */
static int read_header(idx_src *s, uint32_t expect_ndim, const uint32_t *inner,
                       dr_idx *out, dr_err *err)
{
    uint8_t magic[4];
    size_t got;
    int rc = src_read(s, magic, sizeof magic, &got, err);
    if (rc != DR_OK)
        return rc;
    if (got < sizeof magic)
        return dr_fail(err, DR_EFORMAT, "%s: truncated header: file has %zu bytes, "
                       "expected at least 4 magic bytes", s->path, got);
    if ((rc = check_magic(magic, expect_ndim, s->path, err)) != DR_OK)
        return rc;

    uint8_t raw[4 * IDX_MAX_NDIM];
    size_t need = 4 * (size_t)expect_ndim;
    if ((rc = src_read(s, raw, need, &got, err)) != DR_OK)
        return rc;
    if (got < need)
        return dr_fail(err, DR_EFORMAT, "%s: truncated header: %u dimensions need %zu bytes "
                       "after the magic, file has %zu", s->path, (unsigned)expect_ndim, need, got);

    out->ndim = expect_ndim;
    for (uint32_t d = 0; d < expect_ndim; d++) {
        const uint8_t *p = raw + 4 * d;     /* big-endian */
        out->dims[d] = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                       ((uint32_t)p[2] << 8) | p[3];
    }
    if ((rc = check_inner(out, inner, s->path, err)) != DR_OK)
        return rc;
    /* Checked at every step, so the product never overflows: it is at most
     * 2^31 before a multiplication by at most 2^32 - 1. */
    uint64_t count = 1;
    for (uint32_t d = 0; d < expect_ndim && count <= IDX_MAX_BYTES; d++)
        count *= out->dims[d];
    if (count > IDX_MAX_BYTES) {
        char shape[128];
        format_dims(out->dims, 0, out->ndim, shape, sizeof shape);
        return dr_fail(err, DR_EFORMAT, "%s: dimensions %s exceed the limit of %llu bytes",
                       s->path, shape, (unsigned long long)IDX_MAX_BYTES);
    }
    out->count = (size_t)count;
    return DR_OK;
}

/* The elements, into a buffer grown as they arrive, then proof that
 * nothing follows them. */
static int read_data(idx_src *s, dr_idx *out, dr_err *err)
{
    char shape[128];
    format_dims(out->dims, 0, out->ndim, shape, sizeof shape);
    size_t cap = out->count < IDX_FIRST_ALLOC ? out->count : IDX_FIRST_ALLOC;
    size_t got = 0, more;
    int rc;
    out->data = malloc(cap > 0 ? cap : 1);
    for (;;) {
        if (out->data == NULL)
            return dr_fail(err, DR_ENOMEM, "%s: out of memory for %zu of the %s = %zu bytes",
                           s->path, cap, shape, out->count);
        if ((rc = src_read(s, out->data + got, cap - got, &more, err)) != DR_OK)
            return rc;
        got += more;
        if (got < cap || cap == out->count)
            break;
        size_t next = cap <= out->count / 2 ? 2 * cap : out->count;
        uint8_t *grown = realloc(out->data, next);
        if (grown == NULL)
            return dr_fail(err, DR_ENOMEM, "%s: out of memory for %zu of the %s = %zu bytes",
                           s->path, next, shape, out->count);
        out->data = grown;
        cap = next;
    }
    if (got < out->count)
        return dr_fail(err, DR_EFORMAT, "%s: truncated: header says %s = %zu bytes of data, "
                       "file has %zu", s->path, shape, out->count, got);
    uint64_t extra;
    if ((rc = count_trailing(s, &extra, err)) != DR_OK)
        return rc;
    if (extra > 0)
        return dr_fail(err, DR_EFORMAT, "%s: %llu trailing bytes after the %s = %zu bytes "
                       "of data the header describes", s->path, (unsigned long long)extra,
                       shape, out->count);
    return DR_OK;
}

/* Opens path and decides gzip or plain from its first two bytes. */
static int src_open(idx_src *s, const char *path, dr_err *err)
{
    s->path = path;
    s->f = fopen(path, "rb");
    if (s->f == NULL)
        return dr_fail(err, DR_EIO, "%s: cannot open: %s", path, strerror(errno));
    s->zs.next_in = s->in;
    int rc = fill_in(s, err);
    if (rc != DR_OK)
        return rc;
    s->gz = s->zs.avail_in >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b;
    if (!s->gz)
        return DR_OK;
    int z = inflateInit2(&s->zs, 16 + MAX_WBITS);       /* gzip wrapper only */
    if (z != Z_OK)
        return dr_fail(err, z == Z_MEM_ERROR ? DR_ENOMEM : DR_EFORMAT,
                       "%s: cannot start inflating: %s", path,
                       z == Z_MEM_ERROR ? "out of memory" : zError(z));
    s->zlive = 1;
    return DR_OK;
}

int dr_idx_load_dims(const char *path, uint32_t expect_ndim, const uint32_t *inner,
                     dr_idx *out, dr_err *err)
{
    memset(out, 0, sizeof *out);
    if (expect_ndim < 1 || expect_ndim > IDX_MAX_NDIM)
        return dr_fail(err, DR_EUSAGE, "%s: cannot load with %u dimensions, expected 1 to %d",
                       path, (unsigned)expect_ndim, IDX_MAX_NDIM);
    idx_src *s = calloc(1, sizeof *s);     /* 64 KiB of input buffer: not on the stack */
    if (s == NULL)
        return dr_fail(err, DR_ENOMEM, "%s: cannot open: out of memory", path);
    int rc = src_open(s, path, err);
    if (rc == DR_OK)
        rc = read_header(s, expect_ndim, inner, out, err);
    if (rc == DR_OK)
        rc = read_data(s, out, err);
    if (s->zlive)
        inflateEnd(&s->zs);
    if (s->f != NULL)
        fclose(s->f);
    free(s);
    if (rc != DR_OK)
        dr_idx_free(out);
    return rc;
}

int dr_idx_load(const char *path, uint32_t expect_ndim, dr_idx *out, dr_err *err)
{
    return dr_idx_load_dims(path, expect_ndim, NULL, out, err);
}

void dr_idx_free(dr_idx *idx)
{
    if (idx == NULL)
        return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}
