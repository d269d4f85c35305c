/* distref core — a file of Dropout masks (distref/dropout_masks.h). */
#include "distref/dropout_masks.h"
#include "distref/fileio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The header's fields after the magic, in file order. */
static int header(const uint8_t *buf, size_t n, const char *name, dr_dropout_masks *o, dr_err *err)
{
    uint32_t version;
    if (n < DR_DROPOUT_MASKS_HEADER)
        return dr_fail(err, DR_EFORMAT, "%s: %zu bytes, shorter than the %u-byte header (magic, version, layers, "
                       "steps, rows)", name, n, DR_DROPOUT_MASKS_HEADER);
    if (memcmp(buf, DR_DROPOUT_MASKS_MAGIC, 8) != 0)
        return dr_fail(err, DR_EFORMAT, "%s: field magic: expected \"DRMASKS\\0\" (a dropout masks file, "
                       "docs/MODELS.md)", name);
    version = dr_get_u32le(buf + 8);
    o->layers = dr_get_u32le(buf + 12);
    o->steps = dr_get_u32le(buf + 16);
    o->rows = dr_get_u32le(buf + 20);
    if (version != DR_DROPOUT_MASKS_VERSION)
        return dr_fail(err, DR_EFORMAT, "%s: field version: %u, this distref reads version %u", name, version,
                       DR_DROPOUT_MASKS_VERSION);
    if (o->layers < 1 || o->layers > DR_MAX_LAYERS)
        return dr_fail(err, DR_EFORMAT, "%s: field layers: %u, expected 1..%u", name, o->layers, DR_MAX_LAYERS);
    if (o->steps < 1) return dr_fail(err, DR_EFORMAT, "%s: field steps: 0, expected at least 1", name);
    if (o->rows < 1) return dr_fail(err, DR_EFORMAT, "%s: field rows: 0, expected at least 1", name);
    if (n < DR_DROPOUT_MASKS_HEADER + 4ull * o->layers)
        return dr_fail(err, DR_EFORMAT, "%s: truncated: %zu bytes, the header with %u layers' units needs %llu", name,
                       n, o->layers, (unsigned long long)(DR_DROPOUT_MASKS_HEADER + 4ull * o->layers));
    return DR_OK;
}

/* units[], each block's offset within a step, and the file's length, which
 * must be n (every product bounded: units and rows are u32, so a block is
 * below 2^64, and the total is checked against the cap before it grows). */
static int layout(const uint8_t *buf, size_t n, const char *name, dr_dropout_masks *o, dr_err *err)
{
    uint64_t body, want;
    o->step_bytes = 0;
    for (uint32_t k = 0; k < o->layers; k++) {
        o->units[k] = dr_get_u32le(buf + DR_DROPOUT_MASKS_HEADER + 4 * k);
        if (o->units[k] < 1) return dr_fail(err, DR_EFORMAT, "%s: field units[%u]: 0, expected at least 1", name, k);
        o->layer_off[k] = o->step_bytes;
        o->step_bytes += (uint64_t)o->rows * o->units[k];
        if (o->step_bytes > DR_DROPOUT_MASKS_MAX_BYTES)
            return dr_fail(err, DR_EFORMAT, "%s: field units[%u]: one step's masks exceed %llu bytes", name, k,
                           (unsigned long long)DR_DROPOUT_MASKS_MAX_BYTES);
    }
    if (o->step_bytes * o->steps > DR_DROPOUT_MASKS_MAX_BYTES)   /* both <= 2^32: no overflow */
        return dr_fail(err, DR_EFORMAT, "%s: field steps: %u steps of %llu bytes exceed %llu bytes", name, o->steps,
                       (unsigned long long)o->step_bytes, (unsigned long long)DR_DROPOUT_MASKS_MAX_BYTES);
    body = o->step_bytes * o->steps;
    want = DR_DROPOUT_MASKS_HEADER + 4ull * o->layers + body;
    if (n < want)
        return dr_fail(err, DR_EFORMAT, "%s: truncated: %zu bytes, the header says %u steps x %u rows (%llu bytes "
                       "in all)", name, n, o->steps, o->rows, (unsigned long long)want);
    if (n > want)
        return dr_fail(err, DR_EFORMAT, "%s: %zu bytes after the masks' end at byte %llu (trailing data)", name,
                       n - (size_t)want, (unsigned long long)want);
    return DR_OK;
}

int dr_dropout_masks_parse(const uint8_t *buf, size_t n, const char *name, dr_dropout_masks *out, dr_err *err)
{
    const uint8_t *body;
    size_t len;
    int rc;
    memset(out, 0, sizeof *out);
    for (uint32_t l = 0; l < DR_MAX_LAYERS; l++) out->slot[l] = -1;
    if ((rc = header(buf, n, name, out, err)) || (rc = layout(buf, n, name, out, err))) return rc;
    body = buf + DR_DROPOUT_MASKS_HEADER + 4 * (size_t)out->layers;
    len = (size_t)(out->step_bytes * out->steps);
    for (size_t i = 0; i < len; i++) {
        if (body[i] <= 1) continue;
        {   /* name the cell: step, layer, row, unit */
            uint64_t s = i / out->step_bytes, at = i % out->step_bytes;
            uint32_t k = 0;
            while (k + 1 < out->layers && at >= out->layer_off[k + 1]) k++;
            at -= out->layer_off[k];
            return dr_fail(err, DR_EFORMAT, "%s: field mask at step %llu, layer %u, row %llu, unit %llu: %u, "
                           "expected 0 (dropped) or 1 (kept)", name, (unsigned long long)s, k,
                           (unsigned long long)(at / out->units[k]), (unsigned long long)(at % out->units[k]), body[i]);
        }
    }
    out->keep = malloc(len ? len : 1);
    if (!out->keep) return dr_fail(err, DR_ENOMEM, "%s: out of host memory for %zu bytes of masks", name, len);
    memcpy(out->keep, body, len);
    return DR_OK;
}

int dr_dropout_masks_load(const char *path, dr_dropout_masks *out, dr_err *err)
{
    char name[1100];
    uint8_t *buf = NULL;
    size_t n = 0;
    int rc;
    snprintf(name, sizeof name, "--dropout_masks=%s", path);
    memset(out, 0, sizeof *out);
    rc = dr_read_file(path, DR_DROPOUT_MASKS_MAX_BYTES + DR_DROPOUT_MASKS_HEADER + 4 * DR_MAX_LAYERS, &buf, &n, err);
    if (rc != DR_OK) dr_fail_wrap(err, "%s", name);
    else rc = dr_dropout_masks_parse(buf, n, name, out, err);
    free(buf);
    /* a flag's file that is missing or does not parse: the caller's mistake (exit 2) */
    if (rc == DR_EIO || rc == DR_EFORMAT) rc = err->code = DR_EUSAGE;
    return rc;
}

int dr_dropout_masks_check(dr_dropout_masks *mk, const dr_model_spec *m, uint32_t G, uint64_t steps,
                           const char *path, dr_err *err)
{
    uint32_t k = 0;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        mk->slot[l] = -1;
        if (m->layer[l].kind != DR_LAYER_DROPOUT) continue;
        if (k < mk->layers && mk->units[k] != m->layer[l].out)
            return dr_fail(err, DR_EUSAGE, "--dropout_masks=%s: field units[%u]: %u, but the model's Dropout layer %u "
                           "(its layer %u) has %u units", path, k, mk->units[k], k, l, m->layer[l].out);
        mk->slot[l] = (int32_t)k++;
    }
    if (k != mk->layers)
        return dr_fail(err, DR_EUSAGE, "--dropout_masks=%s: field layers: %u, but the model has %u Dropout layer%s",
                       path, mk->layers, k, k == 1 ? "" : "s");
    if (mk->rows != G)
        return dr_fail(err, DR_EUSAGE, "--dropout_masks=%s: field rows: %u, but the global batch size is %u", path,
                       mk->rows, G);
    if (mk->steps < steps)
        return dr_fail(err, DR_EUSAGE, "--dropout_masks=%s: field steps: %u, but the run trains %llu steps", path,
                       mk->steps, (unsigned long long)steps);
    return DR_OK;
}

bool dr_dropout_masks_keep(const dr_dropout_masks *mk, uint64_t step, uint32_t l, uint32_t row, uint32_t u)
{
    uint32_t k = (uint32_t)mk->slot[l];
    return mk->keep[(step - 1) * mk->step_bytes + mk->layer_off[k] + (uint64_t)row * mk->units[k] + u] != 0;
}

void dr_dropout_masks_free(dr_dropout_masks *mk)
{
    free(mk->keep);
    mk->keep = NULL;
}
