/* distref — TF_CONFIG from Slurm's environment (core/slurm.c), as
 * TensorFlow's SlurmClusterResolver derives its cluster: every task of the
 * step is a worker, tasks packed onto the step's nodes in order, task i on
 * node n at port 8888 + its place on n; this task is worker SLURM_PROCID.
 *
 * The variables are passed in (the CLI reads them with getenv), so the
 * library never reads the environment itself; every error is DR_EUSAGE
 * naming the variable and what was expected.
 */
#ifndef DISTREF_SLURM_H
#define DISTREF_SLURM_H

#include <stdbool.h>
#include <stdint.h>
#include "distref/error.h"

#define DR_SLURM_MAX_HOSTS 4096u   /* hosts a node list may expand to */
#define DR_SLURM_HOST_MAX 64u      /* bytes of one host name, with its NUL */
#define DR_SLURM_PORT_BASE 8888u   /* SlurmClusterResolver's port_base */

/* The variables (NULL: unset). nodelist: SLURM_STEP_NODELIST, else
 * SLURM_JOB_NODELIST; tasks_per_node: SLURM_STEP_TASKS_PER_NODE, else
 * SLURM_TASKS_PER_NODE (the CLI picks and names the one it used). */
typedef struct dr_slurm_env {
    const char *procid, *ntasks, *nodelist, *tasks_per_node, *gpus_per_task;
    const char *nodelist_name, *tasks_per_node_name;   /* for messages */
} dr_slurm_env;

/* Slurm's compressed host list ("node[01-04,07],gpu7,rack[1-2]-n[1-3]"):
 * hosts (DR_SLURM_HOST_MAX bytes each, up to max) and their count. Leading
 * zeros of a range's lower bound set the width. name: the variable. */
int dr_slurm_nodelist(const char *name, const char *list, char (*hosts)[DR_SLURM_HOST_MAX], uint32_t max,
                      uint32_t *n, dr_err *err);
/* Slurm's tasks per node ("2(x3),1"): counts[0..n) for n nodes exactly. */
int dr_slurm_tasks_per_node(const char *name, const char *spec, uint32_t *counts, uint32_t n, dr_err *err);
/* The TF_CONFIG (malloc'd, *out) of this task; *procid and *ntasks as read;
 * *gpus the SLURM_GPUS_PER_TASK count (0 when unset). */
int dr_slurm_tf_config(const dr_slurm_env *env, char **out, uint32_t *procid, uint32_t *ntasks, uint32_t *gpus,
                       dr_err *err);

#endif
