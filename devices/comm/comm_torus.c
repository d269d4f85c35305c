/* distref devices — the tpu strategy's all-reduce along the emulated torus,
 * for the threads comm (all_reduce_ranges with algorithm TORUS; one rank
 * holding every replica).
 *
 * What is reduced: the parameters logical core l holds, [lo, hi) ranges of
 * every replica's flat array, taken together as one packed array of len
 * elements (position p of the packing is the p-th element of the ranges).
 *
 * The grid: replica r's position in dimension d (x, y, z, core of a chip) is
 * the lowest coordinate of its cores there divided by the extent of a
 * replica in d. A line of d is the replicas agreeing on every other
 * dimension, ordered by position along d (ties by replica number); the
 * torus's wrap-around link closes it into a ring. Dimension after dimension,
 * every line runs a ring all-reduce of the packed array (chunks
 * [c*len/n, (c+1)*len/n)): after dimension d a replica holds its line's sum,
 * after the last the total.
 *
 * Time (alpha-beta, as the reference emulates it): a ring of n members takes
 * 2(n-1) steps, each as slow as its slowest link carrying ceil(len/n)
 * accumulators (dr_tpu_transfer_seconds); the rings of one dimension run at
 * once, so the slowest counts, and the dimensions add up.
 * Bytes: each ring send of a chunk counts the form's wire bytes per element
 * on the devices of the two cores (device 1 + core). The rings are the
 * generic ring of any form (dr_ct_ring_chain), so floats (fast numerics)
 * add in RING's float order (distref/comm.h), line by line, dimension
 * after dimension.
 *
 * Execution: the ranges are cut into blocks of DR_CT_BLOCK, one OpenMP
 * iteration each; a block runs, for its elements, every ring of every
 * dimension in order (the same merges and copies as the step-by-step rings),
 * in place in the flat arrays, so nothing is packed or copied out.
 */
#include "devices/comm/comm_internal.h"

#include <limits.h>
#include <stdlib.h>

#define MAX_REPLICAS (DR_MAX_DEVICES - 1)

typedef struct torus {
    uint32_t R;
    int      pos[MAX_REPLICAS][DR_TPU_RANK];   /* replica r's grid position */
    int      core[MAX_REPLICAS];               /* replica r's physical core for logical core l */
    uint32_t dev[MAX_REPLICAS];                /* its device index */
    /* Dimension d's lines one after another, each in ring order: line i is
     * member[d][start[d][i] .. start[d][i+1]), ring[d][j] its arrays. */
    uint32_t member[DR_TPU_RANK][MAX_REPLICAS];
    char    *ring[DR_TPU_RANK][MAX_REPLICAS];
    uint32_t start[DR_TPU_RANK][MAX_REPLICAS + 1];
    uint32_t nlines[DR_TPU_RANK];
} torus;

/* A block of one range: flat indices [flat, flat+len), packed from `packed`. */
typedef struct span {
    size_t flat, packed, len;
} span;

static void place(const dr_strategy *s, uint32_t l, torus *t)
{
    const dr_tpu_topology *topo = &s->tpu_system->topology;
    uint32_t k = (uint32_t)s->tpu_assignment.num_cores_per_replica;
    for (uint32_t r = 0; r < t->R; r++) {
        int lo[DR_TPU_RANK], hi[DR_TPU_RANK], xyz[DR_TPU_RANK];
        for (int d = 0; d < DR_TPU_RANK; d++) { lo[d] = INT_MAX; hi[d] = INT_MIN; }
        for (uint32_t j = 0; j < k; j++) {
            dr_tpu_core_coords(topo, s->tpu_assignment.core[r * k + j], xyz);
            for (int d = 0; d < DR_TPU_RANK; d++) {
                if (xyz[d] < lo[d]) lo[d] = xyz[d];
                if (xyz[d] > hi[d]) hi[d] = xyz[d];
            }
        }
        for (int d = 0; d < DR_TPU_RANK; d++) t->pos[r][d] = lo[d] / (hi[d] - lo[d] + 1);
        t->core[r] = s->tpu_assignment.core[r * k + l];
        t->dev[r] = dr_strategy_tpu_device(s, r, l);
    }
}

static bool same_line(const torus *t, uint32_t a, uint32_t b, int d)
{
    for (int e = 0; e < DR_TPU_RANK; e++)
        if (e != d && t->pos[a][e] != t->pos[b][e]) return false;
    return true;
}

/* Dimension d's lines; a line starts at its lowest-numbered replica. */
static void build_lines(torus *t, void *const *x, int d)
{
    bool taken[MAX_REPLICAS] = { false };
    uint32_t n = 0, L = 0;
    for (uint32_t r = 0; r < t->R; r++) {
        if (taken[r]) continue;
        uint32_t first = t->start[d][L++] = n;
        for (uint32_t q = r; q < t->R; q++) {
            uint32_t i;
            if (taken[q] || !same_line(t, q, r, d)) continue;
            taken[q] = true;
            i = n++;
            /* insertion by position along d; equal positions keep replica order */
            while (i > first && t->pos[t->member[d][i - 1]][d] > t->pos[q][d]) {
                t->member[d][i] = t->member[d][i - 1];
                i--;
            }
            t->member[d][i] = q;
        }
    }
    t->start[d][L] = n;
    t->nlines[d] = L;
    for (uint32_t j = 0; j < n; j++) {
        t->ring[d][j] = x ? x[t->member[d][j]] : NULL;
    }
}

/* The slowest ring of dimension d. */
static double dim_seconds(const dr_tpu_topology *topo, const torus *t, int d, size_t len, size_t width)
{
    double slowest = 0;
    for (uint32_t i = 0; i < t->nlines[d]; i++) {
        const uint32_t *m = t->member[d] + t->start[d][i];
        uint32_t n = t->start[d][i + 1] - t->start[d][i];
        uint64_t bytes = (uint64_t)((len + n - 1) / n) * width;
        double step = 0, ring;
        if (n < 2) continue;
        for (uint32_t j = 0; j < n; j++) {
            double ts = dr_tpu_transfer_seconds(topo, t->core[m[j]], t->core[m[(j + 1) % n]], bytes);
            if (ts > step) step = ts;
        }
        ring = 2.0 * (n - 1) * step;
        if (ring > slowest) slowest = ring;
    }
    return slowest;
}

/* Every chunk each member of each line of d sends, in both phases. */
static void count_dim(dr_strategy *s, const torus *t, int d, size_t len, size_t width)
{
    for (uint32_t i = 0; i < t->nlines[d]; i++) {
        const uint32_t *m = t->member[d] + t->start[d][i];
        uint32_t n = t->start[d][i + 1] - t->start[d][i];
        for (uint32_t phase = 0; phase < 2; phase++)
            for (uint32_t step = 0; step + 1 < n; step++)
                for (uint32_t j = 0; j < n; j++) {
                    size_t lo, hi;
                    dr_ct_chunk(len, n, (j + n - step + phase) % n, &lo, &hi);
                    dr_ct_count(s, t->dev[m[j]], t->dev[m[(j + 1) % n]], hi - lo, width);
                }
    }
}

/* All rings of all dimensions for the elements of one span. */
static void span_rings(const torus *t, const dr_form *f, const span *sp, size_t len)
{
    for (int d = 0; d < DR_TPU_RANK; d++)
        for (uint32_t i = 0; i < t->nlines[d]; i++) {
            uint32_t n = t->start[d][i + 1] - t->start[d][i];
            if (n < 2) continue;
            for (uint32_t c = 0; c < n; c++) {
                size_t lo, hi;
                dr_ct_chunk(len, n, c, &lo, &hi);
                if (lo < sp->packed) lo = sp->packed;
                if (hi > sp->packed + sp->len) hi = sp->packed + sp->len;
                if (lo < hi)
                    dr_ct_ring_chain(f, t->ring[d] + t->start[d][i], n, c, sp->flat + (lo - sp->packed), hi - lo);
            }
        }
}

/* The ranges cut into spans (sp NULL: only counted). */
static size_t make_spans(const size_t *ranges, uint32_t nranges, size_t block, span *sp)
{
    size_t ns = 0, packed = 0;
    for (uint32_t i = 0; i < nranges; i++) {
        size_t lo = ranges[2 * i], hi = ranges[2 * i + 1];
        for (size_t a = lo; a < hi; a += block) {
            if (sp) {
                sp[ns].flat = a;
                sp[ns].packed = packed + (a - lo);
                sp[ns].len = hi - a > block ? block : hi - a;
            }
            ns++;
        }
        packed += hi - lo;
    }
    return ns;
}

static int check(const ct_hub *h, const void *const *acc, const size_t *ranges, uint32_t nranges,
                 uint32_t l, const double *seconds, size_t *len, dr_err *err)
{
    const dr_strategy *s = h->cfg.strategy;
    int rc = dr_ct_tpu_live(s, err);
    *len = 0;
    if (rc) return rc;
    if (!seconds) return dr_fail(err, DR_EUSAGE, "comm threads all_reduce_ranges: no seconds (NULL)");
    if (l >= (uint32_t)s->tpu_assignment.num_cores_per_replica)
        return dr_fail(err, DR_EUSAGE, "comm threads all_reduce_ranges: logical core %u; a replica has %d",
                       l, s->tpu_assignment.num_cores_per_replica);
    if (nranges > 0 && !ranges)
        return dr_fail(err, DR_EUSAGE, "comm threads all_reduce_ranges: %u ranges but no array (NULL)", nranges);
    for (uint32_t i = 0; i < nranges; i++) {
        if (ranges[2 * i] > ranges[2 * i + 1])
            return dr_fail(err, DR_EUSAGE, "comm threads all_reduce_ranges: range %u is [%zu, %zu)",
                           i, ranges[2 * i], ranges[2 * i + 1]);
        if (i > 0 && ranges[2 * i] < ranges[2 * i - 1])
            return dr_fail(err, DR_EUSAGE, "comm threads all_reduce_ranges: range %u [%zu, %zu) starts before "
                           "range %u ends (%zu); ranges must be ascending and disjoint",
                           i, ranges[2 * i], ranges[2 * i + 1], i - 1, ranges[2 * i - 1]);
        *len += ranges[2 * i + 1] - ranges[2 * i];
    }
    if (*len == 0) return DR_OK;
    if (!acc) return dr_fail(err, DR_EUSAGE, "comm threads all_reduce_ranges: no local arrays (NULL)");
    for (uint32_t r = 0; r < h->cfg.local_replicas; r++)
        if (!acc[r])
            return dr_fail(err, DR_EUSAGE, "comm threads all_reduce_ranges: replica %u's array is NULL", r);
    return DR_OK;
}

int dr_ct_torus(ct_hub *h, const dr_form *f, void *const *local, const size_t *ranges, uint32_t nranges,
                uint32_t l, double *seconds, dr_err *err)
{
    dr_strategy *s = h->cfg.strategy;
    size_t block = DR_CT_BLOCK;   /* spans of 256 elements whatever the form (floats: small rings) */
    torus *t;
    span *sp;
    size_t len, ns;
    int rc;
    if (h->cfg.local_replicas > MAX_REPLICAS)
        return dr_fail(err, DR_EUSAGE, "comm threads all_reduce_ranges: %u replicas; at most %d",
                       h->cfg.local_replicas, MAX_REPLICAS);
    rc = check(h, (const void *const *)local, ranges, nranges, l, seconds, &len, err);
    if (rc || h->cfg.local_replicas == 1) return rc;
    ns = make_spans(ranges, nranges, block, NULL);
    t = malloc(sizeof *t);
    sp = malloc(ns * sizeof *sp + 1);
    if (!t || !sp) {
        free(t);
        free(sp);
        return dr_fail(err, DR_ENOMEM, "comm threads all_reduce_ranges: no memory for %zu blocks", ns);
    }
    make_spans(ranges, nranges, block, sp);
    t->R = h->cfg.local_replicas;
    place(s, l, t);
    for (int d = 0; d < DR_TPU_RANK; d++) {
        build_lines(t, len ? local : NULL, d);
        *seconds += dim_seconds(&s->tpu_system->topology, t, d, len, f->wire);
        count_dim(s, t, d, len, f->wire);
    }
    #pragma omp parallel for schedule(static) if (ns > 1)
    for (size_t i = 0; i < ns; i++) span_rings(t, f, &sp[i], len);
    free(sp);
    free(t);
    return DR_OK;
}
