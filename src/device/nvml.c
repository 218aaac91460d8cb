/* nvml.c: GPU discovery, and per-process SM utilisation, through NVML (loaded by
 * nvml_abi.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/nvml_abi.h"
#include "device/device.h"

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

tsr_status_t tsr_device_discover_nvml(const char *library, tsr_device_t **out_devices, size_t *out_count) {
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
      st = tsr_status_make(TSR_UNAVAILABLE, "GPU %u: no NVML handle: %s", i, tsr_device_nvml_error(n, r));
      goto done;
    }
    if (n->device_name(h, d->name, sizeof(d->name)) != TSR_NVML_SUCCESS)
      snprintf(d->name, sizeof(d->name), "GPU %u", i);
    d->name[sizeof(d->name) - 1] = '\0';
    if (!n->device_uuid || n->device_uuid(h, d->uuid, sizeof(d->uuid)) != TSR_NVML_SUCCESS) d->uuid[0] = '\0';
    d->uuid[sizeof(d->uuid) - 1] = '\0';
    tsr_nvml_pci_info_t pci;
    memset(&pci, 0, sizeof(pci));
    if (n->device_pci && n->device_pci(h, &pci) == TSR_NVML_SUCCESS) {
      pci.busId[sizeof(pci.busId) - 1] = '\0';
      if (!tsr_device_pci_normalize(pci.busId, d->pci)) d->pci[0] = '\0';
    }
    d->kind = TSR_DEVICE_KIND_CUDA;
    /* any failure (NOT_SUPPORTED, GPU_IS_LOST, ...) leaves the minor
     * unknown: the GPU is still offered, but no scheduler can name it by
     * its device file */
    unsigned int dev_minor = 0;
    if (n->device_minor && n->device_minor(h, &dev_minor) == TSR_NVML_SUCCESS) {
      d->has_minor = true;
      d->minor = dev_minor;
    }
    tsr_nvml_memory_t mem = {0};
    if ((r = n->device_memory(h, &mem)) != TSR_NVML_SUCCESS || mem.total == 0) {
      st = tsr_status_make(TSR_UNAVAILABLE, "GPU %u: no memory size from NVML: %s", i, tsr_device_nvml_error(n, r));
      goto done;
    }
    d->total_bytes = mem.total;
    d->mig = TSR_DEVICE_MIG_UNKNOWN;
    if (n->device_mig_mode) {
      unsigned int cur = 0, pending = 0;
      r = n->device_mig_mode(h, &cur, &pending);
      if (r == TSR_NVML_SUCCESS)
        d->mig = cur == TSR_NVML_DEVICE_MIG_ENABLE ? TSR_DEVICE_MIG_ENABLED : TSR_DEVICE_MIG_DISABLED;
      else if (r == TSR_NVML_ERROR_NOT_SUPPORTED)
        d->mig = TSR_DEVICE_MIG_UNSUPPORTED;
    }
    tsr_nvml_attributes_t attr = {0};
    if (n->device_attributes && n->device_attributes(h, &attr) == TSR_NVML_SUCCESS && attr.multiprocessorCount) {
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

/* ---- per-process utilisation ------------------------------------------------ */

static int tsr__cmp_sample(const void *a, const void *b) {
  const tsr_nvml_process_utilization_t *x = a, *y = b;
  return x->pid < y->pid ? -1 : x->pid > y->pid;
}

tsr_nvml_return_t tsr_device_nvml_process_sm(const tsr_device_nvml_t *n, tsr_nvml_device_t h, uint64_t since_us,
                                             tsr_device_proc_util_t *out, size_t cap, size_t *out_count) {
  *out_count = 0;
  if (!n->device_process_utilization) return TSR_NVML_ERROR_NOT_SUPPORTED;
  tsr_nvml_process_utilization_t *buf = NULL;
  unsigned int count = 0;
  /* the size first (a NULL buffer), then the samples; processes that come
   * between the two calls make it ask again, twice at most */
  tsr_nvml_return_t r = n->device_process_utilization(h, NULL, &count, since_us);
  for (int attempt = 0; attempt < 3 && r == TSR_NVML_ERROR_INSUFFICIENT_SIZE; attempt++) {
    if (count == 0 || count > TSR_DEVICE_UTIL_SAMPLES_MAX) {
      free(buf);
      return TSR_NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int want = count + 8 < TSR_DEVICE_UTIL_SAMPLES_MAX ? count + 8 : count;
    tsr_nvml_process_utilization_t *grown = realloc(buf, want * sizeof(*buf));
    if (!grown) {
      free(buf);
      return TSR_NVML_ERROR_INSUFFICIENT_SIZE;
    }
    buf = grown;
    count = want;
    r = n->device_process_utilization(h, buf, &count, since_us);
    if (r == TSR_NVML_SUCCESS && count > want) count = want; /* a driver that says more than it wrote */
  }
  if (r == TSR_NVML_ERROR_NOT_FOUND) { /* no sample: nothing ran */
    r = TSR_NVML_SUCCESS;
    count = 0;
  }
  if (r != TSR_NVML_SUCCESS) {
    free(buf);
    return r;
  }
  if (!buf) count = 0; /* success on the size query: no sample */
  if (count > 1) qsort(buf, count, sizeof(*buf), tsr__cmp_sample);
  size_t k = 0;
  for (unsigned int i = 0; i < count;) {
    uint64_t sum = 0;
    uint32_t samples = 0;
    unsigned int j = i;
    for (; j < count && buf[j].pid == buf[i].pid; j++) {
      if (buf[j].timeStamp <= since_us) continue; /* older than asked for */
      sum += buf[j].smUtil > 100 ? 100 : buf[j].smUtil;
      samples++;
    }
    if (samples && k < cap)
      out[k++] = (tsr_device_proc_util_t){buf[i].pid, (uint32_t)((sum + samples / 2) / samples), samples};
    i = j;
  }
  free(buf);
  *out_count = k;
  return TSR_NVML_SUCCESS;
}
