/* distref conformance — the matrix as a picture: strategy and replica count
 * (rows) x variant and numerics (columns), each cell the verdict of every
 * case recorded under it, drawn as inline SVG with the details on hover
 * (a <title> per cell: every browser shows it as a tooltip). matrix.dat
 * holds the same cells as text.
 *
 * A cell is
 *   fail           when any of its cases failed,
 *   pass           else when any ran and passed (some may not be supported:
 *                  the cell says how many, the tooltip why),
 *   not supported  when none of its cases ran.
 * Cases recorded without a configuration (the reductions, durability and
 * mpi usage checks) sit in rows of their own, one per suite, column "none".
 */
#include "conformance/conformance.h"

#include <stdlib.h>
#include <string.h>

typedef struct cell {
    char row[48];          /* "mirrored R=4", or "reductions (no strategy)" */
    char col[40];          /* "openmp exact", or "none" */
    int  row_rank, col_rank;
    size_t n[3];           /* by verdict_kind */
    char first_fail[160];  /* the first failing case's name */
    char reason[200];      /* the first not-supported reason */
} cell;

/* Row order: strategies as the CLI lists them, then the suite rows. */
static int strategy_rank(const char *s)
{
    static const char *const order[] = { "off", "one_device", "mirrored", "central_storage",
                                         "multi_worker_mirrored", "parameter_server", "tpu" };
    for (int i = 0; i < (int)(sizeof order / sizeof order[0]); i++)
        if (strcmp(order[i], s) == 0) return i;
    return 100;
}

/* Column order: the registry's (ref first), then numerics exact, compact, fast. */
static int column_rank(const verdict *v)
{
    size_t n;
    const dr_variant *const *all = dr_variants(&n);
    int vr = 100, mr = strcmp(v->mode, "exact") == 0 ? 0 : strcmp(v->mode, "fast") == 0 ? 2 : 1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(all[i]->name, v->variant) == 0) vr = (int)i;
    return vr * 4 + mr;
}

static void cell_key(const verdict *v, cell *k)
{
    memset(k, 0, sizeof *k);
    if (strcmp(v->strategy, "-") == 0) {
        snprintf(k->row, sizeof k->row, "%s (no strategy)", v->suite);
        k->row_rank = 1000 * 100;
    } else {
        snprintf(k->row, sizeof k->row, "%s R=%d", v->strategy, v->replicas);
        k->row_rank = strategy_rank(v->strategy) * 1000 + v->replicas;
    }
    if (strcmp(v->variant, "-") == 0) {
        snprintf(k->col, sizeof k->col, "none");
        k->col_rank = 1000;
    } else {
        snprintf(k->col, sizeof k->col, "%s %s", v->variant, v->mode);
        k->col_rank = column_rank(v);
    }
}

static int by_rank(const void *a, const void *b)
{
    const cell *x = a, *y = b;
    if (x->row_rank != y->row_rank) return x->row_rank < y->row_rank ? -1 : 1;
    if (x->col_rank != y->col_rank) return x->col_rank < y->col_rank ? -1 : 1;
    return strcmp(x->row, y->row) ? strcmp(x->row, y->row) : strcmp(x->col, y->col);
}

/* The cells of r, sorted by row then column; *n of them (malloc'd). */
static cell *gather(const results *r, size_t *n)
{
    cell *c = calloc(r->n ? r->n : 1, sizeof *c);
    cell k;
    size_t m = 0;
    if (!c) return NULL;
    for (size_t i = 0; i < r->n; i++) {
        const verdict *v = &r->v[i];
        size_t j;
        cell_key(v, &k);
        for (j = 0; j < m && (strcmp(c[j].row, k.row) || strcmp(c[j].col, k.col)); j++) {}
        if (j == m) c[m++] = k;
        c[j].n[v->kind]++;
        if (v->kind == VERDICT_FAIL && !c[j].first_fail[0]) snprintf(c[j].first_fail, sizeof c[j].first_fail, "%s", v->name);
        if (v->kind == VERDICT_NOT_SUPPORTED && !c[j].reason[0]) snprintf(c[j].reason, sizeof c[j].reason, "%s", v->reason);
    }
    qsort(c, m, sizeof *c, by_rank);
    *n = m;
    return c;
}

static verdict_kind cell_verdict(const cell *c)
{
    return c->n[VERDICT_FAIL] ? VERDICT_FAIL : c->n[VERDICT_PASS] ? VERDICT_PASS : VERDICT_NOT_SUPPORTED;
}

/* The distinct labels of one axis, rows (axis 0) or columns (1), ordered by
 * rank (ties in the order the cells list them); *rank is scratch of n. */
static size_t labels(const cell *c, size_t n, int axis, const char **out, int *rank)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = axis ? c[i].col : c[i].row;
        int rk = axis ? c[i].col_rank : c[i].row_rank;
        size_t j, at;
        for (j = 0; j < m && strcmp(out[j], s); j++) {}
        if (j < m) continue;
        for (at = m; at > 0 && rank[at - 1] > rk; at--) { out[at] = out[at - 1]; rank[at] = rank[at - 1]; }
        out[at] = s;
        rank[at] = rk;
        m++;
    }
    return m;
}

static size_t index_of(const char *const *l, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i], s) == 0) return i;
    return 0;
}

static const char *const k_fill[3] = { "#4daf4a", "#e41a1c", "#bdbdbd" };   /* pass, fail, not supported */
static const char *const k_word[3] = { "pass", "FAIL", "not supported" };

enum { LABEL_W = 250, CELL_W = 104, CELL_H = 26, HEAD_H = 40, LEGEND_H = 34, LEGEND_W = 820 };

static void svg_legend(FILE *f)
{
    static const char *const what[3] = { "pass: every case that ran passed", "fail: a case failed",
                                         "not supported: no case ran (the variant refuses the cell)" };
    static const int x[3] = { 0, 250, 420 };
    for (int k = 0; k < 3; k++)
        fprintf(f, "<rect x=\"%d\" y=\"6\" width=\"18\" height=\"18\" fill=\"%s\" stroke=\"#333\"/>"
                   "<text x=\"%d\" y=\"20\">%s</text>\n", x[k], k_fill[k], x[k] + 24, what[k]);
}

static void svg_cell(FILE *f, const cell *c, int x, int y)
{
    verdict_kind k = cell_verdict(c);
    char text[64];
    if (k == VERDICT_PASS && c->n[VERDICT_NOT_SUPPORTED])
        snprintf(text, sizeof text, "%zu pass, %zu n/s", c->n[VERDICT_PASS], c->n[VERDICT_NOT_SUPPORTED]);
    else if (k == VERDICT_NOT_SUPPORTED)
        snprintf(text, sizeof text, "not supported");
    else
        snprintf(text, sizeof text, "%zu %s", c->n[k], k_word[k]);
    fprintf(f, "<g class=\"cell %s\"><title>%s, %s: %s\n%zu passed, %zu failed, %zu not supported", verdict_word(k),
            c->row, c->col, k_word[k], c->n[VERDICT_PASS], c->n[VERDICT_FAIL], c->n[VERDICT_NOT_SUPPORTED]);
    if (c->first_fail[0]) { fputs("\nfailed: ", f); xml_escape(f, c->first_fail); }
    if (c->reason[0]) { fputs("\nnot supported: ", f); xml_escape(f, c->reason); }
    fprintf(f, "</title><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#fff\"/>"
               "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\"%s>%s</text></g>\n",
            x, y, CELL_W, CELL_H, k_fill[k], x + CELL_W / 2, y + 17, k == VERDICT_PASS ? " fill=\"#fff\"" : "", text);
}

static void svg(FILE *f, const cell *c, size_t n, const char *const *rows, size_t nr, const char *const *cols, size_t nc)
{
    int w = LABEL_W + (int)nc * CELL_W, h = LEGEND_H + HEAD_H + (int)nr * CELL_H + 4;
    if (w < LEGEND_W) w = LEGEND_W;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"matrix\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\""
               " font-family=\"sans-serif\" font-size=\"12\">\n", w, h, w, h);
    svg_legend(f);
    for (size_t j = 0; j < nc; j++) {
        const char *sp = strchr(cols[j], ' ');
        int x = LABEL_W + (int)j * CELL_W + CELL_W / 2;
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-weight=\"bold\">%.*s</text>", x,
                LEGEND_H + 16, sp ? (int)(sp - cols[j]) : (int)strlen(cols[j]), cols[j]);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, LEGEND_H + 32, sp ? sp + 1 : "");
    }
    for (size_t i = 0; i < nr; i++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", LABEL_W - 8,
                LEGEND_H + HEAD_H + (int)i * CELL_H + 17, rows[i]);
    for (size_t i = 0; i < n; i++)
        svg_cell(f, &c[i], LABEL_W + (int)index_of(cols, nc, c[i].col) * CELL_W,
                 LEGEND_H + HEAD_H + (int)index_of(rows, nr, c[i].row) * CELL_H);
    fputs("</svg>\n", f);
}

int write_matrix(const results *r, const char *out, FILE *html)
{
    size_t n = 0, nr, nc;
    cell *c = gather(r, &n);
    const char **rows = calloc(n + 1, sizeof *rows), **cols = calloc(n + 1, sizeof *cols);
    int *rank = calloc(n + 1, sizeof *rank), rc = 1;
    char path[1200];
    outfile dat;
    FILE *f;
    if (c && rows && cols && rank && (f = outfile_open(&dat))) {
        nr = labels(c, n, 0, rows, rank);
        nc = labels(c, n, 1, cols, rank);
        svg(html, c, n, rows, nr, cols, nc);
        fprintf(f, "# row column verdict passed failed not_supported (one line per cell of index.html's matrix)\n");
        for (size_t i = 0; i < n; i++)
            fprintf(f, "\"%s\" \"%s\" %s %zu %zu %zu\n", c[i].row, c[i].col, verdict_word(cell_verdict(&c[i])),
                    c[i].n[VERDICT_PASS], c[i].n[VERDICT_FAIL], c[i].n[VERDICT_NOT_SUPPORTED]);
        snprintf(path, sizeof path, "%s/matrix.dat", out);
        rc = outfile_commit(&dat, path);
    }
    free(c);
    free(rows);
    free(cols);
    free(rank);
    return rc;
}
