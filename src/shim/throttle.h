/* shim/throttle.h: waiting for a lease's compute share.
 *
 * A launch of cost c is admitted by the lease's bucket in its region and,
 * when the daemon gives one stream less than the whole share, by the
 * stream's own bucket first (both region/bucket.h). A caller that is not
 * admitted waits and asks again, with the seed's bounded exponential
 * backoff: a wait longer than 200 us sleeps (nanosleep) until 50 us before
 * the bucket allows it; a shorter one spins with pauses of 50 ns doubling
 * to at most 10 us, never past the known wait. No lock is held while
 * waiting, and no syscall is made while the bucket has tokens.
 *
 * A refused launch waits TSR_SHIM_QUANTUM_NS (10 ms, at most the burst)
 * longer than the bucket asks, unless that would make its wait pass
 * TSR_SHIM_WAIT_CAP_NS (16 ms): it then wakes with a quantum of credit and
 * launches several kernels back to back. The rate is the same; what
 * changes is that a throttled lease runs in runs of ~10 ms instead of one
 * kernel at a time between the other tenants' kernels. Measured on the
 * H100: every switch between the contexts of two processes costs the GPU
 * time (two leases of 30% and 70% lost 9% of the device to switching when
 * their 1 ms kernels alternated), and a power-bound kernel run alone
 * between idle gaps runs at a higher clock than under load. Both shrink
 * when the work comes in runs.
 *
 * The clock is a table of two functions so that tests run the waiting on
 * a fake clock. */
#ifndef TESSERA_SHIM_THROTTLE_H
#define TESSERA_SHIM_THROTTLE_H

#include <stdint.h>

#include "region/atomic.h"
#include "region/region.h"

typedef struct tsr_shim_clock_s {
  uint64_t (*now)(void *ctx);            /* CLOCK_MONOTONIC ns */
  void (*pause)(void *ctx, uint64_t ns); /* let about `ns` pass */
  void *ctx;
} tsr_shim_clock_t;

#define TSR_SHIM_QUANTUM_NS UINT64_C(10000000)
#define TSR_SHIM_WAIT_CAP_NS UINT64_C(16000000)

/* The real clock (tests may point tsr_shim_clock elsewhere). */
extern const tsr_shim_clock_t *tsr_shim_clock;

/* Waits until `cost_ns` of GPU time is admitted: by `stream_tat` (NULL:
 * no stream bucket) at the lease's share x c->stream_ppm, then by the
 * lease's bucket in `region` at the share in force (tsr_region_share_now:
 * the lease's share, or less while the device is shared; read at each call,
 * as a resize moves it; none: no wait). Returns the
 * ns waited; *out_now (may be NULL) the clock when it was admitted. */
uint64_t tsr_shim_throttle(tsr_region_t *region, const tsr_region_compute_t *c, tsr_atomic_u64 *stream_tat,
                           uint64_t cost_ns, uint64_t *out_now);

/* A settlement of `gpu_ns` (> 0 owed, < 0 overcharged) on the lease's
 * bucket. */
void tsr_shim_throttle_settle(tsr_region_t *region, int64_t gpu_ns);

#endif
