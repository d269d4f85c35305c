/* Tests of bin/distref as a user meets it: every flag error path, checked by
 * exit status (0 ok, 2 usage, 1 anything else) and by a key phrase of the
 * "distref: error: ..." message; the two flag forms; IDX errors and a
 * missing checkpoint surfacing through the CLI. Run from the repository
 * root (make test), where the binary is ./bin/distref. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#ifndef DR_BIN
#define DR_BIN "bin/distref"   /* the Makefile passes its build's CLI (SANITIZE=1: build/san/bin/distref) */
#endif
#define BIN DR_BIN

static char g_tmp[64];              /* this file's temporary directory */

typedef struct result {
    int  status;                    /* exit status, -1 if killed by a signal */
    char out[16384];                /* stdout and stderr together */
} result;

/* ---- helpers -------------------------------------------------------------- */

static void rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            char sub[1024];
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            rm_rf(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* A path under this file's temporary directory. */
static const char *tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_tmp, name);
    return buf;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Runs BIN with the given arguments (no shell), output of both streams
 * captured together. */
static void run_argv(result *r, char **args)
{
    int fd[2];
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)BIN;
    for (; *args && argc < 63; args++) argv[argc++] = *args;
    argv[argc] = NULL;
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        dup2(fd[1], STDERR_FILENO);
        close(fd[0]);
        close(fd[1]);
        execv(BIN, argv);
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0;
    ssize_t got;
    char chunk[4096];
    while ((got = read(fd[0], chunk, sizeof chunk)) > 0) {   /* keep the first 16 KiB */
        size_t take = (size_t)got < sizeof r->out - 1 - len ? (size_t)got : sizeof r->out - 1 - len;
        memcpy(r->out + len, chunk, take);
        len += take;
    }
    r->out[len] = '\0';
    close(fd[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void run_list(result *r, ...)
{
    char *args[64];
    int n = 0;
    va_list ap;
    va_start(ap, r);
    for (char *a; n < 63 && (a = va_arg(ap, char *)) != NULL;) args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    run_argv(r, args);
}
#define RUN(r, ...) run_list(r, __VA_ARGS__, (char *)NULL)

/* Exit status and a phrase of the output; shows the output on failure. */
static void expect(const result *r, int status, const char *phrase)
{
    if (r->status != status || (phrase && !strstr(r->out, phrase)))
        print_error("expected status %d and \"%s\"; got status %d, output:\n%s\n",
                    status, phrase ? phrase : "", r->status, r->out);
    assert_int_equal(r->status, status);
    if (phrase) assert_non_null(strstr(r->out, phrase));
    if (status != 0) assert_non_null(strstr(r->out, "distref: error: "));
}

/* --model_dir=<tmp>/<name> */
static char *model_dir_flag(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "--model_dir=%s/%s", g_tmp, name);
    return buf;
}

static int group_setup(void **state)
{
    (void)state;
    if (access(BIN, X_OK) != 0) {
        print_error("%s is missing: run the tests from the repository root after make\n", BIN);
        return -1;
    }
    strcpy(g_tmp, "/tmp/distref_test_cli.XXXXXX");
    return mkdtemp(g_tmp) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    rm_rf(g_tmp);
    return 0;
}

/* A model_dir flag that points nowhere useful; errors must come first. */
static char md[1100];
#define MD model_dir_flag(md, sizeof md, "unused")

/* ---- the parser ----------------------------------------------------------- */

static void test_unknown_flag(void **s) { (void)s; result r; RUN(&r, "train", MD, "--bogus=1"); expect(&r, 2, "--bogus"); }
static void test_malformed_int(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--global_batch_size=abc");
    expect(&r, 2, "--global_batch_size: expected an integer, got 'abc'");
}
static void test_missing_value(void **s) { (void)s; result r; RUN(&r, "train", MD, "--seed"); expect(&r, 2, "--seed: missing value"); }
static void test_flag_twice(void **s) { (void)s; result r; RUN(&r, "train", MD, "--seed=1", "--seed=2"); expect(&r, 2, "--seed: given twice"); }
static void test_int_out_of_range(void **s) { (void)s; result r; RUN(&r, "train", MD, "--num_gpus=65"); expect(&r, 2, "--num_gpus"); }
static void test_bool_bad_value(void **s) { (void)s; result r; RUN(&r, "train", MD, "--shuffle=maybe"); expect(&r, 2, "--shuffle"); }

/* ---- the factory, in Model Garden's words --------------------------------- */

static void test_num_gpus_negative(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--num_gpus=-1");
    expect(&r, 2, "--num_gpus: expected an integer in 0..64, got '-1'");
}
static void test_off_with_two_gpus(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=off", "--num_gpus=2");
    expect(&r, 2, "When 2 GPUs are specified, distribution_strategy flag cannot be set to `off`.");
}
static void test_one_device_two_gpus(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=one_device", "--num_gpus=2");
    expect(&r, 2, "`OneDeviceStrategy` can not be used for more than one device.");
}
static void test_mirrored_ring(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=mirrored", "--all_reduce_alg=ring");
    expect(&r, 2, "valid values for all_reduce_alg are [`nccl`, `hierarchical_copy`].  Supplied value: ring");
}
static void test_mwm_hierarchical_copy(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=multi_worker_mirrored", "--all_reduce_alg=hierarchical_copy");
    expect(&r, 2, "valid values for all_reduce_alg are [`ring`, `nccl`].  Supplied value: hierarchical_copy");
}
static void test_unrecognized_strategy(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=bogus");
    expect(&r, 2, "--distribution_strategy: expected one of off, one_device, mirrored, central_storage, "
           "multi_worker_mirrored, parameter_server, tpu; got 'bogus'");
}
static void test_strategy_lower_cased(void **s)
{
    (void)s; result r;
    char f[1100], p[1100];
    RUN(&r, "train", model_dir_flag(f, sizeof f, "upper"), "--distribution_strategy=MIRRORED",
        "--experiment=linear_ones", "--train_steps=2");
    expect(&r, 0, "train: steps=2");
    assert_true(exists(tmp_path(p, sizeof p, "upper/summary.json")));
}
static void test_ps_without_tf_config(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=parameter_server", "--experiment=linear_ones");
    expect(&r, 2, "TF_CONFIG: parameter_server needs a cluster with at least one 'worker' and one 'ps' task");
}
static void test_ps_flag_with_mirrored(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=mirrored", "--fail_worker=1:3");
    expect(&r, 2, "--fail_worker does not apply to --distribution_strategy=mirrored: it is only for --distribution_strategy=parameter_server");
    RUN(&r, "train", MD, "--distribution_strategy=one_device", "--schedule_seed=7");
    expect(&r, 2, "--schedule_seed does not apply to --distribution_strategy=one_device: it is only for --distribution_strategy=parameter_server");
}
/* The parameter_server flags' own errors, with a valid cluster. */
static void test_ps_flag_values(void **s)
{
    (void)s; result r;
    setenv("TF_CONFIG", "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w:1\"],\"ps\":[\"p:1\"]},"
           "\"task\":{\"type\":\"chief\",\"index\":0}}", 1);
    RUN(&r, "train", MD, "--distribution_strategy=parameter_server", "--fail_worker=x");
    expect(&r, 2, "--fail_worker: expected INDEX:STEP");
    RUN(&r, "train", MD, "--distribution_strategy=parameter_server", "--fail_ps=3:1");
    expect(&r, 2, "--fail_ps=3:1: ps task 3 does not exist");
    RUN(&r, "train", MD, "--distribution_strategy=parameter_server", "--train_steps=5", "--fail_worker=0:6");
    expect(&r, 2, "--fail_worker=0:6: step 6 is beyond the 5 step functions this run schedules");
    RUN(&r, "train", MD, "--distribution_strategy=parameter_server", "--train_steps=5", "--fail_ps=0:9");
    expect(&r, 2, "--fail_ps=0:9: step 9 is beyond the 5 steps this run takes");
    RUN(&r, "train", MD, "--distribution_strategy=parameter_server", "--ps_partitioner=bogus");
    unsetenv("TF_CONFIG");
    expect(&r, 2, "--ps_partitioner: expected fixed:N, min_size:BYTES[:MAX_SHARDS] or max_size:BYTES[:MAX_SHARDS], got 'bogus'");
    RUN(&r, "train", MD, "--distribution_strategy=parameter_server", "--staleness=-1");
    expect(&r, 2, "--staleness");
}
/* --schedule is the MPI coordinator's, --replay_schedule the reference's,
 * both for parameter_server training only. */
static void test_ps_schedule_scope(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=parameter_server", "--schedule=free");
    expect(&r, 2, "--schedule does not apply to --variant=ref: it is only for --distribution_strategy=parameter_server under --variant=mpi");
    RUN(&r, "train", MD, "--distribution_strategy=mirrored", "--variant=mpi", "--schedule=free");
    expect(&r, 2, "--schedule does not apply to --distribution_strategy=mirrored");
    RUN(&r, "train", MD, "--distribution_strategy=parameter_server", "--variant=mpi", "--schedule=free",
        "--fail_worker=0:2");
    expect(&r, 2, "--fail_worker with --schedule=free: an injected failure is a step of the reference's seeded plan");
    RUN(&r, "train", MD, "--distribution_strategy=parameter_server", "--variant=openmp", "--replay_schedule=x");
    expect(&r, 2, "--replay_schedule does not apply to --variant=openmp: it is only for --distribution_strategy=parameter_server under --variant=ref");
    RUN(&r, "train", MD, "--distribution_strategy=one_device", "--replay_schedule=x");
    expect(&r, 2, "--replay_schedule does not apply to --distribution_strategy=one_device");
    RUN(&r, "evaluate", MD, "--distribution_strategy=parameter_server", "--replay_schedule=x");
    expect(&r, 2, "--replay_schedule does not apply to evaluate");
    RUN(&r, "train", MD, "--distribution_strategy=parameter_server", "--variant=mpi", "--schedule=random");
    expect(&r, 2, "--schedule: expected one of seeded, free; got 'random'");
    setenv("TF_CONFIG", "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w:1\"],\"ps\":[\"p:1\"]},"
           "\"task\":{\"type\":\"chief\",\"index\":0}}", 1);
    RUN(&r, "train", MD, "--distribution_strategy=parameter_server", "--replay_schedule=/nonexistent/ps_schedule.jsonl");
    unsetenv("TF_CONFIG");
    expect(&r, 2, "--replay_schedule=/nonexistent/ps_schedule.jsonl: cannot open it");
}
/* --exact_accumulator: compact or full, the openmp and mpi engines' exact numerics only, not tpu. */
static void test_exact_accumulator(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--variant=openmp", "--exact_accumulator=small");
    expect(&r, 2, "--exact_accumulator: expected one of compact, full; got 'small'");
    RUN(&r, "train", MD, "--variant=ref", "--exact_accumulator=full");
    expect(&r, 2, "--exact_accumulator does not apply to --variant=ref: it is only for --variant=openmp or mpi");
    RUN(&r, "train", MD, "--variant=openmp", "--numerics=fast", "--exact_accumulator=full");
    expect(&r, 2, "--exact_accumulator=full does not apply to --numerics=fast");
    RUN(&r, "train", MD, "--variant=openmp", "--distribution_strategy=tpu", "--exact_accumulator=compact");
    expect(&r, 2, "--exact_accumulator does not apply to --distribution_strategy=tpu");
    RUN(&r, "train", MD, "--variant=openmp", "--experiment=linear_wid");
    expect(&r, 2, "expected one of linear_ones, linear_wide, mlp_synthetic, mlp_fashion_mnist");
}
/* --log_device_placement: the reference's synchronous training only. */
static void test_log_device_placement_scope(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=mirrored", "--variant=openmp", "--log_device_placement");
    expect(&r, 2, "--log_device_placement does not apply to --variant=openmp: it is only for the reference's training");
    RUN(&r, "train", MD, "--distribution_strategy=tpu", "--tpu=v3-8", "--log_device_placement");
    expect(&r, 2, "--log_device_placement does not apply to --distribution_strategy=tpu");
    RUN(&r, "evaluate", MD, "--distribution_strategy=one_device", "--log_device_placement");
    expect(&r, 2, "--log_device_placement does not apply to evaluate");
}
static void test_tpu_grpc(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=tpu", "--tpu=grpc://10.0.0.2:8470");
    expect(&r, 2, "--tpu=grpc://10.0.0.2:8470: no remote TPU in emulation");
}
static void test_tpu_flags_without_tpu(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=mirrored", "--input_partition_dims=2,2");
    expect(&r, 2, "--input_partition_dims does not apply to");
    RUN(&r, "train", MD, "--distribution_strategy=one_device", "--tpu_hbm_scale=0.5");
    expect(&r, 2, "--tpu_hbm_scale does not apply to");
    RUN(&r, "train", MD, "--distribution_strategy=tpu", "--tpu_hbm_scale=0");
    expect(&r, 2, "--tpu_hbm_scale");
}
static void test_tpu_static_batch(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=tpu", "--tpu=v3-8", "--global_batch_size=20");
    expect(&r, 2, "--global_batch_size=20: the tpu strategy needs static shapes");
}
static void test_drop_remainder_drops_everything(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=one_device", "--drop_remainder", "--synthetic_examples=10",
        "--global_batch_size=16", "--train_steps=3");
    expect(&r, 2, "--drop_remainder with --global_batch_size=16: the training set has only 10 examples");
}
static void test_tpu_partition_dims_bad(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=tpu", "--input_partition_dims=2,2,2");
    expect(&r, 2, "expected 2 dims");
    RUN(&r, "train", MD, "--distribution_strategy=tpu", "--tpu=v2-8", "--input_partition_dims=4,4");
    expect(&r, 2, "does not fit in TPU topology shape [2 2 1 2]");
}
/* Out of HBM is not a usage error: status 1, the core and the sizes named. */
static void test_tpu_out_of_hbm(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=tpu", "--tpu=v3-8", "--tpu_hbm_scale=0.0007",
        "--synthetic_examples=64", "--global_batch_size=32");
    expect(&r, 1, "device:TPU:0: out of memory");
    assert_non_null(strstr(r.out, "logical core 0 needs"));
    /* the engine reserves the same per-core share (core/tpu_plan.c) */
    RUN(&r, "train", MD, "--variant=openmp", "--distribution_strategy=tpu", "--tpu=v3-8", "--tpu_hbm_scale=0.0007",
        "--synthetic_examples=64", "--global_batch_size=32");
    expect(&r, 1, "device:TPU:0: out of memory");
    assert_non_null(strstr(r.out, "logical core 0 needs"));
}
/* --gpu_memory_mb caps each emulated GPU, in every variant. */
static void test_gpu_out_of_memory(void **s)
{
    (void)s; result r;
    static const char *const variants[] = { "--variant=ref", "--variant=openmp" };
    for (int i = 0; i < 2; i++) {
        RUN(&r, "train", MD, variants[i], "--distribution_strategy=mirrored", "--num_gpus=2", "--gpu_memory_mb=2",
            "--synthetic_examples=64");
        expect(&r, 1, "device:GPU:0: out of memory");
    }
}
static void test_tpu_trains_and_reports_time(void **s)
{
    (void)s; result r;
    char f[1100], p[1100];
    RUN(&r, "train", model_dir_flag(f, sizeof f, "tpu"), "--distribution_strategy=tpu", "--tpu=v2-8",
        "--input_partition_dims=1,2", "--synthetic_examples=40", "--global_batch_size=16", "--epochs=1");
    expect(&r, 0, "emulated TPU time");
    assert_true(exists(tmp_path(p, sizeof p, "tpu/summary.json")));
    RUN(&r, "evaluate", f, "--distribution_strategy=tpu", "--tpu=v2-8", "--input_partition_dims=1,2",
        "--synthetic_examples=40", "--global_batch_size=16");
    expect(&r, 0, "evaluate: checkpoint step=3 ");
}
/* TF_CONFIG comes from the environment; a bad one is a usage error naming it. */
static void test_tf_config_error(void **s)
{
    (void)s; result r;
    setenv("TF_CONFIG", "{\"cluster\":{\"worker\":[\"a:1\"]},\"task\":{\"type\":\"worker\",\"index\":2}}", 1);
    RUN(&r, "train", MD, "--distribution_strategy=multi_worker_mirrored", "--experiment=linear_ones");
    unsetenv("TF_CONFIG");
    expect(&r, 2, "TF_CONFIG: task.index");
}
static void test_shard_policy_file_needs_files(void **s)
{
    (void)s; result r;
    setenv("TF_CONFIG", "{\"cluster\":{\"worker\":[\"a:1\",\"b:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}", 1);
    RUN(&r, "train", MD, "--distribution_strategy=multi_worker_mirrored", "--auto_shard_policy=file",
        "--experiment=linear_ones");
    unsetenv("TF_CONFIG");
    expect(&r, 2, "--auto_shard_policy=file");
}
/* The engine's flags. */
static void test_bad_variant(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--variant=cuda", "--experiment=linear_ones");
    expect(&r, 2, "--variant: expected one of ref, openmp, opencl, mpi; got 'cuda'");
}
/* The OpenCL flags belong to --variant=opencl; `devices` lists the devices
 * (or says why there are none). */
static void test_opencl_flags(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--variant=openmp", "--distribution_strategy=one_device", "--opencl_device=0");
    expect(&r, 2, "--opencl_device does not apply to --variant=openmp: it is only for --variant=opencl");
    RUN(&r, "train", MD, "--variant=opencl", "--distribution_strategy=tpu", "--tpu=v3-8", "--opencl_platform=0");
    expect(&r, 2, "--opencl_platform does not apply to --distribution_strategy=tpu");
    RUN(&r, "train", MD, "--variant=opencl", "--distribution_strategy=one_device", "--opencl_platform=9",
        "--experiment=linear_ones");
    assert_int_not_equal(r.status, 0);
    RUN(&r, "devices");
    assert_int_equal(r.status, 0);
    assert_true(strstr(r.out, "platform 0:") != NULL || strstr(r.out, "opencl: not available") != NULL);
    assert_true(strstr(r.out, "sub-devices: ") != NULL || strstr(r.out, "opencl: not available") != NULL);
    /* the replica mapping and the device list: checked before any device is opened */
    RUN(&r, "train", MD, "--variant=openmp", "--distribution_strategy=mirrored", "--num_gpus=2",
        "--opencl_mapping=queues");
    expect(&r, 2, "--opencl_mapping does not apply to --variant=openmp: it is only for --variant=opencl");
    RUN(&r, "train", MD, "--variant=opencl", "--distribution_strategy=mirrored", "--num_gpus=2",
        "--opencl_mapping=bogus", "--experiment=linear_ones");
    expect(&r, 2, "--opencl_mapping: expected one of \"\", shared, queues, subdevices, auto; got 'bogus'");
    RUN(&r, "train", MD, "--variant=opencl", "--distribution_strategy=mirrored", "--num_gpus=2",
        "--opencl_device=0,x", "--experiment=linear_ones");
    expect(&r, 2, "--opencl_device=0,x: expected a device index or a list like 0,1");
}
/* What a variant cannot run is refused by name, and listed by `variants`. */
static void test_variant_refusals(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--variant=openmp", "--distribution_strategy=one_device", "--layer_devices=/gpu:0,/gpu:1");
    expect(&r, 2, "--variant=openmp: --layer_devices (model parallelism) runs in the reference only");
    setenv("TF_CONFIG", "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w:1\"],\"ps\":[\"p:1\"]},"
           "\"task\":{\"type\":\"chief\",\"index\":0}}", 1);
    RUN(&r, "train", MD, "--variant=openmp", "--distribution_strategy=parameter_server");
    unsetenv("TF_CONFIG");
    expect(&r, 2, "--variant=openmp: parameter_server runs in the reference and under mpirun only");
    RUN(&r, "variants");
    expect(&r, 0, "parameter_server       exact  not supported: --variant=openmp: parameter_server runs in the reference and under mpirun only");
}
/* --variant=mpi without mpirun: a singleton MPI world of one rank. Its
 * TF_CONFIG is derived (one worker) or checked against the world. */
static void test_mpi_singleton(void **s)
{
    char md2[1100];
    (void)s; result r;
    RUN(&r, "train", model_dir_flag(md2, sizeof md2, "mpi1"), "--variant=mpi",
        "--distribution_strategy=multi_worker_mirrored", "--train_steps=2",
        "--synthetic_examples=200", "--print_tf_config");
    expect(&r, 0, "TF_CONFIG (MPI rank 0 of 1): {\"cluster\": {\"worker\": [");
    setenv("TF_CONFIG", "{\"cluster\":{\"worker\":[\"a:1\",\"b:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}", 1);
    RUN(&r, "train", MD, "--variant=mpi", "--distribution_strategy=multi_worker_mirrored", "--train_steps=1");
    unsetenv("TF_CONFIG");
    expect(&r, 2, "TF_CONFIG: the cluster has 2 training workers (chief + worker) but mpirun started 1 ranks");
    RUN(&r, "train", MD, "--collective_timeout=3", "--distribution_strategy=one_device");
    expect(&r, 2, "--collective_timeout does not apply to --variant=ref: it is only for --variant=mpi");
    RUN(&r, "variants");
    expect(&r, 0, "tpu                    exact  not supported: --variant=mpi: the tpu strategy runs in one process");
}
static void test_fast_needs_engine(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--numerics=fast", "--experiment=linear_ones");
    expect(&r, 2, "--numerics=fast: the reference is exact only");
}
static void test_bad_numerics(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--variant=openmp", "--numerics=approx", "--experiment=linear_ones");
    expect(&r, 2, "--numerics: expected one of exact, fast; got 'approx'");
}
static void test_bad_threads(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--threads=-1", "--experiment=linear_ones");
    expect(&r, 2, "--threads");
}
static void test_bad_bytes_per_pack(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--bytes_per_pack=lots", "--experiment=linear_ones");
    expect(&r, 2, "--bytes_per_pack");
}
static void test_bad_shard_policy(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=multi_worker_mirrored", "--auto_shard_policy=sharded",
        "--experiment=linear_ones");
    expect(&r, 2, "--auto_shard_policy: expected one of auto, file, data, off, hint; got 'sharded'");
    RUN(&r, "train", MD, "--distribution_strategy=mirrored", "--num_gpus=2", "--loss_reduction=mean",
        "--experiment=linear_ones");
    expect(&r, 2, "--loss_reduction: expected one of global_batch_size, examples_in_step, tf_default; got 'mean'");
    RUN(&r, "train", MD, "--distribution_strategy=mirrored", "--num_gpus=2", "--input_mode=generator");
    expect(&r, 2, "--input_mode: expected one of dataset, function; got 'generator'");
}
/* export: bad --what and --format are usage errors naming the flag */
static void test_export_errors(void **s)
{
    (void)s; result r;
    RUN(&r, "export", MD, "--what=everything");
    expect(&r, 2, "--what: expected one of init, data, batches, all, weights, shards; got 'everything'");
    RUN(&r, "export", MD, "--what=weights");   /* before any training: nothing to export, no folder made */
    expect(&r, 2, "--what=weights: no checkpoint in");
    RUN(&r, "export", MD, "--format=csv");
    expect(&r, 2, "--format: expected one of npy, json; got 'csv'");
    RUN(&r, "export", MD, "--what=batches", "--distribution_strategy=parameter_server");
    expect(&r, 2, "export --what=batches: parameter_server");
}
static void test_negative_num_packs(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=mirrored", "--all_reduce_alg=nccl", "--num_packs=-1");
    expect(&r, 2, "num_packs >= 0, but -1 is specified");
}

/* ---- commands and required flags ------------------------------------------ */

static void test_missing_model_dir(void **s) { (void)s; result r; RUN(&r, "train", "--experiment=linear_ones"); expect(&r, 2, "--model_dir is required"); }
static void test_unknown_command(void **s) { (void)s; result r; RUN(&r, "frobnicate", MD); expect(&r, 2, "unknown command 'frobnicate'"); }
static void test_no_command(void **s) { (void)s; result r; RUN(&r, MD); expect(&r, 2, "no command"); }
static void test_bad_mode(void **s) { (void)s; result r; RUN(&r, MD, "--mode=bogus"); expect(&r, 2, "--mode: expected one of \"\", train, eval, train_and_eval; got 'bogus'"); }
static void test_mode_and_command(void **s) { (void)s; result r; RUN(&r, "train", MD, "--mode=train"); expect(&r, 2, "give one of them"); }
static void test_unknown_experiment(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--experiment=nope");
    expect(&r, 2, "--experiment: expected one of linear_ones, linear_wide, mlp_synthetic, mlp_fashion_mnist, "
           "cnn_synthetic, cnn_fashion_mnist, "
           "resnet_synthetic, resnet_fashion_mnist; got 'nope'");
    assert_non_null(strstr(r.out, "linear_ones, linear_wide, mlp_synthetic, mlp_fashion_mnist"));
}
static void test_unknown_optimizer(void **s) { (void)s; result r; RUN(&r, "train", MD, "--optimizer=rmsprop"); expect(&r, 2, "--optimizer: expected one of \"\", sgd, adam; got 'rmsprop'"); }

/* ---- placement and TPU flags ---------------------------------------------- */

static void test_layer_devices_count(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=one_device", "--layer_devices=/gpu:0");
    expect(&r, 2, "--layer_devices: 1 devices for 2 layers");
}
static void test_layer_devices_bad_string(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=one_device", "--layer_devices=/xpu:0,/gpu:0");
    expect(&r, 2, "--layer_devices");
    assert_non_null(strstr(r.out, "'/xpu:0'"));
}
static void test_layer_devices_with_mirrored(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=mirrored", "--num_gpus=2", "--layer_devices=/gpu:0,/gpu:1");
    expect(&r, 2, "--layer_devices: layer placement needs a single replica");
}
static void test_tpu_platform_without_tpu(void **s)
{
    (void)s; result r;
    RUN(&r, "train", MD, "--distribution_strategy=mirrored", "--tpu_platform=v3");
    expect(&r, 2, "--tpu_platform does not apply to");
}

/* No error path above may have created the model_dir it was given. */
static void test_errors_leave_no_model_dir(void **s)
{
    (void)s;
    char p[1100];
    assert_true(!exists(tmp_path(p, sizeof p, "unused")));
}

/* ---- help and the two flag forms ------------------------------------------ */

static void test_help(void **s)
{
    (void)s; result r;
    RUN(&r, "--help");
    expect(&r, 0, "--distribution_strategy");
    assert_non_null(strstr(r.out, "--model_dir"));
    assert_null(strstr(r.out, "error"));
}

static void test_flag_forms(void **s)
{
    (void)s;
    result a, b;
    char d1[1100], d2[1100], p[1100];
    RUN(&a, "train", model_dir_flag(d1, sizeof d1, "eq"), "--experiment=linear_ones",
        "--distribution_strategy=one_device", "--train_steps=3", "--seed=7");
    expect(&a, 0, "train: steps=3");
    tmp_path(d2, sizeof d2, "space");
    RUN(&b, "train", "--model_dir", d2, "--experiment", "linear_ones",
        "--distribution_strategy", "one_device", "--train_steps", "3", "--seed", "7");
    expect(&b, 0, "train: steps=3");
    assert_true(exists(tmp_path(p, sizeof p, "eq/summary.json")));
    assert_true(exists(tmp_path(p, sizeof p, "space/summary.json")));
    /* the same run: the same weights */
    const char *ha = strstr(a.out, "weights_sha256="), *hb = strstr(b.out, "weights_sha256=");
    assert_non_null(ha);
    assert_non_null(hb);
    assert_int_equal(memcmp(ha, hb, 15 + 64), 0);
}

/* ---- IDX and checkpoint errors through the CLI ---------------------------- */

/* Writes a gzipped IDX3 file: magic m, dims n x 28 x 28, data_bytes bytes of data. */
static void write_idx3_gz(const char *path, const uint8_t magic[4], uint32_t n, size_t data_bytes)
{
    uint8_t hdr[16];
    memcpy(hdr, magic, 4);
    uint32_t dims[3] = { n, 28, 28 };
    for (int d = 0; d < 3; d++)
        for (int k = 0; k < 4; k++) hdr[4 + 4 * d + k] = (uint8_t)(dims[d] >> (24 - 8 * k));
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, hdr, sizeof hdr), (int)sizeof hdr);
    uint8_t *data = calloc(data_bytes + 1, 1);
    assert_non_null(data);
    if (data_bytes) assert_int_equal(gzwrite(gz, data, (unsigned)data_bytes), (int)data_bytes);
    free(data);
    assert_int_equal(gzclose(gz), Z_OK);
}

/* Runs mlp_fashion_mnist on data_dir <tmp>/<dir>; expects status 1 naming the
 * images file and the phrase. */
static void fashion_error(const char *dir, const char *phrase)
{
    result r;
    char data[1100], file[1100], m[1100];
    snprintf(data, sizeof data, "--data_dir=%s/%s", g_tmp, dir);
    snprintf(file, sizeof file, "%s/%s/train-images-idx3-ubyte.gz", g_tmp, dir);
    RUN(&r, "train", model_dir_flag(m, sizeof m, "fashion_model"), "--experiment=mlp_fashion_mnist",
        "--distribution_strategy=one_device", data, "--train_steps=1");
    expect(&r, 1, phrase);
    assert_non_null(strstr(r.out, file));
}

static void test_idx_truncated(void **s)
{
    (void)s;
    char d[1100], p[1100];
    const uint8_t ok[4] = { 0, 0, 8, 3 };
    assert_int_equal(mkdir(tmp_path(d, sizeof d, "trunc"), 0755), 0);
    write_idx3_gz(tmp_path(p, sizeof p, "trunc/train-images-idx3-ubyte.gz"), ok, 10, 1000);
    fashion_error("trunc", "truncated: header says 10x28x28 = 7840 bytes of data, file has 1000");
}

static void test_idx_cut_gzip_stream(void **s)
{
    (void)s;
    char d[1100], p[1100], buf[5000];
    FILE *in = fopen("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", "rb");
    if (!in) { skip(); return; }
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    assert_int_equal(n, sizeof buf);
    assert_int_equal(mkdir(tmp_path(d, sizeof d, "cut"), 0755), 0);
    FILE *out = fopen(tmp_path(p, sizeof p, "cut/train-images-idx3-ubyte.gz"), "wb");
    assert_non_null(out);
    assert_int_equal(fwrite(buf, 1, n, out), n);
    assert_int_equal(fclose(out), 0);
    fashion_error("cut", "corrupt gzip data: unexpected end of file");
}

static void test_idx_missing_dir(void **s)
{
    (void)s;
    fashion_error("no_such_dir", "cannot open: No such file or directory");
}

static void test_idx_wrong_magic(void **s)
{
    (void)s;
    char d[1100], p[1100];
    const uint8_t bad[4] = { 0x1f, 0x00, 8, 3 };
    assert_int_equal(mkdir(tmp_path(d, sizeof d, "magic"), 0755), 0);
    write_idx3_gz(tmp_path(p, sizeof p, "magic/train-images-idx3-ubyte.gz"), bad, 1, 784);
    fashion_error("magic", "not an IDX file: magic bytes 1f 00 08 03");
}

static void test_evaluate_without_checkpoint(void **s)
{
    (void)s; result r;
    char m[1100], p[1100];
    assert_int_equal(mkdir(tmp_path(p, sizeof p, "empty"), 0755), 0);
    RUN(&r, "evaluate", model_dir_flag(m, sizeof m, "empty"), "--distribution_strategy=one_device");
    expect(&r, 2, "no checkpoint");
    RUN(&r, "predict", m, "--distribution_strategy=one_device");
    expect(&r, 2, "no checkpoint");
    RUN(&r, "--mode=eval", m, "--distribution_strategy=one_device");
    expect(&r, 2, "no checkpoint");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_flag),
        cmocka_unit_test(test_malformed_int),
        cmocka_unit_test(test_missing_value),
        cmocka_unit_test(test_flag_twice),
        cmocka_unit_test(test_int_out_of_range),
        cmocka_unit_test(test_bool_bad_value),
        cmocka_unit_test(test_num_gpus_negative),
        cmocka_unit_test(test_off_with_two_gpus),
        cmocka_unit_test(test_one_device_two_gpus),
        cmocka_unit_test(test_mirrored_ring),
        cmocka_unit_test(test_mwm_hierarchical_copy),
        cmocka_unit_test(test_unrecognized_strategy),
        cmocka_unit_test(test_strategy_lower_cased),
        cmocka_unit_test(test_ps_without_tf_config),
        cmocka_unit_test(test_ps_flag_with_mirrored),
        cmocka_unit_test(test_ps_flag_values),
        cmocka_unit_test(test_log_device_placement_scope),
        cmocka_unit_test(test_ps_schedule_scope),
        cmocka_unit_test(test_exact_accumulator),
        cmocka_unit_test(test_tpu_grpc),
        cmocka_unit_test(test_tpu_flags_without_tpu),
        cmocka_unit_test(test_tpu_static_batch),
        cmocka_unit_test(test_tpu_partition_dims_bad),
        cmocka_unit_test(test_drop_remainder_drops_everything),
        cmocka_unit_test(test_tpu_out_of_hbm),
        cmocka_unit_test(test_gpu_out_of_memory),
        cmocka_unit_test(test_tpu_trains_and_reports_time),
        cmocka_unit_test(test_tf_config_error),
        cmocka_unit_test(test_shard_policy_file_needs_files),
        cmocka_unit_test(test_bad_variant),
        cmocka_unit_test(test_opencl_flags),
        cmocka_unit_test(test_variant_refusals),
        cmocka_unit_test(test_mpi_singleton),
        cmocka_unit_test(test_fast_needs_engine),
        cmocka_unit_test(test_bad_numerics),
        cmocka_unit_test(test_bad_threads),
        cmocka_unit_test(test_bad_bytes_per_pack),
        cmocka_unit_test(test_bad_shard_policy),
        cmocka_unit_test(test_export_errors),
        cmocka_unit_test(test_negative_num_packs),
        cmocka_unit_test(test_missing_model_dir),
        cmocka_unit_test(test_unknown_command),
        cmocka_unit_test(test_no_command),
        cmocka_unit_test(test_bad_mode),
        cmocka_unit_test(test_mode_and_command),
        cmocka_unit_test(test_unknown_experiment),
        cmocka_unit_test(test_unknown_optimizer),
        cmocka_unit_test(test_layer_devices_count),
        cmocka_unit_test(test_layer_devices_bad_string),
        cmocka_unit_test(test_layer_devices_with_mirrored),
        cmocka_unit_test(test_tpu_platform_without_tpu),
        cmocka_unit_test(test_errors_leave_no_model_dir),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_flag_forms),
        cmocka_unit_test(test_idx_truncated),
        cmocka_unit_test(test_idx_cut_gzip_stream),
        cmocka_unit_test(test_idx_missing_dir),
        cmocka_unit_test(test_idx_wrong_magic),
        cmocka_unit_test(test_evaluate_without_checkpoint),
    };
    return cmocka_run_group_tests_name("cli", tests, group_setup, group_teardown);
}
