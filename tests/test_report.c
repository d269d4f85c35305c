/* Unit tests for the conformance report's verdicts (conformance/verdict.c,
 * report.c, report_matrix.c): a case that did not run is "not supported"
 * everywhere (the tally and the summary line, results.json, junit.xml,
 * matrix.dat, index.html) and never a pass.
 *
 * scripts/exact_mutants.sh rebuilds this test against verdict.c compiled
 * with DR_MUTANT_SKIP_AS_PASS (a not-supported cell recorded as passed, the
 * bug this replaced) and requires it to fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <json-c/json.h>

#include "tests/tmpdir.h"

#include "conformance/conformance.h"
#include "distref/factory.h"

static void config(dr_run_config *c, const char *variant, const char *numerics, const char *strategy, int gpus)
{
    dr_err err;
    dr_run_config_defaults(c);
    c->synthetic_examples = 63;
    c->global_batch_size = 20;
    c->epochs = 1;
    c->seed = 7;
    snprintf(c->variant, sizeof c->variant, "%s", variant);
    snprintf(c->numerics, sizeof c->numerics, "%s", numerics);
    assert_int_equal(dr_get_distribution_strategy(strategy, gpus, NULL, 1, NULL, &c->strategy, &err), DR_OK);
}

/* One case of each verdict, and one more that did not run: the reference
 * refuses fast numerics (it is the exact oracle), through supported() as
 * every suite asks. */
static void book(results *r)
{
    dr_run_config c;
    memset(r, 0, sizeof *r);
    config(&c, "ref", "exact", "mirrored", 2);
    record(r, "loss_curves", &c, 2, true, 0.5, "ref mirrored R=2 vs one_device");
    config(&c, "openmp", "exact", "mirrored", 2);
    record(r, "loss_curves", &c, 2, false, 0.5, "openmp mirrored R=2 vs one_device");
    config(&c, "ref", "fast", "mirrored", 2);
    assert_false(supported(r, "loss_curves", &c, 2));
    config(&c, "opencl", "exact", "tpu", 0);
    record_not_supported(r, "loss_curves", &c, 8, "opencl backend: tpu is not built for OpenCL", "opencl tpu R=8");
}

static void not_supported_is_its_own_verdict(void **state)
{
    results r;
    tally t;
    char line[128];
    (void)state;
    book(&r);
    assert_int_equal(r.n, 4);
    assert_string_equal(verdict_word(r.v[2].kind), "not_supported");
    assert_non_null(strstr(r.v[2].reason, "exact only"));
    assert_string_equal(verdict_word(r.v[3].kind), "not_supported");
    t = count_verdicts(&r);
    assert_int_equal(t.passed, 1);
    assert_int_equal(t.failed, 1);
    assert_int_equal(t.not_supported, 2);
    format_summary(line, sizeof line, &t);
    assert_string_equal(line, "1 passed, 1 failed, 2 not supported");
    free(r.v);
}

/* Occurrences of needle in the file dir/name (-1: unreadable). */
static int count_in(const char *dir, const char *name, const char *needle)
{
    char path[1200], *text = NULL;
    size_t len = 0;
    int n = 0;
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(f = fopen(path, "r"))) return -1;
    if (getdelim(&text, &len, '\0', f) < 0) { fclose(f); free(text); return -1; }
    fclose(f);
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
    free(text);
    return n;
}

static void json_verdicts(const char *dir)
{
    char path[1200];
    json_object *o, *cases, *sum, *x;
    const char *want[4] = { "pass", "fail", "not_supported", "not_supported" };
    snprintf(path, sizeof path, "%s/results.json", dir);
    assert_non_null(o = json_object_from_file(path));
    assert_true(json_object_object_get_ex(o, "cases", &cases));
    assert_int_equal(json_object_array_length(cases), 4);
    for (size_t i = 0; i < 4; i++) {
        json_object *c = json_object_array_get_idx(cases, i);
        assert_true(json_object_object_get_ex(c, "verdict", &x));
        assert_string_equal(json_object_get_string(x), want[i]);
        assert_int_equal(json_object_object_get_ex(c, "reason", &x), i >= 2);
    }
    assert_true(json_object_object_get_ex(o, "summary", &sum));
    assert_true(json_object_object_get_ex(sum, "passed", &x));
    assert_int_equal(json_object_get_int(x), 1);
    assert_true(json_object_object_get_ex(sum, "not_supported", &x));
    assert_int_equal(json_object_get_int(x), 2);
    json_object_put(o);
}

static void every_output_says_so(void **state)
{
    const char *dir = *state;
    results r;
    book(&r);
    assert_int_equal(write_report(&r, dir, 1.0), 0);
    json_verdicts(dir);
    assert_int_equal(count_in(dir, "junit.xml", "<skipped message=\"not supported: "), 2);
    assert_int_equal(count_in(dir, "junit.xml", "<failure "), 1);
    assert_int_equal(count_in(dir, "junit.xml", "failures=\"1\" skipped=\"2\""), 2);
    assert_int_equal(count_in(dir, "matrix.dat", "\"tpu R=8\" \"opencl exact\" not_supported 0 0 1\n"), 1);
    assert_int_equal(count_in(dir, "matrix.dat", "\"mirrored R=2\" \"ref fast\" not_supported 0 0 1\n"), 1);
    assert_int_equal(count_in(dir, "matrix.dat", "\"mirrored R=2\" \"ref exact\" pass 1 0 0\n"), 1);
    assert_int_equal(count_in(dir, "index.html", "<b>1 passed, 1 failed, 2 not supported</b>"), 1);
    assert_int_equal(count_in(dir, "index.html", "<g class=\"cell not_supported\">"), 2);
    assert_int_equal(count_in(dir, "index.html", "<tr class=\"not_supported\">"), 2);
    free(r.v);
}

static int make_dir(void **state) { return temp_dir_from(state, "/tmp/distref_report_XXXXXX"); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(not_supported_is_its_own_verdict),
        cmocka_unit_test_setup_teardown(every_output_says_so, make_dir, drop_temp_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
