/* procaddr.c: cuGetProcAddress and cuGetProcAddress_v2.
 *
 * The CUDA 12/13 runtime (and PyTorch through it) reaches the driver mostly
 * through these, not by symbol. The real one is asked first, with the very
 * version and flags the caller gave, so the caller gets exactly the entry
 * (versioned, per-thread-stream or legacy) the driver would give; if that
 * entry is one the shim hooks, the hook is handed out instead. Names the
 * shim does not hook get the real pointer, and every error and query
 * result is the driver's own. */
#include "shim/shim.h"

#define TSR_EXPORT __attribute__((visibility("default")))

TSR_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *status) {
  tsr_shim_ready();
  if (!tsr_real.cuGetProcAddress_v2) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, status);
  if (rc == CUDA_SUCCESS && pfn) *pfn = tsr_shim_hook_for(*pfn);
  return rc;
}

TSR_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  tsr_shim_ready();
  if (!tsr_real.cuGetProcAddress) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
  if (rc == CUDA_SUCCESS && pfn) *pfn = tsr_shim_hook_for(*pfn);
  return rc;
}
