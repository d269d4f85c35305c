/* distref harness — running training through a variant, and the registry
 * of variants.
 *
 * The harness sits above the reference and the engine (docs/ARCHITECTURE.md)
 * and reaches both only through their dr_variant tables (distref/variant.h):
 * it resolves the plan, loads the data, iterates the epochs, resumes from
 * and writes checkpoints, writes metrics.jsonl and summary.json, and asks
 * the variant for each step. cli/, conformance/ and bench/ use it.
 */
#ifndef DISTREF_HARNESS_H
#define DISTREF_HARNESS_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_REF) || defined(DR_LAYER_ENGINE)
#error "distref/harness.h is the harness's: core/, ref/, strategies/ and devices/ may not include it"
#endif

#include <stdio.h>
#include "distref/error.h"
#include "distref/factory.h"
#include "distref/flags.h"
#include "distref/train.h"
#include "distref/variant.h"

/* The registered variants, in order (ref first); *n gets their count. */
const dr_variant *const *dr_variants(size_t *n);
/* The variant named by --variant; DR_EUSAGE listing the names otherwise. */
int  dr_variant_lookup(const char *name, const dr_variant **out, dr_err *err);
/* `distref variants`: each variant, how it is launched, and the
 * strategy x numerics cells it supports (or why not). */
void dr_variants_print(FILE *out);

/* Called first thing in a program's main: re-executes the program once
 * with GOMP_SPINCOUNT=1000 (OpenMP threads spin briefly, then sleep)
 * unless the caller set OMP_WAIT_POLICY or GOMP_SPINCOUNT
 * (harness/omp_policy.c says why); returns when it did not. */
void dr_omp_short_spin_reexec(char **argv);

/* Trains cfg with cfg->variant into cfg->model_dir, resuming from a
 * checkpoint there. Outputs: metrics.jsonl (a line per step: loss,
 * loss_bits, per-replica batch sizes and example-id hashes), summary.json
 * (final metrics, weights_sha256, bytes moved and peak memory per emulated
 * device), ckpt.bin. */
int dr_run_train(const dr_run_config *cfg, dr_run_result *res, dr_err *err);

/* Whether cfg's variant runs cfg's strategy, numerics and options at all:
 * what it refuses (DR_EUNSUPPORTED from the plan or the variant's supports,
 * e.g. --numerics=fast under ref, parameter_server under openmp) comes back
 * as DR_EUSAGE, the caller's combination of flags; nothing is opened. */
int dr_run_check_supported(const dr_run_config *cfg, dr_err *err);

/* Model Garden's train_and_eval (harness/train_and_eval.c): train an epoch,
 * evaluate, repeat, each epoch resuming from the last one's checkpoint (the
 * same bits as one uninterrupted run), a line each on out; with
 * --train_steps once. A directory trained before continues from the last
 * epoch its checkpoint finished. */
int  dr_run_train_and_eval(dr_run_config *cfg, FILE *out, dr_err *err);
/* The experiment has an accuracy (a classifier; a regression has none). */
bool dr_classifier(const dr_run_config *cfg);

/* Loads model_dir's checkpoint and evaluates on the test split (evaluate)
 * or writes model_dir/predictions.jsonl (predict), distributed the same
 * way. Both run the reference's forward pass: a checkpoint is the same
 * numbers whichever variant trained it. When evaluate computed its result
 * but could not write model_dir/eval.json (a read-only directory, a full
 * disk), it returns the write's error with *res filled in (res->examples >
 * 0), so the caller can still show it; on any other error res->examples is
 * 0. */
int dr_run_evaluate(const dr_run_config *cfg, dr_run_result *res, dr_err *err);
int dr_run_predict(const dr_run_config *cfg, dr_run_result *res, dr_err *err);

/* Whether the flag called name was given on the command line. */
bool dr_flag_given(const dr_flag *f, int n, const char *name);
/* A flag that applies only to some strategies, variants or commands, given
 * anywhere else, would be ignored: DR_EUSAGE naming it and what it is for
 * (harness/flag_scopes.c holds the table). */
int  dr_flag_scopes_check(const dr_flag *f, int n, dr_strategy_kind kind, const char *command, const char *variant,
                          dr_err *err);

/* The result lines (harness/result_lines.c), each only what its command computed:
 * train's steps, loss, accuracy (a classifier's only), weights and topology,
 * or "already complete at step N; nothing run", and a "resumed at step K"
 * line naming the earlier topology where it differs; evaluate's checkpoint
 * step, loss and accuracy; predict's count and file. */
void dr_report_train(FILE *out, const char *what, const dr_run_result *r, const char *model_dir, bool accuracy);
void dr_report_evaluate(FILE *out, const char *what, const dr_run_result *r, bool accuracy);
void dr_report_predict(FILE *out, const dr_run_result *r, const char *model_dir);

/* --variant=mpi (harness/mpi_cluster.c): the TF_CONFIG of this MPI rank.
 * given (the environment's TF_CONFIG) is checked against the MPI world (its
 * training workers = the ranks, this task's id = the rank: DR_EUSAGE naming
 * both otherwise) and copied; absent, it is derived from the world (N
 * workers, task index = rank, rank 0 the chief). Collective when derived.
 * With ps (parameter_server) the ranks are the chief (rank 0), the workers
 * (1 .. W) and the ps tasks (W+1 .. W+P): given, chief + worker + ps tasks
 * must number the ranks (a cluster without a chief gets one, as the
 * reference emulates it) and a task, if given, must be this rank's; a
 * TF_CONFIG without a task takes the rank's; absent, it is derived as a
 * chief, N-2 workers and one ps task (N >= 3).
 * *out is the caller's to free. */
int dr_mpi_tf_config(const char *given, bool ps, char **out, dr_err *err);

/* `distref export`: writes into cfg->model_dir what another framework needs
 * to reproduce the run (harness/export.c): what = init (the initial
 * variables, Keras layout), data (x and y as the model sees them), batches
 * (every step's example ids per replica after the split, batches.json) or
 * all; format = npy or json. */
int dr_run_export(const dr_run_config *cfg, const char *what, const char *format, dr_err *err);

#endif
