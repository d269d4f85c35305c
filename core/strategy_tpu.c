/* distref core — the tpu strategy: replicas on the cores of an
 * emulated TPU slice, placed by DeviceAssignment.build (core/tpu_system.c).
 *
 * Devices: device[0] is the host CPU that runs the input pipeline
 * (/job:worker/replica:0/task:0/device:CPU:0), device[1 + c] is TensorCore
 * c (/job:worker/replica:0/task:0/device:TPU:c) with the topology's HBM as
 * its capacity. Variables are mirrored: every replica holds a copy on its
 * first logical core (TPUStrategy's TPUMirroredVariable).
 */
#include "core/strategy_kinds.h"

#include <string.h>

int dr_strategy_check_tpu_live(const dr_strategy *s, dr_err *err)
{
    if (s->tpu_system && s->tpu_system->generation != s->tpu_generation)
        return dr_fail(err, DR_ESTATE, "tpu strategy: the TPU system was initialized again after this "
                       "strategy was built, which wiped its HBM; build the strategy again");
    return DR_OK;
}

static void add_core(dr_strategy *s, dr_device_type type, int index, uint64_t capacity)
{
    dr_device_spec spec;
    memset(&spec, 0, sizeof spec);
    strcpy(spec.job, "worker");
    spec.replica = 0;
    spec.task = 0;
    spec.type = type;
    spec.index = index;
    spec.has_type = 1;
    dr_device_init(&s->device[s->num_devices++], &spec, capacity);
}

static bool all_zero(const int *v, int n)
{
    for (int i = 0; i < n; i++) if (v[i]) return false;
    return true;
}

int dr_strategy_create_tpu(const dr_strategy_spec *spec, const dr_strategy_options *opt,
                           dr_strategy *s, dr_err *err)
{
    const dr_tpu_system *sys = opt ? opt->tpu_system : NULL;
    const dr_tpu_topology *t;
    int rc;
    (void)spec;
    if (!sys || !sys->initialized)
        return dr_fail(err, DR_ESTATE, "tpu strategy: the TPU system is not initialized; call "
                       "initialize_tpu_system (dr_tpu_initialize_system) first");
    t = &sys->topology;
    if (t->num_cores > DR_MAX_DEVICES - 1)
        return dr_fail(err, DR_EUNSUPPORTED, "--tpu=%s: %d cores; the emulation trains on at most %d",
                       t->name, t->num_cores, DR_MAX_DEVICES - 1);
    rc = dr_device_assignment_build(t, all_zero(opt->tpu_computation_shape, DR_TPU_RANK) ? NULL
                                    : opt->tpu_computation_shape, NULL, 0, &s->tpu_assignment, err);
    if (rc) return dr_fail_wrap(err, "tpu strategy on %s", t->name);
    add_core(s, DR_DEV_CPU, 0, opt->cpu_memory_bytes);
    for (int c = 0; c < t->num_cores; c++) add_core(s, DR_DEV_TPU, c, t->hbm_bytes_per_core);
    s->num_replicas = (uint32_t)s->tpu_assignment.num_replicas;
    for (uint32_t r = 0; r < s->num_replicas; r++) {
        s->replica_device[r] = dr_strategy_tpu_device(s, r, 0);
        s->input_device[r] = 0;
    }
    s->mirrored_variables = true;
    s->distributes_input = true;
    s->variable_device = s->replica_device[0];
    s->tpu_system = sys;
    s->tpu_generation = sys->generation;
    return DR_OK;
}
