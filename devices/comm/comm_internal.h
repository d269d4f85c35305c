/* distref devices — internals of the threads comm (devices/comm/comm_threads.c,
 * devices/comm/comm_f32.c: the float collectives, devices/comm/comm_torus.c). Not a public header: nothing outside devices/comm_*
 * includes it. */
#ifndef DISTREF_DEVICES_COMM_INTERNAL_H
#define DISTREF_DEVICES_COMM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "distref/cacc.h"
#include "distref/comm.h"

/* Elements per unit of parallel work: a block of one replica's accumulators
 * is 43 KB, so a ring's chain over a block stays in cache. */
#define DR_CT_BLOCK 256
/* The same for floats (16 KB of one replica's floats per block). */
#define DR_CT_BLOCK_F32 4096

/* The exact element a collective moves: a dr_acc or a compact dr_cacc
 * (distref/cacc.h). Merging either is exact, so every algorithm is the same
 * for both; only the bytes differ (wire: what one element counts when it
 * moves, and what the MPI comm sends). */
typedef struct ct_elem {
    size_t size, wire;
    void  (*merge)(void *dst, const void *src, size_t k);   /* dst[0..k) += src[0..k) */
    void  (*serialize)(const void *src, size_t k, uint8_t *out);
    bool  (*deserialize)(void *dst, size_t k, const uint8_t *in);   /* false: corrupt */
} ct_elem;

extern const ct_elem dr_ct_elem_acc, dr_ct_elem_cacc;

/* Element i of an array of el's elements. */
static inline char *dr_ct_at(const ct_elem *el, void *base, size_t i)
{
    return (char *)base + i * el->size;
}

/* What a rank publishes on entering a collective, for the others to read
 * between the entry barrier and the last one. */
typedef struct ct_slot {
    char  *local[DR_MAX_DEVICES];   /* the caller's local_replicas arrays (exact collectives) */
    const ct_elem *el;              /* their element */
    float  *const *flocal;  /* the same for a float collective (local is then unused) */
    size_t   n;
    char    *dst;           /* reduce_to: rank 0's destination */
    float   *fdst;          /* reduce_to_f32: rank 0's destination */
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

/* A caller's typed arrays as the generic code takes them (local_replicas
 * pointers copied into p, which has room for DR_MAX_DEVICES). */
static inline void **dr_ct_untyped_acc(const struct ct_hub *h, dr_acc *const *local, void **p)
{
    for (uint32_t r = 0; r < h->cfg.local_replicas && r < DR_MAX_DEVICES; r++) p[r] = local[r];
    return p;
}

static inline void **dr_ct_untyped_cacc(const struct ct_hub *h, dr_cacc *const *local, void **p)
{
    for (uint32_t r = 0; r < h->cfg.local_replicas && r < DR_MAX_DEVICES; r++) p[r] = local[r];
    return p;
}

static inline void **dr_ct_untyped_f32(const struct ct_hub *h, float *const *local, void **p)
{
    for (uint32_t r = 0; r < h->cfg.local_replicas && r < DR_MAX_DEVICES; r++) p[r] = local[r];
    return p;
}

/* Chunk c of a ring of n members over len elements: [c*len/n, (c+1)*len/n). */
void dr_ct_chunk(size_t len, uint32_t n, uint32_t c, size_t *lo, size_t *hi);

/* `width` bytes per element (DR_ACC_BYTES, or 4 for floats) from device
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
 * slot filled on entry (flocal/fdst set by float callers after it); the
 * agreement after every rank published: all go on or all fail alike. */
int      dr_ct_sync(ct_hub *h, dr_err *err);
ct_slot *dr_ct_publish(dr_comm *c, const ct_elem *el, void *const *local, size_t n, void *dst,
                       uint32_t dst_device);
int      dr_ct_agree(dr_comm *c, const char *what, dr_err *err);
/* reduce_to's destination on rank 0: an array when n > 0, a device of the
 * strategy (both reduce_to and reduce_to_f32). */
int      dr_ct_check_dst(const ct_hub *h, uint32_t rank, size_t n, const void *dst, uint32_t dst_device,
                         const char *what, dr_err *err);

/* devices/comm/comm_f32.c: the float collectives of distref/comm.h. */
int dr_ct_all_reduce_f32(dr_comm *c, float *const *local, size_t n, dr_err *err);
int dr_ct_reduce_to_f32(dr_comm *c, float *const *local, size_t n, uint32_t dst_device, float *dst, dr_err *err);

/* dst[0..k) += src[0..k), on the calling thread. */
void dr_ct_merge(dr_acc *dst, const dr_acc *src, size_t k);
/* Any element's arrays as the generic code takes them: pointers to char. */
#define DR_CT_MAX_LOCAL DR_MAX_DEVICES

/* The ring's whole data flow for elements [at, at+k) of chunk c, ring[j]
 * being member j's array: the reduce-scatter carries the chunk from member c
 * around to member c-1 (each merging what it holds), the all-gather copies
 * the total from c-1 around to c-2. Exactly the merges and copies of the
 * step-by-step ring, for these elements. */
void dr_ct_ring_chain(dr_acc *const *ring, uint32_t n, uint32_t c, size_t at, size_t k);
void dr_ct_ring_chain_el(const ct_elem *el, char *const *ring, uint32_t n, uint32_t c, size_t at, size_t k);
/* The same over floats (devices/comm/comm_f32.c): member j adds its own element
 * to what it receives, so chunk c's total is ((x_c + x_{c+1}) + ...) + x_{c-1}. */
void dr_ct_ring_chain_f32(float *const *ring, uint32_t n, uint32_t c, size_t at, size_t k);

/* DR_ESTATE once the TPU system under tpu strategy s was initialized again. */
int  dr_ct_tpu_live(const dr_strategy *s, dr_err *err);

/* The tpu strategy's torus all-reduce for the one rank of hub h
 * (devices/comm/comm_torus.c); the arguments as all_reduce_ranges's. */
int  dr_ct_torus(ct_hub *h, dr_acc *const *acc, const size_t *ranges, uint32_t nranges,
                 uint32_t l, double *seconds, dr_err *err);
/* The same over floats (fast numerics): each ring's float order as RING's. */
int  dr_ct_torus_f32(ct_hub *h, float *const *f, const size_t *ranges, uint32_t nranges,
                     uint32_t l, double *seconds, dr_err *err);

#endif
