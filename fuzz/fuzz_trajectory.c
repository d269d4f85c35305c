/* distref fuzzing — trajectories and `distref diff`'s readers (core/npy.c,
 * core/trajectory*.c, core/traj_diff*.c).
 *
 * Feeds: byte 0 picks what the rest is:
 *   0  index.json text: dr_traj_index_parse; an accepted index is written
 *      back (dr_traj_index_json) and must parse again to the same text
 *   1  a .npy file: dr_npy_parse; an accepted array is written back with
 *      dr_npy_header and must parse again to the same shape and bits
 *   2  a .npy file as B's tensor "t" (index shape [4]) of a one-step
 *      trajectory, diffed against A's fixed one (text, then JSON, ulp=1)
 *   3  --trajectory and --tolerance text: dr_traj_spec_parse,
 *      dr_diff_tolerance_parse
 * Checks: no crash, UB or leak; any error return is fine; the round trips.
 */
#include "distref/npy.h"
#include "distref/trajectory.h"
#include "distref/traj_diff.h"
#include "fuzz/fuzz_common.h"

static const char k_index[] = "{\"format\": \"distref-trajectory\", \"version\": 1, \"settings\": {\"experiment\": \"e\"}, "
                              "\"tensors\": [{\"name\": \"t\", \"shape\": [4], \"dtype\": \"float32\"}], "
                              "\"steps\": [{\"step\": 1, \"dir\": \"s\", \"tensors\": [\"t\"]}]}\n";

static void index_round_trip(const uint8_t *data, size_t size)
{
    dr_traj_index ix, again;
    dr_err err = { 0, "" };
    char *text, *text2;
    if (dr_traj_index_parse((const char *)data, size, "index.json", &ix, &err) != DR_OK) return;
    text = dr_traj_index_json(&ix);
    if (!text) __builtin_trap();
    if (dr_traj_index_parse(text, strlen(text), "again", &again, &err) != DR_OK) __builtin_trap();
    text2 = dr_traj_index_json(&again);
    if (!text2 || strcmp(text, text2) != 0) __builtin_trap();
    free(text);
    free(text2);
    dr_traj_index_free(&ix);
    dr_traj_index_free(&again);
}

static void npy_round_trip(const uint8_t *data, size_t size)
{
    dr_npy a, b;
    dr_err err = { 0, "" };
    char hdr[1024];
    size_t h;
    uint8_t *buf;
    if (dr_npy_parse(data, size, "x.npy", &a, &err) != DR_OK) return;
    h = dr_npy_header(a.ndim, a.shape, hdr, sizeof hdr);
    if (!h || !(buf = malloc(h + a.count * 4 + 1))) __builtin_trap();
    memcpy(buf, hdr, h);
    if (a.count) memcpy(buf + h, a.data, a.count * 4);
    if (dr_npy_parse(buf, h + a.count * 4, "again", &b, &err) != DR_OK) __builtin_trap();
    if (b.ndim != a.ndim || b.count != a.count || memcmp(b.shape, a.shape, sizeof a.shape) ||
        (a.count && memcmp(a.data, b.data, a.count * 4)))
        __builtin_trap();
    free(buf);
    dr_npy_free(&a);
    dr_npy_free(&b);
}

static char g_root[300];

static void cleanup(void)
{
    static const char *const files[] = { "a/s/t.npy", "b/s/t.npy", "a/index.json", "b/index.json", "a/s", "b/s", "a", "b" };
    char p[600];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", g_root, files[i]);
        if (remove(p) != 0) { /* a missing one is fine */ }
    }
}

static void put(const char *rel, const void *data, size_t n)
{
    char p[600];
    FILE *f;
    snprintf(p, sizeof p, "%s/%s", g_root, rel);
    if ((f = fopen(p, "wb"))) {
        if (n && fwrite(data, 1, n, f) != n) { /* the diff reports a short file */ }
        fclose(f);
    }
}

static void diff_against(const uint8_t *data, size_t size)
{
    static const float x[4] = { 1.0f, -0.0f, 3.0f, 1e-40f };
    static const uint64_t shape[1] = { 4 };
    char a[600], b[600], path[700];
    dr_diff_opts o;
    dr_err err = { 0, "" };
    bool pass;
    FILE *null = fopen("/dev/null", "w");
    if (!null) return;
    if (!g_root[0]) {
        const char *dir = fz_dir("trajectory");
        if (!dir) { fclose(null); return; }
        snprintf(g_root, sizeof g_root, "%s", dir);
        atexit(cleanup);
        snprintf(path, sizeof path, "%s/a", g_root); mkdir(path, 0700);
        snprintf(path, sizeof path, "%s/a/s", g_root); mkdir(path, 0700);
        snprintf(path, sizeof path, "%s/b", g_root); mkdir(path, 0700);
        snprintf(path, sizeof path, "%s/b/s", g_root); mkdir(path, 0700);
        put("a/index.json", k_index, sizeof k_index - 1);
        put("b/index.json", k_index, sizeof k_index - 1);
        snprintf(path, sizeof path, "%s/a/s/t.npy", g_root);
        if (dr_npy_write_f32(path, 1, shape, x, &err) != DR_OK) __builtin_trap();
    }
    put("b/s/t.npy", data, size);
    snprintf(a, sizeof a, "%s/a", g_root);
    snprintf(b, sizeof b, "%s/b", g_root);
    memset(&o, 0, sizeof o);
    (void)dr_traj_diff(a, b, &o, null, &pass, &err);
    o.json = true;
    o.tol = DR_TOL_ULP;
    o.ulp = 1;
    (void)dr_traj_diff(a, b, &o, null, &pass, &err);
    fclose(null);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    switch (data[0] % 4) {
    case 0: index_round_trip(data + 1, size - 1); break;
    case 1: npy_round_trip(data + 1, size - 1); break;
    case 2: diff_against(data + 1, size - 1); break;
    default: {
        char *s = fz_cstr(data + 1, size - 1);
        dr_traj_spec spec;
        dr_diff_opts o;
        dr_err err = { 0, "" };
        if (!s) return 0;
        if (dr_traj_spec_parse(s, &spec, &err) == DR_OK) {
            for (uint64_t k = 0; k < 64; k++) (void)dr_traj_spec_wants(&spec, k, k % 5 == 0);
            dr_traj_spec_free(&spec);
        }
        memset(&o, 0, sizeof o);
        (void)dr_diff_tolerance_parse(s, &o, &err);
        free(s);
    }
    }
    return 0;
}
