/* distref core — reading a recorded schedule (ps_schedule.jsonl, what
 * --variant=mpi --schedule=free wrote; format: include/distref/ps_plan.h)
 * for `--variant=ref --replay_schedule=FILE` and for a free run's resume.
 *
 * Nothing in the file is trusted: it must be a regular file (a FIFO would
 * block the open, /dev/zero never ends), each line at most
 * DR_PS_SCHEDULE_LINE_MAX bytes with no NUL byte, one JSON object with
 * exactly the five fields and nothing after it, and every event must follow
 * from the ones before it as a coordinator makes them: a dispatch takes the
 * queue's front (a closure a lost worker gave back, else the next new one)
 * to an idle worker that is not lost and reads the current version; a
 * landing or fail is of the closure that worker runs, with the version it
 * read; a landing makes the next version. So swapped lines, an edited
 * version or read_version and a file replayed twice over are refused here,
 * naming the file, the line, the field and what it should be; the staleness
 * bound and the worker count are the run's, checked as it replays
 * (core/ps_schedule.c).
 */
#include "distref/ps_plan.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the events so far leave: the checks of the next one. */
typedef struct {
    uint64_t lands, next_new;
    bool     busy[DR_PS_MAX_WORKERS], lost[DR_PS_MAX_WORKERS];
    uint64_t closure[DR_PS_MAX_WORKERS], read[DR_PS_MAX_WORKERS];
    uint64_t back[DR_PS_MAX_WORKERS];   /* given back by a FAIL; the last one is the queue's front */
    uint32_t nback;
} history;

typedef struct {
    const char *path, *flag;   /* flag: "--replay_schedule", or NULL */
    size_t      line;
} where;

static int bad(const where *at, dr_err *err, const char *fmt, const char *field, const char *what)
{
    char buf[400];
    snprintf(buf, sizeof buf, fmt, field, what);
    return dr_fail(err, DR_EFORMAT, "%s%s%s line %zu: %s", at->flag ? at->flag : "", at->flag ? "=" : "",
                   at->path, at->line, buf);
}

static int expect(const where *at, const char *field, uint64_t got, uint64_t want, const char *why, dr_err *err)
{
    char what[300];
    if (got == want) return DR_OK;
    snprintf(what, sizeof what, "expected %llu (%s), got %llu", (unsigned long long)want, why,
             (unsigned long long)got);
    return bad(at, err, "field \"%s\": %s", field, what);
}

static int follow(history *h, const dr_ps_event *ev, const where *at, dr_err *err)
{
    uint32_t w = ev->worker;
    char what[200];
    int rc;
    if (ev->kind == DR_PS_DISPATCH) {
        uint64_t want = h->nback ? h->back[h->nback - 1] : h->next_new;
        snprintf(what, sizeof what, "worker %u %s", w, h->lost[w] ? "was lost on an earlier line and is never "
                 "dispatched to again" : "still runs the closure it was dispatched before");
        if (h->lost[w] || h->busy[w]) return bad(at, err, "field \"%s\": %s", "worker", what);
        if ((rc = expect(at, "closure", ev->closure, want, h->nback ? "the closure a lost worker gave back"
                         : "the next closure in the queue", err)) ||
            (rc = expect(at, "read_version", ev->read_version, h->lands, "the landings before it", err)) ||
            (rc = expect(at, "version", ev->version, h->lands, "the landings before it", err)))
            return rc;
        if (h->nback) h->nback--;
        else h->next_new++;
        h->busy[w] = true;
        h->closure[w] = ev->closure;
        h->read[w] = ev->read_version;
        return DR_OK;
    }
    if (!h->busy[w]) {
        snprintf(what, sizeof what, "worker %u runs no closure here (no dispatch to it since its last event)", w);
        return bad(at, err, "field \"%s\": %s", "worker", what);
    }
    if ((rc = expect(at, "closure", ev->closure, h->closure[w], "the closure dispatched to the worker", err)) ||
        (rc = expect(at, "read_version", ev->read_version, h->read[w], "the version its dispatch read", err)) ||
        (rc = expect(at, "version", ev->version, h->lands + (ev->kind == DR_PS_LAND),
                     ev->kind == DR_PS_LAND ? "the landings before it + 1" : "the landings before it", err)))
        return rc;
    h->busy[w] = false;
    if (ev->kind == DR_PS_LAND) h->lands++;
    else {   /* the worker's rank died: the closure goes back to the front, the worker never returns */
        h->lost[w] = true;
        h->back[h->nback++] = ev->closure;
    }
    return DR_OK;
}

static bool field(json_object *o, const char *k, uint64_t *out)
{
    json_object *v;
    if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int)) return false;
    if (json_object_get_int64(v) < 0) return false;
    *out = json_object_get_uint64(v);   /* up to 2^64-1, as written: the checks below name it */
    return true;
}

static int parse_line(const char *line, size_t len, const where *at, dr_ps_event *ev, dr_err *err)
{
    json_tokener *tok = json_tokener_new();
    json_object *o = NULL, *k;
    uint64_t w = 0;
    const char *kind = "";
    size_t end = len;
    bool ok;
    memset(ev, 0, sizeof *ev);
    while (end > 0 && strchr(" \t\r\n", line[end - 1])) end--;
    if (!tok) return dr_fail(err, DR_ENOMEM, "%s: no memory to parse line %zu", at->path, at->line);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    o = json_tokener_parse_ex(tok, line, (int)end);
    if (!o || (size_t)json_tokener_get_parse_end(tok) != end) {
        char what[200];
        if (o) snprintf(what, sizeof what, "something after the JSON object, at column %zu",
                        json_tokener_get_parse_end(tok) + 1);
        else if (json_tokener_get_error(tok) == json_tokener_continue)
            snprintf(what, sizeof what, "the line ends inside its JSON object");
        else snprintf(what, sizeof what, "not one JSON object alone (%s at column %zu)",
                      json_tokener_error_desc(json_tokener_get_error(tok)), json_tokener_get_parse_end(tok) + 1);
        json_object_put(o);
        json_tokener_free(tok);
        return bad(at, err, "%s%s", what, "; expected one JSON object per line");
    }
    json_tokener_free(tok);
    ok = o && json_object_is_type(o, json_type_object) && json_object_object_length(o) == 5 &&
         json_object_object_get_ex(o, "event", &k) && json_object_is_type(k, json_type_string);
    kind = ok ? json_object_get_string(k) : "";
    ok = ok && (strcmp(kind, "dispatch") == 0 || strcmp(kind, "land") == 0 || strcmp(kind, "fail") == 0) &&
         field(o, "worker", &w) && w < DR_PS_MAX_WORKERS && field(o, "closure", &ev->closure) &&
         ev->closure > 0 && field(o, "read_version", &ev->read_version) && field(o, "version", &ev->version);
    ev->kind = strcmp(kind, "land") == 0 ? DR_PS_LAND : strcmp(kind, "fail") == 0 ? DR_PS_FAIL : DR_PS_DISPATCH;
    ev->worker = (uint32_t)w;
    ev->line = at->line;
    json_object_put(o);
    if (!ok)
        return bad(at, err, "expected %s%s", "{\"event\":\"dispatch\"|\"land\"|\"fail\",\"worker\":W (below 64),"
                   "\"closure\":C (from 1),\"read_version\":R,\"version\":V}", " and nothing else");
    return DR_OK;
}

/* Opens it for reading if it is a regular file: never blocks (a FIFO),
 * never follows a symbolic link. */
static int open_regular(const where *at, FILE **f, dr_err *err)
{
    const char *name = at->flag ? at->flag : "recorded schedule";
    struct stat st;
    int fd = open(at->path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return dr_fail(err, errno == ENOENT ? DR_EUSAGE : DR_EIO, "%s%s%s: cannot open it: %s%s", name,
                       at->flag ? "=" : " ", at->path, strerror(errno),
                       errno == ELOOP ? " (a symbolic link: give the file itself)" : "");
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return dr_fail(err, DR_EUSAGE, "%s%s%s: not a regular file (%s); expected a ps_schedule.jsonl that a "
                       "--schedule=free run wrote", name, at->flag ? "=" : " ", at->path,
                       S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" :
                       S_ISDIR(st.st_mode) ? "a directory" : "a special file");
    }
    if (fcntl(fd, F_SETFL, O_RDONLY) != 0 || !(*f = fdopen(fd, "r"))) {
        close(fd);
        return dr_fail(err, DR_EIO, "%s %s: cannot read it", name, at->path);
    }
    return DR_OK;
}

/* The next line into buf (without its end); -1 at the end of the file. */
static int next_line(FILE *f, char *buf, size_t *len, const where *at, dr_err *err)
{
    int ch = 0;
    char what[64];
    *len = 0;
    while ((ch = getc(f)) != EOF && ch != '\n') {
        if (ch == 0) {
            snprintf(what, sizeof what, "a NUL byte at column %zu", *len + 1);
            return bad(at, err, "%s%s", what, "");
        }
        if (*len == DR_PS_SCHEDULE_LINE_MAX) {
            snprintf(what, sizeof what, "longer than %d bytes", DR_PS_SCHEDULE_LINE_MAX);
            return bad(at, err, "%s%s", what, " (no schedule line is that long)");
        }
        buf[(*len)++] = (char)ch;
    }
    buf[*len] = 0;
    if (ch == EOF && ferror(f)) return dr_fail(err, DR_EIO, "%s: read error at line %zu", at->path, at->line);
    return ch == EOF && *len == 0 ? -1 : DR_OK;
}

int dr_ps_schedule_load_as(const char *path, const char *flag, dr_ps_event **events, size_t *count, dr_err *err)
{
    where at = { path, flag, 0 };
    FILE *f = NULL;
    char *line = malloc(DR_PS_SCHEDULE_LINE_MAX + 1);
    history *h = calloc(1, sizeof *h);
    size_t n = 0, cap = 0, len;
    dr_ps_event *ev = NULL;
    int rc = line && h ? open_regular(&at, &f, err) : dr_fail(err, DR_ENOMEM, "%s: no memory to read it", path);
    *events = NULL;
    *count = 0;
    if (h) h->next_new = 1;
    while (rc == DR_OK) {
        at.line++;
        if ((rc = next_line(f, line, &len, &at, err)) != DR_OK) break;
        if (line[strspn(line, " \t\r")] == '\0') continue;
        if (n == cap) {
            dr_ps_event *p = realloc(ev, (cap = cap ? 2 * cap : 256) * sizeof *p);
            if (!p) { rc = dr_fail(err, DR_ENOMEM, "%s: no memory for %zu events", path, cap); break; }
            ev = p;
        }
        if ((rc = parse_line(line, len, &at, &ev[n], err)) == DR_OK && (rc = follow(h, &ev[n], &at, err)) == DR_OK)
            n++;
    }
    if (rc == -1) rc = DR_OK;
    if (f) fclose(f);
    free(line);
    free(h);
    if (rc == DR_OK && n == 0)
        rc = dr_fail(err, DR_EFORMAT, "%s%s%s: no events in it", flag ? flag : "", flag ? "=" : "", path);
    if (rc) { free(ev); return rc; }
    *events = ev;
    *count = n;
    return DR_OK;
}

int dr_ps_schedule_load(const char *path, dr_ps_event **events, size_t *count, dr_err *err)
{
    return dr_ps_schedule_load_as(path, "--replay_schedule", events, count, err);
}
