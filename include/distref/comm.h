/* distref engine — collectives behind one interface: threads today, MPI
 * ranks next.
 *
 * A comm endpoint belongs to one rank (a worker: a process under MPI, a
 * thread group in the threads comm) and sees only that rank's local
 * replicas: every collective is called by every rank at once, each passing
 * the arrays of its own replicas, as MPI collectives are. What travels is
 * exact accumulators (distref/exact.h), so no algorithm, tree shape, pack
 * size or rank count can change a bit: the algorithms differ in which links
 * carry bytes, which the comm counts on the strategy's emulated devices
 * (DR_ACC_BYTES per element moved between two devices).
 *
 * Replicas are numbered rank-major: local replica r of rank w is replica
 * w * local_replicas + r of the strategy (its device is
 * strategy->replica_device[w * local_replicas + r]).
 *
 * Algorithms (TensorFlow's cross-device ops, research notes §3):
 *   RING          reduce-scatter then all-gather around the replicas, the
 *                 array cut into R chunks [c*len/R, (c+1)*len/R)
 *                 (NcclAllReduce; CommunicationImplementation.RING / NCCL)
 *   HIERARCHICAL  HierarchicalCopyAllReduce: two halves gathered on a root
 *                 each, the roots exchange, each root scatters back
 *   ONE_DEVICE    ReductionToOneDevice: everything to replica 0, then back
 *   TORUS         the tpu strategy: rings along each dimension of the
 *                 emulated torus, one after another (all_reduce_ranges)
 * Packing: num_packs == 0 reduces each tensor (tensor_len) on its own;
 * num_packs = k > 0 concatenates all tensors and cuts them into k packs
 * (the last takes the remainder), as TensorFlow's _ConcatAndSplitPacker.
 * Across ranks the threads comm reduces each rank's replicas onto its first
 * local replica, runs a ring over the ranks, and broadcasts back.
 */
#ifndef DISTREF_COMM_H
#define DISTREF_COMM_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_REF)
#error "distref/comm.h is the engine's: core/ and ref/ may not include it (docs/ARCHITECTURE.md)"
#endif

#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/exact.h"
#include "distref/strategy.h"

typedef enum dr_comm_alg {
    DR_COMM_RING = 0,
    DR_COMM_HIERARCHICAL,
    DR_COMM_ONE_DEVICE,
    DR_COMM_TORUS
} dr_comm_alg;

typedef struct dr_comm_config {
    uint32_t      num_ranks;       /* workers */
    uint32_t      local_replicas;  /* replicas of each rank */
    dr_comm_alg   alg;             /* within a rank (mirrored's cross-device op) */
    int           num_packs;       /* 0: one pack per tensor; k > 0: k packs */
    const size_t *tensor_len;      /* ntensors lengths, summing to the array length */
    uint32_t      ntensors;
    dr_strategy  *strategy;        /* devices whose byte counters the collectives update */
} dr_comm_config;

typedef struct dr_comm dr_comm;    /* one rank's endpoint */

typedef struct dr_comm_ops {
    const char *name;
    /* The endpoints this process holds: all num_ranks of them for the
     * threads comm (eps[w] is rank w), only its own for MPI (*neps = 1). */
    int      (*open)(const dr_comm_config *cfg, dr_comm **eps, uint32_t *neps, dr_err *err);
    void     (*close)(dr_comm **eps, uint32_t neps);
    uint32_t (*rank)(const dr_comm *c);
    uint32_t (*num_ranks)(const dr_comm *c);
    /* Collective. local[0 .. local_replicas) are this rank's arrays of n
     * accumulators; afterwards each holds the sum over every replica of
     * every rank. */
    int      (*all_reduce)(dr_comm *c, dr_acc *const *local, size_t n, dr_err *err);
    /* Collective. dst[0..n) (on device dst_device, held by rank 0; NULL on
     * other ranks) += the sum over every replica: central_storage. */
    int      (*reduce_to)(dr_comm *c, dr_acc *const *local, size_t n, uint32_t dst_device, dr_acc *dst,
                          dr_err *err);
    /* Collective, tpu (alg TORUS): all-reduces the parameters that logical
     * core l holds, ranges[0 .. 2*nranges) being [lo, hi) pairs, by rings
     * along the torus; adds the alpha-beta time of the rings to *seconds
     * (the slowest ring of a dimension counts). */
    int      (*all_reduce_ranges)(dr_comm *c, dr_acc *const *local, const size_t *ranges, uint32_t nranges,
                                  uint32_t l, double *seconds, dr_err *err);
    int      (*barrier)(dr_comm *c, dr_err *err);
} dr_comm_ops;

/* Ranks as thread groups of one process (devices/comm_threads.c): every
 * rank's collective must be called from its own thread, all at once
 * (a single rank may call from any thread). */
const dr_comm_ops *dr_comm_threads(void);

#endif
