/* distref devices — where the OpenCL backend's replicas run.
 *
 * The selection (distref/opencl.h): a platform, a list of its devices and a
 * mapping of the run's replicas ("places") onto them:
 *
 *   shared      one slot: the first listed device, one in-order queue
 *   queues      one slot per replica, replica r on listed device r mod n
 *   subdevices  the one listed device split with CL_DEVICE_PARTITION_EQUALLY
 *               into sub-devices of max(1, compute units / replicas) units;
 *               one slot per replica, replica r on sub-device r mod (count)
 *   auto        shared for one replica; queues when several devices are
 *               listed; subdevices when the one device splits in two or
 *               more; else queues
 *
 * A slot is a device of the context, an in-order queue, its own kernel
 * objects (built from its device's program) and its own share scratch, so
 * that two replicas' kernels can be enqueued from two threads and run at
 * once. One context spans every device used (they are of one platform).
 *
 * Memory: every buffer is counted against its slot's device; the listed
 * device's global memory is the capacity, shared by all its sub-devices
 * and queues (sub-devices report their parent's memory: measured on PoCL).
 */
#include "devices/opencl/opencl_backend.h"

#include <stdlib.h>
#include <string.h>

static const char *const k_map_names[] = { "auto", "shared", "queues", "subdevices" };

static int parse_mapping(const char *given, dr_cl_mapping *out, dr_err *err)
{
    const char *v = given && *given ? given : getenv("DISTREF_OPENCL_MAPPING");
    if (!v || !*v) { *out = DR_CL_MAP_AUTO; return DR_OK; }
    for (int i = 0; i < 4; i++)
        if (strcmp(v, k_map_names[i]) == 0) { *out = (dr_cl_mapping)i; return DR_OK; }
    return dr_fail(err, DR_EUSAGE, "--opencl_mapping=%s%s: expected shared, queues, subdevices or auto", v,
                   given && *given ? "" : " (from DISTREF_OPENCL_MAPPING)");
}

/* "0", "0,1", ...: indices, each below 64, no repeats. */
static int parse_devices(const char *given, int *idx, uint32_t *n, dr_err *err)
{
    const char *v = given && *given ? given : getenv("DISTREF_OPENCL_DEVICE");
    const char *from = given && *given ? "" : " (from DISTREF_OPENCL_DEVICE)", *p;
    *n = 0;
    if (!v || !*v) v = "0";
    for (p = v;;) {
        char *end;
        long d = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;   /* no sign, no blank */
        if (d < 0) end = (char *)p;
        if (end == p || d < 0 || d > 63 || (*end && *end != ','))
            return dr_fail(err, DR_EUSAGE, "--opencl_device=%s%s: expected a device index or a list like 0,1", v, from);
        for (uint32_t i = 0; i < *n; i++)
            if (idx[i] == (int)d)
                return dr_fail(err, DR_EUSAGE, "--opencl_device=%s%s: device %ld listed twice", v, from, d);
        if (*n == DR_CL_MAX_SLOTS)
            return dr_fail(err, DR_EUSAGE, "--opencl_device=%s%s: at most %d devices", v, from, DR_CL_MAX_SLOTS);
        idx[(*n)++] = (int)d;
        if (!*end) break;
        p = end + 1;
    }
    return DR_OK;
}

/* DISTREF_OPENCL_PLATFORM, read as strictly as a flag's int: digits only
 * (no sign, blank, fraction or trailing text), 0..15; unset or empty is 0. */
static int env_platform(int *out, dr_err *err)
{
    const char *v = getenv("DISTREF_OPENCL_PLATFORM");
    size_t n = v ? strspn(v, "0123456789") : 0;
    *out = 0;
    if (!v || !*v) return DR_OK;
    if (n == 0 || v[n] != 0 || n > 2 || strtol(v, NULL, 10) > 15)
        return dr_fail(err, DR_EUSAGE, "DISTREF_OPENCL_PLATFORM=%.40s%s: expected a platform index 0..15 "
                       "(bin/distref devices lists them), or unset it", v, strlen(v) > 40 ? "..." : "");
    *out = (int)strtol(v, NULL, 10);
    return DR_OK;
}

int dr_cl_pick_list(int platform, const char *devices, cl_platform_id *pid, cl_device_id *ids, int *index,
                    uint32_t *n_out, dr_err *err)
{
    cl_platform_id ps[16];
    cl_device_id ds[64];
    cl_uint np = 0, nd = 0;
    int pi = platform, rc;
    uint32_t n;
    cl_int e;
    if (pi < 0 && (rc = env_platform(&pi, err))) return rc;
    if ((rc = parse_devices(devices, index, &n, err))) return rc;
    e = clGetPlatformIDs(16, ps, &np);
    if (e != CL_SUCCESS || np == 0)
        return dr_fail(err, DR_EUNSUPPORTED, "not available: no OpenCL platform (%s)",
                       e == CL_SUCCESS ? "none installed" : dr_cl_strerror(e));
    if (pi < 0 || (cl_uint)pi >= np)
        return dr_fail(err, DR_EUSAGE, "%s=%d: %u platform%s present (bin/distref devices)",
                       platform >= 0 ? "--opencl_platform" : "DISTREF_OPENCL_PLATFORM", pi, np, np == 1 ? "" : "s");
    e = clGetDeviceIDs(ps[pi], CL_DEVICE_TYPE_ALL, 64, ds, &nd);
    if (e != CL_SUCCESS || nd == 0)
        return dr_fail(err, DR_EUNSUPPORTED, "not available: OpenCL platform %d has no device (%s)", pi,
                       dr_cl_strerror(e));
    for (uint32_t i = 0; i < n; i++) {
        if ((cl_uint)index[i] >= nd)
            return dr_fail(err, DR_EUSAGE, "--opencl_device=%d: platform %d has %u device%s (bin/distref devices%s)",
                           index[i], pi, nd, nd == 1 ? "" : "s",
                           nd == 1 ? "; on PoCL, POCL_DEVICES=\"pthread pthread\" makes two" : "");
        ids[i] = ds[index[i]];
    }
    *pid = ps[pi];
    *n_out = n;
    return DR_OK;
}

int dr_cl_pick(int platform, int device, cl_platform_id *pid, cl_device_id *did, dr_err *err)
{
    char one[16];
    cl_device_id ids[DR_CL_MAX_SLOTS];
    int idx[DR_CL_MAX_SLOTS];
    uint32_t n;
    int rc;
    if (device >= 0) snprintf(one, sizeof one, "%d", device);
    if ((rc = dr_cl_pick_list(platform, device >= 0 ? one : NULL, pid, ids, idx, &n, err))) return rc;
    *did = ids[0];
    return DR_OK;
}

/* ---- the mapping -------------------------------------------------------------- */

/* The devices of the context and the slot count for `places` replicas:
 * fills b->devs (sub-devices created here), b->ndevs, b->nslots, b->mapping. */
static int resolve(dr_backend *b, const dr_backend_params *sel, dr_err *err)
{
    cl_device_id ids[DR_CL_MAX_SLOTS];
    int idx[DR_CL_MAX_SLOTS];
    uint32_t n, R = sel && sel->places ? sel->places : 1;
    dr_cl_mapping map = DR_CL_MAP_AUTO;
    dr_cl_caps root;
    int rc;
    if (R > DR_CL_MAX_SLOTS)
        return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: %u replicas in one process; at most %d", R, DR_CL_MAX_SLOTS);
    if ((rc = parse_mapping(sel ? sel->mapping : NULL, &map, err)) ||
        (rc = dr_cl_pick_list(sel ? sel->platform : -1, sel ? sel->devices : NULL, &b->platform, ids, idx, &n, err)))
        return rc;
    dr_cl_caps_of(b->platform, ids[0], &root);
    if (n > 1 && (map == DR_CL_MAP_SHARED || map == DR_CL_MAP_SUBDEVICES))
        return dr_fail(err, DR_EUSAGE, "--opencl_mapping=%s uses one device, but --opencl_device lists %u "
                       "(several devices: --opencl_mapping=queues or auto)", k_map_names[map], n);
    if (map == DR_CL_MAP_AUTO)
        map = R == 1 && n == 1 ? DR_CL_MAP_SHARED
            : n > 1 ? DR_CL_MAP_QUEUES
            : root.part_equally && root.max_sub_devices >= 2 && root.compute_units >= 2 ? DR_CL_MAP_SUBDEVICES
            : DR_CL_MAP_QUEUES;
    b->mapping = map;
    b->places = R;
    if (map != DR_CL_MAP_SUBDEVICES) {
        b->ndevs = map == DR_CL_MAP_SHARED ? 1 : n;
        for (uint32_t i = 0; i < b->ndevs; i++) {
            memset(&b->devs[i], 0, sizeof b->devs[i]);
            b->devs[i].id = ids[i]; b->devs[i].index = idx[i]; b->devs[i].sub = -1;
            dr_cl_caps_of(b->platform, ids[i], &b->devs[i].caps);
        }
        b->nslots = map == DR_CL_MAP_SHARED ? 1 : R;
        return DR_OK;
    }
    {
        cl_uint units = root.compute_units / R ? root.compute_units / R : 1, got = 0;
        cl_device_partition_property eq[] = { CL_DEVICE_PARTITION_EQUALLY, (cl_device_partition_property)units, 0 };
        cl_device_id sub[DR_CL_MAX_SLOTS];
        cl_int e;
        if (!root.part_equally || root.max_sub_devices < 1)
            return dr_fail(err, DR_EUNSUPPORTED, "not supported: --opencl_mapping=subdevices: %s (device %d) cannot be "
                           "partitioned equally (CL_DEVICE_PARTITION_EQUALLY %s, at most %u sub-devices)", root.name,
                           idx[0], root.part_equally ? "offered" : "not offered", root.max_sub_devices);
        e = clCreateSubDevices(ids[0], eq, DR_CL_MAX_SLOTS, sub, &got);
        if (e != CL_SUCCESS || got == 0)
            return dr_fail(err, DR_EUNSUPPORTED, "not supported: --opencl_mapping=subdevices: clCreateSubDevices on %s "
                           "(device %d, %u compute units, %u per sub-device): %s (%d)", root.name, idx[0],
                           root.compute_units, units, dr_cl_strerror(e), (int)e);
        b->ndevs = got;
        for (uint32_t i = 0; i < got; i++) {
            memset(&b->devs[i], 0, sizeof b->devs[i]);
            b->devs[i].id = sub[i]; b->devs[i].index = idx[0]; b->devs[i].sub = (int)i;
            dr_cl_caps_of(b->platform, sub[i], &b->devs[i].caps);
            b->devs[i].caps.global_mem = root.global_mem;   /* the parent's memory, shared */
        }
        b->nslots = R;
        return DR_OK;
    }
}

static void release_devs(dr_backend *b)
{
    for (uint32_t i = 0; i < b->ndevs; i++) {
        if (b->devs[i].prog) clReleaseProgram(b->devs[i].prog);
        b->devs[i].prog = NULL;
        if (b->devs[i].sub >= 0) clReleaseDevice(b->devs[i].id);
    }
    b->ndevs = 0;
}

static int check_exact(const dr_backend *b, dr_err *err)
{
    for (uint32_t i = 0; i < b->ndevs; i++) {
        const char *missing = dr_cl_exact_missing(&b->devs[i].caps);
        if (missing)
            return dr_fail(err, DR_EUNSUPPORTED, "opencl backend: exact numerics need %s, which %s (device %d) lacks; "
                           "--numerics=fast runs there", missing, b->devs[i].caps.name, b->devs[i].index);
    }
    return DR_OK;
}

int dr_cl_places_open(dr_backend *b, const dr_backend_params *sel, dr_err *err)
{
    cl_device_id ids[DR_CL_MAX_SLOTS];
    cl_int e;
    int rc;
    if (pthread_mutex_init(&b->mem_lock, NULL) != 0)
        return dr_fail(err, DR_ENOMEM, "opencl backend: could not make a lock");
    b->mem_lock_made = true;
    if ((rc = resolve(b, sel, err))) return rc;
    if (b->num == DR_NUMERICS_EXACT && (rc = check_exact(b, err))) return rc;
    for (uint32_t i = 0; i < b->ndevs; i++) ids[i] = b->devs[i].id;
    b->ctx = clCreateContext(NULL, b->ndevs, ids, NULL, NULL, &e);
    if (!b->ctx) return dr_cl_fail(err, e, "clCreateContext");
    for (uint32_t i = 0; i < b->ndevs; i++)
        if ((rc = dr_cl_build_dev(b, &b->devs[i], err))) return rc;
    for (uint32_t s = 0; s < b->nslots; s++) {
        dr_cl_slot *sl = &b->slot[s];
        sl->dev = s % b->ndevs;
        if (pthread_mutex_init(&sl->lock, NULL) != 0)
            return dr_fail(err, DR_ENOMEM, "opencl backend: could not make a lock");
        sl->lock_made = true;
        sl->q = clCreateCommandQueue(b->ctx, b->devs[sl->dev].id, 0, &e);
        if (!sl->q) return dr_cl_fail(err, e, "clCreateCommandQueue");
        if ((rc = dr_cl_kernels(b, sl, err)) || (rc = dr_cl_share_buffers(b, sl, err))) return rc;
    }
    return DR_OK;
}

void dr_cl_places_close(dr_backend *b)
{
    for (uint32_t s = 0; s < DR_CL_MAX_SLOTS; s++) {
        dr_cl_slot *sl = &b->slot[s];
        if (sl->q) clFinish(sl->q);
        if (sl->ranges) clReleaseMemObject(sl->ranges);
        if (sl->part) clReleaseMemObject(sl->part);
        if (sl->reg) clReleaseMemObject(sl->reg);
        for (int i = 0; i < K_COUNT; i++) if (sl->k[i]) clReleaseKernel(sl->k[i]);
        if (sl->q) clReleaseCommandQueue(sl->q);
        if (sl->lock_made) pthread_mutex_destroy(&sl->lock);
        memset(sl, 0, sizeof *sl);
    }
    release_devs(b);
    if (b->ctx) clReleaseContext(b->ctx);
    b->ctx = NULL;
    if (b->mem_lock_made) pthread_mutex_destroy(&b->mem_lock);
    b->mem_lock_made = false;
}

/* ---- memory ------------------------------------------------------------------- */

int dr_cl_mem_take(dr_backend *b, dr_cl_slot *sl, size_t bytes, dr_err *err)
{
    const dr_cl_caps *c = dr_cl_caps_of_slot(b, sl);
    int index = b->devs[sl->dev].index, rc = DR_OK;
    uint64_t used = 0;
    pthread_mutex_lock(&b->mem_lock);
    for (uint32_t s = 0; s < b->nslots; s++)   /* every slot on the same listed device shares its memory */
        if (b->devs[b->slot[s].dev].index == index) used += b->slot[s].bytes;
    if (c->global_mem && used + bytes > c->global_mem)
        rc = dr_fail(err, DR_EDEVICE_OOM, "opencl backend: %zu more bytes on %s (device %d) would exceed its %llu MiB "
                     "(%llu bytes in use by its replicas): the device is out of memory", bytes, c->name, index,
                     (unsigned long long)(c->global_mem >> 20), (unsigned long long)used);
    else
        sl->bytes += bytes;
    pthread_mutex_unlock(&b->mem_lock);
    return rc;
}

void dr_cl_mem_give(dr_backend *b, dr_cl_slot *sl, size_t bytes)
{
    pthread_mutex_lock(&b->mem_lock);
    sl->bytes -= bytes <= sl->bytes ? bytes : sl->bytes;
    pthread_mutex_unlock(&b->mem_lock);
}

/* ---- what the engine and the CLI see ---------------------------------------------- */

const char *dr_cl_mapping_name(const dr_backend *b)
{
    return k_map_names[b->mapping];
}

int dr_cl_place_of(const dr_backend *b, uint32_t p, dr_backend_place *out, dr_err *err)
{
    const dr_cl_slot *sl;
    const dr_cl_dev *d;
    if (p >= b->places)
        return dr_fail(err, DR_EUSAGE, "opencl backend: place %u of %u", p, b->places);
    sl = &b->slot[dr_cl_slot_of_place(b, p)];
    d = &b->devs[sl->dev];
    memset(out, 0, sizeof *out);
    snprintf(out->device, sizeof out->device, "%s", d->caps.name);
    out->device_index = d->index;
    out->subdevice = d->sub;
    out->queue = dr_cl_slot_of_place(b, p);
    out->bytes = sl->bytes;
    out->capacity = d->caps.global_mem;
    return DR_OK;
}

int dr_cl_available(const dr_backend_params *sel, dr_err *err)
{
    bool exact = sel->numerics != DR_NUMERICS_FAST;
    dr_backend *b = calloc(1, sizeof *b);
    int rc;
    if (!b) return dr_fail(err, DR_ENOMEM, "opencl backend: out of memory");
    rc = resolve(b, sel, err);
    if (rc == DR_OK && exact) {
        b->num = DR_NUMERICS_EXACT;
        rc = check_exact(b, err);
    }
    release_devs(b);
    free(b);
    return rc;
}
