/* distref conformance — suite mixed_precision: the places a feature's mixed
 * cells run at, and the loop that runs them (conformance/mixed_accum_cells.c,
 * mixed_l2_cells.c; docs/CONFORMANCE.md).
 *
 * Every such cell is float16 with --loss_scale=dynamic:2^20 (steps skipped,
 * so the scale moves) over the feature's own flags (its setup), at one of
 * k_mixed_places: one_device, mirrored R=2 (nccl), mirrored R=3
 * (hierarchical_copy, 2 packs), multi_worker_mirrored 2 workers x 2 (ring);
 * --quick leaves the last out. */
#include "conformance/conformance.h"

#include <stdio.h>
#include <string.h>

#define MWMS_TF "{\"cluster\":{\"worker\":[\"h0:1\",\"h1:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}"

const mixed_place k_mixed_places[MIXED_PLACES] = {
    { "one_device", 0, NULL, 1, 1 }, { "mirrored", 2, "nccl", 1, 2 },
    { "mirrored", 3, "hierarchical_copy", 2, 3 }, { "multi_worker_mirrored", 2, "ring", 1, 4 },
};

void mixed_place_config(dr_run_config *c, void (*setup)(dr_run_config *), bool tf, const mixed_place *p,
                        const char *variant)
{
    setup(c);
    c->mixed.compute = DR_DTYPE_F16;
    c->mixed.loss_scale = DR_LOSS_SCALE_DYNAMIC;
    c->mixed.fixed_scale = 1048576.0f;
    c->mixed.tf_reduction = tf;
    c->tf_config = strcmp(p->name, "multi_worker_mirrored") == 0 ? MWMS_TF : NULL;
    set_strategy(c, p->name, p->gpus, p->alg, p->packs);
    snprintf(c->variant, sizeof c->variant, "%s", variant);
}

int mixed_place_cells(results *r, void (*setup)(dr_run_config *), const char *what, const char *variant, bool tf,
                      const outcome *oracle, size_t first, size_t last, const char *oracle_what)
{
    dr_run_config c;
    outcome got;
    int fails = 0;
    for (size_t i = first; i <= last; i++) {
        const mixed_place *p = &k_mixed_places[i];
        char why[200] = "";
        if (r->quick && i == MIXED_PLACES - 1) continue;
        mixed_place_config(&c, setup, tf, p, variant);
        if (strcmp(variant, "ref") != 0 && !supported(r, "mixed_precision", &c, p->replicas)) continue;
        run_case(&c, &got);
        bool pass = !got.error[0] && !oracle->error[0] && outcome_same_why(&got, oracle, why, sizeof why);
        fails += !pass;
        record(r, "mixed_precision", &c, p->replicas, pass, got.seconds, "%s %s overflow float16 %s %s R=%d: = the "
               "reference %s bits%s%.150s", variant, what, tf ? "tensorflow" : "exact", p->name, p->replicas,
               oracle_what, got.error[0] || !pass ? ": " : "", got.error[0] ? got.error : why);
        outcome_free(&got);
    }
    return fails;
}
