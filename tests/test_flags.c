/* Unit tests for common/flags.c: every accepted form, every error with its
 * code and message, help, and the usage listing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "distref/flags.h"

/* A table like the CLI's, with its defaults; one per test. */
typedef struct fixture {
    char    strategy[DR_FLAG_STR_MAX];
    int64_t num_gpus;
    int64_t steps;
    double  lr;
    double  scale;
    bool    verbose;
    bool    exact;
    dr_flag flags[7];
} fixture;

enum { F_STRATEGY, F_NUM_GPUS, F_STEPS, F_LR, F_SCALE, F_VERBOSE, F_EXACT, NFLAGS };

static void fixture_init(fixture *fx)
{
    memset(fx, 0, sizeof *fx);
    strcpy(fx->strategy, "mirrored");
    fx->num_gpus = 0;
    fx->steps = 10;
    fx->lr = 0.1;
    fx->scale = 1.0;
    fx->verbose = false;
    fx->exact = true;
    dr_flag t[NFLAGS] = {
        { "distribution_strategy", DR_FLAG_STRING, fx->strategy, 0, 0, "which strategy", false, NULL, false },
        { "num_gpus", DR_FLAG_INT, &fx->num_gpus, 0, 64, "GPUs to use", false, NULL, false },
        { "steps", DR_FLAG_INT, &fx->steps, 1, 0, "unbounded", false, NULL, false },
        { "lr", DR_FLAG_DOUBLE, &fx->lr, 0, 10, "learning rate", false, NULL, false },
        { "scale", DR_FLAG_DOUBLE, &fx->scale, 1, 0, "unbounded", false, NULL, false },
        { "verbose", DR_FLAG_BOOL, &fx->verbose, 0, 0, "talk more", false, NULL, false },
        { "exact", DR_FLAG_BOOL, &fx->exact, 0, 0, "exact mode", false, NULL, false },
    };
    memcpy(fx->flags, t, sizeof t);
}

/* Parses a NULL-terminated list of arguments. */
static int parse(fixture *fx, bool *help, dr_err *err, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, err);
    for (char *a; (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    memset(err, 0, sizeof *err);
    return dr_flags_parse(fx->flags, NFLAGS, argc, argv, help, err);
}

/* Expects a DR_EUSAGE error whose message is exactly `want`. */
#define EXPECT_ERR(want, ...)                                                  \
    do {                                                                       \
        fixture fx_;                                                           \
        fixture_init(&fx_);                                                    \
        bool h_;                                                               \
        dr_err e_;                                                             \
        assert_int_equal(parse(&fx_, &h_, &e_, __VA_ARGS__, (char *)NULL), DR_EUSAGE); \
        assert_int_equal(e_.code, DR_EUSAGE);                                  \
        assert_string_equal(e_.msg, want);                                     \
    } while (0)

static void test_defaults_kept_without_args(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    bool help = true;
    dr_err err;
    assert_int_equal(parse(&fx, &help, &err, (char *)NULL), DR_OK);
    assert_false(help);
    assert_string_equal(fx.strategy, "mirrored");
    assert_int_equal(fx.num_gpus, 0);
    assert_true(fx.lr == 0.1);
    assert_true(fx.exact);
    for (int i = 0; i < NFLAGS; i++)
        assert_false(fx.flags[i].seen);
}

static void test_equals_and_separate_forms(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    bool help;
    dr_err err;
    assert_int_equal(parse(&fx, &help, &err, "--distribution_strategy=one_device",
                           "--num_gpus", "4", "-steps=7", "-lr", "0.5", (char *)NULL), DR_OK);
    assert_string_equal(fx.strategy, "one_device");
    assert_int_equal(fx.num_gpus, 4);
    assert_int_equal(fx.steps, 7);
    assert_true(fx.lr == 0.5);
    assert_true(fx.flags[F_STRATEGY].seen && fx.flags[F_NUM_GPUS].seen);
    assert_true(fx.flags[F_STEPS].seen && fx.flags[F_LR].seen);
    assert_false(fx.flags[F_SCALE].seen);
}

static void test_value_may_start_with_dash(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    bool help;
    dr_err err;
    /* absl takes the next argument as the value whatever it looks like. */
    assert_int_equal(parse(&fx, &help, &err, "--steps", "-3", "--distribution_strategy",
                           "--x", (char *)NULL), DR_OK);
    assert_int_equal(fx.steps, -3);
    assert_string_equal(fx.strategy, "--x");
}

static void test_string_empty_and_max_length(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    bool help;
    dr_err err;
    assert_int_equal(parse(&fx, &help, &err, "--distribution_strategy=", (char *)NULL), DR_OK);
    assert_string_equal(fx.strategy, "");

    char *longest = malloc(DR_FLAG_STR_MAX + 40);
    assert_non_null(longest);
    strcpy(longest, "--distribution_strategy=");
    size_t pre = strlen(longest);
    memset(longest + pre, 'a', DR_FLAG_STR_MAX - 1);
    longest[pre + DR_FLAG_STR_MAX - 1] = '\0';
    fixture_init(&fx);
    assert_int_equal(parse(&fx, &help, &err, longest, (char *)NULL), DR_OK);
    assert_int_equal(strlen(fx.strategy), DR_FLAG_STR_MAX - 1);

    strcat(longest, "a");                       /* one character too many */
    fixture_init(&fx);
    assert_int_equal(parse(&fx, &help, &err, longest, (char *)NULL), DR_EUSAGE);
    assert_string_equal(err.msg, "--distribution_strategy: value is 1024 characters long, "
                                 "at most 1023 allowed");
    assert_string_equal(fx.strategy, "mirrored");   /* dest untouched on error */
    free(longest);
}

static void test_bool_forms(void **state)
{
    (void)state;
    static const struct { const char *arg; bool want; } cases[] = {
        { "--verbose", true }, { "-verbose", true }, { "--noverbose", false },
        { "-noverbose", false }, { "--verbose=true", true }, { "--verbose=TRUE", true },
        { "--verbose=1", true }, { "--verbose=false", false }, { "--verbose=False", false },
        { "--verbose=0", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int start = 0; start < 2; start++) {
            fixture fx;
            fixture_init(&fx);
            fx.verbose = start != 0;
            bool help;
            dr_err err;
            assert_int_equal(parse(&fx, &help, &err, (char *)cases[i].arg, (char *)NULL), DR_OK);
            assert_int_equal(fx.verbose, cases[i].want);
            assert_true(fx.flags[F_VERBOSE].seen);
        }
    }
}

static void test_bool_does_not_take_next_arg(void **state)
{
    (void)state;
    EXPECT_ERR("unexpected argument 'false'", "--verbose", "false");
}

static void test_int_range_and_bounds(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    bool help;
    dr_err err;
    assert_int_equal(parse(&fx, &help, &err, "--num_gpus=64", (char *)NULL), DR_OK);
    assert_int_equal(fx.num_gpus, 64);
    fixture_init(&fx);
    assert_int_equal(parse(&fx, &help, &err, "--num_gpus=0", (char *)NULL), DR_OK);
    fixture_init(&fx);
    assert_int_equal(parse(&fx, &help, &err, "--steps=-9223372036854775808", (char *)NULL), DR_OK);
    assert_true(fx.steps == INT64_MIN);
    EXPECT_ERR("--num_gpus: expected an integer in 0..64, got '-1'", "--num_gpus=-1");
    EXPECT_ERR("--num_gpus: expected an integer in 0..64, got '65'", "--num_gpus", "65");
    EXPECT_ERR("--lr: expected a number in [0, 10], got '11'", "--lr=11");
}

/* Integers are compared with their bounds as integers: 2^53 + 1 is a
 * double's 2^53, so a double comparison let it through a bound of 2^53. */
static void test_int_bound_above_2_53(void **state)
{
    (void)state;
    int64_t seed = 0;
    dr_flag f[1] = { { "seed", DR_FLAG_INT, &seed, 0, 9007199254740992.0, "seed", false, NULL, false } };
    char ok[] = "--seed=9007199254740992", over[] = "--seed=9007199254740993";
    char *a1[] = { ok }, *a2[] = { over };
    bool help;
    dr_err err = { 0, "" };
    assert_int_equal(dr_flags_parse(f, 1, 1, a1, &help, &err), DR_OK);
    assert_true(seed == INT64_C(9007199254740992));
    assert_int_equal(dr_flags_parse(f, 1, 1, a2, &help, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "--seed: expected an integer in 0..2^53, got '9007199254740993'"));
    assert_true(seed == INT64_C(9007199254740992));
}

static void test_int_malformed(void **state)
{
    (void)state;
    EXPECT_ERR("--num_gpus: expected an integer, got 'two'", "--num_gpus=two");
    EXPECT_ERR("--num_gpus: expected an integer in 0..64, got '99999999999999999999'",
               "--num_gpus=99999999999999999999");
    EXPECT_ERR("--steps: expected an integer, got 'two'", "--steps=two");
    EXPECT_ERR("--steps: expected an integer, got ''", "--steps=");
    EXPECT_ERR("--steps: expected an integer, got '3x'", "--steps=3x");
    EXPECT_ERR("--steps: expected an integer, got ' 3'", "--steps= 3");
    EXPECT_ERR("--steps: expected an integer, got '3 '", "--steps=3 ");
    EXPECT_ERR("--steps: expected an integer, got '1.5'", "--steps=1.5");
    EXPECT_ERR("--steps: expected an integer, got '0x10'", "--steps=0x10");
    EXPECT_ERR("--steps: expected a 64-bit integer, got '9223372036854775808'",
               "--steps=9223372036854775808");
}

static void test_double_values(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    bool help;
    dr_err err;
    assert_int_equal(parse(&fx, &help, &err, "--lr=1e-3", "--scale", "-2.5", (char *)NULL), DR_OK);
    assert_true(fx.lr == 1e-3);
    assert_true(fx.scale == -2.5);
    EXPECT_ERR("--lr: expected a number in [0, 10], got '11'", "--lr=11");
    EXPECT_ERR("--lr: expected a number in [0, 10], got '-0.5'", "--lr=-0.5");
    EXPECT_ERR("--scale: expected a finite number, got 'nan'", "--scale=nan");
    EXPECT_ERR("--scale: expected a finite number, got 'inf'", "--scale=inf");
    EXPECT_ERR("--scale: expected a finite number, got '1e999'", "--scale=1e999");
    EXPECT_ERR("--scale: expected a finite number, got 'abc'", "--scale=abc");
    EXPECT_ERR("--scale: expected a finite number, got ''", "--scale=");
    EXPECT_ERR("--scale: expected a finite number, got '1.0x'", "--scale=1.0x");
}

static void test_bad_bool_value(void **state)
{
    (void)state;
    EXPECT_ERR("--verbose: expected true, false, 1 or 0, got 'yes!'", "--verbose=yes!");
    EXPECT_ERR("--verbose: expected true, false, 1 or 0, got ''", "--verbose=");
    EXPECT_ERR("--noverbose: takes no value, got 'true'", "--noverbose=true");
}

static void test_unknown_flags(void **state)
{
    (void)state;
    EXPECT_ERR("unknown flag --foo; see --help", "--foo");
    EXPECT_ERR("unknown flag --foo; see --help", "-foo=1");
    EXPECT_ERR("unknown flag --num_gpu; see --help", "--num_gpu=1");
    /* "no" only negates booleans. */
    EXPECT_ERR("unknown flag --nonum_gpus; see --help", "--nonum_gpus");
    EXPECT_ERR("unknown flag --no; see --help", "--no");
    EXPECT_ERR("unknown flag --; see --help", "--=3");
}

static void test_missing_value(void **state)
{
    (void)state;
    EXPECT_ERR("--num_gpus: missing value (expected int)", "--num_gpus");
    EXPECT_ERR("--distribution_strategy: missing value (expected string)",
               "--verbose", "--distribution_strategy");
    EXPECT_ERR("--lr: missing value (expected double)", "-lr");
}

static void test_given_twice(void **state)
{
    (void)state;
    EXPECT_ERR("--num_gpus: given twice", "--num_gpus=1", "--num_gpus", "2");
    EXPECT_ERR("--verbose: given twice", "--verbose", "--noverbose");
    EXPECT_ERR("--exact: given twice", "--noexact", "-exact=1");
}

static void test_positional_arguments(void **state)
{
    (void)state;
    EXPECT_ERR("unexpected argument 'x'", "x");
    EXPECT_ERR("unexpected argument 'x'", "--num_gpus=1", "x");
    EXPECT_ERR("unexpected argument '-'", "-");
    EXPECT_ERR("unexpected argument '--steps=3'", "--", "--steps=3");
    /* A lone "--" ends the flags with nothing after it: fine. */
    fixture fx;
    fixture_init(&fx);
    bool help;
    dr_err err;
    assert_int_equal(parse(&fx, &help, &err, "--steps=3", "--", (char *)NULL), DR_OK);
    assert_int_equal(fx.steps, 3);
}

static void test_help_stops_parsing(void **state)
{
    (void)state;
    const char *forms[] = { "--help", "-help", "-h", "--h" };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        fixture fx;
        fixture_init(&fx);
        bool help = false;
        dr_err err;
        /* Help wins over a later error and leaves later flags unparsed. */
        assert_int_equal(parse(&fx, &help, &err, "--steps=5", (char *)forms[i],
                               "--bogus", "--steps=6", (char *)NULL), DR_OK);
        assert_true(help);
        assert_int_equal(fx.steps, 5);
    }
    /* An error before --help is still reported. */
    EXPECT_ERR("unknown flag --bogus; see --help", "--bogus", "--help");
    EXPECT_ERR("--help: takes no value, got '1'", "--help=1");
}

static void test_seen_is_reset(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    bool help;
    dr_err err;
    assert_int_equal(parse(&fx, &help, &err, "--num_gpus=2", (char *)NULL), DR_OK);
    /* Parsing again with the same table is a fresh parse, not "given twice". */
    assert_int_equal(parse(&fx, &help, &err, "--num_gpus=3", (char *)NULL), DR_OK);
    assert_int_equal(fx.num_gpus, 3);
    assert_int_equal(parse(&fx, &help, &err, (char *)NULL), DR_OK);
    assert_false(fx.flags[F_NUM_GPUS].seen);
}

/* Every flag of the table is listed, as "  --name=<choices or type>
 * (default: D)" with its help on the lines below, and no line is longer
 * than DR_FLAGS_USAGE_WIDTH, whatever the help, default or choices. */
static void test_usage_lists_every_flag_wrapped(void **state)
{
    (void)state;
    fixture fx;
    fixture_init(&fx);
    static const char long_help[] = "a help text much longer than one line of the usage, which must wrap at the "
        "width at a space and never run past it, not even with averyveryveryveryveryveryveryveryveryveryveryvery"
        "veryveryveryveryveryveryveryverylongwordwithoutanyspaceinitatall that has to be cut";
    fx.flags[F_LR].help = long_help;
    fx.flags[F_STRATEGY].choices = "off|one_device|mirrored|central_storage|multi_worker_mirrored|"
                                   "parameter_server|tpu|another_long_strategy_name|and_one_more";
    memset(fx.strategy, 'x', 300);   /* a long default */
    fx.strategy[300] = 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    dr_flags_usage(out, fx.flags, NFLAGS);
    fclose(out);
    for (int i = 0; i < NFLAGS; i++) {
        char head[64];
        snprintf(head, sizeof head, "\n  --%s=", fx.flags[i].name);
        if (!strstr(buf, head) && strncmp(buf, head + 1, strlen(head + 1)) != 0)
            fail_msg("--%s is not listed:\n%s", fx.flags[i].name, buf);
    }
    assert_non_null(strstr(buf, "  --num_gpus=int (default: 0)\n        GPUs to use\n"));
    assert_non_null(strstr(buf, "  --lr=double (default: 0.1)\n"));
    assert_non_null(strstr(buf, "  --exact=bool (default: true)\n        exact mode\n"));
    assert_non_null(strstr(buf, "--distribution_strategy=off|one_device|mirrored|"));
    assert_non_null(strstr(buf, "that has to be cut\n"));
    int lines = 0;
    for (char *line = buf; *line != '\0'; lines++) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        if (nl - line > DR_FLAGS_USAGE_WIDTH) fail_msg("%ld columns: %.*s", (long)(nl - line), (int)(nl - line), line);
        line = nl + 1;
    }
    assert_true(lines > 2 * NFLAGS);
    free(buf);
}

/* A string flag with choices takes only those, names them all when given
 * another, suggests the nearest within two edits, and may fold case. */
static void test_choices(void **state)
{
    (void)state;
    fixture fx;
    bool help;
    dr_err err;
    fixture_init(&fx);
    fx.flags[F_STRATEGY].choices = "off|one_device|mirrored";
    assert_int_equal(parse(&fx, &help, &err, "--distribution_strategy=one_device", (char *)NULL), DR_OK);
    assert_string_equal(fx.strategy, "one_device");
    fixture_init(&fx);
    fx.flags[F_STRATEGY].choices = "off|one_device|mirrored";
    assert_int_equal(parse(&fx, &help, &err, "--distribution_strategy=mirored", (char *)NULL), DR_EUSAGE);
    assert_string_equal(err.msg, "--distribution_strategy: expected one of off, one_device, mirrored; got "
                                 "'mirored' (did you mean mirrored?)");
    fixture_init(&fx);
    fx.flags[F_STRATEGY].choices = "off|one_device|mirrored";
    assert_int_equal(parse(&fx, &help, &err, "--distribution_strategy=central", (char *)NULL), DR_EUSAGE);
    assert_string_equal(err.msg, "--distribution_strategy: expected one of off, one_device, mirrored; got 'central'");
    fixture_init(&fx);
    fx.flags[F_STRATEGY].choices = "off|one_device|mirrored";
    assert_int_equal(parse(&fx, &help, &err, "--distribution_strategy=MIRRORED", (char *)NULL), DR_EUSAGE);
    assert_int_equal(parse(&fx, &help, &err, "--distribution_strategy=", (char *)NULL), DR_EUSAGE);
    fx.flags[F_STRATEGY].fold_case = true;
    assert_int_equal(parse(&fx, &help, &err, "--distribution_strategy=MIRRORED", (char *)NULL), DR_OK);
    assert_string_equal(fx.strategy, "MIRRORED");   /* stored as given: the library lower-cases it */
    fx.flags[F_STRATEGY].choices = "|sgd|adam";
    assert_int_equal(parse(&fx, &help, &err, "--distribution_strategy=", (char *)NULL), DR_OK);
    assert_int_equal(parse(&fx, &help, &err, "--distribution_strategy=rmsprop", (char *)NULL), DR_EUSAGE);
    assert_string_equal(err.msg, "--distribution_strategy: expected one of \"\", sgd, adam; got 'rmsprop'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_kept_without_args),
        cmocka_unit_test(test_equals_and_separate_forms),
        cmocka_unit_test(test_value_may_start_with_dash),
        cmocka_unit_test(test_string_empty_and_max_length),
        cmocka_unit_test(test_bool_forms),
        cmocka_unit_test(test_bool_does_not_take_next_arg),
        cmocka_unit_test(test_int_range_and_bounds), cmocka_unit_test(test_int_bound_above_2_53),
        cmocka_unit_test(test_int_malformed),
        cmocka_unit_test(test_double_values),
        cmocka_unit_test(test_bad_bool_value),
        cmocka_unit_test(test_unknown_flags),
        cmocka_unit_test(test_missing_value),
        cmocka_unit_test(test_given_twice),
        cmocka_unit_test(test_positional_arguments),
        cmocka_unit_test(test_help_stops_parsing),
        cmocka_unit_test(test_seen_is_reset),
        cmocka_unit_test(test_usage_lists_every_flag_wrapped),
        cmocka_unit_test(test_choices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
