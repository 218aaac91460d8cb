/* frontier.c: frontier values: merge, dominance, compare, insert-or-raise,
 * find-undominated (see include/tessera/frontier.h for the contract).
 *
 * Every function here works in caller storage and never allocates, except
 * tsr_frontier_create. Entries stay sorted by strictly increasing axis with
 * epochs >= 1, so equality is structural and the two-pointer walks below are
 * linear. The common case -- two frontiers over the same axes -- is handled by
 * a first loop that walks both in lock step; the general walks only run from
 * the first index where the axes differ. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "frontier/internal.h"

/* ---- construction ------------------------------------------------------- */

tsr_frontier_t *tsr_frontier_init(void *storage, uint32_t capacity, tsr_frontier_kind_t kind) {
  if (!storage || capacity > TSR_FRONTIER_MAX_CAPACITY) return NULL;
  if (kind != TSR_FRONTIER_KNOWLEDGE && kind != TSR_FRONTIER_REQUIREMENT) return NULL;
  tsr_frontier_t *f = storage;
  f->count = 0;
  f->capacity = (uint16_t)capacity;
  f->kind = (uint8_t)kind;
  f->flags = 0;
  f->reserved_ = 0;
  return f;
}

tsr_status_t tsr_frontier_create(uint32_t capacity, tsr_frontier_kind_t kind, tsr_frontier_t **out_frontier) {
  if (!out_frontier) return tsr_status_make(TSR_INVALID_ARGUMENT, "frontier: NULL out_frontier");
  *out_frontier = NULL;
  if (capacity > TSR_FRONTIER_MAX_CAPACITY)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "frontier: capacity %u above %u", capacity, TSR_FRONTIER_MAX_CAPACITY);
  if (kind != TSR_FRONTIER_KNOWLEDGE && kind != TSR_FRONTIER_REQUIREMENT)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "frontier: unknown kind %d", (int)kind);
  void *mem = malloc(tsr_frontier_size(capacity));
  if (!mem) return tsr_status_make(TSR_OUT_OF_MEMORY, "frontier: %u entries", capacity);
  *out_frontier = tsr_frontier_init(mem, capacity, kind);
  return NULL;
}

void tsr_frontier_free(tsr_frontier_t *frontier) { free(frontier); }

void tsr_frontier_clear(tsr_frontier_t *frontier) {
  frontier->count = 0;
  frontier->flags = 0;
}

bool tsr_frontier_is_valid(const tsr_frontier_t *f) {
  if (!f) return false;
  if (f->capacity > TSR_FRONTIER_MAX_CAPACITY || f->count > f->capacity) return false;
  if (f->kind != TSR_FRONTIER_KNOWLEDGE && f->kind != TSR_FRONTIER_REQUIREMENT) return false;
  if (f->flags & ~TSR_FRONTIER_INCOMPLETE) return false;
  for (uint32_t i = 0; i < f->count; i++) {
    if (f->entries[i].epoch == 0) return false;
    if (i > 0 && f->entries[i - 1].axis >= f->entries[i].axis) return false;
  }
  return true;
}

/* ---- lookup ------------------------------------------------------------- */

/* First index whose axis is >= `axis` (n if none). */
static inline uint32_t tsr__lower_bound(const tsr_frontier_entry_t *e, uint32_t n, tsr_axis_t axis) {
  uint32_t lo = 0, hi = n;
  while (hi - lo > 8) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (e[mid].axis < axis)
      lo = mid + 1;
    else
      hi = mid;
  }
  while (lo < hi && e[lo].axis < axis) lo++;
  return lo;
}

uint64_t tsr_frontier_get(const tsr_frontier_t *f, tsr_axis_t axis) {
  uint32_t i = tsr__lower_bound(f->entries, f->count, axis);
  return (i < f->count && f->entries[i].axis == axis) ? f->entries[i].epoch : 0;
}

/* ---- insertion and eviction --------------------------------------------- */

/* (epoch, axis) order used to pick what a knowledge frontier evicts. */
static inline bool tsr__key_less(uint64_t ea, tsr_axis_t aa, uint64_t eb, tsr_axis_t ab) {
  return ea < eb || (ea == eb && aa < ab);
}

/* Full knowledge frontier: makes room for (axis, epoch), which belongs at
 * sorted position `pos`, by evicting the smallest (epoch, axis) among the
 * entries (except `pinned`) and the new one. If the new one is the smallest
 * and not pinned, it is the one dropped. Marks TAINTED either way. Out of
 * line (a full frontier is the rare case), so that an insert that fits
 * saves no registers. */
__attribute__((noinline)) static tsr_frontier_fit_t tsr__insert_evicting(tsr_frontier_t *f, tsr_axis_t axis,
                                                                         uint64_t epoch, uint32_t pos,
                                                                         tsr_axis_t pinned) {
  tsr_frontier_entry_t *e = f->entries;
  uint32_t n = f->count;
  f->flags |= TSR_FRONTIER_TAINTED;
  uint32_t victim = n;
  for (uint32_t i = 0; i < n; i++) {
    if (e[i].axis == pinned) continue;
    if (victim == n || tsr__key_less(e[i].epoch, e[i].axis, e[victim].epoch, e[victim].axis)) victim = i;
  }
  if (victim == n) return TSR_FRONTIER_EVICTED; /* nothing evictable: drop the new entry */
  if (axis != pinned && tsr__key_less(epoch, axis, e[victim].epoch, e[victim].axis))
    return TSR_FRONTIER_EVICTED; /* the new entry is the smallest: it is the one dropped */
  if (victim < pos) {
    memmove(&e[victim], &e[victim + 1], (size_t)(pos - 1 - victim) * sizeof(*e));
    pos--;
  } else {
    memmove(&e[pos + 1], &e[pos], (size_t)(victim - pos) * sizeof(*e));
  }
  e[pos].axis = axis;
  e[pos].epoch = epoch;
  return TSR_FRONTIER_EVICTED;
}

/* Inserts (axis, epoch) at sorted position i of f, which has room, moving
 * the entries after it with memmove. Out of line, so that an insert that
 * moves few entries saves no registers for the call. */
__attribute__((noinline)) static tsr_frontier_fit_t tsr__insert_moving(tsr_frontier_t *f, tsr_axis_t axis,
                                                                       uint64_t epoch, uint32_t i) {
  tsr_frontier_entry_t *e = f->entries;
  memmove(&e[i + 1], &e[i], (size_t)(f->count - i) * sizeof(*e));
  e[i].axis = axis;
  e[i].epoch = epoch;
  f->count++;
  return TSR_FRONTIER_FIT;
}

/* Inserts (axis, epoch), absent from f, at sorted position i, with the
 * kind's overflow rule; `pinned` is never evicted. Requires epoch >= 1. */
__attribute__((noinline)) static tsr_frontier_fit_t tsr__insert_new(tsr_frontier_t *f, tsr_axis_t axis, uint64_t epoch,
                                                                    uint32_t i, tsr_axis_t pinned) {
  tsr_frontier_entry_t *e = f->entries;
  const uint32_t n = f->count;
  if (n < f->capacity) {
    /* a few entries move up one by one (none for an append); more, with
     * memmove, a call that costs more than it saves below a few */
    if (n - i > 4) return tsr__insert_moving(f, axis, epoch, i);
    tsr_frontier_entry_t *const at = &e[i];
    for (tsr_frontier_entry_t *p = &e[n]; p > at; p--) p[0] = p[-1];
    at->axis = axis;
    at->epoch = epoch;
    f->count = (uint16_t)(n + 1);
    return TSR_FRONTIER_FIT;
  }
  if (f->kind == TSR_FRONTIER_REQUIREMENT) {
    f->flags |= TSR_FRONTIER_OVERFLOWED;
    return TSR_FRONTIER_OVERFLOW;
  }
  return tsr__insert_evicting(f, axis, epoch, i, pinned);
}

/* Inserts or raises with the kind's overflow rule; `pinned` is never evicted
 * (0 = nothing pinned; 0 is never a valid axis). */
static inline tsr_frontier_fit_t tsr__insert_or_raise(tsr_frontier_t *f, tsr_axis_t axis, uint64_t epoch,
                                                      tsr_axis_t pinned) {
  /* Raising an axis that is there is the common case and stays a leaf. */
  uint32_t i = tsr__lower_bound(f->entries, f->count, axis);
  if (i < f->count && f->entries[i].axis == axis) {
    if (f->entries[i].epoch < epoch) f->entries[i].epoch = epoch;
    return TSR_FRONTIER_FIT;
  }
  if (epoch == 0) return TSR_FRONTIER_FIT;
  return tsr__insert_new(f, axis, epoch, i, pinned);
}

tsr_frontier_fit_t tsr_frontier_insert_or_raise(tsr_frontier_t *f, tsr_axis_t axis, uint64_t epoch) {
  return tsr__insert_or_raise(f, axis, epoch, 0);
}

tsr_frontier_fit_t tsr_frontier_raise_pinned(tsr_frontier_t *f, tsr_axis_t axis, uint64_t epoch) {
  return tsr__insert_or_raise(f, axis, epoch, axis);
}

/* ---- merge -------------------------------------------------------------- */

/* Union does not fit: raise the axes dst holds (both kinds), then the
 * kind's rule for the rest. */
static tsr_frontier_fit_t tsr__merge_overflow(tsr_frontier_t *dst, const tsr_frontier_t *src, uint32_t i) {
  tsr_frontier_entry_t *d = dst->entries;
  const tsr_frontier_entry_t *s = src->entries;
  const uint32_t n = dst->count, m = src->count;
  for (uint32_t p = i, q = i; p < n && q < m;) {
    if (d[p].axis == s[q].axis) {
      if (s[q].epoch > d[p].epoch) d[p].epoch = s[q].epoch;
      p++, q++;
    } else if (d[p].axis < s[q].axis) {
      p++;
    } else {
      q++;
    }
  }
  if (dst->kind == TSR_FRONTIER_REQUIREMENT) {
    dst->flags |= TSR_FRONTIER_OVERFLOWED;
    return TSR_FRONTIER_OVERFLOW;
  }
  /* Knowledge: stream the src-only entries through insert-with-eviction. The
   * result is the top-`capacity` entries of the union by (epoch, axis),
   * whatever the order of insertion. Rare path: O(n * m). */
  for (uint32_t q = i; q < m; q++) tsr__insert_or_raise(dst, s[q].axis, s[q].epoch, 0);
  dst->flags |= TSR_FRONTIER_TAINTED;
  return TSR_FRONTIER_EVICTED;
}

/* The general merge of dst[i..n) and src[i..m), whose first axes differ (or
 * one side is exhausted). Entries before i are already merged. In place,
 * no temporary: when src's suffix lies wholly after or wholly before dst's
 * (one comparison of the ranges tells), it is copied in; otherwise the
 * union is sized, then merged from the back so that nothing is overwritten
 * before it is read. */
__attribute__((noinline)) static tsr_frontier_fit_t tsr__merge_general(tsr_frontier_t *dst, const tsr_frontier_t *src,
                                                                       uint32_t i) {
  tsr_frontier_entry_t *d = dst->entries;
  const tsr_frontier_entry_t *s = src->entries;
  const uint32_t n = dst->count, m = src->count;
  if (i == n || s[i].axis > d[n - 1].axis) { /* src's suffix after dst: append */
    if ((uint64_t)n + (m - i) > dst->capacity) return tsr__merge_overflow(dst, src, i);
    memcpy(&d[n], &s[i], (size_t)(m - i) * sizeof(*d));
    dst->count = (uint16_t)(n + (m - i));
    return TSR_FRONTIER_FIT;
  }
  if (s[m - 1].axis < d[i].axis) { /* src's suffix before dst's: insert it */
    if ((uint64_t)n + (m - i) > dst->capacity) return tsr__merge_overflow(dst, src, i);
    memmove(&d[m], &d[i], (size_t)(n - i) * sizeof(*d));
    memcpy(&d[i], &s[i], (size_t)(m - i) * sizeof(*d));
    dst->count = (uint16_t)(n + (m - i));
    return TSR_FRONTIER_FIT;
  }
  /* Merge from the back into d[i .. top), top counting every src entry as
   * new, then close the gap the shared axes left (none when the axes
   * interleave) with one move. Near capacity, the union is sized first, so
   * that a merge that does not fit changes nothing; top is then exact and
   * no gap is left. Either way the write position never passes the next
   * dst entry to read (their distance is the src-only entries still to
   * place). */
  uint32_t top = n + (m - i);
  if (top > dst->capacity) {
    uint32_t p = i, q = i, extra = 0;
    while (p < n && q < m) {
      const tsr_axis_t da = d[p].axis, sa = s[q].axis;
      p += da <= sa;
      extra += sa < da;
      q += sa <= da;
    }
    extra += m - q;
    if ((uint64_t)n + extra > dst->capacity) return tsr__merge_overflow(dst, src, i);
    top = n + extra;
  }
  const tsr_frontier_entry_t *const dlo = &d[i], *const slo = &s[i];
  const tsr_frontier_entry_t *dp = &d[n - 1], *sp = &s[m - 1];
  tsr_frontier_entry_t *w = &d[top - 1];
  while (sp >= slo && dp >= dlo) {
    const tsr_axis_t da = dp->axis, sa = sp->axis;
    if (da > sa) {
      *w-- = *dp--;
    } else if (sa > da) {
      *w-- = *sp--;
    } else {
      const uint64_t ed = dp->epoch, es = sp->epoch;
      w->axis = da;
      w->epoch = ed > es ? ed : es;
      w--, dp--, sp--;
    }
  }
  while (sp >= slo) *w-- = *sp--;
  /* d[i .. dp] stayed where it was; the merged run starts at w + 1 */
  const size_t gap = (size_t)(w - dp);
  if (gap) memmove((void *)(dp + 1), w + 1, (size_t)(&d[top] - (w + 1)) * sizeof(*d));
  dst->count = (uint16_t)(top - gap);
  return TSR_FRONTIER_FIT;
}

tsr_frontier_fit_t tsr_frontier_merge(tsr_frontier_t *dst, const tsr_frontier_t *src) {
  if (src->flags & TSR_FRONTIER_INCOMPLETE)
    dst->flags |= dst->kind == TSR_FRONTIER_KNOWLEDGE ? TSR_FRONTIER_TAINTED : src->flags;
  tsr_frontier_entry_t *d = dst->entries;
  const tsr_frontier_entry_t *s = src->entries;
  const uint32_t n = dst->count, m = src->count;
  /* One entry (a single queue's progress, common): an insert-or-raise,
   * with the same overflow rules, that writes nothing when dst already
   * knows it -- so that the next operation on dst does not wait on a
   * store of the value it had. */
  if (m == 1) return tsr__insert_or_raise(dst, s[0].axis, s[0].epoch, 0);
  const uint32_t lim = n < m ? n : m;
  uint32_t i = 0;
  /* Fast path: walk both while the axes agree, taking the max epoch. */
  for (; i < lim; i++) {
    if (d[i].axis != s[i].axis) break;
    uint64_t a = d[i].epoch, b = s[i].epoch;
    d[i].epoch = a > b ? a : b;
  }
  if (i == m) return TSR_FRONTIER_FIT;
  return tsr__merge_general(dst, src, i);
}

tsr_frontier_fit_t tsr_frontier_copy(tsr_frontier_t *dst, const tsr_frontier_t *src) {
  if (dst == src) return TSR_FRONTIER_FIT;
  if (src->count <= dst->capacity) {
    memcpy(dst->entries, src->entries, (size_t)src->count * sizeof(src->entries[0]));
    dst->count = src->count;
    dst->flags = src->flags;
    return TSR_FRONTIER_FIT;
  }
  dst->count = 0;
  dst->flags = src->flags;
  return tsr_frontier_merge(dst, src);
}

/* ---- dominance and order ------------------------------------------------ */

/* Entry-wise walk of a against b from index i: sets *a_ahead if a holds an
 * axis b lacks or a larger epoch, *b_ahead likewise. Stops early once both. */
static void tsr__walk(const tsr_frontier_entry_t *a, uint32_t n, const tsr_frontier_entry_t *b, uint32_t m, uint32_t i,
                      bool *a_ahead, bool *b_ahead) {
  bool aa = *a_ahead, bb = *b_ahead;
  uint32_t p = i, q = i;
  while (p < n && q < m && !(aa && bb)) {
    if (a[p].axis == b[q].axis) {
      aa |= a[p].epoch > b[q].epoch;
      bb |= a[p].epoch < b[q].epoch;
      p++, q++;
    } else if (a[p].axis < b[q].axis) {
      aa = true, p++;
    } else {
      bb = true, q++;
    }
  }
  if (p < n) aa = true;
  if (q < m) bb = true;
  *a_ahead = aa;
  *b_ahead = bb;
}

/* Whether have's entries reach (axis, epoch): the one-axis lookup of
 * dominates and find-undominated. Many entries: a binary search, out of
 * line (so the few-entry scans below save no registers). */
__attribute__((noinline)) static bool tsr__reaches_search(const tsr_frontier_entry_t *h, uint32_t n, tsr_axis_t axis,
                                                          uint64_t epoch) {
  const uint32_t p = tsr__lower_bound(h, n, axis);
  return p < n && h[p].axis == axis && h[p].epoch >= epoch;
}

/* A few entries, all tested with no early exit (axes are unique, so at
 * most one matches): a loop with no data-dependent branch. dominates. */
static inline bool tsr__reaches_all(const tsr_frontier_entry_t *h, uint32_t n, tsr_axis_t axis, uint64_t epoch) {
  if (n > 8) return tsr__reaches_search(h, n, axis, epoch);
  bool hit = false;
  for (uint32_t i = 0; i < n; i++) hit |= (h[i].axis == axis) & (h[i].epoch >= epoch);
  return hit;
}

/* A few entries, scanned up to need's axis. find-undominated (which the
 * scan above made slower: its result feeds a store). */
static inline bool tsr__reaches_scan(const tsr_frontier_entry_t *h, uint32_t n, tsr_axis_t axis, uint64_t epoch) {
  if (n > 8) return tsr__reaches_search(h, n, axis, epoch);
  for (const tsr_frontier_entry_t *p = h, *const e = h + n; p < e; p++)
    if (p->axis >= axis) return p->axis == axis && p->epoch >= epoch;
  return false;
}

/* Whether f holds one entry and is complete, from one load of its head
 * (count in bytes 0-1, flags in byte 5), so that dominates and
 * find-undominated take their one-axis lookup after one branch, with no
 * flags test after it: an incomplete requirement takes the general path. */
_Static_assert(offsetof(tsr_frontier_t, count) == 0 && offsetof(tsr_frontier_t, flags) == 5 &&
                   offsetof(tsr_frontier_t, entries) == 8,
               "tsr__one_complete reads the frontier's head as one word");
static inline bool tsr__one_complete(const tsr_frontier_t *f) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t head;
  memcpy(&head, f, sizeof(head));
  return (head & (0xffffu | (uint64_t)TSR_FRONTIER_INCOMPLETE << 40)) == 1;
#else
  return f->count == 1 && !(f->flags & TSR_FRONTIER_INCOMPLETE);
#endif
}

/* dominates for every other requirement (several axes, none, or
 * incomplete). Out of line, so that the one-axis lookup saves no
 * registers. */
__attribute__((noinline)) static bool tsr__dominates_many(const tsr_frontier_t *have, const tsr_frontier_t *need) {
  const uint32_t n = have->count, m = need->count;
  const tsr_frontier_entry_t *h = have->entries, *r = need->entries;
  if (need->flags & TSR_FRONTIER_INCOMPLETE) return false;
  if (m == 0) return true;
  if (m > n) return false; /* need holds an axis have lacks */
  /* need reaching past have's last axis holds an axis have lacks */
  const tsr_axis_t last = h[n - 1].axis;
  if (r[m - 1].axis > last) return false;
  if (n == m && r[m - 1].axis == last) {
    /* the same axes (the pass checks them on the way; the last one first,
     * so that frontiers that merely grew apart rarely pay a wasted pass) */
    uint64_t diff = 0;
    uint32_t lower = 0;
    for (uint32_t i = 0; i < n; i++) {
      diff |= h[i].axis ^ r[i].axis;
      lower += h[i].epoch < r[i].epoch;
    }
    if (diff == 0) return lower == 0;
  }
  /* a merge walk with no bound check on have: need's last axis is at most
   * have's, so have holds an axis at or past each of need's before its end
   * (need starting before have's first axis fails at its first entry) */
  const tsr_frontier_entry_t *p = h;
  for (const tsr_frontier_entry_t *q = r, *const qe = r + m; q < qe; q++, p++) {
    while (p->axis < q->axis) p++;
    if (p->axis != q->axis || p->epoch < q->epoch) return false;
  }
  return true;
}

bool tsr_frontier_dominates(const tsr_frontier_t *have, const tsr_frontier_t *need) {
  if (__builtin_expect(!tsr__one_complete(need), 0)) return tsr__dominates_many(have, need);
  const tsr_frontier_entry_t r = need->entries[0];
  return tsr__reaches_all(have->entries, have->count, r.axis, r.epoch);
}

tsr_frontier_order_t tsr_frontier_compare(const tsr_frontier_t *a, const tsr_frontier_t *b) {
  const uint32_t n = a->count, m = b->count;
  const tsr_frontier_entry_t *x = a->entries, *y = b->entries;
  bool a_ahead = false, b_ahead = false;
  bool done = false;
  /* Equal axis sets: one branch-free pass (counting with compare-and-add
   * is cheaper than or-ing flags). The end axes are checked first so that
   * different axis sets rarely pay for a wasted pass. */
  if (n == m && (n == 0 || (x[0].axis == y[0].axis && x[n - 1].axis == y[n - 1].axis))) {
    uint64_t diff = 0;
    uint32_t gt = 0, lt = 0;
    for (uint32_t i = 0; i < n; i++) {
      diff |= x[i].axis ^ y[i].axis;
      gt += x[i].epoch > y[i].epoch;
      lt += x[i].epoch < y[i].epoch;
    }
    if (diff == 0) a_ahead = gt != 0, b_ahead = lt != 0, done = true;
  }
  /* Axis ranges that do not overlap: each holds axes the other lacks. */
  if (!done && n && m && (x[n - 1].axis < y[0].axis || y[m - 1].axis < x[0].axis))
    a_ahead = b_ahead = true, done = true;
  if (!done) tsr__walk(x, n, y, m, 0, &a_ahead, &b_ahead);
  /* a dominates b iff b has nothing a lacks and b is complete; and back. */
  const bool ab = !b_ahead && (b->flags & TSR_FRONTIER_INCOMPLETE) == 0;
  const bool ba = !a_ahead && (a->flags & TSR_FRONTIER_INCOMPLETE) == 0;
  if (ab && ba) return TSR_FRONTIER_EQUAL;
  if (ab) return TSR_FRONTIER_AFTER;
  if (ba) return TSR_FRONTIER_BEFORE;
  return TSR_FRONTIER_CONCURRENT;
}

const char *tsr_frontier_order_name(tsr_frontier_order_t order) {
  switch (order) {
    case TSR_FRONTIER_EQUAL: return "equal";
    case TSR_FRONTIER_BEFORE: return "before";
    case TSR_FRONTIER_AFTER: return "after";
    case TSR_FRONTIER_CONCURRENT: return "concurrent";
  }
  return "unknown";
}

bool tsr_frontier_equal(const tsr_frontier_t *a, const tsr_frontier_t *b) {
  if (a->count != b->count || a->flags != b->flags) return false;
  return memcmp(a->entries, b->entries, (size_t)a->count * sizeof(a->entries[0])) == 0;
}

/* find-undominated when out may be too small for need's missing entries
 * (the kind's rule for what does not fit). Out of line, so that the
 * passes that fit need few registers. */
__attribute__((noinline)) static bool tsr__find_overflow(const tsr_frontier_t *have, const tsr_frontier_t *need,
                                                         tsr_frontier_t *out_missing) {
  const uint32_t n = have->count, m = need->count;
  const tsr_frontier_entry_t *h = have->entries, *r = need->entries;
  const bool complete = (need->flags & TSR_FRONTIER_INCOMPLETE) == 0;
  out_missing->count = 0;
  uint32_t missing = 0, p = 0;
  for (uint32_t q = 0; q < m; q++) {
    while (p < n && h[p].axis < r[q].axis) p++;
    if (p < n && h[p].axis == r[q].axis && h[p].epoch >= r[q].epoch) continue;
    missing++;
    if (out_missing->count < out_missing->capacity) {
      out_missing->entries[out_missing->count++] = r[q];
    } else {
      tsr__insert_or_raise(out_missing, r[q].axis, r[q].epoch, 0);
    }
  }
  return missing == 0 && complete;
}

/* find-undominated by a merge walk, for a requirement (not of one
 * complete axis) over other axes than have's. Out of line, so that the
 * one-axis lookup and the equal-axis pass save no registers. A walk over
 * pointers; need is sorted, so each missing entry goes at the end. Up to
 * have's last axis the walk needs no bound check on have; need's entries
 * past it are all missing. Ranges apart need no case of their own: need
 * after have skips the first loop, need before have finds each entry
 * missing at have's first. */
__attribute__((noinline)) static bool tsr__find_walk(const tsr_frontier_t *have, const tsr_frontier_t *need,
                                                     tsr_frontier_t *out_missing) {
  const uint8_t incomplete = need->flags & TSR_FRONTIER_INCOMPLETE;
  out_missing->flags = incomplete;
  const uint32_t n = have->count, m = need->count;
  if (m > out_missing->capacity) return tsr__find_overflow(have, need, out_missing);
  const tsr_frontier_entry_t *hp = have->entries, *rp = need->entries;
  const tsr_frontier_entry_t *const re = rp + m;
  tsr_frontier_entry_t *const o = out_missing->entries, *op = o;
  if (n > 0) {
    const tsr_axis_t last = hp[n - 1].axis;
    for (; rp < re && rp->axis <= last; rp++) {
      const tsr_axis_t axis = rp->axis;
      const uint64_t epoch = rp->epoch;
      while (hp->axis < axis) hp++;
      /* tested before the store, which (out being any memory) would make
       * every load after it a reload */
      const bool reached = (hp->axis == axis) & (hp->epoch >= epoch);
      *op = *rp;
      op += !reached;
    }
  }
  for (; rp < re; rp++) *op++ = *rp;
  out_missing->count = (uint16_t)(op - o);
  return op == o && !incomplete;
}

/* find-undominated for a requirement (not of one complete axis) with as
 * many entries as have: one pass when the axes are the same, the walk
 * otherwise. Out of line, so that the one-axis lookup saves no registers. */
__attribute__((noinline)) static bool tsr__find_same_count(const tsr_frontier_t *have, const tsr_frontier_t *need,
                                                           tsr_frontier_t *out_missing) {
  const uint32_t m = need->count;
  const tsr_frontier_entry_t *h = have->entries, *r = need->entries;
  if (m == 0 || m > out_missing->capacity || h[m - 1].axis != r[m - 1].axis)
    return tsr__find_walk(have, need, out_missing);
  /* the same axes (checked on the way; the last one first, so that
   * frontiers that merely grew apart rarely pay a wasted pass): one pass
   * that writes what have is behind on */
  tsr_frontier_entry_t *o = out_missing->entries;
  uint64_t diff = 0;
  uint32_t k = 0;
  /* two entries a turn: half the loop's own compare-and-branch, which at
   * four entries is a fifth of the pass */
#pragma GCC unroll 2
  for (uint32_t q = 0; q < m; q++) {
    diff |= h[q].axis ^ r[q].axis;
    if (h[q].epoch < r[q].epoch) o[k++] = r[q];
  }
  if (diff != 0) return tsr__find_walk(have, need, out_missing);
  const uint8_t incomplete = need->flags & TSR_FRONTIER_INCOMPLETE;
  out_missing->flags = incomplete;
  out_missing->count = (uint16_t)k;
  return k == 0 && !incomplete;
}

bool tsr_frontier_find_undominated(const tsr_frontier_t *have, const tsr_frontier_t *need,
                                   tsr_frontier_t *out_missing) {
  if (!tsr__one_complete(need) || !out_missing->capacity) {
    if (have->count == need->count) return tsr__find_same_count(have, need, out_missing);
    return tsr__find_walk(have, need, out_missing);
  }
  /* one axis, complete: look it up */
  const tsr_frontier_entry_t r = need->entries[0];
  const bool reached = tsr__reaches_scan(have->entries, have->count, r.axis, r.epoch);
  out_missing->flags = 0;
  out_missing->entries[0] = r;
  out_missing->count = !reached;
  return reached;
}
