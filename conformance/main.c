/* distref conformance — `make conformance`: run the suites, then plant each
 * fault in the engine and require that the suite meant to catch it fails.
 *
 *   bin/conformance [--quick] [--full] [--out DIR]
 *
 * Exit status 0 only when every case passes and every fault is caught.
 */
#include "conformance/conformance.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int run_suites(results *r, const char *out)
{
    return suite_loss_curves(r, out) + suite_batch_splitting(r, out) + suite_regularization(r, out) +
           suite_reductions(r) + suite_checkpoints(r);
}

/* Each planted fault and the suite that must notice it. */
static const struct { const char *fault; const char *suite; } planted[] = {
    { "reg_not_scaled", "regularization" },
    { "reg_scaled_twice", "regularization" },
    { "mean_not_sum", "reductions" },
    { "wrong_split", "batch_splitting" },
    { "drop_short", "batch_splitting" },
    { "round_partial", "reductions" },
    { "pad_unmasked", "loss_curves" },
};

static int run_faults(results *r, const char *out)
{
    bool quick = r->quick;
    char path[1200];
    int missed = 0;
    snprintf(path, sizeof path, "%s/faults.dat", out);
    r->faults_dat = fopen(path, "w");
    if (r->faults_dat) fprintf(r->faults_dat, "# fault expected_suite caught suites_that_failed\n");
    printf("== planted faults (in the engine and the reference's tpu path; each must fail its suite)\n");
    for (size_t i = 0; i < sizeof planted / sizeof planted[0]; i++) {
        dr_err err;
        bool caught;
        dr_fault_parse(planted[i].fault, &r->fault_code, &err);
        r->fault = planted[i].fault;
        r->fault_failures = 0;
        r->fault_suites[0] = 0;
        r->quick = true;            /* the quick matrix is enough to notice a fault */
        run_suites(r, out);
        r->quick = quick;
        caught = strstr(r->fault_suites, planted[i].suite) != NULL;
        missed += !caught;
        r->fault = NULL;
        record(r, "planted_faults", NULL, 0, caught, 0, "%s must fail %s: %s (failed: %s)", planted[i].fault,
               planted[i].suite, caught ? "caught" : "MISSED", r->fault_suites[0] ? r->fault_suites : "nothing");
        if (r->faults_dat)
            fprintf(r->faults_dat, "%s %s %d %s\n", planted[i].fault, planted[i].suite, caught,
                    r->fault_suites[0] ? r->fault_suites : "-");
    }
    r->fault_code = DR_FAULT_NONE;
    if (r->faults_dat) fclose(r->faults_dat);
    return missed;
}

int main(int argc, char **argv)
{
    results r;
    const char *out = "reports/out";
    double t0 = now();
    int fails, missed;
    memset(&r, 0, sizeof r);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) r.quick = true;
        else if (strcmp(argv[i], "--full") == 0) r.full = true;
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) out = argv[++i];
        else { fprintf(stderr, "usage: conformance [--quick] [--full] [--out DIR]\n"); return 2; }
    }
    mkdir("reports", 0755);                      /* both may exist already */
    if (mkdir(out, 0755) != 0 && errno != EEXIST) { perror(out); return 1; }
    printf("== suites (exact mode: bit identity with ref one_device; fast mode: bounded drift)\n");
    fails = run_suites(&r, out);
    missed = run_faults(&r, out);
    if (write_report(&r, out, now() - t0) != 0) fprintf(stderr, "conformance: could not write the report\n");
    {
        size_t pass = 0;
        for (size_t i = 0; i < r.n; i++) pass += r.v[i].pass;
        printf("not built yet: the OpenCL and MPI variants; multi_worker_mirrored, parameter_server "
               "and tpu in the engine (the reference has them)\n");
        printf("report: %s/index.html (%.0f s)\n", out, now() - t0);
        printf("conformance: %zu passed, %zu failed\n", pass, r.n - pass);
    }
    free(r.v);
    return fails || missed ? 1 : 0;
}
