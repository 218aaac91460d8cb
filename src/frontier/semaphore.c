/* semaphore.c: timeline semaphores that remember the frontier of each signal
 * (see include/tessera/frontier.h).
 *
 * State, all under `mutex` (the value is also published atomically so that
 * tsr_semaphore_value needs no lock):
 *   ring       the last `history_length` advances, oldest first, strictly
 *              increasing in value. A tracked record carries the signal point
 *              (origin, origin_epoch) and a copy of the signal's frontier; an
 *              external record carries neither. The newest record's value is
 *              the current value (until the first advance: the initial value).
 *   lost       the value of the newest record pushed out of the ring (0: none).
 *              The signal that first reached v is still in the ring iff
 *              v > lost.
 *   watermark  the value of the last tracked signal (initially the initial
 *              value); values above it were reached only externally.
 *
 * Lookup for S >= v (initial < v <= current): the reaching record is the
 * first record with value >= v (binary search). It is known when v > lost; it
 * is exact when, in addition, it is tracked. The covering record -- the one
 * whose signal point a waiter's knowledge must cover to elide the wait -- is
 * the first *tracked* record at or after it. Because signals execute in value
 * order, S reaching that record's value implies S >= v. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontier/internal.h"

typedef struct tsr__record_s {
  uint64_t value;
  tsr_axis_t origin;     /* 0 for an external advance */
  uint64_t origin_epoch; /* origin's epoch in the frontier at the signal */
  /* followed by a KNOWLEDGE frontier of `frontier_capacity` entries */
} tsr__record_t;

struct tsr_semaphore_s {
  _Atomic uint64_t value;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint64_t initial;
  uint64_t watermark;
  uint64_t lost;
  uint32_t history_length;
  uint32_t frontier_capacity;
  uint32_t head;  /* physical index of the oldest record */
  uint32_t count; /* records in the ring */
  uint32_t waiters;
  size_t stride; /* bytes per record */
  unsigned char *ring;
};

/* ---- ring access -------------------------------------------------------- */

static inline tsr__record_t *tsr__rec(const tsr_semaphore_t *s, uint32_t logical) {
  uint32_t phys = s->head + logical;
  if (phys >= s->history_length) phys -= s->history_length;
  return (tsr__record_t *)(void *)(s->ring + (size_t)phys * s->stride);
}

static inline tsr_frontier_t *tsr__rec_frontier(tsr__record_t *r) {
  return (tsr_frontier_t *)(void *)((unsigned char *)r + sizeof(*r));
}

/* Appends a record (dropping the oldest if full) and returns it. */
static tsr__record_t *tsr__push(tsr_semaphore_t *s, uint64_t value) {
  if (s->count == s->history_length) {
    s->lost = tsr__rec(s, 0)->value;
    s->head = s->head + 1 == s->history_length ? 0 : s->head + 1;
    s->count--;
  }
  tsr__record_t *r = tsr__rec(s, s->count++);
  r->value = value;
  r->origin = 0;
  r->origin_epoch = 0;
  tsr_frontier_clear(tsr__rec_frontier(r));
  return r;
}

/* Logical index of the first record with value >= v (count if none). */
static uint32_t tsr__first_ge(const tsr_semaphore_t *s, uint64_t v) {
  uint32_t lo = 0, hi = s->count;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (tsr__rec(s, mid)->value < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

typedef enum {
  TSR__AT_BIRTH, /* v <= initial: satisfied, no dependencies */
  TSR__PENDING,  /* v > current */
  TSR__LOST,     /* reaching record left the ring */
  TSR__EXTERNAL, /* reaching record is an external advance */
  TSR__EXACT,    /* reaching record tracked and remembered */
} tsr__state_t;

typedef struct {
  tsr__state_t state;
  tsr__record_t *reach; /* EXACT only */
  tsr__record_t *cover; /* first tracked record >= v in the ring, or NULL */
} tsr__lookup_t;

/* Under the mutex. */
static tsr__lookup_t tsr__lookup(const tsr_semaphore_t *s, uint64_t v) {
  tsr__lookup_t l = {TSR__PENDING, NULL, NULL};
  if (v <= s->initial) {
    l.state = TSR__AT_BIRTH;
    return l;
  }
  uint64_t cur = atomic_load_explicit(&s->value, memory_order_relaxed);
  if (v > cur) return l;
  uint32_t k = tsr__first_ge(s, v);
  /* k < count: the newest record holds the current value >= v. */
  if (v <= s->lost) {
    l.state = TSR__LOST;
  } else {
    tsr__record_t *r = tsr__rec(s, k);
    l.state = r->origin ? TSR__EXACT : TSR__EXTERNAL;
    if (r->origin) l.reach = r;
  }
  for (uint32_t i = k; i < s->count; i++) {
    tsr__record_t *r = tsr__rec(s, i);
    if (r->origin) {
      l.cover = r;
      break;
    }
  }
  return l;
}

static bool tsr__covered(const tsr__lookup_t *l, const tsr_frontier_t *knowledge) {
  if (l->state == TSR__AT_BIRTH) return true;
  if (l->state == TSR__PENDING || !l->cover || !knowledge) return false;
  return tsr_frontier_get(knowledge, l->cover->origin) >= l->cover->origin_epoch;
}

/* ---- lifecycle ---------------------------------------------------------- */

tsr_status_t tsr_semaphore_create(const tsr_semaphore_options_t *o, tsr_semaphore_t **out_semaphore) {
  if (!out_semaphore) return tsr_status_make(TSR_INVALID_ARGUMENT, "semaphore: NULL out");
  *out_semaphore = NULL;
  if (!o) return tsr_status_make(TSR_INVALID_ARGUMENT, "semaphore: NULL options");
  if (o->history_length == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "semaphore: history_length must be >= 1");
  if (o->frontier_capacity == 0 || o->frontier_capacity > TSR_FRONTIER_MAX_CAPACITY)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "semaphore: frontier_capacity %u not in 1..%u", o->frontier_capacity,
                           TSR_FRONTIER_MAX_CAPACITY);
  size_t stride = sizeof(tsr__record_t) + tsr_frontier_size(o->frontier_capacity);
  if (o->history_length > (SIZE_MAX - sizeof(tsr_semaphore_t)) / stride)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "semaphore: history too large");
  tsr_semaphore_t *s = calloc(1, sizeof(*s) + (size_t)o->history_length * stride);
  if (!s) return tsr_status_make(TSR_OUT_OF_MEMORY, "semaphore: %u records", o->history_length);
  s->ring = (unsigned char *)(s + 1);
  s->stride = stride;
  s->history_length = o->history_length;
  s->frontier_capacity = o->frontier_capacity;
  s->initial = o->initial_value;
  s->watermark = o->initial_value;
  atomic_init(&s->value, o->initial_value);
  for (uint32_t i = 0; i < o->history_length; i++) {
    tsr__record_t *r = (tsr__record_t *)(void *)(s->ring + (size_t)i * stride);
    tsr_frontier_init(tsr__rec_frontier(r), o->frontier_capacity, TSR_FRONTIER_KNOWLEDGE);
  }
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc == 0) rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (rc == 0) rc = pthread_cond_init(&s->cond, &ca);
  pthread_condattr_destroy(&ca);
  if (rc != 0) {
    free(s);
    return tsr_status_from_errno(rc, "semaphore: condition variable");
  }
  rc = pthread_mutex_init(&s->mutex, NULL);
  if (rc != 0) {
    pthread_cond_destroy(&s->cond);
    free(s);
    return tsr_status_from_errno(rc, "semaphore: mutex");
  }
  *out_semaphore = s;
  return NULL;
}

void tsr_semaphore_destroy(tsr_semaphore_t *s) {
  if (!s) return;
  pthread_mutex_destroy(&s->mutex);
  pthread_cond_destroy(&s->cond);
  free(s);
}

/* ---- advancing ---------------------------------------------------------- */

static void tsr__publish(tsr_semaphore_t *s, uint64_t value) {
  atomic_store_explicit(&s->value, value, memory_order_release);
  if (s->waiters) pthread_cond_broadcast(&s->cond);
}

tsr_semaphore_signal_t tsr_semaphore_signal(tsr_semaphore_t *s, uint64_t value, tsr_axis_t origin,
                                            const tsr_frontier_t *frontier) {
  if (!frontier || origin == 0) return TSR_SEMAPHORE_NO_ORIGIN;
  uint64_t origin_epoch = tsr_frontier_get(frontier, origin);
  if (origin_epoch == 0) return TSR_SEMAPHORE_NO_ORIGIN;
  pthread_mutex_lock(&s->mutex);
  if (value <= atomic_load_explicit(&s->value, memory_order_relaxed)) {
    pthread_mutex_unlock(&s->mutex);
    return TSR_SEMAPHORE_NOT_MONOTONIC;
  }
  tsr__record_t *r = tsr__push(s, value);
  r->origin = origin;
  r->origin_epoch = origin_epoch;
  /* A frontier larger than the record is stored evicted (TAINTED); the
   * signal point itself is kept, it is a fact every importer may learn. */
  if (tsr_frontier_copy(tsr__rec_frontier(r), frontier) != TSR_FRONTIER_FIT)
    tsr_frontier_raise_pinned(tsr__rec_frontier(r), origin, origin_epoch);
  s->watermark = value;
  tsr__publish(s, value);
  pthread_mutex_unlock(&s->mutex);
  return TSR_SEMAPHORE_SIGNALLED;
}

tsr_semaphore_signal_t tsr_semaphore_advance_external(tsr_semaphore_t *s, uint64_t value) {
  pthread_mutex_lock(&s->mutex);
  if (value <= atomic_load_explicit(&s->value, memory_order_relaxed)) {
    pthread_mutex_unlock(&s->mutex);
    return TSR_SEMAPHORE_NOT_MONOTONIC;
  }
  tsr__push(s, value); /* external: no origin, no frontier; watermark stays */
  tsr__publish(s, value);
  pthread_mutex_unlock(&s->mutex);
  return TSR_SEMAPHORE_SIGNALLED;
}

/* ---- queries ------------------------------------------------------------ */

uint64_t tsr_semaphore_value(const tsr_semaphore_t *s) {
  return atomic_load_explicit(&((tsr_semaphore_t *)s)->value, memory_order_acquire);
}

uint64_t tsr_semaphore_watermark(tsr_semaphore_t *s) {
  pthread_mutex_lock(&s->mutex);
  uint64_t w = s->watermark;
  pthread_mutex_unlock(&s->mutex);
  return w;
}

bool tsr_semaphore_is_tainted(tsr_semaphore_t *s, uint64_t value) {
  pthread_mutex_lock(&s->mutex);
  bool t = value > s->watermark && value <= atomic_load_explicit(&s->value, memory_order_relaxed);
  pthread_mutex_unlock(&s->mutex);
  return t;
}

/* Under the mutex: the import part of wait/import. */
static tsr_semaphore_import_t tsr__import(tsr__lookup_t l, tsr_frontier_t *knowledge) {
  switch (l.state) {
    case TSR__AT_BIRTH: return TSR_SEMAPHORE_IMPORTED;
    case TSR__PENDING: return TSR_SEMAPHORE_PENDING;
    case TSR__LOST: return TSR_SEMAPHORE_HISTORY_LOST;
    case TSR__EXTERNAL: return TSR_SEMAPHORE_EXTERNAL;
    case TSR__EXACT: break;
  }
  if (knowledge) tsr_frontier_merge(knowledge, tsr__rec_frontier(l.reach));
  return TSR_SEMAPHORE_IMPORTED;
}

tsr_semaphore_import_t tsr_semaphore_import(tsr_semaphore_t *s, uint64_t value, tsr_frontier_t *knowledge) {
  pthread_mutex_lock(&s->mutex);
  tsr_semaphore_import_t r = tsr__import(tsr__lookup(s, value), knowledge);
  pthread_mutex_unlock(&s->mutex);
  return r;
}

tsr_semaphore_import_t tsr_semaphore_wait(tsr_semaphore_t *s, uint64_t value, uint64_t timeout_ns,
                                          tsr_frontier_t *knowledge) {
  struct timespec deadline;
  bool forever = timeout_ns == UINT64_MAX;
  if (!forever) {
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    uint64_t ns = (uint64_t)deadline.tv_nsec + timeout_ns % 1000000000u;
    uint64_t sec = (uint64_t)deadline.tv_sec + timeout_ns / 1000000000u + ns / 1000000000u;
    if (sec > (uint64_t)INT64_MAX) forever = true; /* clamp: beyond any real deadline */
    deadline.tv_sec = (time_t)sec;
    deadline.tv_nsec = (long)(ns % 1000000000u);
  }
  pthread_mutex_lock(&s->mutex);
  if (timeout_ns > 0) {
    s->waiters++;
    while (atomic_load_explicit(&s->value, memory_order_relaxed) < value) {
      int rc =
          forever ? pthread_cond_wait(&s->cond, &s->mutex) : pthread_cond_timedwait(&s->cond, &s->mutex, &deadline);
      if (rc == ETIMEDOUT) break;
    }
    s->waiters--;
  }
  tsr_semaphore_import_t r = tsr__import(tsr__lookup(s, value), knowledge);
  pthread_mutex_unlock(&s->mutex);
  return r;
}

bool tsr_semaphore_covers(tsr_semaphore_t *s, uint64_t value, const tsr_frontier_t *knowledge) {
  pthread_mutex_lock(&s->mutex);
  tsr__lookup_t l = tsr__lookup(s, value);
  bool c = tsr__covered(&l, knowledge);
  pthread_mutex_unlock(&s->mutex);
  return c;
}

/* ---- module-internal ---------------------------------------------------- */

bool tsr_semaphore_resolve(tsr_semaphore_t *s, uint64_t value, tsr_frontier_t *knowledge) {
  pthread_mutex_lock(&s->mutex);
  tsr__lookup_t l = tsr__lookup(s, value);
  bool issue = !tsr__covered(&l, knowledge);
  if (issue && l.state == TSR__EXACT) tsr_frontier_merge(knowledge, tsr__rec_frontier(l.reach));
  pthread_mutex_unlock(&s->mutex);
  return issue;
}

/* Marks in `out` (if not NULL) the bits of `remaining` whose death entry the
 * frontier `f` covers; returns how many. Two-pointer walk, both sorted. */
static uint32_t tsr__cover_bits(const tsr_frontier_t *f, const tsr_frontier_t *death, const uint64_t *remaining,
                                uint64_t *out) {
  uint32_t n = 0, p = 0;
  for (uint32_t q = 0; q < death->count; q++) {
    if (!(remaining[q / 64] >> (q % 64) & 1)) continue;
    const tsr_frontier_entry_t *e = &death->entries[q];
    while (p < f->count && f->entries[p].axis < e->axis) p++;
    if (p < f->count && f->entries[p].axis == e->axis && f->entries[p].epoch >= e->epoch) {
      n++;
      if (out) out[q / 64] |= UINT64_C(1) << (q % 64);
    }
  }
  return n;
}

void tsr_semaphore_best_cover(tsr_semaphore_t *s, const tsr_frontier_t *death, const uint64_t *remaining,
                              uint32_t *out_count, uint64_t *out_value, uint64_t *out_covered) {
  *out_count = 0;
  *out_value = 0;
  memset(out_covered, 0, TSR__FRONTIER_BITSET_WORDS * sizeof(uint64_t));
  pthread_mutex_lock(&s->mutex);
  tsr__record_t *best = NULL;
  uint32_t best_n = 0;
  for (uint32_t i = 0; i < s->count; i++) { /* oldest first: ties keep the earliest */
    tsr__record_t *r = tsr__rec(s, i);
    if (!r->origin) continue;
    uint32_t n = tsr__cover_bits(tsr__rec_frontier(r), death, remaining, NULL);
    if (n > best_n) best = r, best_n = n;
  }
  if (best) {
    tsr__cover_bits(tsr__rec_frontier(best), death, remaining, out_covered);
    *out_count = best_n;
    *out_value = best->value;
  }
  pthread_mutex_unlock(&s->mutex);
}
