/* cpu.c: the CPU backend: one host thread per lane stands in for one block
 * of the persistent kernel, over the same rings and the same protocol
 * (acquire the lane's posted count, run, publish done), computing with the same
 * functions (rt/ops.h). CI's test double of the device, and a reference.
 * Memory is host memory. An idle lane spins a little, then sleeps on a
 * condition variable that the doorbell broadcasts. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt/internal.h"
#include "rt/ops.h"

typedef struct {
  tsr_rt_t *rt;
  pthread_t *threads;
  uint32_t started;
  pthread_mutex_t mu;
  pthread_cond_t bell;
  uint64_t rings; /* doorbells rung, under mu */
  void *mem;      /* desc, layout and done in one block */
} tsr__cpu_t;

typedef struct {
  tsr__cpu_t *c;
  uint32_t lane;
} tsr__lane_arg_t;

/* A JIT operator: the expression evaluated in double on f32 inputs,
 * rounded to f32 (as the device computes it in f32). */
static void tsr__run_jit(const tsr_rt_t *rt, const tsr_rt_desc_t *t, const tsr_rt_layout_t *l) {
  const tsr_rt_expr_t *e = rt->slots[t->op - TSR_RT_DESC_JIT].expr;
  int n = 1 + t->nin;
  for (uint64_t i = 0; i < t->numel; i++) {
    int64_t off[TSR_RT_DESC_OPERANDS];
    if (t->flags & TSR_RT_DESC_CONTIG)
      for (int k = 0; k < n; k++) off[k] = (int64_t)i;
    else
      tsr_rt_offsets_n(l, t->ndim, i, off, n);
    double in[4] = {0, 0, 0, 0};
    for (int k = 1; k < n; k++) in[k - 1] = tsr_rt_input(t, (unsigned)(k - 1), off[k]);
    tsr_rt_store((void *)(uintptr_t)t->ptr[0], off[0], t->dtype[0], (float)tsr_rt_expr_eval(e, in));
  }
}

static void tsr__run(const tsr_rt_t *rt, const tsr_rt_desc_t *t, const tsr_rt_layout_t *l) {
  if (t->flags & TSR_RT_DESC_GROUP) {
    /* the items last to first: the device runs them in no order, so a
     * descriptor whose items depend on each other (the host must never
     * pack those) gives a wrong answer here too */
    for (uint64_t k = t->rnumel; k-- > 0;) {
      tsr_rt_desc_t item;
      tsr_rt_group_item(t, l, k, &item);
      tsr__run(rt, &item, NULL);
    }
    return;
  }
  if (t->op >= TSR_RT_DESC_JIT) {
    tsr__run_jit(rt, t, l);
    return;
  }
  if (t->flags & TSR_RT_DESC_REDUCE) {
    for (uint64_t o = 0; o < t->numel; o++) {
      int64_t off;
      float v = tsr_rt_reduce_part(t, l, o, 0, 1, &off);
      if (t->op == TSR_RT_OP_MEAN) v *= t->scalar[0];
      tsr_rt_store((void *)(uintptr_t)t->ptr[0], off, t->dtype[0], v);
    }
    return;
  }
  for (uint64_t i = 0; i < t->numel; i++) tsr_rt_element(t, l, i);
}

static void *tsr__lane_main(void *p) {
  tsr__lane_arg_t a = *(tsr__lane_arg_t *)p;
  free(p);
  tsr__cpu_t *c = a.c;
  tsr_rt_t *rt = c->rt;
  uint32_t slots = rt->opt.lane_slots;
  uint64_t rnd = 0x9e3779b97f4a7c15ull * (a.lane + 1);
  for (uint64_t n = 1;; n++) {
    size_t idx = (size_t)a.lane * slots + ((n - 1) & (slots - 1));
    tsr_rt_desc_t *d = &rt->desc[idx];
    _Atomic uint64_t *posted = &rt->posted[(size_t)a.lane * TSR_RT_DONE_STRIDE];
    for (unsigned spins = 0; atomic_load_explicit(posted, memory_order_acquire) < n; spins++) {
      if (spins < 200) {
        sched_yield();
        continue;
      }
      pthread_mutex_lock(&c->mu);
      uint64_t seen = c->rings;
      while (atomic_load_explicit(posted, memory_order_acquire) < n && c->rings == seen)
        pthread_cond_wait(&c->bell, &c->mu);
      pthread_mutex_unlock(&c->mu);
      spins = 0;
    }
    tsr_rt_desc_t t = *d;
    if (t.flags & TSR_RT_DESC_STOP) break;
    if (t.flags & TSR_RT_DESC_SWITCH) { /* a generation's end: nothing to run here */
      atomic_store_explicit(&rt->done[(size_t)a.lane * TSR_RT_DONE_STRIDE], n, memory_order_release);
      continue;
    }
    if (rt->opt.cpu_jitter_us) {
      rnd ^= rnd << 13;
      rnd ^= rnd >> 7;
      rnd ^= rnd << 17;
      struct timespec ts = {0, (long)(rnd % rt->opt.cpu_jitter_us) * 1000};
      nanosleep(&ts, NULL);
    }
    for (uint32_t k = 0; k < t.nwait; k++)
      while (!tsr_rt_reached(tsr__rt_done(rt, t.wait_lane[k]), t.wait_seq[k])) sched_yield();
    tsr__run(rt, &t, &rt->layout[idx]);
    atomic_store_explicit(&rt->done[(size_t)a.lane * TSR_RT_DONE_STRIDE], n, memory_order_release);
  }
  return NULL;
}

static void tsr__cpu_doorbell(tsr_rt_t *rt) {
  tsr__cpu_t *c = rt->be_state;
  pthread_mutex_lock(&c->mu);
  c->rings++;
  pthread_cond_broadcast(&c->bell);
  pthread_mutex_unlock(&c->mu);
}

TSR_MUST_USE static tsr_status_t tsr__cpu_stop(tsr_rt_t *rt) {
  tsr__cpu_t *c = rt->be_state;
  if (!c) return NULL;
  tsr__cpu_doorbell(rt);
  for (uint32_t i = 0; i < c->started; i++) pthread_join(c->threads[i], NULL);
  pthread_cond_destroy(&c->bell);
  pthread_mutex_destroy(&c->mu);
  free(c->threads);
  free(c->mem);
  free(c);
  rt->be_state = NULL;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__cpu_start(tsr_rt_t *rt) {
  if (!rt->opt.lanes) rt->opt.lanes = 4;
  uint32_t lanes = rt->opt.lanes;
  size_t nd = (size_t)lanes * rt->opt.lane_slots;
  size_t bytes = nd * sizeof(tsr_rt_desc_t) + nd * sizeof(tsr_rt_layout_t) +
                 2 * (size_t)lanes * TSR_RT_DONE_STRIDE * sizeof(uint64_t);
  tsr__cpu_t *c = calloc(1, sizeof(*c));
  void *mem = NULL;
  if (!c || posix_memalign(&mem, 128, bytes) != 0) {
    free(c);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory for %u lanes of %u slots", lanes, rt->opt.lane_slots);
  }
  memset(mem, 0, bytes);
  c->mem = mem;
  c->rt = rt;
  rt->desc = mem;
  rt->layout = (tsr_rt_layout_t *)(rt->desc + nd);
  rt->done = (_Atomic uint64_t *)(rt->layout + nd);
  rt->posted = rt->done + (size_t)lanes * TSR_RT_DONE_STRIDE;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->bell, NULL);
  rt->be_state = c;
  c->threads = calloc(lanes, sizeof(*c->threads));
  if (!c->threads) {
    tsr_status_free(tsr__cpu_stop(rt)); /* it never fails */
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  for (uint32_t i = 0; i < lanes; i++) {
    tsr__lane_arg_t *a = malloc(sizeof(*a));
    if (a) *a = (tsr__lane_arg_t){c, i};
    if (!a || pthread_create(&c->threads[i], NULL, tsr__lane_main, a) != 0) {
      free(a);
      /* the started lanes need a STOP to end: none was published, so stop them by hand */
      tsr_status_t st = tsr_status_make(TSR_RESOURCE_EXHAUSTED, "could not start lane thread %u", i);
      for (uint32_t j = 0; j < c->started; j++) {
        tsr_rt_desc_t *d = &rt->desc[(size_t)j * rt->opt.lane_slots];
        d->seq = 1;
        d->flags = TSR_RT_DESC_STOP;
        tsr__rt_post(rt, j, 1);
      }
      tsr_status_free(tsr__cpu_stop(rt)); /* it never fails */
      return st;
    }
    c->started++;
  }
  return NULL;
}

static const char *tsr__cpu_fault(tsr_rt_t *rt) {
  (void)rt;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__cpu_alloc(tsr_rt_t *rt, size_t bytes, void **out) {
  (void)rt;
  if (posix_memalign(out, 256, bytes) != 0) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  return NULL;
}
static void tsr__cpu_free(tsr_rt_t *rt, void *p) {
  (void)rt;
  free(p);
}
TSR_MUST_USE static tsr_status_t tsr__cpu_copy(tsr_rt_t *rt, void *dst, const void *src, size_t bytes, bool to_device) {
  (void)rt;
  (void)to_device;
  memmove(dst, src, bytes);
  return NULL;
}

const tsr__rt_backend_ops_t tsr_rt_cpu = {
    .name = "cpu",
    .start = tsr__cpu_start,
    .doorbell = tsr__cpu_doorbell,
    .stop = tsr__cpu_stop,
    .fault = tsr__cpu_fault,
    .alloc = tsr__cpu_alloc,
    .free = tsr__cpu_free,
    .copy = tsr__cpu_copy,
};
