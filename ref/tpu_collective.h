/* distref reference — the tpu strategy's all-reduce along the torus
 * (internal to ref/). */
#ifndef DISTREF_REF_TPU_COLLECTIVE_H
#define DISTREF_REF_TPU_COLLECTIVE_H

#include "distref/strategy.h"
#include "distref/wire.h"

/* All-reduces, over the replicas of a tpu strategy, the parameters that
 * logical core l holds: ranges[0..2*nranges) are [lo, hi) pairs into every
 * replica's acc[r]. The reduction runs as rings along the torus, one mesh
 * dimension after another (x, y, z, then the cores of a chip): after the
 * rings of a dimension every replica holds the sum over its line, after the
 * last the total. Exact, so identical to any other order; what the
 * dimension order decides is which links carry bytes, and the alpha-beta
 * time of the rings, which is added to *seconds (rings of one dimension run
 * at once: the slowest counts). */
int  dr_tpu_all_reduce(dr_strategy *s, dr_acc *const *acc, const size_t *ranges, uint32_t nranges,
                       uint32_t l, double *seconds, dr_err *err);

#endif
