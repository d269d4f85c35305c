/* distref — auto-shard policies and the DATA-sharded split (multiworker.h). */
#include "distref/multiworker.h"

#include <string.h>

int dr_shard_policy_parse(const char *name, dr_shard_policy *out, dr_err *err)
{
    static const char *const names[] = { "auto", "file", "data", "off", "hint" };
    for (int i = 0; i < 5; i++)
        if (strcmp(name, names[i]) == 0) { *out = (dr_shard_policy)i; return DR_OK; }
    return dr_fail(err, DR_EUSAGE, "--auto_shard_policy: expected auto, file, data, off or hint, got '%s'", name);
}

int dr_shard_policy_resolve(dr_shard_policy p, uint32_t files, uint32_t W, dr_shard_policy *out, dr_err *err)
{
    if (p == DR_SHARD_FILE && W > 1 && files < W)
        return dr_fail(err, DR_EUSAGE, "--auto_shard_policy=file: %u workers but the input has %u file%s; "
                       "FILE sharding needs at least one file per worker (use auto or data)",
                       W, files, files == 1 ? "" : "s");
    /* AUTO tries FILE and falls back to DATA; one file cannot feed W > 1 workers. */
    if (p == DR_SHARD_AUTO) p = (files >= 1 && files >= W) ? DR_SHARD_FILE : DR_SHARD_DATA;
    *out = p;
    return DR_OK;
}

void dr_shard_data(const uint32_t *ids, uint32_t count, uint32_t W, uint32_t R,
                   uint32_t *out_ids, uint32_t *off)
{
    uint32_t N = W * R, slice = (count + N - 1) / N, pos = 0;
    off[0] = 0;
    for (uint32_t w = 0; w < W; w++) {
        for (uint32_t r = 0; r < R; r++) {
            uint32_t j = r * W + w, lo = j * slice, hi = lo + slice;
            if (lo > count) lo = count;
            if (hi > count) hi = count;
            memcpy(out_ids + pos, ids + lo, (hi - lo) * sizeof *ids);
            pos += hi - lo;
            off[w * R + r + 1] = pos;
        }
    }
}

uint32_t dr_shard_data_row(uint32_t count, uint32_t W, uint32_t R, uint32_t i)
{
    uint32_t N = W * R, slice = (count + N - 1) / N, j = (i % R) * W + i / R;
    return j * slice < count ? j * slice : count;
}
