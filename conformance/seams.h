/* distref conformance — the planted faults' seams (tests/faults.tsv;
 * scripts/check_faults.sh checks the list against them). A normal build
 * defines no DR_MUTANT_* name.
 */
#ifndef DISTREF_CONFORMANCE_SEAMS_H
#define DISTREF_CONFORMANCE_SEAMS_H

/* The verdict of a cell a variant does not support. */
#if defined(DR_MUTANT_SKIP_AS_PASS)   /* what did not run is counted as passed */
#define DR_SEAM_SKIPPED_VERDICT VERDICT_PASS
#else
#define DR_SEAM_SKIPPED_VERDICT VERDICT_NOT_SUPPORTED
/* A unit whose lane ended before writing its verdicts (conformance/lanes.c). */
#if defined(DR_MUTANT_LANE_LOST_UNIT_DROPPED)   /* a crashed lane's unit vanishes from the report */
#define DR_SEAM_LOST_UNIT_FAILS 0
#else
#define DR_SEAM_LOST_UNIT_FAILS 1
#endif

#endif

/* A unit whose lane ended before writing its verdicts (conformance/lanes.c). */
#if defined(DR_MUTANT_LANE_LOST_UNIT_DROPPED)   /* a crashed lane's unit vanishes from the report */
#define DR_SEAM_LOST_UNIT_FAILS 0
#else
#define DR_SEAM_LOST_UNIT_FAILS 1
#endif

#endif
