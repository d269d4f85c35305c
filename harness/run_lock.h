/* distref harness — the model_dir lock around a command (include/distref/lock.h):
 * train, evaluate, predict and export each take it before they write. */
#ifndef DISTREF_HARNESS_RUN_LOCK_H
#define DISTREF_HARNESS_RUN_LOCK_H

#include <stdbool.h>
#include "distref/lock.h"
#include "distref/train.h"

/* Takes cfg->model_dir's lock for this run. One process: dr_model_dir_lock,
 * and a note on stderr when it takes over from a holder that is gone.
 * --variant=mpi (collective): the chief (rank 0) takes it and broadcasts
 * the outcome with its pid and host; every other rank checks the lock
 * file names them (dr_lock_check_holder) and holds nothing (lk->fd = -1).
 * A second run on the directory: DR_EUSAGE (exit 2) naming the holder. */
int  dr_run_lock(const dr_run_config *cfg, bool create, dr_dir_lock *lk, dr_err *err);
void dr_run_unlock(dr_dir_lock *lk);
/* Whether lk holds the lock for this run (here, or by the MPI chief): false
 * after dr_run_lock with create false on a model_dir that did not exist.
 * The same answer on every rank (the chief's, broadcast). */
bool dr_run_locked(const dr_dir_lock *lk);

#endif
