/* memory.c: the allocation hooks, the frees, and the lease's view of memory.
 *
 * Every allocator follows one order: find the lease of the current device,
 * charge the region (refuse with out-of-memory before the driver is asked),
 * call the real driver, and on failure give the charge back; on success
 * record what was charged under the returned pointer. Every free takes the
 * pointer's record (whichever path allocated it: a cuMemAlloc pointer freed
 * by cuMemFreeAsync is credited the same), calls the real free, and credits
 * the lease only if the driver freed it (a failed free changes nothing).
 * Pointers the shim never charged (allocated before it attached, or on a
 * device without a lease) pass through uncredited.
 *
 * What is charged is what was asked for, rounded up to the driver's 2 MiB
 * granularity for device memory (the driver never hands out less). The
 * context, module statics and limits the driver takes without an allocation
 * call are not seen here: the daemon's NVML backstop (issue 10) is for them. */
#include "shim/shim.h"

#define TSR__GRANULE (UINT64_C(2) << 20)

#define TSR_EXPORT __attribute__((visibility("default")))

static uint64_t tsr__charge_size(uint64_t bytes) {
  if (bytes > UINT64_MAX - (TSR__GRANULE - 1)) return UINT64_MAX;
  return (bytes + TSR__GRANULE - 1) / TSR__GRANULE * TSR__GRANULE;
}

/* Charges `bytes` to lease `lease` (tsr_shim_current_lease's or
 * tsr_shim_lease_of_device's answer). *out_lease gets the lease index (or
 * -1: nothing charged). False: refuse with out-of-memory. */
static bool tsr__charge_to(int lease, uint64_t bytes, int *out_lease) {
  *out_lease = -1;
  if (lease == -2) return true; /* not governed */
  if (lease == -1) return !tsr__shim.deny;
  const tsr_shim_lease_t *l = &tsr__shim.leases[lease];
  if (!tsr_region_charge(l->region, l->slot, tsr__charge_size(bytes))) return false;
  *out_lease = lease;
  return true;
}

/* Charges `bytes` for the calling thread's current device. */
static bool tsr__charge(uint64_t bytes, int *out_lease) {
  tsr_shim_ready();
  return tsr__charge_to(tsr_shim_current_lease(), bytes, out_lease);
}

static void tsr__uncharge(int lease, uint64_t bytes) {
  if (lease < 0) return;
  const tsr_shim_lease_t *l = &tsr__shim.leases[lease];
  tsr_region_credit(l->region, l->slot, tsr__charge_size(bytes));
}

/* After a successful allocation: remember what `ptr` was charged. A full
 * map cannot remember it: the allocation is undone and refused. */
static CUresult tsr__record(int lease, CUdeviceptr ptr, uint64_t bytes,
                            CUresult (*undo)(CUdeviceptr)) {
  if (lease < 0) return CUDA_SUCCESS;
  if (tsr_shim_ptrmap_put(&tsr__shim.map, ptr, tsr__charge_size(bytes), (uint32_t)lease))
    return CUDA_SUCCESS;
  tsr_shim_warn_once(20, "too many live allocations to account for; refusing more");
  if (undo) undo(ptr);
  tsr__uncharge(lease, bytes);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Before a free: what `ptr` was charged (0 if the shim did not charge it). */
static bool tsr__forget(CUdeviceptr ptr, uint64_t *out_bytes, uint32_t *out_lease) {
  if (!tsr__shim.governed) return false;
  return tsr_shim_ptrmap_take(&tsr__shim.map, ptr, out_bytes, out_lease);
}

static void tsr__credit(uint32_t lease, uint64_t charged) {
  if (lease >= tsr__shim.nleases) return;
  const tsr_shim_lease_t *l = &tsr__shim.leases[lease];
  tsr_region_credit(l->region, l->slot, charged);
}

/* After the driver's free of `key`: credit what tsr__forget took, or, if
 * the driver did not free it, record it again (it is still charged). */
static CUresult tsr__settle(CUresult rc, uint64_t key, bool ours, uint64_t charged,
                            uint32_t lease) {
  if (!ours) return rc;
  if (rc == CUDA_SUCCESS) tsr__credit(lease, charged);
  else tsr_shim_ptrmap_put(&tsr__shim.map, key, charged, lease);
  return rc;
}

#define TSR__REAL_OR_FAIL(fn)                                      \
  do {                                                             \
    tsr_shim_ready();                                              \
    if (!tsr__real.fn) return CUDA_ERROR_NOT_INITIALIZED;          \
  } while (0)

/* ---- allocations ------------------------------------------------------------- */

TSR_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  TSR__REAL_OR_FAIL(cuMemAlloc_v2);
  if (!dptr || bytesize == 0) return tsr__real.cuMemAlloc_v2(dptr, bytesize); /* the driver's error */
  int lease;
  if (!tsr__charge(bytesize, &lease)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = tsr__real.cuMemAlloc_v2(dptr, bytesize);
  if (rc != CUDA_SUCCESS) {
    tsr__uncharge(lease, bytesize);
    return rc;
  }
  return tsr__record(lease, *dptr, bytesize, tsr__real.cuMemFree_v2);
}

TSR_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  TSR__REAL_OR_FAIL(cuMemAllocManaged);
  if (!dptr || bytesize == 0) return tsr__real.cuMemAllocManaged(dptr, bytesize, flags);
  int lease;
  if (!tsr__charge(bytesize, &lease)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = tsr__real.cuMemAllocManaged(dptr, bytesize, flags);
  if (rc != CUDA_SUCCESS) {
    tsr__uncharge(lease, bytesize);
    return rc;
  }
  return tsr__record(lease, *dptr, bytesize, tsr__real.cuMemFree_v2);
}

TSR_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                       size_t height, unsigned int element) {
  TSR__REAL_OR_FAIL(cuMemAllocPitch_v2);
  if (!dptr || !pitch || width == 0 || height == 0)
    return tsr__real.cuMemAllocPitch_v2(dptr, pitch, width, height, element);
  /* the pitch is the driver's choice: charge the widest row it may pick
   * (rounded to 512 bytes), and settle on the real size afterwards */
  uint64_t row = ((uint64_t)width + 511) / 512 * 512;
  uint64_t want = height > UINT64_MAX / row ? UINT64_MAX : row * height;
  int lease;
  if (!tsr__charge(want, &lease)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = tsr__real.cuMemAllocPitch_v2(dptr, pitch, width, height, element);
  if (rc != CUDA_SUCCESS) {
    tsr__uncharge(lease, want);
    return rc;
  }
  uint64_t real = (uint64_t)*pitch * height;
  if (lease >= 0 && tsr__charge_size(real) != tsr__charge_size(want)) {
    const tsr_shim_lease_t *l = &tsr__shim.leases[lease];
    if (tsr__charge_size(real) < tsr__charge_size(want)) {
      tsr_region_credit(l->region, l->slot, tsr__charge_size(want) - tsr__charge_size(real));
    } else if (!tsr_region_charge(l->region, l->slot, tsr__charge_size(real) - tsr__charge_size(want))) {
      tsr__real.cuMemFree_v2(*dptr);
      tsr__uncharge(lease, want);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  return tsr__record(lease, *dptr, real, tsr__real.cuMemFree_v2);
}

static CUresult tsr__alloc_async(CUresult (*real)(CUdeviceptr *, size_t, CUstream),
                                 CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!dptr || bytesize == 0) return real(dptr, bytesize, stream);
  int lease;
  if (!tsr__charge(bytesize, &lease)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = real(dptr, bytesize, stream);
  if (rc != CUDA_SUCCESS) {
    tsr__uncharge(lease, bytesize);
    return rc;
  }
  return tsr__record(lease, *dptr, bytesize, NULL);
}

TSR_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
  tsr_shim_ready();
  return tsr__alloc_async(tsr__real.cuMemAllocAsync, dptr, bytesize, stream);
}

TSR_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
  tsr_shim_ready();
  return tsr__alloc_async(tsr__real.cuMemAllocAsync_ptsz, dptr, bytesize, stream);
}

static CUresult tsr__alloc_pool(CUresult (*real)(CUdeviceptr *, size_t, CUmemoryPool, CUstream),
                                CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                CUstream stream) {
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!dptr || bytesize == 0) return real(dptr, bytesize, pool, stream);
  int lease;
  if (!tsr__charge(bytesize, &lease)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = real(dptr, bytesize, pool, stream);
  if (rc != CUDA_SUCCESS) {
    tsr__uncharge(lease, bytesize);
    return rc;
  }
  return tsr__record(lease, *dptr, bytesize, NULL);
}

TSR_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                            CUstream stream) {
  tsr_shim_ready();
  return tsr__alloc_pool(tsr__real.cuMemAllocFromPoolAsync, dptr, bytesize, pool, stream);
}

TSR_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                 CUmemoryPool pool, CUstream stream) {
  tsr_shim_ready();
  return tsr__alloc_pool(tsr__real.cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, stream);
}

/* Virtual memory (cuMemCreate/cuMemRelease): PyTorch's expandable segments
 * and NCCL allocate this way. The physical allocation is charged to the
 * lease of the device its properties name (or the current one), under its
 * handle; cuMemRelease credits it. Mapping and unmapping move no memory. */
TSR_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const void *prop,
                                unsigned long long flags) {
  TSR__REAL_OR_FAIL(cuMemCreate);
  if (!handle || !prop || size == 0) return tsr__real.cuMemCreate(handle, size, prop, flags);
  const CUmemAllocationProp_prefix *p = prop;
  int lease = p->location.type == CU_MEM_LOCATION_TYPE_DEVICE
                  ? tsr_shim_lease_of_device(p->location.id)
                  : tsr_shim_current_lease();
  int charged;
  if (!tsr__charge_to(lease, size, &charged)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = tsr__real.cuMemCreate(handle, size, prop, flags);
  if (rc != CUDA_SUCCESS) {
    tsr__uncharge(charged, size);
    return rc;
  }
  return tsr__record(charged, *handle, size, tsr__real.cuMemRelease);
}

TSR_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  TSR__REAL_OR_FAIL(cuMemRelease);
  uint64_t charged = 0;
  uint32_t lease = 0;
  bool ours = tsr__forget(handle, &charged, &lease);
  return tsr__settle(tsr__real.cuMemRelease(handle), handle, ours, charged, lease);
}

/* ---- frees ------------------------------------------------------------------------ */

TSR_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  TSR__REAL_OR_FAIL(cuMemFree_v2);
  uint64_t charged = 0;
  uint32_t lease = 0;
  bool ours = tsr__forget(dptr, &charged, &lease);
  return tsr__settle(tsr__real.cuMemFree_v2(dptr), dptr, ours, charged, lease);
}

static CUresult tsr__free_async(CUresult (*real)(CUdeviceptr, CUstream), CUdeviceptr dptr,
                                CUstream stream) {
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  uint64_t charged = 0;
  uint32_t lease = 0;
  bool ours = tsr__forget(dptr, &charged, &lease);
  return tsr__settle(real(dptr, stream), dptr, ours, charged, lease);
}

TSR_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  tsr_shim_ready();
  return tsr__free_async(tsr__real.cuMemFreeAsync, dptr, stream);
}

TSR_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  tsr_shim_ready();
  return tsr__free_async(tsr__real.cuMemFreeAsync_ptsz, dptr, stream);
}

/* ---- the lease's view --------------------------------------------------------------- */

TSR_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  TSR__REAL_OR_FAIL(cuMemGetInfo_v2);
  CUresult rc = tsr__real.cuMemGetInfo_v2(free_bytes, total_bytes);
  int lease = rc == CUDA_SUCCESS ? tsr_shim_current_lease() : -2;
  if (lease < 0 || !free_bytes || !total_bytes) return rc;
  tsr_region_stats_t s;
  tsr_region_stats(tsr__shim.leases[lease].region, &s);
  uint64_t left = s.used_bytes < s.limit_bytes ? s.limit_bytes - s.used_bytes : 0;
  /* total is the lease; free is what the lease has left, never more than
   * the device really has free */
  if (left < *free_bytes) *free_bytes = (size_t)left;
  if (s.limit_bytes < *total_bytes) *total_bytes = (size_t)s.limit_bytes;
  return rc;
}

TSR_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  TSR__REAL_OR_FAIL(cuDeviceTotalMem_v2);
  CUresult rc = tsr__real.cuDeviceTotalMem_v2(bytes, dev);
  int lease = rc == CUDA_SUCCESS && bytes ? tsr_shim_lease_of_device(dev) : -2;
  if (lease < 0) return rc;
  tsr_region_stats_t s;
  tsr_region_stats(tsr__shim.leases[lease].region, &s);
  if (s.limit_bytes < *bytes) *bytes = (size_t)s.limit_bytes;
  return rc;
}
