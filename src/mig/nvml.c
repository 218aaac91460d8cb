/* mig/nvml.c: MIG instance creation and destruction through NVML, loaded with
 * dlopen. Only the declarations needed are written here, from NVML's public
 * documentation; every call's result is checked. Reviewed, small on purpose:
 * it never enables or disables MIG mode. Not exercised by the tests (the GPUs
 * we reach must keep their MIG mode); dry-run covers the executor. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mig/nvml.h"

typedef int nvmlReturn_t; /* 0 = NVML_SUCCESS */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;

typedef struct {
  unsigned int start, size;
} nvmlGpuInstancePlacement_t;

typedef struct {
  unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount,
      copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
  unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct {
  unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount,
      sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct {
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;
  unsigned int id, profileId;
  unsigned int placement_start, placement_size; /* newer drivers; room either way */
  unsigned int reserved[8];
} nvmlComputeInstanceInfo_t;

struct tsr__nvml_s {
  void *lib;
  nvmlDevice_t dev;
  nvmlReturn_t (*init)(void);
  nvmlReturn_t (*shutdown)(void);
  const char *(*error_string)(nvmlReturn_t);
  nvmlReturn_t (*get_handle)(unsigned int, nvmlDevice_t *);
  nvmlReturn_t (*get_mig_mode)(nvmlDevice_t, unsigned int *, unsigned int *);
  nvmlReturn_t (*gi_profile_info)(nvmlDevice_t, unsigned int, nvmlGpuInstanceProfileInfo_t *);
  nvmlReturn_t (*gi_placements)(nvmlDevice_t, unsigned int, nvmlGpuInstancePlacement_t *,
                                unsigned int *);
  nvmlReturn_t (*gi_create)(nvmlDevice_t, unsigned int, const nvmlGpuInstancePlacement_t *,
                            nvmlGpuInstance_t *);
  nvmlReturn_t (*gi_destroy)(nvmlGpuInstance_t);
  nvmlReturn_t (*ci_profile_info)(nvmlGpuInstance_t, unsigned int, unsigned int,
                                  nvmlComputeInstanceProfileInfo_t *);
  nvmlReturn_t (*ci_create)(nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t *);
  nvmlReturn_t (*ci_destroy)(nvmlComputeInstance_t);
  nvmlReturn_t (*ci_info)(nvmlComputeInstance_t, nvmlComputeInstanceInfo_t *);
  nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
};

struct tsr__nvml_inst_s {
  nvmlGpuInstance_t gi;
  nvmlComputeInstance_t ci;
};

static const char *tsr__nv_err(tsr__nvml_t *nv, nvmlReturn_t r) {
  return nv->error_string ? nv->error_string(r) : "NVML error";
}

/* NVML_GPU_INSTANCE_PROFILE_{1,2,3,4,7}_SLICE and the matching compute
 * instance profiles are 0, 1, 2, 3, 4. */
static int tsr__profile(int size) {
  switch (size) {
    case 1: return 0;
    case 2: return 1;
    case 3: return 2;
    case 4: return 3;
    case 7: return 4;
    default: return -1;
  }
}

#define TSR__SYM(field, name)                                  \
  do {                                                         \
    *(void **)&nv->field = dlsym(nv->lib, name);               \
    if (!nv->field) {                                          \
      missing = name;                                          \
      goto fail;                                               \
    }                                                          \
  } while (0)

tsr_status_t tsr__nvml_open(unsigned gpu_index, tsr__nvml_t **out_nvml) {
  *out_nvml = NULL;
  if (geteuid() != 0)
    return tsr_status_make(TSR_PERMISSION_DENIED,
                           "the nvml backend needs root to create MIG instances "
                           "(use --backend dry-run to rehearse the plan)");
  tsr__nvml_t *nv = calloc(1, sizeof(*nv));
  if (!nv) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  const char *missing = NULL;
  nv->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!nv->lib) {
    tsr_status_t st = tsr_status_make(TSR_UNAVAILABLE, "cannot load NVML (libnvidia-ml.so.1): %s",
                                      dlerror());
    free(nv);
    return st;
  }
  TSR__SYM(init, "nvmlInit_v2");
  TSR__SYM(shutdown, "nvmlShutdown");
  TSR__SYM(error_string, "nvmlErrorString");
  TSR__SYM(get_handle, "nvmlDeviceGetHandleByIndex_v2");
  TSR__SYM(get_mig_mode, "nvmlDeviceGetMigMode");
  TSR__SYM(gi_profile_info, "nvmlDeviceGetGpuInstanceProfileInfo");
  TSR__SYM(gi_placements, "nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  TSR__SYM(gi_create, "nvmlDeviceCreateGpuInstanceWithPlacement");
  TSR__SYM(gi_destroy, "nvmlGpuInstanceDestroy");
  TSR__SYM(ci_profile_info, "nvmlGpuInstanceGetComputeInstanceProfileInfo");
  TSR__SYM(ci_create, "nvmlGpuInstanceCreateComputeInstance");
  TSR__SYM(ci_destroy, "nvmlComputeInstanceDestroy");
  TSR__SYM(ci_info, "nvmlComputeInstanceGetInfo_v2");
  TSR__SYM(uuid, "nvmlDeviceGetUUID");
  nvmlReturn_t r = nv->init();
  if (r) {
    tsr_status_t st = tsr_status_make(TSR_UNAVAILABLE, "nvmlInit: %s", tsr__nv_err(nv, r));
    dlclose(nv->lib);
    free(nv);
    return st;
  }
  unsigned cur = 0, pending = 0;
  if ((r = nv->get_handle(gpu_index, &nv->dev)) != 0) {
    tsr_status_t st = tsr_status_make(TSR_UNAVAILABLE, "GPU %u: %s", gpu_index, tsr__nv_err(nv, r));
    tsr__nvml_close(nv);
    return st;
  }
  if ((r = nv->get_mig_mode(nv->dev, &cur, &pending)) != 0 || cur != 1) {
    tsr_status_t st = tsr_status_make(
        TSR_FAILED_PRECONDITION,
        "GPU %u is not in MIG mode (%s); tessera never changes the MIG mode: an administrator "
        "can enable it with 'nvidia-smi -i %u -mig 1' when the GPU is idle",
        gpu_index, r ? tsr__nv_err(nv, r) : "MIG disabled", gpu_index);
    tsr__nvml_close(nv);
    return st;
  }
  *out_nvml = nv;
  return NULL;
fail:;
  tsr_status_t st = tsr_status_make(TSR_UNAVAILABLE, "NVML lacks %s (driver too old?)", missing);
  dlclose(nv->lib);
  free(nv);
  return st;
}

tsr_status_t tsr__nvml_create(tsr__nvml_t *nv, int size, int first_slice,
                              tsr__nvml_inst_t **out_inst, char *uuid, size_t cap) {
  *out_inst = NULL;
  int prof = tsr__profile(size);
  if (prof < 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "no MIG profile for %d slices", size);
  nvmlGpuInstanceProfileInfo_t pi;
  memset(&pi, 0, sizeof(pi));
  nvmlReturn_t r = nv->gi_profile_info(nv->dev, (unsigned)prof, &pi);
  if (r) return tsr_status_make(TSR_UNAVAILABLE, "%d-slice GPU instance profile: %s", size, tsr__nv_err(nv, r));
  nvmlGpuInstancePlacement_t pl[16];
  unsigned count = 16;
  if ((r = nv->gi_placements(nv->dev, pi.id, pl, &count)))
    return tsr_status_make(TSR_UNAVAILABLE, "placements of %d slices: %s", size, tsr__nv_err(nv, r));
  int chosen = -1;
  for (unsigned q = 0; q < count && q < 16; q++)
    if ((int)pl[q].start == first_slice) chosen = (int)q;
  if (chosen < 0)
    return tsr_status_make(TSR_FAILED_PRECONDITION, "no %d-slice placement starts at slice %d",
                           size, first_slice);
  tsr__nvml_inst_t *in = calloc(1, sizeof(*in));
  if (!in) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  if ((r = nv->gi_create(nv->dev, pi.id, &pl[chosen], &in->gi))) {
    free(in);
    return tsr_status_make(TSR_UNAVAILABLE, "create %d-slice GPU instance at slice %d: %s", size,
                           first_slice, tsr__nv_err(nv, r));
  }
  nvmlComputeInstanceProfileInfo_t ci;
  memset(&ci, 0, sizeof(ci));
  nvmlComputeInstanceInfo_t info;
  memset(&info, 0, sizeof(info));
  if ((r = nv->ci_profile_info(in->gi, (unsigned)prof, 0, &ci)) ||
      (r = nv->ci_create(in->gi, ci.id, &in->ci)) || (r = nv->ci_info(in->ci, &info)) ||
      (r = nv->uuid(info.device, uuid, (unsigned)cap))) {
    tsr_status_t st = tsr_status_make(TSR_UNAVAILABLE, "compute instance on %d slices: %s", size,
                                      tsr__nv_err(nv, r));
    if (in->ci) nv->ci_destroy(in->ci);
    nv->gi_destroy(in->gi);
    free(in);
    return st;
  }
  *out_inst = in;
  return NULL;
}

tsr_status_t tsr__nvml_destroy(tsr__nvml_t *nv, tsr__nvml_inst_t *in) {
  if (!in) return NULL;
  nvmlReturn_t r1 = in->ci ? nv->ci_destroy(in->ci) : 0;
  nvmlReturn_t r2 = nv->gi_destroy(in->gi);
  free(in);
  if (r1 || r2)
    return tsr_status_make(TSR_UNAVAILABLE, "destroy MIG instance: %s", tsr__nv_err(nv, r1 ? r1 : r2));
  return NULL;
}

void tsr__nvml_close(tsr__nvml_t *nv) {
  if (!nv) return;
  if (nv->shutdown) nv->shutdown();
  if (nv->lib) dlclose(nv->lib);
  free(nv);
}
