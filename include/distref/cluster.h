/* distref — cluster configuration from TF_CONFIG.
 *
 * TF_CONFIG is the JSON TensorFlow's TFConfigClusterResolver reads:
 *   {"cluster": {"chief": ["host:port"], "worker": ["h:p", ...], "ps": [...],
 *                "evaluator": ["h:p"]},
 *    "task": {"type": "worker", "index": 1}}
 * Validation follows multi_worker_util._validate_cluster_spec (research notes
 * §8), in its order and with its wording, and goes further; every rejection
 * is DR_EUSAGE with a message that starts "TF_CONFIG: " and names the field
 * ("TF_CONFIG: task.index: The `task_id` 3 exceeds the maximum id of worker.
 * (job 'worker' has 2 tasks)"):
 *   - malformed JSON ("malformed JSON at character 37: unexpected character",
 *     a 0-based offset as in Python's "(char 37)"), not an object;
 *   - missing "cluster" or "task"; cluster not an object; a job not a list of
 *     "host:port" strings (port 1..65535 without sign or leading zero;
 *     host of letters, digits, '.', '-', '_', or an IPv6 literal in
 *     brackets, "[::1]:2222"); more than DR_CLUSTER_MAX_TASKS tasks in a job
 *     or an address of DR_CLUSTER_ADDR_MAX characters or more;
 *   - a job name outside chief, worker, ps, evaluator ("Disallowed task type");
 *   - task.type missing, not a string, or not one of the four
 *     ("Unrecognized task_type");
 *   - task.type missing from the cluster (the evaluator is exempt, as in TF);
 *   - more than one chief or evaluator;
 *   - task.index missing, not a JSON integer (1.0, 1.5, "1" are rejected),
 *     negative, or beyond the job (a task in a job with no tasks is always
 *     beyond it); an evaluator without an evaluator job only needs an
 *     index <= INT32_MAX;
 *   - the same address twice anywhere in the cluster (compared as text,
 *     ignoring case; the message names both positions);
 *   - a "ps" job with any strategy but parameter_server (dr_cluster_check).
 * Tolerated, as TensorFlow tolerates them: other keys beside "cluster" and
 * "task" and inside "task" ("environment", "rpc_layer", Cloud's "job" and
 * "trial"); jobs with no tasks (an empty "chief": [] counts as no chief).
 * json-c keeps the last of duplicate keys, as json.loads does.
 *
 * The chief is the worker that saves checkpoints and writes summaries: the
 * "chief" task if there is one, else worker 0 (multi_worker_util.is_chief).
 */
#ifndef DISTREF_CLUSTER_H
#define DISTREF_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/factory.h"

#define DR_CLUSTER_MAX_TASKS 65536   /* per job: far beyond any cluster TF runs */
#define DR_CLUSTER_ADDR_MAX 128

typedef enum dr_task_type { DR_TASK_CHIEF = 0, DR_TASK_WORKER, DR_TASK_PS, DR_TASK_EVALUATOR } dr_task_type;

typedef struct dr_job {
    uint32_t n;
    char   (*addr)[DR_CLUSTER_ADDR_MAX];   /* n addresses (heap; NULL when n == 0) */
} dr_job;

typedef struct dr_cluster {
    dr_job       job[4];          /* indexed by dr_task_type */
    dr_task_type task_type;
    uint32_t     task_index;
    bool         has_task;        /* false for an empty TF_CONFIG (single machine) */
} dr_cluster;

/* Parses TF_CONFIG text of any length; NULL, "", blanks or "{}" give a
 * single-machine cluster (has_task false, no jobs). On success the caller
 * owns *out and releases it with dr_cluster_free; on error *out is left
 * untouched and nothing needs freeing. */
int  dr_cluster_parse(const char *tf_config, dr_cluster *out, dr_err *err);
/* Releases the addresses of a parsed cluster (the counts stay). NULL-safe. */
void dr_cluster_free(dr_cluster *c);

/* Checks the cluster against a strategy: a non-empty "ps" job only with
 * parameter_server; parameter_server needs at least one "worker" and one
 * "ps" task (so not the single-machine cluster: TF's ParameterServerStrategy
 * requires a cluster spec too). Other strategies accept any cluster without
 * ps, as TensorFlow's single-machine strategies ignore TF_CONFIG; an
 * evaluator task is fine with multi_worker_mirrored (it does not train). */
int  dr_cluster_check(const dr_cluster *c, dr_strategy_kind kind, dr_err *err);

/* chief + worker: the workers that train (multi_worker_util.worker_count);
 * 1 for the single-machine cluster. Unlike TF, the same for every task type
 * (TF answers #evaluator for an evaluator and raises for a ps task). */
uint32_t dr_cluster_worker_count(const dr_cluster *c);
/* The task's id among the training workers: chief -> 0, worker i ->
 * i + #chief, single machine -> 0; UINT32_MAX for ps and evaluator, which do
 * not train (TF raises for ps and answers task_id for the evaluator). */
uint32_t dr_cluster_id_in_cluster(const dr_cluster *c);
/* The chief task; worker 0 when there is no chief; the single machine; and,
 * following multi_worker_util.is_chief, the evaluator (chief of its own
 * job). Never a ps task. */
bool     dr_cluster_is_chief(const dr_cluster *c);
/* "chief", "worker", "ps", "evaluator"; "(invalid task type)" otherwise. */
const char *dr_task_type_name(dr_task_type t);

#endif
