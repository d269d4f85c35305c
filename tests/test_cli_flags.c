/* bin/distref's flag table (core/cli_flags.c), as the fuzzer sees it:
 *   seeds_give_every_flag  every flag of the table is an argument of some
 *                          seed of fuzz/corpus/flags/ (--name, --name=...,
 *                          or --noname for a bool), so fuzz_flags starts
 *                          from every flag the CLI has
 *   dict_names_every_flag  fuzz/flags.dict has "--name" for every flag
 *   variant_names          DR_CLI_VARIANT_NAMES, the --variant values the
 *                          fuzzer's table lists, are the registry's names
 *   table_fits             the table fits DR_CLI_MAX_FLAGS, names are unique
 * Run from the repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dirent.h>

#include "distref/cli_flags.h"
#include "distref/harness.h"

#define SEEDS "fuzz/corpus/flags"

static dr_cli_flags c;   /* 30 KB: off the stack */

/* Whether one argument of seed text s[0..n) (split on NUL and newline, as
 * fuzz/fuzz_flags.c splits its input) gives flag f. */
static bool gives(const char *s, size_t n, const dr_flag *f)
{
    size_t len = strlen(f->name);
    for (size_t i = 0; i < n;) {
        size_t end = i;
        while (end < n && s[end] != '\0' && s[end] != '\n') end++;
        const char *a = s + i;
        size_t alen = end - i;
        if (alen >= 2 + len && memcmp(a, "--", 2) == 0 && memcmp(a + 2, f->name, len) == 0 &&
            (alen == 2 + len || a[2 + len] == '='))
            return true;
        if (f->type == DR_FLAG_BOOL && alen == 4 + len && memcmp(a, "--no", 4) == 0 && memcmp(a + 4, f->name, len) == 0)
            return true;
        i = end + 1;
    }
    return false;
}

static void seeds_give_every_flag(void **st)
{
    static char buf[1 << 16];
    dr_flag f[DR_CLI_MAX_FLAGS];
    bool seen[DR_CLI_MAX_FLAGS] = { false };
    int n = dr_cli_flag_table(&c, f, NULL), missing = 0, seeds = 0;
    DIR *d = opendir(SEEDS);
    struct dirent *e;
    (void)st;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        char path[512];
        FILE *fp;
        size_t len;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", SEEDS, e->d_name);
        assert_non_null(fp = fopen(path, "rb"));
        len = fread(buf, 1, sizeof buf, fp);
        fclose(fp);
        seeds++;
        for (int i = 0; i < n; i++) seen[i] = seen[i] || gives(buf, len, &f[i]);
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        if (!seen[i]) {
            fprintf(stderr, "--%s: in bin/distref's table (core/cli_flags.c), in no seed of " SEEDS "/\n", f[i].name);
            missing++;
        }
    printf("cli flags: %d in the table, %d given by the %d seeds of " SEEDS "/\n", n, n - missing, seeds);
    assert_int_equal(missing, 0);
}

static void dict_names_every_flag(void **st)
{
    static char dict[1 << 16];
    dr_flag f[DR_CLI_MAX_FLAGS];
    int n = dr_cli_flag_table(&c, f, NULL), missing = 0;
    FILE *fp = fopen("fuzz/flags.dict", "r");
    size_t len;
    (void)st;
    assert_non_null(fp);
    len = fread(dict, 1, sizeof dict - 1, fp);
    fclose(fp);
    dict[len] = 0;
    for (int i = 0; i < n; i++) {
        char want[80];
        snprintf(want, sizeof want, "\"--%s%s", f[i].name, f[i].type == DR_FLAG_BOOL ? "" : "=");
        if (!strstr(dict, want)) {
            fprintf(stderr, "--%s: in bin/distref's table, not in fuzz/flags.dict\n", f[i].name);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

static void variant_names(void **st)
{
    char names[256] = "";
    size_t nv, len;
    const dr_variant *const *v = dr_variants(&nv);
    (void)st;
    for (size_t i = 0; i < nv; i++) {
        len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", len ? "|" : "", v[i]->name);
    }
    assert_string_equal(names, DR_CLI_VARIANT_NAMES);
}

static void table_fits(void **st)
{
    dr_flag f[DR_CLI_MAX_FLAGS];
    int n = dr_cli_flag_table(&c, NULL, NULL);
    (void)st;
    assert_true(n >= 50 && n <= DR_CLI_MAX_FLAGS);
    assert_int_equal(dr_cli_flag_table(&c, f, NULL), n);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(f[i].name, f[j].name) == 0) fail_msg("--%s twice in the table", f[i].name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seeds_give_every_flag),
        cmocka_unit_test(dict_names_every_flag),
        cmocka_unit_test(variant_names),
        cmocka_unit_test(table_fits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
