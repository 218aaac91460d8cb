/* bucket.c: the compute share's token bucket (see region/bucket.h). */
#include "region/bucket.h"

#include <stdbool.h>

#define TSR__TAKE_TRIES 64 /* a CAS lost this often: ask again after a microsecond */

uint64_t tsr_bucket_span(uint64_t cost_ns, uint32_t share_ppm) {
  if (share_ppm == 0 || share_ppm > TSR_BUCKET_PPM) share_ppm = TSR_BUCKET_PPM;
  /* cost * 1e6 / ppm without overflow: cost is clamped first */
  if (cost_ns > TSR_BUCKET_SPAN_MAX) cost_ns = TSR_BUCKET_SPAN_MAX;
  uint64_t span = cost_ns * TSR_BUCKET_PPM / share_ppm; /* < 1e10 * 1e6 < 2^64 */
  return span > TSR_BUCKET_SPAN_MAX ? TSR_BUCKET_SPAN_MAX : span;
}

uint64_t tsr_bucket_take(tsr_atomic_u64 *tat, uint64_t now, uint64_t span, uint64_t burst) {
  if (burst > TSR_BUCKET_BURST_MAX) burst = TSR_BUCKET_BURST_MAX;
  if (span > TSR_BUCKET_SPAN_MAX) span = TSR_BUCKET_SPAN_MAX;
  uint64_t t = tsr_atomic_load_acquire(tat);
  for (int i = 0; i < TSR__TAKE_TRIES; i++) {
    uint64_t next;
    if (t > now) {
      if (t - now <= TSR_BUCKET_AHEAD_MAX) return t - now;
      next = now + span; /* not a time a take wrote: start afresh */
    } else {
      uint64_t floor = now > burst ? now - burst : 0;
      next = (t > floor ? t : floor) + span;
    }
    if (tsr_atomic_cas_strong_acq_rel(tat, &t, next)) return 0;
  }
  return 1000;
}

void tsr_bucket_adjust(tsr_atomic_u64 *tat, uint64_t now, int64_t delta) {
  uint64_t t = tsr_atomic_load_acquire(tat);
  for (int i = 0; i < TSR__TAKE_TRIES; i++) {
    uint64_t next;
    if (delta >= 0) {
      bool damaged = t > tsr_bucket_sat_add(now, TSR_BUCKET_AHEAD_MAX);
      next = tsr_bucket_sat_add(damaged ? now : t, (uint64_t)delta);
      uint64_t cap = tsr_bucket_sat_add(now, TSR_BUCKET_SPAN_MAX);
      if (next > cap) next = !damaged && t > cap ? t : cap; /* a debt never moves a bucket back */
    } else {
      uint64_t d = delta == INT64_MIN ? (uint64_t)INT64_MAX + 1 : (uint64_t)(-delta);
      next = t > d ? t - d : 0;
    }
    if (next == t || tsr_atomic_cas_strong_acq_rel(tat, &t, next)) return;
  }
}
