/* distref harness — TF_CONFIG under mpirun (--variant=mpi).
 *
 * TensorFlow's multi-worker cluster is TF_CONFIG: every task is told the
 * whole cluster and which task it is. Under MPI the world already says so:
 * N ranks, this one's rank. So:
 *   - TF_CONFIG set (per rank, as TensorFlow expects): it must describe the
 *     same world: its training workers (chief + worker) are the N ranks,
 *     and this rank's task has id = rank (the chief is id 0, workers
 *     follow). A mismatch is DR_EUSAGE naming both sides.
 *   - TF_CONFIG absent: derived from the world: N "worker" tasks at
 *     "HOST:2222+w" (HOST the rank's processor name; the addresses are
 *     nominal, MPI carries the bytes), this task worker `rank`, so rank 0
 *     (worker 0, no chief) is the chief.
 * The text is what --print_tf_config shows and what the run uses.
 */
#include "distref/harness.h"
#include "distref/cluster.h"
#include "distref/mpi.h"

#include <json-c/json.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOST_LEN 64

static bool host_ok(const char *h)
{
    if (!h[0]) return false;
    for (const char *p = h; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '-' || *p == '_'))
            return false;
    return true;
}

static int derive(uint32_t rank, uint32_t size, char **out, dr_err *err)
{
    char *hosts = calloc(size, HOST_LEN), *s;
    size_t cap = (size_t)size * (HOST_LEN + 16) + 128, len = 0;
    int rc;
    if (!hosts) return dr_fail(err, DR_ENOMEM, "out of host memory for TF_CONFIG");
    if ((rc = dr_mpi_hosts(hosts, HOST_LEN, err))) { free(hosts); return rc; }
    if (!(s = malloc(cap))) { free(hosts); return dr_fail(err, DR_ENOMEM, "out of host memory for TF_CONFIG"); }
    len += (size_t)snprintf(s + len, cap - len, "{\"cluster\": {\"worker\": [");
    for (uint32_t w = 0; w < size; w++) {
        const char *h = hosts + (size_t)w * HOST_LEN;
        len += (size_t)snprintf(s + len, cap - len, "%s\"%s:%u\"", w ? ", " : "", host_ok(h) ? h : "localhost",
                                2222 + w);
    }
    snprintf(s + len, cap - len, "]}, \"task\": {\"type\": \"worker\", \"index\": %u}}", rank);
    free(hosts);
    *out = s;
    return DR_OK;
}

/* parameter_server: rank 0 the chief, then the workers, then the ps tasks;
 * derived with one ps task. */
static int derive_ps(uint32_t rank, uint32_t size, char **out, dr_err *err)
{
    char *s;
    size_t cap = (size_t)size * 32 + 256, len = 0;
    uint32_t W = size - 2;
    if (size < 3)
        return dr_fail(err, DR_EUSAGE, "parameter_server under mpirun needs at least 3 ranks (a chief, a worker, a ps "
                       "task); mpirun started %u (this is MPI rank %u)", size, rank);
    if (!(s = malloc(cap))) return dr_fail(err, DR_ENOMEM, "out of host memory for TF_CONFIG");
    len += (size_t)snprintf(s + len, cap - len, "{\"cluster\": {\"chief\": [\"localhost:2222\"], \"worker\": [");
    for (uint32_t w = 0; w < W; w++)
        len += (size_t)snprintf(s + len, cap - len, "%s\"localhost:%u\"", w ? ", " : "", 2223 + w);
    len += (size_t)snprintf(s + len, cap - len, "], \"ps\": [\"localhost:%u\"]}, \"task\": ", 2223 + W);
    if (rank == 0) snprintf(s + len, cap - len, "{\"type\": \"chief\", \"index\": 0}}");
    else if (rank <= W) snprintf(s + len, cap - len, "{\"type\": \"worker\", \"index\": %u}}", rank - 1);
    else snprintf(s + len, cap - len, "{\"type\": \"ps\", \"index\": 0}}");
    *out = s;
    return DR_OK;
}

/* A TF_CONFIG with a cluster and no task (one text for every rank, e.g.
 * `mpirun -x TF_CONFIG`): *out is it with this rank's task (rank 0 the
 * chief, then the workers, then the ps tasks); NULL when it has a task or
 * is not such an object (dr_cluster_parse then says what is wrong). */
static int add_rank_task(const char *given, uint32_t rank, char **out, dr_err *err)
{
    json_object *o = json_tokener_parse(given), *cl, *job, *task;
    uint32_t W = 0;
    const char *type;
    *out = NULL;
    if (!o || !json_object_is_type(o, json_type_object) || json_object_object_get_ex(o, "task", NULL) ||
        !json_object_object_get_ex(o, "cluster", &cl) || !json_object_is_type(cl, json_type_object)) {
        json_object_put(o);
        return DR_OK;
    }
    if (json_object_object_get_ex(cl, "worker", &job) && json_object_is_type(job, json_type_array))
        W = (uint32_t)json_object_array_length(job);
    type = rank == 0 ? "chief" : rank <= W ? "worker" : "ps";
    task = json_object_new_object();
    json_object_object_add(task, "type", json_object_new_string(type));
    json_object_object_add(task, "index", json_object_new_int((int)(rank == 0 ? 0 : rank <= W ? rank - 1 : rank - 1 - W)));
    json_object_object_add(o, "task", task);
    if (!(*out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN)))) {
        json_object_put(o);
        return dr_fail(err, DR_ENOMEM, "out of host memory for TF_CONFIG");
    }
    json_object_put(o);
    return DR_OK;
}

static int check_ps(const dr_cluster *cl, uint32_t rank, uint32_t size, dr_err *err)
{
    uint32_t W = cl->job[DR_TASK_WORKER].n, P = cl->job[DR_TASK_PS].n, tasks = 1 + W + P, want = UINT32_MAX;
    if (cl->job[DR_TASK_CHIEF].n > 1)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: %u chief tasks; a cluster has at most one", cl->job[DR_TASK_CHIEF].n);
    if (tasks != size)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: the cluster has chief + %u workers + %u ps = %u tasks but mpirun "
                       "started %u ranks (-np %u); they must be equal (this is MPI rank %u)", W, P, tasks, size, size,
                       rank);
    if (!cl->has_task) return DR_OK;   /* tasks by rank */
    if (cl->task_type == DR_TASK_CHIEF) want = 0;
    else if (cl->task_type == DR_TASK_WORKER) want = 1 + cl->task_index;
    else if (cl->task_type == DR_TASK_PS) want = 1 + W + cl->task_index;
    if (want != rank)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task.type '%s', task.index %u is MPI rank %s%u of the cluster, but "
                       "this process is MPI rank %u of %u: the chief is rank 0, worker i rank 1+i, ps j rank 1+W+j",
                       dr_task_type_name(cl->task_type), cl->task_index, want == UINT32_MAX ? "(none) " : "",
                       want == UINT32_MAX ? 0 : want, rank, size);
    return DR_OK;
}

int dr_mpi_tf_config(const char *given, bool ps, char **out, dr_err *err)
{
    uint32_t rank, size, workers, id;
    dr_cluster cl;
    int rc;
    dr_mpi_world(&rank, &size);
    if (!given || !given[0] || strspn(given, " \t\r\n") == strlen(given))
        return ps ? derive_ps(rank, size, out, err) : derive(rank, size, out, err);
    if (ps) {
        char *with_task = NULL;
        if ((rc = add_rank_task(given, rank, &with_task, err))) return rc;
        if (with_task) given = with_task;   /* the rank's task added to a cluster-only TF_CONFIG */
        rc = dr_cluster_parse(given, &cl, err);
        if (rc) { free(with_task); return rc; }
        rc = check_ps(&cl, rank, size, err);
        dr_cluster_free(&cl);
        if (rc == DR_OK && with_task) *out = with_task;
        else if (rc == DR_OK && !(*out = malloc(strlen(given) + 1))) rc = dr_fail(err, DR_ENOMEM, "out of host memory for TF_CONFIG");
        else if (rc == DR_OK) memcpy(*out, given, strlen(given) + 1);
        if (rc) free(with_task);
        return rc;
    }
    if ((rc = dr_cluster_parse(given, &cl, err))) return rc;
    workers = dr_cluster_worker_count(&cl);
    id = dr_cluster_id_in_cluster(&cl);
    rc = DR_OK;
    if (!cl.has_task)
        rc = dr_fail(err, DR_EUSAGE, "TF_CONFIG: no task for MPI rank %u of %u: give each rank its own task, or unset "
                     "TF_CONFIG to derive it from the MPI world", rank, size);
    else if (workers != size)
        rc = dr_fail(err, DR_EUSAGE, "TF_CONFIG: the cluster has %u training workers (chief + worker) but mpirun "
                     "started %u ranks (-np %u); they must be equal (this is MPI rank %u)", workers, size, size, rank);
    else if (id != rank)
        rc = dr_fail(err, DR_EUSAGE, "TF_CONFIG: task.type '%s', task.index %u is worker id %u of the cluster, but "
                     "this process is MPI rank %u of %u: rank w needs the task with id w (the chief is id 0, then "
                     "worker 0, 1, ...)", dr_task_type_name(cl.task_type), cl.task_index,
                     id == UINT32_MAX ? 0 : id, rank, size);
    dr_cluster_free(&cl);
    if (rc) return rc;
    if (!(*out = malloc(strlen(given) + 1))) return dr_fail(err, DR_ENOMEM, "out of host memory for TF_CONFIG");
    memcpy(*out, given, strlen(given) + 1);
    return DR_OK;
}
