/* rt/internal.h: what the runtime's files share. The host side: rt.c
 * (create, destroy, stats, memory), names.c (the operators' names),
 * validate.c (tasks validated, the shape validated last), submit.c (a
 * batch: tsr_rt_submit, tsr_rt_submit_deferred), place.c (a task's
 * descriptor; a descriptor's lane, slot, ticket and record), deps.c (the
 * outstanding accesses), ring.c (posting, the doorbell, waiting for a
 * lane, a lane's slots), tickets.c (done, wait, flush), jit_slots.c (the
 * JIT operators' slots), group.c (groups). What runs for every task and
 * is called across files is inline here: the operators' kinds and
 * validation's fast path. A backend (cpu.c, cuda.c) provides the ring's
 * memory, the consumers and the memory helpers. */
#ifndef TESSERA_RT_INTERNAL_H
#define TESSERA_RT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rt/desc.h"
#include "rt/expr.h"
#include "tessera/rt.h"

typedef struct tsr__rt_backend_ops_s {
  const char *name;
  /* Allocates what the consumers need and the shared memory of the rings:
   * rt->desc, rt->layout, rt->done, rt->posted (host views), zeroed; then
   * starts the consumers. */
  tsr_status_t (*start)(tsr_rt_t *rt);
  void (*doorbell)(tsr_rt_t *rt);
  /* tsr_rt_park (NULL: nothing to do) */
  void (*park)(tsr_rt_t *rt);
  /* After every lane got a STOP descriptor: waits for the consumers to end
   * and frees what start made. */
  tsr_status_t (*stop)(tsr_rt_t *rt);
  /* Non-NULL when the consumers failed (a device fault): the reason. */
  const char *(*fault)(tsr_rt_t *rt);
  tsr_status_t (*alloc)(tsr_rt_t *rt, size_t bytes, void **out_ptr);
  void (*free)(tsr_rt_t *rt, void *ptr);
  tsr_status_t (*copy)(tsr_rt_t *rt, void *dst, const void *src, size_t bytes, bool to_device);
  /* A JIT operator's physical slot `slot` now holds rt->slots[slot].expr:
   * make the consumers able to run it before a task names it (NULL: they
   * read the slot table themselves). */
  tsr_status_t (*jit_add)(tsr_rt_t *rt, uint32_t slot);
  /* Adds the consumers' counters to out's device_* fields (NULL: none). */
  void (*device_stats)(tsr_rt_t *rt, tsr_rt_stats_t *out);
} tsr__rt_backend_ops_t;

/* A JIT operator's version: a physical slot (the descriptor names it). */
typedef struct tsr__rt_slot_s {
  tsr_rt_expr_t *expr; /* NULL: free */
  uint32_t arity;
  uint64_t *retired_at; /* replaced: every lane's tail then (lanes complete
                           * out of order with each other, in order within one);
                           * freed once every lane has done that much */
} tsr__rt_slot_t;

extern const tsr__rt_backend_ops_t tsr_rt_cpu;
extern const tsr__rt_backend_ops_t tsr_rt_cuda;

typedef struct tsr__rt_deps_s tsr__rt_deps_t; /* deps.c */

/* A lane's run of barrier-free tasks (TSR_RT_DESC_FOLLOW): the numel they
 * share and the distinct byte ranges (all of numel floats) they wrote and
 * read since the lane's last barrier. */
#define TSR__RT_RUN_RANGES 8
typedef struct tsr__rt_run_s {
  uint64_t numel; /* 0: no run open (the next task needs a barrier before it) */
  uint32_t nw, nr;
  uint64_t w[TSR__RT_RUN_RANGES], r[TSR__RT_RUN_RANGES]; /* start addresses */
} tsr__rt_run_t;

struct tsr_rt_s {
  tsr_rt_options_t opt; /* lanes, lane_slots, threads resolved */
  const tsr__rt_backend_ops_t *be;
  void *be_state;
  /* shared with the consumers (the backend allocates) */
  tsr_rt_desc_t *desc;      /* lanes x lane_slots */
  tsr_rt_layout_t *layout;  /* lanes x lane_slots */
  _Atomic uint64_t *done;   /* lanes x TSR_RT_DONE_STRIDE; done[lane * stride] */
  _Atomic uint64_t *posted; /* the same shape: descriptors whole, per lane (rt/desc.h) */
  /* host only */
  uint64_t *tail;                         /* tasks written per lane */
  uint64_t *posted_n;                     /* tasks posted per lane (the host's copy of posted[]) */
  uint32_t last_lane;                     /* the lane of the last task written: the only one with tasks unposted */
  uint32_t run_lane, run_left, run_chunk; /* independent tasks go to a lane in runs of run_chunk */
  uint64_t *seen;                         /* done[lane] as last read (reading it is a cache miss:
                            * the device writes that line) */
  uint32_t *seen_epoch;                   /* the submit call it was read in */
  uint32_t epoch;                         /* submit calls (deferred ones: each TSR__POST_EVERY) */
  uint32_t deferred_calls;                /* deferred calls in this epoch */
  struct {
    uint32_t lane;
    uint64_t n;
  } * tmap; /* ticket -> (lane, n), ring of tmap_size */
  uint64_t tmap_size;
  uint64_t next_ticket; /* the last ticket given */
  uint32_t rr;          /* round-robin cursor for independent tasks */
  tsr__rt_run_t *run;   /* per lane: its open barrier-free run */
  tsr__rt_deps_t *deps;
  struct tsr__rt_shape_s *shape;        /* the last task shape validated (validate.c) */
  tsr__rt_slot_t slots[TSR_RT_JIT_OPS]; /* physical */
  uint32_t jit_slot[TSR_RT_JIT_OPS];    /* logical op - TSR_RT_OP_JIT_FIRST -> slot */
  uint32_t jit_ops;                     /* logical ops registered */
  _Atomic int failed;
  char fault[256];
  tsr_rt_stats_t stats;
};

static inline uint64_t tsr__rt_done(const tsr_rt_t *rt, uint32_t lane) {
  return atomic_load_explicit(&rt->done[(size_t)lane * TSR_RT_DONE_STRIDE], memory_order_acquire);
}

/* Whether lane `lane` has done its n-th task, reading the device's counter
 * at most once a submit call (else the copy read before: a "no" may be
 * stale, which only costs a wait the device finds satisfied). */
static inline bool tsr__rt_seen(tsr_rt_t *rt, uint32_t lane, uint64_t n) {
  if (rt->seen[lane] >= n) return true;
  if (rt->seen_epoch[lane] == rt->epoch) return false;
  rt->seen_epoch[lane] = rt->epoch;
  rt->seen[lane] = tsr__rt_done(rt, lane);
  return rt->seen[lane] >= n;
}

/* Publishes lane `lane`'s descriptors up to its n-th (written before). */
static inline void tsr__rt_post(tsr_rt_t *rt, uint32_t lane, uint64_t n) {
  atomic_store_explicit(&rt->posted[(size_t)lane * TSR_RT_DONE_STRIDE], n, memory_order_release);
}

/* ---- the rings (ring.c) --------------------------------------------------- */

/* A lane holds at most this many tasks written and not posted (ring.c says
 * why posting waits). */
#define TSR__POST_EVERY 8

void tsr_rt_ring(tsr_rt_t *rt); /* post, doorbell */
/* Lane `lane` has a new task written (tail updated): posts the lane written
 * before it, or this one once TSR__POST_EVERY are unposted. */
void tsr_rt_written(tsr_rt_t *rt, uint32_t lane);
/* Waits until lane `lane` has completed its n-th task. */
TSR_MUST_USE tsr_status_t tsr_rt_wait_lane(tsr_rt_t *rt, uint32_t lane, uint64_t n);
/* Takes the slot of lane `lane`'s next task, waiting while the ring is full. */
TSR_MUST_USE tsr_status_t tsr_rt_slot(tsr_rt_t *rt, uint32_t lane, uint64_t *out_n, size_t *out_index);
/* Puts a descriptor of `flags` (no task: TSR_RT_DESC_SWITCH) at the tail of
 * every lane, waiting for room as a submit does. */
TSR_MUST_USE tsr_status_t tsr_rt_publish_marker(tsr_rt_t *rt, uint8_t flags);

/* ---- operators (their names: names.c) ----------------------------------- */

/* What kind `op` is: a reduction (sum, mean), a JIT operator's, binary.
 * Inline, as is tsr_rt_inputs: they run for every task. */
static inline bool tsr_rt_reduce(tsr_rt_op_t op) { return op == TSR_RT_OP_SUM || op == TSR_RT_OP_MEAN; }
static inline bool tsr_rt_jit(tsr_rt_op_t op) { return (int)op >= TSR_RT_OP_JIT_FIRST; }
static inline int tsr_rt_builtin_inputs(tsr_rt_op_t op) {
  if (op <= 0 || op >= TSR_RT_OP_COUNT_) return 0;
  if ((op >= TSR_RT_OP_ADD && op <= TSR_RT_OP_POW) || (op >= TSR_RT_OP_LERP && op <= TSR_RT_OP_GE) ||
      op == TSR_RT_OP_AXPBY)
    return 2;
  if (op >= TSR_RT_OP_ADDCMUL) return 3;
  return 1;
}

/* Inputs a task of `op` reads (0: not an operator this runtime knows). */
static inline int tsr_rt_inputs(const tsr_rt_t *rt, tsr_rt_op_t op) {
  if (tsr_rt_jit(op)) {
    uint32_t k = (uint32_t)op - TSR_RT_OP_JIT_FIRST;
    return k < rt->jit_ops ? (int)rt->slots[rt->jit_slot[k]].arity : 0;
  }
  return tsr_rt_builtin_inputs(op);
}

/* Whether in[i] of the task is a number (tsr_rt_task_t.imm_mask). */
static inline bool tsr_rt_imm(const tsr_rt_task_t *k, int i) { return (k->imm_mask >> i) & 1u; }
/* The float bits of a number input, as a descriptor carries it. */
static inline uint64_t tsr_rt_imm_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* ---- validation (validate.c), for submit.c and group.c ------------------- */

/* What one pass over a tensor's dims tells: its elements, the bytes it
 * touches [lo, hi) (both 0 when it has none) and whether it is row-major
 * contiguous. */
typedef struct {
  uint64_t numel, lo, hi;
  bool contig;
} tsr__span_t;

static inline int tsr__rt_esize(tsr_rt_dtype_t t) { return t == TSR_RT_F32 ? 4 : t == TSR_RT_BOOL ? 1 : 2; }
/* A task's operand i: out (0), in[i - 1]. */
static inline const tsr_rt_tensor_t *tsr__rt_operand(const tsr_rt_task_t *k, int i) {
  return i ? &k->in[i - 1] : &k->out;
}

/* The product of sizes, saturating at UINT64_MAX; 0 if any is 0 or
 * negative (an empty tensor, whatever the others). */
static inline uint64_t tsr_rt_numel(const int64_t *sizes, uint32_t ndim) {
  uint64_t n = 1;
  bool empty = false;
  for (uint32_t d = 0; d < ndim; d++) {
    if (sizes[d] <= 0)
      empty = true;
    else if (__builtin_mul_overflow(n, (uint64_t)sizes[d], &n))
      n = UINT64_MAX;
  }
  return empty ? 0 : n;
}

/* The last task shape validated ("the last shape validated", validate.c). */
typedef struct tsr__rt_shape_s {
  bool valid;
  tsr_rt_op_t op;
  uint32_t imm_mask;
  uint32_t reduce_mask;
  bool keepdim;
  int nin;
  tsr_rt_tensor_t t[TSR_RT_DESC_OPERANDS];                            /* data NULL */
  int64_t rel_lo[TSR_RT_DESC_OPERANDS], rel_hi[TSR_RT_DESC_OPERANDS]; /* bytes touched, from data */
  uint64_t numel[TSR_RT_DESC_OPERANDS];
  uint64_t amask[TSR_RT_DESC_OPERANDS]; /* element size - 1 */
  bool contig[TSR_RT_DESC_OPERANDS];
  bool same[TSR_RT_DESC_OPERANDS]; /* input: out's layout, so out itself at out's pointer */
} tsr__rt_shape_t;

/* Validates a task in full; span[0] gets out's span, span[1 + i] in[i]'s. */
TSR_MUST_USE tsr_status_t tsr_rt_check_task(const tsr_rt_t *rt, const tsr_rt_task_t *k, tsr__span_t *span);
/* Remembers a task's shape, validated in full (spans given). */
void tsr_rt_shape_keep(tsr__rt_shape_t *c, const tsr_rt_task_t *k, int nin, const tsr__span_t *sp);
bool tsr_rt_same(const tsr_rt_tensor_t *a, const tsr_rt_tensor_t *b); /* the same tensor */

/* The fast path of validation, inline: it runs for every task of a submit,
 * twice (validation, then the enqueue). */

#define TSR__EXTENT_MAX (INT64_C(1) << 50) /* elements a tensor's strides may reach either way */

/* The span of a tensor, and whether its offsets stay in range (false:
 * they overflow or reach past TSR__EXTENT_MAX). ndim must be at most
 * TSR_RT_MAX_DIMS (the caller checks). No division: it runs for every
 * operand of every task, twice (validation, then the enqueue). */
static inline __attribute__((always_inline)) bool tsr_rt_span(const tsr_rt_tensor_t *t, tsr__span_t *s) {
  int64_t mn = 0, mx = 0;
  uint64_t expect = 1; /* the contiguous stride; unsigned: wraps on sizes the caller refuses */
  bool contig = true, ok = true;
  for (int d = (int)t->ndim - 1; d >= 0; d--) {
    int64_t n = t->sizes[d], st = t->strides[d];
    if (n <= 1) continue;
    if ((uint64_t)st != expect) contig = false;
    expect *= (uint64_t)n;
    int64_t ext;
    if (__builtin_mul_overflow(st, n - 1, &ext) || __builtin_add_overflow(ext > 0 ? mx : mn, ext, ext > 0 ? &mx : &mn))
      ok = false;
    if (mx > TSR__EXTENT_MAX || mn < -TSR__EXTENT_MAX) ok = false;
  }
  uint64_t numel = tsr_rt_numel(t->sizes, t->ndim);
  s->numel = numel;
  s->contig = contig;
  s->lo = s->hi = 0;
  if (!numel) return true;
  if (!ok) return false;
  int64_t es = tsr__rt_esize(t->dtype);
  uint64_t base = (uint64_t)(uintptr_t)t->data;
  s->lo = base + (uint64_t)(mn * es);
  s->hi = base + (uint64_t)((mx + 1) * es);
  return s->lo <= base && s->hi > base;
}

/* ---- the last shape validated ------------------------------------------------
 * A stream of tasks of one shape (a chain, a framework's step repeated) is
 * validated in full once: the next task whose operator and operands'
 * dtypes, dims, sizes and strides equal it (its data pointers aside) is
 * checked by its pointers alone (null, alignment, range, overlap of out
 * with an input), and its spans come from the cached ones. A task that
 * fails those checks goes through the full check, which words the error. */
static inline __attribute__((always_inline)) bool tsr_rt_shape_match(const tsr__rt_shape_t *c, const tsr_rt_task_t *k) {
  if (!c->valid || c->op != k->op || c->reduce_mask != k->reduce_mask || c->keepdim != k->keepdim ||
      c->imm_mask != k->imm_mask)
    return false;
  for (int i = 0; i <= c->nin; i++) {
    if (i && tsr_rt_imm(k, i - 1)) continue; /* a number: nothing to compare */
    const tsr_rt_tensor_t *a = tsr__rt_operand(k, i), *b = &c->t[i];
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (uint32_t d = 0; d < b->ndim; d++)
      if (a->sizes[d] != b->sizes[d] || a->strides[d] != b->strides[d]) return false;
  }
  return true;
}

/* The spans of a task of the cached shape; false if a pointer check fails. */
static inline __attribute__((always_inline)) bool tsr_rt_shape_spans(const tsr__rt_shape_t *c, const tsr_rt_task_t *k,
                                                                     tsr__span_t *sp) {
  for (int i = 0; i <= c->nin; i++) {
    uint64_t p = (uint64_t)(uintptr_t)tsr__rt_operand(k, i)->data;
    sp[i].numel = c->numel[i];
    sp[i].contig = c->contig[i];
    if (!c->numel[i]) {
      sp[i].lo = sp[i].hi = 0;
      continue;
    }
    sp[i].lo = p + (uint64_t)c->rel_lo[i];
    sp[i].hi = p + (uint64_t)c->rel_hi[i];
    if (!p || (p & c->amask[i]) || sp[i].lo > p || sp[i].hi <= p) return false;
  }
  for (int i = 1; i <= c->nin; i++)
    if (sp[i].numel && sp[0].numel && sp[i].lo < sp[0].hi && sp[0].lo < sp[i].hi &&
        !(c->same[i] && tsr__rt_operand(k, i)->data == k->out.data))
      return false;
  return true;
}

/* Validates a task (tsr_rt_check_task), by its pointers alone when it has
 * the shape validated last. */
TSR_MUST_USE static inline __attribute__((always_inline)) tsr_status_t tsr_rt_check(tsr_rt_t *rt,
                                                                                    const tsr_rt_task_t *k,
                                                                                    tsr__span_t *span) {
  if (tsr_rt_shape_match(rt->shape, k) && tsr_rt_shape_spans(rt->shape, k, span)) return NULL;
  TSR_RETURN_IF_ERROR(tsr_rt_check_task(rt, k, span));
  tsr_rt_shape_keep(rt->shape, k, tsr_rt_inputs(rt, k->op), span);
  return NULL;
}

/* ---- a descriptor's way into a lane (place.c), for submit.c and group.c -- */

/* An access of a descriptor to the bytes [lo, hi). */
typedef struct {
  uint64_t lo, hi;
  bool write;
} tsr__rt_access_t;

/* Where a descriptor goes: its lane and its waits on other lanes; `fresh`:
 * its first access is a write that no live access overlaps. */
typedef struct {
  uint32_t lane, nwait;
  uint32_t wait_lane[TSR_RT_WAITS];
  uint64_t wait_n[TSR_RT_WAITS];
  bool fresh;
} tsr__rt_place_t;

/* A descriptor's way into a lane: place (from its accesses, writes
 * first), claim (its slot and ticket), write it, commit (record it). */
TSR_MUST_USE tsr_status_t tsr_rt_place(tsr_rt_t *rt, const tsr__rt_access_t *acc, uint32_t nacc, tsr__rt_place_t *p);
TSR_MUST_USE tsr_status_t tsr_rt_claim(tsr_rt_t *rt, uint32_t lane, uint64_t *out_n, size_t *out_idx,
                                       uint64_t *out_ticket);
TSR_MUST_USE tsr_status_t tsr_rt_commit(tsr_rt_t *rt, uint32_t lane, uint64_t n, uint64_t ticket,
                                        const tsr__rt_access_t *acc, uint32_t nacc, bool fresh);
/* A task validated (tsr_rt_check) into its lane: placed, claimed, its
 * descriptor written, committed. */
TSR_MUST_USE tsr_status_t tsr_rt_enqueue(tsr_rt_t *rt, const tsr_rt_task_t *k);

/* ---- submission (submit.c), for group.c ----------------------------------- */

/* How independent work spreads over the lanes for a call of `count`
 * descriptors: one lane each while fewer than the lanes, else runs of up
 * to 8 a lane. */
void tsr_rt_spread(tsr_rt_t *rt, size_t count);

/* ---- dependencies (deps.c) ----------------------------------------------- */

/* An access of a task to [lo, hi): by lane `lane`'s n-th task. */
typedef struct tsr__rt_dep_s {
  uint32_t lane;
  uint64_t n, ticket;
} tsr__rt_dep_t;

TSR_MUST_USE tsr_status_t tsr_rt_deps_create(uint32_t capacity, tsr__rt_deps_t **out_deps);
void tsr_rt_deps_free(tsr__rt_deps_t *deps);
/* Adds to deps[] (at most cap, deduplicated by lane, keeping the largest n)
 * every outstanding access that conflicts with an access to [lo, hi): with
 * `write`, every access; else writes only. Completed accesses (done per
 * `rt`) are dropped as they are met. Returns the new count, or cap + 1 if
 * more lanes than cap are involved. */
uint32_t tsr_rt_deps_find(tsr__rt_deps_t *deps, tsr_rt_t *rt, uint64_t lo, uint64_t hi, bool write, tsr__rt_dep_t *out,
                          uint32_t count, uint32_t cap);
/* Records an access; false when the table is full (the caller drains).
 * `fresh`: a lookup of [lo, hi) as a write just found no live access
 * overlapping it, so there is no earlier record of the lane's to update
 * and none is looked for (the table keeps its answers either way; a
 * record found and updated only keeps the lists short). */
bool tsr_rt_deps_add(tsr__rt_deps_t *deps, uint64_t lo, uint64_t hi, bool write, tsr__rt_dep_t who, bool fresh);
/* Drops every access (everything completed). */
void tsr_rt_deps_clear(tsr__rt_deps_t *deps);
/* Drops completed accesses; returns how many are left. */
uint32_t tsr_rt_deps_prune(tsr__rt_deps_t *deps, tsr_rt_t *rt);

#endif
