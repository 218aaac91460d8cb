/* fc_test.h: what the fake driver's tests share. Each Criterion test runs
 * in its own process, so a test sets the FAKE_CUDA_* variables it needs and
 * then calls cuInit. */
#ifndef FAKECUDA_FC_TEST_H
#define FAKECUDA_FC_TEST_H

#include <criterion/criterion.h>
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* cr_assert that a driver call returns `want`, naming the call. */
#define CU_EXPECT(want, call)                                                               \
  do {                                                                                      \
    CUresult fc_got_ = (call);                                                              \
    cr_assert_eq(fc_got_, (want), "%s: got %d, want %d", #call, (int)fc_got_, (int)(want)); \
  } while (0)
#define CU_OK(call) CU_EXPECT(CUDA_SUCCESS, call)

/* cuInit with the given total memory and context footprint (0 makes "used"
 * exactly what allocations hold), then the primary context of device 0,
 * retained and current. */
static inline CUcontext fc_start(const char *total, const char *ctx_bytes) {
  if (total) setenv("FAKE_CUDA_TOTAL_MEM", total, 1);
  if (ctx_bytes) setenv("FAKE_CUDA_CTX_BYTES", ctx_bytes, 1);
  CUcontext c = NULL;
  CU_OK(cuInit(0));
  CU_OK(cuDevicePrimaryCtxRetain(&c, 0));
  CU_OK(cuCtxSetCurrent(c));
  return c;
}

/* Bytes in use on the current context's device (total - free). */
static inline size_t fc_used(void) {
  size_t free_b = 0, total = 0;
  CU_OK(cuMemGetInfo(&free_b, &total));
  return total - free_b;
}

#endif
