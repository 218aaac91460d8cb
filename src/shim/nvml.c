/* nvml.c: NVML's memory queries show the lease, as cuMemGetInfo does.
 *
 * nvmlDeviceGetMemoryInfo and _v2 are interposed for programs linked with
 * libnvidia-ml (the preloaded shim's definitions come first) and for those
 * that dlopen it and look the names up with dlsym (real.c hands out these
 * hooks and tells this file where the real entries are). On a device with
 * a lease: total = the limit, free = what the lease has left (never more
 * than the device really has free), used = total - free, reserved = 0.
 * Everything else, and every error, is NVML's own. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "shim/shim.h"

/* The two exported NVML entries below are nvml.h's, which the build
 * machines lack (device/nvml_abi.h declares NVML's ABI as the pointers
 * tessera calls, not as functions). */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

#define TSR_EXPORT __attribute__((visibility("default")))

typedef struct tsr_nvml_dev_s *tsr__nvml_dev_t;
typedef struct {
  unsigned long long total, free, used;
} tsr__nvml_mem_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} tsr__nvml_mem2_t;
typedef int (*tsr__mem_fn)(tsr__nvml_dev_t, void *);
typedef int (*tsr__uuid_fn)(tsr__nvml_dev_t, char *, unsigned int);
typedef int (*tsr__index_fn)(tsr__nvml_dev_t, unsigned int *);

static void *tsr__lib; /* the NVML a dlsym caller named, if any */
static tsr__mem_fn tsr__mem1, tsr__mem2;

/* NVML's own entry `name`: the library the caller dlopened, the next
 * definition after the shim, or an already loaded libnvidia-ml.so.1. */
static void *tsr__nvml(const char *name) {
  void *lib = __atomic_load_n(&tsr__lib, __ATOMIC_ACQUIRE);
  void *p = lib ? tsr_shim_dlsym(lib, name) : NULL;
  if (!p) p = tsr_shim_dlsym(RTLD_NEXT, name);
  if (!p) {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h) p = tsr_shim_dlsym(h, name);
  }
  return p;
}

/* The lease of NVML device `dev`: by UUID, or by index for a lease whose
 * region names no UUID. */
static int tsr__lease_of(tsr__nvml_dev_t dev) {
  tsr_shim_ready();
  if (!tsr_shim.tenant.governed) return TSR_TENANT_UNGOVERNED;
  char uuid[96] = "";
  tsr__uuid_fn get_uuid = (tsr__uuid_fn)tsr__nvml("nvmlDeviceGetUUID");
  if (get_uuid && get_uuid(dev, uuid, sizeof(uuid)) != 0) uuid[0] = '\0';
  unsigned int index = UINT32_MAX;
  tsr__index_fn get_index = (tsr__index_fn)tsr__nvml("nvmlDeviceGetIndex");
  if (get_index && get_index(dev, &index) != 0) index = UINT32_MAX;
  for (size_t i = 0; i < tsr_shim.tenant.nleases; i++) {
    const tsr_shim_lease_t *l = &tsr_shim.tenant.leases[i];
    if (l->uuid[0] ? strcmp(l->uuid, uuid) == 0 : l->device == index) return (int)i;
  }
  return TSR_TENANT_NO_LEASE;
}

/* The lease's view of (total, free), as cuMemGetInfo gives it. */
static void tsr__view(int lease, unsigned long long *total, unsigned long long *free_b) {
  tsr_shim_reconcile();
  uint64_t t = *total, f = *free_b;
  tsr_shim_view(lease, &t, &f);
  *total = t;
  *free_b = f;
}

static int tsr__mem_info(tsr__nvml_dev_t dev, tsr__nvml_mem_t *mem) {
  tsr__mem_fn real = __atomic_load_n(&tsr__mem1, __ATOMIC_ACQUIRE);
  if (!real) real = (tsr__mem_fn)tsr__nvml("nvmlDeviceGetMemoryInfo");
  if (!real) return 1; /* NVML_ERROR_UNINITIALIZED: no NVML in this process */
  int rc = real(dev, mem);
  int lease = rc == 0 && mem ? tsr__lease_of(dev) : TSR_TENANT_UNGOVERNED;
  if (lease < 0) return rc;
  tsr__view(lease, &mem->total, &mem->free);
  mem->used = mem->total - mem->free;
  return rc;
}

static int tsr__mem_info_v2(tsr__nvml_dev_t dev, tsr__nvml_mem2_t *mem) {
  tsr__mem_fn real = __atomic_load_n(&tsr__mem2, __ATOMIC_ACQUIRE);
  if (!real) real = (tsr__mem_fn)tsr__nvml("nvmlDeviceGetMemoryInfo_v2");
  if (!real) return 1;
  int rc = real(dev, mem);
  int lease = rc == 0 && mem ? tsr__lease_of(dev) : TSR_TENANT_UNGOVERNED;
  if (lease < 0) return rc;
  tsr__view(lease, &mem->total, &mem->free);
  mem->reserved = 0;
  mem->used = mem->total - mem->free;
  return rc;
}

/* The exported names; dlsym callers get the functions above directly
 * (tsr_shim_nvml_hook), so that no other definition can stand between. */
TSR_EXPORT int nvmlDeviceGetMemoryInfo(tsr__nvml_dev_t dev, tsr__nvml_mem_t *mem) { return tsr__mem_info(dev, mem); }

TSR_EXPORT int nvmlDeviceGetMemoryInfo_v2(tsr__nvml_dev_t dev, tsr__nvml_mem2_t *mem) {
  return tsr__mem_info_v2(dev, mem);
}

void *tsr_shim_nvml_hook(void *handle, const char *name, void *real) {
  if (strcmp(name, "nvmlDeviceGetMemoryInfo") == 0) {
    __atomic_store_n(&tsr__lib, handle, __ATOMIC_RELEASE);
    __atomic_store_n(&tsr__mem1, (tsr__mem_fn)real, __ATOMIC_RELEASE);
    return (void *)tsr__mem_info;
  }
  if (strcmp(name, "nvmlDeviceGetMemoryInfo_v2") == 0) {
    __atomic_store_n(&tsr__lib, handle, __ATOMIC_RELEASE);
    __atomic_store_n(&tsr__mem2, (tsr__mem_fn)real, __ATOMIC_RELEASE);
    return (void *)tsr__mem_info_v2;
  }
  return real;
}
