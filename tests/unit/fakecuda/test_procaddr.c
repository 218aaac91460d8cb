/* unit.fakecuda_procaddr: cuGetProcAddress and cuGetProcAddress_v2 hand out
 * the entry the real driver would for every name the fake implements, the
 * pointers work, and other names and versions get the real driver's
 * answers. (unit.fakecuda_conformance compares the whole table, at every
 * version, with the H100's.) */
#include <dlfcn.h>
#include <string.h>

#include "fc_test.h"

/* base name, the entry at CUDA 13.0, and with the per-thread-stream flag */
static const struct {
  const char *name, *entry, *per_thread;
} expect[] = {
    {"cuInit", "cuInit", NULL},
    {"cuDriverGetVersion", "cuDriverGetVersion", NULL},
    {"cuDeviceGetCount", "cuDeviceGetCount", NULL},
    {"cuDeviceGet", "cuDeviceGet", NULL},
    {"cuDeviceGetName", "cuDeviceGetName", NULL},
    {"cuDeviceGetUuid", "cuDeviceGetUuid_v2", NULL},
    {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", NULL},
    {"cuDeviceGetAttribute", "cuDeviceGetAttribute", NULL},
    {"cuDeviceGetPCIBusId", "cuDeviceGetPCIBusId", NULL},
    {"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", NULL},
    {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", NULL},
    {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", NULL},
    {"cuDevicePrimaryCtxGetState", "cuDevicePrimaryCtxGetState", NULL},
    {"cuCtxCreate", "cuCtxCreate_v4", NULL},
    {"cuCtxDestroy", "cuCtxDestroy_v2", NULL},
    {"cuCtxSetCurrent", "cuCtxSetCurrent", NULL},
    {"cuCtxGetCurrent", "cuCtxGetCurrent", NULL},
    {"cuCtxPushCurrent", "cuCtxPushCurrent_v2", NULL},
    {"cuCtxPopCurrent", "cuCtxPopCurrent_v2", NULL},
    {"cuCtxGetDevice", "cuCtxGetDevice_v2", NULL},
    {"cuCtxSynchronize", "cuCtxSynchronize_v2", NULL},
    {"cuCtxSetLimit", "cuCtxSetLimit", NULL},
    {"cuCtxGetLimit", "cuCtxGetLimit", NULL},
    {"cuMemGetInfo", "cuMemGetInfo_v2", NULL},
    {"cuMemAlloc", "cuMemAlloc_v2", NULL},
    {"cuMemAllocPitch", "cuMemAllocPitch_v2", NULL},
    {"cuMemAllocManaged", "cuMemAllocManaged", NULL},
    {"cuMemFree", "cuMemFree_v2", NULL},
    {"cuMemAllocHost", "cuMemAllocHost_v2", NULL},
    {"cuMemFreeHost", "cuMemFreeHost", NULL},
    {"cuMemsetD8", "cuMemsetD8_v2", "cuMemsetD8_v2_ptds"},
    {"cuMemcpyHtoD", "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"},
    {"cuMemcpyDtoH", "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"},
    {"cuStreamCreate", "cuStreamCreate", NULL},
    {"cuStreamDestroy", "cuStreamDestroy_v2", NULL},
    {"cuStreamSynchronize", "cuStreamSynchronize", "cuStreamSynchronize_ptsz"},
    {"cuMemAllocAsync", "cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
    {"cuMemFreeAsync", "cuMemFreeAsync", "cuMemFreeAsync_ptsz"},
    {"cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool", NULL},
    {"cuMemPoolCreate", "cuMemPoolCreate", NULL},
    {"cuMemPoolDestroy", "cuMemPoolDestroy", NULL},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"},
    {"cuMemPoolTrimTo", "cuMemPoolTrimTo", NULL},
    {"cuMemPoolSetAttribute", "cuMemPoolSetAttribute", NULL},
    {"cuMemPoolGetAttribute", "cuMemPoolGetAttribute", NULL},
    {"cuMemGetAllocationGranularity", "cuMemGetAllocationGranularity", NULL},
    {"cuMemCreate", "cuMemCreate", NULL},
    {"cuMemRelease", "cuMemRelease", NULL},
    {"cuMemAddressReserve", "cuMemAddressReserve", NULL},
    {"cuMemAddressFree", "cuMemAddressFree", NULL},
    {"cuMemMap", "cuMemMap", NULL},
    {"cuMemUnmap", "cuMemUnmap", NULL},
    {"cuMemSetAccess", "cuMemSetAccess", NULL},
    {"cuArrayCreate", "cuArrayCreate_v2", NULL},
    {"cuArray3DCreate", "cuArray3DCreate_v2", NULL},
    {"cuArrayDestroy", "cuArrayDestroy", NULL},
    {"cuMipmappedArrayCreate", "cuMipmappedArrayCreate", NULL},
    {"cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy", NULL},
    {"cuGraphCreate", "cuGraphCreate", NULL},
    {"cuGraphDestroy", "cuGraphDestroy", NULL},
    {"cuGraphAddMemAllocNode", "cuGraphAddMemAllocNode", NULL},
    {"cuGraphAddMemFreeNode", "cuGraphAddMemFreeNode", NULL},
    {"cuGraphInstantiate", "cuGraphInstantiate_v2", NULL},
    {"cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags", NULL},
    {"cuGraphLaunch", "cuGraphLaunch", "cuGraphLaunch_ptsz"},
    {"cuGraphExecDestroy", "cuGraphExecDestroy", NULL},
    {"cuDeviceGraphMemTrim", "cuDeviceGraphMemTrim", NULL},
    {"cuModuleLoadData", "cuModuleLoadData", NULL},
    {"cuModuleLoad", "cuModuleLoad", NULL},
    {"cuModuleUnload", "cuModuleUnload", NULL},
    {"cuModuleGetFunction", "cuModuleGetFunction", NULL},
    {"cuFuncGetName", "cuFuncGetName", NULL},
    {"cuLaunchKernel", "cuLaunchKernel", "cuLaunchKernel_ptsz"},
    {"cuLaunchKernelEx", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"},
    {"cuGetErrorString", "cuGetErrorString", NULL},
    {"cuGetErrorName", "cuGetErrorName", NULL},
    {"cuGetProcAddress", "cuGetProcAddress_v2", NULL},
    /* time, events, capture, graph kernel nodes */
    {"cuStreamQuery", "cuStreamQuery", "cuStreamQuery_ptsz"},
    {"cuEventCreate", "cuEventCreate", NULL},
    {"cuEventDestroy", "cuEventDestroy_v2", NULL},
    {"cuEventRecord", "cuEventRecord", "cuEventRecord_ptsz"},
    {"cuEventRecordWithFlags", "cuEventRecordWithFlags", "cuEventRecordWithFlags_ptsz"},
    {"cuEventQuery", "cuEventQuery", NULL},
    {"cuEventSynchronize", "cuEventSynchronize", NULL},
    {"cuEventElapsedTime", "cuEventElapsedTime_v2", NULL},
    {"cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz"},
    {"cuStreamBeginCapture", "cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz"},
    {"cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph_ptsz"},
    {"cuStreamEndCapture", "cuStreamEndCapture", "cuStreamEndCapture_ptsz"},
    {"cuStreamIsCapturing", "cuStreamIsCapturing", "cuStreamIsCapturing_ptsz"},
    {"cuGraphAddKernelNode", "cuGraphAddKernelNode_v2", NULL},
    {"cuGraphKernelNodeGetParams", "cuGraphKernelNodeGetParams_v2", NULL},
    {"cuGraphKernelNodeSetParams", "cuGraphKernelNodeSetParams_v2", NULL},
    {"cuGraphAddEmptyNode", "cuGraphAddEmptyNode", NULL},
    {"cuGraphAddChildGraphNode", "cuGraphAddChildGraphNode", NULL},
    {"cuGraphChildGraphNodeGetGraph", "cuGraphChildGraphNodeGetGraph", NULL},
    {"cuGraphGetNodes", "cuGraphGetNodes", NULL},
    {"cuGraphNodeGetType", "cuGraphNodeGetType", NULL},
    {"cuGraphExecKernelNodeSetParams", "cuGraphExecKernelNodeSetParams_v2", NULL},
    {"cuGraphExecUpdate", "cuGraphExecUpdate_v2", NULL},
    {"cuKernelGetName", "cuKernelGetName", NULL},
};

Test(procaddr, every_name_gives_its_entry) {
  for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
    for (int pt = 0; pt < 2; pt++) {
      const char *want = pt && expect[i].per_thread ? expect[i].per_thread : expect[i].entry;
      void *sym = dlsym(RTLD_DEFAULT, want);
      cr_assert_not_null(sym, "libcuda.so.1 exports %s", want);
      void *pfn = NULL;
      CUdriverProcAddressQueryResult st = 99;
      cuuint64_t flags = pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
      CU_OK(cuGetProcAddress(expect[i].name, &pfn, 13000, flags, &st));
      cr_assert_eq(st, CU_GET_PROC_ADDRESS_SUCCESS, "%s", expect[i].name);
      cr_assert_eq(pfn, sym, "%s (flags %llu) should give %s", expect[i].name, (unsigned long long)flags, want);
      /* the legacy-stream search never gives a per-thread entry */
      CU_OK(cuGetProcAddress(expect[i].name, &pfn, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st));
      cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, expect[i].entry), "%s", expect[i].name);
    }
  }
}

Test(procaddr, older_versions_give_older_entries) {
  void *pfn;
  CUdriverProcAddressQueryResult st;
  CU_OK(cuGetProcAddress("cuMemAlloc", &pfn, 3010, 0, &st));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuMemAlloc"), "the 32-bit entry before CUDA 3.2");
  CU_OK(cuGetProcAddress("cuMemAlloc", &pfn, 3020, 0, &st));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  CU_OK(cuGetProcAddress("cuCtxCreate", &pfn, 12000, 0, &st));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuCtxCreate_v3"));
  CU_OK(cuGetProcAddress("cuGetProcAddress", &pfn, 11080, 0, &st));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuGetProcAddress"));
  CU_OK(cuGetProcAddress("cuCtxSynchronize", &pfn, 12080, 0, &st));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuCtxSynchronize"));
  /* capture: CUDA 10.0's entries (no mode), then 10.1's, as on the H100 */
  CU_OK(cuGetProcAddress("cuStreamBeginCapture", &pfn, 10000, 0, &st));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuStreamBeginCapture"));
  CU_OK(cuGetProcAddress("cuStreamBeginCapture", &pfn, 10010, 0, &st));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuStreamBeginCapture_v2"));
  CU_OK(cuGetProcAddress("cuStreamBeginCapture", &pfn, 10000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuStreamBeginCapture_ptsz"));
  CU_OK(cuGetProcAddress("cuEventElapsedTime", &pfn, 12000, 0, &st));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuEventElapsedTime"));
  /* a version before the first entry, per-thread too */
  pfn = (void *)1;
  CU_OK(cuGetProcAddress("cuMemAllocAsync", &pfn, 11010, 0, &st));
  cr_assert_null(pfn);
  cr_assert_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  CU_OK(cuGetProcAddress("cuMemsetD8", &pfn, 6050, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  cr_assert_null(pfn);
  cr_assert_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

Test(procaddr, unknown_names_and_bad_arguments) {
  void *pfn = (void *)1;
  CUdriverProcAddressQueryResult st = 99;
  CU_OK(cuGetProcAddress("cuNoSuchFunction", &pfn, 13000, 0, &st));
  cr_assert_null(pfn);
  cr_assert_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  CU_OK(cuGetProcAddress("cuMemAlloc_v2", &pfn, 13000, 0, &st));
  cr_assert_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "callers pass base names");
  CU_OK(cuGetProcAddress("cuNoSuchFunction", &pfn, 13000, 0, NULL)); /* the status is optional */
  st = 99;
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress("cuMemAlloc", &pfn, 13010, 0, &st));
  cr_assert_eq(st, 99, "left as it was");
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress("cuMemAlloc", &pfn, 13000, 4, &st));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress(NULL, &pfn, 13000, 0, &st));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress("cuMemAlloc", NULL, 13000, 0, &st));
  CU_OK(cuGetProcAddress("cuMemAlloc", &pfn, -1, 0, &st));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), "a negative version: the newest entry");
}

Test(procaddr, cuda_11_3_entry_answers_not_found) {
  CUresult (*v1)(const char *, void **, int, cuuint64_t) =
      (CUresult(*)(const char *, void **, int, cuuint64_t))dlsym(RTLD_DEFAULT, "cuGetProcAddress");
  cr_assert_not_null(v1);
  void *pfn = (void *)1;
  CU_EXPECT(CUDA_ERROR_NOT_FOUND, v1("cuNoSuchFunction", &pfn, 13000, 0));
  cr_assert_eq(pfn, (void *)1, "*pfn is left as it was");
  CU_EXPECT(CUDA_ERROR_NOT_FOUND, v1("cuMemAllocAsync", &pfn, 11000, 0));
  CU_OK(v1("cuMemFree", &pfn, 13000, 0));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuMemFree_v2"));
}

/* The pointers work, before cuInit too for the calls that do. */
Test(procaddr, pointers_work) {
  void *pfn;
  CUdriverProcAddressQueryResult st;
  CU_OK(cuGetProcAddress("cuDriverGetVersion", &pfn, 13000, 0, &st));
  int v = 0;
  CU_OK(((CUresult(*)(int *))pfn)(&v));
  cr_assert_eq(v, 13000);
  CU_OK(cuGetProcAddress("cuInit", &pfn, 13000, 0, &st));
  CU_OK(((CUresult(*)(unsigned))pfn)(0));
  CUcontext c;
  CU_OK(cuGetProcAddress("cuDevicePrimaryCtxRetain", &pfn, 13000, 0, &st));
  CU_OK(((CUresult(*)(CUcontext *, CUdevice))pfn)(&c, 0));
  CU_OK(cuGetProcAddress("cuCtxSetCurrent", &pfn, 13000, 0, &st));
  CU_OK(((CUresult(*)(CUcontext))pfn)(c));
  void *alloc, *free_fn, *info, *async, *free_async;
  CU_OK(cuGetProcAddress("cuMemAlloc", &alloc, 13000, 0, &st));
  CU_OK(cuGetProcAddress("cuMemFree", &free_fn, 13000, 0, &st));
  CU_OK(cuGetProcAddress("cuMemGetInfo", &info, 13000, 0, &st));
  CU_OK(cuGetProcAddress("cuMemAllocAsync", &async, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  CU_OK(cuGetProcAddress("cuMemFreeAsync", &free_async, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  size_t f0, f1, t;
  CU_OK(((CUresult(*)(size_t *, size_t *))info)(&f0, &t));
  CUdeviceptr p, q;
  CU_OK(((CUresult(*)(CUdeviceptr *, size_t))alloc)(&p, 10 * MiB));
  CU_OK(((CUresult(*)(CUdeviceptr *, size_t, CUstream))async)(&q, 10 * MiB, CU_STREAM_PER_THREAD));
  CU_OK(((CUresult(*)(size_t *, size_t *))info)(&f1, &t));
  cr_assert_eq(f0 - f1, 20 * MiB);
  CU_OK(((CUresult(*)(CUdeviceptr))free_fn)(p));
  CU_OK(((CUresult(*)(CUdeviceptr, CUstream))free_async)(q, CU_STREAM_PER_THREAD));
  CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  CU_OK(((CUresult(*)(size_t *, size_t *))info)(&f1, &t));
  cr_assert_eq(f1, f0);
  /* cuGetProcAddress through itself */
  CU_OK(cuGetProcAddress("cuGetProcAddress", &pfn, 13000, 0, &st));
  void *again = NULL;
  CU_OK(((CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))pfn)(
      "cuGetErrorName", &again, 13000, 0, &st));
  const char *name = NULL;
  CU_OK(((CUresult(*)(CUresult, const char **))again)(CUDA_ERROR_OUT_OF_MEMORY, &name));
  cr_assert_str_eq(name, "CUDA_ERROR_OUT_OF_MEMORY");
}
