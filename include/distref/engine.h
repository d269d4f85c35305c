/* distref engine — the optimized variants, written for speed and
 * independently of the reference (docs/ARCHITECTURE.md).
 *
 * The engine's step lives in strategies/ (split, staging, the step of each
 * strategy) and runs on two interfaces: a backend for a replica's tensors
 * and kernels (distref/backend.h; devices/cpu/openmp_backend.c) and a comm for
 * collectives that sees only its own rank's replicas (distref/comm.h;
 * devices/comm/comm_threads.c). It imports the core only, never ref/.
 */
#ifndef DISTREF_ENGINE_H
#define DISTREF_ENGINE_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_REF)
#error "distref/engine.h is the engine's: core/ and ref/ may not include it (docs/ARCHITECTURE.md)"
#endif

#include <stdint.h>
#include "distref/variant.h"

/* --variant=openmp: the OpenMP CPU backend and the threads comm; exact
 * numerics give the reference's bits, fast numerics (sgemm, libm) are held
 * to docs/CONFORMANCE.md's bounds. */
extern const dr_variant dr_variant_openmp;

/* --variant=mpi: the same engine under `mpirun -np N`, one rank per worker
 * holding only its own replicas, the MPI comm between ranks (docs/MPI.md). */
extern const dr_variant dr_variant_mpi;

/* --variant=opencl: the OpenCL backend (devices/opencl/opencl_backend.c) on the
 * device chosen by --opencl_platform/--opencl_device (distref/opencl.h),
 * the same step and comm; exact numerics give the reference's bits. */
extern const dr_variant dr_variant_opencl;

/* TensorFlow's split of a global step of `count` examples (nominal batch G)
 * over R replicas, written independently of core/input.c: off[0..R]. */
void dr_engine_split(uint32_t count, uint32_t G, uint32_t R, uint32_t *off);

/* DATA sharding over W workers of R replicas each (TensorFlow's legacy
 * rebatch): the batch of `count` ids is cut into N = W*R slices of
 * ceil(count/N); local replica r of worker w takes slice r*W + w. out gets
 * the ids replica by replica (worker-major), off[0..N] the boundaries,
 * row0[0..N) where each replica's slice starts in ids (the global batch's
 * row of its first example: --dropout_masks). */
void dr_engine_shard_data(const uint32_t *ids, uint32_t count, uint32_t W, uint32_t R,
                          uint32_t *out, uint32_t *off, uint32_t *row0);

#endif
