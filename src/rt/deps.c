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
 * from a fixed pool: no allocation per task.
 *
 * A lane runs its tasks in order, so of one lane's accesses of one kind to
 * one range only the latest matters: a second access updates the lane's
 * record in place, so a range read by every lane holds one record per lane
 * and a chain's buffer one. A write finds its lane's record in the chunk's
 * write list (short: the writes of a buffer follow its last writer's lane);
 * a read through a direct-mapped index of (range, lane), since the read
 * list of an operand every task shares holds a record per lane. The index
 * is a cache: a slot taken by another key or a freed record is a miss, and
 * a miss only records a second, redundant record, which lookups merge (by
 * lane, keeping the latest) and completion drops. */
#include <stdlib.h>
#include <string.h>

#include "rt/internal.h"

#define TSR__LEVEL_MIN 4 /* 16-byte chunks */
#define TSR__LEVELS 64
#define TSR__SPAN_MAX 1024 /* chunks a query visits at a level before it walks every bucket */
#define TSR__NIL UINT32_MAX

typedef struct {
  uint64_t lo, hi;
  tsr__rt_dep_t who;
  uint32_t next;
  uint8_t level;
  uint8_t second; /* in the second of the two chunks the range touches */
  bool write;
  bool live;
} tsr__rec_t;

struct tsr__rt_deps_s {
  tsr__rec_t *rec;
  uint32_t cap, free_head, live;
  uint32_t (*bucket)[2]; /* per chunk: the heads of its reads [0] and its writes [1] */
  uint32_t nbuckets;
  uint32_t *index; /* reads: (range, lane, chunk) -> record, a cache; nindex */
  uint32_t nindex;
  uint32_t at_level[TSR__LEVELS];                      /* live records of each level */
  uint64_t levels;                                     /* bit g: level g has records */
  uint64_t span_lo[TSR__LEVELS], span_hi[TSR__LEVELS]; /* the bytes a level's records lie in
                                                        * (grown by adds, reset when it empties) */
};

tsr_status_t tsr_rt_deps_create(uint32_t capacity, tsr__rt_deps_t **out) {
  tsr__rt_deps_t *d = calloc(1, sizeof(*d));
  /* buckets and index small enough to stay in a core's cache (a bucket a
   * 16 records the table holds at most, usually far fewer live): on the
   * build machine 0.17 us a submit against 0.24-0.35 with a bucket a 2 */
  uint32_t nb = 1;
  while (nb < capacity / 16 && nb < (1u << 20)) nb <<= 1;
  uint32_t ni = 1;
  while (ni < capacity / 8 && ni < (1u << 22)) ni <<= 1;
  if (d) {
    d->rec = calloc(capacity, sizeof(*d->rec));
    d->bucket = aligned_alloc(8, (size_t)nb * sizeof(*d->bucket));
    d->index = malloc((size_t)ni * sizeof(*d->index));
  }
  if (!d || !d->rec || !d->bucket || !d->index) {
    if (d) {
      free(d->rec);
      free(d->bucket);
      free(d->index);
    }
    free(d);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory for the dependency table");
  }
  d->cap = capacity;
  d->nbuckets = nb;
  d->nindex = ni;
  tsr_rt_deps_clear(d);
  *out = d;
  return NULL;
}

void tsr_rt_deps_free(tsr__rt_deps_t *d) {
  if (!d) return;
  free(d->rec);
  free(d->bucket);
  free(d->index);
  free(d);
}

void tsr_rt_deps_clear(tsr__rt_deps_t *d) {
  for (uint32_t i = 0; i < d->nbuckets; i++) d->bucket[i][0] = d->bucket[i][1] = TSR__NIL;
  for (uint32_t i = 0; i < d->nindex; i++) d->index[i] = TSR__NIL;
  for (uint32_t i = 0; i < d->cap; i++) {
    d->rec[i].next = i + 1 < d->cap ? i + 1 : TSR__NIL;
    d->rec[i].live = false;
  }
  d->free_head = 0;
  d->live = 0;
  memset(d->at_level, 0, sizeof(d->at_level));
  d->levels = 0;
  memset(d->span_lo, 0, sizeof(d->span_lo));
  memset(d->span_hi, 0, sizeof(d->span_hi));
}

/* ceil(log2 len), at least TSR__LEVEL_MIN (len >= 1) */
static unsigned tsr__level(uint64_t len) {
  unsigned g = len > 1 ? 64u - (unsigned)__builtin_clzll(len - 1) : 0u;
  return g < TSR__LEVEL_MIN ? TSR__LEVEL_MIN : g > 63 ? 63 : g;
}

/* A chunk's reads and writes are kept in two lists of one bucket (one
 * cache line): a read only asks for the writes, and a buffer read by many
 * lanes (an operand every task shares) must not make every read walk its
 * readers. */
static uint32_t *tsr__heads(tsr__rt_deps_t *d, unsigned level, uint64_t chunk) {
  /* a multiplication carries a key's bits only upwards: the level is mixed
   * in before it, and the bucket is taken from the high bits */
  uint64_t h = (chunk + (uint64_t)level * UINT64_C(0xc2b2ae3d27d4eb4f)) * UINT64_C(0x9e3779b97f4a7c15);
  h ^= h >> 29;
  h *= UINT64_C(0xbf58476d1ce4e5b9);
  return d->bucket[(h >> 32) & (d->nbuckets - 1)];
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
static uint32_t tsr__walk(tsr__rt_deps_t *d, tsr_rt_t *rt, uint32_t *head, uint64_t lo, uint64_t hi, bool write,
                          tsr__rt_dep_t *out, uint32_t count, uint32_t cap) {
  uint32_t *link = head;
  while (*link != TSR__NIL) {
    uint32_t i = *link;
    tsr__rec_t *r = &d->rec[i];
    if (tsr__complete(rt, &r->who)) {
      *link = r->next;
      r->next = d->free_head;
      r->live = false;
      d->free_head = i;
      d->live--;
      if (!--d->at_level[r->level]) d->levels &= ~(UINT64_C(1) << r->level);
      continue;
    }
    if (r->lo < hi && lo < r->hi && (write || r->write) && count <= cap) count = tsr__merge(out, count, cap, &r->who);
    link = &r->next;
  }
  return count;
}

uint32_t tsr_rt_deps_find(tsr__rt_deps_t *d, tsr_rt_t *rt, uint64_t lo, uint64_t hi, bool write, tsr__rt_dep_t *out,
                          uint32_t count, uint32_t cap) {
  if (hi <= lo) return count;
  bool all_walked = false;
  for (uint64_t m = d->levels; m; m &= m - 1) {
    unsigned g = (unsigned)__builtin_ctzll(m);
    /* a level whose records lie elsewhere: a big read (an operand every
     * task shares) does not visit the chunks of small outputs one by one */
    if (!d->at_level[g] || hi <= d->span_lo[g] || lo >= d->span_hi[g]) continue;
    uint64_t c0 = lo >> g, c1 = (hi - 1) >> g;
    if (c1 - c0 >= TSR__SPAN_MAX) {
      /* a query far larger than this level's chunks: every bucket, once */
      if (!all_walked)
        for (uint32_t b = 0; b < d->nbuckets; b++)
          for (int k = write ? 0 : 1; k < 2; k++)
            count = tsr__walk(d, rt, &d->bucket[b][k], lo, hi, write, out, count, cap);
      all_walked = true;
      continue;
    }
    for (uint64_t c = c0; c <= c1; c++) {
      uint32_t *heads = tsr__heads(d, g, c);
      count = tsr__walk(d, rt, &heads[1], lo, hi, write, out, count, cap);
      if (write) count = tsr__walk(d, rt, &heads[0], lo, hi, write, out, count, cap);
    }
  }
  return count;
}

static uint32_t *tsr__index(tsr__rt_deps_t *d, uint64_t lo, uint64_t hi, uint32_t lane, unsigned second) {
  uint64_t h = lo * UINT64_C(0x9e3779b97f4a7c15) + hi * UINT64_C(0xc2b2ae3d27d4eb4f) +
               ((uint64_t)lane << 1 | second) * UINT64_C(0x165667b19e3779f9);
  h ^= h >> 29;
  h *= UINT64_C(0xbf58476d1ce4e5b9);
  return &d->index[(h >> 32) & (d->nindex - 1)];
}

static bool tsr__same(const tsr__rec_t *r, uint64_t lo, uint64_t hi, bool write, uint32_t lane, unsigned second) {
  return r->lo == lo && r->hi == hi && r->write == write && r->who.lane == lane && r->second == second;
}

/* Records one access in one chunk's list, or updates the lane's record of
 * the same kind of access to the same range. A write finds it in the
 * chunk's write list (short: a buffer's writes stay in the lane of its last
 * writer); a read through the index (the read list of an operand every lane
 * reads holds a record per lane). */
static bool tsr__push(tsr__rt_deps_t *d, unsigned level, uint64_t chunk, unsigned second, uint64_t lo, uint64_t hi,
                      bool write, tsr__rt_dep_t who, bool fresh) {
  uint32_t *head = &tsr__heads(d, level, chunk)[write];
  uint32_t *slot = NULL;
  if (fresh) {
    /* nothing live overlaps the range: no record of it to update (the
     * chunk's list may hold other ranges that hash there: not walked) */
  } else if (write) {
    for (uint32_t i = *head; i != TSR__NIL; i = d->rec[i].next)
      if (tsr__same(&d->rec[i], lo, hi, true, who.lane, second)) {
        if (who.n > d->rec[i].who.n) d->rec[i].who = who; /* the lane's latest write */
        return true;
      }
  } else {
    slot = tsr__index(d, lo, hi, who.lane, second);
    tsr__rec_t *r = *slot != TSR__NIL ? &d->rec[*slot] : NULL;
    if (r && r->live && tsr__same(r, lo, hi, false, who.lane, second)) {
      if (who.n > r->who.n) r->who = who; /* the lane's latest read */
      return true;
    }
  }
  uint32_t i = d->free_head;
  if (i == TSR__NIL) return false;
  d->free_head = d->rec[i].next;
  d->rec[i] = (tsr__rec_t){lo, hi, who, *head, (uint8_t)level, (uint8_t)second, write, true};
  *head = i;
  if (slot) *slot = i;
  d->levels |= UINT64_C(1) << level;
  if (!d->at_level[level]++ || lo < d->span_lo[level]) d->span_lo[level] = lo;
  if (d->at_level[level] == 1 || hi > d->span_hi[level]) d->span_hi[level] = hi;
  d->live++;
  return true;
}

bool tsr_rt_deps_add(tsr__rt_deps_t *d, uint64_t lo, uint64_t hi, bool write, tsr__rt_dep_t who, bool fresh) {
  if (hi <= lo) return true;
  unsigned g = tsr__level(hi - lo);
  uint64_t c0 = lo >> g, c1 = (hi - 1) >> g; /* one or two chunks */
  if (d->cap - d->live < 2) return false;
  for (uint64_t c = c0; c <= c1; c++) tsr__push(d, g, c, (unsigned)(c - c0), lo, hi, write, who, fresh);
  return true;
}

uint32_t tsr_rt_deps_prune(tsr__rt_deps_t *d, tsr_rt_t *rt) {
  tsr__rt_dep_t none[1];
  for (uint32_t b = 0; b < d->nbuckets; b++)
    for (int k = 0; k < 2; k++) tsr__walk(d, rt, &d->bucket[b][k], 1, 0, false, none, 0, 0);
  return d->live;
}
