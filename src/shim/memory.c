/* memory.c: plain, pitch and managed allocations, VMM physical memory,
 * the frees, and the lease's view of memory (cuMemGetInfo_v2,
 * cuDeviceTotalMem_v2). The order every hook follows is in account.c.
 *
 * What is charged is what was asked for, rounded up to the driver's 2 MiB
 * granularity for device memory (the driver never hands out less). */
#include "shim/shim.h"

#define TSR_EXPORT __attribute__((visibility("default")))

#define TSR__REAL_OR_FAIL(fn)                            \
  do {                                                   \
    tsr_shim_ready();                                    \
    if (!tsr_real.fn) return CUDA_ERROR_NOT_INITIALIZED; \
  } while (0)

/* The driver's frees, taking the handle as a number (to undo, or to free). */
static CUresult tsr__undo_free(uint64_t p) { return tsr_real.cuMemFree_v2((CUdeviceptr)p); }
static CUresult tsr__undo_release(uint64_t h) { return tsr_real.cuMemRelease(h); }

/* ---- allocations ------------------------------------------------------------- */

TSR_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  TSR__REAL_OR_FAIL(cuMemAlloc_v2);
  if (!dptr || bytesize == 0) return tsr_real.cuMemAlloc_v2(dptr, bytesize); /* the driver's error */
  int lease;
  if (!tsr_shim_charge(tsr_shim_current_lease(), bytesize, &lease)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = tsr_real.cuMemAlloc_v2(dptr, bytesize);
  if (rc != CUDA_SUCCESS) {
    tsr_shim_uncharge(lease, bytesize);
    return rc;
  }
  return tsr_shim_record(lease, *dptr, *dptr, bytesize, TSR_SHIM_LIFE_CONTEXT, tsr__undo_free);
}

TSR_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  TSR__REAL_OR_FAIL(cuMemAllocManaged);
  if (!dptr || bytesize == 0) return tsr_real.cuMemAllocManaged(dptr, bytesize, flags);
  int lease;
  if (!tsr_shim_charge(tsr_shim_current_lease(), bytesize, &lease)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = tsr_real.cuMemAllocManaged(dptr, bytesize, flags);
  if (rc != CUDA_SUCCESS) {
    tsr_shim_uncharge(lease, bytesize);
    return rc;
  }
  return tsr_shim_record(lease, *dptr, *dptr, bytesize, TSR_SHIM_LIFE_CONTEXT, tsr__undo_free);
}

TSR_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                       unsigned int element) {
  TSR__REAL_OR_FAIL(cuMemAllocPitch_v2);
  if (!dptr || !pitch || width == 0 || height == 0)
    return tsr_real.cuMemAllocPitch_v2(dptr, pitch, width, height, element);
  /* the pitch is the driver's choice: charge the widest row it may pick
   * (rounded to 512 bytes), and settle on the real size afterwards */
  uint64_t row = ((uint64_t)width + 511) / 512 * 512;
  uint64_t want = height > UINT64_MAX / row ? UINT64_MAX : row * height;
  int lease;
  if (!tsr_shim_charge(tsr_shim_current_lease(), want, &lease)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = tsr_real.cuMemAllocPitch_v2(dptr, pitch, width, height, element);
  if (rc != CUDA_SUCCESS) {
    tsr_shim_uncharge(lease, want);
    return rc;
  }
  uint64_t real = (uint64_t)*pitch * height;
  if (lease >= 0 && tsr_shim_round(real) != tsr_shim_round(want)) {
    if (tsr_shim_round(real) < tsr_shim_round(want)) {
      tsr_shim_credit_exact(lease, tsr_shim_round(want) - tsr_shim_round(real));
    } else if (!tsr_shim_charge_exact(lease, tsr_shim_round(real) - tsr_shim_round(want))) {
      tsr_real.cuMemFree_v2(*dptr);
      tsr_shim_uncharge(lease, want);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  return tsr_shim_record(lease, *dptr, *dptr, real, TSR_SHIM_LIFE_CONTEXT, tsr__undo_free);
}

/* Virtual memory (cuMemCreate/cuMemRelease): PyTorch's expandable segments
 * and NCCL allocate this way. The physical allocation is charged to the
 * lease of the device its properties name (or the current one), under its
 * handle; cuMemRelease credits it. Mapping and unmapping move no memory. A
 * handle belongs to the process, not to a context (no context is needed to
 * make one): a context's end leaves it charged. */
TSR_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const void *prop,
                                unsigned long long flags) {
  TSR__REAL_OR_FAIL(cuMemCreate);
  if (!handle || !prop || size == 0) return tsr_real.cuMemCreate(handle, size, prop, flags);
  const CUmemAllocationProp_prefix *p = prop;
  int lease = p->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? tsr_shim_lease_of_device(p->location.id)
                                                              : tsr_shim_current_lease();
  int charged;
  if (!tsr_shim_charge(lease, size, &charged)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = tsr_real.cuMemCreate(handle, size, prop, flags);
  if (rc != CUDA_SUCCESS) {
    tsr_shim_uncharge(charged, size);
    return rc;
  }
  return tsr_shim_record(charged, TSR_KEY_VMM(*handle), *handle, size, TSR_SHIM_LIFE_PROCESS, tsr__undo_release);
}

TSR_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  TSR__REAL_OR_FAIL(cuMemRelease);
  return tsr_shim_free(TSR_KEY_VMM(handle), tsr__undo_release, handle);
}

/* ---- frees ------------------------------------------------------------------------ */

TSR_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  TSR__REAL_OR_FAIL(cuMemFree_v2);
  return tsr_shim_free(dptr, tsr__undo_free, dptr);
}

static CUresult tsr__free_async(CUresult (*real)(CUdeviceptr, CUstream), CUdeviceptr dptr, CUstream stream) {
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  tsr_shim_ptrmap_val_t held;
  bool ours = tsr_shim_forget(dptr, &held);
  return tsr_shim_settle(real(dptr, stream), dptr, ours, &held);
}

TSR_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  tsr_shim_ready();
  return tsr__free_async(tsr_real.cuMemFreeAsync, dptr, stream);
}

TSR_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  tsr_shim_ready();
  return tsr__free_async(tsr_real.cuMemFreeAsync_ptsz, dptr, stream);
}

/* ---- the lease's view --------------------------------------------------------------- */

TSR_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  TSR__REAL_OR_FAIL(cuMemGetInfo_v2);
  CUresult rc = tsr_real.cuMemGetInfo_v2(free_bytes, total_bytes);
  int lease = rc == CUDA_SUCCESS ? tsr_shim_current_lease() : TSR_TENANT_UNGOVERNED;
  if (lease < 0 || !free_bytes || !total_bytes) return rc;
  tsr_shim_reconcile(); /* pools and graph caches may have shrunk */
  uint64_t total = *total_bytes, free_b = *free_bytes;
  tsr_shim_view(lease, &total, &free_b);
  *total_bytes = (size_t)total;
  *free_bytes = (size_t)free_b;
  return rc;
}

TSR_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  TSR__REAL_OR_FAIL(cuDeviceTotalMem_v2);
  CUresult rc = tsr_real.cuDeviceTotalMem_v2(bytes, dev);
  int lease = rc == CUDA_SUCCESS && bytes ? tsr_shim_lease_of_device(dev) : TSR_TENANT_UNGOVERNED;
  if (lease < 0) return rc;
  uint64_t total = *bytes, free_b = 0;
  tsr_shim_view(lease, &total, &free_b);
  *bytes = (size_t)total;
  return rc;
}
