/* distref devices/cpu/ — the engine's halo exchange for the tpu strategy's
 * spatial partitioning (--input_partition_dims, docs/MODELS.md "Spatial
 * partitioning with halos"): the engine's own copy of the traffic, on the
 * plan of core/spatial_plan.c (it never calls ref/). Each of a replica's T
 * cores holds a buffer the size of the whole map, of which it writes only
 * its tile and what it receives: a halo it is not sent reads 0. The
 * backend's set_tile and spatial_exchange ops (openmp_spatial.c, declared
 * in openmp_graph.h) drive it from the engine's tpu step. */
#ifndef DISTREF_DEVICES_OPENMP_SPATIAL_H
#define DISTREF_DEVICES_OPENMP_SPATIAL_H

#include "distref/model.h"

#include <stdbool.h>
#include <stdint.h>

/* Rows [r[0], r[1]) x columns [r[2], r[3]) of an H x W x C map, every one of
 * n examples, from src to dst; the bytes moved (0 for an empty rectangle). */
uint64_t dr_omp_halo_copy(uint32_t H, uint32_t W, uint32_t C, uint32_t n, const float *src, float *dst,
                          const uint32_t r[4]);

/* The bytes of that rectangle (of a map of C channels, n examples): what a
 * copy of it moves, on the host or on a device. */
uint64_t dr_omp_rect_bytes(uint32_t C, uint32_t n, const uint32_t r[4]);

/* What each core c must hold of map k around layer l (rows, columns):
 * forward (grad false), the input pixels its output tile's windows read, of
 * the layer's input map; backward (grad true, a Conv2D), the output
 * gradients that read its input tile, of the layer's output map. */
void dr_omp_halo_need(const dr_spatial_plan *p, const dr_model_spec *m, uint32_t l, bool grad,
                      uint32_t need[][4]);

/* Every core of one replica receives the part of need[c] outside its tile of
 * map k: rows from the cores above and below first (over its own columns),
 * then columns from the cores beside it over all the needed rows (the
 * corners travel in two hops, as the reference's ref/halo.c). maps[c] is
 * core c's buffer; bytes[c] (if not NULL) adds what core c received;
 * link (if not NULL) keeps, per pass, the largest transfer from core a to
 * core b: link[pass][a][b] (the emulated time's rounds). */
typedef uint64_t dr_omp_links[DR_MAX_TILES][DR_MAX_TILES];
void dr_omp_halo_exchange(const dr_spatial_plan *p, const dr_model_spec *m, uint32_t k, uint32_t n,
                          float *const *maps, const uint32_t need[][4], uint64_t *bytes, dr_omp_links *link);

/* The exchange's moves, in its order, for a backend that copies them itself
 * (the OpenCL backend, on the device): rectangle r of map k from core
 * from's buffer to core to's, in pass 0 (rows) or 1 (columns). At most 4 a
 * core; the count is returned. dr_omp_halo_tally counts a move's bytes got
 * as dr_omp_halo_exchange does (bytes[to], link[pass][from][to]). */
typedef struct {
    uint32_t pass, from, to, r[4];
} dr_omp_halo_move;
#define DR_OMP_HALO_MOVES (4 * DR_MAX_TILES)
uint32_t dr_omp_halo_moves(const dr_spatial_plan *p, uint32_t k, const uint32_t need[][4], dr_omp_halo_move *mv);
void dr_omp_halo_tally(const dr_omp_halo_move *mv, uint64_t got, uint64_t *bytes, dr_omp_links *link);

#endif
