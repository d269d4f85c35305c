/* distref — a sealed blob: bytes a program caches and reads back, checked
 * before use (core/sealed.c). The OpenCL kernel cache stores its program
 * binaries this way (devices/opencl/opencl_program.c): a truncated, corrupt or
 * foreign file is refused here instead of reaching the driver's binary
 * loader, and the caller rebuilds and rewrites it.
 *
 * Layout (DR_SEALED_HEADER = 80 bytes, then the payload):
 *
 *     0   8  magic "DRSEAL01"
 *     8   8  payload length, u64 little-endian
 *    16  32  SHA-256 of the payload
 *    48  32  the key: SHA-256 of what the payload was made from (the
 *            caller's: for the kernel cache, the sources, build options and
 *            device); a file copied under another key's name is refused
 *
 * The hash guards against damage, not against someone who can write the
 * file (they can recompute it): a cache must live where only its owner
 * writes.
 */
#ifndef DISTREF_SEALED_H
#define DISTREF_SEALED_H

#include <stddef.h>
#include <stdint.h>
#include "distref/error.h"

#define DR_SEALED_HEADER 80

/* The file for payload[0..n): malloc'd into *out (*out_n bytes). */
int dr_sealed_make(const uint8_t key[32], const void *payload, size_t n, uint8_t **out, size_t *out_n,
                   dr_err *err);

/* Checks file[0..n) against key; on DR_OK *payload points into file and
 * *payload_n is its length. DR_EFORMAT naming what is wrong: too short for
 * the header, the magic, a length that disagrees with the file's size, the
 * payload's hash, the key. */
int dr_sealed_open(const uint8_t *file, size_t n, const uint8_t key[32], const uint8_t **payload,
                   size_t *payload_n, dr_err *err);

#endif
