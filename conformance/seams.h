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
#endif

#endif
