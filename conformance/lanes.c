/* distref conformance — the suites in parallel lanes.
 *
 * The units of work (a suite, or a part of one: conformance/main.c's table)
 * are independent: each trains its own cases into its own temporary
 * directories and records verdicts. With --jobs N > 1 the runner forks N
 * lane processes. A lane takes the next unit in table order from a counter
 * shared by the lanes (an atomic in a shared mapping), runs it
 * with its console lines going to UNIT.log, and writes that unit's verdicts
 * to UNIT.bin in a private temporary directory. When every lane has ended,
 * this process replays the logs and the verdicts in table order: the
 * console, results.json and junit.xml read as a serial run's would (each
 * cell's seconds aside). A unit whose .bin is missing (its lane died) is
 * recorded as a failure naming the unit and the lane's exit status, so a
 * crash can never read as a pass.
 *
 * Units marked `alone` (the mpi and hosts suites: mpirun, namespace hosts)
 * start their own process groups; they run in this process after the lanes
 * have finished, one at a time, so their ranks never compete with a lane for
 * the cores. The runner's memo of reference runs (runner.c) is per process:
 * a lane repeats a reference run another lane already made, and the table
 * keeps the units that share most of them in one unit.
 */
#include "conformance/conformance.h"
#include "conformance/seams.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_LANES 16

/* What a lane writes per unit: the header, then nverdicts verdicts (the
 * same program wrote them, so the struct's layout is the reader's). */
typedef struct unit_file {
    int    fails;
    size_t nverdicts;
    size_t fault_failures;
    char   fault_suites[256];
} unit_file;

static int run_serially(results *r, const char *outdir, const unit *u, size_t n,
                        bool (*wanted)(const char *, const char *), bool alone)
{
    int fails = 0;
    for (size_t i = 0; i < n; i++)
        if (u[i].alone == alone && wanted(r->only, u[i].suite)) fails += u[i].run(r, outdir);
    return fails;
}

static void unit_path(char *buf, size_t n, const char *dir, size_t i, const char *ext)
{
    snprintf(buf, n, "%s/%03zu.%s", dir, i, ext);
}

/* One unit inside a lane: stdout to its log, its verdicts to its .bin. */
static void lane_unit(results *r, const char *outdir, const unit *u, size_t i, const char *dir)
{
    char path[512];
    size_t first = r->n, ff = r->fault_failures;
    unit_file h;
    FILE *f;
    int fd;
    unit_path(path, sizeof path, dir, i, "log");
    fflush(stdout);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0 || dup2(fd, STDOUT_FILENO) < 0) _exit(3);
    close(fd);
    r->fault_suites[0] = 0;
    memset(&h, 0, sizeof h);
    h.fails = u[i].run(r, outdir);
    fflush(stdout);
    h.nverdicts = r->n - first;
    h.fault_failures = r->fault_failures - ff;
    memcpy(h.fault_suites, r->fault_suites, sizeof h.fault_suites);
    unit_path(path, sizeof path, dir, i, "tmp");
    if (!(f = fopen(path, "wb"))) _exit(3);
    if (fwrite(&h, sizeof h, 1, f) != 1 || fwrite(r->v + first, sizeof *r->v, h.nverdicts, f) != h.nverdicts ||
        fclose(f) != 0)
        _exit(3);
    {
        char done[512];
        unit_path(done, sizeof done, dir, i, "bin");
        if (rename(path, done) != 0) _exit(3);   /* present only when complete */
    }
}

static void lane(results *r, const char *outdir, const unit *u, size_t n, bool (*wanted)(const char *, const char *),
                 atomic_size_t *next, const char *dir)
{
    for (;;) {
        size_t i = atomic_fetch_add(next, 1);
        if (i >= n) break;
        if (!u[i].alone && wanted(r->only, u[i].suite)) lane_unit(r, outdir, u, i, dir);
    }
    fflush(stdout);
    _exit(0);
}

static void replay_log(const char *path)
{
    char buf[4096];
    size_t k;
    FILE *f = fopen(path, "r");
    if (!f) return;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, k, stdout);
    fclose(f);
    remove(path);
}

/* Appends unit i's verdicts to r; false when the lane left none. */
static bool replay_unit(results *r, const char *dir, size_t i, int *fails)
{
    char path[512];
    unit_file h;
    FILE *f;
    bool ok;
    unit_path(path, sizeof path, dir, i, "log");
    replay_log(path);
    unit_path(path, sizeof path, dir, i, "bin");
    if (!(f = fopen(path, "rb"))) return false;
    ok = fread(&h, sizeof h, 1, f) == 1;
    if (ok && h.nverdicts) {
        verdict *v = realloc(r->v, (r->n + h.nverdicts) * sizeof *v);
        ok = v && fread(v + r->n, sizeof *v, h.nverdicts, f) == h.nverdicts;
        if (v) r->v = v;
        if (ok) r->n += h.nverdicts, r->cap = r->n;
    }
    fclose(f);
    remove(path);
    if (!ok) return false;
    *fails += h.fails;
    r->fault_failures += h.fault_failures;
    for (char *s = h.fault_suites; *s;) {   /* the comma-separated suites that noticed a fault */
        size_t len = strcspn(s, ","), have = strlen(r->fault_suites);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, s);
        if (!strstr(r->fault_suites, name) && have + len + 2 <= sizeof r->fault_suites)
            snprintf(r->fault_suites + have, sizeof r->fault_suites - have, "%s%s", have ? "," : "", name);
        s += len + (s[len] == ',');
    }
    return true;
}

/* The lanes' shared next-unit counter: a file-backed shared mapping (POSIX;
 * the file is removed at once, the mapping stays). */
static atomic_size_t *shared_counter(const char *dir)
{
    char path[512];
    void *p;
    int fd;
    snprintf(path, sizeof path, "%s/next", dir);
    if ((fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600)) < 0) return NULL;
    p = ftruncate(fd, sizeof(atomic_size_t)) == 0
            ? mmap(NULL, sizeof(atomic_size_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    remove(path);
    return p == MAP_FAILED ? NULL : p;
}

int run_units(results *r, const char *outdir, const unit *u, size_t n, bool (*wanted)(const char *, const char *),
              int jobs)
{
    char dir[] = "/tmp/distref_lanes_XXXXXX";
    pid_t pid[MAX_LANES];
    int status[MAX_LANES], fails = 0, lanes = jobs < MAX_LANES ? jobs : MAX_LANES;
    atomic_size_t *next;
    if (lanes <= 1 || !mkdtemp(dir))
        return run_serially(r, outdir, u, n, wanted, false) + run_serially(r, outdir, u, n, wanted, true);
    if ((next = shared_counter(dir)) == NULL) {
        rmdir(dir);
        return run_serially(r, outdir, u, n, wanted, false) + run_serially(r, outdir, u, n, wanted, true);
    }
    atomic_init(next, 0);
    fflush(stdout);
    for (int l = 0; l < lanes; l++) {
        status[l] = 0;
        if ((pid[l] = fork()) == 0) lane(r, outdir, u, n, wanted, next, dir);
    }
    for (int l = 0; l < lanes; l++)
        if (pid[l] > 0 && waitpid(pid[l], &status[l], 0) < 0) status[l] = -1;
    for (size_t i = 0; i < n; i++) {
        if (u[i].alone || !wanted(r->only, u[i].suite) || replay_unit(r, dir, i, &fails) ||
            !DR_SEAM_LOST_UNIT_FAILS)
            continue;
        record(r, u[i].suite, NULL, 1, false, 0, "part %zu of the table did not finish: its lane process ended "
               "(lane exit statuses: %d, %d, ...)", i, status[0], lanes > 1 ? status[1] : 0);
        fails++;
    }
    munmap(next, sizeof *next);
    rmdir(dir);
    return fails + run_serially(r, outdir, u, n, wanted, true);
}
