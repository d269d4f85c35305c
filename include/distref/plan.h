/* distref core — a run as data: what every layer needs to know about a
 * training run before anything is allocated.
 *
 * dr_run_plan_make turns a dr_run_config (flags, TF_CONFIG) into the
 * experiment after the flags, the global batch, the strategy spec and its
 * options, the multi-worker sharding mode and the gradient's tensor layout.
 * The reference (ref/), the engine (strategies/, devices/) and the harness
 * (harness/) all start from the same plan, so they agree on what is being
 * computed while each computes it its own way.
 */
#ifndef DISTREF_PLAN_H
#define DISTREF_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/checkpoint.h"
#include "distref/data.h"
#include "distref/error.h"
#include "distref/model.h"
#include "distref/strategy.h"
#include "distref/train.h"

typedef struct dr_run_plan {
    const dr_run_config *cfg;
    dr_experiment       exp;          /* model and optimizer after the flags */
    uint32_t            G;            /* global batch size */
    uint32_t            epochs;
    size_t              P;            /* parameters */
    int                 nslots;       /* optimizer slots per parameter */
    bool                exact;        /* --numerics=exact */
    dr_strategy_spec    spec;         /* for dr_strategy_create */
    dr_strategy_options sopt;
    uint32_t            num_workers;  /* multi_worker_mirrored (TF_CONFIG); else 1 */
    /* The input's auto-shard policy, resolved (docs/SEMANTICS.md §1): */
    bool                shard_data;   /* DATA: each global batch cut into W*R slices of ceil(B/(W*R)) */
    bool                unsharded;    /* OFF with W > 1: every worker streams the whole epoch;
                                         input_mode=function with W > 1: its shard */
    bool                from_function;/* --input_mode=function (distribute_datasets_from_function) */
    uint32_t            shard_files;  /* --dataset_shards: the set's files (0: none) */
    bool                file_sharded; /* FILE over W > 1 workers of shard files: worker w streams the
                                         epoch's examples of files w, w + W, ... (unsharded is set too) */
                                      /* neither: batch_sizes_for_worker, filled in order */
    /* The loss's divisor D: every step divides the summed losses and
     * gradients by D (and the regularization by R). */
    bool                divide_by_count;   /* D = the examples in the step, not G */
    bool                divide_locally;    /* tf_default: each replica by its own size x R */
    size_t              tensor_len[4 * DR_MAX_LAYERS];   /* dr_model_tensors: kernel, bias, ..., then state */
    uint32_t            ntensors;
    bool                dropout_off;  /* --dropout=off on a model with Dropout: its rates set to 0 */
    const struct dr_dropout_masks *dropout_masks;   /* --dropout_masks, loaded and checked by the harness
                                                     * (dr_run_train) before the variant's first step; NULL:
                                                     * the RNG's masks */
    bool                bn_replica;   /* --batch_norm=replica on a model with BatchNormalization */
    uint32_t            input_policy; /* DR_CKPT_POLICY_*: the auto-shard policy the strategy applies */
    uint8_t             shards_sha256[32]; /* --dataset_shards: its index's SHA-256 (zeros: none) */
} dr_run_plan;

/* DR_EUSAGE naming the flag or TF_CONFIG field for anything inconsistent. */
int dr_run_plan_make(const dr_run_config *cfg, dr_run_plan *p, dr_err *err);

/* D for a step of `count` examples: G (the seeds' compute_average_loss(l,
 * global_batch_size=G)), or count with --loss_reduction=examples_in_step.
 * Any D that does not depend on R keeps every replica count's bits. */
uint32_t dr_plan_divisor(const dr_run_plan *p, uint32_t count);

/* The settings of this run that change its trajectory, as a checkpoint
 * records them (learning rate, momentum, L2, shuffle, drop_remainder,
 * Nesterov, the loss divisor, ..., the input: policy and shard set): every writer of checkpoints fills them, every
 * resume compares them (dr_checkpoint_check_settings). */
void dr_plan_checkpoint_settings(const dr_run_plan *p, dr_checkpoint *c);

/* The step's scaling as exact integers: replica r's share of the loss (and
 * of every gradient) is (mult[r] * its sum + coef * reg) / den, so that the
 * shares add up to the step's loss over one denominator:
 *   global_batch_size, examples_in_step   mult = R, coef = D, den = D R
 *   tf_default (compute_average_loss with global_batch_size=None: each
 *   replica divides by its own size n_r times R, an empty one adds 0)
 *                                         L = lcm of the nonzero n_r,
 *                                         mult = L / n_r, coef = L, den = L R
 * sizes[r] = replica r's examples. DR_EUNSUPPORTED when L R exceeds 2^30. */
int dr_plan_step_scale(const dr_run_plan *p, const uint32_t *sizes, uint32_t R, uint32_t count, uint32_t *mult,
                       uint32_t *coef, uint32_t *den, dr_err *err);

/* The experiment named by cfg with --optimizer, --learning_rate, --momentum,
 * --nesterov, --l2 and --from_logits applied. */
int dr_experiment_resolve(const dr_run_config *cfg, dr_experiment *exp, dr_err *err);

/* The training set this process trains from: --dataset_shards' files (only
 * worker w of W's under FILE sharding; w = DR_SHARDS_ALL: every file, as a
 * process that emulates every worker needs; reads: what was read, may be
 * NULL), else dr_load_dataset's split 0. */
struct dr_shard_reads;
int dr_load_training_set(const dr_run_plan *p, uint32_t w, dr_dataset *out, struct dr_shard_reads *reads, dr_err *err);

/* The training (split 0) or test (split 1) set of a dataset name. */
int dr_load_dataset(const dr_run_config *cfg, const char *dataset, int split, dr_dataset *out, dr_err *err);

/* ---- the tpu strategy's plan (core/tpu_plan.c) ---- */

/* The tpu options of a run: initializes sys, maps --input_partition_dims
 * to Model Garden's computation shape in opt, and gives the partition grid
 * part (rows x columns of tiles of the 28x28 input) and the cores per
 * replica. */
#define DR_IMAGE_SIDE 28
int dr_tpu_options(const dr_run_config *cfg, const dr_experiment *exp, dr_tpu_system *sys,
                   dr_strategy_options *opt, int part[2], uint32_t *tiles, dr_err *err);

/* The cores a replica is partitioned over by --input_partition_dims "A,B"
 * (A x B; 1 for an empty string). Malformed dims count as 1: refusing them
 * is dr_tpu_options' part, later. */
uint32_t dr_tpu_partition_cores(const char *dims);

/* Tile l of a part[0] x part[1] partitioning of the 28x28 image, row-major
 * over the grid: pix[l * len + q] for its len = 784 / tiles pixels. */
void dr_tpu_tile_pixels(const int part[2], uint32_t *pix);

/* The parameters each logical core of a replica holds: core l its tile's
 * rows of the first kernel (pix[l * tile_len ..], adjacent rows merged into
 * one range), core 0 also everything after the first kernel; without
 * partitioning (tiles == 1) core 0 holds all P. Core l's [lo, hi) pairs are
 * ranges[2 * l * (tile_len + 1) ..], nranges[l] of them. */
void dr_tpu_core_ranges(const dr_model_spec *m, uint32_t tiles, const uint32_t *pix, uint32_t tile_len,
                        size_t *ranges, uint32_t *nranges);

/* Reserves each logical core's HBM for every replica of a tpu strategy:
 * core l of a replica keeps its parameters (ranges as above) with their
 * slots and gradient accumulators, its `local` rows of input (its tile's
 * pixels when tiles > 1) and its feature maps: without a spatial plan
 * (a Dense model, or one core) layer 0's partial sums when tiles > 1 and
 * on core 0 the activations (pre and post) of every layer; with one (a
 * model beyond Dense on tiles) each core's tiles of the maps and their
 * halos, and on core 0 the whole maps from the plan's lp on.
 * reserved[d] gets the bytes taken on strategy device d (the caller
 * unreserves them). An error names the replica, the logical core and the
 * sizes. */
int dr_tpu_reserve_hbm(dr_strategy *s, const dr_model_spec *m, uint32_t nslots, uint32_t local, uint32_t tiles,
                       const size_t *ranges, const uint32_t *nranges, const dr_spatial_plan *plan,
                       uint64_t *reserved, dr_err *err);

/* The emulated compute time of one step of `rows` rows per replica: forward
 * and backward at an assumed 2e13 flop/s per core (an emulation assumption,
 * not a hardware figure), 2 flops per multiply-add, the backward pass twice
 * the forward, layer 0 split over the tiles. */
double dr_tpu_compute_seconds(const dr_model_spec *m, uint32_t rows, uint32_t tiles);

#endif
