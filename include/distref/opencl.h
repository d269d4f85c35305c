/* distref engine — the OpenCL backend's selection and device listing
 * (devices/opencl_backend.c, docs/OPENCL.md).
 *
 * A run picks one OpenCL device by platform and device index (flags
 * --opencl_platform / --opencl_device, else the environment variables
 * DISTREF_OPENCL_PLATFORM / DISTREF_OPENCL_DEVICE, else 0 and 0); every
 * replica of the run (--num_gpus=N) lives on that device.
 */
#ifndef DISTREF_OPENCL_H
#define DISTREF_OPENCL_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_REF)
#error "distref/opencl.h is the engine's: core/ and ref/ may not include it (docs/ARCHITECTURE.md)"
#endif

#include <stdio.h>
#include "distref/backend.h"

typedef struct dr_opencl_select {
    int platform;   /* < 0: DISTREF_OPENCL_PLATFORM, else 0 */
    int device;     /* < 0: DISTREF_OPENCL_DEVICE, else 0 */
} dr_opencl_select;

/* The OpenCL backend's table; its open() selects from the environment. */
const dr_backend_ops *dr_backend_opencl(void);

/* open() on the selected device. */
int dr_backend_opencl_open(const dr_opencl_select *sel, const dr_model_spec *m, const dr_optimizer *o,
                           dr_numerics num, dr_backend **out, dr_err *err);

/* DR_OK when the selected device exists (and, for exact numerics, has
 * what they need); else DR_EUNSUPPORTED "not available: <why>" or the
 * capability missing, or DR_EUSAGE for an index out of range. */
int dr_opencl_available(const dr_opencl_select *sel, bool exact, dr_err *err);

/* `distref devices`: every platform and device with the capabilities that
 * matter (correctly rounded divide/sqrt, denormals, fp64, memory). */
void dr_opencl_devices_print(FILE *out);

#endif
