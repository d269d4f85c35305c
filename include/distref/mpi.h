/* distref engine — the MPI world of a `mpirun -np N bin/distref ...` run
 * (devices/mpi/mpi_world.c): initializing and finalizing MPI, this process's
 * rank and the world's size. Only --variant=mpi initializes MPI; every
 * other run never calls into libmpi. The collectives themselves are the
 * MPI comm (distref/comm.h: dr_comm_mpi, devices/mpi/comm_mpi.c).
 *
 * Threads: MPI_THREAD_FUNNELED. A rank's OpenMP threads compute, only the
 * thread that called dr_mpi_init calls MPI.
 */
#ifndef DISTREF_MPI_H
#define DISTREF_MPI_H

#if defined(DR_LAYER_CORE) || defined(DR_LAYER_REF)
#error "distref/mpi.h is the engine's: core/ and ref/ may not include it (docs/ARCHITECTURE.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"

/* MPI_Init_thread (FUNNELED); DR_EUNSUPPORTED when MPI cannot give it. */
int  dr_mpi_init(int *argc, char ***argv, dr_err *err);
/* True between dr_mpi_init and dr_mpi_finalize (or MPI initialized by the
 * program itself). */
bool dr_mpi_active(void);
/* This process's rank and the world's size; 0 and 1 without MPI. */
void dr_mpi_world(uint32_t *rank, uint32_t *size);
/* The host this rank runs on (MPI_Get_processor_name), "localhost" without MPI. */
void dr_mpi_host(char *buf, size_t n);
/* Collective: every rank's host (dr_mpi_host), hosts[w * len ..] for
 * rank w, each NUL-terminated within len bytes. */
int  dr_mpi_hosts(char *hosts, size_t len, dr_err *err);
/* Collective: rank 0's n bytes at buf copied into every rank's buf (MPI_Bcast). */
int  dr_mpi_bcast0(void *buf, size_t n, dr_err *err);
/* Collective: MPI_Barrier, without a deadline: for a wait as long as another
 * rank's work (evaluate's shares), where the comm's collectives would take
 * a rank that computes without answering their pings for a dead one. */
int  dr_mpi_barrier(dr_err *err);
/* Collective, without a deadline (MPI_Gatherv): every rank's n bytes at
 * buf concatenated in rank order into *all on rank 0 (malloc'd, *len
 * bytes; NULL and 0 on the others). At most 2^31 - 1 bytes in all. */
int  dr_mpi_gather0(const void *buf, size_t n, void **all, size_t *len, dr_err *err);
/* Collective: MPI_Finalize. */
void dr_mpi_finalize(void);
/* Ends every rank of the job with exit status code (MPI_Abort): what a rank
 * does after an error, so that no rank is left waiting for it. */
void dr_mpi_abort(int code);
/* dr_mpi_abort after a rank died. Under `mpirun --enable-recovery` Open MPI
 * 4.1.4's mpirun exits 0 once a rank has died, whatever the survivors do
 * (measured: MPI_Abort, exit(1), _exit(1), SIGABRT, SIGTERM of themselves
 * all gave 0), so the rank first sends SIGTERM to its launcher (its parent,
 * when that is mpirun, orterun or orted), on which mpirun ends the job with
 * status 1; without recovery MPI_Abort alone gives mpirun's non-zero status. */
void dr_mpi_abort_failed_job(int code);

/* From now on, the first SIGTERM this rank gets (mpirun ending the job
 * after it lost a host, or mpirun signalled, or a Slurm time limit), or an
 * exit() inside Open MPI during one of the MPI comm's waits, first prints
 * one line: this rank and host, the step (dr_mpi_last_words_step), the
 * collective it is in (or, between two, the last one) and the ranks it
 * awaits with their hosts (hosts: every rank's, len bytes each, as
 * dr_mpi_hosts gives; NULL: none known). The SIGTERM then does what it did
 * before (the stop request: finish this step, checkpoint, stop); where a
 * host is gone the wait cannot finish and --collective_timeout, or
 * mpirun's SIGKILL, ends the rank. A second SIGTERM: the default action.
 * Once per process, after dr_mpi_init; DR_ENOMEM when out of memory. */
int  dr_mpi_last_words(const char *hosts, size_t len);
/* The training step under way, for those last words (no-op before). */
void dr_mpi_last_words_step(unsigned long long step);
#endif
