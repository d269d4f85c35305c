/* distref engine — the OpenCL backend's selection, replica mapping and
 * device listing (devices/opencl_backend.c, docs/OPENCL.md).
 *
 * A run picks a platform and a list of its devices (flags --opencl_platform
 * and --opencl_device=D or D1,D2,...; else the environment variables
 * DISTREF_OPENCL_PLATFORM / DISTREF_OPENCL_DEVICE; else 0 and "0"), and
 * maps its replicas (--num_gpus=N) onto them by --opencl_mapping (else
 * DISTREF_OPENCL_MAPPING, else auto):
 *
 *   shared      every replica on the first listed device, one in-order
 *               queue for all (replicas' kernels never overlap)
 *   queues      one in-order queue per replica, replica r on listed device
 *               r mod n: with n devices listed, one replica per device
 *   subdevices  the one listed device split by clCreateSubDevices
 *               (CL_DEVICE_PARTITION_EQUALLY, compute units / N each),
 *               replica r on sub-device r mod (sub-devices), a queue each;
 *               a device that cannot be split is "not supported: <why>"
 *   auto        one replica: shared; several devices listed: queues; one
 *               device that can be split in two or more: subdevices; else
 *               queues
 *
 * One context holds every device (or sub-device) used; a replica's buffers
 * are allocated for its device and every kernel, transfer and fill on them
 * runs on its queue (docs/OPENCL.md: cross-queue ordering).
 */
#ifndef DISTREF_OPENCL_H
#define DISTREF_OPENCL_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_REF)
#error "distref/opencl.h is the engine's: core/ and ref/ may not include it (docs/ARCHITECTURE.md)"
#endif

#include <stdint.h>
#include <stdio.h>
#include "distref/backend.h"

typedef struct dr_opencl_select {
    int         platform;   /* < 0: DISTREF_OPENCL_PLATFORM, else 0 */
    const char *devices;    /* "D" or "D1,D2,..."; NULL or "": DISTREF_OPENCL_DEVICE, else "0" */
    const char *mapping;    /* shared|queues|subdevices|auto; NULL or "": DISTREF_OPENCL_MAPPING, else auto */
    uint32_t    replicas;   /* replicas of this process (0 counts as 1) */
} dr_opencl_select;

/* Where one replica (a "place" of the backend) runs, for the run summary. */
typedef struct dr_opencl_place {
    char     device[128];   /* the device's name */
    int      device_index;  /* in the platform's list (bin/distref devices) */
    int      subdevice;     /* its sub-device, or -1 */
    uint32_t queue;         /* the command queue it uses (shared: 0 for all) */
    uint64_t bytes;         /* device memory allocated for it so far */
    uint64_t capacity;      /* its device's global memory (a sub-device: its parent's, shared) */
} dr_opencl_place;

/* The OpenCL backend's table; its open() selects from the environment
 * (one replica). */
const dr_backend_ops *dr_backend_opencl(void);

/* open() with a selection: sel->replicas places, mapped as above. */
int dr_backend_opencl_open(const dr_opencl_select *sel, const dr_model_spec *m, const dr_optimizer *o,
                           dr_numerics num, dr_backend **out, dr_err *err);

/* DR_OK when the selection can be opened (and, for exact numerics, every
 * device it uses has what they need); else DR_EUNSUPPORTED "not available:
 * <why>", "not supported: <why>" (a device that cannot be split) or the
 * capability missing, or DR_EUSAGE for a bad index, list or mapping name. */
int dr_opencl_available(const dr_opencl_select *sel, bool exact, dr_err *err);

/* The mapping an open backend uses ("shared", "queues", "subdevices"). */
const char *dr_opencl_mapping_name(const dr_backend *b);
/* Place p's device, queue and memory (p < the replicas it was opened for). */
int dr_opencl_place_of(const dr_backend *b, uint32_t p, dr_opencl_place *out, dr_err *err);

/* `distref devices`: every platform and device with the capabilities that
 * matter (correctly rounded divide/sqrt, denormals, fp64, memory, how it
 * can be split into sub-devices). */
void dr_opencl_devices_print(FILE *out);

#endif
