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
 * and PTX text. A compressed fatbin entry cannot be read here: it counts
 * 0 and *out_unknown is set (the daemon's backstop sees what it takes). */
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
