/* distref reference — parameter_server: partitioners, variable placement and
 * the fault flags (include/distref/ps.h).
 *
 * The shard counts follow tensorflow/python/distribute/sharded_variable.py
 * (FixedShardsPartitioner, MinSizePartitioner -> partitioned_variables.
 * min_max_variable_partitioner, MaxSizePartitioner -> partitioned_variables.
 * variable_axis_size_partitioner); the split of rows and the placement
 * follow parameter_server_strategy_v2.py (_create_variable: "div" offsets,
 * then _create_variable_round_robin).
 */
#include "distref/ps_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARTITIONER_FORMS "fixed:N, min_size:BYTES[:MAX_SHARDS] or max_size:BYTES[:MAX_SHARDS]"
#define MAX_NUMBER ((uint64_t)1 << 53)

/* A decimal integer of 1 .. 2^53 spanning [p, end): no sign, no blanks. */
static bool parse_count(const char *p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    if (p == end) return false;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9') return false;
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > MAX_NUMBER) return false;
    }
    if (v == 0) return false;
    *out = v;
    return true;
}

static int bad_number(dr_err *err, const char *text, const char *what, const char *p, const char *end)
{
    return dr_fail(err, DR_EUSAGE, "--ps_partitioner=%s: %s must be an integer from 1 to 2^53, got '%.*s'",
                   text, what, (int)(end - p), p);
}

int dr_partitioner_parse(const char *text, dr_partitioner *out, dr_err *err)
{
    const char *colon = strchr(text, ':'), *end = text + strlen(text), *second;
    dr_partitioner p;
    memset(&p, 0, sizeof p);
    if (!text[0]) { *out = p; return DR_OK; }
    if (!colon) return dr_fail(err, DR_EUSAGE, "--ps_partitioner: expected %s, got '%s'", PARTITIONER_FORMS, text);
    second = strchr(colon + 1, ':');
    if (strncmp(text, "fixed", (size_t)(colon - text)) == 0 && colon - text == 5) {
        p.kind = DR_PARTITION_FIXED;
        if (second) return dr_fail(err, DR_EUSAGE, "--ps_partitioner=%s: fixed takes one number, N (fixed:N)", text);
        if (!parse_count(colon + 1, end, &p.num_shards)) return bad_number(err, text, "N (the number of shards)", colon + 1, end);
    } else if ((colon - text == 8 && strncmp(text, "min_size", 8) == 0) ||
               (colon - text == 8 && strncmp(text, "max_size", 8) == 0)) {
        const char *bytes_end = second ? second : end;
        p.kind = text[1] == 'i' ? DR_PARTITION_MIN_SIZE : DR_PARTITION_MAX_SIZE;
        p.max_shards = p.kind == DR_PARTITION_MIN_SIZE ? 1 : 0;   /* TensorFlow's defaults */
        if (!parse_count(colon + 1, bytes_end, &p.shard_bytes))
            return bad_number(err, text, "BYTES (the shard size)", colon + 1, bytes_end);
        if (second && !parse_count(second + 1, end, &p.max_shards))
            return bad_number(err, text, "MAX_SHARDS", second + 1, end);
    } else {
        return dr_fail(err, DR_EUSAGE, "--ps_partitioner: unknown partitioner '%.*s'; expected %s",
                       (int)(colon - text), text, PARTITIONER_FORMS);
    }
    *out = p;
    return DR_OK;
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }
static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

int dr_partition_shards(const dr_partitioner *p, uint64_t dim0, uint64_t row_bytes,
                        uint64_t *k, dr_err *err)
{
    uint64_t n = 1;
    if (dim0 == 0 || row_bytes == 0 || row_bytes > MAX_NUMBER || dim0 > MAX_NUMBER / row_bytes)
        return dr_fail(err, DR_EUSAGE, "partitioner: a variable of %llu rows of %llu bytes cannot be "
                       "partitioned (both must be positive, the product below 2^53)",
                       (unsigned long long)dim0, (unsigned long long)row_bytes);
    switch (p->kind) {
    case DR_PARTITION_NONE: n = 1; break;
    case DR_PARTITION_FIXED: n = p->num_shards; break;
    case DR_PARTITION_MIN_SIZE:
        /* max(1, min(dim0, max_partitions, ceil(total_bytes / min_slice_size))) */
        n = min_u64(min_u64(dim0, p->max_shards), ceil_div(dim0 * row_bytes, p->shard_bytes));
        if (n < 1) n = 1;
        break;
    case DR_PARTITION_MAX_SIZE: {
        /* slices_per_shard = max(1, floor(max_shard_bytes / bytes_per_slice));
         * axis_shards = ceil(dim0 / slices_per_shard), then min(max_shards, .) */
        uint64_t per = p->shard_bytes / row_bytes;
        if (per < 1) per = 1;
        n = ceil_div(dim0, per);
        if (p->max_shards) n = min_u64(n, p->max_shards);
        break;
    }
    }
    *k = min_u64(n, dim0);   /* num_partitions = min(num_partitions[0], shape[0]) */
    return DR_OK;
}

int dr_ps_place_variables(const dr_ps_variable *vars, uint32_t nvars, const dr_partitioner *p,
                          uint32_t num_ps, dr_ps_layout *out, dr_err *err)
{
    uint64_t total = 0, counter = 0;
    memset(out, 0, sizeof *out);
    if (num_ps == 0) return dr_fail(err, DR_EUSAGE, "num_ps: expected at least 1 ps task, got 0");
    for (uint32_t v = 0; v < nvars; v++) {
        uint64_t k;
        int rc = dr_partition_shards(p, vars[v].dim0, vars[v].row_len * sizeof(float), &k, err);
        if (rc) return dr_fail_wrap(err, "--ps_partitioner, variable %u", v);
        total += k;
    }
    if (total > UINT32_MAX || !(out->shard = calloc((size_t)total + 1, sizeof *out->shard)))
        return dr_fail(err, DR_ENOMEM, "--ps_partitioner: no memory for %llu shards", (unsigned long long)total);
    for (uint32_t v = 0; v < nvars; v++) {
        uint64_t k, row = 0;
        dr_partition_shards(p, vars[v].dim0, vars[v].row_len * sizeof(float), &k, NULL);
        for (uint64_t i = 0; i < k; i++) {
            dr_ps_shard *s = &out->shard[out->num_shards++];
            uint64_t rows = dr_partition_shard_rows(vars[v].dim0, k, i);
            s->variable = v;
            s->part = (uint32_t)i;
            s->ps_task = (uint32_t)(counter++ % num_ps);   /* one counter for all variables */
            s->offset = vars[v].offset + (size_t)(row * vars[v].row_len);
            s->length = (size_t)(rows * vars[v].row_len);
            row += rows;
        }
    }
    return DR_OK;
}

void dr_ps_layout_free(dr_ps_layout *l)
{
    free(l->shard);
    memset(l, 0, sizeof *l);
}

uint32_t dr_ps_model_variables(const dr_model_spec *m, dr_ps_variable *vars)
{
    uint32_t n = 0;
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        size_t k = dr_model_kernel_offset(m, l), b = dr_model_bias_offset(m, l);
        switch (d->kind) {
        case DR_LAYER_DENSE:
            vars[n++] = (dr_ps_variable){ k, d->in, d->out };
            vars[n++] = (dr_ps_variable){ b, d->out, 1 };
            break;
        case DR_LAYER_CONV2D:
            vars[n++] = (dr_ps_variable){ k, d->ksize, (uint64_t)d->ksize * d->ic * d->oc };
            vars[n++] = (dr_ps_variable){ b, d->oc, 1 };
            break;
        case DR_LAYER_BATCH_NORM: {
            size_t s = dr_model_state_offset(m, l);
            vars[n++] = (dr_ps_variable){ k, d->oc, 1 };
            vars[n++] = (dr_ps_variable){ b, d->oc, 1 };
            vars[n++] = (dr_ps_variable){ s, d->oc, 1 };
            vars[n++] = (dr_ps_variable){ s + d->oc, d->oc, 1 };
            break;
        }
        default: break;   /* pooling, Flatten, Dropout, Add: no variables */
        }
    }
    return n;
}

int dr_ps_parse_failure(const char *flag, const char *text, uint32_t count,
                        uint32_t *index, uint64_t *step, dr_err *err)
{
    const char *colon = strchr(text, ':'), *end = text + strlen(text);
    uint64_t i = 0, k = 0;
    const char *who = strcmp(flag, "fail_ps") == 0 ? "ps task" : "worker";
    *index = 0;
    *step = 0;
    if (!text[0]) return DR_OK;
    if (!colon) return dr_fail(err, DR_EUSAGE, "--%s: expected INDEX:STEP (%s INDEX fails at step STEP), got '%s'",
                               flag, who, text);
    /* parse_count refuses 0, which is a valid index */
    if (!(colon - text == 1 && text[0] == '0') && !parse_count(text, colon, &i))
        return dr_fail(err, DR_EUSAGE, "--%s=%s: INDEX must be a non-negative integer, got '%.*s'",
                       flag, text, (int)(colon - text), text);
    if (!parse_count(colon + 1, end, &k))
        return dr_fail(err, DR_EUSAGE, "--%s=%s: STEP must be an integer from 1 to 2^53 (steps count from 1), got '%s'",
                       flag, text, colon + 1);
    if (i >= count)
        return dr_fail(err, DR_EUSAGE, "--%s=%s: %s %llu does not exist; TF_CONFIG has %u (0..%u)",
                       flag, text, who, (unsigned long long)i, count, count - 1);
    *index = (uint32_t)i;
    *step = k;
    return DR_OK;
}

int dr_ps_parse_failures(const char *fail_worker, const char *fail_ps, uint32_t W, uint32_t P, uint64_t N,
                         uint32_t *worker, uint64_t *worker_step, uint32_t *ps, uint64_t *ps_step, dr_err *err)
{
    int rc;
    if ((rc = dr_ps_parse_failure("fail_worker", fail_worker, W, worker, worker_step, err)) ||
        (rc = dr_ps_parse_failure("fail_ps", fail_ps, P, ps, ps_step, err)))
        return rc;
    if (*worker_step > N)
        return dr_fail(err, DR_EUSAGE, "--fail_worker=%s: step %llu is beyond the %llu step functions this run "
                       "schedules", fail_worker, (unsigned long long)*worker_step, (unsigned long long)N);
    if (*ps_step > N)
        return dr_fail(err, DR_EUSAGE, "--fail_ps=%s: step %llu is beyond the %llu steps this run takes",
                       fail_ps, (unsigned long long)*ps_step, (unsigned long long)N);
    return DR_OK;
}

int dr_ps_failure_stopped(dr_err *err, const char *model_dir, bool have_ckpt, uint64_t saved)
{
    char was[sizeof err->msg];
    snprintf(was, sizeof was, "%s", err->msg);
    if (have_ckpt)
        return dr_fail(err, DR_EFAULT, "%s; training stopped; rerun without the fault to resume from the last "
                       "checkpoint in %s (step %llu)", was, model_dir, (unsigned long long)saved);
    return dr_fail(err, DR_EFAULT, "%s; training stopped; %s has no checkpoint yet (use --checkpoint_every): "
                   "a rerun starts from step 0", was, model_dir);
}
