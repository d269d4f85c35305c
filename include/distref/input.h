/* distref — input distribution: shuffling, batching, and TensorFlow's split
 * of a global batch over replicas.
 *
 * Order is a pure function of (seed, epoch). A global batch of G examples is
 * split over the N = W*R replicas of W workers by TensorFlow's
 * batch_sizes_for_worker rule (tensorflow/python/data/experimental/ops/
 * distribute.py): floor(G/N)+1 for the first G mod N replicas, floor(G/N)
 * for the rest, rotated left by w*R on worker w. Within one worker the split
 * is a stream, as RebatchDatasetV2 does it: replica r takes the next sizes[r]
 * examples, so a final short batch fills replicas in order with the same
 * size cycle (G=10, R=4, 5 left: 3, 2, 0, 0) and a replica with nothing left
 * gets an empty batch. The epoch ends when no replica has data.
 */
#ifndef DISTREF_INPUT_H
#define DISTREF_INPUT_H

#include <stdbool.h>
#include <stdint.h>
#include "distref/error.h"

/* sizes[0 .. W*R) for worker w. DR_EUSAGE (message names the argument) when
 * G == 0, W == 0, R == 0 or w >= W. */
int dr_batch_sizes_for_worker(uint32_t G, uint32_t W, uint32_t R, uint32_t w,
                              uint32_t *sizes, dr_err *err);

/* order[0..n) = the example order of an epoch: a permutation drawn from
 * (seed, DR_STREAM_SHUFFLE + epoch) when shuffle, else 0..n-1. */
void dr_epoch_order(uint32_t n, uint64_t seed, uint32_t epoch, bool shuffle, uint32_t *order);

/* One global step as the replicas of one worker see it: replica r's examples
 * are ids[offset[r] .. offset[r+1]). */
typedef struct dr_dist_batch {
    uint64_t  step;          /* global step, counted from 0 across epochs */
    uint32_t  epoch;
    uint32_t  num_replicas;
    uint32_t  count;         /* examples in this global step (<= G) */
    uint32_t *ids;           /* count ids (owned by the iterator) */
    uint32_t *offset;        /* num_replicas + 1 entries (owned by the iterator) */
} dr_dist_batch;

typedef struct dr_dist_iter {
    uint32_t  n, global_batch, num_replicas;
    uint64_t  seed;
    bool      shuffle, drop_remainder;
    uint32_t  epoch;         /* current epoch */
    uint32_t  position;      /* examples of this epoch already consumed */
    uint64_t  step;          /* next global step number */
    uint32_t *order;         /* this epoch's order (n) */
    uint32_t *sizes;         /* per-replica sizes (num_replicas) */
    uint32_t *ids, *offset;  /* the current batch */
    /* Unsharded multi-worker input (auto-shard OFF): every one of W workers
     * streams the whole epoch itself. */
    uint32_t  num_workers;   /* 0 or 1: a single stream */
    uint32_t *wsizes;        /* W x num_replicas: batch_sizes_for_worker of each worker */
    uint32_t *wpos;          /* W: examples each worker has consumed this epoch */
    uint32_t  estep;         /* steps taken this epoch */
    bool      shard_pipelines; /* input_mode=function: worker w streams elements w, w+W, ... */
    /* FILE sharding of shard files: worker w streams the epoch's order
     * restricted to the examples of its files (file i is worker i mod W's). */
    uint32_t  nfiles;        /* 0: not file-sharded */
    uint32_t *file_first;    /* nfiles + 1 boundaries of the files' example ids */
    uint32_t *wstream;       /* n: this epoch's streams, worker after worker */
    uint32_t *wstart;        /* W + 1: where each worker's stream starts in wstream */
} dr_dist_iter;

/* A single-worker iterator (W = 1) over n examples. DR_EUSAGE for G == 0,
 * R == 0, or n == 0; DR_ENOMEM on allocation failure. */
int  dr_dist_iter_init(dr_dist_iter *it, uint32_t n, uint32_t global_batch,
                       uint32_t num_replicas, uint64_t seed, bool shuffle,
                       bool drop_remainder, dr_err *err);

/* The next global step of the current epoch; false when the epoch is over
 * (no replica has data; with drop_remainder, also when fewer than G examples
 * are left: the short final batch is dropped). Call dr_dist_iter_next_epoch
 * to go on: it draws epoch + 1's order and resets position, and steps keep
 * counting. */
bool dr_dist_iter_next(dr_dist_iter *it, dr_dist_batch *out);
void dr_dist_iter_next_epoch(dr_dist_iter *it);

/* Position the iterator exactly where a checkpoint left it: the next batch
 * is the one an uninterrupted iterator gives after `step` steps, `position`
 * examples into `epoch`. DR_EUSAGE, naming the field, for a position past n
 * or one no iterator reaches (not a multiple of G and not n), or a step
 * smaller than the steps needed to reach position. Any epoch is valid. */
int  dr_dist_iter_seek(dr_dist_iter *it, uint32_t epoch, uint32_t position, uint64_t step, dr_err *err);
void dr_dist_iter_free(dr_dist_iter *it);

/* Auto-shard OFF for W workers (num_replicas = W*R, R each): every worker
 * iterates the whole epoch in the same order, batched by G and rebatched
 * with its own batch_sizes_for_worker(G, W, R, w) cycle, its R replicas
 * taking the next R sizes each step; a worker whose stream is spent hands
 * its replicas empty batches, and the epoch ends when every stream is.
 * Examples are therefore seen W times per epoch (duplicated, as in
 * TensorFlow when data is not sharded). A step's ids are worker-major;
 * position counts the examples all workers consumed, and seek replays the
 * epoch up to it. With drop_remainder each stream is cut to whole batches
 * of G. DR_EUSAGE when num_replicas is not a multiple of W. */
int  dr_dist_iter_unsharded(dr_dist_iter *it, uint32_t num_workers, dr_err *err);
/* Auto-shard FILE over W workers of a dataset read from nfiles shard files,
 * file i holding the example ids [first[i], first[i+1]) (first has
 * nfiles + 1 entries, first[nfiles] = n): as dr_dist_iter_unsharded, but
 * worker w's stream is the epoch's order restricted to the examples of the
 * files i with i mod W = w (tf.data's FILE policy: shard(W, w) of the file
 * list; distref's shuffle is the epoch's one permutation, so without
 * --shuffle a worker reads its files in order). Each example is trained on
 * once per epoch; with drop_remainder each worker's stream is cut to whole
 * batches of G. DR_EUSAGE when nfiles < W (TensorFlow's error) or the
 * boundaries do not cover 0..n in order. */
int  dr_dist_iter_files(dr_dist_iter *it, uint32_t num_workers, uint32_t nfiles, const uint32_t *first, dr_err *err);
/* distribute_datasets_from_function with distref's dataset_fn, the guide's
 * example: each of W input pipelines keeps shard(W, w) of the epoch
 * (elements w, w + W, ...) and batches it by
 * InputContext.get_per_replica_batch_size(G) = G / N; each local replica
 * dequeues the next batch of its worker's pipeline. DR_EUSAGE when N does
 * not divide G (TensorFlow's ValueError). With W = 1 this is the single
 * stream dr_dist_iter_next already gives. */
int  dr_dist_iter_from_function(dr_dist_iter *it, uint32_t num_workers, dr_err *err);

/* tf.distribute.InputContext, for distribute_datasets_from_function. */
typedef struct dr_input_context {
    uint32_t num_input_pipelines;   /* default 1 */
    uint32_t input_pipeline_id;     /* default 0 */
    uint32_t num_replicas_in_sync;  /* default 1 */
} dr_input_context;

/* G / num_replicas_in_sync; DR_EUSAGE "The global_batch_size G is not
 * divisible by num_replicas_in_sync R" otherwise (TensorFlow's ValueError). */
int dr_input_context_per_replica_batch_size(const dr_input_context *ctx, uint32_t global_batch,
                                            uint32_t *out, dr_err *err);

/* InputContext() with TensorFlow's defaults: one pipeline, id 0, one replica. */
#define DR_INPUT_CONTEXT_DEFAULT { 1, 0, 1 }

/* distribute_datasets_from_function, in C. TensorFlow calls the user's
 * function once per input pipeline (per worker) with its InputContext; the
 * function returns a dataset that it has already sharded for that pipeline
 * and batched to ctx.get_per_replica_batch_size(G), and each of the
 * pipeline's local replicas dequeues one batch of it per step.
 *
 * Here the function returns the example ids its pipeline reads, in order:
 * *ids is a malloc'd array of *n_ids ids that the iterator takes over and
 * frees (NULL with 0 ids is an empty pipeline). It returns DR_OK, or a
 * dr_code with err filled, which init passes on with the pipeline named.
 * The iterator does the batching: with B = the per-replica batch size,
 * step s gives local replica r = 0 .. L-1 (L = num_replicas_in_sync /
 * num_input_pipelines) the next B ids of the stream, in replica order. The
 * last batch may be short (ds.batch(B) without drop_remainder; to drop it,
 * return a multiple of B ids), replicas after the data runs out get empty
 * batches, and the pass ends when no replica has data. One call of the
 * function is one pass (batch.epoch is always 0): for another epoch, free
 * the iterator and init it again with the epoch in *user. */
typedef int (*dr_dataset_fn)(const dr_input_context *ctx, void *user,
                             uint32_t **ids, uint32_t *n_ids, dr_err *err);

typedef struct dr_fn_iter {
    dr_input_context ctx;
    uint32_t  per_replica;      /* B */
    uint32_t  local_replicas;   /* L */
    uint32_t  n;                /* ids the function returned */
    uint32_t  position;         /* ids already handed out */
    uint64_t  step;             /* next step number */
    uint32_t *stream;           /* the function's ids (owned) */
    uint32_t *offset;           /* L + 1 entries: the current batch */
} dr_fn_iter;

/* DR_EUSAGE (message names the field) for num_input_pipelines == 0,
 * input_pipeline_id >= num_input_pipelines, num_replicas_in_sync == 0 or
 * not a multiple of num_input_pipelines, global_batch == 0, or
 * global_batch not divisible by num_replicas_in_sync (TensorFlow's
 * message); the function's own failure; DR_ENOMEM. */
int  dr_fn_iter_init(dr_fn_iter *it, const dr_input_context *ctx, uint32_t global_batch,
                     dr_dataset_fn fn, void *user, dr_err *err);

/* The next step: batch->ids points into the stream, replica r's ids are
 * ids[offset[r] .. offset[r+1]); false when the stream is used up. */
bool dr_fn_iter_next(dr_fn_iter *it, dr_dist_batch *out);
void dr_fn_iter_free(dr_fn_iter *it);

#endif
