/* distref harness — the registry of variants.
 *
 * Each variant is a dr_variant table exported by its layer: the reference
 * (ref/variant.c) and the engine's OpenMP, OpenCL and MPI variants (strategies/engine.c).
 * Adding a variant is adding its table here; `make conformance` then runs
 * it in every cell it supports and reports the others as not supported.
 */
#include "distref/harness.h"
#include "distref/engine.h"
#include "distref/factory.h"
#include "distref/ref.h"

#include <string.h>

/* The reference first; variants started by a launcher (mpi) last. */
static const dr_variant *const registry[] = { &dr_variant_ref, &dr_variant_openmp, &dr_variant_opencl,
                                              &dr_variant_mpi };

const dr_variant *const *dr_variants(size_t *n)
{
    *n = sizeof registry / sizeof registry[0];
    return registry;
}

int dr_variant_lookup(const char *name, const dr_variant **out, dr_err *err)
{
    char names[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++) {
        if (strcmp(name, registry[i]->name) == 0) { *out = registry[i]; return DR_OK; }
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? " or " : "", registry[i]->name);
    }
    return dr_fail(err, DR_EUSAGE, "--variant: expected %s, got '%s'", names, name);
}

void dr_variants_print(FILE *out)
{
    static const char *const strategies[] = { "off", "one_device", "mirrored", "central_storage",
                                              "multi_worker_mirrored", "parameter_server", "tpu" };
    static const char *const numerics[] = { "exact", "fast" };
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++) {
        const dr_variant *v = registry[i];
        fprintf(out, "%s: %s\n  launch: %s\n", v->name, v->about, v->launcher[0] ? v->launcher : "bin/distref ...");
        for (size_t k = 0; k < sizeof strategies / sizeof strategies[0]; k++)
            for (size_t m = 0; m < 2; m++) {
                dr_run_config cfg;
                dr_run_plan plan;
                dr_err err;
                int rc;
                dr_run_config_defaults(&cfg);
                snprintf(cfg.variant, sizeof cfg.variant, "%s", v->name);
                snprintf(cfg.numerics, sizeof cfg.numerics, "%s", numerics[m]);
                memset(&err, 0, sizeof err);
                rc = dr_get_distribution_strategy(strategies[k], strcmp(strategies[k], "mirrored") ? 0 : 2, NULL, 1,
                                                  strcmp(strategies[k], "tpu") ? NULL : "v3-8", &cfg.strategy, &err);
                if (rc == DR_OK) rc = dr_run_plan_make(&cfg, &plan, &err);
                if (rc == DR_OK) rc = v->supports(&plan, &err);
                fprintf(out, "  %-22s %-6s %s%s\n", strategies[k], numerics[m], rc == DR_OK ? "supported" : "not supported: ",
                        rc == DR_OK ? "" : err.msg);
            }
    }
}
