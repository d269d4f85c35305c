/* distref strategies — the planted faults' seams, in one place.
 *
 * A library function reads as production code: where a planted fault can
 * change it, it reads a named seam, DR_SEAM_*, whose production body is
 * below, beside the faulty body a mutant build compiles in with
 * -DDR_MUTANT_<NAME> (tests/faults.tsv lists every fault, its harness and
 * the test or suite that must catch it; scripts/check_faults.sh checks the
 * list against these seams). No rule of a normal build defines a
 * DR_MUTANT_* name. Statement seams are ((void)0) in production.
 *
 * Include it after the file's other headers (some faulty bodies use them).
 */
#ifndef DISTREF_STRATEGIES_SEAMS_H
#define DISTREF_STRATEGIES_SEAMS_H

/* ---- split.c ------------------------------------------------------------------- */

/* DATA sharding: the slice j = r*W + w whose first row of the global batch
 * is where replica r of worker w reads --dropout_masks (row0); its examples
 * are that slice's either way. */
#if defined(DR_MUTANT_DATA_ROW0_NO_WORKER)   /* the worker's offset left out: worker w reads worker 0's rows */
#define DR_SEAM_DATA_ROW0_SLICE(j, w) ((j) - (w))
#else
#define DR_SEAM_DATA_ROW0_SLICE(j, w) ((void)(w), (j))
#endif

/* ---- step.c -------------------------------------------------------------------- */

/* The engine's split of an uneven batch, s->off (statement). */
#if defined(DR_MUTANT_WRONG_SPLIT)   /* the extras go to the last replicas */
static inline void dr_seam_wrong_split(dr_session *s)
{
    if (s->count % s->R) {
        uint32_t nominal[DR_MAX_DEVICES];
        for (uint32_t r = 0; r < s->R; r++) nominal[r] = s->off[s->R - r] - s->off[s->R - r - 1];
        for (uint32_t r = 0; r < s->R; r++) s->off[r + 1] = s->off[r] + nominal[r];
    }
}
#define DR_SEAM_SPLIT_EXTRAS(s) dr_seam_wrong_split(s)
#else
#define DR_SEAM_SPLIT_EXTRAS(s) ((void)0)
#endif

/* A final short batch, as split (statement on s->off and s->count). */
#if defined(DR_MUTANT_DROP_SHORT)    /* one example dropped from it */
static inline void dr_seam_drop_short(dr_session *s)
{
    if (s->count < s->plan->G && s->count > 0) {
        uint32_t last = s->R;
        while (last > 0 && s->off[last] == s->off[last - 1]) last--;
        for (uint32_t r = last; r <= s->R; r++) if (r > 0) s->off[r]--;
        s->count--;
    }
}
#define DR_SEAM_SHORT_BATCH(s) dr_seam_drop_short(s)
#else
#define DR_SEAM_SHORT_BATCH(s) ((void)0)
#endif

/* The n examples ids staged on replica r (statement on ids). */
#if defined(DR_MUTANT_STAGE_WRONG_REPLICA)   /* replica 0 gets its neighbour's first examples */
#define DR_SEAM_STAGE_IDS(ids, s, r, n) \
    ((r) == 0 && (s)->R > 1 && (n) > 0 && (s)->off[2] - (s)->off[1] >= (n) ? (void)((ids) = (s)->ids + (s)->off[1]) \
                                                                           : (void)0)
#else
#define DR_SEAM_STAGE_IDS(ids, s, r, n) ((void)0)
#endif

/* The divisor of the gradients' sum: den (the loss's), over R replicas. */
#if defined(DR_MUTANT_MEAN_NOT_SUM)   /* all-reduced with MEAN instead of SUM */
#define DR_SEAM_GRAD_DIVISOR(den, R) ((den) * (R))
#else
#define DR_SEAM_GRAD_DIVISOR(den, R) (den)
#endif

/* The divisor of an accumulated total: d (one micro-step's: den, or 1 for
 * a float total) times the k micro-steps (--gradient_accumulation_steps). */
#if defined(DR_MUTANT_ACCUM_K_TWICE)   /* divides by k twice */
#define DR_SEAM_ACCUM_DIVISOR(d, k) ((d) * (k) * (k))
#else
#define DR_SEAM_ACCUM_DIVISOR(d, k) ((d) * (k))
#endif

/* --clip_semantics=tensorflow under accumulation: the divisor a replica's
 * update share is clipped over (step.c's engine_accum_clip): d = k*D*R, the
 * mean of its k micro-steps, as Keras 3's (g + acc) / k before its clip. */
#if defined(DR_MUTANT_ACCUM_CLIP_SUM)   /* clips the replica's sum of its k gradients, then divides by k */
#define DR_SEAM_ACCUM_CLIP_DIVISOR(d, k) ((d) / (k))
#else
#define DR_SEAM_ACCUM_CLIP_DIVISOR(d, k) ((void)(k), (d))
#endif

/* The divisor noted with the total an update applied, for --trajectory's
 * gradient/ (engine_note_applied): apply's own. */
#if defined(DR_MUTANT_TRAJ_GRAD_UNSCALED)       /* the all-reduced sum, before the scaling */
#define DR_SEAM_RECORDED_DIVISOR(d, s) ((void)(d), (void)(s), 1u)
#elif defined(DR_MUTANT_TRAJ_GRAD_MICRO_DIVISOR) /* accumulation: one micro-step's divisor, not k times it */
#define DR_SEAM_RECORDED_DIVISOR(d, s) ((s)->k > 1 ? (d) / (s)->k : (d))
#else
#define DR_SEAM_RECORDED_DIVISOR(d, s) ((void)(s), (d))
#endif

/* A compact total's flags, read for an overflowed element (the step is then redone). */
#if defined(DR_MUTANT_CACC_NO_FALLBACK)   /* none seen: an overflowed element goes on to be rounded */
#define DR_SEAM_TOTAL_FLAGS(f) ((void)(f), 0u)
#else
#define DR_SEAM_TOTAL_FLAGS(f) (f)
#endif

/* ---- round_once.c --------------------------------------------------------------- */

/* The divisor the comm's all_reduce_round rounds each exact total over. */
#if defined(DR_MUTANT_MPI_ROUND_ONCE_DIVISOR)   /* off by one: round(total / (d + 1)) */
#define DR_SEAM_ROUND_DIVISOR(d) ((d) + 1)
#else
#define DR_SEAM_ROUND_DIVISOR(d) (d)
#endif

/* The replica whose examples local replica r trains on (s: the session). */
#if defined(DR_MUTANT_MPI_SHARD_SWAP)   /* a rank reads w*L+r as r*W+w: same exact sum, wrong shard */
#define DR_SEAM_SHARD_OF(r, s) ((s)->ranks ? ((r) % (s)->L) * (s)->W + (r) / (s)->L : (r))
#else
#define DR_SEAM_SHARD_OF(r, s) (r)
#endif

/* ---- engine_tpu.c --------------------------------------------------------------- */

/* The examples of a padded replica batch of `rows` rows (statement on n). */
#if defined(DR_MUTANT_PAD_UNMASKED)   /* the padding counted as examples */
#define DR_SEAM_PAD_EXAMPLES(n, rows) ((n) = (rows))
#else
#define DR_SEAM_PAD_EXAMPLES(n, rows) ((void)0)
#endif

/* --gradient_accumulation_steps under tpu: whether this micro-step closes
 * an update, after its shares were accumulated (call: engine_accumulate). */
#if defined(DR_MUTANT_TPU_ACCUM_LAST_ONLY)   /* nothing accumulated: an update applies its own micro-step's shares */
#define DR_SEAM_TPU_ACCUMULATE(call, s) ((s)->step % (s)->k == 0)
#else
#define DR_SEAM_TPU_ACCUMULATE(call, s) ((void)(s), (call))
#endif

/* ---- ps_mpi.c ------------------------------------------------------------ */

/* The coordinator skips landed update ev (it is logged, never applied). */
#if defined(DR_MUTANT_MPI_PS_DROP_UPDATE)   /* drops the third landed update */
#define DR_SEAM_PS_SKIP_LANDED(ev) ((ev)->version == 3)
#else
#define DR_SEAM_PS_SKIP_LANDED(ev) 0
#endif

/* A resumed free run records the order it re-walks (record: it records). */
#if defined(DR_MUTANT_PS_FREE_RESUME_UNRECORDED)   /* the re-walked order left out */
#define DR_SEAM_PS_RECORD_REWALK(record) (0 && (record))
#else
#define DR_SEAM_PS_RECORD_REWALK(record) (record)
#endif

/* The batches a resumed worker skips (statement on skip). */
#if defined(DR_MUTANT_PS_RESUME_NO_SKIP)   /* starts its data over instead */
#define DR_SEAM_PS_RESUME_SKIP(skip) ((skip) = 0)
#else
#define DR_SEAM_PS_RESUME_SKIP(skip) ((void)0)
#endif

/* ---- ps_mpi_faults.c ----------------------------------------------------- */

/* A dead worker's closure, taken back into the queue (statement on the
 * schedule s). */
#if defined(DR_MUTANT_PS_DEAD_CLOSURE_DROPPED)   /* dropped instead of re-run */
#define DR_SEAM_PS_DEAD_CLOSURE(s) ((s)->qhead = ((s)->qhead + 1) % (s)->qcap, (s)->qlen--)
#else
#define DR_SEAM_PS_DEAD_CLOSURE(s) ((void)0)
#endif

/* A recovered worker starts its data over (rebuild: 1, statement). */
#if defined(DR_MUTANT_PS_RECOVER_NO_REBUILD)   /* keeps its iterator instead */
#define DR_SEAM_PS_RECOVER_REBUILD(rebuild) ((rebuild) = 0)
#else
#define DR_SEAM_PS_RECOVER_REBUILD(rebuild) ((void)0)
#endif

/* ---- mixed.c ------------------------------------------------------------------- */

/* The loss scale's skip decision: from the all-reduced total (global). */
#if defined(DR_MUTANT_MIXED_LOCAL_SKIP)   /* from the worker's first replica's own partial, before the reduction */
#define DR_SEAM_MIXED_LOCAL_CHECK(s, i, part) ((void)((s)->mixed->local_finite[i] = engine_mixed_part_finite((s), (part))))
#define DR_SEAM_MIXED_FINITE(s, i, global) ((s)->mixed->local_finite[i])
#else
#define DR_SEAM_MIXED_LOCAL_CHECK(s, i, part) ((void)(s), (void)(i), (void)(part))
#define DR_SEAM_MIXED_FINITE(s, i, global) (global)
#endif

/* A model beyond Dense: BatchNormalization's gamma and beta gradients, the
 * exact total rounded to float32 (f32), as the float32 variables they are. */
#if defined(DR_MUTANT_ENGINE_MIXED_BN_GRAD_C)   /* left rounded to the compute dtype, as the other weights' */
#define DR_SEAM_MIXED_BN_GRAD(f32, c) ((void)(f32), (c))
#else
#define DR_SEAM_MIXED_BN_GRAD(f32, c) ((void)(c), (f32))
#endif

/* --mixed_reduction=tensorflow on a model beyond Dense: each replica's
 * gamma and beta partials rounded to float32 (float32 variables) before the
 * all-reduce; the call overwrites them in the replica's c-rounded gradient. */
#if defined(DR_MUTANT_MIXED_TF_BN_PARTIAL_C)   /* left rounded to the compute dtype, as the kernels' */
#define DR_SEAM_MIXED_TF_BN_PARTIAL(call) ((void)0)
#else
#define DR_SEAM_MIXED_TF_BN_PARTIAL(call) ((void)(call))
#endif

/* The rounded gradient g unscaled by the step's loss scale. */
#if defined(DR_MUTANT_MIXED_UNSCALE_TWICE)     /* divided by the scale twice */
#define DR_SEAM_MIXED_UNSCALE(g, scale) ((g) / (scale) / (scale))
#elif defined(DR_MUTANT_MIXED_UNSCALE_NONE)    /* not divided: the loss scale reaches the optimizer */
#define DR_SEAM_MIXED_UNSCALE(g, scale) ((void)(scale), (g))
#else
#define DR_SEAM_MIXED_UNSCALE(g, scale) ((g) / (scale))
#endif

/* The mixed step's clipping: of the aggregated gradient after the unscale
 * (Keras 3's LossScaleOptimizer unscales, then its inner optimizer clips;
 * measured); under the fault, of the still-scaled gradient before it. */
#if defined(DR_MUTANT_MIXED_CLIP_SCALED)
#define DR_SEAM_MIXED_CLIP_SCALED(s, g) ((s)->bo->clip_f32 ? (s)->bo->clip_f32((s)->be, (g)) : (void)0)
#define DR_SEAM_MIXED_CLIP(s, g) ((void)(s), (void)(g))
#else
#define DR_SEAM_MIXED_CLIP_SCALED(s, g) ((void)(s), (void)(g))
#define DR_SEAM_MIXED_CLIP(s, g) ((s)->bo->clip_f32 ? (s)->bo->clip_f32((s)->be, (g)) : (void)0)
#endif

/* --gradient_accumulation_steps with a mixed policy: the update closes on
 * the k-th finite micro-step (Keras 3 drops a skipped one); under the fault
 * on every k-th micro-step, skipped ones counted (as zero gradients). */
#if defined(DR_MUTANT_MIXED_ACCUM_COUNTS_SKIPPED)
#define DR_SEAM_MIXED_ACCUM_AT(applied, step) ((void)(applied), (step))
#else
#define DR_SEAM_MIXED_ACCUM_AT(applied, step) ((void)(step), (applied))
#endif

/* The loss scale a mixed step reports in metrics.jsonl: the one the step
 * used; under the fault the one after the step's update (the series moves,
 * the bits do not). */
#if defined(DR_MUTANT_MIXED_SCALE_AFTER_UPDATE)
#define DR_SEAM_MIXED_REPORTED_SCALE(used, after) (after)
#else
#define DR_SEAM_MIXED_REPORTED_SCALE(used, after) ((void)(after), (used))
#endif


/* ---- graph.c ----------------------------------------------------------------------- */

/* Sync BatchNormalization's forward sums all-reduced across replicas (an expression: its rc). */
#if defined(DR_MUTANT_ENGINE_SYNC_BN_LOCAL)   /* not reduced: each worker's first replica's sums over the global count */
#define DR_SEAM_BN_STATS_REDUCE(call) DR_OK
#else
#define DR_SEAM_BN_STATS_REDUCE(call) (call)
#endif

/* Spatial partitioning (graph_spatial.c): the cores of a replica whose
 * BatchNormalization sums are added into the replica's accumulators (every
 * one, so the statistics are the whole image's). Mutant: core 0's tile
 * alone, over the whole image's count. */
#if defined(DR_MUTANT_ENGINE_BN_SUMS_CORE0)
#define DR_SEAM_BN_SUM_CORES(cores) 1u
#else
#define DR_SEAM_BN_SUM_CORES(cores) (cores)
#endif

/* --clip_semantics=tensorflow's mixed step: each replica's gradient clipped
 * after its unscale (Keras 3's order, per replica). Mutant: clipped while
 * still multiplied by the loss scale. */
#if defined(DR_MUTANT_MIXED_REPLICA_CLIP_SCALED)
#define DR_SEAM_MIXED_REPLICA_CLIP_SCALED(s, g) ((s)->bo->clip_replica_f32((s)->be, (g)))
#define DR_SEAM_MIXED_REPLICA_CLIP(s, g) ((void)(s), (void)(g))
#else
#define DR_SEAM_MIXED_REPLICA_CLIP_SCALED(s, g) ((void)(s), (void)(g))
#define DR_SEAM_MIXED_REPLICA_CLIP(s, g) ((s)->bo->clip_replica_f32((s)->be, (g)))
#endif

/* --l2 under a mixed policy: the reported loss's regularization term.
 * Mutant: left out (the data loss alone, the mixed step's old report). */
#if defined(DR_MUTANT_MIXED_LOSS_NO_REG)
#define DR_SEAM_MIXED_REG_LOSS(reg) ((void)(reg), 0.0f)
#else
#define DR_SEAM_MIXED_REG_LOSS(reg) (reg)
#endif

/* central_storage's mixed update: on the variable device's variables (the
 * one holder). Mutant: each replica updates its own copy, which the next
 * step's copy from the variable device overwrites: nothing moves. */
#if defined(DR_MUTANT_MIXED_CENTRAL_REPLICA_COPIES)
#define DR_SEAM_MIXED_CENTRAL_HOLDS(var) ((void)(var), 0)
#else
#define DR_SEAM_MIXED_CENTRAL_HOLDS(var) ((var) != NULL)
#endif

/* tpu's mixed kernel: a replica's real rows (its share of a short batch);
 * the rest of its static G/R rows is padding. Mutant: the padding rows
 * (zero inputs, label 0) trained on as examples. */
#if defined(DR_MUTANT_MIXED_TPU_PADDING)
#define DR_SEAM_MIXED_TPU_ROWS(n, rows) ((void)(n), (rows))
#else
#define DR_SEAM_MIXED_TPU_ROWS(n, rows) ((void)(rows), (n))
#endif

/* --gradient_accumulation_steps=k with BatchNormalization: whether micro-step
 * `step` leaves the moving statistics where they are. Keras 3 moves them at
 * every micro-step (scripts/tf_graph_accum.py); the mutant only at the
 * update's (an expression: true to skip the move). */
#ifdef DR_MUTANT_ENGINE_BN_MOVING_PER_UPDATE
#define DR_SEAM_BN_MOVING_SKIP(step, k) ((k) > 1 && (step) % (k) != 0)
#else
#define DR_SEAM_BN_MOVING_SKIP(step, k) ((void)(step), (void)(k), false)
#endif

/* --l2 under a mixed policy: the scale the L2 term is multiplied by. The
 * mutant adds the unscaled L2 gradient to the scaled gradient (as if after
 * the unscale), so the L2 term ends divided by the loss scale. */
#ifdef DR_MUTANT_MIXED_L2_UNSCALED
#define DR_SEAM_MIXED_L2_SCALE(scale) ((void)(scale), 1.0f)
#else
#define DR_SEAM_MIXED_L2_SCALE(scale) (scale)
#endif

/* ---- evaluate.c -------------------------------------------------------------------- */

/* Whether evaluate's and predict's pass is a training one (dr_graph_rt.training). */
#if defined(DR_MUTANT_ENGINE_INFER_TRAINING)   /* Dropout left on in inference (its masks keyed by step 0) */
#define DR_SEAM_INFER_TRAINING true
#else
#define DR_SEAM_INFER_TRAINING false
#endif

/* evaluate across MPI ranks (mpi_share, mpi_combine): rank w's first
 * batch, and the rank's loss sum before the all-reduce. */
#if defined(DR_MUTANT_MPI_EVAL_SHARE)   /* every rank after the first starts one batch late: a batch nobody evaluates */
#define DR_SEAM_EVAL_SHARE_LO(lo, w) ((w) > 0 ? (lo) + 1 : (lo))
#else
#define DR_SEAM_EVAL_SHARE_LO(lo, w) (lo)
#endif
#if defined(DR_MUTANT_MPI_EVAL_ROUNDED)   /* each rank's loss sum rounded to a float before the all-reduce */
#define DR_SEAM_EVAL_COMBINE_ROUNDED(acc) do { float r_ = dr_acc_round(acc); dr_acc_init(acc); dr_acc_add((acc), r_); } while (0)
#else
#define DR_SEAM_EVAL_COMBINE_ROUNDED(acc) ((void)0)
#endif

/* ---- ps_mpi_roles.c, ps_mpi_open.c ------------------------------------------------ */

/* Clipping under parameter_server: on the worker, over its whole gradient
 * (production), or (the mutant) left to each ps task, which sees only its
 * shards and so clips by a shard's norm. */
#ifdef DR_MUTANT_MPI_PS_CLIP_PER_SHARD
#define DR_SEAM_PS_CLIPS_ON_WORKER 0
#else
#define DR_SEAM_PS_CLIPS_ON_WORKER 1
#endif

/* parameter_server over MPI with a model beyond Dense (ps_mpi_graph.c):
 * the worker sends its moving statistics' increments in their gradient
 * slots (production), or (the mutant) zeros, so the ps only decays them. */
#ifdef DR_MUTANT_MPI_PS_MOVING_NOT_SENT
#define DR_SEAM_PS_SENDS_MOVING 0
#else
#define DR_SEAM_PS_SENDS_MOVING 1
#endif

/* The same, where the moving statistics' update is computed: a worker
 * rank keeps nothing of the n moving statistics it read (statement), sends
 * their increments (statement on the n slots after they are copied), and a
 * ps rank takes, at landing, its value then times the momentum plus the
 * increment (production: landing order, no update lost). The mutant is the
 * reference's ref_ps_moving_from_read over ranks: the worker computes the
 * new value from the version it read (read * 0.99 + increment) and the ps
 * writes it back, losing the updates that landed in between. */
#ifdef DR_MUTANT_MPI_PS_MOVING_FROM_READ
#include <stdlib.h>
#include <string.h>
static float *dr_seam_moving_read;   /* the read version's moving statistics (one worker rank) */
static inline void dr_seam_keep_read(const float *read, size_t n)
{
    float *p = realloc(dr_seam_moving_read, n * sizeof(float) + 4);
    if (p) memcpy(dr_seam_moving_read = p, read, n * sizeof(float));
}
static inline void dr_seam_send_from_read(float *slots, size_t n, float momentum)
{
    for (size_t i = 0; dr_seam_moving_read && i < n; i++) slots[i] = dr_seam_moving_read[i] * momentum + slots[i];
}
#define DR_SEAM_PS_KEEP_READ(read, n) dr_seam_keep_read(read, n)
#define DR_SEAM_PS_SEND_MOVING(slots, n, momentum) dr_seam_send_from_read(slots, n, momentum)
#define DR_SEAM_PS_LAND_MOVING(at_landing, sent) ((void)(at_landing), (sent))
#else
#define DR_SEAM_PS_KEEP_READ(read, n) ((void)0)
#define DR_SEAM_PS_SEND_MOVING(slots, n, momentum) ((void)0)
#define DR_SEAM_PS_LAND_MOVING(at_landing, sent) ((void)(sent), (at_landing))
#endif

#endif
