/* distref devices — OpenCL platforms, devices and the program.
 *
 * Devices are listed and capabilities read here; choosing them and
 * mapping replicas onto them is devices/opencl/opencl_places.c.
 *
 * The program is one source, concatenated on the host from files of the
 * repository, read at run time (docs/OPENCL.md):
 *   include/distref/elem.h   dr_expf / dr_logf, the C build's own source
 *   devices/opencl/cl/acc.cl        the exact accumulator
 *   devices/opencl/cl/half.cl       float16 / bfloat16 rounding (core/half.c)
 *   devices/opencl/cl/kernels.cl    the step's kernels
 *   devices/opencl/cl/mixed.cl      the mixed-precision step's kernels
 *   devices/opencl/cl/graph.cl      the layers of the models beyond Dense
 * found under $DISTREF_CL_ROOT, else under the checkout the library was
 * built from (DR_SOURCE_ROOT, set for this file by the Makefile; "." in a
 * build without it, e.g. the conformance mutants, run from the checkout). Build options keep the
 * determinism contract: -cl-fp32-correctly-rounded-divide-sqrt, never
 * -cl-mad-enable or -cl-fast-relaxed-math (and FP_CONTRACT OFF in the
 * source). The built binary is cached in $DISTREF_CL_CACHE, else
 * DR_SOURCE_ROOT/build/clcache, as <sha256 of source, options, platform,
 * device, version and driver>.bin; a cache that cannot be read or written
 * only costs a rebuild.
 */
#include "devices/opencl/opencl_backend.h"
#include "distref/fileio.h"
#include "distref/sealed.h"
#include "distref/sha256.h"
#include "devices/seams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DR_SOURCE_ROOT
#define DR_SOURCE_ROOT "."
#endif

/* A planted kernel fault's build options: DR_SEAM_CL_BUILD_OPTIONS
 * (devices/seams.h). */
#define BUILD_OPTIONS "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt" DR_SEAM_CL_BUILD_OPTIONS

const char *dr_cl_strerror(cl_int e)
{
    switch (e) {
    case CL_SUCCESS: return "CL_SUCCESS";
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_BINARY: return "CL_INVALID_BINARY";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL platform installed)";
    default: return "an OpenCL error";
    }
}

/* Out-of-memory codes become DR_EDEVICE_OOM, the rest DR_EUNSUPPORTED-free DR_EIO. */
int dr_cl_fail(dr_err *err, cl_int e, const char *what)
{
    int code = (e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_RESOURCES ||
                e == CL_INVALID_BUFFER_SIZE) ? DR_EDEVICE_OOM
             : e == CL_OUT_OF_HOST_MEMORY ? DR_ENOMEM : DR_EIO;
    return dr_fail(err, code, "opencl backend: %s: %s (%d)%s", what, dr_cl_strerror(e), (int)e,
                   code == DR_EDEVICE_OOM ? ": the device is out of memory" : "");
}

void dr_cl_caps_of(cl_platform_id p, cl_device_id d, dr_cl_caps *c)
{
    cl_device_fp_config fp = 0;
    char ext[4096] = "", profile[64] = "";
    memset(c, 0, sizeof *c);
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof c->platform - 1, c->platform, NULL);
    clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof c->name - 1, c->name, NULL);
    clGetDeviceInfo(d, CL_DEVICE_VERSION, sizeof c->version - 1, c->version, NULL);
    clGetDeviceInfo(d, CL_DRIVER_VERSION, sizeof c->driver - 1, c->driver, NULL);
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof c->type, &c->type, NULL);
    clGetDeviceInfo(d, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
    clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL);
    clGetDeviceInfo(d, CL_DEVICE_PROFILE, sizeof profile - 1, profile, NULL);
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof c->global_mem, &c->global_mem, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof c->max_alloc, &c->max_alloc, NULL);
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof c->local_mem, &c->local_mem, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof c->compute_units, &c->compute_units, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof c->max_wg, &c->max_wg, NULL);
    c->cr_divide_sqrt = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
    c->denorm = (fp & CL_FP_DENORM) != 0;
    c->fma = (fp & CL_FP_FMA) != 0;
    c->fp64 = strstr(ext, "cl_khr_fp64") != NULL;
    c->full_profile = strcmp(profile, "FULL_PROFILE") == 0;
    {
        cl_device_partition_property pp[8];
        size_t n = 0;
        clGetDeviceInfo(d, CL_DEVICE_PARTITION_MAX_SUB_DEVICES, sizeof c->max_sub_devices, &c->max_sub_devices, NULL);
        if (clGetDeviceInfo(d, CL_DEVICE_PARTITION_PROPERTIES, sizeof pp, pp, &n) == CL_SUCCESS)
            for (size_t i = 0; i < n / sizeof pp[0]; i++) c->part_equally |= pp[i] == CL_DEVICE_PARTITION_EQUALLY;
    }
}

const char *dr_cl_exact_missing(const dr_cl_caps *c)
{
    if (!c->cr_divide_sqrt) return "correctly rounded divide and sqrt (CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT)";
    if (!c->denorm) return "float denormals (CL_FP_DENORM)";
    if (!c->full_profile) return "64-bit integers (FULL_PROFILE)";
    if (c->max_wg < DR_CL_TS * DR_CL_TS) return "work-groups of 256 work-items";
    return NULL;
}

/* ---- sources ------------------------------------------------------------------ */

static int read_source(const char *root, const char *rel, char **out, size_t *n, dr_err *err)
{
    char path[2048];
    uint8_t *data;
    snprintf(path, sizeof path, "%s/%s", root, rel);
    if (dr_read_file(path, (size_t)1 << 22, &data, n, err) != DR_OK)
        return dr_fail_wrap(err, "opencl backend: kernel source %s (set DISTREF_CL_ROOT to the distref checkout)",
                            path);
    *out = (char *)data;
    return DR_OK;
}

/* elem.h, acc.cl, half.cl, then kernels.cl, mixed.cl and graph.cl (or extra), as one string. */
static int load_sources(const char *extra, char **out, dr_err *err)
{
    const char *root = getenv("DISTREF_CL_ROOT");
    const char *files[] = { "include/distref/elem.h", "devices/opencl/cl/acc.cl", "devices/opencl/cl/half.cl",
                            "devices/opencl/cl/kernels.cl", "devices/opencl/cl/mixed.cl", "devices/opencl/cl/graph.cl" };
    size_t nfiles = extra ? 3 : 6, total = 1, len[6] = { 0 };
    char *text[6] = { NULL, NULL, NULL, NULL, NULL, NULL }, *s;
    int rc = DR_OK;
    if (!root || !*root) root = DR_SOURCE_ROOT;
    for (size_t i = 0; i < nfiles && rc == DR_OK; i++)
        if ((rc = read_source(root, files[i], &text[i], &len[i], err)) == DR_OK) total += len[i] + 1;
    if (extra) total += strlen(extra) + 1;
    s = rc == DR_OK ? malloc(total) : NULL;
    if (rc == DR_OK && !s) rc = dr_fail(err, DR_ENOMEM, "opencl backend: out of memory for the program source");
    if (s) {
        size_t at = 0;
        for (size_t i = 0; i < nfiles; i++) { memcpy(s + at, text[i], len[i]); at += len[i]; s[at++] = '\n'; }
        if (extra) { memcpy(s + at, extra, strlen(extra)); at += strlen(extra); s[at++] = '\n'; }
        s[at] = 0;
    }
    for (size_t i = 0; i < 6; i++) free(text[i]);
    *out = s;
    return rc;
}

/* ---- build, through the binary cache ------------------------------------------ */

/* The cache file of this source, build and device: its name and its key
 * (the SHA-256 the name spells, sealed into the file: distref/sealed.h). */
static void cache_path(const char *src, const dr_cl_caps *caps, char *path, size_t size, uint8_t dig[32])
{
    dr_sha256_ctx c;
    char hex[65];
    const char *dir = getenv("DISTREF_CL_CACHE");
    dr_sha256_init(&c);
    dr_sha256_update(&c, src, strlen(src) + 1);
    dr_sha256_update(&c, BUILD_OPTIONS, sizeof BUILD_OPTIONS);
    dr_sha256_update(&c, caps->platform, strlen(caps->platform) + 1);
    dr_sha256_update(&c, caps->name, strlen(caps->name) + 1);
    dr_sha256_update(&c, caps->version, strlen(caps->version) + 1);
    dr_sha256_update(&c, caps->driver, strlen(caps->driver) + 1);
    dr_sha256_final(&c, dig);
    dr_sha256_to_hex(dig, hex);
    if (dir && *dir) snprintf(path, size, "%s/%s.bin", dir, hex);
    else snprintf(path, size, "%s/build/clcache/%s.bin", DR_SOURCE_ROOT, hex);
}

/* The program's binary, sealed (length, SHA-256, key), written atomically:
 * a kill mid-write leaves the old file or none, never a torn one. */
static void cache_save(cl_program prog, const char *path, const uint8_t key[32])
{
    size_t size = 0, nfile = 0;
    unsigned char *bin;
    uint8_t *file = NULL;
    char dir[2400];
    dr_err e;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS || !size) return;
    if (!(bin = malloc(size))) return;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS &&
        dr_sealed_make(key, bin, size, &file, &nfile, &e) == DR_OK) {
        snprintf(dir, sizeof dir, "%s", path);
        if (strrchr(dir, '/')) *strrchr(dir, '/') = 0;
        if (dr_mkdirs(dir, &e) == DR_OK) (void)dr_write_atomic(path, file, nfile, &e);
    }
    free(file);
    free(bin);
}

/* The cached binary of path, checked (distref/sealed.h) before the driver
 * sees a byte of it: NULL when absent, a link or special file, truncated,
 * damaged or another key's. */
static cl_program cache_load(cl_context ctx, cl_device_id dev, const char *path, const uint8_t key[32])
{
    uint8_t *file = NULL;
    const uint8_t *bin;
    size_t nfile = 0, nbin = 0;
    cl_program prog = NULL;
    cl_int e = CL_SUCCESS, st = CL_SUCCESS;
    dr_err ignore;
    if (dr_read_regular(path, (size_t)1 << 28, &file, &nfile, &ignore) == DR_OK &&
        dr_sealed_open(file, nfile, key, &bin, &nbin, &ignore) == DR_OK && nbin) {
        prog = clCreateProgramWithBinary(ctx, 1, &dev, &nbin, &bin, &st, &e);
        if (prog && (e != CL_SUCCESS || st != CL_SUCCESS ||
                     clBuildProgram(prog, 1, &dev, BUILD_OPTIONS, NULL, NULL) != CL_SUCCESS)) {
            clReleaseProgram(prog);   /* a binary this driver no longer takes: rebuild from source */
            prog = NULL;
        }
    }
    free(file);
    return prog;
}

static int build_log_fail(cl_program prog, cl_device_id dev, cl_int e, dr_err *err)
{
    size_t n = 0;
    char *log = NULL;
    int rc;
    if (clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS && n && (log = calloc(n + 1, 1)))
        clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, log, NULL);
    rc = dr_fail(err, DR_EIO, "opencl backend: building the kernels: %s: %.400s", dr_cl_strerror(e), log ? log : "");
    free(log);
    return rc;
}

int dr_cl_build_program(cl_context ctx, cl_device_id dev, const dr_cl_caps *caps, const char *extra_src,
                        cl_program *out, dr_err *err)
{
    char *src = NULL, path[2300];
    uint8_t key[32];
    cl_program prog = NULL;
    cl_int e = CL_SUCCESS;
    int rc;
    *out = NULL;
    if ((rc = load_sources(extra_src, &src, err))) return rc;
    cache_path(src, caps, path, sizeof path, key);
    prog = cache_load(ctx, dev, path, key);
    if (!prog) {
        const char *s = src;
        prog = clCreateProgramWithSource(ctx, 1, &s, NULL, &e);
        if (!prog) { free(src); return dr_cl_fail(err, e, "clCreateProgramWithSource"); }
        if ((e = clBuildProgram(prog, 1, &dev, BUILD_OPTIONS, NULL, NULL)) != CL_SUCCESS) {
            rc = build_log_fail(prog, dev, e, err);
            clReleaseProgram(prog);
            free(src);
            return rc;
        }
        cache_save(prog, path, key);
    }
    free(src);
    *out = prog;
    return DR_OK;
}

static const char *const k_names[K_COUNT] = {
    "gemm_exact", "gemm_acc_exact", "gemm_fast", "activate", "loss_rows", "partial_sum", "merge_partials",
    "sum_fast", "bias_grad_exact", "bias_grad_fast", "relu_mask", "share_exact", "loss_share_exact",
    "share_fast", "loss_share_fast", "apply_exact", "apply_fast", "gemm_fast_v",
    "round_exact", "round_fast", "mixed_to_dtype", "mixed_gemm", "mixed_loss_rows", "mixed_gemm_fast",
    "mixed_grad_fast", "conv_fwd", "conv_dx", "conv_dw_exact", "conv_dw_fast",
    "conv_dw_mixed_fast", "act_cells", "add_cells", "add_grad",
    "maxpool", "maxpool_grad", "gap", "gap_grad", "dropout", "dropout_grad", "bn_chan", "bn_apply", "bn_sums",
    "bn_grad_sums_exact", "bn_grad_sums_fast", "bn_grad", "l0_partial_exact", "l0_partial_fast", "l0_finish_exact",
    "l0_finish_fast", "l0_grad_exact", "l0_grad_fast",
};

int dr_cl_build_dev(dr_backend *b, dr_cl_dev *dev, dr_err *err)
{
    return dr_cl_build_program(b->ctx, dev->id, &dev->caps, NULL, &dev->prog, err);
}

int dr_cl_kernels(dr_backend *b, dr_cl_slot *sl, dr_err *err)
{
    for (int i = 0; i < K_COUNT; i++) {
        cl_int e;
        sl->k[i] = clCreateKernel(b->devs[sl->dev].prog, k_names[i], &e);
        if (!sl->k[i]) return dr_cl_fail(err, e, k_names[i]);
    }
    return DR_OK;
}

/* ---- availability and the device listing ----------------------------------------- */

void dr_opencl_devices_print(FILE *out)
{
    cl_platform_id ps[16];
    cl_uint np = 0;
    cl_int e = clGetPlatformIDs(16, ps, &np);
    if (e != CL_SUCCESS || np == 0) {
        fprintf(out, "opencl: not available: no OpenCL platform (%s)\n",
                e == CL_SUCCESS ? "none installed" : dr_cl_strerror(e));
        return;
    }
    for (cl_uint i = 0; i < np; i++) {
        cl_device_id ds[16];
        cl_uint nd = 0;
        char name[128] = "", version[128] = "";
        clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
        clGetPlatformInfo(ps[i], CL_PLATFORM_VERSION, sizeof version - 1, version, NULL);
        fprintf(out, "platform %u: %s (%s)\n", i, name, version);
        if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 16, ds, &nd) != CL_SUCCESS || nd == 0) {
            fprintf(out, "  no device\n");
            continue;
        }
        for (cl_uint j = 0; j < nd; j++) {
            dr_cl_caps c;
            const char *missing;
            dr_cl_caps_of(ps[i], ds[j], &c);
            missing = dr_cl_exact_missing(&c);
            fprintf(out, "  device %u: %s [%s] %s, driver %s\n", j, c.name,
                    c.type & CL_DEVICE_TYPE_GPU ? "gpu" : c.type & CL_DEVICE_TYPE_CPU ? "cpu" : "other",
                    c.version, c.driver);
            fprintf(out, "    compute units %u, global memory %llu MiB (largest buffer %llu MiB), local %llu KiB\n",
                    c.compute_units, (unsigned long long)(c.global_mem >> 20), (unsigned long long)(c.max_alloc >> 20),
                    (unsigned long long)(c.local_mem >> 10));
            fprintf(out, "    correctly rounded divide/sqrt %s, denormals %s, fma %s, fp64 %s, 64-bit integers %s\n",
                    c.cr_divide_sqrt ? "yes" : "no", c.denorm ? "yes" : "no", c.fma ? "yes" : "no",
                    c.fp64 ? "yes" : "no", c.full_profile ? "yes" : "no");
            fprintf(out, "    exact numerics: %s%s\n", missing ? "no, lacks " : "yes", missing ? missing : "");
            if (c.part_equally && c.max_sub_devices >= 2)
                fprintf(out, "    sub-devices: up to %u (CL_DEVICE_PARTITION_EQUALLY; --opencl_mapping=subdevices)\n",
                        c.max_sub_devices);
            else
                fprintf(out, "    sub-devices: none (%s)\n", c.part_equally ? "at most 1" : "no equal partition offered");
        }
    }
}
