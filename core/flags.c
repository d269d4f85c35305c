/* distref — command-line flags: see include/distref/flags.h.
 *
 * Accepted forms, as absl accepts them: `--name=value`, `--name value`,
 * `-name=value`, `-name value`; booleans take bare `--name`, `--noname` and
 * `--name=true|false|1|0` but never consume the next argument (so a value
 * after a bare boolean is a positional argument, which is an error). `--`
 * ends the flags; anything after it is positional and therefore rejected.
 * `--help` / `-h` set *help_requested and stop parsing at once.
 */
#include "distref/flags.h"
#include "core/flags_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One argument split into its parts: "--name=value" -> name, value. */
typedef struct flag_arg {
    const char *name;       /* points into a caller buffer, dashes stripped */
    const char *value;      /* NULL when there was no '=' */
} flag_arg;

const char *dr_flag_type_name(dr_flag_type t)
{
    switch (t) {
    case DR_FLAG_STRING: return "string";
    case DR_FLAG_INT:    return "int";
    case DR_FLAG_DOUBLE: return "double";
    case DR_FLAG_BOOL:   return "bool";
    }
    return "?";
}

/* Whole numbers as integers ("64", not "6.4e+01"), others as the shortest
 * "%.*g" that reads back as the same double ("0.1", not
 * "0.10000000000000001"). */
void dr_flag_format_double(char *buf, size_t n, double v)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, n, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static dr_flag *find_flag(dr_flag *flags, int nflags, const char *name, size_t len)
{
    for (int i = 0; i < nflags; i++)
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0)
            return &flags[i];
    return NULL;
}

static bool bounded(const dr_flag *f)
{
    return f->min <= f->max;
}

/* "--num_gpus: expected an integer, got 'two'": a malformed value. */
static int fail_malformed(const dr_flag *f, const char *what, const char *got, dr_err *err)
{
    return dr_fail(err, DR_EUSAGE, "--%s: expected %s, got '%s'", f->name, what, got);
}

/* "--num_gpus: expected an integer in 0..64, got '100'" (a number: "in
 * [0, 1000000]"): a well-formed value outside the flag's range. Bounds of
 * 2^53 and beyond read as powers of two. */
static void format_bound(char *buf, size_t n, double v)
{
    if (fabs(v) >= 9007199254740992.0 && v == ldexp(1.0, ilogb(fabs(v))) * (v < 0 ? -1 : 1))
        snprintf(buf, n, "%s2^%d", v < 0 ? "-" : "", ilogb(fabs(v)));
    else
        dr_flag_format_double(buf, n, v);
}

static int fail_range(const dr_flag *f, const char *what, const char *got, dr_err *err)
{
    char lo[32], hi[32];
    format_bound(lo, sizeof lo, f->min);
    format_bound(hi, sizeof hi, f->max);
    if (f->type == DR_FLAG_INT)
        return dr_fail(err, DR_EUSAGE, "--%s: expected %s in %s..%s, got '%s'", f->name, what, lo, hi, got);
    return dr_fail(err, DR_EUSAGE, "--%s: expected %s in [%s, %s], got '%s'",
                   f->name, what, lo, hi, got);
}

static bool in_range(const dr_flag *f, double v)
{
    return !bounded(f) || (v >= f->min && v <= f->max);
}

/* An integer against the bounds, compared as integers: (double)v rounds
 * above 2^53, so 2^53 + 1 would pass a bound of 2^53 as a double. */
static bool int_in_range(const dr_flag *f, long long v)
{
    if (!bounded(f)) return true;
    long long lo = f->min <= (double)LLONG_MIN ? LLONG_MIN : (long long)ceil(f->min);
    long long hi = f->max >= (double)LLONG_MAX ? LLONG_MAX : (long long)floor(f->max);
    return v >= lo && v <= hi;
}

/* strtoll/strtod skip leading blanks and accept an empty string without
 * complaint; a value must be the number and nothing else. */
static bool starts_cleanly(const char *s)
{
    return s[0] != '\0' && !isspace((unsigned char)s[0]);
}

static int set_int(dr_flag *f, const char *s, dr_err *err)
{
    if (!starts_cleanly(s))
        return fail_malformed(f, "an integer", s, err);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0')
        return fail_malformed(f, "an integer", s, err);
    if (errno == ERANGE && !bounded(f))
        return fail_malformed(f, "a 64-bit integer", s, err);
    if (errno == ERANGE || !int_in_range(f, v))
        return fail_range(f, "an integer", s, err);
    *(int64_t *)f->dest = (int64_t)v;
    return DR_OK;
}

static int set_double(dr_flag *f, const char *s, dr_err *err)
{
    if (!starts_cleanly(s))
        return fail_malformed(f, "a finite number", s, err);
    char *end;
    double v = strtod(s, &end);
    /* Overflow gives +-HUGE_VAL (infinite, rejected here); underflow gives
     * a tiny or zero value that is still the nearest double, so ERANGE is
     * not consulted. */
    if (*end != '\0' || !isfinite(v))
        return fail_malformed(f, "a finite number", s, err);
    if (!in_range(f, v))
        return fail_range(f, "a number", s, err);
    *(double *)f->dest = v;
    return DR_OK;
}

static bool ascii_ieq(const char *a, const char *b)
{
    for (; *a != '\0' && *b != '\0'; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return false;
    return *a == *b;
}

static int set_bool(dr_flag *f, const char *s, dr_err *err)
{
    bool v;
    if (ascii_ieq(s, "true") || strcmp(s, "1") == 0)
        v = true;
    else if (ascii_ieq(s, "false") || strcmp(s, "0") == 0)
        v = false;
    else
        return dr_fail(err, DR_EUSAGE, "--%s: expected true, false, 1 or 0, got '%s'",
                       f->name, s);
    *(bool *)f->dest = v;
    return DR_OK;
}

static int set_string(dr_flag *f, const char *s, dr_err *err)
{
    size_t len = strlen(s);
    if (len >= DR_FLAG_STR_MAX)
        return dr_fail(err, DR_EUSAGE, "--%s: value is %zu characters long, at most %d allowed",
                       f->name, len, DR_FLAG_STR_MAX - 1);
    if (f->choices != NULL && !dr_flag_choice_ok(f, s))
        return dr_flag_choice_fail(f, s, err);
    memcpy(f->dest, s, len + 1);
    return DR_OK;
}

static int set_value(dr_flag *f, const char *s, dr_err *err)
{
    switch (f->type) {
    case DR_FLAG_STRING: return set_string(f, s, err);
    case DR_FLAG_INT:    return set_int(f, s, err);
    case DR_FLAG_DOUBLE: return set_double(f, s, err);
    case DR_FLAG_BOOL:   return set_bool(f, s, err);
    }
    return dr_fail(err, DR_EUSAGE, "--%s: flag table has an invalid type", f->name);
}

/* Splits "-name", "--name" or "--name=value"; false for a positional. */
static bool split_arg(const char *arg, flag_arg *out)
{
    if (arg[0] != '-' || arg[1] == '\0')
        return false;                       /* "x" and "-" are positional */
    out->name = arg + (arg[1] == '-' ? 2 : 1);
    const char *eq = strchr(out->name, '=');
    out->value = eq != NULL ? eq + 1 : NULL;
    return true;
}

static size_t name_len(const flag_arg *a)
{
    return a->value != NULL ? (size_t)(a->value - 1 - a->name) : strlen(a->name);
}

/* `--noname` for a boolean `name`, when no flag is called "noname" itself. */
static dr_flag *find_negated(dr_flag *flags, int nflags, const flag_arg *a)
{
    size_t len = name_len(a);
    if (len <= 2 || strncmp(a->name, "no", 2) != 0)
        return NULL;
    dr_flag *f = find_flag(flags, nflags, a->name + 2, len - 2);
    return f != NULL && f->type == DR_FLAG_BOOL ? f : NULL;
}

/* Parses one flag whose value may be the next argument; *consumed counts
 * the arguments used beyond the flag itself. from_file: it came from a
 * flagfile, so a later argument may set it again. */
static int parse_flag(dr_flag *flags, int nflags, const flag_arg *a, const char *next,
                      int *consumed, bool from_file, bool *file_set, dr_err *err)
{
    size_t len = name_len(a);
    dr_flag *f = find_flag(flags, nflags, a->name, len);
    dr_flag *neg = f == NULL ? find_negated(flags, nflags, a) : NULL;
    if (f == NULL && neg == NULL)
        return dr_fail(err, DR_EUSAGE, "unknown flag --%.*s; see --help", (int)len, a->name);
    dr_flag *target = f != NULL ? f : neg;
    size_t k = (size_t)(target - flags);
    if (target->seen && !file_set[k])
        return dr_fail(err, DR_EUSAGE, "--%s: given twice", target->name);
    target->seen = true;
    file_set[k] = from_file;
    if (neg != NULL) {
        if (a->value != NULL)
            return dr_fail(err, DR_EUSAGE, "--no%s: takes no value, got '%s'",
                           neg->name, a->value);
        *(bool *)neg->dest = false;
        return DR_OK;
    }
    if (a->value != NULL)
        return set_value(f, a->value, err);
    if (f->type == DR_FLAG_BOOL) {
        *(bool *)f->dest = true;
        return DR_OK;
    }
    if (next == NULL)
        return dr_fail(err, DR_EUSAGE, "--%s: missing value (expected %s)",
                       f->name, dr_flag_type_name(f->type));
    /* Like absl, the next argument is the value whatever it looks like:
     * "--num_gpus -1" must reach the range check, not look like a flag. */
    *consumed = 1;
    return set_value(f, next, err);
}

static bool is_help(const flag_arg *a)
{
    size_t len = name_len(a);
    return (len == 4 && strncmp(a->name, "help", 4) == 0) ||
           (len == 1 && a->name[0] == 'h');
}

/* A table flag called "help" or "h" would shadow the built-in one. */
static bool help_shadowed(dr_flag *flags, int nflags, const flag_arg *a)
{
    return find_flag(flags, nflags, a->name, name_len(a)) != NULL;
}

static void reset(dr_flag *flags, int nflags, bool *help_requested)
{
    for (int i = 0; i < nflags; i++)
        flags[i].seen = false;
    if (help_requested != NULL)
        *help_requested = false;
}

/* The arguments' loop; origin NULL (all from the command line) or one
 * "FILE:LINE" (or NULL) per argument; file_set: nflags flags. */
static int parse_all(dr_flag *flags, int nflags, int argc, char **argv, char *const *origin,
                     bool *file_set, bool *help_requested, dr_err *err)
{
    reset(flags, nflags, help_requested);
    for (int i = 0; i < argc; i++) {
        flag_arg a;
        if (strcmp(argv[i], "--") == 0) {
            if (i + 1 < argc)
                return dr_fail(err, DR_EUSAGE, "unexpected argument '%s'", argv[i + 1]);
            return DR_OK;
        }
        if (!split_arg(argv[i], &a))
            return dr_fail(err, DR_EUSAGE, "unexpected argument '%s'", argv[i]);
        if (is_help(&a) && !help_shadowed(flags, nflags, &a)) {
            if (a.value != NULL)
                return dr_fail(err, DR_EUSAGE, "--help: takes no value, got '%s'", a.value);
            if (help_requested != NULL)
                *help_requested = true;
            return DR_OK;
        }
        int consumed = 0;
        /* a file's line is one argument: a value never comes from the next */
        const char *next = i + 1 < argc && !(origin && (origin[i] || origin[i + 1])) ? argv[i + 1] : NULL;
        int rc = parse_flag(flags, nflags, &a, next, &consumed, origin && origin[i], file_set, err);
        if (rc != DR_OK)
            return origin && origin[i] ? dr_fail_wrap(err, "%s", origin[i]) : rc;
        i += consumed;
    }
    return DR_OK;
}

static int parse_with(dr_flag *flags, int nflags, int argc, char **argv, char *const *origin,
                      bool *help_requested, dr_err *err)
{
    bool *file_set = calloc((size_t)nflags + 1, sizeof *file_set);
    int rc;
    if (file_set == NULL)
        return dr_fail(err, DR_ENOMEM, "no memory for the flags");
    rc = parse_all(flags, nflags, argc, argv, origin, file_set, help_requested, err);
    free(file_set);
    return rc;
}

int dr_flags_parse(dr_flag *flags, int nflags, int argc, char **argv,
                   bool *help_requested, dr_err *err)
{
    return parse_with(flags, nflags, argc, argv, NULL, help_requested, err);
}

int dr_flags_parse_args(dr_flag *flags, int nflags, const dr_flag_args *a, bool *help_requested, dr_err *err)
{
    return parse_with(flags, nflags, a->argc, a->argv, a->origin, help_requested, err);
}

