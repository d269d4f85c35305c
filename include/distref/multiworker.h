/* distref — multi_worker_mirrored: workers, auto-sharding, the split.
 *
 * W workers (chief + worker tasks of TF_CONFIG), R local replicas each
 * (--num_gpus, or one CPU replica), N = W*R replicas in sync. Every worker
 * builds its own input pipeline; tf.data's auto-shard policy says how the
 * workers divide the data (research notes §1):
 *
 *   AUTO  FILE sharding when the input comes from enough files, else DATA.
 *         distref's synthetic and toy inputs are in memory (DATA);
 *         Fashion-MNIST is one file pair: FILE for one worker, DATA for
 *         more; a set of N shard files (--dataset_shards): FILE for up to
 *         N workers (distref/shards.h).
 *   FILE  shard the input files over workers; fewer files than workers is an
 *         error, as in TensorFlow. One worker needs no sharding.
 *   DATA  every worker reads everything, in the same order, and keeps its
 *         shard. TensorFlow rewrites the rebatch to the legacy one, so each
 *         global batch of B examples is cut into N slices of ceil(B/N)
 *         (trailing slices may be short or empty) and replica r of worker w
 *         takes slice r*W + w.
 *   OFF   no sharding: every worker reads all the data, in the same order,
 *         and rebatches its own stream (dr_dist_iter_unsharded): each
 *         example is trained on W times per epoch.
 *   HINT  shards where the pipeline calls shard(SHARD_HINT); distref's
 *         pipelines never do, so HINT shards nothing (as OFF).
 *
 * The same policy decides the split for one worker too (TensorFlow 2.21,
 * measured): DATA (so AUTO on in-memory data) cuts every global batch into
 * ceil(B/R) slices; FILE, OFF and HINT keep batch_sizes_for_worker.
 *
 * Replicas are numbered worker-major: replica w*R + r is local replica r of
 * worker w (/job:worker/replica:0/task:w/device:GPU:r).
 */
#ifndef DISTREF_MULTIWORKER_H
#define DISTREF_MULTIWORKER_H

#include <stdint.h>
#include "distref/error.h"

typedef enum dr_shard_policy { DR_SHARD_AUTO = 0, DR_SHARD_FILE, DR_SHARD_DATA, DR_SHARD_OFF, DR_SHARD_HINT } dr_shard_policy;

int dr_shard_policy_parse(const char *name, dr_shard_policy *out, dr_err *err);

/* The policy in effect for a dataset read from `files` input files (0 for
 * in-memory data) by W workers: DATA, FILE or OFF, or an error. */
int dr_shard_policy_resolve(dr_shard_policy p, uint32_t files, uint32_t W, dr_shard_policy *out, dr_err *err);

/* DATA sharding of one global batch ids[0..count): out_ids gets the examples
 * replica by replica (worker-major), off[0..W*R] their boundaries. */
void dr_shard_data(const uint32_t *ids, uint32_t count, uint32_t W, uint32_t R,
                   uint32_t *out_ids, uint32_t *off);

/* Under that sharding, the row of ids[0..count) (the step's global batch,
 * the order one worker at the same W*R reads it in) where replica i = w*R + r
 * starts: its slice r*W + w times ceil(count/(W*R)), at most count. Its
 * rows are that row and the next ones (--dropout_masks reads them). */
uint32_t dr_shard_data_row(uint32_t count, uint32_t W, uint32_t R, uint32_t i);

#endif
