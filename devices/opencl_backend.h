/* distref devices — the OpenCL backend's private declarations.
 *
 * devices/opencl_program.c   platforms, devices, capabilities; the program
 *                            (sources, build options, binary cache)
 * devices/opencl_backend.c   the table: open/close, memory, share, apply
 * devices/opencl_kernels.c   forward, loss and gradients (kernel launches)
 *
 * A dr_buffer is a cl_mem in the backend's context; host_ptr() is NULL,
 * so the engine stages collectives through download/upload. All replicas
 * of a run share one device and one in-order command queue: kernels of one
 * replica therefore run in issue order, and a lock serializes setting a
 * kernel's arguments and enqueueing it (cl_kernel objects are not
 * thread-safe; the engine may call from several threads).
 */
#ifndef DISTREF_DEVICES_OPENCL_BACKEND_H
#define DISTREF_DEVICES_OPENCL_BACKEND_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <pthread.h>
#include "distref/backend.h"
#include "distref/opencl.h"

enum {
    K_GEMM_EXACT, K_GEMM_ACC_EXACT, K_GEMM_FAST, K_ACTIVATE, K_LOSS_ROWS, K_PARTIAL_SUM, K_MERGE,
    K_SUM_FAST, K_BIAS_EXACT, K_BIAS_FAST, K_RELU_MASK, K_SHARE_EXACT, K_LOSS_SHARE_EXACT, K_SHARE_FAST,
    K_LOSS_SHARE_FAST, K_APPLY_EXACT, K_APPLY_FAST, K_GEMM_FAST_V, K_COUNT
};

#define DR_CL_CHUNK 8    /* devices/cl/kernels.cl's CHUNK: elements per partial sum */
#define DR_CL_TS    16   /* its GEMM tile edge */

struct dr_buffer {
    size_t bytes;
    cl_mem mem;
};

/* What the device can do (bin/distref devices, and exact mode's checks). */
typedef struct dr_cl_caps {
    char     platform[256], name[256], version[256], driver[256];
    cl_device_type type;
    bool     cr_divide_sqrt;   /* CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT */
    bool     denorm, fma;      /* CL_FP_DENORM, CL_FP_FMA */
    bool     fp64;             /* cl_khr_fp64 */
    bool     full_profile;     /* FULL_PROFILE: 64-bit integers */
    cl_ulong global_mem, max_alloc, local_mem;
    cl_uint  compute_units;
    size_t   max_wg;
} dr_cl_caps;

struct dr_backend {
    dr_model_spec m;
    dr_optimizer  o;
    dr_numerics   num;
    size_t        P;
    size_t        koff[DR_MAX_LAYERS];
    uint32_t      widest;
    cl_platform_id   platform;
    cl_device_id     dev;
    dr_cl_caps       caps;
    cl_context       ctx;
    cl_command_queue q;
    cl_program       prog;
    cl_kernel        k[K_COUNT];
    pthread_mutex_t  lock;
    bool             lock_made;
    cl_mem           ranges;   /* fast share: the kernels' (offset, length) pairs */
    cl_mem           part;     /* exact share: partial sums of w^2 */
    cl_mem           reg;      /* exact share: l2 * round(sum w^2) */
    size_t           part_n;
};

/* A replica's workspace on the device. */
typedef struct dr_cl_scratch {
    uint32_t cap, fwd_rows, grad_n;
    cl_mem   pre[DR_MAX_LAYERS], act[DR_MAX_LAYERS], dz[2], ex_loss, hit, part;
    unsigned char *hit_host;
} dr_cl_scratch;

/* One kernel argument: a buffer, a u32 or a float. */
typedef struct dr_cl_arg {
    char kind;          /* 'm' cl_mem, 'u' uint, 'f' float */
    cl_mem m;
    cl_uint u;
    cl_float f;
} dr_cl_arg;
#define CLM(x) ((dr_cl_arg){ 'm', (x), 0, 0.0f })
#define CLU(x) ((dr_cl_arg){ 'u', NULL, (cl_uint)(x), 0.0f })
#define CLF(x) ((dr_cl_arg){ 'f', NULL, 0, (cl_float)(x) })

/* devices/opencl_program.c */
const char *dr_cl_strerror(cl_int e);
int  dr_cl_fail(dr_err *err, cl_int e, const char *what);
/* platform/device indices: < 0 = DISTREF_OPENCL_PLATFORM/DEVICE, else 0 */
int  dr_cl_pick(int platform, int device, cl_platform_id *pid, cl_device_id *did, dr_err *err);
void dr_cl_caps_of(cl_platform_id p, cl_device_id d, dr_cl_caps *c);
/* Why exact numerics cannot run on the device (NULL: they can). */
const char *dr_cl_exact_missing(const dr_cl_caps *c);
int  dr_cl_build(dr_backend *b, dr_err *err);
/* Builds a program of elem.h, acc.cl and extra_src (tests). */
int  dr_cl_build_program(cl_context ctx, cl_device_id dev, const dr_cl_caps *caps, const char *extra_src,
                         cl_program *out, dr_err *err);

/* devices/opencl_backend.c */
int  dr_cl_launch(dr_backend *b, int kernel, size_t g0, size_t g1, size_t l0, size_t l1,
                  const dr_cl_arg *args, int nargs, const char *what, dr_err *err);
int  dr_cl_need(const dr_buffer *b, size_t bytes, const char *what, dr_err *err);

/* devices/opencl_kernels.c */
int dr_cl_fast_gemm(dr_backend *b, const dr_cl_arg *a17, const char *what, dr_err *err);
int dr_cl_forward(dr_backend *b, dr_replica_bufs *rb, uint32_t rows, uint32_t first, dr_err *err);
int dr_cl_loss_grad(dr_backend *b, dr_replica_bufs *rb, uint32_t n, bool kernel0, dr_err *err);

#endif
