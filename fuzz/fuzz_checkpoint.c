/* distref fuzzing — ckpt.bin (core/checkpoint.c) and the resume it drives.
 *
 * Feeds: the input as <scratch>/ckpt.bin to dr_checkpoint_load; then, unless
 * its last 32 bytes already are the SHA-256 of the rest, the same bytes with
 * that digest put in (so the fuzzer also reaches everything the checksum
 * guards). A loaded checkpoint then goes where a resume sends it
 * (harness/train_loop.c): dr_checkpoint_check against its own fields (must pass)
 * and against a mismatched run (must not), and dr_dist_iter_seek to its
 * (epoch, position, step) on iterators over its `examples` with its global
 * batch (single stream, 3 replicas with drop_remainder, 2 workers unsharded),
 * followed by a few batches. Sizes are capped (4096 examples, batch 4096)
 * to keep executions fast.
 * Checks: no crash, UB or leak; any error return is fine. Loaded arrays
 * must hold nparams and nslots * nparams floats; batches must hold ids < n
 * with nondecreasing replica offsets that end at the batch's count.
 */
#include "distref/checkpoint.h"
#include "distref/input.h"
#include "distref/sha256.h"
#include "fuzz/fuzz_common.h"

static volatile uint32_t sink;     /* volatile: the reads below must happen */

static void check_batch(const dr_dist_batch *b, uint32_t n)
{
    if (b->offset[0] != 0 || b->offset[b->num_replicas] != b->count)
        __builtin_trap();
    for (uint32_t r = 0; r < b->num_replicas; r++)
        if (b->offset[r] > b->offset[r + 1])
            __builtin_trap();
    for (uint32_t i = 0; i < b->count; i++)
        if (b->ids[i] >= n)
            __builtin_trap();
}

/* A resumed iterator: seek, then a few steps and the next epoch's first. */
static void resume_input(const dr_checkpoint *c, uint32_t R, uint32_t W, bool drop)
{
    dr_dist_iter it;
    dr_dist_batch b;
    dr_err err = { 0, "" };
    if (dr_dist_iter_init(&it, c->examples, c->global_batch, R, c->seed, true, drop, &err) != DR_OK)
        return;
    if ((W <= 1 || dr_dist_iter_unsharded(&it, W, &err) == DR_OK) &&
        dr_dist_iter_seek(&it, c->epoch, c->position, c->step, &err) == DR_OK) {
        for (int i = 0; i < 3 && dr_dist_iter_next(&it, &b); i++)
            check_batch(&b, c->examples);
        dr_dist_iter_next_epoch(&it);
        if (dr_dist_iter_next(&it, &b))
            check_batch(&b, c->examples);
    }
    dr_dist_iter_free(&it);
}

static void load(const char *dir, const uint8_t *data, size_t size)
{
    dr_checkpoint c;
    bool found = false;
    dr_err err = { 0, "" };
    if (fz_write(dir, "ckpt.bin", data, size) != 0)
        return;
    if (dr_checkpoint_load(dir, &c, &found, &err) != DR_OK || !found) {
        if (c.params != NULL || c.slots != NULL)
            __builtin_trap();                   /* "nothing of it is loaded" */
        return;
    }
    /* the arrays are as long as the header says */
    for (size_t i = 0; i < c.nparams; i++)
        sink += (uint32_t)(c.params[i] == 0.0f);
    for (size_t i = 0; i < (size_t)c.nparams * c.nslots; i++)
        sink += (uint32_t)(c.slots[i] == 0.0f);
    if (dr_checkpoint_check(&c, dir, c.experiment, c.nparams, (int)c.nslots, (int)c.optimizer, c.seed,
                            c.global_batch, c.examples, &err) != DR_OK)
        __builtin_trap();
    if (dr_checkpoint_check(&c, dir, "mlp_synthetic", (size_t)c.nparams + 1, 3, 9, ~c.seed,
                            c.global_batch + 1, c.examples + 1, &err) == DR_OK)
        __builtin_trap();
    if (c.examples >= 1 && c.examples <= 4096 && c.global_batch >= 1 && c.global_batch <= 4096) {
        resume_input(&c, 1, 1, false);
        resume_input(&c, 3, 1, true);
        resume_input(&c, 4, 2, false);
    }
    dr_checkpoint_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fz_dir("checkpoint");
    if (dir == NULL)
        return 0;
    load(dir, data, size);
    if (size < 32)
        return 0;
    uint8_t *fixed = malloc(size);
    if (fixed == NULL)
        return 0;
    memcpy(fixed, data, size);
    dr_sha256_ctx h;
    dr_sha256_init(&h);
    dr_sha256_update(&h, fixed, size - 32);
    dr_sha256_final(&h, fixed + size - 32);
    if (memcmp(fixed + size - 32, data + size - 32, 32) != 0)
        load(dir, fixed, size);
    free(fixed);
    return 0;
}
