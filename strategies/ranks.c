/* distref engine — the MPI variant's exchange between ranks around a step.
 *
 * A rank holds only its own replicas, but a step's report (metrics.jsonl:
 * the loss rounded once, the correct predictions, every replica's batch and
 * example ids) covers all of them, and no rank may enter the all-reduce
 * while another has failed. So after its replicas computed, every rank
 * sends every other one a record (the comm's all_gather):
 *
 *   int32 rc, char msg[sizeof dr_err.msg]       its verdict so far
 *   per local replica k: uint64 correct, uint32 n,
 *                        DR_ACC_BYTES loss       (exact: the wire form of its
 *                                                 share; fast: the float)
 *   per local replica k: rows uint32 ids         the examples it staged
 *
 * The record is one message per rank per step (a few KB). A failed rank
 * fails every rank with its message, naming it; the step's loss is the
 * exact merge of every replica's share (fast: their float sum in replica
 * order, as the threads comm's variant sums it), and the ids are what each
 * replica really staged, so conformance sees each rank's shard.
 */
#include "strategies/engine_internal.h"
#include "distref/fileio.h"

#include <stdlib.h>
#include <string.h>

struct engine_ranks {
    size_t    rec;            /* bytes of one rank's record */
    uint8_t  *mine, *all;     /* this rank's record; every rank's, in rank order */
    uint32_t *ids;            /* the step's ids, replica by replica */
};

#define HDR  (4 + sizeof(((dr_err *)0)->msg))
#define PER  (8 + 4 + DR_ACC_BYTES)

static uint8_t *rep_at(const dr_session *s, uint8_t *rec, uint32_t k) { (void)s; return rec + HDR + (size_t)k * PER; }
static uint8_t *ids_at(const dr_session *s, uint8_t *rec, uint32_t k)
{
    return rec + HDR + (size_t)s->L * PER + (size_t)k * s->rows * 4;
}

int engine_ranks_open(dr_session *s, dr_err *err)
{
    engine_ranks *x;
    if (!s->co->all_gather)
        return dr_fail(err, DR_EUNSUPPORTED, "comm %s: no all_gather, so ranks cannot agree", s->co->name);
    if (!(x = calloc(1, sizeof *x))) return dr_fail(err, DR_ENOMEM, "out of host memory for the ranks' records");
    s->ranks = x;
    x->rec = HDR + (size_t)s->L * (PER + (size_t)s->rows * 4);
    x->mine = calloc(1, x->rec);
    x->all = calloc(s->W, x->rec);
    x->ids = malloc((size_t)s->R * s->rows * sizeof *x->ids + 4);
    if (!x->mine || !x->all || !x->ids) return dr_fail(err, DR_ENOMEM, "out of host memory for the ranks' records");
    return DR_OK;
}

void engine_ranks_close(dr_session *s)
{
    if (!s->ranks) return;
    free(s->ranks->mine);
    free(s->ranks->all);
    free(s->ranks->ids);
    free(s->ranks);
    s->ranks = NULL;
}

void engine_ranks_staged(dr_session *s, uint32_t r, const uint32_t *ids, uint32_t n)
{
    uint32_t k = r - s->wlo * s->L;
    uint8_t *p = rep_at(s, s->ranks->mine, k), *q = ids_at(s, s->ranks->mine, k);
    if (n > s->rows) n = s->rows;
    dr_put_u32le(p + 8, n);
    for (uint32_t i = 0; i < n; i++) dr_put_u32le(q + 4 * (size_t)i, ids[i]);
}

int engine_ranks_agree(dr_session *s, int rc, const dr_err *local_err, dr_err *err)
{
    engine_ranks *x = s->ranks;
    uint8_t *m = x->mine;
    int grc;
    dr_put_u32le(m, (uint32_t)rc);
    memset(m + 4, 0, HDR - 4);
    if (rc) memcpy(m + 4, local_err->msg, HDR - 5);
    for (uint32_t k = 0; rc == DR_OK && k < s->L; k++) {
        uint32_t r = s->wlo * s->L + k;
        uint8_t *p = rep_at(s, m, k);
        dr_err e;
        uint64_t c = s->rb[r].correct;
        dr_put_u32le(p, (uint32_t)c);
        dr_put_u32le(p + 4, (uint32_t)(c >> 32));
        memset(p + 12, 0, DR_ACC_BYTES);
        if (s->num == DR_NUMERICS_FAST) {
            float f;
            uint32_t bits;
            if (s->bo->download(s->be, &f, s->rb[r].loss, 0, sizeof f, &e) == DR_OK) {
                memcpy(&bits, &f, sizeof bits);
                dr_put_u32le(p + 12, bits);
            }
        } else {
            dr_acc l;
            if (s->bo->download(s->be, &l, s->rb[r].loss, 0, sizeof l, &e) == DR_OK) dr_acc_serialize(&l, p + 12);
        }
    }
    if ((grc = s->co->all_gather(s->ep[0], m, x->rec, x->all, err)))
        return dr_fail_wrap(err, "step %llu", (unsigned long long)s->step);
    for (uint32_t w = 0; w < s->W; w++) {
        const uint8_t *q = x->all + (size_t)w * x->rec;
        int code = (int)dr_get_u32le(q);
        if (code != DR_OK) {
            char msg[HDR];
            memcpy(msg, q + 4, HDR - 4);
            msg[HDR - 5] = '\0';
            return dr_fail(err, code, "rank %u, step %llu: %s", w, (unsigned long long)s->step, msg);
        }
    }
    return DR_OK;
}

void engine_ranks_totals(dr_session *s, dr_acc *total, float *ftotal, uint64_t *correct, const uint32_t **ids,
                         uint32_t *off)
{
    engine_ranks *x = s->ranks;
    uint32_t pos = 0;
    *correct = 0;
    for (uint32_t r = 0; r < s->R; r++) {
        uint8_t *rec = x->all + (size_t)(r / s->L) * x->rec;
        const uint8_t *p = rep_at(s, rec, r % s->L), *q = ids_at(s, rec, r % s->L);
        uint32_t n = dr_get_u32le(p + 8);
        *correct += (uint64_t)dr_get_u32le(p) | (uint64_t)dr_get_u32le(p + 4) << 32;
        if (s->num == DR_NUMERICS_FAST) {
            uint32_t bits = dr_get_u32le(p + 12);
            float f;
            memcpy(&f, &bits, sizeof f);
            *ftotal = r ? *ftotal + f : f;
        } else {
            dr_acc l;
            if (dr_acc_deserialize(&l, p + 12)) dr_acc_merge(total, &l);
        }
        off[r] = pos;
        for (uint32_t i = 0; i < n && n <= s->rows; i++) x->ids[pos++] = dr_get_u32le(q + 4 * (size_t)i);
    }
    off[s->R] = pos;
    *ids = x->ids;
}

bool engine_ranks_in_sync(dr_session *s, uint64_t my_hash)
{
    uint8_t mine[8], *all = malloc((size_t)s->W * 8);
    dr_err err;
    bool same = all != NULL;
    dr_put_u32le(mine, (uint32_t)my_hash);
    dr_put_u32le(mine + 4, (uint32_t)(my_hash >> 32));
    if (same && s->co->all_gather(s->ep[0], mine, 8, all, &err)) same = false;
    for (uint32_t w = 0; same && w < s->W; w++) same = memcmp(all + 8 * (size_t)w, mine, 8) == 0 && my_hash != 0;
    free(all);
    return same;
}
