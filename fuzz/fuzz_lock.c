/* distref fuzzing — a model_dir's lock file (core/lock.c), text anyone who
 * can write the directory can plant.
 *
 * Feeds: the input to dr_lock_parse; then as <scratch>/.lock, which
 * dr_lock_check_holder reads (as a non-chief MPI rank does) and which
 * dr_model_dir_lock takes over (reading the old text for its note, writing
 * its own) and dr_model_dir_unlock clears.
 * Checks: no crash, UB or leak; any error return is fine. A parsed lock has
 * pid > 0 and printable, NUL-terminated host and command, and formats back
 * to exactly the input (the format is canonical); after the takeover the
 * file parses and names this process; after unlock it is empty.
 */
#include "distref/fileio.h"
#include "distref/lock.h"
#include "fuzz/fuzz_common.h"

static void check_info(const dr_lock_info *in)
{
    if (in->pid <= 0 || !memchr(in->host, 0, sizeof in->host) || !memchr(in->command, 0, sizeof in->command))
        __builtin_trap();
    for (const char *p = in->host; *p; p++) if ((unsigned char)*p < 0x20) __builtin_trap();
    for (const char *p = in->command; *p; p++) if ((unsigned char)*p < 0x20) __builtin_trap();
}

static size_t file_size(const char *dir)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, DR_LOCK_FILE);
    return stat(path, &st) == 0 ? (size_t)st.st_size : (size_t)-1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char text[DR_LOCK_MAX_BYTES + 64];
    const char *dir = fz_dir("lock");
    dr_lock_info info;
    dr_dir_lock lk;
    dr_err err = { 0, "" };
    if (dr_lock_parse(data, size, &info, &err) == DR_OK) {
        check_info(&info);
        size_t n = dr_lock_format(&info, text, sizeof text);
        if (n != size || memcmp(text, data, size) != 0) __builtin_trap();
        (void)dr_lock_check_holder("/nonexistent-distref-dir", info.pid, info.host, &err);
    }
    if (dir == NULL || fz_write(dir, DR_LOCK_FILE, data, size) != 0) return 0;
    (void)dr_lock_check_holder(dir, (long)getpid(), "fuzz", &err);
    if (dr_model_dir_lock(dir, false, &lk, &err) == DR_OK) {
        if (lk.took_over) check_info(&lk.stale);
        uint8_t *now = NULL;
        size_t n = 0;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, DR_LOCK_FILE);
        if (dr_read_file(path, DR_LOCK_MAX_BYTES, &now, &n, &err) != DR_OK ||
            dr_lock_parse(now, n, &info, &err) != DR_OK || info.pid != (long)getpid())
            __builtin_trap();
        free(now);
        dr_model_dir_unlock(&lk);
        if (file_size(dir) != 0) __builtin_trap();
    }
    return 0;
}
