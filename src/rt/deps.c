/* deps.c: the outstanding accesses of byte ranges, for ordering tasks that
 * touch the same memory (read-after-write, write-after-read,
 * write-after-write).
 *
 * A hash of chunks at levels of size: a range of L bytes is recorded at
 * level g = ceil(log2 L) (at least 16 bytes), in the one or two chunks of
 * 2^g bytes it touches, so a bucket holds about as many records as ranges
 * of that size fit in a chunk, whatever the sizes in use. A query visits,
 * at every level that holds records, the chunks its range covers (or, for
 * a query far larger than the level's chunks, every bucket) and keeps the
 * accesses that overlap it; an access whose task has completed is dropped
 * on the way, so lists stay as short as what is in flight. Records come
 * from a fixed pool: no allocation per task. */
#include <stdlib.h>
#include <string.h>

#include "rt/internal.h"

#define TSR__LEVEL_MIN 4   /* 16-byte chunks */
#define TSR__LEVELS 64
#define TSR__SPAN_MAX 1024 /* chunks a query visits at a level before it walks every bucket */
#define TSR__NIL UINT32_MAX

typedef struct {
  uint64_t lo, hi;
  tsr__rt_dep_t who;
  uint32_t next;
  uint8_t level;
  bool write;
} tsr__rec_t;

struct tsr__rt_deps_s {
  tsr__rec_t *rec;
  uint32_t cap, free_head, live;
  uint32_t *bucket; /* heads, nbuckets */
  uint32_t nbuckets;
  uint32_t at_level[TSR__LEVELS]; /* live records of each level */
};

tsr_status_t tsr__rt_deps_create(uint32_t capacity, tsr__rt_deps_t **out) {
  tsr__rt_deps_t *d = calloc(1, sizeof(*d));
  uint32_t nb = 1;
  while (nb < capacity / 2 && nb < (1u << 20)) nb <<= 1;
  if (d) {
    d->rec = calloc(capacity, sizeof(*d->rec));
    d->bucket = malloc((size_t)nb * sizeof(*d->bucket));
  }
  if (!d || !d->rec || !d->bucket) {
    if (d) {
      free(d->rec);
      free(d->bucket);
    }
    free(d);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory for the dependency table");
  }
  d->cap = capacity;
  d->nbuckets = nb;
  tsr__rt_deps_clear(d);
  *out = d;
  return NULL;
}

void tsr__rt_deps_free(tsr__rt_deps_t *d) {
  if (!d) return;
  free(d->rec);
  free(d->bucket);
  free(d);
}

void tsr__rt_deps_clear(tsr__rt_deps_t *d) {
  for (uint32_t i = 0; i < d->nbuckets; i++) d->bucket[i] = TSR__NIL;
  for (uint32_t i = 0; i < d->cap; i++) d->rec[i].next = i + 1 < d->cap ? i + 1 : TSR__NIL;
  d->free_head = 0;
  d->live = 0;
  memset(d->at_level, 0, sizeof(d->at_level));
}

static unsigned tsr__level(uint64_t len) {
  unsigned g = TSR__LEVEL_MIN;
  while (g < 63 && (UINT64_C(1) << g) < len) g++;
  return g;
}

/* Reads and writes of a chunk are kept in different buckets: a read only
 * asks for the writes, and a buffer read by many lanes (an operand every
 * task shares) must not make every read walk its readers. */
static uint32_t *tsr__head(tsr__rt_deps_t *d, unsigned level, uint64_t chunk, bool write) {
  uint64_t h = (chunk ^ ((uint64_t)level << 58) ^ ((uint64_t)write << 57)) * UINT64_C(0x9e3779b97f4a7c15);
  return &d->bucket[(h >> 32) & (d->nbuckets - 1)];
}

static bool tsr__complete(tsr_rt_t *rt, const tsr__rt_dep_t *w) { return tsr__rt_seen(rt, w->lane, w->n); }

static uint32_t tsr__merge(tsr__rt_dep_t *out, uint32_t count, uint32_t cap, const tsr__rt_dep_t *w) {
  for (uint32_t i = 0; i < count && i < cap; i++)
    if (out[i].lane == w->lane) {
      if (w->n > out[i].n) out[i] = *w;
      return count;
    }
  if (count >= cap) return cap + 1;
  out[count] = *w;
  return count + 1;
}

/* Walks one list: drops completed records, merges conflicting ones. */
static uint32_t tsr__walk(tsr__rt_deps_t *d, tsr_rt_t *rt, uint32_t *head, uint64_t lo, uint64_t hi,
                          bool write, tsr__rt_dep_t *out, uint32_t count, uint32_t cap) {
  uint32_t *link = head;
  while (*link != TSR__NIL) {
    uint32_t i = *link;
    tsr__rec_t *r = &d->rec[i];
    if (tsr__complete(rt, &r->who)) {
      *link = r->next;
      r->next = d->free_head;
      d->free_head = i;
      d->live--;
      d->at_level[r->level]--;
      continue;
    }
    if (r->lo < hi && lo < r->hi && (write || r->write) && count <= cap)
      count = tsr__merge(out, count, cap, &r->who);
    link = &r->next;
  }
  return count;
}

uint32_t tsr__rt_deps_find(tsr__rt_deps_t *d, tsr_rt_t *rt, uint64_t lo, uint64_t hi, bool write,
                           tsr__rt_dep_t *out, uint32_t count, uint32_t cap) {
  if (hi <= lo) return count;
  bool all_walked = false;
  for (unsigned g = TSR__LEVEL_MIN; g < TSR__LEVELS; g++) {
    if (!d->at_level[g]) continue;
    uint64_t c0 = lo >> g, c1 = (hi - 1) >> g;
    if (c1 - c0 >= TSR__SPAN_MAX) {
      /* a query far larger than this level's chunks: every bucket, once */
      if (!all_walked)
        for (uint32_t b = 0; b < d->nbuckets; b++) count = tsr__walk(d, rt, &d->bucket[b], lo, hi, write, out, count, cap);
      all_walked = true;
      continue;
    }
    for (uint64_t c = c0; c <= c1; c++) {
      count = tsr__walk(d, rt, tsr__head(d, g, c, true), lo, hi, write, out, count, cap);
      if (write) count = tsr__walk(d, rt, tsr__head(d, g, c, false), lo, hi, write, out, count, cap);
    }
  }
  return count;
}

/* Drops the records an access of [lo, hi) by `who` makes redundant: the
 * same range in the same lane (a lane runs in order, so waiting for `who`
 * waits for them too): every such record for a write, the reads for a
 * read. Keeps a chain's lists as short as one record per buffer. */
static void tsr__supersede(tsr__rt_deps_t *d, uint32_t *head, uint64_t lo, uint64_t hi, bool write,
                           tsr__rt_dep_t who) {
  uint32_t *link = head;
  while (*link != TSR__NIL) {
    uint32_t i = *link;
    tsr__rec_t *r = &d->rec[i];
    if (r->lo == lo && r->hi == hi && r->who.lane == who.lane && r->who.n <= who.n && (write || !r->write)) {
      *link = r->next;
      r->next = d->free_head;
      d->free_head = i;
      d->live--;
      d->at_level[r->level]--;
      continue;
    }
    link = &r->next;
  }
}

static bool tsr__push(tsr__rt_deps_t *d, unsigned level, uint64_t chunk, uint64_t lo, uint64_t hi, bool write,
                      tsr__rt_dep_t who) {
  uint32_t *head = tsr__head(d, level, chunk, write);
  tsr__supersede(d, head, lo, hi, write, who);
  if (write) tsr__supersede(d, tsr__head(d, level, chunk, false), lo, hi, write, who);
  uint32_t i = d->free_head;
  if (i == TSR__NIL) return false;
  d->free_head = d->rec[i].next;
  d->rec[i] = (tsr__rec_t){lo, hi, who, *head, (uint8_t)level, write};
  *head = i;
  d->live++;
  d->at_level[level]++;
  return true;
}

bool tsr__rt_deps_add(tsr__rt_deps_t *d, uint64_t lo, uint64_t hi, bool write, tsr__rt_dep_t who) {
  if (hi <= lo) return true;
  unsigned g = tsr__level(hi - lo);
  uint64_t c0 = lo >> g, c1 = (hi - 1) >> g; /* one or two chunks */
  if (d->cap - d->live < 2) return false;
  for (uint64_t c = c0; c <= c1; c++) tsr__push(d, g, c, lo, hi, write, who);
  return true;
}

uint32_t tsr__rt_deps_prune(tsr__rt_deps_t *d, tsr_rt_t *rt) {
  tsr__rt_dep_t none[1];
  for (uint32_t b = 0; b < d->nbuckets; b++) tsr__walk(d, rt, &d->bucket[b], 1, 0, false, none, 0, 0);
  return d->live;
}
