/* distref core — sealed blobs: see include/distref/sealed.h. */
#include "distref/sealed.h"
#include "distref/fileio.h"
#include "distref/sha256.h"

#include <stdlib.h>
#include <string.h>

static const char MAGIC[8] = { 'D', 'R', 'S', 'E', 'A', 'L', '0', '1' };

int dr_sealed_make(const uint8_t key[32], const void *payload, size_t n, uint8_t **out, size_t *out_n,
                   dr_err *err)
{
    uint8_t *f;
    *out = NULL;
    *out_n = 0;
    if (n > SIZE_MAX - DR_SEALED_HEADER || !(f = malloc(DR_SEALED_HEADER + n)))
        return dr_fail(err, DR_ENOMEM, "sealed blob: out of memory for %zu bytes", n);
    memcpy(f, MAGIC, 8);
    dr_put_u64le(f + 8, (uint64_t)n);
    {
        dr_sha256_ctx c;
        dr_sha256_init(&c);
        dr_sha256_update(&c, payload, n);
        dr_sha256_final(&c, f + 16);
    }
    memcpy(f + 48, key, 32);
    if (n) memcpy(f + DR_SEALED_HEADER, payload, n);
    *out = f;
    *out_n = DR_SEALED_HEADER + n;
    return DR_OK;
}

int dr_sealed_open(const uint8_t *file, size_t n, const uint8_t key[32], const uint8_t **payload,
                   size_t *payload_n, dr_err *err)
{
    uint8_t digest[32];
    dr_sha256_ctx c;
    uint64_t len;
    *payload = NULL;
    *payload_n = 0;
    if (n < DR_SEALED_HEADER)
        return dr_fail(err, DR_EFORMAT, "%zu bytes, shorter than the %d-byte header", n, DR_SEALED_HEADER);
    if (memcmp(file, MAGIC, 8) != 0)
        return dr_fail(err, DR_EFORMAT, "bytes 0..7 are not the magic \"DRSEAL01\"");
    len = dr_get_u64le(file + 8);
    if (len != (uint64_t)(n - DR_SEALED_HEADER))
        return dr_fail(err, DR_EFORMAT, "the header says %llu bytes of payload, the file has %zu (truncated or "
                       "extended)", (unsigned long long)len, n - DR_SEALED_HEADER);
    if (memcmp(file + 48, key, 32) != 0)
        return dr_fail(err, DR_EFORMAT, "made for another key (bytes 48..79)");
    dr_sha256_init(&c);
    dr_sha256_update(&c, file + DR_SEALED_HEADER, (size_t)len);
    dr_sha256_final(&c, digest);
    if (memcmp(digest, file + 16, 32) != 0)
        return dr_fail(err, DR_EFORMAT, "the payload's SHA-256 is not the header's (bytes 16..47): damaged");
    *payload = file + DR_SEALED_HEADER;
    *payload_n = (size_t)len;
    return DR_OK;
}
