/* table.c: the in-memory lease rules (seed 000, Algorithms 1, 3 and 4).
 *
 * Leases are kept in an array sorted by id (ids only grow, so a create is an
 * append) and a binary min-heap of (deadline, id) for expiry. The heap deletes
 * lazily: removing a lease leaves its heap entry behind unless it is at the
 * top; stale entries are skipped when they reach the top and the heap is
 * rebuilt when they outnumber the live ones. The top is always live, so the
 * next deadline is O(1).
 *
 * Two indexes keep admission O(1) however many leases there are (a restart
 * with 200,000 leases took 24 s when the lock rule scanned every lease):
 * per device, one slot per lock key (there are only 1001) holding its owner
 * and how many active leases hold it; and a small open-addressing map from
 * owner uid to that owner's count of active leases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/time.h"
#include "base/units.h"
#include "lease/lease.h"

typedef struct {
  uint64_t deadline_mono_ns;
  uint64_t id;
} tsr__heap_entry_t;

/* Lock keys run from tsr_lease_lock_key(1) = 0 to tsr_lease_lock_key(1e6). */
#define TSR__LOCK_KEYS 1001
/* A start this far past the clock is still restored: clocks of a node and of
 * whoever copied a lock file in may disagree a little. */
#define TSR__RESTORE_SKEW_NS (60 * TSR_NS_PER_S)

/* Who holds one (device, lock key), and with how many active leases. */
typedef struct {
  uint32_t owner_uid;
  uint32_t count; /* 0: the key is free */
  char owner[TSR_LEASE_NAME_MAX];
} tsr__lock_t;

typedef struct {
  tsr_device_t info;
  uint64_t committed_bytes; /* sum of active leases' bytes */
  uint32_t committed_sm_ppm;
  tsr__lock_t *locks; /* TSR__LOCK_KEYS slots, allocated with the device's first lease */
} tsr__device_state_t;

/* One slot of the owner map; count 0 marks an empty slot. */
typedef struct {
  uint32_t uid;
  uint32_t count; /* active leases owned by uid */
} tsr__owner_t;

struct tsr_lease_table_s {
  tsr__device_state_t *devices;
  size_t device_count;
  char host[TSR_LEASE_NAME_MAX];
  tsr_lease_limits_t limits;
  tsr_lease_t *leases; /* sorted by id */
  size_t count, cap;
  tsr__heap_entry_t *heap;
  size_t heap_len, heap_cap;
  tsr__owner_t *owners; /* linear probing; owners_cap is 0 or a power of two */
  size_t owners_cap, owners_used;
  uint64_t changes; /* bumped by every change of a lease (tsr_lease_table_changes) */
};

/* ---- helpers ------------------------------------------------------------------ */

bool tsr_lease_name_ok(const char *name) {
  if (!name || !*name) return false;
  size_t n = strnlen(name, TSR_LEASE_NAME_MAX);
  if (n >= TSR_LEASE_NAME_MAX) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c < 0x21 || c == 0x7f) return false; /* no spaces or control characters */
  }
  return true;
}

static bool tsr__id_before(const void *lease, const void *id) {
  return ((const tsr_lease_t *)lease)->id < *(const uint64_t *)id;
}

/* Where lease `id` is, or would go, in the sorted array. */
static size_t tsr__lower_bound(const tsr_lease_table_t *t, uint64_t id) {
  return tsr_array_lower_bound(t->leases, t->count, sizeof(*t->leases), &id, tsr__id_before);
}

/* Index of lease `id` in the sorted array, or -1. */
static ptrdiff_t tsr__find_index(const tsr_lease_table_t *t, uint64_t id) {
  size_t i = tsr__lower_bound(t, id);
  return (i < t->count && t->leases[i].id == id) ? (ptrdiff_t)i : -1;
}

/* ---- the owner map: uid -> active leases ----------------------------------------- */

static size_t tsr__owner_home(uint32_t uid, size_t cap) {
  uint32_t h = uid; /* murmur3's finalizer: uids are dense, spread them */
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return (size_t)h & (cap - 1);
}

/* The slot of `uid`, or the empty slot where it would go. owners_cap > 0. */
static size_t tsr__owner_slot(const tsr_lease_table_t *t, uint32_t uid) {
  size_t mask = t->owners_cap - 1, i = tsr__owner_home(uid, t->owners_cap);
  while (t->owners[i].count && t->owners[i].uid != uid) i = (i + 1) & mask;
  return i;
}

static uint32_t tsr__owner_count(const tsr_lease_table_t *t, uint32_t uid) {
  return t->owners_cap ? t->owners[tsr__owner_slot(t, uid)].count : 0;
}

/* Room for one more owner, keeping the map at most half full. */
TSR_MUST_USE static tsr_status_t tsr__owner_reserve(tsr_lease_table_t *t) {
  if ((t->owners_used + 1) * 2 <= t->owners_cap) return NULL;
  size_t cap = t->owners_cap ? t->owners_cap * 2 : 16;
  tsr__owner_t *old = t->owners;
  size_t old_cap = t->owners_cap;
  t->owners = calloc(cap, sizeof(*t->owners));
  if (!t->owners) {
    t->owners = old;
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory growing the owner map");
  }
  t->owners_cap = cap;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].count) t->owners[tsr__owner_slot(t, old[i].uid)] = old[i];
  free(old);
  return NULL;
}

/* Counts one more lease of `uid`; room was reserved. */
static void tsr__owner_add(tsr_lease_table_t *t, uint32_t uid) {
  tsr__owner_t *o = &t->owners[tsr__owner_slot(t, uid)];
  if (o->count == 0) {
    o->uid = uid;
    t->owners_used++;
  }
  o->count++;
}

/* Counts one lease of `uid` fewer; the last one empties its slot, and the
 * entries after it in the probe run shift back so that no lookup stops short. */
static void tsr__owner_drop(tsr_lease_table_t *t, uint32_t uid) {
  size_t mask = t->owners_cap - 1, i = tsr__owner_slot(t, uid);
  if (t->owners[i].count == 0 || --t->owners[i].count > 0) return;
  t->owners_used--;
  for (size_t j = (i + 1) & mask; t->owners[j].count; j = (j + 1) & mask) {
    size_t home = tsr__owner_home(t->owners[j].uid, t->owners_cap);
    bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    t->owners[i] = t->owners[j];
    t->owners[j].count = 0;
    i = j;
  }
}

static bool tsr__heap_less(const tsr__heap_entry_t *a, const tsr__heap_entry_t *b) {
  return a->deadline_mono_ns < b->deadline_mono_ns || (a->deadline_mono_ns == b->deadline_mono_ns && a->id < b->id);
}

static void tsr__heap_sift_up(tsr__heap_entry_t *h, size_t i) {
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!tsr__heap_less(&h[i], &h[parent])) break;
    tsr__heap_entry_t tmp = h[i];
    h[i] = h[parent];
    h[parent] = tmp;
    i = parent;
  }
}

static void tsr__heap_sift_down(tsr__heap_entry_t *h, size_t len, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < len && tsr__heap_less(&h[l], &h[m])) m = l;
    if (r < len && tsr__heap_less(&h[r], &h[m])) m = r;
    if (m == i) return;
    tsr__heap_entry_t tmp = h[i];
    h[i] = h[m];
    h[m] = tmp;
    i = m;
  }
}

static void tsr__heap_pop(tsr_lease_table_t *t) {
  t->heap[0] = t->heap[--t->heap_len];
  tsr__heap_sift_down(t->heap, t->heap_len, 0);
}

/* Is this heap entry's lease still active with this deadline? */
static bool tsr__heap_live(const tsr_lease_table_t *t, const tsr__heap_entry_t *e) {
  ptrdiff_t i = tsr__find_index(t, e->id);
  return i >= 0 && t->leases[i].deadline_mono_ns == e->deadline_mono_ns;
}

/* Drops stale entries from the top; rebuilds when mostly stale. */
static void tsr__heap_tidy(tsr_lease_table_t *t) {
  if (t->heap_len > 2 * t->count + 16) {
    t->heap_len = 0;
    for (size_t i = 0; i < t->count; i++) {
      t->heap[t->heap_len].deadline_mono_ns = t->leases[i].deadline_mono_ns;
      t->heap[t->heap_len].id = t->leases[i].id;
      tsr__heap_sift_up(t->heap, t->heap_len++);
    }
  }
  while (t->heap_len > 0 && !tsr__heap_live(t, &t->heap[0])) tsr__heap_pop(t);
}

/* Makes room for one more lease on `device`, so that tsr__insert cannot fail
 * and a failure here changes nothing anyone can see. */
TSR_MUST_USE static tsr_status_t tsr__reserve(tsr_lease_table_t *t, uint32_t device) {
  tsr_lease_t *l = tsr_array_grow(t->leases, &t->cap, t->count + 1, sizeof(*l), 16);
  if (!l) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory growing the lease table");
  t->leases = l;
  tsr__heap_entry_t *h = tsr_array_grow(t->heap, &t->heap_cap, t->heap_len + 1, sizeof(*h), 16);
  if (!h) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory growing the deadline heap");
  t->heap = h;
  tsr__device_state_t *d = &t->devices[device];
  if (!d->locks && !(d->locks = calloc(TSR__LOCK_KEYS, sizeof(*d->locks))))
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory for the locks of device %u", device);
  return tsr__owner_reserve(t);
}

/* Inserts `lease` (whose id is not present) keeping id order; capacity was
 * reserved. */
static void tsr__insert(tsr_lease_table_t *t, const tsr_lease_t *lease) {
  t->changes++;
  size_t pos = tsr__lower_bound(t, lease->id); /* == count for every create */
  memmove(&t->leases[pos + 1], &t->leases[pos], (t->count - pos) * sizeof(*lease));
  t->leases[pos] = *lease;
  t->count++;
  tsr__device_state_t *d = &t->devices[lease->device];
  d->committed_bytes += lease->bytes;
  d->committed_sm_ppm += lease->sm_ppm;
  tsr__lock_t *k = &d->locks[tsr_lease_lock_key(lease->fraction_ppm)];
  if (k->count++ == 0) {
    k->owner_uid = lease->owner_uid;
    memcpy(k->owner, lease->owner, sizeof(k->owner));
  }
  tsr__owner_add(t, lease->owner_uid);
  t->heap[t->heap_len].deadline_mono_ns = lease->deadline_mono_ns;
  t->heap[t->heap_len].id = lease->id;
  tsr__heap_sift_up(t->heap, t->heap_len++);
}

/* The capacity and lock rules shared by create and restore. O(1). */
TSR_MUST_USE static tsr_status_t tsr__check_fit(const tsr_lease_table_t *t, uint32_t device, uint32_t fraction_ppm,
                                                uint64_t bytes, uint32_t sm_ppm, uint32_t owner_uid, const char *owner,
                                                const tsr_lease_t *resized) {
  const tsr__device_state_t *d = &t->devices[device];
  /* a resized lease's own share counts as free (its lock key is its owner's) */
  uint64_t committed = d->committed_bytes - (resized ? resized->bytes : 0);
  uint32_t committed_sm = d->committed_sm_ppm - (resized ? resized->sm_ppm : 0);
  uint32_t key = tsr_lease_lock_key(fraction_ppm);
  const tsr__lock_t *k = d->locks ? &d->locks[key] : NULL;
  if (k && k->count && k->owner_uid != owner_uid)
    return tsr_status_make(TSR_CONFLICT,
                           "device %u fraction %u.%u%% is locked by %s (%u active lease%s); "
                           "another owner (%s) may not take the same fraction",
                           device, key / 10, key % 10, k->owner, k->count, k->count == 1 ? "" : "s", owner);
  uint64_t available = d->info.total_bytes - committed;
  if (bytes > available) {
    char have[32], need[32];
    tsr_format_size(available, have, sizeof(have));
    tsr_format_size(bytes, need, sizeof(need));
    if (resized) {
      char own[32];
      tsr_format_size(resized->bytes, own, sizeof(own));
      return tsr_status_make(TSR_RESOURCE_EXHAUSTED,
                             "device %u has %s free (%llu bytes) with the lease's own %s; it would need %s "
                             "(%llu bytes)",
                             device, have, (unsigned long long)available, own, need, (unsigned long long)bytes);
    }
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED,
                           "device %u has %s free (%llu bytes); the lease needs %s (%llu bytes)", device, have,
                           (unsigned long long)available, need, (unsigned long long)bytes);
  }
  if (sm_ppm > TSR_PPM_ONE - committed_sm) {
    char left[16], ask[16];
    tsr_format_percent(TSR_PPM_ONE - committed_sm, left, sizeof(left));
    tsr_format_percent(sm_ppm, ask, sizeof(ask));
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED, "device %u has %s of its SMs unclaimed; the lease asks %s", device,
                           left, ask);
  }
  return NULL;
}

/* ---- public -------------------------------------------------------------------- */

tsr_status_t tsr_lease_table_create(const tsr_device_t *devices, size_t count, const char *host,
                                    const tsr_lease_limits_t *limits, tsr_lease_table_t **out_table) {
  *out_table = NULL;
  if (count > 0 && !devices) return tsr_status_make(TSR_INVALID_ARGUMENT, "no device array");
  for (size_t i = 0; i < count; i++) {
    if (devices[i].index != i)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "device %zu has index %u", i, devices[i].index);
    if (devices[i].total_bytes == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "device %zu has no memory", i);
  }
  if (host && !tsr_lease_name_ok(host))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "host name '%s' is not usable", host);
  tsr_lease_table_t *t = calloc(1, sizeof(*t));
  if (!t) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  t->devices = calloc(count ? count : 1, sizeof(*t->devices));
  if (!t->devices) {
    free(t);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < count; i++) t->devices[i].info = devices[i];
  t->device_count = count;
  snprintf(t->host, sizeof(t->host), "%s", host ? host : "localhost");
  if (limits) t->limits = *limits;
  *out_table = t;
  return NULL;
}

void tsr_lease_table_free(tsr_lease_table_t *t) {
  if (!t) return;
  for (size_t i = 0; i < t->device_count; i++) free(t->devices[i].locks);
  free(t->devices);
  free(t->leases);
  free(t->heap);
  free(t->owners);
  free(t);
}

/* The admission limits on size: the share and the bytes a lease holds. */
TSR_MUST_USE static tsr_status_t tsr__check_minimum(const tsr_lease_table_t *t, uint32_t fraction_ppm, uint64_t bytes) {
  if (t->limits.min_fraction_ppm && fraction_ppm < t->limits.min_fraction_ppm) {
    char got[16], min[16];
    tsr_format_percent(fraction_ppm, got, sizeof(got));
    tsr_format_percent(t->limits.min_fraction_ppm, min, sizeof(min));
    return tsr_status_make(TSR_INVALID_ARGUMENT, "a lease of %s is smaller than this node allows (at least %s)", got,
                           min);
  }
  if (t->limits.min_bytes && bytes < t->limits.min_bytes) {
    char got[32], min[32];
    tsr_format_size(bytes, got, sizeof(got));
    tsr_format_size(t->limits.min_bytes, min, sizeof(min));
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "a lease of %s (%llu bytes) is smaller than this node allows "
                           "(at least %s, %llu bytes)",
                           got, (unsigned long long)bytes, min, (unsigned long long)t->limits.min_bytes);
  }
  return NULL;
}

tsr_status_t tsr_lease_table_check_create(const tsr_lease_table_t *t, const tsr_lease_request_t *req,
                                          const tsr_lease_actor_t *actor, tsr_lease_now_t now, uint64_t id,
                                          tsr_lease_t *out_lease) {
  /* Algorithm 1, line 1: the arguments. */
  if (req->device >= t->device_count)
    return tsr_status_make(TSR_NOT_FOUND, "no device %u (this node has %zu)", req->device, t->device_count);
  if (req->fraction_ppm == 0 || req->fraction_ppm > TSR_PPM_ONE)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "fraction must be in (0, 1], got %u ppm", req->fraction_ppm);
  if (req->sm_ppm > TSR_PPM_ONE)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "SM share must be in (0, 1], got %u ppm", req->sm_ppm);
  if (req->duration_ns == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "duration must be positive");
  if (req->on_expiry > TSR_LEASE_ACTION_SIGNAL)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "unknown expiry action %d", (int)req->on_expiry);
  if (req->over_limit > TSR_LEASE_OVER_LIMIT_LOG)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "unknown over-limit action %d", (int)req->over_limit);
  bool has_job = req->job && req->job[0];
  if (has_job && !tsr_lease_job_ok(req->job))
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "a job id has 1 to %d letters, digits and . _ : @ + - (a scheduler's job id)",
                           TSR_LEASE_JOB_MAX - 1);
  if (has_job && !actor->admin)
    return tsr_status_make(TSR_PERMISSION_DENIED, "only an admin may label a lease with a job id (%s)", req->job);
  if (t->limits.max_duration_ns && req->duration_ns > t->limits.max_duration_ns) {
    char lim[32];
    tsr_time_format_duration(t->limits.max_duration_ns, lim, sizeof(lim));
    return tsr_status_make(TSR_INVALID_ARGUMENT, "duration is longer than this node allows (%s)", lim);
  }
  uint64_t bytes = tsr_units_scale_ppm(t->devices[req->device].info.total_bytes, req->fraction_ppm);
  TSR_RETURN_IF_ERROR(tsr__check_minimum(t, req->fraction_ppm, bytes));
  if (id == 0 || id > TSR_LEASE_ID_MAX || tsr__find_index(t, id) >= 0)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "lease id %llu is not fresh", (unsigned long long)id);
  if (!tsr_lease_name_ok(actor->name))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "the caller's user name is not usable");
  /* Lines 7-17: the owner, and admin rights to create for someone else. */
  uint32_t owner_uid = actor->uid;
  const char *owner = actor->name;
  if (req->has_target && req->target_uid != actor->uid) {
    if (!actor->admin)
      return tsr_status_make(TSR_PERMISSION_DENIED, "only an admin may create a lease for another user (%s)",
                             req->target_name ? req->target_name : "?");
    owner_uid = req->target_uid;
    owner = req->target_name;
    if (!tsr_lease_name_ok(owner)) return tsr_status_make(TSR_INVALID_ARGUMENT, "target user name is not usable");
  }
  /* The node's per-owner limit; an admin may grant past it. */
  uint32_t held = tsr__owner_count(t, owner_uid);
  if (t->limits.max_per_owner && !actor->admin && held >= t->limits.max_per_owner)
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED, "user %s holds %u lease%s, the most this node allows", owner, held,
                           held == 1 ? "" : "s");
  /* Lines 19-35: the (device, fraction) lock and admission. */
  TSR_RETURN_IF_ERROR(tsr__check_fit(t, req->device, req->fraction_ppm, bytes, req->sm_ppm, owner_uid, owner, NULL));
  /* Lines 51-63: the lease. */
  tsr_lease_t l;
  memset(&l, 0, sizeof(l));
  l.id = id;
  l.device = req->device;
  l.fraction_ppm = req->fraction_ppm;
  l.bytes = bytes;
  l.sm_ppm = req->sm_ppm;
  l.owner_uid = owner_uid;
  l.creator_uid = actor->uid;
  l.pid = actor->pid;
  snprintf(l.owner, sizeof(l.owner), "%s", owner);
  snprintf(l.creator, sizeof(l.creator), "%s", actor->name);
  snprintf(l.host, sizeof(l.host), "%s", t->host);
  l.start_wall_ns = now.wall_ns;
  l.deadline_wall_ns = tsr_time_add_sat(now.wall_ns, req->duration_ns);
  l.deadline_mono_ns = tsr_time_add_sat(now.mono_ns, req->duration_ns);
  l.state = TSR_LEASE_ACTIVE;
  l.on_expiry = req->on_expiry;
  l.over_limit = req->over_limit;
  if (has_job) snprintf(l.job, sizeof(l.job), "%s", req->job);
  if (out_lease) *out_lease = l;
  return NULL;
}

tsr_status_t tsr_lease_table_create_lease(tsr_lease_table_t *t, const tsr_lease_request_t *req,
                                          const tsr_lease_actor_t *actor, tsr_lease_now_t now, uint64_t id,
                                          tsr_lease_t *out_lease) {
  tsr_lease_t l;
  TSR_RETURN_IF_ERROR(tsr_lease_table_check_create(t, req, actor, now, id, &l));
  TSR_RETURN_IF_ERROR(tsr__reserve(t, req->device));
  tsr__insert(t, &l);
  if (out_lease) *out_lease = l;
  return NULL;
}

/* Deadline order, for tsr_lease_table_room_at. */
static int tsr__by_deadline(const void *a, const void *b) {
  const tsr_lease_t *x = *(const tsr_lease_t *const *)a, *y = *(const tsr_lease_t *const *)b;
  return x->deadline_mono_ns < y->deadline_mono_ns ? -1 : x->deadline_mono_ns > y->deadline_mono_ns;
}

bool tsr_lease_table_room_at(const tsr_lease_table_t *t, uint32_t device, uint32_t fraction_ppm, uint32_t sm_ppm,
                             uint64_t now_mono_ns, uint64_t *out_mono_ns) {
  if (device >= t->device_count || fraction_ppm > TSR_PPM_ONE || sm_ppm > TSR_PPM_ONE) return false;
  const tsr__device_state_t *d = &t->devices[device];
  uint64_t bytes = tsr_units_scale_ppm(d->info.total_bytes, fraction_ppm);
  uint64_t free_b = d->info.total_bytes - d->committed_bytes;
  uint32_t free_sm = TSR_PPM_ONE - d->committed_sm_ppm;
  if (bytes <= free_b && sm_ppm <= free_sm) {
    *out_mono_ns = now_mono_ns;
    return true;
  }
  size_t n = 0;
  for (size_t i = 0; i < t->count; i++) n += t->leases[i].device == device;
  const tsr_lease_t **on = n ? malloc(n * sizeof(*on)) : NULL;
  if (!on) return false;
  n = 0;
  for (size_t i = 0; i < t->count; i++)
    if (t->leases[i].device == device) on[n++] = &t->leases[i];
  qsort(on, n, sizeof(*on), tsr__by_deadline);
  bool found = false;
  for (size_t i = 0; i < n && !found; i++) {
    free_b += on[i]->bytes;
    free_sm += on[i]->sm_ppm;
    if (bytes <= free_b && sm_ppm <= free_sm) {
      *out_mono_ns = on[i]->deadline_mono_ns > now_mono_ns ? on[i]->deadline_mono_ns : now_mono_ns;
      found = true;
    }
  }
  free(on);
  return found;
}

/* Each rule a restored lease must pass, in the words the quarantine log
 * shows; the values are printed so that a person can see what is wrong. */
TSR_MUST_USE static tsr_status_t tsr__check_restored(const tsr_lease_table_t *t, const tsr_lease_t *l,
                                                     tsr_lease_now_t now) {
  unsigned long long id = (unsigned long long)l->id;
  if (l->id == 0 || l->id > TSR_LEASE_ID_MAX)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "lease id %llu is outside [1, %llu]", id,
                           (unsigned long long)TSR_LEASE_ID_MAX);
  if (tsr__find_index(t, l->id) >= 0) return tsr_status_make(TSR_ALREADY_EXISTS, "lease id %llu appears twice", id);
  if (l->device >= t->device_count)
    return tsr_status_make(TSR_NOT_FOUND,
                           "lease %llu is on device %u, which this node lacks "
                           "(it has %zu)",
                           id, l->device, t->device_count);
  if (l->fraction_ppm == 0 || l->fraction_ppm > TSR_PPM_ONE)
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "lease %llu: fraction must be in (0, 1], got "
                           "%u ppm",
                           id, l->fraction_ppm);
  if (l->sm_ppm > TSR_PPM_ONE)
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "lease %llu: SM share must be at most 1, got "
                           "%u ppm",
                           id, l->sm_ppm);
  if (l->on_expiry > TSR_LEASE_ACTION_SIGNAL)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "lease %llu: unknown expiry action %d", id, (int)l->on_expiry);
  if (l->over_limit > TSR_LEASE_OVER_LIMIT_LOG)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "lease %llu: unknown over-limit action %d", id, (int)l->over_limit);
  if (l->job[0] && !tsr_lease_job_ok(l->job))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "lease %llu: the job id is not usable", id);
  uint64_t total = t->devices[l->device].info.total_bytes;
  uint64_t bytes = tsr_units_scale_ppm(total, l->fraction_ppm);
  if (l->bytes != bytes) {
    char frac[16];
    tsr_format_fraction(l->fraction_ppm, frac, sizeof(frac));
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "lease %llu: bytes %llu disagree with fraction %s of device %u "
                           "(%llu bytes), which is %llu bytes",
                           id, (unsigned long long)l->bytes, frac, l->device, (unsigned long long)total,
                           (unsigned long long)bytes);
  }
  /* Names are not printed: an unusable one may hold a newline for the log. */
  const char *const names[3] = {l->owner, l->creator, l->host};
  const char *const what[3] = {"owner", "creator", "host"};
  for (int i = 0; i < 3; i++)
    if (!tsr_lease_name_ok(names[i]))
      return tsr_status_make(TSR_INVALID_ARGUMENT,
                             "lease %llu: the %s name is not usable (empty, longer than %d "
                             "bytes, or with spaces or control characters)",
                             id, what[i], TSR_LEASE_NAME_MAX - 1);
  char start[48], other[48];
  if (l->start_wall_ns > tsr_time_add_sat(now.wall_ns, TSR__RESTORE_SKEW_NS)) {
    tsr_time_format_rfc3339(l->start_wall_ns, 3, start, sizeof(start));
    tsr_time_format_rfc3339(now.wall_ns, 3, other, sizeof(other));
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "lease %llu starts at %s, in the future (now %s; a minute of clock "
                           "skew is allowed)",
                           id, start, other);
  }
  if (l->deadline_wall_ns <= l->start_wall_ns) {
    tsr_time_format_rfc3339(l->start_wall_ns, 3, start, sizeof(start));
    tsr_time_format_rfc3339(l->deadline_wall_ns, 3, other, sizeof(other));
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "lease %llu: deadline %s is not after its "
                           "start %s",
                           id, other, start);
  }
  /* What is left of it, from now (or from its start, if that is ahead
   * within the skew): a renewed lease may last longer than max_duration_ns
   * in all, but no renewal reaches further than that from its moment. */
  uint64_t from = l->start_wall_ns > now.wall_ns ? l->start_wall_ns : now.wall_ns;
  uint64_t left = tsr_time_sub_sat(l->deadline_wall_ns, from);
  if (t->limits.max_duration_ns && left > t->limits.max_duration_ns) {
    char got[32], lim[32];
    tsr_time_format_duration(left, got, sizeof(got));
    tsr_time_format_duration(t->limits.max_duration_ns, lim, sizeof(lim));
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "lease %llu has %s (%llu ns) left, longer than this node allows a lease (%s)", id, got,
                           (unsigned long long)left, lim);
  }
  return tsr_status_annotate(
      tsr__check_fit(t, l->device, l->fraction_ppm, l->bytes, l->sm_ppm, l->owner_uid, l->owner, NULL), "lease %llu",
      id);
}

tsr_status_t tsr_lease_table_restore(tsr_lease_table_t *t, const tsr_lease_t *lease, tsr_lease_now_t now) {
  TSR_RETURN_IF_ERROR(tsr__check_restored(t, lease, now));
  TSR_RETURN_IF_ERROR(tsr__reserve(t, lease->device));
  tsr_lease_t l = *lease;
  l.state = TSR_LEASE_ACTIVE;
  l.ended_wall_ns = 0;
  l.deadline_mono_ns = tsr_time_add_sat(now.mono_ns, tsr_time_sub_sat(l.deadline_wall_ns, now.wall_ns));
  tsr__insert(t, &l);
  return NULL;
}

tsr_status_t tsr_lease_table_authorize_release(const tsr_lease_table_t *t, uint64_t id, const tsr_lease_actor_t *actor,
                                               tsr_lease_t *out_lease) {
  ptrdiff_t i = tsr__find_index(t, id);
  if (i < 0) return tsr_status_make(TSR_NOT_FOUND, "no active lease %llu", (unsigned long long)id);
  const tsr_lease_t *l = &t->leases[i];
  if (l->owner_uid != actor->uid && !actor->admin)
    return tsr_status_make(TSR_PERMISSION_DENIED, "lease %llu belongs to %s", (unsigned long long)id, l->owner);
  if (out_lease) *out_lease = *l;
  return NULL;
}

tsr_status_t tsr_lease_table_check_renew(const tsr_lease_table_t *t, uint64_t id, const tsr_lease_actor_t *actor,
                                         uint64_t deadline_wall_ns, tsr_lease_now_t now, tsr_lease_t *out_lease) {
  tsr_lease_t l;
  TSR_RETURN_IF_ERROR(tsr_lease_table_authorize_release(t, id, actor, &l));
  if (deadline_wall_ns <= now.wall_ns)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "lease %llu: the new deadline is not in the future",
                           (unsigned long long)id);
  uint64_t left = deadline_wall_ns - now.wall_ns;
  if (t->limits.max_duration_ns && left > t->limits.max_duration_ns) {
    char lim[32];
    tsr_time_format_duration(t->limits.max_duration_ns, lim, sizeof(lim));
    return tsr_status_make(TSR_INVALID_ARGUMENT, "lease %llu: a renewal reaches at most %s from now on this node",
                           (unsigned long long)id, lim);
  }
  l.deadline_wall_ns = deadline_wall_ns;
  l.deadline_mono_ns = tsr_time_add_sat(now.mono_ns, left);
  if (out_lease) *out_lease = l;
  return NULL;
}

tsr_status_t tsr_lease_table_renew(tsr_lease_table_t *t, uint64_t id, const tsr_lease_actor_t *actor,
                                   uint64_t deadline_wall_ns, tsr_lease_now_t now, tsr_lease_t *out_lease) {
  tsr_lease_t l;
  TSR_RETURN_IF_ERROR(tsr_lease_table_check_renew(t, id, actor, deadline_wall_ns, now, &l));
  tsr__heap_entry_t *h = tsr_array_grow(t->heap, &t->heap_cap, t->heap_len + 1, sizeof(*h), 16);
  if (!h) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory growing the deadline heap");
  t->heap = h;
  /* The old heap entry goes stale (its deadline no longer the lease's) and is
   * skipped when it reaches the top; the new one orders the lease anew. */
  tsr_lease_t *live = &t->leases[tsr__find_index(t, id)];
  live->deadline_wall_ns = l.deadline_wall_ns;
  live->deadline_mono_ns = l.deadline_mono_ns;
  t->changes++;
  t->heap[t->heap_len].deadline_mono_ns = l.deadline_mono_ns;
  t->heap[t->heap_len].id = id;
  tsr__heap_sift_up(t->heap, t->heap_len++);
  tsr__heap_tidy(t);
  if (out_lease) *out_lease = l;
  return NULL;
}

/* Takes lease `l`'s bytes, SM share and hold on its lock key off its
 * device (sign -1) or puts them back (+1): a resize is checked against the
 * device as if the lease were not there. The key's owner stays recorded
 * while its count is 0 and is the same lease's when it comes back. */
static void tsr__account(tsr_lease_table_t *t, const tsr_lease_t *l, int sign) {
  tsr__device_state_t *d = &t->devices[l->device];
  tsr__lock_t *k = &d->locks[tsr_lease_lock_key(l->fraction_ppm)];
  if (sign < 0) {
    d->committed_bytes -= l->bytes;
    d->committed_sm_ppm -= l->sm_ppm;
    k->count--;
  } else {
    d->committed_bytes += l->bytes;
    d->committed_sm_ppm += l->sm_ppm;
    if (k->count++ == 0) {
      k->owner_uid = l->owner_uid;
      memcpy(k->owner, l->owner, sizeof(k->owner));
    }
  }
}

tsr_status_t tsr_lease_table_check_resize(const tsr_lease_table_t *t, uint64_t id, const tsr_lease_actor_t *actor,
                                          uint32_t fraction_ppm, uint32_t sm_ppm, tsr_lease_t *out_lease) {
  tsr_lease_t l;
  TSR_RETURN_IF_ERROR(tsr_lease_table_authorize_release(t, id, actor, &l));
  uint32_t fraction = fraction_ppm ? fraction_ppm : l.fraction_ppm;
  uint32_t sm = sm_ppm == TSR_LEASE_SM_UNCHANGED ? l.sm_ppm : sm_ppm;
  if (fraction > TSR_PPM_ONE)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "fraction must be in (0, 1], got %u ppm", fraction);
  if (sm > TSR_PPM_ONE) return tsr_status_make(TSR_INVALID_ARGUMENT, "SM share must be in (0, 1], got %u ppm", sm);
  uint64_t bytes = tsr_units_scale_ppm(t->devices[l.device].info.total_bytes, fraction);
  TSR_RETURN_IF_ERROR(tsr__check_minimum(t, fraction, bytes));
  tsr_status_t st = tsr__check_fit(t, l.device, fraction, bytes, sm, l.owner_uid, l.owner, &l);
  if (st) return tsr_status_annotate(st, "lease %llu not resized", (unsigned long long)id);
  l.fraction_ppm = fraction;
  l.bytes = bytes;
  l.sm_ppm = sm;
  if (out_lease) *out_lease = l;
  return NULL;
}

tsr_status_t tsr_lease_table_resize(tsr_lease_table_t *t, uint64_t id, const tsr_lease_actor_t *actor,
                                    uint32_t fraction_ppm, uint32_t sm_ppm, tsr_lease_t *out_lease) {
  tsr_lease_t after;
  TSR_RETURN_IF_ERROR(tsr_lease_table_check_resize(t, id, actor, fraction_ppm, sm_ppm, &after));
  tsr_lease_t *live = &t->leases[tsr__find_index(t, id)];
  tsr__account(t, live, -1);
  *live = after;
  t->changes++;
  tsr__account(t, live, +1);
  if (out_lease) *out_lease = after;
  return NULL;
}

tsr_status_t tsr_lease_table_remove(tsr_lease_table_t *t, uint64_t id, tsr_lease_state_t state, tsr_lease_now_t now,
                                    tsr_lease_t *out_lease) {
  ptrdiff_t i = tsr__find_index(t, id);
  if (i < 0) return tsr_status_make(TSR_NOT_FOUND, "no active lease %llu", (unsigned long long)id);
  tsr_lease_t l = t->leases[i];
  tsr__device_state_t *d = &t->devices[l.device];
  d->committed_bytes -= l.bytes;
  d->committed_sm_ppm -= l.sm_ppm;
  d->locks[tsr_lease_lock_key(l.fraction_ppm)].count--; /* the last one frees the key */
  tsr__owner_drop(t, l.owner_uid);
  memmove(&t->leases[i], &t->leases[i + 1], (t->count - (size_t)i - 1) * sizeof(l));
  t->count--;
  t->changes++;
  tsr__heap_tidy(t);
  l.state = state == TSR_LEASE_EXPIRED ? TSR_LEASE_EXPIRED : TSR_LEASE_RELEASED;
  l.ended_wall_ns = now.wall_ns;
  if (out_lease) *out_lease = l;
  return NULL;
}

bool tsr_lease_table_next_deadline(const tsr_lease_table_t *t, uint64_t *out_mono_ns) {
  if (t->heap_len == 0) return false;
  *out_mono_ns = t->heap[0].deadline_mono_ns;
  return true;
}

bool tsr_lease_table_peek_expired(const tsr_lease_table_t *t, uint64_t now_mono_ns, tsr_lease_t *out_lease) {
  if (t->heap_len == 0 || t->heap[0].deadline_mono_ns > now_mono_ns) return false;
  ptrdiff_t i = tsr__find_index(t, t->heap[0].id);
  if (i < 0) return false; /* cannot happen: the top is kept live */
  if (out_lease) *out_lease = t->leases[i];
  return true;
}

const tsr_lease_t *tsr_lease_table_find(const tsr_lease_table_t *t, uint64_t id) {
  ptrdiff_t i = tsr__find_index(t, id);
  return i < 0 ? NULL : &t->leases[i];
}

size_t tsr_lease_table_count(const tsr_lease_table_t *t) { return t->count; }

const tsr_lease_t *tsr_lease_table_at(const tsr_lease_table_t *t, size_t i) {
  return i < t->count ? &t->leases[i] : NULL;
}

size_t tsr_lease_table_device_count(const tsr_lease_table_t *t) { return t->device_count; }

const tsr_device_t *tsr_lease_table_device(const tsr_lease_table_t *t, uint32_t index) {
  return index < t->device_count ? &t->devices[index].info : NULL;
}

uint64_t tsr_lease_table_available_bytes(const tsr_lease_table_t *t, uint32_t device) {
  if (device >= t->device_count) return 0;
  return t->devices[device].info.total_bytes - t->devices[device].committed_bytes;
}

uint32_t tsr_lease_table_sm_committed(const tsr_lease_table_t *t, uint32_t device) {
  if (device >= t->device_count) return 0;
  return t->devices[device].committed_sm_ppm;
}

bool tsr_lease_job_ok(const char *job) {
  if (!job) return false;
  size_t n = strnlen(job, TSR_LEASE_JOB_MAX);
  if (n == 0 || n >= TSR_LEASE_JOB_MAX) return false;
  for (size_t i = 0; i < n; i++) {
    char c = job[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._:@+-", c)))
      return false;
  }
  return true;
}

uint64_t tsr_lease_table_changes(const tsr_lease_table_t *t) { return t->changes; }
