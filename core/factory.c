/* distref — the strategy factory: see include/distref/factory.h.
 *
 * A line-by-line port of Model Garden's
 * official/common/distribute_utils.get_distribution_strategy and its helpers
 * _collective_communication and _mirrored_cross_device_ops: the same checks
 * in the same order with the same messages. Where the C version differs:
 *   - "distribution_strategy must be a string" cannot happen in C; a NULL
 *     name takes its place in the order (right after the num_gpus check).
 *   - tpu: the docstring promises an error for a missing address, but the
 *     code has none (None reaches TPUClusterResolver, which looks for a
 *     local TPU). We follow the code: NULL becomes "".
 *   - central_storage is distref's addition, checked after mirrored. Its
 *     gradients are always reduced to the variable device, so it takes no
 *     all_reduce_alg.
 *   - num_packs < 0 is rejected where TensorFlow rejects it: in the
 *     NcclAllReduce / HierarchicalCopyAllReduce constructors, i.e. only for
 *     mirrored with an explicit all_reduce_alg, after that alg was checked.
 * out->num_packs holds the value in effect: the given one for those two ops,
 * otherwise 1, the default TensorFlow's own choice of op is built with
 * (Model Garden ignores num_packs when all_reduce_alg is None).
 */
#include "distref/factory.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define NAME_MAX_LEN 255        /* longer than any strategy name: only for messages */
#define DEFAULT_NUM_PACKS 1     /* NcclAllReduce(num_packs=1) */

static void lower_copy(const char *s, char *buf, size_t n)
{
    size_t i = 0;
    for (; s[i] != '\0' && i + 1 < n; i++)
        buf[i] = (char)tolower((unsigned char)s[i]);
    buf[i] = '\0';
}

static size_t put(char *buf, size_t n, size_t at, char c)
{
    if (at + 1 < n)
        buf[at] = c;
    return at + 1;
}

/* Python's repr() of a str, for "Unrecognized Distribution Strategy: %r":
 * single quotes unless the text has a ' and no ", backslash escapes for the
 * quote, '\\' and control characters. */
static void py_repr(const char *s, char *buf, size_t n)
{
    char q = strchr(s, '\'') != NULL && strchr(s, '"') == NULL ? '"' : '\'';
    size_t at = put(buf, n, 0, q);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        char esc[5] = { 0 };
        if (*p == '\\' || *p == (unsigned char)q)
            snprintf(esc, sizeof esc, "\\%c", *p);
        else if (*p == '\n' || *p == '\r' || *p == '\t')
            snprintf(esc, sizeof esc, "\\%c", *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't');
        else if (*p < 0x20 || *p == 0x7f)
            snprintf(esc, sizeof esc, "\\x%02x", *p);
        else
            esc[0] = (char)*p;
        for (const char *e = esc; *e != '\0'; e++)
            at = put(buf, n, at, *e);
    }
    at = put(buf, n, at, q);
    buf[at < n ? at : n - 1] = '\0';
}

static bool streq(const char *a, const char *b)
{
    return a != NULL && strcmp(a, b) == 0;
}

/* Model Garden's _collective_communication. Case-sensitive, as there. */
static int mwms_op(const char *alg, dr_cross_device_op *op, dr_err *err)
{
    if (alg == NULL)
        *op = DR_XDEV_AUTO;
    else if (streq(alg, "ring"))
        *op = DR_XDEV_RING;
    else if (streq(alg, "nccl"))
        *op = DR_XDEV_NCCL;
    else
        return dr_fail(err, DR_EUSAGE, "When used with `multi_worker_mirrored`, valid values "
                       "for all_reduce_alg are [`ring`, `nccl`].  Supplied value: %s", alg);
    return DR_OK;
}

/* Model Garden's _mirrored_cross_device_ops plus the constructors' own
 * num_packs checks (cross_device_ops.py). */
static int mirrored_op(const char *alg, int num_packs, dr_strategy_spec *s, dr_err *err)
{
    if (alg == NULL) {
        s->cross_device_op = DR_XDEV_DEFAULT;
        return DR_OK;
    }
    if (streq(alg, "nccl"))
        s->cross_device_op = DR_XDEV_NCCL;
    else if (streq(alg, "hierarchical_copy"))
        s->cross_device_op = DR_XDEV_HIERARCHICAL_COPY;
    else
        return dr_fail(err, DR_EUSAGE, "When used with `mirrored`, valid values for "
                       "all_reduce_alg are [`nccl`, `hierarchical_copy`].  Supplied value: %s",
                       alg);
    if (num_packs < 0)
        return dr_fail(err, DR_EUSAGE, "%s requires num_packs >= 0, but %d is specified.",
                       s->cross_device_op == DR_XDEV_NCCL ? "NCCL all-reduce" : "HierarchicalCopy",
                       num_packs);
    s->num_packs = num_packs;
    return DR_OK;
}

static int tpu_spec(const char *addr, dr_strategy_spec *s, dr_err *err)
{
    const char *a = addr != NULL ? addr : "";
    size_t len = strlen(a);
    if (len >= sizeof s->tpu_address)
        return dr_fail(err, DR_EUSAGE, "--tpu: address is %zu characters long, at most %zu allowed",
                       len, sizeof s->tpu_address - 1);
    memcpy(s->tpu_address, a, len + 1);
    s->kind = DR_STRATEGY_TPU;
    return DR_OK;
}

static int central_storage_spec(const char *alg, dr_strategy_spec *s, dr_err *err)
{
    if (alg != NULL)
        return dr_fail(err, DR_EUSAGE, "When used with `central_storage`, all_reduce_alg must "
                       "not be set: gradients are always reduced to the variable device.  "
                       "Supplied value: %s", alg);
    s->kind = DR_STRATEGY_CENTRAL_STORAGE;
    s->cross_device_op = DR_XDEV_REDUCTION_TO_ONE_DEVICE;
    return DR_OK;
}

/* Steps 3 onwards of Model Garden's function, on the lower-cased name. */
static int by_name(const char *name, int num_gpus, const char *alg, int num_packs,
                   const char *tpu_address, dr_strategy_spec *s, dr_err *err)
{
    if (strcmp(name, "off") == 0) {
        if (num_gpus > 1)
            return dr_fail(err, DR_EUSAGE, "When %d GPUs are specified, distribution_strategy "
                           "flag cannot be set to `off`.", num_gpus);
        s->kind = DR_STRATEGY_OFF;
        return DR_OK;
    }
    if (strcmp(name, "tpu") == 0)
        return tpu_spec(tpu_address, s, err);
    if (strcmp(name, "multi_worker_mirrored") == 0) {
        s->kind = DR_STRATEGY_MULTI_WORKER_MIRRORED;
        return mwms_op(alg, &s->cross_device_op, err);
    }
    if (strcmp(name, "one_device") == 0) {
        if (num_gpus > 1)
            return dr_fail(err, DR_EUSAGE,
                           "`OneDeviceStrategy` can not be used for more than one device.");
        s->kind = DR_STRATEGY_ONE_DEVICE;
        return DR_OK;
    }
    if (strcmp(name, "mirrored") == 0) {
        s->kind = DR_STRATEGY_MIRRORED;
        return mirrored_op(alg, num_packs, s, err);
    }
    if (strcmp(name, "central_storage") == 0)
        return central_storage_spec(alg, s, err);
    if (strcmp(name, "parameter_server") == 0) {
        s->kind = DR_STRATEGY_PARAMETER_SERVER;
        return DR_OK;
    }
    char quoted[4 * NAME_MAX_LEN + 3];     /* every byte escaped as \xNN, two quotes */
    py_repr(name, quoted, sizeof quoted);
    return dr_fail(err, DR_EUSAGE, "Unrecognized Distribution Strategy: %s", quoted);
}

int dr_get_distribution_strategy(const char *distribution_strategy, int num_gpus,
                                 const char *all_reduce_alg, int num_packs,
                                 const char *tpu_address, dr_strategy_spec *out, dr_err *err)
{
    if (num_gpus < 0)
        return dr_fail(err, DR_EUSAGE, "`num_gpus` can not be negative.");
    if (distribution_strategy == NULL)
        return dr_fail(err, DR_EUSAGE, "--distribution_strategy: no strategy given (expected "
                       "off, one_device, mirrored, central_storage, multi_worker_mirrored, "
                       "parameter_server or tpu)");
    char name[NAME_MAX_LEN + 1];
    lower_copy(distribution_strategy, name, sizeof name);

    /* Built aside so that out is untouched on error. */
    dr_strategy_spec s;
    memset(&s, 0, sizeof s);
    s.num_gpus = num_gpus;
    s.cross_device_op = DR_XDEV_DEFAULT;
    s.num_packs = DEFAULT_NUM_PACKS;
    int rc = by_name(name, num_gpus, all_reduce_alg, num_packs, tpu_address, &s, err);
    if (rc == DR_OK)
        *out = s;
    return rc;
}

const char *dr_strategy_kind_name(dr_strategy_kind k)
{
    switch (k) {
    case DR_STRATEGY_OFF:                   return "off";
    case DR_STRATEGY_ONE_DEVICE:            return "one_device";
    case DR_STRATEGY_MIRRORED:              return "mirrored";
    case DR_STRATEGY_CENTRAL_STORAGE:       return "central_storage";
    case DR_STRATEGY_MULTI_WORKER_MIRRORED: return "multi_worker_mirrored";
    case DR_STRATEGY_PARAMETER_SERVER:      return "parameter_server";
    case DR_STRATEGY_TPU:                   return "tpu";
    }
    return "unknown";
}

const char *dr_cross_device_op_name(dr_cross_device_op op)
{
    switch (op) {
    case DR_XDEV_DEFAULT:                 return "default";
    case DR_XDEV_NCCL:                    return "nccl";
    case DR_XDEV_HIERARCHICAL_COPY:       return "hierarchical_copy";
    case DR_XDEV_REDUCTION_TO_ONE_DEVICE: return "reduction_to_one_device";
    case DR_XDEV_RING:                    return "ring";
    case DR_XDEV_AUTO:                    return "auto";
    }
    return "unknown";
}
