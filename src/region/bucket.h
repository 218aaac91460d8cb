/* region/bucket.h: the token bucket that holds a compute share (seed 002),
 * kept as one word of virtual time.
 *
 * A share P lets its holder use P of a device's time. The bucket is the
 * generic cell-rate algorithm: one atomic word `tat` (theoretical arrival
 * time, CLOCK_MONOTONIC ns) says when the budget spent so far is paid off.
 * A launch that costs c ns of GPU time spans c / P ns of wall time:
 *
 *   admitted when tat <= now;  then tat = max(tat, now - burst) + c / P
 *
 * so launches are admitted at most at the rate that keeps c / span = P,
 * and time left idle earns at most `burst` ns of wall time in credit
 * (burst x P of GPU time). Over any interval T the launches admitted add
 * up to at most P (T + burst) + one launch's cost. One word means no
 * refill step and no pair of counters to keep consistent: a take is one
 * CAS, lock-free, no syscall. A caller that is not admitted learns how long
 * to wait and waits on its own (no lock is held while it does).
 *
 * The same functions run on a lease's bucket in its shared region and on
 * a process's per-stream buckets (src/shim/). Every input is clamped so
 * that no value a tenant can pass or write makes a counter wrap. */
#ifndef TESSERA_REGION_BUCKET_H
#define TESSERA_REGION_BUCKET_H

#include <stdint.h>

#include "region/atomic.h"

#define TSR_BUCKET_PPM 1000000u
/* One launch spans at most this much wall time (a 1 s kernel at 10%): a
 * launch never waits longer, and a bucket can never be further ahead. */
#define TSR_BUCKET_SPAN_MAX (UINT64_C(10) * 1000000000u)
/* A `tat` further ahead of now than this was not written by a take (a
 * damaged region, or a clock from before a reboot): it is reset. */
#define TSR_BUCKET_AHEAD_MAX (4 * TSR_BUCKET_SPAN_MAX)
#define TSR_BUCKET_BURST_MAX (UINT64_C(10) * 1000000000u)

/* The wall time `cost_ns` of GPU time spans at share `share_ppm` (1 ..
 * 1e6; 0 is read as 1e6), at most TSR_BUCKET_SPAN_MAX. */
uint64_t tsr_bucket_span(uint64_t cost_ns, uint32_t share_ppm);

/* Takes `span_ns` from the bucket at `now_ns`. Returns 0 if admitted (the
 * bucket moved), else how many ns to wait before asking again (nothing
 * changed). `burst_ns` is clamped to TSR_BUCKET_BURST_MAX. */
uint64_t tsr_bucket_take(tsr_atomic_u64 *tat, uint64_t now_ns, uint64_t span_ns, uint64_t burst_ns);

/* Moves the bucket by `delta_ns` of wall time: a debt (> 0) found when a
 * cost was learned after launches were charged a guess, or a credit (< 0).
 * Never below 0, never more than TSR_BUCKET_SPAN_MAX ahead of `now_ns`. */
void tsr_bucket_adjust(tsr_atomic_u64 *tat, uint64_t now_ns, int64_t delta_ns);

/* a + b, at most UINT64_MAX */
static inline uint64_t tsr_bucket_sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

#endif
