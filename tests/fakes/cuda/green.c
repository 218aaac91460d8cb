/* green.c: green contexts (CUDA 12.4) and the device resources they are
 * made of, as the reference describes them:
 *   - cuDeviceGetDevResource gives a device's SMs (CU_DEV_RESOURCE_TYPE_SM
 *     only: other types are CUDA_ERROR_INVALID_RESOURCE_TYPE): 132 on the
 *     H100, partitioned in groups of 8 ("Compute Architecture 9.0+: the
 *     minimum count is 8 SMs and must be a multiple of 8");
 *   - cuDevResourceGenerateDesc makes a descriptor of one SM resource;
 *   - cuGreenCtxCreate needs CU_GREEN_CTX_DEFAULT_STREAM ("Required") and
 *     "will retain the primary context on device dev, which is released
 *     when the green context is destroyed": a process that never retained
 *     the primary context has its footprint taken here. It does not make
 *     the green context current;
 *   - cuCtxFromGreenCtx gives "a normal primary context but with the
 *     resources of the specified green context": here the primary context's
 *     own handle (the fake does not partition SMs).
 * Not emulated: cuDevSmResourceSplitByCount, a green context's own streams
 * (cuGreenCtxStreamCreate), events and resources; the error codes beyond
 * the reference's lists are unconfirmed (the H100 was not asked). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define FC_SM_PARTITION 8 /* minSmPartitionSize and smCoscheduledAlignment, 9.0+ */

typedef struct {
  fc_obj_t hdr;
  unsigned sm_count;
} fc_resdesc_t;

typedef struct {
  fc_obj_t hdr;
  CUdevice dev;      /* the CUDA ordinal it was made on */
  fc_ctx_t *primary; /* retained while the green context lives */
  unsigned sm_count;
} fc_green_t;

static CUresult fc_dev_resource(CUdevice device, CUdevResource *resource, CUdevResourceType type) {
  if (fc_dev_phys(device) < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!resource) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  memset(resource, 0, sizeof *resource);
  resource->type = CU_DEV_RESOURCE_TYPE_SM;
  resource->sm.smCount = FC_SM_COUNT;
  resource->sm.minSmPartitionSize = FC_SM_PARTITION;
  resource->sm.smCoscheduledAlignment = FC_SM_PARTITION;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource *resource, CUdevResourceType type) {
  FC_LOCKED(fc_dev_resource(device, resource, type));
}

static CUresult fc_resource_desc(CUdevResourceDesc *phDesc, CUdevResource *resources, unsigned int n) {
  if (!phDesc || !resources || n != 1) return CUDA_ERROR_INVALID_VALUE;
  if (resources[0].type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  unsigned sms = resources[0].sm.smCount;
  if (sms == 0 || sms > FC_SM_COUNT) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  fc_resdesc_t *d = fc_obj_new(FC_K_RESDESC, sizeof *d);
  if (!d) return CUDA_ERROR_OUT_OF_MEMORY;
  d->sm_count = sms;
  *phDesc = (CUdevResourceDesc)d;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources,
                                             unsigned int nbResources) {
  FC_LOCKED(fc_resource_desc(phDesc, resources, nbResources));
}

static CUresult fc_green_create(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  if (!phCtx || flags != CU_GREEN_CTX_DEFAULT_STREAM) return CUDA_ERROR_INVALID_VALUE;
  if (fc_dev_phys(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  fc_resdesc_t *d = fc_obj_find(FC_K_RESDESC, desc);
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  fc_green_t *g = fc_obj_new(FC_K_GREEN, sizeof *g);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  CUcontext primary;
  CUresult rc = fc_primary_retain(&primary, dev);
  if (rc != CUDA_SUCCESS) {
    fc_obj_remove(FC_K_GREEN, g);
    free(g);
    return rc;
  }
  g->dev = dev;
  g->primary = (fc_ctx_t *)primary;
  g->sm_count = d->sm_count;
  *phCtx = (CUgreenCtx)g;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  FC_LOCKED(fc_green_create(phCtx, desc, dev, flags));
}

static CUresult fc_green_destroy(CUgreenCtx hCtx) {
  fc_green_t *g = fc_obj_find(FC_K_GREEN, hCtx);
  if (!g) return CUDA_ERROR_INVALID_CONTEXT;
  fc_obj_remove(FC_K_GREEN, g);
  CUdevice dev = g->dev;
  free(g);
  /* a reset in between already ended the primary context: nothing to release */
  CUresult rc = fc_primary_release(dev);
  return rc == CUDA_ERROR_INVALID_CONTEXT ? CUDA_SUCCESS : rc;
}
FC_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx hCtx) { FC_LOCKED(fc_green_destroy(hCtx)); }

static CUresult fc_ctx_from_green(CUcontext *pContext, CUgreenCtx hCtx) {
  if (!pContext) return CUDA_ERROR_INVALID_VALUE;
  fc_green_t *g = fc_obj_find(FC_K_GREEN, hCtx);
  if (!g) return CUDA_ERROR_INVALID_CONTEXT;
  *pContext = (CUcontext)g->primary;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx) {
  FC_LOCKED(fc_ctx_from_green(pContext, hCtx));
}
