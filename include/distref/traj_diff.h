/* distref core — `distref diff A B`: two trajectories (distref/trajectory.h)
 * compared bit for bit, step by step and tensor by tensor
 * (docs/JUDGING.md).
 *
 * Two elements are equal when their bits are: -0 and +0 differ (1 ulp), a
 * NaN differs from a NaN with another payload (its ulp distance is
 * reported as "nan", beyond every tolerance). The ulp distance of two
 * floats is the number of floats between them plus one (ordered
 * representation); the relative error is |a-b| / max(|a|,|b|).
 *
 * The report: identical, or the first divergence (the first step, in the
 * index's tensor order the first tensor, in C order the first element:
 * flat and multi-dimensional index, both values in decimal and hex, the
 * ulp distance), then per step and tensor that differ the count of
 * differing elements, the max ulp, the max relative error and a ulp
 * histogram (buckets 1, 2-3, 4-7, ..., nan). With a tolerance every
 * element must be within it (ulp=N: at most N ulps; rtol=X: relative
 * error at most X; atol=X: |a-b| at most X); without one, within 0 ulps.
 */
#ifndef DISTREF_TRAJ_DIFF_H
#define DISTREF_TRAJ_DIFF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "distref/error.h"

typedef enum dr_tol_kind { DR_TOL_EXACT = 0, DR_TOL_ULP, DR_TOL_RTOL, DR_TOL_ATOL } dr_tol_kind;

typedef struct dr_diff_opts {
    dr_tol_kind tol;
    uint64_t    ulp;     /* DR_TOL_ULP */
    double      rtol;    /* DR_TOL_RTOL; DR_TOL_ATOL: the absolute bound */
    bool        json;    /* the report as one JSON object */
    const char *plot;    /* NULL, or a folder for the divergence picture: divergence.dat (the report's rows, one
                          * line per step and tensor that differ, with max and p99 ulp), divergence.gp (gnuplot)
                          * and index.html (docs/JUDGING.md); running gnuplot is the caller's (the CLI's) */
} dr_diff_opts;

/* --tolerance: "" (exact), "ulp=N", "rtol=X" or "atol=X" (|a-b| <= X; X >= 0,
 * finite); DR_EUSAGE naming --tolerance otherwise. */
int dr_diff_tolerance_parse(const char *text, dr_diff_opts *o, dr_err *err);

/* The trajectory a path names: path itself when it holds index.json, else
 * path/trajectory (a run directory trained with --trajectory), else
 * path/weights (`export --what=weights`); DR_EUSAGE naming path otherwise.
 * out: cap bytes. */
int dr_diff_resolve(const char *path, char *out, size_t cap, dr_err *err);

/* Compares the trajectories A and B (paths as dr_diff_resolve takes them)
 * and writes the report to out. *pass: every element within the tolerance.
 * DR_EFORMAT (a caller's exit 2) for a reader's refusal, other experiments,
 * a step in one only, a tensor whose shapes differ. */
int dr_traj_diff(const char *a, const char *b, const dr_diff_opts *o, FILE *out, bool *pass, dr_err *err);

/* The ulp distance of two floats' bits (ordered representation); UINT64_MAX
 * when either is a NaN and the bits differ. */
uint64_t dr_ulp_distance(uint32_t a, uint32_t b);

#endif
