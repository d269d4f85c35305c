/* distref devices — what the exact collectives share: the two exact
 * elements as descriptors (dr_acc and dr_cacc: size, wire bytes, merge,
 * serialize, validate on receipt), the chunk of a ring, byte accounting and
 * a ring's chained merges. Used by the threads comm (comm_threads.c), the
 * torus (comm_torus.c) and the MPI comm (comm_mpi.c).
 */
#include "devices/comm/comm_internal.h"
#include "distref/cacc.h"

#include <string.h>

/* ---- the two exact elements ---------------------------------------------- */

static void merge_acc(void *dst, const void *src, size_t k)
{
    for (size_t i = 0; i < k; i++) dr_acc_merge((dr_acc *)dst + i, (const dr_acc *)src + i);
}

static void ser_acc(const void *src, size_t k, uint8_t *out)
{
    for (size_t i = 0; i < k; i++) dr_acc_serialize((const dr_acc *)src + i, out + i * DR_ACC_BYTES);
}

static bool deser_acc(void *dst, size_t k, const uint8_t *in)
{
    for (size_t i = 0; i < k; i++)
        if (!dr_acc_deserialize((dr_acc *)dst + i, in + i * DR_ACC_BYTES)) return false;
    return true;
}

static void merge_cacc(void *dst, const void *src, size_t k)
{
    for (size_t i = 0; i < k; i++) {
#if defined(DR_MUTANT_CACC_MERGE_FLAG)
        uint32_t had = ((dr_cacc *)dst)[i].flags & DR_CACC_F_OVERFLOW;
        dr_cacc_merge((dr_cacc *)dst + i, (const dr_cacc *)src + i);
        ((dr_cacc *)dst)[i].flags = (((dr_cacc *)dst)[i].flags & ~DR_CACC_F_OVERFLOW) | had;   /* mutant: the sender's overflow is lost */
#else
        dr_cacc_merge((dr_cacc *)dst + i, (const dr_cacc *)src + i);
#endif
    }
}

static void ser_cacc(const void *src, size_t k, uint8_t *out)
{
    for (size_t i = 0; i < k; i++) dr_cacc_serialize((const dr_cacc *)src + i, out + i * DR_CACC_BYTES);
}

static bool deser_cacc(void *dst, size_t k, const uint8_t *in)
{
    for (size_t i = 0; i < k; i++)
        if (!dr_cacc_deserialize((dr_cacc *)dst + i, in + i * DR_CACC_BYTES)) return false;
    return true;
}

const ct_elem dr_ct_elem_acc = { sizeof(dr_acc), DR_ACC_BYTES, merge_acc, ser_acc, deser_acc };
const ct_elem dr_ct_elem_cacc = { sizeof(dr_cacc), DR_CACC_BYTES, merge_cacc, ser_cacc, deser_cacc };

/* ---- pieces shared with comm_torus.c ------------------------------------ */

void dr_ct_chunk(size_t len, uint32_t n, uint32_t c, size_t *lo, size_t *hi)
{
    *lo = (size_t)c * len / n;
    *hi = ((size_t)c + 1) * len / n;
#if defined(DR_MUTANT_CHUNK_OFF_BY_ONE)
    if (c + 1 < n && *hi > *lo) (*hi)--;   /* mutant: chunk ends one short, its last element never reduced */
#endif
}

void dr_ct_count(dr_strategy *s, uint32_t from, uint32_t to, size_t elems, size_t width)
{
    if (!s || from == to || elems == 0) return;
    s->device[from].bytes_out += (uint64_t)elems * width;
    s->device[to].bytes_in += (uint64_t)elems * width;
}

void dr_ct_merge(dr_acc *dst, const dr_acc *src, size_t k)
{
    for (size_t i = 0; i < k; i++) dr_acc_merge(&dst[i], &src[i]);
}

void dr_ct_ring_chain_el(const ct_elem *el, char *const *ring, uint32_t n, uint32_t c, size_t at, size_t k)
{
    /* Reduce-scatter step s: member c+s sends what it holds of chunk c on. */
    for (uint32_t s = 0; s + 1 < n; s++) {
        uint32_t j = (c + s) % n;
        el->merge(dr_ct_at(el, ring[(j + 1) % n], at), dr_ct_at(el, ring[j], at), k);
    }
    /* All-gather step s: member c-1+s passes the total on. */
    for (uint32_t s = 0; s + 1 < n; s++) {
        uint32_t j = (c + s + n - 1) % n;
        memcpy(dr_ct_at(el, ring[(j + 1) % n], at), dr_ct_at(el, ring[j], at), k * el->size);
    }
}

void dr_ct_ring_chain(dr_acc *const *ring, uint32_t n, uint32_t c, size_t at, size_t k)
{
    char *r[DR_CT_MAX_LOCAL];
    for (uint32_t j = 0; j < n && j < DR_CT_MAX_LOCAL; j++) r[j] = (char *)ring[j];
    dr_ct_ring_chain_el(&dr_ct_elem_acc, r, n, c, at, k);
}
