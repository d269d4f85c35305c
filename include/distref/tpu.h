/* distref — the emulated TPU: topologies, DeviceAssignment, spatial
 * partitioning (research notes §5).
 *
 * A topology is a mesh (x, y, z, cores per chip) with torus wrap-around
 * links and per-core HBM. Presets by name: "local" (a default v3-8 slice),
 * "v2-8", "v3-8", "v3-32", "v4-8" (the suffix counts TensorCores); a
 * --tpu_platform (v2, v3, v4) picks the generation of "local". A "grpc://"
 * address is rejected: there is no remote TPU in emulation.
 *
 * DeviceAssignment.build(topology, computation_shape, computation_stride,
 * num_replicas) follows tensorflow/python/tpu/device_assignment.py,
 * including its validation messages.
 */
#ifndef DISTREF_TPU_H
#define DISTREF_TPU_H

#include <stdbool.h>
#include <stdint.h>
#include "distref/error.h"

#define DR_TPU_RANK 4
#define DR_TPU_MAX_CORES 512

typedef struct dr_tpu_topology {
    char     name[32];                /* "v3-8" */
    int      mesh[DR_TPU_RANK];       /* x, y, z, cores per chip */
    int      num_cores;               /* product of mesh */
    uint64_t hbm_bytes_per_core;
    /* alpha-beta link model for the emulated step time */
    double   link_latency_s;          /* alpha, per hop */
    double   link_bytes_per_s;        /* beta^-1 */
} dr_tpu_topology;

/* name: "local", "" or NULL, a preset; platform: "" or NULL, "v2", "v3", "v4"
 * (picks the generation of local; with a preset it must agree with it).
 * Any "vN-M" with N in 2..4 and M a power of two in [8, DR_TPU_MAX_CORES] is
 * accepted: M/2 chips of 2 cores as an x*y torus, x = y or x = 2y (v3-16 is
 * [4,2,1,2]). HBM per core: v2 8 GiB, v3 and v4 16 GiB (v4 emulated as 2
 * separate TensorCores per chip, not one megacore). Link model, an emulation
 * assumption: 1e-6 s per hop, 50e9 bytes/s per link. hbm_scale (> 0, finite)
 * multiplies the preset's HBM, rounded down, at least 1 byte (tests provoke
 * out-of-memory). DR_EUSAGE for grpc:// addresses, unknown names or
 * platforms, and a platform that disagrees with the preset; out is untouched
 * on error. */
int dr_tpu_topology_resolve(const char *tpu, const char *platform, double hbm_scale,
                            dr_tpu_topology *out, dr_err *err);

/* Physical coordinates of core c: c = ((x*my + y)*mz + z)*cores_per_chip + k.
 * A core outside [0, num_cores) gives coordinates -1; coordinates outside
 * the mesh give index -1. */
void dr_tpu_core_coords(const dr_tpu_topology *t, int core, int coords[DR_TPU_RANK]);
int  dr_tpu_core_index(const dr_tpu_topology *t, const int coords[DR_TPU_RANK]);

typedef struct dr_device_assignment {
    int num_replicas;
    int num_cores_per_replica;
    /* core_assignment[r][l] = the physical core of logical core l of replica r */
    int core[DR_TPU_MAX_CORES];       /* num_replicas * num_cores_per_replica entries */
} dr_device_assignment;

/* computation_shape / computation_stride may be NULL ([1,1,1,1]);
 * num_replicas 0 means "as many as fit". DR_EUSAGE with TensorFlow's
 * messages: shape/stride of the wrong rank, non-positive entries,
 * "computation footprint ... does not fit in TPU topology shape ...",
 * "requested N replicas but only M replicas with shape ... and
 * computation_stride ... fit in a TPU mesh of shape ...". */
int dr_device_assignment_build(const dr_tpu_topology *t, const int *computation_shape,
                               const int *computation_stride, int num_replicas,
                               dr_device_assignment *out, dr_err *err);

/* The same with explicit lengths, for shapes read from flags or files:
 * a non-NULL shape or stride whose length is not DR_TPU_RANK fails with
 * "computation_shape must have shape [4]; got (3,)". Replica order (as
 * TensorFlow's): with a shape spanning whole chips (last entry = cores per
 * chip), stride 1 and every replica that fits, replicas follow TF's 3D ring
 * (_ring_3d) over blocks and logical cores a ring inside the block; otherwise
 * replica r's grid position counts the core dimension fastest, then x, y, z,
 * and logical cores are row-major over (x, y, z, core). num_replicas < 0 is
 * DR_EUSAGE. out is untouched on error. */
int dr_device_assignment_build_n(const dr_tpu_topology *t, const int *computation_shape,
                                 int shape_len, const int *computation_stride, int stride_len,
                                 int num_replicas, dr_device_assignment *out, dr_err *err);

/* Model Garden's spatial partitioning (official/vision/train_spatial_partitioning.py):
 * prod(input_partition_dims) in {1,2,4,8,16} maps to computation shapes
 * [1,1,1,1], [1,1,1,2], [1,2,1,2], [2,2,1,2], [4,2,1,2]; num_replicas =
 * num_cores / prod. Anything else is DR_EUSAGE. dims is a comma list
 * ("2,2": exactly 2 decimal integers, no spaces); each dim must divide the
 * matching input dimension (28 x 28). Checks in order: syntax (positive
 * integers up to 1000000), count, the product, divisibility; outputs
 * untouched on error. */
int dr_tpu_partition_shape(const char *dims, const int input_shape[2], int ndims_out[2],
                           int computation_shape[DR_TPU_RANK], int *product, dr_err *err);

/* Hops between two cores on the torus (wrap-around in every mesh dimension;
 * cores on one chip are 0 hops apart): the sum over x, y, z of
 * min(|a-b|, m-|a-b|). -1 for a core out of range. */
int dr_tpu_hops(const dr_tpu_topology *t, int core_a, int core_b);

/* ---- the TPU system: initialize_tpu_system ---------------------------- */

/* tf.tpu.experimental.initialize_tpu_system(resolver). The emulated system
 * must be initialized before a tpu strategy is built on it (DR_ESTATE
 * otherwise), and every initialization wipes the emulated HBM: each one
 * starts a new generation, and a strategy (with every buffer it placed on
 * the cores) built in an earlier generation is refused from then on. */
typedef struct dr_tpu_system {
    dr_tpu_topology topology;
    bool            initialized;
    uint32_t        generation;      /* counts initializations */
} dr_tpu_system;

/* Resolves the topology (dr_tpu_topology_resolve: grpc:// and unknown names
 * are DR_EUSAGE) and initializes. On error the system is left as it was. */
int dr_tpu_initialize_system(dr_tpu_system *sys, const char *tpu, const char *platform,
                             double hbm_scale, dr_err *err);

/* ---- collectives and the emulated step time ----------------------------- */

/* An alpha-beta estimate for moving bytes between two cores: hops * alpha +
 * bytes / beta (cores on one chip: no link, only the bandwidth term). */
double dr_tpu_transfer_seconds(const dr_tpu_topology *t, int core_a, int core_b, uint64_t bytes);

#endif
