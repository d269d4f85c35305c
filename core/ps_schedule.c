/* distref core — the seeded asynchronous schedule of parameter_server
 * training (the rule is in include/distref/ps.h, the reasoning in
 * docs/PARAMETER_SERVER.md).
 *
 * The schedule is a pure function of its options and of the pushes: no
 * clock, no threads, one Philox draw per choice. That is what makes an
 * asynchronous run bit-reproducible, and what lets a resumed run re-walk
 * the plan up to its checkpoint without computing anything.
 */
#include "distref/ps_plan.h"
#include "distref/rng.h"

#include <stdlib.h>
#include <string.h>

int dr_ps_schedule_init(dr_ps_schedule *s, const dr_ps_schedule_options *opt,
                        uint64_t first_closure, dr_err *err)
{
    memset(s, 0, sizeof *s);
    if (opt->num_workers < 1 || opt->num_workers > DR_PS_MAX_WORKERS)
        return dr_fail(err, DR_EUSAGE, "num_workers: expected 1..%d workers, got %u",
                       DR_PS_MAX_WORKERS, opt->num_workers);
    if (opt->fail_step && opt->fail_worker >= opt->num_workers)
        return dr_fail(err, DR_EUSAGE, "--fail_worker: worker %u does not exist (%u workers)",
                       opt->fail_worker, opt->num_workers);
    s->opt = *opt;
    s->next_closure = first_closure ? first_closure : 1;
    s->qcap = 4 * DR_PS_MAX_WORKERS;
    if (!(s->queue = malloc(s->qcap * sizeof *s->queue)))
        return dr_fail(err, DR_ENOMEM, "schedule: no memory for the closure queue");
    return DR_OK;
}

void dr_ps_schedule_free(dr_ps_schedule *s)
{
    free(s->queue);
    memset(s, 0, sizeof *s);
}

/* ---- the closure queue: a ring, pushed at the back by schedule and at the
 * front by a failure (closure_queue.put_back) ---------------------------- */

static bool grow(dr_ps_schedule *s)
{
    size_t cap = s->qcap * 2;
    uint64_t *q = malloc(cap * sizeof *q);
    if (!q) return false;
    for (size_t i = 0; i < s->qlen; i++) q[i] = s->queue[(s->qhead + i) % s->qcap];
    free(s->queue);
    s->queue = q;
    s->qcap = cap;
    s->qhead = 0;
    return true;
}

/* The ring keeps room for every in-flight closure besides the queued ones,
 * so a failure can always put its closure back. */
uint64_t dr_ps_schedule_push(dr_ps_schedule *s)
{
    if (s->qlen + s->opt.num_workers + 1 >= s->qcap && !grow(s)) return 0;
    s->queue[(s->qhead + s->qlen++) % s->qcap] = s->next_closure;
    return s->next_closure++;
}

void dr_ps_schedule_cancel_queued(dr_ps_schedule *s)
{
    s->qlen = 0;
}

static void put_back(dr_ps_schedule *s, uint64_t closure)
{
    s->qhead = (s->qhead + s->qcap - 1) % s->qcap;
    s->queue[s->qhead] = closure;
    s->qlen++;
}

static uint64_t pop_front(dr_ps_schedule *s)
{
    uint64_t c = s->queue[s->qhead];
    s->qhead = (s->qhead + 1) % s->qcap;
    s->qlen--;
    return c;
}

/* ---- validity ----------------------------------------------------------- */

/* Can the in-flight closures, except `skip` (a worker, or W for none), all
 * land within the bound starting at version now? Sorted by read version,
 * the k-th lands at now + k - 1 at the earliest; that order is the best one
 * (earliest deadline first), so checking it decides feasibility. */
static bool feasible(const dr_ps_schedule *s, uint64_t now, uint32_t skip)
{
    uint64_t r[DR_PS_MAX_WORKERS];
    uint32_t n = 0;
    for (uint32_t w = 0; w < s->opt.num_workers; w++) {
        if (!s->busy[w] || w == skip) continue;
        uint32_t i = n++;
        for (; i > 0 && r[i - 1] > s->read[w]; i--) r[i] = r[i - 1];
        r[i] = s->read[w];
    }
    for (uint32_t k = 0; k < n; k++)
        if (now + k - r[k] > s->opt.staleness) return false;
    return true;
}

typedef struct actions {
    uint32_t n;
    uint32_t worker[2 * DR_PS_MAX_WORKERS];
    bool     land[2 * DR_PS_MAX_WORKERS];
} actions;

/* The injected failure happens on closure K itself: from the moment K is
 * at the front of the queue, only worker W may take it. W is never down
 * before its one failure and always becomes idle (landing the oldest
 * closure is always valid), so this cannot stall. */
static bool reserved_for_failure(const dr_ps_schedule *s, uint32_t w)
{
    return s->opt.fail_step && !s->failure_injected && s->qlen > 0 &&
           s->queue[s->qhead] >= s->opt.fail_step && w != s->opt.fail_worker;
}

static void valid_actions(const dr_ps_schedule *s, actions *a)
{
    uint32_t W = s->opt.num_workers;
    bool can_dispatch = s->qlen > 0 && dr_ps_schedule_in_flight(s) <= s->opt.staleness;
    a->n = 0;
    for (uint32_t w = 0; can_dispatch && w < W; w++)
        if (!s->busy[w] && !s->down[w] && !reserved_for_failure(s, w)) {
            a->worker[a->n] = w;
            a->land[a->n++] = false;
        }
    for (uint32_t w = 0; w < W; w++)
        if (s->busy[w] && feasible(s, s->version + 1, w)) { a->worker[a->n] = w; a->land[a->n++] = true; }
}

/* ---- events ------------------------------------------------------------- */

static void recover(dr_ps_schedule *s, uint32_t w, dr_ps_event *ev)
{
    s->down[w] = false;
    s->recover_in[w] = 0;
    *ev = (dr_ps_event){ DR_PS_RECOVER, w, 0, 0, s->version, 0, 0 };
}

static void dispatch(dr_ps_schedule *s, uint32_t w, dr_ps_event *ev)
{
    uint64_t c = pop_front(s);
    s->busy[w] = true;
    s->closure[w] = c;
    s->read[w] = s->version;
    /* the injected failure: closure K, which only W may take (valid_actions) */
    if (s->opt.fail_step && !s->failure_injected && w == s->opt.fail_worker && c >= s->opt.fail_step) {
        s->doomed[w] = true;
        s->failure_injected = true;
    }
    *ev = (dr_ps_event){ DR_PS_DISPATCH, w, c, s->version, s->version, 0, 0 };
}

/* A worker's rank died running its closure (dr_ps_schedule_take): nothing
 * lands, the closure goes back to the front, the worker never rejoins. */
static void lose(dr_ps_schedule *s, uint32_t w, dr_ps_event *ev)
{
    uint64_t c = s->closure[w], r = s->read[w];
    s->busy[w] = false;
    s->doomed[w] = false;
    s->down[w] = s->lost[w] = true;
    s->recover_in[w] = 0;
    put_back(s, c);
    *ev = (dr_ps_event){ DR_PS_FAIL, w, c, r, s->version, 0, 0 };
}

static void land(dr_ps_schedule *s, uint32_t w, dr_ps_event *ev)
{
    uint64_t c = s->closure[w], r = s->read[w];
    s->busy[w] = false;
    if (s->doomed[w]) {   /* the worker dies with it: nothing lands */
        s->doomed[w] = false;
        s->down[w] = true;
        s->recover_in[w] = DR_PS_RECOVERY_LANDINGS;
        put_back(s, c);
        *ev = (dr_ps_event){ DR_PS_FAIL, w, c, r, s->version, 0, 0 };
        return;
    }
    *ev = (dr_ps_event){ DR_PS_LAND, w, c, r, s->version + 1, s->version - r, 0 };
    s->version++;
    for (uint32_t v = 0; v < s->opt.num_workers; v++)
        if (s->down[v] && s->recover_in[v] > 0) s->recover_in[v]--;
}

bool dr_ps_schedule_next(dr_ps_schedule *s, dr_ps_event *ev)
{
    uint32_t W = s->opt.num_workers;
    actions a;
    for (uint32_t w = 0; w < W; w++)
        if (s->down[w] && !s->lost[w] && s->recover_in[w] == 0) { recover(s, w, ev); return true; }
    valid_actions(s, &a);
    if (a.n == 0) {
        uint32_t first = W;
        if (s->qlen == 0) return false;   /* nothing queued, nothing in flight */
        /* Every worker is down: the one due soonest rejoins now. */
        for (uint32_t w = 0; w < W; w++)
            if (s->down[w] && !s->lost[w] && (first == W || s->recover_in[w] < s->recover_in[first])) first = w;
        if (first == W) {                 /* every worker lost: only a recording can get here */
            s->replay_bad = s->opt.replay != NULL;
            return false;
        }
        recover(s, first, ev);
        return true;
    }
    if (s->opt.replay) {   /* a recorded schedule: its next event, if the rule allows it */
        const dr_ps_event *rec = s->replayed < s->opt.replay_len ? &s->opt.replay[s->replayed] : NULL;
        dr_ps_schedule saved;
        if (rec) saved = *s;
        if (!rec || !dr_ps_schedule_take(s, rec->kind, rec->worker, ev)) {
            s->replay_bad = true;
            return false;
        }
        /* the recording's own fields against what this run makes of the event */
        s->replay_field = ev->closure != rec->closure ? "closure" : ev->read_version != rec->read_version ?
                          "read_version" : ev->version != rec->version ? "version" : NULL;
        if (s->replay_field) {
            bool c = ev->closure != rec->closure, r = !c && ev->read_version != rec->read_version;
            const char *field = s->replay_field;
            uint64_t want = c ? ev->closure : r ? ev->read_version : ev->version;
            uint64_t got = c ? rec->closure : r ? rec->read_version : rec->version;
            *s = saved;   /* nothing taken */
            s->replay_bad = true;
            s->replay_field = field;
            s->replay_want = want;
            s->replay_got = got;
            return false;
        }
        s->replayed++;
        return true;
    }
    {
        uint32_t pick = dr_rng_below(s->opt.seed, DR_STREAM_SCHEDULE, s->draws++, a.n);
        if (a.land[pick]) land(s, a.worker[pick], ev);
        else dispatch(s, a.worker[pick], ev);
    }
    return true;
}

bool dr_ps_schedule_allows(const dr_ps_schedule *s, dr_ps_event_kind kind, uint32_t w)
{
    actions a;
    if (w >= s->opt.num_workers) return false;
    if (kind == DR_PS_FAIL) return s->busy[w];   /* a rank can die whenever it runs a closure */
    if (kind != DR_PS_DISPATCH && kind != DR_PS_LAND) return false;
    for (uint32_t v = 0; v < s->opt.num_workers; v++)
        if (s->down[v] && !s->lost[v] && s->recover_in[v] == 0) return false;   /* a recovery is due first */
    valid_actions(s, &a);
    for (uint32_t i = 0; i < a.n; i++)
        if (a.worker[i] == w && a.land[i] == (kind == DR_PS_LAND)) return true;
    return false;
}

bool dr_ps_schedule_take(dr_ps_schedule *s, dr_ps_event_kind kind, uint32_t w, dr_ps_event *ev)
{
    if (!dr_ps_schedule_allows(s, kind, w)) return false;
    if (kind == DR_PS_LAND) land(s, w, ev);
    else if (kind == DR_PS_FAIL) lose(s, w, ev);
    else dispatch(s, w, ev);
    return true;
}

/* ---- the whole plan ----------------------------------------------------- */

static int append(dr_ps_event **ev, size_t *n, size_t *cap, const dr_ps_event *e, dr_err *err)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        dr_ps_event *p = realloc(*ev, c * sizeof *p);
        if (!p) return dr_fail(err, DR_ENOMEM, "schedule: no memory for %zu events", c);
        *ev = p;
        *cap = c;
    }
    (*ev)[(*n)++] = *e;
    return DR_OK;
}

int dr_ps_plan(const dr_ps_schedule_options *opt, uint64_t n, uint64_t join_every,
               dr_ps_event **events, size_t *count, dr_err *err)
{
    dr_ps_schedule s;
    size_t cap = 0;
    uint64_t pushed = 0;
    int rc = dr_ps_schedule_init(&s, opt, 1, err);
    *events = NULL;
    *count = 0;
    while (rc == DR_OK && pushed < n) {
        uint64_t group = join_every && n - pushed > join_every ? join_every : n - pushed;
        dr_ps_event e;
        for (uint64_t i = 0; i < group; i++, pushed++)
            if (!dr_ps_schedule_push(&s)) rc = dr_fail(err, DR_ENOMEM, "schedule: no memory for the queue");
        while (rc == DR_OK && dr_ps_schedule_next(&s, &e)) rc = append(events, count, &cap, &e, err);
    }
    dr_ps_schedule_free(&s);
    if (rc) { free(*events); *events = NULL; *count = 0; }
    return rc;
}
