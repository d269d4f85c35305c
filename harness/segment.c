/* distref harness — the segments of a run directory (segment.h). */
#include "harness/segment.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

typedef struct topo {
    char strategy[32], variant[32], numerics[8];
    int  workers, replicas;
} topo;

/* Keys of their own ("strategy", not summary.json's "distribution_strategy"),
 * so that a grep for the run's fields finds the run's only. */
#define JSON_FORMAT "{\"strategy\":\"%s\",\"variant\":\"%s\",\"workers\":%d,\"replicas_in_sync\":%d," \
                    "\"numerics\":\"%s\"}"

/* "mirrored, 1 worker x 3 replicas, openmp, exact": the replicas are each
 * worker's (num_replicas_in_sync = workers x replicas). */
static void words_of(const topo *t, char *buf, size_t n)
{
    int w = t->workers > 0 ? t->workers : 1, each = t->replicas / w;
    if (each * w == t->replicas)
        snprintf(buf, n, "%s, %d worker%s x %d replica%s, %s, %s", t->strategy, w, w == 1 ? "" : "s", each,
                 each == 1 ? "" : "s", t->variant, t->numerics);
    else
        snprintf(buf, n, "%s, %d workers, %d replicas in sync, %s, %s", t->strategy, w, t->replicas, t->variant,
                 t->numerics);
}

void dr_segment_of(const dr_strategy *st, const char *variant, bool exact, char *json, size_t jn,
                   char *words, size_t wn)
{
    topo t;
    memset(&t, 0, sizeof t);
    snprintf(t.strategy, sizeof t.strategy, "%s", dr_strategy_kind_name(st->spec.kind));
    snprintf(t.variant, sizeof t.variant, "%s", variant);
    snprintf(t.numerics, sizeof t.numerics, "%s", exact ? "exact" : "fast");
    t.workers = st->num_workers ? (int)st->num_workers : 1;
    t.replicas = (int)st->num_replicas;
    snprintf(json, jn, JSON_FORMAT, t.strategy, t.variant, t.workers, t.replicas, t.numerics);
    words_of(&t, words, wn);
}

static bool get_str(json_object *o, const char *key, char *dst, size_t n)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string)) return false;
    snprintf(dst, n, "%s", json_object_get_string(v));
    return true;
}

static bool get_int(json_object *o, const char *key, int *dst)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int)) return false;
    *dst = json_object_get_int(v);
    return true;
}

static bool parse(const char *json, topo *t)
{
    json_object *o = json_tokener_parse(json);
    bool ok = o && json_object_is_type(o, json_type_object) &&
              get_str(o, "strategy", t->strategy, sizeof t->strategy) &&
              get_str(o, "variant", t->variant, sizeof t->variant) &&
              get_str(o, "numerics", t->numerics, sizeof t->numerics) &&
              get_int(o, "workers", &t->workers) && get_int(o, "replicas_in_sync", &t->replicas);
    json_object_put(o);
    return ok;
}

bool dr_segment_words(const char *json, char *words, size_t n)
{
    topo t;
    if (!parse(json, &t)) {
        snprintf(words, n, "an unrecorded topology");
        return false;
    }
    words_of(&t, words, n);
    return true;
}

/* The first field that differs, as this run's and the checkpoint's flag text. */
static void first_difference(const topo *a, const topo *b, char *now, char *was, size_t n, const char **field)
{
    if (strcmp(a->numerics, b->numerics) != 0) {
        *field = "numerics";
        snprintf(now, n, "--numerics=%s", a->numerics), snprintf(was, n, "--numerics=%s", b->numerics);
    } else if (strcmp(a->strategy, b->strategy) != 0) {
        *field = "distribution_strategy";
        snprintf(now, n, "--distribution_strategy=%s", a->strategy);
        snprintf(was, n, "--distribution_strategy=%s", b->strategy);
    } else if (strcmp(a->variant, b->variant) != 0) {
        *field = "variant";
        snprintf(now, n, "--variant=%s", a->variant), snprintf(was, n, "--variant=%s", b->variant);
    } else if (a->workers != b->workers) {
        *field = "workers";
        snprintf(now, n, "%d workers (TF_CONFIG, --worker_hosts or mpirun -np)", a->workers);
        snprintf(was, n, "%d", b->workers);
    } else {
        *field = "replicas";
        snprintf(now, n, "%d replicas (--num_gpus, --tpu)", a->replicas);
        snprintf(was, n, "%d", b->replicas);
    }
}

/* Why this run cannot continue a checkpoint of topology b under a (NULL: it can,
 * as far as the world size goes). */
static const char *world_size_bars(const topo *a, const topo *b, const char *by_replicas, const char *by_workers)
{
    if (by_replicas && a->replicas != b->replicas) return by_replicas;
    if (by_workers && (a->workers != b->workers || ((a->workers > 1 || b->workers > 1) && a->replicas != b->replicas)))
        return by_workers;
    return NULL;
}

int dr_segment_check(const char *prev, const char *now, bool finished, uint64_t step, const char *dir,
                     const char *by_replicas, const char *by_workers, bool *changed, dr_err *err)
{
    topo a, b;
    char mine[128], theirs[128], words[160];
    const char *field = "", *why = NULL;
    *changed = false;
    if (strcmp(prev, now) == 0 || !parse(prev, &b) || !parse(now, &a)) return DR_OK;
    first_difference(&a, &b, mine, theirs, sizeof mine, &field);
    words_of(&b, words, sizeof words);
    if (finished)
        return dr_fail(err, DR_EUSAGE, "%s, but the run in %s is already complete at step %llu under %s (%s); "
                       "nothing run: to compare, train in another --model_dir", mine, dir,
                       (unsigned long long)step, theirs, words);
    if (strcmp(field, "numerics") == 0) why = "exact and fast numerics are different trajectories";
    else if (strcmp(b.numerics, "fast") == 0) why = "fast numerics' bits depend on the topology";
    else if (strcmp(field, "distribution_strategy") == 0 &&
             (strcmp(a.strategy, "parameter_server") == 0 || strcmp(b.strategy, "parameter_server") == 0))
        why = "parameter_server's asynchronous trajectory is not a synchronous strategy's";
    if (!why && (why = world_size_bars(&a, &b, by_replicas, by_workers)) != NULL) {   /* name the world sizes */
        snprintf(mine, sizeof mine, "%d worker%s x %d replicas in sync", a.workers, a.workers == 1 ? "" : "s", a.replicas);
        snprintf(theirs, sizeof theirs, "%d worker%s x %d replicas in sync", b.workers, b.workers == 1 ? "" : "s",
                 b.replicas);
    }
    /* within parameter_server, ref <-> mpi is its own resume's to judge (ps_schedule.json: the
     * workers, staleness and schedule must be the checkpoint's) */
    if (why)
        return dr_fail(err, DR_EUSAGE, "%s, but the checkpoint in %s (step %llu) was trained under %s (%s), and %s; "
                       "resume under the same or use another --model_dir", mine, dir, (unsigned long long)step,
                       theirs, words, why);
    *changed = true;
    return DR_OK;
}
