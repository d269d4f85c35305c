/* distref engine — the split of a global batch over replicas.
 *
 * TensorFlow (batch_sizes_for_worker, one worker): replica r nominally takes
 * floor(G/R) + (r < G mod R) examples; the examples of a step are consumed
 * as a stream, so a short final batch fills replicas in order. Written here
 * from the rule, not from core/input.c, so that the batch-splitting suite
 * compares two implementations.
 */
#include "distref/engine.h"
#include "strategies/engine_internal.h"

#include "strategies/seams.h"

void dr_engine_split(uint32_t count, uint32_t G, uint32_t R, uint32_t *off)
{
    uint32_t left = count;
    off[0] = 0;
    for (uint32_t r = 0; r < R; r++) {
        uint32_t nominal = G / R + (r < G % R ? 1u : 0u);
        uint32_t take = nominal < left ? nominal : left;
        off[r + 1] = off[r] + take;
        left -= take;
    }
}

void dr_engine_shard_data(const uint32_t *ids, uint32_t count, uint32_t W, uint32_t R,
                          uint32_t *out, uint32_t *off, uint32_t *row0)
{
    uint32_t N = W * R, slice = (count + N - 1) / N, pos = 0;
    for (uint32_t w = 0; w < W; w++)
        for (uint32_t r = 0; r < R; r++) {
            uint32_t j = r * W + w;                      /* the slice this replica takes */
            uint32_t lo = j * slice < count ? j * slice : count;
            uint32_t hi = lo + slice < count ? lo + slice : count;
            uint32_t j0 = DR_SEAM_DATA_ROW0_SLICE(j, w);
            off[w * R + r] = pos;
            row0[w * R + r] = j0 * slice < count ? j0 * slice : count;
            for (uint32_t i = lo; i < hi; i++) out[pos++] = ids[i];
        }
    off[N] = pos;
}
