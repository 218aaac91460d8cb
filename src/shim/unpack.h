/* unpack.h: the decoders for the fatbin entries nvcc compresses, and the
 * little-endian reads the image parser shares with them.
 *
 * nvcc 13 compresses a fatbin entry as one LZ4 block (--compress-mode=speed,
 * entry flag 0x2000) or as zstd frames (its default, and size and balance;
 * flag 0x8000). Both decoders were written from the formats (the LZ4 block
 * format; RFC 8878 for zstd, without dictionaries) and are pure: no driver,
 * no globals. Each unpacks in[0..n) into out[0..cap), sets *out_len to what
 * it wrote, and returns false on anything it cannot read (a damaged stream,
 * output past cap, a dictionary), never reading past in[n) nor writing past
 * out[cap). zstd allocates its work area (about 140 KiB) with malloc and
 * frees it before returning; LZ4 allocates nothing. */
#ifndef TESSERA_SHIM_UNPACK_H
#define TESSERA_SHIM_UNPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

bool tsr_unpack_lz4_block(const unsigned char *in, size_t n, unsigned char *out, size_t cap, size_t *out_len);
bool tsr_unpack_zstd(const unsigned char *in, size_t n, unsigned char *out, size_t cap, size_t *out_len);

/* Little-endian reads of unaligned bytes (every target we build for is
 * little-endian, as is every format read here). */
static inline uint16_t tsr_le16(const unsigned char *p) {
  uint16_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}
static inline uint32_t tsr_le32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}
static inline uint64_t tsr_le64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

#endif
