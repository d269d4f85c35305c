/* distref reference — spatial partitioning's traffic between the cores of
 * a replica (internal to ref/; docs/MODELS.md "Spatial partitioning"):
 * before a layer that runs on the tiles, each core receives the halo its
 * windows read across a cut from the neighbouring cores (rows, then
 * columns, which carry the corners); where the tiles end, the maps the rest
 * of the model reads are gathered onto core 0. The backward pass sends the
 * other way: a Conv2D's output gradient halo before its input gradient, and
 * the gathered maps' gradients back to their tiles. Every transfer is an
 * explicit copy between the cores' devices (dr_device_copy), counted. */
#ifndef DISTREF_REF_HALO_H
#define DISTREF_REF_HALO_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_ENGINE) || defined(DR_LAYER_HARNESS)
#error "ref/halo.h is internal to ref/ (docs/ARCHITECTURE.md)"
#endif

#include "ref/graph.h"
#include "distref/device.h"
#include "distref/tpu.h"

typedef struct dr_halo {
    const dr_model_spec   *m;
    const dr_spatial_plan *plan;
    dr_device *dev[DR_MAX_DEVICES];   /* entry e's core */
    int        core[DR_MAX_DEVICES];  /* its index on the slice (the link model's) */
    const dr_tpu_topology *topology;  /* NULL: no emulated time */
    float     *x[DR_MAX_DEVICES];     /* entry e's input: its tile and the halo it receives */
    float     *send, *recv;           /* one transfer, on the sender and on the receiver */
    uint64_t   halo_bytes[DR_MAX_TILES];   /* this step: received by replica 0's logical cores */
    uint64_t   gather_bytes;               /* this step: replica 0's gather and its gradient's scatter */
    double     seconds, slowest;           /* this step's emulated transfer time: every core of
                                            * every replica sends at once, so each exchange pass
                                            * (and each gather) takes its slowest transfer */
} dr_halo;

/* Before layer l's forward: the gather onto core 0 at the plan's lp; a
 * windowed layer's input halo before it. */
void dr_halo_before_forward(dr_halo *h, uint32_t l, dr_graph_replica *rp, uint32_t E);
/* Before layer l's backward: the gathered maps' gradients back to their
 * tiles (l = lp - 1); a tiled Conv2D's output-gradient halo (after each core
 * masked its own with the ReLU). */
void dr_halo_before_backward(dr_halo *h, uint32_t l, dr_graph_replica *rp, uint32_t E);

#endif
