/* nvml.c: GPU discovery through NVML (loaded by nvml_abi.c). */
#include <stdio.h>
#include <stdlib.h>

#include "device/nvml_abi.h"
#include "tessera/device.h"

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

tsr_status_t tsr_device_discover_nvml(const char *library, tsr_device_t **out_devices,
                                      size_t *out_count) {
  *out_devices = NULL;
  *out_count = 0;
  tsr_device_nvml_t *n;
  TSR_RETURN_IF_ERROR(tsr_device_nvml_open(library, TSR_DEVICE_NVML_FOR_DISCOVERY, &n));
  tsr_status_t st = NULL;
  tsr_device_t *devs = NULL;
  unsigned int count = 0;
  tsr_nvml_return_t r = n->device_count(&count);
  if (r != TSR_NVML_SUCCESS) {
    st = tsr_status_make(TSR_UNAVAILABLE, "nvmlDeviceGetCount: %s", tsr_device_nvml_error(n, r));
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
    tsr_nvml_device_t h = NULL;
    d->index = i;
    d->source = TSR_DEVICE_FROM_NVML;
    if ((r = n->device_handle(i, &h)) != TSR_NVML_SUCCESS) {
      st = tsr_status_make(TSR_UNAVAILABLE, "GPU %u: no NVML handle: %s", i,
                           tsr_device_nvml_error(n, r));
      goto done;
    }
    if ((r = n->device_name(h, d->name, sizeof(d->name))) != TSR_NVML_SUCCESS)
      snprintf(d->name, sizeof(d->name), "GPU %u", i);
    d->name[sizeof(d->name) - 1] = '\0';
    if (!n->device_uuid || n->device_uuid(h, d->uuid, sizeof(d->uuid)) != TSR_NVML_SUCCESS)
      d->uuid[0] = '\0';
    d->uuid[sizeof(d->uuid) - 1] = '\0';
    tsr_nvml_memory_t mem = {0};
    if ((r = n->device_memory(h, &mem)) != TSR_NVML_SUCCESS || mem.total == 0) {
      st = tsr_status_make(TSR_UNAVAILABLE, "GPU %u: no memory size from NVML: %s", i,
                           tsr_device_nvml_error(n, r));
      goto done;
    }
    d->total_bytes = mem.total;
    d->mig = TSR_DEVICE_MIG_UNKNOWN;
    if (n->device_mig_mode) {
      unsigned int cur = 0, pending = 0;
      r = n->device_mig_mode(h, &cur, &pending);
      if (r == TSR_NVML_SUCCESS)
        d->mig =
            cur == TSR_NVML_DEVICE_MIG_ENABLE ? TSR_DEVICE_MIG_ENABLED : TSR_DEVICE_MIG_DISABLED;
      else if (r == TSR_NVML_ERROR_NOT_SUPPORTED)
        d->mig = TSR_DEVICE_MIG_UNSUPPORTED;
    }
    tsr_nvml_attributes_t attr = {0};
    if (n->device_attributes && n->device_attributes(h, &attr) == TSR_NVML_SUCCESS &&
        attr.multiprocessorCount) {
      d->sm_count = attr.multiprocessorCount;
    } else if (n->device_cores && n->device_compute_capability) {
      unsigned int cores = 0;
      int major = 0, minor = 0;
      if (n->device_cores(h, &cores) == TSR_NVML_SUCCESS &&
          n->device_compute_capability(h, &major, &minor) == TSR_NVML_SUCCESS) {
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
  tsr_device_nvml_close(n);
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
