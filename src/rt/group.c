/* group.c: tsr_rt_submit_group (tessera/rt.h): many tasks of one shape.
 *
 * A contiguous elementwise group is packed: its items go up to
 * TSR_RT_GROUP_OFFSETS / (inputs + 1) to a descriptor (TSR_RT_DESC_GROUP,
 * rt/desc.h), whose layout slot holds each item's operands as int32
 * element offsets from the first item's. The shape is validated once and
 * each item's pointers by themselves (null, alignment, range, in-place
 * overlap: what tsr_rt_submit would refuse; a refused item goes through
 * tsr_rt_submit's own check, which words the error). The items of one descriptor
 * run in parallel with no order among them, so an item that overlaps what
 * an earlier item of the descriptor writes (or writes what it touches)
 * starts the next descriptor, and the dependency table orders the two as
 * it orders any tasks. A descriptor's accesses are recorded per operand
 * as the span of its items (one record, when the span is at most
 * TSR__DENSE times the bytes they touch) or item by item.
 *
 * Any other group is submitted task by task, exactly as tsr_rt_submit. */
#include <string.h>

#include "rt/internal.h"

#define TSR__DENSE 4           /* a span of at most this many times the bytes touched is recorded whole */
#define TSR__GROUP_ELEMS 65536 /* a descriptor's items have at most this many elements in all (or one item) */

typedef struct {
  const tsr_rt_group_t *g;
  int nin, nops;
  void *const *ptr[TSR_RT_DESC_OPERANDS]; /* per operand (out, in[0], ...): the items' pointers */
  int esize[TSR_RT_DESC_OPERANDS];
  uint64_t len[TSR_RT_DESC_OPERANDS];  /* the bytes of an operand: contiguous, [p, p + len) */
  bool in_place[TSR_RT_DESC_OPERANDS]; /* input r at out's pointer is out itself */
  uint64_t numel;
} tsr__group_t;

static uint64_t tsr__p(const tsr__group_t *G, int r, size_t i) { return (uint64_t)(uintptr_t)G->ptr[r][i]; }

/* The template with item i's pointers. */
static void tsr__item_task(const tsr__group_t *G, size_t i, tsr_rt_task_t *k) {
  *k = G->g->task;
  k->out.data = G->ptr[0][i];
  for (int r = 1; r < G->nops; r++) k->in[r - 1].data = G->ptr[r][i];
}

/* A packed group: whether the task is elementwise with every operand
 * contiguous of out's shape and some elements (the descriptor's items
 * then need no layout). */
static bool tsr__packable(const tsr__group_t *G, const tsr__span_t *sp) {
  tsr_rt_op_t op = G->g->task.op;
  if (op == TSR_RT_OP_SUM || op == TSR_RT_OP_MEAN || !sp[0].numel || !sp[0].contig) return false;
  for (int r = 1; r < G->nops; r++)
    if (!tsr_rt_imm(&G->g->task, r - 1) && (!sp[r].contig || sp[r].numel != sp[0].numel)) return false;
  return true;
}

/* The first item whose pointers tsr_rt_submit would refuse (count when
 * none): null, misaligned, bytes that wrap around the address space, an
 * input that overlaps its out without being it; a few instructions an
 * operand. */
static inline __attribute__((always_inline)) size_t tsr__first_bad_item_n(const tsr__group_t *G, const int nops) {
  uint64_t width[TSR_RT_DESC_OPERANDS], amask[TSR_RT_DESC_OPERANDS];
  for (int r = 0; r < nops; r++) {
    width[r] = UINT64_MAX - G->len[r] - 1; /* p - 1 <= width: not null, p + len does not wrap */
    amask[r] = (uint64_t)G->esize[r] - 1;
  }
  size_t count = G->g->count;
  for (size_t i = 0; i < count; i++) {
    uint64_t p0 = tsr__p(G, 0, i);
    bool ok = p0 - 1 <= width[0] && !(p0 & amask[0]);
    const uint64_t hi0 = p0 + G->len[0];
#pragma GCC unroll 5
    for (int r = 1; r < nops; r++) {
      uint64_t p = tsr__p(G, r, i);
      ok = ok && p - 1 <= width[r] && !(p & amask[r]) &&
           (p >= hi0 || p0 >= p + G->len[r] || (G->in_place[r] && p == p0));
    }
    if (!ok) return i;
  }
  return count;
}

static size_t tsr__first_bad_item(const tsr__group_t *G) {
  switch (G->nops) {
    case 2: return tsr__first_bad_item_n(G, 2);
    case 3: return tsr__first_bad_item_n(G, 3);
    default: return tsr__first_bad_item_n(G, G->nops);
  }
}

/* ---- packing ---------------------------------------------------------------- */

typedef struct {
  uint64_t lo, hi;
  uint32_t item;
  bool write;
} tsr__range_t;

/* The items of one descriptor, gathered in one pass: their offsets, and
 * per operand how many ranges it has (an input that is its item's out
 * left out: the write covers it) and the span of its pointers; whether
 * the outs come in address order and apart. A packed task is contiguous,
 * so an operand's bytes are [p, p + len[k]). */
typedef struct {
  size_t s, e;
  uint32_t cap;  /* items a descriptor takes */
  uint64_t bits; /* every pointer, or-ed (alignment) */
  int32_t off[TSR_RT_GROUP_OFFSETS];
  uint32_t m[TSR_RT_DESC_OPERANDS];
  uint64_t lo[TSR_RT_DESC_OPERANDS], hi[TSR_RT_DESC_OPERANDS]; /* the bytes the ranges span */
  bool outs_apart;
} tsr__chunk_t;

/* Items from s to at most e_max while each operand's offset from item s's
 * fits int32 elements. */
static inline __attribute__((always_inline)) void tsr__gather_n(const tsr__group_t *G, size_t s, size_t e_max,
                                                                tsr__chunk_t *c, const int nops) {
  uint64_t base[TSR_RT_DESC_OPERANDS], plo[TSR_RT_DESC_OPERANDS], phi[TSR_RT_DESC_OPERANDS];
  uint32_t m[TSR_RT_DESC_OPERANDS];
  int shift[TSR_RT_DESC_OPERANDS];
  for (int k = 0; k < nops; k++) {
    base[k] = tsr__p(G, k, s);
    plo[k] = UINT64_MAX;
    phi[k] = 0;
    m[k] = 0;
    shift[k] = G->esize[k] == 4 ? 2 : G->esize[k] == 2 ? 1 : 0;
  }
  uint64_t bits = 0, out_end = 0, len0 = G->len[0];
  bool apart = true;
  size_t i = s;
  for (; i < e_max; i++) {
    uint64_t p[TSR_RT_DESC_OPERANDS] = {0};
    int64_t d[TSR_RT_DESC_OPERANDS] = {0};
    bool fits = true;
#pragma GCC unroll 5
    for (int k = 0; k < nops; k++) {
      p[k] = tsr__p(G, k, i);
      /* exact: both aligned to the element (>> of a negative multiple too) */
      d[k] = (int64_t)(p[k] - base[k]) >> shift[k];
      fits = fits && d[k] == (int32_t)d[k];
    }
    if (!fits) break;
    int32_t *o = &c->off[(i - s) * (size_t)nops];
#pragma GCC unroll 5
    for (int k = 0; k < nops; k++) {
      o[k] = (int32_t)d[k];
      bits |= p[k];
      if (k && G->in_place[k] && p[k] == p[0]) continue;
      m[k]++;
      if (p[k] < plo[k]) plo[k] = p[k];
      if (p[k] > phi[k]) phi[k] = p[k];
    }
    apart = apart && p[0] >= out_end;
    out_end = p[0] + len0;
  }
  c->s = s;
  c->e = i;
  c->bits = bits;
  c->outs_apart = apart;
  for (int k = 0; k < nops; k++) {
    c->m[k] = m[k];
    c->lo[k] = m[k] ? plo[k] : 0;
    c->hi[k] = m[k] ? phi[k] + G->len[k] : 0;
  }
}

static void tsr__gather(const tsr__group_t *G, size_t s, size_t e_max, tsr__chunk_t *c) {
  /* the operand count a constant: the loops over operands unrolled */
  switch (G->nops) {
    case 2: tsr__gather_n(G, s, e_max, c, 2); break;
    case 3: tsr__gather_n(G, s, e_max, c, 3); break;
    default: tsr__gather_n(G, s, e_max, c, G->nops); break;
  }
}

/* Operand k's ranges of the chunk's items, in item order (in place left
 * out); returns how many. */
static uint32_t tsr__ranges(const tsr__group_t *G, const tsr__chunk_t *c, int k, tsr__range_t *r) {
  uint32_t n = 0;
  for (size_t i = c->s; i < c->e; i++) {
    uint64_t p = tsr__p(G, k, i);
    if (k && G->in_place[k] && p == tsr__p(G, 0, i)) continue;
    r[n++] = (tsr__range_t){p, p + G->len[k], (uint32_t)(i - c->s), k == 0};
  }
  return n;
}

/* Whether two items of the chunk conflict: one writes what the other
 * touches (an item's own out and inputs are disjoint or the same, and the
 * same is left out, so any overlap involving a write is between two). */
static bool tsr__any_conflict(const tsr__group_t *G, const tsr__chunk_t *c) {
  int nops = G->nops;
  tsr__range_t buf[TSR_RT_GROUP_OFFSETS], *r[TSR_RT_DESC_OPERANDS];
  uint32_t m[TSR_RT_DESC_OPERANDS], used = 0;
  /* the common case: the outs in order and apart, every input outside
   * their span (by its own span, or range by range) */
  if (c->outs_apart) {
    bool apart = true;
    for (int k = 1; apart && k < nops; k++) {
      if (!c->m[k] || c->hi[k] <= c->lo[0] || c->lo[k] >= c->hi[0]) continue;
      uint32_t n = tsr__ranges(G, c, k, buf);
      for (uint32_t j = 0; apart && j < n; j++) apart = buf[j].hi <= c->lo[0] || buf[j].lo >= c->hi[0];
    }
    if (apart) return false;
  }
  /* else each operand's ranges in address order, merged in one sweep */
  uint32_t head[TSR_RT_DESC_OPERANDS], left = 0;
  for (int k = 0; k < nops; k++) {
    r[k] = &buf[used];
    m[k] = tsr__ranges(G, c, k, r[k]);
    used += m[k];
    left += m[k];
    head[k] = 0;
    for (uint32_t i = 1; i < m[k]; i++) {
      tsr__range_t x = r[k][i];
      uint32_t j = i;
      for (; j && r[k][j - 1].lo > x.lo; j--) r[k][j] = r[k][j - 1];
      r[k][j] = x;
    }
  }
  uint64_t reach = 0, reach_w = 0; /* the furthest end of any range so far, of any write */
  for (; left; left--) {
    int best = -1;
    for (int k = 0; k < nops; k++)
      if (head[k] < m[k] && (best < 0 || r[k][head[k]].lo < r[best][head[best]].lo)) best = k;
    const tsr__range_t *x = &r[best][head[best]++];
    if (x->lo < reach_w || (x->write && x->lo < reach)) return true;
    if (x->hi > reach) reach = x->hi;
    if (x->write && x->hi > reach_w) reach_w = x->hi;
  }
  return false;
}

/* The first item j of [s, e) (j > s) that conflicts with an item of
 * [s, j), pair by pair (after tsr__any_conflict found that one does). */
static size_t tsr__first_conflict(const tsr__group_t *G, size_t s, size_t e) {
  for (size_t j = s + 1; j < e; j++)
    for (size_t i = s; i < j; i++)
      for (int a = 0; a < G->nops; a++) {
        uint64_t pa = tsr__p(G, a, i);
        if (a && G->in_place[a] && pa == tsr__p(G, 0, i)) continue;
        for (int b = 0; b < G->nops; b++) {
          if (a && b) continue; /* two reads */
          uint64_t pb = tsr__p(G, b, j);
          if (b && G->in_place[b] && pb == tsr__p(G, 0, j)) continue;
          if (pa < pb + G->len[b] && pb < pa + G->len[a]) return j;
        }
      }
  return e;
}

/* The items from s that one descriptor takes: at most its capacity, each
 * operand's offset from item s's in int32 elements, no two conflicting. */
static void tsr__chunk(const tsr__group_t *G, size_t s, tsr__chunk_t *c) {
  size_t count = G->g->count, e_max = count - s < c->cap ? count : s + c->cap;
  tsr__gather(G, s, e_max, c);
  if (c->e - s > 1 && tsr__any_conflict(G, c)) tsr__gather(G, s, tsr__first_conflict(G, s, c->e), c);
}

/* The chunk's accesses: out's first (writes), then each input's; an
 * operand's as one span when its ranges lie close, else one a range. */
static uint32_t tsr__accesses(const tsr__group_t *G, const tsr__chunk_t *c, tsr__rt_access_t *acc) {
  uint32_t n = 0;
  for (int k = 0; k < G->nops; k++) {
    if (!c->m[k]) continue;
    if (c->hi[k] - c->lo[k] <= TSR__DENSE * G->len[k] * c->m[k]) {
      acc[n++] = (tsr__rt_access_t){c->lo[k], c->hi[k], k == 0};
      continue;
    }
    tsr__range_t r[TSR_RT_GROUP_OFFSETS];
    uint32_t m = tsr__ranges(G, c, k, r);
    for (uint32_t j = 0; j < m; j++) acc[n++] = (tsr__rt_access_t){r[j].lo, r[j].hi, k == 0};
  }
  return n;
}

/* One descriptor of the chunk's items. */
TSR_MUST_USE static tsr_status_t tsr__enqueue_chunk(tsr_rt_t *rt, const tsr__group_t *G, const tsr__chunk_t *c,
                                                    uint16_t op) {
  tsr__rt_access_t acc[TSR_RT_GROUP_OFFSETS];
  uint32_t nacc = tsr__accesses(G, c, acc);
  tsr__rt_place_t p;
  TSR_RETURN_IF_ERROR(tsr_rt_place(rt, acc, nacc, &p));
  uint64_t n, ticket;
  size_t idx;
  TSR_RETURN_IF_ERROR(tsr_rt_claim(rt, p.lane, &n, &idx, &ticket));
  const tsr_rt_task_t *k = &G->g->task;
  tsr_rt_desc_t v;
  memset(&v, 0, sizeof(v));
  v.op = op;
  v.flags = TSR_RT_DESC_GROUP;
  v.ndim = 1;
  v.nin = (uint8_t)G->nin;
  v.numel = G->numel;
  v.rnumel = c->e - c->s;
  v.scalar[0] = k->scalar[0];
  v.scalar[1] = k->scalar[1];
  v.ticket = ticket;
  v.nwait = (uint8_t)p.nwait;
  for (uint32_t i = 0; i < p.nwait; i++) {
    v.wait_lane[i] = p.wait_lane[i];
    v.wait_seq[i] = (uint32_t)p.wait_n[i];
  }
  /* the float4 loops: f32 throughout (a number's stand-in pointer is out's) */
  bool vec = op < TSR_RT_DESC_JIT && G->numel % 4 == 0 && c->bits % 16 == 0;
  for (int r = 0; r < G->nops; r++) {
    if (r && tsr_rt_imm(k, r - 1)) {
      /* a number: its bits stand for the pointer (the items' offsets, out's, are not applied to it) */
      v.imm |= (uint8_t)(1u << (r - 1));
      v.dtype[r] = TSR_RT_F32;
      v.ptr[r] = tsr_rt_imm_bits(k->imm[r - 1]);
      continue;
    }
    v.dtype[r] = (uint8_t)tsr__rt_operand(k, r)->dtype;
    v.ptr[r] = tsr__p(G, r, c->s);
    vec = vec && v.dtype[r] == TSR_RT_F32;
  }
  if (vec) v.flags |= TSR_RT_DESC_GROUP_VEC;
  memcpy(&rt->layout[idx], c->off, (c->e - c->s) * (size_t)G->nops * sizeof(int32_t));
  rt->run[p.lane].numel = 0; /* the task after it needs a barrier */
  v.seq = n;
  memcpy(&rt->desc[idx], &v, sizeof(v));
  return tsr_rt_commit(rt, p.lane, n, ticket, acc, nacc, p.fresh);
}

/* ---- the call ------------------------------------------------------------ */

tsr_status_t tsr_rt_submit_group(tsr_rt_t *rt, const tsr_rt_group_t *g, tsr_rt_ticket_t *out_first,
                                 tsr_rt_ticket_t *out_last) {
  if (out_first) *out_first = rt->next_ticket + 1;
  if (out_last) *out_last = rt->next_ticket;
  if (atomic_load(&rt->failed)) return tsr_status_make(TSR_FAILED_PRECONDITION, "the runtime failed: %s", rt->fault);
  if (!g) return tsr_status_make(TSR_INVALID_ARGUMENT, "group is NULL");
  if (!g->count) return NULL;
  tsr__group_t G = {.g = g};
  G.nin = tsr_rt_inputs(rt, g->task.op);
  /* 0: an unknown operator; never more inputs than a descriptor has operands */
  if (G.nin < 1 || G.nin >= TSR_RT_DESC_OPERANDS)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "the group's task: unknown operator %d", (int)g->task.op);
  G.nops = G.nin + 1;
  if (!g->out) return tsr_status_make(TSR_INVALID_ARGUMENT, "the group's out is NULL");
  G.ptr[0] = g->out;
  for (int r = 1; r < G.nops; r++) {
    if (tsr_rt_imm(&g->task, r - 1)) {
      /* a number: it stands in for out itself (in place, so no bytes of
       * its own and no conflict; the descriptor carries its value) */
      G.ptr[r] = g->out;
      continue;
    }
    if (!g->in[r - 1])
      return tsr_status_make(TSR_INVALID_ARGUMENT, "the group's in[%d] is NULL (%s takes %d inputs)", r - 1,
                             tsr_rt_op_name(g->task.op), G.nin);
    G.ptr[r] = g->in[r - 1];
  }
  /* the shape, once, with item 0's pointers */
  tsr_rt_task_t k;
  tsr__span_t sp[TSR_RT_DESC_OPERANDS] = {{0}}; /* tsr_rt_check fills sp[0..nin] */
  tsr__item_task(&G, 0, &k);
  tsr_status_t st = tsr_rt_check(rt, &k, sp);
  if (st) return tsr_status_annotate(st, "item 0 of the group (%s)", tsr_rt_op_name(g->task.op));
  rt->epoch++;
  if (!tsr__packable(&G, sp)) {
    /* task by task: validate every item, then enqueue */
    for (size_t i = 1; i < g->count; i++) {
      tsr__item_task(&G, i, &k);
      st = tsr_rt_check(rt, &k, sp);
      if (st) return tsr_status_annotate(st, "item %zu of the group (%s)", i, tsr_rt_op_name(g->task.op));
    }
    tsr_rt_spread(rt, g->count);
    for (size_t i = 0; i < g->count; i++) {
      tsr__item_task(&G, i, &k);
      st = tsr_rt_enqueue(rt, &k);
      if (st) {
        tsr_rt_ring(rt);
        return tsr_status_annotate(st, "item %zu of the group", i);
      }
    }
  } else {
    G.numel = sp[0].numel;
    for (int r = 0; r < G.nops; r++) {
      const tsr_rt_tensor_t *t = tsr__rt_operand(&g->task, r);
      bool imm = r && tsr_rt_imm(&g->task, r - 1);
      if (imm) t = &g->task.out;
      G.esize[r] = tsr__rt_esize(t->dtype);
      G.len[r] = G.numel * (uint64_t)G.esize[r];
      G.in_place[r] = r && (imm || tsr_rt_same(t, &g->task.out));
    }
    size_t bad = tsr__first_bad_item(&G);
    if (bad < g->count) {
      /* tsr_rt_submit's check words it */
      tsr__item_task(&G, bad, &k);
      st = tsr_rt_check(rt, &k, sp);
      if (!st) st = tsr_status_make(TSR_INTERNAL, "refused, and its check finds nothing wrong");
      return tsr_status_annotate(st, "item %zu of the group (%s)", bad, tsr_rt_op_name(g->task.op));
    }
    uint16_t op = (uint16_t)g->task.op;
    if ((int)g->task.op >= TSR_RT_OP_JIT_FIRST)
      op = (uint16_t)(TSR_RT_DESC_JIT + rt->jit_slot[(uint32_t)g->task.op - TSR_RT_OP_JIT_FIRST]);
    tsr__chunk_t c;
    c.cap = TSR_RT_GROUP_OFFSETS / (unsigned)G.nops;
    /* large items: fewer to a descriptor, so that a group spreads over
     * lanes (one block runs a descriptor's items) */
    uint64_t by_size = TSR__GROUP_ELEMS / (G.numel ? G.numel : 1);
    if (by_size < c.cap) c.cap = by_size ? (uint32_t)by_size : 1;
    tsr_rt_spread(rt, (g->count + c.cap - 1) / c.cap);
    for (size_t s = 0; s < g->count; s = c.e) {
      tsr__chunk(&G, s, &c);
      st = tsr__enqueue_chunk(rt, &G, &c, op);
      if (st) {
        tsr_rt_ring(rt);
        return tsr_status_annotate(st, "item %zu of the group", s);
      }
    }
  }
  tsr_rt_ring(rt);
  if (out_last) *out_last = rt->next_ticket;
  return NULL;
}
