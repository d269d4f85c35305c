/* distref reference — moving exact accumulators between TPU cores (internal
 * to ref/). Every transfer serializes into the DR_ACC_BYTES wire format on
 * the sender, is copied (and counted) to the receiver's device and
 * deserialized there, as ref/cross_device.c does between GPUs. */
#ifndef DISTREF_REF_TPU_COLLECTIVE_H
#define DISTREF_REF_TPU_COLLECTIVE_H

#include "distref/strategy.h"

typedef struct dr_wire {
    uint8_t *out, *in;     /* the sender's staging and the receiver's landing buffer */
    size_t   cap;          /* accumulators each holds */
} dr_wire;

int  dr_wire_init(dr_wire *w, size_t n, dr_err *err);
void dr_wire_free(dr_wire *w);

/* dst[0..n) += src[0..n) (merge) or = src (overwrite), from device a to b. */
int  dr_wire_send(dr_wire *w, dr_device *a, const dr_acc *src, dr_device *b, dr_acc *dst,
                  size_t n, bool overwrite, dr_err *err);

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
