/* distref fuzzing — shard sets (core/shards.c, distref/shards.h).
 *
 * Feeds: byte 0 picks what the rest is:
 *   0  shards.json text: dr_shard_index_parse; an accepted index is written
 *      back (dr_shard_index_format) and must parse again to the same text
 *   1  shards.json text written into the scratch folder beside one fixed,
 *      valid shard file (shard-00000-of-00001.bin: 3 examples of 4
 *      features, 10 classes): dr_shards_check and dr_shards_load for worker
 *      0 of 1 and 1 of 2, then the FILE-sharded iterator over the index's
 *      boundaries (dr_shards_iter, 2 workers) for a few batches
 *   2  a shard file's bytes under the fixed index's name, with the fixed
 *      index: dr_shards_load (its header, size, SHA-256 and label checks)
 * Checks: no crash, UB or leak; any error return is fine; the round trip;
 * what loads has the index's examples and labels below its classes.
 */
#include "distref/input.h"
#include "distref/shards.h"
#include "distref/sha256.h"
#include "fuzz/fuzz_common.h"

#define FEATURES 4
#define EXAMPLES 3

/* The fixed valid shard file and its index. */
static size_t fixed_file(uint8_t *f)
{
    static const uint8_t magic[8] = { 'D', 'R', 'S', 'H', 'A', 'R', 'D', '1' };
    const uint32_t h[6] = { 0, 1, 0, EXAMPLES, FEATURES, 10 };
    memcpy(f, magic, 8);
    for (int k = 0; k < 6; k++)
        for (int b = 0; b < 4; b++) f[8 + 4 * k + b] = (uint8_t)(h[k] >> (8 * b));
    for (int i = 0; i < EXAMPLES * FEATURES; i++) f[32 + i] = (uint8_t)(17 * i);
    for (int i = 0; i < EXAMPLES; i++) f[32 + EXAMPLES * FEATURES + i] = (uint8_t)(3 * i);
    return 32 + EXAMPLES * (FEATURES + 1);
}

static void fixed_index(char *text, size_t n)
{
    uint8_t f[64];
    char hex[65];
    size_t len = fixed_file(f);
    dr_sha256_hex(f, len, hex);
    snprintf(text, n, "{\"format\": \"distref-shards\", \"version\": 1, \"dataset\": \"synthetic\", \"examples\": %d, "
             "\"features\": %d, \"classes\": 10, \"files\": [{\"name\": \"shard-00000-of-00001.bin\", \"first\": 0, "
             "\"examples\": %d, \"bytes\": %zu, \"sha256\": \"%s\"}]}\n", EXAMPLES, FEATURES, EXAMPLES, len, hex);
}

static void round_trip(const uint8_t *data, size_t size)
{
    dr_shard_index ix, again;
    dr_err err = { 0, "" };
    char *text, *text2;
    if (dr_shard_index_parse((const char *)data, size, "shards.json", &ix, &err) != DR_OK) return;
    if (!(text = dr_shard_index_format(&ix))) __builtin_trap();
    if (dr_shard_index_parse(text, strlen(text), "again", &again, &err) != DR_OK) __builtin_trap();
    if (!(text2 = dr_shard_index_format(&again)) || strcmp(text, text2) != 0) __builtin_trap();
    free(text);
    free(text2);
    dr_shard_index_free(&ix);
    dr_shard_index_free(&again);
}

static void load(const char *dir, uint32_t W, uint32_t w)
{
    dr_dataset d;
    dr_shard_reads rd;
    dr_err err = { 0, "" };
    if (dr_shards_check(dir, W, w, &err) != DR_OK) return;
    if (dr_shards_load(dir, "synthetic", W, w, &d, &rd, &err) != DR_OK) return;
    for (uint32_t i = 0; i < d.n; i++)
        if (d.labels[i] >= d.classes) __builtin_trap();
    if (rd.files_read > rd.files) __builtin_trap();
    dr_dataset_free(&d);
}

static void iterate(const char *dir)
{
    dr_shard_index ix;
    dr_dist_iter it;
    dr_dist_batch b;
    dr_err err = { 0, "" };
    uint32_t n;
    if (dr_shard_index_load(dir, &ix, NULL, &err) != DR_OK) return;
    n = ix.examples;
    dr_shard_index_free(&ix);
    if (n > (1u << 16) || dr_dist_iter_init(&it, n, 5, 2, 7, true, false, &err) != DR_OK) return;
    if (dr_shards_iter(dir, &it, 2, &err) == DR_OK)
        for (int s = 0; s < 8 && dr_dist_iter_next(&it, &b); s++)
            for (uint32_t k = 0; k < b.count; k++)
                if (b.ids[k] >= n) __builtin_trap();
    dr_dist_iter_free(&it);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fz_dir("shards");
    uint8_t f[64];
    char index[512];
    size_t len;
    if (size < 1) return 0;
    if (data[0] % 3 == 0) {
        round_trip(data + 1, size - 1);
        return 0;
    }
    if (dir == NULL) return 0;
    if (data[0] % 3 == 1) {
        len = fixed_file(f);
        if (fz_write(dir, "shard-00000-of-00001.bin", f, len) || fz_write(dir, "shards.json", data + 1, size - 1)) return 0;
        load(dir, 1, 0);
        load(dir, 2, 1);
        iterate(dir);
        return 0;
    }
    fixed_index(index, sizeof index);
    if (fz_write(dir, "shards.json", (const uint8_t *)index, strlen(index)) ||
        fz_write(dir, "shard-00000-of-00001.bin", data + 1, size - 1))
        return 0;
    load(dir, 1, 0);
    return 0;
}
