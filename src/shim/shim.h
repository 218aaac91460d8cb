/* shim/shim.h: libtessera-cuda.so's parts and how they meet.
 *
 *   attach.c    start-up in a tenant (tenant/: TESSERA_LEASE, the regions,
 *               slots), fork and exit; which lease a CUDA device is charged to
 *   real.c      the real driver (dlopen of libcuda.so.1) and the table of
 *               hooked functions: real pointer <-> hook
 *   procaddr.c  cuGetProcAddress and _v2: hooked names get the hook
 *   account.c   charging and crediting a lease, and what each key was charged
 *   memory.c    plain, pitch and managed allocations, VMM, the frees, and
 *               the memory queries
 *   pools.c     stream-ordered allocation: each pool charged what it
 *               reserves on the device
 *   arrays.c    CUDA arrays and mipmapped arrays
 *   graphs.c    graph memory (allocation nodes, however made, read from
 *               the graph at instantiation; the graph memory cache)
 *   legacy.c    the CUDA 2.0 entries and the older versions of hooked ones
 *   green.c     green contexts: refused on a governed device
 *   context.c   contexts and their limits (stack, heap, printf FIFO), and
 *               what ends with a context (every record made in it)
 *   modules.c   modules and libraries: their static data (image.c reads it)
 *   launch.c    compute shares: every launch path charged to the lease's
 *               token bucket, measured on sampled launches; stream capture
 *   cost.c      what a launch costs (learned per kernel and shape), classes
 *   throttle.c  waiting for the bucket (bounded exponential backoff)
 *   nvml.c      nvmlDeviceGetMemoryInfo and _v2 show the lease
 *   ptrmap.c    what each allocation was charged, and its context and
 *               pool (lock-free)
 *
 * The first hooked call of a process runs tsr_shim_ready (pthread_once);
 * after it, the hot path reads only immutable state and the lock-free map. */
#ifndef TESSERA_SHIM_SHIM_H
#define TESSERA_SHIM_SHIM_H

#include <stdbool.h>
#include <stdint.h>

#include "shim/cuda_abi.h"
#include "shim/hooks.h"
#include "shim/ptrmap.h"
#include "tenant/tenant.h"
#include "region/region.h"

typedef tsr_tenant_lease_t tsr_shim_lease_t;

typedef struct {
  tsr_tenant_t tenant;     /* the leases, and the policy for a device without one */
  bool any_share;          /* an attached lease has an SM share: launches are charged */
  int lease_of_device[64]; /* CUDA ordinal -> index in leases, TSR_TENANT_NO_LEASE, or not looked up yet (attach.c) */
  tsr_shim_ptrmap_t map;
} tsr_shim_state_t;

extern tsr_shim_state_t tsr_shim;

/* Runs start-up once per process (again in a forked child). */
void tsr_shim_ready(void);

/* The lease charged for allocations on the calling thread's current device:
 * its index, TSR_TENANT_NO_LEASE when the device has no lease (the policy
 * decides), or TSR_TENANT_UNGOVERNED when nothing is governed. */
int tsr_shim_current_lease(void);
/* The same for device `dev` (a CUDA ordinal of this process). */
int tsr_shim_lease_of_device(CUdevice dev);

/* One line on stderr, prefixed "tessera: ", at most once per `key` (keys
 * 1..5 and 8..23 are tenant.c's). */
#define tsr_shim_warn_once tsr_tenant_warn_once

/* ---- account.c ---- */

#define TSR_SHIM_GRANULE (UINT64_C(2) << 20) /* the driver hands out no less */

/* Keys of the charge map: device pointers as they are; other handles with
 * a tag bit so that they can never collide with a pointer. */
#define TSR_KEY_VMM(h) ((uint64_t)(h) ^ (UINT64_C(1) << 62))
#define TSR_KEY_ARRAY(a) ((uint64_t)(uintptr_t)(a) ^ (UINT64_C(1) << 61))
#define TSR_KEY_MODULE(m) ((uint64_t)(m) ^ (UINT64_C(1) << 60)) /* modules, libraries */
/* Whether a key is TSR_KEY_MODULE's (host handles have no top bits set) */
#define TSR_KEY_IS_MODULE(k) ((uint64_t)(k) >> 60 == 1)

/* `bytes` rounded up to the granule (UINT64_MAX if that overflows). */
uint64_t tsr_shim_round(uint64_t bytes);

/* Charges `bytes` (rounded) to lease `lease` (as tsr_shim_current_lease
 * answers). *out_charged gets the lease index charged, or -1 when nothing
 * was charged. On a refusal the pool and graph
 * accounts are reconciled with the driver once and the charge is tried
 * again. False: refuse with out-of-memory. */
bool tsr_shim_charge(int lease, uint64_t bytes, int *out_charged);
/* Charges without rounding and without reconciling (the accounts' own
 * settling). */
bool tsr_shim_charge_exact(int charged, uint64_t bytes);
/* Gives back what tsr_shim_charge took (the same `bytes`). */
void tsr_shim_uncharge(int charged, uint64_t bytes);
/* Gives back exactly `bytes`. */
void tsr_shim_credit_exact(int charged, uint64_t bytes);
/* Bytes lease `lease` has left (UINT64_MAX when not governed or unleased
 * under pass, 0 under deny). */
uint64_t tsr_shim_left(int lease);
/* The lease's view of a device's memory, applied to the driver's own
 * numbers: total becomes the limit, free what the lease has left (0 once
 * it has ended), never more than the device really has free, never more
 * than total. `lease` is an attached lease's index. */
void tsr_shim_view(int lease, uint64_t *total, uint64_t *free_b);

/* What an allocation lives until, besides its own free. */
typedef enum {
  TSR_SHIM_LIFE_PROCESS, /* its free alone: VMM handles, libraries */
  TSR_SHIM_LIFE_CONTEXT, /* its free or the end of the calling thread's
                            current context: the driver frees a context's
                            allocations, arrays and modules with it */
} tsr_shim_life_t;

/* After a successful allocation: remember that `key` was charged `bytes`
 * (rounded) to `charged`, for `life`. A full map cannot remember it:
 * `undo(raw)` frees it, the charge is given back, and the answer is
 * out-of-memory. */
CUresult tsr_shim_record(int charged, uint64_t key, uint64_t raw, uint64_t bytes, tsr_shim_life_t life,
                         CUresult (*undo)(uint64_t raw));
/* Before a free: takes what `key` holds. False if the shim did not charge
 * it. */
bool tsr_shim_forget(uint64_t key, tsr_shim_ptrmap_val_t *out_held);
/* After the driver's free of `key`: gives back what tsr_shim_forget took
 * (tsr_shim_held_end), or, if the driver did not free it, records it again
 * (tsr_shim_context_keep). Returns rc. */
CUresult tsr_shim_settle(CUresult rc, uint64_t key, bool ours, const tsr_shim_ptrmap_val_t *held);
/* An allocation is gone (freed, or its context ended): credits its bytes,
 * or, for a pool block, tells its pool's account (tsr_shim_pool_block_end). */
void tsr_shim_held_end(const tsr_shim_ptrmap_val_t *held);
/* The three above for a free that takes nothing but the handle: frees
 * `raw` (whose charge is recorded under `key`) through `real`. */
CUresult tsr_shim_free(uint64_t key, CUresult (*real)(uint64_t raw), uint64_t raw);

/* ---- families.c: what the shim's core asks of the API families ---- */

/* A family of hooks that keeps state of its own (contexts, pools, graphs,
 * launches) registers here what the core asks of it, so that the core
 * (attach.c, account.c) names no family. */
typedef struct tsr_shim_family_s {
  /* In a forked child: the parent's handles and records are not its. */
  void (*after_fork)(void);
  /* Before a refusal and at a memory query: bring the family's accounts to
   * what the driver reports (NULL: it keeps none that the driver moves). */
  void (*reconcile)(void);
} tsr_shim_family_t;

extern const tsr_shim_family_t tsr_shim_family_contexts, tsr_shim_family_pools, tsr_shim_family_graphs,
    tsr_shim_family_launch;
/* Every family, NULL-terminated. */
extern const tsr_shim_family_t *const tsr_shim_families[];

/* ---- pools.c, graphs.c: accounts that follow the driver's numbers ---- */

/* Brings every pool and graph-memory account to what the driver reports
 * it reserves (called on a refusal and by the memory queries): each
 * family's reconcile (families.c). */
void tsr_shim_reconcile(void);
/* pools.c: a block of pool held->pool is gone (freed, or its context
 * ended). A destroyed pool's account, which kept its charge for its live
 * blocks, gives back the block's bytes, and the rest with its last block. */
void tsr_shim_pool_block_end(const tsr_shim_ptrmap_val_t *held);

/* ---- context.c ---- */

/* What a context is charged: 523 MiB on the H100 (driver 580), rounded up
 * to the granule. */
#define TSR_SHIM_CONTEXT_BYTES (UINT64_C(524) << 20)

/* The id of the calling thread's current context, which an allocation
 * recorded now ends with; 0 when the shim keeps no account of it. A
 * thread-local cache makes it one driver call (cuCtxGetCurrent). */
uint32_t tsr_shim_context_current(void);
/* A free of `key` failed: records *held again, unless the context it ends
 * with has ended since it was taken (the driver freed it with its context:
 * it is given back instead). */
void tsr_shim_context_keep(uint64_t key, const tsr_shim_ptrmap_val_t *held);

/* ---- launch.c ---- */

/* Modules or libraries were unloaded: their functions' handles may be reused. */
void tsr_shim_launch_forget(void);
/* An instance `exec` was made (graphs.c) or updated from `graph`: its cost,
 * until measured, is that of `graph`'s kernel nodes. */
void tsr_shim_graph_priced(CUgraphExec exec, CUgraph graph);
/* graphs.c: a graph launch, charged to the lease's share. */
CUresult tsr_shim_graph_launch(CUresult (*real)(CUgraphExec, CUstream), CUgraphExec exec, CUstream stream, bool ptsz);

/* ---- nvml.c ---- */

/* real.c saw a dlsym of NVML's `name` in `handle` find `real`: the hook to
 * hand out instead (which will call `real`), or `real` if none. */
void *tsr_shim_nvml_hook(void *handle, const char *name, void *real);

/* ---- real.c ---- */

/* The real dlsym (the shim interposes dlsym). */
void *tsr_shim_dlsym(void *handle, const char *name);

/* The shim's own dlsym when it hooks `symbol` (a driver entry, NVML's
 * memory query), else NULL: where the exported dlsym sends that name
 * (tenant/dlsym.h). */
tsr_tenant_dlsym_fn tsr_shim_dlsym_hook(const char *symbol);

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
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuStreamIsCapturing)(CUstream, int *);
  CUresult (*cuStreamIsCapturing_ptsz)(CUstream, int *);
  /* pools */
  CUresult (*cuDeviceGetMemPool)(CUmemoryPool *, CUdevice);
  CUresult (*cuDeviceGetDefaultMemPool)(CUmemoryPool *, CUdevice);
  CUresult (*cuMemPoolCreate)(CUmemoryPool *, const void *);
  CUresult (*cuMemPoolDestroy)(CUmemoryPool);
  CUresult (*cuMemPoolTrimTo)(CUmemoryPool, size_t);
  CUresult (*cuMemPoolGetAttribute)(CUmemoryPool, int, void *);
  /* arrays */
  CUresult (*cuArrayCreate_v2)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
  CUresult (*cuArray3DCreate_v2)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
  CUresult (*cuMipmappedArrayCreate)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int);
  CUresult (*cuArrayDestroy)(CUarray);
  CUresult (*cuMipmappedArrayDestroy)(CUmipmappedArray);
  /* graphs */
  CUresult (*cuGraphAddMemAllocNode)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUDA_MEM_ALLOC_NODE_PARAMS *);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*cuGraphInstantiateWithParams)(CUgraphExec *, CUgraph, void *);
  CUresult (*cuGraphInstantiateWithParams_ptsz)(CUgraphExec *, CUgraph, void *);
  CUresult (*cuGraphInstantiate_v2)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
  CUresult (*cuGraphInstantiate)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t); /* CUDA 10 */
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphLaunch_ptsz)(CUgraphExec, CUstream);
  CUresult (*cuGraphUpload)(CUgraphExec, CUstream);
  CUresult (*cuGraphUpload_ptsz)(CUgraphExec, CUstream);
  CUresult (*cuGraphMemAllocNodeGetParams)(CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS *);
  CUresult (*cuDeviceGraphMemTrim)(CUdevice);
  CUresult (*cuDeviceGetGraphMemAttribute)(CUdevice, int, void *);
  /* modules */
  CUresult (*cuModuleLoad)(CUmodule *, const char *);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned int, void *, void **);
  CUresult (*cuModuleLoadFatBinary)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuLibraryLoadData)(CUlibrary *, const void *, void *, void **, unsigned int, void *, void **,
                                unsigned int);
  CUresult (*cuLibraryLoadFromFile)(CUlibrary *, const char *, void *, void **, unsigned int, void *, void **,
                                    unsigned int);
  CUresult (*cuLibraryUnload)(CUlibrary);
  /* contexts */
  CUresult (*cuCtxCreate_v2)(CUcontext *, unsigned int, CUdevice);
  CUresult (*cuCtxCreate_v3)(CUcontext *, void *, int, unsigned int, CUdevice);
  CUresult (*cuCtxCreate_v4)(CUcontext *, void *, unsigned int, CUdevice);
  CUresult (*cuCtxDestroy_v2)(CUcontext);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice);
  CUresult (*cuDevicePrimaryCtxReset_v2)(CUdevice);
  CUresult (*cuCtxSetLimit)(CUlimit, size_t);
  CUresult (*cuCtxGetLimit)(size_t *, CUlimit);
  /* launches, capture, events */
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **);
  CUresult (*cuLaunchKernel_ptsz)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  CUstream, void **, void **);
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
  CUresult (*cuLaunchKernelEx_ptsz)(const CUlaunchConfig *, CUfunction, void **, void **);
  CUresult (*cuLaunchCooperativeKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, CUstream, void **);
  CUresult (*cuLaunchCooperativeKernel_ptsz)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                             unsigned, CUstream, void **);
  CUresult (*cuStreamBeginCapture)(CUstream);
  CUresult (*cuStreamBeginCapture_ptsz)(CUstream);
  CUresult (*cuStreamBeginCapture_v2)(CUstream, int);
  CUresult (*cuStreamBeginCapture_v2_ptsz)(CUstream, int);
  CUresult (*cuStreamBeginCaptureToGraph)(CUstream, CUgraph, const CUgraphNode *, const void *, size_t, int);
  CUresult (*cuStreamBeginCaptureToGraph_ptsz)(CUstream, CUgraph, const CUgraphNode *, const void *, size_t, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
  CUresult (*cuStreamEndCapture_ptsz)(CUstream, CUgraph *);
  CUresult (*cuGraphExecUpdate_v2)(CUgraphExec, CUgraph, void *);
  CUresult (*cuGraphExecUpdate)(CUgraphExec, CUgraph, CUgraphNode *, int *); /* CUDA 10.2 */
  CUresult (*cuGraphExecKernelNodeSetParams_v2)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2 *);
  CUresult (*cuGraphGetNodes)(CUgraph, CUgraphNode *, size_t *);
  CUresult (*cuGraphNodeGetType)(CUgraphNode, int *);
  CUresult (*cuGraphKernelNodeGetParams_v2)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v2 *);
  CUresult (*cuGraphChildGraphNodeGetGraph)(CUgraphNode, CUgraph *);
  CUresult (*cuFuncGetName)(const char **, CUfunction);
  CUresult (*cuKernelGetName)(const char **, CUkernel);
  CUresult (*cuEventCreate)(CUevent *, unsigned int);
  CUresult (*cuEventDestroy_v2)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuEventElapsedTime_v2)(float *, CUevent, CUevent);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuGetProcAddress)(const char *, void **, int, cuuint64_t);
  CUresult (*cuGetProcAddress_v2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
  /* the CUDA 2.0 entries (32-bit sizes and pointers) and the older
   * versions of hooked entries (legacy.c) */
  CUresult (*cuMemAlloc)(unsigned int *, unsigned int);
  CUresult (*cuMemAllocPitch)(unsigned int *, unsigned int *, unsigned int, unsigned int, unsigned int);
  CUresult (*cuMemFree)(unsigned int);
  CUresult (*cuMemGetInfo)(unsigned int *, unsigned int *);
  CUresult (*cuDeviceTotalMem)(unsigned int *, CUdevice);
  CUresult (*cuCtxCreate)(CUcontext *, unsigned int, CUdevice);
  CUresult (*cuArrayCreate)(CUarray *, const void *);
  CUresult (*cuArray3DCreate)(CUarray *, const void *);
  CUresult (*cuCtxDestroy)(CUcontext);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuDevicePrimaryCtxReset)(CUdevice);
  /* green contexts (green.c) */
  CUresult (*cuGreenCtxCreate)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);
} tsr_shim_real_t;

extern tsr_shim_real_t tsr_real;

/* Loads the real driver and fills tsr_real; false if it cannot be loaded. */
bool tsr_shim_real_load(void);

#endif
