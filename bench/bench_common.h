/* distref bench — what every bench program shares: the core's monotonic
 * clock (dr_now, distref/run_log.h) and a qsort comparison for medians. */
#ifndef DISTREF_BENCH_COMMON_H
#define DISTREF_BENCH_COMMON_H

#include "distref/run_log.h"

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
