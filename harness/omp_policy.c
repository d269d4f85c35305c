/* distref harness — the OpenMP wait policy of a distref program.
 *
 * libgomp's threads spin while they wait at a barrier, for up to about
 * 300,000 iterations by default. On a shared machine (CI, these 2-core
 * development boxes) that turns every parallel region into a wait of a
 * whole time slice whenever another process has displaced the partner
 * thread: measured, fast one_device at G=256 on 2 threads with one core
 * busy, 600 steps took 13-19 s spinning and 1.4-1.8 s passive (1 thread:
 * ~2.4 s). libgomp reads the policy once, when the program loads, so a
 * program that wants it must start with it: dr_omp_passive_reexec()
 * re-executes the program (same pid, same arguments) once with
 * OMP_WAIT_POLICY=passive. A caller who chose a policy (OMP_WAIT_POLICY
 * or GOMP_SPINCOUNT set) keeps it. Programs call it first thing in main;
 * the libraries never do.
 */
#include "distref/harness.h"

#include <stdlib.h>
#include <unistd.h>

void dr_omp_passive_reexec(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("OMP_WAIT_POLICY");   /* no /proc: go on with libgomp's default */
}
