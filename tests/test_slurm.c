/* Unit tests for core/slurm.c: Slurm's compressed host lists and tasks per
 * node, and the TF_CONFIG derived from them as TensorFlow's
 * SlurmClusterResolver does; every bad input names its variable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "distref/slurm.h"

static char g_hosts[DR_SLURM_MAX_HOSTS][DR_SLURM_HOST_MAX];

/* list expands to the space-separated want */
static void expands(const char *list, const char *want)
{
    char got[4096] = "";
    uint32_t n = 0;
    dr_err err = { 0, "" };
    if (dr_slurm_nodelist("SLURM_STEP_NODELIST", list, g_hosts, DR_SLURM_MAX_HOSTS, &n, &err) != DR_OK)
        fail_msg("%s rejected: %s", list, err.msg);
    for (uint32_t i = 0; i < n; i++) {
        if (i) strcat(got, " ");
        strcat(got, g_hosts[i]);
    }
    if (strcmp(got, want) != 0) fail_msg("%s: got '%s', want '%s'", list, got, want);
}

static void rejects(const char *list, const char *want)
{
    uint32_t n = 77;
    dr_err err = { 0, "" };
    assert_int_equal(dr_slurm_nodelist("SLURM_STEP_NODELIST", list, g_hosts, 8, &n, &err), DR_EUSAGE);
    if (!strstr(err.msg, "SLURM_STEP_NODELIST") || !strstr(err.msg, want))
        fail_msg("%s: message '%s' lacks SLURM_STEP_NODELIST or '%s'", list ? list : "NULL", err.msg, want);
    assert_int_equal(n, 77);
}

static void nodelists(void **st)
{
    (void)st;
    expands("node[01-04,07]", "node01 node02 node03 node04 node07");
    expands("gpu7", "gpu7");
    expands("a,b[1-2],c", "a b1 b2 c");
    expands("n[8-11]", "n8 n9 n10 n11");
    expands("n[008-010]x", "n008x n009x n010x");
    expands("rack[1-2]-node[1-2]", "rack1-node1 rack1-node2 rack2-node1 rack2-node2");
    expands("host.example.org,h_2", "host.example.org h_2");
    expands("dr-h[0-2]", "dr-h0 dr-h1 dr-h2");
}

static void bad_nodelists(void **st)
{
    (void)st;
    rejects(NULL, "not set or empty");
    rejects("", "not set or empty");
    rejects("node[01-04", "without its ']'");
    rejects("node01]", "without its '['");
    rejects("node[4-1]", "runs backwards");
    rejects("node[a-b]", "not a number");
    rejects("node[1--2]", "not a number");
    rejects("node[]", "not a number");
    rejects("node[1-20]", "more than 8 hosts");
    rejects("a,,b", "empty host name");
    rejects("a,", "ends with a ','");
    rejects("no de", "cannot be in a host name");
    rejects("n[[1]]", "without its ']'");
    rejects("n[1-9999999999]", "not a number");
    rejects("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "over 63 characters");
}

static void tasks_per_node(void **st)
{
    uint32_t c[6];
    dr_err err = { 0, "" };
    (void)st;
    assert_int_equal(dr_slurm_tasks_per_node("V", "2(x3),1", c, 4, &err), DR_OK);
    assert_true(c[0] == 2 && c[1] == 2 && c[2] == 2 && c[3] == 1);
    assert_int_equal(dr_slurm_tasks_per_node("V", "4", c, 1, &err), DR_OK);
    assert_int_equal(c[0], 4);
    assert_int_equal(dr_slurm_tasks_per_node("V", "2(x3)", c, 4, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "V='2(x3)' gives 3 nodes, the node list 4"));
    assert_int_equal(dr_slurm_tasks_per_node("V", "2(x5)", c, 4, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "more nodes than the node list's 4"));
    const char *bad[] = { "", "0", "2(3)", "2(x0)", "2(x3", "2,", "x", "2(x3)1", "-1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dr_slurm_tasks_per_node("SLURM_STEP_TASKS_PER_NODE", bad[i], c, 4, &err), DR_EUSAGE);
        assert_non_null(strstr(err.msg, "SLURM_STEP_TASKS_PER_NODE"));
    }
}

static dr_slurm_env env_of(const char *procid, const char *ntasks, const char *list, const char *tpn)
{
    dr_slurm_env e = { procid, ntasks, list, tpn, NULL, "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE" };
    return e;
}

static void derive(void **st)
{
    dr_slurm_env e = env_of("4", "7", "node[01-03],gpu7", "2(x3),1");
    char *tf = NULL;
    uint32_t id, n, g;
    dr_err err = { 0, "" };
    (void)st;
    assert_int_equal(dr_slurm_tf_config(&e, &tf, &id, &n, &g, &err), DR_OK);
    assert_string_equal(tf, "{\"cluster\": {\"worker\": [\"node01:8888\", \"node01:8889\", \"node02:8888\", "
                        "\"node02:8889\", \"node03:8888\", \"node03:8889\", \"gpu7:8888\"]}, \"task\": {\"type\": "
                        "\"worker\", \"index\": 4}}");
    assert_true(id == 4 && n == 7 && g == 0);
    free(tf);
    e.gpus_per_task = "2";
    assert_int_equal(dr_slurm_tf_config(&e, &tf, &id, &n, &g, &err), DR_OK);
    assert_int_equal(g, 2);
    free(tf);
}

static void bad_env(void **st)
{
    static const struct { const char *procid, *ntasks, *list, *tpn, *gpus, *want; } k[] = {
        { NULL, "2", "a,b", "1(x2)", NULL, "SLURM_PROCID=(unset)" },
        { "x", "2", "a,b", "1(x2)", NULL, "SLURM_PROCID='x': expected a non-negative integer" },
        { "0", "0", "a,b", "1(x2)", NULL, "SLURM_NTASKS='0': expected a positive integer" },
        { "2", "2", "a,b", "1(x2)", NULL, "SLURM_PROCID=2 but SLURM_NTASKS=2" },
        { "0", "3", "a,b", "1(x2)", NULL, "SLURM_NTASKS=3 but SLURM_STEP_TASKS_PER_NODE='1(x2)' places 2 tasks" },
        { "0", "2", "a,b[", "1(x2)", NULL, "SLURM_STEP_NODELIST='a,b['" },
        { "0", "2", "a,b", "1", NULL, "SLURM_STEP_TASKS_PER_NODE='1' gives 1 nodes" },
        { "0", "2", "a,b", "1(x2)", "0", "SLURM_GPUS_PER_TASK='0'" },
    };
    (void)st;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        dr_slurm_env e = env_of(k[i].procid, k[i].ntasks, k[i].list, k[i].tpn);
        char *tf = NULL;
        uint32_t id, n, g;
        dr_err err = { 0, "" };
        e.gpus_per_task = k[i].gpus;
        assert_int_equal(dr_slurm_tf_config(&e, &tf, &id, &n, &g, &err), DR_EUSAGE);
        if (!strstr(err.msg, k[i].want)) fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, k[i].want);
        assert_null(tf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nodelists), cmocka_unit_test(bad_nodelists), cmocka_unit_test(tasks_per_node),
        cmocka_unit_test(derive), cmocka_unit_test(bad_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
