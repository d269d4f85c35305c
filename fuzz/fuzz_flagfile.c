/* distref fuzzing — absl's --flagfile (core/flags_file.c).
 *
 * Feeds: the input split at its first NUL byte into two files, a.flags and
 * b.flags, in the target's scratch directory (the current directory while
 * the input runs, so a line `--flagfile=b.flags` or `--flagfile=a.flags`
 * nests or loops; libFuzzer's own relative paths need the old one back); the
 * command line is `--flagfile=a.flags --seed=3`, expanded by
 * dr_flag_args_expand and parsed by dr_flags_parse_args against a small
 * table (a string with choices, a string, an int, a double, a bool).
 * Checks: no crash, UB, leak or hang; any error return is fine. On success
 * the last argument is the command line's `--seed=3` (origin NULL) and
 * every other one came from a file, its origin "a.flags:N" or "b.flags:N";
 * after a successful parse --seed is 3 (a later flag overrides a file's).
 */
#include "distref/flags.h"
#include "fuzz/fuzz_common.h"

typedef struct table {
    char    strategy[DR_FLAG_STR_MAX], name[DR_FLAG_STR_MAX];
    int64_t seed;
    double  rate;
    bool    shuffle;
} table;

static void check_origins(const dr_flag_args *a)
{
    if (a->argc < 1 || strcmp(a->argv[a->argc - 1], "--seed=3") != 0 || a->origin[a->argc - 1] != NULL)
        __builtin_trap();
    for (int i = 0; i + 1 < a->argc; i++)
        if (a->origin[i] == NULL || (strncmp(a->origin[i], "a.flags:", 8) != 0 &&
                                     strncmp(a->origin[i], "b.flags:", 8) != 0))
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char home[4096];
    static table t;
    const char *dir = fz_dir("flagfile");
    const uint8_t *nul = memchr(data, 0, size);
    size_t na = nul ? (size_t)(nul - data) : size;
    char arg0[] = "--flagfile=a.flags", arg1[] = "--seed=3";
    char *argv[] = { arg0, arg1 };
    dr_flag_args args;
    dr_err err = { 0, "" };
    bool help;
    int rc;
    if (dir == NULL || (!home[0] && getcwd(home, sizeof home) == NULL)) return 0;
    if (fz_write(dir, "a.flags", data, na) != 0 ||
        fz_write(dir, "b.flags", nul ? nul + 1 : data, nul ? size - na - 1 : 0) != 0 || chdir(dir) != 0)
        return 0;
    rc = dr_flag_args_expand(2, argv, &args, &err);
    if (chdir(home) != 0) __builtin_trap();
    if (rc != DR_OK) return 0;
    check_origins(&args);
    memset(&t, 0, sizeof t);
    dr_flag f[] = {
        { "distribution_strategy", DR_FLAG_STRING, t.strategy, 1, 0, NULL, false, "|off|mirrored|one_device", true },
        { "name", DR_FLAG_STRING, t.name, 1, 0, NULL, false, NULL, false },
        { "seed", DR_FLAG_INT, &t.seed, 0, 9007199254740992.0, NULL, false, NULL, false },
        { "rate", DR_FLAG_DOUBLE, &t.rate, 0, 1e6, NULL, false, NULL, false },
        { "shuffle", DR_FLAG_BOOL, &t.shuffle, 1, 0, NULL, false, NULL, false },
    };
    if (dr_flags_parse_args(f, 5, &args, &help, &err) == DR_OK && !help && t.seed != 3) __builtin_trap();
    dr_flag_args_free(&args);
    return 0;
}
