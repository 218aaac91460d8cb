/* memory.c: every core call that makes device memory, and the releases.
 *
 * A request the shim can judge (a known context, a size within what its
 * devices take in one allocation, known flags used as the specification
 * says) is charged before the implementation sees it: over the lease it is
 * refused with CL_MEM_OBJECT_ALLOCATION_FAILURE (clSVMAlloc: NULL) and
 * nothing is made. Any other request goes to the implementation as it is,
 * so that a bad argument gets the implementation's own error; if the
 * implementation makes something of it after all (NVIDIA's platform takes
 * buffers past CL_DEVICE_MAX_MEM_ALLOC_SIZE), it is charged then, and
 * released again if the lease cannot hold it. */
#include <string.h>

#include "shim_opencl/image.h"
#include "shim_opencl/shim.h"

#define TSR__REAL(fn) tsr_ocl_real.fn

static void tsr__undo_svm(cl_context ctx, void *obj) { TSR__REAL(clSVMFree)(ctx, obj); }

/* A memory object's creation: refused before, or made (see tsr_ocl_made). */
static cl_mem tsr__refused(cl_int *err) {
  tsr_ocl_set_err(err, CL_MEM_OBJECT_ALLOCATION_FAILURE);
  return NULL;
}

static cl_mem tsr__mem_made(cl_mem m, cl_int rc, tsr_ocl_admit_t *a, const void *parent, cl_context ctx, cl_int *err) {
  return tsr_ocl_made(m, rc, a, TSR_OCL_MEM, parent, tsr_ocl_undo_mem, ctx, CL_MEM_OBJECT_ALLOCATION_FAILURE, err);
}

#define TSR__NO_LOADER(fn, err, rc) \
  do {                              \
    tsr_ocl_ready();                \
    if (!TSR__REAL(fn)) {           \
      tsr_ocl_set_err(err, rc);     \
      return NULL;                  \
    }                               \
  } while (0)

TSR_OCL_EXPORT cl_mem clCreateBuffer(cl_context ctx, cl_mem_flags flags, size_t size, void *host, cl_int *err) {
  TSR__NO_LOADER(clCreateBuffer, err, CL_INVALID_CONTEXT);
  tsr_ocl_admit_t a;
  if (!tsr_ocl_admit(ctx, size, tsr_ocl_flags_ok(flags, host), &a)) return tsr__refused(err);
  cl_int rc = CL_SUCCESS;
  cl_mem m = TSR__REAL(clCreateBuffer)(ctx, flags, size, host, &rc);
  return tsr__mem_made(m, rc, &a, NULL, ctx, err);
}

/* Whether a property list imports memory made elsewhere
 * (cl_khr_external_memory: an fd, a dma-buf, a Windows handle): the
 * allocation that made it was charged, by whoever made it; the import is
 * not charged again. */
static bool tsr__imports(const cl_mem_properties *props) {
  for (size_t i = 0; props && props[i] && i < 64; i += 2)
    if (props[i] >= 0x2060 && props[i] <= 0x2069) return true; /* CL_EXTERNAL_MEMORY_HANDLE_*_KHR */
  return false;
}

TSR_OCL_EXPORT cl_mem clCreateBufferWithProperties(cl_context ctx, const cl_mem_properties *props, cl_mem_flags flags,
                                                   size_t size, void *host, cl_int *err) {
  TSR__NO_LOADER(clCreateBufferWithProperties, err, CL_INVALID_CONTEXT);
  if (tsr__imports(props)) return TSR__REAL(clCreateBufferWithProperties)(ctx, props, flags, size, host, err);
  tsr_ocl_admit_t a;
  if (!tsr_ocl_admit(ctx, size, tsr_ocl_flags_ok(flags, host), &a)) return tsr__refused(err);
  cl_int rc = CL_SUCCESS;
  cl_mem m = TSR__REAL(clCreateBufferWithProperties)(ctx, props, flags, size, host, &rc);
  return tsr__mem_made(m, rc, &a, NULL, ctx, err);
}

/* A sub-buffer takes no memory of its own; it keeps its parent's alive. */
TSR_OCL_EXPORT cl_mem clCreateSubBuffer(cl_mem parent, cl_mem_flags flags, cl_buffer_create_type type, const void *info,
                                        cl_int *err) {
  TSR__NO_LOADER(clCreateSubBuffer, err, CL_INVALID_MEM_OBJECT);
  cl_int rc = CL_SUCCESS;
  cl_mem m = TSR__REAL(clCreateSubBuffer)(parent, flags, type, info, &rc);
  tsr_ocl_admit_t a = {.charged = -1};
  return tsr_ocl_made(m, rc, &a, TSR_OCL_MEM, parent, tsr_ocl_undo_mem, NULL, CL_OUT_OF_HOST_MEMORY, err);
}

/* The image hooks share this: `bytes` from tsr_ocl_image_bytes. */
static bool tsr__admit_image(cl_context ctx, cl_mem_flags flags, const cl_image_format *format,
                             const cl_image_desc *desc, const void *host, tsr_ocl_admit_t *a, cl_mem *parent) {
  uint64_t bytes = tsr_ocl_image_bytes(format, desc, parent);
  if (*parent) { /* over a buffer: nothing of its own to charge */
    memset(a, 0, sizeof(*a));
    a->charged = -1;
    return true;
  }
  return tsr_ocl_admit(ctx, bytes, bytes != 0 && tsr_ocl_flags_ok(flags, host), a);
}

TSR_OCL_EXPORT cl_mem clCreateImage(cl_context ctx, cl_mem_flags flags, const cl_image_format *format,
                                    const cl_image_desc *desc, void *host, cl_int *err) {
  TSR__NO_LOADER(clCreateImage, err, CL_INVALID_CONTEXT);
  tsr_ocl_admit_t a;
  cl_mem parent = NULL;
  if (!tsr__admit_image(ctx, flags, format, desc, host, &a, &parent)) return tsr__refused(err);
  cl_int rc = CL_SUCCESS;
  cl_mem m = TSR__REAL(clCreateImage)(ctx, flags, format, desc, host, &rc);
  return tsr__mem_made(m, rc, &a, parent, ctx, err);
}

TSR_OCL_EXPORT cl_mem clCreateImageWithProperties(cl_context ctx, const cl_mem_properties *props, cl_mem_flags flags,
                                                  const cl_image_format *format, const cl_image_desc *desc, void *host,
                                                  cl_int *err) {
  TSR__NO_LOADER(clCreateImageWithProperties, err, CL_INVALID_CONTEXT);
  if (tsr__imports(props)) return TSR__REAL(clCreateImageWithProperties)(ctx, props, flags, format, desc, host, err);
  tsr_ocl_admit_t a;
  cl_mem parent = NULL;
  if (!tsr__admit_image(ctx, flags, format, desc, host, &a, &parent)) return tsr__refused(err);
  cl_int rc = CL_SUCCESS;
  cl_mem m = TSR__REAL(clCreateImageWithProperties)(ctx, props, flags, format, desc, host, &rc);
  return tsr__mem_made(m, rc, &a, parent, ctx, err);
}

TSR_OCL_EXPORT cl_mem clCreateImage2D(cl_context ctx, cl_mem_flags flags, const cl_image_format *format, size_t width,
                                      size_t height, size_t row_pitch, void *host, cl_int *err) {
  TSR__NO_LOADER(clCreateImage2D, err, CL_INVALID_CONTEXT);
  cl_image_desc desc = {
      .image_type = CL_MEM_OBJECT_IMAGE2D, .image_width = width, .image_height = height, .image_row_pitch = row_pitch};
  tsr_ocl_admit_t a;
  cl_mem parent = NULL;
  if (!tsr__admit_image(ctx, flags, format, &desc, host, &a, &parent)) return tsr__refused(err);
  cl_int rc = CL_SUCCESS;
  cl_mem m = TSR__REAL(clCreateImage2D)(ctx, flags, format, width, height, row_pitch, host, &rc);
  return tsr__mem_made(m, rc, &a, NULL, ctx, err);
}

TSR_OCL_EXPORT cl_mem clCreateImage3D(cl_context ctx, cl_mem_flags flags, const cl_image_format *format, size_t width,
                                      size_t height, size_t depth, size_t row_pitch, size_t slice_pitch, void *host,
                                      cl_int *err) {
  TSR__NO_LOADER(clCreateImage3D, err, CL_INVALID_CONTEXT);
  cl_image_desc desc = {.image_type = CL_MEM_OBJECT_IMAGE3D,
                        .image_width = width,
                        .image_height = height,
                        .image_depth = depth,
                        .image_row_pitch = row_pitch,
                        .image_slice_pitch = slice_pitch};
  tsr_ocl_admit_t a;
  cl_mem parent = NULL;
  if (!tsr__admit_image(ctx, flags, format, &desc, host, &a, &parent)) return tsr__refused(err);
  cl_int rc = CL_SUCCESS;
  cl_mem m = TSR__REAL(clCreateImage3D)(ctx, flags, format, width, height, depth, row_pitch, slice_pitch, host, &rc);
  return tsr__mem_made(m, rc, &a, NULL, ctx, err);
}

TSR_OCL_EXPORT cl_mem clCreatePipe(cl_context ctx, cl_mem_flags flags, cl_uint packet_size, cl_uint max_packets,
                                   const cl_pipe_properties *props, cl_int *err) {
  TSR__NO_LOADER(clCreatePipe, err, CL_INVALID_CONTEXT);
  uint64_t bytes = (uint64_t)packet_size * max_packets;
  bool judged = (flags & ~(cl_mem_flags)(CL_MEM_READ_WRITE | CL_MEM_HOST_NO_ACCESS)) == 0;
  tsr_ocl_admit_t a;
  if (!tsr_ocl_admit(ctx, bytes, judged, &a)) return tsr__refused(err);
  cl_int rc = CL_SUCCESS;
  cl_mem m = TSR__REAL(clCreatePipe)(ctx, flags, packet_size, max_packets, props, &rc);
  return tsr__mem_made(m, rc, &a, NULL, ctx, err);
}

TSR_OCL_EXPORT cl_int clRetainMemObject(cl_mem m) {
  tsr_ocl_ready();
  if (!TSR__REAL(clRetainMemObject)) return CL_INVALID_MEM_OBJECT;
  cl_int rc = TSR__REAL(clRetainMemObject)(m);
  if (rc == CL_SUCCESS) tsr_ocl_objects_retain(TSR_OCL_MEM, m);
  return rc;
}

TSR_OCL_EXPORT cl_int clReleaseMemObject(cl_mem m) {
  tsr_ocl_ready();
  if (!TSR__REAL(clReleaseMemObject)) return CL_INVALID_MEM_OBJECT;
  tsr_ocl_drop_t d;
  bool ours = m && tsr_ocl_objects_drop(TSR_OCL_MEM, m, &d);
  cl_int rc = TSR__REAL(clReleaseMemObject)(m);
  if (ours) tsr_ocl_objects_settle(TSR_OCL_MEM, m, &d, rc == CL_SUCCESS);
  return rc;
}

/* ---- shared virtual memory ---- */

TSR_OCL_EXPORT void *clSVMAlloc(cl_context ctx, cl_svm_mem_flags flags, size_t size, cl_uint alignment) {
  tsr_ocl_ready();
  if (!TSR__REAL(clSVMAlloc)) return NULL;
  tsr_ocl_admit_t a;
  bool judged = tsr_ocl_flags_known(flags);
  if (!tsr_ocl_admit(ctx, size, judged, &a)) return NULL;
  void *p = TSR__REAL(clSVMAlloc)(ctx, flags, size, alignment);
  return tsr_ocl_made(p, p ? CL_SUCCESS : CL_MEM_OBJECT_ALLOCATION_FAILURE, &a, TSR_OCL_SVM, NULL, tsr__undo_svm, ctx,
                      CL_MEM_OBJECT_ALLOCATION_FAILURE, NULL);
}

/* clSVMFree returns nothing and frees at once: the credit follows it. */
TSR_OCL_EXPORT void clSVMFree(cl_context ctx, void *p) {
  tsr_ocl_ready();
  if (!TSR__REAL(clSVMFree)) return;
  tsr_ocl_drop_t d;
  bool ours = p && tsr_ocl_objects_drop(TSR_OCL_SVM, p, &d);
  TSR__REAL(clSVMFree)(ctx, p);
  if (ours) tsr_ocl_objects_settle(TSR_OCL_SVM, p, &d, true);
}

/* clEnqueueSVMFree frees when the command runs; the pointers are the
 * program's no longer once it is enqueued, so they are credited then. */
TSR_OCL_EXPORT cl_int clEnqueueSVMFree(cl_command_queue q, cl_uint n, void *ptrs[],
                                       void(CL_CALLBACK *fn)(cl_command_queue, cl_uint, void *[], void *), void *user,
                                       cl_uint nwait, const cl_event *wait, cl_event *ev) {
  tsr_ocl_ready();
  if (!TSR__REAL(clEnqueueSVMFree)) return CL_INVALID_COMMAND_QUEUE;
  cl_int rc = TSR__REAL(clEnqueueSVMFree)(q, n, ptrs, fn, user, nwait, wait, ev);
  if (rc == CL_SUCCESS && ptrs)
    for (cl_uint i = 0; i < n; i++) {
      tsr_ocl_drop_t d;
      if (ptrs[i] && tsr_ocl_objects_drop(TSR_OCL_SVM, ptrs[i], &d))
        tsr_ocl_objects_settle(TSR_OCL_SVM, ptrs[i], &d, true);
    }
  return rc;
}
