/* tickets.c: what a ticket tells: whether its task is done, waiting for
 * it, and waiting for everything submitted. */
#include "rt/internal.h"

bool tsr_rt_done(tsr_rt_t *rt, tsr_rt_ticket_t t) {
  if (t == 0) return true;
  if (t > rt->next_ticket) return false;
  if (rt->next_ticket - t >= rt->tmap_size) return true; /* its entry was reused: done then */
  uint64_t ti = t % rt->tmap_size;
  if (tsr__rt_done(rt, rt->tmap[ti].lane) >= rt->tmap[ti].n) return true;
  /* not yet: a caller that only polls this must still see the kernel
   * relaunched if it ended idle just as the work came (the doorbell costs
   * one load while the kernel runs) */
  tsr_rt_ring(rt);
  return false;
}

tsr_status_t tsr_rt_wait(tsr_rt_t *rt, tsr_rt_ticket_t t) {
  if (t > rt->next_ticket)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "ticket %llu was never given (the last is %llu)",
                           (unsigned long long)t, (unsigned long long)rt->next_ticket);
  if (t == 0 || rt->next_ticket - t >= rt->tmap_size) return NULL;
  uint64_t ti = t % rt->tmap_size;
  return tsr_rt_wait_lane(rt, rt->tmap[ti].lane, rt->tmap[ti].n);
}

tsr_status_t tsr_rt_flush(tsr_rt_t *rt) {
  for (uint32_t lane = 0; lane < rt->opt.lanes; lane++) TSR_RETURN_IF_ERROR(tsr_rt_wait_lane(rt, lane, rt->tail[lane]));
  return NULL;
}
