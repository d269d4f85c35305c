/* distref conformance — results.json, junit.xml and index.html, every one
 * with three verdicts: pass, fail, not supported (conformance/verdict.c).
 * index.html opens with the matrix as a picture (conformance/report_matrix.c)
 * and the fault matrix of the last mutant run; the plots are gnuplot's
 * (reports/plots.gp), rendered from the .dat files the suites wrote. Every
 * file is written atomically (conformance/outfile.c). */
#include "conformance/conformance.h"
#include "distref/fileio.h"

#include <ctype.h>
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

/* The last mutant run's fault matrix. scripts/run_conformance_mutants.sh
 * (make conformance-mutants) writes it into a folder that make conformance
 * does not wipe; the report shows it with the run's revision and date:
 *   # revision <git revision> date <UTC date> suites <expected|all>   first line (else: the file's time)
 *   <fault> <expected_suite> <caught 0|1> <suites_that_failed,...>   one line per fault
 * One path, here; a build may name another with -DDR_FAULT_MATRIX_FILE='"..."'. */
#ifndef DR_FAULT_MATRIX_FILE
#define DR_FAULT_MATRIX_FILE "reports/mutants/faults.dat"
#endif

/* suites: "expected" when each mutant ran only the suite it targets (make
 * test), "all" when it ran every quick suite (MUTANT_MATRIX=full); empty
 * when the file does not say. */
typedef struct mutant_run { bool found; char rev[64], date[64], suites[16]; } mutant_run;

/* Anything but letters, digits, spaces and . , : - _ ( ) becomes '?'. */
static void plain(char *s)
{
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr(" .,:-_()", *s)) *s = '?';
}

static mutant_run last_mutant_run(void)
{
    mutant_run m = { false, "an unknown revision", "", "" };
    char line[256], rev[64], date[64], suites[16];
    struct stat st;
    FILE *f = fopen(DR_FAULT_MATRIX_FILE, "r");
    if (!f) return m;
    m.found = true;
    if (fstat(fileno(f), &st) == 0)
        strftime(m.date, sizeof m.date, "%Y%m%dT%H%M%SZ (file time)", gmtime(&st.st_mtime));
    if (fgets(line, sizeof line, f)) {
        int n = sscanf(line, "# revision %63s date %63s suites %15s", rev, date, suites);
        if (n >= 2) {
            snprintf(m.rev, sizeof m.rev, "%s", rev);
            snprintf(m.date, sizeof m.date, "%s", date);
        }
        if (n == 3 && (strcmp(suites, "expected") == 0 || strcmp(suites, "all") == 0))
            snprintf(m.suites, sizeof m.suites, "%s", suites);
    }
    fclose(f);
    plain(m.rev);   /* they travel through a shell command and HTML */
    plain(m.date);
    return m;
}

static json_object *case_json(const verdict *v)
{
    json_object *c = json_object_new_object();
    json_object_object_add(c, "suite", json_object_new_string(v->suite));
    json_object_object_add(c, "case", json_object_new_string(v->name));
    json_object_object_add(c, "variant", json_object_new_string(v->variant));
    json_object_object_add(c, "strategy", json_object_new_string(v->strategy));
    json_object_object_add(c, "replicas", json_object_new_int(v->replicas));
    json_object_object_add(c, "mode", json_object_new_string(v->mode));
    json_object_object_add(c, "verdict", json_object_new_string(verdict_word(v->kind)));
    if (v->kind == VERDICT_NOT_SUPPORTED) json_object_object_add(c, "reason", json_object_new_string(v->reason));
    json_object_object_add(c, "seconds", json_object_new_double(v->seconds));
    return c;
}

static int write_json(const results *r, const char *out, double seconds, const char *rev, const char *stamp)
{
    json_object *o = json_object_new_object(), *cases = json_object_new_array(), *sum = json_object_new_object();
    tally t = count_verdicts(r);
    struct utsname u;
    char path[1200], machine[400];
    const char *text;
    dr_err err;
    int rc = 0;
    uname(&u);
    snprintf(machine, sizeof machine, "%s %s %s", u.nodename, u.sysname, u.machine);
    json_object_object_add(o, "revision", json_object_new_string(rev));
    json_object_object_add(o, "date", json_object_new_string(stamp));
    json_object_object_add(o, "machine", json_object_new_string(machine));
    json_object_object_add(o, "seconds", json_object_new_double(seconds));
    json_object_object_add(sum, "passed", json_object_new_int64((int64_t)t.passed));
    json_object_object_add(sum, "failed", json_object_new_int64((int64_t)t.failed));
    json_object_object_add(sum, "not_supported", json_object_new_int64((int64_t)t.not_supported));
    json_object_object_add(o, "summary", sum);
    for (size_t i = 0; i < r->n; i++) json_object_array_add(cases, case_json(&r->v[i]));
    json_object_object_add(o, "cases", cases);
    text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    snprintf(path, sizeof path, "%s/results.json", out);
    if (dr_write_atomic(path, text, strlen(text), &err) != DR_OK) { fprintf(stderr, "conformance: %s\n", err.msg); rc = 1; }
    if (strcmp(out, "reports/out") == 0) {   /* the history keeps `make conformance` runs only */
        mkdir("reports/runs", 0755);
        snprintf(path, sizeof path, "reports/runs/conformance-%s-%s.json", stamp, rev);
        if (dr_write_atomic(path, text, strlen(text), &err) != DR_OK) { fprintf(stderr, "conformance: %s\n", err.msg); rc = 1; }
    }
    json_object_put(o);
    return rc;
}

void xml_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* One <testsuite>; a failure is <failure/>, a case that did not run <skipped/> with its reason. */
static int write_junit(const results *r, const char *out)
{
    tally t = count_verdicts(r);
    char path[1200];
    outfile o;
    FILE *f = outfile_open(&o);
    if (!f) return 1;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"distref conformance\" tests=\"%zu\" "
               "failures=\"%zu\" skipped=\"%zu\">\n<testsuite name=\"conformance\" tests=\"%zu\" failures=\"%zu\" "
               "skipped=\"%zu\">\n", r->n, t.failed, t.not_supported, r->n, t.failed, t.not_supported);
    for (size_t i = 0; i < r->n; i++) {
        const verdict *v = &r->v[i];
        fprintf(f, "  <testcase classname=\"conformance.%s\" name=\"", v->suite);
        xml_escape(f, v->name);
        fprintf(f, "\" time=\"%.3f\">", v->seconds);
        if (v->kind == VERDICT_FAIL) { fputs("<failure message=\"", f); xml_escape(f, v->name); fputs("\"/>", f); }
        if (v->kind == VERDICT_NOT_SUPPORTED) {
            fputs("<skipped message=\"not supported: ", f);
            xml_escape(f, v->reason);
            fputs("\"/>", f);
        }
        fputs("</testcase>\n", f);
    }
    fputs("</testsuite>\n</testsuites>\n", f);
    snprintf(path, sizeof path, "%s/junit.xml", out);
    return outfile_commit(&o, path);
}

/* Every case, one table row: what ran, its verdict, and why a cell did not run. */
static void write_cases(const results *r, FILE *html)
{
    static const char *const word[3] = { "PASS", "FAIL", "SKIP" };
    fputs("<table><tr><th>suite</th><th>variant</th><th>strategy</th><th>replicas</th><th>mode</th>"
          "<th>verdict</th><th>case</th></tr>\n", html);
    for (size_t i = 0; i < r->n; i++) {
        const verdict *v = &r->v[i];
        fprintf(html, "<tr class=\"%s\"><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>",
                verdict_word(v->kind), v->suite, v->variant, v->strategy, v->replicas, v->mode, word[v->kind]);
        xml_escape(html, v->name);
        if (v->kind == VERDICT_NOT_SUPPORTED) { fputs(": not supported (", html); xml_escape(html, v->reason); fputs(")", html); }
        fputs("</td></tr>\n", html);
    }
    fputs("</table>\n", html);
}

static const char *const plots[][2] = {
    { "loss_curves.png", "Loss curves: the engine's exact run lies on the reference's (bit-identical); fast mode may drift by float32 ULPs" },
    { "fast_delta.png", "Fast mode: |loss(openmp fast) - loss(ref)| per step, log scale" },
    { "splits.png", "Per-replica batch sizes across steps for the uneven cases, under each auto-shard policy (TensorFlow's rules)" },
    { "regularization.png", "The L2 term in the loss against the replica count: flat, equal to one_device's" },
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

static void run_gnuplot(const char *out, const mutant_run *m)
{
    char cmd[1600], faults[300] = "";
    if (m->found)
        snprintf(faults, sizeof faults, "; faults='%s'; faultsrun='%s, %s'", DR_FAULT_MATRIX_FILE, m->rev, m->date);
    snprintf(cmd, sizeof cmd, "gnuplot -e \"outdir='%s'%s\" reports/plots.gp 2>&1", out, faults);
    if (system(cmd) != 0) fprintf(stderr, "conformance: gnuplot failed; the report has no plots\n");
}

static void html_head(FILE *html, const char *rev, const char *stamp, double seconds, const tally *t)
{
    char sum[128];
    format_summary(sum, sizeof sum, t);
    fprintf(html, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>distref conformance</title>\n"
                  "<style>body{font-family:sans-serif;margin:2em;max-width:1400px} table{border-collapse:collapse;"
                  "font-size:13px} td,th{border:1px solid #ccc;padding:2px 6px} tr.pass td:nth-child(6){color:#070}"
                  " tr.fail td{background:#fdd} tr.not_supported td{color:#666;background:#f3f3f3}"
                  " img{max-width:100%%;border:1px solid #eee;margin:6px 0} svg.matrix .cell:hover rect{stroke:#000;"
                  "stroke-width:2}</style></head><body>\n<h1>distref conformance</h1>\n"
                  "<p>Revision %s, %s, %.0f s: <b>%s</b>. Exact mode demands bit identity with the reference's "
                  "one_device run at the same global batch; fast mode is held to the bounds of docs/CONFORMANCE.md."
                  " A case a variant does not support did not run: it is neither passed nor failed.</p>\n",
            rev, stamp, seconds, sum);
}

/* The planted faults: the last mutant run's matrix, or where to get one. */
static void html_faults(FILE *html, const mutant_run *m)
{
    fputs("<h2 id=\"faults\">Planted faults: each must be caught by the suite it targets</h2>\n", html);
    if (!m->found) {
        fputs("<p>No mutant run recorded: run <code>make conformance-mutants</code> (it writes <code>"
              DR_FAULT_MATRIX_FILE "</code>).</p>\n", html);
        return;
    }
    fprintf(html, "<p>Fault matrix from the mutant run of %s, %s (<code>" DR_FAULT_MATRIX_FILE "</code>)%s.</p>\n"
                  "<img src=\"faults.png\" alt=\"fault matrix from the mutant run of %s, %s\">\n",
            m->rev, m->date,
            strcmp(m->suites, "expected") == 0
                ? ": each mutant ran only the suite it targets (<code>make conformance-mutants"
                  " MUTANT_MATRIX=full</code> runs every quick suite against each)"
                : strcmp(m->suites, "all") == 0 ? ": each mutant ran every quick suite" : "",
            m->rev, m->date);
}

int write_report(const results *r, const char *out, double seconds)
{
    char rev[64], stamp[32], path[1200];
    time_t t = time(NULL);
    tally n = count_verdicts(r);
    mutant_run m = last_mutant_run();
    outfile page;
    FILE *html;
    int rc;
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", gmtime(&t));
    revision(rev, sizeof rev);
    rc = write_json(r, out, seconds, rev, stamp) | write_junit(r, out);
    run_gnuplot(out, &m);
    if (!(html = outfile_open(&page))) return 1;
    html_head(html, rev, stamp, seconds, &n);
    fputs("<h2 id=\"matrix\">The matrix: strategy and replicas x variant and numerics</h2>\n<p>Each cell holds every case "
          "recorded under it, from every suite; hover over a cell for its counts, a failing case and the reason a "
          "variant does not support it.</p>\n", html);
    rc |= write_matrix(r, out, html);
    html_faults(html, &m);
    nightly_link(html, out);
    for (size_t i = 0; i < sizeof plots / sizeof plots[0]; i++)
        fprintf(html, "<h2 id=\"%.*s\">%s</h2><img src=\"%s\" alt=\"%s\">\n", (int)strcspn(plots[i][0], "."),
                plots[i][0], plots[i][1], plots[i][0], plots[i][1]);
    fputs("<h2 id=\"cases\">Every case</h2>\n", html);
    write_cases(r, html);
    fputs("</body></html>\n", html);
    snprintf(path, sizeof path, "%s/index.html", out);
    return rc | outfile_commit(&page, path);
}
