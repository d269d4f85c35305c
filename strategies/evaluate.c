/* distref engine — evaluate's and predict's forward pass (dr_infer_ops,
 * distref/variant.h) on the backend's own kernels: a Dense model through
 * forward(), any other through graph_begin (rt.training false) and
 * layer_forward layer by layer, BatchNormalization with its moving
 * statistics and Dropout off, then the backend's outputs op (each example's
 * loss as loss_grad sums it, the top map). One replica's buffers compute
 * every replica batch in turn: inference has no statistics to share between
 * replicas, so the split (harness/run_evaluate.c's, the reference's) is all
 * that R changes. Exact numerics give the reference's per-example bits, so
 * eval.json and predictions.jsonl are the reference's, byte for byte.
 * Under mpirun (the mpi variant's ops) each rank takes a contiguous run of
 * the global batches (share) and the ranks' totals combine exactly
 * (combine: the comm's exact all-reduce of accumulators) or their
 * predictions' lines are gathered to rank 0 in rank order (gather). */
#include "strategies/engine_internal.h"
#include "distref/mpi.h"
#include "distref/opencl.h"

#include <stdlib.h>
#include <string.h>

#include "strategies/seams.h"

typedef struct engine_infer {
    const dr_model_spec  *m;
    const dr_backend_ops *bo;
    dr_backend           *be;
    dr_replica_bufs       rb;
    dr_numerics           num;
    float                 reg;         /* the weights' regularization loss */
    dr_session            policy;      /* only engine.c's thread policy's fields */
    dr_comm              *comm;        /* mpi under mpirun: this rank's endpoint (NULL: one process) */
    uint32_t              rank, W;
} engine_infer;

static void infer_close(void *p)
{
    engine_infer *e = p;
    if (!e) return;
    dr_buffer *bufs[] = { e->rb.params, e->rb.grad, e->rb.loss, e->rb.x, e->rb.labels, e->rb.targets };
    if (e->rb.scratch) e->bo->replica_close(e->be, &e->rb);
    for (size_t i = 0; e->be && i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i]) e->bo->release(e->be, bufs[i]);
    if (e->be) e->bo->close(e->be);
    if (e->comm) dr_comm_mpi()->close(&e->comm, 1);
    engine_threads_leave(&e->policy);
    free(e);
}

static int infer_buffers(engine_infer *e, const float *params, uint32_t rows, dr_err *err)
{
    const dr_model_spec *m = e->m;
    size_t P = dr_model_num_params(m), out = m->layer[m->nlayers - 1].out;
    dr_numerics num = e->num;
    int rc;
    if ((rc = e->bo->alloc(e->be, P * sizeof(float), &e->rb.params, err)) ||
        (rc = e->bo->alloc(e->be, P * dr_grad_bytes(num), &e->rb.grad, err)) ||
        (rc = e->bo->alloc(e->be, dr_sum_bytes(num), &e->rb.loss, err)) ||
        (rc = e->bo->alloc(e->be, (size_t)rows * m->layer[0].in * sizeof(float) + 1, &e->rb.x, err)) ||
        (rc = e->bo->alloc(e->be, rows + 1, &e->rb.labels, err)) ||
        (rc = e->bo->alloc(e->be, (size_t)rows * out * sizeof(float) + 1, &e->rb.targets, err)) ||
        (rc = e->bo->upload(e->be, e->rb.params, 0, params, P * sizeof(float), err)) ||
        (rc = e->bo->replica_open(e->be, &e->rb, rows, err)))
        return rc;
    return DR_OK;
}

static int infer_open(const dr_backend_ops *bo, const dr_model_spec *m, const dr_run_config *cfg,
                      const float *params, uint32_t rows, void **out, dr_err *err)
{
    /* the backend opens with an optimizer; inference applies none */
    const dr_optimizer sgd = { .kind = DR_OPT_SGD };
    dr_backend_params bp = { .model = m, .optimizer = &sgd, .places = 1, .platform = (int)cfg->opencl_platform,
                             .devices = cfg->opencl_device };
    engine_infer *e;
    int rc;
    if (!bo->outputs)
        return dr_fail(err, DR_EUNSUPPORTED, "not supported: evaluate and predict on the %s backend (it has no "
                       "outputs op)", bo->name);
    if (!(e = calloc(1, sizeof *e))) return dr_fail(err, DR_ENOMEM, "out of host memory for evaluation");
    e->m = m;
    e->bo = bo;
    e->num = bp.numerics = strcmp(cfg->numerics, "fast") == 0 ? DR_NUMERICS_FAST : DR_NUMERICS_EXACT;
    engine_threads_enter(&e->policy, cfg->threads);
    e->reg = engine_l2_loss(m, params);
    if ((rc = bo->open(&bp, &e->be, err)) || (rc = infer_buffers(e, params, rows, err))) {
        infer_close(e);
        return rc;
    }
    *out = e;
    return DR_OK;
}

static int omp_infer_open(const dr_model_spec *m, const dr_run_config *cfg, const float *params, uint32_t rows,
                          void **out, dr_err *err)
{
    return infer_open(dr_backend_openmp(), m, cfg, params, rows, out, err);
}

static int ocl_infer_open(const dr_model_spec *m, const dr_run_config *cfg, const float *params, uint32_t rows,
                          void **out, dr_err *err)
{
    return infer_open(dr_backend_opencl(), m, cfg, params, rows, out, err);
}

/* mpi: the rank's own backend (openmp), and an endpoint of the MPI comm
 * for combine. Without MPI initialized (a test calling the harness in one
 * process) it is one process, as openmp. */
static int mpi_infer_open(const dr_model_spec *m, const dr_run_config *cfg, const float *params, uint32_t rows,
                          void **out, dr_err *err)
{
    static const size_t one = 1;   /* one tensor: the loss sum */
    dr_comm_config cc = { .local_replicas = 1, .alg = DR_COMM_RING, .tensor_len = &one, .ntensors = 1,
                          .timeout_s = cfg->collective_timeout };
    engine_infer *e;
    uint32_t neps = 0;
    int rc = infer_open(dr_backend_openmp(), m, cfg, params, rows, out, err);
    if (rc || !dr_mpi_active()) return rc;
    e = *out;
    dr_mpi_world(&e->rank, &e->W);
    cc.num_ranks = e->W;
    if ((rc = dr_comm_mpi()->open(&cc, &e->comm, &neps, err))) {
        e->comm = NULL;
        infer_close(e);
        *out = NULL;
    }
    return rc;
}

static int infer_batch(void *p, const float *x, const uint8_t *labels, const float *targets, uint32_t n,
                       float *loss, float *out, dr_err *err)
{
    engine_infer *e = p;
    const dr_model_spec *m = e->m;
    const dr_backend_ops *bo = e->bo;
    /* inference: float32, no Dropout, so no masks' keys (seed, step, ids) */
    dr_graph_rt rt = { .training = DR_SEAM_INFER_TRAINING, .n = n, .compute = DR_DTYPE_F32, .loss_scale = 1.0f, .G = n };
    int rc = bo->upload(e->be, e->rb.x, 0, x, (size_t)n * m->layer[0].in * sizeof(float), err);
    if (rc == DR_OK && labels) rc = bo->upload(e->be, e->rb.labels, 0, labels, n, err);
    if (rc == DR_OK && targets)
        rc = bo->upload(e->be, e->rb.targets, 0, targets, (size_t)n * m->layer[m->nlayers - 1].out * sizeof(float), err);
    if (rc) return rc;
    if (dr_model_is_dense(m)) {
        rc = bo->forward(e->be, &e->rb, n, 0, err);
    } else {
        rc = bo->graph_begin(e->be, &e->rb, n, &rt, err);
        for (uint32_t l = 0; rc == DR_OK && l < m->nlayers; l++) rc = bo->layer_forward(e->be, &e->rb, l, err);
    }
    return rc ? rc : bo->outputs(e->be, &e->rb, n, loss, out, err);
}

static float infer_reg_loss(void *p) { return ((const engine_infer *)p)->reg; }

/* Rank w of W: the batches [nb*w/W, nb*(w+1)/W), so the shares in rank
 * order are the one-process run's batches in order, each batch the same
 * replica batches (the same bits under fast numerics too). */
static void mpi_share(void *p, uint64_t nb, uint64_t *lo, uint64_t *hi)
{
    const engine_infer *e = p;
    uint32_t W = e->comm ? e->W : 1, w = e->comm ? e->rank : 0;
    *lo = DR_SEAM_EVAL_SHARE_LO(nb * w / W, w);
    *hi = nb * (w + 1) / W;
}

/* The loss by the exact all-reduce of accumulators (DR_FORM_ACC: no
 * order or rank count changes a bit), the counts gathered and added in
 * rank order. A barrier first, without a deadline: a rank whose share was
 * short or empty would wait in the comm for as long as another's share
 * takes, and the comm takes a peer that computes without answering its
 * pings for a dead one. */
static int mpi_combine(void *p, dr_acc *loss, uint64_t *counts, uint32_t n, dr_err *err)
{
    engine_infer *e = p;
    void *local[1] = { loss };
    uint64_t *all;
    int rc;
    if (!e->comm) return DR_OK;
    if (!(all = calloc((size_t)e->W * n + 1, sizeof *all))) return dr_fail(err, DR_ENOMEM, "no memory for the counts");
    DR_SEAM_EVAL_COMBINE_ROUNDED(loss);
    if ((rc = dr_mpi_barrier(err)) == DR_OK &&
        (rc = dr_comm_mpi()->all_reduce(e->comm, DR_FORM_ACC, local, 1, err)) == DR_OK &&
        (rc = dr_comm_mpi()->all_gather(e->comm, counts, (size_t)n * sizeof *counts, all, err)) == DR_OK)
        for (uint32_t i = 0; i < n; i++) {
            counts[i] = 0;
            for (uint32_t w = 0; w < e->W; w++) counts[i] += all[(size_t)w * n + i];
        }
    free(all);
    return rc;
}

const dr_infer_ops engine_infer_openmp = {
    .open = omp_infer_open,
    .batch = infer_batch,
    .reg_loss = infer_reg_loss,
    .close = infer_close,
};

const dr_infer_ops engine_infer_opencl = {
    .open = ocl_infer_open,
    .batch = infer_batch,
    .reg_loss = infer_reg_loss,
    .close = infer_close,
};

static int mpi_gather(void *p, const void *mine, size_t n, void **all, size_t *len, dr_err *err)
{
    engine_infer *e = p;
    if (e->comm) return dr_mpi_gather0(mine, n, all, len, err);   /* no deadline: the shares take their time */
    *len = n;   /* one process: its own bytes */
    if (!(*all = malloc(n + 1))) return dr_fail(err, DR_ENOMEM, "no memory for the predictions");
    if (n) memcpy(*all, mine, n);
    return DR_OK;
}

const dr_infer_ops engine_infer_mpi = {
    .open = mpi_infer_open,
    .batch = infer_batch,
    .reg_loss = infer_reg_loss,
    .close = infer_close,
    .share = mpi_share,
    .combine = mpi_combine,
    .gather = mpi_gather,
};
