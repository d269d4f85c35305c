/* distref conformance — `make conformance`: run the suites over every
 * variant of the registry against the reference.
 *
 *   bin/conformance [--quick] [--full] [--out DIR] [--only mpi] [--bin DISTREF]
 *   build/.../mutants/conformance_NAME --mutant NAME --expect SUITE
 *
 * The second form is a mutant build: the same program linked against an
 * engine (or a reference) with one planted fault compiled in (scripts/
 * run_conformance_mutants.sh builds them). It runs the quick suites and
 * exits 0 only when SUITE failed: the fault was caught.
 *
 * Exit status 0 only when every case passes (or, for a mutant, the fault is
 * caught).
 */
#include "conformance/conformance.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int run_suites(results *r, const char *out)
{
    if (r->only && strcmp(r->only, "mpi") == 0) return suite_mpi(r);
    return suite_loss_curves(r, out) + suite_batch_splitting(r, out) + suite_regularization(r, out) +
           suite_reductions(r) + suite_checkpoints(r) + suite_durability(r) + suite_compact(r) + suite_mpi(r);
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
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc && strcmp(argv[i + 1], "mpi") == 0) r.only = argv[++i];
        else { fprintf(stderr, "usage: conformance [--quick] [--full] [--out DIR] [--only mpi] [--bin DISTREF] "
                       "[--variant NAME] [--mutant NAME --expect SUITE]\n"); return 2; }
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
        size_t pass = 0;
        for (size_t i = 0; i < r.n; i++) pass += r.v[i].pass;
        printf("report: %s/index.html (%.0f s)\n", out, now() - t0);
        printf("conformance: %zu passed, %zu failed\n", pass, r.n - pass);
    }
    free(r.v);
    return fails || missed ? 1 : 0;
}
