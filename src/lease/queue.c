/* queue.c: creates that wait for capacity, and EASY backfill (queue.h). */
#include "lease/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/time.h"

struct tsr_lease_queue_s {
  tsr_lease_wait_t **waits; /* arrival order; each entry its own block, so
                               the pointers into its copies stay valid */
  size_t count, cap;
  uint32_t per_user_max;
};

tsr_lease_queue_t *tsr_lease_queue_new(uint32_t per_user_max) {
  tsr_lease_queue_t *q = calloc(1, sizeof(*q));
  if (q) q->per_user_max = per_user_max;
  return q;
}

void tsr_lease_queue_free(tsr_lease_queue_t *q) {
  if (!q) return;
  for (size_t i = 0; i < q->count; i++) free(q->waits[i]);
  free(q->waits);
  free(q);
}

static ptrdiff_t tsr__index(const tsr_lease_queue_t *q, uint64_t id) {
  for (size_t i = 0; i < q->count; i++)
    if (q->waits[i]->id == id) return (ptrdiff_t)i;
  return -1;
}

size_t tsr_lease_queue_count_of(const tsr_lease_queue_t *q, uint32_t uid) {
  size_t n = 0;
  for (size_t i = 0; i < q->count; i++) n += q->waits[i]->owner_uid == uid;
  return n;
}

/* Points w's request and actor at w's own copies of their strings (a
 * pointer left NULL stays NULL). */
static void tsr__repoint(tsr_lease_wait_t *w) {
  w->actor.name = w->actor_name;
  if (w->request.target_name) w->request.target_name = w->target_name;
  if (w->request.job) w->request.job = w->job;
}

tsr_status_t tsr_lease_queue_add(tsr_lease_queue_t *q, const tsr_lease_wait_t *wait) {
  if (tsr__index(q, wait->id) >= 0)
    return tsr_status_make(TSR_ALREADY_EXISTS, "request %llu is queued already", (unsigned long long)wait->id);
  size_t mine = tsr_lease_queue_count_of(q, wait->owner_uid);
  if (q->per_user_max && !wait->actor.admin && mine >= q->per_user_max)
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED,
                           "%s has %zu request%s waiting for capacity, the most this node allows "
                           "(max_queued_per_user); withdraw one (tessera lease release ID) or wait for it",
                           wait->actor.name ? wait->actor.name : "the user", mine, mine == 1 ? "" : "s");
  tsr_lease_wait_t **grown = tsr_array_grow(q->waits, &q->cap, q->count + 1, sizeof(*grown), 16);
  if (!grown) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory queueing a request");
  q->waits = grown;
  tsr_lease_wait_t *w = malloc(sizeof(*w));
  if (!w) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory queueing a request");
  *w = *wait;
  snprintf(w->actor_name, sizeof(w->actor_name), "%s", wait->actor.name ? wait->actor.name : "");
  snprintf(w->target_name, sizeof(w->target_name), "%s", wait->request.target_name ? wait->request.target_name : "");
  snprintf(w->job, sizeof(w->job), "%s", wait->request.job ? wait->request.job : "");
  tsr__repoint(w);
  q->waits[q->count++] = w;
  return NULL;
}

bool tsr_lease_queue_remove(tsr_lease_queue_t *q, uint64_t id, tsr_lease_wait_t *out) {
  ptrdiff_t i = tsr__index(q, id);
  if (i < 0) return false;
  tsr_lease_wait_t *w = q->waits[i];
  if (out) { /* the copy's pointers follow it */
    *out = *w;
    tsr__repoint(out);
  }
  free(w);
  memmove(&q->waits[i], &q->waits[i + 1], (q->count - (size_t)i - 1) * sizeof(*q->waits));
  q->count--;
  return true;
}

const tsr_lease_wait_t *tsr_lease_queue_find(const tsr_lease_queue_t *q, uint64_t id) {
  ptrdiff_t i = tsr__index(q, id);
  return i < 0 ? NULL : q->waits[i];
}

size_t tsr_lease_queue_count(const tsr_lease_queue_t *q) { return q->count; }

size_t tsr_lease_queue_count_on(const tsr_lease_queue_t *q, uint32_t device) {
  size_t n = 0;
  for (size_t i = 0; i < q->count; i++) n += q->waits[i]->request.device == device;
  return n;
}

const tsr_lease_wait_t *tsr_lease_queue_at(const tsr_lease_queue_t *q, size_t i) {
  return i < q->count ? q->waits[i] : NULL;
}

size_t tsr_lease_queue_position(const tsr_lease_queue_t *q, uint64_t id) {
  ptrdiff_t i = tsr__index(q, id);
  if (i < 0) return 0;
  size_t pos = 1;
  for (ptrdiff_t k = 0; k < i; k++) pos += q->waits[k]->request.device == q->waits[i]->request.device;
  return pos;
}

bool tsr_lease_queue_next_due(const tsr_lease_queue_t *q, uint64_t *out) {
  if (!q->count) return false;
  uint64_t due = UINT64_MAX;
  for (size_t i = 0; i < q->count; i++)
    if (q->waits[i]->until_mono_ns < due) due = q->waits[i]->until_mono_ns;
  *out = due;
  return true;
}

static bool tsr__fits(const tsr_lease_table_t *t, const tsr_lease_wait_t *w, tsr_lease_now_t now) {
  tsr_status_t st = tsr_lease_table_check_create(t, &w->request, &w->actor, now, w->id, NULL);
  tsr_status_free(st);
  return st == NULL;
}

/* Device `d`'s queue at `now`: the first request that fits (*fit; then
 * the rest is not looked at), else its head, the first request that waits
 * for the device's room (*head, NULL when none), and the head's shadow time.
 * Requests past their time are passed over. */
static void tsr__scan(const tsr_lease_queue_t *q, const tsr_lease_table_t *t, tsr_lease_now_t now, uint32_t d,
                      const tsr_lease_wait_t **fit, const tsr_lease_wait_t **head, size_t *head_at, uint64_t *shadow) {
  *fit = *head = NULL;
  *shadow = now.mono_ns;
  for (size_t i = 0; i < q->count; i++) {
    const tsr_lease_wait_t *w = q->waits[i];
    if (w->request.device != d || w->until_mono_ns <= now.mono_ns) continue;
    if (tsr__fits(t, w, now)) {
      *fit = w;
      return;
    }
    uint64_t at = 0;
    bool sure = tsr_lease_table_room_at(t, d, w->request.fraction_ppm, w->request.sm_ppm, now.mono_ns, &at);
    /* the room is there and it still does not fit: its owner's own rules
     * hold it (her lease count, another owner's lock on its fraction), not
     * the device; it waits without holding anyone else back */
    if (sure && at <= now.mono_ns) continue;
    *head = w;
    *head_at = i;
    *shadow = sure ? at : now.mono_ns; /* never sure to fit: nothing goes ahead of it */
    return;
  }
}

/* Whether a request behind a head with shadow time `shadow` may go first. */
static bool tsr__may_backfill(const tsr_lease_table_t *t, const tsr_lease_wait_t *w, tsr_lease_now_t now,
                              uint64_t shadow) {
  return tsr_time_add_sat(now.mono_ns, w->request.duration_ns) <= shadow && tsr__fits(t, w, now);
}

bool tsr_lease_queue_pick(const tsr_lease_queue_t *q, const tsr_lease_table_t *t, tsr_lease_now_t now,
                          tsr_lease_pick_t *out) {
  size_t ndev = tsr_lease_table_device_count(t);
  for (uint32_t d = 0; d < ndev && q->count; d++) {
    const tsr_lease_wait_t *fit, *head;
    size_t at = 0;
    uint64_t shadow;
    tsr__scan(q, t, now, d, &fit, &head, &at, &shadow);
    if (fit) {
      *out = (tsr_lease_pick_t){.id = fit->id};
      return true;
    }
    for (size_t i = head ? at + 1 : q->count; i < q->count; i++) {
      const tsr_lease_wait_t *w = q->waits[i];
      if (w->request.device != d || w->until_mono_ns <= now.mono_ns || !tsr__may_backfill(t, w, now, shadow)) continue;
      *out = (tsr_lease_pick_t){.id = w->id, .backfill = true, .head_id = head->id, .shadow_mono_ns = shadow};
      return true;
    }
  }
  return false;
}

bool tsr_lease_queue_may_go_first(const tsr_lease_queue_t *q, const tsr_lease_table_t *t, tsr_lease_now_t now,
                                  const tsr_lease_wait_t *w) {
  const tsr_lease_wait_t *fit, *head;
  size_t at = 0;
  uint64_t shadow;
  tsr__scan(q, t, now, w->request.device, &fit, &head, &at, &shadow);
  if (fit) return false; /* one that waited fits: it goes first */
  return head ? tsr__may_backfill(t, w, now, shadow) : tsr__fits(t, w, now);
}

bool tsr_lease_queue_holds_back(const tsr_lease_queue_t *q, const tsr_lease_table_t *t, tsr_lease_now_t now,
                                uint32_t device, uint64_t until_mono_ns, size_t *out_waiting) {
  const tsr_lease_wait_t *fit, *head;
  size_t at = 0;
  uint64_t shadow;
  tsr__scan(q, t, now, device, &fit, &head, &at, &shadow);
  if (out_waiting) *out_waiting = tsr_lease_queue_count_on(q, device);
  return fit || (head && until_mono_ns > shadow);
}
