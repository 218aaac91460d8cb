/* real.c: the real CUDA driver, and which of its entries the shim hooks.
 *
 * The driver is opened with dlopen("libcuda.so.1") (TESSERA_REAL_LIBCUDA
 * overrides the name, for tests); dlsym on that handle finds the library's
 * own definitions even though the shim, preloaded, defines the same names
 * in the global scope. The table below pairs each hooked name with its hook;
 * cuGetProcAddress hands out the hook whenever the driver would hand out
 * the real entry, whatever version or flags were asked for, by comparing
 * the pointer it got with the real entries of this table. The exported
 * dlsym answers only those names itself (and only they load the driver);
 * every other lookup goes on to libc's dlsym as if the shim were not there
 * (tenant/dlsym.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim/shim.h"

tsr_shim_real_t tsr_real;

static void *tsr__libcuda;

typedef struct {
  const char *name;
  void **real; /* where tsr_real keeps it */
  void *hook;
} tsr__entry_t;

#define TSR__E(fn) \
  { #fn, (void **)&tsr_real.fn, (void *)fn }
static const tsr__entry_t tsr__hooked[] = {
    TSR__E(cuMemAlloc_v2),
    TSR__E(cuMemAllocPitch_v2),
    TSR__E(cuMemAllocManaged),
    TSR__E(cuMemFree_v2),
    TSR__E(cuMemAllocAsync),
    TSR__E(cuMemAllocAsync_ptsz),
    TSR__E(cuMemAllocFromPoolAsync),
    TSR__E(cuMemAllocFromPoolAsync_ptsz),
    TSR__E(cuMemFreeAsync),
    TSR__E(cuMemFreeAsync_ptsz),
    TSR__E(cuMemCreate),
    TSR__E(cuMemRelease),
    TSR__E(cuMemGetInfo_v2),
    TSR__E(cuDeviceTotalMem_v2),
    TSR__E(cuMemPoolCreate),
    TSR__E(cuMemPoolDestroy),
    TSR__E(cuMemPoolTrimTo),
    TSR__E(cuArrayCreate_v2),
    TSR__E(cuArray3DCreate_v2),
    TSR__E(cuMipmappedArrayCreate),
    TSR__E(cuArrayDestroy),
    TSR__E(cuMipmappedArrayDestroy),
    TSR__E(cuGraphAddMemAllocNode),
    TSR__E(cuGraphInstantiateWithFlags),
    TSR__E(cuGraphInstantiateWithParams),
    TSR__E(cuGraphInstantiateWithParams_ptsz),
    TSR__E(cuGraphInstantiate_v2),
    TSR__E(cuGraphExecDestroy),
    TSR__E(cuGraphLaunch),
    TSR__E(cuGraphLaunch_ptsz),
    TSR__E(cuGraphUpload),
    TSR__E(cuGraphUpload_ptsz),
    TSR__E(cuDeviceGraphMemTrim),
    TSR__E(cuCtxCreate_v2),
    TSR__E(cuCtxCreate_v3),
    TSR__E(cuCtxCreate_v4),
    TSR__E(cuCtxDestroy_v2),
    TSR__E(cuDevicePrimaryCtxRetain),
    TSR__E(cuDevicePrimaryCtxRelease_v2),
    TSR__E(cuDevicePrimaryCtxReset_v2),
    TSR__E(cuCtxSetLimit),
    TSR__E(cuModuleLoad),
    TSR__E(cuModuleLoadData),
    TSR__E(cuModuleLoadDataEx),
    TSR__E(cuModuleLoadFatBinary),
    TSR__E(cuModuleUnload),
    TSR__E(cuLibraryLoadData),
    TSR__E(cuLibraryLoadFromFile),
    TSR__E(cuLibraryUnload),
    TSR__E(cuGetProcAddress),
    TSR__E(cuGetProcAddress_v2),
    TSR__E(cuLaunchKernel),
    TSR__E(cuLaunchKernel_ptsz),
    TSR__E(cuLaunchKernelEx),
    TSR__E(cuLaunchKernelEx_ptsz),
    TSR__E(cuLaunchCooperativeKernel),
    TSR__E(cuLaunchCooperativeKernel_ptsz),
    TSR__E(cuStreamBeginCapture),
    TSR__E(cuStreamBeginCapture_ptsz),
    TSR__E(cuStreamBeginCapture_v2),
    TSR__E(cuStreamBeginCapture_v2_ptsz),
    TSR__E(cuStreamBeginCaptureToGraph),
    TSR__E(cuStreamBeginCaptureToGraph_ptsz),
    TSR__E(cuStreamEndCapture),
    TSR__E(cuStreamEndCapture_ptsz),
    TSR__E(cuGraphExecUpdate_v2),
    TSR__E(cuGraphExecKernelNodeSetParams_v2),
    TSR__E(cuGreenCtxCreate),
    /* older versions, after the new ones: a driver whose two names are one
     * function gets the new name's hook (legacy.c says how each is held) */
    TSR__E(cuGraphInstantiate),
    TSR__E(cuGraphExecUpdate),
    TSR__E(cuCtxDestroy),
    TSR__E(cuDevicePrimaryCtxRelease),
    TSR__E(cuDevicePrimaryCtxReset),
    TSR__E(cuMemGetInfo),
    TSR__E(cuDeviceTotalMem),
    TSR__E(cuMemAlloc),
    TSR__E(cuMemAllocPitch),
    TSR__E(cuMemFree),
    TSR__E(cuArrayCreate),
    TSR__E(cuArray3DCreate),
    TSR__E(cuCtxCreate),
};

/* Real entries the hooks call but the shim does not hook. */
#define TSR__R(fn) \
  { #fn, (void **)&tsr_real.fn }
static const struct {
  const char *name;
  void **real;
} tsr__used[] = {
    TSR__R(cuCtxGetDevice),
    TSR__R(cuDeviceGetUuid_v2),
    TSR__R(cuDeviceGetUuid),
    TSR__R(cuCtxGetCurrent),
    TSR__R(cuDeviceGetAttribute),
    TSR__R(cuStreamIsCapturing),
    TSR__R(cuStreamIsCapturing_ptsz),
    TSR__R(cuDeviceGetMemPool),
    TSR__R(cuDeviceGetDefaultMemPool),
    TSR__R(cuMemPoolGetAttribute),
    TSR__R(cuDeviceGetGraphMemAttribute),
    TSR__R(cuCtxGetLimit),
    TSR__R(cuGraphGetNodes),
    TSR__R(cuGraphNodeGetType),
    TSR__R(cuGraphKernelNodeGetParams_v2),
    TSR__R(cuGraphChildGraphNodeGetGraph),
    TSR__R(cuFuncGetName),
    TSR__R(cuKernelGetName),
    TSR__R(cuEventCreate),
    TSR__R(cuEventDestroy_v2),
    TSR__R(cuEventRecord),
    TSR__R(cuEventQuery),
    TSR__R(cuEventElapsedTime),
    TSR__R(cuEventElapsedTime_v2),
    TSR__R(cuDeviceGetCount),
    TSR__R(cuGraphMemAllocNodeGetParams),
};
#undef TSR__R
#undef TSR__E

void *tsr_shim_dlsym(void *handle, const char *name) {
  tsr_tenant_dlsym_fn real = tsr_tenant_next_dlsym();
  return real ? real(handle, name) : NULL;
}

static pthread_once_t tsr__load_once = PTHREAD_ONCE_INIT;
static bool tsr__loaded;

static void tsr__load(void) {
  const char *name = tsr_tenant_getenv("TESSERA_REAL_LIBCUDA");
  tsr__libcuda = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!tsr__libcuda) return;
  tsr_tenant_dlsym_fn real = tsr_tenant_next_dlsym();
  if (!real) return;
  for (size_t i = 0; i < sizeof(tsr__hooked) / sizeof(tsr__hooked[0]); i++)
    *tsr__hooked[i].real = real(tsr__libcuda, tsr__hooked[i].name);
  for (size_t i = 0; i < sizeof(tsr__used) / sizeof(tsr__used[0]); i++)
    *tsr__used[i].real = real(tsr__libcuda, tsr__used[i].name);
  tsr__loaded = true;
}

bool tsr_shim_real_load(void) {
  pthread_once(&tsr__load_once, tsr__load);
  return tsr__loaded;
}

void *tsr_shim_hook_for(void *fn) {
  if (!fn) return fn;
  for (size_t i = 0; i < sizeof(tsr__hooked) / sizeof(tsr__hooked[0]); i++)
    if (*tsr__hooked[i].real == fn) return tsr__hooked[i].hook;
  return fn;
}

/* Whether the shim answers dlsym of `symbol` itself: a driver entry it
 * hooks, or NVML's memory query. Any other name (cuserid, curl_easy_init,
 * getenv) goes to the next dlsym untouched, and loads no driver. */
static bool tsr__hooks_name(const char *symbol) {
  if (symbol[0] == 'n') return strncmp(symbol, "nvmlDeviceGetMemoryInfo", 23) == 0;
  if (symbol[0] != 'c' || symbol[1] != 'u') return false;
  for (size_t i = 0; i < sizeof(tsr__hooked) / sizeof(tsr__hooked[0]); i++)
    if (strcmp(symbol, tsr__hooked[i].name) == 0) return true;
  return false;
}

/* The shim's own dlsym, for the names it hooks: the next dlsym's answer,
 * or the hook that stands for it. */
static void *tsr__dlsym_hooked(void *handle, const char *symbol) {
  tsr_tenant_dlsym_fn real = tsr_tenant_next_dlsym();
  void *p = real ? real(handle, symbol) : NULL;
  if (!p) return p;
  if (symbol[0] == 'n') return tsr_shim_nvml_hook(handle, symbol, p);
  tsr_shim_real_load();
  return tsr_shim_hook_for(p);
}

tsr_tenant_dlsym_fn tsr_shim_dlsym_hook(const char *symbol) {
  return symbol && tsr__hooks_name(symbol) ? tsr__dlsym_hooked : NULL;
}
