/* distref engine — collectives behind one interface: threads today, MPI
 * ranks next.
 *
 * A comm endpoint belongs to one rank (a worker: a process under MPI, a
 * thread group in the threads comm) and sees only that rank's local
 * replicas: every collective is called by every rank at once, each passing
 * the arrays of its own replicas, as MPI collectives are. The number form
 * of the arrays is a parameter of each collective (distref/form.h, listed
 * at dr_comm_ops below). In exact forms what travels is exact accumulators
 * (distref/exact.h), so no algorithm, tree shape, pack
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
 *
 * The float form (DR_FORM_F32; fast numerics: TensorFlow's float all-reduce). The
 * same algorithms, packs and chunks move floats, so the order of the float
 * additions is the algorithm's, and the bits depend on R and the algorithm
 * as TensorFlow's do; every replica still ends with the same bits (the
 * total is computed once per element and copied). Bytes count 4 per float
 * element moved. x_r is replica r's element, "+" a float addition, sums
 * associate to the left:
 *   RING          chunk c: ((x_c + x_{c+1}) + x_{c+2}) + ... + x_{c-1}
 *                 (indices mod R): the reduce-scatter starts the chunk at
 *                 member c and each member adds its own on receipt; the
 *                 all-gather copies the total around. (NCCL starts chunk c
 *                 one member later; the order is the same rotation.)
 *   HIERARCHICAL  s0 = x_0 + ... + x_{h-1}, s1 = x_h + ... + x_{R-1} in
 *                 replica order (h = R/2), total = s0 + s1
 *   ONE_DEVICE    x_0 + x_1 + ... + x_{R-1} on replica 0
 *   across ranks  each rank's replicas in order onto its local[0] (y_w),
 *                 then the ring over the ranks: chunk c = y_c + y_{c+1} +
 *                 ... + y_{c-1} (mod W)
 *   reduce_to     dst = x_0 + x_1 + ... in global replica order (overwrites)
 *   TORUS         per dimension, per line: the RING order over the line's
 *                 members in ring order, dimension after dimension
 * (-0.0 + 0.0 is +0.0 and a NaN or inf propagates, as in any float sum.)
 */
#ifndef DISTREF_COMM_H
#define DISTREF_COMM_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_REF)
#error "distref/comm.h is the engine's: core/ and ref/ may not include it (docs/ARCHITECTURE.md)"
#endif

#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/cacc.h"
#include "distref/exact.h"
#include "distref/form.h"
#include "distref/strategy.h"

typedef enum dr_comm_alg {
    DR_COMM_RING = 0,
    DR_COMM_HIERARCHICAL,
    DR_COMM_ONE_DEVICE,
    DR_COMM_TORUS
} dr_comm_alg;

/* Across ranks (the MPI comm, more than one rank), for the all-reduce of
 * DR_FORM_CACC (TensorFlow's CommunicationImplementation):
 *   RANKS_RING    the ring "across ranks" below, merging compact
 *                 accumulators hop by hop (RING)
 *   RANKS_NATIVE  the MPI library's own all-reduce on exact integer digits:
 *                 the ranks agree on each element's exponent grid, then
 *                 MPI_Iallreduce(MPI_SUM) adds fixed-point digits with
 *                 headroom, which no reduction order can change (NCCL:
 *                 the library's own collective, devices/mpi/comm_mpi_native.c)
 *   RANKS_AUTO    RANKS_NATIVE (docs/MPI.md measures both); the engine's
 *                 exact step calls all_reduce_round instead (below;
 *                 strategies/round_once.c)
 * The result is the same exact value (or the overflow flag) either way;
 * DR_FORM_ACC and DR_FORM_F32 always run the ring. */
typedef enum dr_comm_ranks_alg {
    DR_COMM_RANKS_AUTO = 0,
    DR_COMM_RANKS_RING,
    DR_COMM_RANKS_NATIVE
} dr_comm_ranks_alg;

typedef struct dr_comm_config {
    uint32_t      num_ranks;       /* workers */
    uint32_t      local_replicas;  /* replicas of each rank */
    dr_comm_alg   alg;             /* within a rank (mirrored's cross-device op) */
    int           num_packs;       /* 0: one pack per tensor; k > 0: k packs */
    const size_t *tensor_len;      /* ntensors lengths, summing to the array length */
    uint32_t      ntensors;
    dr_strategy  *strategy;        /* devices whose byte counters the collectives update */
    double        timeout_s;       /* MPI: seconds a collective may wait without any message
                                      moving before it fails naming the rank it waits for
                                      (0: DR_COMM_TIMEOUT_DEFAULT); the threads comm waits */
    dr_comm_ranks_alg ranks_alg;   /* MPI, more than one rank: the compact all-reduce across ranks */
} dr_comm_config;

#define DR_COMM_TIMEOUT_DEFAULT 5.0

typedef struct dr_comm dr_comm;    /* one rank's endpoint */

/* Every collective takes the number form of its arrays (distref/form.h),
 * as nccl-tests makes the datatype a parameter: local[0 .. local_replicas)
 * are this rank's arrays of n elements of that form (dr_acc, dr_cacc or
 * float). The algorithms, packs, chunks and byte counts are the same for
 * every form; what the form changes:
 *   DR_FORM_ACC        exact; wire DR_ACC_BYTES per element moved.
 *   DR_FORM_CACC       exact, DR_CACC_BYTES per element moved. An element
 *                      that leaves its window comes out marked overflowed
 *                      (in every replica alike: each element's total is
 *                      formed once and copied), and the caller redoes the
 *                      reduction with DR_FORM_ACC.
 *   DR_FORM_F32        4 bytes per element; the additions in the
 *                      algorithm's float order (above).
 *   DR_FORM_F32_EXACT  all_reduce only, MPI comm only (the threads comm and
 *                      every other call answer DR_EUNSUPPORTED): floats in;
 *                      afterwards every replica holds, per element, the
 *                      exact sum over every replica of every rank rounded
 *                      once (exact.h: the bits of dr_acc_round of those
 *                      terms, in any order, for any rank and replica
 *                      count). Any n; the packs and tensor lengths of the
 *                      config do not apply.
 * An unknown form is DR_EUSAGE. */
/* A replica's n exact partials as double-doubles (all_reduce_round's
 * dd form, 16 bytes an element against a dr_cacc's 32): element i's
 * partial is exactly pairs[2i] + pairs[2i+1], both zero or normal doubles
 * whose bits lie in [2^-320, 2^280) (what a compact partial of up to 106
 * bits holds); a zero partial is a pair of signed zeros that keeps the
 * accumulator's flags (empty: +0 -0; only -0 terms: -0 -0; else +0 +0).
 * Any other partial is an escape: pairs[2i] is NaN and the partial
 * itself is the next entry of esc, esc_at[j] its element (ascending). */
typedef struct dr_dd_parts {
    const double   *pairs;
    const dr_cacc  *esc;
    const uint32_t *esc_at;
    size_t          nesc;
} dr_dd_parts;

typedef struct dr_comm_ops {
    const char *name;
    /* The endpoints this process holds: all num_ranks of them for the
     * threads comm (eps[w] is rank w), only its own for MPI (*neps = 1). */
    int      (*open)(const dr_comm_config *cfg, dr_comm **eps, uint32_t *neps, dr_err *err);
    void     (*close)(dr_comm **eps, uint32_t neps);
    uint32_t (*rank)(const dr_comm *c);
    uint32_t (*num_ranks)(const dr_comm *c);
    /* Collective. Afterwards each local array holds the sum over every
     * replica of every rank. */
    int      (*all_reduce)(dr_comm *c, dr_form_id form, void *const *local, size_t n, dr_err *err);
    /* Collective: central_storage. dst[0..n) (on device dst_device, held
     * by rank 0; NULL on other ranks) gets the sum over every replica:
     * exact forms add it to what dst holds (zero it first for the sum
     * alone); floats overwrite dst with x_0 + x_1 + ... (global replica
     * order). */
    int      (*reduce_to)(dr_comm *c, dr_form_id form, void *const *local, size_t n, uint32_t dst_device,
                          void *dst, dr_err *err);
    /* Collective, tpu (alg TORUS, one rank; ACC, CACC or F32):
     * all-reduces the parameters that logical core l holds, ranges[0 ..
     * 2*nranges) being [lo, hi) pairs, by rings along the torus; adds the
     * alpha-beta time of the rings to *seconds (the slowest ring of a
     * dimension counts). */
    int      (*all_reduce_ranges)(dr_comm *c, dr_form_id form, void *const *local, const size_t *ranges,
                                  uint32_t nranges, uint32_t l, double *seconds, dr_err *err);
    int      (*barrier)(dr_comm *c, dr_err *err);
    /* Optional (NULL where one process holds every rank, as the threads
     * comm). Collective: all[w * bytes ..] gets rank w's `bytes` bytes of
     * mine, on every rank. The engine's agreement before a reduction and
     * its step report (losses, counts, the examples each rank staged). */
    int      (*all_gather)(dr_comm *c, const void *mine, size_t bytes, void *all, dr_err *err);
    /* Optional (NULL: the threads comm; the MPI comm offers it,
     * devices/mpi/comm_mpi_gradx.c). Collective, the exact gradient
     * all-reduce rounded once: local[0 .. local_replicas) are this rank's
     * n compact partials (left as they were); afterwards every out[r] (n
     * floats) holds, per element, round(total / d), total the exact sum
     * over every replica of every rank: dr_acc_round_div's bits of it (so
     * dr_cacc_round_div's of the all_reduce(DR_FORM_CACC) total wherever
     * that is not overflowed), for any rank count, replica count or
     * order. An element one of whose partials is overflowed comes out
     * NaN and counts in *overflowed (the same count on every rank; the
     * caller redoes the reduction with DR_FORM_ACC). d >= 1; n <= 2^25.
     * The partials come in one of two forms, exactly one non-NULL:
     * local (compact accumulators, encoded by the comm) or dd[0 ..
     * local_replicas) (already double-doubles, dr_dd_parts above: half
     * the bytes to read, nothing to encode; the same bits). */
    int      (*all_reduce_round)(dr_comm *c, const dr_cacc *const *local, const dr_dd_parts *dd, size_t n, uint32_t d,
                                 float *const *out, size_t *overflowed, dr_err *err);
} dr_comm_ops;

/* Encodes n compact partials a[0 .. n) as dr_dd_parts (devices/mpi/
 * comm_mpi_gradx.c, the encoder all_reduce_round runs on compact input):
 * pairs[2n]; esc and esc_at room for n; returns the number of escapes. */
size_t dr_dd_encode(const dr_cacc *a, size_t n, double *pairs, dr_cacc *esc, uint32_t *esc_at);

/* Ranks as thread groups of one process (devices/comm/comm_threads.c): every
 * rank's collective must be called from its own thread, all at once
 * (a single rank may call from any thread). */
const dr_comm_ops *dr_comm_threads(void);

/* Ranks as MPI processes (devices/mpi/comm_mpi.c): open() gives this process's
 * one endpoint; MPI must be initialized (distref/mpi.h) with a world of
 * num_ranks. One rank runs the threads comm's algorithms on its local
 * replicas (the same bits and bytes); more ranks run, per pack, the ring
 * "across ranks" above over nonblocking point-to-point messages: the exact
 * collectives carry the DR_ACC_BYTES wire form, the float ones floats, in
 * the float order documented above (the threads comm's bits for the same
 * ranks and local replicas); all_reduce of DR_FORM_CACC runs ranks_alg
 * (above: the ring, or MPI_Iallreduce on exact integer digits), and
 * DR_FORM_F32_EXACT its own exact float algorithm (comm_mpi_f32x.c);
 * all_reduce_round sends compact partials as double-doubles
 * (comm_mpi_gradx.c). Every wait has a deadline (timeout_s without
 * progress), after which the call fails naming the rank it waited for. */
const dr_comm_ops *dr_comm_mpi(void);

#endif
