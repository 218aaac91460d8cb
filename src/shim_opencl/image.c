/* image.c: the bytes an image takes, from its format and description. */
#include "shim_opencl/image.h"

/* Bytes of one pixel; 0 for a format the shim does not know. */
static uint64_t tsr__pixel_bytes(const cl_image_format *f) {
  switch (f->image_channel_data_type) { /* the packed types give a whole pixel */
    case CL_UNORM_SHORT_565:
    case CL_UNORM_SHORT_555: return 2;
    case CL_UNORM_INT_101010:
    case CL_UNORM_INT_101010_2:
    case CL_UNORM_INT24: return 4;
    default: break;
  }
  uint64_t channel;
  switch (f->image_channel_data_type) {
    case CL_SNORM_INT8:
    case CL_UNORM_INT8:
    case CL_SIGNED_INT8:
    case CL_UNSIGNED_INT8: channel = 1; break;
    case CL_SNORM_INT16:
    case CL_UNORM_INT16:
    case CL_SIGNED_INT16:
    case CL_UNSIGNED_INT16:
    case CL_HALF_FLOAT: channel = 2; break;
    case CL_SIGNED_INT32:
    case CL_UNSIGNED_INT32:
    case CL_FLOAT: channel = 4; break;
    default: return 0;
  }
  switch (f->image_channel_order) {
    case CL_R:
    case CL_A:
    case CL_INTENSITY:
    case CL_LUMINANCE:
    case CL_DEPTH: return channel;
    case CL_RG:
    case CL_RA:
    case CL_Rx: return 2 * channel;
    case CL_RGB:
    case CL_RGx:
    case CL_sRGB: return 3 * channel;
    case CL_RGBA:
    case CL_BGRA:
    case CL_ARGB:
    case CL_ABGR:
    case CL_RGBx:
    case CL_sRGBA:
    case CL_sBGRA:
    case CL_sRGBx: return 4 * channel;
    default: return 0;
  }
}

/* a * b, or UINT64_MAX when it overflows */
static uint64_t tsr__mul(uint64_t a, uint64_t b) {
  if (a && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

uint64_t tsr_ocl_image_bytes(const cl_image_format *format, const cl_image_desc *desc, cl_mem *out_parent) {
  *out_parent = NULL;
  if (!format || !desc) return 0;
  uint64_t pixel = tsr__pixel_bytes(format);
  if (!pixel) return 0;
  uint64_t w = desc->image_width, h = desc->image_height, d = desc->image_depth, layers = desc->image_array_size,
           pixels;
  switch (desc->image_type) {
    case CL_MEM_OBJECT_IMAGE1D: pixels = w; break;
    case CL_MEM_OBJECT_IMAGE1D_BUFFER: pixels = w; break;
    case CL_MEM_OBJECT_IMAGE1D_ARRAY: pixels = tsr__mul(w, layers); break;
    case CL_MEM_OBJECT_IMAGE2D: pixels = tsr__mul(w, h); break;
    case CL_MEM_OBJECT_IMAGE2D_ARRAY: pixels = tsr__mul(tsr__mul(w, h), layers); break;
    case CL_MEM_OBJECT_IMAGE3D: pixels = tsr__mul(tsr__mul(w, h), d); break;
    default: return 0;
  }
  if (desc->mem_object &&
      (desc->image_type == CL_MEM_OBJECT_IMAGE1D_BUFFER || desc->image_type == CL_MEM_OBJECT_IMAGE2D)) {
    *out_parent = desc->mem_object; /* over a buffer (or an image): its memory */
    return 0;
  }
  return pixels ? tsr__mul(pixels, pixel) : 0;
}
