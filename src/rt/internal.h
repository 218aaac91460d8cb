/* rt/internal.h: what the runtime's files share. rt.c is the host side
 * (validation, dependencies, the rings, tickets); a backend (cpu.c, cuda.c)
 * provides the ring's memory, the consumers and the memory helpers. */
#ifndef TESSERA_RT_INTERNAL_H
#define TESSERA_RT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
  struct tsr__rt_shape_s *shape;        /* the last task shape validated (rt.c) */
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

/* Puts a descriptor of `flags` (no task: TSR_RT_DESC_SWITCH) at the tail of
 * every lane, waiting for room as a submit does. */
TSR_MUST_USE tsr_status_t tsr_rt_publish_marker(tsr_rt_t *rt, uint8_t flags);

/* ---- submission (rt.c), for group.c ------------------------------------- */

/* What one pass over a tensor's dims tells: its elements, the bytes it
 * touches [lo, hi) (both 0 when it has none) and whether it is row-major
 * contiguous. */
typedef struct {
  uint64_t numel, lo, hi;
  bool contig;
} tsr__span_t;

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

static inline int tsr__rt_esize(tsr_rt_dtype_t t) { return t == TSR_RT_F32 ? 4 : 2; }
/* A task's operand i: out (0), in[i - 1]. */
static inline const tsr_rt_tensor_t *tsr__rt_operand(const tsr_rt_task_t *k, int i) {
  return i ? &k->in[i - 1] : &k->out;
}

int tsr_rt_inputs(const tsr_rt_t *rt, tsr_rt_op_t op); /* 0: no such operator */
/* Validates a task as tsr_rt_submit does (by its pointers alone when it
 * has the shape validated last); span[0] out's, span[1 + i] in[i]'s. */
TSR_MUST_USE tsr_status_t tsr_rt_check(tsr_rt_t *rt, const tsr_rt_task_t *k, tsr__span_t *span);
bool tsr_rt_same(const tsr_rt_tensor_t *a, const tsr_rt_tensor_t *b);           /* the same tensor */
TSR_MUST_USE tsr_status_t tsr_rt_enqueue(tsr_rt_t *rt, const tsr_rt_task_t *k); /* a task validated */
void tsr_rt_ring(tsr_rt_t *rt);                                                 /* post, doorbell */
/* How independent work spreads over the lanes for a call of `count`
 * descriptors: one lane each while fewer than the lanes, else runs of up
 * to 8 a lane. */
void tsr_rt_spread(tsr_rt_t *rt, size_t count);
/* A descriptor's way into a lane: place (from its accesses, writes
 * first), claim (its slot and ticket), write it, commit (record it). */
TSR_MUST_USE tsr_status_t tsr_rt_place(tsr_rt_t *rt, const tsr__rt_access_t *acc, uint32_t nacc, tsr__rt_place_t *p);
TSR_MUST_USE tsr_status_t tsr_rt_claim(tsr_rt_t *rt, uint32_t lane, uint64_t *out_n, size_t *out_idx,
                                       uint64_t *out_ticket);
TSR_MUST_USE tsr_status_t tsr_rt_commit(tsr_rt_t *rt, uint32_t lane, uint64_t n, uint64_t ticket,
                                        const tsr__rt_access_t *acc, uint32_t nacc, bool fresh);

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
