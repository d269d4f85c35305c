/* distref core — `distref diff --plot=DIR`: the divergence over steps as a
 * data file, a gnuplot script and an HTML page in the conformance report's
 * style (distref/traj_diff.h, docs/JUDGING.md). gnuplot itself is run by
 * the CLI; without it the data file and the page still stand. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/traj_diff_internal.h"
#include "distref/fileio.h"

/* The upper bound of the bucket that holds the 99th percentile of the
 * row's ulp distances (the equal elements count as 0 ulps); -1: a NaN. */
static double row_p99(const diff_row *r)
{
    uint64_t need = r->count - r->count / 100, have = r->count - r->differ;   /* ceil(0.99 n) */
    if (have >= need) return 0;
    for (int k = 0; k < DR_DIFF_BUCKETS - 1; k++) {
        have += r->hist[k];
        if (have >= need) return k == 0 ? 1.0 : ldexp(1.0, k + 1) - 1.0;
    }
    return -1;
}

static int put(const char *dir, const char *name, char *text, size_t n, dr_err *err)
{
    char path[2200];
    int rc;
    if (!text) return dr_fail(err, DR_ENOMEM, "diff --plot: out of memory");
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rc = dr_write_atomic(path, text, n, err);
    free(text);
    return rc;
}

static void write_dat(const diff_run *d, FILE *f)
{
    fprintf(f, "# distref diff --plot: one line per step and tensor that differ\n# A: %s\n# B: %s\n"
               "# blocks of one tensor each (gnuplot's index), in the index's order\n# step\ttensor_index\ttensor\tdiffering\telements\tmax_ulp\tp99_ulp\tmax_rel   (ulp -1: a NaN)\n",
            d->a, d->b);
    for (uint32_t t = 0; t < d->ia.ntensors; t++) {   /* gnuplot's index t: tensor t's rows, then two blank lines */
        for (size_t i = 0; i < d->nrows; i++) {
            const diff_row *r = &d->rows[i];
            double mu = r->max_ulp == UINT64_MAX ? -1.0 : (double)r->max_ulp;
            if (r->where.tensor != t) continue;
            fprintf(f, "%llu\t%u\t%s\t%llu\t%llu\t%.17g\t%.17g\t%.17g\n", (unsigned long long)r->where.step,
                    r->where.tensor, d->ia.tensors[r->where.tensor].name, (unsigned long long)r->differ,
                    (unsigned long long)r->count, mu, row_p99(r), r->max_rel);
        }
        fputs("\n\n", f);
    }
}

static void write_gp(const diff_run *d, FILE *f)
{
    fprintf(f, "# distref diff --plot (gnuplot 5): cd into this folder, then `gnuplot divergence.gp`\n"
               "set terminal svg size 1100,760 dynamic font 'DejaVu Sans,11' noenhanced\n"
               "set output 'divergence.svg'\nset datafile separator '\\t'\nset logscale y\n"
               "set grid\nset datafile missing NaN\nset key outside right top\nset xlabel 'step'\nnames = \"");
    for (uint32_t t = 0; t < d->ia.ntensors; t++) fprintf(f, "%s%s", t ? " " : "", d->ia.tensors[t].name);
    fprintf(f, "\"\nn = %u\nset multiplot layout 2,1 title 'distref diff: %zu step-tensor rows differ'\n"
               "set ylabel 'max ulp'\nplot for [i=0:n-1] 'divergence.dat' index i using 1:($6>0 ? $6 : NaN) "
               "with linespoints lc (i+1) pt (i%%8+1) ps 0.5 title word(names, i+1)\n"
               "set ylabel 'p99 ulp'\nplot for [i=0:n-1] 'divergence.dat' index i using 1:($7>0 ? $7 : NaN) "
               "with linespoints lc (i+1) pt (i%%8+1) ps 0.5 title word(names, i+1)\nunset multiplot\n",
            d->ia.ntensors, d->nrows);
}

static void html_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

static void write_html(const diff_run *d, FILE *f)
{
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>distref diff</title>\n"
          "<style>body{font-family:sans-serif;margin:2em;max-width:1400px} table{border-collapse:collapse;"
          "margin:1em 0} td,th{border:1px solid #ccc;padding:3px 8px;text-align:right} th{background:#f4f4f4}"
          " img{max-width:100%;border:1px solid #eee;margin:6px 0}</style></head><body>\n<h1>distref diff</h1>\n<p>A: ",
          f);
    html_escape(f, d->a);
    fputs("<br>B: ", f);
    html_escape(f, d->b);
    fprintf(f, "<br>%llu elements compared; %llu differ. The numbers: divergence.dat; the picture: "
               "divergence.svg (gnuplot divergence.gp).</p>\n",
            (unsigned long long)d->compared, (unsigned long long)d->differ);
    if (d->first.set)
        fprintf(f, "<p>First divergence: step %llu, tensor %s, element %llu.</p>\n",
                (unsigned long long)d->first.where.step, d->ia.tensors[d->first.where.tensor].name,
                (unsigned long long)d->first.flat);
    fputs("<img src=\"divergence.svg\" alt=\"divergence over steps (no picture: gnuplot did not run)\">\n"
          "<table><tr><th>step</th><th>tensor</th><th>differing</th><th>elements</th><th>max ulp</th>"
          "<th>p99 ulp</th><th>max rel</th></tr>\n", f);
    for (size_t i = 0; i < d->nrows; i++) {
        const diff_row *r = &d->rows[i];
        fprintf(f, "<tr><td>%llu</td><td style=\"text-align:left\">%s</td><td>%llu</td><td>%llu</td>",
                (unsigned long long)r->where.step, d->ia.tensors[r->where.tensor].name,
                (unsigned long long)r->differ, (unsigned long long)r->count);
        if (r->max_ulp == UINT64_MAX) fputs("<td>nan</td>", f);
        else fprintf(f, "<td>%llu</td>", (unsigned long long)r->max_ulp);
        fprintf(f, "<td>%.0f</td><td>%.3g</td></tr>\n", row_p99(r), r->max_rel);
    }
    fputs("</table>\n</body></html>\n", f);
}

int diff_plot_write(const diff_run *d, const char *dir, dr_err *err)
{
    static const char *const names[] = { "divergence.dat", "divergence.gp", "index.html" };
    void (*const writers[])(const diff_run *, FILE *) = { write_dat, write_gp, write_html };
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return dr_fail(err, DR_EIO, "--plot=%s: cannot create the folder: %s", dir, strerror(errno));
    for (int i = 0; i < 3; i++) {
        char *text = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&text, &n);
        int rc;
        if (!f) return dr_fail(err, DR_ENOMEM, "diff --plot: out of memory");
        writers[i](d, f);
        fclose(f);
        if ((rc = put(dir, names[i], text, n, err))) return rc;
    }
    return DR_OK;
}
