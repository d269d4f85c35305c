/* Tests of trajectories and `distref diff` (distref/npy.h,
 * distref/trajectory.h, distref/traj_diff.h; docs/JUDGING.md): .npy round
 * trips and every reader refusal, the index's checks, --trajectory's
 * steps, ulp distances (-0/+0, NaN payloads), the first divergence and
 * the statistics on planted differences, tolerances, --plot's data file
 * against the JSON, and bin/distref train --trajectory + diff end to end
 * (mirrored 4 openmp vs one_device ref identical; exit 0/1/2), conv models'
 * tensors (Keras's shapes, BN's moving statistics; sync BN at R = 2 and
 * the openmp engine = one_device, replica BN told apart). Mutants:
 * scripts/exact_mutants.sh (traj_*). */
#include "distref/npy.h"
#include "distref/trajectory.h"
#include "distref/traj_diff.h"
#include "distref/fileio.h"
#include "shell.h"
#include "tmpdir.h"

#include <json-c/json.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef DR_BIN
#define DR_BIN "bin/distref"
#endif

static int make_temp_dir(void **state) { return temp_dir_from(state, "/tmp/distref_traj_XXXXXX"); }

static float from_bits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }

static void test_npy_round_trip(void **state)
{
    char path[512];
    float data[6] = { 1, -2, 3.5f, 0, -0.0f, 1e-30f };
    uint64_t shape[2] = { 2, 3 }, none[1] = { 0 };
    dr_npy a;
    dr_err err = { 0, "" };
    snprintf(path, sizeof path, "%s/a.npy", (char *)*state);
    assert_int_equal(dr_npy_write_f32(path, 2, shape, data, &err), DR_OK);
    assert_int_equal(dr_npy_load(path, &a, &err), DR_OK);
    assert_int_equal(a.ndim, 2);
    assert_int_equal(a.shape[1], 3);
    assert_memory_equal(a.data, data, sizeof data);
    dr_npy_free(&a);
    assert_int_equal(dr_npy_write_f32(path, 0, none, data, &err), DR_OK);   /* a scalar */
    assert_int_equal(dr_npy_load(path, &a, &err), DR_OK);
    assert_int_equal(a.ndim, 0);
    assert_int_equal(a.count, 1);
    dr_npy_free(&a);
}

/* A header as np.save writes it, and each way a file can be wrong. */
static int parse_text(const char *dict, size_t data_bytes, dr_err *err)
{
    uint8_t buf[512];
    size_t k = strlen(dict);
    dr_npy a;
    int rc;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)k;
    buf[9] = 0;
    memcpy(buf + 10, dict, k);
    memset(buf + 10 + k, 0, data_bytes);
    rc = dr_npy_parse(buf, 10 + k + data_bytes, "x.npy", &a, err);
    if (rc == DR_OK) dr_npy_free(&a);
    return rc;
}

static void test_npy_refusals(void **state)
{
    dr_err err = { 0, "" };
    (void)state;
    assert_int_equal(parse_text("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 24, &err), DR_OK);
    assert_int_equal(parse_text("{\"shape\": (2,), \"descr\": \"<f4\", \"fortran_order\": False}", 8, &err), DR_OK);
    assert_int_equal(parse_text("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "'<f8'"));
    assert_int_equal(parse_text("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "fortran_order"));
    assert_int_equal(parse_text("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 4, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "truncated"));
    assert_int_equal(parse_text("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 12, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "trailing"));
    assert_int_equal(parse_text("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 0, &err), DR_EFORMAT);
    assert_int_equal(parse_text("{'descr': '<f4', 'fortran_order': False}", 0, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "'shape' missing"));
    assert_int_equal(parse_text("{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536), }", 0, &err),
                     DR_EFORMAT);
    assert_int_equal(parse_text("not a dict", 0, &err), DR_EFORMAT);
}

static void test_spec(void **state)
{
    dr_traj_spec s;
    dr_err err = { 0, "" };
    (void)state;
    assert_int_equal(dr_traj_spec_parse("every:10", &s, &err), DR_OK);
    assert_true(dr_traj_spec_wants(&s, 0, false) && dr_traj_spec_wants(&s, 20, false) && !dr_traj_spec_wants(&s, 5, true));
    dr_traj_spec_free(&s);
    assert_int_equal(dr_traj_spec_parse("steps:7,3,3,100", &s, &err), DR_OK);
    assert_int_equal(s.nsteps, 3);
    assert_true(dr_traj_spec_wants(&s, 3, false) && dr_traj_spec_wants(&s, 100, false) && !dr_traj_spec_wants(&s, 4, false));
    dr_traj_spec_free(&s);
    assert_int_equal(dr_traj_spec_parse("checkpoints", &s, &err), DR_OK);
    assert_true(dr_traj_spec_wants(&s, 9, true) && !dr_traj_spec_wants(&s, 9, false));
    assert_int_equal(dr_traj_spec_parse("every:0", &s, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "--trajectory"));
    assert_int_equal(dr_traj_spec_parse("steps:1,,2", &s, &err), DR_EUSAGE);
    assert_int_equal(dr_traj_spec_parse("sometimes", &s, &err), DR_EUSAGE);
}

static void test_ulp(void **state)
{
    (void)state;
    assert_int_equal(dr_ulp_distance(0x3f800000u, 0x3f800001u), 1);
    assert_int_equal(dr_ulp_distance(0x00000000u, 0x80000000u), 1);            /* +0, -0 */
    assert_int_equal(dr_ulp_distance(0x80000000u, 0x00000000u), 1);            /* either order */
    assert_int_equal(dr_ulp_distance(0x00000001u, 0x80000001u), 3);            /* the two smallest subnormals */
    assert_true(dr_ulp_distance(0x7fc00000u, 0x7fc00001u) == UINT64_MAX);      /* NaN payloads */
    assert_int_equal(dr_ulp_distance(0x7fc00000u, 0x7fc00000u), 0);
    assert_int_equal(dr_ulp_distance(0x7f7fffffu, 0x7f800000u), 1);            /* max float, inf */
}

/* A two-step trajectory of a 2x3 tensor w and a scalar loss into dir/name. */
static void write_traj(const char *dir, const char *name, const float *w1, const float *w2, const char *experiment,
                       int steps)
{
    char path[512];
    dr_traj_index ix;
    dr_traj_where where[2] = { { DR_TRAJ_SRC_PARAMS, 0, 0 }, { DR_TRAJ_SRC_LOSS, 0, 0 } };
    float loss = 0.5f;
    dr_err err = { 0, "" };
    snprintf(path, sizeof path, "%s/%s", dir, name);
    memset(&ix, 0, sizeof ix);
    ix.settings = strdup(experiment);
    ix.tensors = calloc(2, sizeof *ix.tensors);
    ix.steps = calloc(2, sizeof *ix.steps);
    snprintf(ix.tensors[0].name, sizeof ix.tensors[0].name, "dense_0/kernel");
    ix.tensors[0].ndim = 2;
    ix.tensors[0].shape[0] = 2;
    ix.tensors[0].shape[1] = 3;
    snprintf(ix.tensors[1].name, sizeof ix.tensors[1].name, "loss");
    ix.ntensors = 2;
    assert_int_equal(dr_mkdirs(path, &err), DR_OK);
    assert_int_equal(dr_traj_write_step(path, &ix, where, 6, 1, w1, NULL, NULL, &loss, &ix.steps[0], &err), DR_OK);
    if (steps > 1)
        assert_int_equal(dr_traj_write_step(path, &ix, where, 6, 2, w2, NULL, NULL, &loss, &ix.steps[1], &err), DR_OK);
    ix.nsteps = (uint32_t)steps;
    assert_int_equal(dr_traj_index_write(path, &ix, &err), DR_OK);
    dr_traj_index_free(&ix);
}

static int diff(const char *dir, const char *opts_text, const char *a, const char *b, char *out, size_t cap, bool *pass,
                dr_err *err)
{
    char pa[512], pb[512];
    dr_diff_opts o;
    FILE *f = fmemopen(out, cap, "w");
    int rc;
    memset(&o, 0, sizeof o);
    assert_int_equal(dr_diff_tolerance_parse(opts_text, &o, err), DR_OK);
    snprintf(pa, sizeof pa, "%s/%s", dir, a);
    snprintf(pb, sizeof pb, "%s/%s", dir, b);
    rc = dr_traj_diff(pa, pb, &o, f, pass, err);
    fclose(f);
    return rc;
}

static void test_diff_first_divergence(void **state)
{
    const char *dir = *state;
    float w[6] = { 1, 2, 3, 4, 5, 6 }, v[6] = { 1, 2, 3, 4, 5, 6 };
    char out[8192];
    bool pass;
    dr_err err = { 0, "" };
    write_traj(dir, "a", w, w, "{\"experiment\": \"e\"}", 2);
    write_traj(dir, "b", w, w, "{\"experiment\": \"e\"}", 2);
    assert_int_equal(diff(dir, "", "a", "b", out, sizeof out, &pass, &err), DR_OK);
    assert_true(pass);
    assert_non_null(strstr(out, "identical: 2 steps, 4 tensors, 14 elements"));
    v[5] = from_bits(0x40c00003u);   /* 6 + 3 ulp, at [1, 2] of step 2 */
    write_traj(dir, "c", w, v, "{\"experiment\": \"e\"}", 2);
    assert_int_equal(diff(dir, "", "a", "c", out, sizeof out, &pass, &err), DR_OK);
    assert_false(pass);
    assert_non_null(strstr(out, "first divergence: step 2, tensor dense_0/kernel, element 5 [1, 2] of shape [2, 3]"));
    assert_non_null(strstr(out, "0x40c00000"));
    assert_non_null(strstr(out, "0x40c00003"));
    assert_non_null(strstr(out, "ulp distance 3"));
    assert_non_null(strstr(out, "2-3:1"));
    assert_int_equal(diff(dir, "ulp=3", "a", "c", out, sizeof out, &pass, &err), DR_OK);
    assert_true(pass);
    assert_int_equal(diff(dir, "ulp=2", "a", "c", out, sizeof out, &pass, &err), DR_OK);
    assert_false(pass);
    assert_int_equal(diff(dir, "rtol=1e-6", "a", "c", out, sizeof out, &pass, &err), DR_OK);
    assert_true(pass);
    assert_int_equal(diff(dir, "rtol=1e-7", "a", "c", out, sizeof out, &pass, &err), DR_OK);
    assert_false(pass);
    assert_int_equal(diff(dir, "atol=2e-6", "a", "c", out, sizeof out, &pass, &err), DR_OK);   /* 3 ulp of 6: 1.4e-6 */
    assert_true(pass);
    assert_int_equal(diff(dir, "atol=1e-6", "a", "c", out, sizeof out, &pass, &err), DR_OK);
    assert_false(pass);
    v[1] = 2.5f;   /* two differences in step 2: the first is element 1 */
    write_traj(dir, "d", w, v, "{\"experiment\": \"e\"}", 2);
    assert_int_equal(diff(dir, "", "a", "d", out, sizeof out, &pass, &err), DR_OK);
    assert_non_null(strstr(out, "first divergence: step 2, tensor dense_0/kernel, element 1 [0, 1]"));
    assert_non_null(strstr(out, "2/6"));
}

/* diff --plot's divergence.dat holds the JSON report's rows, number for
 * number (step, tensor, differing, elements, max ulp, max rel), and p99
 * is the upper bound of the bucket holding the 99th percentile. */
static void test_diff_plot_matches_json(void **state)
{
    const char *dir = *state;
    float w[6] = { 1, 2, 3, 4, 5, 6 }, v[6] = { 1, 2, 3, 4, 5, 6 }, u[6] = { 1, 2, 3, 4, 5, 6 };
    char out[16384], plot[512], path[600], line[512], name[64];
    bool pass;
    dr_err err = { 0, "" };
    dr_diff_opts o;
    FILE *f;
    json_object *rep, *rows;
    size_t nrows = 0, ndat = 0;
    write_traj(dir, "a", w, w, "{\"experiment\": \"e\"}", 2);
    v[0] = from_bits(0x3f800001u);   /* step 1: 1 ulp at [0, 0] */
    u[2] = from_bits(0x40400000u + 40);   /* step 2: 40 ulp and 3 ulp */
    u[4] = from_bits(0x40a00003u);
    write_traj(dir, "b", v, u, "{\"experiment\": \"e\"}", 2);
    snprintf(plot, sizeof plot, "%s/plot", dir);
    memset(&o, 0, sizeof o);
    o.json = true;
    o.plot = plot;
    snprintf(path, sizeof path, "%s/a", dir);
    snprintf(line, sizeof line, "%s/b", dir);
    f = fmemopen(out, sizeof out, "w");
    assert_int_equal(dr_traj_diff(path, line, &o, f, &pass, &err), DR_OK);
    fclose(f);
    assert_false(pass);
    assert_non_null(rep = json_tokener_parse(out));
    assert_true(json_object_object_get_ex(rep, "rows", &rows));
    nrows = json_object_array_length(rows);
    assert_int_equal(nrows, 2);
    snprintf(path, sizeof path, "%s/divergence.dat", plot);
    assert_non_null(f = fopen(path, "r"));
    while (fgets(line, sizeof line, f)) {
        unsigned long long step, differ, count;
        unsigned t;
        double mu, p99, rel;
        json_object *r = NULL, *x;
        if (line[0] == '#' || line[0] == '\n') continue;
        assert_int_equal(sscanf(line, "%llu\t%u\t%63s\t%llu\t%llu\t%lf\t%lf\t%lf", &step, &t, name, &differ, &count,
                                &mu, &p99, &rel), 8);
        for (size_t i = 0; i < nrows; i++) {
            json_object *ri = json_object_array_get_idx(rows, i);
            if (json_object_object_get_ex(ri, "step", &x) && (unsigned long long)json_object_get_int64(x) == step) r = ri;
        }
        assert_non_null(r);
        assert_true(json_object_object_get_ex(r, "tensor", &x) && !strcmp(json_object_get_string(x), name));
        assert_true(json_object_object_get_ex(r, "differing", &x) && (unsigned long long)json_object_get_int64(x) == differ);
        assert_true(json_object_object_get_ex(r, "elements", &x) && (unsigned long long)json_object_get_int64(x) == count);
        assert_true(json_object_object_get_ex(r, "max_ulp", &x) && (double)json_object_get_int64(x) == mu);
        assert_true(json_object_object_get_ex(r, "max_rel", &x) && json_object_get_double(x) == rel);
        assert_true(p99 == (step == 1 ? 1.0 : 63.0));   /* 1 ulp: bucket 1; 40 ulp: bucket 32-63 */
        ndat++;
    }
    fclose(f);
    assert_int_equal(ndat, nrows);
    json_object_put(rep);
    snprintf(path, sizeof path, "%s/divergence.gp", plot);
    assert_int_equal(access(path, R_OK), 0);
    snprintf(path, sizeof path, "%s/index.html", plot);
    assert_int_equal(access(path, R_OK), 0);
}

static void test_diff_nan_and_zero(void **state)
{
    const char *dir = *state;
    float w[6] = { 0, 0, 0, 0, 0, 0 }, v[6];
    char out[8192];
    bool pass;
    dr_err err = { 0, "" };
    w[0] = from_bits(0x7fc00000u);
    memcpy(v, w, sizeof v);
    v[0] = from_bits(0x7fc00001u);   /* another NaN payload */
    write_traj(dir, "n1", w, w, "{}", 1);
    write_traj(dir, "n2", v, v, "{}", 1);
    assert_int_equal(diff(dir, "rtol=1", "n1", "n2", out, sizeof out, &pass, &err), DR_OK);
    assert_false(pass);
    assert_non_null(strstr(out, "ulp distance nan"));
    memcpy(v, w, sizeof v);
    v[3] = -0.0f;
    write_traj(dir, "z", v, v, "{}", 1);
    assert_int_equal(diff(dir, "", "n1", "z", out, sizeof out, &pass, &err), DR_OK);
    assert_false(pass);
    assert_non_null(strstr(out, "element 3 [1, 0]"));
}

static void test_diff_format_errors(void **state)
{
    const char *dir = *state;
    float w[6] = { 1, 2, 3, 4, 5, 6 };
    char out[8192], path[512];
    bool pass;
    dr_err err = { 0, "" };
    dr_diff_opts o;
    write_traj(dir, "a", w, w, "{\"experiment\": \"e\"}", 2);
    write_traj(dir, "one", w, w, "{\"experiment\": \"e\"}", 1);
    assert_int_equal(diff(dir, "", "a", "one", out, sizeof out, &pass, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "step 2: in A"));
    write_traj(dir, "other", w, w, "{\"experiment\": \"f\"}", 2);
    assert_int_equal(diff(dir, "", "a", "other", out, sizeof out, &pass, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "settings.experiment"));
    write_traj(dir, "t", w, w, "{\"experiment\": \"e\"}", 2);
    snprintf(path, sizeof path, "%s/t/step_00000002/dense_0/kernel.npy", dir);
    assert_int_equal(truncate(path, 100), 0);
    assert_int_equal(diff(dir, "", "a", "t", out, sizeof out, &pass, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "step_00000002/dense_0/kernel.npy: truncated"));
    assert_int_equal(diff(dir, "", "a", "nowhere", out, sizeof out, &pass, &err), DR_EUSAGE);
    assert_int_equal(dr_diff_tolerance_parse("ulp=-1", &o, &err), DR_EUSAGE);
    assert_int_equal(dr_diff_tolerance_parse("rtol=x", &o, &err), DR_EUSAGE);
    assert_int_equal(dr_diff_tolerance_parse("ulps=3", &o, &err), DR_EUSAGE);
}

static void test_index_refusals(void **state)
{
    static const char *const bad[][2] = {
        { "{\"format\": \"x\", \"version\": 1, \"tensors\": [], \"steps\": []}", "\"format\"" },
        { "{\"format\": \"distref-trajectory\", \"version\": 2, \"tensors\": [], \"steps\": []}", "\"version\"" },
        { "{\"format\": \"distref-trajectory\", \"version\": 1, \"tensors\": [{\"name\": \"../x\", \"shape\": [], "
          "\"dtype\": \"float32\"}], \"steps\": []}", "tensors[0].name" },
        { "{\"format\": \"distref-trajectory\", \"version\": 1, \"tensors\": [{\"name\": \"x\", \"shape\": [], "
          "\"dtype\": \"float64\"}], \"steps\": []}", "'float64'" },
        { "{\"format\": \"distref-trajectory\", \"version\": 1, \"tensors\": [{\"name\": \"x\", \"shape\": [], "
          "\"dtype\": \"float32\"}], \"steps\": [{\"step\": 1, \"dir\": \"s\", \"tensors\": [\"y\"]}]}", "steps[0].tensors[0]" },
        { "{\"format\": \"distref-trajectory\", \"version\": 1, \"tensors\": [], \"steps\": [{\"step\": 2, \"dir\": "
          "\"s\", \"tensors\": []}, {\"step\": 1, \"dir\": \"t\", \"tensors\": []}]}", "steps must ascend" },
        { "{\"format\": \"distref-trajectory\", \"version\": 1, \"tensors\": [], \"steps\": [{\"step\": 1, \"dir\": "
          "\"..\", \"tensors\": []}]}", "steps[0].dir" },
        { "{\"format\": \"distref-trajectory\", \"version\": 1, \"tensors\": [], \"steps\": []", "truncated" },
        { "{\"format\": \"distref-trajectory\", \"version\": 1, \"tensors\": [], \"steps\": []} x", "malformed" },
    };
    dr_traj_index ix;
    dr_err err = { 0, "" };
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = dr_traj_index_parse(bad[i][0], strlen(bad[i][0]), "index.json", &ix, &err);
        if (rc != DR_EFORMAT || !strstr(err.msg, bad[i][1]))
            fail_msg("case %zu: expected DR_EFORMAT naming %s; got %d: %s", i, bad[i][1], rc, err.msg);
    }
    assert_int_equal(dr_traj_index_parse("{\"format\": \"distref-trajectory\", \"version\": 1, \"tensors\": [], "
                                         "\"steps\": []}\n", 75, "index.json", &ix, &err), DR_OK);
    dr_traj_index_free(&ix);
}

/* bin/distref end to end: the reference and the engine's mirrored 2 give
 * identical trajectories; a planted change is named; exit 0, 1, 2. */
static void test_cli_end_to_end(void **state)
{
    const char *dir = *state;
    char out[1 << 15];
    const char *common = "--experiment=mlp_synthetic --train_steps=6 --synthetic_examples=256 --trajectory=every:3";
    int st = shell_run(out, sizeof out, DR_BIN " train %s --distribution_strategy=one_device --model_dir=%s/r && " DR_BIN
                       " train %s --variant=openmp --distribution_strategy=mirrored --num_gpus=4 --model_dir=%s/o",
                       common, dir, common, dir);
    shell_expect(out, st, 0, "train: steps=6");
    /* mirrored 4 openmp vs one_device ref: identical, the gradients as applied included */
    st = shell_run(out, sizeof out, DR_BIN " diff %s/r %s/o", dir, dir);
    shell_expect(out, st, 0, "identical: 3 steps, 34 tensors");
    assert_null(strstr(out, "only in"));
    assert_non_null(strstr(slurp(dir, "o/trajectory/index.json"), "\"gradients\": \"recorded: as applied"));
    assert_non_null(strstr(slurp(dir, "r/trajectory/index.json"), "\"gradients\": \"recorded: as applied"));
    st = shell_run(out, sizeof out, "python3 -c \"import sys; p='%s/o/trajectory/step_00000003/dense_1/bias.npy'; "
                   "b=bytearray(open(p,'rb').read()); b[-1]^=1; open(p,'wb').write(b)\" && " DR_BIN " diff %s/r %s/o",
                   dir, dir, dir);
    shell_expect(out, st, 1, "first divergence: step 3, tensor dense_1/bias, element 9 [9]");
    st = shell_run(out, sizeof out, DR_BIN " diff %s/r %s/o --json", dir, dir);
    shell_expect(out, st, 1, "\"tensor\": \"dense_1/bias\"");
    st = shell_run(out, sizeof out, DR_BIN " diff %s/r %s/o --tolerance=ulp=1000000000", dir, dir);
    shell_expect(out, st, 0, "PASS");
    st = shell_run(out, sizeof out, "PATH=/nonexistent " DR_BIN " diff %s/r %s/o --plot=%s/plot 2>&1 && exit 9; "
                   "test -s %s/plot/divergence.dat && test -s %s/plot/index.html && echo data-written", dir, dir, dir,
                   dir, dir);
    shell_expect(out, st, 0, "plot: not supported: gnuplot not found");
    assert_non_null(strstr(out, "data-written"));
    st = shell_run(out, sizeof out, DR_BIN " diff %s/r %s/o --plot=/proc/none/plot", dir, dir);
    shell_expect(out, st, 2, "--plot=/proc/none/plot: cannot create the folder");
    st = shell_run(out, sizeof out, DR_BIN " diff %s/r %s/o --plot=", dir, dir);
    shell_expect(out, st, 2, "--plot: expected a folder to write the picture into (--plot=DIR), got ''");
    st = shell_run(out, sizeof out, DR_BIN " diff %s/r %s/o --tolerance=ulps", dir, dir);
    shell_expect(out, st, 2, "--tolerance=ulps");
    st = shell_run(out, sizeof out, DR_BIN " diff %s/r", dir);
    shell_expect(out, st, 2, "expected two");
    st = shell_run(out, sizeof out, DR_BIN " diff %s/r %s/o --seed=3", dir, dir);
    shell_expect(out, st, 2, "--seed does not apply to diff");
    st = shell_run(out, sizeof out, DR_BIN " export --what=weights --experiment=mlp_synthetic --synthetic_examples=256 "
                   "--distribution_strategy=one_device --model_dir=%s/r && " DR_BIN " diff %s/r/weights %s/r/weights",
                   dir, dir, dir);
    shell_expect(out, st, 0, "identical: 1 steps, 9 tensors");
    st = shell_run(out, sizeof out, "TF_CONFIG='{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w:1\"],\"ps\":[\"p:1\"]},"
                   "\"task\":{\"type\":\"chief\",\"index\":0}}' " DR_BIN " train --experiment=mlp_synthetic "
                   "--distribution_strategy=parameter_server --trajectory=every:1 --model_dir=%s/ps 2>&1", dir);
    shell_expect(out, st, 2, "parameter_server is asynchronous: a step there is one worker's update");
    st = shell_run(out, sizeof out, DR_BIN " train --experiment=mlp_synthetic --trajectory=every:0 --model_dir=%s/x", dir);
    shell_expect(out, st, 2, "--trajectory=every:0");
}

/* ---- the engine's gradients as applied (distref/backend.h's applied_grad) ---- */

#define MPIRUN "ASAN_OPTIONS=detect_leaks=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun " \
               "-x ASAN_OPTIONS --oversubscribe -np 2 "

/* Case name: the reference (common + ref) and an engine variant (launcher,
 * common + eng) record every step; diff must find them identical, every
 * tensor on both sides, the engine's index naming its gradients. false
 * (said on stdout) when the engine's variant cannot run here (no OpenCL
 * device, no mpirun). */
static bool engine_same_as_ref(const char *dir, const char *name, const char *common, const char *ref,
                               const char *launcher, const char *eng)
{
    char out[1 << 14];
    int st = shell_run(out, sizeof out, DR_BIN " train %s %s --trajectory=every:1 --model_dir=%s/%s.r", common, ref,
                       dir, name);
    shell_expect(out, st, 0, "train: steps=");
    st = shell_run(out, sizeof out, "%s" DR_BIN " train %s %s --trajectory=every:1 --model_dir=%s/%s.e", launcher,
                   common, eng, dir, name);
    if (st != 0 && (strstr(out, "not available") || strstr(out, "mpirun: not found"))) {
        printf("skipped: engine gradients, %s: %.300s\n", name, out);
        return false;
    }
    if (st != 0) fail_msg("engine gradients, %s: the engine's run failed (%d):\n%s", name, st, out);
    st = shell_run(out, sizeof out, DR_BIN " diff %s/%s.r %s/%s.e", dir, name, dir, name);
    if (st != 0 || !strstr(out, "identical:") || strstr(out, "only in"))
        fail_msg("engine gradients, %s: the engine's trajectory is not the reference's (exit %d):\n%s", name, st, out);
    char ix[128];
    snprintf(ix, sizeof ix, "%.60s.e/trajectory/index.json", name);
    if (!strstr(slurp(dir, ix), "\"gradient/dense_0/kernel\""))
        fail_msg("engine gradients, %s: the engine's index names no gradient", name);
    return true;
}

/* The tensors step k of DIR's trajectory lists (its index), or -1. */
static int step_tensors(const char *dir, uint64_t k)
{
    dr_traj_index ix;
    dr_err err = { 0, "" };
    int n = -1;
    if (dr_traj_index_load(dir, &ix, &err) != DR_OK) fail_msg("%s", err.msg);
    for (uint32_t i = 0; i < ix.nsteps; i++)
        if (ix.steps[i].step == k) n = (int)ix.steps[i].ntensors;
    dr_traj_index_free(&ix);
    return n;
}

/* Every engine path against the reference, gradients included: plain,
 * global and per-variable clipping, Keras's per-replica clipping,
 * accumulation (the gradient on the update's step only), mixed_float16,
 * central_storage,
 * tpu with spatial partitioning, the compact accumulators' fallback to full
 * ones (linear_wide), MPI ranks and OpenCL (skipped, said, where they
 * cannot run). The planted faults traj_grad_* make it fail. */
static void test_engine_gradients(void **state)
{
    const char *dir = *state;
    const char *mlp = "--experiment=mlp_synthetic --synthetic_examples=256 --train_steps=4";
    const char *acc = "--experiment=mlp_synthetic --synthetic_examples=256 --train_steps=6 --gradient_accumulation_steps=3";
    const char *wide = "--experiment=linear_wide --train_steps=3";
    const char *one = "--distribution_strategy=one_device", *omp2 = "--variant=openmp --distribution_strategy=mirrored --num_gpus=2";
    char common[512], path[600];
    engine_same_as_ref(dir, "plain", mlp, one, "", "--variant=openmp --distribution_strategy=mirrored --num_gpus=3");
    snprintf(common, sizeof common, "%s --global_clipnorm=0.05", mlp);
    engine_same_as_ref(dir, "global_clipnorm", common, one, "", omp2);
    snprintf(common, sizeof common, "%s --clipvalue=0.001", mlp);
    engine_same_as_ref(dir, "clipvalue", common, one, "", omp2);
    snprintf(common, sizeof common, "%s --global_clipnorm=0.05 --clip_semantics=tensorflow "
             "--distribution_strategy=mirrored --num_gpus=2", mlp);
    engine_same_as_ref(dir, "clip_tensorflow", common, "", "", "--variant=openmp");
    engine_same_as_ref(dir, "accumulation", acc, one, "", omp2);
    snprintf(path, sizeof path, "%s/accumulation.e/trajectory", dir);
    assert_int_equal(step_tensors(path, 1), 9);    /* a micro-step: variables, slots, loss */
    assert_int_equal(step_tensors(path, 3), 13);   /* the update: and the gradients */
    engine_same_as_ref(dir, "central_storage", mlp, one, "", "--variant=openmp --distribution_strategy=central_storage "
                       "--num_gpus=2");
    engine_same_as_ref(dir, "tpu", mlp, one, "", "--variant=openmp --distribution_strategy=tpu --input_partition_dims=2,2");
    snprintf(common, sizeof common, "%s --dtype_policy=mixed_float16 --loss_scale=dynamic:65536", mlp);
    engine_same_as_ref(dir, "mixed", common, one, "", omp2);   /* the mixed step's own unscaled host floats */
    engine_same_as_ref(dir, "opencl_mixed", common, one, "", "--variant=opencl --distribution_strategy=mirrored "
                       "--num_gpus=2");
    engine_same_as_ref(dir, "fallback", wide, one, "", omp2);
    if (!strstr(slurp(dir, "fallback.e/summary.json"), "\"exact_fallback_steps\":3"))
        fail_msg("linear_wide ran no step through the full accumulators' fallback: %s", slurp(dir, "fallback.e/summary.json"));
    snprintf(common, sizeof common, "%s --gradient_accumulation_steps=3", wide);
    engine_same_as_ref(dir, "fallback_accumulation", common, one, "", omp2);
    snprintf(common, sizeof common, "%s --clipnorm=0.05", mlp);
    engine_same_as_ref(dir, "opencl_clipnorm", common, one, "", "--variant=opencl --distribution_strategy=mirrored "
                       "--num_gpus=2");
    engine_same_as_ref(dir, "opencl_accumulation", acc, one, "", "--variant=opencl --distribution_strategy=mirrored "
                       "--num_gpus=2");
    if (system("command -v mpirun > /dev/null 2>&1") == 0)
        engine_same_as_ref(dir, "mpi", acc, one, "env -u TF_CONFIG " MPIRUN,
                           "--variant=mpi --distribution_strategy=multi_worker_mirrored");
    else
        printf("skipped: engine gradients, mpi: no mpirun on the PATH\n");
}

/* Models beyond Dense: Keras's shapes and names per layer kind (a Conv2D
 * kernel 3x3x1x4 HWIO, BatchNormalization's gamma/beta and its moving
 * statistics, no gradient or slot of the statistics), the reference's sync
 * BN at R = 2 identical to one_device step by step (the openmp engine's too,
 * mirrored R = 2 and tpu partitioned 2,2), and replica BN at R = 2 told
 * apart from step 1 on (exit 1). */
static void test_conv_models(void **state)
{
    const char *dir = *state;
    const char *cnn = "--experiment=cnn_synthetic --global_batch_size=16 --train_steps=3 --trajectory=every:1";
    char out[1 << 14], path[600];
    dr_npy a;
    dr_err err = { 0, "" };
    int st = shell_run(out, sizeof out, DR_BIN " train %s --model_dir=%s/c1", cnn, dir);
    shell_expect(out, st, 0, "train: steps=3");
    st = shell_run(out, sizeof out, DR_BIN " train %s --distribution_strategy=mirrored --num_gpus=2 --model_dir=%s/c2",
                   cnn, dir);
    shell_expect(out, st, 0, "train: steps=3");
    st = shell_run(out, sizeof out, DR_BIN " diff %s/c1 %s/c2", dir, dir);
    if (st != 0 || !strstr(out, "identical: 4 steps") || strstr(out, "only in"))
        fail_msg("sync BN at R = 2 is not one_device's trajectory (exit %d):\n%s", st, out);
    st = shell_run(out, sizeof out, DR_BIN " train %s --variant=openmp --distribution_strategy=mirrored --num_gpus=2 "
                   "--model_dir=%s/e2", cnn, dir);
    shell_expect(out, st, 0, "train: steps=3");
    st = shell_run(out, sizeof out, DR_BIN " diff %s/c1 %s/e2", dir, dir);   /* the engine's gradients as applied too */
    if (st != 0 || !strstr(out, "identical: 4 steps") || strstr(out, "only in"))
        fail_msg("the openmp engine's conv trajectory is not the reference's (exit %d):\n%s", st, out);
    /* spatially partitioned (tpu 2,2: each replica's maps on 4 cores' tiles
     * with halos): the engine's trajectory, gradients included, = the reference's */
    for (int v = 0; v < 2; v++) {
        st = shell_run(out, sizeof out, DR_BIN " train %s --variant=%s --distribution_strategy=tpu --tpu=v2-8 "
                       "--input_partition_dims=2,2 --model_dir=%s/t%d", cnn, v ? "openmp" : "ref", dir, v);
        shell_expect(out, st, 0, "train: steps=3");
    }
    st = shell_run(out, sizeof out, DR_BIN " diff %s/t0 %s/t1", dir, dir);
    if (st != 0 || !strstr(out, "identical: 4 steps") || strstr(out, "only in"))
        fail_msg("the openmp engine's partitioned conv trajectory is not the reference's (exit %d):\n%s", st, out);
    const char *ix = slurp(dir, "c1/trajectory/index.json");
    const char *want[] = { "\"conv2d_0/kernel\", \"shape\": [ 3, 3, 1, 4 ]", "\"batch_norm_1/moving_variance\"",
                           "\"gradient/batch_norm_1/gamma\"", "\"optimizer/momentum/conv2d_0/bias\"",
                           "\"gradient/dense_9/kernel\"" };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(ix, want[i])) fail_msg("the conv trajectory's index has no %s:\n%.600s", want[i], ix);
    if (strstr(ix, "gradient/batch_norm_1/moving") || strstr(ix, "momentum/batch_norm_1/moving"))
        fail_msg("the moving statistics have no gradient or slot:\n%.600s", ix);
    snprintf(path, sizeof path, "%s/c1/trajectory/step_00000001/batch_norm_1/moving_variance.npy", dir);
    if (dr_npy_load(path, &a, &err) != DR_OK) fail_msg("%s", err.msg);
    assert_int_equal(a.ndim, 1);
    assert_true(a.data[0] < 1.0f && a.data[0] > 0.98f);   /* 1 moved by one step at momentum 0.99 */
    dr_npy_free(&a);
    st = shell_run(out, sizeof out, DR_BIN " train %s --distribution_strategy=mirrored --num_gpus=2 --batch_norm=replica "
                   "--model_dir=%s/c3", cnn, dir);
    shell_expect(out, st, 0, "train: steps=3");
    st = shell_run(out, sizeof out, DR_BIN " diff %s/c1 %s/c3 > %s/c3.diff; echo \"diff exit $?\"; head -3 %s/c3.diff",
                   dir, dir, dir, dir);   /* the whole table overflows out: a file, not a pipe */
    shell_expect(out, st, 0, "diff exit 1");
    if (!strstr(out, "first divergence: step 1")) fail_msg("replica BN at R = 2 not told apart at step 1:\n%s", out);
}

/* A step that applied no update records no gradient: the reference under
 * mixed_float16 with a loss scale so large that every step's gradients
 * overflow (the loss scale skips all four). */
static void test_skipped_steps_hold_no_gradient(void **state)
{
    const char *dir = *state;
    char out[1 << 14], traj[600];
    int st = shell_run(out, sizeof out, DR_BIN " train --experiment=mlp_synthetic --synthetic_examples=256 "
                       "--train_steps=4 --dtype_policy=mixed_float16 --loss_scale=dynamic:1e30 --trajectory=every:1 "
                       "--model_dir=%s/mx", dir);
    shell_expect(out, st, 0, "train: steps=4");
    if (!strstr(slurp(dir, "mx/summary.json"), "\"skipped_steps\":4"))
        fail_msg("expected every step skipped: %s", slurp(dir, "mx/summary.json"));
    snprintf(traj, sizeof traj, "%s/mx/trajectory", dir);
    for (uint64_t k = 1; k <= 4; k++) assert_int_equal(step_tensors(traj, k), 9);   /* variables, slots, loss */
}

/* Fast numerics have no reference to diff against: the recorded gradient
 * must be the one the optimizer read, i.e. every update step k's momentum
 * slot is Keras's v_k = 0.9 v_(k-1) - 0.01 g_k, bit for bit, from the
 * recorded g_k (the step before: v_(k-1), unchanged over micro-steps). */
static void momentum_from_gradients(const char *traj)
{
    dr_traj_index ix;
    dr_err err = { 0, "" };
    uint32_t updates = 0;
    if (dr_traj_index_load(traj, &ix, &err) != DR_OK) fail_msg("%s", err.msg);
    for (uint32_t i = 1; i < ix.nsteps; i++) {
        for (uint32_t t = 0; t < ix.ntensors; t++) {
            char vname[DR_TRAJ_NAME_MAX + 32], gname[DR_TRAJ_NAME_MAX + 32];
            int v = -1, g = -1;
            bool has_g = false;
            dr_npy v0, v1, gk;
            if (strchr(ix.tensors[t].name, '/') == NULL || strncmp(ix.tensors[t].name, "dense_", 6) != 0) continue;
            snprintf(vname, sizeof vname, "optimizer/momentum/%s", ix.tensors[t].name);
            snprintf(gname, sizeof gname, "gradient/%s", ix.tensors[t].name);
            v = dr_traj_find(&ix, vname);
            g = dr_traj_find(&ix, gname);
            assert_true(v >= 0 && g >= 0);
            for (uint32_t j = 0; j < ix.steps[i].ntensors; j++) has_g |= ix.steps[i].tensors[j] == (uint16_t)g;
            if (!has_g) continue;
            assert_int_equal(dr_traj_load(traj, &ix, &ix.steps[i - 1], (uint32_t)v, &v0, &err), DR_OK);
            assert_int_equal(dr_traj_load(traj, &ix, &ix.steps[i], (uint32_t)v, &v1, &err), DR_OK);
            assert_int_equal(dr_traj_load(traj, &ix, &ix.steps[i], (uint32_t)g, &gk, &err), DR_OK);
            for (size_t e = 0; e < v1.count; e++) {
                float want = 0.9f * v0.data[e] - 0.01f * gk.data[e];
                if (memcmp(&want, &v1.data[e], sizeof want) != 0)
                    fail_msg("%s step %llu, %s[%zu]: momentum %.9g, but 0.9 v - 0.01 g of the recorded gradient "
                             "is %.9g", traj, (unsigned long long)ix.steps[i].step, vname, e, v1.data[e], want);
            }
            dr_npy_free(&v0); dr_npy_free(&v1); dr_npy_free(&gk);
            updates++;
        }
    }
    dr_traj_index_free(&ix);
    if (updates == 0) fail_msg("%s: no step with gradients", traj);
}

static void test_fast_gradients_applied(void **state)
{
    const char *dir = *state;
    char out[1 << 14], traj[600];
    static const char *const runs[][2] = {
        { "omp", "--variant=openmp --distribution_strategy=mirrored --num_gpus=2 --global_clipnorm=0.05 --gradient_accumulation_steps=2" },
        { "omp_central", "--variant=openmp --distribution_strategy=central_storage --num_gpus=2 --clipvalue=0.001" },
        { "omp_tpu", "--variant=openmp --distribution_strategy=tpu" },
        { "ocl", "--variant=opencl --distribution_strategy=mirrored --num_gpus=2 --clipnorm=0.05" },
        { "ocl_acc", "--variant=opencl --distribution_strategy=mirrored --num_gpus=2 --gradient_accumulation_steps=2" },
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        int st = shell_run(out, sizeof out, DR_BIN " train --experiment=mlp_synthetic --synthetic_examples=256 "
                           "--train_steps=4 --numerics=fast %s "
                           "--trajectory=every:1 --model_dir=%s/%s", runs[i][1], dir, runs[i][0]);
        if (st != 0 && strstr(out, "not available")) { printf("skipped: fast gradients, %s: %.300s\n", runs[i][0], out); continue; }
        shell_expect(out, st, 0, "train: steps=4");
        snprintf(traj, sizeof traj, "%s/%s/trajectory", dir, runs[i][0]);
        momentum_from_gradients(traj);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_npy_round_trip, make_temp_dir, drop_temp_dir),
        cmocka_unit_test(test_npy_refusals),
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_ulp),
        cmocka_unit_test_setup_teardown(test_diff_first_divergence, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_diff_plot_matches_json, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_diff_nan_and_zero, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_diff_format_errors, make_temp_dir, drop_temp_dir),
        cmocka_unit_test(test_index_refusals),
        cmocka_unit_test_setup_teardown(test_cli_end_to_end, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_engine_gradients, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_fast_gradients_applied, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_skipped_steps_hold_no_gradient, make_temp_dir, drop_temp_dir),
        cmocka_unit_test_setup_teardown(test_conv_models, make_temp_dir, drop_temp_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
