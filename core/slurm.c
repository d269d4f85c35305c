/* distref core — TF_CONFIG from Slurm's environment (distref/slurm.h).
 *
 * Slurm hands every task of a step its place: SLURM_PROCID (0..NTASKS-1),
 * SLURM_NTASKS, the step's nodes as a compressed host list
 * (SLURM_STEP_NODELIST, "node[01-04,07]") and its tasks per node
 * (SLURM_STEP_TASKS_PER_NODE, "2(x3),1": 2 tasks on each of 3 nodes, then
 * 1). TensorFlow's SlurmClusterResolver packs the tasks onto the nodes in
 * that order (Slurm's default block distribution) and gives task t on node
 * n the address n:8888+(its place on n); with one job "worker" of NTASKS
 * tasks, this task is worker PROCID. distref does the same (its workers
 * are its training tasks; MPI's rank order is the task order).
 */
#include "distref/slurm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool host_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
           ch == '-' || ch == '_';
}

/* A decimal of 1..9 digits at s[0..len). */
static bool decimal(const char *s, size_t len, uint32_t *v)
{
    *v = 0;
    if (len == 0 || len > 9) return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        *v = *v * 10 + (uint32_t)(s[i] - '0');
    }
    return true;
}

typedef struct expander {
    const char *name, *list;
    char (*hosts)[DR_SLURM_HOST_MAX];
    uint32_t max, n;
    dr_err *err;
} expander;

static int emit(expander *x, const char *host, size_t len)
{
    if (len == 0) return dr_fail(x->err, DR_EUSAGE, "%s='%s': an empty host name", x->name, x->list);
    if (len >= DR_SLURM_HOST_MAX)
        return dr_fail(x->err, DR_EUSAGE, "%s='%s': a host name of %zu characters (at most %u)", x->name, x->list, len,
                       DR_SLURM_HOST_MAX - 1);
    if (x->n >= x->max)
        return dr_fail(x->err, DR_EUSAGE, "%s='%s': more than %u hosts", x->name, x->list, x->max);
    memcpy(x->hosts[x->n], host, len);
    x->hosts[x->n++][len] = '\0';
    return DR_OK;
}

static int too_long(expander *x)
{
    return dr_fail(x->err, DR_EUSAGE, "%s='%s': a host name over %u characters", x->name, x->list,
                   DR_SLURM_HOST_MAX - 1);
}

/* item[0..len) with its brackets expanded after the prefix pre[0..plen). */
static int expand(expander *x, char *pre, size_t plen, const char *item, size_t len)
{
    const char *open = memchr(item, '[', len), *close, *p;
    size_t head = open ? (size_t)(open - item) : len;
    for (size_t i = 0; i < head; i++)
        if (!host_char(item[i]))
            return dr_fail(x->err, DR_EUSAGE, "%s='%s': '%c' cannot be in a host name (letters, digits, '.', '-', "
                           "'_', and [ranges])", x->name, x->list, item[i]);
    if (plen + head >= DR_SLURM_HOST_MAX) return too_long(x);
    memcpy(pre + plen, item, head);
    plen += head;
    if (!open) return emit(x, pre, plen);
    close = memchr(open, ']', len - head);
    if (!close || memchr(open + 1, '[', (size_t)(close - open - 1)))
        return dr_fail(x->err, DR_EUSAGE, "%s='%s': a '[' without its ']'", x->name, x->list);
    for (p = open + 1; p <= close; ) {
        const char *end = p, *dash;
        uint32_t lo, hi;
        size_t width;
        int rc;
        while (end < close && *end != ',') end++;
        dash = memchr(p, '-', (size_t)(end - p));
        if (!decimal(p, (size_t)((dash ? dash : end) - p), &lo) || (dash && !decimal(dash + 1, (size_t)(end - dash - 1), &hi)))
            return dr_fail(x->err, DR_EUSAGE, "%s='%s': '%.*s' in [...] is not a number or a range LO-HI (1 to 9 "
                           "digits each)", x->name, x->list, (int)(end - p), p);
        if (!dash) hi = lo;
        if (hi < lo)
            return dr_fail(x->err, DR_EUSAGE, "%s='%s': the range %.*s runs backwards", x->name, x->list,
                           (int)(end - p), p);
        width = (size_t)((dash ? dash : end) - p);
        for (uint32_t v = lo; v <= hi; v++) {
            char num[16];
            int k = snprintf(num, sizeof num, "%0*u", (int)width, v);
            if (plen + (size_t)k >= DR_SLURM_HOST_MAX) return too_long(x);
            memcpy(pre + plen, num, (size_t)k);
            if ((rc = expand(x, pre, plen + (size_t)k, close + 1, len - (size_t)(close + 1 - item)))) return rc;
            if (v == UINT32_MAX) break;
        }
        p = end + 1;
    }
    return DR_OK;
}

int dr_slurm_nodelist(const char *name, const char *list, char (*hosts)[DR_SLURM_HOST_MAX], uint32_t max,
                      uint32_t *n, dr_err *err)
{
    expander x = { name, list ? list : "", hosts, max, 0, err };
    char pre[DR_SLURM_HOST_MAX];
    const char *p = x.list;
    int rc;
    if (!list || !list[0]) return dr_fail(err, DR_EUSAGE, "%s is not set or empty: expected the step's nodes, e.g. "
                                          "node[01-04,07]", name);
    while (*p) {   /* items at depth 0, separated by commas */
        const char *q = p;
        int depth = 0;
        while (*q && (depth > 0 || *q != ',')) {
            if (*q == '[') depth++;
            else if (*q == ']' && --depth < 0) return dr_fail(err, DR_EUSAGE, "%s='%s': a ']' without its '['", name, list);
            q++;
        }
        if ((rc = expand(&x, pre, 0, p, (size_t)(q - p)))) return rc;
        p = *q ? q + 1 : q;
        if (*q && !*p) return dr_fail(err, DR_EUSAGE, "%s='%s': ends with a ','", name, list);
    }
    *n = x.n;
    return DR_OK;
}

int dr_slurm_tasks_per_node(const char *name, const char *spec, uint32_t *counts, uint32_t n, dr_err *err)
{
    const char *p = spec;
    uint32_t k = 0;
    if (!spec || !spec[0]) return dr_fail(err, DR_EUSAGE, "%s is not set or empty: expected tasks per node, e.g. 2(x3),1",
                                          name);
    while (*p) {
        const char *q = p;
        uint32_t c, times = 1;
        while (*q >= '0' && *q <= '9') q++;
        if (!decimal(p, (size_t)(q - p), &c) || c == 0) goto bad;
        if (*q == '(') {
            const char *r = q + 2;
            if (q[1] != 'x') goto bad;
            while (*r >= '0' && *r <= '9') r++;
            if (!decimal(q + 2, (size_t)(r - q - 2), &times) || times == 0 || *r != ')') goto bad;
            q = r + 1;
        }
        if (*q && *q != ',') goto bad;
        if (times > n - k)
            return dr_fail(err, DR_EUSAGE, "%s='%s' gives more nodes than the node list's %u", name, spec, n);
        while (times--) counts[k++] = c;
        p = *q ? q + 1 : q;
        if (*q && !*p) goto bad;
    }
    if (k != n) return dr_fail(err, DR_EUSAGE, "%s='%s' gives %u nodes, the node list %u", name, spec, k, n);
    return DR_OK;
bad:
    return dr_fail(err, DR_EUSAGE, "%s='%s': expected counts such as 2(x3),1 (a positive count, optionally (xN) "
                   "times, comma-separated)", name, spec);
}

/* A whole positive or non-negative decimal variable. */
static int env_number(const char *name, const char *v, bool positive, uint32_t *out, dr_err *err)
{
    if (!v || !decimal(v, strlen(v), out) || (positive && *out == 0))
        return dr_fail(err, DR_EUSAGE, "%s=%s%s%s: expected a %s integer", name, v ? "'" : "", v ? v : "(unset)",
                       v ? "'" : "", positive ? "positive" : "non-negative");
    return DR_OK;
}

static int build(const dr_slurm_env *env, char (*hosts)[DR_SLURM_HOST_MAX], uint32_t nodes, const uint32_t *counts,
                 uint32_t ntasks, uint32_t procid, char **out, dr_err *err)
{
    size_t cap = (size_t)ntasks * (DR_SLURM_HOST_MAX + 12) + 128, len = 0;
    uint32_t total = 0, t = 0;
    char *s;
    for (uint32_t i = 0; i < nodes; i++) total += counts[i];
    if (total != ntasks)
        return dr_fail(err, DR_EUSAGE, "SLURM_NTASKS=%u but %s='%s' places %u tasks; they must agree", ntasks,
                       env->tasks_per_node_name, env->tasks_per_node, total);
    if (!(s = malloc(cap))) return dr_fail(err, DR_ENOMEM, "out of host memory for TF_CONFIG");
    len += (size_t)snprintf(s + len, cap - len, "{\"cluster\": {\"worker\": [");
    for (uint32_t i = 0; i < nodes; i++)
        for (uint32_t j = 0; j < counts[i]; j++, t++)
            len += (size_t)snprintf(s + len, cap - len, "%s\"%s:%u\"", t ? ", " : "", hosts[i], DR_SLURM_PORT_BASE + j);
    snprintf(s + len, cap - len, "]}, \"task\": {\"type\": \"worker\", \"index\": %u}}", procid);
    *out = s;
    return DR_OK;
}

int dr_slurm_tf_config(const dr_slurm_env *env, char **out, uint32_t *procid, uint32_t *ntasks, uint32_t *gpus,
                       dr_err *err)
{
    char (*hosts)[DR_SLURM_HOST_MAX] = NULL;
    uint32_t nodes = 0, *counts = NULL;
    int rc;
    *gpus = 0;
    if ((rc = env_number("SLURM_PROCID", env->procid, false, procid, err)) ||
        (rc = env_number("SLURM_NTASKS", env->ntasks, true, ntasks, err)))
        return rc;
    if (*ntasks > 65536) return dr_fail(err, DR_EUSAGE, "SLURM_NTASKS=%u: at most 65536 tasks", *ntasks);
    if (*procid >= *ntasks)
        return dr_fail(err, DR_EUSAGE, "SLURM_PROCID=%u but SLURM_NTASKS=%u: expected 0..%u", *procid, *ntasks,
                       *ntasks - 1);
    if (env->gpus_per_task && (rc = env_number("SLURM_GPUS_PER_TASK", env->gpus_per_task, true, gpus, err))) return rc;
    if (!(hosts = malloc((size_t)DR_SLURM_MAX_HOSTS * DR_SLURM_HOST_MAX)) ||
        !(counts = malloc((size_t)DR_SLURM_MAX_HOSTS * sizeof *counts)))
        rc = dr_fail(err, DR_ENOMEM, "out of host memory for the Slurm node list");
    if (!rc) rc = dr_slurm_nodelist(env->nodelist_name, env->nodelist, hosts, DR_SLURM_MAX_HOSTS, &nodes, err);
    if (!rc) rc = dr_slurm_tasks_per_node(env->tasks_per_node_name, env->tasks_per_node, counts, nodes, err);
    if (!rc) rc = build(env, hosts, nodes, counts, *ntasks, *procid, out, err);
    free(hosts);
    free(counts);
    return rc;
}
