/* Unit tests for core/tfevents.c: CRC-32C against the published check
 * values, and event files read back by a protobuf decoder written here from
 * the wire-format rules (not the writer's code). tests/test_tensorboard.sh
 * reads a training run's file with TensorBoard itself when it is installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "distref/fileio.h"
#include "distref/tfevents.h"
#include "tmpdir.h"

static int setup(void **state) { return temp_dir_from(state, "/tmp/distref_tfevents_XXXXXX"); }

/* The CRC-32C check value (CRC catalogue: "123456789") and RFC 3720 B.4's
 * 32-byte vectors. */
static void test_crc32c_vectors(void **state)
{
    uint8_t zeros[32], ones[32], inc[32];
    (void)state;
    memset(zeros, 0, sizeof zeros);
    memset(ones, 0xff, sizeof ones);
    for (int i = 0; i < 32; i++) inc[i] = (uint8_t)i;
    assert_int_equal(dr_crc32c(0, "123456789", 9), 0xe3069283u);
    assert_int_equal(dr_crc32c(0, zeros, 32), 0x8a9136aau);
    assert_int_equal(dr_crc32c(0, ones, 32), 0x62a8ab43u);
    assert_int_equal(dr_crc32c(0, inc, 32), 0x46dd794eu);
    /* continuing a CRC over a split input gives the whole input's */
    assert_int_equal(dr_crc32c(dr_crc32c(0, "12345", 5), "6789", 4), 0xe3069283u);
}

/* ---- a minimal protobuf reader ------------------------------------------- */

typedef struct field { unsigned num, wire; uint64_t u; const uint8_t *p; size_t n; } field;

static uint64_t varint(const uint8_t *p, size_t n, size_t *at)
{
    uint64_t v = 0;
    for (int shift = 0; *at < n && shift < 64; shift += 7) {
        uint8_t b = p[(*at)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    fail_msg("truncated varint");
    return 0;
}

/* The next field of a message, or 0 at its end. */
static int next_field(const uint8_t *p, size_t n, size_t *at, field *f)
{
    uint64_t key;
    if (*at >= n) return 0;
    key = varint(p, n, at);
    f->num = (unsigned)(key >> 3);
    f->wire = (unsigned)(key & 7);
    f->p = NULL;
    f->n = 0;
    switch (f->wire) {
    case 0: f->u = varint(p, n, at); break;
    case 1: assert_true(*at + 8 <= n); memcpy(&f->u, p + *at, 8); *at += 8; break;   /* little-endian host */
    case 5: assert_true(*at + 4 <= n); f->u = 0; memcpy(&f->u, p + *at, 4); *at += 4; break;
    case 2: f->n = (size_t)varint(p, n, at); assert_true(*at + f->n <= n); f->p = p + *at; *at += f->n; break;
    default: fail_msg("wire type %u", f->wire);
    }
    return 1;
}

typedef struct event { double wall; int64_t step; char version[32]; int nvals; char tag[4][32]; float val[4]; int start; } event;

static void decode_event(const uint8_t *p, size_t n, event *e)
{
    size_t at = 0;
    field f;
    memset(e, 0, sizeof *e);
    while (next_field(p, n, &at, &f)) {
        if (f.num == 1) { assert_int_equal(f.wire, 1); memcpy(&e->wall, &f.u, 8); }
        else if (f.num == 2) { assert_int_equal(f.wire, 0); e->step = (int64_t)f.u; }
        else if (f.num == 3) { assert_true(f.n < sizeof e->version); memcpy(e->version, f.p, f.n); }
        else if (f.num == 5) {
            size_t sat = 0;
            field v;
            while (next_field(f.p, f.n, &sat, &v)) {
                size_t vat = 0;
                field x;
                assert_int_equal(v.num, 1);
                assert_true(e->nvals < 4);
                while (next_field(v.p, v.n, &vat, &x)) {
                    if (x.num == 1) memcpy(e->tag[e->nvals], x.p, x.n < 31 ? x.n : 31);
                    if (x.num == 2) { uint32_t u = (uint32_t)x.u; assert_int_equal(x.wire, 5); memcpy(&e->val[e->nvals], &u, 4); }
                }
                e->nvals++;
            }
        } else if (f.num == 7) {   /* SessionLog: status 1 = START */
            size_t lat = 0;
            field x;
            while (next_field(f.p, f.n, &lat, &x))
                if (x.num == 1) e->start = x.u == 1;
        } else fail_msg("unexpected Event field %u", f.num);
    }
}

static void test_events_read_back(void **state)
{
    const char *dir = *state;
    static const char *const tags[] = { "loss", "accuracy", "learning_rate" };
    const float v1[] = { 2.3f, 0.125f, 0.01f }, v2[] = { 1.5f, 0.5f, 0.01f };
    dr_tfevents ev;
    dr_err err;
    uint8_t *file;
    size_t n, pos = 0, len;
    const uint8_t *data;
    event e;
    assert_int_equal(dr_tfevents_open(&ev, dir, 1700000000.25, &err), DR_OK);
    assert_non_null(strstr(ev.path, "/events.out.tfevents.1700000000.250000.distref."));
    assert_int_equal(dr_tfevents_write(&ev, &err), DR_OK);   /* no scalars: no file */
    assert_int_not_equal(access(ev.path, F_OK), 0);
    assert_int_equal(dr_tfevents_session_start(&ev, 1700000001.0, 1, &err), DR_OK);
    assert_int_equal(dr_tfevents_write(&ev, &err), DR_OK);   /* still no scalars: no file */
    assert_int_not_equal(access(ev.path, F_OK), 0);
    assert_int_equal(dr_tfevents_scalars(&ev, 1700000001.0, 1, tags, v1, 3, &err), DR_OK);
    assert_int_equal(dr_tfevents_scalars(&ev, 1700000002.0, 300, tags, v2, 2, &err), DR_OK);
    assert_int_equal(dr_tfevents_write(&ev, &err), DR_OK);
    assert_int_equal(dr_read_file(ev.path, 1 << 20, &file, &n, &err), DR_OK);
    assert_int_equal(n, ev.len);

    assert_int_equal(dr_tfrecord_next(file, n, &pos, &data, &len, &err), DR_OK);
    decode_event(data, len, &e);
    assert_string_equal(e.version, "brain.Event:2");
    assert_true(e.wall == 1700000000.25);
    assert_int_equal(e.nvals, 0);

    assert_int_equal(dr_tfrecord_next(file, n, &pos, &data, &len, &err), DR_OK);
    decode_event(data, len, &e);
    assert_int_equal(e.step, 1);
    assert_true(e.start);

    assert_int_equal(dr_tfrecord_next(file, n, &pos, &data, &len, &err), DR_OK);
    decode_event(data, len, &e);
    assert_int_equal(e.step, 1);
    assert_false(e.start);
    assert_int_equal(e.nvals, 3);
    assert_string_equal(e.tag[0], "loss");
    assert_string_equal(e.tag[2], "learning_rate");
    assert_memory_equal(e.val, v1, sizeof v1);

    assert_int_equal(dr_tfrecord_next(file, n, &pos, &data, &len, &err), DR_OK);
    decode_event(data, len, &e);
    assert_int_equal(e.step, 300);   /* a two-byte varint */
    assert_int_equal(e.nvals, 2);
    assert_true(e.val[0] == 1.5f && e.val[1] == 0.5f);

    assert_int_equal(dr_tfrecord_next(file, n, &pos, &data, &len, &err), DR_OK);
    assert_null(data);   /* the end */

    /* a flipped bit in the data, in the length, and a truncated file are refused */
    file[30] ^= 1;
    pos = 0;
    assert_int_equal(dr_tfrecord_next(file, n, &pos, &data, &len, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "byte 0"));
    file[30] ^= 1;
    file[0] ^= 4;
    pos = 0;
    assert_int_equal(dr_tfrecord_next(file, n, &pos, &data, &len, &err), DR_EFORMAT);
    file[0] ^= 4;
    pos = 0;
    for (int i = 0; i < 3; i++) assert_int_equal(dr_tfrecord_next(file, n - 1, &pos, &data, &len, &err), DR_OK);
    assert_int_equal(dr_tfrecord_next(file, n - 1, &pos, &data, &len, &err), DR_EFORMAT);   /* the last, cut short */
    free(file);
    dr_tfevents_free(&ev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test_setup_teardown(test_events_read_back, setup, drop_temp_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
