/* distref core — bin/distref's learning-rate schedule and clipping flags
 * into a dr_run_config (distref/cli_flags.h, distref/schedule.h): each
 * value checked, each parameter refused where its schedule does not read
 * it (as --momentum is refused for adam), DR_EUSAGE naming the flag. */
#include "distref/cli_flags.h"
#include "distref/schedule.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool seen(const dr_flag *f, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(f[i].name, name) == 0) return f[i].seen;
    return false;
}

/* A comma-separated list of numbers: integers in [0, 2^31) (ints != NULL)
 * or finite reals >= 0, at most `max`. */
static int list(const char *flag, const char *s, uint32_t *ints, float *reals, uint32_t max, uint32_t *count,
                dr_err *err)
{
    uint32_t k = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || !isfinite(v) || v < 0 || (ints && (v != floor(v) || v >= 2147483648.0)))
            return dr_fail(err, DR_EUSAGE, "--%s=%s: expected %s, comma-separated", flag, s,
                           ints ? "steps (integers >= 0)" : "rates (numbers >= 0)");
        if (k == max) return dr_fail(err, DR_EUSAGE, "--%s=%s: at most %u entries", flag, s, max);
        if (ints) ints[k++] = (uint32_t)v;
        else reals[k++] = (float)v;
        p = end;
        if (*p == ',') p++;
        else if (*p) return dr_fail(err, DR_EUSAGE, "--%s=%s: expected a comma after '%.*s'", flag, s,
                                    (int)(p - s), s);
    }
    *count = k;
    return DR_OK;
}

/* Each schedule parameter and the one schedule that reads it. */
static const struct { const char *flag; dr_lr_kind kind; } OWNER[] = {
    { "decay_steps", DR_LR_COSINE }, { "alpha", DR_LR_COSINE }, { "end_learning_rate", DR_LR_POLYNOMIAL },
    { "power", DR_LR_POLYNOMIAL }, { "decay_rate", DR_LR_EXPONENTIAL }, { "boundaries", DR_LR_PIECEWISE },
    { "values", DR_LR_PIECEWISE }, { "staircase", DR_LR_EXPONENTIAL }, { "cycle", DR_LR_POLYNOMIAL },
};

static int scope(const dr_flag *f, int n, dr_lr_kind k, dr_err *err)
{
    for (size_t i = 0; i < sizeof OWNER / sizeof *OWNER; i++) {
        bool decay_steps_ok = strcmp(OWNER[i].flag, "decay_steps") == 0 &&
                              (k == DR_LR_POLYNOMIAL || k == DR_LR_EXPONENTIAL);
        if (seen(f, n, OWNER[i].flag) && OWNER[i].kind != k && !decay_steps_ok)
            return dr_fail(err, DR_EUSAGE, "--%s is a parameter of --lr_schedule=%s%s; this run has "
                           "--lr_schedule=%s", OWNER[i].flag, dr_lr_kind_name(OWNER[i].kind),
                           strcmp(OWNER[i].flag, "decay_steps") == 0 ? "|polynomial|exponential" : "",
                           dr_lr_kind_name(k));
    }
    if (k == DR_LR_PIECEWISE && seen(f, n, "learning_rate"))
        return dr_fail(err, DR_EUSAGE, "--learning_rate with --lr_schedule=piecewise: the rates are --values");
    return DR_OK;
}

static int schedule(const dr_cli_flags *c, const dr_flag *f, int n, dr_lr_schedule *s, dr_err *err)
{
    uint32_t nv = 0;
    int rc;
    memset(s, 0, sizeof *s);
    if (dr_lr_kind_parse(c->lr_schedule, &s->kind))
        return dr_fail(err, DR_EUSAGE, "--lr_schedule=%s: expected constant, piecewise, cosine, polynomial or "
                       "exponential", c->lr_schedule);
    if ((rc = scope(f, n, s->kind, err))) return rc;
    s->warmup_steps = (uint32_t)c->warmup_steps;
    s->decay_steps = (uint32_t)c->decay_steps;
    s->end_learning_rate = (float)c->end_learning_rate;
    s->power = (float)c->power;
    s->alpha = (float)c->alpha;
    s->decay_rate = (float)c->decay_rate;
    s->staircase = c->staircase;
    s->cycle = c->cycle;
    s->warmup_lr = (float)c->warmup_learning_rate;
    if (s->kind == DR_LR_PIECEWISE) {
        if ((rc = list("boundaries", c->boundaries, s->boundaries, NULL, DR_LR_MAX_BOUNDARIES, &s->nboundaries, err)) ||
            (rc = list("values", c->values, NULL, s->values, DR_LR_MAX_BOUNDARIES + 1, &nv, err)))
            return rc;
        if (nv != s->nboundaries + 1)
            return dr_fail(err, DR_EUSAGE, "--values: %u rates for %u boundaries; expected %u (one more)", nv,
                           s->nboundaries, s->nboundaries + 1);
    }
    return dr_lr_schedule_check(s, err);
}

int dr_cli_flags_training(const dr_cli_flags *c, const dr_flag *f, int n, dr_run_config *cfg, dr_err *err)
{
    const struct { const char *flag; double v; float *dst; } clip[] = {
        { "clipnorm", c->clipnorm, &cfg->clip.clipnorm }, { "clipvalue", c->clipvalue, &cfg->clip.clipvalue },
        { "global_clipnorm", c->global_clipnorm, &cfg->clip.global_clipnorm },
    };
    const char *first = NULL;
    memset(&cfg->clip, 0, sizeof cfg->clip);
    for (size_t i = 0; i < sizeof clip / sizeof *clip; i++) {
        if (!seen(f, n, clip[i].flag)) continue;
        if (!(clip[i].v > 0) || !((float)clip[i].v > 0) || isinf((float)clip[i].v))
            return dr_fail(err, DR_EUSAGE, "--%s=%g: expected a float > 0 (0 is not \"off\": leave the flag out)",
                           clip[i].flag, clip[i].v);
        if (first)
            return dr_fail(err, DR_EUSAGE, "--%s and --%s: at most one clipping flag (Keras applies only one)",
                           first, clip[i].flag);
        first = clip[i].flag;
        *clip[i].dst = (float)clip[i].v;
    }
    if (strcmp(c->clip_semantics, "exact") != 0 && strcmp(c->clip_semantics, "tensorflow") != 0)
        return dr_fail(err, DR_EUSAGE, "--clip_semantics=%s: expected exact or tensorflow", c->clip_semantics);
    if (seen(f, n, "clip_semantics") && !first)
        return dr_fail(err, DR_EUSAGE, "--clip_semantics applies to a clipping flag (--clipnorm, --clipvalue or "
                       "--global_clipnorm); none is given");
    cfg->clip.per_replica = strcmp(c->clip_semantics, "tensorflow") == 0;
    cfg->gradient_accumulation_steps = (uint32_t)c->gradient_accumulation_steps;
    return schedule(c, f, n, &cfg->lr_schedule, err);
}
