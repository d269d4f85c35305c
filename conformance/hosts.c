/* distref conformance — suite `hosts`: the mpi variant across "hosts" that
 * share no network stack, over TCP (issue 32).
 *
 * scripts/netns_cluster.sh brings up 3 network namespaces dr-h0..dr-h2 on a
 * private bridge; each cell runs `scripts/netns_mpirun.sh --hostfile F -np N
 * bin/distref train --variant=mpi ...` (mpirun inside dr-h0, the remote
 * daemons started in their namespace by scripts/netns_rsh.sh, each host with
 * its own host name; the byte transfer layer forced to tcp,self and both it
 * and the out-of-band channel to the namespace link eth0, so no shared
 * memory carries a byte, not even between two ranks of one host) over H = 2
 * or 3 hosts with 1 or 2 ranks each, and judges it live:
 *   exact  multi_worker_mirrored: every step's loss_bits and the final
 *          weights (and weights_sha256) equal the reference one_device run;
 *          parameter_server (seeded): equal `--variant=ref` parameter_server
 *          with the same TF_CONFIG shape and seed;
 *   fast   multi_worker_mirrored: equal the openmp variant with the same
 *          workers and replicas (the mpi suite's criterion: the float order
 *          across ranks of comm.h, whatever carries the bytes).
 * A cell that runs past 120 s is killed (a hung mpirun fails its cell).
 * The cluster is taken down when the suite ends (the next `up` also takes
 * down one left over by a killed run). Where namespaces cannot be made
 * (no root, no iproute2, a container without CAP_NET_ADMIN) every cell is
 * "not supported" with netns_cluster.sh's reason: neither a pass nor a
 * failure. Mutant: hosts_pack_off_by_one (tests/faults.tsv), the mpi
 * suite's wire fault, must fail here too.
 * The suite holds the hosts' lock (scripts/netns_lock.sh: an flock(2) on
 * /run/lock/distref-netns.lock, DR_NETNS_LOCK overrides) from `up` to
 * `down`, on fd 9 for netns_cluster.sh to go on under; held by another
 * user for DR_NETNS_WAIT s (default 120), every cell is "not supported"
 * naming the holder's pid.
 */
#define _DEFAULT_SOURCE   /* flock(2) */
#ifndef DR_BIN
#define DR_BIN "bin/distref"
#endif
#include "conformance/conformance.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct host_cell {
    const char *strategy;   /* multi_worker_mirrored | parameter_server */
    uint32_t    H, per;     /* hosts, ranks per host */
    uint32_t    L;          /* multi_worker_mirrored: --num_gpus; parameter_server: ps tasks */
    uint32_t    G, E;
    double      l2;
    const char *alg;        /* --all_reduce_alg (multi_worker_mirrored; NULL: the default) */
    const char *policy;
    const char *numerics;
} host_cell;

static const host_cell k_host_cells[] = {
    { "multi_worker_mirrored", 2, 1, 1, 37, 230, 1e-3, "ring", "data", "exact" },
    { "multi_worker_mirrored", 2, 2, 2, 32, 200, 0.0, "nccl", "auto", "exact" },
    { "multi_worker_mirrored", 3, 1, 2, 37, 230, 1e-3, "ring", "auto", "exact" },
    { "multi_worker_mirrored", 3, 2, 1, 37, 227, 0.0, "nccl", "data", "exact" },
    { "multi_worker_mirrored", 2, 2, 1, 32, 200, 1e-3, "ring", "auto", "fast" },
    { "multi_worker_mirrored", 3, 1, 1, 37, 230, 0.0, "ring", "data", "fast" },
    { "parameter_server", 2, 2, 1, 32, 200, 0.0, NULL, "auto", "exact" },   /* chief, 2 workers, 1 ps */
    { "parameter_server", 3, 2, 2, 37, 230, 1e-3, NULL, "auto", "exact" },  /* chief, 3 workers, 2 ps */
    /* the default algorithm: the comm rounds each exact total once (strategies/round_once.c), over TCP */
    { "multi_worker_mirrored", 2, 2, 1, 32, 200, 1e-3, NULL, "auto", "exact" },
};

#define HOSTS_ENV "env -u TF_CONFIG OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "

static bool is_ps(const host_cell *k) { return strcmp(k->strategy, "parameter_server") == 0; }

/* multi_worker_mirrored: W workers; parameter_server: a chief, W - 1 - P workers, P ps (task: the chief's). */
static void cluster_json(const host_cell *k, bool task, char *buf, size_t n)
{
    uint32_t ranks = k->H * k->per, w, len;
    if (!is_ps(k)) {
        len = (uint32_t)snprintf(buf, n, "{\"cluster\": {\"worker\": [");
        for (w = 0; w < ranks; w++) len += (uint32_t)snprintf(buf + len, n - len, "%s\"w%u:2222\"", w ? ", " : "", w);
        snprintf(buf + len, n - len, "]}, \"task\": {\"type\": \"worker\", \"index\": 0}}");
        return;
    }
    len = (uint32_t)snprintf(buf, n, "{\"cluster\": {\"chief\": [\"c:2222\"], \"worker\": [");
    for (w = 0; w < ranks - 1 - k->L; w++) len += (uint32_t)snprintf(buf + len, n - len, "%s\"w%u:2222\"", w ? ", " : "", w);
    len += (uint32_t)snprintf(buf + len, n - len, "], \"ps\": [");
    for (w = 0; w < k->L; w++) len += (uint32_t)snprintf(buf + len, n - len, "%s\"p%u:2222\"", w ? ", " : "", w);
    snprintf(buf + len, n - len, "]}%s}", task ? ", \"task\": {\"type\": \"chief\", \"index\": 0}" : "");
}

/* The in-process oracle: ref one_device / ref parameter_server (exact), openmp (fast). */
static void oracle_config(const host_cell *k, char *tf, size_t ntf, dr_run_config *c)
{
    bool fast = strcmp(k->numerics, "fast") == 0;
    base_config(c, k->E, k->G, k->l2);
    snprintf(c->variant, sizeof c->variant, "%s", fast ? "openmp" : "ref");
    snprintf(c->numerics, sizeof c->numerics, "%s", k->numerics);
    if (is_ps(k)) {
        set_strategy(c, "parameter_server", 0, NULL, 1);
        c->schedule_seed = 3;
        cluster_json(k, true, tf, ntf);
        c->tf_config = tf;
    } else if (fast) {
        set_strategy(c, "multi_worker_mirrored", (int)k->L, k->alg, 1);
        snprintf(c->auto_shard_policy, sizeof c->auto_shard_policy, "%s", k->policy);
        cluster_json(k, false, tf, ntf);
        c->tf_config = tf;
    } else {
        set_strategy(c, "one_device", 0, NULL, 1);
    }
}

/* The cell under netns_mpirun.sh into dir; returns mpirun's exit status. */
static int host_launch(const results *r, const host_cell *k, const char *dir)
{
    char cmd[2600], bin[1200], cwd[1024], extra[256], tf[1024] = "";
    const char *b = r->bin ? r->bin : DR_BIN;
    FILE *f;
    int st;
    snprintf(cmd, sizeof cmd, "%s/hosts", dir);
    if (!(f = fopen(cmd, "w"))) return -1;
    for (uint32_t h = 0; h < k->H; h++) fprintf(f, "dr-h%u slots=%u\n", h, k->per);
    if (fclose(f) != 0) return -1;
    /* the remote daemons start in mpirun's directory; an absolute path all the same */
    snprintf(bin, sizeof bin, "%s%s%s", b[0] == '/' ? "" : getcwd(cwd, sizeof cwd) ? cwd : ".", b[0] == '/' ? "" : "/", b);
    if (is_ps(k)) {
        cluster_json(k, false, tf, sizeof tf);
        snprintf(extra, sizeof extra, " --schedule_seed=3 --schedule=seeded");
    } else {
        snprintf(extra, sizeof extra, " --num_gpus=%u%s%s --auto_shard_policy=%s", k->L, k->alg ? " --all_reduce_alg=" : "",
                 k->alg ? k->alg : "", k->policy);
    }
    snprintf(cmd, sizeof cmd, HOSTS_ENV "%s%s%s timeout -s KILL 120 sh scripts/netns_mpirun.sh --hostfile %s/hosts "
             "-np %u --bind-to none -x OMP_NUM_THREADS %s train --variant=mpi --distribution_strategy=%s --global_batch_size=%u "
             "--synthetic_examples=%u --epochs=1 --seed=7 --l2=%g --numerics=%s%s --model_dir=%s > %s/log.txt 2>&1",
             tf[0] ? "TF_CONFIG='" : "", tf, tf[0] ? "'" : "", dir, k->H * k->per, bin, k->strategy, k->G, k->E, k->l2,
             k->numerics, extra, dir, dir);
    st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int host_cell_run(results *r, const host_cell *k)
{
    char dir[] = "/tmp/distref_hosts_XXXXXX", tf[1024], name[200], why[600] = "", cmd[1200];
    dr_run_config oc, vc;
    outcome m, oracle;
    bool pass;
    int code = -1;
    memset(&m, 0, sizeof m);
    if (is_ps(k))
        snprintf(name, sizeof name, "%s parameter_server seeded %u hosts x %u ranks (chief, %u workers, %u ps) G=%u E=%u "
                 "l2=%g", k->numerics, k->H, k->per, k->H * k->per - 1 - k->L, k->L, k->G, k->E, k->l2);
    else
        snprintf(name, sizeof name, "%s multi_worker_mirrored %u hosts x %u ranks x L=%u G=%u E=%u l2=%g alg=%s %s",
                 k->numerics, k->H, k->per, k->L, k->G, k->E, k->l2, k->alg ? k->alg : "auto", k->policy);
    oracle_config(k, tf, sizeof tf, &oc);
    vc = oc;
    snprintf(vc.variant, sizeof vc.variant, "mpi");
    if (mkdtemp(dir)) {
        code = host_launch(r, k, dir);
        read_outcome(dir, &m);
        if (code != 0 && !m.error[0]) snprintf(m.error, sizeof m.error, "mpirun exited with status %d", code);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "conformance: could not remove %s\n", dir);
    } else {
        snprintf(m.error, sizeof m.error, "mkdtemp failed");
    }
    run_case(&oc, &oracle);
    pass = outcome_same_why(&m, &oracle, why, sizeof why);
    record(r, "hosts", &vc, (int)(k->H * k->per), pass, m.seconds, "%s: bits = %s %s%s%s", name, oc.variant,
           dr_strategy_kind_name(oc.strategy.kind), pass ? "" : ": ", why);
    outcome_free(&m);
    outcome_free(&oracle);
    return !pass;
}

/* netns_cluster.sh's verdict on this machine: "" when it can, else the reason. */
static void why_not(char *why, size_t n)
{
    FILE *p = popen("sh scripts/netns_cluster.sh check 2>&1", "r");
    char line[256] = "";
    int st;
    why[0] = '\0';
    if (!p) { snprintf(why, n, "cannot run scripts/netns_cluster.sh"); return; }
    if (!fgets(line, sizeof line, p)) line[0] = '\0';
    st = pclose(p);
    line[strcspn(line, "\n")] = '\0';
    if (st != 0) snprintf(why, n, "%s", strncmp(line, "not supported: ", 15) == 0 ? line + 15 : line);
    else if (system("command -v mpirun > /dev/null 2>&1") != 0) snprintf(why, n, "mpirun not found");
}

/* The hosts' lock on fd 9 (scripts/netns_lock.sh's protocol), waiting up
 * to DR_NETNS_WAIT s; -1 and why (naming the holder) when it stays taken. */
static int hosts_lock(char *why, size_t n)
{
    const char *path = getenv("DR_NETNS_LOCK"), *w = getenv("DR_NETNS_WAIT");
    long wait_s = w && *w ? strtol(w, NULL, 10) : 120;
    char holder[160] = "", line[96], stamp[32];
    time_t t = time(NULL);
    FILE *f;
    int fd;
    if (!path || !*path) path = access("/run/lock", W_OK) == 0 ? "/run/lock/distref-netns.lock" : "/tmp/distref-netns.lock";
    if (fcntl(9, F_GETFD) != -1 || errno != EBADF) { snprintf(why, n, "fd 9, the hosts' lock's, is in use"); return -1; }
    if ((fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644)) < 0 || dup2(fd, 9) != 9) {
        snprintf(why, n, "cannot open the hosts' lock %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    for (long k = 0; flock(9, LOCK_EX | LOCK_NB) != 0; k++) {
        if ((f = fopen(path, "r"))) {
            while (fgets(line, sizeof line, f)) if (strncmp(line, "pid ", 4) == 0 || strncmp(line, "command ", 8) == 0) {
                line[strcspn(line, "\n")] = 0;
                snprintf(holder + strlen(holder), sizeof holder - strlen(holder), "%s%s", holder[0] ? ", " : "", line);
            }
            fclose(f);
        }
        if (k == 0) printf("hosts: the namespace hosts are in use by %s; waiting up to %ld s (DR_NETNS_WAIT)\n",
                           holder[0] ? holder : "another process", wait_s);
        if (k >= wait_s) {
            snprintf(why, n, "the namespace hosts are in use by %s (%s) after %ld s", holder[0] ? holder : "another process",
                     path, wait_s);
            close(9);
            return -1;
        }
        holder[0] = 0;
        sleep(1);
    }
    if (ftruncate(9, 0) == 0) {
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
        dprintf(9, "pid %ld\ncommand bin/conformance --only hosts\nsince %s\n", (long)getpid(), stamp);
    }
    return 0;
}

int suite_hosts(results *r)
{
    enum { NCELLS = sizeof k_host_cells / sizeof k_host_cells[0] };
    char why[256];
    int fails = 0;
    bool locked = false;
    double t0 = now();
    if (r->fault && strncmp(r->fault, "hosts_", 6) != 0) return 0;   /* other faults are other suites' */
    if (!r->fault && r->variant && strcmp(r->variant, "mpi") != 0) return 0;
    printf("== hosts: the mpi variant across network namespaces over TCP, against the reference, live\n");
    why_not(why, sizeof why);
    if (!why[0]) locked = hosts_lock(why, sizeof why) == 0;
    if (!why[0] && system("DR_NETNS_LOCK_FD=9 sh scripts/netns_cluster.sh up 3 > /dev/null 2>&1") != 0)
        snprintf(why, sizeof why, "scripts/netns_cluster.sh up 3 failed");
    for (size_t i = 0; i < NCELLS; i++) {
        const host_cell *k = &k_host_cells[i];
        if (why[0]) {
            record_not_supported(r, "hosts", NULL, (int)(k->H * k->per), why, "%s %s %u hosts x %u ranks",
                                 k->numerics, k->strategy, k->H, k->per);
            continue;
        }
        if (r->quick && strcmp(k->numerics, "fast") == 0) continue;
        if (!r->quick && !r->full && i % 2 == 1) continue;   /* default: every other cell (2 and 3 hosts exact, fast, ps) */
        fails += host_cell_run(r, k);
        if (r->fault && fails) break;   /* a mutant: caught */
    }
    if (locked && system("DR_NETNS_LOCK_FD=9 sh scripts/netns_cluster.sh down > /dev/null 2>&1") != 0)
        fprintf(stderr, "conformance: hosts: scripts/netns_cluster.sh down failed\n");
    if (locked) close(9);   /* the lock, released */
    printf("hosts: %.1f s%s%s\n", now() - t0, why[0] ? ", not supported: " : "", why);
    return fails;
}
