/* distref fuzzing — IDX files, plain or gzip (core/idx.c).
 *
 * Feeds: the input, written as it is to a scratch file (the loader inflates
 * a file that starts with the gzip magic and reads anything else as plain
 * IDX, so one corpus covers both), to dr_idx_load with every rank the loader
 * accepts (1..4) and the two it refuses (0, 5), and to dr_idx_load_dims
 * with Fashion-MNIST's 28x28 images.
 * Checks: no crash, UB or leak; any error return is fine. On success, that
 * the result is what idx.h promises: count is the product of the dims, the
 * whole buffer is readable (ASan checks the read), and rank is as asked.
 */
#include "distref/idx.h"
#include "fuzz/fuzz_common.h"

static volatile uint32_t sink;     /* volatile: the reads below must happen */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fz_dir("idx");
    char path[512];
    dr_err err = { 0, "" };
    if (dir == NULL || fz_write(dir, "in.idx", data, size) != 0)
        return 0;
    snprintf(path, sizeof path, "%s/in.idx", dir);
    for (uint32_t ndim = 0; ndim <= 5; ndim++) {
        dr_idx idx;
        if (dr_idx_load(path, ndim, &idx, &err) != DR_OK) {
            if (idx.data != NULL)
                __builtin_trap();               /* freed on error */
            continue;
        }
        size_t count = 1;
        for (uint32_t d = 0; d < idx.ndim; d++)
            count *= idx.dims[d];
        if (idx.ndim != ndim || count != idx.count || idx.data == NULL)
            __builtin_trap();
        for (size_t i = 0; i < idx.count; i++)
            sink += idx.data[i];
        dr_idx_free(&idx);
    }
    const uint32_t side[2] = { 28, 28 };
    dr_idx idx;
    if (dr_idx_load_dims(path, 3, side, &idx, &err) == DR_OK) {
        if (idx.ndim != 3 || idx.dims[1] != 28 || idx.dims[2] != 28 ||
            idx.count != (size_t)idx.dims[0] * 784 || idx.data == NULL)
            __builtin_trap();
        for (size_t i = 0; i < idx.count; i++)
            sink += idx.data[i];
        dr_idx_free(&idx);
    } else if (idx.data != NULL) {
        __builtin_trap();
    }
    return 0;
}
