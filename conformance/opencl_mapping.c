/* distref conformance — the opencl variant's replica mappings (part of
 * loss_curves; docs/OPENCL.md).
 *
 * The same cells as the main matrix's small ones (mirrored with 1-4
 * replicas, central_storage with 2; 63 examples in batches of 20: uneven
 * splits and a short final batch of 3; L2 off and 0.001), under each
 * --opencl_mapping: shared (one queue), queues (one queue per replica),
 * subdevices (one sub-device per replica, clCreateSubDevices), and queues
 * over a device list 0,1 (one replica per device). Each must give the
 * reference one_device run's bits. A mapping the platform cannot give (a
 * device that does not split, one device where two are listed) is
 * recorded as "not supported: <why>". POCL_DEVICES="pthread pthread" makes
 * PoCL offer two devices (the Makefile's conformance target sets it).
 * The quick run (the mutants') keeps queues and subdevices with 2 and 3
 * replicas, L2 0.001.
 */
#include "conformance/conformance.h"
#include "distref/opencl.h"

#include <stdio.h>
#include <string.h>

typedef struct mapping_cell { const char *mapping, *devices; } mapping_cell;

static const mapping_cell k_maps[] = {
    { "shared", "" }, { "queues", "" }, { "subdevices", "" }, { "queues", "0,1" },
};

typedef struct strat_cell { const char *name; int gpus, replicas; } strat_cell;

static const strat_cell k_strats[] = {
    { "mirrored", 1, 1 }, { "mirrored", 2, 2 }, { "mirrored", 3, 3 }, { "mirrored", 4, 4 },
    { "central_storage", 2, 2 },
};

/* The mapping's own capability on this machine (sub-devices, two devices):
 * an error here is the platform's, reported as not supported. */
static bool mapping_available(results *r, const dr_run_config *c, const mapping_cell *m)
{
    dr_backend_params sel = { .numerics = DR_NUMERICS_EXACT, .places = 2, .platform = c->opencl_platform,
                              .devices = m->devices, .mapping = m->mapping };
    dr_run_config cell = *c;   /* the mapping's cell in the matrix: mirrored, 2 replicas */
    dr_err err;
    memset(&err, 0, sizeof err);
    if (dr_backend_opencl()->available(&sel, &err) == DR_OK) return true;
    set_strategy(&cell, "mirrored", 2, NULL, 1);
    record_not_supported(r, "loss_curves", &cell, 2, err.msg, "opencl --opencl_mapping=%s%s%s", m->mapping,
                         m->devices[0] ? " --opencl_device=" : "", m->devices);
    return false;
}

static int mappings(results *r, double l2)
{
    const size_t nmaps = sizeof k_maps / sizeof k_maps[0], nstrats = sizeof k_strats / sizeof k_strats[0];
    dr_run_config c;
    outcome ref, got;
    int fails = 0;
    base_config(&c, 63, 20, l2);
    set_strategy(&c, "one_device", 0, NULL, 1);
    run_case(&c, &ref);
    for (size_t k = r->quick ? 1 : 0; k < (r->quick ? 3 : nmaps); k++) {
        const mapping_cell *m = &k_maps[k];
        base_config(&c, 63, 20, l2);
        strcpy(c.variant, "opencl");
        strcpy(c.numerics, "exact");
        if (!mapping_available(r, &c, m)) continue;
        for (size_t i = r->quick ? 1 : 0; i < (r->quick ? 3 : nstrats); i++) {
            const strat_cell *s = &k_strats[i];
            base_config(&c, 63, 20, l2);
            strcpy(c.variant, "opencl");
            strcpy(c.numerics, "exact");
            snprintf(c.opencl_mapping, sizeof c.opencl_mapping, "%s", m->mapping);
            snprintf(c.opencl_device, sizeof c.opencl_device, "%s", m->devices);
            if (!set_strategy(&c, s->name, s->gpus, NULL, 1)) continue;
            if (!supported(r, "loss_curves", &c, s->replicas)) continue;
            run_case(&c, &got);
            fails += !outcome_same(&got, &ref);
            record(r, "loss_curves", &c, s->replicas, outcome_same(&got, &ref), got.seconds,
                   "opencl %s gpus=%d R=%d --opencl_mapping=%s%s%s l2=%g%s%s", s->name, s->gpus, s->replicas,
                   m->mapping, m->devices[0] ? " --opencl_device=" : "", m->devices, dr_is_unset(l2) ? 0 : l2,
                   got.error[0] ? ": " : "", got.error);
            outcome_free(&got);
        }
    }
    outcome_free(&ref);
    return fails;
}

int loss_curves_opencl_mappings(results *r)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    bool has = false;
    for (size_t v = 0; v < nv; v++) has |= strcmp(ev[v]->name, "opencl") == 0;
    if (!has) return 0;
    {
        dr_run_config c;
        base_config(&c, 63, 20, DR_UNSET);
        strcpy(c.variant, "opencl");
        set_strategy(&c, "mirrored", 2, NULL, 1);
        if (!supported(r, "loss_curves", &c, 2)) return 0;   /* no OpenCL here: reported once */
    }
    return (r->quick ? 0 : mappings(r, DR_UNSET)) + mappings(r, 1e-3);
}
