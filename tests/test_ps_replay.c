/* distref tests — the recorded schedule (core/ps_schedule.c, replay and
 * take; core/ps_schedule_file.c): a seeded plan replayed from its own
 * events gives the same events; take refuses what the rule forbids; a
 * worker lost with its closure (take's FAIL: its MPI rank died) puts the
 * closure back at the front and never returns, and a recording with it
 * replays; the file's lines round-trip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "distref/ps_plan.h"
#include "ps_plan_fixture.h"

static void replay_equals_plan(void **state)
{
    (void)state;
    for (uint32_t W = 1; W <= 4; W++)
        for (uint32_t S = 0; S <= 3; S++) {
            dr_ps_event *ev, *rec, *again;
            size_t n = plan(W, S, 11 + W * 7 + S, 0, 0, 17, 5, &ev), m;
            dr_ps_schedule_options o = { W, S, 999, 0, 0, NULL, 0 };
            dr_err err;
            rec = malloc(n * sizeof *rec);
            assert_non_null(rec);
            memcpy(rec, ev, n * sizeof *rec);
            o.replay = rec;   /* another seed: the recording decides, not the draws */
            o.replay_len = n;
            assert_int_equal(dr_ps_plan(&o, 17, 5, &again, &m, &err), DR_OK);
            assert_int_equal(m, n);
            assert_memory_equal(again, ev, n * sizeof *ev);
            free(again);
            o.replay_len = n - 1;   /* a recording cut short stops the schedule */
            assert_int_equal(dr_ps_plan(&o, 17, 5, &again, &m, &err), DR_OK);
            assert_int_equal(m, n - 1);
            free(again);
            free(rec);
            free(ev);
        }
}

static void take_follows_the_rule(void **state)
{
    dr_ps_schedule s;
    dr_ps_schedule_options o = { 3, 1, 5, 0, 0, NULL, 0 };
    dr_ps_event ev;
    dr_err err;
    (void)state;
    assert_int_equal(dr_ps_schedule_init(&s, &o, 1, &err), DR_OK);
    assert_false(dr_ps_schedule_take(&s, DR_PS_DISPATCH, 0, &ev));   /* nothing queued */
    for (int i = 0; i < 4; i++) assert_int_not_equal(dr_ps_schedule_push(&s), 0);
    assert_true(dr_ps_schedule_take(&s, DR_PS_DISPATCH, 2, &ev));
    assert_int_equal(ev.closure, 1);
    assert_false(dr_ps_schedule_take(&s, DR_PS_DISPATCH, 2, &ev));   /* busy */
    assert_false(dr_ps_schedule_take(&s, DR_PS_LAND, 1, &ev));       /* idle */
    assert_true(dr_ps_schedule_take(&s, DR_PS_DISPATCH, 0, &ev));
    assert_false(dr_ps_schedule_take(&s, DR_PS_DISPATCH, 1, &ev));   /* S + 1 = 2 in flight */
    assert_true(dr_ps_schedule_take(&s, DR_PS_LAND, 0, &ev));        /* the newer first: staleness 0 */
    assert_int_equal(ev.version, 1);
    assert_true(dr_ps_schedule_take(&s, DR_PS_DISPATCH, 1, &ev));    /* read 1 */
    /* in flight: worker 2 read 0, worker 1 read 1, version 1: landing worker 1
     * first would leave worker 2's at staleness 2 > S */
    assert_false(dr_ps_schedule_take(&s, DR_PS_LAND, 1, &ev));
    assert_true(dr_ps_schedule_take(&s, DR_PS_LAND, 2, &ev));
    assert_int_equal(ev.staleness, 1);
    dr_ps_schedule_free(&s);
}

/* W = 3, S = 1, 8 closures: worker 1 is lost running closure 2; the rest
 * is drawn. Returns the events (a recording: DISPATCH, LAND, FAIL). */
static size_t lost_run(dr_ps_event **out)
{
    dr_ps_schedule s;
    dr_ps_schedule_options o = { 3, 1, 21, 0, 0, NULL, 0 };
    dr_ps_event ev, *all = calloc(64, sizeof *all);
    size_t n = 0;
    dr_err err;
    assert_non_null(all);
    assert_int_equal(dr_ps_schedule_init(&s, &o, 1, &err), DR_OK);
    for (int i = 0; i < 8; i++) assert_int_not_equal(dr_ps_schedule_push(&s), 0);
    assert_false(dr_ps_schedule_take(&s, DR_PS_FAIL, 1, &ev));       /* idle: nothing to lose */
    assert_true(dr_ps_schedule_take(&s, DR_PS_DISPATCH, 0, &ev)); all[n++] = ev;   /* closure 1 */
    assert_true(dr_ps_schedule_take(&s, DR_PS_DISPATCH, 1, &ev)); all[n++] = ev;   /* closure 2 */
    assert_true(dr_ps_schedule_take(&s, DR_PS_FAIL, 1, &ev)); all[n++] = ev;
    assert_int_equal(ev.kind, DR_PS_FAIL);
    assert_int_equal(ev.closure, 2);
    assert_int_equal(ev.version, 0);
    assert_int_equal(s.qlen, 7);
    assert_int_equal(s.queue[s.qhead], 2);                           /* back at the front */
    assert_false(dr_ps_schedule_take(&s, DR_PS_DISPATCH, 1, &ev));   /* lost for good */
    while (dr_ps_schedule_next(&s, &ev)) {
        assert_true(n < 64);
        assert_int_not_equal(ev.kind, DR_PS_RECOVER);                /* it never rejoins */
        assert_false(ev.kind == DR_PS_DISPATCH && ev.worker == 1);
        all[n++] = ev;
    }
    assert_int_equal(s.version, 8);                                  /* every closure landed once */
    dr_ps_schedule_free(&s);
    *out = all;
    return n;
}

static void lost_worker_reruns(void **state)
{
    dr_ps_event *ev, *again;
    size_t n = lost_run(&ev), m, dispatched = 0, landed = 0;
    dr_ps_schedule_options o = { 3, 1, 999, 0, 0, NULL, 0 };
    dr_err err;
    (void)state;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].closure != 2) continue;
        dispatched += ev[i].kind == DR_PS_DISPATCH;
        landed += ev[i].kind == DR_PS_LAND;
        if (ev[i].kind == DR_PS_DISPATCH && dispatched == 2) assert_int_not_equal(ev[i].worker, 1);
    }
    assert_int_equal(dispatched, 2);   /* the lost run and its re-run */
    assert_int_equal(landed, 1);
    o.replay = ev;                      /* the reference replays the recording, the FAIL included */
    o.replay_len = n;
    assert_int_equal(dr_ps_plan(&o, 8, 0, &again, &m, &err), DR_OK);
    assert_int_equal(m, n);
    assert_memory_equal(again, ev, n * sizeof *ev);
    free(again);
    memmove(&ev[2], &ev[3], (n - 3) * sizeof *ev);   /* the recording without its FAIL: closure 2's second */
    o.replay_len = n - 1;                             /* dispatch is not the queue's front, the replay stops */
    assert_int_equal(dr_ps_plan(&o, 8, 0, &again, &m, &err), DR_OK);
    assert_true(m < n - 1);
    free(again);
    free(ev);
}

static void file_round_trip(void **state)
{
    char dir[] = "/tmp/dr_ps_replay_XXXXXX", path[64], line[256];
    dr_ps_event *ev, *back;
    size_t n = plan(3, 2, 4, 0, 0, 9, 0, &ev), m;
    FILE *f;
    dr_err err;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/ps_schedule.jsonl", dir);
    assert_non_null(f = fopen(path, "w"));
    for (size_t i = 0; i < n; i++) fputs((dr_ps_event_line(&ev[i], line, sizeof line), line), f);
    fclose(f);
    {   /* a fail line (a worker's rank died) round-trips too */
        dr_ps_event fail = { DR_PS_FAIL, 2, 7, 5, 6, 0, 0 };
        dr_ps_event_line(&fail, line, sizeof line);
        assert_string_equal(line, "{\"event\":\"fail\",\"worker\":2,\"closure\":7,\"read_version\":5,\"version\":6}\n");
    }   /* (loaded only where it follows from the events before it: tests/test_replay_file.c) */
    assert_int_equal(dr_ps_schedule_load(path, &back, &m, &err), DR_OK);
    assert_int_equal(m, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(back[i].kind, ev[i].kind);
        assert_int_equal(back[i].worker, ev[i].worker);
        assert_int_equal(back[i].closure, ev[i].closure);
        assert_int_equal(back[i].read_version, ev[i].read_version);
        assert_int_equal(back[i].version, ev[i].version);
    }
    free(back);
    assert_non_null(f = fopen(path, "w"));
    fputs("{\"event\":\"land\",\"worker\":1}\n", f);
    fclose(f);
    assert_int_equal(dr_ps_schedule_load(path, &back, &m, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "line 1"));
    unlink(path);
    rmdir(dir);
    assert_int_equal(dr_ps_schedule_load(path, &back, &m, &err), DR_EUSAGE);
    free(ev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(replay_equals_plan),
        cmocka_unit_test(take_follows_the_rule),
        cmocka_unit_test(lost_worker_reruns),
        cmocka_unit_test(file_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
