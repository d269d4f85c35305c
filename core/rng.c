/* distref — Philox4x32-10 counter-based RNG: see include/distref/rng.h.
 *
 * Position of a draw (seed, stream, index):
 *   key     = {seed lo32, seed hi32}
 *   counter = {block lo32, block hi32, stream lo32, stream hi32}, block = index / 4
 *   result  = word (index % 4) of Philox4x32-10(counter, key).
 * Since index < 2^64, block < 2^62: blocks with bit 63 set are never used by
 * ordinary draws, and dr_rng_below uses them for its rejection sub-streams.
 */
#include "distref/rng.h"

/* Random123's constants for Philox4x32. */
#define PHILOX_M0 0xD2511F53u   /* round multipliers */
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u   /* Weyl key increments: golden ratio, sqrt(3)-1 */
#define PHILOX_W1 0xBB67AE85u
#define PHILOX_ROUNDS 10

static void philox_round(uint32_t x[4], const uint32_t k[2])
{
    uint64_t p0 = (uint64_t)PHILOX_M0 * x[0];
    uint64_t p1 = (uint64_t)PHILOX_M1 * x[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t x1 = x[1], x3 = x[3];
    x[0] = hi1 ^ x1 ^ k[0];
    x[1] = lo1;
    x[2] = hi0 ^ x3 ^ k[1];
    x[3] = lo0;
}

void dr_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t x[4] = { ctr[0], ctr[1], ctr[2], ctr[3] };
    uint32_t k[2] = { key[0], key[1] };
    for (int r = 0; r < PHILOX_ROUNDS; r++) {
        if (r > 0) {            /* the key is bumped between rounds, not before the first */
            k[0] += PHILOX_W0;
            k[1] += PHILOX_W1;
        }
        philox_round(x, k);
    }
    for (int i = 0; i < 4; i++)
        out[i] = x[i];
}

/* The whole 128-bit block at position (seed, stream, block). */
static void rng_block(uint64_t seed, uint64_t stream, uint64_t block, uint32_t out[4])
{
    const uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
    const uint32_t ctr[4] = { (uint32_t)block, (uint32_t)(block >> 32),
                              (uint32_t)stream, (uint32_t)(stream >> 32) };
    dr_philox4x32_10(ctr, key, out);
}

uint32_t dr_rng_u32(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint32_t out[4];
    rng_block(seed, stream, index / 4, out);
    return out[index % 4];
}

float dr_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    /* 24 bits fit a float's significand exactly: no rounding, never 1.0f. */
    return (float)(dr_rng_u32(seed, stream, index) >> 8) * 0x1p-24f;
}

/* The seed of the rejection sub-stream of draw (seed, stream, index): two
 * words of block 2^63 | (index / 2), a block ordinary draws never touch
 * (they stay below 2^62). Even indices take words 0-1, odd ones words 2-3,
 * so every index gets its own 64-bit seed. */
static uint64_t rejection_seed(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint32_t out[4];
    rng_block(seed, stream, (UINT64_C(1) << 63) | (index >> 1), out);
    unsigned w = (unsigned)(index & 1) * 2;
    return (uint64_t)out[w] | ((uint64_t)out[w + 1] << 32);
}

/* Lemire, "Fast random integer generation in an interval" (2019). The first
 * draw is dr_rng_u32(seed, stream, index). Retry r = 0, 1, 2, ... after a
 * rejection is dr_rng_u32(rejection_seed(seed, stream, index), stream, r):
 * its own stream of fresh words, so the result stays a pure function of
 * (seed, stream, index, bound) and no retry reuses another draw's word. */
uint32_t dr_rng_below(uint64_t seed, uint64_t stream, uint64_t index, uint32_t bound)
{
    if (bound <= 1)
        return 0;               /* [0, 1) holds only 0; bound 0 is a caller bug */
    uint64_t m = (uint64_t)dr_rng_u32(seed, stream, index) * bound;
    uint32_t low = (uint32_t)m;
    if (low < bound) {
        /* 2^32 mod bound: products whose low word falls below it would
         * make small results slightly more likely, so they are redrawn. */
        uint32_t threshold = (uint32_t)(-bound) % bound;
        uint64_t sub_seed = 0;
        uint64_t retry = 0;
        if (low < threshold)
            sub_seed = rejection_seed(seed, stream, index);
        while (low < threshold) {
            m = (uint64_t)dr_rng_u32(sub_seed, stream, retry++) * bound;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* Durstenfeld's descending Fisher–Yates: position i (from n-1 down to 1)
 * swaps with j uniform in [0, i]. The draw for position i is at index i,
 * so the permutation is a pure function of (seed, stream, n). */
void dr_permutation(uint32_t *perm, uint32_t n, uint64_t seed, uint64_t stream)
{
    for (uint32_t i = 0; i < n; i++)
        perm[i] = i;
    for (uint32_t i = n; i-- > 1;) {
        uint32_t j = dr_rng_below(seed, stream, i, i + 1);
        uint32_t held = perm[i];
        perm[i] = perm[j];
        perm[j] = held;
    }
}
