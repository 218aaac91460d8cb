/* submit.c: tsr_rt_submit and tsr_rt_submit_deferred: a batch spread over
 * the lanes, validated whole (validate.c), then each task enqueued into its
 * lane (place.c) and what was written posted (ring.c). */
#include "rt/internal.h"

/* ---- submission ------------------------------------------------------------- */

void tsr_rt_spread(tsr_rt_t *rt, size_t count) {
  size_t per_lane = count / rt->opt.lanes;
  rt->run_chunk = per_lane < 1 ? 1 : per_lane > TSR__POST_EVERY ? TSR__POST_EVERY : (uint32_t)per_lane;
  rt->run_left = 0;
}

TSR_MUST_USE static tsr_status_t tsr__submit(tsr_rt_t *rt, const tsr_rt_task_t *tasks, size_t count,
                                             tsr_rt_ticket_t *out_last, bool deferred) {
  if (out_last) *out_last = rt->next_ticket;
  /* the sticky mark only: the doorbell at the end asks the backend (one
   * query a submit, not two) and waits ask it as they wait */
  if (atomic_load(&rt->failed)) return tsr_status_make(TSR_FAILED_PRECONDITION, "the runtime failed: %s", rt->fault);
  if (count && !tasks) return tsr_status_make(TSR_INVALID_ARGUMENT, "tasks is NULL");
  /* the lanes' done counts are read at most once an epoch (tsr__rt_seen),
   * each read a miss on a line the device writes: a new epoch each call,
   * but each TSR__POST_EVERY calls when they come a task at a time (a
   * count read stale only costs a wait the device finds satisfied) */
  if (!deferred || ++rt->deferred_calls >= TSR__POST_EVERY) {
    rt->epoch++;
    rt->deferred_calls = 0;
  }
  if (deferred) {
    /* tasks come one call at a time: independent ones share a lane in
     * runs of TSR__POST_EVERY across calls (run_left carries over) */
    rt->run_chunk = TSR__POST_EVERY;
  } else {
    tsr_rt_spread(rt, count);
  }
  for (size_t i = 0; i < count; i++) {
    tsr__span_t span[TSR_RT_DESC_OPERANDS];
    tsr_status_t st = tsr_rt_check(rt, &tasks[i], span);
    if (st) return tsr_status_annotate(st, "task %zu of the batch (%s)", i, tsr_rt_op_name(tasks[i].op));
  }
  for (size_t i = 0; i < count; i++) {
    tsr_status_t st = tsr_rt_enqueue(rt, &tasks[i]);
    if (st) {
      tsr_rt_ring(rt);
      return tsr_status_annotate(st, "task %zu of the batch", i);
    }
  }
  if (deferred)
    rt->be->doorbell(rt); /* what was posted on the way (a kernel that ended idle restarts) */
  else
    tsr_rt_ring(rt);
  if (out_last) *out_last = rt->next_ticket;
  return NULL;
}

tsr_status_t tsr_rt_submit(tsr_rt_t *rt, const tsr_rt_task_t *tasks, size_t count, tsr_rt_ticket_t *out_last) {
  return tsr__submit(rt, tasks, count, out_last, false);
}

tsr_status_t tsr_rt_submit_deferred(tsr_rt_t *rt, const tsr_rt_task_t *tasks, size_t count, tsr_rt_ticket_t *out_last) {
  return tsr__submit(rt, tasks, count, out_last, true);
}
