/* nvml_abi.c: loading libnvidia-ml (see nvml_abi.h). */
#include "device/nvml_abi.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TSR__ALWAYS (TSR_DEVICE_NVML_FOR_DISCOVERY | TSR_DEVICE_NVML_FOR_MIG)
#define TSR__DISC TSR_DEVICE_NVML_FOR_DISCOVERY
#define TSR__MIG TSR_DEVICE_NVML_FOR_MIG

/* One entry point: its symbol, where it goes, and who cannot do without it.
 * Only the _v2 entry points stable since CUDA 10 (and the MIG calls of
 * CUDA 11) are used. */
typedef struct {
  const char *symbol;
  size_t offset;
  unsigned needed_by;
} tsr__nvml_symbol_t;

#define TSR__SYM(field, symbol, needed_by) \
  { symbol, offsetof(tsr_device_nvml_t, field), needed_by }

static const tsr__nvml_symbol_t tsr__nvml_symbols[] = {
    TSR__SYM(init, "nvmlInit_v2", TSR__ALWAYS),
    TSR__SYM(shutdown, "nvmlShutdown", TSR__ALWAYS),
    TSR__SYM(error_string, "nvmlErrorString", TSR__MIG),
    TSR__SYM(device_count, "nvmlDeviceGetCount_v2", TSR__DISC),
    TSR__SYM(device_handle, "nvmlDeviceGetHandleByIndex_v2", TSR__ALWAYS),
    TSR__SYM(device_name, "nvmlDeviceGetName", TSR__DISC),
    TSR__SYM(device_uuid, "nvmlDeviceGetUUID", TSR__MIG),
    TSR__SYM(device_memory, "nvmlDeviceGetMemoryInfo", TSR__DISC),
    TSR__SYM(device_pci, "nvmlDeviceGetPciInfo_v3", 0),
    TSR__SYM(device_mig_mode, "nvmlDeviceGetMigMode", TSR__MIG),
    TSR__SYM(device_attributes, "nvmlDeviceGetAttributes_v2", 0),
    TSR__SYM(device_cores, "nvmlDeviceGetNumGpuCores", 0),
    TSR__SYM(device_compute_capability, "nvmlDeviceGetCudaComputeCapability", 0),
    TSR__SYM(gpu_instance_profile_info, "nvmlDeviceGetGpuInstanceProfileInfo", TSR__MIG),
    TSR__SYM(gpu_instance_placements, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", TSR__MIG),
    TSR__SYM(gpu_instance_create, "nvmlDeviceCreateGpuInstanceWithPlacement", TSR__MIG),
    TSR__SYM(gpu_instance_destroy, "nvmlGpuInstanceDestroy", TSR__MIG),
    TSR__SYM(compute_instance_profile_info, "nvmlGpuInstanceGetComputeInstanceProfileInfo", TSR__MIG),
    TSR__SYM(compute_instance_create, "nvmlGpuInstanceCreateComputeInstance", TSR__MIG),
    TSR__SYM(compute_instance_destroy, "nvmlComputeInstanceDestroy", TSR__MIG),
    TSR__SYM(compute_instance_info, "nvmlComputeInstanceGetInfo_v2", TSR__MIG),
    TSR__SYM(device_compute_processes, "nvmlDeviceGetComputeRunningProcesses_v3", 0),
    TSR__SYM(device_process_utilization, "nvmlDeviceGetProcessUtilization", 0),
    TSR__SYM(device_minor, "nvmlDeviceGetMinorNumber", 0),
};

tsr_status_t tsr_device_nvml_open(const char *library, unsigned needs, tsr_device_nvml_t **out_nvml) {
  *out_nvml = NULL;
  if (!library) library = "libnvidia-ml.so.1";
  tsr_device_nvml_t *nv = calloc(1, sizeof(*nv));
  if (!nv) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory loading NVML");
  nv->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!nv->lib) {
    free(nv);
    return tsr_status_make(TSR_UNAVAILABLE, "cannot load NVML (%s): %s", library, dlerror());
  }
  tsr_status_t st = NULL;
  for (size_t i = 0; i < sizeof(tsr__nvml_symbols) / sizeof(tsr__nvml_symbols[0]); i++) {
    const tsr__nvml_symbol_t *s = &tsr__nvml_symbols[i];
    void *fn = dlsym(nv->lib, s->symbol);
    /* POSIX guarantees a function pointer survives the trip through void * */
    memcpy((char *)nv + s->offset, &fn, sizeof(fn));
    if (!fn && (s->needed_by & needs) && !st)
      st = tsr_status_make(TSR_UNAVAILABLE, "NVML library %s lacks %s (driver too old?)", library, s->symbol);
  }
  tsr_nvml_return_t r = st ? TSR_NVML_SUCCESS : nv->init();
  if (!st && r != TSR_NVML_SUCCESS)
    st = tsr_status_make(TSR_UNAVAILABLE, "NVML did not initialise: %s", tsr_device_nvml_error(nv, r));
  if (st) {
    dlclose(nv->lib);
    free(nv);
    return st;
  }
  *out_nvml = nv;
  return NULL;
}

void tsr_device_nvml_close(tsr_device_nvml_t *nv) {
  if (!nv) return;
  nv->shutdown();
  dlclose(nv->lib);
  free(nv);
}

const char *tsr_device_nvml_error(const tsr_device_nvml_t *nv, tsr_nvml_return_t r) {
  static _Thread_local char buf[32];
  if (nv && nv->error_string) return nv->error_string(r);
  snprintf(buf, sizeof(buf), "NVML error %d", r);
  return buf;
}
