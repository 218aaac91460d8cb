/* place.c: a descriptor's way into a lane, a task's or a group's
 * (group.c): placed after what it depends on (its lane and its waits), its
 * slot and ticket claimed, then committed (its accesses recorded for the
 * descriptors after it); and a task's descriptor (tsr_rt_enqueue): its
 * layout and the REG and FOLLOW marks. tsr_rt_enqueue runs for every task
 * and has place, claim and commit inline; group.c calls them. */
#include <string.h>

#include "rt/internal.h"

/* ---- a descriptor's way into a lane (a task's, or a group's; group.c) ---- */

#define TSR__INLINE static inline __attribute__((always_inline))

/* What a descriptor of these accesses (writes first) comes after: its lane
 * (that of the latest task it depends on: a chain stays on one block, in
 * order; else the next one round the lanes, in runs of run_chunk
 * descriptors, so a large batch writes a lane's descriptors together and
 * posts them with one store) and its waits on other lanes; the host waits
 * for what a descriptor cannot wait on. */
TSR__INLINE tsr_status_t tsr__place(tsr_rt_t *rt, const tsr__rt_access_t *acc, uint32_t nacc, tsr__rt_place_t *p) {
  enum { CAP = 32 };
  tsr__rt_dep_t deps[CAP + 1];
  uint32_t nd = 0;
  p->fresh = false;
  for (uint32_t i = 0; i < nacc; i++) {
    nd = tsr_rt_deps_find(rt->deps, rt, acc[i].lo, acc[i].hi, acc[i].write, deps, nd, CAP);
    if (i == 0) p->fresh = acc[0].write && nd == 0; /* nothing live touches the first write's bytes */
    if (nd > CAP) break;
  }
  if (nd > CAP) {
    /* more lanes than a descriptor can wait on: wait here until they are done */
    TSR_RETURN_IF_ERROR(tsr_rt_flush(rt));
    rt->stats.host_waits++;
    nd = 0;
  }
  uint32_t lane;
  int pick = -1;
  for (uint32_t i = 0; i < nd; i++)
    if (pick < 0 || deps[i].ticket > deps[pick].ticket) pick = (int)i;
  if (pick >= 0) {
    lane = deps[pick].lane;
  } else if (rt->run_left) {
    lane = rt->run_lane;
    rt->run_left--;
  } else {
    lane = rt->run_lane = rt->rr++ % rt->opt.lanes;
    rt->run_left = rt->run_chunk - 1;
  }
  uint32_t nwait = 0;
  for (uint32_t i = 0; i < nd; i++) {
    if (deps[i].lane == lane || tsr__rt_seen(rt, deps[i].lane, deps[i].n)) continue;
    if (nwait == TSR_RT_WAITS) {
      tsr_rt_ring(rt);
      rt->stats.host_waits++;
      TSR_RETURN_IF_ERROR(tsr_rt_wait_lane(rt, deps[i].lane, deps[i].n));
      continue;
    }
    p->wait_lane[nwait] = deps[i].lane;
    p->wait_n[nwait] = deps[i].n;
    nwait++;
  }
  rt->stats.cross_lane_waits += nwait;
  p->lane = lane;
  p->nwait = nwait;
  return NULL;
}

/* The slot of the lane's next descriptor (waiting while the ring is full)
 * and the next ticket (its map entry is reused: the old task must be done). */
TSR__INLINE tsr_status_t tsr__claim(tsr_rt_t *rt, uint32_t lane, uint64_t *out_n, size_t *out_idx,
                                    uint64_t *out_ticket) {
  TSR_RETURN_IF_ERROR(tsr_rt_slot(rt, lane, out_n, out_idx));
  uint64_t ticket = rt->next_ticket + 1;
  uint64_t ti = ticket % rt->tmap_size;
  if (ticket > rt->tmap_size && !tsr__rt_seen(rt, rt->tmap[ti].lane, rt->tmap[ti].n))
    TSR_RETURN_IF_ERROR(tsr_rt_wait_lane(rt, rt->tmap[ti].lane, rt->tmap[ti].n));
  *out_ticket = ticket;
  return NULL;
}

/* The descriptor claimed is written: it is the lane's, the ticket's, and
 * its accesses are recorded for the descriptors after it. */
TSR__INLINE tsr_status_t tsr__commit(tsr_rt_t *rt, uint32_t lane, uint64_t n, uint64_t ticket,
                                     const tsr__rt_access_t *acc, uint32_t nacc, bool fresh) {
  rt->tail[lane] = n;
  tsr_rt_written(rt, lane);
  rt->next_ticket = ticket;
  uint64_t ti = ticket % rt->tmap_size;
  rt->tmap[ti].lane = lane;
  rt->tmap[ti].n = n;
  rt->stats.submitted++;
  tsr__rt_dep_t who = {lane, n, ticket};
  bool ok = true;
  for (uint32_t i = 0; ok && i < nacc; i++)
    ok = tsr_rt_deps_add(rt->deps, acc[i].lo, acc[i].hi, acc[i].write, who, i == 0 && fresh);
  if (!ok) {
    /* full: first drop every access of a finished task (records are
     * otherwise dropped only when a lookup passes them), reading the lanes'
     * counters afresh; then record the accesses again (an access recorded
     * twice replaces itself: so not `fresh`, since the first try may have
     * recorded the first before a later one found the table full) */
    rt->epoch++;
    rt->stats.dep_prunes++;
    tsr_rt_deps_prune(rt->deps, rt);
    ok = true;
    for (uint32_t i = 0; ok && i < nacc; i++)
      ok = tsr_rt_deps_add(rt->deps, acc[i].lo, acc[i].hi, acc[i].write, who, false);
  }
  if (!ok) {
    /* the table is full of what is in flight: drain, then start afresh */
    tsr_rt_ring(rt);
    rt->stats.host_waits++;
    rt->stats.dep_drains++;
    TSR_RETURN_IF_ERROR(tsr_rt_flush(rt));
    tsr_rt_deps_clear(rt->deps);
  }
  return NULL;
}

/* For group.c. */
tsr_status_t tsr_rt_place(tsr_rt_t *rt, const tsr__rt_access_t *acc, uint32_t nacc, tsr__rt_place_t *p) {
  return tsr__place(rt, acc, nacc, p);
}
tsr_status_t tsr_rt_claim(tsr_rt_t *rt, uint32_t lane, uint64_t *out_n, size_t *out_idx, uint64_t *out_ticket) {
  return tsr__claim(rt, lane, out_n, out_idx, out_ticket);
}
tsr_status_t tsr_rt_commit(tsr_rt_t *rt, uint32_t lane, uint64_t n, uint64_t ticket, const tsr__rt_access_t *acc,
                           uint32_t nacc, bool fresh) {
  return tsr__commit(rt, lane, n, ticket, acc, nacc, fresh);
}

/* ---- a task's descriptor ------------------------------------------------- */

static void tsr__layout(tsr_rt_layout_t *l, const tsr_rt_task_t *k, bool reduce, int nin) {
  memset(l, 0, sizeof(*l));
  if (reduce) {
    const tsr_rt_tensor_t *in = &k->in[0];
    uint32_t od = 0;
    for (uint32_t d = 0; d < in->ndim; d++) {
      l->sizes[d] = in->sizes[d];
      l->strides[1][d] = in->strides[d];
      bool red = k->reduce_mask & (1u << d);
      if (red && !k->keepdim) continue;
      l->strides[0][d] = red ? 0 : k->out.strides[od];
      od++;
    }
    return;
  }
  for (uint32_t d = 0; d < k->out.ndim; d++) {
    l->sizes[d] = k->out.sizes[d];
    l->strides[0][d] = k->out.strides[d];
    for (int i = 0; i < nin; i++)
      l->strides[i + 1][d] = tsr_rt_imm(k, i) || k->in[i].sizes[d] == 1 ? 0 : k->in[i].strides[d];
  }
}

/* Whether [a, a + len) and [b, b + len) are the same range or disjoint. */
static bool tsr__same_or_apart(uint64_t a, uint64_t b, uint64_t len) {
  return a == b || (a > b ? a - b : b - a) >= len;
}

/* Adds `x` to a run's set unless there; false when the set is full. */
static bool tsr__run_note(uint64_t *set, uint32_t *n, uint64_t x) {
  for (uint32_t i = 0; i < *n; i++)
    if (set[i] == x) return true;
  if (*n == TSR__RT_RUN_RANGES) return false;
  set[(*n)++] = x;
  return true;
}

/* Sets TSR_RT_DESC_REG and TSR_RT_DESC_FOLLOW on a builtin elementwise
 * descriptor (rt/desc.h) and keeps the lane's run. */
static void tsr__reg_flags(tsr_rt_t *rt, uint32_t lane, tsr_rt_desc_t *v) {
  tsr__rt_run_t *run = &rt->run[lane];
  uint64_t n = v->numel, len = n * 4;
  /* two inputs at most, none a number: the run's loads are out, in0, in1 */
  bool reg = (v->flags & TSR_RT_DESC_CONTIG) && !v->imm && v->nin <= 2 && n && n % 4 == 0 &&
             n / 4 <= (uint64_t)TSR_RT_REG_VEC * rt->opt.threads;
  for (int i = 0; reg && i <= v->nin; i++) reg = v->dtype[i] == TSR_RT_F32 && v->ptr[i] % 16 == 0;
  if (!reg) {
    run->numel = 0;
    return;
  }
  v->flags |= TSR_RT_DESC_REG;
  bool follow = run->numel == n && v->nwait == 0;
  /* out against everything touched, inputs against everything written */
  for (uint32_t j = 0; follow && j < run->nw; j++) follow = tsr__same_or_apart(v->ptr[0], run->w[j], len);
  for (uint32_t j = 0; follow && j < run->nr; j++) follow = tsr__same_or_apart(v->ptr[0], run->r[j], len);
  for (int i = 1; follow && i <= v->nin; i++)
    for (uint32_t j = 0; follow && j < run->nw; j++) follow = tsr__same_or_apart(v->ptr[i], run->w[j], len);
  if (follow) {
    tsr__rt_run_t next = *run;
    follow = tsr__run_note(next.w, &next.nw, v->ptr[0]);
    for (int i = 1; follow && i <= v->nin; i++) follow = tsr__run_note(next.r, &next.nr, v->ptr[i]);
    if (follow) *run = next;
  }
  if (follow) {
    v->flags |= TSR_RT_DESC_FOLLOW;
    return;
  }
  /* a barrier before this task: a new run starts with it */
  run->numel = n;
  run->nw = run->nr = 0;
  tsr__run_note(run->w, &run->nw, v->ptr[0]);
  for (int i = 1; i <= v->nin; i++) tsr__run_note(run->r, &run->nr, v->ptr[i]);
}

tsr_status_t tsr_rt_enqueue(tsr_rt_t *rt, const tsr_rt_task_t *k) {
  bool reduce = tsr_rt_reduce(k->op);
  int nin = tsr_rt_inputs(rt, k->op);
  tsr__span_t sp[TSR_RT_DESC_OPERANDS] = {{0}};
  tsr__rt_access_t acc[TSR_RT_DESC_OPERANDS];
  /* validated before: the spans from the shape cache when it is this
   * task's (a batch of one shape), else computed */
  if (!(tsr_rt_shape_match(rt->shape, k) && tsr_rt_shape_spans(rt->shape, k, sp)))
    for (int i = 0; i <= nin; i++)
      if (!(i && tsr_rt_imm(k, i - 1))) tsr_rt_span(tsr__rt_operand(k, i), &sp[i]); /* a number: none */
  /* an input of exactly out's bytes (in place) needs no access of its
   * own: out's write orders everything its read would */
  uint32_t nacc = 1;
  acc[0] = (tsr__rt_access_t){sp[0].lo, sp[0].hi, true};
  for (int i = 1; i <= nin; i++)
    if (sp[i].numel && (sp[i].lo != sp[0].lo || sp[i].hi != sp[0].hi))
      acc[nacc++] = (tsr__rt_access_t){sp[i].lo, sp[i].hi, false};
  tsr__rt_place_t p;
  TSR_RETURN_IF_ERROR(tsr__place(rt, acc, nacc, &p));
  uint32_t lane = p.lane;
  uint64_t n, ticket;
  size_t idx;
  TSR_RETURN_IF_ERROR(tsr__claim(rt, lane, &n, &idx, &ticket));
  tsr_rt_desc_t *d = &rt->desc[idx];
  tsr_rt_desc_t v;
  memset(&v, 0, sizeof(v));
  if (tsr_rt_jit(k->op)) {
    uint32_t slot = rt->jit_slot[(uint32_t)k->op - TSR_RT_OP_JIT_FIRST];
    v.op = (uint16_t)(TSR_RT_DESC_JIT + slot);
  } else {
    v.op = (uint16_t)k->op;
  }
  v.ndim = (uint8_t)(reduce ? k->in[0].ndim : k->out.ndim);
  v.nin = (uint8_t)nin;
  v.dtype[0] = (uint8_t)k->out.dtype;
  v.ptr[0] = (uint64_t)(uintptr_t)k->out.data;
  for (int i = 0; i < nin; i++) {
    if (tsr_rt_imm(k, i)) {
      v.imm |= (uint8_t)(1u << i);
      v.dtype[i + 1] = TSR_RT_F32;
      v.ptr[i + 1] = tsr_rt_imm_bits(k->imm[i]);
      continue;
    }
    v.dtype[i + 1] = (uint8_t)k->in[i].dtype;
    v.ptr[i + 1] = (uint64_t)(uintptr_t)k->in[i].data;
  }
  v.scalar[0] = k->scalar[0];
  v.scalar[1] = k->scalar[1];
  v.reduce_mask = k->reduce_mask;
  v.numel = sp[0].numel;
  v.ticket = ticket;
  v.nwait = (uint8_t)p.nwait;
  for (uint32_t i = 0; i < p.nwait; i++) {
    v.wait_lane[i] = p.wait_lane[i];
    v.wait_seq[i] = (uint32_t)p.wait_n[i];
  }
  if (reduce) {
    v.flags = TSR_RT_DESC_REDUCE;
    v.rnumel = v.numel ? sp[1].numel / v.numel : 0;
    if (k->op == TSR_RT_OP_MEAN) v.scalar[0] = v.rnumel ? 1.f / (float)v.rnumel : 0.f;
    tsr__layout(&rt->layout[idx], k, true, 1);
  } else {
    /* an input of out's elements is of out's shape (its sizes are out's
     * or 1, so any 1 that broadcasts would make it smaller) */
    bool contig = sp[0].contig;
    for (int i = 1; contig && i <= nin; i++)
      contig = tsr_rt_imm(k, i - 1) || (sp[i].contig && sp[i].numel == sp[0].numel);
    if (contig)
      v.flags = TSR_RT_DESC_CONTIG;
    else
      tsr__layout(&rt->layout[idx], k, false, nin);
  }
  if (reduce || tsr_rt_jit(k->op))
    rt->run[lane].numel = 0;
  else
    tsr__reg_flags(rt, lane, &v);
  v.seq = n;
  memcpy(d, &v, sizeof(v));
  return tsr__commit(rt, lane, n, ticket, acc, nacc, p.fresh);
}
