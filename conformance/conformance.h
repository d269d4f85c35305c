/* distref conformance — shared definitions of the runner.
 *
 * A case trains one configuration through the library into a temporary
 * model_dir and reads back what it wrote (metrics.jsonl, the final weights
 * from ckpt.bin). Suites compare cases against the reference and record a
 * verdict; report.c turns the verdicts and the series into results.json,
 * junit.xml, gnuplot data and index.html under reports/out/.
 */
#ifndef DISTREF_CONFORMANCE_H
#define DISTREF_CONFORMANCE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "distref/harness.h"
#include "distref/train.h"

#define MAX_STEPS 400
#define MAX_REPLICAS 8

typedef struct outcome {
    uint32_t nsteps;
    float    loss[MAX_STEPS];
    uint32_t loss_bits[MAX_STEPS];
    uint32_t sizes[MAX_STEPS][MAX_REPLICAS];
    char     ids[MAX_STEPS][MAX_REPLICAS][17];
    uint32_t nreplicas;
    float    loss_scale[MAX_STEPS]; /* mixed precision: the step's "loss_scale" (0: absent) */
    uint8_t  skipped[MAX_STEPS];    /* "skipped": 0 absent, 1 false, 2 true */
    char     sha[65];
    float   *weights;            /* final weights (malloc'd) */
    uint32_t nweights;
    double   seconds;
    char     error[512];         /* non-empty when the run failed */
} outcome;

/* pass, fail, or not supported: a cell that did not run (conformance/verdict.c) */
typedef enum verdict_kind { VERDICT_PASS, VERDICT_FAIL, VERDICT_NOT_SUPPORTED } verdict_kind;

typedef struct verdict {
    char suite[24];
    char name[160];
    char variant[16], strategy[24], mode[16];
    int  replicas;
    verdict_kind kind;
    char reason[200];            /* not supported: the variant's (or the platform's) reason */
    double seconds;
} verdict;

typedef struct tally { size_t passed, failed, not_supported; } tally;

typedef struct results {
    verdict *v;
    size_t   n, cap;
    const char *fault;           /* non-NULL in a mutant build: the planted fault's name */
    size_t   fault_failures;     /* failures recorded under the current fault */
    char     fault_suites[256];  /* which suites noticed it */
    FILE    *faults_dat;         /* fault x suite matrix for the report */
    bool     quick;
    bool     full;               /* FULL=1: Fashion-MNIST and longer runs too */
    const char *bin;             /* the distref the launched suites run (--bin; default the build's) */
    const char *only;            /* --only SUITE[,SUITE]: those suites alone (NULL: all) */
    const char *variant;         /* --variant NAME: the one variant the suites run (NULL: all; "ref": none
                                    of the engine's, the reference's cases only) */
} results;

double now(void);   /* monotonic seconds */
/* make nightly's planted regressions (DISTREF_NIGHTLY_PLANT, conformance/nightly_plant.c):
 * called once before the exit; t0 = the run's start (now()). */
void conformance_nightly_plant(const char *variant, double t0);

/* Runs cfg into a fresh temporary directory; fills out (out->error on failure). */
void run_case(const dr_run_config *cfg, outcome *out);
/* The same, never from the runner's memo: for reproducibility checks. */
void run_fresh_case(const dr_run_config *cfg, outcome *out);
void outcome_free(outcome *o);
/* Same loss_bits at every step and the same weights_sha256. */
bool outcome_same(const outcome *a, const outcome *b);
/* The same over a run's every step and its whole weights (present in
 * both), and false with the first difference (or an error) in why. */
bool outcome_same_why(const outcome *a, const outcome *b, char *why, size_t n);
/* The distance of two floats in units in the last place (-0 and +0: 0). */
double ulp_distance(float a, float b);
/* A fast run against an exact oracle: the largest relative loss difference
 * over their common steps, and over the final weights the ULP distances'
 * 99th percentile and maximum and the fraction that differ. false (and
 * every figure INFINITY but differ) when the weights cannot be compared:
 * missing, or another count of weights or steps. */
bool outcome_drift(const outcome *got, const outcome *ref, double *max_rel, double *p99, double *max_ulp,
                   double *differ);

/* A base configuration: mlp_synthetic, small data, one epoch. */
void base_config(dr_run_config *c, uint32_t examples, uint32_t G, double l2);
/* A model beyond Dense (cnn_synthetic, resnet_synthetic): base_config at
 * G = 32 without l2, `steps` steps, synchronized BN. */
void graph_config(dr_run_config *c, const char *experiment, uint32_t examples, uint64_t steps);
bool set_strategy(dr_run_config *c, const char *name, int gpus, const char *alg, int packs);

/* The verdict book (conformance/verdict.c). A case that ran: pass or fail. */
void record(results *r, const char *suite, const dr_run_config *c, int replicas,
            bool pass, double seconds, const char *fmt, ...);
/* A case that did not run because the variant (or the platform) cannot
 * give it: "not supported" with the reason, neither a pass nor a failure. */
void record_not_supported(results *r, const char *suite, const dr_run_config *c, int replicas,
                          const char *reason, const char *fmt, ...);
/* A (variant, configuration) cell the variant does not support: recorded
 * as "not supported" with the variant's reason, never skipped silently.
 * Returns true when c is supported (and records nothing). */
bool supported(results *r, const char *suite, const dr_run_config *c, int replicas);
/* "pass", "fail", "not_supported": results.json's words */
const char *verdict_word(verdict_kind k);
tally count_verdicts(const results *r);
/* "N passed, N failed, N not supported" (the prefix "N passed, N failed"
 * is what scripts read) */
void format_summary(char *buf, size_t n, const tally *t);
/* metrics.jsonl, ckpt.bin's weights and summary.json's weights_sha256 of a
 * run directory written by another process. */
void read_outcome(const char *dir, outcome *out);
/* mpirun -np 2 DISTREF train --variant=mpi, multi_worker_mirrored over 2
 * ranks x 1 GPU, --seed=7 and ARGS, into a fresh temporary model_dir: the
 * suites' two-rank cell (mpi.c and mpi_ps.c launch their own shapes). */
void run_mpi_pair(const results *r, const char *args, outcome *out);
/* The same with `gpus` replicas on each rank (2 workers x gpus). */
void run_mpi_ranks(const results *r, int gpus, const char *args, outcome *out);
/* The engine variants of the registry that run in this process (every
 * variant but the reference and those with a launcher, such as mpi), or
 * only r->variant when it is set (--variant NAME). */
const dr_variant *const *engine_variants(const results *r, size_t *n);
/* suite models' engine cells (conformance/models_engine.c): sync1 is the
 * reference's cnn_synthetic sync BN one_device run */
int models_engine_cells(results *r, const outcome *sync1);
/* suite models' --gradient_accumulation_steps cells (conformance/models_accum.c) */
int models_accum_cells(results *r);
/* suite models' --dropout_masks cells over several workers (conformance/models_masks.c) */
int models_masks_cells(results *r);
/* suite models' evaluate and predict cells (conformance/models_evaluate.c) */
int models_evaluate_cells(results *r);
/* suite models' parameter_server cells (conformance/models_ps.c) */
int models_ps_cells(results *r);

/* Suites: each returns the number of failures it recorded. */
/* loss_curves, in parts (each a unit of work for the lanes): every strategy x
 * replica count x all-reduce without and with L2, the tpu topologies, and the
 * parameter_server cells with the longer run for the plot and fast mode. */
int loss_curves_identity(results *r, const char *outdir);
int loss_curves_identity_l2(results *r, const char *outdir);
int loss_curves_tpu(results *r, const char *outdir);
int loss_curves_long(results *r, const char *outdir);
int suite_batch_splitting(results *r, const char *outdir);
int suite_regularization(results *r, const char *outdir);
int suite_reductions(results *r);
/* Part of loss_curves: a third of the images blank (conformance/blank_images.c). */
int loss_curves_blank_images(results *r);
/* Part of loss_curves: policies, input modes and divisors (conformance/policies.c). */
int loss_curves_policies(results *r);
/* the opencl variant's replica mappings: shared, queues, subdevices, a device list (conformance/opencl_mapping.c) */
int loss_curves_opencl_mappings(results *r);
int suite_checkpoints(results *r);
int suite_durability(results *r);
/* The mpi variant under mpirun (conformance/mpi.c). */
int suite_compact(results *r);  /* compact accumulators and their fallback (conformance/compact.c) */
int suite_mpi(results *r);
int suite_mpi_ps(results *r);
/* suite mpi's evaluate and predict cells across ranks (conformance/mpi_eval.c) */
int suite_mpi_eval(results *r);
/* conformance/mpi_ps.c: parameter_server over MPI with the models beyond Dense, recorded under suite */
int mpi_ps_model_cells(results *r, const char *suite);
/* The mpi variant across network-namespace hosts over TCP (conformance/hosts.c). */
int suite_hosts(results *r);   /* parameter_server over MPI ranks (conformance/mpi_ps.c) */
/* --lr_schedule and the clipping flags, every strategy x variant (conformance/training_features.c) */
int suite_schedules(results *r);
/* suite mixed_precision: a --numerics=fast mixed run's largest relative
 * loss difference from the exact oracle's (conformance/mixed_precision.c's
 * Dense cells, mixed_graph_cells.c's cnn_synthetic ones; measured in
 * docs/TRAINING_FEATURES.md) */
#define MIXED_FAST_BOUND 5e-5
/* suite mixed_precision: where a feature's mixed cells run (conformance/mixed_places.c) */
typedef struct mixed_place { const char *name; int gpus; const char *alg; int packs, replicas; } mixed_place;
enum { MIXED_PLACES = 4 };
extern const mixed_place k_mixed_places[MIXED_PLACES];
/* setup(c) (base_config and the feature's flags), then float16 with
 * --loss_scale=dynamic:2^20, the reduction (tf: tensorflow), place p and
 * the variant */
void mixed_place_config(dr_run_config *c, void (*setup)(dr_run_config *), bool tf, const mixed_place *p,
                        const char *variant);
/* variant's cells at k_mixed_places[first..last] against oracle, each
 * recorded as "VARIANT WHAT overflow float16 ..."; the number failed */
int mixed_place_cells(results *r, void (*setup)(dr_run_config *), const char *what, const char *variant, bool tf,
                      const outcome *oracle, size_t first, size_t last, const char *oracle_what);
/* suite mixed_precision's --gradient_accumulation_steps cells (conformance/mixed_accum_cells.c) */
int mixed_accum_cells(results *r);
/* suite mixed_precision's --l2 cells (conformance/mixed_l2_cells.c) */
int mixed_l2_cells(results *r);
/* suite mixed_precision's central_storage and tpu cells (conformance/mixed_strategies.c) */
int mixed_strategy_cells(results *r);
/* suite mixed_precision's --clip_semantics=tensorflow cells (conformance/mixed_clip_cells.c) */
int mixed_clip_cells(results *r);
/* suite mixed_precision's cnn_synthetic cells (conformance/mixed_graph_cells.c) */
int mixed_graph_cells(results *r);
/* suite mixed_precision's spatial partitioning cells (conformance/mixed_spatial_cells.c) */
int mixed_spatial_cells(results *r);
int suite_clipping(results *r);
int suite_accumulation(results *r);   /* --gradient_accumulation_steps: the k·R invariance */
int suite_models(results *r);         /* models beyond the MLP: sync/replica BN (conformance/models.c) */
/* Part of accumulation (conformance/accumulation_cells.c): the compact
 * accumulators' fallback under accumulation; Adam, clipping and a schedule
 * with it, each engine variant against the reference. */
int accumulation_fallback(results *r);
int accumulation_features(results *r);
/* --clip_semantics=tensorflow under accumulation: per replica, at the update (accumulation_cells.c) */
int accumulation_replica_clip(results *r);
/* the tpu strategy's accumulation and per-replica clip cells (conformance/tpu_feature_cells.c) */
int accumulation_tpu(results *r, const outcome *one_step);
int clipping_tpu(results *r);
/* a run against its oracle (training_features.c): exact, the same bits; fast, within the fast bounds */
int feature_judge(results *r, const char *suite, const dr_run_config *c, int R, const outcome *got,
                  const outcome *ref, bool exact, const char *what);
int suite_mixed_precision(results *r);   /* --dtype_policy=mixed_*: exact, tensorflow, overflow (mixed_precision.c) */

/* An output file written whole or not at all (conformance/outfile.c):
 * outfile_open gives a FILE that writes to memory; outfile_commit closes it
 * and writes the text to path atomically (0, or 1 with a message). */
typedef struct outfile { FILE *f; char *text; size_t n; } outfile;
FILE *outfile_open(outfile *o);
int outfile_commit(outfile *o, const char *path);

/* Report (conformance/report.c): results.json, junit.xml, index.html; the
 * matrix picture (conformance/report_matrix.c). */
int write_report(const results *r, const char *outdir, double seconds);
/* The matrix picture into html (inline SVG) and outdir/matrix.dat. */
int write_matrix(const results *r, const char *outdir, FILE *html);
/* s with < > & " as XML entities */
void xml_escape(FILE *f, const char *s);

/* Parallel lanes (conformance/lanes.c). A unit is one suite or one part of
 * a suite; the table of units (conformance/main.c) is the report's order.
 * `alone` units launch process groups of their own (mpirun, namespace
 * hosts) and run after the lanes, in this process, by themselves. */
typedef struct unit {
    const char *suite;
    int (*run)(results *r, const char *outdir);
    bool alone;
} unit;

/* Runs the units whose suite is wanted: with jobs > 1, in that many forked
 * lanes taking units in table order as they come free; the console lines and
 * verdicts are then replayed in table order, as a serial run prints them.
 * A lane that dies leaves its unit recorded as a failure. Returns the
 * failures recorded. */
int run_units(results *r, const char *outdir, const unit *u, size_t n, bool (*wanted)(const char *, const char *),
              int jobs);

#endif
