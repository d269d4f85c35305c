/* distref devices — the threads comm: collectives over any number form
 * (distref/form.h), ranks being thread groups of one process
 * (distref/comm.h).
 *
 * The hub. open() builds every rank's endpoint around one shared hub (the
 * config, a pthread barrier for num_ranks threads, and one slot per rank).
 * A collective starts with each rank publishing its arguments in its slot
 * and its own verdict on them; after the entry barrier every rank reads all
 * slots, so either all ranks go on or all return the same error (a rank
 * that returned alone would leave the others waiting forever). Slots are
 * read only between the entry barrier and the collective's last barrier, so
 * a rank that has returned may enter the next collective at once. A group
 * of one rank never touches the barrier.
 *
 * Algorithms, written once over the form's traits. Merging accumulators is
 * exact, so no schedule can change a bit; what an algorithm decides is
 * which replica's array merges into which and which links carry bytes.
 * Floats (DR_FORM_F32) run the same data flow, and the form's ordered
 * merges give each algorithm its documented float order (distref/comm.h):
 * a member of a ring adds its own term after the sum it receives
 * (merge_after); a sum onto a root begins by copying its first term
 * (copy_first: when the root is not the first, the sum is formed in a
 * scratch block and copied to the root), so HIERARCHICAL's halves are
 * x_0 + ... + x_{h-1} and x_h + ... + x_{R-1}, whichever replica is root.
 *   Within a rank (num_ranks == 1), TensorFlow's cross-device ops, per pack:
 *     RING          chunks [c*len/R, (c+1)*len/R) go around the replicas:
 *                   reduce-scatter, then all-gather (NcclAllReduce);
 *     HIERARCHICAL  halves [0, R/2) and [R/2, R) onto a root each (roots
 *                   rotate with the pack), the roots exchange, then copy
 *                   back (HierarchicalCopyAllReduce);
 *     ONE_DEVICE    everything onto replica 0, then copied back.
 *   The replicas share this address space, so the element range is cut into
 *   blocks (dr_ct_block: DR_CT_BLOCK accumulators, DR_CT_BLOCK_F32 floats),
 *   one OpenMP iteration each, and a block runs the
 *   algorithm's whole data flow for its elements (every merge and copy the
 *   algorithm makes, in its order) while the block is in cache. A nested
 *   OpenMP region that gets one thread computes the same thing.
 *   Across ranks (num_ranks > 1): each rank merges its replicas onto its
 *   local[0], the ranks' local[0] run a ring (reduce-scatter, all-gather;
 *   chunks [c*len/W, (c+1)*len/W) of every pack), one barrier per step, each
 *   rank pulling the chunk its predecessor sends; then each rank copies the
 *   total into its other replicas. cfg.alg does not apply there.
 *   reduce_to: rank w sums every replica of every rank into its share
 *   [w*n/W, (w+1)*n/W) of rank 0's destination.
 *   TORUS (the tpu strategy): devices/comm/comm_torus.c.
 *   The ring pieces shared with the torus and the MPI comm:
 *   devices/comm/comm_elem.c.
 * Packs: num_packs 0, one per tensor; k > 0, the concatenation cut into k
 * packs of n/k, the last taking the rest (_ConcatAndSplitPacker).
 *
 * Byte accounting, as ref/cross_device.c counts the same algorithm: the
 * form's wire bytes (DR_ACC_BYTES, DR_CACC_BYTES, 4) per element that moves between two distinct devices
 * (cfg.strategy->device[replica_device[global replica]]), bytes_out on the
 * sender's device and bytes_in on the receiver's; a copy within one device
 * is free. Counts are a function of (config, n) alone, so one thread adds
 * them for everybody: the only rank with num_ranks == 1, rank 0 before the
 * collective's last barrier otherwise. With no strategy nothing is counted.
 */
#include "devices/comm/comm_internal.h"
#include "distref/cacc.h"

#include <stdlib.h>
#include <string.h>

/* ---- configuration ------------------------------------------------------ */

/* The device index of local replica r of rank w. */
uint32_t dr_ct_dev_of(const ct_hub *h, uint32_t w, uint32_t r)
{
    return h->cfg.strategy ? h->cfg.strategy->replica_device[w * h->cfg.local_replicas + r] : 0;
}

uint32_t dr_ct_num_packs(const ct_hub *h)
{
    return h->cfg.num_packs > 0 ? (uint32_t)h->cfg.num_packs : h->cfg.ntensors;
}

/* Pack p's length, the packs before it taking [0, off) of n. */
size_t dr_ct_pack_len(const ct_hub *h, uint32_t p, size_t n, size_t off)
{
    if (h->cfg.num_packs == 0) return h->cfg.tensor_len[p];
    return p + 1 < dr_ct_num_packs(h) ? n / dr_ct_num_packs(h) : n - off;
}

static size_t nblocks(const dr_form *f, size_t len)
{
    return (len + dr_ct_block(f) - 1) / dr_ct_block(f);
}

/* Block b of [0, len): [*a, *a + return). */
static size_t block_at(const dr_form *f, size_t len, size_t b, size_t *a)
{
    size_t B = dr_ct_block(f);
    *a = b * B;
    return len - *a > B ? B : len - *a;
}

int dr_ct_tpu_live(const dr_strategy *s, dr_err *err)
{
    if (s->tpu_system->generation != s->tpu_generation)
        return dr_fail(err, DR_ESTATE, "comm threads: the TPU system was initialized again after this "
                       "strategy was built, which wiped its HBM; build the strategy again");
    return DR_OK;
}

static int check_config(const dr_comm_config *cfg, dr_err *err)
{
    const dr_strategy *s = cfg->strategy;
    if (cfg->num_ranks == 0)
        return dr_fail(err, DR_EUSAGE, "comm threads: num_ranks must be at least 1, got 0");
    if (cfg->local_replicas == 0)
        return dr_fail(err, DR_EUSAGE, "comm threads: local_replicas must be at least 1, got 0");
    if (cfg->local_replicas > DR_CT_MAX_LOCAL)
        return dr_fail(err, DR_EUSAGE, "comm threads: %u local replicas; at most %d", cfg->local_replicas,
                       DR_CT_MAX_LOCAL);
    if ((unsigned)cfg->alg > (unsigned)DR_COMM_TORUS)
        return dr_fail(err, DR_EUSAGE, "comm threads: unknown algorithm %d", (int)cfg->alg);
    if (cfg->num_packs < 0)
        return dr_fail(err, DR_EUSAGE, "comm threads: num_packs must be >= 0, got %d", cfg->num_packs);
    if (cfg->ntensors > 0 && !cfg->tensor_len)
        return dr_fail(err, DR_EUSAGE, "comm threads: %u tensors but no tensor lengths (NULL)", cfg->ntensors);
    if (s && (uint64_t)cfg->num_ranks * cfg->local_replicas != s->num_replicas)
        return dr_fail(err, DR_EUSAGE, "comm threads: %u ranks x %u local replicas, but the strategy has %u "
                       "replicas", cfg->num_ranks, cfg->local_replicas, s->num_replicas);
    if (cfg->alg != DR_COMM_TORUS) return DR_OK;
    if (!s || !s->tpu_system)
        return dr_fail(err, DR_EUSAGE, "comm threads: algorithm TORUS needs a tpu strategy");
    if (cfg->num_ranks != 1)
        return dr_fail(err, DR_EUNSUPPORTED, "comm threads: algorithm TORUS runs in one rank, not %u",
                       cfg->num_ranks);
    return dr_ct_tpu_live(s, err);
}

/* n accumulators in tensors summing to n (when tensors are given). */
int dr_ct_check_lengths(const ct_hub *h, const char *what, size_t n, dr_err *err)
{
    size_t sum = 0;
    if (h->cfg.ntensors == 0) {
        if (h->cfg.num_packs == 0 && n > 0)
            return dr_fail(err, DR_EUSAGE, "comm threads %s: %zu accumulators but no tensor lengths "
                           "(num_packs 0 reduces tensor by tensor)", what, n);
        return DR_OK;
    }
    for (uint32_t t = 0; t < h->cfg.ntensors; t++) sum += h->cfg.tensor_len[t];
    if (sum != n)
        return dr_fail(err, DR_EUSAGE, "comm threads %s: the %u tensor lengths sum to %zu, but the arrays "
                       "hold %zu accumulators", what, h->cfg.ntensors, sum, n);
    return DR_OK;
}

static int check_arrays(const ct_hub *h, const char *what, void *const *local, size_t n, dr_err *err)
{
    if (n == 0) return DR_OK;
    if (!local) return dr_fail(err, DR_EUSAGE, "comm threads %s: no local arrays (NULL)", what);
    for (uint32_t r = 0; r < h->cfg.local_replicas; r++)
        if (!local[r]) return dr_fail(err, DR_EUSAGE, "comm threads %s: local replica %u's array is NULL", what, r);
    return DR_OK;
}

/* ---- the hub: barrier and agreement ------------------------------------- */

int dr_ct_sync(ct_hub *h, dr_err *err)
{
    int rc;
    if (h->cfg.num_ranks == 1) return DR_OK;
    rc = pthread_barrier_wait(&h->bar);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
        return dr_fail(err, DR_EFAULT, "comm threads: barrier failed (error %d)", rc);
    return DR_OK;
}

/* After each rank filled its slot: waits for all, then fails every rank
 * alike if any refused its arguments or the ranks disagree on n. */
int dr_ct_agree(dr_comm *c, const char *what, dr_err *err)
{
    ct_hub *h = c->hub;
    uint32_t W = h->cfg.num_ranks;
    int rc = dr_ct_sync(h, err);
    if (rc) return rc;
    for (uint32_t q = 0; q < W && rc == DR_OK; q++) {
        const ct_slot *s = &h->slot[q];
        if (s->rc && W == 1) rc = dr_fail(err, s->rc, "%s", s->err.msg);
        else if (s->rc) rc = dr_fail(err, s->rc, "rank %u: %s", q, s->err.msg);
        else if (s->n != h->slot[0].n)
            rc = dr_fail(err, DR_EUSAGE, "comm threads %s: rank %u passed %zu accumulators, rank 0 %zu",
                         what, q, s->n, h->slot[0].n);
    }
    if (rc) dr_ct_sync(h, NULL);   /* no slot is reused before every rank has read them */
    return rc;
}

/* Fills this rank's slot; its verdict comes after, in me->rc. */
ct_slot *dr_ct_publish(dr_comm *c, const dr_form *form, void *const *local, size_t n, void *dst,
                       uint32_t dst_device)
{
    ct_slot *me = &c->hub->slot[c->rank];
    for (uint32_t r = 0; r < c->hub->cfg.local_replicas; r++) me->local[r] = local && n ? local[r] : NULL;
    me->form = form;
    me->n = n;
    me->dst = dst;
    me->dst_device = dst_device;
    me->rc = DR_OK;
    me->err.code = DR_OK;
    me->err.msg[0] = '\0';
    return me;
}

/* ---- within a rank ------------------------------------------------------ */

/* x[root] = the sum of x[lo .. hi) at [at, at+k), terms in member order
 * for a copy_first form (formed in scratch, room for a block, when the
 * root is not the first member); merged into the root otherwise. */
static void to_root(const dr_form *f, char *const *x, uint32_t lo, uint32_t hi, uint32_t root, size_t at,
                    size_t k, void *scratch)
{
    if (f->copy_first && root != lo) {
        memcpy(scratch, dr_ct_at(f, x[lo], at), k * f->size);
        for (uint32_t r = lo + 1; r < hi; r++) f->merge(scratch, dr_ct_at(f, x[r], at), k);
        memcpy(dr_ct_at(f, x[root], at), scratch, k * f->size);
        return;
    }
    for (uint32_t r = lo; r < hi; r++)
        if (r != root) f->merge(dr_ct_at(f, x[root], at), dr_ct_at(f, x[r], at), k);
}

static void from_root(const dr_form *f, char *const *x, uint32_t lo, uint32_t hi, uint32_t root, size_t at,
                      size_t k)
{
    for (uint32_t r = lo; r < hi; r++)
        if (r != root) memcpy(dr_ct_at(f, x[r], at), dr_ct_at(f, x[root], at), k * f->size);
}

/* HierarchicalCopyAllReduce's roots of the two halves for a pack. */
void dr_ct_roots(uint32_t R, uint32_t pack, uint32_t *r0, uint32_t *r1)
{
    uint32_t h = R / 2;
    *r0 = h ? pack % h : 0;
    *r1 = h + pack % (R - h);
}

/* The algorithm's data flow for elements [a, e) of the pack [off, off+len). */
static void local_block(const ct_hub *h, const dr_form *f, char *const *x, size_t off, size_t len,
                        uint32_t pack, size_t a, size_t e)
{
    uint32_t R = h->cfg.local_replicas, half = R / 2, r0, r1;
    float scratch[DR_CT_BLOCK_F32];   /* copy_first forms: a block of floats */
    switch (h->cfg.alg) {
    case DR_COMM_RING:
        for (uint32_t c = 0; c < R; c++) {
            size_t lo, hi;
            dr_ct_chunk(len, R, c, &lo, &hi);
            if (lo < a) lo = a;
            if (hi > e) hi = e;
            if (lo < hi) dr_ct_ring_chain(f, x, R, c, off + lo, hi - lo);
        }
        break;
    case DR_COMM_HIERARCHICAL:
        dr_ct_roots(R, pack, &r0, &r1);
        to_root(f, x, 0, half, r0, off + a, e - a, scratch);
        to_root(f, x, half, R, r1, off + a, e - a, scratch);
        if (half) {
            f->merge(dr_ct_at(f, x[r0], off + a), dr_ct_at(f, x[r1], off + a), e - a);   /* s0 + s1 */
            memcpy(dr_ct_at(f, x[r1], off + a), dr_ct_at(f, x[r0], off + a), (e - a) * f->size);
        }
        from_root(f, x, 0, half, r0, off + a, e - a);
        from_root(f, x, half, R, r1, off + a, e - a);
        break;
    default:   /* ONE_DEVICE */
        to_root(f, x, 0, R, 0, off + a, e - a, scratch);
        from_root(f, x, 0, R, 0, off + a, e - a);
        break;
    }
}

static void local_pack(const ct_hub *h, const dr_form *f, char *const *x, size_t off, size_t len, uint32_t pack)
{
    size_t nb = nblocks(f, len);
    #pragma omp parallel for schedule(static) if (len >= dr_ct_par_min(f))
    for (size_t b = 0; b < nb; b++) {
        size_t a, k = block_at(f, len, b, &a);
        local_block(h, f, x, off, len, pack, a, a + k);
    }
}

/* The bytes of one pack's reduction within rank 0 (num_ranks == 1). */
void dr_ct_count_local_pack(const ct_hub *h, size_t len, uint32_t pack, size_t width)
{
    dr_strategy *s = h->cfg.strategy;
    uint32_t R = h->cfg.local_replicas, half = R / 2, r0, r1;
    switch (h->cfg.alg) {
    case DR_COMM_RING:
        for (uint32_t phase = 0; phase < 2; phase++)
            for (uint32_t step = 0; step + 1 < R; step++)
                for (uint32_t r = 0; r < R; r++) {
                    size_t lo, hi;
                    dr_ct_chunk(len, R, (r + R - step + phase) % R, &lo, &hi);
                    dr_ct_count(s, dr_ct_dev_of(h, 0, r), dr_ct_dev_of(h, 0, (r + 1) % R), hi - lo, width);
                }
        break;
    case DR_COMM_HIERARCHICAL:
        dr_ct_roots(R, pack, &r0, &r1);
        for (uint32_t r = 0; r < R; r++) {
            uint32_t root = r < half ? r0 : r1;
            if (r == root) continue;
            dr_ct_count(s, dr_ct_dev_of(h, 0, r), dr_ct_dev_of(h, 0, root), len, width);
            dr_ct_count(s, dr_ct_dev_of(h, 0, root), dr_ct_dev_of(h, 0, r), len, width);
        }
        if (half) {
            dr_ct_count(s, dr_ct_dev_of(h, 0, r1), dr_ct_dev_of(h, 0, r0), len, width);
            dr_ct_count(s, dr_ct_dev_of(h, 0, r0), dr_ct_dev_of(h, 0, r1), len, width);
        }
        break;
    default:
        for (uint32_t r = 1; r < R; r++) {
            dr_ct_count(s, dr_ct_dev_of(h, 0, r), dr_ct_dev_of(h, 0, 0), len, width);
            dr_ct_count(s, dr_ct_dev_of(h, 0, 0), dr_ct_dev_of(h, 0, r), len, width);
        }
        break;
    }
}

static void local_all_reduce(const ct_hub *h, const dr_form *f, char *const *x, size_t n)
{
    size_t off = 0;
    if (h->cfg.local_replicas == 1) return;
    for (uint32_t p = 0; p < dr_ct_num_packs(h); p++) {
        size_t len = dr_ct_pack_len(h, p, n, off);
        local_pack(h, f, x, off, len, p);
        dr_ct_count_local_pack(h, len, p, f->wire);
        off += len;
    }
}

/* ---- across ranks ------------------------------------------------------- */

/* A rank's replicas onto its local[0], in replica order (back: local[0]
 * onto the others). */
static void rank_gather(const ct_hub *h, const dr_form *f, char *const *local, size_t n, bool back)
{
    uint32_t R = h->cfg.local_replicas;
    size_t nb = nblocks(f, n);
    if (R == 1) return;
    #pragma omp parallel for schedule(static) if (n >= dr_ct_par_min(f))
    for (size_t b = 0; b < nb; b++) {
        size_t a, k = block_at(f, n, b, &a);
        if (back) from_root(f, local, 0, R, 0, a, k);
        else to_root(f, local, 0, R, 0, a, k, NULL);   /* root 0 is the first: no scratch */
    }
}

/* dst[0..k) = src (+) dst (the sender's sum first), or = src with copy. */
static void par_move(const dr_form *f, char *dst, char *src, size_t k, bool copy)
{
    size_t nb = nblocks(f, k);
    #pragma omp parallel for schedule(static) if (k >= dr_ct_par_min(f))
    for (size_t b = 0; b < nb; b++) {
        size_t a, m = block_at(f, k, b, &a);
        if (copy) memcpy(dr_ct_at(f, dst, a), dr_ct_at(f, src, a), m * f->size);
        else f->merge_after(dr_ct_at(f, dst, a), dr_ct_at(f, src, a), m);
    }
}

/* Step `step` of the ring over ranks, as rank w receives it: rank w-1 sends
 * chunk (w-1 - step + phase) mod W of every pack of its local[0]; in the
 * same step rank w sends a different chunk, so nothing is read and written
 * at once. */
static void rank_ring_recv(const ct_hub *h, uint32_t w, size_t n, uint32_t step, uint32_t phase)
{
    uint32_t W = h->cfg.num_ranks, prev = (w + W - 1) % W, c = (prev + W - step + phase) % W;
    const dr_form *f = h->slot[w].form;
    char *dst = h->slot[w].local[0], *src = h->slot[prev].local[0];
    size_t off = 0;
    for (uint32_t p = 0; p < dr_ct_num_packs(h); p++) {
        size_t len = dr_ct_pack_len(h, p, n, off), lo, hi;
        dr_ct_chunk(len, W, c, &lo, &hi);
        par_move(f, dr_ct_at(f, dst, off + lo), dr_ct_at(f, src, off + lo), hi - lo, phase == 1);
        off += len;
    }
}

/* Every rank's bytes: gather, the ring of the local[0]s, copy back. */
void dr_ct_count_ranks(const ct_hub *h, size_t n, size_t width)
{
    dr_strategy *s = h->cfg.strategy;
    uint32_t W = h->cfg.num_ranks, R = h->cfg.local_replicas;
    size_t off = 0;
    for (uint32_t w = 0; w < W; w++)
        for (uint32_t r = 1; r < R; r++) {
            dr_ct_count(s, dr_ct_dev_of(h, w, r), dr_ct_dev_of(h, w, 0), n, width);
            dr_ct_count(s, dr_ct_dev_of(h, w, 0), dr_ct_dev_of(h, w, r), n, width);
        }
    for (uint32_t p = 0; p < dr_ct_num_packs(h); p++) {
        size_t len = dr_ct_pack_len(h, p, n, off);
        for (uint32_t phase = 0; phase < 2; phase++)
            for (uint32_t step = 0; step + 1 < W; step++)
                for (uint32_t w = 0; w < W; w++) {
                    size_t lo, hi;
                    dr_ct_chunk(len, W, (w + W - step + phase) % W, &lo, &hi);
                    dr_ct_count(s, dr_ct_dev_of(h, w, 0), dr_ct_dev_of(h, (w + 1) % W, 0), hi - lo, width);
                }
        off += len;
    }
}

static int ranks_all_reduce(dr_comm *c, const dr_form *f, char *const *local, size_t n, dr_err *err)
{
    ct_hub *h = c->hub;
    uint32_t W = h->cfg.num_ranks;
    int rc;
    if (n) rank_gather(h, f, local, n, false);
    if (c->rank == 0) dr_ct_count_ranks(h, n, f->wire);
    if ((rc = dr_ct_sync(h, err))) return rc;
    for (uint32_t phase = 0; phase < 2; phase++)
        for (uint32_t step = 0; step + 1 < W; step++) {
            if (n) rank_ring_recv(h, c->rank, n, step, phase);
            if ((rc = dr_ct_sync(h, err))) return rc;
        }
    if (n) rank_gather(h, f, local, n, true);
    return DR_OK;
}

/* ---- the operations ----------------------------------------------------- */

static void free_hub(ct_hub *h)
{
    if (h->cfg.num_ranks > 1) pthread_barrier_destroy(&h->bar);
    free(h->tensor_len);
    free(h->slot);
    free(h->ep);
    free(h);
}

static int ct_open(const dr_comm_config *cfg, dr_comm **eps, uint32_t *neps, dr_err *err)
{
    ct_hub *h;
    int rc;
    if (!cfg || !eps || !neps)
        return dr_fail(err, DR_EUSAGE, "comm threads: open needs a config, an endpoint array and a count");
    if ((rc = check_config(cfg, err))) return rc;
    if (!(h = calloc(1, sizeof *h))) return dr_fail(err, DR_ENOMEM, "comm threads: no memory");
    h->cfg = *cfg;
    h->tensor_len = malloc((size_t)cfg->ntensors * sizeof *h->tensor_len + 1);
    h->slot = calloc(cfg->num_ranks, sizeof *h->slot);
    h->ep = calloc(cfg->num_ranks, sizeof *h->ep);
    if (!h->tensor_len || !h->slot || !h->ep) {
        h->cfg.num_ranks = 1;   /* no barrier to destroy */
        free_hub(h);
        return dr_fail(err, DR_ENOMEM, "comm threads: no memory for %u ranks", cfg->num_ranks);
    }
    if (cfg->ntensors) memcpy(h->tensor_len, cfg->tensor_len, (size_t)cfg->ntensors * sizeof *h->tensor_len);
    h->cfg.tensor_len = h->tensor_len;
    if (cfg->num_ranks > 1 && (rc = pthread_barrier_init(&h->bar, NULL, cfg->num_ranks)) != 0) {
        h->cfg.num_ranks = 1;
        free_hub(h);
        return dr_fail(err, DR_ENOMEM, "comm threads: no barrier for %u ranks (error %d)", cfg->num_ranks, rc);
    }
    atomic_init(&h->open_eps, cfg->num_ranks);
    for (uint32_t w = 0; w < cfg->num_ranks; w++) {
        h->ep[w].hub = h;
        h->ep[w].rank = w;
        eps[w] = &h->ep[w];
    }
    *neps = cfg->num_ranks;
    return DR_OK;
}

/* Endpoints may be closed all at once or one by one; the last frees the hub. */
static void ct_close(dr_comm **eps, uint32_t neps)
{
    if (!eps) return;
    for (uint32_t i = 0; i < neps; i++) {
        ct_hub *h;
        if (!eps[i]) continue;
        h = eps[i]->hub;
        eps[i] = NULL;
        if (atomic_fetch_sub(&h->open_eps, 1) == 1) free_hub(h);
    }
}

static uint32_t ct_rank(const dr_comm *c) { return c->rank; }
static uint32_t ct_num_ranks(const dr_comm *c) { return c->hub->cfg.num_ranks; }

static int ct_all_reduce(dr_comm *c, dr_form_id form, void *const *local, size_t n, dr_err *err)
{
    const dr_form *f;
    ct_slot *me;
    int rc;
    if (!c) return dr_fail(err, DR_EUSAGE, "comm threads all_reduce: no endpoint (NULL)");
    me = dr_ct_publish(c, NULL, local, n, NULL, 0);
    me->rc = dr_ct_form(form, "threads", "all_reduce", &f, &me->err);
    me->form = f;
    if (me->rc == DR_OK && c->hub->cfg.alg == DR_COMM_TORUS)
        me->rc = dr_fail(&me->err, DR_EUSAGE, "comm threads all_reduce: algorithm TORUS reduces by "
                         "all_reduce_ranges");
    if (me->rc == DR_OK) me->rc = dr_ct_check_lengths(c->hub, "all_reduce", n, &me->err);
    if (me->rc == DR_OK) me->rc = check_arrays(c->hub, "all_reduce", local, n, &me->err);
    if ((rc = dr_ct_agree(c, "all_reduce", err))) return rc;
    if (c->hub->cfg.num_ranks > 1) return ranks_all_reduce(c, f, me->local, n, err);
    local_all_reduce(c->hub, f, me->local, n);
    return DR_OK;
}

int dr_ct_check_dst(const ct_hub *h, uint32_t rank, size_t n, const void *dst, uint32_t dst_device,
                    const char *what, dr_err *err)
{
    if (rank != 0) return DR_OK;
    if (n > 0 && !dst)
        return dr_fail(err, DR_EUSAGE, "comm threads %s: no destination array (NULL) on rank 0", what);
    if (h->cfg.strategy && dst_device >= h->cfg.strategy->num_devices)
        return dr_fail(err, DR_EUSAGE, "comm threads %s: device %u; the strategy has %u", what, dst_device,
                       h->cfg.strategy->num_devices);
    return DR_OK;
}

/* Rank w sums its share [w*n/W, (w+1)*n/W) of rank 0's dst, every replica
 * of every rank in global replica order (copy_first: the first overwrites). */
static void reduce_share(const ct_hub *h, const dr_form *f, uint32_t w, size_t n)
{
    uint32_t W = h->cfg.num_ranks, R = h->cfg.local_replicas;
    size_t lo = (size_t)w * n / W, hi = ((size_t)w + 1) * n / W, nb = nblocks(f, hi - lo);
    char *d = h->slot[0].dst;
    #pragma omp parallel for schedule(static) if (hi - lo >= dr_ct_par_min(f))
    for (size_t b = 0; b < nb; b++) {
        size_t a, k = block_at(f, hi - lo, b, &a);
        a += lo;
        if (f->copy_first) memcpy(dr_ct_at(f, d, a), dr_ct_at(f, h->slot[0].local[0], a), k * f->size);
        for (uint32_t q = 0; q < W; q++)
            for (uint32_t r = q == 0 && f->copy_first ? 1 : 0; r < R; r++)
                f->merge(dr_ct_at(f, d, a), dr_ct_at(f, h->slot[q].local[r], a), k);
    }
}

static int ct_reduce_to(dr_comm *c, dr_form_id form, void *const *local, size_t n, uint32_t dst_device,
                        void *dst, dr_err *err)
{
    const dr_form *f;
    ct_hub *h;
    ct_slot *me;
    int rc;
    if (!c) return dr_fail(err, DR_EUSAGE, "comm threads reduce_to: no endpoint (NULL)");
    h = c->hub;
    me = dr_ct_publish(c, NULL, local, n, dst, dst_device);
    me->rc = dr_ct_form(form, "threads", "reduce_to", &f, &me->err);
    me->form = f;
    if (me->rc == DR_OK) me->rc = check_arrays(h, "reduce_to", local, n, &me->err);
    if (me->rc == DR_OK) me->rc = dr_ct_check_dst(h, c->rank, n, dst, dst_device, "reduce_to", &me->err);
    if ((rc = dr_ct_agree(c, "reduce_to", err))) return rc;
    reduce_share(h, f, c->rank, n);
    if (c->rank == 0)
        for (uint32_t q = 0; q < h->cfg.num_ranks; q++)
            for (uint32_t r = 0; r < h->cfg.local_replicas; r++)
                dr_ct_count(h->cfg.strategy, dr_ct_dev_of(h, q, r), h->slot[0].dst_device, n, f->wire);
    return dr_ct_sync(h, err);
}

static int ct_all_reduce_ranges(dr_comm *c, dr_form_id form, void *const *local, const size_t *ranges,
                                uint32_t nranges, uint32_t l, double *seconds, dr_err *err)
{
    const dr_form *f;
    int rc;
    if (!c) return dr_fail(err, DR_EUSAGE, "comm threads all_reduce_ranges: no endpoint (NULL)");
    if ((rc = dr_ct_form(form, "threads", "all_reduce_ranges", &f, err))) return rc;
    if (c->hub->cfg.alg != DR_COMM_TORUS)
        return dr_fail(err, DR_EUSAGE, "comm threads all_reduce_ranges: needs algorithm TORUS (the tpu "
                       "strategy); use all_reduce");
    return dr_ct_torus(c->hub, f, local, ranges, nranges, l, seconds, err);
}

static int ct_barrier(dr_comm *c, dr_err *err)
{
    if (!c) return dr_fail(err, DR_EUSAGE, "comm threads barrier: no endpoint (NULL)");
    return dr_ct_sync(c->hub, err);
}

static const dr_comm_ops threads_ops = {
    .name = "threads",
    .open = ct_open,
    .close = ct_close,
    .rank = ct_rank,
    .num_ranks = ct_num_ranks,
    .all_reduce = ct_all_reduce,
    .reduce_to = ct_reduce_to,
    .all_reduce_ranges = ct_all_reduce_ranges,
    .barrier = ct_barrier,
};

const dr_comm_ops *dr_comm_threads(void)
{
    return &threads_ops;
}
