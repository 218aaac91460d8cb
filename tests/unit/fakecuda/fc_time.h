/* fc_time.h: what the tests of the fake's simulated time share: kernels
 * whose names say how long a wave of them takes, and a measurement that
 * depends on the simulated durations only.
 *
 * fc_measure queues a 50 ms "pad" kernel first, then records the start
 * event, the kernel, and the end event: the start completes when the pad
 * ends and the kernel starts right then (the device's engine is busy until
 * that moment), so the elapsed time is the kernel's simulated duration to
 * the nanosecond, however slowly this process runs, as long as it makes the
 * three calls within 50 ms. */
#ifndef FAKECUDA_FC_TIME_H
#define FAKECUDA_FC_TIME_H

#include <time.h>

#include "fc_test.h"

static const char fc_timed_ptx[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry spin_2000us()\n{\n  ret;\n}\n"
    ".visible .entry spin_20000us()\n{\n  ret;\n}\n"
    ".visible .entry pad_50000us()\n{\n  ret;\n}\n"
    ".visible .entry plain()\n{\n  ret;\n}\n";

typedef struct {
  CUmodule module;
  CUfunction spin2ms, spin20ms, pad, plain;
} fc_kernels_t;

static inline fc_kernels_t fc_kernels(void) {
  fc_kernels_t k;
  CU_OK(cuModuleLoadData(&k.module, fc_timed_ptx));
  CU_OK(cuModuleGetFunction(&k.spin2ms, k.module, "spin_2000us"));
  CU_OK(cuModuleGetFunction(&k.spin20ms, k.module, "spin_20000us"));
  CU_OK(cuModuleGetFunction(&k.pad, k.module, "pad_50000us"));
  CU_OK(cuModuleGetFunction(&k.plain, k.module, "plain"));
  return k;
}

static inline double fc_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Elapsed milliseconds between two recorded events, once both complete. */
static inline float fc_elapsed(CUevent a, CUevent b) {
  CU_OK(cuEventSynchronize(b));
  float ms = -1;
  CU_OK(cuEventElapsedTime(&ms, a, b));
  return ms;
}

/* Starts a measurement on `s`: the pad, then the start event. */
static inline void fc_measure_begin(const fc_kernels_t *k, CUstream s, CUevent start) {
  CU_OK(cuLaunchKernel(k->pad, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CU_OK(cuEventRecord(start, s));
}

/* The simulated milliseconds of `f` on gx x gy x gz blocks of `threads`. */
static inline float fc_measure(const fc_kernels_t *k, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                               unsigned threads) {
  CUstream s;
  CUevent a, b;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuEventCreate(&a, 0));
  CU_OK(cuEventCreate(&b, 0));
  fc_measure_begin(k, s, a);
  CU_OK(cuLaunchKernel(f, gx, gy, gz, threads, 1, 1, 0, s, NULL, NULL));
  CU_OK(cuEventRecord(b, s));
  float ms = fc_elapsed(a, b);
  CU_OK(cuEventDestroy(a));
  CU_OK(cuEventDestroy(b));
  CU_OK(cuStreamDestroy(s));
  return ms;
}

/* cr_assert that `ms` is `want` milliseconds (float rounding aside). */
#define FC_EXPECT_MS(ms, want)                                                                                    \
  do {                                                                                                            \
    float fc_ms_ = (ms);                                                                                          \
    cr_assert(fc_ms_ > (want)-0.001 && fc_ms_ < (want) + 0.001, "%s: %.6f ms, want %.3f ms", #ms, (double)fc_ms_, \
              (double)(want));                                                                                    \
  } while (0)

#endif
