/* distref conformance — `make conformance`: run the suites over every
 * variant of the registry against the reference.
 *
 *   bin/conformance [--quick] [--full] [--out DIR] [--only SUITE[,SUITE]] [--variant NAME] [--bin DISTREF]
 *                   [--jobs N]
 *   build/.../mutants/conformance_NAME --mutant NAME --expect SUITE
 *
 * The second form is a mutant build: the same program linked against an
 * engine (or a reference) with one planted fault compiled in (scripts/
 * run_conformance_mutants.sh builds them). It runs the quick suites (the
 * script passes --only SUITE, that suite alone, unless MUTANT_MATRIX=full)
 * and exits 0 only when SUITE failed: the fault was caught.
 *
 * --variant NAME runs the suites for one variant only: an engine variant
 * (openmp, opencl) beside the reference, `ref` for the reference's own
 * cases alone, `mpi` for the reference's cases and the mpi suite; the
 * variant-independent durability suite and, for a variant other than mpi,
 * the mpi suite are left out. --only names the suites to run (loss_curves,
 * batch_splitting, regularization, reductions, checkpoints, durability,
 * mpi, hosts, schedules, clipping, accumulation, models; hosts:
 * conformance/hosts.c, the mpi variant across network namespaces, "not
 * supported" where the machine cannot make them). make nightly times these
 * slices (docs/NIGHTLY.md).
 *
 * --jobs N runs the suites in N parallel lanes (default: one per online
 * core, at most 4; conformance/lanes.c): the console and the report keep
 * the table's order; mpi and hosts run alone after the lanes. A mutant
 * build runs its suites in one lane (make conformance-mutants already runs
 * two mutants at a time).
 *
 * Prints "conformance: N passed, N failed, N not supported": a cell a
 * variant does not support did not run (SKIP), and is neither. Exit status 0
 * only when no case fails (or, for a mutant, the fault is caught).
 */
#include "conformance/conformance.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Suites that take no output folder, as units (conformance/lanes.c). */
#define UNIT(f) static int f##_unit(results *r, const char *outdir) { (void)outdir; return f(r); }
UNIT(loss_curves_blank_images) UNIT(loss_curves_policies) UNIT(loss_curves_opencl_mappings) UNIT(suite_reductions)
UNIT(suite_checkpoints) UNIT(suite_durability) UNIT(suite_compact) UNIT(suite_mpi) UNIT(suite_hosts)
UNIT(suite_schedules) UNIT(suite_clipping) UNIT(suite_accumulation) UNIT(suite_mixed_precision) UNIT(mixed_spatial_cells)
UNIT(suite_models)

/* Every suite, in the report's order: the one list (--only's names, the
 * usage message). mpi and hosts launch their own process groups and run
 * alone, after the lanes. */
static const unit k_units[] = {
    { "loss_curves", loss_curves_identity, false }, { "loss_curves", loss_curves_identity_l2, false },
    { "loss_curves", loss_curves_tpu, false }, { "loss_curves", loss_curves_blank_images_unit, false },
    { "loss_curves", loss_curves_policies_unit, false }, { "loss_curves", loss_curves_opencl_mappings_unit, false },
    { "loss_curves", loss_curves_long, false }, { "batch_splitting", suite_batch_splitting, false },
    { "regularization", suite_regularization, false }, { "reductions", suite_reductions_unit, false },
    { "checkpoints", suite_checkpoints_unit, false }, { "durability", suite_durability_unit, false },
    { "compact", suite_compact_unit, false }, { "mpi", suite_mpi_unit, true }, { "hosts", suite_hosts_unit, true },
    { "schedules", suite_schedules_unit, false }, { "clipping", suite_clipping_unit, false },
    { "accumulation", suite_accumulation_unit, false }, { "mixed_precision", suite_mixed_precision_unit, false },
    { "mixed_precision", mixed_spatial_cells_unit, false },
    { "models", suite_models_unit, false },
};
enum { NUNITS = sizeof k_units / sizeof k_units[0] };

/* Is suite s named in the comma-separated list (NULL: every suite)? */
static bool wanted(const char *list, const char *s)
{
    size_t n = strlen(s);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, s, n) == 0 && (p[n] == ',' || p[n] == 0)) return true;
    return list == NULL;
}

/* One lane per online core, at most 4 (conformance/lanes.c). */
static int default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 4 ? 4 : (int)n;
}

static bool known_suites(const char *list)
{
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        size_t len = strchr(p, ',') ? (size_t)(strchr(p, ',') - p) : strlen(p), i;
        for (i = 0; i < NUNITS; i++)
            if (strlen(k_units[i].suite) == len && strncmp(p, k_units[i].suite, len) == 0) break;
        if (i == NUNITS) return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    results r;
    const char *out = "reports/out", *mutant = NULL, *expect = NULL;
    double t0 = now();
    int fails, missed, jobs = default_jobs();
    memset(&r, 0, sizeof r);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) r.quick = true;
        else if (strcmp(argv[i], "--full") == 0) r.full = true;
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) out = argv[++i];
        else if (strcmp(argv[i], "--mutant") == 0 && i + 1 < argc) mutant = argv[++i];
        else if (strcmp(argv[i], "--variant") == 0 && i + 1 < argc) r.variant = argv[++i];
        else if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc) expect = argv[++i];
        else if (strcmp(argv[i], "--bin") == 0 && i + 1 < argc) r.bin = argv[++i];
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) r.only = argv[++i];
        else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc) {
            char *end;
            long j = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || j < 1 || j > 16) {
                fprintf(stderr, "conformance: --jobs: expected a lane count from 1 to 16, got '%s'\n", argv[i]);
                return 2;
            }
            jobs = (int)j;
        }
        else { fprintf(stderr, "usage: conformance [--quick] [--full] [--out DIR] [--only SUITE[,SUITE]] "
                       "[--bin DISTREF] [--variant NAME] [--jobs N] [--mutant NAME --expect SUITE]\n"); return 2; }
    }
    if (r.only && !known_suites(r.only)) {
        fprintf(stderr, "conformance: --only %s: a suite is not one of", r.only);
        for (size_t k = 0; k < NUNITS; k++)
            if (k == 0 || strcmp(k_units[k].suite, k_units[k - 1].suite) != 0)
                fprintf(stderr, "%s %s", k ? "," : "", k_units[k].suite);
        fputc('\n', stderr);
        return 2;
    }
    if (mutant) {   /* a mutant build: the quick suites must notice the fault */
        bool caught;
        if (!expect) { fprintf(stderr, "conformance: --mutant needs --expect SUITE\n"); return 2; }
        r.fault = mutant;
        r.quick = true;
        run_units(&r, out, k_units, NUNITS, wanted, 1);
        caught = strstr(r.fault_suites, expect) != NULL;
        printf("mutant %-22s must fail %-16s %s (failed: %s)\n", mutant, expect, caught ? "caught" : "MISSED",
               r.fault_suites[0] ? r.fault_suites : "nothing");
        free(r.v);
        return caught ? 0 : 1;
    }
    mkdir("reports", 0755);                      /* both may exist already */
    if (mkdir(out, 0755) != 0 && errno != EEXIST) { perror(out); return 1; }
    printf("== suites (exact mode: bit identity with ref one_device; fast mode: bounded drift)\n");
    fails = run_units(&r, out, k_units, NUNITS, wanted, jobs);
    missed = 0;
    if (write_report(&r, out, now() - t0) != 0) fprintf(stderr, "conformance: could not write the report\n");
    {
        tally t = count_verdicts(&r);
        char sum[128];
        format_summary(sum, sizeof sum, &t);
        printf("report: %s/index.html (%.0f s)\n", out, now() - t0);
        printf("conformance: %s\n", sum);
    }
    conformance_nightly_plant(r.variant, t0);
    free(r.v);
    return fails || missed ? 1 : 0;
}
