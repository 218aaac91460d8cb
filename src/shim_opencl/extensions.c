/* extensions.c: allocators that programs reach through
 * clGetExtensionFunctionAddress(ForPlatform), not by symbol.
 *
 * Hooked where a platform here exposes them: Intel's unified shared memory
 * (cl_intel_unified_shared_memory; PoCL 5 has it) and NVIDIA's
 * clCreateBufferNV (cl_nv_create_buffer). Device and shared USM
 * allocations are charged (shared memory migrates to the device); host USM
 * allocations are host memory and are not. The loader answers with the
 * platform's own entry; the shim hands out its hook instead and keeps the
 * platform's entry, which the hook finds again through the context's
 * platform. Every other name gets the real entry. */
#include <pthread.h>
#include <string.h>

#include "shim_opencl/shim.h"

typedef enum {
  TSR__DEVICE_ALLOC,
  TSR__SHARED_ALLOC,
  TSR__FREE,
  TSR__BLOCKING_FREE,
  TSR__BUFFER_NV,
  TSR__BUFFER_PROPS_INTEL,
  TSR__HOOKS
} tsr__hook_t;

#define TSR__PLATFORMS 8
static pthread_mutex_t tsr__lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  cl_platform_id platform; /* NULL: from clGetExtensionFunctionAddress, whichever platform */
  void *fn;
} tsr_real[TSR__HOOKS][TSR__PLATFORMS];

typedef void *(CL_API_CALL *tsr__usm_alloc_t)(cl_context, cl_device_id, const cl_mem_properties_intel *, size_t,
                                              cl_uint, cl_int *);
typedef cl_int(CL_API_CALL *tsr__usm_free_t)(cl_context, void *);
typedef cl_mem(CL_API_CALL *tsr__buffer_nv_t)(cl_context, cl_mem_flags, cl_bitfield, size_t, void *, cl_int *);
typedef cl_mem(CL_API_CALL *tsr__buffer_props_t)(cl_context, const cl_mem_properties_intel *, cl_mem_flags, size_t,
                                                 void *, cl_int *);

static void tsr__remember(tsr__hook_t h, cl_platform_id platform, void *fn) {
  pthread_mutex_lock(&tsr__lock);
  size_t i = 0;
  while (i < TSR__PLATFORMS && tsr_real[h][i].fn && tsr_real[h][i].platform != platform) i++;
  if (i < TSR__PLATFORMS) tsr_real[h][i].platform = platform, tsr_real[h][i].fn = fn;
  pthread_mutex_unlock(&tsr__lock);
}

/* The platform's entry for hook h, else one handed out without a platform. */
static void *tsr__entry(tsr__hook_t h, cl_platform_id platform) {
  void *fn = NULL, *any = NULL;
  pthread_mutex_lock(&tsr__lock);
  for (size_t i = 0; i < TSR__PLATFORMS && tsr_real[h][i].fn; i++) {
    if (tsr_real[h][i].platform == platform) fn = tsr_real[h][i].fn;
    if (!tsr_real[h][i].platform) any = tsr_real[h][i].fn;
  }
  pthread_mutex_unlock(&tsr__lock);
  return fn ? fn : any;
}

/* The start of every allocating extension hook: admits the request
 * (tsr_ocl_admit) and finds the platform's entry for hook h. NULL when the
 * request is refused (*err = refused) or the platform has no such entry
 * (*err = CL_INVALID_OPERATION, the charge given back). */
static void *tsr__admitted(tsr__hook_t h, cl_context ctx, uint64_t size, bool judged, cl_int refused,
                           tsr_ocl_admit_t *a, cl_int *err) {
  if (!tsr_ocl_admit(ctx, size, judged, a)) {
    tsr_ocl_set_err(err, refused);
    return NULL;
  }
  void *fn = tsr__entry(h, a->known ? a->info.platform : NULL);
  if (!fn) {
    tsr_ocl_credit(a->charged, a->bytes);
    tsr_ocl_set_err(err, CL_INVALID_OPERATION);
  }
  return fn;
}

/* A USM pointer the lease cannot hold after all: freed again. */
static void tsr__undo_usm(cl_context ctx, void *p) {
  tsr_ocl_ctx_info_t info;
  cl_platform_id platform = tsr_ocl_context_info(ctx, &info) ? info.platform : NULL;
  void *f = tsr__entry(TSR__BLOCKING_FREE, platform);
  if (!f) f = tsr__entry(TSR__FREE, platform);
  tsr__usm_free_t free_fn;
  memcpy(&free_fn, &f, sizeof(free_fn));
  if (free_fn) free_fn(ctx, p);
}

/* Device and shared USM: one shape, two entries; charged to the context's
 * lease, as a buffer is, refused with CL_OUT_OF_RESOURCES. */
static void *tsr__usm_alloc(tsr__hook_t h, cl_context ctx, cl_device_id dev, const cl_mem_properties_intel *props,
                            size_t size, cl_uint align, cl_int *err) {
  tsr_ocl_admit_t a;
  void *fn = tsr__admitted(h, ctx, size, true, CL_OUT_OF_RESOURCES, &a, err);
  if (!fn) return NULL;
  tsr__usm_alloc_t real;
  memcpy(&real, &fn, sizeof(real));
  cl_int rc = CL_SUCCESS;
  void *p = real(ctx, dev, props, size, align, &rc);
  return tsr_ocl_made(p, rc, &a, TSR_OCL_USM, NULL, tsr__undo_usm, ctx, CL_OUT_OF_RESOURCES, err);
}

static void *CL_API_CALL tsr__device_alloc(cl_context ctx, cl_device_id dev, const cl_mem_properties_intel *props,
                                           size_t size, cl_uint align, cl_int *err) {
  return tsr__usm_alloc(TSR__DEVICE_ALLOC, ctx, dev, props, size, align, err);
}

static void *CL_API_CALL tsr__shared_alloc(cl_context ctx, cl_device_id dev, const cl_mem_properties_intel *props,
                                           size_t size, cl_uint align, cl_int *err) {
  return tsr__usm_alloc(TSR__SHARED_ALLOC, ctx, dev, props, size, align, err);
}

static cl_int tsr__usm_free(tsr__hook_t h, cl_context ctx, void *p) {
  tsr_ocl_ctx_info_t info;
  tsr__usm_free_t real;
  void *fn = tsr__entry(h, tsr_ocl_context_info(ctx, &info) ? info.platform : NULL);
  memcpy(&real, &fn, sizeof(real));
  if (!real) return CL_INVALID_OPERATION;
  tsr_ocl_drop_t d;
  bool ours = p && tsr_ocl_objects_drop(TSR_OCL_USM, p, &d);
  cl_int rc = real(ctx, p);
  if (ours) tsr_ocl_objects_settle(TSR_OCL_USM, p, &d, rc == CL_SUCCESS);
  return rc;
}

static cl_int CL_API_CALL tsr__free(cl_context ctx, void *p) { return tsr__usm_free(TSR__FREE, ctx, p); }

static cl_int CL_API_CALL tsr__blocking_free(cl_context ctx, void *p) {
  return tsr__usm_free(TSR__BLOCKING_FREE, ctx, p);
}

/* The two buffer makers, charged as clCreateBuffer is (memory.c). */
static cl_mem CL_API_CALL tsr__buffer_nv(cl_context ctx, cl_mem_flags flags, cl_bitfield flags_nv, size_t size,
                                         void *host, cl_int *err) {
  tsr_ocl_admit_t a;
  void *fn = tsr__admitted(TSR__BUFFER_NV, ctx, size, tsr_ocl_flags_ok(flags, host), CL_MEM_OBJECT_ALLOCATION_FAILURE,
                           &a, err);
  if (!fn) return NULL;
  tsr__buffer_nv_t real;
  memcpy(&real, &fn, sizeof(real));
  cl_int rc = CL_SUCCESS;
  cl_mem m = real(ctx, flags, flags_nv, size, host, &rc);
  return tsr_ocl_made(m, rc, &a, TSR_OCL_MEM, NULL, tsr_ocl_undo_mem, ctx, CL_MEM_OBJECT_ALLOCATION_FAILURE, err);
}

static cl_mem CL_API_CALL tsr__buffer_props(cl_context ctx, const cl_mem_properties_intel *props, cl_mem_flags flags,
                                            size_t size, void *host, cl_int *err) {
  tsr_ocl_admit_t a;
  void *fn = tsr__admitted(TSR__BUFFER_PROPS_INTEL, ctx, size, tsr_ocl_flags_ok(flags, host),
                           CL_MEM_OBJECT_ALLOCATION_FAILURE, &a, err);
  if (!fn) return NULL;
  tsr__buffer_props_t real;
  memcpy(&real, &fn, sizeof(real));
  cl_int rc = CL_SUCCESS;
  cl_mem m = real(ctx, props, flags, size, host, &rc);
  return tsr_ocl_made(m, rc, &a, TSR_OCL_MEM, NULL, tsr_ocl_undo_mem, ctx, CL_MEM_OBJECT_ALLOCATION_FAILURE, err);
}

static const struct {
  const char *name;
  void *hook;
} tsr__hooks[TSR__HOOKS] = {
    [TSR__DEVICE_ALLOC] = {"clDeviceMemAllocINTEL", (void *)tsr__device_alloc},
    [TSR__SHARED_ALLOC] = {"clSharedMemAllocINTEL", (void *)tsr__shared_alloc},
    [TSR__FREE] = {"clMemFreeINTEL", (void *)tsr__free},
    [TSR__BLOCKING_FREE] = {"clMemBlockingFreeINTEL", (void *)tsr__blocking_free},
    [TSR__BUFFER_NV] = {"clCreateBufferNV", (void *)tsr__buffer_nv},
    [TSR__BUFFER_PROPS_INTEL] = {"clCreateBufferWithPropertiesINTEL", (void *)tsr__buffer_props},
};

void *tsr_ocl_extension_hook(cl_platform_id platform, const char *name, void *real) {
  if (!real || !name) return real;
  for (size_t h = 0; h < TSR__HOOKS; h++)
    if (strcmp(name, tsr__hooks[h].name) == 0) {
      tsr__remember((tsr__hook_t)h, platform, real);
      return tsr__hooks[h].hook;
    }
  return real;
}

TSR_OCL_EXPORT void *clGetExtensionFunctionAddressForPlatform(cl_platform_id platform, const char *name) {
  tsr_ocl_ready();
  if (!tsr_ocl_real.clGetExtensionFunctionAddressForPlatform) return NULL;
  return tsr_ocl_extension_hook(platform, name, tsr_ocl_real.clGetExtensionFunctionAddressForPlatform(platform, name));
}

TSR_OCL_EXPORT void *clGetExtensionFunctionAddress(const char *name) {
  tsr_ocl_ready();
  if (!tsr_ocl_real.clGetExtensionFunctionAddress) return NULL;
  return tsr_ocl_extension_hook(NULL, name, tsr_ocl_real.clGetExtensionFunctionAddress(name));
}
