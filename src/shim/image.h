/* shim/image.h: how much static device memory a module image declares.
 *
 * A loaded module takes device memory for its __device__ data (".global"
 * in PTX, the .nv.global and .nv.global.init sections of a cubin) for as
 * long as it is loaded: a kernel file can ask for gigabytes without one
 * allocation call. These functions read an image the driver has already
 * accepted and add those sizes up; they never read past the sizes the
 * image itself gives (ELF section headers, fatbin entry sizes, `len`).
 *
 * Images: an ELF cubin, a fatbin (its ELF and PTX entries; the largest
 * entry counts, as the driver loads one), the runtime's fatbin wrapper,
 * and PTX text. A compressed fatbin entry (nvcc 13: zstd frames, or one
 * LZ4 block with --compress-mode=speed) is unpacked into a buffer of the
 * size it declares, up to 1 GiB, and read as a plain one; one that does
 * not unpack to exactly that size, declares more, or is marked with both
 * compressions counts 0 and sets *out_unknown (the daemon's backstop sees
 * what it takes). Compressed PTX (nvcc's default for PTX) is unpacked
 * only where no ELF entry could be read. Unpacking allocates (the entry's
 * unpacked size, and 140 KiB for zstd) and takes the time of unpacking
 * each such entry, every architecture's (zstd several times LZ4's). */
#ifndef TESSERA_SHIM_IMAGE_H
#define TESSERA_SHIM_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The static bytes of the image at `image`, `len` bytes long (SIZE_MAX:
 * the length is not known; the image's own headers bound every read).
 * Saturates at UINT64_MAX. */
uint64_t tsr_shim_image_static_bytes(const void *image, size_t len, bool *out_unknown);

#endif
