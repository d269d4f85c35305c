/* distref core — Model Garden's --worker_hosts/--task_index as a TF_CONFIG
 * (distref/flags.h, dr_tf_config_from_hosts). Model Garden's
 * configure_cluster (official/common/distribute_utils.py) builds
 * {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": i}}
 * from them when TF_CONFIG is unset, requires the index when there is more
 * than one worker, and takes index 0 for one; with TF_CONFIG set it ignores
 * them. distref refuses what Model Garden would ignore or pass on: both
 * ways of giving the cluster at once, an empty host, an index past the
 * list, and --task_index without --worker_hosts. */
#include "distref/flags.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

int dr_tf_config_from_hosts(const char *hosts, bool hosts_given, int64_t task_index, bool index_given,
                            const char *tf_config_env, char **out, dr_err *err)
{
    json_object *root, *cluster, *workers, *task;
    size_t n = 0;
    *out = NULL;
    if (!hosts_given) {
        if (index_given)
            return dr_fail(err, DR_EUSAGE, "--task_index=%lld without --worker_hosts: it is this task's place in "
                           "that list", (long long)task_index);
        return DR_OK;
    }
    if (tf_config_env && tf_config_env[0])
        return dr_fail(err, DR_EUSAGE, "--worker_hosts and TF_CONFIG both give the cluster: unset TF_CONFIG or drop "
                       "--worker_hosts%s", index_given ? " and --task_index" : "");
    if (!hosts[0]) return dr_fail(err, DR_EUSAGE, "--worker_hosts: empty; expected host:port[,host:port...]");
    workers = json_object_new_array();
    for (const char *p = hosts;; n++) {
        size_t len = strcspn(p, ",");
        if (len == 0) {
            json_object_put(workers);
            return dr_fail(err, DR_EUSAGE, "--worker_hosts: host %zu is empty; expected host:port[,host:port...]",
                           n + 1);
        }
        json_object_array_add(workers, json_object_new_string_len(p, (int)len));
        if (!p[len]) break;
        p += len + 1;
    }
    n++;
    if (n > 1 && !index_given) {
        json_object_put(workers);
        return dr_fail(err, DR_EUSAGE, "--worker_hosts lists %zu workers: give --task_index (0..%zu), this task's "
                       "place in the list", n, n - 1);
    }
    if (n > 1 && (task_index < 0 || (uint64_t)task_index >= n)) {
        json_object_put(workers);
        return dr_fail(err, DR_EUSAGE, "--task_index=%lld: --worker_hosts lists %zu workers, so expected 0..%zu",
                       (long long)task_index, n, n - 1);
    }
    root = json_object_new_object();
    cluster = json_object_new_object();
    task = json_object_new_object();
    json_object_object_add(cluster, "worker", workers);
    json_object_object_add(root, "cluster", cluster);
    json_object_object_add(task, "type", json_object_new_string("worker"));
    json_object_object_add(task, "index", json_object_new_int64(n == 1 ? 0 : task_index));
    json_object_object_add(root, "task", task);
    *out = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(root);
    if (!*out) return dr_fail(err, DR_ENOMEM, "no memory for the TF_CONFIG of --worker_hosts");
    return DR_OK;
}
