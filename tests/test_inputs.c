/* Values read from flags and the environment are bounded (issue 27 #9),
 * through bin/distref:
 *   layer_devices   --layer_devices=/gpu:999999 (its own message says
 *                   GPU:0..63) and a list longer than the model's layers
 *                   are refused, exit 2 (both were accepted)
 *   env_platform    DISTREF_OPENCL_PLATFORM is read like a flag: 0junk,
 *                   0.9, a sign, a blank or a huge value are refused naming
 *                   the variable, exit 2 (atoi took 0junk and 0.9, and
 *                   reported a huge value as -1)
 * Run from the repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "shell.h"

#include <sys/wait.h>
#include <unistd.h>

#ifndef DR_BIN
#define DR_BIN "bin/distref"   /* the Makefile passes its build's CLI (SANITIZE=1: build/san/bin/distref) */
#endif

static char g_tmp[64];
static char out[8192];

/* Runs a shell command; its output (both streams) in out; exit status. */
#define sh(...) shell_run(out, sizeof out, __VA_ARGS__)

typedef struct { const char *set, *says; int status; } case_t;

static void check(const case_t *c, size_t n, const char *fmt)
{
    for (size_t i = 0; i < n; i++) {
        int rc = sh(fmt, c[i].set, g_tmp, (int)i);
        if (rc != c[i].status || !strstr(out, c[i].says))
            fail_msg("%s: exit %d (expected %d), %.300s", c[i].set, rc, c[i].status, out);
    }
}

static void layer_devices(void **st)
{
    static const case_t c[] = {
        { "/gpu:999999", "--layer_devices: device '/gpu:999999' cannot be emulated here (CPU:0 and GPU:0..63 only)", 2 },
        { "/gpu:0,/gpu:64", "device '/gpu:64' cannot be emulated here", 2 },
        { "/gpu:0,/gpu:1,/gpu:2", "--layer_devices: 3 devices for 2 layers; give one per layer", 2 },
        { "/gpu:0,/gpu:1,/gpu:999999", "3 devices for 2 layers", 2 },
        { "/gpu:63,/gpu:1", "train: steps=1", 0 },
    };
    (void)st;
    check(c, sizeof c / sizeof c[0], DR_BIN " train --distribution_strategy=one_device --layer_devices=%s "
          "--model_dir=%s/ld%d --train_steps=1 --synthetic_examples=200");
}

static void env_platform(void **st)
{
    static const case_t c[] = {
        { "0junk", "DISTREF_OPENCL_PLATFORM=0junk: expected a platform index 0..15", 2 },
        { "0.9", "DISTREF_OPENCL_PLATFORM=0.9: expected a platform index", 2 },
        { "99999999999999999999", "DISTREF_OPENCL_PLATFORM=99999999999999999999: expected", 2 },
        { "-1", "DISTREF_OPENCL_PLATFORM=-1: expected", 2 },
        { "+0", "DISTREF_OPENCL_PLATFORM=+0: expected", 2 },
        { "' 0'", "DISTREF_OPENCL_PLATFORM= 0: expected", 2 },
        { "15", "DISTREF_OPENCL_PLATFORM=15: ", 2 },   /* well-formed, more than the platforms here */
    };
    (void)st;
    check(c, sizeof c / sizeof c[0], "DISTREF_OPENCL_PLATFORM=%s " DR_BIN " train --variant=opencl "
          "--distribution_strategy=one_device --experiment=linear_ones --model_dir=%s/pl%d --train_steps=1");
}

SHELL_GROUP_FIXTURES(g_tmp, "/tmp/distref_test_inputs.XXXXXX", DR_BIN)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layer_devices),
        cmocka_unit_test(env_platform),
    };
    return cmocka_run_group_tests_name("inputs", tests, setup, teardown);
}
