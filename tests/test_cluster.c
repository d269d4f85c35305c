/* Unit tests for common/cluster.c: TF_CONFIG parsing, TensorFlow's
 * multi_worker_util validation and distref's stricter checks (one test per
 * rejection), the chief / worker_count / id_in_cluster queries, and
 * dr_cluster_check's strategy rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "distref/cluster.h"

/* Every cluster parse_ok makes, kept for the group's teardown to free. */
static dr_cluster kept[64];
static size_t nkept;

static void parse_ok(const char *json, dr_cluster *c)
{
    dr_err err = { 0, "" };
    memset(c, 0x5a, sizeof *c);
    int rc = dr_cluster_parse(json, c, &err);
    if (rc != DR_OK)
        fail_msg("%s rejected: %s", json ? json : "NULL", err.msg);
    assert_true(nkept < sizeof kept / sizeof kept[0]);
    kept[nkept++] = *c;
}

static int free_kept(void **state)
{
    (void)state;
    while (nkept) dr_cluster_free(&kept[--nkept]);
    return 0;
}

/* Rejected with DR_EUSAGE, a "TF_CONFIG: " message containing want, and the
 * output left as it was. */
static void expect_err(const char *json, const char *want)
{
    dr_cluster *c = malloc(2 * sizeof *c);
    assert_non_null(c);
    memset(c, 0x5a, 2 * sizeof *c);
    dr_err err = { 0, "" };
    assert_int_equal(dr_cluster_parse(json, c, &err), DR_EUSAGE);
    assert_int_equal(err.code, DR_EUSAGE);
    if (strncmp(err.msg, "TF_CONFIG: ", 11) != 0 || strstr(err.msg, want) == NULL)
        fail_msg("%s\n  message: %s\n  wanted:  %s", json, err.msg, want);
    assert_memory_equal(&c[0], &c[1], sizeof *c);
    free(c);
}

/* dr_cluster_check accepts (want NULL) or rejects with a message holding want. */
static void check_strategy(const dr_cluster *c, dr_strategy_kind k, const char *want)
{
    dr_err err = { 0, "" };
    int rc = dr_cluster_check(c, k, &err);
    if (want == NULL && rc != DR_OK)
        fail_msg("check(%d) rejected: %s", (int)k, err.msg);
    if (want != NULL && (rc != DR_EUSAGE || err.code != DR_EUSAGE || !strstr(err.msg, want)))
        fail_msg("check(%d) gave %d: %s\n  wanted: %s", (int)k, rc, err.msg, want);
}

/* worker_count, id_in_cluster and is_chief together. */
static void expect_queries(const dr_cluster *c, uint32_t count, uint32_t id, bool chief)
{
    assert_int_equal(dr_cluster_worker_count(c), count);
    assert_int_equal(dr_cluster_id_in_cluster(c), id);
    assert_int_equal(dr_cluster_is_chief(c), chief);
}

#define CLUSTER3 "\"cluster\": {\"chief\": [\"c:1\"], \"worker\": [\"w0:1\", \"w1:1\"]}"
#define WORKERS2 "{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": "
#define FULL "{\"cluster\": {\"chief\": [\"c:1\"], \"worker\": [\"w0:1\", \"w1:1\"], " \
             "\"ps\": [\"p0:1\", \"p1:1\"], \"evaluator\": [\"e:1\"]}, \"task\": "

/* Tests made only of rejections: ERR_TEST(name, { json, want }, ...) and
 * ADDR_TEST(name, { address, want }, ...). */
#define REJECT_TEST(name, check, ...)                                       \
    static void name(void **state)                                          \
    {                                                                       \
        (void)state;                                                        \
        static const char *const cases[][2] = { __VA_ARGS__ };              \
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)         \
            check(cases[i][0], cases[i][1]);                                \
    }
#define ERR_TEST(name, ...)  REJECT_TEST(name, expect_err, __VA_ARGS__)
#define ADDR_TEST(name, ...) REJECT_TEST(name, expect_addr_err, __VA_ARGS__)

/* A worker-only TF_CONFIG whose single worker has address addr. */
static void expect_addr_err(const char *addr, const char *want)
{
    char json[512];
    snprintf(json, sizeof json, "{\"cluster\": {\"worker\": [\"%s\"]}, "
             "\"task\": {\"type\": \"worker\", \"index\": 0}}", addr);
    expect_err(json, want);
}

/* ---- accepted ---------------------------------------------------------- */

static void test_empty_config(void **state)
{
    (void)state;
    const char *empty[] = { NULL, "", " \n\t", "{}", " { }\n" };
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        dr_cluster c;
        parse_ok(empty[i], &c);
        assert_true(!c.has_task);
        for (int t = 0; t < 4; t++)
            assert_int_equal(c.job[t].n, 0);
        expect_queries(&c, 1, 0, true);
    }
}

static void test_chief_and_workers(void **state)
{
    (void)state;
    dr_cluster c;
    parse_ok("{" CLUSTER3 ", \"task\": {\"type\": \"worker\", \"index\": 1}}", &c);
    assert_true(c.has_task);
    assert_int_equal(c.task_type, DR_TASK_WORKER);
    assert_int_equal(c.task_index, 1);
    assert_int_equal(c.job[DR_TASK_CHIEF].n, 1);
    assert_int_equal(c.job[DR_TASK_WORKER].n, 2);
    assert_int_equal(c.job[DR_TASK_PS].n, 0);
    assert_string_equal(c.job[DR_TASK_CHIEF].addr[0], "c:1");
    assert_string_equal(c.job[DR_TASK_WORKER].addr[1], "w1:1");
    expect_queries(&c, 3, 2, false);
    parse_ok("{" CLUSTER3 ", \"task\": {\"type\": \"worker\", \"index\": 0}}", &c);
    expect_queries(&c, 3, 1, false);                    /* the chief task is the chief */
    parse_ok("{\"task\": {\"index\": 0, \"type\": \"chief\"}, " CLUSTER3 "}", &c);
    assert_int_equal(c.task_type, DR_TASK_CHIEF);
    expect_queries(&c, 3, 0, true);
}

static void test_workers_only(void **state)
{
    (void)state;
    dr_cluster c;
    parse_ok(WORKERS2 "{\"type\": \"worker\", \"index\": 0}}", &c);
    expect_queries(&c, 2, 0, true);                     /* worker 0 when no chief */
    parse_ok(WORKERS2 "{\"type\": \"worker\", \"index\": 1}}", &c);
    expect_queries(&c, 2, 1, false);
}

static void test_ps_and_evaluator(void **state)
{
    (void)state;
    dr_cluster c;
    parse_ok(FULL "{\"type\": \"ps\", \"index\": 1}}", &c);
    assert_int_equal(c.task_type, DR_TASK_PS);
    assert_int_equal(c.job[DR_TASK_PS].n, 2);
    assert_string_equal(c.job[DR_TASK_PS].addr[1], "p1:1");
    assert_string_equal(c.job[DR_TASK_EVALUATOR].addr[0], "e:1");
    expect_queries(&c, 3, UINT32_MAX, false);
    parse_ok(FULL "{\"type\": \"evaluator\", \"index\": 0}}", &c);
    expect_queries(&c, 3, UINT32_MAX, true);            /* as multi_worker_util.is_chief */
}

static void test_evaluator_exempt(void **state)
{
    (void)state;
    dr_cluster c;
    parse_ok(WORKERS2 "{\"type\": \"evaluator\", \"index\": 5}}", &c);
    assert_int_equal(c.task_type, DR_TASK_EVALUATOR);
    assert_int_equal(c.task_index, 5);
    assert_int_equal(c.job[DR_TASK_EVALUATOR].n, 0);
    expect_queries(&c, 2, UINT32_MAX, true);
}

static void test_address_forms(void **state)
{
    (void)state;
    dr_cluster c;
    parse_ok("{\"cluster\": {\"chief\": [\"[::1]:2222\"], \"worker\": [\"[fe80::1:AbCd]:1\", "
             "\"[::ffff:10.0.0.1]:65535\", \"host-1.example_2.org:8080\", \"10.0.0.2:2222\"]},"
             " \"task\": {\"type\": \"worker\", \"index\": 3}}", &c);
    assert_string_equal(c.job[DR_TASK_CHIEF].addr[0], "[::1]:2222");
    assert_string_equal(c.job[DR_TASK_WORKER].addr[0], "[fe80::1:AbCd]:1");
    assert_string_equal(c.job[DR_TASK_WORKER].addr[1], "[::ffff:10.0.0.1]:65535");
    assert_string_equal(c.job[DR_TASK_WORKER].addr[2], "host-1.example_2.org:8080");
    expect_queries(&c, 5, 4, false);
}

static void test_extra_keys_and_empty_job(void **state)
{
    (void)state;
    dr_cluster c;
    parse_ok("{\"environment\": \"cloud\", \"rpc_layer\": \"grpc\", \"job\": {}, "
             "\"cluster\": {\"worker\": [\"a:1\"], \"ps\": [], \"chief\": []}, "
             "\"task\": {\"type\": \"worker\", \"index\": 0, \"trial\": \"1\"}}", &c);
    assert_int_equal(c.job[DR_TASK_PS].n, 0);
    expect_queries(&c, 1, 0, true);                     /* "chief": [] is no chief */
}

/* n workers "w<i>:1"; task worker n-1. */
static char *workers_json(unsigned n)
{
    size_t cap = 64 + 16 * (size_t)n;
    char *s = malloc(cap);
    assert_non_null(s);
    size_t at = (size_t)snprintf(s, cap, "{\"cluster\": {\"worker\": [");
    for (unsigned i = 0; i < n; i++)
        at += (size_t)snprintf(s + at, cap - at, "%s\"w%u:1\"", i ? ", " : "", i);
    snprintf(s + at, cap - at, "]}, \"task\": {\"type\": \"worker\", \"index\": %u}}", n - 1);
    return s;
}

static void test_max_tasks(void **state)
{
    (void)state;
    dr_cluster c;
    char *s = workers_json(DR_CLUSTER_MAX_TASKS);
    parse_ok(s, &c);
    expect_queries(&c, DR_CLUSTER_MAX_TASKS, DR_CLUSTER_MAX_TASKS - 1, false);
    free(s);
    s = workers_json(DR_CLUSTER_MAX_TASKS + 1);
    expect_err(s, "TF_CONFIG: cluster.worker: 65537 tasks; distref supports at most 65536");
    free(s);
}

/* TF_CONFIG has no length limit: a 1,000-worker cluster (about 20 KB, 5x
 * the old 4,095-character cap), a duplicate found among them by address. */
static void test_large_cluster(void **state)
{
    (void)state;
    dr_cluster c;
    char *s = workers_json(1000);
    assert_true(strlen(s) > 4096 * 2);
    parse_ok(s, &c);
    expect_queries(&c, 1000, 999, false);
    assert_string_equal(c.job[DR_TASK_WORKER].addr[999], "w999:1");
    memcpy(strstr(s, "\"w998:1\""), "\"W117:1\"", 8);   /* a duplicate of w117, case aside */
    expect_err(s, "TF_CONFIG: cluster.worker[998]: address 'W117:1' is also cluster.worker[117]");
    free(s);
}

static void test_max_address_length(void **state)
{
    (void)state;
    char addr[DR_CLUSTER_ADDR_MAX + 1], json[512];
    memset(addr, 'h', sizeof addr);
    memcpy(addr + DR_CLUSTER_ADDR_MAX - 3, ":1", 3);    /* 127 characters */
    snprintf(json, sizeof json, "{\"cluster\": {\"worker\": [\"%s\"]}, "
             "\"task\": {\"type\": \"worker\", \"index\": 0}}", addr);
    dr_cluster c;
    parse_ok(json, &c);
    assert_string_equal(c.job[DR_TASK_WORKER].addr[0], addr);
    memset(addr, 'h', sizeof addr);
    memcpy(addr + DR_CLUSTER_ADDR_MAX - 2, ":1", 3);    /* 128 characters */
    expect_addr_err(addr, "cluster.worker[0]: the address is 128 characters long; at most 127");
}

static void test_task_type_name(void **state)
{
    (void)state;
    assert_string_equal(dr_task_type_name(DR_TASK_CHIEF), "chief");
    assert_string_equal(dr_task_type_name(DR_TASK_WORKER), "worker");
    assert_string_equal(dr_task_type_name(DR_TASK_PS), "ps");
    assert_string_equal(dr_task_type_name(DR_TASK_EVALUATOR), "evaluator");
    assert_non_null(strstr(dr_task_type_name((dr_task_type)7), "invalid"));
}

/* ---- JSON and shape ---------------------------------------------------- */

/* Offsets are 0-based, as Python's "(char N)". */
ERR_TEST(test_malformed_json,
    { "{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": x}",
      "TF_CONFIG: malformed JSON at character 41: unexpected character" },
    { "{\"cluster\": {", "malformed JSON at character 13: unexpected end of input" },
    { "{} x", "malformed JSON at character 3: unexpected character" },
    { "{\"task\": {},}", "malformed JSON at character 12" })

/* A complete JSON value that is not an object names its type (it was
 * "unexpected end of input" when json-c was not told the text had ended). */
ERR_TEST(test_scalar_documents,
    { "null", "TF_CONFIG: expected a JSON object with \"cluster\" and \"task\", got null" },
    { "42", "TF_CONFIG: expected a JSON object with \"cluster\" and \"task\", got int" },
    { " 4.5 ", "got double" }, { "true", "got boolean" })

static void test_null_err(void **state)
{
    (void)state;
    dr_cluster c;
    assert_int_equal(dr_cluster_parse("[", &c, NULL), DR_EUSAGE);
    parse_ok(FULL "{\"type\": \"ps\", \"index\": 0}}", &c);
    assert_int_equal(dr_cluster_check(&c, DR_STRATEGY_MIRRORED, NULL), DR_EUSAGE);
}

ERR_TEST(test_not_an_object,
    { "[1, 2]", "TF_CONFIG: expected a JSON object with \"cluster\" and \"task\", got array" },
    { "\"worker\"", "got string" })

ERR_TEST(test_missing_cluster,
    { "{\"task\": {\"type\": \"worker\", \"index\": 0}}", "TF_CONFIG: cluster: missing" },
    { "{\"clustr\": {}, \"task\": {}}", "TF_CONFIG: cluster: missing" })

ERR_TEST(test_missing_task,
    { "{\"cluster\": {\"worker\": [\"a:1\"]}}", "TF_CONFIG: task: missing" })

ERR_TEST(test_cluster_not_object,
    { "{\"cluster\": [\"a:1\"], \"task\": {}}",
      "TF_CONFIG: cluster: expected an object mapping job names" })

ERR_TEST(test_task_not_object,
    { "{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": null}",
      "TF_CONFIG: task: expected an object like {\"type\": \"worker\", \"index\": 0}, got null" })

ERR_TEST(test_job_not_list,
    { "{\"cluster\": {\"worker\": \"a:1\"}, \"task\": {}}",
      "TF_CONFIG: cluster.worker: expected a list of \"host:port\" strings, got string" })

ERR_TEST(test_address_not_string,
    { "{\"cluster\": {\"worker\": [\"a:1\", 2222]}, \"task\": {}}",
      "TF_CONFIG: cluster.worker[1]: expected a \"host:port\" string, got int" })

/* ---- addresses --------------------------------------------------------- */

ADDR_TEST(test_address_no_port,
    { "localhost", "cluster.worker[0]: 'localhost' has no port" },
    { "[::1]", "'[::1]' has no port" },
    { "[::1]2222", "'[::1]2222' has no port" },
    { "[::1:1", "'[::1:1' has no port" },
    { "", "'' has no port" })

ADDR_TEST(test_address_empty_host, { ":2222", "':2222' has an empty host" })

ADDR_TEST(test_address_bad_host,
    { "a b:1", "'a b:1' has ' ' in its host" },
    { "h/x:1", "has '/' in its host" },
    { "::1:2222", "has ':' in its host" },              /* IPv6 needs brackets */
    { "[xyz]:1", "'[xyz]:1' has a bad IPv6 literal" },
    { "[]:1", "has a bad IPv6 literal" },
    { "[1.2.3.4]:1", "has a bad IPv6 literal" })

ADDR_TEST(test_address_bad_port,
    { "h:0", "'h:0' has port '0'; expected a number in 1..65535" },
    { "h:65536", "has port '65536'" },
    { "h:", "has port ''" },
    { "h:http", "has port 'http'" },
    { "h:080", "has port '080'" },
    { "h:+80", "has port '+80'" },
    { "h:99999999999", "has port '99999999999'" })

ADDR_TEST(test_address_nul,
    { "a:1\\u0000b", "cluster.worker[0]: the address contains a NUL character" })

ERR_TEST(test_duplicate_address,
    { "{\"cluster\": {\"worker\": [\"a:1\", \"b:1\", \"a:1\"]}, "
      "\"task\": {\"type\": \"worker\", \"index\": 0}}",
      "cluster.worker[2]: address 'a:1' is also cluster.worker[0]" },
    { "{\"cluster\": {\"worker\": [\"w:1\", \"C:1\"], \"chief\": [\"c:1\"]}, "
      "\"task\": {\"type\": \"worker\", \"index\": 0}}",
      "cluster.worker[1]: address 'C:1' is also cluster.chief[0]" },
    { "{\"cluster\": {\"ps\": [\"[::1]:5\"], \"evaluator\": [\"[::1]:5\"]}, "
      "\"task\": {\"type\": \"ps\", \"index\": 0}}",
      "cluster.evaluator[0]: address '[::1]:5' is also cluster.ps[0]" })

/* ---- TensorFlow's validation ------------------------------------------- */

ERR_TEST(test_disallowed_job,
    { "{\"cluster\": {\"master\": [\"m:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
      "TF_CONFIG: cluster.master: Disallowed task type found in cluster spec. Allowed "
      "types are chief, worker, ps, evaluator and the task type is 'master'" },
    /* Job names are checked before any job's addresses, as in TF. */
    { "{\"cluster\": {\"worker\": [\"bad\"], \"Worker\": []}, \"task\": {}}",
      "the task type is 'Worker'" })

ERR_TEST(test_task_type_missing,
    { WORKERS2 "{\"index\": 0}}", "TF_CONFIG: task.type: missing" })

ERR_TEST(test_task_type_not_string,
    { WORKERS2 "{\"type\": 1, \"index\": 0}}", "TF_CONFIG: task.type: expected a string" })

ERR_TEST(test_task_type_unrecognized,
    { WORKERS2 "{\"type\": \"master\", \"index\": 0}}",
      "TF_CONFIG: task.type: Unrecognized task_type: 'master'" })

ERR_TEST(test_task_type_not_in_cluster,
    { WORKERS2 "{\"type\": \"ps\", \"index\": 0}}",
      "TF_CONFIG: task.type: `task_type` 'ps' not found in cluster_spec." },
    { "{\"cluster\": {}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
      "`task_type` 'worker' not found in cluster_spec." })

ERR_TEST(test_two_chiefs,
    { "{\"cluster\": {\"chief\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": \"chief\", "
      "\"index\": 0}}", "TF_CONFIG: cluster.chief: There must be at most one 'chief' job." })

ERR_TEST(test_two_evaluators,
    { "{\"cluster\": {\"worker\": [\"w:1\"], \"evaluator\": [\"a:1\", \"b:1\"]}, "
      "\"task\": {\"type\": \"worker\", \"index\": 0}}",
      "TF_CONFIG: cluster.evaluator: There must be at most one 'evaluator' job." })

ERR_TEST(test_index_missing,
    { WORKERS2 "{\"type\": \"worker\"}}", "TF_CONFIG: task.index: missing; expected an integer" })

ERR_TEST(test_index_not_integer,
    { WORKERS2 "{\"type\": \"worker\", \"index\": 1.0}}",
      "TF_CONFIG: task.index: expected an integer, got double 1.0" },
    { WORKERS2 "{\"type\": \"worker\", \"index\": 1.5}}", "expected an integer, got double 1.5" },
    { WORKERS2 "{\"type\": \"worker\", \"index\": \"1\"}}", "expected an integer, got string \"1\"" },
    { WORKERS2 "{\"type\": \"worker\", \"index\": true}}", "expected an integer, got boolean" },
    { WORKERS2 "{\"type\": \"worker\", \"index\": null}}", "expected an integer, got null" })

ERR_TEST(test_index_negative,
    { WORKERS2 "{\"type\": \"worker\", \"index\": -1}}", "TF_CONFIG: task.index: -1 is negative" },
    { WORKERS2 "{\"type\": \"evaluator\", \"index\": -2}}", "-2 is negative" })

ERR_TEST(test_index_exceeds,
    { WORKERS2 "{\"type\": \"worker\", \"index\": 2}}",
      "TF_CONFIG: task.index: The `task_id` 2 exceeds the maximum id of worker. "
      "(job 'worker' has 2 tasks)" },
    { "{\"cluster\": {\"chief\": [\"c:1\"], \"worker\": []}, "
      "\"task\": {\"type\": \"worker\", \"index\": 0}}",
      "The `task_id` 0 exceeds the maximum id of worker. (job 'worker' has 0 tasks)" },
    { WORKERS2 "{\"type\": \"worker\", \"index\": 99999999999999999999}}",
      "The `task_id` 18446744073709551615 exceeds" },
    { FULL "{\"type\": \"evaluator\", \"index\": 1}}",
      "The `task_id` 1 exceeds the maximum id of evaluator. (job 'evaluator' has 1 task)" })

ERR_TEST(test_index_too_large,
    { WORKERS2 "{\"type\": \"evaluator\", \"index\": 3000000000}}",
      "TF_CONFIG: task.index: 3000000000 is too large" })

/* ---- dr_cluster_check -------------------------------------------------- */

#define PS_JOB_MSG "TF_CONFIG: cluster has a 'ps' job, which only " \
                   "--distribution_strategy=parameter_server uses"
#define PS_NEEDS_MSG "TF_CONFIG: parameter_server needs at least one 'worker' and one 'ps' task"

static void test_check_ps_job_needs_parameter_server(void **state)
{
    (void)state;
    dr_cluster c;
    parse_ok(FULL "{\"type\": \"worker\", \"index\": 0}}", &c);
    for (int k = DR_STRATEGY_OFF; k <= DR_STRATEGY_TPU; k++)
        check_strategy(&c, (dr_strategy_kind)k,
                     k == DR_STRATEGY_PARAMETER_SERVER ? NULL : PS_JOB_MSG);
}

static void test_check_parameter_server_needs_worker_and_ps(void **state)
{
    (void)state;
    dr_cluster c;
    parse_ok("{" CLUSTER3 ", \"task\": {\"type\": \"chief\", \"index\": 0}}", &c);
    check_strategy(&c, DR_STRATEGY_PARAMETER_SERVER, PS_NEEDS_MSG);
    parse_ok("{\"cluster\": {\"chief\": [\"c:1\"], \"ps\": [\"p:1\"]}, "
             "\"task\": {\"type\": \"ps\", \"index\": 0}}", &c);
    check_strategy(&c, DR_STRATEGY_PARAMETER_SERVER, PS_NEEDS_MSG);
    parse_ok(NULL, &c);                                 /* no cluster at all */
    check_strategy(&c, DR_STRATEGY_PARAMETER_SERVER, PS_NEEDS_MSG);
    parse_ok("{\"cluster\": {\"worker\": [\"w:1\"], \"ps\": [\"p:1\"]}, "
             "\"task\": {\"type\": \"worker\", \"index\": 0}}", &c);
    check_strategy(&c, DR_STRATEGY_PARAMETER_SERVER, NULL);
}

static void test_check_other_strategies(void **state)
{
    (void)state;
    dr_cluster c;
    parse_ok("{\"cluster\": {\"chief\": [\"c:1\"], \"worker\": [\"w:1\"], \"evaluator\": "
             "[\"e:1\"]}, \"task\": {\"type\": \"evaluator\", \"index\": 0}}", &c);
    check_strategy(&c, DR_STRATEGY_MULTI_WORKER_MIRRORED, NULL);  /* the evaluator does not train */
    parse_ok("{" CLUSTER3 ", \"task\": {\"type\": \"worker\", \"index\": 1}}", &c);
    check_strategy(&c, DR_STRATEGY_MULTI_WORKER_MIRRORED, NULL);
    parse_ok("{\"cluster\": {\"worker\": [\"w:1\"], \"ps\": []}, "
             "\"task\": {\"type\": \"worker\", \"index\": 0}}", &c);
    check_strategy(&c, DR_STRATEGY_MIRRORED, NULL);       /* an empty ps job is no ps job */
    parse_ok("", &c);
    for (int k = DR_STRATEGY_OFF; k <= DR_STRATEGY_TPU; k++)
        if (k != DR_STRATEGY_PARAMETER_SERVER)
            check_strategy(&c, (dr_strategy_kind)k, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_config), cmocka_unit_test(test_chief_and_workers),
        cmocka_unit_test(test_workers_only), cmocka_unit_test(test_ps_and_evaluator),
        cmocka_unit_test(test_evaluator_exempt), cmocka_unit_test(test_address_forms),
        cmocka_unit_test(test_extra_keys_and_empty_job), cmocka_unit_test(test_max_tasks),
        cmocka_unit_test(test_large_cluster), cmocka_unit_test(test_scalar_documents),
        cmocka_unit_test(test_max_address_length), cmocka_unit_test(test_task_type_name),
        cmocka_unit_test(test_malformed_json), cmocka_unit_test(test_null_err),
        cmocka_unit_test(test_not_an_object), cmocka_unit_test(test_missing_cluster),
        cmocka_unit_test(test_missing_task), cmocka_unit_test(test_cluster_not_object),
        cmocka_unit_test(test_task_not_object), cmocka_unit_test(test_job_not_list),
        cmocka_unit_test(test_address_not_string), cmocka_unit_test(test_address_no_port),
        cmocka_unit_test(test_address_empty_host), cmocka_unit_test(test_address_bad_host),
        cmocka_unit_test(test_address_bad_port), cmocka_unit_test(test_address_nul),
        cmocka_unit_test(test_duplicate_address), cmocka_unit_test(test_disallowed_job),
        cmocka_unit_test(test_task_type_missing), cmocka_unit_test(test_task_type_not_string),
        cmocka_unit_test(test_task_type_unrecognized),
        cmocka_unit_test(test_task_type_not_in_cluster),
        cmocka_unit_test(test_two_chiefs), cmocka_unit_test(test_two_evaluators),
        cmocka_unit_test(test_index_missing), cmocka_unit_test(test_index_not_integer),
        cmocka_unit_test(test_index_negative), cmocka_unit_test(test_index_exceeds),
        cmocka_unit_test(test_index_too_large),
        cmocka_unit_test(test_check_ps_job_needs_parameter_server),
        cmocka_unit_test(test_check_parameter_server_needs_worker_and_ps),
        cmocka_unit_test(test_check_other_strategies),
    };
    return cmocka_run_group_tests_name("cluster", tests, NULL, free_kept);
}
