/* distref core — what a variant is: the contract between the harness that
 * runs training (harness/) and an implementation of the step (the
 * reference in ref/, the engine's OpenMP variant in strategies/ + devices/,
 * later OpenCL and MPI).
 *
 * The harness owns everything around the step: the plan, the dataset, the
 * input iterator (the order of examples is a pure function of the seed and
 * the epoch, so it is shared), metrics.jsonl, checkpoints, resume and
 * summary.json. A variant owns the step itself: its own split of a global
 * batch over replicas, its buffers and devices, forward and backward, the
 * loss and regularization scaling, the collectives, the one rounding and the
 * optimizer. It reports what it did in a dr_step_report, which the harness
 * writes to metrics.jsonl; conformance compares those reports and the final
 * weights between variants.
 *
 * The registry of variants is the harness's (include/distref/harness.h:
 * dr_variant_lookup, dr_variants); `bin/distref variants` lists it.
 */
#ifndef DISTREF_VARIANT_H
#define DISTREF_VARIANT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include "distref/data.h"
#include "distref/error.h"
#include "distref/exact.h"
#include "distref/input.h"
#include "distref/plan.h"
#include "distref/strategy.h"

/* What one step did, as the variant computed it. */
typedef struct dr_step_report {
    float           loss;                        /* the step's loss, rounded once */
    uint64_t        correct;                     /* correct predictions (classification) */
    uint32_t        count;                       /* examples the step trained on */
    uint32_t        num_replicas;
    const uint32_t *ids;                         /* the examples, replica by replica */
    uint32_t        off[DR_MAX_DEVICES];         /* replica r: ids[off[r] .. off[r+1]) */
    char            extra[512];                  /* JSON fields (",\"k\":v") for the metrics line */
} dr_step_report;

/* What a self-scheduling variant reports at the end of train(). */
typedef struct dr_train_totals {
    uint64_t steps;                              /* updates applied */
    uint64_t start_step;                         /* the checkpoint's step it resumed from (0: none) */
    float    last_loss;
    uint64_t epoch_correct, epoch_examples;      /* of the last epoch */
    bool     peer_lost;                          /* mpi: a rank died and the run finished without it */
} dr_train_totals;

/* Inference, for evaluate and predict (harness/run_evaluate.c, which
 * splits the test set, sums the losses and writes the files): the forward
 * pass with BatchNormalization's moving statistics and Dropout off
 * (docs/MODELS.md), on batches of up to `rows` examples, through the
 * variant's own kernels. */
typedef struct dr_infer_ops {
    /* cfg's --numerics: exact, the reference's bits (each example's loss and
     * output), or fast, the variant's fast kernels; --threads. params: the
     * checkpoint's P floats, copied. */
    int   (*open)(const dr_model_spec *m, const dr_run_config *cfg, const float *params, uint32_t rows, void **out,
                  dr_err *err);
    /* n <= rows examples (x: n x the input's floats; labels or targets, as
     * the dataset has): loss[r], example r's loss (without the
     * regularization), and out, the last layer's output (n x its units). */
    int   (*batch)(void *s, const float *x, const uint8_t *labels, const float *targets, uint32_t n, float *loss,
                   float *out, dr_err *err);
    /* the regularization loss of the weights (--l2; 0 without) */
    float (*reg_loss)(void *s);
    void  (*close)(void *s);
    /* Optional, a variant of several processes (mpi under mpirun -np W;
     * NULL: this process evaluates every batch). share: the global batches
     * [*lo, *hi) of the nbatches this process evaluates, a contiguous run,
     * rank 0's first (empty where W > nbatches). combine, collective after
     * every process's share: *loss (the exact sum of its per-example
     * losses) and counts[0 .. n) become every process's totals, exactly. */
    void  (*share)(void *s, uint64_t nbatches, uint64_t *lo, uint64_t *hi);
    int   (*combine)(void *s, dr_acc *loss, uint64_t *counts, uint32_t n, dr_err *err);
    /* Collective (with share): every process's n bytes (its predictions'
     * lines) concatenated in rank order into *all (malloc'd, *len bytes)
     * on rank 0, the process that writes; *all NULL on the others. */
    int   (*gather)(void *s, const void *mine, size_t n, void **all, size_t *len, dr_err *err);
} dr_infer_ops;

typedef struct dr_session dr_session;           /* a variant's open run */
struct dr_run_log;

typedef struct dr_variant {
    const char *name;
    const char *about;          /* one line for `distref variants` */
    const char *launcher;       /* how it is started: "" (directly) or e.g. "mpirun -np N" */

    /* DR_OK, or DR_EUNSUPPORTED with err saying what this variant cannot
     * run (a strategy, a numerics mode, an option) and what can. */
    int  (*supports)(const dr_run_plan *plan, dr_err *err);

    /* Builds the strategy's devices and the variables (initialized from
     * the seed, the same on every replica). data outlives the session. */
    int  (*open)(const dr_run_plan *plan, const dr_dataset *data, dr_session **out, dr_err *err);
    /* The strategy as built: replicas, devices and their byte counters. */
    const dr_strategy *(*strategy)(const dr_session *s);

    /* One synchronous step on a global batch from the harness's iterator
     * (batch->ids in the epoch's order; batch->offset is the core's split,
     * which a variant may not use except for auto-shard OFF, where every
     * worker's pipeline already rebatched its own stream). step is 1-based. */
    int  (*step)(dr_session *s, const dr_dist_batch *batch, uint64_t step, dr_step_report *out, dr_err *err);

    /* The variables as of now (P floats) and the optimizer slots
     * (P * nslots), and setting them on every replica (resume). */
    int  (*get_variables)(dr_session *s, float *params, float *slots, dr_err *err);
    int  (*set_variables)(dr_session *s, const float *params, const float *slots, dr_err *err);

    /* Adds the variant's fields to summary.json (devices, replicas_in_sync,
     * tpu timing, ...). */
    void (*summarize)(dr_session *s, json_object *summary);
    void (*close)(dr_session *s);

    /* Optional: a variant that schedules its own steps (parameter_server's
     * coordinator) trains here instead of through step(), logging and
     * checkpointing through log; it resumes from model_dir itself. NULL for
     * synchronous variants. */
    int  (*train)(dr_session *s, struct dr_run_log *log, dr_train_totals *out, dr_err *err);

    /* Optional: whether this process is the chief, the one that writes
     * model_dir (metrics.jsonl, checkpoints, summary.json), as TensorFlow's
     * chief does. A multi-process variant (MPI) answers for its rank; the
     * others still run every step, summarize and read checkpoints. NULL:
     * always (one process). */
    bool (*chief)(const dr_session *s);

    /* Optional: the gradient the last step applied (P floats, after the
     * all-reduce, the scaling, the accumulation and the clipping, rounded
     * once: what the optimizer read), for --trajectory's gradient/ tensors;
     * *applied false (grads untouched) when the step updated nothing (a
     * micro-step of --gradient_accumulation_steps, a step the loss scale
     * skipped). NULL: the variant does not expose it, and its trajectories
     * hold variables, slots and loss only. */
    int  (*get_gradients)(dr_session *s, float *grads, bool *applied, dr_err *err);

    /* Optional: mixed precision's loss-scale state (--dtype_policy=mixed_*:
     * scale, growth counter, skipped steps) for a checkpoint, and restoring
     * it on every replica (resume). NULL: the variant runs no mixed step. */
    int  (*get_loss_scale)(dr_session *s, dr_loss_scale *out, dr_err *err);
    int  (*set_loss_scale)(dr_session *s, const dr_loss_scale *ls, dr_err *err);
    /* Optional: evaluate's and predict's forward pass (dr_infer_ops). NULL:
     * the variant does not evaluate; evaluate and predict refuse it. */
    const dr_infer_ops *infer;
} dr_variant;

#endif
