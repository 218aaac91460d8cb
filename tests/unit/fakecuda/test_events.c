/* unit.fakecuda_events: events measure the simulated time of the work
 * between them, and answer the real driver's codes for bad flags, events
 * not recorded, untimed or still pending, and streams of another context. */
#include <dlfcn.h>

#include "fc_time.h"

Test(events, need_a_context) {
  CU_OK(cuInit(0));
  CUevent e;
  CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuEventCreate(&e, 0));
}

Test(events, flags) {
  fc_start("8GiB", "0");
  CUevent e;
  CU_OK(cuEventCreate(&e, CU_EVENT_DEFAULT));
  CU_OK(cuEventCreate(&e, CU_EVENT_BLOCKING_SYNC));
  CU_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventCreate(&e, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuEventCreate(&e, CU_EVENT_INTERPROCESS));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuEventCreate(&e, 0x10));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuEventCreate(NULL, 0));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuEventRecordWithFlags(e, NULL, 0x10));
  CU_EXPECT(CUDA_ERROR_ILLEGAL_STATE, cuEventRecordWithFlags(e, NULL, CU_EVENT_RECORD_EXTERNAL));
  CU_OK(cuEventRecordWithFlags(e, NULL, CU_EVENT_RECORD_DEFAULT));
}

/* A 2000 us kernel between two events on an idle device measures 2.0 ms,
 * plus the few microseconds between the calls (a loaded machine may take
 * longer once: three tries). */
Test(events, elapsed_time_of_a_kernel) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUevent a, b;
  CUstream s;
  CU_OK(cuEventCreate(&a, 0));
  CU_OK(cuEventCreate(&b, CU_EVENT_BLOCKING_SYNC));
  CU_OK(cuStreamCreate(&s, 0));
  float ms = -1;
  for (int i = 0; i < 3 && !(ms >= 1.999f && ms < 2.2f); i++) {
    CU_OK(cuEventRecord(a, s));
    CU_OK(cuLaunchKernel(k.spin2ms, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    CU_OK(cuEventRecord(b, s));
    ms = fc_elapsed(a, b);
  }
  cr_assert(ms >= 1.999f && ms < 2.2f, "a 2000 us kernel measured %.4f ms", (double)ms);
  /* exact when the device is busy before the first event */
  fc_measure_begin(&k, s, a);
  for (int i = 0; i < 5; i++) CU_OK(cuLaunchKernel(k.spin2ms, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
  CU_OK(cuEventRecord(b, s));
  FC_EXPECT_MS(fc_elapsed(a, b), 10.0);
  FC_EXPECT_MS(fc_elapsed(b, a), -10.0); /* backwards: negative */
  /* the CUDA 2.0 entry answers the same */
  CUresult (*v1)(float *, CUevent, CUevent) =
      (CUresult(*)(float *, CUevent, CUevent))dlsym(RTLD_DEFAULT, "cuEventElapsedTime");
  cr_assert_not_null(v1);
  CU_OK(v1(&ms, a, b));
  FC_EXPECT_MS(ms, 10.0);
}

Test(events, pending_unrecorded_and_untimed) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUevent a, b, untimed;
  CUstream s;
  CU_OK(cuEventCreate(&a, 0));
  CU_OK(cuEventCreate(&b, 0));
  CU_OK(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuStreamCreate(&s, 0));
  float ms;
  /* never recorded: complete, but it has no time */
  CU_OK(cuEventQuery(a));
  CU_OK(cuEventSynchronize(a));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, a, b));
  CU_OK(cuEventRecord(a, s));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, a, b));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, b, a));
  /* pending */
  CU_OK(cuLaunchKernel(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CU_OK(cuEventRecord(b, s));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuEventQuery(b));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuEventElapsedTime(&ms, a, b));
  double t0 = fc_wall_ms();
  CU_OK(cuEventSynchronize(b));
  cr_assert_geq(fc_wall_ms() - t0, 15.0, "cuEventSynchronize waits for the kernel");
  CU_OK(cuEventQuery(b));
  CU_OK(cuEventElapsedTime(&ms, a, b));
  /* untimed */
  CU_OK(cuEventRecord(untimed, s));
  CU_OK(cuEventSynchronize(untimed));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, a, untimed));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, untimed, b));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(NULL, a, b));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, a, (CUevent)&ms));
  /* recorded again: the new time counts */
  CU_OK(cuLaunchKernel(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CU_OK(cuEventRecord(a, s));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuEventQuery(a));
}

Test(events, contexts) {
  CUcontext primary = fc_start("8GiB", "0");
  CUevent e;
  CU_OK(cuEventCreate(&e, 0));
  CUcontext other;
  CUstream s2;
  CU_OK(cuCtxCreate(&other, NULL, 0, 0));
  CU_OK(cuStreamCreate(&s2, 0));
  /* "hEvent and hStream must be from the same context" */
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(e, s2));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(e, NULL)); /* other's legacy stream */
  CU_OK(cuEventQuery(e));                                       /* any context may ask */
  CUevent e2;
  CU_OK(cuEventCreate(&e2, 0));
  CU_OK(cuEventRecord(e2, s2));
  /* a context's events go with it */
  CU_OK(cuCtxDestroy(other));
  CU_OK(cuCtxSetCurrent(primary));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(e2));
  CU_OK(cuEventRecord(e, NULL));
  CU_OK(cuEventDestroy(e));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventDestroy(e));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(e, NULL));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventDestroy(NULL));
  /* the CUDA 2.0 destroy is the same */
  CUresult (*destroy_v1)(CUevent) = (CUresult(*)(CUevent))dlsym(RTLD_DEFAULT, "cuEventDestroy");
  cr_assert_not_null(destroy_v1);
  CU_OK(cuEventCreate(&e, 0));
  CU_OK(destroy_v1(e));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(e));
}

/* An event recorded in a capture belongs to the capture: it adds no node,
 * and cannot be waited for until recorded again outside it; asking about it
 * while the capture lasts invalidates the capture (as on the H100). */
Test(events, recorded_in_capture) {
  fc_start("8GiB", "0");
  CUevent e;
  CUstream s;
  CUgraph g;
  CU_OK(cuEventCreate(&e, 0));
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuEventRecord(e, s));
  CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuEventRecordWithFlags(e, s, CU_EVENT_RECORD_EXTERNAL));
  CU_OK(cuStreamEndCapture(s, &g));
  size_t n = 99;
  CU_OK(cuGraphGetNodes(g, NULL, &n));
  cr_assert_eq(n, 0, "a recorded event adds no node");
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuEventQuery(e));
  CU_OK(cuEventRecord(e, s));
  CU_OK(cuEventSynchronize(e));
  /* a query while the capture lasts: CAPTURED_EVENT, and the capture is lost */
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuEventRecord(e, s));
  CU_EXPECT(CUDA_ERROR_CAPTURED_EVENT, cuEventQuery(e));
  CU_EXPECT(CUDA_ERROR_CAPTURED_EVENT, cuEventSynchronize(e));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s, &g));
  cr_assert_null(g);
}
