/* distref conformance — suite `models`, --dropout_masks over several workers
 * (issue 31): a masks file's row is a row of the step's global batch, and
 * under the DATA input policy W workers x R replicas cut one global batch
 * into W*R slices (replica r of worker w: slice r*W + w), so each replica
 * reads its slice's rows of the file, the rows one worker at the same W*R
 * reads, and every topology gives one_device's bits from the same file.
 *
 * cnn_synthetic sync BN (Dropout 0.25 over 72 units), 100 examples at
 * G = 32: three steps of 32 and a short one of 4 (slices of 1), a masks
 * file of 4 steps with a fixed pseudo-random pattern written here:
 *   applied   the reference one_device from the file != from the RNG
 *             (the file reaches the Dropout layer)
 *   ref       mirrored R = 4 and multi_worker_mirrored 2 workers x 2 = the
 *             reference one_device from the file: every step's loss bits
 *             and the final weights
 *   engine    each engine variant multi_worker_mirrored 2 x 2 = the same;
 *             one without masks answers "not supported" with its reason
 *   mpi       mpirun -np 2, 2 GPUs a rank = the same (not --quick, not
 *             under a planted fault)
 * At 2 x 2 worker 1's replica 0 holds slice 1 (rows 8..15) though it sits
 * third in the worker-major arrangement: a replica that read the file at
 * its place in the arrangement, or without its worker's offset, reads
 * another example's mask. Planted faults (tests/faults.tsv):
 * ref_dropout_masks_arranged_row (the reference's rows at the arrangement's
 * offsets) and engine_data_row0_no_worker (the engine's slice without the
 * worker's offset) must fail the suite.
 */
#include "conformance/conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distref/dropout_masks.h"
#include "distref/fileio.h"

#define MWMS_TF "{\"cluster\":{\"worker\":[\"h0:1\",\"h1:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}"
#define EXAMPLES 100u
#define G        32u
#define STEPS    4u    /* 32, 32, 32, 4 */
#define UNITS    72u   /* cnn_synthetic's Dropout: 3 x 3 x 8 */

/* A masks file of one layer: header, then STEPS x G x UNITS bytes, about 3
 * in 4 kept (xorshift32): every row its own mask. */
static int write_masks(const char *path, dr_err *err)
{
    size_t at = DR_DROPOUT_MASKS_HEADER + 4, n = at + (size_t)STEPS * G * UNITS;
    uint8_t *b = malloc(n);
    uint32_t x = 2463534242u;
    int rc;
    if (!b) return dr_fail(err, DR_ENOMEM, "out of memory for a masks file");
    memcpy(b, DR_DROPOUT_MASKS_MAGIC, 8);
    dr_put_u32le(b + 8, DR_DROPOUT_MASKS_VERSION);
    dr_put_u32le(b + 12, 1);
    dr_put_u32le(b + 16, STEPS);
    dr_put_u32le(b + 20, G);
    dr_put_u32le(b + 24, UNITS);
    for (size_t i = at; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        b[i] = (x & 3u) != 0;
    }
    rc = dr_write_atomic(path, b, n, err);
    free(b);
    return rc;
}

/* cnn_synthetic sync BN under variant on `strategy` x gpus (multi_worker_mirrored:
 * 2 workers) from the masks file ("": the RNG's). */
static void masks_config(dr_run_config *c, const char *variant, const char *strategy, int gpus, const char *masks)
{
    base_config(c, EXAMPLES, G, 0.0);
    snprintf(c->experiment, sizeof c->experiment, "cnn_synthetic");
    snprintf(c->batch_norm, sizeof c->batch_norm, "sync");
    snprintf(c->variant, sizeof c->variant, "%s", variant);
    snprintf(c->dropout_masks, sizeof c->dropout_masks, "%s", masks);
    if (strcmp(strategy, "multi_worker_mirrored") == 0) c->tf_config = MWMS_TF;
    set_strategy(c, strategy, gpus, strcmp(strategy, "mirrored") == 0 ? "nccl" : NULL, 1);
}

/* variant's run on strategy x gpus (R replicas) from the file against want. */
static int cell(results *r, const char *variant, const char *strategy, int gpus, int R, const char *masks,
                const outcome *want)
{
    dr_run_config c;
    outcome got;
    char why[200] = "";
    masks_config(&c, variant, strategy, gpus, masks);
    if (!supported(r, "models", &c, R)) return 0;
    run_case(&c, &got);
    bool pass = !got.error[0] && got.weights && want->weights && outcome_same_why(&got, want, why, sizeof why);
    record(r, "models", &c, R, pass, got.seconds, "%s: cnn_synthetic --dropout_masks %s%s x %d: loss bits and "
           "weights = the reference one_device from the file%s%.150s", variant, strategy,
           c.tf_config ? " 2 workers" : "", gpus, got.error[0] || !pass ? ": " : "", got.error[0] ? got.error : why);
    outcome_free(&got);
    return !pass;
}

static int mpi_cell(results *r, const char *masks, const outcome *want)
{
    dr_run_config c;
    outcome got;
    char why[200] = "", args[1400];
    masks_config(&c, "mpi", "multi_worker_mirrored", 2, masks);
    snprintf(args, sizeof args, "--experiment=cnn_synthetic --synthetic_examples=%u --global_batch_size=%u --epochs=1 "
             "--batch_norm=sync --dropout_masks=%s", EXAMPLES, G, masks);
    run_mpi_ranks(r, 2, args, &got);
    bool pass = !got.error[0] && outcome_same_why(&got, want, why, sizeof why);
    record(r, "models", &c, 4, pass, got.seconds, "cnn_synthetic --dropout_masks mpi -np 2 x 2 GPUs "
           "multi_worker_mirrored: = the reference one_device from the file%s%.150s",
           got.error[0] || !pass ? ": " : "", got.error[0] ? got.error : why);
    outcome_free(&got);
    return !pass;
}

int models_masks_cells(results *r)
{
    char dir[] = "/tmp/distref_masks_XXXXXX", path[200], cmd[240];
    dr_run_config c;
    dr_err err = { 0, "" };
    outcome want, rng;
    size_t nv;
    const dr_variant *const *ev = engine_variants(r, &nv);
    int fails = 0;
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/m.masks", dir);
    masks_config(&c, "ref", "one_device", 0, path);
    if (write_masks(path, &err) != DR_OK) {
        record(r, "models", &c, 1, false, 0.0, "cnn_synthetic --dropout_masks: %.150s", err.msg);
        return 1;
    }
    run_case(&c, &want);
    masks_config(&c, "ref", "one_device", 0, "");
    run_case(&c, &rng);
    bool applied = !want.error[0] && !rng.error[0] && want.weights && strcmp(want.sha, rng.sha) != 0;
    record(r, "models", &c, 1, applied, want.seconds + rng.seconds, "ref: cnn_synthetic one_device --dropout_masks: "
           "weights other than the RNG's masks give (the file applied)%s%.150s", want.error[0] ? ": " : "", want.error);
    fails += !applied;
    if (applied) {
        fails += cell(r, "ref", "mirrored", 4, 4, path, &want);
        fails += cell(r, "ref", "multi_worker_mirrored", 2, 4, path, &want);
        for (size_t v = 0; v < nv; v++) fails += cell(r, ev[v]->name, "multi_worker_mirrored", 2, 4, path, &want);
        if (!r->quick && !r->fault && (!r->variant || strcmp(r->variant, "mpi") == 0) &&
            system("command -v mpirun > /dev/null 2>&1") == 0)
            fails += mpi_cell(r, path, &want);
    }
    outcome_free(&want);
    outcome_free(&rng);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
    return fails;
}
