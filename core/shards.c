/* distref core — shard files and their index (distref/shards.h). */
#include "distref/shards.h"
#include "distref/fileio.h"
#include "distref/input.h"
#include "distref/sha256.h"

#include <json-c/json.h>
#include "core/json_text.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/seams.h"

#define BAD(...) dr_fail(err, DR_EUSAGE, __VA_ARGS__)
/* found while reading a file that exists with the index's size: its content
 * disagrees (DR_EFORMAT; under mpirun only this rank knows it) */
#define CORRUPT(...) dr_fail(err, DR_EFORMAT, __VA_ARGS__)

static const char k_magic[8] = { 'D', 'R', 'S', 'H', 'A', 'R', 'D', '1' };

uint32_t dr_shard_file_worker(uint32_t i, uint32_t W)
{
    return W ? i % W : 0;
}

void dr_shard_index_free(dr_shard_index *ix)
{
    if (!ix) return;
    free(ix->files);
    memset(ix, 0, sizeof *ix);
}

uint32_t *dr_shard_bounds(const dr_shard_index *ix)
{
    uint32_t *b = malloc(sizeof *b * ((size_t)ix->nfiles + 1));
    if (!b) return NULL;
    for (uint32_t i = 0; i < ix->nfiles; i++) b[i] = ix->files[i].first;
    b[ix->nfiles] = ix->examples;
    return b;
}

int dr_shards_iter(const char *dir, dr_dist_iter *it, uint32_t W, dr_err *err)
{
    dr_shard_index ix;
    uint32_t *first;
    int rc = dr_shard_index_load(dir, &ix, NULL, err);
    if (rc) return rc;
    if (!(first = dr_shard_bounds(&ix))) rc = dr_fail(err, DR_ENOMEM, "out of memory for %u shard files", ix.nfiles);
    else rc = dr_dist_iter_files(it, W, ix.nfiles, first, err);
    free(first);
    dr_shard_index_free(&ix);
    return rc;
}

/* ---- the index ---------------------------------------------------------- */

/* A u32 field of o: present, an integer in [lo, hi]. */
static int get_u32(json_object *o, const char *key, const char *where, uint64_t lo, uint64_t hi, uint64_t *out,
                   dr_err *err)
{
    json_object *v;
    int64_t x;
    if (!json_object_object_get_ex(o, key, &v)) return BAD("%s: field \"%s\" is missing", where, key);
    if (!json_object_is_type(v, json_type_int)) return BAD("%s: field \"%s\": expected an integer", where, key);
    x = json_object_get_int64(v);
    if (x < 0 || (uint64_t)x < lo || (uint64_t)x > hi)
        return BAD("%s: field \"%s\": %lld, expected %llu..%llu", where, key, (long long)x, (unsigned long long)lo,
                   (unsigned long long)hi);
    *out = (uint64_t)x;
    return DR_OK;
}

static int get_str(json_object *o, const char *key, const char *where, char *out, size_t n, dr_err *err)
{
    json_object *v;
    const char *s;
    if (!json_object_object_get_ex(o, key, &v)) return BAD("%s: field \"%s\" is missing", where, key);
    if (!json_object_is_type(v, json_type_string)) return BAD("%s: field \"%s\": expected a string", where, key);
    s = json_object_get_string(v);
    if (strlen(s) >= n) return BAD("%s: field \"%s\": longer than %zu characters", where, key, n - 1);
    memcpy(out, s, strlen(s) + 1);
    return DR_OK;
}

static bool name_ok(const char *s)
{
    if (!s[0] || s[0] == '.') return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
              *p == '_' || *p == '.'))
            return false;
    return true;
}

static bool hex_ok(const char *s)
{
    if (strlen(s) != 64) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

static int parse_file(json_object *f, uint32_t i, const char *name, dr_shard_index *ix, uint32_t at, dr_err *err)
{
    char where[160];
    dr_shard_file *s = &ix->files[i];
    uint64_t v, want;
    int rc;
    snprintf(where, sizeof where, "%s: files[%u]", name, i);
    if (!json_object_is_type(f, json_type_object)) return BAD("%s: expected an object", where);
    if ((rc = get_str(f, "name", where, s->name, sizeof s->name, err))) return rc;
    if (!name_ok(s->name))
        return BAD("%s: field \"name\": '%s' is not a plain file name (letters, digits, '-', '_', '.'; no '/')", where,
                   s->name);
    for (uint32_t j = 0; j < i; j++)
        if (!strcmp(ix->files[j].name, s->name)) return BAD("%s: field \"name\": '%s' is files[%u] too", where, s->name, j);
    if ((rc = get_u32(f, "first", where, 0, UINT32_MAX, &v, err))) return rc;
    if (v != at) return BAD("%s: field \"first\": %llu, expected %u (where files[%u] ends)", where,
                            (unsigned long long)v, at, i ? i - 1 : 0);
    s->first = (uint32_t)v;
    if ((rc = get_u32(f, "examples", where, 1, ix->examples, &v, err))) return rc;
    s->examples = (uint32_t)v;
    if ((rc = get_u32(f, "bytes", where, 0, UINT64_MAX >> 1, &s->bytes, err))) return rc;
    want = DR_SHARD_HEADER + (uint64_t)s->examples * (ix->features + 1);
    if (s->bytes != want)
        return BAD("%s: field \"bytes\": %llu, expected %llu (32 + %u examples x %u bytes)", where,
                   (unsigned long long)s->bytes, (unsigned long long)want, s->examples, ix->features + 1);
    if ((rc = get_str(f, "sha256", where, s->sha256, sizeof s->sha256, err))) return rc;
    if (!hex_ok(s->sha256)) return BAD("%s: field \"sha256\": expected 64 lower-case hex digits", where);
    return DR_OK;
}

static int parse_object(json_object *o, const char *name, dr_shard_index *ix, dr_err *err)
{
    json_object *fv;
    char fmt[32];
    uint64_t v;
    uint32_t at = 0;
    int rc;
    if (!json_object_is_type(o, json_type_object)) return BAD("%s: expected a JSON object", name);
    if ((rc = get_str(o, "format", name, fmt, sizeof fmt, err))) return rc;
    if (strcmp(fmt, DR_SHARDS_FORMAT)) return BAD("%s: field \"format\": '%s', expected '%s'", name, fmt, DR_SHARDS_FORMAT);
    if ((rc = get_u32(o, "version", name, 1, 1, &v, err))) return rc;
    if ((rc = get_str(o, "dataset", name, ix->dataset, sizeof ix->dataset, err))) return rc;
    if (!name_ok(ix->dataset))   /* written back unescaped by dr_shard_index_format */
        return BAD("%s: field \"dataset\": '%s' is not a dataset name (letters, digits, '-', '_', '.')", name,
                   ix->dataset);
    if ((rc = get_u32(o, "examples", name, 1, UINT32_MAX, &v, err))) return rc;
    ix->examples = (uint32_t)v;
    if ((rc = get_u32(o, "features", name, 1, 1u << 20, &v, err))) return rc;
    ix->features = (uint32_t)v;
    if ((rc = get_u32(o, "classes", name, 1, 256, &v, err))) return rc;
    ix->classes = (uint32_t)v;
    if ((uint64_t)ix->examples * ix->features > ((uint64_t)1 << 40))
        return BAD("%s: %u examples x %u features: more than 2^40 bytes", name, ix->examples, ix->features);
    if (!json_object_object_get_ex(o, "files", &fv) || !json_object_is_type(fv, json_type_array))
        return BAD("%s: field \"files\": expected an array", name);
    if (json_object_array_length(fv) < 1 || json_object_array_length(fv) > DR_SHARDS_MAX_FILES)
        return BAD("%s: field \"files\": %zu files, expected 1..%u", name, json_object_array_length(fv),
                   DR_SHARDS_MAX_FILES);
    ix->nfiles = (uint32_t)json_object_array_length(fv);
    if (!(ix->files = calloc(ix->nfiles, sizeof *ix->files))) return dr_fail(err, DR_ENOMEM, "%s: out of memory", name);
    for (uint32_t i = 0; i < ix->nfiles; i++) {
        if ((rc = parse_file(json_object_array_get_idx(fv, i), i, name, ix, at, err))) return rc;
        if (ix->files[i].examples > ix->examples - at)
            return BAD("%s: files[%u]: field \"examples\": %u, but only %u of the %u examples are left", name, i,
                       ix->files[i].examples, ix->examples - at, ix->examples);
        at += ix->files[i].examples;
    }
    if (at != ix->examples)
        return BAD("%s: field \"examples\": %u, but the files hold %u", name, ix->examples, at);
    return DR_OK;
}

int dr_shard_index_parse(const char *text, size_t len, const char *name, dr_shard_index *out, dr_err *err)
{
    json_object *o;
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = dr_json_text_parse(text, len, DR_SHARDS_INDEX_MAX, name, DR_EUSAGE, &o, err))) return rc;
    rc = parse_object(o, name, out, err);
    json_object_put(o);
    if (rc) dr_shard_index_free(out);
    return rc;
}

int dr_shard_index_load(const char *dir, dr_shard_index *out, uint64_t *index_bytes, dr_err *err)
{
    char path[1200];
    uint8_t *buf = NULL;
    size_t n = 0;
    int rc;
    memset(out, 0, sizeof *out);
    snprintf(path, sizeof path, "%s/" DR_SHARDS_INDEX, dir);
    rc = dr_read_regular(path, DR_SHARDS_INDEX_MAX, &buf, &n, err);
    if (rc) {
        free(buf);
        dr_fail_wrap(err, "--dataset_shards=%s: the index (written by `distref export --what=shards`)", dir);
        err->code = DR_EUSAGE;
        return DR_EUSAGE;
    }
    if (index_bytes) *index_bytes = n;
    rc = dr_shard_index_parse((const char *)buf, n, path, out, err);
    free(buf);
    return rc;
}

char *dr_shard_index_format(const dr_shard_index *ix)
{
    size_t cap = 256 + (size_t)ix->nfiles * 200, len;
    char *s = malloc(cap);
    if (!s) return NULL;
    len = (size_t)snprintf(s, cap, "{\"format\": \"%s\", \"version\": 1, \"dataset\": \"%s\", \"examples\": %u, "
                           "\"features\": %u, \"classes\": %u, \"files\": [", DR_SHARDS_FORMAT, ix->dataset,
                           ix->examples, ix->features, ix->classes);
    for (uint32_t i = 0; i < ix->nfiles; i++) {
        const dr_shard_file *f = &ix->files[i];
        len += (size_t)snprintf(s + len, cap - len, "%s\n  {\"name\": \"%s\", \"first\": %u, \"examples\": %u, "
                                "\"bytes\": %llu, \"sha256\": \"%s\"}", i ? "," : "", f->name, f->first, f->examples,
                                (unsigned long long)f->bytes, f->sha256);
    }
    snprintf(s + len, cap - len, "]}\n");
    return s;
}

/* ---- writing ------------------------------------------------------------ */

static void put_header(uint8_t *h, uint32_t i, uint32_t n, uint32_t first, uint32_t count, uint32_t features,
                       uint32_t classes)
{
    memcpy(h, k_magic, 8);
    dr_put_u32le(h + 8, i);
    dr_put_u32le(h + 12, n);
    dr_put_u32le(h + 16, first);
    dr_put_u32le(h + 20, count);
    dr_put_u32le(h + 24, features);
    dr_put_u32le(h + 28, classes);
}

static int write_one(const char *dir, const dr_dataset *d, dr_shard_index *ix, uint32_t i, dr_err *err)
{
    dr_shard_file *f = &ix->files[i];
    uint64_t bytes = DR_SHARD_HEADER + (uint64_t)f->examples * (d->features + 1);
    uint8_t *buf = malloc((size_t)bytes);
    char path[1200];
    int rc;
    if (!buf) return dr_fail(err, DR_ENOMEM, "export --what=shards: out of memory for shard %u", i);
    snprintf(f->name, sizeof f->name, "shard-%05u-of-%05u.bin", i, ix->nfiles);
    put_header(buf, i, ix->nfiles, f->first, f->examples, d->features, d->classes);
    memcpy(buf + DR_SHARD_HEADER, d->pixels + (size_t)f->first * d->features, (size_t)f->examples * d->features);
    memcpy(buf + DR_SHARD_HEADER + (size_t)f->examples * d->features, d->labels + f->first, f->examples);
    f->bytes = bytes;
    dr_sha256_hex(buf, (size_t)bytes, f->sha256);
    snprintf(path, sizeof path, "%s/%s", dir, f->name);
    rc = dr_write_atomic(path, buf, (size_t)bytes, err);
    free(buf);
    return rc;
}

int dr_shards_write(const char *dir, const char *dataset, const dr_dataset *d, uint32_t n, dr_err *err)
{
    dr_shard_index ix;
    char path[1200], *text;
    int rc = DR_OK;
    if (!d->pixels || !d->labels)
        return dr_fail(err, DR_EUSAGE, "not supported: --what=shards for the %s dataset: shard files hold "
                       "byte images with labels (synthetic, fashion_mnist)", d->name);
    if (n == 0 || n > d->n || n > DR_SHARDS_MAX_FILES)
        return BAD("--num_shards=%u: expected 1..%u (at most one file per example of the %u, and at most %u files)", n,
                   d->n < DR_SHARDS_MAX_FILES ? d->n : DR_SHARDS_MAX_FILES, d->n, DR_SHARDS_MAX_FILES);
    memset(&ix, 0, sizeof ix);
    snprintf(ix.dataset, sizeof ix.dataset, "%s", dataset);
    ix.examples = d->n;
    ix.features = d->features;
    ix.classes = d->classes;
    ix.nfiles = n;
    if (!(ix.files = calloc(n, sizeof *ix.files))) return dr_fail(err, DR_ENOMEM, "export: out of memory");
    for (uint32_t i = 0; i < n && rc == DR_OK; i++) {   /* file i: examples [i n_ex / n, (i+1) n_ex / n) */
        ix.files[i].first = (uint32_t)((uint64_t)i * d->n / n);
        ix.files[i].examples = (uint32_t)((uint64_t)(i + 1) * d->n / n) - ix.files[i].first;
        rc = write_one(dir, d, &ix, i, err);
    }
    if (rc == DR_OK && !(text = dr_shard_index_format(&ix))) rc = dr_fail(err, DR_ENOMEM, "export: out of memory");
    if (rc == DR_OK) {
        snprintf(path, sizeof path, "%s/" DR_SHARDS_INDEX, dir);
        rc = dr_write_atomic(path, text, strlen(text), err);
        free(text);
    }
    dr_shard_index_free(&ix);
    return rc;
}

/* ---- reading ------------------------------------------------------------ */

static uint32_t get_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The header's six fields against the index's. */
static int check_header(const uint8_t *h, const char *path, const dr_shard_index *ix, uint32_t i, dr_err *err)
{
    static const char *const field[6] = { "shard index", "number of shards", "first example", "examples",
                                          "features", "classes" };
    const dr_shard_file *f = &ix->files[i];
    uint32_t want[6] = { i, ix->nfiles, f->first, f->examples, ix->features, ix->classes };
    if (memcmp(h, k_magic, 8)) return CORRUPT("%s: not a distref shard file (no DRSHARD1 header)", path);
    for (int k = 0; k < 6; k++)
        if (get_u32le(h + 8 + 4 * k) != want[k])
            return CORRUPT("%s: its header's %s is %u, the index (" DR_SHARDS_INDEX ") says %u", path, field[k],
                       get_u32le(h + 8 + 4 * k), want[k]);
    return DR_OK;
}

static int read_one(const char *dir, const dr_shard_index *ix, uint32_t i, dr_dataset *d, dr_shard_reads *rd,
                    dr_err *err)
{
    const dr_shard_file *f = &ix->files[i];
    char path[1200], hex[65];
    uint8_t *buf = NULL;
    size_t n = 0, px;
    int rc;
    snprintf(path, sizeof path, "%s/%s", dir, f->name);
    rc = dr_read_regular(path, (size_t)f->bytes + 1, &buf, &n, err);
    rd->data_bytes += n;   /* what the read returned */
    if (rc) {
        free(buf);
        return dr_fail_wrap(err, "--dataset_shards=%s: files[%u] of " DR_SHARDS_INDEX, dir, i);
    }
    if (n != f->bytes) rc = CORRUPT("%s: %zu bytes, the index (" DR_SHARDS_INDEX ") says files[%u].bytes = %llu", path, n, i,
                                (unsigned long long)f->bytes);
    if (!rc) rc = check_header(buf, path, ix, i, err);
    if (!rc) {
        dr_sha256_hex(buf, n, hex);
        if (strcmp(hex, f->sha256))
            rc = CORRUPT("%s: SHA-256 %s, the index (" DR_SHARDS_INDEX ") says files[%u].sha256 = %s", path, hex, i, f->sha256);
    }
    px = (size_t)f->examples * ix->features;
    for (uint32_t k = 0; !rc && k < f->examples; k++)
        if (buf[DR_SHARD_HEADER + px + k] >= ix->classes)
            rc = CORRUPT("%s: example %u (id %u) has label %u, expected < %u classes", path, k, f->first + k,
                     buf[DR_SHARD_HEADER + px + k], ix->classes);
    if (!rc) {
        memcpy(d->pixels + (size_t)f->first * ix->features, buf + DR_SHARD_HEADER, px);
        memcpy(d->labels + f->first, buf + DR_SHARD_HEADER + px, f->examples);
    }
    free(buf);
    return rc;
}

static void note_file(dr_shard_reads *rd, uint32_t i)
{
    size_t len = strlen(rd->list);
    if (len + 16 >= sizeof rd->list) {
        if (!strstr(rd->list, "...")) snprintf(rd->list + len, sizeof rd->list - len, ",...");
        return;
    }
    snprintf(rd->list + len, sizeof rd->list - len, "%s%u", len ? "," : "", i);
}

int dr_shards_check(const char *dir, uint32_t W, uint32_t w, dr_err *err)
{
    dr_shard_index ix;
    char path[1200];
    struct stat st;
    int rc = dr_shard_index_load(dir, &ix, NULL, err);
    for (uint32_t i = 0; rc == DR_OK && i < ix.nfiles; i++) {
        if (w != DR_SHARDS_ALL && !DR_SEAM_SHARD_OPENS(i, W, w)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, ix.files[i].name);
        if (lstat(path, &st) != 0)
            rc = BAD("--dataset_shards=%s: %s: %s (files[%u] of " DR_SHARDS_INDEX ")", dir, path, strerror(errno), i);
        else if (!S_ISREG(st.st_mode))
            rc = BAD("--dataset_shards=%s: %s: not a regular file (files[%u] of " DR_SHARDS_INDEX ")", dir, path, i);
        else if ((uint64_t)st.st_size != ix.files[i].bytes)
            rc = BAD("--dataset_shards=%s: %s: %llu bytes, the index (" DR_SHARDS_INDEX ") says files[%u].bytes = %llu",
                     dir, path, (unsigned long long)st.st_size, i, (unsigned long long)ix.files[i].bytes);
    }
    dr_shard_index_free(&ix);
    return rc;
}

int dr_shards_load(const char *dir, const char *dataset, uint32_t W, uint32_t w, dr_dataset *out,
                   dr_shard_reads *reads, dr_err *err)
{
    dr_shard_index ix;
    dr_shard_reads rd;
    int rc;
    memset(out, 0, sizeof *out);
    memset(&rd, 0, sizeof rd);
    if ((rc = dr_shard_index_load(dir, &ix, &rd.index_bytes, err))) return rc;
    if (strcmp(ix.dataset, dataset)) {
        rc = BAD("--dataset_shards=%s: " DR_SHARDS_INDEX " holds the %s dataset, the experiment trains on %s", dir,
                 ix.dataset, dataset);
        dr_shard_index_free(&ix);
        return rc;
    }
    snprintf(out->name, sizeof out->name, "%s", dataset);
    out->n = ix.examples;
    out->features = ix.features;
    out->classes = ix.classes;
    out->pixels = calloc((size_t)ix.examples * ix.features + 1, 1);
    out->labels = calloc((size_t)ix.examples + 1, 1);
    rc = out->pixels && out->labels ? DR_OK : dr_fail(err, DR_ENOMEM, "--dataset_shards: out of memory for %u examples",
                                                      ix.examples);
    rd.files = ix.nfiles;
    for (uint32_t i = 0; i < ix.nfiles && rc == DR_OK; i++) {
        if (w != DR_SHARDS_ALL && !DR_SEAM_SHARD_OPENS(i, W, w)) continue;
        rc = read_one(dir, &ix, i, out, &rd, err);
        rd.files_read++;
        note_file(&rd, i);
    }
    dr_shard_index_free(&ix);
    if (reads) *reads = rd;
    if (rc) dr_dataset_free(out);
    return rc;
}
