/* green.c: green contexts (CUDA 12.4), refused on a governed device.
 *
 * cuGreenCtxCreate "will retain the primary context on device dev" inside
 * the driver, past the shim's cuDevicePrimaryCtxRetain: a process that had
 * not retained it gets a context's memory (523 MiB on the H100) that no
 * lease was charged, and the green context's own resources (its default
 * stream, its share of the SMs) have never been measured. So on a device
 * with a lease, or without one under the deny policy, the shim answers
 * CUDA_ERROR_NOT_SUPPORTED (one of the entry's documented errors) before
 * the driver is asked, and says so once on stderr. No green context can
 * then exist on a governed device, and cuGreenCtxDestroy, cuCtxFromGreenCtx,
 * cuGreenCtxStreamCreate and the cuDevResource* entries, which take no
 * device memory of their own, are left to the driver. A device the process
 * is not governed on (no lease under the pass policy) gets the driver's
 * green contexts. */
#include "shim/shim.h"

#define TSR_EXPORT __attribute__((visibility("default")))

TSR_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *pctx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  tsr_shim_ready();
  if (!tsr_real.cuGreenCtxCreate) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pctx || !tsr_shim.tenant.governed) return tsr_real.cuGreenCtxCreate(pctx, desc, dev, flags);
  int lease = tsr_shim_lease_of_device(dev);
  if (lease >= 0 || (lease == TSR_TENANT_NO_LEASE && tsr_shim.tenant.deny)) {
    tsr_shim_warn_once(TSR_WARN_GREEN_CONTEXT,
                       "green contexts are not supported on a leased device (cuGreenCtxCreate refused)");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return tsr_real.cuGreenCtxCreate(pctx, desc, dev, flags);
}
