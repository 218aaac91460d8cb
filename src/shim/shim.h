/* shim/shim.h: libtessera-cuda.so's parts and how they meet.
 *
 *   attach.c    start-up in a tenant: TESSERA_LEASE, the regions, slots,
 *               fork and exit; which lease a CUDA device is charged to
 *   real.c      the real driver (dlopen of libcuda.so.1) and the table of
 *               hooked functions: real pointer <-> hook
 *   procaddr.c  cuGetProcAddress and _v2: hooked names get the hook
 *   memory.c    the allocation and free hooks, and the memory queries
 *   ptrmap.c    what each allocation was charged (lock-free)
 *
 * The first hooked call of a process runs tsr_shim_ready (pthread_once);
 * after it, the hot path reads only immutable state and the lock-free map. */
#ifndef TESSERA_SHIM_SHIM_H
#define TESSERA_SHIM_SHIM_H

#include <stdbool.h>
#include <stdint.h>

#include "shim/cuda_abi.h"
#include "shim/ptrmap.h"
#include "tessera/region.h"

#define TSR_SHIM_LEASES_MAX 16 /* leases named in TESSERA_LEASE (one per device) */

typedef struct {
  uint64_t id;
  tsr_region_t *region;
  uint32_t slot;
  char uuid[64];   /* the device's UUID as the daemon knows it, or "" */
  uint32_t device; /* the daemon's device index */
} tsr_shim_lease_t;

typedef struct {
  bool governed;    /* TESSERA_LEASE was set: allocations are charged */
  bool deny;        /* TESSERA_POLICY=deny: a device without a lease gets out-of-memory */
  size_t nleases;
  tsr_shim_lease_t leases[TSR_SHIM_LEASES_MAX];
  int lease_of_device[64]; /* CUDA ordinal -> index in leases, -1 none, -2 not looked up */
  tsr_shim_ptrmap_t map;
} tsr_shim_state_t;

extern tsr_shim_state_t tsr__shim;

/* Runs start-up once per process (again in a forked child). */
void tsr_shim_ready(void);

/* The lease charged for allocations on the calling thread's current device:
 * its index, -1 when the device has no lease (policy decides), or -2 when
 * nothing is governed. */
int tsr_shim_current_lease(void);
/* The same for device `dev` (a CUDA ordinal of this process). */
int tsr_shim_lease_of_device(CUdevice dev);

/* One line on stderr, prefixed "tessera: ", at most once per `key`. */
void tsr_shim_warn_once(int key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- real.c ---- */

/* The real driver's function `name`, or NULL. */
void *tsr_shim_real(const char *name);

/* If `fn` is the real driver's entry of a hooked function, its hook;
 * otherwise `fn` itself. */
void *tsr_shim_hook_for(void *fn);

/* The real entry points the hooks call (filled in by tsr_shim_ready). */
typedef struct {
  CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
  CUresult (*cuMemAllocPitch_v2)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
  CUresult (*cuMemAllocManaged)(CUdeviceptr *, size_t, unsigned int);
  CUresult (*cuMemFree_v2)(CUdeviceptr);
  CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
  CUresult (*cuMemAllocAsync_ptsz)(CUdeviceptr *, size_t, CUstream);
  CUresult (*cuMemAllocFromPoolAsync)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
  CUresult (*cuMemAllocFromPoolAsync_ptsz)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuMemFreeAsync_ptsz)(CUdeviceptr, CUstream);
  CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const void *, unsigned long long);
  CUresult (*cuMemRelease)(CUmemGenericAllocationHandle);
  CUresult (*cuMemGetInfo_v2)(size_t *, size_t *);
  CUresult (*cuDeviceTotalMem_v2)(size_t *, CUdevice);
  CUresult (*cuCtxGetDevice)(CUdevice *);
  CUresult (*cuDeviceGetUuid_v2)(CUuuid *, CUdevice);
  CUresult (*cuDeviceGetUuid)(CUuuid *, CUdevice);
  CUresult (*cuGetProcAddress)(const char *, void **, int, cuuint64_t);
  CUresult (*cuGetProcAddress_v2)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);
} tsr_shim_real_t;

extern tsr_shim_real_t tsr__real;

/* Loads the real driver and fills tsr__real; false if it cannot be loaded. */
bool tsr_shim_real_load(void);

#endif
