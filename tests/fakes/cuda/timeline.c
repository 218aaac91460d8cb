/* timeline.c: how long kernels take, and when the work queued on a device
 * ends.
 *
 * The shim learns each kernel's duration from events recorded around it,
 * and throttles launches by the time they take; so the fake's kernels take
 * time, deterministically:
 *   - a function whose name ends in _<N>us (PTX ".entry spin_1500us") runs N
 *     microseconds per wave; any other runs FAKE_CUDA_KERNEL_US per wave
 *     (default 0: existing programs see no time pass);
 *   - a wave is what the device holds at once: 132 SMs x min(32, 2048 /
 *     threads per block) blocks (the H100's limits of blocks and threads
 *     per SM), so B blocks take ceil(B / that) waves;
 *   - each physical device has one serial engine (per process): work queued
 *     on any stream starts when the engine is free, or now if it is idle,
 *     and ends its duration later (CLOCK_MONOTONIC). A real GPU runs small
 *     kernels of several streams at once; the fake never does, which is
 *     what a throttle that shares out device time needs to be tested with.
 * Nothing runs: a kernel's "end" is a time, compared with the clock by
 * queries and slept until by synchronizes. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "internal.h"

uint64_t fc_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t fc_min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t fc_max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

uint64_t fc_wave_ns(const char *name) {
  uint64_t us = g_fc.cfg.kernel_us;
  size_t len = name ? strlen(name) : 0;
  /* "..._<digits>us": the digits are read back to front */
  if (len > 3 && name[len - 2] == 'u' && name[len - 1] == 's') {
    size_t i = len - 2, ndigits = 0;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') i--, ndigits++;
    if (ndigits > 0 && i > 0 && name[i - 1] == '_') {
      us = 0;
      for (size_t j = i; j < len - 2; j++) {
        us = us * 10 + (uint64_t)(name[j] - '0');
        if (us > FC_WORK_NS_MAX / 1000) break; /* clamped below */
      }
    }
  }
  return us > FC_WORK_NS_MAX / 1000 ? FC_WORK_NS_MAX : us * 1000;
}

uint64_t fc_wave_blocks(uint64_t threads) {
  if (threads == 0) threads = 1;
  uint64_t per_sm = fc_min_u64(32, FC_THREADS_PER_SM / threads);
  return (uint64_t)FC_SM_COUNT * (per_sm ? per_sm : 1);
}

uint64_t fc_kernel_ns(uint64_t wave_ns, uint64_t blocks, uint64_t threads) {
  if (wave_ns == 0 || blocks == 0) return 0;
  uint64_t per_wave = fc_wave_blocks(threads);
  uint64_t waves = blocks / per_wave + (blocks % per_wave != 0);
  return waves > FC_WORK_NS_MAX / wave_ns ? FC_WORK_NS_MAX : waves * wave_ns;
}

uint64_t fc_stream_position(const fc_stream_t *s) {
  uint64_t t = s->end_ns;
  const fc_ctx_t *c = s->ctx;
  if (s->skind == FC_S_LEGACY) {
    /* the legacy stream waits for every blocking stream of its context,
     * destroyed ones too */
    t = fc_max_u64(t, c->gone_end_ns);
    for (size_t i = 0; i < g_fc.nobjs[FC_K_STREAM]; i++) {
      const fc_stream_t *o = g_fc.objs[FC_K_STREAM][i];
      if (o->ctx == c && !(o->flags & CU_STREAM_NON_BLOCKING)) t = fc_max_u64(t, o->end_ns);
    }
    for (size_t i = 0; i < g_fc.nptstreams; i++)
      if (g_fc.ptstreams[i]->ctx == c) t = fc_max_u64(t, g_fc.ptstreams[i]->end_ns);
  } else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
    t = fc_max_u64(t, c->legacy.end_ns); /* and they for it */
  }
  return t;
}

uint64_t fc_timeline_run(fc_stream_t *s, uint64_t ns) {
  fc_ctx_t *c = s->ctx;
  uint64_t *busy = &g_fc.busy_until[c->dev];
  /* every stream's work ends by *busy, so this start follows the stream's
   * own work and the legacy stream's implicit waits too */
  uint64_t start = fc_max_u64(fc_now_ns(), *busy);
  uint64_t end = start + fc_min_u64(ns, FC_WORK_NS_MAX);
  *busy = end;
  s->end_ns = end;
  c->end_ns = fc_max_u64(c->end_ns, end);
  return end;
}

void fc_sleep_until(uint64_t t_ns) {
  if (fc_now_ns() >= t_ns) return; /* nothing to wait for: keep the lock */
  fc_unlock();
  struct timespec ts = {.tv_sec = (time_t)(t_ns / 1000000000u), .tv_nsec = (long)(t_ns % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
  fc_lock();
}
