/* distref devices/comm/ — the collectives' family: the algorithms written
 * once over the number form (distref/form.h) and the threads comm that runs
 * them (comm_threads.c; comm_elem.c the ring pieces the torus and the MPI
 * comm share; comm_torus.c). This header: their internals, and the MPI
 * comm's geometry. Not a public header: only devices/comm/ and
 * devices/mpi/ include it. */
#ifndef DISTREF_DEVICES_COMM_INTERNAL_H
#define DISTREF_DEVICES_COMM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "distref/cacc.h"
#include "distref/comm.h"
#include "distref/form.h"

/* Elements per unit of parallel work: a block of one replica's accumulators
 * is 43 KB, so a ring's chain over a block stays in cache. */
#define DR_CT_BLOCK 256
/* The same for floats (16 KB of one replica's floats per block). */
#define DR_CT_BLOCK_F32 4096

/* The element a collective moves is a number form (distref/form.h): the
 * algorithms below are written once over its traits. Elements per unit of
 * parallel work, and the fewest elements a pass spreads over threads (a
 * pass over 2^18 floats is far cheaper than a busy team's wake-up; one
 * block of accumulators already pays for it). Neither changes a bit: a
 * block runs the algorithm's whole data flow for its elements. */
#define DR_CT_PAR_F32 ((size_t)1 << 18)
static inline size_t dr_ct_block(const dr_form *f)
{
    return f->exact ? DR_CT_BLOCK : DR_CT_BLOCK_F32;
}

static inline size_t dr_ct_par_min(const dr_form *f)
{
    return f->exact ? DR_CT_BLOCK + 1 : DR_CT_PAR_F32;
}

/* Element i of an array of f's elements. */
static inline char *dr_ct_at(const dr_form *f, void *base, size_t i)
{
    return (char *)base + i * f->size;
}

/* What a rank publishes on entering a collective, for the others to read
 * between the entry barrier and the last one. */
typedef struct ct_slot {
    char  *local[DR_MAX_DEVICES];   /* the caller's local_replicas arrays */
    const dr_form *form;            /* their element */
    size_t   n;
    char    *dst;           /* reduce_to: rank 0's destination */
    uint32_t dst_device;
    int      rc;            /* DR_OK, or why this rank refused the call */
    dr_err   err;
} ct_slot;

/* Shared by every endpoint of one open(). */
typedef struct ct_hub {
    dr_comm_config    cfg;           /* cfg.tensor_len points at tensor_len below */
    size_t           *tensor_len;    /* the hub's own copy */
    pthread_barrier_t bar;           /* num_ranks > 1 only */
    ct_slot          *slot;          /* [num_ranks] */
    struct dr_comm   *ep;            /* [num_ranks] */
    atomic_uint       open_eps;      /* endpoints not yet closed */
} ct_hub;

struct dr_comm {
    ct_hub  *hub;
    uint32_t rank;
};

/* Chunk c of a ring of n members over len elements: [c*len/n, (c+1)*len/n). */
void dr_ct_chunk(size_t len, uint32_t n, uint32_t c, size_t *lo, size_t *hi);

/* `width` bytes per element (the form's wire bytes) from device
 * index `from` to `to` of s (bytes_out on the sender, bytes_in on the
 * receiver); nothing when they are equal or s is NULL. Callers make sure one
 * thread counts at a time. */
void dr_ct_count(dr_strategy *s, uint32_t from, uint32_t to, size_t elems, size_t width);

/* The bytes of one pack of len elements reduced within rank 0 by cfg.alg,
 * and of an all-reduce of n elements across ranks (gather, ring, back). */
void dr_ct_count_local_pack(const ct_hub *h, size_t len, uint32_t pack, size_t width);
void dr_ct_count_ranks(const ct_hub *h, size_t n, size_t width);

/* The device index of local replica r of rank w. */
uint32_t dr_ct_dev_of(const ct_hub *h, uint32_t w, uint32_t r);
/* Packs: how many, and pack p's length (the packs before it taking [0, off) of n). */
uint32_t dr_ct_num_packs(const ct_hub *h);
size_t   dr_ct_pack_len(const ct_hub *h, uint32_t p, size_t n, size_t off);
/* HierarchicalCopyAllReduce's roots of the two halves for a pack. */
void     dr_ct_roots(uint32_t R, uint32_t pack, uint32_t *r0, uint32_t *r1);
/* n elements in tensors summing to n (when tensors are given). */
int      dr_ct_check_lengths(const ct_hub *h, const char *what, size_t n, dr_err *err);

/* The hub: a barrier over the ranks (nothing for one rank); this rank's
 * slot filled on entry; the agreement after every rank published: all go
 * on or all fail alike. */
int      dr_ct_sync(ct_hub *h, dr_err *err);
ct_slot *dr_ct_publish(dr_comm *c, const dr_form *form, void *const *local, size_t n, void *dst,
                       uint32_t dst_device);
int      dr_ct_agree(dr_comm *c, const char *what, dr_err *err);
/* reduce_to's destination on rank 0: an array when n > 0, a device of the
 * strategy. */
int      dr_ct_check_dst(const ct_hub *h, uint32_t rank, size_t n, const void *dst, uint32_t dst_device,
                         const char *what, dr_err *err);

/* The form of a collective the threads algorithms run (every form with a
 * merge), or DR_EUSAGE / DR_EUNSUPPORTED naming the call. */
int dr_ct_form(dr_form_id id, const char *comm, const char *what, const dr_form **out, dr_err *err);

/* Any element's arrays as the generic code takes them: pointers to char. */
#define DR_CT_MAX_LOCAL DR_MAX_DEVICES

/* The ring's whole data flow for elements [at, at+k) of chunk c, ring[j]
 * being member j's array: the reduce-scatter carries the chunk from member c
 * around to member c-1, each member merging its own term after what it
 * receives (merge_after: floats give ((x_c + x_{c+1}) + ...) + x_{c-1}),
 * the all-gather copies the total from c-1 around to c-2. Exactly the
 * merges and copies of the step-by-step ring, for these elements. */
void dr_ct_ring_chain(const dr_form *f, char *const *ring, uint32_t n, uint32_t c, size_t at, size_t k);

/* DR_ESTATE once the TPU system under tpu strategy s was initialized again. */
int  dr_ct_tpu_live(const dr_strategy *s, dr_err *err);

/* The tpu strategy's torus all-reduce for the one rank of hub h
 * (devices/comm/comm_torus.c); the arguments as all_reduce_ranges's. Each ring
 * runs RING's order (floats: line by line, dimension after dimension). */
int  dr_ct_torus(ct_hub *h, const dr_form *f, void *const *local, const size_t *ranges, uint32_t nranges,
                 uint32_t l, double *seconds, dr_err *err);

#endif
