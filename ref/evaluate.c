/* distref reference — evaluate's and predict's forward pass (dr_infer_ops,
 * distref/variant.h): the plain exact pass in inference mode (BN's moving
 * statistics, Dropout off: ref/layers.c reads no batch statistics outside
 * training), each example's loss and the last layer's output. What is
 * evaluated and how the losses are summed is harness/run_evaluate.c's, the
 * same under every variant. */
#include "ref/trainer.h"

#include <stdlib.h>
#include <string.h>

typedef struct ref_infer {
    const dr_model_spec *m;
    float  *params;
    dr_work work;
} ref_infer;

static void ref_infer_close(void *p)
{
    ref_infer *e = p;
    if (!e) return;
    free(e->params);
    dr_work_free(&e->work);
    free(e);
}

static int ref_infer_open(const dr_model_spec *m, const dr_run_config *cfg, const float *params, uint32_t rows,
                          void **out, dr_err *err)
{
    size_t P = dr_model_num_params(m);
    ref_infer *e;
    int rc;
    if (strcmp(cfg->numerics, "exact") != 0)   /* as its training: the reference is the exact oracle */
        return dr_fail(err, DR_EUSAGE, "not supported: --numerics=%s under --variant=ref: the reference is "
                       "exact only (--variant=openmp evaluates fast)", cfg->numerics);
    if (!(e = calloc(1, sizeof *e)) || !(e->params = malloc(P * sizeof(float) + 1))) {
        ref_infer_close(e);
        return dr_fail(err, DR_ENOMEM, "out of memory for the evaluated weights");
    }
    e->m = m;
    memcpy(e->params, params, P * sizeof(float));
    if ((rc = dr_work_init(&e->work, m, rows, err))) { ref_infer_close(e); return rc; }
    *out = e;
    return DR_OK;
}

static int ref_infer_batch(void *p, const float *x, const uint8_t *labels, const float *targets, uint32_t n,
                           float *loss, float *out, dr_err *err)
{
    ref_infer *e = p;
    const dr_model_ops *ops = dr_model_ops_ref();
    uint32_t L = e->m->nlayers;
    (void)err;
    dr_model_forward(e->m, ops, e->params, x, n, &e->work);
    dr_model_example_losses(e->m, ops, &e->work, n, labels, targets, loss, NULL);
    memcpy(out, e->work.act[L], (size_t)n * e->m->layer[L - 1].out * sizeof(float));
    return DR_OK;
}

static float ref_infer_reg_loss(void *p)
{
    const ref_infer *e = p;
    return dr_model_reg_loss(e->m, e->params);
}

const dr_infer_ops dr_ref_infer_ops = {
    .open = ref_infer_open,
    .batch = ref_infer_batch,
    .reg_loss = ref_infer_reg_loss,
    .close = ref_infer_close,
};
