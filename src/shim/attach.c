/* attach.c: a tenant process meets its leases (tenant/tenant.h: which
 * leases, their regions and slots, the policy), and a CUDA device is
 * charged to the lease whose region names its UUID, or, for a region
 * without a UUID (a declared device), to the lease whose device index is
 * the CUDA ordinal. A forked child attaches anew under its own pid on its
 * first hooked call; a process that exits gives its slots back (and the
 * daemon's reaper does, for one that is killed); one that execs finds its
 * old slots (same pid and start time) when the new image attaches, and
 * gives them back then. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/shim.h"

tsr_shim_state_t tsr_shim;

static tsr_tenant_once_t tsr__once = TSR_TENANT_ONCE_INIT;

/* At exit: the slots are given back. The mappings stay: other threads, and
 * destructors that run after this one (a framework's allocator freeing its
 * cache), may still be inside a hook, and the process's end unmaps them. */
static void tsr__detach_all(void) {
  tsr_shim.any_share = false;          /* launches go straight to the driver from now */
  tsr_tenant_detach(&tsr_shim.tenant); /* and charges and credits find no lease */
}

#define TSR__NOT_LOOKED_UP (-3) /* in lease_of_device: not asked yet */

static void tsr__attach(void) {
  memset(&tsr_shim, 0, sizeof(tsr_shim));
  for (size_t i = 0; i < sizeof(tsr_shim.lease_of_device) / sizeof(int); i++)
    tsr_shim.lease_of_device[i] = TSR__NOT_LOOKED_UP;
  tsr_tenant_attach(&tsr_shim.tenant);
  if (!tsr_shim.tenant.governed) return;
  if (!tsr_shim_ptrmap_init(&tsr_shim.map, (size_t)1 << 20)) {
    tsr_shim_warn_once(TSR_WARN_NO_MAP, "cannot reserve the allocation map; the lease is not enforced");
    tsr_tenant_detach(&tsr_shim.tenant);
    tsr_shim.tenant.governed = false;
    return;
  }
  for (size_t i = 0; i < tsr_shim.tenant.nleases; i++)
    if (tsr_shim.tenant.leases[i].compute.sm_ppm) tsr_shim.any_share = true;
}

static void tsr__child_after_fork(void) {
  /* the parent's slots and pointers are the parent's: the child attaches
   * under its own pid on its first hooked call */
  tsr_tenant_forget(&tsr_shim.tenant);
  tsr_shim_ptrmap_free(&tsr_shim.map);
  for (const tsr_shim_family_t *const *f = tsr_shim_families; *f; f++) (*f)->after_fork();
  tsr_shim.any_share = false;
  tsr_tenant_once_again(&tsr__once);
}

/* Start-up: the driver, then the leases. */
static void tsr__start(void) {
  if (!tsr_shim_real_load()) {
    const char *name = tsr_tenant_getenv("TESSERA_REAL_LIBCUDA"), *why = dlerror();
    tsr_shim_warn_once(TSR_WARN_NO_DRIVER, "cannot load the CUDA driver (%.200s): %.200s; every CUDA call fails",
                       name && *name ? name : "libcuda.so.1", why ? why : "not found");
  }
  tsr__attach();
}

void tsr_shim_ready(void) { tsr_tenant_once(&tsr__once, tsr__start, tsr__child_after_fork, tsr__detach_all); }

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi writes it. */
static void tsr__format_uuid(const CUuuid *u, char *buf, size_t cap) {
  const unsigned char *b = (const unsigned char *)u->bytes;
  snprintf(buf, cap, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
           b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

int tsr_shim_lease_of_device(CUdevice dev) {
  if (!tsr_shim.tenant.governed) return TSR_TENANT_UNGOVERNED;
  if (dev < 0 || dev >= (int)(sizeof(tsr_shim.lease_of_device) / sizeof(int))) return TSR_TENANT_NO_LEASE;
  int known = __atomic_load_n(&tsr_shim.lease_of_device[dev], __ATOMIC_ACQUIRE);
  if (known != TSR__NOT_LOOKED_UP) return known;
  char uuid[64] = "";
  CUuuid u;
  CUresult (*get)(CUuuid *, CUdevice) =
      tsr_real.cuDeviceGetUuid_v2 ? tsr_real.cuDeviceGetUuid_v2 : tsr_real.cuDeviceGetUuid;
  if (get && get(&u, dev) == CUDA_SUCCESS) tsr__format_uuid(&u, uuid, sizeof(uuid));
  int found = TSR_TENANT_NO_LEASE;
  for (size_t i = 0; i < tsr_shim.tenant.nleases && found < 0; i++) {
    const tsr_shim_lease_t *l = &tsr_shim.tenant.leases[i];
    if (l->uuid[0] ? strcmp(l->uuid, uuid) == 0 : l->device == (uint32_t)dev) found = (int)i;
  }
  __atomic_store_n(&tsr_shim.lease_of_device[dev], found, __ATOMIC_RELEASE);
  return found;
}

int tsr_shim_current_lease(void) {
  if (!tsr_shim.tenant.governed) return TSR_TENANT_UNGOVERNED;
  CUdevice dev = -1;
  if (!tsr_real.cuCtxGetDevice || tsr_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS) return TSR_TENANT_NO_LEASE;
  return tsr_shim_lease_of_device(dev);
}
