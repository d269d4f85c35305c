/* distref devices — a rank's last words when its launcher ends it
 * (distref/mpi.h: dr_mpi_last_words).
 *
 * When a whole host dies (all its ranks SIGKILLed), Open MPI 4.1.4's plain
 * mpirun loses that host's daemon and ends the job itself: it sends every
 * surviving rank SIGTERM (or a rank's own TCP layer ends it from inside
 * Open MPI, through exit()), before distref's --collective_timeout names the
 * lost rank. So every wait of the MPI comm first writes, into one of two
 * buffers, the line the rank would say if ended during that wait (step,
 * collective, the ranks it awaits and their hosts), then publishes it by
 * flipping one sig_atomic_t; SIGTERM's handler and an atexit hook write the
 * published line with write(2) (async-signal-safe). Between two waits the
 * first SIGTERM says a line naming the step, the last collective and the
 * next one's peers. Either way the handler then does what SIGTERM did
 * before (cli/main.c's stop request: checkpoint and stop after this step);
 * a second SIGTERM, the default action. */
#include "distref/mpi.h"
#include "devices/mpi/comm_mpi_internal.h"
#include "devices/seams.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LW_LINE 640
#define LW_HOST 64

typedef struct lw_state {
    char line[2][LW_LINE];          /* the line being written and the published one */
    size_t len[2];
    volatile sig_atomic_t cur;      /* which line is published; -1: none yet */
    volatile sig_atomic_t waiting;  /* 1: in a wait (the line's "during"), 0: between two */
    volatile sig_atomic_t terms;    /* SIGTERMs seen outside a wait */
    char between[2][LW_LINE];       /* the line said between waits, published with cur */
    size_t blen[2];
    unsigned long long step;        /* the training step under way (dr_mpi_last_words_step) */
    uint32_t rank, size;
    char *hosts;                    /* every rank's host, LW_HOST bytes each */
    struct sigaction before;        /* SIGTERM's action before ours */
} lw_state;

/* The one piece of process-wide mutable state in devices/: a signal handler
 * (and an atexit hook) receives no argument, so a static pointer is the only
 * way it can reach the line to say. Set once by dr_mpi_last_words (rank 0's
 * main thread, before training), read by the handler; never freed (the
 * process ends with it). */
static lw_state *g_lw;

static void lw_say(const lw_state *s, bool during)
{
    int i = (int)s->cur;
    ssize_t w;
    if (i < 0) return;
    w = during ? write(STDERR_FILENO, s->line[i], s->len[i]) : write(STDERR_FILENO, s->between[i], s->blen[i]);
    (void)w;
}

/* The first SIGTERM says the line (the wait's, or the "between" one) and
 * then does what SIGTERM did before (cli/main.c's stop request: finish
 * this step, checkpoint, stop): a polite SIGTERM (mpirun signalled, a
 * Slurm time limit) still ends with a checkpoint, and where a host was
 * lost the wait cannot finish, so --collective_timeout (or mpirun's own
 * SIGKILL) ends the rank after the line. A second SIGTERM: the default
 * action. */
static void lw_on_term(int sig)
{
    lw_state *s = g_lw;
    if (s && s->terms++ == 0) {
        lw_say(s, s->waiting);
        if (s->before.sa_handler != SIG_DFL && s->before.sa_handler != SIG_IGN && !(s->before.sa_flags & SA_SIGINFO)) {
            s->before.sa_handler(sig);
            return;
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void lw_at_exit(void)
{
    lw_state *s = g_lw;
    if (s && s->waiting) lw_say(s, true);   /* exit() from inside Open MPI during a wait (its TCP layer lost a peer) */
    if (s) s->waiting = 0;
}

int dr_mpi_last_words(const char *hosts, size_t len)
{
    struct sigaction sa;
    lw_state *s;
    if (g_lw || !dr_mpi_active()) return DR_OK;
    if (!(s = calloc(1, sizeof *s))) return DR_ENOMEM;
    dr_mpi_world(&s->rank, &s->size);
    if (!(s->hosts = calloc(s->size, LW_HOST))) { free(s); return DR_ENOMEM; }
    for (uint32_t q = 0; hosts && q < s->size; q++) snprintf(s->hosts + (size_t)q * LW_HOST, LW_HOST, "%s", hosts + q * len);
    s->cur = -1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = lw_on_term;
    sigemptyset(&sa.sa_mask);
    g_lw = s;
    sigaction(SIGTERM, &sa, &s->before);
    atexit(lw_at_exit);
    return DR_OK;
}

void dr_mpi_last_words_step(unsigned long long step)
{
    if (g_lw) g_lw->step = DR_SEAM_LW_STEP(g_lw->step, step);
}

static const char *lw_host(const lw_state *s, uint32_t q)
{
    return s->hosts[(size_t)q * LW_HOST] ? s->hosts + (size_t)q * LW_HOST : "?";
}

/* The line said between two waits: the step, the last collective, and the
 * next one's peers (every other rank). */
static void lw_between(lw_state *s, int i, const char *what)
{
    char *b = s->between[i];
    int n = snprintf(b, LW_LINE, "distref: MPI rank %u of %u on host %s: step %llu: SIGTERM (mpirun ends the job: "
                     "a host or rank was lost, or mpirun was signalled) between collectives, after %s; the next awaits",
                     s->rank, s->size, lw_host(s, s->rank), s->step, what);
    for (uint32_t q = 0; q < s->size && n > 0 && n < LW_LINE - 120; q++)
        if (q != s->rank)
            n += snprintf(b + n, (size_t)(LW_LINE - n), "%s rank %u (host %s)", b[n - 1] == 's' ? "" : ",", q,
                          lw_host(s, q));
    if (n > 0 && n < LW_LINE - 60) n += snprintf(b + n, (size_t)(LW_LINE - n), ": stopping after this step");
    if (n < 0 || n > LW_LINE - 2) n = LW_LINE - 2;
    b[n++] = '\n';
    s->blen[i] = (size_t)n;
}

void dr_cm_awaiting(const cm_ep *e, const char *what, int peer)
{
    lw_state *s = g_lw;
    int i, n;
    char *b;
    if (!s || e->size != s->size) return;
    i = s->cur == 0 ? 1 : 0;
    b = s->line[i];
    n = snprintf(b, LW_LINE, "distref: error: MPI rank %u of %u on host %s: step %llu: Open MPI ends the job "
                 "(a host or rank was lost, or mpirun was signalled) during %s, awaiting", s->rank, s->size,
                 lw_host(s, s->rank), s->step, what);
    for (uint32_t q = 0; q < s->size && n > 0 && n < LW_LINE - 80; q++) {
        if (q == s->rank || (peer >= 0 && (uint32_t)peer != q)) continue;
        n += snprintf(b + n, (size_t)(LW_LINE - n), "%s rank %u (host %s)", n && b[n - 1] == 'g' ? "" : ",", q,
                      lw_host(s, q));
    }
    if (n < 0 || n > LW_LINE - 2) n = LW_LINE - 2;
    b[n++] = '\n';
    s->len[i] = (size_t)n;
    lw_between(s, i, what);
    s->cur = i;
    s->waiting = 1;
}

void dr_cm_awaited(void)
{
    if (g_lw) g_lw->waiting = 0;
}
