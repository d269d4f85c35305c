/* distref tests — shard files (core/shards.c) and FILE sharding over them
 * (dr_dist_iter_files, core/input.c); the flags' refusals (bin/distref).
 * Under mpirun: tests/mpi_shards.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "distref/data.h"
#include "distref/fileio.h"
#include "distref/input.h"
#include "distref/shards.h"
#include "tests/shell.h"
#include "tests/tmpdir.h"

#ifndef DR_BIN
#define DR_BIN "bin/distref"
#endif

static char out[1 << 15];

static int setup(void **state) { return temp_dir_from(state, "/tmp/distref_shards_XXXXXX"); }
static int teardown(void **state) { return drop_temp_dir(state); }

static uint64_t file_size(const char *dir, const char *name)
{
    char p[1200];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    assert_int_equal(stat(p, &st), 0);
    return (uint64_t)st.st_size;
}

/* 50 synthetic examples in 4 files (12, 13, 12, 13): every file read gives
 * the dataset back; worker 1 of 2 reads files 1 and 3 only. */
static void write_and_load(void **state)
{
    const char *dir = *state;
    dr_dataset d, all, mine;
    dr_shard_reads rd;
    dr_err err = { 0, "" };
    char name[64];
    uint64_t sizes[4], total = 0;
    assert_int_equal(dr_dataset_synthetic(7, 0, 50, &d, &err), DR_OK);
    assert_int_equal(dr_shards_write(dir, "synthetic", &d, 4, &err), DR_OK);
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "shard-%05d-of-00004.bin", i);
        sizes[i] = file_size(dir, name);
        assert_int_equal(sizes[i], 32 + (uint64_t)(i % 2 ? 13 : 12) * 785);
        total += sizes[i];
    }
    assert_int_equal(dr_shards_check(dir, 1, DR_SHARDS_ALL, &err), DR_OK);
    assert_int_equal(dr_shards_load(dir, "synthetic", 1, DR_SHARDS_ALL, &all, &rd, &err), DR_OK);
    assert_int_equal(all.n, 50);
    assert_memory_equal(all.pixels, d.pixels, 50 * 784);
    assert_memory_equal(all.labels, d.labels, 50);
    assert_int_equal(rd.data_bytes, total);
    assert_int_equal(rd.files_read, 4);
    assert_string_equal(rd.list, "0,1,2,3");
    assert_int_equal(rd.index_bytes, file_size(dir, "shards.json"));
    assert_int_equal(dr_shards_load(dir, "synthetic", 2, 1, &mine, &rd, &err), DR_OK);
    assert_int_equal(rd.data_bytes, sizes[1] + sizes[3]);
    assert_string_equal(rd.list, "1,3");
    assert_memory_equal(mine.pixels + 12 * 784, d.pixels + 12 * 784, 13 * 784);   /* file 1: ids 12..24 */
    assert_memory_equal(mine.pixels + 37 * 784, d.pixels + 37 * 784, 13 * 784);   /* file 3: ids 37..49 */
    for (size_t k = 0; k < 12 * 784; k++) assert_int_equal(mine.pixels[k], 0);     /* file 0: never read */
    assert_int_equal(dr_shards_load(dir, "fashion_mnist", 1, DR_SHARDS_ALL, &mine, &rd, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "holds the synthetic dataset"));
    assert_int_equal(dr_shards_write(dir, "synthetic", &d, 51, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "--num_shards=51"));
    dr_dataset_free(&d);
    dr_dataset_free(&all);
    dr_dataset_free(&mine);
}

static void rewrite(const char *dir, const char *name, const char *from, const char *to)
{
    char p[1200];
    uint8_t *buf;
    size_t n;
    dr_err err = { 0, "" };
    char *s, *at, *next;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    assert_int_equal(dr_read_file(p, 1 << 20, &buf, &n, &err), DR_OK);
    at = strstr((char *)buf, from);
    assert_non_null(at);
    s = malloc(n + strlen(to) + 1);
    memcpy(s, buf, (size_t)(at - (char *)buf));
    next = s + (at - (char *)buf);
    strcpy(next, to);
    strcat(next, at + strlen(from));
    assert_int_equal(dr_write_atomic(p, s, strlen(s), &err), DR_OK);
    free(s);
    free(buf);
}

/* The index against itself and against its files: DR_EUSAGE naming the
 * field or file; content that disagrees: DR_EFORMAT naming the file. */
static void bad_sets(void **state)
{
    const char *dir = *state;
    dr_dataset d, got;
    dr_shard_index ix;
    dr_err err = { 0, "" };
    char p[1200];
    FILE *f;
    static const struct { const char *from, *to, *msg; } cases[] = {
        { "\"first\": 12,", "\"first\": 11,", "files[1]: field \"first\": 11, expected 12" },
        { "\"examples\": 13, \"bytes\": 10237", "\"examples\": 13, \"bytes\": 10238", "files[1]: field \"bytes\": 10238" },
        { "\"examples\": 50", "\"examples\": 51", "field \"examples\": 51, but the files hold 50" },
        { "shard-00002-of-00004.bin", "../x.bin", "is not a plain file name" },
        { "\"version\": 1", "\"version\": 2", "field \"version\": 2, expected 1..1" },
        { "distref-shards", "distref-shard", "field \"format\"" },
        { "\"classes\": 10,", "", "field \"classes\" is missing" },
        { "]}", "]} x", "malformed JSON" },
        { "\"synthetic\"", "\"syn\\\"thetic\"", "field \"dataset\": 'syn\"thetic' is not a dataset name" },
    };
    assert_int_equal(dr_dataset_synthetic(7, 0, 50, &d, &err), DR_OK);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        assert_int_equal(dr_shards_write(dir, "synthetic", &d, 4, &err), DR_OK);
        rewrite(dir, "shards.json", cases[c].from, cases[c].to);
        assert_int_equal(dr_shard_index_load(dir, &ix, NULL, &err), DR_EUSAGE);
        if (!strstr(err.msg, cases[c].msg)) fail_msg("case %zu: '%s' lacks '%s'", c, err.msg, cases[c].msg);
    }
    /* a missing file: found before reading, naming it */
    assert_int_equal(dr_shards_write(dir, "synthetic", &d, 4, &err), DR_OK);
    snprintf(p, sizeof p, "%s/shard-00002-of-00004.bin", dir);
    unlink(p);
    assert_int_equal(dr_shards_check(dir, 2, 1, &err), DR_OK);   /* worker 1 never opens file 2 */
    assert_int_equal(dr_shards_check(dir, 2, 0, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "shard-00002-of-00004.bin: No such file"));
    /* one byte changed: the SHA-256 disagrees */
    assert_int_equal(dr_shards_write(dir, "synthetic", &d, 4, &err), DR_OK);
    snprintf(p, sizeof p, "%s/shard-00001-of-00004.bin", dir);
    assert_non_null(f = fopen(p, "r+b"));
    fseek(f, 100, SEEK_SET);
    fputc(0x55 ^ 0xff, f);
    fclose(f);
    assert_int_equal(dr_shards_check(dir, 1, DR_SHARDS_ALL, &err), DR_OK);   /* the size is right */
    assert_int_equal(dr_shards_load(dir, "synthetic", 1, DR_SHARDS_ALL, &got, NULL, &err), DR_EFORMAT);
    assert_non_null(strstr(err.msg, "shard-00001-of-00004.bin: SHA-256"));
    assert_int_equal(dr_shards_load(dir, "synthetic", 2, 0, &got, NULL, &err), DR_OK);   /* worker 0: files 0, 2 */
    dr_dataset_free(&got);
    dr_dataset_free(&d);
}

/* FILE over 2 workers, files [0,3) [3,5) [5,8) [8,10), G = 4, one replica
 * each, no shuffle: worker 0 streams files 0 and 2 (0 1 2 5 6 7), worker 1
 * files 1 and 3 (3 4 8 9), each in batches of batch_sizes_for_worker = 2. */
static void file_sharded_iterator(void **state)
{
    static const uint32_t first[5] = { 0, 3, 5, 8, 10 };
    static const uint32_t want[3][4] = { { 0, 1, 3, 4 }, { 2, 5, 8, 9 }, { 6, 7, 0, 0 } };
    static const uint32_t counts[3] = { 4, 4, 2 };
    dr_dist_iter it;
    dr_dist_batch b;
    dr_err err = { 0, "" };
    uint32_t seen[10] = { 0 };
    (void)state;
    assert_int_equal(dr_dist_iter_init(&it, 10, 4, 2, 7, false, false, &err), DR_OK);
    assert_int_equal(dr_dist_iter_files(&it, 2, 4, first, &err), DR_OK);
    for (int s = 0; s < 3; s++) {
        assert_true(dr_dist_iter_next(&it, &b));
        assert_int_equal(b.count, counts[s]);
        assert_memory_equal(b.ids, want[s], counts[s] * sizeof(uint32_t));
        assert_int_equal(b.offset[1], 2);   /* worker 0's replica */
    }
    assert_false(dr_dist_iter_next(&it, &b));
    /* shuffled: each example once per epoch, each on its file's worker */
    dr_dist_iter_free(&it);
    assert_int_equal(dr_dist_iter_init(&it, 10, 4, 2, 7, true, false, &err), DR_OK);
    assert_int_equal(dr_dist_iter_files(&it, 2, 4, first, &err), DR_OK);
    for (int e = 0; e < 2; e++) {
        while (dr_dist_iter_next(&it, &b))
            for (uint32_t r = 0; r < 2; r++)
                for (uint32_t k = b.offset[r]; k < b.offset[r + 1]; k++) {
                    uint32_t id = b.ids[k], file = id < 3 ? 0 : id < 5 ? 1 : id < 8 ? 2 : 3;
                    assert_int_equal(file % 2, r);
                    seen[id]++;
                }
        dr_dist_iter_next_epoch(&it);
    }
    for (int i = 0; i < 10; i++) assert_int_equal(seen[i], 2);
    /* seek replays the epoch: after 2 steps of epoch 1 */
    assert_int_equal(dr_dist_iter_seek(&it, 1, 8, 5, &err), DR_OK);
    dr_dist_iter_free(&it);
    /* fewer files than workers: TensorFlow's error */
    assert_int_equal(dr_dist_iter_init(&it, 10, 4, 5, 7, false, false, &err), DR_OK);
    assert_int_equal(dr_dist_iter_files(&it, 5, 4, first, &err), DR_EUSAGE);
    assert_non_null(strstr(err.msg, "5 workers but the input has 4 files"));
    dr_dist_iter_free(&it);
}

/* The flags: refused where they do not apply, naming them. */
static void flags_refused(void **state)
{
    const char *dir = *state;
    int st;
    st = shell_run(out, sizeof out, DR_BIN " export --what=shards --model_dir=%s/a", dir);
    shell_expect(out, st, 2, "--what=shards needs --num_shards=N");
    st = shell_run(out, sizeof out, DR_BIN " export --what=init --num_shards=3 --model_dir=%s/b", dir);
    shell_expect(out, st, 2, "--num_shards=3 applies to --what=shards");
    st = shell_run(out, sizeof out, DR_BIN " train --num_shards=3 --model_dir=%s/c", dir);
    shell_expect(out, st, 2, "--num_shards does not apply to train");
    st = shell_run(out, sizeof out, DR_BIN " evaluate --dataset_shards=%s --model_dir=%s/d", dir, dir);
    shell_expect(out, st, 2, "--dataset_shards does not apply to evaluate");
    st = shell_run(out, sizeof out, DR_BIN " train --dataset_shards=%s/none --model_dir=%s/e", dir, dir);
    shell_expect(out, st, 2, "--dataset_shards=");
    st = shell_run(out, sizeof out, DR_BIN " export --what=shards --num_shards=2 --experiment=linear_ones --model_dir=%s/f", dir);
    shell_expect(out, st, 2, "not supported: --what=shards");
}

/* A resume on another input is refused (exit 2, naming the flag and both
 * values), though the example count matches: another shard set (its
 * shards.json's SHA-256), no set where there was one, another
 * --auto_shard_policy. The same input resumes. */
static void resume_other_input(void **state)
{
    const char *dir = *state;
    char sha[80];
    FILE *f;
    int st;
    const char *run = DR_BIN " train --synthetic_examples=60 --global_batch_size=20";
    st = shell_run(out, sizeof out, DR_BIN " export --what=shards --num_shards=2 --synthetic_examples=60 "
                   "--model_dir=%s/s2 && " DR_BIN " export --what=shards --num_shards=3 --synthetic_examples=60 "
                   "--model_dir=%s/s3", dir, dir);
    shell_expect(out, st, 0, "");
    st = shell_run(out, sizeof out, "%s --dataset_shards=%s/s2 --train_steps=1 --model_dir=%s/r", run, dir, dir);
    shell_expect(out, st, 0, "steps=1");
    st = shell_run(out, sizeof out, "%s --dataset_shards=%s/s3 --train_steps=2 --model_dir=%s/r", run, dir, dir);
    shell_expect(out, st, 2, "--dataset_shards: a set whose shards.json has SHA-256 ");
    snprintf(sha, sizeof sha, "sha256sum %s/s2/shards.json", dir);
    assert_non_null(f = popen(sha, "r"));
    assert_non_null(fgets(sha, 65, f));
    pclose(f);
    if (!strstr(out, sha)) fail_msg("the message lacks the checkpoint's set (%s): %s", sha, out);
    st = shell_run(out, sizeof out, "%s --train_steps=2 --model_dir=%s/r", run, dir);
    shell_expect(out, st, 2, "--dataset_shards: none (the whole-file training set), but the checkpoint");
    st = shell_run(out, sizeof out, "%s --dataset_shards=%s/s2 --train_steps=2 --model_dir=%s/r", run, dir, dir);
    shell_expect(out, st, 0, "steps=2");
    /* the policy, where the strategy applies one */
    st = shell_run(out, sizeof out, "%s --distribution_strategy=mirrored --num_gpus=2 --auto_shard_policy=data "
                   "--train_steps=1 --model_dir=%s/p", run, dir);
    shell_expect(out, st, 0, "steps=1");
    st = shell_run(out, sizeof out, "%s --distribution_strategy=mirrored --num_gpus=2 --auto_shard_policy=off "
                   "--train_steps=2 --model_dir=%s/p", run, dir);
    shell_expect(out, st, 2, "--auto_shard_policy=off, but the checkpoint in ");
    if (!strstr(out, "trained with --auto_shard_policy=data")) fail_msg("lacks the checkpoint's policy: %s", out);
    st = shell_run(out, sizeof out, "%s --distribution_strategy=mirrored --num_gpus=2 --auto_shard_policy=data "
                   "--train_steps=2 --model_dir=%s/p", run, dir);
    shell_expect(out, st, 0, "steps=2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(write_and_load, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_sets, setup, teardown),
        cmocka_unit_test(file_sharded_iterator),
        cmocka_unit_test_setup_teardown(flags_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(resume_other_input, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
