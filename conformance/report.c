/* distref conformance — results.json, junit.xml, the pass/fail matrix and
 * index.html. The plots are gnuplot's (reports/plots.gp), rendered from the
 * .dat files the suites wrote; index.html shows them next to the matrix. */
#include "conformance/conformance.h"

#include <json-c/json.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static void revision(char *buf, size_t n)
{
    FILE *p = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    buf[0] = 0;
    if (p) {
        if (fgets(buf, (int)n, p)) buf[strcspn(buf, "\n")] = 0;
        pclose(p);
    }
    if (!buf[0]) snprintf(buf, n, "unknown");
}

static int write_json(const results *r, const char *out, double seconds, const char *rev, const char *stamp)
{
    json_object *o = json_object_new_object(), *cases = json_object_new_array();
    struct utsname u;
    char path[1200], machine[400];
    const char *text;
    FILE *f;
    uname(&u);
    snprintf(machine, sizeof machine, "%s %s %s", u.nodename, u.sysname, u.machine);
    json_object_object_add(o, "revision", json_object_new_string(rev));
    json_object_object_add(o, "date", json_object_new_string(stamp));
    json_object_object_add(o, "machine", json_object_new_string(machine));
    json_object_object_add(o, "seconds", json_object_new_double(seconds));
    for (size_t i = 0; i < r->n; i++) {
        const verdict *v = &r->v[i];
        json_object *c = json_object_new_object();
        json_object_object_add(c, "suite", json_object_new_string(v->suite));
        json_object_object_add(c, "case", json_object_new_string(v->name));
        json_object_object_add(c, "variant", json_object_new_string(v->variant));
        json_object_object_add(c, "strategy", json_object_new_string(v->strategy));
        json_object_object_add(c, "replicas", json_object_new_int(v->replicas));
        json_object_object_add(c, "mode", json_object_new_string(v->mode));
        json_object_object_add(c, "verdict", json_object_new_string(v->pass ? "pass" : "fail"));
        json_object_object_add(c, "seconds", json_object_new_double(v->seconds));
        json_object_array_add(cases, c);
    }
    json_object_object_add(o, "cases", cases);
    text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    snprintf(path, sizeof path, "%s/results.json", out);
    f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
    if (strcmp(out, "reports/out") == 0) {   /* the history keeps `make conformance` runs only */
        mkdir("reports/runs", 0755);
        snprintf(path, sizeof path, "reports/runs/conformance-%s-%s.json", stamp, rev);
        if ((f = fopen(path, "w"))) { fputs(text, f); fclose(f); }
    }
    json_object_put(o);
    return 0;
}

static void xml_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

static int write_junit(const results *r, const char *out)
{
    char path[1200];
    size_t fails = 0;
    FILE *f;
    snprintf(path, sizeof path, "%s/junit.xml", out);
    if (!(f = fopen(path, "w"))) return 1;
    for (size_t i = 0; i < r->n; i++) fails += !r->v[i].pass;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"distref conformance\" "
               "tests=\"%zu\" failures=\"%zu\">\n", r->n, fails);
    for (size_t i = 0; i < r->n; i++) {
        const verdict *v = &r->v[i];
        fprintf(f, "  <testcase classname=\"conformance.%s\" name=\"", v->suite);
        xml_escape(f, v->name);
        fprintf(f, "\" time=\"%.3f\">", v->seconds);
        if (!v->pass) { fputs("<failure message=\"", f); xml_escape(f, v->name); fputs("\"/>", f); }
        fputs("</testcase>\n", f);
    }
    fputs("</testsuites>\n", f);
    fclose(f);
    return 0;
}

/* matrix.dat: one row per (variant, strategy, replicas, mode) of the loss
 * curve suite: all its cases passed (1) or not (0). */
static int write_matrix(const results *r, const char *out, FILE *html)
{
    char path[1200];
    FILE *f;
    snprintf(path, sizeof path, "%s/matrix.dat", out);
    if (!(f = fopen(path, "w"))) return 1;
    fprintf(f, "# variant strategy replicas mode pass\n");
    fputs("<table><tr><th>suite</th><th>variant</th><th>strategy</th><th>replicas</th><th>mode</th>"
          "<th>verdict</th><th>case</th></tr>\n", html);
    for (size_t i = 0; i < r->n; i++) {
        const verdict *v = &r->v[i];
        if (!strcmp(v->suite, "loss_curves"))
            fprintf(f, "%s %s %d %s %d\n", v->variant, v->strategy, v->replicas, v->mode, v->pass);
        fprintf(html, "<tr class=\"%s\"><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>",
                v->pass ? "pass" : "fail", v->suite, v->variant, v->strategy, v->replicas, v->mode,
                v->pass ? "PASS" : "FAIL");
        xml_escape(html, v->name);
        fputs("</td></tr>\n", html);
    }
    fputs("</table>\n", html);
    fclose(f);
    return 0;
}

static const char *const plots[][2] = {
    { "loss_curves.png", "Loss curves: the engine's exact run lies on the reference's (bit-identical); fast mode may drift by float32 ULPs" },
    { "fast_delta.png", "Fast mode: |loss(openmp fast) - loss(ref)| per step, log scale" },
    { "splits.png", "Per-replica batch sizes across steps for the uneven cases (TensorFlow's rule)" },
    { "regularization.png", "The L2 term in the loss against the replica count: flat, equal to one_device's" },
    { "faults.png", "Planted faults: each must be caught by the suite it targets" },
};

/* A link to the nightly benchmarks' history (make nightly writes
 * reports/bench/index.html), relative when the report is in reports/out. */
static void nightly_link(FILE *html, const char *out)
{
    char cwd[PATH_MAX], abs[PATH_MAX + 64];
    const char *href = NULL;
    if (access("reports/bench/index.html", R_OK) != 0) {
        fputs("<p>Performance history: none yet here (<code>make nightly</code> writes "
              "<code>reports/bench/index.html</code>; docs/NIGHTLY.md).</p>\n", html);
        return;
    }
    if (strcmp(out, "reports/out") == 0 || strcmp(out, "reports/out/") == 0) href = "../bench/index.html";
    else if (getcwd(cwd, sizeof cwd)) {
        snprintf(abs, sizeof abs, "%s/reports/bench/index.html", cwd);
        href = abs;
    }
    if (href)
        fprintf(html, "<p>Performance history: <a href=\"%s\">the nightly benchmarks</a> (make nightly; "
                      "docs/NIGHTLY.md).</p>\n", href);
}

int write_report(const results *r, const char *out, double seconds)
{
    char rev[64], stamp[32], path[1200];
    time_t t = time(NULL);
    size_t pass = 0;
    FILE *html;
    int rc;
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", gmtime(&t));
    revision(rev, sizeof rev);
    for (size_t i = 0; i < r->n; i++) pass += r->v[i].pass;
    rc = write_json(r, out, seconds, rev, stamp) | write_junit(r, out);
    snprintf(path, sizeof path, "gnuplot -e \"outdir='%s'\" reports/plots.gp 2>&1", out);
    if (system(path) != 0) fprintf(stderr, "conformance: gnuplot failed; the report has no plots\n");
    snprintf(path, sizeof path, "%s/index.html", out);
    if (!(html = fopen(path, "w"))) return 1;
    fprintf(html, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>distref conformance</title>\n"
                  "<style>body{font-family:sans-serif;margin:2em;max-width:1100px} table{border-collapse:collapse;"
                  "font-size:13px} td,th{border:1px solid #ccc;padding:2px 6px} tr.pass td:nth-child(6){color:#070}"
                  " tr.fail td{background:#fdd} img{max-width:100%%;border:1px solid #eee;margin:6px 0}</style>"
                  "</head><body>\n<h1>distref conformance</h1>\n<p>Revision %s, %s, %.0f s: <b>%zu passed, %zu failed</b>."
                  " Exact mode demands bit identity with the reference's one_device run at the same global batch;"
                  " fast mode is held to the bounds of docs/CONFORMANCE.md.</p>\n", rev, stamp, seconds, pass, r->n - pass);
    nightly_link(html, out);
    for (size_t i = 0; i < sizeof plots / sizeof plots[0]; i++)
        fprintf(html, "<h2>%s</h2><img src=\"%s\" alt=\"%s\">\n", plots[i][1], plots[i][0], plots[i][1]);
    fputs("<h2>Every case</h2>\n", html);
    rc |= write_matrix(r, out, html);
    fputs("</body></html>\n", html);
    fclose(html);
    return rc;
}
