/* throttle.c: waiting for a lease's compute share (see shim/throttle.h). */
#include "shim/throttle.h"

#include <time.h>

#include "region/bucket.h"

#define TSR__SLEEP_ABOVE 200000u /* a wait longer than this sleeps */
#define TSR__SLEEP_EARLY 50000u  /* and wakes this much before the bucket allows */
#define TSR__BACKOFF_FIRST 50u
#define TSR__BACKOFF_MAX 10000u

static uint64_t tsr__real_now(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void tsr__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void tsr__real_pause(void *ctx, uint64_t ns) {
  if (ns >= TSR__SLEEP_ABOVE - TSR__SLEEP_EARLY) {
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    nanosleep(&ts, NULL); /* a signal ends it early: the caller asks again */
    return;
  }
  uint64_t end = tsr__real_now(ctx) + ns;
  while (tsr__real_now(ctx) < end) tsr__cpu_relax();
}

static const tsr_shim_clock_t tsr__real_clock = {tsr__real_now, tsr__real_pause, NULL};
const tsr_shim_clock_t *tsr_shim_clock = &tsr__real_clock;

/* Takes `span` from `tat`, waiting as long as it takes; returns ns waited. */
static uint64_t tsr__take_waiting(tsr_region_t *region, tsr_atomic_u64 *tat, uint64_t span, uint64_t burst,
                                  uint64_t *out_now) {
  const tsr_shim_clock_t *clk = tsr_shim_clock;
  uint64_t start = clk->now(clk->ctx), now = start;
  uint64_t step = TSR__BACKOFF_FIRST;
  uint64_t quantum = TSR_SHIM_QUANTUM_NS < burst ? TSR_SHIM_QUANTUM_NS : burst;
  for (;;) {
    uint64_t wait = region ? tsr_region_take(region, now, span) : tsr_bucket_take(tat, now, span, burst);
    if (!wait) {
      *out_now = now;
      return now - start;
    }
    /* wake with a quantum of credit, unless the wait would grow past the cap */
    if (wait + (now - start) < TSR_SHIM_WAIT_CAP_NS) {
      uint64_t room = TSR_SHIM_WAIT_CAP_NS - wait - (now - start);
      wait += quantum < room ? quantum : room;
    }
    uint64_t p;
    if (wait > TSR__SLEEP_ABOVE) {
      p = wait - TSR__SLEEP_EARLY;
    } else {
      p = step < wait ? step : wait;
      step = step * 2 > TSR__BACKOFF_MAX ? TSR__BACKOFF_MAX : step * 2;
    }
    clk->pause(clk->ctx, p);
    now = clk->now(clk->ctx);
  }
}

uint64_t tsr_shim_throttle(tsr_region_t *region, const tsr_region_compute_t *c, tsr_atomic_u64 *stream_tat,
                           uint64_t cost_ns, uint64_t *out_now) {
  uint64_t waited = 0, now = 0;
  /* read at each launch: a resize moves it (0: the share was taken away) */
  uint32_t share = tsr_region_share_now(region);
  if (!share) {
    if (out_now) *out_now = tsr_shim_clock->now(tsr_shim_clock->ctx);
    return 0;
  }
  if (stream_tat && c->stream_ppm < TSR_BUCKET_PPM) {
    uint32_t ppm = (uint32_t)((uint64_t)share * c->stream_ppm / TSR_BUCKET_PPM);
    waited += tsr__take_waiting(NULL, stream_tat, tsr_bucket_span(cost_ns, ppm ? ppm : 1), c->burst_ns, &now);
  }
  waited += tsr__take_waiting(region, NULL, tsr_bucket_span(cost_ns, share), c->burst_ns, &now);
  if (out_now) *out_now = now;
  return waited;
}

void tsr_shim_throttle_settle(tsr_region_t *region, int64_t gpu_ns) {
  if (!gpu_ns) return;
  uint64_t mag = gpu_ns > 0 ? (uint64_t)gpu_ns : (uint64_t)(-(gpu_ns + 1)) + 1;
  uint32_t share = tsr_region_share_now(region);
  if (!share) return;
  uint64_t span = tsr_bucket_span(mag, share);
  const tsr_shim_clock_t *clk = tsr_shim_clock;
  tsr_region_adjust(region, clk->now(clk->ctx), gpu_ns > 0 ? (int64_t)span : -(int64_t)span);
}
