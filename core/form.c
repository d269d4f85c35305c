/* distref core — the four number forms' traits (distref/form.h). */
#include "distref/form.h"
#include "distref/cacc.h"
#include "distref/exact.h"
#include "core/seams.h"

#include <string.h>

/* ---- full exact accumulators ---------------------------------------------- */

static void merge_acc(void *dst, const void *src, size_t k)
{
    for (size_t i = 0; i < k; i++) dr_acc_merge((dr_acc *)dst + i, (const dr_acc *)src + i);
}

static void ser_acc(const void *src, size_t k, uint8_t *out)
{
    for (size_t i = 0; i < k; i++) dr_acc_serialize((const dr_acc *)src + i, out + i * DR_ACC_BYTES);
}

static bool deser_acc(void *dst, size_t k, const uint8_t *in)
{
    for (size_t i = 0; i < k; i++)
        if (!dr_acc_deserialize((dr_acc *)dst + i, in + i * DR_ACC_BYTES)) return false;
    return true;
}

static void round_acc(const void *src, size_t k, uint32_t d, float *out)
{
    for (size_t i = 0; i < k; i++) out[i] = dr_acc_round_div((const dr_acc *)src + i, d);
}

/* ---- compact exact accumulators -------------------------------------------- */

static void merge_cacc(void *dst, const void *src, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        DR_SEAM_CACC_MERGE((dr_cacc *)dst + i, (const dr_cacc *)src + i);
    }
}

static void ser_cacc(const void *src, size_t k, uint8_t *out)
{
    for (size_t i = 0; i < k; i++) dr_cacc_serialize((const dr_cacc *)src + i, out + i * DR_CACC_BYTES);
}

static bool deser_cacc(void *dst, size_t k, const uint8_t *in)
{
    for (size_t i = 0; i < k; i++)
        if (!dr_cacc_deserialize((dr_cacc *)dst + i, in + i * DR_CACC_BYTES)) return false;
    return true;
}

/* Eight at a time (dr_cacc_round_div_n), the same bits as one by one. */
static void round_cacc(const void *src, size_t k, uint32_t d, float *out)
{
    dr_cacc_round_div_n(src, k, d, out);
}

/* ---- floats ------------------------------------------------------------------ */

/* Plain loops over IEEE additions: vectorizing them changes no bit. */
static void merge_f32(void *dst, const void *src, size_t k)
{
    float *d = dst;
    const float *s = src;
    #pragma omp simd
    for (size_t i = 0; i < k; i++) d[i] = d[i] + s[i];
}

static void merge_after_f32(void *dst, const void *src, size_t k)
{
    float *d = dst;
    const float *s = src;
    #pragma omp simd
    for (size_t i = 0; i < k; i++) d[i] = s[i] + d[i];
}

/* Floats travel as their bytes (every rank runs the same architecture). */
static void ser_f32(const void *src, size_t k, uint8_t *out)
{
    memcpy(out, src, k * sizeof(float));
}

static bool deser_f32(void *dst, size_t k, const uint8_t *in)
{
    memcpy(dst, in, k * sizeof(float));
    return true;
}

static void round_f32(const void *src, size_t k, uint32_t d, float *out)
{
    const float *s = src, fd = (float)d;
    #pragma omp simd
    for (size_t i = 0; i < k; i++) out[i] = s[i] / fd;
}

static const dr_form forms[DR_FORM_COUNT] = {
    [DR_FORM_ACC] = { .id = DR_FORM_ACC, .name = "acc", .size = sizeof(dr_acc), .wire = DR_ACC_BYTES,
                      .exact = true, .copy_first = false, .merge = merge_acc, .merge_after = merge_acc,
                      .serialize = ser_acc, .deserialize = deser_acc, .round = round_acc },
    [DR_FORM_CACC] = { .id = DR_FORM_CACC, .name = "cacc", .size = sizeof(dr_cacc), .wire = DR_CACC_BYTES,
                       .exact = true, .copy_first = false, .merge = merge_cacc, .merge_after = merge_cacc,
                       .serialize = ser_cacc, .deserialize = deser_cacc, .round = round_cacc },
    [DR_FORM_F32] = { .id = DR_FORM_F32, .name = "f32", .size = sizeof(float), .wire = sizeof(float),
                      .exact = false, .copy_first = true, .merge = merge_f32, .merge_after = merge_after_f32,
                      .serialize = ser_f32, .deserialize = deser_f32, .round = round_f32 },
    /* no merge: partial sums of floats would be rounded (distref/form.h) */
    [DR_FORM_F32_EXACT] = { .id = DR_FORM_F32_EXACT, .name = "f32_exact", .size = sizeof(float),
                            .wire = sizeof(float), .exact = true, .copy_first = true,
                            .serialize = ser_f32, .deserialize = deser_f32, .round = round_f32 },
};

const dr_form *dr_form_of(dr_form_id id)
{
    return (unsigned)id < (unsigned)DR_FORM_COUNT ? &forms[id] : NULL;
}
