/* shim/image.h: how much static device memory a module image declares.
 *
 * A loaded module takes device memory for its __device__ data (".global"
 * in PTX, the .nv.global and .nv.global.init sections of a cubin) for as
 * long as it is loaded: a kernel file can ask for gigabytes without one
 * allocation call. These functions read an image the driver has already
 * accepted and add those sizes up; they never read past the sizes the
 * image itself gives (ELF section headers, fatbin entry sizes, `len`).
 *
 * Images: an ELF cubin, a fatbin, the runtime's fatbin wrapper, and PTX
 * text. Of a fatbin's entries only those the driver would load on the
 * device's architecture count: the newest cubin of the device's major
 * version no newer than the device (sm_80 runs on an 8.6 device), else
 * the newest PTX no newer than it; the largest of that architecture's
 * entries counts. Where none fits, nothing counts (the driver runs none
 * of it here). Where the architecture is not known (0), the largest of all
 * entries counts (compressed PTX read only where no ELF entry could be). A compressed entry (nvcc 13: zstd frames, or one
 * LZ4 block with --compress-mode=speed; unpack.h) is unpacked into a
 * buffer of the size it declares, up to 1 GiB, and read as a plain one;
 * one that does not unpack to exactly that size, declares more, or is
 * marked with both compressions counts 0 and sets *out_unknown (the
 * daemon's backstop sees what it takes). Unpacking allocates the entry's
 * unpacked size (and 140 KiB for zstd) and costs the time of unpacking
 * the chosen entries: one architecture's, not every one's. That can still
 * be much (the sm_90 entries of CUDA 13's cuBLASLt unpack to 360 MiB, 2 to
 * 4 s on the build machine; `zstd -d` takes 0.5 s), so the caller may
 * give a budget: an entry larger than what is left of it is not unpacked
 * (it counts 0, and *out_unknown is left as it is: a budget spent is the
 * caller's choice, not a damaged image), and what is unpacked is taken off. */
#ifndef TESSERA_SHIM_IMAGE_H
#define TESSERA_SHIM_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The static bytes of the image at `image`, `len` bytes long (SIZE_MAX:
 * the length is not known; the image's own headers bound every read), on
 * a device of compute capability `arch` (major * 10 + minor: 90 for an
 * H100; 0: not known), unpacking at most *unpack_budget bytes (NULL: no
 * bound). Saturates at UINT64_MAX. */
uint64_t tsr_shim_image_static_bytes(const void *image, size_t len, unsigned arch, uint64_t *unpack_budget,
                                     bool *out_unknown);

#endif
