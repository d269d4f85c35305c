/* distref fuzzing — a Fashion-MNIST directory (core/data.c over core/idx.c).
 *
 * Feeds: input = u32 little-endian L | L bytes of images file | labels file
 * (L without its top bit, clamped to what is there). The two parts are
 * written as they are to <scratch>/train-images-idx3-ubyte.gz and
 * train-labels-idx1-ubyte.gz (gzip or plain), or, when L's top bit is set,
 * to the unpacked names train-images-idx3-ubyte and train-labels-idx1-ubyte
 * (the other pair removed), and dr_dataset_fashion_mnist loads the
 * directory: both IDX files, 28x28 images, at least one, equal counts,
 * labels < 10.
 * Checks: no crash, UB or leak; any error return is fine. On success, that
 * every example can be gathered (dr_dataset_gather reads n * 784 pixels and
 * n labels: ASan checks the buffers match what the dataset says).
 */
#include "distref/data.h"
#include "fuzz/fuzz_common.h"

static volatile uint32_t sink;     /* volatile: the reads below must happen */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fz_dir("fashion_mnist");
    dr_err err = { 0, "" };
    if (dir == NULL || size < 4)
        return 0;
    size_t len = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 |
                 (size_t)(data[3] & 0x7f) << 24;
    int unpacked = (data[3] & 0x80) != 0;
    data += 4;
    size -= 4;
    if (len > size)
        len = size;
    static const char *const names[2][2] = {
        { "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz" },
        { "train-images-idx3-ubyte", "train-labels-idx1-ubyte" },
    };
    char stale[512];
    for (int i = 0; i < 2; i++) {       /* only one pair in the directory */
        snprintf(stale, sizeof stale, "%s/%s", dir, names[!unpacked][i]);
        unlink(stale);
    }
    if (fz_write(dir, names[unpacked][0], data, len) != 0 ||
        fz_write(dir, names[unpacked][1], data + len, size - len) != 0)
        return 0;
    dr_dataset ds;
    if (dr_dataset_fashion_mnist(dir, 0, &ds, &err) != DR_OK) {
        if (ds.pixels != NULL || ds.labels != NULL)
            __builtin_trap();                   /* nothing is kept on error */
        return 0;
    }
    if (ds.n == 0 || ds.features != 784 || ds.classes != 10)
        __builtin_trap();
    uint32_t ids[2] = { 0, ds.n - 1 };
    float x[2 * 784];
    uint8_t labels[2];
    dr_dataset_gather(&ds, ids, 2, x, labels, NULL);
    for (uint32_t i = 0; i < 2; i++)
        if (labels[i] >= 10)
            __builtin_trap();
    for (size_t i = 0; i < (size_t)ds.n * ds.features; i++)
        sink += ds.pixels[i];        /* every pixel is readable */
    dr_dataset_free(&ds);
    return 0;
}
