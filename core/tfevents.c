/* distref core — TensorBoard event files: see include/distref/tfevents.h. */
#include "distref/tfevents.h"
#include "distref/fileio.h"
#include "core/seams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bit by bit: no table, so no state; the files are small. */
uint32_t dr_crc32c(uint32_t crc, const void *data, size_t n)
{
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

uint32_t dr_crc32c_masked(const void *data, size_t n)
{
    uint32_t c = dr_crc32c(0, data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---- a growing byte buffer and the protobuf wire format ------------------- */

typedef struct bytes { uint8_t *p; size_t len, cap; int failed; } bytes;

static void put(bytes *b, const void *src, size_t n)
{
    if (b->failed) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        uint8_t *p;
        while (cap < b->len + n) cap *= 2;
        if (!(p = realloc(b->p, cap))) { b->failed = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_le(bytes *b, uint64_t v, int nbytes)
{
    uint8_t x[8];
    for (int i = 0; i < nbytes; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, (size_t)nbytes);
}

static void put_varint(bytes *b, uint64_t v)
{
    uint8_t x[10];
    size_t n = 0;
    do {
        x[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        x[n++] |= v ? 0x80 : 0;
    } while (v);
    put(b, x, n);
}

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };
static void put_tag(bytes *b, unsigned field, unsigned wire) { put_varint(b, (uint64_t)field << 3 | wire); }

static void put_double(bytes *b, unsigned field, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    put_tag(b, field, WIRE_FIXED64);
    put_le(b, u, 8);
}

static void put_float(bytes *b, unsigned field, float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    put_tag(b, field, WIRE_FIXED32);
    put_le(b, u, 4);
}

static void put_bytes(bytes *b, unsigned field, const void *p, size_t n)
{
    put_tag(b, field, WIRE_LEN);
    put_varint(b, n);
    put(b, p, n);
}

/* One TFRecord around msg, appended to the file's buffer. */
static int append_record(dr_tfevents *ev, const bytes *msg, dr_err *err)
{
    bytes f = { ev->buf, ev->len, ev->cap, 0 };
    uint8_t lenle[8];
    if (msg->failed) return dr_fail(err, DR_ENOMEM, "out of host memory for the TensorBoard events");
    for (int i = 0; i < 8; i++) lenle[i] = (uint8_t)((uint64_t)msg->len >> (8 * i));
    put(&f, lenle, 8);
    put_le(&f, dr_crc32c_masked(lenle, 8), 4);
    put(&f, msg->p, msg->len);
    put_le(&f, dr_crc32c_masked(msg->p, msg->len), 4);
    ev->buf = f.p;
    ev->cap = f.cap;
    if (f.failed) return dr_fail(err, DR_ENOMEM, "out of host memory for the TensorBoard events");
    ev->len = f.len;
    return DR_OK;
}

int dr_tfevents_open(dr_tfevents *ev, const char *model_dir, double wall_time, dr_err *err)
{
    static const char version[] = "brain.Event:2";
    bytes msg = { 0 };
    int n, rc;
    long long secs = (long long)wall_time;
    long usecs = (long)((wall_time - (double)secs) * 1e6);
    memset(ev, 0, sizeof *ev);
    /* seconds and microseconds, fixed width: TensorBoard reads a folder's
     * files in name order, so the segments must sort in the order they ran */
    n = snprintf(NULL, 0, "%s/events.out.tfevents.%010lld.%06ld.distref.%ld", model_dir, secs, usecs, (long)getpid());
    if (n < 0 || !(ev->path = malloc((size_t)n + 1)))
        return dr_fail(err, DR_ENOMEM, "out of host memory for the TensorBoard events");
    snprintf(ev->path, (size_t)n + 1, "%s/events.out.tfevents.%010lld.%06ld.distref.%ld", model_dir, secs, usecs,
             (long)getpid());
    put_double(&msg, 1, wall_time);
    put_bytes(&msg, 3, version, sizeof version - 1);
    rc = append_record(ev, &msg, err);
    free(msg.p);
    if (rc) dr_tfevents_free(ev);
    return rc;
}

void dr_tfevents_free(dr_tfevents *ev)
{
    free(ev->path);
    free(ev->buf);
    memset(ev, 0, sizeof *ev);
}

int dr_tfevents_scalars(dr_tfevents *ev, double wall_time, int64_t step, const char *const *tags,
                        const float *values, size_t n, dr_err *err)
{
    bytes msg = { 0 }, summary = { 0 }, value = { 0 };
    int rc;
    for (size_t i = 0; i < n; i++) {
        value.len = 0;
        put_bytes(&value, 1, tags[i], strlen(tags[i]));
        put_float(&value, 2, values[i]);
        put_bytes(&summary, 1, value.p, value.len);
        summary.failed |= value.failed;
    }
    put_double(&msg, 1, wall_time);
    put_tag(&msg, 2, WIRE_VARINT);
    put_varint(&msg, (uint64_t)step);
    put_bytes(&msg, 5, summary.p, summary.len);
    msg.failed |= summary.failed;
    rc = append_record(ev, &msg, err);
    ev->nscalars += rc == DR_OK;
    free(msg.p);
    free(summary.p);
    free(value.p);
    return rc;
}

int dr_tfevents_session_start(dr_tfevents *ev, double wall_time, int64_t step, dr_err *err)
{
    bytes msg = { 0 }, log = { 0 };
    int rc;
    if (!DR_SEAM_SESSION_START) return DR_OK;
    put_tag(&log, 1, WIRE_VARINT);   /* SessionLog.status */
    put_varint(&log, 1);             /* START */
    put_double(&msg, 1, wall_time);
    put_tag(&msg, 2, WIRE_VARINT);
    put_varint(&msg, (uint64_t)step);
    put_bytes(&msg, 7, log.p, log.len);
    msg.failed |= log.failed;
    rc = append_record(ev, &msg, err);
    free(msg.p);
    free(log.p);
    return rc;
}

int dr_tfevents_write(const dr_tfevents *ev, dr_err *err)
{
    if (!ev->path || ev->nscalars == 0) return DR_OK;
    return dr_write_atomic(ev->path, ev->buf, ev->len, err);
}

static uint64_t get_le(const uint8_t *p, int nbytes)
{
    uint64_t v = 0;
    for (int i = nbytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

int dr_tfrecord_next(const uint8_t *file, size_t n, size_t *pos, const uint8_t **data, size_t *len, dr_err *err)
{
    size_t at = *pos;
    uint64_t m;
    *data = NULL;
    *len = 0;
    if (at == n) return DR_OK;
    if (n - at < 12) return dr_fail(err, DR_EFORMAT, "TFRecord at byte %zu: %zu bytes, a header needs 12", at, n - at);
    if ((uint32_t)get_le(file + at + 8, 4) != dr_crc32c_masked(file + at, 8))
        return dr_fail(err, DR_EFORMAT, "TFRecord at byte %zu: the length's CRC32C does not match", at);
    m = get_le(file + at, 8);
    if (m > n - at - 12 || n - at - 12 - m < 4)
        return dr_fail(err, DR_EFORMAT, "TFRecord at byte %zu: length %llu runs past the end (%zu bytes)", at,
                       (unsigned long long)m, n);
    if ((uint32_t)get_le(file + at + 12 + m, 4) != dr_crc32c_masked(file + at + 12, (size_t)m))
        return dr_fail(err, DR_EFORMAT, "TFRecord at byte %zu: the data's CRC32C does not match", at);
    *data = file + at + 12;
    *len = (size_t)m;
    *pos = at + 16 + (size_t)m;
    return DR_OK;
}
