/* distref core — the number form of a gradient, as one traits table.
 *
 * A gradient crosses replicas in one of four forms. Every collective
 * (distref/comm.h) and the optimizer's read of the total (apply) take the
 * form as a parameter instead of existing once per form, as nccl-tests
 * makes the datatype a parameter of each collective:
 *
 *   DR_FORM_ACC        full exact accumulator (dr_acc, distref/exact.h):
 *                      merges are exact, so no order changes a bit;
 *                      DR_ACC_BYTES on the wire.
 *   DR_FORM_CACC       compact exact accumulator (dr_cacc, distref/cacc.h):
 *                      exact like ACC in 32 bytes, but an element whose sum
 *                      leaves its window comes out marked overflowed (the
 *                      caller then redoes the reduction with ACC).
 *   DR_FORM_F32        float (fast numerics): a sum is a chain of float
 *                      additions, so the ORDER is part of the result; each
 *                      algorithm documents its order (distref/comm.h) and
 *                      the generic algorithms keep it through the two
 *                      ordered merges and copy_first below.
 *   DR_FORM_F32_EXACT  floats in, floats out, each element the exact sum
 *                      of its terms rounded once. Not a merge of partial
 *                      floats (rounding a partial would break exactness),
 *                      so it has no merge here: only the MPI comm offers it,
 *                      by its own algorithm (devices/mpi/comm_mpi_f32x.c); the
 *                      threads comm answers DR_EUNSUPPORTED.
 *
 * What a generic algorithm asks of a form:
 *   size         bytes of one element in memory;
 *   wire         bytes one element counts when it moves between two
 *                devices, and what the MPI comm sends per element;
 *   copy_first   how a sum over terms x_a, x_b, ... begins: by copying x_a
 *                (floats: "dst = x_0 + x_1 + ..." overwrites dst) or by
 *                merging every term into what dst holds (exact: dst is
 *                zeroed or a running total, order free);
 *   merge        dst[i] = dst[i] (+) src[i]: dst holds the earlier terms;
 *   merge_after  dst[i] = src[i] (+) dst[i]: src holds the earlier terms
 *                (what a ring member receives is the sum so far, its own
 *                term goes on the right). Exact forms use merge for both;
 *                for floats the operands' order only matters for which NaN
 *                payload survives, and keeping it keeps every bit;
 *   serialize, deserialize   the wire form (deserialize validates and
 *                returns false on a corrupt element);
 *   round        out[i] = the element divided by d, rounded once to float
 *                (the gradient apply reads): round-to-nearest of the exact
 *                quotient for ACC and CACC, the float quotient x / (float)d
 *                for floats (d is 1 unless a planted fault says MEAN).
 */
#ifndef DISTREF_FORM_H
#define DISTREF_FORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum dr_form_id {
    DR_FORM_ACC = 0,
    DR_FORM_CACC,
    DR_FORM_F32,
    DR_FORM_F32_EXACT,
    DR_FORM_COUNT
} dr_form_id;

typedef struct dr_form {
    dr_form_id  id;
    const char *name;          /* "acc", "cacc", "f32", "f32_exact" */
    size_t      size, wire;
    bool        exact;         /* the sum does not depend on order */
    bool        copy_first;
    void (*merge)(void *dst, const void *src, size_t k);        /* NULL: no merge (F32_EXACT) */
    void (*merge_after)(void *dst, const void *src, size_t k);
    void (*serialize)(const void *src, size_t k, uint8_t *out);
    bool (*deserialize)(void *dst, size_t k, const uint8_t *in);
    void (*round)(const void *src, size_t k, uint32_t d, float *out);
} dr_form;

/* The table entry of a form; NULL for an id out of range. */
const dr_form *dr_form_of(dr_form_id id);

/* Element i of an array of form f. */
static inline void *dr_form_at(const dr_form *f, void *base, size_t i)
{
    return (char *)base + i * f->size;
}

#endif
