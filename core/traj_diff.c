/* distref core — `distref diff A B`: the comparison (distref/traj_diff.h);
 * the report's text and JSON are in core/traj_diff_report.c. */
#include "distref/traj_diff.h"
#include "core/traj_diff_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int dr_diff_tolerance_parse(const char *text, dr_diff_opts *o, dr_err *err)
{
    char *end;
    o->tol = DR_TOL_EXACT;
    if (!text[0]) return DR_OK;
    if (!strncmp(text, "ulp=", 4) && text[4] >= '0' && text[4] <= '9') {
        unsigned long long v = strtoull(text + 4, &end, 10);
        if (*end == '\0' && v <= 0xffffffffull) {
            o->tol = DR_TOL_ULP;
            o->ulp = v;
            return DR_OK;
        }
    } else if ((!strncmp(text, "rtol=", 5) || !strncmp(text, "atol=", 5)) && text[5] && text[5] != ' ') {
        double v = strtod(text + 5, &end);
        if (*end == '\0' && v >= 0 && isfinite(v)) {
            o->tol = text[0] == 'r' ? DR_TOL_RTOL : DR_TOL_ATOL;
            o->rtol = v;
            return DR_OK;
        }
    }
    return dr_fail(err, DR_EUSAGE, "--tolerance=%s: expected ulp=N (0 <= N < 2^32), rtol=X or atol=X (X >= 0)", text);
}

static bool has_index(const char *dir)
{
    char p[2100];
    struct stat sb;
    snprintf(p, sizeof p, "%s/index.json", dir);
    return stat(p, &sb) == 0;
}

int dr_diff_resolve(const char *path, char *out, size_t cap, dr_err *err)
{
    static const char *const sub[] = { "", "/trajectory", "/weights" };
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dr_fail(err, DR_EUSAGE, "%s: not a directory (expected a trajectory or a run directory)", path);
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
        if ((size_t)snprintf(out, cap, "%s%s", path, sub[i]) >= cap) break;
        if (has_index(out)) return DR_OK;
    }
    return dr_fail(err, DR_EUSAGE, "%s: no index.json there, nor in %s/trajectory (train with --trajectory=every:N) or "
                   "%s/weights (distref export --what=weights)", path, path, path);
}

uint64_t dr_ulp_distance(uint32_t a, uint32_t b)
{
    uint32_t ka, kb;
    if (a == b) return 0;
    if ((a & 0x7fffffffu) > 0x7f800000u || (b & 0x7fffffffu) > 0x7f800000u) return UINT64_MAX;
    ka = a & 0x80000000u ? ~a : a | 0x80000000u;
    kb = b & 0x80000000u ? ~b : b | 0x80000000u;
    return ka > kb ? (uint64_t)(ka - kb) : (uint64_t)(kb - ka);
}

static double rel_error(float a, float b)
{
    double x = (double)a, y = (double)b, m = fmax(fabs(x), fabs(y)), d = fabs(x - y);
    if (isnan(x) || isnan(y) || isinf(d)) return INFINITY;
    return m == 0 ? 0 : d / m;
}

static bool within(const dr_diff_opts *o, uint64_t ulp, double rel, float a, float b)
{
    if (o->tol == DR_TOL_RTOL) return rel <= o->rtol;
    if (o->tol == DR_TOL_ATOL) return fabs((double)a - (double)b) <= o->rtol;   /* NaN: false */
    return ulp != UINT64_MAX && ulp <= (o->tol == DR_TOL_ULP ? o->ulp : 0);
}

static int bucket(uint64_t ulp)
{
    int b = 0;
    if (ulp == UINT64_MAX) return DR_DIFF_BUCKETS - 1;
    while (ulp > 1 && b < DR_DIFF_BUCKETS - 2) { ulp >>= 1; b++; }
    return b;
}

static void note_element(const diff_where *w, uint64_t i, uint32_t ba, uint32_t bb, diff_elem *slot)
{
    slot->where = *w;
    slot->flat = i;
    slot->a = ba;
    slot->b = bb;
    slot->ulp = dr_ulp_distance(ba, bb);
    slot->set = true;
}

/* One tensor of one step: its row of statistics, the first divergence and failure. */
static int compare_arrays(diff_run *d, const diff_where *w, const dr_npy *x, const dr_npy *y)
{
    diff_row row;
    memset(&row, 0, sizeof row);
    row.where = *w;
    row.count = x->count;
    for (uint64_t i = 0; i < x->count; i++) {
        uint32_t ba, bb;
        uint64_t u;
        double rel;
        memcpy(&ba, &x->data[i], 4);
        memcpy(&bb, &y->data[i], 4);
        if (ba == bb) continue;
        u = dr_ulp_distance(ba, bb);
        rel = rel_error(x->data[i], y->data[i]);
        if (!d->first.set) note_element(w, i, ba, bb, &d->first);
        if (u > row.max_ulp) row.max_ulp = u;
        if (rel > row.max_rel) row.max_rel = rel;
        row.hist[bucket(u)]++;
        row.differ++;
        if (!within(d->opts, u, rel, x->data[i], y->data[i])) {
            row.fail++;
            if (!d->first_fail.set) note_element(w, i, ba, bb, &d->first_fail);
        }
    }
    d->elements += x->count;
    d->compared++;
    if (!row.differ) return DR_OK;
    return diff_add_row(d, &row);
}

int diff_add_row(diff_run *d, const diff_row *row)
{
    if (d->nrows == d->caprows) {
        size_t cap = d->caprows ? d->caprows * 2 : 64;
        diff_row *p = realloc(d->rows, cap * sizeof *p);
        if (!p) return dr_fail(d->err, DR_ENOMEM, "diff: out of memory");
        d->rows = p;
        d->caprows = cap;
    }
    d->rows[d->nrows++] = *row;
    d->differ += row->differ;
    d->fail += row->fail;
    return DR_OK;
}

static bool same_shape(const dr_traj_tensor *x, const dr_traj_tensor *y)
{
    if (x->ndim != y->ndim) return false;
    for (uint32_t k = 0; k < x->ndim; k++)
        if (x->shape[k] != y->shape[k]) return false;
    return true;
}

static bool step_has(const dr_traj_step *st, int t)
{
    for (uint32_t k = 0; k < st->ntensors; k++)
        if (st->tensors[k] == t) return true;
    return false;
}

/* Step i of both: every tensor of A's step that B's step holds too. */
static int compare_step(diff_run *d, uint32_t i)
{
    const dr_traj_step *sa = &d->ia.steps[i], *sb = &d->ib.steps[i];
    int rc = DR_OK;
    for (uint32_t k = 0; rc == DR_OK && k < sa->ntensors; k++) {
        const dr_traj_tensor *ta = &d->ia.tensors[sa->tensors[k]];
        int tb = dr_traj_find(&d->ib, ta->name);
        dr_npy x, y;
        diff_where w;
        if (tb < 0 || !step_has(sb, tb)) { diff_note_only(d, ta->name, 'A'); continue; }
        if (!same_shape(ta, &d->ib.tensors[tb])) {
            char s1[160], s2[160];
            diff_shape_text(ta, s1, sizeof s1);
            diff_shape_text(&d->ib.tensors[tb], s2, sizeof s2);
            return dr_fail(d->err, DR_EFORMAT, "tensor '%s': shape %s in A (%s), %s in B (%s)", ta->name, s1, d->a, s2, d->b);
        }
        w.step = sa->step;
        w.tensor = sa->tensors[k];
        if ((rc = dr_traj_load(d->a, &d->ia, sa, sa->tensors[k], &x, d->err))) return rc;
        if ((rc = dr_traj_load(d->b, &d->ib, sb, (uint32_t)tb, &y, d->err))) { dr_npy_free(&x); return rc; }
        rc = compare_arrays(d, &w, &x, &y);
        dr_npy_free(&x);
        dr_npy_free(&y);
    }
    for (uint32_t k = 0; k < sb->ntensors; k++) {
        int ta = dr_traj_find(&d->ia, d->ib.tensors[sb->tensors[k]].name);
        if (ta < 0 || !step_has(sa, ta)) diff_note_only(d, d->ib.tensors[sb->tensors[k]].name, 'B');
    }
    return rc;
}

/* The same experiment, the same steps. */
static int check_alike(diff_run *d)
{
    uint32_t i;
    if (d->ia.experiment[0] && d->ib.experiment[0] && strcmp(d->ia.experiment, d->ib.experiment))
        return dr_fail(d->err, DR_EFORMAT, "settings.experiment: A (%s) is %s, B (%s) is %s: trajectories of other "
                       "experiments", d->a, d->ia.experiment, d->b, d->ib.experiment);
    for (i = 0; i < d->ia.nsteps && i < d->ib.nsteps; i++)
        if (d->ia.steps[i].step != d->ib.steps[i].step) break;
    if (i == d->ia.nsteps && i == d->ib.nsteps) return DR_OK;
    if (i < d->ia.nsteps && (i == d->ib.nsteps || d->ia.steps[i].step < d->ib.steps[i].step))
        return dr_fail(d->err, DR_EFORMAT, "step %llu: in A (%s) but missing from B (%s)",
                       (unsigned long long)d->ia.steps[i].step, d->a, d->b);
    return dr_fail(d->err, DR_EFORMAT, "step %llu: in B (%s) but missing from A (%s)",
                   (unsigned long long)d->ib.steps[i].step, d->b, d->a);
}

int dr_traj_diff(const char *a, const char *b, const dr_diff_opts *o, FILE *out, bool *pass, dr_err *err)
{
    diff_run *d = calloc(1, sizeof *d);
    int rc;
    *pass = false;
    if (!d) return dr_fail(err, DR_ENOMEM, "diff: out of memory");
    d->opts = o;
    d->err = err;
    if ((rc = dr_diff_resolve(a, d->a, sizeof d->a, err)) || (rc = dr_diff_resolve(b, d->b, sizeof d->b, err))) goto out;
    if ((rc = dr_traj_index_load(d->a, &d->ia, err)) || (rc = dr_traj_index_load(d->b, &d->ib, err))) goto out;
    if ((rc = check_alike(d))) goto out;
    for (uint32_t i = 0; rc == DR_OK && i < d->ia.nsteps; i++) rc = compare_step(d, i);
    if (rc) goto out;
    *pass = d->fail == 0;
    if (o->json) rc = diff_report_json(d, out);
    else diff_report_text(d, out);
    if (rc == DR_OK && o->plot) rc = diff_plot_write(d, o->plot, err);
out:
    dr_traj_index_free(&d->ia);
    dr_traj_index_free(&d->ib);
    free(d->rows);
    free(d);
    return rc;
}
