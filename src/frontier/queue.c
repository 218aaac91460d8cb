/* queue.c: queues (axis + epoch + knowledge frontier), wait elision at
 * submission, and collective channels (see include/tessera/frontier.h). */
#include "frontier/internal.h"

tsr_status_t tsr_queue_init(tsr_queue_t *queue, tsr_axis_t axis, tsr_frontier_t *frontier) {
  if (!queue) return tsr_status_make(TSR_INVALID_ARGUMENT, "queue: NULL queue");
  if (!tsr_axis_is_valid(axis))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "queue: invalid axis 0x%016llx", (unsigned long long)axis);
  if (!frontier || frontier->kind != TSR_FRONTIER_KNOWLEDGE || frontier->capacity == 0)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "queue: needs a knowledge frontier of capacity >= 1");
  tsr_frontier_clear(frontier);
  queue->axis = axis;
  queue->epoch = 0;
  queue->frontier = frontier;
  return NULL;
}

/* Resolves the waits in order and returns the mask of those to issue. */
static uint64_t tsr__resolve_waits(tsr_queue_t *q, const tsr_queue_wait_t *waits, uint32_t n) {
  uint64_t issue = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (tsr_semaphore_resolve(waits[i].semaphore, waits[i].value, q->frontier)) issue |= UINT64_C(1) << i;
  }
  return issue;
}

static bool tsr__submit_args_ok(const tsr_queue_t *q, const tsr_queue_wait_t *waits, uint32_t n) {
  if (n > TSR_QUEUE_MAX_WAITS || (n > 0 && !waits)) return false;
  return q->epoch < UINT64_MAX;
}

uint64_t tsr_queue_submit(tsr_queue_t *q, const tsr_queue_wait_t *waits, uint32_t wait_count,
                          uint64_t *out_issue_mask) {
  if (out_issue_mask) *out_issue_mask = 0;
  if (!tsr__submit_args_ok(q, waits, wait_count)) return 0;
  uint64_t issue = tsr__resolve_waits(q, waits, wait_count);
  q->epoch++;
  tsr_frontier_raise_pinned(q->frontier, q->axis, q->epoch);
  if (out_issue_mask) *out_issue_mask = issue;
  return q->epoch;
}

tsr_semaphore_signal_t tsr_queue_signal(tsr_queue_t *q, tsr_semaphore_t *semaphore, uint64_t value) {
  if (q->epoch == 0) return TSR_SEMAPHORE_NO_ORIGIN;
  return tsr_semaphore_signal(semaphore, value, q->axis, q->frontier);
}

/* ---- collective channels ------------------------------------------------ */

tsr_status_t tsr_collective_init(tsr_collective_t *c, tsr_axis_t axis) {
  if (!c) return tsr_status_make(TSR_INVALID_ARGUMENT, "collective: NULL");
  if (!tsr_axis_is_valid(axis) || tsr_axis_domain(axis) != TSR_AXIS_DOMAIN_COLLECTIVE)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "collective: 0x%016llx is not a collective axis",
                           (unsigned long long)axis);
  c->axis = axis;
  c->sequence = 0;
  return NULL;
}

uint64_t tsr_collective_next(tsr_collective_t *c) {
  if (c->sequence == UINT64_MAX) return 0;
  return ++c->sequence;
}

uint64_t tsr_queue_submit_collective(tsr_queue_t *q, const tsr_collective_t *c, uint64_t sequence,
                                     const tsr_queue_wait_t *waits, uint32_t wait_count, uint64_t *out_issue_mask) {
  if (out_issue_mask) *out_issue_mask = 0;
  if (!c || sequence == 0 || sequence > c->sequence) return 0;
  if (!tsr__submit_args_ok(q, waits, wait_count)) return 0;
  uint64_t issue = tsr__resolve_waits(q, waits, wait_count);
  q->epoch++;
  /* The channel entry first (it may evict, like any knowledge), then the
   * queue's own entry, which is pinned. */
  tsr_frontier_insert_or_raise(q->frontier, c->axis, sequence);
  tsr_frontier_raise_pinned(q->frontier, q->axis, q->epoch);
  if (out_issue_mask) *out_issue_mask = issue;
  return q->epoch;
}
