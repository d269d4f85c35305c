/* distref devices — what the collectives share, whatever their form: the
 * form a call names (distref/form.h; the algorithms need its merges), the
 * chunk of a ring, byte accounting and a ring's chained merges. Used by the
 * threads comm (comm_threads.c), the torus (comm_torus.c) and the MPI comm
 * (comm_mpi.c).
 */
#include "devices/comm/comm_internal.h"

#include <string.h>

#include "devices/seams.h"

int dr_ct_form(dr_form_id id, const char *comm, const char *what, const dr_form **out, dr_err *err)
{
    const dr_form *f = dr_form_of(id);
    *out = f;
    if (!f) return dr_fail(err, DR_EUSAGE, "comm %s %s: unknown number form %d", comm, what, (int)id);
    if (!f->merge)
        return dr_fail(err, DR_EUNSUPPORTED, "comm %s %s: form %s is not a merge of partial sums; only the MPI "
                       "comm's all_reduce offers it", comm, what, f->name);
    return DR_OK;
}

void dr_ct_chunk(size_t len, uint32_t n, uint32_t c, size_t *lo, size_t *hi)
{
    *lo = (size_t)c * len / n;
    *hi = ((size_t)c + 1) * len / n;
    DR_SEAM_CHUNK_END(lo, hi, c, n);
}

void dr_ct_count(dr_strategy *s, uint32_t from, uint32_t to, size_t elems, size_t width)
{
    if (!s || from == to || elems == 0) return;
    s->device[from].bytes_out += (uint64_t)elems * width;
    s->device[to].bytes_in += (uint64_t)elems * width;
}

void dr_ct_ring_chain(const dr_form *f, char *const *ring, uint32_t n, uint32_t c, size_t at, size_t k)
{
    /* Reduce-scatter step s: member c+s sends what it holds of chunk c on;
     * the receiver's own term goes after the sum so far. */
    for (uint32_t s = 0; s + 1 < n; s++) {
        uint32_t j = (c + s) % n;
        f->merge_after(dr_ct_at(f, ring[(j + 1) % n], at), dr_ct_at(f, ring[j], at), k);
    }
    /* All-gather step s: member c-1+s passes the total on. */
    for (uint32_t s = 0; s + 1 < n; s++) {
        uint32_t j = (c + s + n - 1) % n;
        memcpy(dr_ct_at(f, ring[(j + 1) % n], at), dr_ct_at(f, ring[j], at), k * f->size);
    }
}
