/* rt.c: libtessera-rt's host side: options, validation of tasks, the
 * choice of lane and waits from the dependencies, publication into the
 * lanes' rings, tickets, waiting, shutdown. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt/internal.h"

static const char *const tsr__op_names[TSR_RT_OP_COUNT_] = {
    [TSR_RT_OP_ADD] = "add",
    [TSR_RT_OP_SUB] = "sub",
    [TSR_RT_OP_MUL] = "mul",
    [TSR_RT_OP_DIV] = "div",
    [TSR_RT_OP_MAXIMUM] = "maximum",
    [TSR_RT_OP_MINIMUM] = "minimum",
    [TSR_RT_OP_POW] = "pow",
    [TSR_RT_OP_RELU] = "relu",
    [TSR_RT_OP_SIGMOID] = "sigmoid",
    [TSR_RT_OP_TANH] = "tanh",
    [TSR_RT_OP_EXP] = "exp",
    [TSR_RT_OP_LOG] = "log",
    [TSR_RT_OP_SQRT] = "sqrt",
    [TSR_RT_OP_ABS] = "abs",
    [TSR_RT_OP_SIN] = "sin",
    [TSR_RT_OP_COS] = "cos",
    [TSR_RT_OP_GELU] = "gelu",
    [TSR_RT_OP_HARDSIGMOID] = "hardsigmoid",
    [TSR_RT_OP_HARDSWISH] = "hardswish",
    [TSR_RT_OP_LEAKY_RELU] = "leaky_relu",
    [TSR_RT_OP_HARDTANH] = "hardtanh",
    [TSR_RT_OP_ELU] = "elu",
    [TSR_RT_OP_SOFTPLUS] = "softplus",
    [TSR_RT_OP_CLAMP] = "clamp",
    [TSR_RT_OP_CLAMP_MIN] = "clamp_min",
    [TSR_RT_OP_CLAMP_MAX] = "clamp_max",
    [TSR_RT_OP_COPY] = "copy",
    [TSR_RT_OP_SUM] = "sum",
    [TSR_RT_OP_MEAN] = "mean",
};

const char *tsr_rt_op_name(tsr_rt_op_t op) {
  if ((int)op >= TSR_RT_OP_JIT_FIRST && (int)op < TSR_RT_OP_JIT_FIRST + TSR_RT_JIT_OPS) return "jit";
  return op > 0 && op < TSR_RT_OP_COUNT_ && tsr__op_names[op] ? tsr__op_names[op] : "?";
}

static bool tsr__binary(tsr_rt_op_t op) { return op >= TSR_RT_OP_ADD && op <= TSR_RT_OP_POW; }
static bool tsr__reduce(tsr_rt_op_t op) { return op == TSR_RT_OP_SUM || op == TSR_RT_OP_MEAN; }
static bool tsr__jit(tsr_rt_op_t op) { return (int)op >= TSR_RT_OP_JIT_FIRST; }

/* Inputs a task of `op` reads (0: not an operator this runtime knows). */
static int tsr__inputs(const tsr_rt_t *rt, tsr_rt_op_t op) {
  if (tsr__jit(op)) {
    uint32_t k = (uint32_t)op - TSR_RT_OP_JIT_FIRST;
    return k < rt->jit_ops ? (int)rt->slots[rt->jit_slot[k]].arity : 0;
  }
  if (op <= 0 || op >= TSR_RT_OP_COUNT_) return 0;
  return tsr__binary(op) ? 2 : 1;
}

/* The last task shape validated ("the last shape validated" below). */
typedef struct tsr__rt_shape_s {
  bool valid;
  tsr_rt_op_t op;
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

size_t tsr_rt_descriptor_bytes(void) { return TSR_RT_DESC_BYTES; }

void tsr_rt_tensor_contiguous(tsr_rt_tensor_t *t, void *data, tsr_rt_dtype_t dtype, uint32_t ndim,
                              const int64_t *sizes) {
  memset(t, 0, sizeof(*t));
  t->data = data;
  t->dtype = dtype;
  t->ndim = ndim > TSR_RT_MAX_DIMS ? TSR_RT_MAX_DIMS : ndim;
  uint64_t s = 1; /* unsigned: huge sizes wrap (the runtime refuses them), never overflow */
  for (int d = (int)t->ndim - 1; d >= 0; d--) {
    t->sizes[d] = sizes[d];
    t->strides[d] = (int64_t)s;
    s *= sizes[d] > 0 ? (uint64_t)sizes[d] : 1;
  }
}

/* The product of sizes, saturating at UINT64_MAX; 0 if any is 0 or
 * negative (an empty tensor, whatever the others). */
static inline uint64_t tsr__numel(const int64_t *sizes, uint32_t ndim) {
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

uint64_t tsr_rt_tensor_numel(const tsr_rt_tensor_t *t) {
  return tsr__numel(t->sizes, t->ndim < TSR_RT_MAX_DIMS ? t->ndim : TSR_RT_MAX_DIMS);
}

/* ---- create and destroy -------------------------------------------------- */

tsr_status_t tsr_rt_create(const tsr_rt_options_t *options, tsr_rt_t **out) {
  *out = NULL;
  tsr_rt_options_t o = options ? *options : (tsr_rt_options_t){0};
  if (!o.backend) o.backend = TSR_RT_BACKEND_CUDA;
  if (o.backend != TSR_RT_BACKEND_CUDA && o.backend != TSR_RT_BACKEND_CPU)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "unknown backend %d", (int)o.backend);
  if (!o.lane_slots) o.lane_slots = 256;
  if (o.lane_slots < 2 || o.lane_slots > 65536 || (o.lane_slots & (o.lane_slots - 1)))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "lane_slots %u: a power of two from 2 to 65536", o.lane_slots);
  if (!o.threads) o.threads = 256;
  if (o.threads % 32 || o.threads > 1024)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "threads %u: a multiple of 32 up to 1024", o.threads);
  if (o.lanes > 4096) return tsr_status_make(TSR_INVALID_ARGUMENT, "lanes %u: at most 4096", o.lanes);
  tsr_rt_t *rt = calloc(1, sizeof(*rt));
  if (!rt) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  rt->opt = o;
  rt->be = o.backend == TSR_RT_BACKEND_CPU ? &tsr_rt_cpu : &tsr_rt_cuda;
  /* the backend fixes the lanes (one per SM on a GPU) and allocates the rings */
  tsr_status_t st = rt->be->start(rt);
  if (st) {
    free(rt);
    return st;
  }
  uint32_t lanes = rt->opt.lanes;
  rt->tail = calloc(lanes, sizeof(*rt->tail));
  rt->seen = calloc(lanes, sizeof(*rt->seen));
  rt->seen_epoch = calloc(lanes, sizeof(*rt->seen_epoch));
  rt->posted_n = calloc(lanes, sizeof(*rt->posted_n));
  rt->run = calloc(lanes, sizeof(*rt->run));
  rt->tmap_size = (uint64_t)lanes * rt->opt.lane_slots * 2;
  rt->tmap = calloc(rt->tmap_size, sizeof(*rt->tmap));
  rt->shape = calloc(1, sizeof(*rt->shape));
  if (!rt->tail || !rt->tmap || !rt->seen || !rt->seen_epoch || !rt->posted_n || !rt->run || !rt->shape)
    st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  if (!st) st = tsr_rt_deps_create(lanes * rt->opt.lane_slots * 6 + 1024, &rt->deps);
  if (st) {
    tsr_status_free(tsr_rt_destroy(rt));
    return st;
  }
  *out = rt;
  return NULL;
}

static const char *tsr__fault(tsr_rt_t *rt) {
  if (atomic_load(&rt->failed)) return rt->fault;
  const char *why = rt->be->fault ? rt->be->fault(rt) : NULL;
  if (why) {
    snprintf(rt->fault, sizeof(rt->fault), "%s", why);
    atomic_store(&rt->failed, 1);
    return rt->fault;
  }
  return NULL;
}

static void tsr__pause(unsigned *spins) {
  if (++*spins < 64) return;
  if (*spins < 256) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 20000};
  nanosleep(&ts, NULL);
}

/* ---- posting -----------------------------------------------------------------
 * A task's descriptor is written at once, but its lane's `posted` word (the
 * one the device polls, across PCIe) is stored when the host moves on to
 * another lane, when the lane has TSR__POST_EVERY tasks unposted, and
 * before anything waits or rings the doorbell: a store to a line the device
 * is polling costs the host more than the descriptor. */
#define TSR__POST_EVERY 8

static void tsr__post_lane(tsr_rt_t *rt, uint32_t lane) {
  if (rt->posted_n[lane] == rt->tail[lane]) return;
  rt->posted_n[lane] = rt->tail[lane];
  tsr__rt_post(rt, lane, rt->tail[lane]);
}

/* Moving to another lane posts the one before, so only the lane of the
 * last task written can hold unposted tasks. */
static void tsr__post_pending(tsr_rt_t *rt) { tsr__post_lane(rt, rt->last_lane); }

/* Lane `lane` has a new task written (tail updated). */
static void tsr__written(tsr_rt_t *rt, uint32_t lane) {
  if (lane != rt->last_lane) {
    tsr__post_lane(rt, rt->last_lane);
    rt->last_lane = lane;
  }
  if (rt->tail[lane] - rt->posted_n[lane] >= TSR__POST_EVERY) tsr__post_lane(rt, lane);
}

/* Posts what is written and rings the backend's doorbell. */
static void tsr__ring(tsr_rt_t *rt) {
  tsr__post_pending(rt);
  rt->be->doorbell(rt);
}

/* Waits until lane `lane` has completed its n-th task. */
static tsr_status_t tsr__wait_lane(tsr_rt_t *rt, uint32_t lane, uint64_t n) {
  unsigned spins = 0;
  /* the lane's tasks may be unposted (tsr_rt_submit_deferred): post them
   * and ring (the CPU backend's lanes sleep until the doorbell) */
  if (tsr__rt_done(rt, lane) < n) tsr__ring(rt);
  while (tsr__rt_done(rt, lane) < n) {
    /* the backend's check also restarts a kernel that ended idle */
    if ((spins & 15) == 15) {
      const char *why = tsr__fault(rt);
      if (why) return tsr_status_make(TSR_UNAVAILABLE, "the runtime failed: %s", why);
    }
    tsr__pause(&spins);
  }
  return NULL;
}

tsr_status_t tsr_rt_destroy(tsr_rt_t *rt) {
  if (!rt) return NULL;
  tsr_status_t first = NULL;
  if (rt->desc) {
    /* every task submitted runs to the end, then a STOP in every lane */
    if (rt->tail) first = tsr_rt_flush(rt);
    if (!first) {
      for (uint32_t lane = 0; lane < rt->opt.lanes; lane++) {
        uint64_t n = (rt->tail ? rt->tail[lane] : 0) + 1;
        tsr_rt_desc_t *d = &rt->desc[(size_t)lane * rt->opt.lane_slots + ((n - 1) & (rt->opt.lane_slots - 1))];
        memset(d, 0, sizeof(*d));
        d->seq = n;
        d->flags = TSR_RT_DESC_STOP;
        tsr__rt_post(rt, lane, n);
      }
      tsr__ring(rt);
    }
  }
  tsr_status_t st = rt->be->stop(rt);
  if (!first)
    first = st;
  else
    tsr_status_free(st);
  for (uint32_t i = 0; i < TSR_RT_JIT_OPS; i++) {
    tsr_rt_expr_free(rt->slots[i].expr);
    free(rt->slots[i].retired_at);
  }
  tsr_rt_deps_free(rt->deps);
  free(rt->tail);
  free(rt->seen);
  free(rt->seen_epoch);
  free(rt->posted_n);
  free(rt->run);
  free(rt->shape);
  free(rt->tmap);
  free(rt);
  return first;
}

/* ---- validation ------------------------------------------------------------ */

#define TSR__EXTENT_MAX (INT64_C(1) << 50) /* elements a tensor's strides may reach either way */

/* The span of a tensor, and whether its offsets stay in range (false:
 * they overflow or reach past TSR__EXTENT_MAX). ndim must be at most
 * TSR_RT_MAX_DIMS (the caller checks). No division: it runs for every
 * operand of every task, twice (validation, then the enqueue). */
static inline __attribute__((always_inline)) bool tsr__span(const tsr_rt_tensor_t *t, tsr__span_t *s) {
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
  uint64_t numel = tsr__numel(t->sizes, t->ndim);
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

/* Validates a tensor and gives its span. */
static tsr_status_t tsr__check_tensor(const tsr_rt_tensor_t *t, const char *name, tsr__span_t *s) {
  if (t->dtype != TSR_RT_F32 && t->dtype != TSR_RT_F16 && t->dtype != TSR_RT_BF16)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: unsupported dtype %d (f32, f16 or bf16)", name, (int)t->dtype);
  if (t->ndim > TSR_RT_MAX_DIMS)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: %u dims (at most %d)", name, t->ndim, TSR_RT_MAX_DIMS);
  for (uint32_t d = 0; d < t->ndim; d++)
    if ((uint64_t)t->sizes[d] > (UINT64_C(1) << 40))
      return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: size %lld of dim %u is out of range", name,
                             (long long)t->sizes[d], d);
  bool in_range = tsr__span(t, s);
  if (s->numel > (UINT64_C(1) << 40)) return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: more than 2^40 elements", name);
  if (!s->numel) return NULL;
  if (!t->data) return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: null data pointer", name);
  if ((uintptr_t)t->data % (uintptr_t)tsr__rt_esize(t->dtype))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: data pointer not aligned to its element", name);
  if (!in_range) return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: its strides reach outside the address space", name);
  return NULL;
}

static bool tsr__same(const tsr_rt_tensor_t *a, const tsr_rt_tensor_t *b) {
  if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (uint32_t d = 0; d < a->ndim; d++)
    if (a->sizes[d] != b->sizes[d] || (a->sizes[d] > 1 && a->strides[d] != b->strides[d])) return false;
  return true;
}

static bool tsr__overlap(const tsr__span_t *a, const tsr__span_t *b) {
  return a->numel && b->numel && a->lo < b->hi && b->lo < a->hi;
}

/* Validates a task; span[0] gets out's span, span[1 + i] in[i]'s. */
static tsr_status_t tsr__check_task(const tsr_rt_t *rt, const tsr_rt_task_t *k, tsr__span_t *span) {
  int nin = tsr__inputs(rt, k->op);
  if (!nin) return tsr_status_make(TSR_INVALID_ARGUMENT, "unknown operator %d", (int)k->op);
  TSR_RETURN_IF_ERROR(tsr__check_tensor(&k->out, "out", &span[0]));
  static const char *const names[TSR_RT_MAX_INPUTS] = {"in[0]", "in[1]", "in[2]", "in[3]"};
  for (int i = 0; i < nin; i++) TSR_RETURN_IF_ERROR(tsr__check_tensor(&k->in[i], names[i], &span[1 + i]));
  for (uint32_t d = 0; d < k->out.ndim; d++)
    if (k->out.sizes[d] > 1 && k->out.strides[d] == 0)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "out: dim %u has stride 0 (its elements overlap)", d);
  if (tsr__reduce(k->op)) {
    const tsr_rt_tensor_t *in = &k->in[0];
    if (k->reduce_mask >> in->ndim)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "reduce_mask 0x%x names dims past in[0]'s %u", k->reduce_mask,
                             in->ndim);
    uint32_t od = 0;
    for (uint32_t d = 0; d < in->ndim; d++) {
      bool red = k->reduce_mask & (1u << d);
      if (red && !k->keepdim) continue;
      int64_t want = red ? 1 : in->sizes[d];
      if (od >= k->out.ndim || k->out.sizes[od] != want)
        return tsr_status_make(TSR_INVALID_ARGUMENT, "out: shape does not match in[0] reduced over 0x%x%s",
                               k->reduce_mask, k->keepdim ? " (keepdim)" : "");
      od++;
    }
    if (od != k->out.ndim)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "out: %u dims, the reduction gives %u", k->out.ndim, od);
    if (tsr__overlap(&span[0], &span[1])) return tsr_status_make(TSR_INVALID_ARGUMENT, "out overlaps in[0]");
    return NULL;
  }
  for (int i = 0; i < nin; i++) {
    const tsr_rt_tensor_t *in = &k->in[i];
    if (in->ndim != k->out.ndim)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "in[%d] has %u dims, out %u (give broadcast dims size 1)", i,
                             in->ndim, k->out.ndim);
    for (uint32_t d = 0; d < in->ndim; d++)
      if (in->sizes[d] != k->out.sizes[d] && in->sizes[d] != 1)
        return tsr_status_make(TSR_INVALID_ARGUMENT, "in[%d]: size %lld of dim %u does not broadcast to %lld", i,
                               (long long)in->sizes[d], d, (long long)k->out.sizes[d]);
    if (tsr__overlap(&span[1 + i], &span[0]) && !tsr__same(in, &k->out))
      return tsr_status_make(TSR_INVALID_ARGUMENT,
                             "in[%d] overlaps out without being the same tensor (in place is the same tensor)", i);
  }
  return NULL;
}

/* ---- the last shape validated ------------------------------------------------
 * A stream of tasks of one shape (a chain, a framework's step repeated) is
 * validated in full once: the next task whose operator and operands'
 * dtypes, dims, sizes and strides equal it (its data pointers aside) is
 * checked by its pointers alone (null, alignment, range, overlap of out
 * with an input), and its spans come from the cached ones. A task that
 * fails those checks goes through the full check, which words the error. */
static inline __attribute__((always_inline)) bool tsr__shape_match(const tsr__rt_shape_t *c, const tsr_rt_task_t *k) {
  if (!c->valid || c->op != k->op || c->reduce_mask != k->reduce_mask || c->keepdim != k->keepdim) return false;
  for (int i = 0; i <= c->nin; i++) {
    const tsr_rt_tensor_t *a = tsr__rt_operand(k, i), *b = &c->t[i];
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (uint32_t d = 0; d < b->ndim; d++)
      if (a->sizes[d] != b->sizes[d] || a->strides[d] != b->strides[d]) return false;
  }
  return true;
}

/* The spans of a task of the cached shape; false if a pointer check fails. */
static inline __attribute__((always_inline)) bool tsr__shape_spans(const tsr__rt_shape_t *c, const tsr_rt_task_t *k,
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

/* Remembers a task's shape, validated in full (spans given). */
static void tsr__shape_keep(tsr__rt_shape_t *c, const tsr_rt_task_t *k, int nin, const tsr__span_t *sp) {
  c->valid = true;
  c->op = k->op;
  c->reduce_mask = k->reduce_mask;
  c->keepdim = k->keepdim;
  c->nin = nin;
  bool reduce = tsr__reduce(k->op);
  for (int i = 0; i <= nin; i++) {
    const tsr_rt_tensor_t *t = tsr__rt_operand(k, i);
    c->t[i] = *t;
    c->t[i].data = NULL;
    uint64_t p = (uint64_t)(uintptr_t)t->data;
    c->numel[i] = sp[i].numel;
    c->contig[i] = sp[i].contig;
    c->rel_lo[i] = sp[i].numel ? (int64_t)(sp[i].lo - p) : 0;
    c->rel_hi[i] = sp[i].numel ? (int64_t)(sp[i].hi - p) : 0;
    c->amask[i] = (uint64_t)tsr__rt_esize(t->dtype) - 1;
    /* the same tensor as out, but for its pointer (a reduction's input never is) */
    bool same = i && !reduce && t->dtype == k->out.dtype && t->ndim == k->out.ndim;
    for (uint32_t d = 0; same && d < t->ndim; d++)
      same = t->sizes[d] == k->out.sizes[d] && (t->sizes[d] <= 1 || t->strides[d] == k->out.strides[d]);
    c->same[i] = same;
  }
}

/* Validates a task (tsr__check_task), by its pointers alone when it has
 * the shape validated last. */
static inline __attribute__((always_inline)) tsr_status_t tsr__check(tsr_rt_t *rt, const tsr_rt_task_t *k,
                                                                     tsr__span_t *span) {
  if (tsr__shape_match(rt->shape, k) && tsr__shape_spans(rt->shape, k, span)) return NULL;
  TSR_RETURN_IF_ERROR(tsr__check_task(rt, k, span));
  tsr__shape_keep(rt->shape, k, tsr__inputs(rt, k->op), span);
  return NULL;
}

/* ---- submission ------------------------------------------------------------- */

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
    for (int i = 0; i < nin; i++) l->strides[i + 1][d] = k->in[i].sizes[d] == 1 ? 0 : k->in[i].strides[d];
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
  bool reg = (v->flags & TSR_RT_DESC_CONTIG) && n && n % 4 == 0 && n / 4 <= (uint64_t)TSR_RT_REG_VEC * rt->opt.threads;
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

/* Takes the slot of lane `lane`'s next task, waiting while the ring is full. */
static tsr_status_t tsr__slot(tsr_rt_t *rt, uint32_t lane, uint64_t *out_n, size_t *out_index) {
  uint64_t n = rt->tail[lane] + 1, slots = rt->opt.lane_slots;
  if (n > slots && !tsr__rt_seen(rt, lane, n - slots) && tsr__rt_done(rt, lane) < n - slots) {
    tsr__ring(rt);
    rt->stats.host_waits++;
    TSR_RETURN_IF_ERROR(tsr__wait_lane(rt, lane, n - slots));
  }
  *out_n = n;
  *out_index = (size_t)lane * slots + ((n - 1) & (slots - 1));
  return NULL;
}

tsr_status_t tsr_rt_publish_marker(tsr_rt_t *rt, uint8_t flags) {
  for (uint32_t lane = 0; lane < rt->opt.lanes; lane++) {
    uint64_t n;
    size_t idx;
    TSR_RETURN_IF_ERROR(tsr__slot(rt, lane, &n, &idx));
    tsr_rt_desc_t *d = &rt->desc[idx];
    memset(d, 0, sizeof(*d));
    d->seq = n;
    d->flags = flags;
    rt->run[lane].numel = 0;
    rt->tail[lane] = n;
    tsr__post_lane(rt, lane);
  }
  return NULL;
}

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
      tsr__ring(rt);
      rt->stats.host_waits++;
      TSR_RETURN_IF_ERROR(tsr__wait_lane(rt, deps[i].lane, deps[i].n));
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
  TSR_RETURN_IF_ERROR(tsr__slot(rt, lane, out_n, out_idx));
  uint64_t ticket = rt->next_ticket + 1;
  uint64_t ti = ticket % rt->tmap_size;
  if (ticket > rt->tmap_size && !tsr__rt_seen(rt, rt->tmap[ti].lane, rt->tmap[ti].n))
    TSR_RETURN_IF_ERROR(tsr__wait_lane(rt, rt->tmap[ti].lane, rt->tmap[ti].n));
  *out_ticket = ticket;
  return NULL;
}

/* The descriptor claimed is written: it is the lane's, the ticket's, and
 * its accesses are recorded for the descriptors after it. */
TSR__INLINE tsr_status_t tsr__commit(tsr_rt_t *rt, uint32_t lane, uint64_t n, uint64_t ticket,
                                     const tsr__rt_access_t *acc, uint32_t nacc, bool fresh) {
  rt->tail[lane] = n;
  tsr__written(rt, lane);
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
    tsr__ring(rt);
    rt->stats.host_waits++;
    rt->stats.dep_drains++;
    TSR_RETURN_IF_ERROR(tsr_rt_flush(rt));
    tsr_rt_deps_clear(rt->deps);
  }
  return NULL;
}

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

static tsr_status_t tsr__enqueue(tsr_rt_t *rt, const tsr_rt_task_t *k) {
  bool reduce = tsr__reduce(k->op);
  int nin = tsr__inputs(rt, k->op);
  tsr__span_t sp[TSR_RT_DESC_OPERANDS] = {{0}};
  tsr__rt_access_t acc[TSR_RT_DESC_OPERANDS];
  /* validated before: the spans from the shape cache when it is this
   * task's (a batch of one shape), else computed */
  if (!(tsr__shape_match(rt->shape, k) && tsr__shape_spans(rt->shape, k, sp)))
    for (int i = 0; i <= nin; i++) tsr__span(tsr__rt_operand(k, i), &sp[i]);
  /* an input of exactly out's bytes (in place) needs no access of its
   * own: out's write orders everything its read would */
  uint32_t nacc = 1;
  acc[0] = (tsr__rt_access_t){sp[0].lo, sp[0].hi, true};
  for (int i = 1; i <= nin; i++)
    if (sp[i].lo != sp[0].lo || sp[i].hi != sp[0].hi) acc[nacc++] = (tsr__rt_access_t){sp[i].lo, sp[i].hi, false};
  tsr__rt_place_t p;
  TSR_RETURN_IF_ERROR(tsr__place(rt, acc, nacc, &p));
  uint32_t lane = p.lane;
  uint64_t n, ticket;
  size_t idx;
  TSR_RETURN_IF_ERROR(tsr__claim(rt, lane, &n, &idx, &ticket));
  tsr_rt_desc_t *d = &rt->desc[idx];
  tsr_rt_desc_t v;
  memset(&v, 0, sizeof(v));
  if (tsr__jit(k->op)) {
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
    for (int i = 1; contig && i <= nin; i++) contig = sp[i].contig && sp[i].numel == sp[0].numel;
    if (contig)
      v.flags = TSR_RT_DESC_CONTIG;
    else
      tsr__layout(&rt->layout[idx], k, false, nin);
  }
  if (reduce || tsr__jit(k->op))
    rt->run[lane].numel = 0;
  else
    tsr__reg_flags(rt, lane, &v);
  v.seq = n;
  memcpy(d, &v, sizeof(v));
  return tsr__commit(rt, lane, n, ticket, acc, nacc, p.fresh);
}

/* For group.c. */
int tsr_rt_inputs(const tsr_rt_t *rt, tsr_rt_op_t op) { return tsr__inputs(rt, op); }
tsr_status_t tsr_rt_check(tsr_rt_t *rt, const tsr_rt_task_t *k, tsr__span_t *span) { return tsr__check(rt, k, span); }
bool tsr_rt_same(const tsr_rt_tensor_t *a, const tsr_rt_tensor_t *b) { return tsr__same(a, b); }
tsr_status_t tsr_rt_enqueue(tsr_rt_t *rt, const tsr_rt_task_t *k) { return tsr__enqueue(rt, k); }
void tsr_rt_ring(tsr_rt_t *rt) { tsr__ring(rt); }

void tsr_rt_spread(tsr_rt_t *rt, size_t count) {
  size_t per_lane = count / rt->opt.lanes;
  rt->run_chunk = per_lane < 1 ? 1 : per_lane > TSR__POST_EVERY ? TSR__POST_EVERY : (uint32_t)per_lane;
  rt->run_left = 0;
}

static tsr_status_t tsr__submit(tsr_rt_t *rt, const tsr_rt_task_t *tasks, size_t count, tsr_rt_ticket_t *out_last,
                                bool deferred) {
  if (out_last) *out_last = rt->next_ticket;
  /* the sticky mark only: the doorbell at the end asks the backend (one
   * query a submit, not two) and waits ask it as they wait */
  if (atomic_load(&rt->failed)) return tsr_status_make(TSR_FAILED_PRECONDITION, "the runtime failed: %s", rt->fault);
  if (count && !tasks) return tsr_status_make(TSR_INVALID_ARGUMENT, "tasks is NULL");
  /* the lanes' done counts are read at most once an epoch (tsr__rt_seen),
   * each read a miss on a line the device writes: a new epoch each call,
   * but each TSR__POST_EVERY calls when they come a task at a time (a
   * count read stale only costs a wait the device finds satisfied) */
  if (!deferred || ++rt->deferred_calls >= TSR__POST_EVERY) {
    rt->epoch++;
    rt->deferred_calls = 0;
  }
  if (deferred) {
    /* tasks come one call at a time: independent ones share a lane in
     * runs of TSR__POST_EVERY across calls (run_left carries over) */
    rt->run_chunk = TSR__POST_EVERY;
  } else {
    tsr_rt_spread(rt, count);
  }
  for (size_t i = 0; i < count; i++) {
    tsr__span_t span[TSR_RT_DESC_OPERANDS];
    tsr_status_t st = tsr__check(rt, &tasks[i], span);
    if (st) return tsr_status_annotate(st, "task %zu of the batch (%s)", i, tsr_rt_op_name(tasks[i].op));
  }
  for (size_t i = 0; i < count; i++) {
    tsr_status_t st = tsr__enqueue(rt, &tasks[i]);
    if (st) {
      tsr__ring(rt);
      return tsr_status_annotate(st, "task %zu of the batch", i);
    }
  }
  if (deferred)
    rt->be->doorbell(rt); /* what was posted on the way (a kernel that ended idle restarts) */
  else
    tsr__ring(rt);
  if (out_last) *out_last = rt->next_ticket;
  return NULL;
}

tsr_status_t tsr_rt_submit(tsr_rt_t *rt, const tsr_rt_task_t *tasks, size_t count, tsr_rt_ticket_t *out_last) {
  return tsr__submit(rt, tasks, count, out_last, false);
}

tsr_status_t tsr_rt_submit_deferred(tsr_rt_t *rt, const tsr_rt_task_t *tasks, size_t count, tsr_rt_ticket_t *out_last) {
  return tsr__submit(rt, tasks, count, out_last, true);
}

void tsr_rt_post(tsr_rt_t *rt) { tsr__ring(rt); }

/* ---- JIT operators -------------------------------------------------------- */

/* Frees the slots of replaced versions once every task submitted before
 * the replacement is done (so every task that named them). */
static void tsr__reclaim(tsr_rt_t *rt) {
  for (uint32_t s = 0; s < TSR_RT_JIT_OPS; s++) {
    tsr__rt_slot_t *x = &rt->slots[s];
    if (!x->expr || !x->retired_at) continue;
    bool done = true;
    for (uint32_t lane = 0; done && lane < rt->opt.lanes; lane++) done = tsr__rt_done(rt, lane) >= x->retired_at[lane];
    if (done) {
      tsr_rt_expr_free(x->expr);
      free(x->retired_at);
      memset(x, 0, sizeof(*x));
    }
  }
}

/* Parses `text` into a free slot; *out_slot is it. */
static tsr_status_t tsr__slot_new(tsr_rt_t *rt, const char *text, uint32_t *out_slot) {
  if (!text) return tsr_status_make(TSR_INVALID_ARGUMENT, "no expression");
  tsr__reclaim(rt);
  uint32_t s = 0;
  while (s < TSR_RT_JIT_OPS && rt->slots[s].expr) s++;
  if (s == TSR_RT_JIT_OPS)
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED,
                           "%d JIT operator versions are in use (replaced ones are freed when their tasks are done)",
                           TSR_RT_JIT_OPS);
  tsr_rt_expr_t *e = NULL;
  TSR_RETURN_IF_ERROR(tsr_status_annotate(tsr_rt_expr_parse(text, &e), "expression '%.80s'", text));
  unsigned mask = tsr_rt_expr_inputs(e), arity = 0;
  while (mask >> arity) arity++;
  rt->slots[s] = (tsr__rt_slot_t){.expr = e, .arity = arity};
  if (rt->be->jit_add) {
    tsr_status_t st = rt->be->jit_add(rt, s);
    if (st) {
      tsr_rt_expr_free(e);
      memset(&rt->slots[s], 0, sizeof(rt->slots[s]));
      return st;
    }
  }
  *out_slot = s;
  return NULL;
}

tsr_status_t tsr_rt_register(tsr_rt_t *rt, const char *expression, tsr_rt_op_t *out_op) {
  if (rt->jit_ops == TSR_RT_JIT_OPS)
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED, "%d JIT operators are registered already", TSR_RT_JIT_OPS);
  uint32_t s;
  TSR_RETURN_IF_ERROR(tsr__slot_new(rt, expression, &s));
  rt->jit_slot[rt->jit_ops] = s;
  *out_op = (tsr_rt_op_t)(TSR_RT_OP_JIT_FIRST + (int)rt->jit_ops++);
  return NULL;
}

tsr_status_t tsr_rt_replace(tsr_rt_t *rt, tsr_rt_op_t op, const char *expression) {
  if (!tsr__jit(op) || (uint32_t)op - TSR_RT_OP_JIT_FIRST >= rt->jit_ops)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "operator %d is not a registered JIT operator", (int)op);
  uint32_t k = (uint32_t)op - TSR_RT_OP_JIT_FIRST, old = rt->jit_slot[k], s;
  TSR_RETURN_IF_ERROR(tsr__slot_new(rt, expression, &s));
  if (rt->slots[s].arity != rt->slots[old].arity) {
    uint32_t a = rt->slots[s].arity, b = rt->slots[old].arity;
    tsr_rt_expr_free(rt->slots[s].expr);
    memset(&rt->slots[s], 0, sizeof(rt->slots[s]));
    return tsr_status_make(TSR_INVALID_ARGUMENT, "the new expression takes %u inputs, the operator %u", a, b);
  }
  uint64_t *at = malloc((size_t)rt->opt.lanes * sizeof(*at));
  if (!at) {
    tsr_rt_expr_free(rt->slots[s].expr);
    memset(&rt->slots[s], 0, sizeof(rt->slots[s]));
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  memcpy(at, rt->tail, (size_t)rt->opt.lanes * sizeof(*at));
  /* tasks from now on name the new slot; the old one goes when the tasks
   * before are done */
  rt->jit_slot[k] = s;
  rt->slots[old].retired_at = at;
  tsr__reclaim(rt);
  return NULL;
}

bool tsr_rt_done(tsr_rt_t *rt, tsr_rt_ticket_t t) {
  if (t == 0) return true;
  if (t > rt->next_ticket) return false;
  if (rt->next_ticket - t >= rt->tmap_size) return true; /* its entry was reused: done then */
  uint64_t ti = t % rt->tmap_size;
  if (tsr__rt_done(rt, rt->tmap[ti].lane) >= rt->tmap[ti].n) return true;
  /* not yet: a caller that only polls this must still see the kernel
   * relaunched if it ended idle just as the work came (the doorbell costs
   * one load while the kernel runs) */
  tsr__ring(rt);
  return false;
}

tsr_status_t tsr_rt_wait(tsr_rt_t *rt, tsr_rt_ticket_t t) {
  if (t > rt->next_ticket)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "ticket %llu was never given (the last is %llu)",
                           (unsigned long long)t, (unsigned long long)rt->next_ticket);
  if (t == 0 || rt->next_ticket - t >= rt->tmap_size) return NULL;
  uint64_t ti = t % rt->tmap_size;
  return tsr__wait_lane(rt, rt->tmap[ti].lane, rt->tmap[ti].n);
}

tsr_status_t tsr_rt_flush(tsr_rt_t *rt) {
  for (uint32_t lane = 0; lane < rt->opt.lanes; lane++) TSR_RETURN_IF_ERROR(tsr__wait_lane(rt, lane, rt->tail[lane]));
  return NULL;
}

void tsr_rt_stats(tsr_rt_t *rt, tsr_rt_stats_t *out) {
  *out = rt->stats;
  out->lanes = rt->opt.lanes;
  out->lane_slots = rt->opt.lane_slots;
  out->threads = rt->opt.threads;
  uint64_t c = 0;
  for (uint32_t lane = 0; lane < rt->opt.lanes; lane++) c += tsr__rt_done(rt, lane);
  out->completed = c;
  if (rt->be->device_stats) rt->be->device_stats(rt, out);
}

tsr_status_t tsr_rt_alloc(tsr_rt_t *rt, size_t bytes, void **out_ptr) {
  *out_ptr = NULL;
  if (!bytes) return tsr_status_make(TSR_INVALID_ARGUMENT, "an allocation of 0 bytes");
  return rt->be->alloc(rt, bytes, out_ptr);
}
void tsr_rt_free(tsr_rt_t *rt, void *ptr) {
  if (ptr) rt->be->free(rt, ptr);
}
tsr_status_t tsr_rt_upload(tsr_rt_t *rt, void *dst, const void *src, size_t bytes) {
  return rt->be->copy(rt, dst, src, bytes, true);
}
tsr_status_t tsr_rt_download(tsr_rt_t *rt, void *dst, const void *src, size_t bytes) {
  return rt->be->copy(rt, dst, src, bytes, false);
}
