/* distref — whole-file I/O: see include/distref/fileio.h. */
#include "distref/fileio.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- dr_write_atomic ---------------------------------------------------- */

/* Writes all n bytes, resuming after short writes and signals. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The directory that holds path: "a/b/c" -> "a/b", "c" -> ".", "/c" -> "/". */
static char *containing_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        char *dot = malloc(2);
        if (dot != NULL)
            strcpy(dot, ".");
        return dot;
    }
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    char *dir = malloc(len + 1);
    if (dir != NULL) {
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    return dir;
}

/* Fills, syncs and closes fd (the temp file tmp). */
static int fill_temp(int fd, const char *path, const char *tmp, const void *data, size_t n, dr_err *err)
{
    const char *step = NULL;
    if (n > 0 && write_all(fd, data, n) != 0)
        step = "write";
    else if (fsync(fd) != 0)
        step = "fsync";
    int saved = errno;
    if (close(fd) != 0 && step == NULL) {   /* NFS reports late write errors here */
        step = "close";
        saved = errno;
    }
    if (step != NULL)
        return dr_fail(err, DR_EIO, "%s: cannot %s %zu bytes to temp file %s: %s",
                       path, step, n, tmp, strerror(saved));
    return DR_OK;
}

/* Creates a new temp file beside path, in the directory dfd: its name is
 * "<base>.tmp.<pid>", or "<base>.tmp.<pid>.<k>" when that exists (a planted
 * file or link, a leftover of an earlier process with this pid). O_EXCL and
 * O_NOFOLLOW: never an existing file, never through a symbolic link. */
static int create_temp(int dfd, const char *path, const char *base, char *tmp, size_t size,
                       int *fd, dr_err *err)
{
    enum { TRIES = 100 };
    for (int k = 0; k < TRIES; k++) {
        if (k == 0)
            snprintf(tmp, size, "%s.tmp.%ld", base, (long)getpid());
        else
            snprintf(tmp, size, "%s.tmp.%ld.%d", base, (long)getpid(), k);
        *fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (*fd >= 0)
            return DR_OK;
        if (errno != EEXIST)
            return dr_fail(err, DR_EIO, "%s: cannot create temp file %s: %s", path, tmp, strerror(errno));
    }
    return dr_fail(err, DR_EIO, "%s: cannot create a temp file: %s and %d more names like it exist "
                   "(remove the *.tmp.* files beside it)", path, tmp, TRIES - 1);
}

/* The final step: tmp (in dir, open as dfd) renamed over path. A symbolic
 * link at path is replaced, never followed (rename(2) acts on the link
 * itself); a directory there (or a link to one, planted) is refused by
 * name. rename(2) by path, not renameat: the durability sweeps
 * (scripts/durability.sh) plant their kills at the rename system call. */
static int commit_temp(int dfd, const char *dir, const char *path, const char *base, const char *tmp, dr_err *err)
{
    struct stat st;
    size_t size = strlen(dir) + strlen(tmp) + 2;
    char *from = malloc(size);
    int rc = DR_OK;
    if (from == NULL)
        return dr_fail(err, DR_ENOMEM, "%s: out of memory naming the temp file", path);
    snprintf(from, size, "%s/%s", dir, tmp);
    if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        rc = dr_fail(err, DR_EIO, "%s: cannot rename %s over it: it is a directory, expected a file", path, from);
    else if (rename(from, path) != 0)
        rc = dr_fail(err, DR_EIO, "%s: cannot rename %s over it: %s", path, from, strerror(errno));
    /* The rename is only durable once the directory entry is on disk.
     * EINVAL: this file system cannot sync directories (POSIX allows that). */
    else if (fsync(dfd) != 0 && errno != EINVAL)
        rc = dr_fail(err, DR_EIO, "%s: cannot sync its directory %s after rename: %s", path, dir, strerror(errno));
    free(from);
    return rc;
}

int dr_write_atomic(const char *path, const void *data, size_t n, dr_err *err)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return dr_fail(err, DR_EUSAGE, "%s: not a file name", path);
    char *dir = containing_dir(path);
    size_t tmp_size = strlen(base) + 48;   /* ".tmp." + a pid + "." + k + NUL */
    char *tmp = malloc(tmp_size);
    if (dir == NULL || tmp == NULL) {
        free(dir);
        free(tmp);
        return dr_fail(err, DR_ENOMEM, "%s: out of memory naming the temp file", path);
    }
    /* One directory descriptor for the temp file, the rename and the sync:
     * the three act on the same directory even if its path is swapped. */
    int fd = -1, rc = DR_OK, dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        rc = dr_fail(err, DR_EIO, "%s: cannot open its directory %s: %s", path, dir, strerror(errno));
    if (rc == DR_OK && (rc = create_temp(dfd, path, base, tmp, tmp_size, &fd, err)) == DR_OK) {
        rc = fill_temp(fd, path, tmp, data, n, err);
        if (rc == DR_OK)
            rc = commit_temp(dfd, dir, path, base, tmp, err);
        if (rc != DR_OK)
            (void)unlinkat(dfd, tmp, 0);   /* ours: created O_EXCL above */
    }
    if (dfd >= 0)
        close(dfd);
    free(tmp);
    free(dir);
    return rc;
}

long dr_temp_pid(const char *name, const char *prefix)
{
    size_t k = strlen(prefix);
    const char *tmp = k ? (strncmp(name, prefix, k) == 0 ? name + k : NULL) : strstr(name, ".tmp.");
    if (tmp == NULL || strncmp(tmp, ".tmp.", 5) != 0)
        return 0;
    const char *p = tmp + 5, *q = p;
    long pid = 0;
    while (*q >= '0' && *q <= '9' && q - p < 10)
        pid = pid * 10 + (*q++ - '0');
    if (q == p || pid <= 0)
        return 0;
    if (*q == '.' && q[1] != '\0' && strspn(q + 1, "0123456789") == strlen(q + 1))
        return pid;
    return *q == '\0' ? pid : 0;
}

bool dr_pid_gone(long pid)
{
    return pid > 0 && pid <= INT32_MAX && kill((pid_t)pid, 0) == -1 && errno == ESRCH;
}

/* ---- dr_read_file ------------------------------------------------------- */

static int too_big(const char *path, size_t max_bytes, dr_err *err)
{
    return dr_fail(err, DR_EFORMAT, "%s: file is larger than the limit of %zu bytes",
                   path, max_bytes);
}

/* Reads until EOF into a buffer that grows, never past limit + 1 bytes of
 * content (the one extra byte proves the file is too big). */
static int read_all(int fd, const char *path, size_t size_hint, size_t limit,
                    uint8_t **data, size_t *n, dr_err *err)
{
    size_t cap = (size_hint < limit ? size_hint : limit) + 2;   /* +1 probe, +1 NUL */
    uint8_t *buf = malloc(cap);
    size_t len = 0;
    for (;;) {
        if (buf == NULL)
            return dr_fail(err, DR_ENOMEM, "%s: out of memory reading %zu bytes", path, cap);
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int saved = errno;
            free(buf);
            return dr_fail(err, DR_EIO, "%s: cannot read: %s", path, strerror(saved));
        }
        len += (size_t)r;
        if (len > limit) {
            free(buf);
            return too_big(path, limit, err);
        }
        if (r == 0)
            break;
        if (len == cap - 1) {           /* full (the file grew, or no hint): double */
            size_t content = cap - 2 > limit / 2 ? limit : 2 * (cap - 2);
            if (content < 4096 && limit >= 4096)
                content = 4096;         /* /proc-style files report size 0 */
            if (content < len)
                content = limit;        /* tiny limits: len <= limit here */
            uint8_t *bigger = realloc(buf, content + 2);
            if (bigger == NULL)
                free(buf);
            buf = bigger;
            cap = content + 2;
        }
    }
    buf[len] = '\0';
    *data = buf;
    *n = len;
    return DR_OK;
}

/* What st is, for a message: "a FIFO", "a character device", ... */
static const char *kind_of(const struct stat *st)
{
    if (S_ISDIR(st->st_mode)) return "a directory";
    if (S_ISFIFO(st->st_mode)) return "a FIFO";
    if (S_ISCHR(st->st_mode)) return "a character device";
    if (S_ISBLK(st->st_mode)) return "a block device";
    if (S_ISSOCK(st->st_mode)) return "a socket";
    if (S_ISLNK(st->st_mode)) return "a symbolic link";
    return "not a regular file";
}

/* Reads the open fd (closing it); regular: anything else is refused. */
static int read_opened(int fd, const char *path, size_t max_bytes, bool regular, uint8_t **data, size_t *n,
                       dr_err *err)
{
    size_t limit = max_bytes > SIZE_MAX - 2 ? SIZE_MAX - 2 : max_bytes;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int saved = errno;
        close(fd);
        return dr_fail(err, DR_EIO, "%s: cannot stat: %s", path, strerror(saved));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return dr_fail(err, DR_EIO, "%s: is a directory, expected a file", path);
    }
    if (regular && !S_ISREG(st.st_mode)) {
        close(fd);
        return dr_fail(err, DR_EFORMAT, "%s: not a regular file (it is %s); expected a file distref wrote",
                       path, kind_of(&st));
    }
    /* Regular files tell their size up front: refuse without reading. */
    if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > (uintmax_t)limit) {
        close(fd);
        return dr_fail(err, DR_EFORMAT, "%s: file has %jd bytes, more than the limit of %zu",
                       path, (intmax_t)st.st_size, limit);
    }
    size_t hint = S_ISREG(st.st_mode) ? (size_t)st.st_size : 4096;
    int rc = read_all(fd, path, hint, limit, data, n, err);
    close(fd);
    return rc;
}

int dr_read_file(const char *path, size_t max_bytes, uint8_t **data, size_t *n, dr_err *err)
{
    *data = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return dr_fail(err, DR_EIO, "%s: cannot open: %s", path, strerror(errno));
    return read_opened(fd, path, max_bytes, false, data, n, err);
}

int dr_read_regular(const char *path, size_t max_bytes, uint8_t **data, size_t *n, dr_err *err)
{
    *data = NULL;
    *n = 0;
    /* O_NONBLOCK: a FIFO opens at once (and is refused) instead of waiting
     * for a writer; a regular file reads the same either way. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0 && errno == ELOOP)
        return dr_fail(err, DR_EFORMAT, "%s: not a regular file (it is a symbolic link); distref does not "
                       "follow links in its own files: remove it or use another directory", path);
    if (fd < 0)
        return dr_fail(err, DR_EIO, "%s: cannot open: %s", path, strerror(errno));
    return read_opened(fd, path, max_bytes, true, data, n, err);
}

/* ---- dr_mkdirs ---------------------------------------------------------- */

/* mkdir one level; an existing directory is success. */
static int make_one_dir(const char *dir, const char *path, dr_err *err)
{
    if (mkdir(dir, 0755) == 0)
        return DR_OK;
    int saved = errno;
    struct stat st;
    if (saved == EEXIST && stat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return DR_OK;
        return dr_fail(err, DR_EIO, "mkdir -p %s: %s exists and is not a directory", path, dir);
    }
    return dr_fail(err, DR_EIO, "mkdir -p %s: cannot create %s: %s", path, dir, strerror(saved));
}

int dr_mkdirs(const char *path, dr_err *err)
{
    if (path == NULL || path[0] == '\0')
        return dr_fail(err, DR_EUSAGE, "mkdir -p: empty path, expected a directory name");
    char *dir = malloc(strlen(path) + 1);
    if (dir == NULL)
        return dr_fail(err, DR_ENOMEM, "mkdir -p %s: out of memory", path);
    strcpy(dir, path);
    int rc = DR_OK;
    /* Create each prefix that ends before a '/', then the whole path.
     * The leading '/' of an absolute path is not a component. */
    for (char *p = dir + 1; *p != '\0' && rc == DR_OK; p++) {
        if (*p != '/' || p[-1] == '/')
            continue;
        *p = '\0';
        rc = make_one_dir(dir, path, err);
        *p = '/';
    }
    if (rc == DR_OK)
        rc = make_one_dir(dir, path, err);
    free(dir);
    return rc;
}

/* ---- little-endian helpers ---------------------------------------------- */

void dr_put_u32le(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void dr_put_u64le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t dr_get_u32le(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

uint64_t dr_get_u64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
