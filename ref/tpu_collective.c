/* distref reference — the torus all-reduce of the tpu strategy (see
 * ref/tpu_collective.h).
 *
 * Replicas form a grid: replica r's position in dimension d is the lowest
 * coordinate of its cores there divided by the extent of a replica in d.
 * A line is the replicas that agree on every other dimension; in torus
 * order it is a ring (the wrap-around link closes it). Each ring runs a
 * reduce-scatter and an all-gather, as ref/cross_device.c's ring does.
 */
#include "ref/tpu_collective.h"

#include <stdlib.h>
#include <string.h>

typedef struct grid {
    int pos[DR_MAX_DEVICES][DR_TPU_RANK];   /* replica r's grid position */
    int core[DR_MAX_DEVICES];               /* replica r's physical core for logical core l */
} grid;

static void place(const dr_strategy *s, uint32_t l, grid *g)
{
    const dr_tpu_topology *t = &s->tpu_system->topology;
    int k = s->tpu_assignment.num_cores_per_replica;
    for (uint32_t r = 0; r < s->num_replicas; r++) {
        int lo[DR_TPU_RANK], hi[DR_TPU_RANK], c[DR_TPU_RANK];
        for (int d = 0; d < DR_TPU_RANK; d++) { lo[d] = 1 << 30; hi[d] = -1; }
        for (int j = 0; j < k; j++) {
            dr_tpu_core_coords(t, s->tpu_assignment.core[(int)r * k + j], c);
            for (int d = 0; d < DR_TPU_RANK; d++) {
                if (c[d] < lo[d]) lo[d] = c[d];
                if (c[d] > hi[d]) hi[d] = c[d];
            }
        }
        for (int d = 0; d < DR_TPU_RANK; d++) g->pos[r][d] = lo[d] / (hi[d] - lo[d] + 1);
        g->core[r] = s->tpu_assignment.core[(int)r * k + (int)l];
    }
}

/* The members of replica r's line in dimension d, in ring order. */
static uint32_t line_of(const dr_strategy *s, const grid *g, uint32_t r, int d, uint32_t *m)
{
    uint32_t n = 0;
    for (uint32_t q = 0; q < s->num_replicas; q++) {
        bool same = true;
        for (int e = 0; e < DR_TPU_RANK; e++) if (e != d && g->pos[q][e] != g->pos[r][e]) same = false;
        if (!same) continue;
        uint32_t i = n++;
        while (i > 0 && g->pos[m[i - 1]][d] > g->pos[q][d]) { m[i] = m[i - 1]; i--; }
        m[i] = q;
    }
    return n;
}

/* Ring all-reduce of buf[m[j]][0..len) over the n members; returns its
 * alpha-beta time: 2(n-1) steps, each as slow as its slowest link. */
static int ring(dr_strategy *s, const grid *g, dr_acc *const *buf, size_t len, const uint32_t *m,
                uint32_t n, dr_wire *w, double *seconds, dr_err *err)
{
    const dr_tpu_topology *t = &s->tpu_system->topology;
    double step_max = 0;
    for (uint32_t j = 0; j < n; j++) {
        double ts = dr_tpu_transfer_seconds(t, g->core[m[j]], g->core[m[(j + 1) % n]],
                                            (uint64_t)((len + n - 1) / n) * DR_ACC_BYTES);
        if (ts > step_max) step_max = ts;
    }
    *seconds = 2.0 * (n - 1) * step_max;
    for (uint32_t phase = 0; phase < 2; phase++)
        for (uint32_t step = 0; step + 1 < n; step++)
            for (uint32_t j = 0; j < n; j++) {
                uint32_t c = (j + n - step + phase) % n, a = m[j], b = m[(j + 1) % n];
                size_t lo = c * len / n, hi = (c + 1) * len / n;
                int rc = dr_wire_send(w, &s->device[1 + g->core[a]], buf[a] + lo,
                                      &s->device[1 + g->core[b]], buf[b] + lo, hi - lo, phase == 1, err);
                if (rc) return rc;
            }
    return DR_OK;
}

/* packed <- flat's ranges, or back: flat's ranges <- packed. */
static void gather(dr_acc *packed, dr_acc *flat, const size_t *ranges, uint32_t nranges, bool back)
{
    size_t len = 0;
    for (uint32_t i = 0; i < nranges; i++) {
        size_t lo = ranges[2 * i], n = ranges[2 * i + 1] - lo;
        if (back) memcpy(flat + lo, packed + len, n * sizeof *packed);
        else memcpy(packed + len, flat + lo, n * sizeof *packed);
        len += n;
    }
}

int dr_tpu_all_reduce(dr_strategy *s, dr_acc *const *acc, const size_t *ranges, uint32_t nranges,
                      uint32_t l, double *seconds, dr_err *err)
{
    uint32_t R = s->num_replicas, m[DR_MAX_DEVICES];
    dr_acc *buf[DR_MAX_DEVICES] = { 0 };
    grid g;
    dr_wire w = { 0 };
    size_t len = 0;
    int rc = DR_OK;
    if ((rc = dr_strategy_check_tpu_live(s, err))) return rc;
    if (R == 1) return DR_OK;
    for (uint32_t i = 0; i < nranges; i++) len += ranges[2 * i + 1] - ranges[2 * i];
    place(s, l, &g);
    /* A core's parameters are scattered rows of the flat array: packed
     * contiguously on the core before the rings, unpacked after. */
    for (uint32_t r = 0; r < R && rc == DR_OK; r++) {
        if (!(buf[r] = malloc(len * sizeof(dr_acc) + 1))) rc = dr_fail(err, DR_ENOMEM, "tpu all-reduce: no memory");
        else gather(buf[r], acc[r], ranges, nranges, false);
    }
    if (rc == DR_OK) rc = dr_wire_init(&w, len, err);
    for (int d = 0; d < DR_TPU_RANK && rc == DR_OK; d++) {
        double slowest = 0;
        for (uint32_t r = 0; r < R && rc == DR_OK; r++) {
            uint32_t n = line_of(s, &g, r, d, m);
            double ts = 0;
            if (n < 2 || m[0] != r) continue;   /* each line once, from its first member */
            rc = ring(s, &g, buf, len, m, n, &w, &ts, err);
            if (ts > slowest) slowest = ts;
        }
        *seconds += slowest;
    }
    for (uint32_t r = 0; r < R && rc == DR_OK; r++) gather(buf[r], acc[r], ranges, nranges, true);
    for (uint32_t r = 0; r < R; r++) free(buf[r]);
    dr_wire_free(&w);
    return rc;
}
