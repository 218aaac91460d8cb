/* legacy.c: the driver's older entries of what the shim hooks, under their
 * plain names. libcuda.so.1 still exports them, and a program reaches them
 * by dlsym, by cuGetProcAddress at an old CUDA version, or by linking to
 * the name (a binary built against an old cuda.h). Two kinds:
 *
 *   - The CUDA 2.0 ABI, superseded by the _v2 entries of CUDA 3.2: 32-bit
 *     sizes, pointers and array descriptors (cuMemAlloc, cuMemAllocPitch,
 *     cuMemFree, cuArrayCreate, cuArray3DCreate) and cuCtxCreate. A 64-bit
 *     process has no use for them: on the H100 (driver 580) cuMemAlloc and
 *     cuMemFree answer CUDA_ERROR_INVALID_CONTEXT in any context, and
 *     cuCtxCreate CUDA_ERROR_OUT_OF_MEMORY, making nothing
 *     (tests/fakes/cuda/real_h100.txt, "v1"). On a governed device they
 *     are refused with CUDA_ERROR_NOT_SUPPORTED before the driver is
 *     asked, so that no driver, whatever it does with them, takes memory
 *     the lease does not see. Their queries (cuMemGetInfo,
 *     cuDeviceTotalMem) answer as the driver does and, when it answers,
 *     with the lease's view, clamped to 32 bits.
 *   - Older versions with the 64-bit ABI, working today: cuCtxDestroy
 *     (CUDA 2.0; _v2 since 4.0), cuDevicePrimaryCtxRelease and
 *     cuDevicePrimaryCtxReset (CUDA 7; _v2 since 11.0). CUDA 10's runtime
 *     calls the last two. They are answered by the shim's hooks of their
 *     _v2 siblings (context.c), which call the driver's _v2 entries: the
 *     context's charge comes back as with the new names. (cuGraphInstantiate
 *     and cuGraphExecUpdate of CUDA 10 are hooked in graphs.c.)
 *
 * Host memory entries (cuMemAllocHost, cuMemHostAlloc) are not charged
 * under either name, and are not hooked. */
#include "shim/shim.h"

#define TSR_EXPORT __attribute__((visibility("default")))

/* The hooks of the _v2 siblings (context.c, memory.c). */
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuDevicePrimaryCtxReset_v2(CUdevice);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuDeviceTotalMem_v2(size_t *, CUdevice);

/* Whether the shim charges allocations for lease index `lease` (as
 * tsr_shim_current_lease answers): a lease, or no lease under deny. */
static bool tsr__governed(int lease) { return lease >= 0 || (lease == TSR_TENANT_NO_LEASE && tsr_shim.tenant.deny); }

static void tsr__refusing(void) {
  tsr_shim_warn_once(TSR_WARN_LEGACY_ENTRY, "a CUDA 2.0 entry (32-bit sizes) was called on a leased device: refused");
}

/* ---- the CUDA 2.0 ABI: refused on a governed device ---- */

#define TSR__REFUSE_OR(real, lease, call)                   \
  do {                                                      \
    tsr_shim_ready();                                       \
    if (!tsr_real.real) return CUDA_ERROR_NOT_INITIALIZED;  \
    if (tsr_shim.tenant.governed && tsr__governed(lease)) { \
      tsr__refusing();                                      \
      return CUDA_ERROR_NOT_SUPPORTED;                      \
    }                                                       \
    return call;                                            \
  } while (0)

TSR_EXPORT CUresult cuMemAlloc(unsigned int *dptr, unsigned int bytesize) {
  TSR__REFUSE_OR(cuMemAlloc, tsr_shim_current_lease(), tsr_real.cuMemAlloc(dptr, bytesize));
}

TSR_EXPORT CUresult cuMemAllocPitch(unsigned int *dptr, unsigned int *pitch, unsigned int width, unsigned int height,
                                    unsigned int element) {
  TSR__REFUSE_OR(cuMemAllocPitch, tsr_shim_current_lease(),
                 tsr_real.cuMemAllocPitch(dptr, pitch, width, height, element));
}

TSR_EXPORT CUresult cuMemFree(unsigned int dptr) {
  TSR__REFUSE_OR(cuMemFree, tsr_shim_current_lease(), tsr_real.cuMemFree(dptr));
}

TSR_EXPORT CUresult cuArrayCreate(CUarray *handle, const void *desc) {
  TSR__REFUSE_OR(cuArrayCreate, tsr_shim_current_lease(), tsr_real.cuArrayCreate(handle, desc));
}

TSR_EXPORT CUresult cuArray3DCreate(CUarray *handle, const void *desc) {
  TSR__REFUSE_OR(cuArray3DCreate, tsr_shim_current_lease(), tsr_real.cuArray3DCreate(handle, desc));
}

TSR_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  TSR__REFUSE_OR(cuCtxCreate, tsr_shim_lease_of_device(dev), tsr_real.cuCtxCreate(pctx, flags, dev));
}

#undef TSR__REFUSE_OR

static unsigned int tsr__clamp32(size_t v) { return v > 0xffffffffu ? 0xffffffffu : (unsigned int)v; }

TSR_EXPORT CUresult cuMemGetInfo(unsigned int *free_b, unsigned int *total) {
  tsr_shim_ready();
  if (!tsr_real.cuMemGetInfo) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuMemGetInfo(free_b, total);
  size_t f = 0, t = 0;
  if (rc == CUDA_SUCCESS && free_b && total && tsr_shim.tenant.governed && cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS) {
    *free_b = tsr__clamp32(f);
    *total = tsr__clamp32(t);
  }
  return rc;
}

TSR_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
  tsr_shim_ready();
  if (!tsr_real.cuDeviceTotalMem) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuDeviceTotalMem(bytes, dev);
  size_t t = 0;
  if (rc == CUDA_SUCCESS && bytes && tsr_shim.tenant.governed && cuDeviceTotalMem_v2(&t, dev) == CUDA_SUCCESS)
    *bytes = tsr__clamp32(t);
  return rc;
}

/* ---- older versions of the 64-bit ABI: their _v2 siblings' hooks (a
 * driver without the _v2, older than CUDA 11, answers itself) ---- */

TSR_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  tsr_shim_ready();
  if (!tsr_real.cuCtxDestroy) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr_shim.tenant.governed && tsr_real.cuCtxDestroy_v2 ? cuCtxDestroy_v2(ctx) : tsr_real.cuCtxDestroy(ctx);
}

TSR_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  tsr_shim_ready();
  if (!tsr_real.cuDevicePrimaryCtxRelease) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr_shim.tenant.governed && tsr_real.cuDevicePrimaryCtxRelease_v2 ? cuDevicePrimaryCtxRelease_v2(dev)
                                                                           : tsr_real.cuDevicePrimaryCtxRelease(dev);
}

TSR_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  tsr_shim_ready();
  if (!tsr_real.cuDevicePrimaryCtxReset) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr_shim.tenant.governed && tsr_real.cuDevicePrimaryCtxReset_v2 ? cuDevicePrimaryCtxReset_v2(dev)
                                                                         : tsr_real.cuDevicePrimaryCtxReset(dev);
}
