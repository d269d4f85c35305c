/* distref core — `distref diff`'s state, shared by core/traj_diff.c (the
 * comparison) and core/traj_diff_report.c (text and JSON). Private to core. */
#ifndef DISTREF_CORE_TRAJ_DIFF_INTERNAL_H
#define DISTREF_CORE_TRAJ_DIFF_INTERNAL_H

#include "distref/traj_diff.h"
#include "distref/trajectory.h"

/* ulp histogram: [0] 1 ulp, [k] 2^k .. 2^(k+1)-1 ulps (k <= 32), last: nan */
#define DR_DIFF_BUCKETS 34
#define DR_DIFF_MAX_ONLY 16

typedef struct diff_where { uint64_t step; uint32_t tensor; /* A's index */ } diff_where;

typedef struct diff_elem {
    bool       set;
    diff_where where;
    uint64_t   flat, ulp;
    uint32_t   a, b;       /* the bits */
} diff_elem;

typedef struct diff_row {
    diff_where where;
    uint64_t   count, differ, fail, max_ulp;
    double     max_rel;
    uint64_t   hist[DR_DIFF_BUCKETS];
} diff_row;

typedef struct diff_run {
    const dr_diff_opts *opts;
    dr_err        *err;
    char           a[2100], b[2100];   /* the trajectories' folders */
    dr_traj_index  ia, ib;
    diff_row      *rows;               /* the (step, tensor)s that differ */
    size_t         nrows, caprows;
    uint64_t       elements, differ, fail, compared;
    diff_elem      first, first_fail;
    char           only[2][DR_DIFF_MAX_ONLY][DR_TRAJ_NAME_MAX];   /* tensors in one side only: A's, B's */
    uint32_t       nonly[2];
} diff_run;

int  diff_add_row(diff_run *d, const diff_row *row);
void diff_note_only(diff_run *d, const char *name, char side);
void diff_shape_text(const dr_traj_tensor *t, char *out, size_t cap);
void diff_report_text(const diff_run *d, FILE *out);
int  diff_report_json(const diff_run *d, FILE *out);

/* The divergence picture's files in dir (created if missing; each written
 * atomically): divergence.dat, one line per step and tensor that differ
 * (step, tensor index and name, differing, elements, max ulp, p99 ulp, max
 * relative error: the numbers of the report's rows; p99 is the upper bound
 * of the power-of-two histogram bucket that holds the 99th percentile of
 * the tensor's ulp distances, equal elements counted as 0; a NaN distance
 * is written as -1), divergence.gp (gnuplot: log ulp over steps, max and
 * p99 per tensor, to divergence.svg) and index.html (the report's style:
 * the summary, the picture, the rows). Called by dr_traj_diff when
 * o->plot is set; running gnuplot is the caller's (the CLI's). */
int  diff_plot_write(const diff_run *d, const char *dir, dr_err *err);

#endif
