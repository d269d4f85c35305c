/* distref core — the files a training run writes, and the rules for them.
 *
 *   metrics.jsonl  one line per step: step, epoch, loss (a decimal that
 *                  round-trips, %.9g) and loss_bits (the float's bits, so
 *                  bit identity is visible at a glance), examples, the
 *                  per-replica batch sizes and a hash of each replica's
 *                  example ids, plus the variant's extra fields
 *   ckpt.bin       the variables, slots and data position (checkpoint.h);
 *                  written together with metrics.jsonl, each atomically
 *   summary.json   final metrics and weights_sha256
 *   events.out.tfevents.*  TensorBoard scalars per step (tfevents.h),
 *                  one file per run segment, written with each checkpoint
 *
 * A dr_run_log keeps metrics.jsonl in memory (an earlier run's lines are
 * loaded and cut back to the resumed step) and writes it with each
 * checkpoint. Used by the harness's training loop and by variants that
 * schedule their own steps (parameter_server).
 */
#ifndef DISTREF_RUN_LOG_H
#define DISTREF_RUN_LOG_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include "distref/checkpoint.h"
#include "distref/error.h"
#include "distref/strategy.h"
#include "distref/tfevents.h"
#include "distref/train.h"
#include "distref/variant.h"

typedef struct dr_run_log {
    const dr_run_config *cfg;
    char    *metrics;            /* metrics.jsonl so far */
    size_t   len, cap;
    double   t_start;
    /* TensorBoard: the segment's events, and what its scalars need (set by
     * the caller after dr_run_log_open; learning_rate NaN leaves it out) */
    dr_tfevents events;
    double   t_prev;             /* when the previous step ended */
    float    learning_rate;
    const dr_lr_schedule *schedule;  /* NULL: learning_rate every step; else the scheduled rate of the step */
    bool     accuracy;           /* a classification experiment */
    /* The run's topology, a JSON object's text (dr_run_log_set_segment):
     * the first line of each segment carries it as "segment" */
    char     segment[256];
    bool     segment_checked;    /* this process's first line has been written */
} dr_run_log;

/* Loads model_dir/metrics.jsonl of an earlier run, if any. */
int  dr_run_log_open(dr_run_log *l, const dr_run_config *cfg, dr_err *err);
/* The same; writer false (an MPI rank other than the chief, which writes
 * model_dir alone) leaves the temp files of killed writes to the chief: a
 * late rank's clean-up would delete the temp file the chief is writing. */
int  dr_run_log_open_as(dr_run_log *l, const dr_run_config *cfg, bool writer, dr_err *err);
void dr_run_log_free(dr_run_log *l);
/* Keeps the lines of steps up to `step` (what the checkpoint covers). */
void dr_run_log_trim(dr_run_log *l, uint64_t step);
/* One metrics.jsonl line (and the step's TensorBoard scalars). */
int  dr_run_log_step(dr_run_log *l, uint64_t step, uint32_t epoch, const dr_step_report *rep, dr_err *err);
/* metrics.jsonl, the events file, then ckpt.bin (the commit), each written atomically. */
int  dr_run_log_save(dr_run_log *l, const dr_checkpoint *c, dr_err *err);
/* A file that must agree with the checkpoint (parameter_server's
 * ps_schedule.json, the free schedule's ps_schedule.jsonl): written with
 * it, before its commit, and read back relative to it (it may run ahead of
 * ckpt.bin, never behind; docs/RUN_DIRECTORY.md, "Files and the commit"). */
typedef struct dr_ckpt_part {
    const char *name;             /* in model_dir */
    const void *data;
    size_t      len;
} dr_ckpt_part;
/* dr_run_log_save with the parts: metrics.jsonl, the events file, each
 * part, then ckpt.bin, whose rename is the one commit of them all. */
int  dr_run_log_commit(dr_run_log *l, const dr_checkpoint *c, const dr_ckpt_part *parts, size_t nparts,
                       dr_err *err);
/* Segments: the steps of a run directory, cut where the topology changes
 * (strategy, variant, workers, replicas, numerics). The first metrics.jsonl
 * line of each carries "segment":{...}; a resume under the same topology
 * continues its segment and writes no marker, so the files of a resumed run
 * are the uninterrupted run's. Set before the first dr_run_log_step. */
void dr_run_log_set_segment(dr_run_log *l, const char *json_object_text);
/* The topology of the last segment in metrics.jsonl as it stands (load it,
 * trim it first): false when there is no line or its segment has no marker. */
bool dr_run_log_last_segment(const dr_run_log *l, char *buf, size_t n);
/* summary.json's "segments": the topology of each segment with its
 * first_step and last_step (a segment without a marker: "unrecorded"). */
json_object *dr_run_log_segments(const dr_run_log *l);
/* The progress bar on stderr (--progress). */
void dr_run_log_progress(const dr_run_log *l, uint64_t step, uint32_t epoch, uint32_t epochs, float loss);
/* Writes summary.json (takes ownership of o). */
int  dr_run_log_summary(dr_run_log *l, json_object *o, dr_err *err);

/* The per-device report of summary.json: name, peak bytes, bytes in/out. */
json_object *dr_devices_json(const dr_strategy *s);
/* SHA-256 of the parameters' little-endian bits. */
void dr_weights_sha256(const float *params, size_t n, char hex[65]);
/* "%.9g", or "null" for inf and NaN (JSON has neither). */
const char *dr_json_float(float x, char *buf, size_t n);
double dr_now(void);   /* monotonic seconds */

#endif
