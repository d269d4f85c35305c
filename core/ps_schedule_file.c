/* distref core — the recorded schedule of a parameter_server run
 * (model_dir/ps_schedule.jsonl): what a free-running coordinator
 * (--variant=mpi --schedule=free) really did, one JSON line per dispatch,
 * landing and closure lost with a dead worker, and what
 * `--variant=ref --replay_schedule=FILE` follows (dr_ps_schedule_options.replay). Format: include/distref/ps_plan.h.
 * Its reader, which checks every line: core/ps_schedule_read.c.
 */
#include "distref/ps_plan.h"
#include "distref/fileio.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

size_t dr_ps_event_line(const dr_ps_event *ev, char *buf, size_t n)
{
    const char *kind = ev->kind == DR_PS_LAND ? "land" : ev->kind == DR_PS_FAIL ? "fail" : "dispatch";
    int len = snprintf(buf, n, "{\"event\":\"%s\",\"worker\":%u,\"closure\":%llu,\"read_version\":%llu,"
                       "\"version\":%llu}\n", kind, ev->worker,
                       (unsigned long long)ev->closure, (unsigned long long)ev->read_version,
                       (unsigned long long)ev->version);
    return len < 0 ? 0 : (size_t)len < n ? (size_t)len : n - 1;
}

size_t dr_ps_settings_line(const dr_run_config *cfg, uint32_t W, uint32_t P, uint64_t step, char *buf, size_t n)
{
    int len = snprintf(buf, n, "{\"checkpoint_step\":%llu,\"workers\":%u,\"ps\":%u,\"staleness\":%u,"
                       "\"schedule_seed\":%llu,\"checkpoint_every\":%llu,\"fail_worker\":\"%s\",\"ps_partitioner\":\"%s\"}\n",
                       (unsigned long long)step, W, P, cfg->staleness, (unsigned long long)cfg->schedule_seed,
                       (unsigned long long)cfg->checkpoint_every, cfg->fail_worker, cfg->ps_partitioner);
    return len < 0 ? 0 : (size_t)len < n ? (size_t)len : n - 1;
}

/* The step of a settings line and where the rest of it starts (after
 * {"checkpoint_step":S,), or NULL when it does not start so. */
static const char *settings_step(const char *line, size_t n, uint64_t *step)
{
    static const char head[] = "{\"checkpoint_step\":";
    size_t k = sizeof head - 1, i = k;
    *step = 0;
    if (n <= k || memcmp(line, head, k) != 0) return NULL;
    for (; i < n && line[i] >= '0' && line[i] <= '9' && i - k < 20; i++) *step = *step * 10 + (uint64_t)(line[i] - '0');
    return i > k && i < n && line[i] == ',' ? line + i : NULL;
}

/* The file is written with every checkpoint before ckpt.bin's rename (the
 * one commit, core/run_log.c: dr_run_log_commit), so a kill between the two
 * leaves it one checkpoint ahead: its settings are the same, its step later
 * than the checkpoint's. One behind is a directory that an older distref
 * (which renamed ckpt.bin first) left half-written: refused as that, never
 * as the user's flags. */
int dr_ps_settings_check(const dr_run_config *cfg, uint32_t W, uint32_t P, uint64_t step, bool *absent,
                         dr_err *err)
{
    char path[1100], now[512];
    uint8_t *saved;
    size_t n, len = dr_ps_settings_line(cfg, W, P, step, now, sizeof now);
    uint64_t at = 0, ignored;
    const char *rest, *mine = settings_step(now, len, &ignored);
    int rc;
    snprintf(path, sizeof path, "%s/ps_schedule.json", cfg->model_dir);
    struct stat st;
    *absent = lstat(path, &st) != 0;   /* a planted link is present, and refused below */
    if (*absent) return DR_OK;
    if ((rc = dr_read_regular(path, 4096, &saved, &n, err))) return rc;   /* no link, FIFO or device */
    rest = settings_step((const char *)saved, n, &at);
    if (rest && mine && at < step)
        rc = dr_fail(err, DR_EFORMAT, "%s: written for step %llu but ckpt.bin is at step %llu: a checkpoint "
                     "interrupted between its two files (by a distref older than this one, which renamed "
                     "ckpt.bin first); this directory cannot be resumed: use another --model_dir",
                     path, (unsigned long long)at, (unsigned long long)step);
    else if (!rest || !mine || (size_t)(n - (size_t)(rest - (const char *)saved)) != len - (size_t)(mine - now) ||
             memcmp(rest, mine, len - (size_t)(mine - now)) != 0)
        rc = dr_fail(err, DR_EFORMAT, "%s: the checkpoint's schedule was %.*s, this run's is %.*s; "
                     "resume with the same TF_CONFIG, --staleness, --schedule_seed, --checkpoint_every, "
                     "--fail_worker and --ps_partitioner, or use another --model_dir",
                     path, (int)(n ? n - 1 : 0), (const char *)saved, (int)(len ? len - 1 : 0), now);
    free(saved);
    return rc;
}
