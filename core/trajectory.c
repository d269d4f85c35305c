/* distref core — trajectories: --trajectory's steps, the index, loading
 * a step's tensor (distref/trajectory.h; docs/JUDGING.md). */
#include "distref/trajectory.h"
#include "distref/fileio.h"

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- --trajectory -------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A decimal u64 from s, at most 2^53; *end after it. */
static bool number(const char *s, const char **end, uint64_t *v)
{
    *v = 0;
    if (*s < '0' || *s > '9') return false;
    while (*s >= '0' && *s <= '9') {
        if (*v > (1ull << 53) / 10) return false;
        *v = *v * 10 + (uint64_t)(*s++ - '0');
    }
    *end = s;
    return true;
}

static int steps_list(const char *s, dr_traj_spec *out, dr_err *err)
{
    uint32_t cap = 0, n = 0;
    const char *p = s;
    if (!*p) return dr_fail(err, DR_EUSAGE, "--trajectory=steps:LIST: the list is empty (e.g. steps:0,10,100)");
    for (;;) {
        uint64_t v;
        const char *e;
        if (!number(p, &e, &v) || (*e && *e != ','))
            return dr_fail(err, DR_EUSAGE, "--trajectory=steps:%s: expected step numbers separated by ',' at '%s'", s, p);
        if (n == cap) {
            uint64_t *q;
            if (cap >= 65536) return dr_fail(err, DR_EUSAGE, "--trajectory=steps: more than 65536 steps; use every:N");
            cap = cap ? cap * 2 : 16;
            if (!(q = realloc(out->steps, cap * sizeof *q))) return dr_fail(err, DR_ENOMEM, "--trajectory: out of memory");
            out->steps = q;
        }
        out->steps[n++] = v;
        if (!*e) break;
        p = e + 1;
    }
    qsort(out->steps, n, sizeof *out->steps, cmp_u64);
    out->nsteps = 0;
    for (uint32_t i = 0; i < n; i++)
        if (i == 0 || out->steps[i] != out->steps[i - 1]) out->steps[out->nsteps++] = out->steps[i];
    return DR_OK;
}

int dr_traj_spec_parse(const char *text, dr_traj_spec *out, dr_err *err)
{
    int rc = DR_OK;
    memset(out, 0, sizeof *out);
    if (!text[0]) return DR_OK;
    if (!strncmp(text, "every:", 6)) {
        const char *e;
        out->mode = DR_TRAJ_EVERY;
        if (!number(text + 6, &e, &out->every) || *e || out->every == 0)
            rc = dr_fail(err, DR_EUSAGE, "--trajectory=%s: every:N needs a step count N >= 1", text);
    } else if (!strncmp(text, "steps:", 6)) {
        out->mode = DR_TRAJ_STEPS;
        rc = steps_list(text + 6, out, err);
    } else if (!strcmp(text, "checkpoints")) {
        out->mode = DR_TRAJ_CHECKPOINTS;
    } else {
        rc = dr_fail(err, DR_EUSAGE, "--trajectory=%s: expected every:N, steps:LIST or checkpoints", text);
    }
    if (rc) dr_traj_spec_free(out);
    return rc;
}

bool dr_traj_spec_wants(const dr_traj_spec *s, uint64_t step, bool checkpoint)
{
    uint32_t lo = 0, hi;
    switch (s->mode) {
    case DR_TRAJ_EVERY: return step % s->every == 0;
    case DR_TRAJ_CHECKPOINTS: return checkpoint;
    case DR_TRAJ_STEPS:
        hi = s->nsteps;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (s->steps[mid] < step) lo = mid + 1;
            else hi = mid;
        }
        return lo < s->nsteps && s->steps[lo] == step;
    default: return false;
    }
}

void dr_traj_spec_free(dr_traj_spec *s)
{
    free(s->steps);
    memset(s, 0, sizeof *s);
}

/* ---- names and paths ------------------------------------------------------ */

bool dr_traj_name_ok(const char *name)
{
    size_t n = strlen(name), comp = 0;
    if (n == 0 || n >= DR_TRAJ_NAME_MAX) return false;
    for (size_t i = 0; i <= n; i++) {
        char c = name[i];
        if (c == '/' || c == '\0') {
            if (comp == 0) return false;
            if ((comp == 1 && name[i - 1] == '.') || (comp == 2 && name[i - 1] == '.' && name[i - 2] == '.')) return false;
            comp = 0;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return false;
        comp++;
    }
    return true;
}

int dr_traj_find(const dr_traj_index *ix, const char *name)
{
    for (uint32_t i = 0; i < ix->ntensors; i++)
        if (!strcmp(ix->tensors[i].name, name)) return (int)i;
    return -1;
}

void dr_traj_path(const char *dir, const dr_traj_step *st, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s/%s.npy", dir, st->dir, name);
}

int dr_traj_load(const char *dir, const dr_traj_index *ix, const dr_traj_step *st, uint32_t tensor, dr_npy *out,
                 dr_err *err)
{
    char path[2048];
    const dr_traj_tensor *t = &ix->tensors[tensor];
    bool same;
    int rc;
    dr_traj_path(dir, st, t->name, path, sizeof path);
    if ((rc = dr_npy_load(path, out, err))) return rc;
    same = out->ndim == t->ndim;
    for (uint32_t d = 0; same && d < t->ndim; d++) same = out->shape[d] == t->shape[d];
    if (!same) {
        dr_npy_free(out);
        return dr_fail(err, DR_EFORMAT, "%s: shape does not match index.json's for tensor '%s' (%u dims there, %u here)",
                       path, t->name, t->ndim, out->ndim);
    }
    return DR_OK;
}

void dr_traj_index_free(dr_traj_index *ix)
{
    for (uint32_t i = 0; ix->steps && i < ix->nsteps; i++) free(ix->steps[i].tensors);
    free(ix->steps);
    free(ix->tensors);
    free(ix->settings);
    memset(ix, 0, sizeof *ix);
}
