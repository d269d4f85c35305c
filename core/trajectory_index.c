/* distref core — a trajectory's index.json: reading (every field checked,
 * each refusal naming the file and the field) and writing
 * (distref/trajectory.h; docs/JUDGING.md). */
#include "distref/trajectory.h"
#include "distref/fileio.h"

#include <json-c/json.h>
#include "core/json_text.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) dr_fail(err, DR_EFORMAT, __VA_ARGS__)

static json_object *field(json_object *o, const char *key)
{
    json_object *v = NULL;
    return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* A non-negative integer written as one (not 1.0, not "1"). */
static bool uint_of(json_object *v, uint64_t max, uint64_t *out)
{
    int64_t x;
    if (!v || !json_object_is_type(v, json_type_int)) return false;
    x = json_object_get_int64(v);
    if (x < 0 || (uint64_t)x > max) return false;
    *out = (uint64_t)x;
    return true;
}

static int parse_tensor(json_object *t, uint32_t i, const char *name, dr_traj_tensor *out, dr_err *err)
{
    json_object *nm = field(t, "name"), *sh = field(t, "shape"), *dt = field(t, "dtype");
    const char *s;
    if (!json_object_is_type(t, json_type_object)) return BAD("%s: tensors[%u]: expected an object", name, i);
    if (!nm || !json_object_is_type(nm, json_type_string) || !dr_traj_name_ok(s = json_object_get_string(nm)))
        return BAD("%s: tensors[%u].name: expected a name of [A-Za-z0-9_.-] components joined by '/', under %d "
                   "characters", name, i, DR_TRAJ_NAME_MAX);
    snprintf(out->name, sizeof out->name, "%s", s);
    if (!dt || !json_object_is_type(dt, json_type_string))
        return BAD("%s: tensors[%u].dtype ('%s'): expected \"float32\"", name, i, out->name);
    if (strcmp(json_object_get_string(dt), "float32") != 0)
        return BAD("%s: tensors[%u].dtype ('%s'): '%s'; only float32 is compared", name, i, out->name,
                   json_object_get_string(dt));
    if (!sh || !json_object_is_type(sh, json_type_array) || json_object_array_length(sh) > DR_NPY_MAX_DIMS)
        return BAD("%s: tensors[%u].shape ('%s'): expected a list of at most %d integers", name, i, out->name,
                   DR_NPY_MAX_DIMS);
    out->ndim = (uint32_t)json_object_array_length(sh);
    for (uint32_t d = 0; d < out->ndim; d++)
        if (!uint_of(json_object_array_get_idx(sh, d), DR_NPY_MAX_COUNT, &out->shape[d]))
            return BAD("%s: tensors[%u].shape[%u] ('%s'): expected an integer in [0, 2^31]", name, i, d, out->name);
    return DR_OK;
}

static int parse_step(json_object *s, uint32_t i, const char *name, dr_traj_index *ix, dr_err *err)
{
    dr_traj_step *st = &ix->steps[i];
    json_object *sv = field(s, "step"), *dv = field(s, "dir"), *tv = field(s, "tensors");
    const char *d;
    if (!json_object_is_type(s, json_type_object)) return BAD("%s: steps[%u]: expected an object", name, i);
    if (!uint_of(sv, 1ull << 53, &st->step)) return BAD("%s: steps[%u].step: expected an integer >= 0", name, i);
    if (i > 0 && st->step <= st[-1].step)
        return BAD("%s: steps[%u].step: %llu after %llu; steps must ascend, each once", name, i,
                   (unsigned long long)st->step, (unsigned long long)st[-1].step);
    if (!dv || !json_object_is_type(dv, json_type_string) || strchr(d = json_object_get_string(dv), '/') ||
        strlen(d) >= sizeof st->dir || !dr_traj_name_ok(d))
        return BAD("%s: steps[%u].dir (step %llu): expected a folder name of [A-Za-z0-9_.-]", name, i,
                   (unsigned long long)st->step);
    snprintf(st->dir, sizeof st->dir, "%s", d);
    if (!tv || !json_object_is_type(tv, json_type_array) || json_object_array_length(tv) > ix->ntensors)
        return BAD("%s: steps[%u].tensors (step %llu): expected a list of the index's tensor names", name, i,
                   (unsigned long long)st->step);
    st->ntensors = (uint32_t)json_object_array_length(tv);
    if (!(st->tensors = malloc(st->ntensors * sizeof *st->tensors + 1))) return dr_fail(err, DR_ENOMEM, "%s: out of memory", name);
    for (uint32_t k = 0; k < st->ntensors; k++) {
        json_object *e = json_object_array_get_idx(tv, k);
        int t = json_object_is_type(e, json_type_string) ? dr_traj_find(ix, json_object_get_string(e)) : -1;
        if (t < 0) return BAD("%s: steps[%u].tensors[%u] (step %llu): not a name listed in \"tensors\"", name, i, k,
                              (unsigned long long)st->step);
        for (uint32_t j = 0; j < k; j++)
            if (st->tensors[j] == t) return BAD("%s: steps[%u].tensors[%u] (step %llu): '%s' twice", name, i, k,
                                                (unsigned long long)st->step, ix->tensors[t].name);
        st->tensors[k] = (uint16_t)t;
    }
    return DR_OK;
}

static int parse_object(json_object *o, const char *name, dr_traj_index *ix, dr_err *err)
{
    json_object *fv = field(o, "format"), *vv = field(o, "version"), *sv = field(o, "settings"),
                *tv = field(o, "tensors"), *pv = field(o, "steps"), *ev;
    uint64_t version;
    int rc;
    if (!json_object_is_type(o, json_type_object)) return BAD("%s: expected a JSON object", name);
    if (!fv || !json_object_is_type(fv, json_type_string) || strcmp(json_object_get_string(fv), DR_TRAJ_FORMAT))
        return BAD("%s: field \"format\": expected \"" DR_TRAJ_FORMAT "\"", name);
    if (!uint_of(vv, 1u << 30, &version) || version != DR_TRAJ_VERSION)
        return BAD("%s: field \"version\": expected %d", name, DR_TRAJ_VERSION);
    if (sv && !json_object_is_type(sv, json_type_object)) return BAD("%s: field \"settings\": expected an object", name);
    ix->settings = strdup(sv ? json_object_to_json_string_ext(sv, JSON_C_TO_STRING_PLAIN) : "{}");
    if (!ix->settings) return dr_fail(err, DR_ENOMEM, "%s: out of memory", name);
    if (sv && (ev = field(sv, "experiment"))) {
        if (!json_object_is_type(ev, json_type_string) || strlen(json_object_get_string(ev)) >= sizeof ix->experiment)
            return BAD("%s: field \"settings\".\"experiment\": expected a short string", name);
        snprintf(ix->experiment, sizeof ix->experiment, "%s", json_object_get_string(ev));
    }
    if (!tv || !json_object_is_type(tv, json_type_array) || json_object_array_length(tv) > DR_TRAJ_MAX_TENSORS)
        return BAD("%s: field \"tensors\": expected a list of at most %d tensors", name, DR_TRAJ_MAX_TENSORS);
    ix->ntensors = (uint32_t)json_object_array_length(tv);
    if (!(ix->tensors = calloc(ix->ntensors + 1, sizeof *ix->tensors))) return dr_fail(err, DR_ENOMEM, "%s: out of memory", name);
    for (uint32_t i = 0; i < ix->ntensors; i++) {
        if ((rc = parse_tensor(json_object_array_get_idx(tv, i), i, name, &ix->tensors[i], err))) return rc;
        if (dr_traj_find(ix, ix->tensors[i].name) != (int)i)
            return BAD("%s: tensors[%u]: '%s' twice", name, i, ix->tensors[i].name);
    }
    if (!pv || !json_object_is_type(pv, json_type_array) || json_object_array_length(pv) > DR_TRAJ_MAX_STEPS)
        return BAD("%s: field \"steps\": expected a list of steps", name);
    ix->nsteps = (uint32_t)json_object_array_length(pv);
    if (!(ix->steps = calloc(ix->nsteps + 1, sizeof *ix->steps))) return dr_fail(err, DR_ENOMEM, "%s: out of memory", name);
    for (uint32_t i = 0; i < ix->nsteps; i++)
        if ((rc = parse_step(json_object_array_get_idx(pv, i), i, name, ix, err))) return rc;
    return DR_OK;
}

int dr_traj_index_parse(const char *text, size_t len, const char *name, dr_traj_index *out, dr_err *err)
{
    json_object *o;
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = dr_json_text_parse(text, len, DR_TRAJ_INDEX_MAX, name, DR_EFORMAT, &o, err))) return rc;
    rc = parse_object(o, name, out, err);
    json_object_put(o);
    if (rc) dr_traj_index_free(out);
    return rc;
}

int dr_traj_index_load(const char *dir, dr_traj_index *out, dr_err *err)
{
    char path[2048];
    uint8_t *buf = NULL;
    size_t n = 0;
    int rc;
    memset(out, 0, sizeof *out);
    snprintf(path, sizeof path, "%s/index.json", dir);
    rc = dr_read_regular(path, DR_TRAJ_INDEX_MAX, &buf, &n, err);
    if (rc == DR_OK) rc = dr_traj_index_parse((const char *)buf, n, path, out, err);
    free(buf);
    return rc;
}

static json_object *shape_json(const dr_traj_tensor *t)
{
    json_object *a = json_object_new_array();
    for (uint32_t d = 0; d < t->ndim; d++) json_object_array_add(a, json_object_new_int64((int64_t)t->shape[d]));
    return a;
}

char *dr_traj_index_json(const dr_traj_index *ix)
{
    json_object *o = json_object_new_object(), *ts = json_object_new_array(), *ss = json_object_new_array();
    json_object *settings = json_tokener_parse(ix->settings ? ix->settings : "{}");
    char *text;
    json_object_object_add(o, "format", json_object_new_string(DR_TRAJ_FORMAT));
    json_object_object_add(o, "version", json_object_new_int(DR_TRAJ_VERSION));
    json_object_object_add(o, "settings", settings ? settings : json_object_new_object());
    for (uint32_t i = 0; i < ix->ntensors; i++) {
        json_object *t = json_object_new_object();
        json_object_object_add(t, "name", json_object_new_string(ix->tensors[i].name));
        json_object_object_add(t, "shape", shape_json(&ix->tensors[i]));
        json_object_object_add(t, "dtype", json_object_new_string("float32"));
        json_object_array_add(ts, t);
    }
    json_object_object_add(o, "tensors", ts);
    for (uint32_t i = 0; i < ix->nsteps; i++) {
        const dr_traj_step *st = &ix->steps[i];
        json_object *s = json_object_new_object(), *names = json_object_new_array();
        json_object_object_add(s, "step", json_object_new_int64((int64_t)st->step));
        json_object_object_add(s, "dir", json_object_new_string(st->dir));
        for (uint32_t k = 0; k < st->ntensors; k++)
            json_object_array_add(names, json_object_new_string(ix->tensors[st->tensors[k]].name));
        json_object_object_add(s, "tensors", names);
        json_object_array_add(ss, s);
    }
    json_object_object_add(o, "steps", ss);
    text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return text;
}

int dr_traj_index_write(const char *dir, const dr_traj_index *ix, dr_err *err)
{
    char path[2048], *text = dr_traj_index_json(ix);
    size_t n;
    int rc;
    if (!text) return dr_fail(err, DR_ENOMEM, "%s/index.json: out of memory", dir);
    n = strlen(text);
    text[n] = '\n';   /* strdup left room for the NUL: it becomes the newline */
    snprintf(path, sizeof path, "%s/index.json", dir);
    rc = dr_write_atomic(path, text, n + 1, err);
    free(text);
    return rc;
}
