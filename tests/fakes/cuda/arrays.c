/* arrays.c: CUDA arrays and mipmapped arrays, which take device memory the
 * allocation API never sees (a path HAMi-core let through).
 *
 * An array is charged width x height x depth x element size x channels
 * (a zero height or depth counts as 1), exactly: the H100 took 256 MiB for
 * a 4096 x 4096 float4 array and for a 1024 x 1024 x 64 uchar4 one. A
 * mipmapped array is charged the sum over its levels, each dimension
 * halved per level and never below 1 (342 MiB for 13 levels of 4096 x 4096
 * float4 on the H100; the sum is 341.3 MiB). Arrays have no address, so no
 * host memory backs them. The eight classic formats are accepted; the
 * normalized, block-compressed and video formats are refused
 * (CUDA_ERROR_INVALID_VALUE), as are layered mipmaps' special sizing. */
#include <stdlib.h>

#include "internal.h"

typedef struct {
  fc_obj_t hdr; /* FC_K_ARRAY or FC_K_MIPMAP */
  fc_ctx_t *ctx;
  int dev;
  uint64_t charged;
} fc_array_t;

static unsigned fc_format_bytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
  }
}

/* a * b, or UINT64_MAX when it overflows */
static uint64_t fc_mul(uint64_t a, uint64_t b) { return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

/* Checks a 3D descriptor (a 2D one has depth 0) and sizes it over `levels`
 * mip levels. */
static CUresult fc_array_size(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, uint64_t *out_bytes) {
  unsigned elem = fc_format_bytes(d->Format);
  if (d->Width == 0 || elem == 0) return CUDA_ERROR_INVALID_VALUE;
  /* "NumChannels ... must be 1, 2 or 4" (the H100: 3 -> INVALID_VALUE) */
  if (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4) return CUDA_ERROR_INVALID_VALUE;
  /* a 3D array needs a height (the H100: height 0, depth 4 -> INVALID_VALUE) */
  if (d->Depth > 0 && d->Height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (d->Flags & ~(unsigned)0x1ff) return CUDA_ERROR_INVALID_VALUE;
  uint64_t sum = 0;
  for (unsigned l = 0; l < levels; l++) {
    uint64_t w = d->Width >> l, h = d->Height >> l, z = d->Depth >> l;
    uint64_t b = fc_mul(fc_mul(fc_mul(w ? w : 1, h ? h : 1), z ? z : 1), (uint64_t)elem * d->NumChannels);
    sum = b > UINT64_MAX - sum ? UINT64_MAX : sum + b;
  }
  *out_bytes = sum;
  return CUDA_SUCCESS;
}

static CUresult fc_array_new(fc_kind_t kind, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, void **out_handle) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (!out_handle || !d) return CUDA_ERROR_INVALID_VALUE;
  uint64_t bytes;
  if ((rc = fc_array_size(d, levels, &bytes)) != CUDA_SUCCESS) return rc;
  if (bytes > fake_cuda_state_total(g_fc.state, c->dev)) return CUDA_ERROR_OUT_OF_MEMORY;
  fc_array_t *a = calloc(1, sizeof *a);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  if ((rc = fc_charge(c->dev, bytes)) != CUDA_SUCCESS || !fc_obj_add(kind, a)) {
    if (rc == CUDA_SUCCESS) fc_uncharge(c->dev, bytes);
    free(a);
    return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->hdr.kind = kind;
  a->ctx = c;
  a->dev = c->dev;
  a->charged = bytes;
  *out_handle = a;
  return CUDA_SUCCESS;
}

static CUresult fc_array_destroy(fc_kind_t kind, void *h) {
  fc_array_t *a = fc_obj_find(kind, h);
  if (!a) return CUDA_ERROR_INVALID_HANDLE; /* NULL too (the H100) */
  fc_uncharge(a->dev, a->charged);
  fc_obj_remove(kind, a);
  free(a);
  return CUDA_SUCCESS;
}

void fc_arrays_release(fc_ctx_t *ctx) {
  static const fc_kind_t kinds[] = {FC_K_ARRAY, FC_K_MIPMAP};
  for (int k = 0; k < 2; k++)
    for (size_t i = g_fc.nobjs[kinds[k]]; i-- > 0;) {
      fc_array_t *a = g_fc.objs[kinds[k]][i];
      if (a->ctx == ctx) fc_array_destroy(kinds[k], a);
    }
}

static CUresult fc_array_create_2d(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *p) {
  if (!p) return fc_array_new(FC_K_ARRAY, NULL, 1, (void **)pHandle);
  CUDA_ARRAY3D_DESCRIPTOR d = {p->Width, p->Height, 0, p->Format, p->NumChannels, 0};
  return fc_array_new(FC_K_ARRAY, &d, 1, (void **)pHandle);
}
FC_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray) {
  FC_LOCKED(fc_array_create_2d(pHandle, pAllocateArray));
}

FC_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray) {
  FC_LOCKED(fc_array_new(FC_K_ARRAY, pAllocateArray, 1, (void **)pHandle));
}

/* The CUDA 2.0 entries take 32-bit sizes; they allocate as the others do
 * (unconfirmed: the H100 was not asked). */
static CUresult fc_array_create_v1(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *p) {
  if (!p) return fc_array_new(FC_K_ARRAY, NULL, 1, (void **)pHandle);
  CUDA_ARRAY3D_DESCRIPTOR d = {p->Width, p->Height, 0, p->Format, p->NumChannels, 0};
  return fc_array_new(FC_K_ARRAY, &d, 1, (void **)pHandle);
}
FC_EXPORT CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray) {
  FC_LOCKED(fc_array_create_v1(pHandle, pAllocateArray));
}
static CUresult fc_array3d_create_v1(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *p) {
  if (!p) return fc_array_new(FC_K_ARRAY, NULL, 1, (void **)pHandle);
  CUDA_ARRAY3D_DESCRIPTOR d = {p->Width, p->Height, p->Depth, p->Format, p->NumChannels, p->Flags};
  return fc_array_new(FC_K_ARRAY, &d, 1, (void **)pHandle);
}
FC_EXPORT CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray) {
  FC_LOCKED(fc_array3d_create_v1(pHandle, pAllocateArray));
}

FC_EXPORT CUresult cuArrayDestroy(CUarray hArray) { FC_LOCKED(fc_array_destroy(FC_K_ARRAY, hArray)); }

/* Levels are clamped to 1 .. 1 + log2(largest dimension): the H100 took 0
 * and 14 levels for a 4096-wide array without complaint. */
static CUresult fc_mipmap_create(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels) {
  if (d) {
    size_t big = d->Width > d->Height ? d->Width : d->Height;
    if (d->Depth > big) big = d->Depth;
    unsigned most = 1;
    while (big > 1) big >>= 1, most++;
    if (levels == 0) levels = 1;
    if (levels > most) levels = most;
  }
  return fc_array_new(FC_K_MIPMAP, d, levels, (void **)pHandle);
}
FC_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                          unsigned int numMipmapLevels) {
  FC_LOCKED(fc_mipmap_create(pHandle, pMipmappedArrayDesc, numMipmapLevels));
}

FC_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  FC_LOCKED(fc_array_destroy(FC_K_MIPMAP, hMipmappedArray));
}
