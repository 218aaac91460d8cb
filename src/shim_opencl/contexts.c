/* contexts.c: contexts, and the lease's view of a device.
 *
 * On NVIDIA's platform a context takes device memory of its own (518 MiB
 * on the H100 with driver 580, as NVML shows it): the lease is charged
 * that much per context, from its creation to the program's last
 * clReleaseContext, as the CUDA shim charges a CUDA context. Other
 * platforms' contexts are charged nothing. Every context is tracked, so
 * that what the shim learnt of one is forgotten when the program lets it
 * go (the implementation may reuse its address). */
#include <string.h>

#include "shim_opencl/shim.h"

/* Charges a new context of `info` (NVIDIA's: its memory) and records it.
 * False: refused (the caller releases it). */
static bool tsr__context_made(cl_context ctx, const tsr_ocl_ctx_info_t *info, bool charged_before, int charged) {
  uint64_t bytes = info->nvidia && info->lease >= 0 ? TSR_OCL_NV_CONTEXT_BYTES : 0;
  if (!charged_before && bytes && !tsr_ocl_charge(info->lease, bytes, &charged)) return false;
  if (!tsr_ocl_objects_add(TSR_OCL_CONTEXT, ctx, charged >= 0 ? bytes : 0, charged, NULL)) {
    tsr_ocl_credit(charged, bytes);
    return false;
  }
  return true;
}

TSR_OCL_EXPORT cl_context clCreateContext(const cl_context_properties *props, cl_uint ndev, const cl_device_id *devs,
                                          void(CL_CALLBACK *notify)(const char *, const void *, size_t, void *),
                                          void *user, cl_int *err) {
  tsr_ocl_ready();
  if (!tsr_ocl_real.clCreateContext) {
    if (err) *err = CL_INVALID_PLATFORM;
    return NULL;
  }
  /* judged before the implementation by its first device, which the ICD
   * loader itself reads (the others may be anything: the implementation
   * judges them) */
  tsr_ocl_ctx_info_t info = {.lease = TSR_OCL_UNGOVERNED};
  int charged = -1;
  if (devs && ndev && devs[0]) {
    tsr_ocl_devices_info(devs, 1, &info);
    uint64_t bytes = info.nvidia && info.lease >= 0 ? TSR_OCL_NV_CONTEXT_BYTES : 0;
    if (bytes && !tsr_ocl_charge(info.lease, bytes, &charged)) {
      if (err) *err = CL_OUT_OF_RESOURCES;
      return NULL;
    }
  }
  cl_int rc = CL_SUCCESS;
  cl_context ctx = tsr_ocl_real.clCreateContext(props, ndev, devs, notify, user, &rc);
  if (!ctx || rc != CL_SUCCESS) {
    tsr_ocl_credit(charged, TSR_OCL_NV_CONTEXT_BYTES);
    if (err) *err = rc;
    return ctx;
  }
  if (!tsr__context_made(ctx, &info, true, charged)) {
    tsr_ocl_real.clReleaseContext(ctx);
    if (err) *err = CL_OUT_OF_HOST_MEMORY;
    return NULL;
  }
  if (err) *err = rc;
  return ctx;
}

TSR_OCL_EXPORT cl_context clCreateContextFromType(const cl_context_properties *props, cl_device_type type,
                                                  void(CL_CALLBACK *notify)(const char *, const void *, size_t, void *),
                                                  void *user, cl_int *err) {
  tsr_ocl_ready();
  if (!tsr_ocl_real.clCreateContextFromType) {
    if (err) *err = CL_INVALID_PLATFORM;
    return NULL;
  }
  cl_int rc = CL_SUCCESS;
  cl_context ctx = tsr_ocl_real.clCreateContextFromType(props, type, notify, user, &rc);
  if (!ctx || rc != CL_SUCCESS) {
    if (err) *err = rc;
    return ctx;
  }
  /* the devices are known only now: charged after */
  tsr_ocl_ctx_info_t info;
  if (tsr_ocl_context_info(ctx, &info) && !tsr__context_made(ctx, &info, false, -1)) {
    tsr_ocl_context_forget(ctx);
    tsr_ocl_real.clReleaseContext(ctx);
    if (err) *err = CL_OUT_OF_RESOURCES;
    return NULL;
  }
  if (err) *err = rc;
  return ctx;
}

TSR_OCL_EXPORT cl_int clRetainContext(cl_context ctx) {
  tsr_ocl_ready();
  if (!tsr_ocl_real.clRetainContext) return CL_INVALID_CONTEXT;
  cl_int rc = tsr_ocl_real.clRetainContext(ctx);
  if (rc == CL_SUCCESS) tsr_ocl_objects_retain(TSR_OCL_CONTEXT, ctx);
  return rc;
}

/* The program's last release: the context's charge comes back (its memory
 * objects, which keep it alive in the implementation, keep their own). */
TSR_OCL_EXPORT cl_int clReleaseContext(cl_context ctx) {
  tsr_ocl_ready();
  if (!tsr_ocl_real.clReleaseContext) return CL_INVALID_CONTEXT;
  tsr_ocl_drop_t d;
  bool ours = ctx && tsr_ocl_objects_drop(TSR_OCL_CONTEXT, ctx, &d);
  if (ours && d.last) tsr_ocl_context_forget(ctx);
  cl_int rc = tsr_ocl_real.clReleaseContext(ctx);
  if (ours) tsr_ocl_objects_settle(TSR_OCL_CONTEXT, ctx, &d, rc == CL_SUCCESS);
  return rc;
}

/* The lease's view: a leased device's memory is the lease's limit, and
 * so is the most one allocation may take; never more than the device. */
TSR_OCL_EXPORT cl_int clGetDeviceInfo(cl_device_id dev, cl_device_info what, size_t size, void *value,
                                      size_t *size_ret) {
  tsr_ocl_ready();
  if (!tsr_ocl_real.clGetDeviceInfo) return CL_INVALID_DEVICE;
  cl_int rc = tsr_ocl_real.clGetDeviceInfo(dev, what, size, value, size_ret);
  if (rc != CL_SUCCESS || !value || size < sizeof(cl_ulong) ||
      (what != CL_DEVICE_GLOBAL_MEM_SIZE && what != CL_DEVICE_MAX_MEM_ALLOC_SIZE))
    return rc;
  int lease = tsr_ocl_lease_of_device(dev);
  if (lease < 0 || (size_t)lease >= tsr_ocl.nleases) return rc;
  cl_ulong real;
  memcpy(&real, value, sizeof(real));
  uint64_t total = real, free_b = real;
  tsr_tenant_view(&tsr_ocl.leases[lease], &total, &free_b);
  cl_ulong shown = total;
  memcpy(value, &shown, sizeof(shown));
  return rc;
}
