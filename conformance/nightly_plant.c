/* distref conformance — the planted regressions that prove make nightly's
 * conformance rows (issue 15, docs/NIGHTLY.md). Read by bin/conformance
 * only, never by the library; unset, nothing happens.
 *
 *   DISTREF_NIGHTLY_PLANT=<metric>:F   (0 < F <= 10), <variant> = --variant's:
 *     conformance_wall_s_<variant>          spin F x the run's wall time so far
 *     conformance_cpu_<variant>_vs_calib    spin until the CPU seconds of this
 *                                           process and every child it waited
 *                                           for (mpirun and its ranks) are
 *                                           (1 + F) x what they were
 *     conformance_peak_rss_mib_<variant>    allocate and touch memory until this
 *                                           process's resident set is (1 + F) x
 *                                           the largest peak so far of it and
 *                                           of every child it waited for
 *
 * Called once, after the suites and the report, before the exit: so every
 * plant is a known fraction of what the nightly row measures for the whole
 * run (wait4's wall time, user + sys seconds, ru_maxrss). */
#define _POSIX_C_SOURCE 200809L
#include "conformance/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static double cpu_s(int who)
{
    struct rusage ru;
    if (getrusage(who, &ru) != 0) return 0;
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

static double maxrss_kib(int who)
{
    struct rusage ru;
    return getrusage(who, &ru) == 0 ? (double)ru.ru_maxrss : 0;
}

/* The resident set now, KiB (/proc/self/statm's second field). */
static double rss_now_kib(void)
{
    long pages = 0, size = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &size, &pages) != 2) pages = 0;
    fclose(f);
    return (double)pages * (double)sysconf(_SC_PAGESIZE) / 1024.0;
}

/* Is env "<prefix><variant><suffix>:F"? */
static int names(const char *env, size_t len, const char *prefix, const char *variant, const char *suffix)
{
    char want[96];
    snprintf(want, sizeof want, "%s%s%s", prefix, variant, suffix);
    return len == strlen(want) && strncmp(env, want, len) == 0;
}

void conformance_nightly_plant(const char *variant, double t0)
{
    const char *env = getenv("DISTREF_NIGHTLY_PLANT"), *colon = env ? strrchr(env, ':') : NULL;
    size_t len = colon ? (size_t)(colon - env) : 0;
    double f;
    if (!colon || !variant || (f = atof(colon + 1)) <= 0 || f > 10) return;
    if (names(env, len, "conformance_wall_s_", variant, "")) {
        double until = now() + f * (now() - t0);
        fprintf(stderr, "conformance: PLANTED slowdown: +%.0f%% wall time\n", 100 * f);
        while (now() < until) {}
    } else if (names(env, len, "conformance_cpu_", variant, "_vs_calib")) {
        double used = cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN), until = cpu_s(RUSAGE_SELF) + f * used;
        fprintf(stderr, "conformance: PLANTED slowdown: +%.0f%% CPU time (%.2f s)\n", 100 * f, f * used);
        while (cpu_s(RUSAGE_SELF) < until) {}
    } else if (names(env, len, "conformance_peak_rss_mib_", variant, "")) {
        double self = maxrss_kib(RUSAGE_SELF), kids = maxrss_kib(RUSAGE_CHILDREN);
        double peak = self > kids ? self : kids, extra = (1 + f) * peak - rss_now_kib();
        size_t bytes = extra > 0 ? (size_t)(extra * 1024.0) : 0, page = (size_t)sysconf(_SC_PAGESIZE);
        /* Fresh pages from a private map of /dev/zero, not malloc: malloc
         * may hand back freed heap memory that is still resident, and
         * touching it raises nothing (why an earlier plant did not work). */
        int fd = open("/dev/zero", O_RDWR);
        void *map = bytes && fd >= 0 ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0) : MAP_FAILED;
        volatile unsigned char *m = map == MAP_FAILED ? NULL : map;
        fprintf(stderr, "conformance: PLANTED peak RSS: +%.0f%% (%.1f MiB touched%s)\n", 100 * f,
                (double)bytes / 1048576.0, bytes && !m ? ": mmap failed" : "");
        for (size_t i = 0; m && i < bytes; i += page) m[i] = 1;
        if (m) munmap(map, bytes);
        if (fd >= 0) close(fd);
    }
}
