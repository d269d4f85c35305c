/* distref — cluster configuration from TF_CONFIG: see include/distref/cluster.h.
 *
 * Checks run in multi_worker_util._validate_cluster_spec's order, distref's
 * own slotted in: JSON, shape, job names, job lists and addresses, duplicate
 * addresses, task.type, task.index's type and sign, task.type in the cluster,
 * one chief, one evaluator, task.index within its job. The parse fills a
 * local dr_cluster and copies it out only on success.
 */
#include "distref/cluster.h"

#include <json-c/json.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TYPES_LIST "chief, worker, ps, evaluator"

static const char *const k_type_names[4] = { "chief", "worker", "ps", "evaluator" };

const char *dr_task_type_name(dr_task_type t)
{
    if ((unsigned)t < 4u)
        return k_type_names[t];
    return "(invalid task type)";
}

static bool type_from_name(const char *s, dr_task_type *out)
{
    for (unsigned t = 0; t < 4u; t++) {
        if (strcmp(s, k_type_names[t]) == 0) {
            *out = (dr_task_type)t;
            return true;
        }
    }
    return false;
}

static const char *json_kind(const json_object *o)
{
    return json_type_to_name(json_object_get_type(o));
}

/* ---- JSON text -------------------------------------------------------- */

static bool blank(const char *s) { return s[strspn(s, " \t\n\r")] == '\0'; }

/* Character positions are 0-based offsets, as Python's "(char 37)". */
static int parse_json(const char *text, json_object **out, dr_err *err)
{
    size_t len = strlen(text);
    if (len >= (size_t)INT_MAX)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: %zu characters is too long", len);
    struct json_tokener *tok = json_tokener_new();
    if (tok == NULL)
        return dr_fail(err, DR_ENOMEM, "TF_CONFIG: out of memory creating a JSON parser");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    /* The terminating NUL is passed too: it tells json-c the text is
     * complete, so "42" is a number (not a prefix of 421) and "null" null. */
    json_object *obj = json_tokener_parse_ex(tok, text, (int)len + 1);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t at = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (jerr == json_tokener_success && obj == NULL)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: expected a JSON object with \"cluster\" and \"task\", got null");
    if (jerr == json_tokener_success) {
        *out = obj;
        return DR_OK;
    }
    json_object_put(obj);
    const char *why = jerr == json_tokener_continue || jerr == json_tokener_error_parse_eof ? "unexpected end of input"
                                                    : json_tokener_error_desc(jerr);
    return dr_fail(err, DR_EUSAGE, "TF_CONFIG: malformed JSON at character %zu: %s", at, why);
}

/* ---- addresses -------------------------------------------------------- */

#define DIGITS     "0123456789"
#define HOST_CHARS DIGITS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-_"
#define IPV6_CHARS DIGITS "abcdefABCDEF:."

/* "[...]" holding hex digits, '.' (IPv4-mapped) and at least one ':'. */
static bool ipv6_literal(const char *h, size_t n)
{
    return n >= 4 && h[n - 1] == ']' && strspn(h + 1, IPV6_CHARS) == n - 2
        && memchr(h + 1, ':', n - 2) != NULL;
}

/* Decimal 1..65535, no sign, no leading zero (so "h:080" and "h:80" cannot
 * hide a duplicate). */
static bool valid_port(const char *p)
{
    size_t n = strlen(p);
    return n >= 1 && n <= 5 && p[0] != '0' && strspn(p, DIGITS) == n && atol(p) <= 65535;
}

static int check_host(const char *field, const char *a, size_t hn, dr_err *err)
{
    if (hn == 0)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: %s: '%s' has an empty host; "
                       "expected \"host:port\"", field, a);
    if (a[0] == '[') {
        if (ipv6_literal(a, hn))
            return DR_OK;
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: %s: '%s' has a bad IPv6 literal; expected "
                       "hex digits and ':' in brackets, as in \"[::1]:2222\"", field, a);
    }
    size_t ok = strspn(a, HOST_CHARS);
    if (ok < hn)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: %s: '%s' has '%c' in its host; a host is "
                       "letters, digits, '.', '-' and '_', or an IPv6 literal in brackets "
                       "(\"[::1]:2222\")", field, a, a[ok]);
    return DR_OK;
}

/* "host:port" or "[v6]:port"; the port follows the last ':' (or the ']'). */
static int check_address(const char *field, const char *a, dr_err *err)
{
    const char *end = a[0] == '[' ? strchr(a, ']') : strrchr(a, ':');
    if (end != NULL && a[0] == '[')
        end++;
    if (end == NULL || *end != ':')
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: %s: '%s' has no port; expected "
                       "\"host:port\"", field, a);
    int rc = check_host(field, a, (size_t)(end - a), err);
    if (rc != DR_OK)
        return rc;
    if (!valid_port(end + 1))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: %s: '%s' has port '%s'; expected a "
                       "number in 1..65535 without leading zeros", field, a, end + 1);
    return DR_OK;
}

/* ---- jobs ------------------------------------------------------------- */

static int check_job_names(json_object *cluster, dr_err *err)
{
    json_object_object_foreach(cluster, name, val) {
        (void)val;
        dr_task_type t;
        if (!type_from_name(name, &t))
            return dr_fail(err, DR_EUSAGE, "TF_CONFIG: cluster.%s: Disallowed task type found "
                           "in cluster spec. Allowed types are " TYPES_LIST " and the task "
                           "type is '%s'", name, name);
    }
    return DR_OK;
}

static int parse_address(const char *job, size_t i, json_object *s, char *dst, dr_err *err)
{
    char field[64];
    snprintf(field, sizeof field, "cluster.%s[%zu]", job, i);
    if (!json_object_is_type(s, json_type_string))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: %s: expected a \"host:port\" string, got %s",
                       field, json_kind(s));
    const char *a = json_object_get_string(s);
    size_t n = (size_t)json_object_get_string_len(s);
    if (strlen(a) != n)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: %s: the address contains a NUL character",
                       field);
    if (n >= DR_CLUSTER_ADDR_MAX)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: %s: the address is %zu characters long; "
                       "at most %d are supported", field, n, DR_CLUSTER_ADDR_MAX - 1);
    int rc = check_address(field, a, err);
    if (rc == DR_OK)
        memcpy(dst, a, n + 1);
    return rc;
}

static int parse_job(const char *name, json_object *list, dr_job *job, dr_err *err)
{
    if (!json_object_is_type(list, json_type_array))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: cluster.%s: expected a list of \"host:port\" "
                       "strings, got %s", name, json_kind(list));
    size_t n = json_object_array_length(list);
    if (n > DR_CLUSTER_MAX_TASKS)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: cluster.%s: %zu tasks; distref supports at "
                       "most %d per job", name, n, DR_CLUSTER_MAX_TASKS);
    free(job->addr);   /* json-c keeps the last of duplicate keys; so do we */
    job->addr = NULL;
    job->n = 0;
    if (n && !(job->addr = calloc(n, sizeof *job->addr)))
        return dr_fail(err, DR_ENOMEM, "TF_CONFIG: cluster.%s: out of memory for %zu addresses", name, n);
    for (size_t i = 0; i < n; i++) {
        int rc = parse_address(name, i, json_object_array_get_idx(list, i), job->addr[i], err);
        if (rc != DR_OK)
            return rc;
    }
    job->n = (uint32_t)n;
    return DR_OK;
}

static int parse_jobs(json_object *cluster, dr_cluster *c, dr_err *err)
{
    int rc = check_job_names(cluster, err);
    if (rc != DR_OK)
        return rc;
    json_object_object_foreach(cluster, name, list) {
        dr_task_type t = DR_TASK_CHIEF;
        (void)type_from_name(name, &t);
        rc = parse_job(name, list, &c->job[t], err);
        if (rc != DR_OK)
            return rc;
    }
    return DR_OK;
}

/* Hostnames are case-insensitive; ports are digits, so the whole address
 * compares case-insensitively. */
static bool same_address(const char *a, const char *b)
{
    for (; *a != '\0' && *b != '\0'; a++, b++) {
        char x = (*a >= 'A' && *a <= 'Z') ? (char)(*a - 'A' + 'a') : *a;
        char y = (*b >= 'A' && *b <= 'Z') ? (char)(*b - 'A' + 'a') : *b;
        if (x != y)
            return false;
    }
    return *a == *b;
}

static int compare_address(const char *a, const char *b)
{
    for (; *a != '\0' && *b != '\0'; a++, b++) {
        int x = (*a >= 'A' && *a <= 'Z') ? *a - 'A' + 'a' : *a;
        int y = (*b >= 'A' && *b <= 'Z') ? *b - 'A' + 'a' : *b;
        if (x != y)
            return x - y;
    }
    return (unsigned char)*a - (unsigned char)*b;
}

/* A task's position in (type, index) order: chief, worker, ps, evaluator. */
typedef struct task_pos { const char *addr; unsigned type, index; } task_pos;

static bool before(const task_pos *p, const task_pos *q)
{
    return p->type != q->type ? p->type < q->type : p->index < q->index;
}

static int by_address(const void *a, const void *b)
{
    const task_pos *p = a, *q = b;
    int d = compare_address(p->addr, q->addr);
    return d ? d : before(p, q) ? -1 : before(q, p) ? 1 : 0;
}

/* Sorted by address (then position), duplicates are neighbours. Of all the
 * duplicated addresses, the one whose first task comes first is reported,
 * naming its second task and its first. */
static int check_duplicates(const dr_cluster *c, dr_err *err)
{
    size_t n = 0, k = 0;
    for (unsigned t = 0; t < 4u; t++)
        n += c->job[t].n;
    if (n < 2)
        return DR_OK;
    task_pos *all = malloc(n * sizeof *all);
    const task_pos *first = NULL, *second = NULL;
    if (all == NULL)
        return dr_fail(err, DR_ENOMEM, "TF_CONFIG: out of memory checking %zu addresses", n);
    for (unsigned t = 0; t < 4u; t++)
        for (unsigned i = 0; i < c->job[t].n; i++)
            all[k++] = (task_pos){ c->job[t].addr[i], t, i };
    qsort(all, n, sizeof *all, by_address);
    for (size_t i = 1; i < n; i++)
        if (same_address(all[i - 1].addr, all[i].addr) &&
            (i < 2 || !same_address(all[i - 2].addr, all[i].addr)) &&   /* a group's first two */
            (first == NULL || before(&all[i - 1], first))) {
            first = &all[i - 1];
            second = &all[i];
        }
    int rc = DR_OK;
    if (first != NULL)
        rc = dr_fail(err, DR_EUSAGE, "TF_CONFIG: cluster.%s[%u]: address '%s' is also cluster.%s[%u]; "
                     "every task needs its own address", k_type_names[second->type], second->index,
                     second->addr, k_type_names[first->type], first->index);
    free(all);
    return rc;
}

/* ---- task ------------------------------------------------------------- */

static int parse_task_type(json_object *task, dr_task_type *out, dr_err *err)
{
    json_object *ty = NULL;
    if (!json_object_object_get_ex(task, "type", &ty))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task.type: missing; expected one of "
                       TYPES_LIST);
    if (!json_object_is_type(ty, json_type_string))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task.type: expected a string (one of "
                       TYPES_LIST "), got %s", json_kind(ty));
    const char *s = json_object_get_string(ty);
    if (strlen(s) != (size_t)json_object_get_string_len(ty) || !type_from_name(s, out))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task.type: Unrecognized task_type: '%s', "
                       "valid task types are: " TYPES_LIST, s);
    return DR_OK;
}

/* An integer >= 0 (not 1.0, not "1"); *text keeps its JSON spelling. */
static int parse_task_index(json_object *task, int64_t *out, const char **text, dr_err *err)
{
    json_object *ix = NULL;
    if (!json_object_object_get_ex(task, "index", &ix))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task.index: missing; expected an integer "
                       ">= 0");
    if (!json_object_is_type(ix, json_type_int))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task.index: expected an integer, got %s "
                       "%.40s", json_kind(ix), json_object_to_json_string(ix));
    *out = json_object_get_int64(ix);
    *text = json_object_get_string(ix);
    if (*out < 0)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task.index: %s is negative; expected an "
                       "integer >= 0", *text);
    return DR_OK;
}

/* TF's checks after the job names: task type present, one chief, one
 * evaluator, index in range (the evaluator needs no job of its own). */
static int check_task(const dr_cluster *c, bool listed, int64_t index, const char *text,
                      dr_err *err)
{
    const char *tn = k_type_names[c->task_type];
    if (!listed && c->task_type != DR_TASK_EVALUATOR)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task.type: `task_type` '%s' not found in "
                       "cluster_spec.", tn);
    if (c->job[DR_TASK_CHIEF].n > 1)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: cluster.chief: There must be at most one "
                       "'chief' job. (it lists %u tasks)", c->job[DR_TASK_CHIEF].n);
    if (c->job[DR_TASK_EVALUATOR].n > 1)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: cluster.evaluator: There must be at most "
                       "one 'evaluator' job. (it lists %u tasks)", c->job[DR_TASK_EVALUATOR].n);
    uint32_t n = c->job[c->task_type].n;
    if (listed && index >= (int64_t)n)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task.index: The `task_id` %s exceeds the "
                       "maximum id of %s. (job '%s' has %u task%s)", text, tn, tn, n,
                       n == 1 ? "" : "s");
    if (index > INT32_MAX)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task.index: %s is too large", text);
    return DR_OK;
}

static int parse_task(json_object *task, json_object *cluster, dr_cluster *c, dr_err *err)
{
    if (!json_object_is_type(task, json_type_object))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task: expected an object like "
                       "{\"type\": \"worker\", \"index\": 0}, got %s", json_kind(task));
    int64_t index = 0;
    const char *text = "";
    int rc = parse_task_type(task, &c->task_type, err);
    if (rc == DR_OK)
        rc = parse_task_index(task, &index, &text, err);
    if (rc != DR_OK)
        return rc;
    bool listed = json_object_object_get_ex(cluster, k_type_names[c->task_type], NULL);
    rc = check_task(c, listed, index, text, err);
    if (rc != DR_OK)
        return rc;
    c->task_index = (uint32_t)index;
    c->has_task = true;
    return DR_OK;
}

/* ---- the whole document ----------------------------------------------- */

static int parse_document(json_object *root, dr_cluster *c, dr_err *err)
{
    if (!json_object_is_type(root, json_type_object))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: expected a JSON object with \"cluster\" and "
                       "\"task\", got %s", json_kind(root));
    if (json_object_object_length(root) == 0)
        return DR_OK;                                  /* "{}": a single machine */
    json_object *cluster = NULL, *task = NULL;
    if (!json_object_object_get_ex(root, "cluster", &cluster))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: cluster: missing; expected "
                       "{\"cluster\": {...}, \"task\": {...}}");
    if (!json_object_object_get_ex(root, "task", &task))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: task: missing; expected "
                       "{\"cluster\": {...}, \"task\": {\"type\": ..., \"index\": ...}}");
    if (!json_object_is_type(cluster, json_type_object))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: cluster: expected an object mapping job "
                       "names to lists of \"host:port\", got %s", json_kind(cluster));
    int rc = parse_jobs(cluster, c, err);
    if (rc == DR_OK)
        rc = check_duplicates(c, err);
    if (rc == DR_OK)
        rc = parse_task(task, cluster, c, err);
    return rc;
}

int dr_cluster_parse(const char *tf_config, dr_cluster *out, dr_err *err)
{
    if (out == NULL)
        return dr_fail(err, DR_EUSAGE, "dr_cluster_parse: out is NULL");
    dr_cluster c;
    memset(&c, 0, sizeof c);
    int rc = DR_OK;
    if (tf_config != NULL && !blank(tf_config)) {
        json_object *root = NULL;
        rc = parse_json(tf_config, &root, err);
        if (rc == DR_OK)
            rc = parse_document(root, &c, err);
        json_object_put(root);
    }
    if (rc == DR_OK)
        *out = c;
    else
        dr_cluster_free(&c);
    return rc;
}

void dr_cluster_free(dr_cluster *c)
{
    if (c == NULL)
        return;
    for (unsigned t = 0; t < 4u; t++) {
        free(c->job[t].addr);
        c->job[t].addr = NULL;
    }
}

/* ---- queries ---------------------------------------------------------- */

int dr_cluster_check(const dr_cluster *c, dr_strategy_kind kind, dr_err *err)
{
    uint32_t workers = c->job[DR_TASK_WORKER].n, ps = c->job[DR_TASK_PS].n;
    bool want_ps = kind == DR_STRATEGY_PARAMETER_SERVER;
    if (!want_ps && ps > 0)
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: cluster has a 'ps' job, which only "
                       "--distribution_strategy=parameter_server uses");
    if (want_ps && (workers == 0 || ps == 0))
        return dr_fail(err, DR_EUSAGE, "TF_CONFIG: parameter_server needs at least one "
                       "'worker' and one 'ps' task (the cluster has %u worker and %u ps)",
                       workers, ps);
    return DR_OK;
}

uint32_t dr_cluster_worker_count(const dr_cluster *c)
{
    return c->has_task ? c->job[DR_TASK_CHIEF].n + c->job[DR_TASK_WORKER].n : 1;
}

uint32_t dr_cluster_id_in_cluster(const dr_cluster *c)
{
    if (!c->has_task)
        return 0;
    switch (c->task_type) {
    case DR_TASK_CHIEF:  return 0;
    case DR_TASK_WORKER: return c->task_index + c->job[DR_TASK_CHIEF].n;
    default:             return UINT32_MAX;
    }
}

bool dr_cluster_is_chief(const dr_cluster *c)
{
    if (!c->has_task)
        return true;
    switch (c->task_type) {
    case DR_TASK_CHIEF:
    case DR_TASK_EVALUATOR:
        return true;
    case DR_TASK_WORKER:
        return c->task_index == 0 && c->job[DR_TASK_CHIEF].n == 0;
    default:
        return false;
    }
}
