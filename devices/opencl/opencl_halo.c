/* distref devices — the OpenCL backend's traffic between a replica's cores
 * under the tpu strategy's spatial partitioning of a model beyond Dense
 * (distref/backend.h's spatial_exchange; docs/MODELS.md "Spatial
 * partitioning with halos", docs/OPENCL.md).
 *
 * Every move stays on the device: a replica's cores' buffers are all on its
 * slot (engine_alloc_at; their workspaces take its params' slot), so each
 * rectangle is one clEnqueueCopyBufferRect from one core's buffer to
 * another's on the slot's in-order queue, after the kernels that wrote the
 * source and before those that read the destination; nothing waits on the
 * host. The rectangles are the OpenMP backend's (devices/cpu/openmp_spatial.c:
 * dr_omp_halo_need, dr_omp_halo_moves, the tiles of the plan for the gather),
 * counted by its dr_omp_rect_bytes and dr_omp_halo_tally, so the halo
 * bytes, gather bytes and links (the emulated seconds) are its own. A core's
 * buffer outside its tile holds values its whole-map kernels computed that
 * nothing reads (the sums run over the tile: opencl_graph.c's rect_of); the
 * halo a window reads and the gathered tiles overwrite exactly what is read.
 * The mixed step: map 0 is the core's xc, its tile of the input rounded
 * to c by graph_begin, so the halo travels rounded, as the unpartitioned
 * conv reads it; every other rounding is per element on the core's own
 * values.
 */
#include "devices/opencl/opencl_backend.h"
#include "devices/cpu/openmp_spatial.h"
#include "devices/seams.h"

/* Core c's buffer of map k, or of its gradient: the one its layers read. */
static cl_mem core_map(dr_replica_bufs *const *cores, uint32_t c, uint32_t k, bool grad)
{
    return grad ? dr_cl_graph_map(cores[c], k, true)
                : DR_SEAM_MIXED_HALO_INPUT(dr_cl_graph_map(cores[c], k, false), cores[c]->x->mem, k);
}

/* Rows [r[0], r[1]) x columns [r[2], r[3]) of map k, every one of n
 * examples (n x H x W x C floats, a row W * C floats, an example H rows),
 * from src to dst on queue q: one rectangle copy, its bytes into *got. */
static int copy_rect(const dr_model_spec *m, cl_command_queue q, uint32_t k, uint32_t n, cl_mem src, cl_mem dst,
                     const uint32_t r[4], uint64_t *got, dr_err *err)
{
    uint32_t H, W, C;
    size_t row, origin[3], region[3];
    cl_int e;
    *got = 0;
    if (r[0] >= r[1] || r[2] >= r[3]) return DR_OK;
    dr_model_map(m, k, &H, &W, &C);
    row = (size_t)W * C * sizeof(float);
    origin[0] = (size_t)r[2] * C * sizeof(float);
    origin[1] = r[0];
    origin[2] = 0;
    region[0] = (size_t)(r[3] - r[2]) * C * sizeof(float);
    region[1] = DR_SEAM_CL_HALO_RECT_ROWS(r[1] - r[0]);
    region[2] = n;
    *got = dr_omp_rect_bytes(C, n, r);
    e = clEnqueueCopyBufferRect(q, src, dst, origin, origin, region, row, row * H, row, row * H, 0, NULL, NULL);
    return e == CL_SUCCESS ? DR_OK : dr_cl_fail(err, e, "spatial exchange (a rectangle between two cores' maps)");
}

/* Where the tiles end: every gathered map's tiles onto core 0 (forward), or
 * their gradients from core 0 back to the tiles (backward). */
static int gather(const dr_model_spec *m, cl_command_queue q, dr_replica_bufs *const *cores, const dr_spatial_plan *p,
                  uint32_t n, bool grad, uint64_t *bytes, dr_omp_links link, dr_err *err)
{
    for (uint32_t k = grad ? 1 : 0; k <= p->lp; k++) {
        if (!p->gathered[k]) continue;
        for (uint32_t c = 1; c < p->tiles; c++) {
            uint32_t from = grad ? 0 : c, to = grad ? c : 0;
            uint64_t got;
            int rc = copy_rect(m, q, k, n, core_map(cores, from, k, grad), core_map(cores, to, k, grad),
                               p->tile[c].rect[k], &got, err);
            if (rc) return rc;
            if (bytes) *bytes += got;
            if (link && got > link[from][to]) link[from][to] = got;
        }
    }
    return DR_OK;
}

/* The halos of map k (grad: its gradient) that layer l's tiles read. */
static int halo(const dr_model_spec *m, cl_command_queue q, dr_replica_bufs *const *cores, const dr_spatial_plan *p,
                uint32_t l, uint32_t k, uint32_t n, bool grad, uint64_t *bytes, dr_omp_links *link, dr_err *err)
{
    uint32_t need[DR_MAX_TILES][4], moves;
    dr_omp_halo_move mv[DR_OMP_HALO_MOVES];
    dr_omp_halo_need(p, m, l, grad, need);
    moves = dr_omp_halo_moves(p, k, (const uint32_t (*)[4])need, mv);
    for (uint32_t i = 0; i < moves; i++) {
        uint64_t got;
        int rc = copy_rect(m, q, k, n, core_map(cores, mv[i].from, k, grad), core_map(cores, mv[i].to, k, grad),
                           mv[i].r, &got, err);
        if (rc) return rc;
        dr_omp_halo_tally(&mv[i], got, bytes, link);
    }
    return DR_OK;
}

int dr_cl_spatial_exchange(dr_backend *b, dr_replica_bufs *const *cores, const dr_spatial_plan *p, uint32_t l,
                           bool grad, uint64_t *halo_bytes, uint64_t *gather_bytes, uint64_t *link, dr_err *err)
{
    dr_omp_links *ln = (dr_omp_links *)link;   /* rounds: the gather or scatter, the two passes */
    const dr_model_spec *m = &b->m;
    const dr_dense *d = &m->layer[l];
    uint32_t k = d->src ? d->src : l, n, slot;
    cl_command_queue q;
    int rc;
    if (l >= m->nlayers) return dr_fail(err, DR_EUSAGE, "opencl backend: spatial_exchange at layer %u", l);
    for (uint32_t c = 0; c < p->tiles; c++)
        if (!cores[c] || !dr_cl_graph_tiled(cores[c], &p->tile[c]))
            return dr_fail(err, DR_ESTATE, "opencl backend: spatial_exchange: core %u holds no tile of the plan", c);
    /* one queue orders the copies after the kernels on both sides */
    slot = ((const dr_cl_scratch *)cores[0]->scratch)->slot;
    for (uint32_t c = 1; c < p->tiles; c++)
        if (((const dr_cl_scratch *)cores[c]->scratch)->slot != slot)
            return dr_fail(err, DR_ESTATE, "opencl backend: spatial_exchange: core %u is not on core 0's queue", c);
    q = b->slot[slot].q;
    n = dr_cl_graph_rows(cores[0]);
    if (n == 0) return DR_OK;
    if (!grad) {
        if (l == p->lp && (rc = gather(m, q, cores, p, n, false, gather_bytes, ln ? ln[0] : NULL, err))) return rc;
        if (l >= p->lp || (d->kind != DR_LAYER_CONV2D && d->kind != DR_LAYER_MAX_POOL2D)) return DR_OK;
        return halo(m, q, cores, p, l, k, n, false, halo_bytes, ln ? ln + 1 : NULL, err);
    }
    if (l + 1 == p->lp && (rc = gather(m, q, cores, p, n, true, gather_bytes, ln ? ln[0] : NULL, err))) return rc;
    if (l >= p->lp || d->kind != DR_LAYER_CONV2D || k == 0) return DR_OK;
    /* each core's output gradient masked by its ReLU before it travels (the
     * backward does not mask again: opencl_graph.c) */
    for (uint32_t c = 0; c < p->tiles; c++)
        if ((rc = dr_cl_unactivate(b, cores[c], l, err))) return rc;
    return halo(m, q, cores, p, l, l + 1, n, true, halo_bytes, ln ? ln + 1 : NULL, err);
}
