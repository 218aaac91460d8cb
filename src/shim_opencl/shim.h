/* shim_opencl/shim.h: libtessera-opencl.so's parts and how they meet.
 *
 * The LD_PRELOAD shim over the OpenCL ICD loader (seed 000's portability:
 * leases on any OpenCL device). It holds an OpenCL program to the same
 * leases, regions and policies as libtessera-cuda.so holds a CUDA one.
 *
 *   attach.c   start-up (tenant/: the leases), fork and exit; which lease
 *              an OpenCL device and a context are charged to
 *   charge.c   the order every allocating hook follows, and the charges
 *   real.c     the real ICD loader (dlopen of libOpenCL.so.1), and dlsym:
 *              a program that looks the loader's entries up gets the hooks
 *   objects.c  what each memory object, SVM or USM pointer and context was
 *              charged, with the references the program holds on it
 *   memory.c   buffers, sub-buffers, images, pipes, SVM; retain, release
 *   contexts.c contexts (what a context costs on NVIDIA's platform) and
 *              the lease's view in clGetDeviceInfo
 *   extensions.c  clGetExtensionFunctionAddress(ForPlatform) and the
 *              extension allocators behind it (Intel USM, clCreateBufferNV)
 *
 * Every hook follows the CUDA shim's order: find the lease, charge its
 * region (refuse before the implementation allocates), call the
 * implementation, give the charge back if it failed, else remember what the
 * new object was charged. The last release of an object (the program's
 * references, counted here) credits it. */
#ifndef TESSERA_SHIM_OPENCL_SHIM_H
#define TESSERA_SHIM_OPENCL_SHIM_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS /* the shim hooks them too */
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <stdbool.h>
#include <stdint.h>

#include "tenant/tenant.h"

#define TSR_OCL_EXPORT __attribute__((visibility("default")))

/* Lease indexes as the hooks pass them around. */
#define TSR_OCL_UNGOVERNED TSR_TENANT_UNGOVERNED /* nothing is governed: pass through */
#define TSR_OCL_NO_LEASE TSR_TENANT_NO_LEASE     /* governed, but no lease for the device: the policy */

/* NVIDIA's OpenCL platform hands out device memory in 2 MiB pieces, and a
 * context takes 518 MiB of the device (H100, driver 580.159.04, nvidia-smi,
 * 2026-11-24): the shim charges what NVML will show, so that the daemon's
 * backstop and the shim agree. Other platforms are charged the bytes asked
 * for, in whole 4 KiB pages. */
#define TSR_OCL_NV_GRANULE (UINT64_C(2) << 20)
#define TSR_OCL_NV_CONTEXT_BYTES (UINT64_C(518) << 20)
#define TSR_OCL_PAGE UINT64_C(4096)

/* The leases this process runs under (attach.c). */
extern tsr_tenant_t tsr_ocl;

/* Runs start-up once per process image (again in a forked child). */
void tsr_ocl_ready(void);

/* ---- attach.c: devices and contexts to leases ---- */

/* The lease of an OpenCL device: its index, TSR_OCL_NO_LEASE or
 * TSR_OCL_UNGOVERNED. Matched by PCI bus id (cl_khr_pci_bus_info, or
 * NVIDIA's attributes) against the regions' device_pci, else by the
 * device's name against their device_opencl. Cached per device. */
int tsr_ocl_lease_of_device(cl_device_id device);

/* What the shim knows of a context: its lease (the first of its devices
 * that has one), the smallest CL_DEVICE_MAX_MEM_ALLOC_SIZE of its
 * devices, and whether it is NVIDIA's. */
typedef struct {
  int lease;
  uint64_t max_alloc;
  bool nvidia;
  cl_platform_id platform; /* of its first device (extension entries are per platform) */
} tsr_ocl_ctx_info_t;

/* Fills *info for `context`. False if the implementation will not say
 * (an invalid context): the hook then passes the call through and lets
 * the implementation give its own error. */
bool tsr_ocl_context_info(cl_context context, tsr_ocl_ctx_info_t *info);

/* The same for a list of devices (a context about to be made). */
void tsr_ocl_devices_info(const cl_device_id *devices, size_t count, tsr_ocl_ctx_info_t *info);

/* A context is gone: forget what was learnt of it. */
void tsr_ocl_context_forget(cl_context context);

/* ---- objects.c: what was charged ---- */

typedef enum {
  TSR_OCL_MEM = 1,     /* a cl_mem: buffer, sub-buffer, image, pipe */
  TSR_OCL_SVM = 2,     /* a clSVMAlloc pointer */
  TSR_OCL_USM = 3,     /* an Intel USM pointer */
  TSR_OCL_CONTEXT = 4, /* a cl_context */
} tsr_ocl_kind_t;

/* Remembers a new object: charged `bytes` to `lease` (-1: nothing), one
 * reference held by the program, and, for a sub-buffer or an image over a
 * buffer, `parent` (whose memory it keeps alive: the parent gains a
 * reference until the child's last release). False when the table cannot
 * grow (out of memory): the caller undoes the creation. */
bool tsr_ocl_objects_add(tsr_ocl_kind_t kind, const void *key, uint64_t bytes, int lease, const void *parent);

/* The program took another reference on `key`. */
void tsr_ocl_objects_retain(tsr_ocl_kind_t kind, const void *key);

/* Before the implementation's release of `key`: drops one reference. When
 * it was the last, the object leaves the table and *out_last is true. The
 * caller then calls the implementation and tsr_ocl_objects_settle. False
 * if the shim does not know `key` (not charged: pass through). */
typedef struct {
  bool last;
  uint64_t bytes;
  int lease;
  const void *parent;
} tsr_ocl_drop_t;
bool tsr_ocl_objects_drop(tsr_ocl_kind_t kind, const void *key, tsr_ocl_drop_t *out);

/* After the implementation's release: if it succeeded, a last reference's
 * bytes are credited (and the parent's reference dropped in turn); if it
 * failed, the reference is given back as if nothing happened. */
void tsr_ocl_objects_settle(tsr_ocl_kind_t kind, const void *key, const tsr_ocl_drop_t *drop, bool released);

/* Forgets every object (a forked child: the parent's objects are not its). */
void tsr_ocl_objects_reset(void);

/* ---- charge.c: the order every allocating hook follows ---- */

/* The bytes a request is charged: rounded to the platform's piece. */
uint64_t tsr_ocl_round(const tsr_ocl_ctx_info_t *info, uint64_t bytes);

/* Charges `bytes` (already rounded) to `lease`. True when admitted (or
 * nothing is governed, or the device has no lease under `pass`); then
 * *out_charged is the lease charged, or -1 when none was. */
bool tsr_ocl_charge(int lease, uint64_t bytes, int *out_charged);

/* Gives `bytes` back to lease `charged` (no-op for -1). */
void tsr_ocl_credit(int charged, uint64_t bytes);

/* Memory flags the specification defines (anything else: the
 * implementation judges the request), and flags whose host pointer is
 * given exactly when USE_HOST_PTR or COPY_HOST_PTR asks for one. */
bool tsr_ocl_flags_known(cl_mem_flags flags);
bool tsr_ocl_flags_ok(cl_mem_flags flags, const void *host);

static inline void tsr_ocl_set_err(cl_int *err, cl_int rc) {
  if (err) *err = rc;
}

/* One creation in progress. */
typedef struct {
  tsr_ocl_ctx_info_t info;
  bool known;     /* the context answered */
  bool later;     /* not judged before: charge after the implementation made it */
  int charged;    /* the lease charged, -1 none */
  uint64_t bytes; /* what was (or will be) charged */
} tsr_ocl_admit_t;

/* Before the implementation: charges `bytes` to `ctx`'s lease when the
 * hook `judged` the request well-formed (and its size is within what the
 * context's devices take at once), else marks it to be charged after.
 * False: refused, nothing to undo. */
bool tsr_ocl_admit(cl_context ctx, uint64_t bytes, bool judged, tsr_ocl_admit_t *a);

/* After the implementation made `obj` (or failed: obj NULL or rc): on
 * failure gives the charge back; a request charged after is charged now,
 * and `undo(ctx, obj)` frees the object with `refused` as the error when
 * the lease cannot hold it; then remembers what obj was charged (with its
 * `parent`, for a sub-buffer or an image over a buffer). Returns what the
 * hook returns and sets *err. */
void *tsr_ocl_made(void *obj, cl_int rc, tsr_ocl_admit_t *a, tsr_ocl_kind_t kind, const void *parent,
                   void (*undo)(cl_context, void *), cl_context ctx, cl_int refused, cl_int *err);

/* The undo of a memory object: its release. */
void tsr_ocl_undo_mem(cl_context ctx, void *mem);

/* ---- real.c ---- */

/* The loader's entries the shim calls: those it hooks (it defines and
 * exports a function of the same name) and those it only uses. One list,
 * so that a hook cannot lack its real entry. */
/* (the lists are laid out by hand) */
/* clang-format off */
#define TSR_OCL_HOOKED(X)                                                                     \
  X(clGetDeviceInfo) X(clCreateContext) X(clCreateContextFromType) X(clRetainContext)        \
  X(clReleaseContext) X(clCreateBuffer) X(clCreateBufferWithProperties) X(clCreateSubBuffer) \
  X(clCreateImage) X(clCreateImageWithProperties) X(clCreateImage2D) X(clCreateImage3D)      \
  X(clCreatePipe) X(clRetainMemObject) X(clReleaseMemObject) X(clSVMAlloc) X(clSVMFree)      \
  X(clEnqueueSVMFree) X(clGetExtensionFunctionAddress) X(clGetExtensionFunctionAddressForPlatform)
#define TSR_OCL_USED(X) X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetContextInfo)
/* clang-format on */

#define TSR_OCL_FN(name) __typeof__(name) *name;
typedef struct {
  TSR_OCL_HOOKED(TSR_OCL_FN)
  TSR_OCL_USED(TSR_OCL_FN)
} tsr_ocl_real_t;

extern tsr_ocl_real_t tsr_ocl_real;

/* Loads the ICD loader ($TESSERA_REAL_LIBOPENCL, else libOpenCL.so.1) and
 * fills tsr_ocl_real; false if it cannot be loaded (every hook then
 * answers as a loader with no platform would). */
bool tsr_ocl_real_load(void);
/* The shim's own dlsym when it hooks `symbol` (an entry of the loader it
 * interposes), else NULL: where the exported dlsym sends that name
 * (tenant/dlsym.h). */
tsr_tenant_dlsym_fn tsr_ocl_dlsym_hook(const char *symbol);

/* ---- extensions.c ---- */

/* What clGetExtensionFunctionAddress(ForPlatform) hands out for `name`,
 * whose real entry on `platform` (NULL: the one the loader found first) is
 * `real`: the shim's hook for an allocator or free it charges, else `real`
 * itself. */
void *tsr_ocl_extension_hook(cl_platform_id platform, const char *name, void *real);

#endif
