/* nvml.c: GPU discovery through NVML, loaded with dlopen.
 *
 * The build machines have no nvml.h, so the few declarations needed are
 * written here from NVML's documented ABI. Only the _v2 entry points that
 * have been stable since CUDA 10 are used. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/device.h"

/* ---- the NVML ABI subset --------------------------------------------------- */
typedef int tsr__nvml_return_t; /* nvmlReturn_t; 0 = NVML_SUCCESS */
typedef struct tsr__nvml_device_s *tsr__nvml_device_t;
typedef struct {
  unsigned long long total, free, used;
} tsr__nvml_memory_t; /* nvmlMemory_t */
typedef struct {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount;
  unsigned int sharedJpegCount, sharedOfaCount;
  unsigned int gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
} tsr__nvml_attributes_t; /* nvmlDeviceAttributes_t */

#define TSR__NVML_SUCCESS 0
#define TSR__NVML_ERROR_NOT_SUPPORTED 3
#define TSR__NVML_DEVICE_MIG_ENABLE 1

typedef struct {
  void *lib;
  tsr__nvml_return_t (*init)(void);
  tsr__nvml_return_t (*shutdown)(void);
  const char *(*error_string)(tsr__nvml_return_t);
  tsr__nvml_return_t (*count)(unsigned int *);
  tsr__nvml_return_t (*handle)(unsigned int, tsr__nvml_device_t *);
  tsr__nvml_return_t (*name)(tsr__nvml_device_t, char *, unsigned int);
  tsr__nvml_return_t (*uuid)(tsr__nvml_device_t, char *, unsigned int);
  tsr__nvml_return_t (*memory)(tsr__nvml_device_t, tsr__nvml_memory_t *);
  tsr__nvml_return_t (*mig_mode)(tsr__nvml_device_t, unsigned int *, unsigned int *);
  tsr__nvml_return_t (*attributes)(tsr__nvml_device_t, tsr__nvml_attributes_t *);
  tsr__nvml_return_t (*cores)(tsr__nvml_device_t, unsigned int *);
  tsr__nvml_return_t (*cc)(tsr__nvml_device_t, int *, int *);
} tsr__nvml_t;

static const char *tsr__nvml_err(const tsr__nvml_t *n, tsr__nvml_return_t r) {
  static char buf[32];
  if (n->error_string) return n->error_string(r);
  snprintf(buf, sizeof(buf), "NVML error %d", r);
  return buf;
}

/* CUDA cores per SM by compute capability, for drivers whose
 * nvmlDeviceGetAttributes_v2 only answers for MIG devices. */
static unsigned int tsr__cores_per_sm(int major, int minor) {
  if (major <= 2) return 0;
  if (major == 3) return 192;
  if (major == 5) return 128;
  if (major == 6) return minor == 0 ? 64 : 128;
  if (major == 7) return 64;
  if (major == 8) return minor == 0 ? 64 : 128;
  return 128; /* Hopper 9.x, Blackwell 10.x/12.x */
}

#define TSR__SYM(field, sym, required)                                              \
  do {                                                                              \
    *(void **)(&n.field) = dlsym(n.lib, sym);                                       \
    if (!n.field && (required)) {                                                   \
      st = tsr_status_make(TSR_UNAVAILABLE, "NVML library %s lacks %s", library, sym); \
      goto done;                                                                    \
    }                                                                               \
  } while (0)

tsr_status_t tsr_device_discover_nvml(const char *library, tsr_device_t **out_devices,
                                      size_t *out_count) {
  *out_devices = NULL;
  *out_count = 0;
  if (!library) library = "libnvidia-ml.so.1";
  tsr__nvml_t n = {0};
  tsr_status_t st = NULL;
  bool initialised = false;
  tsr_device_t *devs = NULL;
  n.lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!n.lib)
    return tsr_status_make(TSR_UNAVAILABLE, "cannot load NVML (%s): %s", library, dlerror());
  TSR__SYM(init, "nvmlInit_v2", true);
  TSR__SYM(shutdown, "nvmlShutdown", true);
  TSR__SYM(error_string, "nvmlErrorString", false);
  TSR__SYM(count, "nvmlDeviceGetCount_v2", true);
  TSR__SYM(handle, "nvmlDeviceGetHandleByIndex_v2", true);
  TSR__SYM(name, "nvmlDeviceGetName", true);
  TSR__SYM(uuid, "nvmlDeviceGetUUID", false);
  TSR__SYM(memory, "nvmlDeviceGetMemoryInfo", true);
  TSR__SYM(mig_mode, "nvmlDeviceGetMigMode", false);
  TSR__SYM(attributes, "nvmlDeviceGetAttributes_v2", false);
  TSR__SYM(cores, "nvmlDeviceGetNumGpuCores", false);
  TSR__SYM(cc, "nvmlDeviceGetCudaComputeCapability", false);

  tsr__nvml_return_t r = n.init();
  if (r != TSR__NVML_SUCCESS) {
    st = tsr_status_make(TSR_UNAVAILABLE, "NVML did not initialise: %s", tsr__nvml_err(&n, r));
    goto done;
  }
  initialised = true;
  unsigned int count = 0;
  r = n.count(&count);
  if (r != TSR__NVML_SUCCESS) {
    st = tsr_status_make(TSR_UNAVAILABLE, "nvmlDeviceGetCount: %s", tsr__nvml_err(&n, r));
    goto done;
  }
  if (count > 1024) count = 1024; /* corrupt answer guard */
  devs = calloc(count ? count : 1, sizeof(*devs));
  if (!devs) {
    st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory listing %u GPUs", count);
    goto done;
  }
  for (unsigned int i = 0; i < count; i++) {
    tsr_device_t *d = &devs[i];
    tsr__nvml_device_t h = NULL;
    d->index = i;
    d->source = TSR_DEVICE_FROM_NVML;
    if ((r = n.handle(i, &h)) != TSR__NVML_SUCCESS) {
      st = tsr_status_make(TSR_UNAVAILABLE, "GPU %u: no NVML handle: %s", i, tsr__nvml_err(&n, r));
      goto done;
    }
    if ((r = n.name(h, d->name, sizeof(d->name))) != TSR__NVML_SUCCESS)
      snprintf(d->name, sizeof(d->name), "GPU %u", i);
    d->name[sizeof(d->name) - 1] = '\0';
    if (!n.uuid || n.uuid(h, d->uuid, sizeof(d->uuid)) != TSR__NVML_SUCCESS) d->uuid[0] = '\0';
    d->uuid[sizeof(d->uuid) - 1] = '\0';
    tsr__nvml_memory_t mem = {0};
    if ((r = n.memory(h, &mem)) != TSR__NVML_SUCCESS || mem.total == 0) {
      st = tsr_status_make(TSR_UNAVAILABLE, "GPU %u: no memory size from NVML: %s", i,
                           tsr__nvml_err(&n, r));
      goto done;
    }
    d->total_bytes = mem.total;
    d->mig = TSR_DEVICE_MIG_UNKNOWN;
    if (n.mig_mode) {
      unsigned int cur = 0, pending = 0;
      r = n.mig_mode(h, &cur, &pending);
      if (r == TSR__NVML_SUCCESS)
        d->mig = cur == TSR__NVML_DEVICE_MIG_ENABLE ? TSR_DEVICE_MIG_ENABLED : TSR_DEVICE_MIG_DISABLED;
      else if (r == TSR__NVML_ERROR_NOT_SUPPORTED)
        d->mig = TSR_DEVICE_MIG_UNSUPPORTED;
    }
    tsr__nvml_attributes_t attr = {0};
    if (n.attributes && n.attributes(h, &attr) == TSR__NVML_SUCCESS && attr.multiprocessorCount) {
      d->sm_count = attr.multiprocessorCount;
    } else if (n.cores && n.cc) {
      unsigned int cores = 0;
      int major = 0, minor = 0;
      if (n.cores(h, &cores) == TSR__NVML_SUCCESS && n.cc(h, &major, &minor) == TSR__NVML_SUCCESS) {
        unsigned int per = tsr__cores_per_sm(major, minor);
        d->sm_count = per ? cores / per : 0;
      }
    }
  }
  *out_devices = devs;
  *out_count = count;
  devs = NULL;
done:
  free(devs);
  if (initialised) n.shutdown();
  dlclose(n.lib);
  return st;
}

const char *tsr_device_mig_name(tsr_device_mig_t mig) {
  switch (mig) {
    case TSR_DEVICE_MIG_UNSUPPORTED: return "unsupported";
    case TSR_DEVICE_MIG_DISABLED: return "disabled";
    case TSR_DEVICE_MIG_ENABLED: return "enabled";
    default: return "unknown";
  }
}
