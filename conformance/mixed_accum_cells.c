/* distref conformance — suite mixed_precision, accumulation cells:
 * --gradient_accumulation_steps=k with a mixed policy (docs/TRAINING_FEATURES.md,
 * "Mixed precision with clipping and accumulation"; ref/mixed_step.c,
 * strategies/mixed.c).
 *
 * Keras 3's measured order: each micro-step is reduced, checked, skipped or
 * unscaled on its own; the update comes after k finite micro-steps. The
 * oracle is the reference one_device run of float16 with
 * --loss_scale=dynamic:2^20 at k=3 (2 micro-steps skipped, so the updates
 * fall on micro-steps 5, 8, 11, off the multiples of k), 12 micro-batches of
 * 64. Exact reduction: the reference under mirrored R=2, R=3 and
 * multi_worker_mirrored 2 x 2, each in-process engine variant that runs the
 * mixed step under one_device, mirrored R=2, R=3 and 2 x 2, and mpi -np 2
 * give its bits (every step's loss, the loss-scale series, the weights);
 * --mixed_reduction=tensorflow: each engine variant at mirrored R=2 = the
 * reference at R=2. Caught mutant: mixed_accum_counts_skipped
 * (tests/faults.tsv).
 */
#include "conformance/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MWMS_TF "{\"cluster\":{\"worker\":[\"h0:1\",\"h1:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}"

typedef struct place { const char *name; int gpus; const char *alg; int packs, replicas; } place;

static const place k_at[] = {
    { "one_device", 0, NULL, 1, 1 }, { "mirrored", 2, "nccl", 1, 2 },
    { "mirrored", 3, "hierarchical_copy", 2, 3 }, { "multi_worker_mirrored", 2, "ring", 1, 4 },
};

#define ACC_K 3

static void acc_config(dr_run_config *c, bool tf, const place *p, const char *variant)
{
    base_config(c, 512, 64, 0.0);
    c->epochs = 0;
    c->train_steps = 4 * ACC_K;
    c->gradient_accumulation_steps = ACC_K;
    c->mixed.compute = DR_DTYPE_F16;
    c->mixed.loss_scale = DR_LOSS_SCALE_DYNAMIC;
    c->mixed.fixed_scale = 1048576.0f;
    c->mixed.tf_reduction = tf;
    c->tf_config = strcmp(p->name, "multi_worker_mirrored") == 0 ? MWMS_TF : NULL;
    set_strategy(c, p->name, p->gpus, p->alg, p->packs);
    snprintf(c->variant, sizeof c->variant, "%s", variant);
}

static int cells_on(results *r, const char *variant, bool tf, const outcome *oracle, size_t first, size_t last,
                    const char *oracle_what)
{
    dr_run_config c;
    outcome got;
    int fails = 0;
    for (size_t i = first; i <= last; i++) {
        char why[200] = "";
        if (r->quick && i == 3) continue;
        acc_config(&c, tf, &k_at[i], variant);
        if (strcmp(variant, "ref") != 0 && !supported(r, "mixed_precision", &c, k_at[i].replicas)) continue;
        run_case(&c, &got);
        bool pass = !got.error[0] && !oracle->error[0] && outcome_same_why(&got, oracle, why, sizeof why);
        fails += !pass;
        record(r, "mixed_precision", &c, k_at[i].replicas, pass, got.seconds, "%s accumulation k=%d overflow float16 "
               "%s %s R=%d: = the reference %s bits%s%.150s", variant, ACC_K, tf ? "tensorflow" : "exact",
               k_at[i].name, k_at[i].replicas, oracle_what, got.error[0] || !pass ? ": " : "",
               got.error[0] ? got.error : why);
        outcome_free(&got);
    }
    return fails;
}

int mixed_accum_cells(results *r)
{
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    dr_run_config c;
    outcome oracle, tf2;
    int fails = 0;
    acc_config(&c, false, &k_at[0], "ref");
    run_case(&c, &oracle);
    acc_config(&c, true, &k_at[1], "ref");
    run_case(&c, &tf2);
    fails += cells_on(r, "ref", false, &oracle, 1, 3, "one_device");
    for (size_t v = 0; v < nv; v++) {
        fails += cells_on(r, ev[v]->name, false, &oracle, 0, 3, "one_device");
        fails += cells_on(r, ev[v]->name, true, &tf2, 1, 1, "mirrored R=2");
    }
    if (!r->quick && !r->fault && (!r->variant || strcmp(r->variant, "mpi") == 0) &&
        system("command -v mpirun > /dev/null 2>&1") == 0) {
        outcome got;
        char why[200] = "";
        acc_config(&c, false, &k_at[3], "mpi");
        set_strategy(&c, "multi_worker_mirrored", 1, "ring", 1);
        run_mpi_pair(r, "--global_batch_size=64 --synthetic_examples=512 --train_steps=12 "
                     "--gradient_accumulation_steps=3 --dtype_policy=mixed_float16 --loss_scale=dynamic:1048576", &got);
        bool pass = !got.error[0] && outcome_same_why(&got, &oracle, why, sizeof why);
        fails += !pass;
        record(r, "mixed_precision", &c, 2, pass, got.seconds, "mpi -np 2 multi_worker_mirrored accumulation k=3 "
               "overflow float16 exact: = the reference one_device bits%s%.150s", got.error[0] || !pass ? ": " : "",
               got.error[0] ? got.error : why);
        outcome_free(&got);
    }
    outcome_free(&oracle); outcome_free(&tf2);
    return fails;
}
