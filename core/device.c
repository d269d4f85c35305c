/* distref — emulated devices: see include/distref/device.h.
 *
 * Parsing follows TensorFlow's DeviceSpec (python/framework/device_spec.py):
 * the string splits on '/' into components and each component on ':' into
 * parts; "job:J", "replica:R", "task:T", "device:TYPE[:N]" and the short
 * "TYPE[:N]" are recognised, the leading '/' is optional. distref is
 * stricter where TensorFlow is lenient, because an emulated device needs a
 * concrete, unambiguous place: only CPU/GPU/TPU, no "*" wildcard index, no
 * empty components ("/gpu:0/" or "//gpu:0"), field names in lower case as
 * TensorFlow spells them (device types are case-insensitive).
 */
#include "distref/device.h"

#include <ctype.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTS 3     /* "device:GPU:1" is the longest component */
#define JOB_MAX   sizeof ((dr_device_spec *)0)->job   /* with its NUL */
_Static_assert(JOB_MAX == 32, "set_job's message says at most 31 characters");

typedef struct piece {
    const char *p;
    size_t      n;
} piece;

/* What has been seen so far, to reject duplicated fields. */
typedef struct parse_state {
    const char     *whole;      /* the full string, for messages */
    dr_device_spec *spec;
    bool            has_job, has_replica, has_task;
} parse_state;

static bool piece_eq(piece a, const char *lit)
{
    return strlen(lit) == a.n && strncmp(a.p, lit, a.n) == 0;
}

static bool piece_ieq(piece a, const char *lit)
{
    if (strlen(lit) != a.n)
        return false;
    for (size_t i = 0; i < a.n; i++)
        if (tolower((unsigned char)a.p[i]) != lit[i])
            return false;
    return true;
}

/* "device '/gpu:x': bad device index 'x' (expected a non-negative integer)" */
static int bad(const parse_state *st, dr_err *err, const char *what, piece part,
               const char *why)
{
    return dr_fail(err, DR_EUSAGE, "device '%s': %s '%.*s'%s", st->whole, what,
                   (int)part.n, part.p, why);
}

#define WANT_INDEX " (expected a non-negative integer)"

static bool type_of(piece name, dr_device_type *out)
{
    static const char *const names[] = { "cpu", "gpu", "tpu" };
    static const dr_device_type types[] = { DR_DEV_CPU, DR_DEV_GPU, DR_DEV_TPU };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (piece_ieq(name, names[i])) {
            *out = types[i];
            return true;
        }
    return false;
}

/* Digits only: no sign, no blanks, no "*" wildcard, and it must fit an int. */
static bool parse_index(piece s, int *out)
{
    if (s.n == 0)
        return false;
    long v = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (!isdigit((unsigned char)s.p[i]))
            return false;
        v = v * 10 + (s.p[i] - '0');
        if (v > INT_MAX)
            return false;
    }
    *out = (int)v;
    return true;
}

/* TensorFlow's job names: a letter, then letters, digits and '_'. */
static bool valid_job(piece s)
{
    if (s.n == 0 || s.n >= JOB_MAX || !isalpha((unsigned char)s.p[0]))
        return false;
    for (size_t i = 1; i < s.n; i++)
        if (!isalnum((unsigned char)s.p[i]) && s.p[i] != '_')
            return false;
    return true;
}

static int set_job(parse_state *st, piece v, dr_err *err)
{
    if (st->has_job)
        return bad(st, err, "job given twice, again as", v, "");
    if (!valid_job(v))
        return bad(st, err, "bad job name", v, " (expected a letter, then letters, digits "
                   "or '_', at most 31 characters)");
    memcpy(st->spec->job, v.p, v.n);
    st->spec->job[v.n] = '\0';
    st->has_job = true;
    return DR_OK;
}

static int set_number(parse_state *st, bool *seen, int *dest, const char *field,
                      piece v, dr_err *err)
{
    char what[64];
    if (*seen) {
        snprintf(what, sizeof what, "%s given twice, again as", field);
        return bad(st, err, what, v, "");
    }
    if (!parse_index(v, dest)) {
        snprintf(what, sizeof what, "bad %s", field);
        return bad(st, err, what, v, WANT_INDEX);
    }
    *seen = true;
    return DR_OK;
}

/* type and optional index; index is a piece with p == NULL when absent. */
static int set_device(parse_state *st, piece type, piece index, dr_err *err)
{
    dr_device_spec *s = st->spec;
    if (s->has_type)
        return bad(st, err, "a second device type", type, "");
    if (!type_of(type, &s->type))
        return bad(st, err, "unknown device type", type, " (expected CPU, GPU or TPU)");
    s->index = 0;                           /* a missing index means 0 */
    if (index.p != NULL && !parse_index(index, &s->index))
        return bad(st, err, "bad device index", index, WANT_INDEX);
    s->has_type = 1;
    return DR_OK;
}

/* Splits a component on ':'; returns the number of parts, or MAX_PARTS + 1
 * when there are too many. */
static int split_parts(piece c, piece parts[MAX_PARTS])
{
    int k = 0;
    const char *p = c.p, *end = c.p + c.n;
    for (;;) {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        const char *stop = colon != NULL ? colon : end;
        if (k == MAX_PARTS)
            return MAX_PARTS + 1;
        parts[k++] = (piece){ p, (size_t)(stop - p) };
        if (colon == NULL)
            return k;
        p = colon + 1;
    }
}

static bool known_name(piece name)
{
    dr_device_type ignored;
    return piece_eq(name, "job") || piece_eq(name, "replica") || piece_eq(name, "task") ||
           piece_eq(name, "device") || type_of(name, &ignored);
}

static int parse_component(parse_state *st, piece c, dr_err *err)
{
    piece v[MAX_PARTS];
    int k = split_parts(c, v);
    piece none = { NULL, 0 };
    dr_device_type ignored;
    if (k == 2 && piece_eq(v[0], "job"))
        return set_job(st, v[1], err);
    if (k == 2 && piece_eq(v[0], "replica"))
        return set_number(st, &st->has_replica, &st->spec->replica, "replica", v[1], err);
    if (k == 2 && piece_eq(v[0], "task"))
        return set_number(st, &st->has_task, &st->spec->task, "task", v[1], err);
    if ((k == 2 || k == 3) && piece_eq(v[0], "device"))
        return set_device(st, v[1], k == 3 ? v[2] : none, err);
    if ((k == 1 || k == 2) && type_of(v[0], &ignored))
        return set_device(st, v[0], k == 2 ? v[1] : none, err);
    /* A known name with the wrong number of parts ("gpu:0:1", "job") is
     * malformed; an unknown name is reported as such. */
    if (k > MAX_PARTS || known_name(v[0]))
        return bad(st, err, "malformed component", c, "");
    return bad(st, err, "unknown field or device type", v[0],
               " (expected job, replica, task, device, CPU, GPU or TPU)");
}

static void spec_clear(dr_device_spec *s)
{
    memset(s, 0, sizeof *s);
    s->replica = -1;
    s->task = -1;
    s->type = DR_DEV_CPU;
}

int dr_device_parse(const char *s, dr_device_spec *out, dr_err *err)
{
    if (s == NULL || s[0] == '\0')
        return dr_fail(err, DR_EUSAGE, "device '': empty device string");
    dr_device_spec spec;
    spec_clear(&spec);
    parse_state st = { s, &spec, false, false, false };
    const char *p = s[0] == '/' ? s + 1 : s;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash != NULL ? (size_t)(slash - p) : strlen(p);
        if (n == 0)
            return dr_fail(err, DR_EUSAGE, "device '%s': empty component (stray '/')", s);
        int rc = parse_component(&st, (piece){ p, n }, err);
        if (rc != DR_OK)
            return rc;
        if (slash == NULL)
            break;
        p = slash + 1;
    }
    *out = spec;
    return DR_OK;
}

static const char *upper_type(dr_device_type t)
{
    switch (t) {
    case DR_DEV_CPU: return "CPU";
    case DR_DEV_GPU: return "GPU";
    case DR_DEV_TPU: return "TPU";
    }
    return "?";
}

void dr_device_spec_name(const dr_device_spec *s, char *buf, size_t n)
{
    const char *job = s->job[0] != '\0' ? s->job : "localhost";
    int replica = s->replica >= 0 ? s->replica : 0;
    int task = s->task >= 0 ? s->task : 0;
    if (n == 0)
        return;
    if (!s->has_type) {                     /* a host, not a device: no device part */
        snprintf(buf, n, "/job:%s/replica:%d/task:%d", job, replica, task);
        return;
    }
    snprintf(buf, n, "/job:%s/replica:%d/task:%d/device:%s:%d", job, replica, task,
             upper_type(s->type), s->index);
}

void dr_device_init(dr_device *d, const dr_device_spec *spec, uint64_t capacity)
{
    memset(d, 0, sizeof *d);
    d->spec = *spec;
    dr_device_spec_name(spec, d->name, sizeof d->name);
    d->capacity = capacity;
}

int dr_device_reserve(dr_device *d, uint64_t bytes, dr_err *err)
{
    /* Written as a subtraction so a huge request cannot wrap around. */
    if (d->capacity != 0 && (d->in_use > d->capacity || bytes > d->capacity - d->in_use))
        return dr_fail(err, DR_EDEVICE_OOM,
                       "%s: out of memory: requested %llu bytes, %llu of %llu in use",
                       d->name, (unsigned long long)bytes, (unsigned long long)d->in_use,
                       (unsigned long long)d->capacity);
    d->in_use += bytes;
    if (d->in_use > d->peak)
        d->peak = d->in_use;
    return DR_OK;
}

/* The caller passes the size it reserved. A larger one is a caller bug;
 * clamping keeps in_use from wrapping to 2^64 and failing every later
 * allocation with a misleading out-of-memory error. */
void dr_device_unreserve(dr_device *d, uint64_t bytes)
{
    d->in_use = bytes > d->in_use ? 0 : d->in_use - bytes;
}

int dr_device_alloc(dr_device *d, size_t bytes, void **out, dr_err *err)
{
    *out = NULL;
    int rc = dr_device_reserve(d, (uint64_t)bytes, err);
    if (rc != DR_OK)
        return rc;
    /* calloc(0) may return NULL; one byte keeps a zero-size buffer a real,
     * freeable pointer while the accounting still says 0. */
    void *p = calloc(bytes != 0 ? bytes : 1, 1);
    if (p == NULL) {
        dr_device_unreserve(d, (uint64_t)bytes);
        return dr_fail(err, DR_ENOMEM, "%s: host allocation of %zu bytes failed",
                       d->name, bytes);
    }
    *out = p;
    return DR_OK;
}

void dr_device_free(dr_device *d, void *p, size_t bytes)
{
    if (p == NULL)                          /* like free(NULL): nothing was allocated */
        return;
    free(p);
    dr_device_unreserve(d, (uint64_t)bytes);
}

void dr_device_copy(dr_device *dst, void *to, dr_device *src, const void *from, size_t bytes)
{
    if (bytes == 0)
        return;
    memmove(to, from, bytes);               /* within one device the ranges may overlap */
    if (src == dst)
        return;
    src->bytes_out += bytes;
    dst->bytes_in += bytes;
}
