/* distref — whole-file I/O: see include/distref/fileio.h. */
#include "distref/fileio.h"

#include <errno.h>
#include <fcntl.h>
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

/* The rename is only durable once the directory entry is on disk. EINVAL
 * means this file system cannot sync directories (POSIX allows that); there
 * is nothing more to do then, so it is not an error. */
static int fsync_dir(const char *path, dr_err *err)
{
    char *dir = containing_dir(path);
    if (dir == NULL)
        return dr_fail(err, DR_ENOMEM, "%s: out of memory naming its directory", path);
    int fd = open(dir, O_RDONLY);
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL)) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        dr_fail(err, DR_EIO, "%s: cannot sync directory %s after rename: %s",
                path, dir, strerror(saved));
        free(dir);
        return DR_EIO;
    }
    close(fd);
    free(dir);
    return DR_OK;
}

/* Creates, fills, syncs and closes tmp; on failure the caller removes it. */
static int write_temp(const char *path, const char *tmp, const void *data, size_t n,
                      dr_err *err)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return dr_fail(err, DR_EIO, "%s: cannot create temp file %s: %s",
                       path, tmp, strerror(errno));
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

int dr_write_atomic(const char *path, const void *data, size_t n, dr_err *err)
{
    size_t tmp_size = strlen(path) + 32;   /* ".tmp." + a pid + NUL */
    char *tmp = malloc(tmp_size);
    if (tmp == NULL)
        return dr_fail(err, DR_ENOMEM, "%s: out of memory naming the temp file", path);
    snprintf(tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid());

    int rc = write_temp(path, tmp, data, n, err);
    if (rc == DR_OK && rename(tmp, path) != 0)
        rc = dr_fail(err, DR_EIO, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
    if (rc != DR_OK) {
        unlink(tmp);            /* may not exist if open failed: that is fine */
        free(tmp);
        return rc;
    }
    free(tmp);
    return fsync_dir(path, err);
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

int dr_read_file(const char *path, size_t max_bytes, uint8_t **data, size_t *n, dr_err *err)
{
    *data = NULL;
    *n = 0;
    size_t limit = max_bytes > SIZE_MAX - 2 ? SIZE_MAX - 2 : max_bytes;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return dr_fail(err, DR_EIO, "%s: cannot open: %s", path, strerror(errno));
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
