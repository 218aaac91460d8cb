/* procaddr.c: cuGetProcAddress and cuGetProcAddress_v2, which the CUDA 12/13
 * runtime (and PyTorch through it) use to reach every other entry, and which
 * the shim interposes; they must answer as the real driver does for every
 * name the fake implements.
 *
 * The table is the H100's own answer (real_h100.txt, "procaddr"): for each
 * base name, the CUDA version from which each exported entry is handed out,
 * once for the default and legacy-stream searches and, where it differs,
 * once for CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (which finds only
 * the _ptds/_ptsz entries of stream-ordered calls: cuMemsetD8 asked at 3020
 * with it is not sufficient). As on the H100:
 *   - _v2: an unknown name or a version before the first entry is
 *     CUDA_SUCCESS with pfn NULL and symbolStatus SYMBOL_NOT_FOUND or
 *     VERSION_NOT_SUFFICIENT ("cuMemAlloc_v2" is an unknown name: callers
 *     pass base names); a version past the driver's (13000) or flags beyond
 *     the two search bits are CUDA_ERROR_INVALID_VALUE, symbolStatus left as
 *     it was; a negative version finds the newest entry;
 *   - the CUDA 11.3 cuGetProcAddress (four arguments) answers an unknown
 *     name or a version too old with CUDA_ERROR_NOT_FOUND and leaves *pfn;
 *   - both work before cuInit.
 * A NULL symbol or pfn crashes the real driver; the fake answers
 * CUDA_ERROR_INVALID_VALUE. Names the real driver knows and the fake does
 * not implement (stream capture among them) are SYMBOL_NOT_FOUND here. */
#include <string.h>

#include "internal.h"

typedef struct {
  const char *name;
  int version;     /* the first CUDA version that gets this entry */
  bool per_thread; /* found only with the per-thread-stream flag */
  void *fn;
} fc_proc_t;

static const fc_proc_t fc_procs[] = {
    {"cuInit", 2000, false, (void *)cuInit},
    {"cuDriverGetVersion", 2020, false, (void *)cuDriverGetVersion},
    {"cuDeviceGetCount", 2000, false, (void *)cuDeviceGetCount},
    {"cuDeviceGet", 2000, false, (void *)cuDeviceGet},
    {"cuDeviceGetName", 2000, false, (void *)cuDeviceGetName},
    {"cuDeviceGetUuid", 9020, false, (void *)cuDeviceGetUuid},
    {"cuDeviceGetUuid", 11040, false, (void *)cuDeviceGetUuid_v2},
    {"cuDeviceTotalMem", 2000, false, (void *)cuDeviceTotalMem},
    {"cuDeviceTotalMem", 3020, false, (void *)cuDeviceTotalMem_v2},
    {"cuDeviceGetAttribute", 2000, false, (void *)cuDeviceGetAttribute},
    {"cuDeviceGetPCIBusId", 4010, false, (void *)cuDeviceGetPCIBusId},
    {"cuDevicePrimaryCtxRetain", 7000, false, (void *)cuDevicePrimaryCtxRetain},
    {"cuDevicePrimaryCtxRelease", 7000, false, (void *)cuDevicePrimaryCtxRelease},
    {"cuDevicePrimaryCtxRelease", 11000, false, (void *)cuDevicePrimaryCtxRelease_v2},
    {"cuDevicePrimaryCtxReset", 7000, false, (void *)cuDevicePrimaryCtxReset},
    {"cuDevicePrimaryCtxReset", 11000, false, (void *)cuDevicePrimaryCtxReset_v2},
    {"cuDevicePrimaryCtxGetState", 7000, false, (void *)cuDevicePrimaryCtxGetState},
    {"cuDevicePrimaryCtxSetFlags", 7000, false, (void *)cuDevicePrimaryCtxSetFlags},
    {"cuDevicePrimaryCtxSetFlags", 11000, false, (void *)cuDevicePrimaryCtxSetFlags_v2},
    {"cuCtxCreate", 2000, false, (void *)cuCtxCreate},
    {"cuCtxCreate", 3020, false, (void *)cuCtxCreate_v2},
    {"cuCtxCreate", 11040, false, (void *)cuCtxCreate_v3},
    {"cuCtxCreate", 12050, false, (void *)cuCtxCreate_v4},
    {"cuCtxDestroy", 2000, false, (void *)cuCtxDestroy},
    {"cuCtxDestroy", 4000, false, (void *)cuCtxDestroy_v2},
    {"cuCtxSetCurrent", 4000, false, (void *)cuCtxSetCurrent},
    {"cuCtxGetCurrent", 4000, false, (void *)cuCtxGetCurrent},
    {"cuCtxPushCurrent", 2000, false, (void *)cuCtxPushCurrent},
    {"cuCtxPushCurrent", 4000, false, (void *)cuCtxPushCurrent_v2},
    {"cuCtxPopCurrent", 2000, false, (void *)cuCtxPopCurrent},
    {"cuCtxPopCurrent", 4000, false, (void *)cuCtxPopCurrent_v2},
    {"cuCtxGetDevice", 2000, false, (void *)cuCtxGetDevice},
    {"cuCtxGetDevice", 13000, false, (void *)cuCtxGetDevice_v2},
    {"cuCtxSynchronize", 2000, false, (void *)cuCtxSynchronize},
    {"cuCtxSynchronize", 13000, false, (void *)cuCtxSynchronize_v2},
    {"cuCtxSetLimit", 3010, false, (void *)cuCtxSetLimit},
    {"cuCtxGetLimit", 3010, false, (void *)cuCtxGetLimit},
    {"cuMemGetInfo", 2000, false, (void *)cuMemGetInfo},
    {"cuMemGetInfo", 3020, false, (void *)cuMemGetInfo_v2},
    {"cuMemAlloc", 2000, false, (void *)cuMemAlloc},
    {"cuMemAlloc", 3020, false, (void *)cuMemAlloc_v2},
    {"cuMemAllocPitch", 2000, false, (void *)cuMemAllocPitch},
    {"cuMemAllocPitch", 3020, false, (void *)cuMemAllocPitch_v2},
    {"cuMemAllocManaged", 6000, false, (void *)cuMemAllocManaged},
    {"cuMemFree", 2000, false, (void *)cuMemFree},
    {"cuMemFree", 3020, false, (void *)cuMemFree_v2},
    {"cuMemAllocHost", 2000, false, (void *)cuMemAllocHost},
    {"cuMemAllocHost", 3020, false, (void *)cuMemAllocHost_v2},
    {"cuMemFreeHost", 2000, false, (void *)cuMemFreeHost},
    {"cuMemsetD8", 2000, false, (void *)cuMemsetD8},
    {"cuMemsetD8", 3020, false, (void *)cuMemsetD8_v2},
    {"cuMemsetD8", 7000, true, (void *)cuMemsetD8_v2_ptds},
    {"cuMemcpyHtoD", 2000, false, (void *)cuMemcpyHtoD},
    {"cuMemcpyHtoD", 3020, false, (void *)cuMemcpyHtoD_v2},
    {"cuMemcpyHtoD", 7000, true, (void *)cuMemcpyHtoD_v2_ptds},
    {"cuMemcpyDtoH", 2000, false, (void *)cuMemcpyDtoH},
    {"cuMemcpyDtoH", 3020, false, (void *)cuMemcpyDtoH_v2},
    {"cuMemcpyDtoH", 7000, true, (void *)cuMemcpyDtoH_v2_ptds},
    {"cuStreamCreate", 2000, false, (void *)cuStreamCreate},
    {"cuStreamDestroy", 2000, false, (void *)cuStreamDestroy},
    {"cuStreamDestroy", 4000, false, (void *)cuStreamDestroy_v2},
    {"cuStreamSynchronize", 2000, false, (void *)cuStreamSynchronize},
    {"cuStreamSynchronize", 7000, true, (void *)cuStreamSynchronize_ptsz},
    {"cuStreamQuery", 2000, false, (void *)cuStreamQuery},
    {"cuStreamQuery", 7000, true, (void *)cuStreamQuery_ptsz},
    {"cuEventCreate", 2000, false, (void *)cuEventCreate},
    {"cuEventDestroy", 2000, false, (void *)cuEventDestroy},
    {"cuEventDestroy", 4000, false, (void *)cuEventDestroy_v2},
    {"cuEventRecord", 2000, false, (void *)cuEventRecord},
    {"cuEventRecord", 7000, true, (void *)cuEventRecord_ptsz},
    {"cuEventRecordWithFlags", 11010, false, (void *)cuEventRecordWithFlags},
    {"cuEventRecordWithFlags", 11010, true, (void *)cuEventRecordWithFlags_ptsz},
    {"cuEventQuery", 2000, false, (void *)cuEventQuery},
    {"cuEventSynchronize", 2000, false, (void *)cuEventSynchronize},
    {"cuEventElapsedTime", 2000, false, (void *)cuEventElapsedTime},
    {"cuEventElapsedTime", 12080, false, (void *)cuEventElapsedTime_v2},
    {"cuMemAllocAsync", 11020, false, (void *)cuMemAllocAsync},
    {"cuMemAllocAsync", 11020, true, (void *)cuMemAllocAsync_ptsz},
    {"cuMemFreeAsync", 11020, false, (void *)cuMemFreeAsync},
    {"cuMemFreeAsync", 11020, true, (void *)cuMemFreeAsync_ptsz},
    {"cuDeviceGetDefaultMemPool", 11020, false, (void *)cuDeviceGetDefaultMemPool},
    {"cuMemPoolCreate", 11020, false, (void *)cuMemPoolCreate},
    {"cuDeviceGetMemPool", 11020, false, (void *)cuDeviceGetMemPool},
    {"cuLibraryLoadData", 12000, false, (void *)cuLibraryLoadData},
    {"cuLibraryLoadFromFile", 12000, false, (void *)cuLibraryLoadFromFile},
    {"cuLibraryUnload", 12000, false, (void *)cuLibraryUnload},
    {"cuLibraryGetKernel", 12000, false, (void *)cuLibraryGetKernel},
    {"cuKernelGetFunction", 12000, false, (void *)cuKernelGetFunction},
    {"cuKernelGetName", 12030, false, (void *)cuKernelGetName},
    {"cuStreamBeginCapture", 10000, false, (void *)cuStreamBeginCapture},
    {"cuStreamBeginCapture", 10010, false, (void *)cuStreamBeginCapture_v2},
    {"cuStreamBeginCapture", 10000, true, (void *)cuStreamBeginCapture_ptsz},
    {"cuStreamBeginCapture", 10010, true, (void *)cuStreamBeginCapture_v2_ptsz},
    {"cuStreamBeginCaptureToGraph", 12030, false, (void *)cuStreamBeginCaptureToGraph},
    {"cuStreamBeginCaptureToGraph", 12030, true, (void *)cuStreamBeginCaptureToGraph_ptsz},
    {"cuStreamEndCapture", 10000, false, (void *)cuStreamEndCapture},
    {"cuStreamEndCapture", 10000, true, (void *)cuStreamEndCapture_ptsz},
    {"cuStreamIsCapturing", 10000, false, (void *)cuStreamIsCapturing},
    {"cuStreamIsCapturing", 10000, true, (void *)cuStreamIsCapturing_ptsz},
    {"cuDeviceGetGraphMemAttribute", 11040, false, (void *)cuDeviceGetGraphMemAttribute},
    {"cuMemPoolDestroy", 11020, false, (void *)cuMemPoolDestroy},
    {"cuMemAllocFromPoolAsync", 11020, false, (void *)cuMemAllocFromPoolAsync},
    {"cuMemAllocFromPoolAsync", 11020, true, (void *)cuMemAllocFromPoolAsync_ptsz},
    {"cuMemPoolTrimTo", 11020, false, (void *)cuMemPoolTrimTo},
    {"cuMemPoolSetAttribute", 11020, false, (void *)cuMemPoolSetAttribute},
    {"cuMemPoolGetAttribute", 11020, false, (void *)cuMemPoolGetAttribute},
    {"cuMemGetAllocationGranularity", 10020, false, (void *)cuMemGetAllocationGranularity},
    {"cuMemCreate", 10020, false, (void *)cuMemCreate},
    {"cuMemRelease", 10020, false, (void *)cuMemRelease},
    {"cuMemAddressReserve", 10020, false, (void *)cuMemAddressReserve},
    {"cuMemAddressFree", 10020, false, (void *)cuMemAddressFree},
    {"cuMemMap", 10020, false, (void *)cuMemMap},
    {"cuMemUnmap", 10020, false, (void *)cuMemUnmap},
    {"cuMemSetAccess", 10020, false, (void *)cuMemSetAccess},
    {"cuArrayCreate", 2000, false, (void *)cuArrayCreate},
    {"cuArrayCreate", 3020, false, (void *)cuArrayCreate_v2},
    {"cuArray3DCreate", 2000, false, (void *)cuArray3DCreate},
    {"cuArray3DCreate", 3020, false, (void *)cuArray3DCreate_v2},
    {"cuArrayDestroy", 2000, false, (void *)cuArrayDestroy},
    {"cuMipmappedArrayCreate", 5000, false, (void *)cuMipmappedArrayCreate},
    {"cuMipmappedArrayDestroy", 5000, false, (void *)cuMipmappedArrayDestroy},
    {"cuGraphCreate", 10000, false, (void *)cuGraphCreate},
    {"cuGraphDestroy", 10000, false, (void *)cuGraphDestroy},
    {"cuGraphAddMemAllocNode", 11040, false, (void *)cuGraphAddMemAllocNode},
    {"cuGraphAddMemFreeNode", 11040, false, (void *)cuGraphAddMemFreeNode},
    {"cuGraphAddKernelNode", 10000, false, (void *)cuGraphAddKernelNode},
    {"cuGraphAddKernelNode", 12000, false, (void *)cuGraphAddKernelNode_v2},
    {"cuGraphKernelNodeGetParams", 10000, false, (void *)cuGraphKernelNodeGetParams},
    {"cuGraphKernelNodeGetParams", 12000, false, (void *)cuGraphKernelNodeGetParams_v2},
    {"cuGraphKernelNodeSetParams", 10000, false, (void *)cuGraphKernelNodeSetParams},
    {"cuGraphKernelNodeSetParams", 12000, false, (void *)cuGraphKernelNodeSetParams_v2},
    {"cuGraphAddEmptyNode", 10000, false, (void *)cuGraphAddEmptyNode},
    {"cuGraphAddChildGraphNode", 10000, false, (void *)cuGraphAddChildGraphNode},
    {"cuGraphChildGraphNodeGetGraph", 10000, false, (void *)cuGraphChildGraphNodeGetGraph},
    {"cuGraphGetNodes", 10000, false, (void *)cuGraphGetNodes},
    {"cuGraphNodeGetType", 10000, false, (void *)cuGraphNodeGetType},
    {"cuGraphExecKernelNodeSetParams", 10010, false, (void *)cuGraphExecKernelNodeSetParams},
    {"cuGraphExecKernelNodeSetParams", 12000, false, (void *)cuGraphExecKernelNodeSetParams_v2},
    {"cuGraphExecUpdate", 10020, false, (void *)cuGraphExecUpdate},
    {"cuGraphExecUpdate", 12000, false, (void *)cuGraphExecUpdate_v2},
    {"cuGraphInstantiate", 10000, false, (void *)cuGraphInstantiate},
    {"cuGraphInstantiate", 11000, false, (void *)cuGraphInstantiate_v2},
    {"cuGraphInstantiateWithFlags", 11040, false, (void *)cuGraphInstantiateWithFlags},
    {"cuGraphLaunch", 10000, false, (void *)cuGraphLaunch},
    {"cuGraphLaunch", 10000, true, (void *)cuGraphLaunch_ptsz},
    {"cuGraphExecDestroy", 10000, false, (void *)cuGraphExecDestroy},
    {"cuDeviceGraphMemTrim", 11040, false, (void *)cuDeviceGraphMemTrim},
    /* not asked of the H100: the versions are the reference's (the CUDA
     * release that added each entry) */
    {"cuGraphMemAllocNodeGetParams", 11040, false, (void *)cuGraphMemAllocNodeGetParams},
    {"cuGraphInstantiateWithParams", 12000, false, (void *)cuGraphInstantiateWithParams},
    {"cuGraphInstantiateWithParams", 12000, true, (void *)cuGraphInstantiateWithParams_ptsz},
    {"cuGraphUpload", 11010, false, (void *)cuGraphUpload},
    {"cuGraphUpload", 11010, true, (void *)cuGraphUpload_ptsz},
    {"cuDeviceGetDevResource", 12040, false, (void *)cuDeviceGetDevResource},
    {"cuDevResourceGenerateDesc", 12040, false, (void *)cuDevResourceGenerateDesc},
    {"cuGreenCtxCreate", 12040, false, (void *)cuGreenCtxCreate},
    {"cuGreenCtxDestroy", 12040, false, (void *)cuGreenCtxDestroy},
    {"cuCtxFromGreenCtx", 12040, false, (void *)cuCtxFromGreenCtx},
    {"cuModuleLoadData", 2000, false, (void *)cuModuleLoadData},
    {"cuModuleLoad", 2000, false, (void *)cuModuleLoad},
    {"cuModuleUnload", 2000, false, (void *)cuModuleUnload},
    {"cuModuleGetFunction", 2000, false, (void *)cuModuleGetFunction},
    {"cuFuncGetName", 12030, false, (void *)cuFuncGetName},
    {"cuLaunchKernel", 4000, false, (void *)cuLaunchKernel},
    {"cuLaunchKernel", 7000, true, (void *)cuLaunchKernel_ptsz},
    {"cuLaunchKernelEx", 11060, false, (void *)cuLaunchKernelEx},
    {"cuLaunchKernelEx", 11060, true, (void *)cuLaunchKernelEx_ptsz},
    {"cuLaunchCooperativeKernel", 9000, false, (void *)cuLaunchCooperativeKernel},
    {"cuLaunchCooperativeKernel", 9000, true, (void *)cuLaunchCooperativeKernel_ptsz},
    {"cuGetErrorString", 6000, false, (void *)cuGetErrorString},
    {"cuGetErrorName", 6000, false, (void *)cuGetErrorName},
    {"cuGetProcAddress", 11030, false, (void *)cuGetProcAddress},
    {"cuGetProcAddress", 12000, false, (void *)cuGetProcAddress_v2},
};

/* The entry for `symbol` at `version` and `flags`, or NULL with *out_status
 * saying why. */
static void *fc_proc_find(const char *symbol, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult *out_status) {
  bool known = false, has_pt = false;
  for (size_t i = 0; i < sizeof fc_procs / sizeof fc_procs[0]; i++)
    if (strcmp(fc_procs[i].name, symbol) == 0) {
      known = true;
      has_pt |= fc_procs[i].per_thread;
    }
  if (!known) {
    *out_status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return NULL;
  }
  bool want_pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && has_pt;
  const fc_proc_t *best = NULL;
  for (size_t i = 0; i < sizeof fc_procs / sizeof fc_procs[0]; i++) {
    const fc_proc_t *p = &fc_procs[i];
    if (strcmp(p->name, symbol) != 0 || p->per_thread != want_pt) continue;
    if (version >= 0 && p->version > version) continue;
    if (!best || p->version > best->version) best = p;
  }
  *out_status = best ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  return best ? best->fn : NULL;
}

static CUresult fc_proc_check(const char *symbol, void **pfn, int version, cuuint64_t flags) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    return CUDA_ERROR_INVALID_VALUE;
  /* "If the specified CUDA version is greater than the driver version, the
   * API will return CUDA_ERROR_INVALID_VALUE" */
  if (version > FC_DRIVER_VERSION) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus) {
  CUresult rc = fc_proc_check(symbol, pfn, cudaVersion, flags);
  if (rc != CUDA_SUCCESS) return rc;
  CUdriverProcAddressQueryResult st;
  *pfn = fc_proc_find(symbol, cudaVersion, flags, &st);
  if (symbolStatus) *symbolStatus = st;
  return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  CUresult rc = fc_proc_check(symbol, pfn, cudaVersion, flags);
  if (rc != CUDA_SUCCESS) return rc;
  CUdriverProcAddressQueryResult st;
  void *fn = fc_proc_find(symbol, cudaVersion, flags, &st);
  if (!fn) return CUDA_ERROR_NOT_FOUND;
  *pfn = fn;
  return CUDA_SUCCESS;
}
