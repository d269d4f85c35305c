/* distref core — the parameter_server strategy's devices: the coordinator
 * (TensorFlow runs it in the task named "chief"), the workers' CPUs and the
 * ps tasks, from TF_CONFIG's counts. The training program is the
 * reference's (ref/ps.c). */
#include "core/strategy_kinds.h"

#include <stdio.h>
#include <string.h>


static void add_task_device(dr_strategy *s, const char *job, int task, uint64_t capacity)
{
    dr_device_spec spec;
    memset(&spec, 0, sizeof spec);
    snprintf(spec.job, sizeof spec.job, "%s", job);
    spec.replica = 0;
    spec.task = task;
    spec.type = DR_DEV_CPU;
    spec.has_type = 1;
    dr_device_init(&s->device[s->num_devices++], &spec, capacity);
}

int dr_strategy_create_ps(const dr_strategy_spec *spec, const dr_strategy_options *opt,
                          dr_strategy *s, dr_err *err)
{
    uint32_t W = opt ? opt->num_workers : 0, P = opt ? opt->num_ps : 0;
    uint64_t cap = opt ? opt->cpu_memory_bytes : 0;
    if (spec->num_gpus != 0)
        return dr_fail(err, DR_EUNSUPPORTED, "--num_gpus=%d with parameter_server: GPUs on the workers are "
                       "not emulated yet (workers compute on their CPUs); use --num_gpus=0", spec->num_gpus);
    if (W == 0 || P == 0)
        return dr_fail(err, DR_EUSAGE, "parameter_server needs at least one worker and one ps task "
                       "(TF_CONFIG's cluster); got %u workers and %u ps tasks", W, P);
    if (W > DR_PS_MAX_WORKERS || 1 + (uint64_t)W + P > DR_MAX_DEVICES)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: %u workers and %u ps tasks: distref emulates at most "
                       "%d tasks besides the coordinator", W, P, DR_MAX_DEVICES - 1);
    /* TensorFlow runs the coordinator in the task named "chief". */
    add_task_device(s, "chief", 0, cap);
    for (uint32_t w = 0; w < W; w++) add_task_device(s, "worker", (int)w, cap);
    for (uint32_t p = 0; p < P; p++) add_task_device(s, "ps", (int)p, cap);
    s->num_workers = W;
    s->num_replicas = 1;                      /* num_replicas_in_sync with CPU workers */
    s->replica_device[0] = dr_ps_worker_device(0);
    s->input_device[0] = dr_ps_worker_device(0);
    s->variable_device = dr_ps_task_device(s, 0);
    s->distributes_input = true;
    return DR_OK;
}

