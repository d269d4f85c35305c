/* distref devices — the MPI world (distref/mpi.h). */
#include "distref/mpi.h"
#include "devices/seams.h"

#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int dr_mpi_init(int *argc, char ***argv, dr_err *err)
{
    int provided = 0, flag = 0;
    MPI_Initialized(&flag);
    if (flag) return DR_OK;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return dr_fail(err, DR_EUNSUPPORTED, "--variant=mpi: MPI_Init_thread failed");
    if (provided < MPI_THREAD_FUNNELED)
        return dr_fail(err, DR_EUNSUPPORTED, "--variant=mpi: this MPI gives thread level %d, distref needs "
                       "MPI_THREAD_FUNNELED (%d)", provided, MPI_THREAD_FUNNELED);
    return DR_OK;
}

bool dr_mpi_active(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

void dr_mpi_world(uint32_t *rank, uint32_t *size)
{
    int r = 0, n = 1;
    if (dr_mpi_active()) {
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        MPI_Comm_size(MPI_COMM_WORLD, &n);
    }
    if (rank) *rank = (uint32_t)r;
    if (size) *size = (uint32_t)n;
}

void dr_mpi_host(char *buf, size_t n)
{
    char name[MPI_MAX_PROCESSOR_NAME + 1] = "localhost";
    int len = 0;
    if (dr_mpi_active() && MPI_Get_processor_name(name, &len) == MPI_SUCCESS && len > 0) name[len] = '\0';
    else snprintf(name, sizeof name, "localhost");
    snprintf(buf, n, "%s", name);
}

int dr_mpi_hosts(char *hosts, size_t len, dr_err *err)
{
    uint32_t rank, size;
    char *mine;
    int mrc;
    if (!dr_mpi_active()) return dr_fail(err, DR_ESTATE, "MPI is not initialized");
    if (len == 0 || len > 4096) return dr_fail(err, DR_EUSAGE, "dr_mpi_hosts: %zu bytes per host", len);
    dr_mpi_world(&rank, &size);
    if (!(mine = calloc(1, len))) return dr_fail(err, DR_ENOMEM, "out of host memory for the host names");
    dr_mpi_host(mine, len);
    mrc = MPI_Allgather(mine, (int)len, MPI_CHAR, hosts, (int)len, MPI_CHAR, MPI_COMM_WORLD);
    free(mine);
    if (mrc != MPI_SUCCESS) return dr_fail(err, DR_EFAULT, "MPI_Allgather of the host names failed");
    for (uint32_t w = 0; w < size; w++) hosts[(size_t)w * len + len - 1] = '\0';
    return DR_OK;
}

int dr_mpi_bcast0(void *buf, size_t n, dr_err *err)
{
    if (!dr_mpi_active()) return dr_fail(err, DR_ESTATE, "MPI is not initialized");
    if (n > (size_t)1 << 20) return dr_fail(err, DR_EUSAGE, "dr_mpi_bcast0: %zu bytes, at most 1 MiB", n);
    if (MPI_Bcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        return dr_fail(err, DR_EFAULT, "MPI_Bcast of %zu bytes from rank 0 failed", n);
    return DR_OK;
}

int dr_mpi_barrier(dr_err *err)
{
    if (!dr_mpi_active()) return dr_fail(err, DR_ESTATE, "MPI is not initialized");
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) return dr_fail(err, DR_EFAULT, "MPI_Barrier failed");
    return DR_OK;
}

int dr_mpi_gather0(const void *buf, size_t n, void **all, size_t *len, dr_err *err)
{
    uint32_t rank, size;
    int mine = (int)n, *counts = NULL, *at = NULL, rc = DR_OK;
    long long total = 0;
    *all = NULL;
    *len = 0;
    if (!dr_mpi_active()) return dr_fail(err, DR_ESTATE, "MPI is not initialized");
    if (n > INT32_MAX) return dr_fail(err, DR_EUSAGE, "dr_mpi_gather0: %zu bytes, at most 2^31-1", n);
    dr_mpi_world(&rank, &size);
    /* a failure on one rank returns at once: the caller's error ends the
     * whole job (MPI_Abort, cli/main.c), so no rank is left waiting here */
    if (rank == 0 && (!(counts = calloc(size, sizeof *counts)) || !(at = calloc(size, sizeof *at)))) {
        free(counts);
        return dr_fail(err, DR_ENOMEM, "rank 0: no memory for %u ranks' byte counts", size);
    }
    if (MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        rc = dr_fail(err, DR_EFAULT, "MPI_Gather of the byte counts failed");
    for (uint32_t k = 0; rc == DR_OK && rank == 0 && k < size; k++) {
        uint32_t w = DR_SEAM_GATHER_RANK(k, size);
        at[w] = (int)total;
        total += counts[w];
        if (total > INT32_MAX) rc = dr_fail(err, DR_EUSAGE, "dr_mpi_gather0: over 2^31-1 bytes in all");
    }
    if (rc == DR_OK && rank == 0 && !(*all = malloc((size_t)total + 1)))
        rc = dr_fail(err, DR_ENOMEM, "rank 0: no memory for the %lld bytes gathered", total);
    if (rc == DR_OK && MPI_Gatherv(buf, mine, MPI_BYTE, *all, counts, at, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        rc = dr_fail(err, DR_EFAULT, "MPI_Gatherv of %zu bytes to rank 0 failed", n);
    if (rc == DR_OK) *len = (size_t)total;
    else { free(*all); *all = NULL; }
    free(counts);
    free(at);
    return rc;
}

void dr_mpi_finalize(void)
{
    if (dr_mpi_active()) MPI_Finalize();
}

void dr_mpi_abort(int code)
{
    if (dr_mpi_active()) MPI_Abort(MPI_COMM_WORLD, code);
}

/* Whether mpirun runs the job with --enable-recovery (Open MPI sets this in
 * every rank's environment). */
static bool recovery(void)
{
    const char *v = getenv("OMPI_MCA_orte_enable_recovery");
    return v && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
}

void dr_mpi_abort_failed_job(int code)
{
    pid_t parent = getppid();
    char path[64], comm[32] = "";
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/comm", (int)parent);
    if (DR_SEAM_END_LAUNCHER(dr_mpi_active() && recovery() && parent > 1 && (f = fopen(path, "r")))) {
        if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
        fclose(f);
        if (strcmp(comm, "mpirun") == 0 || strcmp(comm, "orterun") == 0 || strcmp(comm, "mpiexec") == 0 ||
            strcmp(comm, "orted") == 0) {
            struct timespec grace = { 0, 300000000 };
            fflush(NULL);
            nanosleep(&grace, NULL);          /* the launcher forwards what this rank printed */
            signal(SIGTERM, SIG_DFL);         /* (the launcher's SIGTERM back ends this rank, no stop request) */
            kill(parent, SIGTERM);
            _exit(code);                      /* MPI_Abort would wait on the launcher it just ended */
        }
    }
    dr_mpi_abort(code);
}
