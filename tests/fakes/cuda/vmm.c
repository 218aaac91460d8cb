/* vmm.c: virtual memory management (cuMemCreate, cuMemAddressReserve,
 * cuMemMap, ...), the path of PyTorch's expandable segments and NCCL.
 *
 * A cuMemCreate handle is charged at once (the H100: 64 MiB taken by
 * cuMemCreate alone) and is backed by shared anonymous memory; cuMemMap
 * maps those very pages into a reserved range (mremap with old size 0
 * makes a second mapping of shared pages), so two mappings of one handle
 * see the same bytes. A handle released while mapped lives on until its
 * last unmap, and only then returns its bytes (the H100). Ranges are
 * readable and writable from cuMemMap on: cuMemSetAccess is checked and
 * recorded but does not gate host access. No context is needed. */
#include <stdlib.h>
#include <sys/mman.h>

#include "base/array.h"
#include "internal.h"

typedef struct fc_vmm {
  fc_obj_t hdr;
  int dev; /* physical device; -1: host memory (not charged) */
  size_t size;
  uint64_t charged;
  void *pages;   /* MAP_SHARED | MAP_ANONYMOUS */
  unsigned maps; /* live cuMemMap mappings */
  bool released;
} fc_vmm_t;

typedef struct {
  uintptr_t base;
  size_t size;
  void *map; /* what munmap takes back (base aligned inside it) */
  size_t map_len;
} fc_reservation_t;

static fc_reservation_t *fc_res;
static size_t fc_nres, fc_capres;

static fc_vmm_t *fc_vmm_find(CUmemGenericAllocationHandle h) {
  return fc_obj_find(FC_K_VMM, (const void *)(uintptr_t)h);
}

static void fc_vmm_free(fc_vmm_t *v) {
  if (v->dev >= 0) fc_uncharge(v->dev, v->charged);
  munmap(v->pages, v->size);
  free(v);
}

/* Which kinds of location hold memory the fake can give: a device (its id a
 * CUDA ordinal; *out_dev the physical device), charged, or the host, not
 * charged. */
static CUresult fc_vmm_location(const CUmemLocation *loc, int *out_dev) {
  switch (loc->type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      *out_dev = fc_dev_phys(loc->id);
      if (*out_dev < 0) return CUDA_ERROR_INVALID_DEVICE; /* the H100 */
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: *out_dev = -1; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

static CUresult fc_granularity(size_t *granularity, const CUmemAllocationProp *prop,
                               CUmemAllocationGranularity_flags option) {
  if (!granularity || !prop) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return CUDA_ERROR_INVALID_VALUE;
  /* 2 MiB both ways; the H100 did not check the device ordinal here */
  *granularity = FC_GRANULARITY;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                 CUmemAllocationGranularity_flags option) {
  FC_LOCKED(fc_granularity(granularity, prop, option));
}

static CUresult fc_mem_create(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                              unsigned long long flags) {
  if (!handle || !prop || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  /* "size ... must be aligned to the granularity": 2 MiB + 4 KiB and 0 are
   * CUDA_ERROR_INVALID_VALUE on the H100 */
  if (size == 0 || size % FC_GRANULARITY != 0) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  int dev;
  CUresult rc = fc_vmm_location(&prop->location, &dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (dev >= 0 && (rc = fc_charge(dev, size)) != CUDA_SUCCESS) return rc;
  fc_vmm_t *v = calloc(1, sizeof *v);
  void *pages = MAP_FAILED;
  if (v) pages = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (!v || pages == MAP_FAILED || !fc_obj_add(FC_K_VMM, v)) {
    if (pages != MAP_FAILED) munmap(pages, size);
    free(v);
    if (dev >= 0) fc_uncharge(dev, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  v->hdr.kind = FC_K_VMM;
  v->dev = dev;
  v->size = size;
  v->charged = dev >= 0 ? size : 0;
  v->pages = pages;
  *handle = (CUmemGenericAllocationHandle)(uintptr_t)v;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                               unsigned long long flags) {
  FC_LOCKED(fc_mem_create(handle, size, prop, flags));
}

static CUresult fc_mem_release(CUmemGenericAllocationHandle handle) {
  fc_vmm_t *v = fc_vmm_find(handle);
  if (!v) return CUDA_ERROR_INVALID_VALUE; /* twice, or 0 (the H100) */
  fc_obj_remove(FC_K_VMM, v);
  if (v->maps == 0)
    fc_vmm_free(v);
  else
    v->released = true; /* freed by its last cuMemUnmap */
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) { FC_LOCKED(fc_mem_release(handle)); }

static CUresult fc_address_reserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                   unsigned long long flags) {
  (void)addr; /* a hint only */
  if (!ptr || size == 0 || size % FC_GRANULARITY != 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (alignment == 0) alignment = FC_GRANULARITY;
  if ((alignment & (alignment - 1)) != 0 || alignment % FC_GRANULARITY != 0) return CUDA_ERROR_INVALID_VALUE;
  if (size > SIZE_MAX - alignment) return CUDA_ERROR_OUT_OF_MEMORY;
  fc_reservation_t *grown = tsr_array_grow(fc_res, &fc_capres, fc_nres + 1, sizeof *fc_res, 8);
  if (!grown) return CUDA_ERROR_OUT_OF_MEMORY;
  fc_res = grown;
  size_t len = size + alignment;
  void *m = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t base = ((uintptr_t)m + alignment - 1) / alignment * alignment;
  fc_res[fc_nres++] = (fc_reservation_t){base, size, m, len};
  *ptr = (CUdeviceptr)base;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                       unsigned long long flags) {
  FC_LOCKED(fc_address_reserve(ptr, size, alignment, addr, flags));
}

static fc_reservation_t *fc_reservation_of(uintptr_t p) {
  for (size_t i = 0; i < fc_nres; i++)
    if (p >= fc_res[i].base && p - fc_res[i].base < fc_res[i].size) return &fc_res[i];
  return NULL;
}

/* The cuMemMap mappings that overlap [p, p + n). */
static fc_alloc_t *fc_vmm_overlap(uintptr_t p, size_t n) {
  for (size_t i = 0; i < g_fc.nallocs; i++) {
    fc_alloc_t *a = g_fc.allocs[i];
    if (a->kind == FC_A_VMM && p < a->base + a->size && a->base < p + n) return a;
  }
  return NULL;
}

static CUresult fc_address_free(CUdeviceptr ptr, size_t size) {
  for (size_t i = 0; i < fc_nres; i++) {
    if (fc_res[i].base != (uintptr_t)ptr || fc_res[i].size != size) continue;
    /* "all mappings ... must be unmapped first" (the code is unconfirmed) */
    if (fc_vmm_overlap(fc_res[i].base, size)) return CUDA_ERROR_INVALID_VALUE;
    munmap(fc_res[i].map, fc_res[i].map_len);
    fc_res[i] = fc_res[--fc_nres];
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE; /* freed already (the H100) */
}
FC_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) { FC_LOCKED(fc_address_free(ptr, size)); }

static CUresult fc_mem_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                           unsigned long long flags) {
  fc_vmm_t *v = fc_vmm_find(handle);
  uintptr_t p = (uintptr_t)ptr;
  fc_reservation_t *r = fc_reservation_of(p);
  if (!v || !r || flags != 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  /* a range off the granularity, past the reservation or past the handle:
   * CUDA_ERROR_NOT_SUPPORTED on the H100 */
  if (p % FC_GRANULARITY || size % FC_GRANULARITY || offset % FC_GRANULARITY) return CUDA_ERROR_NOT_SUPPORTED;
  if (size > r->size - (p - r->base) || offset > v->size || size > v->size - offset) return CUDA_ERROR_NOT_SUPPORTED;
  if (fc_vmm_overlap(p, size)) return CUDA_ERROR_INVALID_VALUE; /* mapped already (the H100) */
  fc_alloc_t *a = fc_alloc_new(FC_A_VMM, size, false);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  void *m = mremap((char *)v->pages + offset, 0, size, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)p);
  if (m == MAP_FAILED) {
    fc_alloc_drop(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->base = p;
  a->dev = v->dev;
  a->vmm = v;
  v->maps++;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                            unsigned long long flags) {
  FC_LOCKED(fc_mem_map(ptr, size, offset, handle, flags));
}

static CUresult fc_mem_unmap(CUdeviceptr ptr, size_t size) {
  uintptr_t p = (uintptr_t)ptr;
  fc_reservation_t *r = fc_reservation_of(p);
  if (!r || size == 0 || size > r->size - (p - r->base)) return CUDA_ERROR_INVALID_VALUE;
  /* a range with nothing mapped is fine (the H100: unmapping twice succeeds);
   * one that cuts a mapping in two is not (unconfirmed) */
  for (fc_alloc_t *a; (a = fc_vmm_overlap(p, size)) != NULL;) {
    if (a->base < p || a->base + a->size > p + size) return CUDA_ERROR_INVALID_VALUE;
    /* back to reserved, inaccessible address space */
    mmap((void *)a->base, a->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    fc_vmm_t *v = a->vmm;
    fc_alloc_drop(a);
    if (--v->maps == 0 && v->released) fc_vmm_free(v);
  }
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) { FC_LOCKED(fc_mem_unmap(ptr, size)); }

static CUresult fc_mem_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  if (!desc || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; i++) {
    int dev;
    CUresult rc = fc_vmm_location(&desc[i].location, &dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
  }
  /* every byte of the range must be mapped */
  uintptr_t p = (uintptr_t)ptr, end = p + size;
  while (p < end) {
    fc_alloc_t *a = fc_vmm_overlap(p, 1);
    if (!a) return CUDA_ERROR_INVALID_VALUE;
    p = a->base + a->size;
  }
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  FC_LOCKED(fc_mem_set_access(ptr, size, desc, count));
}
