/* memory.c: the allocation table, and the entries that allocate, free,
 * copy and set device memory (cuMemAlloc, pitch, managed, host, memset,
 * copies, cuMemGetInfo).
 *
 * Device memory is host address space: each allocation is its own mmap
 * (MAP_NORESERVE, so untouched pages cost no RAM), so a pointer the fake
 * gives out is one a test may write through, and copies are real copies.
 * What an allocation is charged (FAKE_CUDA_ALLOC_GRANULE rounding) is kept
 * with it and returned, exactly, by whichever path frees it. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/array.h"
#include "internal.h"

void *fc_map(size_t bytes, size_t *out_len) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (bytes == 0) bytes = 1;
  if (bytes > SIZE_MAX - (page - 1)) return NULL;
  size_t len = (bytes + page - 1) / page * page;
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return NULL;
  *out_len = len;
  return m;
}

fc_alloc_t *fc_alloc_new(fc_akind_t kind, size_t size, bool backed) {
  fc_alloc_t **grown = tsr_array_grow(g_fc.allocs, &g_fc.capallocs, g_fc.nallocs + 1, sizeof(fc_alloc_t *), 64);
  if (!grown) return NULL;
  g_fc.allocs = grown;
  fc_alloc_t *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->kind = kind;
  a->size = size;
  if (backed) {
    a->map = fc_map(size, &a->map_len);
    if (!a->map) {
      free(a);
      return NULL;
    }
    a->base = (uintptr_t)a->map;
  }
  g_fc.allocs[g_fc.nallocs++] = a;
  return a;
}

void fc_alloc_drop(fc_alloc_t *a) {
  for (size_t i = 0; i < g_fc.nallocs; i++)
    if (g_fc.allocs[i] == a) {
      g_fc.allocs[i] = g_fc.allocs[--g_fc.nallocs];
      break;
    }
  if (a->map) munmap(a->map, a->map_len);
  free(a);
}

fc_alloc_t *fc_alloc_at(uintptr_t base) {
  for (size_t i = 0; i < g_fc.nallocs; i++)
    if (g_fc.allocs[i]->base == base && g_fc.allocs[i]->size > 0) return g_fc.allocs[i];
  return NULL;
}

fc_alloc_t *fc_alloc_span(uintptr_t ptr, size_t n) {
  for (size_t i = 0; i < g_fc.nallocs; i++) {
    fc_alloc_t *a = g_fc.allocs[i];
    if (a->kind == FC_A_GRAPH && !a->live) continue;
    if (ptr >= a->base && ptr - a->base <= a->size && n <= a->size - (ptr - a->base)) return a;
  }
  return NULL;
}

CUresult fc_alloc_free(fc_alloc_t *a) {
  switch (a->kind) {
    case FC_A_DEVICE:
    case FC_A_MANAGED:
      fc_uncharge(a->dev, a->charged);
      fc_alloc_drop(a);
      return CUDA_SUCCESS;
    case FC_A_POOL: {
      fc_pool_t *p = a->pool;
      uint64_t charged = a->charged;
      fc_alloc_drop(a);
      fc_pool_give_back(p, charged);
      return CUDA_SUCCESS;
    }
    case FC_A_GRAPH:
      if (!a->live) return CUDA_ERROR_INVALID_VALUE;
      fc_graph_alloc_freed(a);
      return CUDA_SUCCESS;
    case FC_A_HOST: fc_alloc_drop(a); return CUDA_SUCCESS;
    case FC_A_VMM: break; /* cuMemUnmap's, not a free's */
  }
  return CUDA_ERROR_INVALID_VALUE;
}

void fc_allocs_release(fc_ctx_t *ctx) {
  for (size_t i = g_fc.nallocs; i-- > 0;) {
    if (i >= g_fc.nallocs) continue; /* the table shrank under us */
    fc_alloc_t *a = g_fc.allocs[i];
    if (a->ctx == ctx) fc_alloc_free(a);
  }
}

/* ---- cuMemGetInfo ------------------------------------------------------------ */

static CUresult fc_mem_get_info(size_t *free_bytes, size_t *total_bytes) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  /* what killed processes held is free again */
  fake_cuda_state_reap(g_fc.state);
  uint64_t total = fake_cuda_state_total(g_fc.state, c->dev);
  uint64_t used = fake_cuda_state_used(g_fc.state, c->dev);
  /* either may be NULL (the H100) */
  if (free_bytes) *free_bytes = used < total ? total - used : 0;
  if (total_bytes) *total_bytes = total;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total) { FC_LOCKED(fc_mem_get_info(free, total)); }

/* ---- allocation ---------------------------------------------------------------- */

/* Charges `bytes` (rounded to the granule) and maps them, for the current
 * context. Nothing is left charged or mapped when it fails. */
static CUresult fc_mem_new(fc_akind_t kind, size_t bytes, fc_alloc_t **out_alloc) {
  *out_alloc = NULL;
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  uint64_t charge = fc_granule(bytes);
  if (charge > fake_cuda_state_total(g_fc.state, c->dev)) return CUDA_ERROR_OUT_OF_MEMORY;
  if ((rc = fc_charge(c->dev, charge)) != CUDA_SUCCESS) return rc;
  fc_alloc_t *a = fc_alloc_new(kind, bytes, true);
  if (!a) {
    fc_uncharge(c->dev, charge);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->charged = charge;
  a->dev = c->dev;
  a->ctx = c;
  *out_alloc = a;
  return CUDA_SUCCESS;
}

static CUresult fc_mem_alloc(CUdeviceptr *dptr, size_t bytesize) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  /* "If bytesize is 0, cuMemAlloc() returns CUDA_ERROR_INVALID_VALUE" */
  if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  fc_alloc_t *a;
  if ((rc = fc_mem_new(FC_A_DEVICE, bytesize, &a)) != CUDA_SUCCESS) return rc;
  *dptr = (CUdeviceptr)a->base;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) { FC_LOCKED(fc_mem_alloc(dptr, bytesize)); }

static CUresult fc_mem_alloc_pitch(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                   unsigned int ElementSizeBytes) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0) return CUDA_ERROR_INVALID_VALUE;
  /* "ElementSizeBytes ... may be 4, 8 or 16" */
  if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) return CUDA_ERROR_INVALID_VALUE;
  /* rows are padded to 512 bytes, as the H100 does (100 -> 512, 1000 -> 1024) */
  if (WidthInBytes > SIZE_MAX - (FC_PITCH_ALIGN - 1)) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t pitch = (WidthInBytes + FC_PITCH_ALIGN - 1) / FC_PITCH_ALIGN * FC_PITCH_ALIGN;
  if (Height > SIZE_MAX / pitch) return CUDA_ERROR_OUT_OF_MEMORY;
  fc_alloc_t *a;
  if ((rc = fc_mem_new(FC_A_DEVICE, pitch * Height, &a)) != CUDA_SUCCESS) return rc;
  *dptr = (CUdeviceptr)a->base;
  *pPitch = pitch;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                      unsigned int ElementSizeBytes) {
  FC_LOCKED(fc_mem_alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
}

/* Managed memory is charged in full when it is allocated, as if every page
 * were on the device; the real driver takes pages as the device touches
 * them (the H100 showed nothing taken for 64 MiB until a memset). */
static CUresult fc_mem_alloc_managed(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  /* "flags ... must be one of CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST" */
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  fc_alloc_t *a;
  if ((rc = fc_mem_new(FC_A_MANAGED, bytesize, &a)) != CUDA_SUCCESS) return rc;
  *dptr = (CUdeviceptr)a->base;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  FC_LOCKED(fc_mem_alloc_managed(dptr, bytesize, flags));
}

/* cuMemFree needs no current context (the H100 answers a bad pointer with
 * CUDA_ERROR_INVALID_VALUE, not CUDA_ERROR_INVALID_CONTEXT, without one).
 * 0 is accepted; an address inside an allocation, one freed already, a
 * mapping of cuMemMap and pinned host memory are not. A pointer of
 * cuMemAllocAsync or of a graph's allocation node is freed at once. */
static CUresult fc_mem_free(CUdeviceptr dptr) {
  if (dptr == 0) return CUDA_SUCCESS;
  fc_alloc_t *a = fc_alloc_at((uintptr_t)dptr);
  if (!a || a->kind == FC_A_HOST || a->kind == FC_A_VMM) return CUDA_ERROR_INVALID_VALUE;
  return fc_alloc_free(a);
}
FC_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) { FC_LOCKED(fc_mem_free(dptr)); }

/* ---- pinned host memory (not charged to the device) ------------------------ */

static CUresult fc_mem_alloc_host(void **pp, size_t bytesize) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (!pp) return CUDA_ERROR_INVALID_VALUE;
  if (bytesize == 0) { /* success and NULL, as on the H100 */
    *pp = NULL;
    return CUDA_SUCCESS;
  }
  fc_alloc_t *a = fc_alloc_new(FC_A_HOST, bytesize, true);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  a->ctx = c;
  a->dev = c->dev;
  *pp = (void *)a->base;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) { FC_LOCKED(fc_mem_alloc_host(pp, bytesize)); }

static CUresult fc_mem_free_host(void *p) {
  if (!p) return CUDA_SUCCESS; /* unconfirmed */
  fc_alloc_t *a = fc_alloc_at((uintptr_t)p);
  if (!a || a->kind != FC_A_HOST) return CUDA_ERROR_INVALID_VALUE;
  return fc_alloc_free(a);
}
FC_EXPORT CUresult cuMemFreeHost(void *p) { FC_LOCKED(fc_mem_free_host(p)); }

/* ---- memset and copies ------------------------------------------------------ */

/* Each needs a current context and a range that lies inside one live
 * allocation (the H100: a freed, made-up or overrunning range is
 * CUDA_ERROR_INVALID_VALUE). Work is done when it is issued. */
static CUresult fc_memset_d8(CUdeviceptr dst, unsigned char uc, size_t n) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (n == 0) return CUDA_SUCCESS;
  if (!fc_alloc_span((uintptr_t)dst, n)) return CUDA_ERROR_INVALID_VALUE;
  memset((void *)(uintptr_t)dst, uc, n);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  FC_LOCKED(fc_memset_d8(dstDevice, uc, N));
}
FC_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  FC_LOCKED(fc_memset_d8(dstDevice, uc, N));
}

static CUresult fc_memcpy_htod(CUdeviceptr dst, const void *src, size_t n) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (n == 0) return CUDA_SUCCESS;
  if (!src || !fc_alloc_span((uintptr_t)dst, n)) return CUDA_ERROR_INVALID_VALUE;
  memcpy((void *)(uintptr_t)dst, src, n);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
  FC_LOCKED(fc_memcpy_htod(dstDevice, srcHost, ByteCount));
}
FC_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
  FC_LOCKED(fc_memcpy_htod(dstDevice, srcHost, ByteCount));
}

static CUresult fc_memcpy_dtoh(void *dst, CUdeviceptr src, size_t n) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (n == 0) return CUDA_SUCCESS;
  if (!dst || !fc_alloc_span((uintptr_t)src, n)) return CUDA_ERROR_INVALID_VALUE;
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  FC_LOCKED(fc_memcpy_dtoh(dstHost, srcDevice, ByteCount));
}
FC_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  FC_LOCKED(fc_memcpy_dtoh(dstHost, srcDevice, ByteCount));
}

/* ---- the 32-bit entries of CUDA 2.0 ------------------------------------------ */

/* On the H100 (driver 580) cuMemGetInfo, cuMemAlloc and cuMemFree with
 * 32-bit arguments answer CUDA_ERROR_INVALID_CONTEXT even with a context
 * current: no 64-bit process can use them. The fake answers every 32-bit
 * pointer entry so (for pitch, host, memset and the copies: unconfirmed). */
static CUresult fc_legacy(void) {
  CUresult rc = fc_ready();
  return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_INVALID_CONTEXT;
}
FC_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total) {
  (void)free, (void)total;
  return fc_legacy();
}
FC_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
  (void)dptr, (void)bytesize;
  return fc_legacy();
}
FC_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                   unsigned int Height, unsigned int ElementSizeBytes) {
  (void)dptr, (void)pPitch, (void)WidthInBytes, (void)Height, (void)ElementSizeBytes;
  return fc_legacy();
}
FC_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) {
  (void)dptr;
  return fc_legacy();
}
FC_EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytesize) {
  (void)pp, (void)bytesize;
  return fc_legacy();
}
FC_EXPORT CUresult cuMemsetD8(CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N) {
  (void)dstDevice, (void)uc, (void)N;
  return fc_legacy();
}
FC_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount) {
  (void)dstDevice, (void)srcHost, (void)ByteCount;
  return fc_legacy();
}
FC_EXPORT CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount) {
  (void)dstHost, (void)srcDevice, (void)ByteCount;
  return fc_legacy();
}

/* ---- what libtessera-rt's CUDA backend asks for ---------------------------- */

/* cuMemHostAlloc: pinned host memory as cuMemAllocHost, with flags (the
 * driver refuses bits it does not define). Not charged to the device. */
FC_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags) {
  if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
    return CUDA_ERROR_INVALID_VALUE;
  FC_LOCKED(fc_mem_alloc_host(pp, bytesize));
}

/* The device's view of pinned host memory, from any byte of it: the same
 * address (unified addressing, as on every 64-bit device the fake stands
 * for); flags must be 0; a pointer outside pinned host memory is
 * CUDA_ERROR_INVALID_VALUE. */
static CUresult fc_host_device_pointer(CUdeviceptr *pdptr, void *p, unsigned int flags) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (!pdptr || flags) return CUDA_ERROR_INVALID_VALUE;
  fc_alloc_t *a = fc_alloc_span((uintptr_t)p, 1); /* any byte of it */
  if (!a || a->kind != FC_A_HOST) return CUDA_ERROR_INVALID_VALUE;
  *pdptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags) {
  FC_LOCKED(fc_host_device_pointer(pdptr, p, flags));
}

/* A 32-bit memset, done when issued (as the fake's other work). */
static CUresult fc_memset_d32(CUdeviceptr dst, unsigned int ui, size_t n) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (n == 0) return CUDA_SUCCESS;
  if ((dst & 3) || n > SIZE_MAX / 4 || !fc_alloc_span((uintptr_t)dst, n * 4)) return CUDA_ERROR_INVALID_VALUE;
  uint32_t *p = (uint32_t *)(uintptr_t)dst;
  for (size_t i = 0; i < n; i++) p[i] = ui;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream) {
  (void)hStream;
  FC_LOCKED(fc_memset_d32(dstDevice, ui, N));
}
