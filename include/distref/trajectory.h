/* distref core — trajectories: what a training run was at some of its
 * steps, in one on-disk format that distref writes (`train --trajectory`,
 * `export --what=weights`) and any framework can write (python/distref),
 * and that `distref diff` compares (distref/traj_diff.h). docs/JUDGING.md
 * is the format's documentation:
 *
 *   DIR/index.json                      the index below
 *   DIR/<step dir>/<tensor name>.npy    float32 .npy (distref/npy.h); a name's
 *                                       '/' are directories: step_00000010/dense_0/kernel.npy
 *
 *   {"format": "distref-trajectory", "version": 1,
 *    "settings": {"experiment": "mlp_synthetic", ...},      free-form; experiment checked by diff
 *    "tensors": [{"name": "dense_0/kernel", "shape": [784, 128], "dtype": "float32"}, ...],
 *    "steps": [{"step": 0, "dir": "step_00000000", "tensors": ["dense_0/kernel", ...]}, ...]}
 *
 * Tensor names (Keras order): dense_<l>/kernel (in x out), dense_<l>/bias,
 * layer by layer; then optimizer/<slot>/<variable> (slots momentum for SGD
 * with momentum; momentum and velocity for Adam: Keras 3's names),
 * gradient/<variable> (the gradient as applied: after the all-reduce and
 * the scaling, rounded once), and loss (shape ()). A step lists the tensors
 * it holds (step 0, the initial variables, has no gradient and no loss).
 */
#ifndef DISTREF_TRAJECTORY_H
#define DISTREF_TRAJECTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/npy.h"

#define DR_TRAJ_FORMAT "distref-trajectory"
#define DR_TRAJ_VERSION 1
#define DR_TRAJ_NAME_MAX 96
#define DR_TRAJ_MAX_TENSORS 1024
#define DR_TRAJ_MAX_STEPS (1u << 24)
#define DR_TRAJ_INDEX_MAX (256u << 20)   /* bytes of index.json a reader accepts */

typedef struct dr_traj_tensor {
    char     name[DR_TRAJ_NAME_MAX];
    uint32_t ndim;
    uint64_t shape[DR_NPY_MAX_DIMS];
} dr_traj_tensor;

typedef struct dr_traj_step {
    uint64_t  step;
    char      dir[64];
    uint32_t  ntensors;
    uint16_t *tensors;       /* indices into the index's tensors, in the step's order */
} dr_traj_step;

typedef struct dr_traj_index {
    char            *settings;      /* the settings object as JSON text ("{}" when absent) */
    char             experiment[64];/* settings.experiment; "" when absent */
    dr_traj_tensor  *tensors;
    uint32_t         ntensors;
    dr_traj_step    *steps;         /* ascending by step, no step twice */
    uint32_t         nsteps;
} dr_traj_index;

/* ---- which steps a run records: --trajectory --------------------------- */

typedef enum dr_traj_mode { DR_TRAJ_OFF = 0, DR_TRAJ_EVERY, DR_TRAJ_STEPS, DR_TRAJ_CHECKPOINTS } dr_traj_mode;

typedef struct dr_traj_spec {
    dr_traj_mode mode;
    uint64_t     every;          /* EVERY: steps 0, N, 2N, ... */
    uint64_t    *steps;          /* STEPS: ascending, distinct */
    uint32_t     nsteps;
} dr_traj_spec;

/* "" (off), "every:N" (N >= 1), "steps:A,B,..." (each >= 0; any order,
 * repeats merged) or "checkpoints" (each checkpoint's step); DR_EUSAGE
 * naming --trajectory otherwise. */
int  dr_traj_spec_parse(const char *text, dr_traj_spec *out, dr_err *err);
/* Whether the spec records step (0: the initial variables); checkpoint:
 * whether a checkpoint is written at step. */
bool dr_traj_spec_wants(const dr_traj_spec *s, uint64_t step, bool checkpoint);
void dr_traj_spec_free(dr_traj_spec *s);

/* ---- the index ------------------------------------------------------------- */

/* A tensor name: components of [A-Za-z0-9_.-] (not "." or ".."), joined
 * by '/', at most DR_TRAJ_NAME_MAX - 1 characters. */
bool dr_traj_name_ok(const char *name);

/* Parses index.json's text (len bytes; name: the file, for messages):
 * DR_EFORMAT naming the file and the field. */
int  dr_traj_index_parse(const char *text, size_t len, const char *name, dr_traj_index *out, dr_err *err);
/* dr_traj_index_parse of DIR/index.json. */
int  dr_traj_index_load(const char *dir, dr_traj_index *out, dr_err *err);
/* The index as JSON text (malloc'd, the caller frees). */
char *dr_traj_index_json(const dr_traj_index *ix);
/* Writes DIR/index.json atomically. */
int  dr_traj_index_write(const char *dir, const dr_traj_index *ix, dr_err *err);
void dr_traj_index_free(dr_traj_index *ix);

/* The tensor called name, or -1. */
int  dr_traj_find(const dr_traj_index *ix, const char *name);
/* DIR/<step dir>/<name>.npy into path (cap bytes). */
void dr_traj_path(const char *dir, const dr_traj_step *st, const char *name, char *path, size_t cap);
/* Loads one tensor of one step, checked against the index's shape. */
int  dr_traj_load(const char *dir, const dr_traj_index *ix, const dr_traj_step *st, uint32_t tensor, dr_npy *out,
                  dr_err *err);

/* ---- a distref model's tensors ------------------------------------------ */

struct dr_model_spec;
struct dr_optimizer;

/* Where tensor i of dr_traj_model_tensors lives: in the variables
 * (DR_TRAJ_SRC_PARAMS), optimizer slot k (SLOT, slots + k * P), the
 * applied gradient (GRAD) or the loss (LOSS), at offset. */
typedef enum dr_traj_src { DR_TRAJ_SRC_PARAMS = 0, DR_TRAJ_SRC_SLOT, DR_TRAJ_SRC_GRAD, DR_TRAJ_SRC_LOSS } dr_traj_src;
typedef struct dr_traj_where { dr_traj_src src; uint32_t slot; size_t offset; } dr_traj_where;

/* Fills ix->tensors (malloc'd; ix's other fields untouched) with the
 * model's tensors in the order of the header comment: variables, slots,
 * gradients when grads, the loss when loss; where[i] says where each one
 * lives (room for DR_TRAJ_MAX_TENSORS). */
int dr_traj_model_tensors(const struct dr_model_spec *m, const struct dr_optimizer *o, bool grads, bool loss,
                          dr_traj_index *ix, dr_traj_where *where, dr_err *err);

/* Writes step's tensors (those of where[] whose source is given: slots,
 * grads or loss NULL leave theirs out) into DIR/<st->dir>/, and fills st
 * (tensors malloc'd). P: the variables' count. */
int dr_traj_write_step(const char *dir, const dr_traj_index *ix, const dr_traj_where *where, size_t P, uint64_t step,
                       const float *params, const float *slots, const float *grads, const float *loss,
                       dr_traj_step *st, dr_err *err);

#endif
