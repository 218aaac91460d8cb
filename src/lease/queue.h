/* lease/queue.h: creates that wait for capacity, and the rule that picks
 * which of them is granted next (docs/leases.md, "Waiting for capacity").
 *
 * A create that does not fit (TSR_RESOURCE_EXHAUSTED) and asks to wait is
 * queued on its device, in arrival order. The rule, EASY backfill as HPC
 * schedulers do it, per device:
 *   1. the head (the earliest waiting request) is granted as soon as it fits;
 *   2. a later request may go first only if it fits now and the lease it
 *      would make ends no later than the time the head is sure to fit (the
 *      shadow time: tsr_lease_table_room_at, from the active leases'
 *      deadlines), so that no backfilled lease ever delays the head.
 * A request that does not fit although the device has the room (its
 * owner's lease count, another owner's lock on its fraction) is no head: it
 * waits without holding back the requests behind it.
 * A user may have at most `per_user_max` requests waiting (admins are not
 * held to it), so that nobody can keep another's request waiting by
 * queueing many of her own ahead of it.
 *
 * The queue holds requests; the lease table decides what fits. Nothing here
 * does I/O; the daemon grants what tsr_lease_queue_pick says through the
 * lease service, answers the waiters and removes them. Single-threaded. */
#ifndef TESSERA_LEASE_QUEUE_H
#define TESSERA_LEASE_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/lease.h"
#include "tessera/status.h"

/* One waiting create. The strings the request and actor point at are the
 * entry's own copies (tsr_lease_queue_add copies them). */
typedef struct tsr_lease_wait_s {
  uint64_t id;                 /* the id its lease will have (reserved when queued) */
  tsr_lease_request_t request; /* what it asks for */
  tsr_lease_actor_t actor;     /* who asked */
  uint32_t owner_uid;          /* whose lease it will be (the target's, or the actor's) */
  uint64_t queued_mono_ns;     /* when it was queued */
  uint64_t queued_wall_ns;
  uint64_t until_mono_ns; /* when it gives up */
  uint64_t until_wall_ns;
  /* the copies */
  char actor_name[TSR_LEASE_NAME_MAX];
  char target_name[TSR_LEASE_NAME_MAX];
  char job[TSR_LEASE_JOB_MAX];
} tsr_lease_wait_t;

typedef struct tsr_lease_queue_s tsr_lease_queue_t;

/* An empty queue; per_user_max 0: no bound. NULL when out of memory. */
tsr_lease_queue_t *tsr_lease_queue_new(uint32_t per_user_max);
void tsr_lease_queue_free(tsr_lease_queue_t *queue);

/* Queues `wait` (copied, with its strings) behind every request queued
 * before it. TSR_RESOURCE_EXHAUSTED when its owner already has
 * per_user_max requests waiting (not for an admin), TSR_ALREADY_EXISTS for
 * an id queued twice, TSR_OUT_OF_MEMORY. */
TSR_MUST_USE tsr_status_t tsr_lease_queue_add(tsr_lease_queue_t *queue, const tsr_lease_wait_t *wait);

/* Takes request `id` out of the queue into *out (may be NULL). False when
 * it is not there. */
bool tsr_lease_queue_remove(tsr_lease_queue_t *queue, uint64_t id, tsr_lease_wait_t *out);

/* The request with `id`, or NULL. Valid until the queue next changes. */
const tsr_lease_wait_t *tsr_lease_queue_find(const tsr_lease_queue_t *queue, uint64_t id);

/* How many wait in all, on `device`, and of owner `uid`. */
size_t tsr_lease_queue_count(const tsr_lease_queue_t *queue);
size_t tsr_lease_queue_count_on(const tsr_lease_queue_t *queue, uint32_t device);
size_t tsr_lease_queue_count_of(const tsr_lease_queue_t *queue, uint32_t uid);

/* The i-th waiting request in arrival order (i < count), or NULL. */
const tsr_lease_wait_t *tsr_lease_queue_at(const tsr_lease_queue_t *queue, size_t i);

/* Request `id`'s place on its device: 1 for the head. 0 when not queued. */
size_t tsr_lease_queue_position(const tsr_lease_queue_t *queue, uint64_t id);

/* The earliest until_mono_ns of the queue; false when it is empty. */
bool tsr_lease_queue_next_due(const tsr_lease_queue_t *queue, uint64_t *out_mono_ns);

/* What tsr_lease_queue_pick chose. */
typedef struct tsr_lease_pick_s {
  uint64_t id;
  bool backfill;           /* behind its device's head: it fits now and ends by shadow_mono_ns */
  uint64_t head_id;        /* when backfilled: the head it went ahead of */
  uint64_t shadow_mono_ns; /* when backfilled: when that head is sure to fit */
} tsr_lease_pick_t;

/* The next request the rule grants at `now`, if any, device by device:
 * the first request that fits when no request ahead of it waits for the
 * device's room, else one behind the head that may be backfilled.
 * "Fits" is tsr_lease_table_check_create passing. The caller grants it (or
 * answers it with why not) and removes it, then asks again until this
 * answers false. A request past its until_mono_ns is never picked. */
bool tsr_lease_queue_pick(const tsr_lease_queue_t *queue, const tsr_lease_table_t *table, tsr_lease_now_t now,
                          tsr_lease_pick_t *out_pick);

/* Whether a new create `wait` (not queued) may be granted at once: it fits,
 * and either nothing waits for its device or it may be backfilled behind
 * the device's head (it ends by the head's shadow time) and no waiting
 * request fits. A create that may not is queued, or refused, never granted
 * ahead of the queue. */
bool tsr_lease_queue_may_go_first(const tsr_lease_queue_t *queue, const tsr_lease_table_t *table, tsr_lease_now_t now,
                                  const tsr_lease_wait_t *wait);

/* Whether taking more of device `device` until `until_mono_ns` (a lease
 * that grows, to its deadline) would go ahead of what waits: a waiting
 * request fits now, or the device's head would still find the room held at
 * its shadow time. *out_waiting (may be NULL): how many wait for it. */
bool tsr_lease_queue_holds_back(const tsr_lease_queue_t *queue, const tsr_lease_table_t *table, tsr_lease_now_t now,
                                uint32_t device, uint64_t until_mono_ns, size_t *out_waiting);

#endif
