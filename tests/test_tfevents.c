/* Unit tests for core/tfevents.c: CRC-32C against the published check
 * values, and event files read back by a protobuf decoder written here from
 * the wire-format rules (not the writer's code); a resumed run's event
 * files, read as TensorBoard reads them, hold every step once.
 * scripts/test_tensorboard.sh reads a training run's files with TensorBoard
 * itself when it is installed. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "distref/factory.h"
#include "distref/fileio.h"
#include "distref/harness.h"
#include "distref/tfevents.h"
#include "distref/train.h"
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

/* ---- a resumed run, read as TensorBoard reads it ---------------------------- */

enum { RUN_STEPS = 20, MAX_FILES = 8, MAX_KEPT = 256 };

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void train_to(const char *dir, uint64_t steps)
{
    dr_run_config c;
    dr_run_result res;
    dr_err err = { 0, "" };
    dr_run_config_defaults(&c);
    assert_int_equal(dr_get_distribution_strategy("mirrored", 2, NULL, 1, NULL, &c.strategy, &err), DR_OK);
    c.synthetic_examples = 256;
    c.global_batch_size = 32;
    c.train_steps = steps;
    c.checkpoint_every = 10;
    c.progress = false;
    snprintf(c.model_dir, sizeof c.model_dir, "%s", dir);
    if (dr_run_train(&c, &res, &err) != DR_OK) fail_msg("train %s to %llu: %s", dir, (unsigned long long)steps, err.msg);
}

/* The steps of the loss scalars in dir's event files, read in name order
 * (TensorBoard's order: the names begin with the segment's start time)
 * with TensorBoard's purge of orphaned data for files of version
 * brain.Event:2 applied: a SessionLog START at step s drops every event
 * read so far whose step is >= s (EventAccumulator's restart check). kept[]
 * gets the surviving steps in reading order; returns their count, and the
 * number of files in *nfiles. */
static size_t loss_steps_as_tensorboard(const char *dir, int64_t *kept, int *nfiles)
{
    char *names[MAX_FILES], path[1200];
    struct dirent *d;
    DIR *dd = opendir(dir);
    size_t nkept = 0;
    int n = 0;
    assert_non_null(dd);
    while ((d = readdir(dd)))
        if (strncmp(d->d_name, "events.out.tfevents.", 20) == 0) {
            assert_true(n < MAX_FILES);
            names[n++] = strdup(d->d_name);
        }
    closedir(dd);
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    for (int f = 0; f < n; f++) {
        uint8_t *file;
        size_t len, pos = 0, rlen;
        const uint8_t *data;
        dr_err err;
        event e;
        snprintf(path, sizeof path, "%s/%s", dir, names[f]);
        assert_int_equal(dr_read_file(path, 1 << 24, &file, &len, &err), DR_OK);
        while (dr_tfrecord_next(file, len, &pos, &data, &rlen, &err) == DR_OK && data) {
            decode_event(data, rlen, &e);
            if (e.version[0]) assert_string_equal(e.version, "brain.Event:2");
            if (e.start) {
                size_t w = 0;
                for (size_t i = 0; i < nkept; i++)
                    if (kept[i] < e.step) kept[w++] = kept[i];
                nkept = w;
            }
            if (e.nvals > 0 && strcmp(e.tag[0], "loss") == 0) {
                assert_true(nkept < MAX_KEPT);
                kept[nkept++] = e.step;
            }
        }
        assert_null(data);   /* every record read: none corrupt */
        free(file);
        free(names[f]);
    }
    *nfiles = n;
    return nkept;
}

/* A run checkpointing every 10 steps is trained to 10, continued to 15
 * (a second segment, a second event file holding steps 11..15, and the
 * step-15 checkpoint), then "killed" before that checkpoint's commit: the
 * step-10 checkpoint is put back, as in tests/test_checkpoint.c, while the
 * event files and metrics.jsonl keep steps up to 15 (they are written
 * before the checkpoint's commit). Resumed to 20, the third segment redoes
 * 11..15. Read as TensorBoard reads them, the three files must show each
 * step 1..20 once, in order: the resume's SessionLog START at step 11 drops
 * the second segment's 11..15. Without the START (DR_MUTANT_TFEVENTS_NO_START)
 * steps 11..15 appear twice. */
static void test_resumed_run_steps_once(void **state)
{
    char dir[1100], ckpt[1200], *cmd = malloc(2600);
    int64_t kept[MAX_KEPT];
    int nfiles;
    size_t n;
    assert_non_null(cmd);
    snprintf(dir, sizeof dir, "%s/run", (const char *)*state);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.bin", dir);
    train_to(dir, 10);
    snprintf(cmd, 2600, "cp '%s' '%s.step10'", ckpt, ckpt);
    assert_int_equal(system(cmd), 0);
    train_to(dir, 15);
    snprintf(cmd, 2600, "mv '%s.step10' '%s'", ckpt, ckpt);   /* the step-15 commit "never happened" */
    assert_int_equal(system(cmd), 0);
    free(cmd);
    train_to(dir, RUN_STEPS);
    n = loss_steps_as_tensorboard(dir, kept, &nfiles);
    assert_int_equal(nfiles, 3);
    if (n != RUN_STEPS) {
        for (size_t i = 0; i < n; i++) print_message("%lld ", (long long)kept[i]);
        fail_msg("TensorBoard would show %zu loss events (above), want steps 1..%d once each", n, RUN_STEPS);
    }
    for (size_t i = 0; i < n; i++) assert_int_equal(kept[i], (int64_t)i + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test_setup_teardown(test_events_read_back, setup, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_resumed_run_steps_once, setup, drop_temp_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
