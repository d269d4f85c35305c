/* distref fuzzing — helpers shared by the libFuzzer targets in fuzz/.
 *
 * The loaders under test read files, so the targets write each input to a
 * scratch directory of their own, $TMPDIR/distref-fuzz-<target>-<pid> ($TMPDIR
 * defaults to /tmp; scripts/fuzz.sh points it at /dev/shm when there is one,
 * so the loaders' fsyncs cost nothing), made on the first call and reused
 * (removed at exit). Nothing here exits or aborts:
 * a failure to set up the scratch directory just skips the input.
 */
#ifndef DISTREF_FUZZ_COMMON_H
#define DISTREF_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The scratch directory; NULL when it cannot be made. */
static char fz_dir_buf[256];
static const char *fz_files[8];     /* names removed at exit */
static int fz_nfiles;

static inline void fz_cleanup(void)
{
    char path[512];
    for (int i = 0; i < fz_nfiles; i++) {
        snprintf(path, sizeof path, "%s/%s", fz_dir_buf, fz_files[i]);
        unlink(path);
    }
    if (fz_dir_buf[0] != '\0')
        rmdir(fz_dir_buf);
}

static inline const char *fz_dir(const char *target)
{
    if (fz_dir_buf[0] != '\0')
        return fz_dir_buf;
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] == '\0' || strlen(tmp) > 160)
        tmp = "/tmp";
    snprintf(fz_dir_buf, sizeof fz_dir_buf, "%s/distref-fuzz-%s-%ld", tmp, target, (long)getpid());
    if (mkdir(fz_dir_buf, 0700) != 0) {
        struct stat st;
        if (stat(fz_dir_buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fz_dir_buf[0] = '\0';
            return NULL;
        }
    }
    atexit(fz_cleanup);
    return fz_dir_buf;
}

/* Writes data to dir/name (replacing it); 0 on success. name must be a
 * string literal: it is remembered for the clean-up at exit. */
static inline int fz_write(const char *dir, const char *name, const uint8_t *data, size_t n)
{
    char path[512];
    int known = 0;
    for (int i = 0; i < fz_nfiles; i++)
        known |= strcmp(fz_files[i], name) == 0;
    if (!known && fz_nfiles < (int)(sizeof fz_files / sizeof fz_files[0]))
        fz_files[fz_nfiles++] = name;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t w = n > 0 ? fwrite(data, 1, n, f) : 0;
    int rc = fclose(f);
    return w == n && rc == 0 ? 0 : -1;
}

/* A NUL-terminated copy of data (malloc'd; the caller frees it). */
static inline char *fz_cstr(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (s != NULL) {
        if (n > 0)
            memcpy(s, data, n);
        s[n] = '\0';
    }
    return s;
}

#endif
