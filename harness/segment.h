/* distref harness — the segments of a run directory: which topology
 * (strategy, variant, workers, replicas, numerics) trained which steps, and
 * whether a run may continue a directory under another one
 * (docs/RUN_DIRECTORY.md, "Running a directory again"). */
#ifndef DISTREF_HARNESS_SEGMENT_H
#define DISTREF_HARNESS_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"
#include "distref/strategy.h"

/* This run's topology: the marker's JSON text and the same in words
 * ("mirrored, 1 worker x 3 replicas, openmp, exact"). */
void dr_segment_of(const dr_strategy *st, const char *variant, bool exact, char *json, size_t jn,
                   char *words, size_t wn);
/* A marker's text in words; false (and "an unrecorded topology") when unreadable. */
bool dr_segment_words(const char *json, char *words, size_t n);
/* prev, the directory's last segment (its checkpoint at `step`), against
 * now. DR_OK when this run may go on: *changed says the topology differs
 * (allowed: an exact synchronous resume is the uninterrupted run). DR_EUSAGE
 * naming the first flag that differs when it may not: finished (nothing is
 * left to run, so nothing under the new topology would be computed),
 * another --numerics, fast numerics, or a switch between parameter_server
 * and a synchronous strategy (parameter_server's own resume judges a
 * switch between its ref and mpi variants: ps_schedule.json). Where this
 * run's bits depend on the world size, a changed replica count is refused
 * too: by_replicas (non-NULL: why the bits depend on the replicas in sync,
 * e.g. --loss_reduction=tf_default) or by_workers (why a step's examples
 * depend on the number of workers, and with more than one worker on the
 * replicas: FILE, OFF, --input_mode=function). */
int  dr_segment_check(const char *prev, const char *now, bool finished, uint64_t step, const char *dir,
                      const char *by_replicas, const char *by_workers, bool *changed, dr_err *err);

#endif
