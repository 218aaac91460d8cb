/* charge.c: the order every allocating hook follows (shim.h): judge the
 * request, charge the lease before the implementation is asked (or after
 * it, for a request the shim could not judge), and record what the new
 * object was charged; and the lease arithmetic under it. */
#include <string.h>

#include "shim_opencl/shim.h"

uint64_t tsr_ocl_round(const tsr_ocl_ctx_info_t *info, uint64_t bytes) {
  return tsr_tenant_round(bytes, info->nvidia ? TSR_OCL_NV_GRANULE : TSR_OCL_PAGE);
}

/* The protocol is the tenant module's (tenant/tenant.h), shared with the
 * CUDA shim. */
bool tsr_ocl_charge(int lease, uint64_t bytes, int *out_charged) {
  return tsr_tenant_charge(&tsr_ocl, lease, bytes, NULL, out_charged);
}

void tsr_ocl_credit(int charged, uint64_t bytes) { tsr_tenant_credit(&tsr_ocl, charged, bytes); }

static const cl_mem_flags tsr__known_flags =
    CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR |
    CL_MEM_COPY_HOST_PTR | CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS |
    CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS | CL_MEM_KERNEL_READ_AND_WRITE;

bool tsr_ocl_flags_known(cl_mem_flags flags) { return (flags & ~tsr__known_flags) == 0; }

bool tsr_ocl_flags_ok(cl_mem_flags flags, const void *host) {
  if (!tsr_ocl_flags_known(flags)) return false;
  bool wants_host = flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR);
  return wants_host == (host != NULL);
}

bool tsr_ocl_admit(cl_context ctx, uint64_t bytes, bool judged, tsr_ocl_admit_t *a) {
  memset(a, 0, sizeof(*a));
  a->charged = -1;
  a->known = tsr_ocl_context_info(ctx, &a->info);
  if (!a->known || a->info.lease == TSR_OCL_UNGOVERNED) return true;
  a->bytes = tsr_ocl_round(&a->info, bytes);
  if (!judged || bytes == 0 || bytes > a->info.max_alloc) {
    a->later = true;
    return true;
  }
  return tsr_ocl_charge(a->info.lease, a->bytes, &a->charged);
}

void tsr_ocl_undo_mem(cl_context ctx, void *m) {
  (void)ctx;
  tsr_ocl_real.clReleaseMemObject((cl_mem)m);
}

void *tsr_ocl_made(void *obj, cl_int rc, tsr_ocl_admit_t *a, tsr_ocl_kind_t kind, const void *parent,
                   void (*undo)(cl_context, void *), cl_context ctx, cl_int refused, cl_int *err) {
  if (!obj || rc != CL_SUCCESS) {
    tsr_ocl_credit(a->charged, a->bytes);
    tsr_ocl_set_err(err, rc);
    return obj;
  }
  if (a->later && !tsr_ocl_charge(a->info.lease, a->bytes, &a->charged)) {
    undo(ctx, obj);
    tsr_ocl_set_err(err, refused);
    return NULL;
  }
  if ((a->charged >= 0 || parent) &&
      !tsr_ocl_objects_add(kind, obj, a->charged >= 0 ? a->bytes : 0, a->charged, parent)) {
    undo(ctx, obj);
    tsr_ocl_credit(a->charged, a->bytes);
    tsr_ocl_set_err(err, CL_OUT_OF_HOST_MEMORY);
    return NULL;
  }
  tsr_ocl_set_err(err, rc);
  return obj;
}
