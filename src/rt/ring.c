/* ring.c: the lanes' rings from the host's side: posting what is written
 * and the doorbell, waiting for a lane (faults, back-off), a lane's next
 * slot (waiting while the ring is full) and markers in every lane. */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rt/internal.h"

/* ---- posting -----------------------------------------------------------------
 * A task's descriptor is written at once, but its lane's `posted` word (the
 * one the device polls, across PCIe) is stored when the host moves on to
 * another lane, when the lane has TSR__POST_EVERY tasks unposted, and
 * before anything waits or rings the doorbell: a store to a line the device
 * is polling costs the host more than the descriptor (TSR__POST_EVERY:
 * rt/internal.h). */

static void tsr__post_lane(tsr_rt_t *rt, uint32_t lane) {
  if (rt->posted_n[lane] == rt->tail[lane]) return;
  rt->posted_n[lane] = rt->tail[lane];
  tsr__rt_post(rt, lane, rt->tail[lane]);
}

/* Moving to another lane posts the one before, so only the lane of the
 * last task written can hold unposted tasks. */
static void tsr__post_pending(tsr_rt_t *rt) { tsr__post_lane(rt, rt->last_lane); }

/* Lane `lane` has a new task written (tail updated). */
void tsr_rt_written(tsr_rt_t *rt, uint32_t lane) {
  if (lane != rt->last_lane) {
    tsr__post_lane(rt, rt->last_lane);
    rt->last_lane = lane;
  }
  if (rt->tail[lane] - rt->posted_n[lane] >= TSR__POST_EVERY) tsr__post_lane(rt, lane);
}

/* Posts what is written and rings the backend's doorbell. */
void tsr_rt_ring(tsr_rt_t *rt) {
  tsr__post_pending(rt);
  rt->be->doorbell(rt);
}

void tsr_rt_post(tsr_rt_t *rt) { tsr_rt_ring(rt); }

void tsr_rt_park(tsr_rt_t *rt) {
  if (rt->be->park) rt->be->park(rt);
}

/* ---- waiting for a lane --------------------------------------------------- */

static const char *tsr__fault(tsr_rt_t *rt) {
  if (atomic_load(&rt->failed)) return rt->fault;
  const char *why = rt->be->fault ? rt->be->fault(rt) : NULL;
  if (why) {
    snprintf(rt->fault, sizeof(rt->fault), "%s", why);
    atomic_store(&rt->failed, 1);
    return rt->fault;
  }
  return NULL;
}

static void tsr__pause(unsigned *spins) {
  if (++*spins < 64) return;
  if (*spins < 256) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 20000};
  nanosleep(&ts, NULL);
}

/* Waits until lane `lane` has completed its n-th task. */
tsr_status_t tsr_rt_wait_lane(tsr_rt_t *rt, uint32_t lane, uint64_t n) {
  unsigned spins = 0;
  /* the lane's tasks may be unposted (tsr_rt_submit_deferred): post them
   * and ring (the CPU backend's lanes sleep until the doorbell) */
  if (tsr__rt_done(rt, lane) < n) tsr_rt_ring(rt);
  while (tsr__rt_done(rt, lane) < n) {
    /* the backend's check also restarts a kernel that ended idle */
    if ((spins & 15) == 15) {
      const char *why = tsr__fault(rt);
      if (why) return tsr_status_make(TSR_UNAVAILABLE, "the runtime failed: %s", why);
    }
    tsr__pause(&spins);
  }
  return NULL;
}

/* ---- a lane's slots ------------------------------------------------------ */

/* Takes the slot of lane `lane`'s next task, waiting while the ring is full. */
tsr_status_t tsr_rt_slot(tsr_rt_t *rt, uint32_t lane, uint64_t *out_n, size_t *out_index) {
  uint64_t n = rt->tail[lane] + 1, slots = rt->opt.lane_slots;
  if (n > slots && !tsr__rt_seen(rt, lane, n - slots) && tsr__rt_done(rt, lane) < n - slots) {
    tsr_rt_ring(rt);
    rt->stats.host_waits++;
    TSR_RETURN_IF_ERROR(tsr_rt_wait_lane(rt, lane, n - slots));
  }
  *out_n = n;
  *out_index = (size_t)lane * slots + ((n - 1) & (slots - 1));
  return NULL;
}

tsr_status_t tsr_rt_publish_marker(tsr_rt_t *rt, uint8_t flags) {
  for (uint32_t lane = 0; lane < rt->opt.lanes; lane++) {
    uint64_t n;
    size_t idx;
    TSR_RETURN_IF_ERROR(tsr_rt_slot(rt, lane, &n, &idx));
    tsr_rt_desc_t *d = &rt->desc[idx];
    memset(d, 0, sizeof(*d));
    d->seq = n;
    d->flags = flags;
    rt->run[lane].numel = 0;
    rt->tail[lane] = n;
    tsr__post_lane(rt, lane);
  }
  return NULL;
}
