/* distref core — NumPy .npy files of float32 (distref/npy.h). */
#include "distref/npy.h"
#include "distref/fileio.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t dr_npy_header(uint32_t ndim, const uint64_t *shape, char *out, size_t cap)
{
    char dict[64 + DR_NPY_MAX_DIMS * 24];
    size_t k, total, pad, hlen;
    if (ndim > DR_NPY_MAX_DIMS) return 0;
    k = (size_t)snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (uint32_t d = 0; d < ndim; d++)
        k += (size_t)snprintf(dict + k, sizeof dict - k, "%llu,%s", (unsigned long long)shape[d],
                              d + 1 < ndim ? " " : "");
    if (ndim > 1) k--;   /* (3, 4) but (3,) as NumPy writes them */
    k += (size_t)snprintf(dict + k, sizeof dict - k, "), }");
    total = 10 + k + 1;
    pad = (64 - total % 64) % 64;
    hlen = k + pad + 1;
    if (10 + hlen > cap || hlen > 0xffff) return 0;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (char)(hlen & 0xff);
    out[9] = (char)(hlen >> 8);
    memcpy(out + 10, dict, k);
    memset(out + 10 + k, ' ', pad);
    out[10 + hlen - 1] = '\n';
    return 10 + hlen;
}

int dr_npy_write_f32(const char *path, uint32_t ndim, const uint64_t *shape, const float *data, dr_err *err)
{
    char hdr[1024];
    uint64_t count = 1;
    size_t h = dr_npy_header(ndim, shape, hdr, sizeof hdr), bytes;
    uint8_t *buf;
    int rc;
    if (!h) return dr_fail(err, DR_EUSAGE, "%s: %u dimensions, at most %d", path, ndim, DR_NPY_MAX_DIMS);
    for (uint32_t d = 0; d < ndim; d++) count *= shape[d];
    bytes = h + (size_t)count * sizeof(float);
    if (!(buf = malloc(bytes + 1))) return dr_fail(err, DR_ENOMEM, "%s: out of memory", path);
    memcpy(buf, hdr, h);
    if (count) memcpy(buf + h, data, (size_t)count * sizeof(float));   /* little-endian hosts (x86-64, AArch64) */
    rc = dr_write_atomic(path, buf, bytes, err);
    free(buf);
    return rc;
}

/* ---- reading the header dict -------------------------------------------- */

typedef struct cursor { const char *p, *end; } cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool take(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) { c->p++; return true; }
    return false;
}

/* A quoted string (' or "), no escapes; into out (cap bytes). */
static bool quoted(cursor *c, char *out, size_t cap)
{
    char q;
    size_t n = 0;
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    q = *c->p++;
    while (c->p < c->end && *c->p != q) {
        if (n + 1 >= cap || *c->p == '\\') return false;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end) return false;
    c->p++;
    out[n] = '\0';
    return true;
}

static bool word(cursor *c, const char *w)
{
    size_t n = strlen(w);
    skip_ws(c);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return false;
    c->p += n;
    return true;
}

/* (d0, d1, ...) with an optional trailing comma; () is a scalar. */
static int shape_tuple(cursor *c, dr_npy *a, const char *name, dr_err *err)
{
    a->ndim = 0;
    if (!take(c, '(')) return dr_fail(err, DR_EFORMAT, "%s: header field 'shape': expected a tuple", name);
    for (;;) {
        uint64_t v = 0;
        if (take(c, ')')) return DR_OK;
        skip_ws(c);
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return dr_fail(err, DR_EFORMAT, "%s: header field 'shape': expected non-negative integers", name);
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > DR_NPY_MAX_COUNT) return dr_fail(err, DR_EFORMAT, "%s: header field 'shape': a dimension over 2^31", name);
            v = v * 10 + (uint64_t)(*c->p++ - '0');
        }
        if (c->p < c->end && *c->p == 'L') c->p++;   /* Python 2's long */
        if (a->ndim == DR_NPY_MAX_DIMS)
            return dr_fail(err, DR_EFORMAT, "%s: header field 'shape': more than %d dimensions", name, DR_NPY_MAX_DIMS);
        a->shape[a->ndim++] = v;
        if (take(c, ')')) return DR_OK;
        if (!take(c, ',')) return dr_fail(err, DR_EFORMAT, "%s: header field 'shape': expected ',' or ')'", name);
    }
}

static int header_dict(cursor *c, dr_npy *a, const char *name, dr_err *err)
{
    bool have_descr = false, have_order = false, have_shape = false;
    int rc;
    if (!take(c, '{')) return dr_fail(err, DR_EFORMAT, "%s: header: expected a dict '{...}'", name);
    while (!take(c, '}')) {
        char key[32], val[32];
        if (!quoted(c, key, sizeof key) || !take(c, ':'))
            return dr_fail(err, DR_EFORMAT, "%s: header: expected 'key': value", name);
        if (!strcmp(key, "descr")) {
            if (!quoted(c, val, sizeof val)) return dr_fail(err, DR_EFORMAT, "%s: header field 'descr': expected a string", name);
            if (strcmp(val, "<f4") != 0)
                return dr_fail(err, DR_EFORMAT, "%s: header field 'descr': dtype '%s'; only float32 ('<f4', little-endian) is "
                               "read", name, val);
            have_descr = true;
        } else if (!strcmp(key, "fortran_order")) {
            if (word(c, "True"))
                return dr_fail(err, DR_EFORMAT, "%s: header field 'fortran_order': True; only C order is read "
                               "(np.ascontiguousarray before np.save)", name);
            if (!word(c, "False")) return dr_fail(err, DR_EFORMAT, "%s: header field 'fortran_order': expected False", name);
            have_order = true;
        } else if (!strcmp(key, "shape")) {
            if ((rc = shape_tuple(c, a, name, err))) return rc;
            have_shape = true;
        } else {
            return dr_fail(err, DR_EFORMAT, "%s: header: unknown field '%s'", name, key);
        }
        if (!take(c, ',')) {
            if (take(c, '}')) break;
            return dr_fail(err, DR_EFORMAT, "%s: header: expected ',' or '}' after field '%s'", name, key);
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return dr_fail(err, DR_EFORMAT, "%s: header: field '%s' missing", name,
                       !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    return DR_OK;
}

int dr_npy_parse(const uint8_t *buf, size_t n, const char *name, dr_npy *out, dr_err *err)
{
    size_t hlen, start;
    cursor c;
    int rc;
    memset(out, 0, sizeof *out);
    if (n < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return dr_fail(err, DR_EFORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", name);
    if (buf[6] == 1 && buf[7] == 0) { hlen = (size_t)buf[8] | (size_t)buf[9] << 8; start = 10; }
    else if ((buf[6] == 2 || buf[6] == 3) && buf[7] == 0 && n >= 12) {
        hlen = dr_get_u32le(buf + 8);
        start = 12;
    } else {
        return dr_fail(err, DR_EFORMAT, "%s: .npy version %u.%u; 1.0, 2.0 and 3.0 are read", name, buf[6], buf[7]);
    }
    if (hlen > n - start) return dr_fail(err, DR_EFORMAT, "%s: truncated: header of %zu bytes, file has %zu after the "
                                         "magic", name, hlen, n - start);
    c.p = (const char *)buf + start;
    c.end = c.p + hlen;
    if ((rc = header_dict(&c, out, name, err))) return rc;
    out->count = 1;
    for (uint32_t d = 0; d < out->ndim; d++) {
        out->count *= out->shape[d];
        if (out->count > DR_NPY_MAX_COUNT)
            return dr_fail(err, DR_EFORMAT, "%s: header field 'shape': more than 2^31 elements", name);
    }
    start += hlen;
    if (n - start != out->count * sizeof(float))
        return dr_fail(err, DR_EFORMAT, "%s: %s: the shape says %llu bytes of data, the file has %zu", name,
                       n - start < out->count * sizeof(float) ? "truncated" : "trailing bytes",
                       (unsigned long long)(out->count * sizeof(float)), n - start);
    if (!(out->data = malloc(out->count * sizeof(float) + 1))) return dr_fail(err, DR_ENOMEM, "%s: out of memory", name);
    if (out->count) memcpy(out->data, buf + start, out->count * sizeof(float));
    return DR_OK;
}

int dr_npy_load(const char *path, dr_npy *out, dr_err *err)
{
    uint8_t *buf = NULL;
    size_t n = 0;
    int rc = dr_read_regular(path, (size_t)DR_NPY_MAX_COUNT * sizeof(float) + 65536 + 12, &buf, &n, err);
    memset(out, 0, sizeof *out);
    if (rc == DR_OK) rc = dr_npy_parse(buf, n, path, out, err);
    free(buf);
    return rc;
}

void dr_npy_free(dr_npy *a)
{
    free(a->data);
    a->data = NULL;
}
