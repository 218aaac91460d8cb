/* unit.fakecuda_time: kernels take the simulated time their names say per
 * wave, one device runs one thing at a time whatever the stream, and
 * synchronizes and queries see that time pass (without holding the fake's
 * lock while they wait). */
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include "fc_time.h"

Test(time, duration_per_wave) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  /* a wave: 132 SMs x min(32, 2048 / threads) blocks */
  FC_EXPECT_MS(fc_measure(&k, k.spin2ms, 1, 1, 1, 1), 2.0);
  FC_EXPECT_MS(fc_measure(&k, k.spin2ms, 132 * 32, 1, 1, 64), 2.0);
  FC_EXPECT_MS(fc_measure(&k, k.spin2ms, 132 * 32 + 1, 1, 1, 64), 4.0);
  FC_EXPECT_MS(fc_measure(&k, k.spin2ms, 132 * 2, 1, 1, 1024), 2.0);
  FC_EXPECT_MS(fc_measure(&k, k.spin2ms, 132 * 2 + 1, 1, 1, 1024), 4.0);
  FC_EXPECT_MS(fc_measure(&k, k.spin2ms, 132 * 32 * 3, 1, 1, 32), 6.0); /* 32 a block: still 32 an SM */
  FC_EXPECT_MS(fc_measure(&k, k.spin2ms, 133, 32, 1, 64), 4.0);         /* blocks of every dimension */
  FC_EXPECT_MS(fc_measure(&k, k.plain, 1000, 1, 1, 64), 0.0);           /* FAKE_CUDA_KERNEL_US unset */
}

Test(time, kernel_us_for_other_names) {
  setenv("FAKE_CUDA_KERNEL_US", "300", 1);
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  FC_EXPECT_MS(fc_measure(&k, k.plain, 1, 1, 1, 64), 0.3);
  FC_EXPECT_MS(fc_measure(&k, k.plain, 132 * 32 * 2, 1, 1, 64), 0.6);
  FC_EXPECT_MS(fc_measure(&k, k.spin2ms, 1, 1, 1, 64), 2.0); /* a name that says wins */
}

/* Only "_<digits>us" at the very end says; anything else is the default. */
Test(time, names_that_do_not_say) {
  setenv("FAKE_CUDA_KERNEL_US", "100", 1);
  fc_start("8GiB", "0");
  CUmodule m;
  CU_OK(cuModuleLoadData(&m,
                         "\x7f"
                         "ELF fake cubin")); /* any name gives a function */
  fc_kernels_t k = fc_kernels();
  static const struct {
    const char *name;
    double ms;
  } cases[] = {{"k_0us", 0.0},    {"k_1us", 0.001}, {"k_us", 0.1},  {"k1500us", 0.1},  {"k_1500us_", 0.1},
               {"k_15x0us", 0.1}, {"_250us", 0.25}, {"250us", 0.1}, {"k__7us", 0.007}, {"k_1500uss", 0.1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CUfunction f;
    CU_OK(cuModuleGetFunction(&f, m, cases[i].name));
    float ms = fc_measure(&k, f, 1, 1, 1, 1);
    cr_assert(ms > cases[i].ms - 0.001 && ms < cases[i].ms + 0.001, "%s: %.6f ms, want %.3f", cases[i].name, (double)ms,
              cases[i].ms);
  }
}

/* A huge name is clamped, not wrapped: the launch is accepted and its end
 * lies far ahead (the stream is busy). */
Test(time, huge_duration_is_clamped) {
  fc_start("8GiB", "0");
  CUmodule m;
  CUfunction f;
  CU_OK(cuModuleLoadData(&m,
                         "\x7f"
                         "ELF fake cubin"));
  CU_OK(cuModuleGetFunction(&f, m, "k_99999999999999999999999us"));
  CUstream s;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuLaunchKernel(f, 2147483647u, 65535, 65535, 1, 1, 1, 0, s, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(NULL)); /* the legacy stream waits for it */
}

/* One serial engine per device: a kernel on another stream starts when the
 * first ends; an event after each is 20 ms apart. */
Test(time, streams_share_one_engine) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUstream s1, s2;
  CUevent a, b, c;
  CU_OK(cuStreamCreate(&s1, 0));
  CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CU_OK(cuEventCreate(&a, 0));
  CU_OK(cuEventCreate(&b, 0));
  CU_OK(cuEventCreate(&c, 0));
  fc_measure_begin(&k, s1, a);
  CU_OK(cuLaunchKernel(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, s1, NULL, NULL));
  CU_OK(cuEventRecord(b, s1));
  CU_OK(cuLaunchKernel(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, s2, NULL, NULL));
  CU_OK(cuEventRecord(c, s2));
  FC_EXPECT_MS(fc_elapsed(a, b), 20.0);
  FC_EXPECT_MS(fc_elapsed(b, c), 20.0);
  FC_EXPECT_MS(fc_elapsed(a, c), 40.0);
}

Test(time, synchronize_sleeps_until_the_work_ends) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUstream s;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuStreamQuery(s));
  double t0 = fc_wall_ms();
  CU_OK(cuLaunchKernel(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CU_OK(cuLaunchKernel(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  cr_assert_lt(fc_wall_ms() - t0, 20.0, "a launch does not wait");
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
  CU_OK(cuStreamSynchronize(s));
  cr_assert_geq(fc_wall_ms() - t0, 40.0);
  CU_OK(cuStreamQuery(s));
  /* the context waits for all of its streams */
  CUstream s2;
  CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  t0 = fc_wall_ms();
  CU_OK(cuLaunchKernel(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, s2, NULL, NULL));
  CU_OK(cuCtxSynchronize());
  cr_assert_geq(fc_wall_ms() - t0, 20.0);
  CU_OK(cuStreamQuery(s2));
  /* a destroyed blocking stream's work goes on: the legacy stream waits */
  CU_OK(cuLaunchKernel(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CU_OK(cuStreamDestroy(s));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(NULL));
  CU_OK(cuStreamSynchronize(NULL));
  cr_assert_geq(fc_wall_ms() - t0, 40.0);
}

/* The legacy stream waits for blocking streams (and they for it), not for
 * non-blocking ones. */
Test(time, legacy_stream_synchronizes_with_blocking_streams) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUstream blocking, nonblocking;
  CUevent e;
  CU_OK(cuStreamCreate(&blocking, 0));
  CU_OK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  CU_OK(cuEventCreate(&e, 0));
  CU_OK(cuLaunchKernel(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, nonblocking, NULL, NULL));
  CU_OK(cuEventRecord(e, NULL));
  CU_OK(cuEventQuery(e)); /* the legacy stream has no work and does not wait for it */
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(nonblocking));
  CU_OK(cuStreamQuery(blocking));
  CU_OK(cuCtxSynchronize());
  CU_OK(cuLaunchKernel(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, blocking, NULL, NULL));
  CU_OK(cuEventRecord(e, CU_STREAM_LEGACY));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuEventQuery(e)); /* it waits for a blocking stream's */
  CU_OK(cuCtxSynchronize());
  CU_OK(cuLaunchKernel(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(blocking)); /* and a blocking stream for it */
  CU_OK(cuStreamQuery(nonblocking));
}

typedef struct {
  CUcontext ctx;
  CUstream s;
  CUresult rc;
  double done_ms;
} sync_arg_t;

static void *sync_thread(void *p) {
  sync_arg_t *a = p;
  cuCtxSetCurrent(a->ctx);
  a->rc = cuStreamSynchronize(a->s);
  a->done_ms = fc_wall_ms();
  return NULL;
}

/* A thread asleep in a synchronize does not hold the others up. */
Test(time, synchronize_lets_other_threads_in) {
  CUcontext c = fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUstream s;
  CU_OK(cuStreamCreate(&s, 0));
  double t0 = fc_wall_ms();
  for (int i = 0; i < 4; i++) CU_OK(cuLaunchKernel(k.pad, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  sync_arg_t a = {.ctx = c, .s = s};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, sync_thread, &a), 0);
  struct timespec ten_ms = {0, 10 * 1000 * 1000};
  nanosleep(&ten_ms, NULL);
  double before = fc_wall_ms();
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
  size_t f, total;
  CU_OK(cuMemGetInfo(&f, &total));
  double after = fc_wall_ms();
  pthread_join(t, NULL);
  CU_OK(a.rc);
  cr_assert_lt(after - before, 100.0, "calls while another thread synchronizes took %.1f ms", after - before);
  cr_assert_geq(a.done_ms - t0, 200.0, "the synchronize returned after %.1f ms", a.done_ms - t0);
  cr_assert_lt(after, a.done_ms);
}

static CUresult (*launch_ptsz)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               CUstream, void **, void **);
static CUresult (*query_ptsz)(CUstream);

static void *query_other_thread(void *p) {
  CUcontext c = p;
  cuCtxSetCurrent(c);
  return (void *)(intptr_t)query_ptsz(NULL);
}

/* Through the per-thread entries NULL is the calling thread's own default
 * stream: each thread has one. */
Test(time, per_thread_default_streams) {
  CUcontext c = fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  void *pfn;
  CUdriverProcAddressQueryResult st;
  CU_OK(cuGetProcAddress("cuLaunchKernel", &pfn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz"));
  launch_ptsz = pfn;
  CU_OK(cuGetProcAddress("cuStreamQuery", &pfn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  cr_assert_eq(pfn, dlsym(RTLD_DEFAULT, "cuStreamQuery_ptsz"));
  query_ptsz = pfn;
  CU_OK(launch_ptsz(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_NOT_READY, query_ptsz(NULL));
  CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(CU_STREAM_PER_THREAD));
  pthread_t t;
  void *rc;
  cr_assert_eq(pthread_create(&t, NULL, query_other_thread, c), 0);
  pthread_join(t, &rc);
  cr_assert_eq((CUresult)(intptr_t)rc, CUDA_SUCCESS, "another thread's default stream has no work");
  CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  CU_OK(query_ptsz(NULL));
}

Test(time, cooperative_launches_fit_one_wave) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CU_OK(cuLaunchCooperativeKernel(k.spin2ms, 132 * 32, 1, 1, 64, 1, 1, 0, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
            cuLaunchCooperativeKernel(k.spin2ms, 132 * 32 + 1, 1, 1, 64, 1, 1, 0, NULL, NULL));
  CU_OK(cuLaunchCooperativeKernel(k.spin2ms, 132, 2, 1, 32, 32, 1, 0, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
            cuLaunchCooperativeKernel(k.spin2ms, 133, 2, 1, 32, 32, 1, 0, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuLaunchCooperativeKernel(k.spin2ms, 0, 1, 1, 64, 1, 1, 0, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuLaunchCooperativeKernel(NULL, 1, 1, 1, 64, 1, 1, 0, NULL, NULL));
  /* cuLaunchKernelEx with the cooperative attribute is one too */
  CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .value.cooperative = 1};
  CUlaunchConfig cfg = {.gridDimX = 132 * 32 + 1,
                        .gridDimY = 1,
                        .gridDimZ = 1,
                        .blockDimX = 64,
                        .blockDimY = 1,
                        .blockDimZ = 1,
                        .attrs = &attr,
                        .numAttrs = 1};
  CU_EXPECT(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, cuLaunchKernelEx(&cfg, k.spin2ms, NULL, NULL));
  attr.value.cooperative = 0;
  CU_OK(cuLaunchKernelEx(&cfg, k.spin2ms, NULL, NULL));
  /* a cooperative kernel takes its time like any other */
  CUstream s;
  CUevent a, b;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuEventCreate(&a, 0));
  CU_OK(cuEventCreate(&b, 0));
  fc_measure_begin(&k, s, a);
  CU_OK(cuLaunchCooperativeKernel(k.spin2ms, 132 * 32, 1, 1, 64, 1, 1, 0, s, NULL));
  CU_OK(cuEventRecord(b, s));
  FC_EXPECT_MS(fc_elapsed(a, b), 2.0);
}

/* The kernel of a library launched as a function, as CUDA 12 runtimes do,
 * and the names of every handle. */
Test(time, library_kernels) {
  fc_start("8GiB", "0");
  CUlibrary lib;
  CUkernel kern;
  CUfunction f;
  const char *name = NULL;
  CU_OK(cuLibraryLoadData(&lib, fc_timed_ptx, NULL, NULL, 0, NULL, NULL, 0));
  CU_OK(cuLibraryGetKernel(&kern, lib, "spin_2000us"));
  CU_OK(cuKernelGetName(&name, kern));
  cr_assert_str_eq(name, "spin_2000us");
  CU_OK(cuKernelGetFunction(&f, kern));
  CU_OK(cuFuncGetName(&name, f));
  cr_assert_str_eq(name, "spin_2000us");
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuKernelGetName(NULL, kern));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuKernelGetFunction(&f, (CUkernel)&name));
  fc_kernels_t k = fc_kernels();
  FC_EXPECT_MS(fc_measure(&k, (CUfunction)kern, 1, 1, 1, 1), 2.0);
  CU_OK(cuLibraryUnload(lib));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuKernelGetName(&name, kern));
}
