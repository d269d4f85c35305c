/* distref harness — the OpenMP wait policy of a distref program.
 *
 * libgomp's threads spin while they wait at a barrier, for up to about
 * 300,000 iterations by default. On a shared machine (CI, these 2-core
 * development boxes) that turns a parallel region into a wait of a whole
 * time slice whenever another process has displaced the partner thread:
 * fast one_device at G=256 on 2 threads with one core kept busy ran 600
 * steps in 13-19 s spinning, 1.4-1.8 s passive, 1.5-2.0 s with
 * GOMP_SPINCOUNT=1000, ~2.4 s on one thread. Passive waiting costs the
 * quiet machine its second thread, though (exact, G=256, 300 steps:
 * 1.27 s passive on 2 threads, 1.26 s on 1, 0.94-1.02 s spinning), while a
 * spin of 1,000 iterations keeps it (0.95-0.97 s; fast 1.04-1.06 s against
 * 1.02-1.05 s). So a distref program waits by a short spin, then sleeps.
 * libgomp reads the setting once, when the program loads, so a program
 * that wants it must start with it: dr_omp_short_spin_reexec() re-executes
 * the program (same pid, same arguments) once with GOMP_SPINCOUNT=1000. A
 * caller who chose a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT set) keeps
 * it. Programs call it first thing in main; the libraries never do.
 */
#include "distref/harness.h"

#include <stdlib.h>
#include <unistd.h>

void dr_omp_short_spin_reexec(char **argv)
{
    char self[4096];   /* the program's own path: exec'd through /proc/self/exe it would be named "exe" */
    ssize_t n;
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || (size_t)n >= sizeof self - 1) return;   /* no /proc: go on with libgomp's default */
    self[n] = '\0';
    if (setenv("GOMP_SPINCOUNT", "1000", 1) != 0) return;
    execv(self, argv);
    unsetenv("GOMP_SPINCOUNT");   /* the exec failed: go on with libgomp's default */
}
