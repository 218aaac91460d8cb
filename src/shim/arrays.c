/* arrays.c: CUDA arrays and mipmapped arrays (textures and surfaces),
 * which take device memory the allocation calls never see.
 *
 * An array is charged width x height x depth x element size x channels (a
 * zero height or depth counts as 1; layered and cube arrays count their
 * layers in depth), a mipmapped array the sum over its levels with each
 * dimension halved per level and never below 1; both rounded up to the
 * 2 MiB granule. That is what the H100 took (256 MiB for 4096 x 4096
 * float4; 342 MiB for the 13 levels of it). Formats the shim does not know
 * are charged 16 bytes per element, more than any format takes. The charge
 * is made before the driver is asked and given back by cuArrayDestroy or
 * cuMipmappedArrayDestroy. */
#include "shim/shim.h"

#define TSR_EXPORT __attribute__((visibility("default")))

/* Bytes per channel of CUarray_format, or 0 for formats whose element
 * holds every channel (the NumChannels multiplier is then not applied). */
static uint64_t tsr__channel_bytes(int format, uint64_t *out_element) {
  /* (a table laid out by hand) */
  /* clang-format off */
  switch (format) {
    case 0x01: case 0x08: *out_element = 0; return 1;          /* (un)signed int8 */
    case 0x02: case 0x09: case 0x10: *out_element = 0; return 2; /* int16, half */
    case 0x03: case 0x0a: case 0x20: *out_element = 0; return 4; /* int32, float */
    case 0xc0: case 0xc6: *out_element = 1; return 0;          /* [su]norm int8x1 */
    case 0xc1: case 0xc7: case 0xc3: case 0xc9: *out_element = 2; return 0;
    case 0xc2: case 0xc8: case 0xc4: case 0xca: *out_element = 4; return 0;
    case 0xc5: case 0xcb: *out_element = 8; return 0;
    default: *out_element = 16; return 0; /* unknown, compressed, video: the most */
  }
  /* clang-format on */
}

static uint64_t tsr__mul(uint64_t a, uint64_t b) {
  if (a && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

/* Bytes of one level of w x h x d elements; UINT64_MAX on overflow. */
static uint64_t tsr__level_bytes(uint64_t w, uint64_t h, uint64_t d, int format, unsigned channels) {
  uint64_t element = 0, per_channel = tsr__channel_bytes(format, &element);
  if (!element) element = tsr__mul(per_channel, channels ? channels : 1);
  return tsr__mul(tsr__mul(tsr__mul(w, h ? h : 1), d ? d : 1), element);
}

static uint64_t tsr__mip_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels) {
  uint64_t w = d->Width, h = d->Height, z = d->Depth, sum = 0;
  for (unsigned i = 0; i < levels && i < 64; i++) {
    uint64_t b = tsr__level_bytes(w, h, z, d->Format, d->NumChannels);
    sum = b > UINT64_MAX - sum ? UINT64_MAX : sum + b;
    w = w > 1 ? w / 2 : 1;
    h = h > 1 ? h / 2 : h;
    /* layered arrays keep their layers; only a true 3D array halves depth */
    z = z > 1 && !(d->Flags & 0x05) ? z / 2 : z; /* LAYERED, CUBEMAP */
  }
  return sum;
}

static CUresult tsr__undo_array(uint64_t a) { return tsr_real.cuArrayDestroy((CUarray)(uintptr_t)a); }
static CUresult tsr__undo_mip(uint64_t a) { return tsr_real.cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)a); }

/* Charges `bytes`, calls `create`, records the handle it wrote in *handle. */
#define TSR__CREATE(handle, bytes, create, undo)                                                          \
  do {                                                                                                    \
    int charged_;                                                                                         \
    if ((bytes) == UINT64_MAX || !tsr_shim_charge(tsr_shim_current_lease(), (bytes), &charged_))          \
      return CUDA_ERROR_OUT_OF_MEMORY;                                                                    \
    CUresult rc_ = (create);                                                                              \
    if (rc_ != CUDA_SUCCESS) {                                                                            \
      tsr_shim_uncharge(charged_, (bytes));                                                               \
      return rc_;                                                                                         \
    }                                                                                                     \
    return tsr_shim_record(charged_, TSR_KEY_ARRAY(*(handle)), (uint64_t)(uintptr_t) * (handle), (bytes), \
                           TSR_SHIM_LIFE_CONTEXT, (undo));                                                \
  } while (0)

TSR_EXPORT CUresult cuArrayCreate_v2(CUarray *handle, const CUDA_ARRAY_DESCRIPTOR *desc) {
  tsr_shim_ready();
  if (!tsr_real.cuArrayCreate_v2) return CUDA_ERROR_NOT_INITIALIZED;
  if (!handle || !desc || desc->Width == 0) return tsr_real.cuArrayCreate_v2(handle, desc);
  uint64_t bytes = tsr__level_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
  TSR__CREATE(handle, bytes, tsr_real.cuArrayCreate_v2(handle, desc), tsr__undo_array);
}

TSR_EXPORT CUresult cuArray3DCreate_v2(CUarray *handle, const CUDA_ARRAY3D_DESCRIPTOR *desc) {
  tsr_shim_ready();
  if (!tsr_real.cuArray3DCreate_v2) return CUDA_ERROR_NOT_INITIALIZED;
  if (!handle || !desc || desc->Width == 0) return tsr_real.cuArray3DCreate_v2(handle, desc);
  uint64_t bytes = tsr__mip_bytes(desc, 1);
  TSR__CREATE(handle, bytes, tsr_real.cuArray3DCreate_v2(handle, desc), tsr__undo_array);
}

TSR_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *handle, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                           unsigned int levels) {
  tsr_shim_ready();
  if (!tsr_real.cuMipmappedArrayCreate) return CUDA_ERROR_NOT_INITIALIZED;
  if (!handle || !desc || desc->Width == 0 || levels == 0) return tsr_real.cuMipmappedArrayCreate(handle, desc, levels);
  uint64_t bytes = tsr__mip_bytes(desc, levels);
  TSR__CREATE(handle, bytes, tsr_real.cuMipmappedArrayCreate(handle, desc, levels), tsr__undo_mip);
}

TSR_EXPORT CUresult cuArrayDestroy(CUarray array) {
  tsr_shim_ready();
  if (!tsr_real.cuArrayDestroy) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr_shim_free(TSR_KEY_ARRAY(array), tsr__undo_array, (uint64_t)(uintptr_t)array);
}

TSR_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  tsr_shim_ready();
  if (!tsr_real.cuMipmappedArrayDestroy) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr_shim_free(TSR_KEY_ARRAY(array), tsr__undo_mip, (uint64_t)(uintptr_t)array);
}
