/* distref core — the recorded schedule of a parameter_server run
 * (model_dir/ps_schedule.jsonl): what a free-running coordinator
 * (--variant=mpi --schedule=free) really did, one JSON line per dispatch,
 * landing and closure lost with a dead worker, and what
 * `--variant=ref --replay_schedule=FILE` follows (dr_ps_schedule_options.replay). Format: include/distref/ps_plan.h.
 */
#include "distref/ps_plan.h"
#include "distref/fileio.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static bool field(json_object *o, const char *k, uint64_t *out)
{
    json_object *v;
    if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int)) return false;
    if (json_object_get_int64(v) < 0) return false;
    *out = (uint64_t)json_object_get_int64(v);
    return true;
}

static int parse_line(const char *line, size_t no, dr_ps_event *ev, dr_err *err)
{
    json_object *o = json_tokener_parse(line), *k;
    uint64_t w = 0;
    const char *kind;
    bool ok = o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, "event", &k) &&
              json_object_is_type(k, json_type_string);
    memset(ev, 0, sizeof *ev);
    kind = ok ? json_object_get_string(k) : "";
    ok = ok && (strcmp(kind, "dispatch") == 0 || strcmp(kind, "land") == 0 || strcmp(kind, "fail") == 0) &&
         field(o, "worker", &w) &&
         w < DR_PS_MAX_WORKERS && field(o, "closure", &ev->closure) && ev->closure > 0 &&
         field(o, "read_version", &ev->read_version) && field(o, "version", &ev->version);
    ev->kind = strcmp(kind, "land") == 0 ? DR_PS_LAND : strcmp(kind, "fail") == 0 ? DR_PS_FAIL : DR_PS_DISPATCH;
    ev->worker = (uint32_t)w;
    json_object_put(o);
    if (!ok)
        return dr_fail(err, DR_EFORMAT, "ps_schedule.jsonl line %zu: expected {\"event\":\"dispatch\"|\"land\"|\"fail\","
                       "\"worker\":W,\"closure\":C,\"read_version\":R,\"version\":V}", no);
    return DR_OK;
}

int dr_ps_schedule_load(const char *path, dr_ps_event **events, size_t *count, dr_err *err)
{
    FILE *f = fopen(path, "r");
    char line[512];
    size_t n = 0, cap = 0, no = 0;
    dr_ps_event *ev = NULL;
    int rc = DR_OK;
    *events = NULL;
    *count = 0;
    if (!f) return dr_fail(err, DR_EUSAGE, "--replay_schedule=%s: cannot open it", path);
    while (rc == DR_OK && fgets(line, sizeof line, f)) {
        no++;
        if (line[strspn(line, " \t\r\n")] == '\0') continue;
        if (n == cap) {
            dr_ps_event *p = realloc(ev, (cap = cap ? 2 * cap : 256) * sizeof *p);
            if (!p) { rc = dr_fail(err, DR_ENOMEM, "--replay_schedule: no memory for %zu events", cap); break; }
            ev = p;
        }
        if ((rc = parse_line(line, no, &ev[n], err)) == DR_OK) n++;
    }
    fclose(f);
    if (rc == DR_OK && n == 0) rc = dr_fail(err, DR_EFORMAT, "--replay_schedule=%s: no events in it", path);
    if (rc) { free(ev); return rc; }
    *events = ev;
    *count = n;
    return DR_OK;
}

size_t dr_ps_settings_line(const dr_run_config *cfg, uint32_t W, uint32_t P, uint64_t step, char *buf, size_t n)
{
    int len = snprintf(buf, n, "{\"checkpoint_step\":%llu,\"workers\":%u,\"ps\":%u,\"staleness\":%u,"
                       "\"schedule_seed\":%llu,\"checkpoint_every\":%llu,\"fail_worker\":\"%s\",\"ps_partitioner\":\"%s\"}\n",
                       (unsigned long long)step, W, P, cfg->staleness, (unsigned long long)cfg->schedule_seed,
                       (unsigned long long)cfg->checkpoint_every, cfg->fail_worker, cfg->ps_partitioner);
    return len < 0 ? 0 : (size_t)len < n ? (size_t)len : n - 1;
}

int dr_ps_settings_check(const dr_run_config *cfg, uint32_t W, uint32_t P, uint64_t step, bool *absent,
                         dr_err *err)
{
    char path[1100], now[512];
    uint8_t *saved;
    size_t n, len = dr_ps_settings_line(cfg, W, P, step, now, sizeof now);
    int rc;
    snprintf(path, sizeof path, "%s/ps_schedule.json", cfg->model_dir);
    *absent = access(path, F_OK) != 0;
    if (*absent) return DR_OK;
    if ((rc = dr_read_file(path, 4096, &saved, &n, err))) return rc;
    if (n != len || memcmp(saved, now, n) != 0)
        rc = dr_fail(err, DR_EFORMAT, "%s: the checkpoint's schedule was %.*s, this run's is %.*s; "
                     "resume with the same TF_CONFIG, --staleness, --schedule_seed, --checkpoint_every, "
                     "--fail_worker and --ps_partitioner, or use another --model_dir",
                     path, (int)(n ? n - 1 : 0), (const char *)saved, (int)(len ? len - 1 : 0), now);
    free(saved);
    return rc;
}
