/* distref reference — moving exact accumulators between emulated devices
 * (core: used by the reference and available to the engine). Every transfer serializes into the DR_ACC_BYTES wire
 * format on the sender, is copied (and counted) to the receiver's device
 * and deserialized there: what a real interconnect would carry. */
#ifndef DISTREF_REF_WIRE_H
#define DISTREF_REF_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/device.h"
#include "distref/exact.h"

typedef struct dr_wire {
    uint8_t *out, *in;     /* the sender's staging and the receiver's landing buffer */
    size_t   cap;          /* accumulators each holds */
} dr_wire;

int  dr_wire_init(dr_wire *w, size_t n, dr_err *err);
void dr_wire_free(dr_wire *w);

/* dst[0..n) += src[0..n) (merge) or = src (overwrite), from device a to b. */
int  dr_wire_send(dr_wire *w, dr_device *a, const dr_acc *src, dr_device *b, dr_acc *dst,
                  size_t n, bool overwrite, dr_err *err);

#endif
