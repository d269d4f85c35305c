/* distref core — one run per model_dir: see include/distref/lock.h. */
#define _DEFAULT_SOURCE   /* flock(2) */
#include "distref/lock.h"
#include "distref/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the text ----------------------------------------------------------- */

/* Copies the value of "key value" into dst (size n), NUL-terminated; the
 * value must be non-empty, printable and fit. */
static int value_of(const char *line, size_t len, const char *key, char *dst, size_t n, unsigned lineno,
                    dr_err *err)
{
    size_t k = strlen(key);
    if (len <= k + 1 || memcmp(line, key, k) != 0 || line[k] != ' ')
        return dr_fail(err, DR_EFORMAT, "line %u: expected '%s <value>'", lineno, key);
    line += k + 1;
    len -= k + 1;
    if (len >= n)
        return dr_fail(err, DR_EFORMAT, "line %u: %s has %zu bytes, at most %zu", lineno, key, len, n - 1);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
            return dr_fail(err, DR_EFORMAT, "line %u: %s has a control byte 0x%02x at %zu", lineno, key,
                           (unsigned char)line[i], i);
    memcpy(dst, line, len);
    dst[len] = '\0';
    return DR_OK;
}

int dr_lock_parse(const uint8_t *text, size_t n, dr_lock_info *out, dr_err *err)
{
    static const char *const keys[] = { "distref lock", "pid", "host", "command" };
    const char *p = (const char *)text, *end = p + n;
    char pid[24];
    int rc = DR_OK;
    memset(out, 0, sizeof *out);
    if (n == 0) return dr_fail(err, DR_EFORMAT, "empty");
    if (n > DR_LOCK_MAX_BYTES) return dr_fail(err, DR_EFORMAT, "%zu bytes, at most %d", n, DR_LOCK_MAX_BYTES);
    for (unsigned i = 0; i < 4 && rc == DR_OK; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) return dr_fail(err, DR_EFORMAT, "line %u: no newline (expected %u lines)", i + 1, 4u);
        size_t len = (size_t)(nl - p);
        if (i == 0 && (len != strlen(keys[0]) || memcmp(p, keys[0], len) != 0))
            return dr_fail(err, DR_EFORMAT, "line 1: expected 'distref lock'");
        if (i == 1) rc = value_of(p, len, "pid", pid, sizeof pid, 2, err);
        if (i == 2) rc = value_of(p, len, "host", out->host, sizeof out->host, 3, err);
        if (i == 3) rc = value_of(p, len, "command", out->command, sizeof out->command, 4, err);
        if (rc == DR_OK && i == 1) {
            char *stop;
            errno = 0;
            long v = pid[0] >= '1' && pid[0] <= '9' ? strtol(pid, &stop, 10) : 0;
            if (v <= 0 || errno || *stop || v > 0x7fffffffL)
                return dr_fail(err, DR_EFORMAT, "line 2: pid '%s' is not a process id (1..2147483647)", pid);
            out->pid = v;
        }
        p = nl + 1;
    }
    if (rc == DR_OK && p != end)
        rc = dr_fail(err, DR_EFORMAT, "%zu bytes after the 4 lines", (size_t)(end - p));
    return rc;
}

/* src into dst (size n) with control bytes as spaces. */
static void clean_copy(char *dst, size_t n, const char *src)
{
    size_t i = 0;
    for (; i + 1 < n && src[i]; i++) dst[i] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ? ' ' : src[i];
    dst[i] = '\0';
}

size_t dr_lock_format(const dr_lock_info *info, char *buf, size_t n)
{
    char host[sizeof info->host], command[sizeof info->command];
    clean_copy(host, sizeof host, info->host[0] ? info->host : "?");
    clean_copy(command, sizeof command, info->command[0] ? info->command : "?");
    int k = snprintf(buf, n, "distref lock\npid %ld\nhost %s\ncommand %s\n", info->pid, host, command);
    return k < 0 ? 0 : (size_t)k;
}

/* ---- this process ------------------------------------------------------- */

static void this_process(dr_lock_info *me)
{
    uint8_t *argv = NULL;
    size_t n = 0;
    dr_err ignore;
    memset(me, 0, sizeof *me);
    me->pid = (long)getpid();
    if (gethostname(me->host, sizeof me->host - 1) != 0) strcpy(me->host, "?");
    if (dr_read_file("/proc/self/cmdline", sizeof me->command - 1, &argv, &n, &ignore) == DR_OK) {
        while (n > 0 && argv[n - 1] == '\0') n--;
        for (size_t i = 0; i < n; i++) if (argv[i] == '\0') argv[i] = ' ';
        clean_copy(me->command, sizeof me->command, (const char *)argv);
    }
    if (!me->command[0]) strcpy(me->command, "(unknown command)");
    free(argv);
}

/* The text of an open lock file (at most DR_LOCK_MAX_BYTES + 1 bytes). */
static size_t read_text(int fd, uint8_t *buf)
{
    size_t n = 0;
    while (n <= DR_LOCK_MAX_BYTES) {
        ssize_t r = pread(fd, buf + n, DR_LOCK_MAX_BYTES + 1 - n, (off_t)n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    return n;
}

/* ---- the lock ----------------------------------------------------------- */

/* Someone holds it: name them. Their text may not be written yet (it comes
 * just after their flock): a few short waits for it. */
static int held_by_other(dr_dir_lock *lk, const char *model_dir, dr_err *err)
{
    uint8_t buf[DR_LOCK_MAX_BYTES + 1];
    dr_lock_info who;
    dr_err why;
    int rc = DR_EFORMAT;
    for (int i = 0; i < 20 && rc != DR_OK; i++) {
        struct timespec t = { 0, 10 * 1000 * 1000 };
        rc = dr_lock_parse(buf, read_text(lk->fd, buf), &who, &why);
        if (rc != DR_OK) nanosleep(&t, NULL);
    }
    close(lk->fd);
    lk->fd = -1;
    if (rc != DR_OK)
        return dr_fail(err, DR_EUSAGE, "--model_dir=%s is in use by another distref run (%s is locked; its "
                       "holder is not named there: %s); wait for it to finish or use another --model_dir",
                       model_dir, lk->path, why.msg);
    return dr_fail(err, DR_EUSAGE, "--model_dir=%s is in use by another distref run: pid %ld on %s, `%s` (%s); "
                   "wait for it to finish or use another --model_dir", model_dir, who.pid, who.host, who.command,
                   lk->path);
}

/* Opens model_dir/.lock without following a link or blocking on a FIFO. */
static int open_lock_file(dr_dir_lock *lk, dr_err *err)
{
    struct stat st;
    lk->fd = open(lk->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (lk->fd < 0 && errno == ELOOP)
        return dr_fail(err, DR_EFORMAT, "%s: not a regular file (it is a symbolic link); remove it, distref "
                       "keeps its lock there", lk->path);
    if (lk->fd < 0) return dr_fail(err, DR_EIO, "%s: cannot open the lock file: %s", lk->path, strerror(errno));
    if (fstat(lk->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(lk->fd);
        lk->fd = -1;
        return dr_fail(err, DR_EFORMAT, "%s: not a regular file; remove it, distref keeps its lock there", lk->path);
    }
    return DR_OK;
}

int dr_model_dir_lock(const char *model_dir, bool create, dr_dir_lock *lk, dr_err *err)
{
    uint8_t old[DR_LOCK_MAX_BYTES + 1];
    char text[sizeof(dr_lock_info) + 64];
    dr_lock_info me;
    dr_err ignore;
    struct stat st;
    int rc;
    memset(lk, 0, sizeof *lk);
    lk->fd = -1;
    if ((size_t)snprintf(lk->path, sizeof lk->path, "%s/%s", model_dir, DR_LOCK_FILE) >= sizeof lk->path)
        return dr_fail(err, DR_EUSAGE, "--model_dir: %zu characters, too long", strlen(model_dir));
    if (!create && stat(model_dir, &st) != 0 && errno == ENOENT) return DR_OK;   /* nothing there to protect */
    if ((create && (rc = dr_mkdirs(model_dir, err))) || (rc = open_lock_file(lk, err))) return rc;
    while (flock(lk->fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        if (errno == EWOULDBLOCK) return held_by_other(lk, model_dir, err);
        rc = dr_fail(err, DR_EIO, "%s: cannot lock: %s", lk->path, strerror(errno));
        close(lk->fd);
        lk->fd = -1;
        return rc;
    }
    /* Ours. Text left in the file names a holder that died before clearing it. */
    size_t n = read_text(lk->fd, old);
    if (n > 0 && dr_lock_parse(old, n, &lk->stale, &ignore) == DR_OK) lk->took_over = true;
    this_process(&me);
    size_t len = dr_lock_format(&me, text, sizeof text);
    if (len >= sizeof text) len = sizeof text - 1;
    if (ftruncate(lk->fd, 0) != 0 || pwrite(lk->fd, text, len, 0) != (ssize_t)len) {
        rc = dr_fail(err, DR_EIO, "%s: cannot write the lock's holder: %s", lk->path, strerror(errno));
        dr_model_dir_unlock(lk);
        return rc;
    }
    return DR_OK;
}

void dr_model_dir_unlock(dr_dir_lock *lk)
{
    if (lk->fd < 0) return;
    (void)ftruncate(lk->fd, 0);   /* a clean end: the next run has no one to take over from */
    close(lk->fd);                /* releases the flock */
    lk->fd = -1;
}

int dr_lock_check_holder(const char *model_dir, long pid, const char *host, dr_err *err)
{
    char path[1100];
    uint8_t *text = NULL;
    size_t n = 0;
    dr_lock_info who;
    struct stat st;
    dr_err why;
    int rc;
    snprintf(path, sizeof path, "%s/%s", model_dir, DR_LOCK_FILE);
    if (lstat(path, &st) != 0 && errno == ENOENT) return DR_OK;   /* not shared with the holder's host */
    if ((rc = dr_read_regular(path, DR_LOCK_MAX_BYTES, &text, &n, err))) return rc;
    rc = dr_lock_parse(text, n, &who, &why);
    free(text);
    if (rc != DR_OK)
        return dr_fail(err, DR_EUSAGE, "%s: expected the lock of pid %ld on %s: %s", path, pid, host, why.msg);
    if (who.pid != pid || strcmp(who.host, host) != 0)
        return dr_fail(err, DR_EUSAGE, "--model_dir=%s is locked by pid %ld on %s, `%s` (%s), not by this job's "
                       "chief (pid %ld on %s): another run shares the directory", model_dir, who.pid, who.host,
                       who.command, path, pid, host);
    return DR_OK;
}
