/* distref engine — the OpenCL backend's selection, replica mapping and
 * device listing (devices/opencl/opencl_backend.c, docs/OPENCL.md).
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

/* The OpenCL backend (devices/opencl_*.c). Its open() and available()
 * read dr_backend_params' device selection:
 *   platform  < 0: $DISTREF_OPENCL_PLATFORM (parsed as the flag is), else 0
 *   devices   "D" or "D1,D2,..."; NULL or "": $DISTREF_OPENCL_DEVICE, else "0"
 *   mapping   shared|queues|subdevices|auto; NULL or "": $DISTREF_OPENCL_MAPPING,
 *             else auto (shared for one place, queues for a list, else subdevices)
 * and map params->places replicas onto them. available() also answers,
 * for exact numerics, whether every device it uses has what they need
 * (correctly rounded divide/sqrt, denormals); "not supported: <why>" for a
 * device that cannot be split. mapping_name() and place_of() say where
 * each place runs. */
const dr_backend_ops *dr_backend_opencl(void);

/* `distref devices`: every platform and device with the capabilities that
 * matter (correctly rounded divide/sqrt, denormals, fp64, memory, how it
 * can be split into sub-devices). */
void dr_opencl_devices_print(FILE *out);

#endif
