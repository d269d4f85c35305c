/* distref — emulated devices: names, memory, copies.
 *
 * Device strings parse as TensorFlow's DeviceSpec does: "/gpu:0", "/cpu:0",
 * "/device:GPU:1", "GPU:1", "/job:worker/replica:0/task:1/device:CPU:0",
 * "/TPU:3". Type names are case-insensitive (cpu, gpu, tpu); a missing
 * index means 0 in contexts that need one. Anything else is rejected with a
 * message naming the string and the part that is wrong.
 *
 * Each emulated device owns its memory with a configurable capacity. An
 * allocation beyond it fails with DR_EDEVICE_OOM and a message naming the
 * device, the request and the usage ("/job:localhost/replica:0/task:0/
 * device:GPU:1: out of memory: requested 401408 bytes, 16000000 of 16777216
 * in use"). Every cross-device copy goes through dr_device_copy, which counts
 * its bytes, so a run can report exactly what moved.
 */
#ifndef DISTREF_DEVICE_H
#define DISTREF_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"

typedef enum dr_device_type { DR_DEV_CPU = 0, DR_DEV_GPU = 1, DR_DEV_TPU = 2 } dr_device_type;

typedef struct dr_device_spec {
    char           job[32];     /* "" when not given */
    int            replica;     /* -1 when not given */
    int            task;        /* -1 when not given */
    dr_device_type type;
    int            index;
    int            has_type;    /* 0 for a spec with only job/replica/task */
} dr_device_spec;

int  dr_device_parse(const char *s, dr_device_spec *out, dr_err *err);

/* The canonical full name: "/job:localhost/replica:0/task:0/device:GPU:1"
 * (job "localhost", replica and task 0 when not given). */
void dr_device_spec_name(const dr_device_spec *s, char *buf, size_t n);

typedef struct dr_device {
    dr_device_spec spec;
    char     name[96];          /* canonical name */
    uint64_t capacity;          /* bytes; 0 = unlimited */
    uint64_t in_use, peak;      /* bytes */
    uint64_t bytes_in, bytes_out;   /* counted by dr_device_copy */
} dr_device;

void  dr_device_init(dr_device *d, const dr_device_spec *spec, uint64_t capacity);

/* Allocates bytes on the device (zero-filled host memory standing in for it). */
int   dr_device_alloc(dr_device *d, size_t bytes, void **out, dr_err *err);
void  dr_device_free(dr_device *d, void *p, size_t bytes);

/* Capacity accounting without host memory, for buffers that live elsewhere
 * in the emulation (the tpu strategy's HBM): the same checks and message as
 * dr_device_alloc. */
int   dr_device_reserve(dr_device *d, uint64_t bytes, dr_err *err);
void  dr_device_unreserve(dr_device *d, uint64_t bytes);

/* memcpy with accounting: src's bytes_out and dst's bytes_in grow by bytes
 * unless src == dst (a copy within one device is free and not counted). */
void  dr_device_copy(dr_device *dst, void *to, dr_device *src, const void *from, size_t bytes);

#endif
