/* distref conformance — the verdict book: every case the suites judge ends
 * here as one of three verdicts, and only here.
 *
 *   pass           the case ran and met its oracle
 *   fail           the case ran and did not (or could not be run)
 *   not supported  the variant refuses the cell (its supports() said
 *                  DR_EUNSUPPORTED, or the platform cannot give it): it did
 *                  not run, so it is neither a pass nor a failure
 *
 * What did not run is never counted as passed: the console says SKIP,
 * results.json "not_supported", junit.xml <skipped/>, the summary line
 * "N passed, N failed, N not supported" (report.c). tests/test_report.c
 * holds the book to that, and scripts/exact_mutants.sh's skip_as_pass
 * mutant (DR_MUTANT_SKIP_AS_PASS, conformance/seams.h: the old bug, a not-supported cell
 * recorded as a pass) must make it fail.
 */
#include "conformance/conformance.h"
#include "conformance/seams.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *verdict_word(verdict_kind k)
{
    return k == VERDICT_PASS ? "pass" : k == VERDICT_FAIL ? "fail" : "not_supported";
}

static const char *console_word(verdict_kind k)
{
    return k == VERDICT_PASS ? "PASS" : k == VERDICT_FAIL ? "FAIL" : "SKIP";
}

/* Under a planted fault (a mutant build of the engine) only the failures
 * count: which suites noticed the fault. */
static void note_fault(results *r, const char *suite, verdict_kind k)
{
    size_t have = strlen(r->fault_suites);
    if (k != VERDICT_FAIL) return;
    r->fault_failures++;
    if (strstr(r->fault_suites, suite) || have + strlen(suite) + 2 > sizeof r->fault_suites) return;
    if (have) strcat(r->fault_suites, ",");
    strcat(r->fault_suites, suite);
}

static verdict *new_verdict(results *r)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        verdict *p = realloc(r->v, cap * sizeof *p);
        if (!p) { fprintf(stderr, "conformance: out of memory\n"); exit(1); }
        r->v = p;
        r->cap = cap;
    }
    memset(&r->v[r->n], 0, sizeof r->v[0]);
    return &r->v[r->n++];
}

static void add(results *r, const char *suite, const dr_run_config *c, int replicas, verdict_kind kind,
                double seconds, const char *reason, const char *fmt, va_list ap)
{
    verdict *v;
    if (r->fault) { note_fault(r, suite, kind); return; }
    v = new_verdict(r);
    snprintf(v->suite, sizeof v->suite, "%s", suite);
    snprintf(v->variant, sizeof v->variant, "%s", c ? c->variant : "-");
    snprintf(v->strategy, sizeof v->strategy, "%s", c ? dr_strategy_kind_name(c->strategy.kind) : "-");
    snprintf(v->mode, sizeof v->mode, "%s", c ? c->numerics : "exact");
    snprintf(v->reason, sizeof v->reason, "%s", reason ? reason : "");
    v->replicas = replicas;
    v->kind = kind;
    v->seconds = seconds;
    vsnprintf(v->name, sizeof v->name, fmt, ap);
    if (kind == VERDICT_NOT_SUPPORTED)
        printf("%-6s %-20s %s: not supported (%s)\n", console_word(kind), suite, v->name, v->reason);
    else
        printf("%-6s %-20s %s\n", console_word(kind), suite, v->name);
}

void record(results *r, const char *suite, const dr_run_config *c, int replicas,
            bool pass, double seconds, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(r, suite, c, replicas, pass ? VERDICT_PASS : VERDICT_FAIL, seconds, NULL, fmt, ap);
    va_end(ap);
}

void record_not_supported(results *r, const char *suite, const dr_run_config *c, int replicas,
                          const char *reason, const char *fmt, ...)
{
    va_list ap;
    const verdict_kind kind = DR_SEAM_SKIPPED_VERDICT;
    va_start(ap, fmt);
    add(r, suite, c, replicas, kind, 0, reason, fmt, ap);
    va_end(ap);
}

bool supported(results *r, const char *suite, const dr_run_config *c, int replicas)
{
    const dr_variant *v;
    dr_run_plan plan;
    dr_err err;
    const char *strategy = dr_strategy_kind_name(c->strategy.kind);
    memset(&err, 0, sizeof err);
    if (dr_variant_lookup(c->variant, &v, &err) == DR_OK && dr_run_plan_make(c, &plan, &err) == DR_OK &&
        v->supports(&plan, &err) == DR_OK)
        return true;
    if (err.code == DR_EUNSUPPORTED)
        record_not_supported(r, suite, c, replicas, err.msg, "%s %s R=%d %s", c->variant, strategy, replicas,
                             c->numerics);
    else
        record(r, suite, c, replicas, false, 0, "%s %s R=%d %s: %s", c->variant, strategy, replicas, c->numerics,
               err.msg);
    return false;
}

tally count_verdicts(const results *r)
{
    tally t = { 0, 0, 0 };
    for (size_t i = 0; i < r->n; i++) {
        t.passed += r->v[i].kind == VERDICT_PASS;
        t.failed += r->v[i].kind == VERDICT_FAIL;
        t.not_supported += r->v[i].kind == VERDICT_NOT_SUPPORTED;
    }
    return t;
}

/* "N passed, N failed" first, as every summary line of the project
 * (scripts that read it match that prefix); then what did not run. */
void format_summary(char *buf, size_t n, const tally *t)
{
    snprintf(buf, n, "%zu passed, %zu failed, %zu not supported", t->passed, t->failed, t->not_supported);
}
