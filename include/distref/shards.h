/* distref — a training set as N shard files plus an index (issue 32 item 3).
 *
 * `distref export --what=shards --num_shards=N --model_dir=DIR` writes the
 * experiment's training set (byte images and labels: synthetic,
 * fashion_mnist) as DIR/shard-0000i-of-0000N.bin, each holding a
 * contiguous run of example ids, and DIR/shards.json, the index, last (every
 * file atomically). `--dataset_shards=DIR` trains from them; the examples
 * keep their ids, so one worker (or DATA) reading every file sees the very
 * dataset the whole-file run sees.
 *
 * A shard file: a 32-byte header, "DRSHARD1" then six u32le (shard index,
 * number of shards, first example id, examples, features, classes), then
 * examples x features pixel bytes, then examples label bytes.
 *
 * The index (strict JSON):
 *   {"format": "distref-shards", "version": 1, "dataset": "synthetic",
 *    "examples": 20000, "features": 784, "classes": 10,
 *    "files": [{"name": "shard-00000-of-00004.bin", "first": 0,
 *               "examples": 5000, "bytes": 3925032, "sha256": "<64 hex>"}, ...]}
 * The files follow each other: first of file 0 is 0, each next one starts
 * where the last ended, and their examples add up to "examples"; bytes is
 * 32 + examples x (features + 1); a name is a plain file name in DIR.
 *
 * Which files a worker opens: under FILE sharding file i belongs to worker
 * i mod W (tf.data's FILE policy, shard(W, w) of the file list); under DATA
 * (and for one worker, or a process that emulates every worker) every file.
 */
#ifndef DISTREF_SHARDS_H
#define DISTREF_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "distref/data.h"
#include "distref/error.h"

#define DR_SHARDS_INDEX     "shards.json"
#define DR_SHARDS_FORMAT    "distref-shards"
#define DR_SHARDS_MAX_FILES 4096
#define DR_SHARDS_INDEX_MAX (1u << 20)   /* bytes of shards.json */
#define DR_SHARD_HEADER     32
#define DR_SHARDS_ALL       UINT32_MAX   /* the worker index of a process that reads every file */

typedef struct dr_shard_file {
    char     name[64];
    uint32_t first, examples;
    uint64_t bytes;
    char     sha256[65];
} dr_shard_file;

typedef struct dr_shard_index {
    char           dataset[32];
    uint32_t       examples, features, classes, nfiles;
    dr_shard_file *files;        /* nfiles */
} dr_shard_index;

/* What one process read from the shard files (counted where they are read). */
typedef struct dr_shard_reads {
    uint64_t data_bytes;         /* bytes read from shard files */
    uint64_t index_bytes;        /* bytes read from shards.json */
    uint32_t files_read, files;  /* files this process opened, of the set's */
    char     list[256];          /* the indices it opened, "0,2" (cut with "..." when long) */
} dr_shard_reads;

/* Parses and checks an index; messages begin with name and say the field
 * ("files[2].first: 500, expected 512 (where files[1] ends)"). DR_EUSAGE. */
int  dr_shard_index_parse(const char *text, size_t len, const char *name, dr_shard_index *out, dr_err *err);
/* DIR/shards.json, read and parsed (*index_bytes: its size); DR_EUSAGE when
 * it is missing or wrong, naming the path. */
int  dr_shard_index_load(const char *dir, dr_shard_index *out, uint64_t *index_bytes, dr_err *err);
/* The index as text (what the writer stores); NULL when out of memory. */
char *dr_shard_index_format(const dr_shard_index *ix);
void dr_shard_index_free(dr_shard_index *ix);

/* The worker that opens file i of `files` under FILE sharding over W workers. */
uint32_t dr_shard_file_worker(uint32_t i, uint32_t W);

/* Writes d (byte images with labels) into dir as n shard files and the
 * index, atomically, the index last. DR_EUSAGE for n == 0, n > examples or
 * n > DR_SHARDS_MAX_FILES, and ("not supported") for a dataset of float values. */
int  dr_shards_write(const char *dir, const char *dataset, const dr_dataset *d, uint32_t n, dr_err *err);

/* Loads the training set from dir's shards: the dataset has every example
 * id of the index, but only the files worker w of W opens under FILE
 * sharding are read (w == DR_SHARDS_ALL: every file); the other examples
 * stay zero and are never gathered. Each file read is checked against the
 * index (size, header fields, SHA-256) and its labels against classes.
 * dataset: the experiment's ("synthetic", "fashion_mnist"), which the index
 * must name. DR_EUSAGE for the index's errors; a file that cannot be read
 * passes on dr_read_regular's error; one whose size, header, SHA-256 or
 * labels disagree with the index is DR_EFORMAT (corrupt: found while
 * reading), each naming the file. */
int  dr_shards_load(const char *dir, const char *dataset, uint32_t W, uint32_t w, dr_dataset *out,
                    dr_shard_reads *reads, dr_err *err);

/* dr_dist_iter_files over dir's files (the index read again for their
 * boundaries): the FILE-sharded input of W workers. */
struct dr_dist_iter;
int  dr_shards_iter(const char *dir, struct dr_dist_iter *it, uint32_t W, dr_err *err);

/* Before any data is read (under mpirun, before the ranks agree to start):
 * the files worker w of W opens (DR_SHARDS_ALL: all) exist as regular files
 * of the index's sizes; DR_EUSAGE naming the file otherwise. Nothing of the
 * files is read (stat). */
int  dr_shards_check(const char *dir, uint32_t W, uint32_t w, dr_err *err);

/* The examples' file boundaries: first[i] for file i, first[nfiles] = examples
 * (nfiles + 1 entries, malloc'd); NULL when out of memory. */
uint32_t *dr_shard_bounds(const dr_shard_index *ix);

#endif
