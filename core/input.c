/* distref — input distribution: see include/distref/input.h.
 *
 * Everything here is index arithmetic over an epoch's order; the examples
 * themselves are gathered by the caller (dr_dataset_gather). Argument names
 * in messages are TensorFlow's, since that is what users port from.
 */
#include "distref/input.h"

#include <stdlib.h>
#include <string.h>

#include "distref/rng.h"
#include "distref/shards.h"

/* ---- TensorFlow's split of a global batch ------------------------------- */

static int check_split_args(uint32_t G, uint32_t W, uint32_t R, uint32_t w, dr_err *err)
{
    if (G == 0)
        return dr_fail(err, DR_EUSAGE, "global_batch_size: expected at least 1, got 0");
    if (W == 0)
        return dr_fail(err, DR_EUSAGE, "num_workers: expected at least 1, got 0");
    if (R == 0)
        return dr_fail(err, DR_EUSAGE, "num_replicas_per_worker: expected at least 1, got 0");
    if (w >= W)
        return dr_fail(err, DR_EUSAGE, "worker_index: %u is out of range for num_workers %u",
                       (unsigned)w, (unsigned)W);
    if ((uint64_t)W * R > UINT32_MAX)
        return dr_fail(err, DR_EUSAGE, "num_workers * num_replicas_per_worker: %u * %u "
                       "replicas overflow 32 bits", (unsigned)W, (unsigned)R);
    return DR_OK;
}

/* distribute.py: worker 0 gets floor+1 for the first G mod N sub-batches and
 * floor for the rest; worker w the same list rotated left by w*R, so that
 * across the workers of one step the larger sub-batches are spread out. */
int dr_batch_sizes_for_worker(uint32_t G, uint32_t W, uint32_t R, uint32_t w,
                              uint32_t *sizes, dr_err *err)
{
    int rc = check_split_args(G, W, R, w, err);
    if (rc != DR_OK)
        return rc;
    const uint32_t N = W * R, floor = G / N, num_ceil = G - N * floor;
    const uint32_t offset = w * R;
    for (uint32_t i = 0; i < N; i++) {
        uint32_t k = (i + offset) % N;      /* position in worker 0's list */
        sizes[i] = k < num_ceil ? floor + 1 : floor;
    }
    return DR_OK;
}

void dr_epoch_order(uint32_t n, uint64_t seed, uint32_t epoch, bool shuffle, uint32_t *order)
{
    if (shuffle) {
        dr_permutation(order, n, seed, DR_STREAM_SHUFFLE + (uint64_t)epoch);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
}

/* ---- cutting one global step into replica batches ----------------------- */

/* RebatchDatasetV2 as a stream: replica r takes the next sizes[r] of the
 * count examples, or what is left. offset has R + 1 entries. */
static void split_step(const uint32_t *sizes, uint32_t R, uint32_t count, uint32_t *offset)
{
    uint32_t left = count;
    offset[0] = 0;
    for (uint32_t r = 0; r < R; r++) {
        uint32_t take = sizes[r] < left ? sizes[r] : left;
        offset[r + 1] = offset[r] + take;
        left -= take;
    }
}

/* ---- the single-worker iterator ----------------------------------------- */

static int check_iter_args(uint32_t n, uint32_t G, uint32_t R, dr_err *err)
{
    if (G == 0)
        return dr_fail(err, DR_EUSAGE, "global_batch_size: expected at least 1, got 0");
    if (R == 0)
        return dr_fail(err, DR_EUSAGE, "num_replicas: expected at least 1, got 0");
    if (n == 0)
        return dr_fail(err, DR_EUSAGE, "n: the dataset has no examples");
    return DR_OK;
}

int dr_dist_iter_init(dr_dist_iter *it, uint32_t n, uint32_t global_batch,
                      uint32_t num_replicas, uint64_t seed, bool shuffle,
                      bool drop_remainder, dr_err *err)
{
    memset(it, 0, sizeof *it);
    int rc = check_iter_args(n, global_batch, num_replicas, err);
    if (rc != DR_OK)
        return rc;
    it->n = n;
    it->global_batch = global_batch;
    it->num_replicas = num_replicas;
    it->seed = seed;
    it->shuffle = shuffle;
    it->drop_remainder = drop_remainder;
    /* A global batch never holds more than the epoch has. */
    const uint32_t batch_cap = global_batch < n ? global_batch : n;
    it->order = malloc(sizeof(uint32_t) * n);
    it->sizes = malloc(sizeof(uint32_t) * num_replicas);
    it->ids = malloc(sizeof(uint32_t) * batch_cap);
    it->offset = malloc(sizeof(uint32_t) * ((size_t)num_replicas + 1));
    if (it->order == NULL || it->sizes == NULL || it->ids == NULL || it->offset == NULL) {
        dr_dist_iter_free(it);
        return dr_fail(err, DR_ENOMEM, "input iterator: out of memory for %u examples, "
                       "%u replicas", (unsigned)n, (unsigned)num_replicas);
    }
    dr_batch_sizes_for_worker(global_batch, 1, num_replicas, 0, it->sizes, NULL);
    dr_epoch_order(n, seed, 0, shuffle, it->order);
    return DR_OK;
}

int dr_dist_iter_unsharded(dr_dist_iter *it, uint32_t W, dr_err *err)
{
    uint32_t N = it->num_replicas, R;
    uint32_t *ids;
    if (W == 0 || N % W != 0)
        return dr_fail(err, DR_EUSAGE, "num_workers: %u does not divide the %u replicas", W, N);
    R = N / W;
    free(it->wsizes);
    free(it->wpos);
    it->wsizes = malloc(sizeof(uint32_t) * (size_t)W * N);
    it->wpos = calloc(W, sizeof(uint32_t));
    /* A step takes at most ceil(G/N) per replica. */
    ids = realloc(it->ids, sizeof(uint32_t) * ((size_t)(it->global_batch / N + 1) * N));
    if (ids) it->ids = ids;
    if (!it->wsizes || !it->wpos || !ids)
        return dr_fail(err, DR_ENOMEM, "input iterator: out of memory for %u workers", W);
    for (uint32_t w = 0; w < W; w++)
        dr_batch_sizes_for_worker(it->global_batch, W, R, w, it->wsizes + (size_t)w * N, NULL);
    it->num_workers = W;
    return DR_OK;
}

int dr_dist_iter_from_function(dr_dist_iter *it, uint32_t W, dr_err *err)
{
    dr_input_context ctx = { W, 0, it->num_replicas };
    uint32_t b;
    int rc = dr_input_context_per_replica_batch_size(&ctx, it->global_batch, &b, err);
    if (rc) return dr_fail_wrap(err, "--global_batch_size=%u with --input_mode=function", it->global_batch);
    rc = dr_dist_iter_unsharded(it, W, err);
    it->shard_pipelines = W > 1;
    return rc;
}

/* The file holding example id: the last i with first[i] <= id. */
static uint32_t file_of(const dr_dist_iter *it, uint32_t id)
{
    uint32_t lo = 0, hi = it->nfiles;   /* first[lo] <= id < first[hi] */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (it->file_first[mid] <= id) lo = mid; else hi = mid;
    }
    return lo;
}

/* This epoch's worker streams: the order, each example to its file's worker. */
static void build_streams(dr_dist_iter *it)
{
    uint32_t W = it->num_workers;
    if (!it->nfiles) return;
    memset(it->wstart, 0, sizeof(uint32_t) * ((size_t)W + 1));
    for (uint32_t k = 0; k < it->n; k++) it->wstart[dr_shard_file_worker(file_of(it, it->order[k]), W) + 1]++;
    for (uint32_t w = 0; w < W; w++) it->wstart[w + 1] += it->wstart[w];
    memset(it->wpos, 0, sizeof(uint32_t) * W);   /* as cursors, then back to 0 */
    for (uint32_t k = 0; k < it->n; k++) {
        uint32_t w = dr_shard_file_worker(file_of(it, it->order[k]), W);
        it->wstream[it->wstart[w] + it->wpos[w]++] = it->order[k];
    }
    memset(it->wpos, 0, sizeof(uint32_t) * W);
}

int dr_dist_iter_files(dr_dist_iter *it, uint32_t W, uint32_t nfiles, const uint32_t *first, dr_err *err)
{
    int rc;
    if (nfiles < W)
        return dr_fail(err, DR_EUSAGE, "--auto_shard_policy=file: %u workers but the input has %u file%s; FILE "
                       "sharding needs at least one file per worker (use auto or data)", W, nfiles,
                       nfiles == 1 ? "" : "s");
    if (first[0] != 0 || first[nfiles] != it->n)
        return dr_fail(err, DR_EUSAGE, "shard files: they hold ids %u..%u, the dataset has %u examples", first[0],
                       first[nfiles], it->n);
    for (uint32_t i = 0; i < nfiles; i++)
        if (first[i + 1] <= first[i])
            return dr_fail(err, DR_EUSAGE, "shard files: file %u starts at id %u, not before file %u (%u)", i, first[i],
                           i + 1, first[i + 1]);
    if ((rc = dr_dist_iter_unsharded(it, W, err))) return rc;
    it->file_first = malloc(sizeof(uint32_t) * ((size_t)nfiles + 1));
    it->wstream = malloc(sizeof(uint32_t) * it->n);
    it->wstart = malloc(sizeof(uint32_t) * ((size_t)W + 1));
    if (!it->file_first || !it->wstream || !it->wstart)
        return dr_fail(err, DR_ENOMEM, "input iterator: out of memory for %u files", nfiles);
    memcpy(it->file_first, first, sizeof(uint32_t) * ((size_t)nfiles + 1));
    it->nfiles = nfiles;
    build_streams(it);
    return DR_OK;
}

/* The stream every worker reads: the epoch, cut to whole batches of G with
 * drop_remainder; with sharded pipelines, worker w's share of it. */
static uint32_t stream_length(const dr_dist_iter *it)
{
    return it->drop_remainder ? it->n - it->n % it->global_batch : it->n;
}

static uint32_t worker_length(const dr_dist_iter *it, uint32_t w)
{
    uint32_t len = stream_length(it), W = it->num_workers;
    if (it->nfiles) {
        len = it->wstart[w + 1] - it->wstart[w];
        return it->drop_remainder ? len - len % it->global_batch : len;
    }
    if (!it->shard_pipelines) return len;
    return len > w ? (len - w + W - 1) / W : 0;
}

static bool next_unsharded(dr_dist_iter *it, dr_dist_batch *out)
{
    uint32_t W = it->num_workers, N = it->num_replicas, R = N / W, count = 0;
    it->offset[0] = 0;
    for (uint32_t w = 0; w < W; w++) {
        uint32_t len = worker_length(it, w);
        for (uint32_t r = 0; r < R; r++) {
            uint32_t want = it->wsizes[(size_t)w * N + ((size_t)it->estep * R + r) % N];
            uint32_t take = want < len - it->wpos[w] ? want : len - it->wpos[w];
            for (uint32_t k = 0; k < take; k++)   /* the k-th element of worker w's stream */
                it->ids[count + k] = it->nfiles ? it->wstream[it->wstart[w] + it->wpos[w] + k]
                                   : it->order[it->shard_pipelines ? w + (size_t)W * (it->wpos[w] + k) : it->wpos[w] + k];
            it->wpos[w] += take;
            count += take;
            it->offset[w * R + r + 1] = count;
        }
    }
    if (count == 0) return false;
    out->step = it->step;
    out->epoch = it->epoch;
    out->num_replicas = N;
    out->count = count;
    out->ids = it->ids;
    out->offset = it->offset;
    it->position += count;
    it->estep++;
    it->step++;
    return true;
}

bool dr_dist_iter_next(dr_dist_iter *it, dr_dist_batch *out)
{
    if (it->num_workers > 1) return next_unsharded(it, out);
    const uint32_t left = it->n - it->position;
    const uint32_t count = left < it->global_batch ? left : it->global_batch;
    if (count == 0 || (count < it->global_batch && it->drop_remainder))
        return false;
    memcpy(it->ids, it->order + it->position, sizeof(uint32_t) * count);
    split_step(it->sizes, it->num_replicas, count, it->offset);
    out->step = it->step;
    out->epoch = it->epoch;
    out->num_replicas = it->num_replicas;
    out->count = count;
    out->ids = it->ids;
    out->offset = it->offset;
    it->position += count;
    it->step++;
    return true;
}

void dr_dist_iter_next_epoch(dr_dist_iter *it)
{
    it->epoch++;
    it->position = 0;
    it->estep = 0;
    if (it->wpos) memset(it->wpos, 0, sizeof(uint32_t) * it->num_workers);
    dr_epoch_order(it->n, it->seed, it->epoch, it->shuffle, it->order);
    build_streams(it);
}

/* Only positions the iterator can reach are accepted: a whole number of
 * global batches, or the end of the epoch after a short final batch. */
static int check_seek(const dr_dist_iter *it, uint32_t position, uint64_t step, dr_err *err)
{
    if (position > it->n)
        return dr_fail(err, DR_EUSAGE, "position: %u is past the end of an epoch of %u examples",
                       (unsigned)position, (unsigned)it->n);
    if (position % it->global_batch != 0 && position != it->n)
        return dr_fail(err, DR_EUSAGE, "position: %u is neither a multiple of "
                       "global_batch_size %u nor the epoch's end %u", (unsigned)position,
                       (unsigned)it->global_batch, (unsigned)it->n);
    /* Steps only go up, one per batch: reaching position took at least this many. */
    uint64_t needed = position / it->global_batch + (position % it->global_batch != 0);
    if (step < needed)
        return dr_fail(err, DR_EUSAGE, "step: %llu is fewer than the %llu steps it takes "
                       "to reach position %u", (unsigned long long)step,
                       (unsigned long long)needed, (unsigned)position);
    return DR_OK;
}

/* Unsharded: replay the epoch from its start up to position. */
static int seek_unsharded(dr_dist_iter *it, uint32_t epoch, uint32_t position, uint64_t step, dr_err *err)
{
    dr_dist_batch b;
    uint64_t steps = 0;
    it->epoch = epoch;
    it->position = 0;
    it->estep = 0;
    memset(it->wpos, 0, sizeof(uint32_t) * it->num_workers);
    dr_epoch_order(it->n, it->seed, epoch, it->shuffle, it->order);
    build_streams(it);
    while (it->position < position && next_unsharded(it, &b)) steps++;
    if (it->position != position)
        return dr_fail(err, DR_EUSAGE, "position: %u is not where a step of the unsharded input "
                       "ends (%u examples are read in epoch %u)", (unsigned)position,
                       (unsigned)it->position, (unsigned)epoch);
    if (step < steps)
        return dr_fail(err, DR_EUSAGE, "step: %llu is fewer than the %llu steps it takes "
                       "to reach position %u", (unsigned long long)step,
                       (unsigned long long)steps, (unsigned)position);
    it->step = step;
    return DR_OK;
}

int dr_dist_iter_seek(dr_dist_iter *it, uint32_t epoch, uint32_t position, uint64_t step, dr_err *err)
{
    if (it->num_workers > 1) return seek_unsharded(it, epoch, position, step, err);
    int rc = check_seek(it, position, step, err);
    if (rc != DR_OK)
        return rc;
    if (epoch != it->epoch)     /* the order is a pure function of (seed, epoch) */
        dr_epoch_order(it->n, it->seed, epoch, it->shuffle, it->order);
    it->epoch = epoch;
    it->position = position;
    it->step = step;
    return DR_OK;
}

void dr_dist_iter_free(dr_dist_iter *it)
{
    if (it == NULL)
        return;
    free(it->order);
    free(it->sizes);
    free(it->ids);
    free(it->offset);
    free(it->wsizes);
    free(it->wpos);
    free(it->file_first);
    free(it->wstream);
    free(it->wstart);
    memset(it, 0, sizeof *it);
}

/* ---- distribute_datasets_from_function ---------------------------------- */

int dr_input_context_per_replica_batch_size(const dr_input_context *ctx, uint32_t global_batch,
                                            uint32_t *out, dr_err *err)
{
    const uint32_t R = ctx->num_replicas_in_sync;
    if (R == 0)
        return dr_fail(err, DR_EUSAGE, "num_replicas_in_sync: expected at least 1, got 0");
    if (global_batch % R != 0)
        return dr_fail(err, DR_EUSAGE, "The global_batch_size %u is not divisible by "
                       "num_replicas_in_sync %u", (unsigned)global_batch, (unsigned)R);
    *out = global_batch / R;
    return DR_OK;
}

/* The context as TensorFlow builds it: one pipeline per worker, each feeding
 * the same number of local replicas. */
static int check_context(const dr_input_context *ctx, dr_err *err)
{
    const uint32_t P = ctx->num_input_pipelines, R = ctx->num_replicas_in_sync;
    if (P == 0)
        return dr_fail(err, DR_EUSAGE, "num_input_pipelines: expected at least 1, got 0");
    if (ctx->input_pipeline_id >= P)
        return dr_fail(err, DR_EUSAGE, "input_pipeline_id: %u is out of range for "
                       "num_input_pipelines %u", (unsigned)ctx->input_pipeline_id, (unsigned)P);
    if (R == 0)
        return dr_fail(err, DR_EUSAGE, "num_replicas_in_sync: expected at least 1, got 0");
    if (R % P != 0)
        return dr_fail(err, DR_EUSAGE, "num_replicas_in_sync: %u replicas cannot be shared "
                       "evenly by num_input_pipelines %u (every worker must have the same "
                       "number of replicas)", (unsigned)R, (unsigned)P);
    return DR_OK;
}

/* Calls the user's function and takes its ids. */
static int call_dataset_fn(dr_fn_iter *it, dr_dataset_fn fn, void *user, dr_err *err)
{
    uint32_t *ids = NULL, n_ids = 0;
    int rc = fn(&it->ctx, user, &ids, &n_ids, err);
    if (rc != DR_OK) {
        free(ids);
        return dr_fail_wrap(err, "dataset function (input pipeline %u)",
                            (unsigned)it->ctx.input_pipeline_id);
    }
    if (ids == NULL && n_ids > 0)
        return dr_fail(err, DR_EUSAGE, "dataset function (input pipeline %u): n_ids is %u "
                       "but ids is NULL", (unsigned)it->ctx.input_pipeline_id, (unsigned)n_ids);
    it->stream = ids;
    it->n = n_ids;
    return DR_OK;
}

int dr_fn_iter_init(dr_fn_iter *it, const dr_input_context *ctx, uint32_t global_batch,
                    dr_dataset_fn fn, void *user, dr_err *err)
{
    memset(it, 0, sizeof *it);
    int rc = check_context(ctx, err);
    if (rc == DR_OK)
        rc = dr_input_context_per_replica_batch_size(ctx, global_batch, &it->per_replica, err);
    if (rc == DR_OK && it->per_replica == 0)
        rc = dr_fail(err, DR_EUSAGE, "global_batch_size: expected at least 1, got 0");
    if (rc != DR_OK)
        return rc;
    it->ctx = *ctx;
    it->local_replicas = ctx->num_replicas_in_sync / ctx->num_input_pipelines;
    it->offset = malloc(sizeof(uint32_t) * ((size_t)it->local_replicas + 1));
    if (it->offset == NULL)
        return dr_fail(err, DR_ENOMEM, "dataset function iterator: out of memory");
    rc = call_dataset_fn(it, fn, user, err);
    if (rc != DR_OK)
        dr_fn_iter_free(it);
    return rc;
}

bool dr_fn_iter_next(dr_fn_iter *it, dr_dist_batch *out)
{
    const uint32_t left = it->n - it->position;
    if (left == 0)
        return false;
    /* Local replica r dequeues the r-th next batch of per_replica ids; the
     * final one may be short, and replicas after it get empty batches. */
    uint64_t want = (uint64_t)it->per_replica * it->local_replicas;
    uint32_t count = want < left ? (uint32_t)want : left;
    it->offset[0] = 0;
    for (uint32_t r = 0; r < it->local_replicas; r++) {
        uint32_t rest = count - it->offset[r];
        it->offset[r + 1] = it->offset[r] + (it->per_replica < rest ? it->per_replica : rest);
    }
    out->step = it->step;
    out->epoch = 0;
    out->num_replicas = it->local_replicas;
    out->count = count;
    out->ids = it->stream + it->position;
    out->offset = it->offset;
    it->position += count;
    it->step++;
    return true;
}

void dr_fn_iter_free(dr_fn_iter *it)
{
    if (it == NULL)
        return;
    free(it->stream);
    free(it->offset);
    memset(it, 0, sizeof *it);
}
