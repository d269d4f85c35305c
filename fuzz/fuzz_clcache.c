/* distref fuzzing — the OpenCL kernel cache's file header (core/sealed.c,
 * read by devices/opencl/opencl_program.c before the driver sees the binary).
 *
 * Feeds: the input as a cache file, checked against a key: half the time
 * the key the file itself carries (bytes 48..79, so inputs get past the key
 * check to the length and hash), else a fixed one; the same bytes read
 * back from <scratch>/k.bin with dr_read_regular, as the cache is; and the
 * input as a payload, sealed and opened again.
 * Checks: no crash, UB or leak; any error return is fine. An accepted file
 * has its payload inside the input, right after the header, to the input's
 * end, and sealing that payload under the key gives the input back byte
 * for byte; any input sealed as a payload opens to itself.
 */
#include "distref/fileio.h"
#include "distref/sealed.h"
#include "fuzz/fuzz_common.h"

static void check_open(const uint8_t *data, size_t size, const uint8_t key[32])
{
    const uint8_t *payload;
    size_t n;
    uint8_t *again = NULL;
    size_t m = 0;
    dr_err err = { 0, "" };
    if (dr_sealed_open(data, size, key, &payload, &n, &err) != DR_OK) {
        if (payload != NULL || n != 0) __builtin_trap();
        return;
    }
    if (payload != data + DR_SEALED_HEADER || n != size - DR_SEALED_HEADER) __builtin_trap();
    if (dr_sealed_make(key, payload, n, &again, &m, &err) != DR_OK || m != size || memcmp(again, data, size) != 0)
        __builtin_trap();
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t fixed[32] = { 1, 2, 3 };
    uint8_t key[32];
    const char *dir = fz_dir("clcache");
    if (size >= DR_SEALED_HEADER && (data[size - 1] & 1)) memcpy(key, data + 48, 32);
    else memcpy(key, fixed, 32);
    check_open(data, size, key);
    if (dir != NULL && fz_write(dir, "k.bin", data, size) == 0) {
        char path[512];
        uint8_t *file = NULL;
        size_t n = 0;
        dr_err err = { 0, "" };
        snprintf(path, sizeof path, "%s/k.bin", dir);
        if (dr_read_regular(path, (size_t)1 << 20, &file, &n, &err) == DR_OK) {
            if (n != size || (n && memcmp(file, data, n) != 0)) __builtin_trap();
            check_open(file, n, key);
        }
        free(file);
    }
    {   /* the input as a payload */
        uint8_t *sealed = NULL;
        const uint8_t *payload;
        size_t m = 0, n = 0;
        dr_err err = { 0, "" };
        if (dr_sealed_make(key, data, size, &sealed, &m, &err) != DR_OK ||
            dr_sealed_open(sealed, m, key, &payload, &n, &err) != DR_OK || n != size ||
            (size && memcmp(payload, data, size) != 0))
            __builtin_trap();
        free(sealed);
    }
    return 0;
}
