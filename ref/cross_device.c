/* distref reference — cross-device all-reduce of exact accumulators.
 *
 * The algorithms follow TensorFlow's cross_device_ops.py (research notes §3):
 *   nccl (NcclAllReduce)        ring: reduce-scatter, then all-gather
 *   hierarchical_copy           two halves reduce to a root each, the roots
 *                               exchange, the result goes back the same way
 *   reduction_to_one_device     everything to the first device, then broadcast
 * They differ in which bytes cross which links, and the counters show it; the
 * values they produce cannot differ, because merging accumulators is exact.
 * Every hop serializes a chunk into DR_ACC_BYTES-per-element wire format on
 * the sender, copies it to the receiver's device, and deserializes there.
 */
#include "distref/strategy.h"
#include "distref/ref.h"
#include "distref/wire.h"

#include <stdlib.h>
#include <string.h>

typedef struct link {
    dr_strategy *s;
    dr_wire      wire;      /* the sender's staging and the receiver's landing buffer */
} link;

static dr_device *dev_of(link *l, uint32_t replica)
{
    return &l->s->device[l->s->replica_device[replica]];
}

/* dst[0..n) += src[0..n) (merge) or = src (overwrite), src on replica a, dst on b. */
static int send(link *l, uint32_t from, const dr_acc *src, uint32_t to, dr_acc *dst,
                size_t n, bool overwrite, dr_err *err)
{
    return dr_wire_send(&l->wire, dev_of(l, from), src, dev_of(l, to), dst, n, overwrite, err);
}

/* Ring all-reduce of acc[r][off .. off+len): chunk c = [c*len/R, (c+1)*len/R).
 * Reduce-scatter step s: replica r sends chunk (r - s) mod R to r+1, which
 * merges it; after R-1 steps replica r holds the total of chunk r+1.
 * All-gather step s: r sends chunk (r + 1 - s) mod R on, which overwrites.
 * In one step a replica never receives the chunk it sends, so running the
 * sends of a step one after another is the same as running them at once. */
static int ring(link *l, dr_acc *const *acc, size_t off, size_t len, dr_err *err)
{
    uint32_t R = l->s->num_replicas;
    for (uint32_t phase = 0; phase < 2; phase++) {
        for (uint32_t step = 0; step + 1 < R; step++) {
            for (uint32_t r = 0; r < R; r++) {
                uint32_t c = (r + R - step + phase) % R, to = (r + 1) % R;
                size_t lo = off + c * len / R, hi = off + (c + 1) * len / R;
                int rc = send(l, r, acc[r] + lo, to, acc[to] + lo, hi - lo, phase == 1, err);
                if (rc) return rc;
            }
        }
    }
    return DR_OK;
}

void dr_count_ring(dr_strategy *s, size_t n)
{
    uint32_t R = s->num_replicas;
    for (uint32_t phase = 0; phase < 2; phase++)   /* ring()'s sends, counted */
        for (uint32_t step = 0; step + 1 < R; step++)
            for (uint32_t r = 0; r < R; r++) {
                uint32_t c = (r + R - step + phase) % R;
                dr_device *from = &s->device[s->replica_device[r]], *to = &s->device[s->replica_device[(r + 1) % R]];
                uint64_t bytes = (uint64_t)((c + 1) * n / R - c * n / R) * DR_ACC_BYTES;
                if (from == to) continue;
                from->bytes_out += bytes;
                to->bytes_in += bytes;
            }
}

/* Members send to root (merge); later root sends back (overwrite). */
static int gather_to(link *l, dr_acc *const *acc, size_t off, size_t len,
                     uint32_t lo, uint32_t hi, uint32_t root, bool back, dr_err *err)
{
    for (uint32_t r = lo; r < hi; r++) {
        int rc;
        if (r == root) continue;
        rc = back ? send(l, root, acc[root] + off, r, acc[r] + off, len, true, err)
                  : send(l, r, acc[r] + off, root, acc[root] + off, len, false, err);
        if (rc) return rc;
    }
    return DR_OK;
}

/* TensorFlow's hierarchical copy: groups [0, h) and [h, R), roots rotating
 * with the pack index so that no device is the root of every pack. */
static int hierarchical(link *l, dr_acc *const *acc, size_t off, size_t len,
                        uint32_t pack, dr_err *err)
{
    uint32_t R = l->s->num_replicas, h = R / 2;
    uint32_t r0 = h ? pack % h : 0, r1 = h + (R - h ? pack % (R - h) : 0);
    int rc;
    if (R == 1) return DR_OK;
    if ((rc = gather_to(l, acc, off, len, 0, h, r0, false, err))) return rc;
    if ((rc = gather_to(l, acc, off, len, h, R, r1, false, err))) return rc;
    if (h && (rc = send(l, r1, acc[r1] + off, r0, acc[r0] + off, len, false, err))) return rc;
    if (h && (rc = send(l, r0, acc[r0] + off, r1, acc[r1] + off, len, true, err))) return rc;
    if ((rc = gather_to(l, acc, off, len, 0, h, r0, true, err))) return rc;
    return gather_to(l, acc, off, len, h, R, r1, true, err);
}

static int to_one_device(link *l, dr_acc *const *acc, size_t off, size_t len, dr_err *err)
{
    int rc = gather_to(l, acc, off, len, 0, l->s->num_replicas, 0, false, err);
    return rc ? rc : gather_to(l, acc, off, len, 0, l->s->num_replicas, 0, true, err);
}

static int reduce_pack(link *l, dr_acc *const *acc, size_t off, size_t len, uint32_t pack, dr_err *err)
{
    switch (l->s->spec.cross_device_op) {
    case DR_XDEV_HIERARCHICAL_COPY: return hierarchical(l, acc, off, len, pack, err);
    case DR_XDEV_REDUCTION_TO_ONE_DEVICE: return to_one_device(l, acc, off, len, err);
    case DR_XDEV_DEFAULT:
        /* TensorFlow: NCCL between GPUs, reduction to one device otherwise. */
        if (l->s->spec.num_gpus == 0) return to_one_device(l, acc, off, len, err);
        return ring(l, acc, off, len, err);
    default: return ring(l, acc, off, len, err);
    }
}

int dr_all_reduce(dr_strategy *s, dr_acc *const *acc, size_t n,
                  const size_t *tensor_len, uint32_t ntensors, dr_err *err)
{
    link l = { s, { 0 } };
    uint32_t packs = s->spec.num_packs > 0 ? (uint32_t)s->spec.num_packs : ntensors;
    size_t off = 0;
    int rc = DR_OK;
    if (s->num_replicas == 1) return DR_OK;
    if (dr_wire_init(&l.wire, n, err)) return dr_fail_wrap(err, "all-reduce");
    /* num_packs == 0: one pack per tensor. Otherwise _ConcatAndSplitPacker:
     * the concatenation split into packs of n/k, the last taking the rest. */
    for (uint32_t p = 0; p < packs && rc == DR_OK; p++) {
        size_t len = s->spec.num_packs > 0 ? (p + 1 < packs ? n / packs : n - off) : tensor_len[p];
        rc = reduce_pack(&l, acc, off, len, p, err);
        off += len;
    }
    dr_wire_free(&l.wire);
    return rc;
}

int dr_reduce_to_device(dr_strategy *s, dr_acc *const *acc, size_t n,
                        uint32_t dst_dev, dr_acc *dst, dr_err *err)
{
    dr_wire w;
    int rc = dr_wire_init(&w, n, err);
    if (rc) return dr_fail_wrap(err, "reduce");
    for (uint32_t r = 0; r < s->num_replicas && rc == DR_OK; r++)
        rc = dr_wire_send(&w, &s->device[s->replica_device[r]], acc[r], &s->device[dst_dev], dst, n, false, err);
    dr_wire_free(&w);
    return rc;
}
