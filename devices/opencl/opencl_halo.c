/* distref devices — the OpenCL backend's traffic between a replica's cores
 * under the tpu strategy's spatial partitioning of a model beyond Dense
 * (distref/backend.h's spatial_exchange; docs/MODELS.md "Spatial
 * partitioning with halos", docs/OPENCL.md).
 *
 * Correctness first: every move goes through the host. The maps involved
 * are read whole from each core's buffers (blocking reads on the replica's
 * in-order queue, so after the kernels that wrote them), the rectangles
 * copied on the host by the OpenMP backend's own exchange
 * (devices/cpu/openmp_spatial.c: the same plan, passes, byte counts and
 * links), and the maps written back whole. A core's buffer outside its tile
 * holds values its whole-map kernels computed that nothing reads (the sums
 * run over the tile: opencl_graph.c's rect_of); the halo a window reads and
 * the gathered tiles overwrite exactly what is read. A replica's cores all
 * run on its slot (their workspaces take its params' slot).
 * The mixed step: map 0 is the core's xc, its tile of the input rounded
 * to c by graph_begin, so the halo travels rounded, as the unpartitioned
 * conv reads it; every other rounding is per element on the core's own
 * values.
 */
#include "devices/opencl/opencl_backend.h"
#include "devices/cpu/openmp_spatial.h"
#include "devices/seams.h"

#include <stdlib.h>

/* Map k (or its gradient) of cores [0, T) from the device into host[c] (up
 * false), or back (up true): n examples of H x W x C floats each. */
static int maps_io(dr_backend *b, dr_replica_bufs *const *cores, uint32_t T, uint32_t k, bool grad, size_t cells,
                   float *const *host, bool up, dr_err *err)
{
    for (uint32_t c = 0; c < T; c++) {
        dr_cl_slot *sl = &b->slot[((const dr_cl_scratch *)cores[c]->scratch)->slot];
        cl_mem mem = grad ? dr_cl_graph_map(cores[c], k, true)
                          : DR_SEAM_MIXED_HALO_INPUT(dr_cl_graph_map(cores[c], k, false), cores[c]->x->mem, k);
        cl_int e = up ? clEnqueueWriteBuffer(sl->q, mem, CL_TRUE, 0, cells * sizeof(float), host[c], 0, NULL, NULL)
                      : clEnqueueReadBuffer(sl->q, mem, CL_TRUE, 0, cells * sizeof(float), host[c], 0, NULL, NULL);
        if (e != CL_SUCCESS) return dr_cl_fail(err, e, up ? "spatial exchange (writing a core's map back)"
                                                          : "spatial exchange (reading a core's map)");
    }
    return DR_OK;
}

/* The maps k of the plan's cores on the host: T buffers of cells floats each, in one allocation. */
static float *host_maps(uint32_t T, size_t cells, float **maps)
{
    float *all = malloc((size_t)T * cells * sizeof(float) + 1);
    for (uint32_t c = 0; all && c < T; c++) maps[c] = all + (size_t)c * cells;
    return all;
}

/* Where the tiles end: every gathered map's tiles onto core 0 (forward), or
 * their gradients from core 0 back to the tiles (backward). */
static int gather(dr_backend *b, dr_replica_bufs *const *cores, const dr_spatial_plan *p, uint32_t n, bool grad,
                  uint64_t *bytes, dr_omp_links link, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    for (uint32_t k = grad ? 1 : 0; k <= p->lp; k++) {
        uint32_t H, W, C;
        size_t cells;
        float *maps[DR_MAX_TILES], *all;
        int rc;
        if (!p->gathered[k]) continue;
        dr_model_map(m, k, &H, &W, &C);
        cells = (size_t)n * H * W * C;
        if (!(all = host_maps(p->tiles, cells, maps)))
            return dr_fail(err, DR_ENOMEM, "opencl backend: no host memory for a gather of %zu floats", cells);
        rc = maps_io(b, cores, p->tiles, k, grad, cells, maps, false, err);
        for (uint32_t c = 1; rc == DR_OK && c < p->tiles; c++) {
            uint32_t from = grad ? 0 : c, to = grad ? c : 0;
            uint64_t got = dr_omp_halo_copy(H, W, C, n, maps[from], maps[to], p->tile[c].rect[k]);
            if (bytes) *bytes += got;
            if (link && got > link[from][to]) link[from][to] = got;
        }
        if (rc == DR_OK) rc = maps_io(b, cores, p->tiles, k, grad, cells, maps, true, err);
        free(all);
        if (rc) return rc;
    }
    return DR_OK;
}

/* The halos of map k (grad: its gradient) that layer l's tiles read. */
static int halo(dr_backend *b, dr_replica_bufs *const *cores, const dr_spatial_plan *p, uint32_t l, uint32_t k,
                uint32_t n, bool grad, uint64_t *bytes, dr_omp_links *link, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    uint32_t need[DR_MAX_TILES][4], H, W, C;
    float *maps[DR_MAX_TILES], *all;
    size_t cells;
    int rc;
    dr_model_map(m, k, &H, &W, &C);
    cells = (size_t)n * H * W * C;
    if (!(all = host_maps(p->tiles, cells, maps)))
        return dr_fail(err, DR_ENOMEM, "opencl backend: no host memory for a halo exchange of %zu floats", cells);
    dr_omp_halo_need(p, m, l, grad, need);
    if (!(rc = maps_io(b, cores, p->tiles, k, grad, cells, maps, false, err))) {
        dr_omp_halo_exchange(p, m, k, n, maps, (const uint32_t (*)[4])need, bytes, link);
        rc = maps_io(b, cores, p->tiles, k, grad, cells, maps, true, err);
    }
    free(all);
    return rc;
}

int dr_cl_spatial_exchange(dr_backend *b, dr_replica_bufs *const *cores, const dr_spatial_plan *p, uint32_t l,
                           bool grad, uint64_t *halo_bytes, uint64_t *gather_bytes, uint64_t *link, dr_err *err)
{
    dr_omp_links *ln = (dr_omp_links *)link;   /* rounds: the gather or scatter, the two passes */
    const dr_dense *d = &b->m.layer[l];
    uint32_t k = d->src ? d->src : l, n;
    int rc;
    if (l >= b->m.nlayers) return dr_fail(err, DR_EUSAGE, "opencl backend: spatial_exchange at layer %u", l);
    for (uint32_t c = 0; c < p->tiles; c++)
        if (!cores[c] || !dr_cl_graph_tiled(cores[c], &p->tile[c]))
            return dr_fail(err, DR_ESTATE, "opencl backend: spatial_exchange: core %u holds no tile of the plan", c);
    n = dr_cl_graph_rows(cores[0]);
    if (n == 0) return DR_OK;
    if (!grad) {
        if (l == p->lp && (rc = gather(b, cores, p, n, false, gather_bytes, ln ? ln[0] : NULL, err))) return rc;
        if (l >= p->lp || (d->kind != DR_LAYER_CONV2D && d->kind != DR_LAYER_MAX_POOL2D)) return DR_OK;
        return halo(b, cores, p, l, k, n, false, halo_bytes, ln ? ln + 1 : NULL, err);
    }
    if (l + 1 == p->lp && (rc = gather(b, cores, p, n, true, gather_bytes, ln ? ln[0] : NULL, err))) return rc;
    if (l >= p->lp || d->kind != DR_LAYER_CONV2D || k == 0) return DR_OK;
    /* each core's output gradient masked by its ReLU before it travels (the
     * backward masks it again: the same values) */
    for (uint32_t c = 0; c < p->tiles; c++)
        if ((rc = dr_cl_unactivate(b, cores[c], l, err))) return rc;
    return halo(b, cores, p, l, l + 1, n, true, halo_bytes, ln ? ln + 1 : NULL, err);
}
