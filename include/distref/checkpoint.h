/* distref — checkpoints that restore under any strategy.
 *
 * A checkpoint holds one copy of everything a run needs to continue as if
 * it had never stopped: weights, optimizer slots, the step, and the data
 * position (epoch and examples consumed). Nothing in it depends on the
 * strategy, replica count or device, so a run saved under mirrored with 4
 * replicas restores under one_device or central_storage.
 *
 * File: model_dir/ckpt.bin, little-endian, written atomically:
 *   "DRCKPT07" | u32 header bytes | header fields | params | slots | SHA-256
 * (03 added the epoch's counters, the last loss and the settings that
 * change the trajectory; 04 the learning-rate schedule and clipping, and
 * reads 03 files as constant-rate, unclipped runs; 05 mixed precision's
 * policy and loss-scale state, and reads 04 files as float32 runs; 06 what
 * identifies the input: --auto_shard_policy and the shard set's SHA-256,
 * and reads 05 and older files as unrecorded (no input check); 07 the
 * schedule's options --staircase, --cycle and --warmup_learning_rate and
 * the loss scale's --dynamic_growth_steps, and
 * reads 06 and older files without them; an 02 file is refused naming its
 * version).
 * The trailing SHA-256 covers everything before it. A short, corrupt or
 * mismatched file is rejected with a message naming the file and the field,
 * and nothing of it is loaded.
 */
#ifndef DISTREF_CHECKPOINT_H
#define DISTREF_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include "distref/error.h"
#include "distref/schedule.h"

#define DR_CHECKPOINT_FILE "ckpt.bin"

typedef struct dr_checkpoint {
    char     experiment[32];
    uint64_t seed;
    uint32_t global_batch;
    uint32_t optimizer;      /* dr_optimizer_kind */
    uint64_t step;           /* global steps completed */
    uint32_t examples;       /* size of the training set the position refers to */
    uint32_t epoch;          /* the epoch of the last step taken */
    uint32_t position;       /* examples of that epoch consumed (= examples at
                                its end: the next step starts epoch + 1) */
    uint64_t epoch_correct;  /* this epoch's correct predictions and examples */
    uint64_t epoch_examples; /*   so far (train_accuracy_last_epoch on resume) */
    uint32_t last_loss_bits; /* the loss of step `step` */
    /* settings that change the trajectory: a resume must use the same */
    double   learning_rate, momentum, l2;
    uint32_t flags;          /* DR_CKPT_SHUFFLE | DR_CKPT_DROP_REMAINDER | DR_CKPT_NESTEROV |
                                DR_CKPT_FAST_NUMERICS */
    uint32_t loss_reduction; /* 0 global_batch_size, 1 examples_in_step, 2 tf_default */
    dr_lr_schedule schedule; /* 04: --lr_schedule and its parameters (03 files: constant) */
    dr_clip        clip;     /* 04: the clipping flags (03 files: none) */
    uint32_t       accumulation_steps;   /* 04: --gradient_accumulation_steps (0, 1: none) */
    /* 05: mixed precision (04 and 03 files: float32, zeros) */
    uint32_t mixed_dtype;          /* dr_dtype: --dtype_policy */
    uint32_t loss_scale_kind;      /* dr_loss_scale_kind: --loss_scale */
    float    loss_scale_value;     /* its number: fixed factor or dynamic's initial (0: the default) */
    uint32_t mixed_tf_reduction;   /* --mixed_reduction=tensorflow */
    float    ls_scale;             /* the loss scale's state after step `step` */
    uint32_t ls_counter;           /*   (Keras' step_counter) */
    uint32_t ls_growth_steps;      /* 07: --dynamic_growth_steps (0: Keras's 2000) */
    uint64_t ls_skipped;           /*   steps skipped so far */
    /* 06: what identifies the input (05 and older files: input_policy 0) */
    uint32_t input_policy;         /* DR_CKPT_POLICY_*: --auto_shard_policy as given */
    uint8_t  shards_sha256[32];    /* --dataset_shards: SHA-256 of its shards.json as distref
                                      writes it (the files' SHA-256s in it); zeros: none */
    uint32_t nparams;
    uint32_t nslots;         /* slots per parameter */
    float   *params;         /* nparams */
    float   *slots;          /* nslots * nparams */
} dr_checkpoint;

int  dr_checkpoint_save(const char *model_dir, const dr_checkpoint *c, dr_err *err);

/* *found = false (and DR_OK) when model_dir has no checkpoint. On success the
 * arrays are malloc'd; free them with dr_checkpoint_free. */
int  dr_checkpoint_load(const char *model_dir, dr_checkpoint *c, bool *found, dr_err *err);
void dr_checkpoint_free(dr_checkpoint *c);

#define DR_CKPT_SHUFFLE        1u
#define DR_CKPT_DROP_REMAINDER 2u
#define DR_CKPT_NESTEROV       4u
/* --numerics=fast trained it: its trajectory is not the exact one, and an
 * exact checkpoint resumed in fast mode would silently leave it (a resume
 * in the other mode is refused naming --numerics). Checkpoints written
 * before this bit existed read as exact. */
#define DR_CKPT_FAST_NUMERICS  8u
/* --batch_norm=replica trained a model with BatchNormalization (sync, the
 * default, and every model without it: the bit clear, as before it existed). */
#define DR_CKPT_BN_REPLICA     16u
/* --dropout=off trained a model with Dropout layers (clear: the model's
 * rates, and every model without Dropout, as before the bit existed). */
#define DR_CKPT_DROPOUT_OFF    32u
/* --dropout_masks trained it: a file's masks, not the RNG's (clear: the
 * RNG's, as before the bit existed). Resuming checks the bit, not the file. */
#define DR_CKPT_DROPOUT_MASKS  64u

/* input_policy: 0 unrecorded (a 05 or older file: not checked), 1 the
 * strategy applies no auto-shard policy (one_device, parameter_server,
 * --input_mode=function), 2 + k the policy k of --auto_shard_policy
 * (dr_shard_policy: auto, file, data, off, hint) that the strategy applied. */
#define DR_CKPT_POLICY_UNRECORDED 0u
#define DR_CKPT_POLICY_NONE       1u
#define DR_CKPT_POLICY_BASE       2u

/* A loaded checkpoint belongs to this run: experiment, model, optimizer,
 * seed, global batch and training set agree (DR_EUSAGE, exit 2, naming the
 * field and both values: the file is fine, the flags are another run's).
 * dr_checkpoint_load itself refuses a header whose counters disagree
 * (epoch_correct > epoch_examples, epoch_examples beyond an epoch or the
 * steps taken, a step count that cannot reach the position, global_batch
 * or examples 0) with DR_EFORMAT naming the field: its SHA-256 only proves
 * the file whole, not honest. */
int  dr_checkpoint_check(const dr_checkpoint *c, const char *model_dir, const char *experiment,
                         size_t nparams, int nslots, int optimizer, uint64_t seed, uint32_t G,
                         uint32_t examples, dr_err *err);
/* The trajectory's settings agree with `now`'s (learning rate, momentum,
 * L2, shuffle, drop_remainder, Nesterov, numerics, the loss's divisor, the
 * schedule, clipping, accumulation, --dtype_policy, --loss_scale,
 * --mixed_reduction, the input: --dataset_shards' set and, where both runs
 * apply one, --auto_shard_policy): DR_EUSAGE naming the flag and both
 * values otherwise. */
int  dr_checkpoint_check_settings(const dr_checkpoint *c, const char *model_dir, const dr_checkpoint *now,
                                  dr_err *err);

#endif
