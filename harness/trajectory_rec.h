/* distref harness — --trajectory: recording a run's steps into
 * model_dir/trajectory (distref/trajectory.h, docs/JUDGING.md). Private to
 * the harness (harness/train_loop.c, harness/export.c). */
#ifndef DISTREF_HARNESS_TRAJECTORY_REC_H
#define DISTREF_HARNESS_TRAJECTORY_REC_H

#include "distref/plan.h"
#include "distref/trajectory.h"
#include "distref/train.h"
#include "distref/variant.h"

typedef struct traj_rec {
    bool           on;
    dr_traj_spec   spec;
    char           dir[1100];
    dr_traj_index  ix;
    dr_traj_where  where[DR_TRAJ_MAX_TENSORS];
    size_t         P;
    uint32_t       cap;          /* room in ix.steps */
    uint64_t       last;         /* the last recorded step (UINT64_MAX: none) */
    float         *grads;        /* the variant's gradient (NULL: it gives none) */
} traj_rec;

/* The run's settings as JSON text (malloc'd) for an index. */
char *traj_settings(const dr_run_config *cfg, const dr_run_plan *plan, const char *variant, const char *what,
                    const char *gradients);

/* --trajectory parsed and the tensors laid out; an index already in
 * model_dir/trajectory is kept up to start_step (a resumed run). */
int  traj_rec_open(traj_rec *t, const dr_run_config *cfg, const dr_run_plan *plan, const dr_variant *v,
                   uint64_t start_step, dr_err *err);
/* Records step (0: the initial variables, no gradient or loss). */
int  traj_rec_step(traj_rec *t, dr_session *s, const dr_variant *v, uint64_t step, const float *loss, float *params,
                   float *slots, dr_err *err);
/* Writes index.json (at each checkpoint and at the end). */
int  traj_rec_flush(traj_rec *t, dr_err *err);
void traj_rec_close(traj_rec *t);

#endif
