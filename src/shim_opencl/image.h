/* shim_opencl/image.h: the bytes an image takes. */
#ifndef TESSERA_SHIM_OPENCL_IMAGE_H
#define TESSERA_SHIM_OPENCL_IMAGE_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS /* the shim hooks them too */
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdint.h>

/* The bytes an image of `format` and `desc` takes (UINT64_MAX when that
 * overflows), or 0 when it takes none of its own or the shim cannot tell
 * (an unknown format or type, a NULL argument, a zero size: the
 * implementation judges those). An image made over a buffer or another
 * image (desc->mem_object) takes none of its own: *out_parent is that
 * object, whose memory it keeps alive. */
uint64_t tsr_ocl_image_bytes(const cl_image_format *format, const cl_image_desc *desc, cl_mem *out_parent);

#endif
