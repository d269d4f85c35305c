/* distref fuzzing — a recorded schedule, ps_schedule.jsonl
 * (core/ps_schedule_read.c), as --replay_schedule and a --schedule=free
 * resume read it, then replayed (core/ps_schedule.c).
 *
 * Feeds: byte 0 picks the workers (1..4) and the staleness bound (0..3);
 * the rest is written as <scratch>/ps_schedule.jsonl and loaded; what loads
 * is replayed by dr_ps_plan for as many closures as it dispatches, in one
 * group and with a join every 2.
 * Checks: no crash, UB or leak; any error return is fine. What loads must
 * be what the reader promises: every event a dispatch, landing or fail of a
 * worker below 64 and a closure from 1, on increasing lines, each landing's
 * version one more than the landings before it; a replay takes at most the
 * recording's events.
 */
#include "distref/ps_plan.h"
#include "fuzz/fuzz_common.h"

static void check_events(const dr_ps_event *ev, size_t n)
{
    uint64_t lands = 0;
    size_t line = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind != DR_PS_DISPATCH && ev[i].kind != DR_PS_LAND && ev[i].kind != DR_PS_FAIL) __builtin_trap();
        if (ev[i].worker >= DR_PS_MAX_WORKERS || ev[i].closure == 0 || ev[i].line <= line) __builtin_trap();
        line = ev[i].line;
        if (ev[i].kind == DR_PS_LAND && ev[i].version != ++lands) __builtin_trap();
        if (ev[i].kind != DR_PS_LAND && ev[i].version != lands) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fz_dir("replay");
    char path[300];
    dr_ps_event *ev = NULL, *out;
    size_t n = 0, m;
    uint64_t closures = 0;
    dr_err err = { 0, "" };
    if (size < 1 || dir == NULL || fz_write(dir, "ps_schedule.jsonl", data + 1, size - 1) != 0) return 0;
    snprintf(path, sizeof path, "%s/ps_schedule.jsonl", dir);
    if (dr_ps_schedule_load_as(path, (data[0] & 0x80) ? NULL : "--replay_schedule", &ev, &n, &err) != DR_OK)
        return 0;
    check_events(ev, n);
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == DR_PS_DISPATCH && ev[i].closure > closures) closures = ev[i].closure;
    for (uint64_t every = 0; every <= 2; every += 2) {
        dr_ps_schedule_options o = { 1 + (data[0] & 3), (data[0] >> 2) & 3, 7, 0, 0, ev, n };
        if (dr_ps_plan(&o, closures, every, &out, &m, &err) == DR_OK) {
            if (m > n) __builtin_trap();
            free(out);
        }
    }
    free(ev);
    return 0;
}
