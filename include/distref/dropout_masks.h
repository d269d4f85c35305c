/* distref core — a file of Dropout masks (`--dropout_masks=FILE`): the masks
 * another framework drew (scripts/tf_golden.py writes TensorFlow's), which
 * the reference and the engine (openmp, mpi, opencl) apply instead of drawing their own
 * from the counter-based RNG (docs/MODELS.md "Dropout masks from a file").
 *
 * Format, version 1, every integer a little-endian u32:
 *   offset 0   magic "DRMASKS\0" (8 bytes)
 *          8   version (1)
 *         12   layers L: the model's Dropout layers, in layer order (1..DR_MAX_LAYERS)
 *         16   steps S (>= 1): the first S training steps, from step 0
 *         20   rows B (>= 1): the global batch size G (a short final batch
 *              uses its first rows; the others are read by nobody)
 *         24   units[L]: each Dropout layer's units (>= 1)
 *   then S x L blocks in that order (step-major), block (s, k) B x units[k]
 *   bytes, row-major: byte (r, u) is 1 when unit u of row r of step s's
 *   global batch is kept, 0 when dropped (anything else is refused).
 * The file is exactly that long. A row is the example's place in the step's
 * global batch (the order TensorFlow's batch has, MirroredStrategy's
 * replicas holding consecutive slices of it), so every replica count reads
 * the same mask for an example; over several workers DATA sharding cuts the
 * same global batch (each replica its slice's rows: dr_shard_data_row), and
 * the policies that give each worker its own stream are refused
 * (harness/train_loop.c).
 */
#ifndef DISTREF_DROPOUT_MASKS_H
#define DISTREF_DROPOUT_MASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/model.h"

#define DR_DROPOUT_MASKS_MAGIC   "DRMASKS"   /* with its NUL: 8 bytes */
#define DR_DROPOUT_MASKS_VERSION 1u
#define DR_DROPOUT_MASKS_HEADER  24u         /* bytes before units[] */
/* The largest file a reader accepts: 1 GiB of masks. */
#define DR_DROPOUT_MASKS_MAX_BYTES (1ull << 30)

typedef struct dr_dropout_masks {
    uint32_t layers, steps, rows;
    uint32_t units[DR_MAX_LAYERS];
    uint64_t layer_off[DR_MAX_LAYERS];   /* block (s, k) starts at s * step_bytes + layer_off[k] */
    uint64_t step_bytes;
    int32_t  slot[DR_MAX_LAYERS];        /* model layer l -> k (dr_dropout_masks_check); -1: none */
    uint8_t *keep;                       /* steps x step_bytes, 0 or 1; malloc'd */
} dr_dropout_masks;

/* Parses a whole file held in buf[0..n); name (the file's path, or the flag
 * and path) goes into every message, with the field that is wrong
 * (DR_EFORMAT). On success out->keep is the caller's (dr_dropout_masks_free). */
int dr_dropout_masks_parse(const uint8_t *buf, size_t n, const char *name, dr_dropout_masks *out, dr_err *err);

/* dr_dropout_masks_parse of the file at path; messages name
 * "--dropout_masks=PATH". A missing, unreadable or malformed file is
 * DR_EUSAGE (a flag's value: exit 2). */
int dr_dropout_masks_load(const char *path, dr_dropout_masks *out, dr_err *err);

/* Whether the masks fit a run of model m at global batch G over `steps`
 * training steps (from step 0): as many layers as m's Dropout layers, each
 * with its units, rows == G, at least `steps` steps. Fills mk->slot.
 * DR_EUSAGE naming the flag, the file, the field and what the run needs. */
int dr_dropout_masks_check(dr_dropout_masks *mk, const dr_model_spec *m, uint32_t G, uint64_t steps,
                           const char *path, dr_err *err);

/* Whether unit u of row `row` of step `step`'s global batch is kept at model
 * layer l (a Dropout layer; dr_dropout_masks_check first). step is the
 * variants' step number (the RNG's key): 1 for the first, the file's step 0. */
bool dr_dropout_masks_keep(const dr_dropout_masks *mk, uint64_t step, uint32_t l, uint32_t row, uint32_t u);

void dr_dropout_masks_free(dr_dropout_masks *mk);

#endif
