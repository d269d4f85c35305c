/* distref — the command-line tool.
 *
 *   bin/distref train|evaluate|predict [--flag=value ...]
 *
 * Flag names and values are TensorFlow Model Garden's where it has them
 * (--distribution_strategy, --num_gpus, --all_reduce_alg, --num_packs, --tpu,
 * --tpu_platform, --model_dir, --mode, --worker_hosts, --task_index), and
 * absl's --flagfile. Exit status: 0 success, 2 usage error (bad flag,
 * value or combination, one no variant runs included; under mpirun said
 * once, by rank 0), 1 anything else. --help and --version exit 0.
 */
#include "distref/cli_flags.h"
#include "distref/cluster.h"
#include "distref/factory.h"
#include "distref/flags.h"
#include "distref/harness.h"
#include "distref/mpi.h"
#include "distref/opencl.h"
#include "distref/slurm.h"
#include "distref/traj_diff.h"
#include "distref/train.h"
#include "distref/version.h"

#include <malloc.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

/* --variant's values, the registry's names joined with '|' (the flag table
 * is core's, distref/cli_flags.h; the registry is the harness's). */
static const char *variant_names(void)
{
    static char names[128];
    size_t nv, len;
    const dr_variant *const *v = dr_variants(&nv);
    if (names[0]) return names;
    for (size_t i = 0; i < nv; i++) {
        len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", len ? "|" : "", v[i]->name);
    }
    return names;
}

static int table(dr_cli_flags *c, dr_flag *f)
{
    return dr_cli_flag_table(c, f, variant_names());
}

static void usage(FILE *out, dr_cli_flags *c)
{
    dr_flag f[DR_CLI_MAX_FLAGS];
    int n = table(c, f);
    fprintf(out, "usage: distref train|evaluate|predict [--flag=value ...]\n       distref variants   (the registered variants and what each supports)\n       distref devices    (the OpenCL platforms and devices, with their capabilities)\n"
                 "       distref export --what=init|data|batches|all|weights --format=npy|json --model_dir=DIR [...]\n"
                 "       distref export --what=shards --num_shards=N --model_dir=DIR [...]   (docs/MPI.md)\n"
                 "       distref diff A B [--tolerance=ulp=N|rtol=X|atol=X] [--json]   (docs/JUDGING.md)\n\n"
                 "Trains, evaluates or predicts with a tf.distribute-style strategy whose every\n"
                 "reduction is exact: any strategy and replica count gives one_device's bits.\n\nflags:\n");
    dr_flags_usage(out, f, n);
}

/* The progress bar only for a person watching: stdout and stderr both a
 * terminal, and not under CI (the CI variable set to anything but "" or
 * "false", as CI services and .ci/run set it). */
static bool progress_wanted(void)
{
    const char *ci = getenv("CI");
    if (ci && *ci && strcmp(ci, "false") != 0 && strcmp(ci, "0") != 0) return false;
    return isatty(STDOUT_FILENO) && isatty(STDERR_FILENO);
}

/* Model Garden's --worker_hosts/--task_index: the TF_CONFIG they give. */
static int hosts_tf_config(const dr_cli_flags *c, const dr_flag *f, int n, dr_run_config *cfg, dr_err *err)
{
    static char hosts[4 * DR_FLAG_STR_MAX];   /* the TF_CONFIG --worker_hosts gives */
    char *tf = NULL;
    size_t len;
    int rc = dr_tf_config_from_hosts(c->worker_hosts, dr_flag_given(f, n, "worker_hosts"), c->task_index,
                                     dr_flag_given(f, n, "task_index"), cfg->tf_config, &tf, err);
    if (rc || !tf) return rc;
    if ((len = strlen(tf)) >= sizeof hosts)
        rc = dr_fail(err, DR_EUSAGE, "--%s: %zu characters, at most %zu allowed", "worker_hosts", len, sizeof hosts - 1);
    else memcpy(hosts, tf, len + 1);
    free(tf);
    if (rc == DR_OK) cfg->tf_config = hosts;
    return rc;
}

/* --cluster_resolver=slurm: TF_CONFIG from Slurm's variables (core/slurm.c).
 * A TF_CONFIG also set must agree (its workers SLURM_NTASKS, its task
 * SLURM_PROCID); SLURM_GPUS_PER_TASK, when set, must be --num_gpus. */
static int slurm_tf_config(const dr_cli_flags *c, dr_run_config *cfg, dr_err *err)
{
    static char derived[1 << 20];   /* the TF_CONFIG Slurm gives (4096 hosts fit) */
    const char *sn = getenv("SLURM_STEP_NODELIST"), *st = getenv("SLURM_STEP_TASKS_PER_NODE");
    dr_slurm_env e = { getenv("SLURM_PROCID"), getenv("SLURM_NTASKS"), sn ? sn : getenv("SLURM_JOB_NODELIST"),
                       st ? st : getenv("SLURM_TASKS_PER_NODE"), getenv("SLURM_GPUS_PER_TASK"),
                       sn ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST",
                       st ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE" };
    char *tf = NULL;
    uint32_t procid, ntasks, gpus;
    int rc = dr_slurm_tf_config(&e, &tf, &procid, &ntasks, &gpus, err);
    if (rc) return rc;
    if (gpus && (int64_t)gpus != c->num_gpus)
        rc = dr_fail(err, DR_EUSAGE, "SLURM_GPUS_PER_TASK=%u but --num_gpus=%lld: each task's GPUs (local replicas) "
                     "must be the ones Slurm gave it", gpus, (long long)c->num_gpus);
    if (!rc && cfg->tf_config && cfg->tf_config[0]) {
        dr_cluster cl;
        if (!(rc = dr_cluster_parse(cfg->tf_config, &cl, err))) {
            uint32_t w = dr_cluster_worker_count(&cl), id = dr_cluster_id_in_cluster(&cl);
            if (w != ntasks || (cl.has_task && id != procid))
                rc = dr_fail(err, DR_EUSAGE, "TF_CONFIG disagrees with Slurm: it has %u training workers and this task "
                             "is id %u, but SLURM_NTASKS=%u and SLURM_PROCID=%u (unset TF_CONFIG, or drop "
                             "--cluster_resolver=slurm)", w, id == UINT32_MAX ? 0 : id, ntasks, procid);
            dr_cluster_free(&cl);
        }
    }
    if (!rc && strlen(tf) >= sizeof derived) rc = dr_fail(err, DR_EUSAGE, "the Slurm cluster is too large for TF_CONFIG");
    if (!rc) memcpy(derived, tf, strlen(tf) + 1);
    free(tf);
    if (!rc) cfg->tf_config = derived;
    return rc;
}

static int to_config(dr_cli_flags *c, const dr_flag *f, int n, dr_run_config *cfg, dr_err *err)
{
    int rc = dr_cli_flags_strategy(c, cfg, err);
    if (rc) return rc;
    if (!c->model_dir[0]) return dr_fail(err, DR_EUSAGE, "--model_dir is required");
    if ((rc = dr_flag_scopes_check(f, n, cfg->strategy.kind, c->command, c->variant, err))) return rc;
    if ((rc = dr_cli_flags_config(c, f, n, cfg, err))) return rc;
    cfg->tf_config = getenv("TF_CONFIG");   /* any length: a 1,000-worker cluster is fine */
    if ((rc = hosts_tf_config(c, f, n, cfg, err))) return rc;   /* or Model Garden's --worker_hosts */
    if (strcmp(c->cluster_resolver, "slurm") == 0 && (rc = slurm_tf_config(c, cfg, err))) return rc;
    cfg->progress = progress_wanted();
    cfg->placement_log = c->log_device_placement ? stderr : NULL;
    return DR_OK;
}

#define COMMANDS "train, evaluate, predict, export, diff, variants or devices"

/* The command comes first, or --mode names it (Model Garden's spelling). */
static int pick_command(dr_cli_flags *c, dr_err *err)
{
    const char *m = c->mode;
    if (!m[0]) {
        static const char *const known[] = { "train", "evaluate", "predict", "export" };
        if (!c->command[0]) return dr_fail(err, DR_EUSAGE, "no command: expected " COMMANDS " (see --help)");
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strcmp(c->command, known[i]) == 0) return DR_OK;
        return dr_fail(err, DR_EUSAGE, "unknown command '%s': expected " COMMANDS, c->command);
    }
    if (c->command[0]) return dr_fail(err, DR_EUSAGE, "--mode=%s and the command %s: give one of them", m, c->command);
    if (strcmp(m, "train") == 0 || strcmp(m, "train_and_eval") == 0) strcpy(c->command, m);
    else if (strcmp(m, "eval") == 0) strcpy(c->command, "evaluate");
    else return dr_fail(err, DR_EUSAGE, "--mode: expected train, eval or train_and_eval, got '%s'", m);
    return DR_OK;
}

/* SIGINT/SIGTERM: the first asks the training loop to checkpoint and stop
 * after its current step; SA_RESETHAND gives the second the default action
 * (exit at once), which atomic writes make safe for the last checkpoint. */
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static int run_config(dr_cli_flags *c, dr_run_config *cfg0, dr_err *err);

static bool trains(const dr_cli_flags *c)
{
    return strcmp(c->command, "train") == 0 || strcmp(c->command, "train_and_eval") == 0;
}

/* ---- under mpirun ------------------------------------------------------------
 * A usage error is said once, by rank 0, and every rank exits 2 through
 * MPI_Finalize, not MPI_Abort (whose kill notice would bury it). Before
 * MPI_Init a rank knows its number from the launcher's environment. After
 * it, the checks before training end in one agreement (an all-reduce), so
 * every rank knows whether any failed and whether rank 0 did (then rank 0
 * speaks for all; else each failed rank speaks, naming itself). Open MPI's
 * mpirun still reports a non-zero exit in its own words ("Primary job
 * terminated normally, but 1 process returned a non-zero exit code", for
 * any non-zero exit, MPI_Finalize or not); `mpirun -q` keeps it quiet and
 * still exits 2 (docs/MPI.md). */

static int g_argc;
static char **g_argv;
static bool g_agreed;   /* the ranks agreed on a failure: exit without MPI_Abort */
static bool g_silent;   /* this rank leaves the message to another */
static bool g_peer_lost;   /* mpi: a rank died and training finished without it (skip MPI_Finalize) */
#define HOST_NAME_LEN 64
static char *g_hosts;      /* mpi: every rank's host name (HOST_NAME_LEN each), for naming a lost rank's host */

/* This process's rank as the launcher set it (Open MPI, PMIx, MPICH): -1
 * when not started by one. */
static long launcher_rank(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r;
        if (!v || !*v) continue;
        r = strtol(v, &end, 10);
        if (*end == '\0' && r >= 0) return r;
    }
    return -1;
}

/* Every rank calls this at the same point with its own outcome. */
static int agree(int rc, dr_err *err)
{
    uint32_t rank;
    int mine[3], all[3];
    dr_mpi_world(&rank, NULL);
    mine[0] = rc != DR_OK;
    mine[1] = rc != DR_OK && rank == 0;
    mine[2] = rc;
    MPI_Allreduce(mine, all, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!all[0]) return DR_OK;
    g_agreed = true;
    g_silent = rc == DR_OK || (all[1] && rank != 0);
    if (rc == DR_OK) rc = err->code = all[2];   /* another rank's failure: exit as it does */
    return rc;
}

/* --cluster_resolver=slurm under mpirun: SLURM_NTASKS is the world's size,
 * SLURM_PROCID this rank (both already read as numbers by slurm_tf_config). */
static int slurm_vs_world(dr_err *err)
{
    uint32_t rank, size;
    unsigned long procid = strtoul(getenv("SLURM_PROCID"), NULL, 10), ntasks = strtoul(getenv("SLURM_NTASKS"), NULL, 10);
    dr_mpi_world(&rank, &size);
    if (ntasks != size || procid != rank)
        return dr_fail(err, DR_EUSAGE, "Slurm disagrees with the MPI world: SLURM_NTASKS=%lu and SLURM_PROCID=%lu, but "
                       "mpirun started %u ranks and this is rank %u (srun's tasks are the ranks: launch with srun, or "
                       "mpirun -np SLURM_NTASKS inside the allocation)", ntasks, procid, size, rank);
    return DR_OK;
}

static int run_mpi(dr_cli_flags *c, dr_run_config *cfg, dr_err *err)
{
    char *tf = NULL;
    int rc = dr_mpi_init(&g_argc, &g_argv, err);
    uint32_t rank, size;
    if (rc) return rc;
    dr_mpi_world(&rank, &size);   /* every rank's host, to name a lost rank's (a failure here only loses that) */
    if ((g_hosts = calloc(size, HOST_NAME_LEN)) && dr_mpi_hosts(g_hosts, HOST_NAME_LEN, err) != DR_OK) {
        free(g_hosts);
        g_hosts = NULL;
        memset(err, 0, sizeof *err);
    }
    dr_mpi_last_words(g_hosts, HOST_NAME_LEN);   /* a rank its launcher ends mid-collective says so (no memory: silent) */
    /* Slurm's task against the MPI world, then TF_CONFIG checked against, or derived from, it */
    if (strcmp(c->cluster_resolver, "slurm") == 0) rc = slurm_vs_world(err);
    if (!rc) rc = dr_mpi_tf_config(cfg->tf_config, cfg->strategy.kind == DR_STRATEGY_PARAMETER_SERVER, &tf, err);
    if (!rc) cfg->tf_config = tf;
    if (!rc && trains(c)) rc = dr_run_check_supported(cfg, err);
    if (!(rc = agree(rc, err))) rc = run_config(c, cfg, err);
    free(tf);
    return rc;
}

static int run(dr_cli_flags *c, const dr_flag *f, int n, dr_err *err)
{
    dr_run_config cfg;
    int rc;
    dr_run_config_defaults(&cfg);
    if (strcmp(c->command, "variants") == 0) {
        dr_variants_print(stdout);
        return DR_OK;
    }
    if (strcmp(c->command, "devices") == 0) {   /* the OpenCL platforms and devices */
        dr_opencl_devices_print(stdout);
        return DR_OK;
    }
    if ((rc = pick_command(c, err)) || (rc = to_config(c, f, n, &cfg, err))) return rc;
    cfg.stop = &stop_signal;
    if (strcmp(c->variant, "mpi") == 0) return run_mpi(c, &cfg, err);
    if (trains(c) && (rc = dr_run_check_supported(&cfg, err))) return rc;
    return run_config(c, &cfg, err);
}

/* Only the chief (MPI rank 0; the only process otherwise) prints results. */
static bool printer(void)
{
    uint32_t rank;
    dr_mpi_world(&rank, NULL);
    return rank == 0;
}

static int run_config(dr_cli_flags *c, dr_run_config *cfg0, dr_err *err)
{
    dr_run_config cfg = *cfg0;
    dr_run_result res;
    int rc;
    if (c->print_tf_config) {
        uint32_t rank, size;
        dr_mpi_world(&rank, &size);
        if (strcmp(c->variant, "mpi") == 0) printf("TF_CONFIG (MPI rank %u of %u): %s\n", rank, size, cfg.tf_config);
        else printf("TF_CONFIG: %s\n", cfg.tf_config && cfg.tf_config[0] ? cfg.tf_config : "(unset: one machine)");
    }
    if (strcmp(c->command, "train") == 0) {
        if ((rc = dr_run_train(&cfg, &res, err))) return rc;
        g_peer_lost = res.peer_lost;
        if (printer()) dr_report_train(stdout, "train", &res, cfg.model_dir, dr_classifier(&cfg));
        return DR_OK;
    }
    if (strcmp(c->command, "train_and_eval") == 0) return dr_run_train_and_eval(&cfg, stdout, err);
    if (strcmp(c->command, "evaluate") == 0) {
        rc = dr_run_evaluate(&cfg, &res, err);
        if ((rc == DR_OK || res.examples) && printer()) dr_report_evaluate(stdout, "evaluate", &res, dr_classifier(&cfg));   /* shown even if eval.json could not be written */
        return rc;
    }
    if (strcmp(c->command, "predict") == 0) {
        if ((rc = dr_run_predict(&cfg, &res, err))) return rc;
        if (printer()) dr_report_predict(stdout, &res, cfg.model_dir);
        return DR_OK;
    }
    if (strcmp(c->command, "export") == 0) {
        if ((rc = dr_run_export(&cfg, c->what, c->format, err))) return rc;
        if (strcmp(c->what, "shards") == 0)
            printf("export: the training set as %u shard files and shards.json in %s\n", cfg.num_shards, cfg.model_dir);
        else printf("export: %s as %s in %s\n", c->what, c->format, cfg.model_dir);
        return DR_OK;
    }
    return dr_fail(err, DR_EUSAGE, "unknown command '%s': expected " COMMANDS, c->command);
}

/* `distref diff A B [--tolerance=...] [--json]` (docs/JUDGING.md): exit 0
 * when every element is within the tolerance (bit for bit without one), 1
 * when not, 2 for a usage or format error (a missing step, other shapes,
 * a dtype other than float32, a file that does not parse), named. */
/* diff --plot=DIR: gnuplot DIR/divergence.gp in DIR, when gnuplot is there;
 * the data file and index.html stand either way. Says which on stderr. */
static void diff_plot_render(const char *dir)
{
    int st = -1;
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        if (chdir(dir) == 0) execlp("gnuplot", "gnuplot", "divergence.gp", (char *)NULL);
        _exit(127);
    }
    if (pid > 0) waitpid(pid, &st, 0);
    if (pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        fprintf(stderr, "plot: %s/divergence.svg, %s/index.html (data: %s/divergence.dat)\n", dir, dir, dir);
    else if (pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 127)
        fprintf(stderr, "plot: not supported: gnuplot not found; wrote %s/divergence.dat, %s/divergence.gp and "
                        "%s/index.html\n", dir, dir, dir);
    else
        fprintf(stderr, "plot: gnuplot failed; wrote %s/divergence.dat, %s/divergence.gp and %s/index.html\n",
                dir, dir, dir);
}

static int diff_main(int argc, char **argv)
{
    static dr_cli_flags c;
    dr_flag f[DR_CLI_MAX_FLAGS];
    dr_err err = { 0, "" };
    const char *pos[2] = { NULL, NULL };
    char **flags = calloc((size_t)argc + 1, sizeof *flags);
    dr_flag_args args;
    dr_diff_opts o;
    bool help = false, pass = false;
    int n, nflags = 0, npos = 0, rc;
    if (!flags) return 2;
    dr_cli_flags_defaults(&c);
    for (int i = 2; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] == '-') flags[nflags++] = argv[i];
        else if (npos < 2) pos[npos++] = argv[i];
        else { npos++; break; }
    }
    n = table(&c, f);
    rc = dr_flag_args_expand(nflags, flags, &args, &err);
    if (rc == DR_OK) rc = dr_flags_parse_args(f, n, &args, &help, &err);
    dr_flag_args_free(&args);
    free(flags);
    if (rc == DR_OK && help) {
        printf("usage: distref diff A B [--tolerance=ulp=N|rtol=X|atol=X] [--json] [--plot=DIR]\n");
        return 0;
    }
    for (int i = 0; rc == DR_OK && i < n; i++)
        if (f[i].seen && strcmp(f[i].name, "tolerance") && strcmp(f[i].name, "json") && strcmp(f[i].name, "plot") &&
            strcmp(f[i].name, "flagfile"))
            rc = dr_fail(&err, DR_EUSAGE, "--%s does not apply to diff: it takes A B, --tolerance, --json and --plot",
                         f[i].name);
    for (int i = 0; rc == DR_OK && i < n; i++)
        if (f[i].seen && strcmp(f[i].name, "plot") == 0 && !c.plot[0])
            rc = dr_fail(&err, DR_EUSAGE, "--plot: expected a folder to write the picture into (--plot=DIR), got ''");
    if (rc == DR_OK && npos != 2)
        rc = dr_fail(&err, DR_EUSAGE, "diff: expected two trajectories or run directories, A and B; got %d", npos);
    memset(&o, 0, sizeof o);
    if (rc == DR_OK) rc = dr_diff_tolerance_parse(c.tolerance, &o, &err);
    o.json = c.json;
    o.plot = c.plot[0] ? c.plot : NULL;
    if (rc == DR_OK) rc = dr_traj_diff(pos[0], pos[1], &o, stdout, &pass, &err);
    if (rc) {
        fprintf(stderr, "distref: error: diff: %s\n", err.msg);
        return 2;
    }
    if (o.plot) diff_plot_render(o.plot);
    return pass ? 0 : 1;
}

/* --variant=mpi: finalize together on success; after an error, print it
 * (naming this rank) and end the whole job (MPI_Abort), so that no rank
 * is left waiting in a collective for this one. A run that finished
 * without a rank that died (parameter_server under `mpirun
 * --enable-recovery`) exits without MPI_Finalize: measured with Open MPI
 * 4.1.4, its closing fence sometimes waits forever for the dead rank, and
 * mpirun --enable-recovery still exits 0 when every survivor exits 0. A
 * failed job after a rank died ends through dr_mpi_abort_failed_job, so
 * that mpirun --enable-recovery exits non-zero too; not under
 * parameter_server, whose coordinator survives a lost worker by design
 * (its chief reports a failed job): there a rank's timeout while a dead
 * worker's closure re-runs must not end the job (tests/mpi_ps_rerun.sh
 * under load: mpirun exit 137, the chief killed mid-run). */
/* The host of the rank a comm failure names ("rank N died or hangs",
 * "nothing from rank N"), as " (rank N: host H)"; "" when none. */
static void lost_host(const char *msg, uint32_t size, char *note, size_t n)
{
    static const char *const pats[] = { " died or hangs", "nothing from rank " };
    note[0] = '\0';
    for (size_t i = 0; g_hosts && i < 2; i++) {
        const char *p = strstr(msg, pats[i]), *d;
        unsigned long r;
        if (!p) continue;
        if (i == 0) {   /* digits just before the pattern */
            for (d = p; d > msg && d[-1] >= '0' && d[-1] <= '9'; d--) {}
            if (d == p) continue;
        } else {
            d = p + strlen(pats[i]);
        }
        r = strtoul(d, NULL, 10);
        if (r < size) snprintf(note, n, " (rank %lu: host %s)", r, g_hosts + r * HOST_NAME_LEN);
        return;
    }
}

static int mpi_exit(int rc, const dr_err *err, bool peer_lost, bool ps)
{
    char note[160];
    uint32_t rank, size;
    int code = rc == DR_EUSAGE ? 2 : rc == DR_EINTERRUPTED ? 128 + (int)stop_signal : 1;
    dr_mpi_world(&rank, &size);
    if (rc == DR_OK) {
        if (!peer_lost) dr_mpi_finalize();
        return 0;
    }
    if (g_agreed || rc == DR_EUSAGE) {   /* a usage error in training (the same on every rank): rank 0 says it */
        if (!g_silent && (g_agreed || rank == 0)) {
            if (rank == 0) fprintf(stderr, "distref: error: %s\n", err->msg);
            else fprintf(stderr, "distref: error: MPI rank %u of %u: %s\n", rank, size, err->msg);
        }
        dr_mpi_finalize();
        return code;
    }
    lost_host(err->msg, size, note, sizeof note);
    fprintf(stderr, "distref: %sMPI rank %u of %u%s%s: %s%s\n", rc == DR_EINTERRUPTED ? "" : "error: ", rank, size,
            g_hosts ? " on host " : "", g_hosts ? g_hosts + (size_t)rank * HOST_NAME_LEN : "", err->msg, note);
    fflush(stderr);
    if (rc == DR_EFAULT) {   /* a rank died: give the other survivors a moment to say so too */
        struct timespec grace = { 0, 500000000 };
        nanosleep(&grace, NULL);
    }
    if (rc == DR_EFAULT && !ps) dr_mpi_abort_failed_job(code);   /* a rank died: mpirun must not say 0 */
    else dr_mpi_abort(code);
    return code;
}

int main(int argc, char **argv)
{
    static dr_cli_flags c;   /* large: keep it off the stack */
    dr_flag f[DR_CLI_MAX_FLAGS];
    dr_err err = { 0, "" };
    bool help = false;
    int first = 1, n, rc;
    dr_omp_short_spin_reexec(argv);   /* OpenMP threads spin briefly, then sleep, while they wait */
    /* Keep large scratch buffers in the heap instead of mapping and unmapping
     * them on every GEMM call (page faults dominated the engine's sys time). */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    setvbuf(stdout, NULL, _IOLBF, 0);   /* per-epoch lines appear as they happen */
    if (argc > 1 && strcmp(argv[1], "diff") == 0) return diff_main(argc, argv);
    dr_cli_flags_defaults(&c);
    g_argc = argc;
    g_argv = argv;
    if (argc > 1 && argv[1][0] != '-') {
        if (strlen(argv[1]) >= sizeof c.command) {
            if (launcher_rank() <= 0) fprintf(stderr, "distref: error: unknown command '%s': expected " COMMANDS "\n", argv[1]);
            return 2;
        }
        strcpy(c.command, argv[1]);
        first = 2;
    }
    n = table(&c, f);
    {   /* absl's --flagfile, expanded in place; then the table's flags */
        dr_flag_args args;
        rc = dr_flag_args_expand(argc - first, argv + first, &args, &err);
        if (rc == DR_OK) rc = dr_flags_parse_args(f, n, &args, &help, &err);
        dr_flag_args_free(&args);
    }
    if (rc == DR_OK && help) { usage(stdout, &c); return 0; }
    if (rc == DR_OK && c.version) { printf("distref %s (git %s)\n", DR_VERSION, DR_GIT_REVISION); return 0; }
    catch_signals();
    if (rc == DR_OK) rc = run(&c, f, n, &err);
    if (dr_mpi_active()) return mpi_exit(rc, &err, g_peer_lost, strcasecmp(c.strategy, "parameter_server") == 0);
    if (rc == DR_OK) return 0;
    if (rc == DR_EINTERRUPTED) {
        fprintf(stderr, "distref: %s\n", err.msg);
        return 128 + (int)stop_signal;   /* 130 for SIGINT, 143 for SIGTERM */
    }
    if (rc != DR_EUSAGE || launcher_rank() <= 0) fprintf(stderr, "distref: error: %s\n", err.msg);   /* once under mpirun */
    return rc == DR_EUSAGE ? 2 : 1;
}
