/* distref engine — --gradient_accumulation_steps: a micro-step's shares
 * added to each replica's accumulator, and on the k-th the update's shares
 * handed to the collective (step.c's worker_reduce, engine_tpu.c), after
 * --clip_semantics=tensorflow's per-replica clip of their mean. What
 * accumulation computes: step.c's "gradient accumulation" section and
 * docs/TRAINING_FEATURES.md. */
#include "strategies/engine_internal.h"

#include <omp.h>
#include <string.h>

#include "strategies/seams.h"
#include "devices/cpu/grad_clip.h"

#define ACCUM_CHUNK 4096   /* parameters a task of the merge adds */

/* This micro-step's shares (local: replicas lo .. lo + L - 1) added to
 * their accumulators; on the k-th (returns true) the earlier ones are added
 * to local, which then holds the update's shares for the collective, and
 * float accumulators start over from 0 (Keras's acc = 0 + g; exact ones are
 * overwritten by the next first share). Every strategy's step (step.c's,
 * engine_tpu.c's) calls it between compute and its collective. */
bool engine_accumulate(dr_session *s, const dr_form *f, void *const *local, uint32_t lo, uint32_t L)
{
    const size_t P = s->plan->P, nc = (P + ACCUM_CHUNK - 1) / ACCUM_CHUNK;
    const bool update = s->step % s->k == 0;
    if (f->exact && s->step % s->k == 1) {   /* the first share: an exact sum of one term is the term */
        for (uint32_t j = 0; j < L; j++) memcpy(s->accum[lo + j], local[j], P * f->size);
        return update;
    }
    #pragma omp parallel for schedule(static) if (nc * L > 1 && !omp_in_parallel())
    for (size_t t = 0; t < nc * L; t++) {
        uint32_t j = (uint32_t)(t / nc);
        size_t p0 = (t % nc) * ACCUM_CHUNK, n = P - p0 < ACCUM_CHUNK ? P - p0 : ACCUM_CHUNK;
        char *a = (char *)s->accum[lo + j] + p0 * f->size, *x = (char *)local[j] + p0 * f->size;
        if (update) f->merge_after(x, a, n);   /* the earlier micro-steps, then this one */
        else f->merge(a, x, n);
    }
    for (uint32_t j = 0; update && !f->exact && j < L; j++) memset(s->accum[lo + j], 0, P * f->size);
    return update;
}

/* Keras 3 (scripts/tf_accum_clip.py, measured): at the update each replica
 * clips (g + acc) / k, the mean of its own micro-steps' gradients, and the
 * all-reduce sums the clipped means. Exact: RN(sum of the k shares / d),
 * clipped and put back over d (devices/cpu/grad_clip.c, the share's clip);
 * fast: the float sum over k, clipped, times k again (the update divides
 * the total by k). */
int engine_accum_clip(dr_session *s, void *const *local, uint32_t L, uint32_t d, dr_err *err)
{
    const dr_clip *c = &s->plan->exp.optimizer.clip;
    const size_t P = s->plan->P;
    const uint32_t over = DR_SEAM_ACCUM_CLIP_DIVISOR(d, s->k);
    for (uint32_t j = 0; c->at_update && j < L; j++) {
        float *g = local[j];
        int rc;
        if (s->num == DR_NUMERICS_FAST) for (size_t p = 0; p < P; p++) g[p] /= (float)over;
        if ((rc = dr_engine_clip_share(c, &s->plan->exp.model, s->num, local[j], P, over, err))) return rc;
        if (s->num == DR_NUMERICS_FAST) for (size_t p = 0; p < P; p++) g[p] *= (float)over;
    }
    return DR_OK;
}
