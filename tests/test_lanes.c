/* Unit tests for the conformance runner's parallel lanes
 * (conformance/lanes.c): units run in forked lanes give the verdicts, the
 * failure count and the order of a serial run; --only's filter holds; a
 * unit whose lane dies is a failure naming it, never a silent gap.
 *
 * scripts/exact_mutants.sh rebuilds this test against lanes.c compiled
 * with DR_MUTANT_LANE_LOST_UNIT_DROPPED (a crashed lane's unit vanishes
 * from the report) and requires it to fail. The runner's own usage errors
 * (--jobs, --only) are checked against bin/conformance (DR_CONF_BIN). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "conformance/conformance.h"
#include "tests/shell.h"

#ifndef DR_CONF_BIN
#define DR_CONF_BIN "bin/conformance"   /* the Makefile names its build's */
#endif

static int two_passes(results *r, const char *outdir)
{
    (void)outdir;
    record(r, "alpha", NULL, 1, true, 0, "alpha one");
    record(r, "alpha", NULL, 2, true, 0, "alpha two");
    return 0;
}

static int fail_and_skip(results *r, const char *outdir)
{
    (void)outdir;
    record(r, "beta", NULL, 1, false, 0, "beta fails");
    record_not_supported(r, "beta", NULL, 1, "no such device", "beta cannot run");
    return 1;
}

static int alone_pass(results *r, const char *outdir)
{
    (void)outdir;
    record(r, "gamma", NULL, 4, true, 0, "gamma alone");
    return 0;
}

static int many_passes(results *r, const char *outdir)
{
    (void)outdir;
    for (int i = 0; i < 300; i++) record(r, "delta", NULL, 1, true, 0, "delta %d", i);   /* beyond one realloc */
    return 0;
}

static int crashes(results *r, const char *outdir)
{
    (void)outdir;
    record(r, "omega", NULL, 1, true, 0, "omega before the crash");
    fflush(stdout);
    abort();
}

static const unit k_units[] = {
    { "alpha", two_passes, false }, { "beta", fail_and_skip, false }, { "gamma", alone_pass, true },
    { "delta", many_passes, false }, { "alpha", two_passes, false },
};
enum { NUNITS = sizeof k_units / sizeof k_units[0] };

static bool wanted(const char *list, const char *s)
{
    return list == NULL || strstr(list, s) != NULL;
}

static void run(results *r, const char *only, const unit *u, size_t n, int jobs, int *fails)
{
    memset(r, 0, sizeof *r);
    r->only = only;
    *fails = run_units(r, "/tmp", u, n, wanted, jobs);
}

static void same_book(const results *a, const results *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        assert_string_equal(a->v[i].suite, b->v[i].suite);
        assert_string_equal(a->v[i].name, b->v[i].name);
        assert_string_equal(a->v[i].reason, b->v[i].reason);
        assert_int_equal(a->v[i].kind, b->v[i].kind);
        assert_int_equal(a->v[i].replicas, b->v[i].replicas);
    }
}

static void lanes_give_the_serial_book(void **state)
{
    (void)state;
    for (int jobs = 2; jobs <= 5; jobs++) {
        results serial, lanes;
        int f1, f2;
        run(&serial, NULL, k_units, NUNITS, 1, &f1);
        run(&lanes, NULL, k_units, NUNITS, jobs, &f2);
        assert_int_equal(serial.n, 2 + 2 + 300 + 2 + 1);
        assert_string_equal(serial.v[serial.n - 1].suite, "gamma");   /* alone: after the lanes, both ways */
        same_book(&serial, &lanes);
        assert_int_equal(f1, 1);
        assert_int_equal(f2, 1);
        free(serial.v);
        free(lanes.v);
    }
}

static void only_the_wanted_suites(void **state)
{
    results r;
    int fails;
    (void)state;
    run(&r, "beta,gamma", k_units, NUNITS, 2, &fails);
    assert_int_equal(r.n, 3);
    assert_string_equal(r.v[0].name, "beta fails");
    assert_string_equal(r.v[1].name, "beta cannot run");
    assert_int_equal(r.v[1].kind, VERDICT_NOT_SUPPORTED);
    assert_string_equal(r.v[2].name, "gamma alone");
    assert_int_equal(fails, 1);
    free(r.v);
}

/* A lane that dies mid-unit: that unit is a failure naming it, and every
 * other unit still reports (another lane takes what the dead one left). */
static void a_dead_lane_is_a_failure(void **state)
{
    static const unit u[] = {
        { "alpha", two_passes, false }, { "omega", crashes, false }, { "delta", many_passes, false },
        { "beta", fail_and_skip, false },
    };
    results r;
    int fails;
    size_t omega = 0, others = 0;
    (void)state;
    run(&r, NULL, u, sizeof u / sizeof u[0], 2, &fails);
    for (size_t i = 0; i < r.n; i++) {
        if (strcmp(r.v[i].suite, "omega") == 0) {
            omega++;
            assert_int_equal(r.v[i].kind, VERDICT_FAIL);
            assert_non_null(strstr(r.v[i].name, "part 1 of the table did not finish"));
        } else {
            others++;
        }
    }
    assert_int_equal(omega, 1);   /* the verdict before the crash never reached the book */
    assert_int_equal(others, 2 + 300 + 2);
    assert_int_equal(fails, 2);
    free(r.v);
}

/* bin/conformance's usage errors: exit 2, naming the flag and what it expects. */
static void usage_errors(void **state)
{
    char out[4096];
    (void)state;
    shell_expect(out, shell_run(out, sizeof out, DR_CONF_BIN " --jobs 0"), 2,
                 "conformance: --jobs: expected a lane count from 1 to 16, got '0'");
    shell_expect(out, shell_run(out, sizeof out, DR_CONF_BIN " --jobs 2x"), 2,
                 "conformance: --jobs: expected a lane count from 1 to 16, got '2x'");
    shell_expect(out, shell_run(out, sizeof out, DR_CONF_BIN " --only loss_curves,nosuch"), 2,
                 "conformance: --only loss_curves,nosuch: a suite is not one of loss_curves, batch_splitting");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lanes_give_the_serial_book),
        cmocka_unit_test(only_the_wanted_suites),
        cmocka_unit_test(a_dead_lane_is_a_failure),
        cmocka_unit_test(usage_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
