/* fuzz_image.c: libFuzzer target for the shim's image reader (shim/image.c)
 * and the decoders of compressed fatbin entries (shim/unpack_*.c): a tenant
 * process runs them on every module image it loads, and they must never
 * crash it or read or write past a bound (ASan, UBSan). The first byte
 * picks what reads the rest:
 *   0  tsr_shim_image_static_bytes, architecture unknown (0), then 90
 *   1  tsr_unpack_zstd into a 256 KiB buffer
 *   2  tsr_unpack_lz4_block into a 256 KiB buffer
 *   3  tsr_shim_image_static_bytes on the architecture the second byte gives
 * An image that starts as the runtime's fatbin wrapper is skipped: it holds
 * a pointer, which only the process that made it can give.
 * Beyond the sanitizers: a decoder never says it wrote more than it could,
 * and the image reader answers the same twice (it keeps no state).
 * The seeds (corpus/) are nvcc 13 images (tests/unit/shim/images) and
 * their entries' compressed payloads, each after its mode byte. Built and
 * run by run.sh (registered with ctest as fuzz.image). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "shim/image.h"
#include "shim/unpack.h"

#include "../check.h"

enum { OUT_CAP = 256 << 10 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  unsigned mode = data[0] & 3u;
  const unsigned char *in = data + 1;
  size_t n = size - 1;
  static unsigned char out[OUT_CAP];
  size_t got = SIZE_MAX;
  bool unknown = false, again_unknown = false;
  if ((mode == 0 && n >= 4 && tsr_le32(in) == 0x466243B1u) || (mode == 3 && n >= 5 && tsr_le32(in + 1) == 0x466243B1u))
    return 0; /* a wrapper: a pointer, not bytes (image.h) */
  switch (mode) {
    case 0:
      for (unsigned arch = 0; arch <= 90; arch += 90) {
        uint64_t a = tsr_shim_image_static_bytes(in, n, arch, NULL, &unknown);
        uint64_t b = tsr_shim_image_static_bytes(in, n, arch, NULL, &again_unknown);
        FUZZ_CHECK(a == b && unknown == again_unknown);
      }
      break;
    case 1:
      if (tsr_unpack_zstd(in, n, out, OUT_CAP, &got)) FUZZ_CHECK(got <= OUT_CAP);
      break;
    case 2:
      if (tsr_unpack_lz4_block(in, n, out, OUT_CAP, &got)) FUZZ_CHECK(got <= OUT_CAP);
      break;
    default:
      if (n < 1) return 0;
      {
        uint64_t budget = (uint64_t)in[0] << 8; /* a small budget: entries past it are not unpacked */
        (void)tsr_shim_image_static_bytes(in + 1, n - 1, in[0], &budget, &unknown);
      }
      break;
  }
  return 0;
}
