/* distref devices — the OpenCL backend's maps for the models beyond Dense:
 * a replica's buffers (dr_cl_graph, opencl_backend.h; devices/opencl/
 * opencl_graph.c's header says what each holds and launches the layer ops
 * on them), allocated at replica_open and released with the workspace, and
 * the spatial partitioning's accessors (set_tile, the pass's rows, whether
 * a workspace holds a tile).
 */
#include "devices/opencl/opencl_backend.h"

#include <stdlib.h>
#include <string.h>

void dr_cl_graph_free(dr_cl_graph *g)
{
    if (!g) return;
    for (uint32_t k = 0; k <= DR_MAX_LAYERS; k++) if (g->dmap[k]) clReleaseMemObject(g->dmap[k]);
    for (uint32_t l = 0; l < DR_MAX_LAYERS; l++) {
        if (g->aux[l]) clReleaseMemObject(g->aux[l]);
        if (g->chan[l]) clReleaseMemObject(g->chan[l]);
        if (g->win[l]) clReleaseMemObject(g->win[l]);
        if (g->keep[l]) clReleaseMemObject(g->keep[l]);
    }
    if (g->tmp) clReleaseMemObject(g->tmp);
    if (g->ids) clReleaseMemObject(g->ids);
    if (g->red) clReleaseMemObject(g->red);
    if (g->stat) clReleaseMemObject(g->stat);
    free(g);
}

int dr_cl_graph_open(dr_backend *b, dr_cl_scratch *s, uint32_t rows, size_t *bytes, dr_err *err)
{
    const dr_model_spec *m = &b->m;
    size_t cap = rows ? rows : 1;
    dr_cl_graph *g = calloc(1, sizeof *g);
    cl_int e = CL_SUCCESS;
    if (!g) return dr_fail(err, DR_ENOMEM, "opencl backend: out of host memory");
#define MK(field, n) do { if (e == CL_SUCCESS) { field = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, (n), NULL, &e); *bytes += (n); } } while (0)
    for (uint32_t l = 0; l < m->nlayers; l++) {
        const dr_dense *d = &m->layer[l];
        size_t cells = cap * d->out * sizeof(float);
        MK(g->dmap[l + 1], cells);
        if (d->kind == DR_LAYER_DROPOUT || d->kind == DR_LAYER_BATCH_NORM) MK(g->aux[l], cells);
        if (d->kind == DR_LAYER_DROPOUT) MK(g->keep[l], cap * d->out);
        if (d->kind == DR_LAYER_BATCH_NORM) MK(g->chan[l], 3 * (size_t)d->oc * sizeof(float));
        if (d->kind == DR_LAYER_MAX_POOL2D) MK(g->win[l], cap * d->out * sizeof(cl_uint));
    }
    MK(g->tmp, cap * b->widest * sizeof(float));
    MK(g->ids, cap * sizeof(cl_uint));
    MK(g->red, 2 * BN_MAX_C * sizeof(dr_acc));
    MK(g->stat, 2 * BN_MAX_C * sizeof(float));
#undef MK
    if (e != CL_SUCCESS) {
        dr_cl_graph_free(g);
        return dr_cl_fail(err, e, "allocating a replica's maps");
    }
    g->rows = rows;
    s->graph = g;
    return DR_OK;
}


uint32_t dr_cl_graph_rows(const dr_replica_bufs *rb)
{
    return ((const dr_cl_scratch *)rb->scratch)->graph->n;
}

bool dr_cl_graph_tiled(const dr_replica_bufs *rb, const dr_tile *tile)
{
    const dr_cl_scratch *s = rb ? rb->scratch : NULL;
    return s && s->graph && s->graph->tile == tile;
}

int dr_cl_set_tile(dr_backend *b, dr_replica_bufs *rb, const dr_tile *tile, uint32_t core, dr_err *err)
{
    dr_cl_scratch *s = rb ? rb->scratch : NULL;
    const cl_float zero = 0.0f;
    if (!s || !s->graph) return dr_fail(err, DR_ESTATE, "opencl backend: set_tile on a workspace without maps");
    s->graph->tile = tile;
    s->graph->core = core;
    /* a conv before the tiles end writes its tile alone (opencl_graph.c's
     * launch_rect): the rest of its maps, which nothing reads but whole-map
     * kernels (activation, BN, ReLU masks) pass through, starts as zeros,
     * never as what the allocation held */
    for (uint32_t l = 0; tile && l < tile->lp; l++) {
        size_t bytes = (size_t)(s->graph->rows ? s->graph->rows : 1) * b->m.layer[l].out * sizeof(float);
        cl_int e = clEnqueueFillBuffer(b->slot[s->slot].q, s->pre[l], &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
        if (e == CL_SUCCESS)
            e = clEnqueueFillBuffer(b->slot[s->slot].q, s->act[l], &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
        if (e != CL_SUCCESS) return dr_cl_fail(err, e, "set_tile (zeroing a core's maps)");
    }
    return DR_OK;
}
