/* Green contexts in the fake (tests/fakes/cuda/green.c): made from the
 * device's SMs through a descriptor, holding the primary context. */
#include <string.h>

#include "fc_test.h"

static CUdevResourceDesc whole_device(void) {
  CUdevResource res;
  CUdevResourceDesc desc;
  CU_OK(cuDeviceGetDevResource(0, &res, CU_DEV_RESOURCE_TYPE_SM));
  cr_assert_eq(res.type, CU_DEV_RESOURCE_TYPE_SM);
  cr_assert_eq(res.sm.smCount, 132);
  cr_assert_eq(res.sm.minSmPartitionSize, 8);
  CU_OK(cuDevResourceGenerateDesc(&desc, &res, 1));
  return desc;
}

/* "This API will retain the primary context on device dev, which is
 * released when the green context is destroyed." */
Test(green, holds_the_primary_context) {
  CU_OK(cuInit(0)); /* a context takes 512 MiB */
  CUdevResourceDesc desc = whole_device();
  unsigned flags;
  int active;
  CUgreenCtx g;
  CU_OK(cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM));
  CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  cr_assert_eq(active, 1, "the primary context is made with the green one");
  CUcontext c, primary;
  CU_OK(cuCtxFromGreenCtx(&c, g));
  CU_OK(cuCtxSetCurrent(c));
  cr_assert_eq(fc_used(), 512 * MiB);
  CUdeviceptr p;
  CU_OK(cuMemAlloc(&p, 64 * MiB));
  cr_assert_eq(fc_used(), 576 * MiB, "allocations in it are the device's");
  CU_OK(cuMemFree(p));
  CU_OK(cuDevicePrimaryCtxRetain(&primary, 0));
  CU_OK(cuGreenCtxDestroy(g));
  CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  cr_assert_eq(active, 1, "still retained once");
  CU_OK(cuDevicePrimaryCtxRelease(0));
  CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  cr_assert_eq(active, 0, "the green context's retain went with it");
  CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuGreenCtxDestroy(g));
  CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxFromGreenCtx(&c, g));
}

Test(green, bad_arguments) {
  CU_OK(cuInit(0));
  CUdevResource res;
  CUdevResourceDesc desc = whole_device();
  CUgreenCtx g;
  CU_EXPECT(CUDA_ERROR_INVALID_RESOURCE_TYPE, cuDeviceGetDevResource(0, &res, CU_DEV_RESOURCE_TYPE_INVALID));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetDevResource(7, &res, CU_DEV_RESOURCE_TYPE_SM));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDeviceGetDevResource(0, NULL, CU_DEV_RESOURCE_TYPE_SM));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDevResourceGenerateDesc(&desc, &res, 0));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGreenCtxCreate(&g, desc, 0, 0)); /* the flag is required */
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGreenCtxCreate(NULL, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGreenCtxCreate(&g, NULL, 0, CU_GREEN_CTX_DEFAULT_STREAM));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuGreenCtxCreate(&g, desc, 7, CU_GREEN_CTX_DEFAULT_STREAM));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxFromGreenCtx(NULL, NULL));
}
