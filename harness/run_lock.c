/* distref harness — the model_dir lock around a command: harness/run_lock.h. */
#include "harness/run_lock.h"
#include "distref/mpi.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* What the chief tells the other ranks after locking. */
typedef struct chief_lock {
    int32_t rc;
    int32_t held;                       /* the chief holds it (a missing model_dir with create false: no) */
    int64_t pid;
    char    host[256];
} chief_lock;

static void note_takeover(const dr_dir_lock *lk)
{
    if (!lk->took_over) return;
    fprintf(stderr, "distref: note: %s named pid %ld on %s, `%s`, which no longer holds it (it ended without "
            "clearing it, e.g. killed): taking the lock over\n", lk->path, lk->stale.pid, lk->stale.host,
            lk->stale.command);
}

int dr_run_lock(const dr_run_config *cfg, bool create, dr_dir_lock *lk, dr_err *err)
{
    uint32_t rank = 0;
    chief_lock c;
    int rc;
    memset(lk, 0, sizeof *lk);
    lk->fd = -1;
    if (!dr_mpi_active()) {
        rc = dr_model_dir_lock(cfg->model_dir, create, lk, err);
        if (rc == DR_OK) note_takeover(lk);
        return rc;
    }
    dr_mpi_world(&rank, NULL);
    memset(&c, 0, sizeof c);
    if (rank == 0) {
        c.rc = dr_model_dir_lock(cfg->model_dir, create, lk, err);
        if (c.rc == DR_OK) note_takeover(lk);
        c.held = lk->fd >= 0;
        c.pid = (int64_t)getpid();
        if (gethostname(c.host, sizeof c.host - 1) != 0) strcpy(c.host, "?");
    }
    if ((rc = dr_mpi_bcast0(&c, sizeof c, err))) return rc;
    if (rank == 0) return c.rc;
    c.host[sizeof c.host - 1] = '\0';
    if (c.rc != DR_OK)
        return dr_fail(err, c.rc, "the chief (MPI rank 0) could not lock --model_dir=%s (its message says why)",
                       cfg->model_dir);
    if (!c.held) return DR_OK;
    lk->by_chief = true;
    return dr_lock_check_holder(cfg->model_dir, (long)c.pid, c.host, err);
}

bool dr_run_locked(const dr_dir_lock *lk)
{
    return lk->fd >= 0 || lk->by_chief;
}

void dr_run_unlock(dr_dir_lock *lk)
{
    dr_model_dir_unlock(lk);
}
