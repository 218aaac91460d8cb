/* cpu_rt.h: a libtessera-rt runtime on the CPU backend for the Criterion
 * tests of tests/unit/rt/ (lane threads stand in for the kernel's blocks;
 * `jitter_us`: each lane sleeps a random 0 .. this many us before each
 * task, which shakes out any ordering the protocol does not enforce). */
#ifndef TESSERA_TEST_RT_CPU_RT_H
#define TESSERA_TEST_RT_CPU_RT_H

#include <criterion/criterion.h>

#include "tessera/rt.h"

static inline tsr_rt_t *tsr_test_cpu_rt(uint32_t lanes, uint32_t slots, uint32_t jitter_us) {
  tsr_rt_options_t o = {.backend = TSR_RT_BACKEND_CPU, .lanes = lanes, .lane_slots = slots, .cpu_jitter_us = jitter_us};
  tsr_rt_t *rt = NULL;
  tsr_status_t st = tsr_rt_create(&o, &rt);
  cr_assert_null(st, "%s", st ? tsr_status_message(st) : "");
  return rt;
}

/* Destroys it; every task must have run without an error. */
static inline void tsr_test_cpu_rt_done(tsr_rt_t *rt) {
  tsr_status_t st = tsr_rt_destroy(rt);
  cr_assert_null(st, "%s", st ? tsr_status_message(st) : "");
}

#endif
