/* distref conformance — running a case and reading back what it wrote. */
#include "conformance/conformance.h"
#include "distref/checkpoint.h"
#include "distref/factory.h"

#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void base_config(dr_run_config *c, uint32_t examples, uint32_t G, double l2)
{
    dr_run_config_defaults(c);
    c->synthetic_examples = examples;
    c->global_batch_size = G;
    c->epochs = 1;
    c->l2 = l2;
    c->seed = 7;
    c->progress = false;
}

void graph_config(dr_run_config *c, const char *experiment, uint32_t examples, uint64_t steps)
{
    base_config(c, examples, 32, 0.0);
    c->epochs = 0;
    c->train_steps = steps;
    snprintf(c->experiment, sizeof c->experiment, "%s", experiment);
    snprintf(c->batch_norm, sizeof c->batch_norm, "sync");
}

bool set_strategy(dr_run_config *c, const char *name, int gpus, const char *alg, int packs)
{
    dr_err err;
    return dr_get_distribution_strategy(name, gpus, alg, packs, NULL, &c->strategy, &err) == DR_OK;
}

static void parse_line(json_object *o, outcome *out)
{
    json_object *bits, *sizes, *ids, *ls;
    uint32_t s = out->nsteps;
    if (s >= MAX_STEPS) return;
    if (json_object_object_get_ex(o, "loss_scale", &ls)) out->loss_scale[s] = (float)json_object_get_double(ls);
    if (json_object_object_get_ex(o, "skipped", &ls)) out->skipped[s] = json_object_get_boolean(ls) ? 2 : 1;
    if (json_object_object_get_ex(o, "loss_bits", &bits))
        out->loss_bits[s] = (uint32_t)strtoul(json_object_get_string(bits), NULL, 16);
    memcpy(&out->loss[s], &out->loss_bits[s], sizeof(float));
    if (json_object_object_get_ex(o, "replica_batch_sizes", &sizes)) {
        size_t n = json_object_array_length(sizes);
        out->nreplicas = n < MAX_REPLICAS ? (uint32_t)n : MAX_REPLICAS;
        for (uint32_t r = 0; r < out->nreplicas; r++)
            out->sizes[s][r] = (uint32_t)json_object_get_int(json_object_array_get_idx(sizes, r));
    }
    if (json_object_object_get_ex(o, "replica_ids", &ids))
        for (uint32_t r = 0; r < out->nreplicas; r++)
            snprintf(out->ids[s][r], 17, "%s", json_object_get_string(json_object_array_get_idx(ids, r)));
    out->nsteps++;
}

static void read_metrics(const char *dir, outcome *out)
{
    char path[1200], line[8192];
    FILE *f;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (!(f = fopen(path, "r"))) { snprintf(out->error, sizeof out->error, "no metrics.jsonl"); return; }
    while (fgets(line, sizeof line, f)) {
        json_object *o = json_tokener_parse(line);
        if (o) { parse_line(o, out); json_object_put(o); }
    }
    fclose(f);
}

static void read_weights(const char *dir, outcome *out)
{
    dr_checkpoint c;
    bool found;
    dr_err err;
    if (dr_checkpoint_load(dir, &c, &found, &err) != DR_OK || !found) return;
    out->weights = c.params;
    out->nweights = c.nparams;
    free(c.slots);
}

/* The reference's outcomes do not change while a fault is planted in the
 * engine, so each reference configuration runs once per process. */
#define CACHE_MAX 32
typedef struct cached { dr_run_config cfg; char *tf_config; outcome out; } cached;

/* Two configurations are the same run when their bytes are equal, except
 * tf_config, a pointer to text: that is compared as text. */
static bool same_config(const cached *c, const dr_run_config *cfg)
{
    dr_run_config a = c->cfg, b = *cfg;
    a.tf_config = b.tf_config = NULL;
    return memcmp(&a, &b, sizeof a) == 0 && strcmp(c->tf_config, cfg->tf_config ? cfg->tf_config : "") == 0;
}

static bool cache_lookup(cached *cache, size_t n, const dr_run_config *cfg, outcome *out)
{
    for (size_t i = 0; i < n; i++) {
        if (!same_config(&cache[i], cfg)) continue;
        *out = cache[i].out;
        out->weights = NULL;
        if (cache[i].out.weights) {
            out->weights = malloc(out->nweights * sizeof(float));
            if (!out->weights) return false;
            memcpy(out->weights, cache[i].out.weights, out->nweights * sizeof(float));
        }
        return true;
    }
    return false;
}

static void run_fresh(const dr_run_config *cfg, outcome *out);

void run_fresh_case(const dr_run_config *cfg, outcome *out) { run_fresh(cfg, out); }

void run_case(const dr_run_config *cfg, outcome *out)
{
    static cached cache[CACHE_MAX];   /* the runner's own memo, not library state */
    static size_t ncache;
    dr_run_config key = *cfg;
    bool cacheable = strcmp(cfg->variant, "ref") == 0 && !cfg->model_dir[0];
    if (cacheable && cache_lookup(cache, ncache, &key, out)) return;
    run_fresh(cfg, out);
    if (cacheable && ncache < CACHE_MAX && !out->error[0]) {
        if (!(cache[ncache].tf_config = strdup(cfg->tf_config ? cfg->tf_config : ""))) return;
        cache[ncache].cfg = key;
        cache[ncache].out = *out;
        if (out->weights && (cache[ncache].out.weights = malloc(out->nweights * sizeof(float))))
            memcpy(cache[ncache].out.weights, out->weights, out->nweights * sizeof(float));
        ncache++;
    }
}

static void run_fresh(const dr_run_config *cfg, outcome *out)
{
    char dir[] = "/tmp/distref_conf_XXXXXX", cmd[1200];
    dr_run_config c = *cfg;
    dr_run_result res;
    dr_err err;
    double t0 = now();
    memset(out, 0, sizeof *out);
    if (!mkdtemp(dir)) { snprintf(out->error, sizeof out->error, "mkdtemp failed"); return; }
    if (!c.model_dir[0]) snprintf(c.model_dir, sizeof c.model_dir, "%s", dir);
    if (dr_run_train(&c, &res, &err) != DR_OK) {
        snprintf(out->error, sizeof out->error, "%s", err.msg);
    } else {
        memcpy(out->sha, res.weights_sha256, 65);
        read_metrics(c.model_dir, out);
        read_weights(c.model_dir, out);
    }
    out->seconds = now() - t0;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
}

bool outcome_same(const outcome *a, const outcome *b)
{
    return a->nsteps == b->nsteps && !a->error[0] && !b->error[0] &&
           memcmp(a->loss_bits, b->loss_bits, a->nsteps * sizeof a->loss_bits[0]) == 0 &&
           memcmp(a->loss_scale, b->loss_scale, a->nsteps * sizeof a->loss_scale[0]) == 0 &&
           memcmp(a->skipped, b->skipped, a->nsteps) == 0 && strcmp(a->sha, b->sha) == 0;
}

bool outcome_same_why(const outcome *a, const outcome *b, char *why, size_t n)
{
    uint32_t s = 0;
    if (a->error[0] || b->error[0]) { snprintf(why, n, "%s", a->error[0] ? a->error : b->error); return false; }
    while (s < a->nsteps && s < b->nsteps && a->loss_bits[s] == b->loss_bits[s]) s++;
    if (a->nsteps == 0 || a->nsteps != b->nsteps || s < a->nsteps) {
        snprintf(why, n, "%u vs %u steps, first differing loss at step %u", a->nsteps, b->nsteps, s + 1);
        return false;
    }
    for (s = 0; s < a->nsteps; s++)
        if (a->loss_scale[s] != b->loss_scale[s] || a->skipped[s] != b->skipped[s]) {
            snprintf(why, n, "every loss equal, loss_scale/skipped differ at step %u (%g/%u vs %g/%u)", s + 1,
                     (double)a->loss_scale[s], a->skipped[s], (double)b->loss_scale[s], b->skipped[s]);
            return false;
        }
    if (!a->weights || !b->weights || a->nweights != b->nweights || strcmp(a->sha, b->sha) != 0 ||
        memcmp(a->weights, b->weights, a->nweights * sizeof(float)) != 0) {
        snprintf(why, n, "every loss equal, final weights differ (weights_sha256 %.12s vs %.12s)", a->sha, b->sha);
        return false;
    }
    return true;
}

double ulp_distance(float a, float b)
{
    int32_t x, y;
    memcpy(&x, &a, 4); memcpy(&y, &b, 4);
    if (x < 0) x = (int32_t)0x80000000 - x;
    if (y < 0) y = (int32_t)0x80000000 - y;
    return fabs((double)x - (double)y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

bool outcome_drift(const outcome *got, const outcome *ref, double *max_rel, double *p99, double *max_ulp,
                   double *differ)
{
    double *u = got->nweights ? malloc(got->nweights * sizeof *u) : NULL;
    *max_rel = 0; *p99 = *max_ulp = *differ = 0;
    for (uint32_t s = 0; s < got->nsteps && s < ref->nsteps; s++) {
        double rel = fabs((double)got->loss[s] - (double)ref->loss[s]) / fabs((double)ref->loss[s]);
        if (rel > *max_rel || isnan(rel)) *max_rel = rel;
    }
    if (!u || !got->weights || !ref->weights || got->nweights != ref->nweights || got->nsteps != ref->nsteps) {
        free(u);
        *max_rel = *p99 = *max_ulp = INFINITY;
        return false;
    }
    for (uint32_t i = 0; i < got->nweights; i++) {
        u[i] = ulp_distance(got->weights[i], ref->weights[i]);
        if (u[i] > *max_ulp) *max_ulp = u[i];
        *differ += u[i] > 0;
    }
    *differ /= got->nweights;
    qsort(u, got->nweights, sizeof *u, cmp_double);
    *p99 = u[got->nweights * 99 / 100];
    free(u);
    return true;
}

void outcome_free(outcome *o)
{
    free(o->weights);
    o->weights = NULL;
}

/* The engine's in-process variants: one with a launcher (mpi: "mpirun -np
 * N") is run under it by its own suite (conformance/mpi.c); the registry
 * lists the reference first and the launched variants last. With
 * --variant NAME (the mutant runs, make nightly's slices) only that one, if
 * it is in-process; --variant ref none (the reference's own cases alone). */
const dr_variant *const *engine_variants(const results *r, size_t *n)
{
    size_t all;
    const dr_variant *const *v = dr_variants(&all);
    if (r->variant && strcmp(r->variant, v[0]->name) == 0) { *n = 0; return v + 1; }
    for (size_t i = 1; r->variant && i < all; i++)
        if (strcmp(v[i]->name, r->variant) == 0) { *n = v[i]->launcher[0] ? 0 : 1; return v + i; }
    *n = all - 1;
    while (*n > 0 && v[*n]->launcher[0]) (*n)--;
    return v + 1;
}

void read_outcome(const char *dir, outcome *out)
{
    char path[1200];
    json_object *o, *sha;
    read_metrics(dir, out);
    read_weights(dir, out);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    if ((o = json_object_from_file(path))) {
        if (json_object_object_get_ex(o, "weights_sha256", &sha))
            snprintf(out->sha, sizeof out->sha, "%s", json_object_get_string(sha));
        json_object_put(o);
    } else if (!out->error[0]) {
        snprintf(out->error, sizeof out->error, "no summary.json in %s", dir);
    }
}

void run_mpi_pair(const results *r, const char *args, outcome *out)
{
    run_mpi_ranks(r, 1, args, out);
}

void run_mpi_ranks(const results *r, int gpus, const char *args, outcome *out)
{
    char dir[] = "/tmp/distref_mpi2_XXXXXX", cmd[2400];
    double t0;
    int st;
    memset(out, 0, sizeof *out);
    if (!mkdtemp(dir)) { snprintf(out->error, sizeof out->error, "mkdtemp failed"); return; }
    snprintf(cmd, sizeof cmd, "env -u TF_CONFIG OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
             "OMP_NUM_THREADS=1 mpirun --oversubscribe -np 2 %s train --variant=mpi "
             "--distribution_strategy=multi_worker_mirrored --num_gpus=%d --seed=7 %s --model_dir=%s "
             "> %s/log.txt 2>&1", r->bin ? r->bin : DR_BIN, gpus, args, dir, dir);
    t0 = now();
    st = system(cmd);
    read_outcome(dir, out);
    out->seconds = now() - t0;
    if (st != 0 && !out->error[0]) snprintf(out->error, sizeof out->error, "mpirun exited with status %d", st);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
}
