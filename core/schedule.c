/* distref core — learning-rate schedules (Keras 3's formulas in float32,
 * Keras's order of operations) and the correctly rounded square root of an
 * exact accumulator (the clipping norms). distref/schedule.h. */
#include "distref/schedule.h"
#include "distref/exact_parts.h"

#include <math.h>
#include <string.h>

static const char *const KIND[] = { "constant", "piecewise", "cosine", "polynomial", "exponential" };

const char *dr_lr_kind_name(dr_lr_kind k)
{
    return (unsigned)k < sizeof KIND / sizeof *KIND ? KIND[k] : NULL;
}

int dr_lr_kind_parse(const char *name, dr_lr_kind *out)
{
    for (unsigned k = 0; k < sizeof KIND / sizeof *KIND; k++)
        if (strcmp(name, KIND[k]) == 0) { *out = (dr_lr_kind)k; return DR_OK; }
    return DR_EUSAGE;
}

int dr_lr_schedule_check(const dr_lr_schedule *s, dr_err *err)
{
    bool decays = s->kind == DR_LR_COSINE || s->kind == DR_LR_POLYNOMIAL || s->kind == DR_LR_EXPONENTIAL;
    if (decays && s->decay_steps == 0)
        return dr_fail(err, DR_EUSAGE, "--decay_steps: --lr_schedule=%s needs --decay_steps > 0",
                       dr_lr_kind_name(s->kind));
    if (s->kind == DR_LR_EXPONENTIAL && !(s->decay_rate > 0.0f))
        return dr_fail(err, DR_EUSAGE, "--decay_rate: --lr_schedule=exponential needs --decay_rate > 0");
    if (s->staircase && s->kind != DR_LR_EXPONENTIAL)
        return dr_fail(err, DR_EUSAGE, "--staircase is a parameter of --lr_schedule=exponential; this run has "
                       "--lr_schedule=%s", dr_lr_kind_name(s->kind));
    if (s->cycle && s->kind != DR_LR_POLYNOMIAL)
        return dr_fail(err, DR_EUSAGE, "--cycle is a parameter of --lr_schedule=polynomial; this run has "
                       "--lr_schedule=%s", dr_lr_kind_name(s->kind));
    if (!(s->warmup_lr >= 0.0f) || isinf(s->warmup_lr))
        return dr_fail(err, DR_EUSAGE, "--warmup_learning_rate: expected a finite rate >= 0");
    if (s->warmup_lr != 0.0f && s->warmup_steps == 0)
        return dr_fail(err, DR_EUSAGE, "--warmup_learning_rate needs --warmup_steps > 0 (it is where the warmup "
                       "starts)");
    if (s->kind == DR_LR_PIECEWISE) {
        if (s->nboundaries == 0)
            return dr_fail(err, DR_EUSAGE, "--boundaries: --lr_schedule=piecewise needs 1 to %d boundaries",
                           DR_LR_MAX_BOUNDARIES);
        for (uint32_t i = 1; i < s->nboundaries; i++)
            if (s->boundaries[i] <= s->boundaries[i - 1])
                return dr_fail(err, DR_EUSAGE, "--boundaries: must increase strictly (%u then %u)",
                               s->boundaries[i - 1], s->boundaries[i]);
        for (uint32_t i = 0; i <= s->nboundaries; i++)
            if (!(s->values[i] >= 0.0f) || isinf(s->values[i]))
                return dr_fail(err, DR_EUSAGE, "--values: each rate must be finite and >= 0");
    }
    return DR_OK;
}

/* CosineDecay's _decay_function: from * ((1 - alpha) * 0.5 * (1 + cos(pi * t / ds)) + alpha),
 * (1 - alpha) a Python double rounded to float32, cos a float32 op. */
static float cosine(const dr_lr_schedule *s, float t, float from)
{
    float ds = (float)s->decay_steps, frac = t / ds;
    float pif = (float)3.14159265358979323846;
    float c = 0.5f * (1.0f + (float)cos((double)(pif * frac)));
    float one_alpha = (float)(1.0 - (double)s->alpha);
    return from * (one_alpha * c + s->alpha);
}

/* The schedule at iteration `it` (0-based, after any warmup offset). */
static float decayed(const dr_lr_schedule *s, float lr, uint64_t it)
{
    float st = (float)it, ds = (float)s->decay_steps;
    switch (s->kind) {
    case DR_LR_COSINE:
        return cosine(s, fminf(st, ds), lr);
    case DR_LR_POLYNOMIAL: {   /* cycle: the first multiple of ds at or past st (1 at st = 0), in float32 */
        float span = s->cycle ? ds * (st == 0.0f ? 1.0f : ceilf(st / ds)) : ds;
        float p = (s->cycle ? st : fminf(st, ds)) / span;
        float end = s->end_learning_rate;
        return (lr - end) * (float)pow((double)(1.0f - p), (double)s->power) + end;
    }
    case DR_LR_EXPONENTIAL: {
        float p = st / ds;
        return lr * (float)pow((double)s->decay_rate, (double)(s->staircase ? floorf(p) : p));
    }
    case DR_LR_PIECEWISE:
        for (uint32_t i = 0; i < s->nboundaries; i++)
            if (it <= s->boundaries[i]) return s->values[i];
        return s->values[s->nboundaries];
    default:
        return lr;
    }
}

float dr_lr_at(const dr_lr_schedule *s, float lr, uint64_t update)
{
    uint64_t it = update > 0 ? update - 1 : 0;   /* optimizer.iterations before the update */
    if (s->warmup_steps > 0 && it < s->warmup_steps) {
        float target = s->kind == DR_LR_PIECEWISE ? s->values[0] : lr, from = s->warmup_lr;
        return (target - from) * ((float)it / (float)s->warmup_steps) + from;   /* Keras's _warmup_function */
    }
    return decayed(s, lr, it - s->warmup_steps);
}

/* ---- sqrt of an exact accumulator ---------------------------------------- */

/* Sign of the exact value (flags aside). */
static int acc_sign(dr_acc *t)
{
    dr_acc_normalize(t);
    if (t->limb[DR_ACC_LIMBS - 1] < 0) return -1;
    for (int i = 0; i < DR_ACC_LIMBS; i++)
        if (t->limb[i] != 0) return 1;
    return 0;
}

/* Sign of K*S - K*(a + d/2)^2, K = 2^60 when scaled (a and d then < 2^-60,
 * scaled by 2^30 so that d/2 is a float). */
static int cmp_mid(const dr_acc *S, float a, float d, bool scaled)
{
    dr_acc t = *S;
    if (scaled) {
        dr_acc_mul_u32(&t, 1u << 30);
        dr_acc_mul_u32(&t, 1u << 30);
        a *= 0x1p30f;
        d *= 0x1p30f;
    }
    float h = d * 0.5f;
    dr_acc_add_prod(&t, -a, a);
    dr_acc_add_prod(&t, -a, d);
    dr_acc_add_prod(&t, -h, h);
    return acc_sign(&t);
}

static float from_bits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }

/* Is the float with bits b at most the rounded root: S > mid(b-1, b)^2, or
 * equal with b even (ties to even)? */
static bool at_most_root(const dr_acc *S, uint32_t b, bool small)
{
    float a = from_bits(b - 1);
    float d = b == 0x7f800000u ? 0x1p104f : from_bits(b) - a;
    if (a < 0x1p-60f && !small) return true;    /* S >= 2^200 > any such midpoint^2 */
    int c = cmp_mid(S, a, d, a < 0x1p-60f);
    return c > 0 || (c == 0 && (b & 1u) == 0);
}

float dr_acc_sqrt(const dr_acc *a)
{
    uint32_t lo = 0, hi = 0x7f800000u;
    if ((a->flags & (DR_ACC_F_NAN | DR_ACC_F_NEG_INF))) return NAN;
    if (a->flags & DR_ACC_F_POS_INF) return INFINITY;
    dr_acc t = *a;
    int sign = acc_sign(&t);
    if (sign < 0) return NAN;
    if (sign == 0) return 0.0f;
    dr_acc big = t;                                  /* small: S < 2^200 */
    dr_acc_add_prod(&big, -0x1p100f, 0x1p100f);
    bool small = acc_sign(&big) < 0;
    while (lo < hi) {   /* the largest b with at_most_root(b); b = 0 always qualifies */
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (at_most_root(&t, mid, small)) lo = mid;
        else hi = mid - 1;
    }
    return from_bits(lo);
}
