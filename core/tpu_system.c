/* distref — the emulated TPU: see include/distref/tpu.h.
 *
 * Topologies: "vN-M" is generation N with M TensorCores, 2 per chip, the
 * M/2 = 2^k chips an x*y torus with x = 2^ceil(k/2), y = 2^floor(k/2), z = 1.
 * Emulation choices, not hardware facts: v4's 2 TensorCores per chip are
 * emulated separately (not as one megacore) and its slices laid out in 2D;
 * v2's 8 GiB per core is unconfirmed; the link model (LINK_*) is assumed.
 *
 * DeviceAssignment is a port of device_assignment() in
 * tensorflow/python/tpu/device_assignment.py (topologies have no missing
 * chips, DeviceOrderMode.AUTO): the same checks in the same order with the
 * same messages (numpy arrays printed as numpy prints them), the same
 * replica_shape heuristic (including its use of pow()), the same 3D ring
 * tiling when a replica spans whole chips without stride at full
 * replication, and otherwise the same offsets and row-major logical cores.
 */
#include "distref/tpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CORES_PER_CHIP   2
#define MIN_SLICE_CORES  8
#define GIB              (UINT64_C(1) << 30)
#define LINK_LATENCY_S   1e-6       /* alpha: one microsecond per hop */
#define LINK_BYTES_PER_S 50e9       /* 50 GB/s per link and direction */
#define DEFAULT_GEN      3          /* "local" without --tpu_platform: v3-8 */
#define PRESET_LIST      "local, v2-8, v3-8, v3-32, v4-8 (or any vN-M with N = 2, 3, 4 " \
                         "and M = 8, 16, 32, ..., 512 TensorCores)"

/* "v2" -> 2 etc.; 0 for anything else. */
static int platform_gen(const char *p)
{
    if (p[0] == 'v' && p[1] >= '2' && p[1] <= '4' && p[2] == '\0')
        return p[1] - '0';
    return 0;
}

/* "vN-M" -> N and M; false unless N in 2..4 and M is a plain decimal power
 * of two in [8, DR_TPU_MAX_CORES]. */
static bool parse_slice(const char *s, int *gen, int *cores)
{
    if (s[0] != 'v' || s[1] < '2' || s[1] > '4' || s[2] != '-' || s[3] < '1' || s[3] > '9')
        return false;
    long m = 0;
    for (const char *p = s + 3; *p != '\0'; p++) {
        if (*p < '0' || *p > '9' || m > DR_TPU_MAX_CORES)
            return false;
        m = m * 10 + (*p - '0');
    }
    if (m < MIN_SLICE_CORES || m > DR_TPU_MAX_CORES || (m & (m - 1)) != 0)
        return false;
    *gen = s[1] - '0';
    *cores = (int)m;
    return true;
}

static void slice_topology(int gen, int cores, dr_tpu_topology *t)
{
    int k = 0;
    while ((CORES_PER_CHIP << k) < cores)
        k++;
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "v%d-%d", gen, cores);
    t->mesh[0] = 1 << ((k + 1) / 2);
    t->mesh[1] = 1 << (k / 2);
    t->mesh[2] = 1;
    t->mesh[3] = CORES_PER_CHIP;
    t->num_cores = cores;
    t->hbm_bytes_per_core = (gen == 2 ? 8 : 16) * GIB;     /* v2: 8 GiB, v3/v4: 16 */
    t->link_latency_s = LINK_LATENCY_S;
    t->link_bytes_per_s = LINK_BYTES_PER_S;
}

static int scale_hbm(dr_tpu_topology *t, double hbm_scale, dr_err *err)
{
    if (!(hbm_scale > 0) || !isfinite(hbm_scale))
        return dr_fail(err, DR_EUSAGE, "hbm_scale must be a positive finite number; got %g",
                       hbm_scale);
    double bytes = floor((double)t->hbm_bytes_per_core * hbm_scale);
    if (bytes < 1 || bytes >= 18446744073709551616.0)
        return dr_fail(err, DR_EUSAGE, "hbm_scale %g gives %.0f bytes of HBM per core; "
                       "expected 1 to 2^64-1", hbm_scale, bytes);
    t->hbm_bytes_per_core = (uint64_t)bytes;
    return DR_OK;
}

int dr_tpu_topology_resolve(const char *tpu, const char *platform, double hbm_scale,
                            dr_tpu_topology *out, dr_err *err)
{
    const char *name = tpu != NULL ? tpu : "";
    const char *plat = platform != NULL ? platform : "";
    if (strncmp(name, "grpc://", 7) == 0)
        return dr_fail(err, DR_EUSAGE, "--tpu=%s: no remote TPU in emulation; use "
                       "--tpu=local or a preset such as v3-8", name);
    int pgen = platform_gen(plat);
    if (plat[0] != '\0' && pgen == 0)
        return dr_fail(err, DR_EUSAGE, "--tpu_platform=%s: unknown TPU platform; expected "
                       "v2, v3 or v4", plat);
    int gen = pgen != 0 ? pgen : DEFAULT_GEN, cores = MIN_SLICE_CORES;
    bool local = name[0] == '\0' || strcmp(name, "local") == 0;
    if (!local && !parse_slice(name, &gen, &cores))
        return dr_fail(err, DR_EUSAGE, "--tpu=%s: unknown TPU; expected %s", name, PRESET_LIST);
    if (pgen != 0 && pgen != gen)
        return dr_fail(err, DR_EUSAGE, "--tpu_platform=%s disagrees with --tpu=%s, a v%d slice",
                       plat, name, gen);
    dr_tpu_topology t;
    slice_topology(gen, cores, &t);
    int rc = scale_hbm(&t, hbm_scale, err);
    if (rc == DR_OK)
        *out = t;
    return rc;
}

void dr_tpu_core_coords(const dr_tpu_topology *t, int core, int coords[DR_TPU_RANK])
{
    if (core < 0 || core >= t->num_cores) {
        for (int i = 0; i < DR_TPU_RANK; i++)
            coords[i] = -1;
        return;
    }
    for (int i = DR_TPU_RANK - 1; i >= 0; i--) {
        coords[i] = core % t->mesh[i];
        core /= t->mesh[i];
    }
}

int dr_tpu_core_index(const dr_tpu_topology *t, const int coords[DR_TPU_RANK])
{
    int c = 0;
    for (int i = 0; i < DR_TPU_RANK; i++) {
        if (coords[i] < 0 || coords[i] >= t->mesh[i])
            return -1;
        c = c * t->mesh[i] + coords[i];
    }
    return c;
}

int dr_tpu_hops(const dr_tpu_topology *t, int core_a, int core_b)
{
    if (core_a < 0 || core_a >= t->num_cores || core_b < 0 || core_b >= t->num_cores)
        return -1;
    int a[DR_TPU_RANK], b[DR_TPU_RANK], hops = 0;
    dr_tpu_core_coords(t, core_a, a);
    dr_tpu_core_coords(t, core_b, b);
    for (int i = 0; i < DR_TPU_RANK - 1; i++) {       /* x, y, z; not the core */
        int d = abs(a[i] - b[i]);
        hops += d < t->mesh[i] - d ? d : t->mesh[i] - d;
    }
    return hops;
}

/* str() of a numpy int array: "[1 1 1 2]", each entry right-aligned to the
 * widest one ("[16 16  1  2]"). */
static const char *np_str(const int *v, int n, char buf[64])
{
    int w = 1;
    for (int i = 0; i < n; i++) {
        int len = snprintf(NULL, 0, "%d", v[i]);
        w = len > w ? len : w;
    }
    size_t at = (size_t)snprintf(buf, 64, "[");
    for (int i = 0; i < n && at < 64; i++)
        at += (size_t)snprintf(buf + at, 64 - at, "%s%*d", i ? " " : "", w, v[i]);
    if (at < 64)
        snprintf(buf + at, 64 - at, "]");
    return buf;
}

/* Topology's own check, plus what this emulation can hold. */
static int check_mesh(const dr_tpu_topology *t, dr_err *err)
{
    char b[64];
    long long cores = 1;
    for (int i = 0; i < DR_TPU_RANK; i++)
        cores *= t->mesh[i] >= 1 && t->mesh[i] <= DR_TPU_MAX_CORES ? t->mesh[i] : 0;
    if (cores < 1 || cores > DR_TPU_MAX_CORES || cores != t->num_cores)
        return dr_fail(err, DR_EUSAGE, "`mesh_shape` must be a sequence of 4 positive entries "
                       "whose product is num_cores (%d), at most %d; got %s", t->num_cores,
                       DR_TPU_MAX_CORES, np_str(t->mesh, DR_TPU_RANK, b));
    return DR_OK;
}

/* The argument checks of device_assignment(), in its order; fills the
 * defaulted shape and stride. */
static int check_args(const dr_tpu_topology *t, const int *shape, int shape_len,
                      const int *stride, int stride_len, int sh[DR_TPU_RANK],
                      int st[DR_TPU_RANK], dr_err *err)
{
    char b1[64], b2[64];
    if (shape != NULL && shape_len != DR_TPU_RANK)
        return dr_fail(err, DR_EUSAGE, "computation_shape must have shape [%d]; got (%d,)",
                       DR_TPU_RANK, shape_len);
    if (stride != NULL && stride_len != DR_TPU_RANK)
        return dr_fail(err, DR_EUSAGE, "computation_stride must have shape [%d]; got (%d,)",
                       DR_TPU_RANK, stride_len);
    bool sh_ok = true, st_ok = true;
    for (int i = 0; i < DR_TPU_RANK; i++) {
        sh[i] = shape != NULL ? shape[i] : 1;
        st[i] = stride != NULL ? stride[i] : 1;
        sh_ok = sh_ok && sh[i] >= 1;
        st_ok = st_ok && st[i] >= 1;
    }
    if (!sh_ok)
        return dr_fail(err, DR_EUSAGE, "computation_shape must be positive; got "
                       "computation_shape=%s", np_str(sh, DR_TPU_RANK, b1));
    if (!st_ok)
        return dr_fail(err, DR_EUSAGE, "computation_stride must be positive; got "
                       "computation_stride=%s", np_str(st, DR_TPU_RANK, b1));
    int fp[DR_TPU_RANK];
    bool fits = true;
    for (int i = 0; i < DR_TPU_RANK; i++) {
        long long f = (long long)sh[i] * st[i];
        fp[i] = f > DR_TPU_MAX_CORES ? DR_TPU_MAX_CORES + 1 : (int)f; /* printed clamped */
        fits = fits && fp[i] <= t->mesh[i];
    }
    if (!fits)
        return dr_fail(err, DR_EUSAGE, "computation footprint %s does not fit in TPU topology "
                       "shape %s", np_str(fp, DR_TPU_RANK, b1), np_str(t->mesh, DR_TPU_RANK, b2));
    return DR_OK;
}

/* The replica grid's shape, "as close to an equal cube as possible": the
 * dimensions visited by increasing replica count, ties broken core first,
 * then x, y, z. Fails where TensorFlow's assertion would. */
static bool replica_shape(const int counts[DR_TPU_RANK], int n, int rs[DR_TPU_RANK])
{
    int order[DR_TPU_RANK] = { 3, 0, 1, 2 };          /* the tie order */
    for (int i = 1; i < DR_TPU_RANK; i++)             /* stable insertion sort */
        for (int j = i; j > 0 && counts[order[j - 1]] > counts[order[j]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    long long remaining = n;
    for (int k = 0; k < DR_TPU_RANK; k++) {
        int i = order[k];
        double target = ceil(pow((double)remaining, 1.0 / (double)(DR_TPU_RANK - k)));
        rs[i] = target < counts[i] ? (int)target : counts[i];
        remaining = (remaining + rs[i] - 1) / rs[i];
    }
    return remaining == 1;
}

/* Appends _open_ring_2d(xs, ys, z) (chip (0,0) excluded) as (x, y, z). */
static int open_ring_2d(int xs, int ys, int z, int (*r)[3], int n)
{
    for (int i = 0; i < ys / 2; i++) {
        for (int j = 1; j < xs; j++)
            r[n][0] = j, r[n][1] = 2 * i, r[n][2] = z, n++;
        for (int j = xs - 1; j > 0; j--)
            r[n][0] = j, r[n][1] = 2 * i + 1, r[n][2] = z, n++;
    }
    for (int i = ys - 1; i > 0; i--)
        r[n][0] = 0, r[n][1] = i, r[n][2] = z, n++;
    return n;
}

/* Permutes entries [from, n) of r: axis a of the result takes axis src[a]. */
static void permute(int (*r)[3], int from, int n, const int src[3])
{
    for (int k = from; k < n; k++) {
        int v[3] = { r[k][src[0]], r[k][src[1]], r[k][src[2]] };
        memcpy(r[k], v, sizeof v);
    }
}

/* _ring_3d(xs, ys, zs): a ring order over an xs*ys*zs grid of chips. */
static void ring_3d(int xs, int ys, int zs, int (*r)[3])
{
    int n = 0;
    bool odd = (xs > 1 && xs % 2) || (ys > 1 && ys % 2) || (zs > 1 && zs % 2);
    bool line = (xs == 1) + (ys == 1) + (zs == 1) >= 2;
    if (line || odd) {                                 /* row-major, x fastest */
        for (int z = 0; z < zs; z++)
            for (int y = 0; y < ys; y++)
                for (int x = 0; x < xs; x++)
                    r[n][0] = x, r[n][1] = y, r[n][2] = z, n++;
        return;
    }
    r[0][0] = r[0][1] = r[0][2] = 0;
    n = 1;
    if (zs == 1) {
        open_ring_2d(xs, ys, 0, r, n);
    } else if (ys == 1) {                              /* ring over (x, z) */
        int m = open_ring_2d(xs, zs, 0, r, n);
        permute(r, n, m, (const int[3]){ 0, 2, 1 });
    } else if (xs == 1) {                              /* ring over (y, z) */
        int m = open_ring_2d(ys, zs, 0, r, n);
        permute(r, n, m, (const int[3]){ 2, 0, 1 });
    } else {
        for (int z = 0; z < zs; z++) {
            int m = open_ring_2d(xs, ys, z, r, n);
            for (int a = n, b = m - 1; z % 2 == 1 && a < b; a++, b--)
                for (int i = 0; i < 3; i++) {
                    int tmp = r[a][i];
                    r[a][i] = r[b][i];
                    r[b][i] = tmp;
                }
            n = m;
        }
        for (int z = zs - 1; z > 0; z--)
            r[n][0] = 0, r[n][1] = 0, r[n][2] = z, n++;
    }
}

/* The 3D-tiling branch: replicas along a ring of blocks, logical cores
 * along a ring inside the block, the core within a chip fastest. */
static void assign_rings(const dr_tpu_topology *t, const int sh[DR_TPU_RANK],
                         const int rs[DR_TPU_RANK], dr_device_assignment *a)
{
    int inner[DR_TPU_MAX_CORES][3], outer[DR_TPU_MAX_CORES][3];
    ring_3d(sh[0], sh[1], sh[2], inner);
    ring_3d(rs[0], rs[1], rs[2], outer);
    int cpc = t->mesh[DR_TPU_RANK - 1];
    for (int r = 0; r < a->num_replicas; r++)
        for (int l = 0; l < a->num_cores_per_replica; l++) {
            int c[DR_TPU_RANK];
            for (int i = 0; i < 3; i++)
                c[i] = outer[r][i] * sh[i] + inner[l / cpc][i];
            c[3] = l % cpc;
            a->core[r * a->num_cores_per_replica + l] = dr_tpu_core_index(t, c);
        }
}

/* The general branch: replica r's position in the replica grid (the core
 * dimension fastest, then x, y, z) gives its offset; logical cores are the
 * computation shape in row-major (x, y, z, core) order, core fastest. */
static void assign_offsets(const dr_tpu_topology *t, const int sh[DR_TPU_RANK],
                           const int st[DR_TPU_RANK], const int rs[DR_TPU_RANK],
                           dr_device_assignment *a)
{
    static const int visit[DR_TPU_RANK] = { 3, 0, 1, 2 };
    for (int r = 0; r < a->num_replicas; r++) {
        int off[DR_TPU_RANK], rem = r;
        for (int k = 0; k < DR_TPU_RANK; k++) {
            int i = visit[k], pos = rem % rs[i];
            rem /= rs[i];
            off[i] = pos / st[i] * sh[i] * st[i] + pos % st[i];
        }
        for (int l = 0; l < a->num_cores_per_replica; l++) {
            int c[DR_TPU_RANK], q = l;
            for (int i = DR_TPU_RANK - 1; i >= 0; i--) {
                c[i] = off[i] + q % sh[i] * st[i];
                q /= sh[i];
            }
            a->core[r * a->num_cores_per_replica + l] = dr_tpu_core_index(t, c);
        }
    }
}

int dr_device_assignment_build_n(const dr_tpu_topology *t, const int *computation_shape,
                                 int shape_len, const int *computation_stride, int stride_len,
                                 int num_replicas, dr_device_assignment *out, dr_err *err)
{
    int sh[DR_TPU_RANK], st[DR_TPU_RANK], counts[DR_TPU_RANK], rs[DR_TPU_RANK];
    int rc = check_mesh(t, err);
    if (rc == DR_OK)
        rc = check_args(t, computation_shape, shape_len, computation_stride, stride_len,
                        sh, st, err);
    if (rc != DR_OK)
        return rc;
    int max = 1, per = 1, stride_prod = 1;
    for (int i = 0; i < DR_TPU_RANK; i++) {
        counts[i] = t->mesh[i] / (sh[i] * st[i]) * st[i];
        max *= counts[i];
        per *= sh[i];
        stride_prod *= st[i];
    }
    char b1[64], b2[64], b3[64];
    if (num_replicas > max)
        return dr_fail(err, DR_EUSAGE, "requested %d replicas but only %d replicas with shape "
                       "%s and computation_stride %s fit in a TPU mesh of shape %s", num_replicas,
                       max, np_str(sh, DR_TPU_RANK, b1), np_str(st, DR_TPU_RANK, b2),
                       np_str(t->mesh, DR_TPU_RANK, b3));
    if (num_replicas < 0)
        return dr_fail(err, DR_EUSAGE, "num_replicas must be >= 0 (0: as many as fit); got %d",
                       num_replicas);
    int n = num_replicas == 0 ? max : num_replicas;
    if (!replica_shape(counts, n, rs))
        return dr_fail(err, DR_EUSAGE, "requested %d replicas: TensorFlow's replica layout "
                       "cannot place them (assert remaining_replicas == 1 fails)", n);
    dr_device_assignment a;
    memset(&a, 0, sizeof a);
    a.num_replicas = n;
    a.num_cores_per_replica = per;
    if (sh[DR_TPU_RANK - 1] == t->mesh[DR_TPU_RANK - 1] && stride_prod == 1 && n == max)
        assign_rings(t, sh, rs, &a);
    else
        assign_offsets(t, sh, st, rs, &a);
    *out = a;
    return DR_OK;
}

int dr_device_assignment_build(const dr_tpu_topology *t, const int *computation_shape,
                               const int *computation_stride, int num_replicas,
                               dr_device_assignment *out, dr_err *err)
{
    return dr_device_assignment_build_n(t, computation_shape, DR_TPU_RANK, computation_stride,
                                        DR_TPU_RANK, num_replicas, out, err);
}

#define PARTITION_FLAG "--input_partition_dims"
#define MAX_PARTITION_DIM 1000000

/* "2,2" -> {2, 2}: exactly two comma-separated decimal integers. */
static int parse_dims(const char *s, int d[2], dr_err *err)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        long v = 0;
        const char *start = p;
        for (; *p >= '0' && *p <= '9'; p++)
            v = v > MAX_PARTITION_DIM ? v : v * 10 + (*p - '0');
        if (p == start || (*p != ',' && *p != '\0'))
            return dr_fail(err, DR_EUSAGE, PARTITION_FLAG "=%s: expected comma-separated "
                           "positive integers such as 2,2", s);
        if (v == 0 || v > MAX_PARTITION_DIM)
            return dr_fail(err, DR_EUSAGE, PARTITION_FLAG "=%s: each dim must be an integer "
                           "from 1 to %d", s, MAX_PARTITION_DIM);
        if (n < 2)
            d[n] = (int)v;
        n++;
        if (*p++ == '\0')
            break;
    }
    if (n != 2)
        return dr_fail(err, DR_EUSAGE, PARTITION_FLAG "=%s: expected 2 dims (height,width "
                       "of the image input); got %d", s, n);
    return DR_OK;
}

int dr_tpu_partition_shape(const char *dims, const int input_shape[2], int ndims_out[2],
                           int computation_shape[DR_TPU_RANK], int *product, dr_err *err)
{
    static const int shapes[5][DR_TPU_RANK] = {
        { 1, 1, 1, 1 }, { 1, 1, 1, 2 }, { 1, 2, 1, 2 }, { 2, 2, 1, 2 }, { 4, 2, 1, 2 },
    };
    int d[2];
    int rc = parse_dims(dims != NULL ? dims : "", d, err);
    if (rc != DR_OK)
        return rc;
    long long prod = (long long)d[0] * d[1];
    int k = 0;
    while (k < 5 && (1LL << k) != prod)
        k++;
    if (k == 5)
        return dr_fail(err, DR_EUSAGE, PARTITION_FLAG ": the product of the partition dims "
                       "must be 1, 2, 4, 8 or 16; got %lld", prod);
    for (int i = 0; i < 2; i++)
        if (input_shape[i] % d[i] != 0)
            return dr_fail(err, DR_EUSAGE, PARTITION_FLAG ": %d does not divide the input "
                           "dimension %d", d[i], input_shape[i]);
    ndims_out[0] = d[0];
    ndims_out[1] = d[1];
    memcpy(computation_shape, shapes[k], sizeof shapes[k]);
    *product = (int)prod;
    return DR_OK;
}

/* ---- the system ----------------------------------------------------------- */

int dr_tpu_initialize_system(dr_tpu_system *sys, const char *tpu, const char *platform,
                             double hbm_scale, dr_err *err)
{
    dr_tpu_topology t;
    int rc = dr_tpu_topology_resolve(tpu, platform, hbm_scale, &t, err);
    if (rc != DR_OK)
        return rc;
    sys->topology = t;
    sys->initialized = true;
    sys->generation++;
    return DR_OK;
}

double dr_tpu_transfer_seconds(const dr_tpu_topology *t, int core_a, int core_b, uint64_t bytes)
{
    int hops = dr_tpu_hops(t, core_a, core_b);
    return (hops > 0 ? hops : 0) * t->link_latency_s + (double)bytes / t->link_bytes_per_s;
}
