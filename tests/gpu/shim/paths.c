/* paths.c: a CUDA driver-API program that allocates through every path the
 * shim hooks until the driver (or the shim) says out of memory, frees
 * through the other paths, and prints one "key=value" line per step for
 * shim.sh to check. Built against the real driver (-lcuda). */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x)                                                              \
  do {                                                                        \
    CUresult r_ = (x);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                 \
      const char *s_ = "?";                                                   \
      cuGetErrorName(r_, &s_);                                                \
      printf("error=%s at=%s\n", s_, #x);                                     \
      return 1;                                                               \
    }                                                                         \
  } while (0)

int main(void) {
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
  size_t free_b = 0, total_b = 0;
  CHECK(cuMemGetInfo(&free_b, &total_b));
  printf("meminfo_free=%zu meminfo_total=%zu\n", free_b, total_b);
  size_t dtotal = 0;
  CHECK(cuDeviceTotalMem(&dtotal, dev));
  printf("device_total=%zu\n", dtotal);
  /* plain allocations of 256 MiB until refused */
  enum { MAXP = 4096 };
  static CUdeviceptr p[MAXP];
  int n = 0;
  CUresult last = CUDA_SUCCESS;
  const size_t chunk = (size_t)256 << 20;
  while (n < MAXP && (last = cuMemAlloc(&p[n], chunk)) == CUDA_SUCCESS) n++;
  const char *name = "?";
  cuGetErrorName(last, &name);
  printf("plain_chunks=%d plain_bytes=%zu stopped_by=%s\n", n, (size_t)n * chunk, name);
  /* write into the memory: the allocations are real */
  if (n > 0) CHECK(cuMemsetD8(p[0], 7, chunk));
  /* free half of them through cuMemFreeAsync, half through cuMemFree */
  CUstream s;
  CHECK(cuStreamCreate(&s, 0));
  for (int i = 0; i < n; i++) {
    if (i % 2) CHECK(cuMemFreeAsync(p[i], s));
    else CHECK(cuMemFree(p[i]));
  }
  CHECK(cuStreamSynchronize(s));
  /* again, through the async allocator, after 20 rounds of mixed frees */
  int again = 0;
  for (int round = 0; round < 20; round++) {
    int m = 0;
    while (m < MAXP && cuMemAllocAsync(&p[m], chunk, s) == CUDA_SUCCESS) m++;
    CHECK(cuStreamSynchronize(s));
    for (int i = 0; i < m; i++) {
      if (i % 2) CHECK(cuMemFreeAsync(p[i], s));
      else CHECK(cuMemFree(p[i]));
    }
    CHECK(cuStreamSynchronize(s));
    again = m;
  }
  printf("async_chunks_after_20_rounds=%d\n", again);
  /* pitch and managed */
  CUdeviceptr q;
  size_t pitch = 0;
  CUresult pr = cuMemAllocPitch(&q, &pitch, (size_t)1 << 20, 512, 4);
  printf("pitch_512MiB=%s\n", pr == CUDA_SUCCESS ? "ok" : "refused");
  if (pr == CUDA_SUCCESS) CHECK(cuMemFree(q));
  int mchunks = 0;
  while (mchunks < MAXP && cuMemAllocManaged(&p[mchunks], chunk, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS) mchunks++;
  printf("managed_chunks=%d\n", mchunks);
  for (int i = 0; i < mchunks; i++) CHECK(cuMemFree(p[i]));
  /* virtual memory: physical allocations until refused, then released */
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  static CUmemGenericAllocationHandle h[MAXP];
  int vchunks = 0;
  while (vchunks < MAXP && cuMemCreate(&h[vchunks], chunk, &prop, 0) == CUDA_SUCCESS) vchunks++;
  printf("vmm_chunks=%d\n", vchunks);
  for (int i = 0; i < vchunks; i++) CHECK(cuMemRelease(h[i]));
  CHECK(cuMemGetInfo(&free_b, &total_b));
  printf("end_meminfo_free=%zu\n", free_b);
  CHECK(cuStreamDestroy(s));
  CHECK(cuCtxDestroy(ctx));
  printf("done=1\n");
  return 0;
}
