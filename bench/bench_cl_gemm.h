/* distref bench — one GEMM on the OpenCL device, as bench_opencl and the
 * nightly bench time it: C = A B, row-major, M x K times K x N, the fast
 * kernel (devices/opencl/cl/kernels.cl gemm_fast_v, dr_cl_fast_gemm) or the exact
 * one (K_GEMM_EXACT), on the device's buffers, each call waited for
 * (clFinish) so that a timed call is the kernel's whole time.
 *
 *   bench_cl_gemm *g = bench_cl_gemm_open(M, K, N, a, b);   (NULL + stderr on error)
 *   bench_cl_gemm_run(g) / bench_cl_gemm_run_exact(g);     (0, or -1 + stderr)
 *   bench_cl_gemm_close(g);
 */
#ifndef DISTREF_BENCH_CL_GEMM_H
#define DISTREF_BENCH_CL_GEMM_H

#include <stdio.h>
#include <stdlib.h>

#include "devices/opencl/opencl_backend.h"
#include "distref/opencl.h"

typedef struct bench_cl_gemm {
    dr_backend *b;
    cl_mem A, B, C;
    uint32_t M, K, N;
} bench_cl_gemm;

static inline void bench_cl_gemm_close(bench_cl_gemm *g)
{
    if (!g) return;
    if (g->A) clReleaseMemObject(g->A);
    if (g->B) clReleaseMemObject(g->B);
    if (g->C) clReleaseMemObject(g->C);
    if (g->b) dr_backend_opencl()->close(g->b);
    free(g);
}

/* The device selected as a run would select it (DISTREF_OPENCL_*), fast
 * numerics; a and b (M x K and K x N floats) are copied to the device. */
static inline bench_cl_gemm *bench_cl_gemm_open(uint32_t M, uint32_t K, uint32_t N, const float *a, const float *b)
{
    dr_model_spec m = { .nlayers = 1, .layer = { { .in = 4, .out = 4, .act = DR_ACT_LINEAR } }, .loss = DR_LOSS_MSE, .l2 = 0.0f };
    dr_optimizer o = { DR_OPT_SGD, 0.1f, 0.0f, false, 0.9f, 0.999f, 1e-7f, { 0 }, { 0, 0, 0, false, false }, 1 };
    dr_backend_params sel = { .model = &m, .optimizer = &o, .numerics = DR_NUMERICS_FAST, .places = 1,
                              .platform = -1, .mapping = "shared" };
    bench_cl_gemm *g = calloc(1, sizeof *g);
    dr_err err;
    cl_int e = CL_SUCCESS;
    if (!g) return NULL;
    g->M = M; g->K = K; g->N = N;
    if (dr_backend_opencl()->open(&sel, &g->b, &err) != DR_OK) {
        fprintf(stderr, "bench: opencl GEMM: %s\n", err.msg);
        g->b = NULL;
        bench_cl_gemm_close(g);
        return NULL;
    }
    g->A = clCreateBuffer(g->b->ctx, CL_MEM_READ_WRITE, (size_t)M * K * 4, NULL, &e);
    if (e == CL_SUCCESS) g->B = clCreateBuffer(g->b->ctx, CL_MEM_READ_WRITE, (size_t)K * N * 4, NULL, &e);
    if (e == CL_SUCCESS) g->C = clCreateBuffer(g->b->ctx, CL_MEM_READ_WRITE, (size_t)M * N * 4, NULL, &e);
    if (e == CL_SUCCESS) e = clEnqueueWriteBuffer(g->b->slot[0].q, g->A, CL_TRUE, 0, (size_t)M * K * 4, a, 0, NULL, NULL);
    if (e == CL_SUCCESS) e = clEnqueueWriteBuffer(g->b->slot[0].q, g->B, CL_TRUE, 0, (size_t)K * N * 4, b, 0, NULL, NULL);
    if (e != CL_SUCCESS) {
        fprintf(stderr, "bench: opencl GEMM: buffers of %ux%ux%u: OpenCL error %d\n", M, K, N, (int)e);
        bench_cl_gemm_close(g);
        return NULL;
    }
    return g;
}

static inline int bench_cl_gemm_run(bench_cl_gemm *g)
{
    dr_err err;
    dr_cl_arg a[] = { CLU(g->M), CLU(g->N), CLU(g->K), CLM(g->A), CLU(0), CLU(g->K), CLU(1), CLM(g->B), CLU(0),
                      CLU(g->N), CLU(1), CLM(NULL), CLU(0), CLU(0), CLM(g->C), CLU(0), CLU(g->N) };
    if (dr_cl_fast_gemm(&g->b->slot[0], a, "gemm", &err)) { fprintf(stderr, "bench: opencl GEMM: %s\n", err.msg); return -1; }
    clFinish(g->b->slot[0].q);
    return 0;
}

static inline int bench_cl_gemm_run_exact(bench_cl_gemm *g)
{
    dr_err err;
    dr_cl_arg a[] = { CLU(g->M), CLU(g->N), CLU(g->K), CLM(g->A), CLU(0), CLU(g->K), CLU(1), CLM(g->B), CLU(0),
                      CLU(g->N), CLU(1), CLM(NULL), CLU(0), CLU(0), CLM(g->C), CLU(g->N) };
    if (dr_cl_launch(&g->b->slot[0], K_GEMM_EXACT, g->M, g->N, DR_CL_TS, DR_CL_TS, a, 16, "gemm", &err)) {
        fprintf(stderr, "bench: opencl GEMM: %s\n", err.msg);
        return -1;
    }
    clFinish(g->b->slot[0].q);
    return 0;
}

#endif
