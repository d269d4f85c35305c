/* distref fuzzing — TF_CONFIG (core/cluster.c).
 *
 * Feeds: the input as TF_CONFIG text (a NUL-terminated copy; an embedded NUL
 * ends it, as in the environment) to dr_cluster_parse. On success it runs
 * what a run does with the cluster: dr_cluster_check against every strategy
 * kind, the worker count, id and chief queries, and dr_strategy_create for
 * multi_worker_mirrored and parameter_server with the cluster's workers and
 * ps tasks (as core/plan.c and ref/ps.c size them).
 * Checks: no crash, UB or leak; any error return is fine. Also that a
 * rejected document leaves the output untouched (cluster.h promises it).
 */
#include "distref/cluster.h"
#include "distref/strategy.h"
#include "fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static dr_cluster c, before;
    static dr_strategy s;
    dr_err err = { 0, "" };
    char *text = fz_cstr(data, size);
    if (text == NULL)
        return 0;
    memset(&c, 0xa5, sizeof c);
    before = c;
    int rc = dr_cluster_parse(text, &c, &err);
    free(text);
    if (rc != DR_OK) {
        if (memcmp(&c, &before, sizeof c) != 0)
            __builtin_trap();           /* "On error *out is left untouched" */
        return 0;
    }
    for (int k = DR_STRATEGY_OFF; k <= DR_STRATEGY_TPU; k++)
        (void)dr_cluster_check(&c, (dr_strategy_kind)k, &err);
    (void)dr_cluster_worker_count(&c);
    (void)dr_cluster_id_in_cluster(&c);
    (void)dr_cluster_is_chief(&c);
    (void)dr_task_type_name(c.task_type);

    dr_strategy_spec spec;
    dr_strategy_options opt;
    memset(&spec, 0, sizeof spec);
    memset(&opt, 0, sizeof opt);
    opt.num_workers = dr_cluster_worker_count(&c);
    spec.kind = DR_STRATEGY_MULTI_WORKER_MIRRORED;
    (void)dr_strategy_create(&spec, &opt, &s, &err);
    opt.num_workers = c.job[DR_TASK_WORKER].n;
    opt.num_ps = c.job[DR_TASK_PS].n;
    spec.kind = DR_STRATEGY_PARAMETER_SERVER;
    (void)dr_strategy_create(&spec, &opt, &s, &err);
    dr_cluster_free(&c);
    return 0;
}
