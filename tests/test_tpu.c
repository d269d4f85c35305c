/* Unit tests for core/tpu_system.c: topology presets and their rejections, core
 * coordinates and torus hops, DeviceAssignment.build against assignments
 * computed with TensorFlow's device_assignment() algorithm, every error
 * message it has, and Model Garden's spatial-partitioning shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "distref/tpu.h"

#define GIB (UINT64_C(1) << 30)
#define ONES ((const int[4]){ 1, 1, 1, 1 })

static dr_tpu_topology topo(const char *name, const char *platform)
{
    dr_tpu_topology t;
    dr_err err = { 0, "" };
    if (dr_tpu_topology_resolve(name, platform, 1.0, &t, &err) != DR_OK)
        fail_msg("%s/%s rejected: %s", name ? name : "NULL", platform ? platform : "NULL",
                 err.msg);
    return t;
}

static void expect_topo(const char *name, const char *platform, const char *want_name,
                        int x, int y, int cores, uint64_t gib)
{
    dr_tpu_topology t = topo(name, platform);
    assert_string_equal(t.name, want_name);
    assert_memory_equal(t.mesh, ((const int[4]){ x, y, 1, 2 }), sizeof t.mesh);
    assert_int_equal(t.num_cores, cores);
    assert_true(t.hbm_bytes_per_core == gib * GIB);
    assert_true(t.link_latency_s == 1e-6);
    assert_true(t.link_bytes_per_s == 50e9);
}

/* Rejected with DR_EUSAGE, a message containing want, out untouched. */
static void expect_topo_err(const char *name, const char *platform, double scale,
                            const char *want)
{
    dr_tpu_topology t, before;
    memset(&t, 0x5a, sizeof t);
    before = t;
    dr_err err = { 0, "" };
    assert_int_equal(dr_tpu_topology_resolve(name, platform, scale, &t, &err), DR_EUSAGE);
    assert_int_equal(err.code, DR_EUSAGE);
    if (strstr(err.msg, want) == NULL)
        fail_msg("%s/%s: message \"%s\" lacks \"%s\"", name, platform, err.msg, want);
    assert_memory_equal(&t, &before, sizeof t);
}

static void test_presets(void **state)
{
    (void)state;
    expect_topo("v2-8", "", "v2-8", 2, 2, 8, 8);
    expect_topo("v3-8", "", "v3-8", 2, 2, 8, 16);
    expect_topo("v3-32", "", "v3-32", 4, 4, 32, 16);
    expect_topo("v4-8", "", "v4-8", 2, 2, 8, 16);
}

static void test_local_and_platform(void **state)
{
    (void)state;
    expect_topo("local", "", "v3-8", 2, 2, 8, 16);
    expect_topo("", "", "v3-8", 2, 2, 8, 16);
    expect_topo(NULL, NULL, "v3-8", 2, 2, 8, 16);
    expect_topo("local", "v2", "v2-8", 2, 2, 8, 8);
    expect_topo("", "v3", "v3-8", 2, 2, 8, 16);
    expect_topo("local", "v4", "v4-8", 2, 2, 8, 16);
    /* A preset with its own generation as the platform. */
    expect_topo("v3-32", "v3", "v3-32", 4, 4, 32, 16);
    expect_topo("v2-8", "v2", "v2-8", 2, 2, 8, 8);
}

static void test_generic_names(void **state)
{
    (void)state;
    expect_topo("v3-16", NULL, "v3-16", 4, 2, 16, 16);
    expect_topo("v2-32", NULL, "v2-32", 4, 4, 32, 8);
    expect_topo("v3-64", NULL, "v3-64", 8, 4, 64, 16);
    expect_topo("v2-128", NULL, "v2-128", 8, 8, 128, 8);
    expect_topo("v4-512", "v4", "v4-512", 16, 16, 512, 16);
    const char *bad[] = { "v3-4", "v3-2", "v3-12", "v3-1024", "v3-0", "v3-08", "v5-8", "v1-8",
                          "v3-", "v3", "V3-8", "v3-8x", "v3-8 ", " v3-8", "v3_8", "tpu",
                          "10.0.0.2:8470", "v3-99999999999999999999" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_topo_err(bad[i], "", 1.0, "unknown TPU; expected local, v2-8, v3-8, v3-32, v4-8");
    expect_topo_err("my-tpu", "", 1.0,
                    "--tpu=my-tpu: unknown TPU; expected local, v2-8, v3-8, v3-32, v4-8 (or any "
                    "vN-M with N = 2, 3, 4 and M = 8, 16, 32, ..., 512 TensorCores)");
}

static void test_reject_grpc(void **state)
{
    (void)state;
    expect_topo_err("grpc://10.0.0.2:8470", "", 1.0,
                    "--tpu=grpc://10.0.0.2:8470: no remote TPU in emulation; use --tpu=local "
                    "or a preset such as v3-8");
    /* Checked first: a bad platform does not hide it. */
    expect_topo_err("grpc://x", "v9", 1.0, "no remote TPU in emulation");
}

static void test_reject_platform(void **state)
{
    (void)state;
    const char *bad[] = { "v5", "v1", "V3", "v3 ", "tpu", "v34" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_topo_err("local", bad[i], 1.0, "unknown TPU platform; expected v2, v3 or v4");
    expect_topo_err("local", "v5", 1.0, "--tpu_platform=v5: unknown TPU platform");
    expect_topo_err("v3-8", "v2", 1.0, "--tpu_platform=v2 disagrees with --tpu=v3-8, a v3 slice");
    expect_topo_err("v3-32", "v4", 1.0, "--tpu_platform=v4 disagrees with --tpu=v3-32");
    expect_topo_err("v4-8", "v3", 1.0, "--tpu_platform=v3 disagrees with --tpu=v4-8, a v4 slice");
}

static void test_hbm_scale(void **state)
{
    (void)state;
    dr_tpu_topology t;
    dr_err err = { 0, "" };
    assert_int_equal(dr_tpu_topology_resolve("v3-8", "", 0.5, &t, &err), DR_OK);
    assert_true(t.hbm_bytes_per_core == 8 * GIB);
    assert_int_equal(dr_tpu_topology_resolve("v2-8", "", 1.0 / (double)GIB, &t, &err), DR_OK);
    assert_true(t.hbm_bytes_per_core == 8);
    assert_int_equal(dr_tpu_topology_resolve("local", "", 3.0, &t, &err), DR_OK);
    assert_true(t.hbm_bytes_per_core == 48 * GIB);
    const double bad[] = { 0.0, -1.0, -0.0, NAN, INFINITY, -INFINITY };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_topo_err("v3-8", "", bad[i], "hbm_scale must be a positive finite number");
    expect_topo_err("v3-8", "", 1e-12, "bytes of HBM per core; expected 1 to 2^64-1");
    expect_topo_err("v3-8", "", 1e300, "bytes of HBM per core; expected 1 to 2^64-1");
}

static void test_coords_round_trip(void **state)
{
    (void)state;
    dr_tpu_topology t = topo("v3-32", "");
    int seen[4][4][2] = { { { 0 } } };
    for (int c = 0; c < t.num_cores; c++) {
        int xyz[4];
        dr_tpu_core_coords(&t, c, xyz);
        assert_true(xyz[0] >= 0 && xyz[0] < 4 && xyz[1] >= 0 && xyz[1] < 4 && xyz[2] == 0
                    && xyz[3] >= 0 && xyz[3] < 2);
        assert_int_equal(c, ((xyz[0] * 4 + xyz[1]) * 1 + xyz[2]) * 2 + xyz[3]);
        assert_int_equal(dr_tpu_core_index(&t, xyz), c);
        seen[xyz[0]][xyz[1]][xyz[3]]++;
    }
    for (int i = 0; i < 32; i++)
        assert_int_equal((&seen[0][0][0])[i], 1);
    int c[4];
    dr_tpu_core_coords(&t, 27, c);                  /* 27 = ((3*4+1)*1+0)*2+1 */
    assert_memory_equal(c, ((const int[4]){ 3, 1, 0, 1 }), sizeof c);
    /* Out of range both ways. */
    dr_tpu_core_coords(&t, 32, c);
    assert_int_equal(c[0], -1);
    dr_tpu_core_coords(&t, -1, c);
    assert_int_equal(c[3], -1);
    assert_int_equal(dr_tpu_core_index(&t, (const int[4]){ 4, 0, 0, 0 }), -1);
    assert_int_equal(dr_tpu_core_index(&t, (const int[4]){ 0, 0, 1, 0 }), -1);
    assert_int_equal(dr_tpu_core_index(&t, (const int[4]){ 0, 0, 0, 2 }), -1);
    assert_int_equal(dr_tpu_core_index(&t, (const int[4]){ 0, -1, 0, 0 }), -1);
}

static int core_at(const dr_tpu_topology *t, int x, int y, int k)
{
    return dr_tpu_core_index(t, (const int[4]){ x, y, 0, k });
}

static void test_hops(void **state)
{
    (void)state;
    dr_tpu_topology t8 = topo("v3-8", "");
    assert_int_equal(dr_tpu_hops(&t8, 0, 1), 0);        /* one chip */
    assert_int_equal(dr_tpu_hops(&t8, 0, 0), 0);
    assert_int_equal(dr_tpu_hops(&t8, 0, 2), 1);        /* y neighbour */
    assert_int_equal(dr_tpu_hops(&t8, 1, 4), 1);        /* x neighbour */
    assert_int_equal(dr_tpu_hops(&t8, 0, 7), 2);        /* diagonal */
    dr_tpu_topology t = topo("v3-32", "");
    assert_int_equal(dr_tpu_hops(&t, core_at(&t, 0, 0, 0), core_at(&t, 1, 0, 1)), 1);
    assert_int_equal(dr_tpu_hops(&t, core_at(&t, 0, 0, 0), core_at(&t, 2, 0, 0)), 2);
    /* Wrap-around: x = 0 and x = 3 are neighbours on a 4-wide torus. */
    assert_int_equal(dr_tpu_hops(&t, core_at(&t, 0, 0, 0), core_at(&t, 3, 0, 0)), 1);
    assert_int_equal(dr_tpu_hops(&t, core_at(&t, 0, 3, 1), core_at(&t, 0, 0, 0)), 1);
    assert_int_equal(dr_tpu_hops(&t, core_at(&t, 0, 0, 0), core_at(&t, 3, 3, 1)), 2);
    assert_int_equal(dr_tpu_hops(&t, core_at(&t, 0, 0, 0), core_at(&t, 2, 2, 0)), 4);
    assert_int_equal(dr_tpu_hops(&t, core_at(&t, 1, 3, 0), core_at(&t, 3, 1, 1)), 4);
    /* Symmetric, 0 exactly on one chip, 4 neighbouring chips each, triangle inequality. */
    for (int a = 0; a < 32; a++) {
        int neighbours = 0;
        for (int b = 0; b < 32; b++) {
            int h = dr_tpu_hops(&t, a, b);
            assert_int_equal(h, dr_tpu_hops(&t, b, a));
            assert_int_equal(h == 0, a / 2 == b / 2);
            assert_in_range(h, 0, 4);
            neighbours += h == 1;
            for (int c = 0; c < 32; c++)
                assert_true(h <= dr_tpu_hops(&t, a, c) + dr_tpu_hops(&t, c, b));
        }
        assert_int_equal(neighbours, 4 * 2);             /* 4 chips, 2 cores each */
    }
    assert_int_equal(dr_tpu_hops(&t, -1, 0), -1);
    assert_int_equal(dr_tpu_hops(&t, 0, 32), -1);
}

/* Builds and compares with an assignment computed by TensorFlow's algorithm. */
static void expect_da(const char *name, const int *shape, const int *stride, int num_replicas,
                      int want_replicas, int want_per, const int *want)
{
    dr_tpu_topology t = topo(name, "");
    dr_device_assignment a;
    dr_err err = { 0, "" };
    if (dr_device_assignment_build(&t, shape, stride, num_replicas, &a, &err) != DR_OK)
        fail_msg("%s: %s", name, err.msg);
    assert_int_equal(a.num_replicas, want_replicas);
    assert_int_equal(a.num_cores_per_replica, want_per);
    for (int i = 0; i < want_replicas * want_per; i++)
        if (a.core[i] != want[i])
            fail_msg("%s: replica %d logical core %d is core %d, expected %d", name,
                     i / want_per, i % want_per, a.core[i], want[i]);
}

static void test_da_default_shape(void **state)
{
    (void)state;
    /* Replica grid [2,2,1,2]; the core dimension counts fastest, then x, y. */
    expect_da("v3-8", NULL, NULL, 0, 8, 1, (const int[]){ 0, 1, 4, 5, 2, 3, 6, 7 });
    expect_da("v3-8", ONES, ONES, 8, 8, 1, (const int[]){ 0, 1, 4, 5, 2, 3, 6, 7 });
    expect_da("v3-8", NULL, NULL, 1, 1, 1, (const int[]){ 0 });   /* TF's default */
    expect_da("v3-32", NULL, NULL, 6, 6, 1, (const int[]){ 0, 1, 8, 9, 2, 3 });
}

/* Replicas of whole chips, full replication: TF's ring tiling. */
static void test_da_chip_rings(void **state)
{
    (void)state;
    /* Full replication with whole chips: TF's ring over the 2x2 chips. */
    const int chip[4] = { 1, 1, 1, 2 };
    expect_da("v3-8", chip, NULL, 0, 4, 2, (const int[]){ 0, 1, 4, 5, 6, 7, 2, 3 });
    expect_da("v3-8", chip, NULL, 4, 4, 2, (const int[]){ 0, 1, 4, 5, 6, 7, 2, 3 });
    /* Fewer replicas: no ring, grid order. */
    expect_da("v3-8", chip, NULL, 2, 2, 2, (const int[]){ 0, 1, 4, 5 });
    /* v3-32: the ring visits all 16 chips, each step one hop, and closes. */
    expect_da("v3-32", chip, NULL, 0, 16, 2,
              (const int[]){ 0, 1, 8, 9, 16, 17, 24, 25, 26, 27, 18, 19, 10, 11, 12, 13,
                             20, 21, 28, 29, 30, 31, 22, 23, 14, 15, 6, 7, 4, 5, 2, 3 });
    dr_tpu_topology t = topo("v3-32", "");
    dr_device_assignment a;
    assert_int_equal(dr_device_assignment_build(&t, chip, NULL, 0, &a, NULL), DR_OK);
    for (int r = 0; r < 16; r++) {
        assert_int_equal(a.core[2 * r] / 2, a.core[2 * r + 1] / 2);   /* one chip */
        assert_int_equal(dr_tpu_hops(&t, a.core[2 * r], a.core[(2 * r + 2) % 32]), 1);
    }
    /* [2,2,1,2] on v3-32: a ring of 4 blocks, a ring of chips in each. */
    expect_da("v3-32", (const int[4]){ 2, 2, 1, 2 }, NULL, 0, 4, 8,
              (const int[]){ 0, 1, 8, 9, 10, 11, 2, 3, 16, 17, 24, 25, 26, 27, 18, 19,
                             20, 21, 28, 29, 30, 31, 22, 23, 4, 5, 12, 13, 14, 15, 6, 7 });
    /* One replica over all of v3-16: a ring of its 4x2 chips. */
    expect_da("v3-16", (const int[4]){ 4, 2, 1, 2 }, NULL, 0, 1, 16,
              (const int[]){ 0, 1, 4, 5, 8, 9, 12, 13, 14, 15, 10, 11, 6, 7, 2, 3 });
}

/* Hand-built 3D meshes (no preset has z > 1): TF's _ring_3d over z too. */
static void expect_ring_3d(int x, int y, int z, const int want[16])
{
    dr_tpu_topology t = topo("v3-8", "");
    memcpy(t.mesh, ((const int[4]){ x, y, z, 2 }), sizeof t.mesh);
    t.num_cores = 16;
    dr_device_assignment a;
    assert_int_equal(dr_device_assignment_build(&t, (const int[4]){ 1, 1, 1, 2 }, NULL, 0, &a,
                                                NULL), DR_OK);
    assert_int_equal(a.num_replicas, 8);
    assert_memory_equal(a.core, want, 16 * sizeof(int));
}

static void test_da_rings_3d(void **state)
{
    (void)state;
    static const int cube[16] = { 0, 1, 8, 9, 12, 13, 4, 5, 6, 7, 14, 15, 10, 11, 2, 3 };
    static const int flat[16] = { 0, 1, 8, 9, 10, 11, 12, 13, 14, 15, 6, 7, 4, 5, 2, 3 };
    expect_ring_3d(2, 2, 2, cube);                     /* z = 1 walks its ring backwards */
    expect_ring_3d(2, 1, 4, flat);                     /* a ring over (x, z) */
    expect_ring_3d(1, 2, 4, flat);                     /* a ring over (y, z) */
}

static void test_da_stride(void **state)
{
    (void)state;
    expect_da("v3-8", NULL, (const int[4]){ 2, 1, 1, 1 }, 0, 8, 1,
              (const int[]){ 0, 1, 4, 5, 2, 3, 6, 7 });
    expect_da("v3-8", NULL, (const int[4]){ 1, 1, 1, 2 }, 3, 3, 1, (const int[]){ 0, 1, 4 });
    /* Logical cores two rows apart in x; replicas interleave. */
    expect_da("v3-8", (const int[4]){ 1, 2, 1, 1 }, (const int[4]){ 2, 1, 1, 1 }, 0, 4, 2,
              (const int[]){ 0, 2, 1, 3, 4, 6, 5, 7 });
    expect_da("v3-32", (const int[4]){ 2, 1, 1, 1 }, (const int[4]){ 1, 2, 1, 2 }, 0, 16, 2,
              (const int[]){ 0, 8, 1, 9, 16, 24, 17, 25, 2, 10, 3, 11, 18, 26, 19, 27,
                             4, 12, 5, 13, 20, 28, 21, 29, 6, 14, 7, 15, 22, 30, 23, 31 });
    expect_da("v3-32", (const int[4]){ 1, 2, 1, 2 }, (const int[4]){ 2, 1, 1, 1 }, 5, 5, 4,
              (const int[]){ 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 4, 5, 6, 7,
                             12, 13, 14, 15 });
}

/* Every shape, stride and replica count on v3-8, v3-16 and v3-32: replicas
 * never share a core and each has prod(shape) cores. */
static void check_disjoint(const dr_tpu_topology *t, const int sh[4], const int st[4])
{
    int max = 1, per = 1;
    for (int i = 0; i < 4; i++) {
        if (sh[i] * st[i] > t->mesh[i])
            return;
        max *= t->mesh[i] / (sh[i] * st[i]) * st[i];
        per *= sh[i];
    }
    for (int n = 0; n <= max; n++) {
        dr_device_assignment a;
        dr_err err = { 0, "" };
        if (dr_device_assignment_build(t, sh, st, n, &a, &err) != DR_OK)
            fail_msg("%s n=%d: %s", t->name, n, err.msg);
        assert_int_equal(a.num_replicas, n == 0 ? max : n);
        assert_int_equal(a.num_cores_per_replica, per);
        char used[DR_TPU_MAX_CORES] = { 0 };
        for (int i = 0; i < a.num_replicas * per; i++) {
            assert_in_range(a.core[i], 0, t->num_cores - 1);
            assert_int_equal(used[a.core[i]]++, 0);
        }
    }
}

static void test_da_all_layouts_disjoint(void **state)
{
    (void)state;
    const char *names[] = { "v3-8", "v3-16", "v3-32" };
    for (size_t k = 0; k < 3; k++) {
        dr_tpu_topology t = topo(names[k], "");
        int sh[4], st[4];
        for (sh[0] = 1; sh[0] <= t.mesh[0]; sh[0]++)
        for (sh[1] = 1; sh[1] <= t.mesh[1]; sh[1]++)
        for (sh[3] = 1; sh[3] <= 2; sh[3]++)
        for (st[0] = 1; st[0] <= t.mesh[0]; st[0]++)
        for (st[1] = 1; st[1] <= t.mesh[1]; st[1]++)
        for (st[3] = 1; st[3] <= 2; st[3]++) {
            sh[2] = st[2] = 1;
            check_disjoint(&t, sh, st);
        }
    }
}

/* Rejected with DR_EUSAGE and exactly TensorFlow's message; out untouched. */
static void expect_da_err(const char *name, const int *shape, int shape_len, const int *stride,
                          int stride_len, int n, const char *want)
{
    dr_tpu_topology t = topo(name, "");
    dr_device_assignment a, before;
    memset(&a, 0x5a, sizeof a);
    before = a;
    dr_err err = { 0, "" };
    assert_int_equal(dr_device_assignment_build_n(&t, shape, shape_len, stride, stride_len, n,
                                                  &a, &err), DR_EUSAGE);
    assert_int_equal(err.code, DR_EUSAGE);
    assert_string_equal(err.msg, want);
    assert_memory_equal(&a, &before, sizeof a);
}

static void test_da_errors(void **state)
{
    (void)state;
    const int three[3] = { 1, 1, 1 };
    expect_da_err("v3-8", three, 3, NULL, 4, 1, "computation_shape must have shape [4]; got (3,)");
    expect_da_err("v3-8", ONES, 4, ONES, 5, 1, "computation_stride must have shape [4]; got (5,)");
    /* The rank checks come before the sign checks. */
    expect_da_err("v3-8", (const int[4]){ 0, 1, 1, 1 }, 4, three, 3, 1,
                  "computation_stride must have shape [4]; got (3,)");
    expect_da_err("v3-8", (const int[4]){ 1, 0, 1, 2 }, 4, NULL, 0, 1,
                  "computation_shape must be positive; got computation_shape=[1 0 1 2]");
    /* numpy pads every entry to the widest one. */
    expect_da_err("v3-8", ONES, 4, (const int[4]){ 1, -1, 1, 1 }, 4, 1,
                  "computation_stride must be positive; got computation_stride=[ 1 -1  1  1]");
    expect_da_err("v3-8", (const int[4]){ 4, 2, 1, 2 }, 4, NULL, 4, 1,
                  "computation footprint [4 2 1 2] does not fit in TPU topology shape [2 2 1 2]");
    expect_da_err("v3-8", (const int[4]){ 1, 1, 1, 2 }, 4, (const int[4]){ 1, 1, 1, 2 }, 4, 1,
                  "computation footprint [1 1 1 4] does not fit in TPU topology shape [2 2 1 2]");
    expect_da_err("v3-8", (const int[4]){ 1, 1, 1, 2 }, 4, NULL, 4, 5,
                  "requested 5 replicas but only 4 replicas with shape [1 1 1 2] and "
                  "computation_stride [1 1 1 1] fit in a TPU mesh of shape [2 2 1 2]");
    expect_da_err("v3-32", NULL, 4, (const int[4]){ 2, 1, 1, 1 }, 4, 33,
                  "requested 33 replicas but only 32 replicas with shape [1 1 1 1] and "
                  "computation_stride [2 1 1 1] fit in a TPU mesh of shape [4 4 1 2]");
    expect_da_err("v3-512", (const int[4]){ 16, 1, 1, 1 }, 4, NULL, 4, 33,
                  "requested 33 replicas but only 32 replicas with shape [16  1  1  1] and "
                  "computation_stride [1 1 1 1] fit in a TPU mesh of shape [16 16  1  2]");
    expect_da_err("v3-8", NULL, 4, NULL, 4, -1,
                  "num_replicas must be >= 0 (0: as many as fit); got -1");
}

static void test_da_bad_topology(void **state)
{
    (void)state;
    dr_tpu_topology t = topo("v3-8", "");
    t.mesh[2] = 0;
    dr_device_assignment a;
    dr_err err = { 0, "" };
    assert_int_equal(dr_device_assignment_build(&t, NULL, NULL, 1, &a, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "`mesh_shape` must be a sequence of 4 positive entries"));
    t = topo("v3-8", "");
    t.num_cores = 16;                                   /* inconsistent with the mesh */
    assert_int_equal(dr_device_assignment_build(&t, NULL, NULL, 1, &a, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "got [2 2 1 2]"));
}

static void expect_partition(const char *dims, int d0, int d1, int product,
                             const int want_shape[4])
{
    int nd[2], cs[4], prod = 0;
    dr_err err = { 0, "" };
    if (dr_tpu_partition_shape(dims, (const int[2]){ 28, 28 }, nd, cs, &prod, &err) != DR_OK)
        fail_msg("%s rejected: %s", dims, err.msg);
    assert_true(nd[0] == d0 && nd[1] == d1);
    assert_int_equal(prod, product);
    assert_memory_equal(cs, want_shape, sizeof cs);
}

static void test_partition_shapes(void **state)
{
    (void)state;
    expect_partition("1,1", 1, 1, 1, (const int[4]){ 1, 1, 1, 1 });
    expect_partition("2,1", 2, 1, 2, (const int[4]){ 1, 1, 1, 2 });
    expect_partition("1,2", 1, 2, 2, (const int[4]){ 1, 1, 1, 2 });
    expect_partition("2,2", 2, 2, 4, (const int[4]){ 1, 2, 1, 2 });
    expect_partition("4,1", 4, 1, 4, (const int[4]){ 1, 2, 1, 2 });
    expect_partition("4,2", 4, 2, 8, (const int[4]){ 2, 2, 1, 2 });
    expect_partition("2,4", 2, 4, 8, (const int[4]){ 2, 2, 1, 2 });
    expect_partition("4,4", 4, 4, 16, (const int[4]){ 4, 2, 1, 2 });
    /* The shapes fit the presets; num_replicas = num_cores / product. */
    dr_tpu_topology t = topo("v3-32", "");
    int nd[2], cs[4], prod;
    assert_int_equal(dr_tpu_partition_shape("4,4", (const int[2]){ 28, 28 }, nd, cs, &prod, NULL),
                     DR_OK);
    dr_device_assignment a;
    assert_int_equal(dr_device_assignment_build(&t, cs, NULL, t.num_cores / prod, &a, NULL), DR_OK);
    assert_int_equal(a.num_replicas, 2);
    assert_int_equal(a.num_cores_per_replica, 16);
}

static void expect_partition_err(const char *dims, const char *want)
{
    int nd[2] = { 7, 7 }, cs[4] = { 7, 7, 7, 7 }, prod = 7;
    dr_err err = { 0, "" };
    assert_int_equal(dr_tpu_partition_shape(dims, (const int[2]){ 28, 28 }, nd, cs, &prod, &err),
                     DR_EUSAGE);
    assert_int_equal(err.code, DR_EUSAGE);
    if (strstr(err.msg, want) == NULL)
        fail_msg("%s: message \"%s\" lacks \"%s\"", dims ? dims : "NULL", err.msg, want);
    assert_non_null(strstr(err.msg, "--input_partition_dims"));
    assert_int_equal(nd[0] + nd[1] + cs[0] + cs[1] + cs[2] + cs[3] + prod, 7 * 7);
}

static void test_partition_rejections(void **state)
{
    (void)state;
    expect_partition_err("3,1", "--input_partition_dims: the product of the partition dims "
                         "must be 1, 2, 4, 8 or 16; got 3");
    expect_partition_err("3,3", "must be 1, 2, 4, 8 or 16; got 9");
    expect_partition_err("8,4", "must be 1, 2, 4, 8 or 16; got 32");
    expect_partition_err("7,1", "got 7");
    expect_partition_err("8,1", "--input_partition_dims: 8 does not divide the input dimension 28");
    expect_partition_err("1,16", "--input_partition_dims: 16 does not divide the input "
                         "dimension 28");
    expect_partition_err("2,2,2", "expected 2 dims (height,width of the image input); got 3");
    expect_partition_err("4", "expected 2 dims (height,width of the image input); got 1");
    expect_partition_err("0,2", "each dim must be an integer from 1 to 1000000");
    expect_partition_err("2,0", "each dim must be an integer from 1 to 1000000");
    expect_partition_err("99999999999999999999,1", "each dim must be an integer from 1 to");
    const char *junk[] = { "", "a,2", "2,", ",2", "2,,2", "-2,2", "+2,2", "2, 2", " 2,2", "2x2",
                           "2.0,2", "2,2 " };
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++)
        expect_partition_err(junk[i], "expected comma-separated positive integers such as 2,2");
    expect_partition_err(NULL, "expected comma-separated positive integers");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_local_and_platform),
        cmocka_unit_test(test_generic_names),
        cmocka_unit_test(test_reject_grpc),
        cmocka_unit_test(test_reject_platform),
        cmocka_unit_test(test_hbm_scale),
        cmocka_unit_test(test_coords_round_trip),
        cmocka_unit_test(test_hops),
        cmocka_unit_test(test_da_default_shape),
        cmocka_unit_test(test_da_chip_rings),
        cmocka_unit_test(test_da_rings_3d),
        cmocka_unit_test(test_da_stride),
        cmocka_unit_test(test_da_all_layouts_disjoint),
        cmocka_unit_test(test_da_errors),
        cmocka_unit_test(test_da_bad_topology),
        cmocka_unit_test(test_partition_shapes),
        cmocka_unit_test(test_partition_rejections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
