/* distref — strategies, shaped like tf.distribute.
 *
 *   TensorFlow                                 distref
 *   strategy = get_distribution_strategy(...)  dr_get_distribution_strategy + dr_strategy_create
 *   strategy.num_replicas_in_sync              dr_strategy_num_replicas(s)
 *   strategy.run(fn, args)                     dr_strategy_run(s, fn, arg)
 *   strategy.reduce(SUM|MEAN, v, axis)         dr_strategy_reduce(s, op, v, axis, out)
 *   strategy.experimental_local_results(v)     v->values[0 .. v->num_replicas)
 *   tf.nn.compute_average_loss(l, G)           dr_compute_average_loss(ctx, l, n, G)
 *   tf.nn.scale_regularization_loss(r)         dr_scale_regularization_loss(ctx, r)
 *   tf.distribute.get_strategy()               dr_get_strategy() (the default singleton)
 *
 * One difference matters and is the point of distref: a per-replica loss is
 * not a float but a dr_scaled, an exact rational (accumulator / integer).
 * TensorFlow rounds sum/G and reg/R on every replica and then adds the
 * rounded pieces, so the bits depend on R. Here the pieces are added exactly
 * over a common denominator and rounded once, so they do not
 * (docs/SEMANTICS.md).
 *
 * The reference emulates every device in one process: replicas run one after
 * another, each with its own buffers on its own emulated device, and all
 * data that crosses devices is copied explicitly and counted.
 */
#ifndef DISTREF_STRATEGY_H
#define DISTREF_STRATEGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/device.h"
#include "distref/error.h"
#include "distref/exact.h"
#include "distref/factory.h"
#include "distref/tpu.h"

#define DR_MAX_DEVICES 65   /* the host CPU and up to 64 emulated accelerators */

/* ---- exact scaled values ------------------------------------------------ */

/* The exact value num / den. */
typedef struct dr_scaled {
    dr_acc   num;
    uint32_t den;
} dr_scaled;

void  dr_scaled_init(dr_scaled *s, uint32_t den);
/* a += b exactly; the denominators become their product unless equal.
 * Products beyond 2^32 are refused (returns false, a unchanged). */
bool  dr_scaled_add(dr_scaled *a, const dr_scaled *b);
float dr_scaled_round(const dr_scaled *s);

/* ---- the strategy ------------------------------------------------------- */

typedef struct dr_strategy_options {
    uint64_t gpu_memory_bytes;   /* capacity of each emulated GPU; 0 = unlimited */
    uint64_t cpu_memory_bytes;   /* capacity of the host CPU; 0 = unlimited */
    uint32_t num_workers;        /* multi_worker_mirrored, parameter_server: workers (TF_CONFIG); 0 = 1 */
    uint32_t num_ps;             /* parameter_server: ps tasks (TF_CONFIG) */
    const dr_tpu_system *tpu_system;          /* tpu: an initialized system (tpu.h) */
    int      tpu_computation_shape[DR_TPU_RANK];        /* tpu: cores per replica; zeros = [1,1,1,1] */
} dr_strategy_options;

typedef struct dr_strategy {
    dr_strategy_spec spec;
    uint32_t   num_replicas;
    uint32_t   num_workers;                /* multi_worker_mirrored: W; otherwise 1 */
    uint32_t   num_devices;
    dr_device  device[DR_MAX_DEVICES];     /* [0] = /cpu:0 (the host), then /gpu:0.. */
    uint32_t   replica_device[DR_MAX_DEVICES - 1];   /* index into device[] */
    uint32_t   input_device[DR_MAX_DEVICES - 1];     /* the CPU whose pipeline feeds the replica */
    uint32_t   variable_device;            /* central_storage: where variables live */
    bool       mirrored_variables;         /* each replica keeps its own copy */
    bool       distributes_input;          /* false for the default strategy */
    /* tpu: device[1 + c] is core c; replica r's logical core l runs on
     * physical core tpu_assignment.core[r * cores_per_replica + l]. */
    const dr_tpu_system *tpu_system;
    uint32_t   tpu_generation;             /* the system's generation when built */
    dr_device_assignment tpu_assignment;
} dr_strategy;

/* parameter_server (core/strategy_ps.c): device 0 is the coordinator
 * (/job:chief/replica:0/task:0/device:CPU:0), then worker w
 * (/job:worker/replica:0/task:w/device:CPU:0), then ps task p
 * (/job:ps/replica:0/task:p/device:CPU:0). */
#define DR_PS_MAX_WORKERS 64
static inline uint32_t dr_ps_worker_device(uint32_t w) { return 1 + w; }
static inline uint32_t dr_ps_task_device(const dr_strategy *s, uint32_t p) { return 1 + s->num_workers + p; }
static inline uint32_t dr_ps_num_ps(const dr_strategy *s) { return s->num_devices - 1 - s->num_workers; }

/* tpu: the device index of replica r's logical core l. */
static inline uint32_t dr_strategy_tpu_device(const dr_strategy *s, uint32_t r, uint32_t l)
{
    return 1u + (uint32_t)s->tpu_assignment.core[r * (uint32_t)s->tpu_assignment.num_cores_per_replica + l];
}

/* Builds the emulated devices and replica placement of a validated spec.
 * multi_worker_mirrored emulates opt->num_workers workers, each with its
 * CPU (/job:worker/replica:0/task:w/device:CPU:0) and num_gpus GPUs, in one
 * process. tpu needs opt->tpu_system initialized (DR_ESTATE otherwise) and
 * places replicas by DeviceAssignment.build(topology, computation_shape). */
int  dr_strategy_create(const dr_strategy_spec *spec, const dr_strategy_options *opt,
                        dr_strategy *s, dr_err *err);

/* DR_ESTATE once the TPU system under a tpu strategy was initialized again
 * (its HBM wiped); DR_OK for any other strategy (dr_strategy_run checks it;
 * a collective outside it, as ref/tpu_collective.c's, checks it too). */
int  dr_strategy_check_tpu_live(const dr_strategy *s, dr_err *err);

/* The default strategy: one replica on /cpu:0, no input distribution. */
const dr_strategy *dr_get_strategy(void);

static inline uint32_t dr_strategy_num_replicas(const dr_strategy *s) { return s->num_replicas; }

/* What a replica function sees (tf.distribute.ReplicaContext). */
typedef struct dr_replica_ctx {
    const dr_strategy *strategy;
    uint32_t   replica_id_in_sync_group;
    uint32_t   num_replicas_in_sync;
    dr_device *device;
    uint32_t   global_batch_count;   /* examples in this global step, all replicas */
} dr_replica_ctx;

typedef int (*dr_replica_fn)(const dr_replica_ctx *ctx, void *arg, dr_err *err);

/* Calls fn once per replica, in replica order (the reference is sequential;
 * engine variants run replicas concurrently and must not care). A tpu
 * strategy whose system was initialized again since (its HBM wiped) is
 * refused with DR_ESTATE. */
int  dr_strategy_run(dr_strategy *s, uint32_t global_batch_count, dr_replica_fn fn,
                     void *arg, dr_err *err);

/* Per-replica values: replica r holds count[r] floats at values[r]. */
typedef struct dr_per_replica {
    uint32_t      num_replicas;
    const float  *const *values;
    const uint32_t *count;
} dr_per_replica;

typedef enum dr_reduce_op { DR_REDUCE_SUM = 0, DR_REDUCE_MEAN } dr_reduce_op;

/* strategy.reduce. axis < 0 (None): each replica holds one value; SUM adds
 * them, MEAN divides by the number of replicas. axis 0: the values are
 * concatenated along the batch; SUM adds all, MEAN divides by their total
 * count (TensorFlow's "correct denominator"). Exact, rounded once. */
int  dr_strategy_reduce(const dr_strategy *s, dr_reduce_op op, const dr_per_replica *v,
                        int axis, float *out, dr_err *err);

/* tf.nn.compute_average_loss: the sum of this replica's n per-example
 * losses over global_batch_size, as the seeds pass it; global_batch_size 0
 * is TensorFlow's None: over n * num_replicas_in_sync, the replica's own
 * size (0 for an empty replica, as div_no_nan gives). docs/SEMANTICS.md §2
 * says why None weighs examples unevenly when the split is uneven. */
dr_scaled dr_compute_average_loss(const dr_replica_ctx *ctx, const float *per_example_loss,
                                  uint32_t n, uint32_t global_batch_size);

/* tf.nn.scale_regularization_loss: reg / num_replicas_in_sync, exactly. */
dr_scaled dr_scale_regularization_loss(const dr_replica_ctx *ctx, float reg_loss);


#endif
