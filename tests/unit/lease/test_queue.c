/* Waiting for capacity (lease/queue.h): the queue's bookkeeping, the rule
 * case by case, and a replay of 1,000 requests from 50 users against a
 * model of the rule written here apart from the code: every grant the same
 * request at the same moment, no head ever delayed by a backfilled lease,
 * and the device's leased fraction over the replay within 5% of the
 * model's. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/lease.h"
#include "lease/queue.h"

#define S UINT64_C(1000000000)
#define UNIT UINT64_C(65536) /* a device of 1e6 units: fractions scale exactly */

static tsr_lease_table_t *t;
static tsr_lease_queue_t *q;
static tsr_lease_now_t now;

static void setup_with(uint32_t per_user) {
  tsr_device_t devs[2] = {
      {.index = 0, .name = "GPU0", .total_bytes = 1000000 * UNIT, .sm_count = 132},
      {.index = 1, .name = "GPU1", .total_bytes = 1000000 * UNIT, .sm_count = 132},
  };
  cr_assert_null(tsr_lease_table_create(devs, 2, "node-1", NULL, &t));
  q = tsr_lease_queue_new(per_user);
  cr_assert_not_null(q);
  now = (tsr_lease_now_t){1000 * S, UINT64_C(1763805600000000000)};
}
static void setup(void) { setup_with(3); }
static void teardown(void) {
  tsr_lease_queue_free(q);
  tsr_lease_table_free(t);
}
TestSuite(lease_queue, .init = setup, .fini = teardown);

static tsr_lease_wait_t wait_of(uint64_t id, uint32_t uid, const char *name, uint32_t dev, uint32_t ppm, uint64_t dur) {
  tsr_lease_wait_t w = {.id = id,
                        .request = {.device = dev, .fraction_ppm = ppm, .duration_ns = dur},
                        .actor = {uid, name, false, 1},
                        .owner_uid = uid,
                        .queued_mono_ns = now.mono_ns,
                        .until_mono_ns = now.mono_ns + 3600 * S};
  return w;
}

static void lease(uint64_t id, uint32_t uid, const char *name, uint32_t dev, uint32_t ppm, uint64_t dur) {
  tsr_lease_wait_t w = wait_of(id, uid, name, dev, ppm, dur);
  tsr_status_t st = tsr_lease_table_create_lease(t, &w.request, &w.actor, now, id, NULL);
  cr_assert_null(st, "%s", tsr_status_message(st));
}

static void queue(uint64_t id, uint32_t uid, const char *name, uint32_t dev, uint32_t ppm, uint64_t dur) {
  tsr_lease_wait_t w = wait_of(id, uid, name, dev, ppm, dur);
  tsr_status_t st = tsr_lease_queue_add(q, &w);
  cr_assert_null(st, "%s", tsr_status_message(st));
}

Test(lease_queue, keeps_arrival_order_positions_and_copies) {
  char name[16] = "alice";
  tsr_lease_wait_t w = wait_of(7, 1000, name, 0, 500000, 60 * S);
  w.request.job = "job-1";
  w.until_mono_ns = now.mono_ns + 5 * S;
  cr_assert_null(tsr_lease_queue_add(q, &w));
  strcpy(name, "mallory"); /* the queue has its own copy */
  queue(8, 1001, "bob", 1, 100000, S);
  queue(9, 1001, "bob", 0, 100000, S);
  cr_assert_eq(tsr_lease_queue_count(q), 3);
  cr_assert_eq(tsr_lease_queue_count_on(q, 0), 2);
  cr_assert_eq(tsr_lease_queue_count_of(q, 1001), 2);
  cr_assert_eq(tsr_lease_queue_position(q, 7), 1);
  cr_assert_eq(tsr_lease_queue_position(q, 8), 1, "the head of device 1");
  cr_assert_eq(tsr_lease_queue_position(q, 9), 2);
  cr_assert_eq(tsr_lease_queue_position(q, 99), 0);
  const tsr_lease_wait_t *f = tsr_lease_queue_find(q, 7);
  cr_assert_str_eq(f->actor.name, "alice");
  cr_assert_str_eq(f->request.job, "job-1");
  uint64_t due = 0;
  cr_assert(tsr_lease_queue_next_due(q, &due));
  cr_assert_eq(due, now.mono_ns + 5 * S);
  cr_assert_eq(tsr_status_code(tsr_lease_queue_add(q, &w)), TSR_ALREADY_EXISTS);
  tsr_lease_wait_t out;
  cr_assert(tsr_lease_queue_remove(q, 7, &out));
  cr_assert_str_eq(out.actor.name, "alice");
  cr_assert_str_eq(out.request.job, "job-1");
  cr_assert_not(tsr_lease_queue_remove(q, 7, NULL));
  cr_assert_eq(tsr_lease_queue_position(q, 9), 1, "the next one is the head now");
  cr_assert_null(tsr_lease_queue_at(q, 2));
}

Test(lease_queue, bounds_each_users_waiting_requests_but_not_an_admins) {
  for (uint64_t id = 1; id <= 3; id++) queue(id, 1000, "alice", 0, 100000, S);
  tsr_lease_wait_t w = wait_of(4, 1000, "alice", 0, 100000, S);
  tsr_status_t st = tsr_lease_queue_add(q, &w);
  cr_assert_eq(tsr_status_code(st), TSR_RESOURCE_EXHAUSTED);
  cr_assert(strstr(tsr_status_message(st), "alice has 3 requests waiting"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  queue(5, 1001, "bob", 0, 100000, S); /* another user is not held by alice's */
  w.actor.admin = true;
  cr_assert_null(tsr_lease_queue_add(q, &w), "an admin is not held to it");
  cr_assert_eq(tsr_lease_queue_count(q), 5);
}

Test(lease_queue, grants_the_head_once_it_fits) {
  lease(1, 1000, "alice", 0, 600000, 100 * S);
  queue(2, 1001, "bob", 0, 500000, 10 * S);
  tsr_lease_pick_t p;
  cr_assert_not(tsr_lease_queue_pick(q, t, now, &p), "60% held: 50% does not fit");
  cr_assert_null(tsr_lease_table_remove(t, 1, TSR_LEASE_RELEASED, now, NULL));
  cr_assert(tsr_lease_queue_pick(q, t, now, &p));
  cr_assert_eq(p.id, 2);
  cr_assert_not(p.backfill);
}

Test(lease_queue, backfills_only_what_ends_before_the_head_is_sure_to_fit) {
  lease(1, 1000, "alice", 0, 600000, 100 * S); /* ends at +100 s */
  queue(2, 1001, "bob", 0, 500000, 10 * S);    /* the head: sure to fit at +100 s */
  queue(3, 1002, "carol", 0, 300000, 200 * S); /* fits now, but would end after */
  queue(4, 1003, "dave", 0, 300000, 50 * S);   /* fits now and ends before */
  queue(5, 1004, "erin", 1, 500000, 10 * S);   /* another device: its own queue */
  tsr_lease_pick_t p;
  cr_assert(tsr_lease_queue_pick(q, t, now, &p));
  cr_assert_eq(p.id, 4, "dave's is backfilled, carol's is not: %llu", (unsigned long long)p.id);
  cr_assert(p.backfill);
  cr_assert_eq(p.shadow_mono_ns, now.mono_ns + 100 * S);
  tsr_lease_wait_t w;
  cr_assert(tsr_lease_queue_remove(q, 4, &w));
  cr_assert_null(tsr_lease_table_create_lease(t, &w.request, &w.actor, now, w.id, NULL));
  cr_assert(tsr_lease_queue_pick(q, t, now, &p));
  cr_assert_eq(p.id, 5, "device 1's head");
  cr_assert_not(p.backfill);
  cr_assert(tsr_lease_queue_remove(q, 5, &w));
  cr_assert_null(tsr_lease_table_create_lease(t, &w.request, &w.actor, now, w.id, NULL));
  cr_assert_not(tsr_lease_queue_pick(q, t, now, &p), "carol's would delay bob's");
  /* a new create follows the same rule */
  tsr_lease_wait_t late = wait_of(6, 1005, "frank", 0, 50000, 99 * S);
  cr_assert(tsr_lease_queue_may_go_first(q, t, now, &late), "5% for 99 s fits and ends first");
  late.request.duration_ns = 101 * S;
  cr_assert_not(tsr_lease_queue_may_go_first(q, t, now, &late), "for 101 s it would delay the head");
  late.request.device = 1;
  cr_assert(tsr_lease_queue_may_go_first(q, t, now, &late), "nothing waits on device 1");
  /* at +100 s alice's lease is gone and dave's too: the head goes */
  now.mono_ns += 100 * S;
  tsr_lease_t gone;
  while (tsr_lease_table_peek_expired(t, now.mono_ns, &gone))
    cr_assert_null(tsr_lease_table_remove(t, gone.id, TSR_LEASE_EXPIRED, now, NULL));
  cr_assert(tsr_lease_queue_pick(q, t, now, &p));
  cr_assert_eq(p.id, 2);
}

Test(lease_queue, a_grow_may_not_hold_its_room_past_the_heads_turn) {
  size_t n = 99;
  cr_assert_not(tsr_lease_queue_holds_back(q, t, now, 0, now.mono_ns + 1000 * S, &n), "nothing waits");
  cr_assert_eq(n, 0);
  lease(1, 1000, "alice", 0, 600000, 100 * S); /* the head is sure to fit at +100 s */
  queue(2, 1001, "bob", 0, 500000, 10 * S);
  cr_assert(tsr_lease_queue_holds_back(q, t, now, 0, now.mono_ns + 101 * S, &n), "past the shadow time");
  cr_assert_eq(n, 1);
  cr_assert_not(tsr_lease_queue_holds_back(q, t, now, 0, now.mono_ns + 100 * S, NULL), "gone by then");
  cr_assert_not(tsr_lease_queue_holds_back(q, t, now, 1, now.mono_ns + 1000 * S, NULL), "another device");
}

Test(lease_queue, a_request_held_by_its_owners_own_rules_holds_nobody_back) {
  lease(1, 1000, "alice", 0, 250000, 100 * S);
  /* bob asks for alice's fraction (the lock rule): the room is there, the
   * lock is not his; carol's, behind him, goes */
  queue(2, 1001, "bob", 0, 250000, 10 * S);
  queue(3, 1002, "carol", 0, 300000, 1000 * S);
  tsr_lease_pick_t p;
  cr_assert(tsr_lease_queue_pick(q, t, now, &p));
  cr_assert_eq(p.id, 3);
  cr_assert_not(p.backfill, "bob's is no head: carol's is granted as one");
}

Test(lease_queue, a_request_past_its_time_is_never_picked) {
  lease(1, 1000, "alice", 0, 600000, 100 * S);
  tsr_lease_wait_t w = wait_of(2, 1001, "bob", 0, 500000, 10 * S);
  w.until_mono_ns = now.mono_ns + S;
  cr_assert_null(tsr_lease_queue_add(q, &w));
  queue(3, 1002, "carol", 0, 300000, 200 * S);
  now.mono_ns += 2 * S;
  tsr_lease_pick_t p;
  cr_assert(tsr_lease_queue_pick(q, t, now, &p));
  cr_assert_eq(p.id, 3, "bob's gave up: carol's is the head, and fits");
}

/* ---- the replay ------------------------------------------------------------ */

#define N_REQ 1000
#define N_USERS 50

typedef struct {
  uint64_t arrive, dur; /* s */
  uint32_t ppm, uid;
  int64_t granted; /* s, -1: not yet */
} rq_t;

/* The model: the rule as the issue states it, on plain arrays. */
typedef struct {
  int64_t end;
  uint32_t ppm;
} ml_t;

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void) {
  rnd_state ^= rnd_state << 13;
  rnd_state ^= rnd_state >> 7;
  rnd_state ^= rnd_state << 17;
  return rnd_state;
}

static uint32_t model_free(const ml_t *l, size_t n) {
  uint32_t used = 0;
  for (size_t i = 0; i < n; i++) used += l[i].ppm;
  return 1000000 - used;
}

/* When `ppm` is sure to fit, from the leases' ends. */
static int64_t model_shadow(const ml_t *l, size_t n, uint32_t ppm, int64_t at) {
  uint32_t free_now = model_free(l, n);
  if (ppm <= free_now) return at;
  int64_t best = -1;
  /* the smallest end e such that what ends by e frees enough */
  for (size_t i = 0; i < n; i++) {
    uint32_t freed = free_now;
    for (size_t k = 0; k < n; k++)
      if (l[k].end <= l[i].end) freed += l[k].ppm;
    if (freed >= ppm && (best < 0 || l[i].end < best)) best = l[i].end;
  }
  return best;
}

/* Runs the model over the whole trace: rq[i].granted. Returns the leased
 * unit-seconds. */
static double model_run(rq_t *rq, bool backfill, int64_t *end_out) {
  ml_t live[N_REQ];
  size_t nlive = 0;
  size_t waiting[N_REQ], nwait = 0, next = 0;
  double area = 0;
  int64_t at = 0, last = 0;
  while (next < N_REQ || nwait || nlive) {
    /* the next moment something happens: an arrival or an end */
    int64_t tnext = INT64_MAX;
    if (next < N_REQ) tnext = (int64_t)rq[next].arrive;
    for (size_t i = 0; i < nlive; i++)
      if (live[i].end < tnext) tnext = live[i].end;
    at = tnext;
    area += (double)(1000000 - model_free(live, nlive)) * (double)(at - last);
    last = at;
    for (size_t i = 0; i < nlive;) /* ends first, then arrivals */
      if (live[i].end <= at)
        live[i] = live[--nlive];
      else
        i++;
    while (next < N_REQ && (int64_t)rq[next].arrive == at) waiting[nwait++] = next++;
    bool granted = true;
    while (granted && nwait) {
      granted = false;
      size_t h = waiting[0];
      if (rq[h].ppm <= model_free(live, nlive)) {
        rq[h].granted = at;
        live[nlive++] = (ml_t){at + (int64_t)rq[h].dur, rq[h].ppm};
        memmove(waiting, waiting + 1, (--nwait) * sizeof(*waiting));
        granted = true;
        continue;
      }
      int64_t shadow = model_shadow(live, nlive, rq[h].ppm, at);
      for (size_t k = 1; backfill && k < nwait && !granted; k++) {
        size_t r = waiting[k];
        if (rq[r].ppm <= model_free(live, nlive) && at + (int64_t)rq[r].dur <= shadow) {
          rq[r].granted = at;
          live[nlive++] = (ml_t){at + (int64_t)rq[r].dur, rq[r].ppm};
          memmove(waiting + k, waiting + k + 1, (nwait - k - 1) * sizeof(*waiting));
          nwait--;
          granted = true;
        }
      }
    }
  }
  *end_out = at;
  return area;
}

/* A head a backfilled request went ahead of, and its shadow time then. */
typedef struct {
  uint64_t head;
  int64_t shadow_s;
} held_t;

/* Grants what the queue picks at `now`, as the daemon does. */
static void grant_picked(uint64_t t0, size_t *heads, size_t *backfills, held_t *held_back, size_t *nheld, rq_t *rq,
                         int64_t clock_s) {
  tsr_lease_pick_t p;
  while (tsr_lease_queue_pick(q, t, now, &p)) {
    tsr_lease_wait_t w;
    cr_assert(tsr_lease_queue_remove(q, p.id, &w));
    cr_assert_null(tsr_lease_table_create_lease(t, &w.request, &w.actor, now, w.id, NULL));
    rq[p.id - 1].granted = clock_s;
    if (!p.backfill) {
      (*heads)++;
      continue;
    }
    (*backfills)++;
    /* the backfilled lease ends by the head's shadow time, and the head must
     * be granted by then (checked at the end) */
    cr_assert_leq(now.mono_ns + w.request.duration_ns, p.shadow_mono_ns);
    cr_assert_lt(*nheld, N_REQ);
    held_back[(*nheld)++] = (held_t){p.head_id, (int64_t)((p.shadow_mono_ns - t0) / S)};
  }
}

Test(lease_queue, a_replay_of_1000_requests_from_50_users_matches_the_model) {
  teardown();
  setup_with(0); /* no per-user bound: the trace is the model's */
  static rq_t rq[N_REQ], mrq[N_REQ];
  static const uint32_t sizes[] = {50000, 100000, 200000, 250000, 400000, 500000, 700000};
  uint64_t at = 0;
  for (int i = 0; i < N_REQ; i++) {
    at += rnd() % 7; /* several may arrive at once */
    uint32_t uid = (uint32_t)(rnd() % N_USERS);
    /* each user's fractions are hers alone (the lock rule never decides) */
    rq[i] = (rq_t){.arrive = at,
                   .dur = 5 + rnd() % 115,
                   .ppm = sizes[rnd() % (sizeof(sizes) / sizeof(sizes[0]))] + uid * 1000,
                   .uid = uid,
                   .granted = -1};
  }
  memcpy(mrq, rq, sizeof(rq));
  int64_t model_end = 0, fifo_end = 0;
  double model_area = model_run(mrq, true, &model_end);
  static rq_t frq[N_REQ]; /* the same trace, first come first served without backfill */
  memcpy(frq, rq, sizeof(rq));
  double fifo_area = model_run(frq, false, &fifo_end);

  /* the code: the lease table and the queue, on a simulated clock */
  uint64_t t0 = now.mono_ns;
  char names[N_USERS][16];
  for (int u = 0; u < N_USERS; u++) snprintf(names[u], sizeof(names[u]), "user%02d", u);
  size_t next = 0, backfills = 0, heads = 0, nheld = 0;
  static held_t held_back[N_REQ];
  double area = 0;
  int64_t last = 0, clock_s = 0;
  while (next < N_REQ || tsr_lease_queue_count(q) || tsr_lease_table_count(t)) {
    int64_t tnext = INT64_MAX;
    if (next < N_REQ) tnext = (int64_t)rq[next].arrive;
    uint64_t d;
    if (tsr_lease_table_next_deadline(t, &d) && (int64_t)((d - t0) / S) < tnext) tnext = (int64_t)((d - t0) / S);
    cr_assert_neq(tnext, INT64_MAX, "requests wait with nothing to end: stuck");
    clock_s = tnext;
    now.mono_ns = t0 + (uint64_t)clock_s * S;
    uint64_t leased = 0;
    for (size_t i = 0; i < tsr_lease_table_count(t); i++) leased += tsr_lease_table_at(t, i)->fraction_ppm;
    area += (double)leased * (double)(clock_s - last);
    last = clock_s;
    tsr_lease_t gone;
    while (tsr_lease_table_peek_expired(t, now.mono_ns, &gone))
      cr_assert_null(tsr_lease_table_remove(t, gone.id, TSR_LEASE_EXPIRED, now, NULL));
    /* as the daemon: the queue goes first, then each new create */
    grant_picked(t0, &heads, &backfills, held_back, &nheld, rq, clock_s);
    for (; next < N_REQ && (int64_t)rq[next].arrive == clock_s; next++) {
      tsr_lease_wait_t w =
          wait_of(next + 1, 2000 + rq[next].uid, names[rq[next].uid], 0, rq[next].ppm, rq[next].dur * S);
      w.until_mono_ns = UINT64_MAX;
      if (tsr_lease_queue_may_go_first(q, t, now, &w)) {
        cr_assert_null(tsr_lease_table_create_lease(t, &w.request, &w.actor, now, w.id, NULL));
        rq[next].granted = clock_s;
      } else {
        cr_assert_null(tsr_lease_queue_add(q, &w));
      }
    }
    grant_picked(t0, &heads, &backfills, held_back, &nheld, rq, clock_s);
  }
  /* every grant is the model's: the same request at the same second */
  for (int i = 0; i < N_REQ; i++) {
    cr_assert_geq(rq[i].granted, (int64_t)rq[i].arrive, "request %d granted before it came", i);
    cr_assert_eq(rq[i].granted, mrq[i].granted, "request %d: granted at %lld, the model at %lld", i,
                 (long long)rq[i].granted, (long long)mrq[i].granted);
  }
  /* no head was delayed by a backfill: every head a request went ahead of
   * was granted by the shadow time it had then */
  for (size_t i = 0; i < nheld; i++)
    cr_assert_leq(rq[held_back[i].head - 1].granted, held_back[i].shadow_s,
                  "head %llu granted at %lld, after its shadow time %lld", (unsigned long long)held_back[i].head,
                  (long long)rq[held_back[i].head - 1].granted, (long long)held_back[i].shadow_s);
  cr_assert_gt(backfills, 20, "the trace exercises backfill (%zu)", backfills);
  cr_assert_gt(heads, 100);
  double asked = 0; /* what the trace asks of the device, in device-seconds */
  for (int i = 0; i < N_REQ; i++) asked += (double)rq[i].ppm / 1e6 * (double)rq[i].dur;
  double ratio = area / model_area;
  cr_assert(ratio > 0.95 && ratio < 1.05, "leased fraction %.4f of the model's", ratio);
  cr_log_info(
      "replay: requests arrive over %llu s asking %.0f device-seconds; %zu grants as heads, %zu backfilled; leased "
      "%.1f%% of the device over %lld s (the model: %.1f%% over %lld s; first come first served without backfill: "
      "%.1f%% over %lld s)",
      (unsigned long long)rq[N_REQ - 1].arrive, asked, heads, backfills, 100.0 * area / 1e6 / (double)clock_s,
      (long long)clock_s, 100.0 * model_area / 1e6 / (double)model_end, (long long)model_end,
      100.0 * fifo_area / 1e6 / (double)fifo_end, (long long)fifo_end);
}
