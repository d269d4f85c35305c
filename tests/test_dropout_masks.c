/* distref tests — `--dropout_masks=FILE` (core/dropout_masks.c): the
 * parser's refusals (each naming the file and the field), the check against
 * a run (layers, units, rows = G, steps), bin/distref's refusals (exit 2:
 * a missing or truncated file, W > 1 workers each on its own stream
 * (--auto_shard_policy=off), --dropout=off, a model without Dropout,
 * parameter_server), and the masks applied: every
 * replica count of the reference and the openmp engine gives one_device's
 * bits from the same file under sync batch norm (a row is the global
 * batch's; planted faults engine_dropout_mask_row: the engine reads the
 * rows reversed, ref_dropout_mask_replica_row: the reference reads each
 * replica's rows from row 0), and another file, or the RNG, other bits.
 * TensorFlow's masks against TensorFlow's losses and weights: test_golden's
 * cnn_dropout_masks_R1, _R2, _R4. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distref/dropout_masks.h"
#include "distref/factory.h"
#include "distref/fileio.h"
#include "distref/harness.h"
#include "distref/train.h"
#include "tests/shell.h"
#include "tests/tmpdir.h"

#ifndef DR_BIN
#define DR_BIN "bin/distref"
#endif

#define MWMS_TF "{\"cluster\":{\"worker\":[\"h0:1\",\"h1:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}"

/* cnn_synthetic: one Dropout layer of 72 units (3 x 3 x 8) */
#define UNITS 72u
#define G     32u
#define N     72u   /* examples: steps of 32, 32, 8 */
#define STEPS 3u

static char out[1 << 15];

static int setup(void **state) { return temp_dir_from(state, "/tmp/distref_masks_XXXXXX"); }
static int teardown(void **state) { return drop_temp_dir(state); }

/* A masks file's bytes: header, units, then steps x layers x rows x units of
 * a fixed pseudo-random pattern (about 3 in 4 kept); *n its length. */
static uint8_t *masks_bytes(uint32_t layers, uint32_t steps, uint32_t rows, const uint32_t *units, uint32_t salt,
                            size_t *n)
{
    size_t cells = 0, at = DR_DROPOUT_MASKS_HEADER + 4 * (size_t)layers;
    uint8_t *b;
    uint32_t x = 2463534242u ^ salt;
    for (uint32_t k = 0; k < layers; k++) cells += (size_t)rows * units[k];
    *n = at + cells * steps;
    assert_non_null(b = malloc(*n));
    memcpy(b, DR_DROPOUT_MASKS_MAGIC, 8);
    dr_put_u32le(b + 8, DR_DROPOUT_MASKS_VERSION);
    dr_put_u32le(b + 12, layers);
    dr_put_u32le(b + 16, steps);
    dr_put_u32le(b + 20, rows);
    for (uint32_t k = 0; k < layers; k++) dr_put_u32le(b + DR_DROPOUT_MASKS_HEADER + 4 * k, units[k]);
    for (size_t i = at; i < *n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;   /* xorshift32 */
        b[i] = (x & 3u) != 0;
    }
    return b;
}

static void write_masks(const char *path, uint32_t steps, uint32_t rows, uint32_t salt)
{
    size_t n;
    uint32_t units = UNITS;
    uint8_t *b = masks_bytes(1, steps, rows, &units, salt, &n);
    dr_err err = { 0, "" };
    assert_int_equal(dr_write_atomic(path, b, n, &err), DR_OK);
    free(b);
}

/* parse's refusal of buf[0..n): DR_EFORMAT, the message holding want. */
static void refused(const uint8_t *buf, size_t n, const char *want)
{
    dr_dropout_masks mk;
    dr_err err = { 0, "" };
    assert_int_equal(dr_dropout_masks_parse(buf, n, "m.masks", &mk, &err), DR_EFORMAT);
    if (!strstr(err.msg, want) || !strstr(err.msg, "m.masks")) fail_msg("expected '%s' in: %s", want, err.msg);
    assert_null(mk.keep);
}

static void parse_and_refusals(void **state)
{
    const uint32_t units[2] = { 5, 3 };
    size_t n;
    uint8_t *b = masks_bytes(2, 3, 4, units, 1, &n), *c = malloc(n + 1);
    dr_dropout_masks mk;
    dr_err err = { 0, "" };
    (void)state;
    assert_non_null(c);
    assert_int_equal(dr_dropout_masks_parse(b, n, "m.masks", &mk, &err), DR_OK);
    assert_int_equal(mk.layers, 2);
    assert_int_equal(mk.steps, 3);
    assert_int_equal(mk.rows, 4);
    mk.slot[6] = 0;   /* model layers 6 and 9 the two Dropout layers */
    mk.slot[9] = 1;
    /* (step 2, layer 1, row 3, unit 1): the step's second block, after 4 x 5 cells */
    assert_int_equal(dr_dropout_masks_keep(&mk, 3, 9, 3, 1), b[32 + 2 * 32 + 20 + 3 * 3 + 1]);
    assert_int_equal(dr_dropout_masks_keep(&mk, 2, 6, 2, 4), b[32 + 32 + 2 * 5 + 4]);
    dr_dropout_masks_free(&mk);
#define REFUSE(edit, want) do { memcpy(c, b, n); len = n; edit; refused(c, len, want); } while (0)
    {
        size_t len = n;
        REFUSE(len = 23, "shorter than the 24-byte header");
        REFUSE(c[0] = 'X', "field magic");
        REFUSE(dr_put_u32le(c + 8, 2), "field version: 2");
        REFUSE(dr_put_u32le(c + 12, 0), "field layers: 0");
        REFUSE(dr_put_u32le(c + 12, DR_MAX_LAYERS + 1), "field layers: 41");
        REFUSE(dr_put_u32le(c + 16, 0), "field steps: 0");
        REFUSE(dr_put_u32le(c + 20, 0), "field rows: 0");
        REFUSE(dr_put_u32le(c + 28, 0), "field units[1]: 0");
        REFUSE(len = 26, "truncated: 26 bytes, the header with 2 layers");
        REFUSE(len = n - 1, "truncated");
        REFUSE(dr_put_u32le(c + 16, 0x7fffffffu), "field steps: 2147483647 steps");
        REFUSE(len = n + 1, "1 bytes after the masks' end");
        REFUSE(c[32 + 32 + 20 + 2 * 3 + 2] = 2, "field mask at step 1, layer 1, row 2, unit 2: 2");
    }
#undef REFUSE
    free(b);
    free(c);
}

/* The check against cnn_synthetic at G = 32 over 3 steps. */
static void check_against_run(void **state)
{
    const uint32_t two[2] = { UNITS, UNITS }, other = 71;
    dr_experiment exp;
    dr_dropout_masks mk;
    dr_err err = { 0, "" };
    size_t n;
    uint32_t units = UNITS;
    uint8_t *b;
    (void)state;
    assert_int_equal(dr_experiment_lookup("cnn_synthetic", &exp, &err), DR_OK);
    struct { uint32_t layers; const uint32_t *units; uint32_t steps, rows; uint64_t run_steps; const char *want; } t[] = {
        { 1, &units, STEPS, G, STEPS, NULL },
        { 1, &units, STEPS + 2, G, STEPS, NULL },   /* more steps than the run: the first ones */
        { 1, &other, STEPS, G, STEPS, "field units[0]: 71, but the model's Dropout layer 0 (its layer 8) has 72" },
        { 2, two, STEPS, G, STEPS, "field layers: 2, but the model has 1 Dropout layer" },
        { 1, &units, STEPS, G + 1, STEPS, "field rows: 33, but the global batch size is 32" },
        { 1, &units, STEPS - 1, G, STEPS, "field steps: 2, but the run trains 3 steps" },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        b = masks_bytes(t[i].layers, t[i].steps, t[i].rows, t[i].units, 3, &n);
        assert_int_equal(dr_dropout_masks_parse(b, n, "m", &mk, &err), DR_OK);
        int rc = dr_dropout_masks_check(&mk, &exp.model, G, t[i].run_steps, "m.masks", &err);
        if (!t[i].want) assert_int_equal(rc, DR_OK);
        else if (rc != DR_EUSAGE || !strstr(err.msg, t[i].want) || !strstr(err.msg, "--dropout_masks=m.masks"))
            fail_msg("case %zu: rc %d, expected '%s' in: %s", i, rc, t[i].want, err.msg);
        if (!t[i].want) assert_int_equal(mk.slot[8], 0);
        dr_dropout_masks_free(&mk);
        free(b);
    }
}

/* bin/distref's refusals: exit 2, naming the flag, the file and the field. */
static void cli_refusals(void **state)
{
    const char *dir = *state;
    const char *run = DR_BIN " train --experiment=cnn_synthetic --synthetic_examples=72 --epochs=1";
    char p[1100];
    int st;
    snprintf(p, sizeof p, "%s/ok.masks", dir);
    write_masks(p, STEPS, G, 5);
    st = shell_run(out, sizeof out, "%s --dropout_masks=%s/none.masks --model_dir=%s/a", run, dir, dir);
    shell_expect(out, st, 2, "none.masks");
    st = shell_run(out, sizeof out, "head -c 1000 %s > %s/short.masks && %s --dropout_masks=%s/short.masks "
                   "--model_dir=%s/b", p, dir, run, dir, dir);
    shell_expect(out, st, 2, "short.masks: truncated: 1000 bytes");
    st = shell_run(out, sizeof out, "%s --dropout_masks=%s --global_batch_size=24 --model_dir=%s/c", run, p, dir);
    shell_expect(out, st, 2, "field rows: 32, but the global batch size is 24");
    /* (the rest at G = 32, the experiment's) */
    st = shell_run(out, sizeof out, "%s --dropout_masks=%s --train_steps=4 --model_dir=%s/d", run, p, dir);
    shell_expect(out, st, 2, "field steps: 3, but the run trains 4 steps");
    /* over 2 workers: DATA's one global batch (the default here) runs, each
     * worker's own stream (OFF) is refused */
    st = shell_run(out, sizeof out, "TF_CONFIG='" MWMS_TF "' %s --dropout_masks=%s --distribution_strategy="
                   "multi_worker_mirrored --num_gpus=1 --auto_shard_policy=off --model_dir=%s/e", run, p, dir);
    shell_expect(out, st, 2, "with 2 workers and --auto_shard_policy=off: not supported: each worker reads its own "
                 "stream");
    st = shell_run(out, sizeof out, "%s --dropout_masks=%s --dropout=off --model_dir=%s/f", run, p, dir);
    shell_expect(out, st, 2, "--dropout=off sets every rate to 0");
    st = shell_run(out, sizeof out, DR_BIN " train --experiment=mlp_synthetic --dropout_masks=%s --model_dir=%s/g",
                   p, dir);
    shell_expect(out, st, 2, "the model has no Dropout layer");
    st = shell_run(out, sizeof out, "%s --dropout_masks=%s --distribution_strategy=parameter_server "
                   "--model_dir=%s/h", run, p, dir);
    shell_expect(out, st, 2, "--dropout_masks does not apply to --distribution_strategy=parameter_server");
    /* a resume: the masks as before, or refused (checkpoint bit DR_CKPT_DROPOUT_MASKS) */
    st = shell_run(out, sizeof out, "%s --dropout_masks=%s --train_steps=1 --model_dir=%s/r", run, p, dir);
    shell_expect(out, st, 0, "steps=1");
    st = shell_run(out, sizeof out, "%s --train_steps=2 --model_dir=%s/r", run, dir);
    shell_expect(out, st, 2, "--dropout_masks not given, but the checkpoint in");
    st = shell_run(out, sizeof out, "%s --dropout_masks=%s --train_steps=2 --model_dir=%s/r", run, p, dir);
    shell_expect(out, st, 0, "steps=2");
    st = shell_run(out, sizeof out, "test -e %s/a || test -e %s/e || echo none", dir, dir);
    shell_expect(out, st, 0, "none");   /* a refused run leaves no directory */
}

/* cnn_synthetic on N examples at G from the masks file (""; the RNG's) under
 * variant: mirrored R, or R < 0: multi_worker_mirrored 2 workers x -R. */
static void train(const char *dir, const char *name, const char *variant, int R, const char *masks, char sha[65])
{
    dr_run_config c;
    dr_run_result res;
    dr_err err = { 0, "" };
    dr_run_config_defaults(&c);
    snprintf(c.experiment, sizeof c.experiment, "cnn_synthetic");
    c.synthetic_examples = N;
    c.global_batch_size = G;
    c.epochs = 1;
    snprintf(c.variant, sizeof c.variant, "%s", variant);
    snprintf(c.model_dir, sizeof c.model_dir, "%s/%s", dir, name);
    snprintf(c.dropout_masks, sizeof c.dropout_masks, "%s", masks);
    if (R < 0) c.tf_config = MWMS_TF;
    assert_int_equal(dr_get_distribution_strategy(R < 0 ? "multi_worker_mirrored" : "mirrored", R < 0 ? -R : R, NULL,
                                                  1, NULL, &c.strategy, &err), DR_OK);
    if (dr_run_train(&c, &res, &err) != DR_OK) fail_msg("%s: %s", name, err.msg);
    assert_int_equal(res.steps, STEPS);
    memcpy(sha, res.weights_sha256, 65);
}

/* The masks applied: every R of the reference and of openmp = the
 * reference at R = 1 from the same file (sync BN; R = 3 splits 32 as
 * 11, 11, 10 and the short batch of 8 as 3, 3, 2), and so do 2 workers x 2
 * (DATA: worker 1's replica 0 reads rows 8.. of the global batch, its
 * slice 1, though it sits third in the worker-major arrangement); another
 * file (one other pattern) and the RNG's masks move the weights. */
static void every_split_same_bits(void **state)
{
    const char *dir = *state;
    char a[1100], b[1100], ref[65], sha[65], name[32];
    snprintf(a, sizeof a, "%s/a.masks", dir);
    snprintf(b, sizeof b, "%s/b.masks", dir);
    write_masks(a, STEPS, G, 7);
    write_masks(b, STEPS, G, 8);
    train(dir, "ref1", "ref", 1, a, ref);
    for (int R = 1; R <= 3; R++) {
        snprintf(name, sizeof name, "omp%d", R);
        train(dir, name, "openmp", R, a, sha);
        assert_string_equal(sha, ref);
        if (R == 1) continue;
        snprintf(name, sizeof name, "ref%d", R);
        train(dir, name, "ref", R, a, sha);
        assert_string_equal(sha, ref);
    }
    train(dir, "mwms_ref", "ref", -2, a, sha);
    assert_string_equal(sha, ref);
    train(dir, "mwms_omp", "openmp", -2, a, sha);
    assert_string_equal(sha, ref);
    train(dir, "other", "ref", 1, b, sha);
    assert_string_not_equal(sha, ref);
    train(dir, "rng", "ref", 1, "", sha);
    assert_string_not_equal(sha, ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_and_refusals),
        cmocka_unit_test(check_against_run),
        cmocka_unit_test_setup_teardown(cli_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(every_split_same_bits, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
