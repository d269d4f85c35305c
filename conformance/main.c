/* distref conformance — `make conformance`: run the suites over every
 * variant of the registry against the reference.
 *
 *   bin/conformance [--quick] [--full] [--out DIR] [--only SUITE[,SUITE]] [--variant NAME] [--bin DISTREF]
 *   build/.../mutants/conformance_NAME --mutant NAME --expect SUITE
 *
 * The second form is a mutant build: the same program linked against an
 * engine (or a reference) with one planted fault compiled in (scripts/
 * run_conformance_mutants.sh builds them). It runs the quick suites and
 * exits 0 only when SUITE failed: the fault was caught.
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

static const char *const k_suites[] = { "loss_curves", "batch_splitting", "regularization", "reductions",
                                        "checkpoints", "durability", "compact", "mpi", "hosts", "schedules", "clipping",
                                        "accumulation", "mixed_precision", "models" };
enum { NSUITES = sizeof k_suites / sizeof k_suites[0] };

/* Is suite s named in the comma-separated list (NULL: every suite)? */
static bool wanted(const char *list, const char *s)
{
    size_t n = strlen(s);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, s, n) == 0 && (p[n] == ',' || p[n] == 0)) return true;
    return list == NULL;
}

static bool known_suites(const char *list)
{
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        size_t len = strchr(p, ',') ? (size_t)(strchr(p, ',') - p) : strlen(p), i;
        for (i = 0; i < NSUITES; i++)
            if (strlen(k_suites[i]) == len && strncmp(p, k_suites[i], len) == 0) break;
        if (i == NSUITES) return false;
    }
    return true;
}

static int run_suites(results *r, const char *out)
{
    const char *o = r->only;
    return (wanted(o, "loss_curves") ? suite_loss_curves(r, out) : 0) +
           (wanted(o, "batch_splitting") ? suite_batch_splitting(r, out) : 0) +
           (wanted(o, "regularization") ? suite_regularization(r, out) : 0) +
           (wanted(o, "reductions") ? suite_reductions(r) : 0) +
           (wanted(o, "checkpoints") ? suite_checkpoints(r) : 0) +
           (wanted(o, "durability") ? suite_durability(r) : 0) + (wanted(o, "compact") ? suite_compact(r) : 0) +
           (wanted(o, "mpi") ? suite_mpi(r) : 0) + (wanted(o, "hosts") ? suite_hosts(r) : 0) +
           (wanted(o, "schedules") ? suite_schedules(r) : 0) +
           (wanted(o, "clipping") ? suite_clipping(r) : 0) + (wanted(o, "accumulation") ? suite_accumulation(r) : 0) +
           (wanted(o, "mixed_precision") ? suite_mixed_precision(r) : 0) + (wanted(o, "models") ? suite_models(r) : 0);
}

int main(int argc, char **argv)
{
    results r;
    const char *out = "reports/out", *mutant = NULL, *expect = NULL;
    double t0 = now();
    int fails, missed;
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
        else { fprintf(stderr, "usage: conformance [--quick] [--full] [--out DIR] [--only SUITE[,SUITE]] "
                       "[--bin DISTREF] [--variant NAME] [--mutant NAME --expect SUITE]\n"); return 2; }
    }
    if (r.only && !known_suites(r.only)) {
        fprintf(stderr, "conformance: --only %s: a suite is not one of", r.only);
        for (size_t k = 0; k < NSUITES; k++) fprintf(stderr, "%s %s", k ? "," : "", k_suites[k]);
        fputc('\n', stderr);
        return 2;
    }
    if (mutant) {   /* a mutant build: the quick suites must notice the fault */
        bool caught;
        if (!expect) { fprintf(stderr, "conformance: --mutant needs --expect SUITE\n"); return 2; }
        r.fault = mutant;
        r.quick = true;
        run_suites(&r, out);
        caught = strstr(r.fault_suites, expect) != NULL;
        printf("mutant %-22s must fail %-16s %s (failed: %s)\n", mutant, expect, caught ? "caught" : "MISSED",
               r.fault_suites[0] ? r.fault_suites : "nothing");
        free(r.v);
        return caught ? 0 : 1;
    }
    mkdir("reports", 0755);                      /* both may exist already */
    if (mkdir(out, 0755) != 0 && errno != EEXIST) { perror(out); return 1; }
    printf("== suites (exact mode: bit identity with ref one_device; fast mode: bounded drift)\n");
    fails = run_suites(&r, out);
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
