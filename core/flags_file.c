/* distref core — absl's --flagfile (distref/flags.h, dr_flag_args_expand).
 *
 * As absl (absl-py flags, read_flags_from_files and _get_flag_file_lines):
 * `--flagfile=FILE`, `-flagfile=FILE`, `--flagfile FILE` on the command
 * line are replaced in place by FILE's flags, so a flag after the
 * directive overrides one from the file; in FILE a line of whitespace only
 * is skipped, as is one that starts with `#` or `//` (in its first column),
 * `--flagfile=OTHER` is followed (relative paths from the current
 * directory, `~/` from $HOME), and every other line, stripped of the
 * whitespace around it, is one argument (so `--name=value with spaces` is
 * one flag). Where absl warns and skips (a file that includes itself, at
 * any depth), distref refuses, naming the file and line; nesting deeper
 * than DR_FLAGFILE_MAX_DEPTH, a file over 1 MiB, a NUL byte and `--flagfile`
 * without a file are refused the same way. Argument expansion stops at `--`.
 */
#include "distref/flags.h"
#include "distref/fileio.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FILE_MAX ((size_t)1 << 20)

static int add(dr_flag_args *a, const char *arg, size_t len, const char *origin, dr_err *err)
{
    char *copy, *org = NULL;
    if (a->argc == a->cap) {
        int cap = a->cap ? 2 * a->cap : 16;
        char **v = realloc(a->argv, (size_t)cap * sizeof *v), **o;
        if (!v) return dr_fail(err, DR_ENOMEM, "no memory for the flags");
        a->argv = v;
        o = realloc(a->origin, (size_t)cap * sizeof *o);
        if (!o) return dr_fail(err, DR_ENOMEM, "no memory for the flags");
        a->origin = o;
        a->cap = cap;
    }
    copy = malloc(len + 1);
    if (copy && origin) org = strdup(origin);
    if (!copy || (origin && !org)) {
        free(copy);
        return dr_fail(err, DR_ENOMEM, "no memory for the flags");
    }
    memcpy(copy, arg, len);
    copy[len] = 0;
    a->argv[a->argc] = copy;
    a->origin[a->argc++] = org;
    return DR_OK;
}

/* "--flagfile=X" / "-flagfile=X": X; "--flagfile" / "-flagfile": "" (the
 * file is the next argument); NULL for anything else. */
static const char *directive(const char *arg)
{
    const char *p = arg[0] == '-' ? arg + 1 + (arg[1] == '-') : NULL;
    if (!p || strncmp(p, "flagfile", 8) != 0) return NULL;
    if (p[8] == '=') return p + 9;
    return p[8] == '\0' ? "" : NULL;
}

static void home_path(const char *name, char *buf, size_t n)
{
    const char *home = getenv("HOME");
    if (strncmp(name, "~/", 2) == 0 && home && *home) snprintf(buf, n, "%s/%s", home, name + 2);
    else snprintf(buf, n, "%s", name);
}

typedef struct stack { const char *names[DR_FLAGFILE_MAX_DEPTH + 1]; int depth; } stack;

static int read_file(dr_flag_args *a, const char *name, const char *from, stack *st, dr_err *err);

/* One line of a file: [p, p + n), its origin "FILE:LINE". */
static int one_line(dr_flag_args *a, const char *p, size_t n, const char *origin, stack *st, dr_err *err)
{
    const char *sub;
    while (n && isspace((unsigned char)*p)) p++, n--;
    while (n && isspace((unsigned char)p[n - 1])) n--;
    if (n == 0) return DR_OK;
    if (p[0] == '#' || (n >= 2 && p[0] == '/' && p[1] == '/')) return DR_OK;   /* absl: first column only */
    {
        char line[DR_FLAG_STR_MAX + 32];
        if (n >= sizeof line)   /* longer than any flag takes: say where */
            return dr_fail(err, DR_EUSAGE, "%s: a line of %zu characters; a flag takes at most %d", origin, n,
                           DR_FLAG_STR_MAX - 1);
        memcpy(line, p, n);
        line[n] = 0;
        if ((sub = directive(line)) != NULL) {
            if (!sub[0]) return dr_fail(err, DR_EUSAGE, "%s: --flagfile without a file (in a flagfile: --flagfile=FILE)",
                                        origin);
            return read_file(a, sub, origin, st, err);
        }
    }
    return add(a, p, n, origin, err);
}

static int read_file(dr_flag_args *a, const char *name, const char *from, stack *st, dr_err *err)
{
    char path[DR_FLAG_STR_MAX + 64], origin[DR_FLAG_STR_MAX + 96];
    uint8_t *buf = NULL;
    size_t n = 0, at = 0, line = 1;
    struct stat sb;
    int rc = DR_OK;
    home_path(name, path, sizeof path);
    for (int i = 0; i < st->depth; i++)
        if (strcmp(st->names[i], path) == 0)
            return dr_fail(err, DR_EUSAGE, "%s: --flagfile=%s includes itself (through %s)", from, name,
                           st->names[st->depth - 1]);
    if (st->depth == DR_FLAGFILE_MAX_DEPTH)
        return dr_fail(err, DR_EUSAGE, "%s: --flagfile=%s: flagfiles nested more than %d deep", from, name,
                       DR_FLAGFILE_MAX_DEPTH);
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))   /* no FIFO or device: it could block or never end */
        return dr_fail(err, DR_EUSAGE, "%s: --flagfile=%s: %s", from, name,
                       stat(path, &sb) != 0 ? "cannot open: no such file" : "not a regular file");
    if ((rc = dr_read_file(path, FILE_MAX, &buf, &n, err))) {
        dr_fail_wrap(err, "%s: --flagfile=%s", from, name);
        err->code = rc = DR_EUSAGE;
        return rc;
    }
    st->names[st->depth++] = path;
    while (rc == DR_OK && at < n) {
        const uint8_t *nl = memchr(buf + at, '\n', n - at);
        size_t len = nl ? (size_t)(nl - (buf + at)) : n - at;
        snprintf(origin, sizeof origin, "%s:%zu", path, line);
        if (memchr(buf + at, 0, len)) rc = dr_fail(err, DR_EUSAGE, "%s: a NUL byte; expected text", origin);
        else rc = one_line(a, (const char *)buf + at, len, origin, st, err);
        at += len + 1;
        line++;
    }
    st->depth--;
    free(buf);
    return rc;
}

int dr_flag_args_expand(int argc, char **argv, dr_flag_args *a, dr_err *err)
{
    stack st;
    int rc = DR_OK;
    memset(a, 0, sizeof *a);
    memset(&st, 0, sizeof st);
    for (int i = 0; rc == DR_OK && i < argc; i++) {
        const char *file = directive(argv[i]);
        if (strcmp(argv[i], "--") == 0) {   /* the rest as given */
            for (; rc == DR_OK && i < argc; i++) rc = add(a, argv[i], strlen(argv[i]), NULL, err);
            break;
        }
        if (!file) { rc = add(a, argv[i], strlen(argv[i]), NULL, err); continue; }
        if (!file[0]) {
            if (i + 1 == argc) { rc = dr_fail(err, DR_EUSAGE, "--flagfile: missing value (expected a file)"); break; }
            file = argv[++i];
        }
        rc = read_file(a, file, "command line", &st, err);
    }
    if (rc) dr_flag_args_free(a);
    return rc;
}

void dr_flag_args_free(dr_flag_args *a)
{
    for (int i = 0; i < a->argc; i++) {
        free(a->argv[i]);
        free(a->origin[i]);
    }
    free(a->argv);
    free(a->origin);
    memset(a, 0, sizeof *a);
}
