/* distref core — a model as data: parameter layout, initial values, and
 * the optimizer's slot count (see include/distref/model.h). The math that
 * trains a model is not here: the reference has its own (ref/model_math.c) and
 * the engine its own (devices/). */
#include "distref/model.h"
#include "distref/rng.h"

#include <math.h>
#include <string.h>

size_t dr_model_kernel_offset(const dr_model_spec *m, uint32_t layer)
{
    size_t off = 0;
    for (uint32_t l = 0; l < layer; l++) off += dr_model_layer_params(m, l);
    return off;
}

size_t dr_model_bias_offset(const dr_model_spec *m, uint32_t layer)
{
    return dr_model_kernel_offset(m, layer) + (size_t)m->layer[layer].in * m->layer[layer].out;
}

size_t dr_model_layer_params(const dr_model_spec *m, uint32_t layer)
{
    return (size_t)m->layer[layer].in * m->layer[layer].out + m->layer[layer].out;
}

size_t dr_model_num_params(const dr_model_spec *m)
{
    return dr_model_kernel_offset(m, m->nlayers);
}

void dr_model_init(const dr_model_spec *m, uint64_t seed, float *params)
{
    for (uint32_t l = 0; l < m->nlayers; l++) {
        size_t nk = (size_t)m->layer[l].in * m->layer[l].out;
        float *w = params + dr_model_kernel_offset(m, l);
        float limit = sqrtf(6.0f / (float)(m->layer[l].in + m->layer[l].out));
        for (size_t k = 0; k < nk; k++)
            w[k] = (2.0f * dr_rng_uniform(seed, DR_STREAM_INIT + l, k) - 1.0f) * limit;
        memset(w + nk, 0, m->layer[l].out * sizeof *w);
    }
}

int dr_optimizer_num_slots(const dr_optimizer *o)
{
    if (o->kind == DR_OPT_ADAM) return 2;
    return o->momentum != 0.0f ? 1 : 0;
}

