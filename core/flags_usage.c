/* distref core — a flag table's choices and its help (distref/flags.h). */
#include "core/flags_internal.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- choices ---------------------------------------------------------------- */

static bool same(const char *a, size_t alen, const char *b, bool fold)
{
    if (strlen(b) != alen) return false;
    for (size_t i = 0; i < alen; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (fold ? tolower(x) != tolower(y) : x != y) return false;
    }
    return true;
}

bool dr_flag_choice_ok(const dr_flag *f, const char *s)
{
    const char *p = f->choices;
    for (;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (same(p, len, s, f->fold_case)) return true;
        if (!bar) return false;
        p = bar + 1;
    }
}

/* Edit distance of a[0..n) and b, capped: enough to spot a typo. */
static size_t distance(const char *a, size_t n, const char *b)
{
    size_t m = strlen(b), row[64], prev;
    if (n >= 63 || m >= 63) return 99;
    for (size_t j = 0; j <= m; j++) row[j] = j;
    for (size_t i = 1; i <= n; i++) {
        prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t best = prev + cost, t = row[j];
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            prev = t;
            row[j] = best;
        }
    }
    return row[m];
}

int dr_flag_choice_fail(const dr_flag *f, const char *s, dr_err *err)
{
    char list[DR_FLAG_STR_MAX], near[64] = "";
    size_t len = 0, best = 3;   /* suggest within 2 edits */
    const char *p = f->choices;
    for (;;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p), d = distance(p, n, s);
        int w = snprintf(list + len, sizeof list - len, "%s%s%.*s", len ? ", " : "", n ? "" : "\"\"", (int)n, p);
        if (w > 0 && (size_t)w < sizeof list - len) len += (size_t)w;
        if (n && d < best && n < sizeof near) {
            best = d;
            snprintf(near, sizeof near, "%.*s", (int)n, p);
        }
        if (!bar) break;
        p = bar + 1;
    }
    if (near[0])
        return dr_fail(err, DR_EUSAGE, "--%s: expected one of %s; got '%s' (did you mean %s?)", f->name, list, s,
                       near);
    return dr_fail(err, DR_EUSAGE, "--%s: expected one of %s; got '%s'", f->name, list, s);
}

/* ---- help ------------------------------------------------------------------- */

/* The length of the next piece of text to place: up to and including a '|'
 * or ',' break, or up to a space. */
static size_t piece(const char *s)
{
    size_t n = 0;
    while (s[n] && s[n] != ' ' && s[n] != '\n') {
        n++;
        if (s[n - 1] == '|' || s[n - 1] == ',') break;
    }
    return n;
}

void dr_flags_wrap(FILE *out, const char *s, int first_col, int indent, int width)
{
    int col = first_col;
    bool space = false;   /* a space is owed before the next piece */
    while (*s) {
        if (*s == ' ' || *s == '\n') { space = col > indent; s++; continue; }
        size_t n = piece(s);
        if (col + (space ? 1 : 0) + (int)n > width && col > indent) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
            space = false;
        }
        if (space) { fputc(' ', out); col++; }
        while (col + (int)n > width) {   /* a word longer than a line */
            int k = width - col;
            fprintf(out, "%.*s\n%*s", k, s, indent, "");
            s += k;
            n -= (size_t)k;
            col = indent;
        }
        fprintf(out, "%.*s", (int)n, s);
        col += (int)n;
        s += n;
        space = false;
    }
    fputc('\n', out);
}

/* The current value of dest, which before parsing is the default. */
static void format_default(const dr_flag *f, char *buf, size_t n)
{
    switch (f->type) {
    case DR_FLAG_STRING:
        snprintf(buf, n, "\"%s\"", (const char *)f->dest);
        return;
    case DR_FLAG_INT:
        snprintf(buf, n, "%" PRId64, *(const int64_t *)f->dest);
        return;
    case DR_FLAG_DOUBLE:   /* NaN: no default of its own (the flag's help says whose) */
        if (isnan(*(const double *)f->dest)) snprintf(buf, n, "unset");
        else dr_flag_format_double(buf, n, *(const double *)f->dest);
        return;
    case DR_FLAG_BOOL:
        snprintf(buf, n, "%s", *(const bool *)f->dest ? "true" : "false");
        return;
    }
    snprintf(buf, n, "?");
}

#define HELP_INDENT 8

void dr_flags_usage(FILE *out, const dr_flag *flags, int nflags)
{
    static char head[2 * DR_FLAG_STR_MAX + 64];
    char def[DR_FLAG_STR_MAX + 8];
    for (int i = 0; i < nflags; i++) {
        const dr_flag *f = &flags[i];
        format_default(f, def, sizeof def);
        snprintf(head, sizeof head, "--%s=%s%s  (default: %s)", f->name,
                 f->choices && f->choices[0] == '|' ? "\"\"" : "",
                 f->choices ? f->choices : dr_flag_type_name(f->type), def);
        fputs("  ", out);
        dr_flags_wrap(out, head, 2, HELP_INDENT, DR_FLAGS_USAGE_WIDTH);
        if (f->help && f->help[0]) {
            fprintf(out, "%*s", HELP_INDENT, "");
            dr_flags_wrap(out, f->help, HELP_INDENT, HELP_INDENT, DR_FLAGS_USAGE_WIDTH);
        }
    }
}
