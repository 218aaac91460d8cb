/* bench_frontier.c: ns per operation of libtessera-frontier's hot paths,
 * beside a straightforward reference implementation measured in the same run
 * and the issue's target, with a count of heap allocations made inside the
 * timed loops (malloc and friends are interposed in this binary).
 *
 *   bench_frontier [--quick]
 *
 * Operations at 1, 4, 16 and 64 entries, for equal axis sets (both frontiers
 * over the same axes) and interleaved axis sets (one over even ordinals, the
 * other over odd ones): compare, merge, dominates, insert-or-raise,
 * find-undominated. Then semaphore signal+import and queue submit with 1-4
 * waits (elided and issued). Each row is the median of 21 timed batches of
 * about 10 ms (3 ms with --quick), with the fastest batch beside it as a
 * measure of noise from other load on the machine; tessera's batches and
 * the reference's alternate, so that the machine's changes of speed fall
 * on both. Output is a Markdown table. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_record.h"
#include "tessera/frontier.h"

/* ==== counting allocator ================================================== */
/* Every allocation entry point of glibc is wrapped; the counter is read
 * before and after the timed batches of each row. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static _Atomic uint64_t g_allocs;

void *malloc(size_t n) {
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  return __libc_malloc(n);
}
void *calloc(size_t n, size_t m) {
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n) {
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  return __libc_realloc(p, n);
}
void *aligned_alloc(size_t a, size_t n) {
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  return __libc_memalign(a, n);
}
int posix_memalign(void **out, size_t a, size_t n) {
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  *out = __libc_memalign(a, n);
  return *out ? 0 : 12 /* ENOMEM */;
}
void free(void *p) { __libc_free(p); }

static uint64_t allocs_now(void) { return atomic_load(&g_allocs); }

/* ==== timing ============================================================== */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t g_sink;
static uint64_t g_batch_ns = 10000000; /* 10 ms */
#define BATCHES 21

typedef void (*body_fn)(void *ctx, uint64_t iters);

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Iterations of `body` that take about g_batch_ns. */
static uint64_t calibrate(body_fn body, void *ctx) {
  uint64_t iters = 64;
  for (;;) {
    uint64_t t0 = now_ns();
    body(ctx, iters);
    uint64_t dt = now_ns() - t0;
    if (dt >= g_batch_ns / 4 || iters > (UINT64_C(1) << 34)) {
      iters = dt ? (uint64_t)((double)iters * (double)g_batch_ns / (double)dt) : iters * 4;
      return iters < 16 ? 16 : iters;
    }
    iters *= 4;
  }
}

/* Median ns per iteration of `t` (its fastest batch in *t_min) and of `r`
 * (when not NULL) in *r_median (its fastest in *r_min); adds to *allocs
 * what the timed batches allocated. With a reference, the batches alternate
 * (t r, then r t, and so on), so that a change in the machine's speed
 * during the row -- other load, the clock -- falls on both alike. */
static double measure(body_fn t, body_fn r, void *ctx, uint64_t *allocs, double *t_min, double *r_median,
                      double *r_min) {
  const uint64_t ti = calibrate(t, ctx), ri = r ? calibrate(r, ctx) : 0;
  double tper[BATCHES], rper[BATCHES];
  uint64_t a0 = allocs_now();
  for (int b = 0; b < BATCHES; b++) {
    for (int k = 0; k < 2; k++) {
      const bool tessera = (k == 0) == (b % 2 == 0);
      if (!tessera && !r) continue;
      const uint64_t iters = tessera ? ti : ri;
      uint64_t t0 = now_ns();
      (tessera ? t : r)(ctx, iters);
      (tessera ? tper : rper)[b] = (double)(now_ns() - t0) / (double)iters;
    }
  }
  *allocs += allocs_now() - a0;
  qsort(tper, BATCHES, sizeof(tper[0]), cmp_double);
  *t_min = tper[0];
  if (r) {
    qsort(rper, BATCHES, sizeof(rper[0]), cmp_double);
    *r_median = rper[BATCHES / 2];
    *r_min = rper[0];
  }
  return tper[BATCHES / 2];
}

/* ==== reference implementation ============================================ */
/* What a first, straightforward implementation looks like: one general
 * two-pointer walk for everything (no equal-axis fast path), merge through a
 * temporary array, linear search for insert and for find-undominated. Same
 * data layout as tessera, so the difference is the algorithmic care. Not
 * static inline: kept out of line, like the library's. */

typedef struct {
  uint32_t count, capacity;
  tsr_frontier_entry_t e[128];
} ref_frontier_t;

__attribute__((noinline)) static int ref_compare(const ref_frontier_t *a, const ref_frontier_t *b) {
  bool aa = false, bb = false;
  uint32_t i = 0, j = 0;
  while (i < a->count && j < b->count) {
    if (a->e[i].axis == b->e[j].axis) {
      if (a->e[i].epoch > b->e[j].epoch) aa = true;
      if (a->e[i].epoch < b->e[j].epoch) bb = true;
      i++, j++;
    } else if (a->e[i].axis < b->e[j].axis) {
      aa = true, i++;
    } else {
      bb = true, j++;
    }
  }
  if (i < a->count) aa = true;
  if (j < b->count) bb = true;
  return !aa && !bb ? 0 : !aa ? 1 : !bb ? 2 : 3;
}

__attribute__((noinline)) static void ref_merge(ref_frontier_t *d, const ref_frontier_t *s) {
  tsr_frontier_entry_t tmp[256];
  uint32_t i = 0, j = 0, n = 0;
  while (i < d->count || j < s->count) {
    if (j == s->count || (i < d->count && d->e[i].axis < s->e[j].axis)) {
      tmp[n++] = d->e[i++];
    } else if (i == d->count || s->e[j].axis < d->e[i].axis) {
      tmp[n++] = s->e[j++];
    } else {
      tmp[n] = d->e[i];
      if (s->e[j].epoch > tmp[n].epoch) tmp[n].epoch = s->e[j].epoch;
      n++, i++, j++;
    }
  }
  memcpy(d->e, tmp, n * sizeof(tmp[0]));
  d->count = n;
}

__attribute__((noinline)) static bool ref_dominates(const ref_frontier_t *h, const ref_frontier_t *r) {
  uint32_t i = 0;
  for (uint32_t j = 0; j < r->count; j++) {
    while (i < h->count && h->e[i].axis < r->e[j].axis) i++;
    if (i == h->count || h->e[i].axis != r->e[j].axis || h->e[i].epoch < r->e[j].epoch) return false;
  }
  return true;
}

__attribute__((noinline)) static void ref_insert_or_raise(ref_frontier_t *f, tsr_axis_t a, uint64_t e) {
  uint32_t i = 0;
  while (i < f->count && f->e[i].axis < a) i++;
  if (i < f->count && f->e[i].axis == a) {
    if (f->e[i].epoch < e) f->e[i].epoch = e;
    return;
  }
  memmove(&f->e[i + 1], &f->e[i], (f->count - i) * sizeof(f->e[0]));
  f->e[i].axis = a;
  f->e[i].epoch = e;
  f->count++;
}

__attribute__((noinline)) static uint32_t ref_find_undominated(const ref_frontier_t *h, const ref_frontier_t *r,
                                                               ref_frontier_t *out) {
  out->count = 0;
  for (uint32_t j = 0; j < r->count; j++) {
    uint64_t have = 0;
    for (uint32_t i = 0; i < h->count; i++)
      if (h->e[i].axis == r->e[j].axis) have = h->e[i].epoch;
    if (have < r->e[j].epoch) out->e[out->count++] = r->e[j];
  }
  return out->count;
}

/* ==== fixtures ============================================================ */

typedef TSR_FRONTIER_STORAGE(256) storage_t;

static tsr_axis_t ax(uint64_t ordinal) { return tsr_axis_make(0, TSR_AXIS_DOMAIN_QUEUE, 1, ordinal); }

/* Fills a tessera frontier and its reference twin with `n` entries on
 * ordinals start, start + stride, ... and epochs base + i. */
static void fill(tsr_frontier_t *f, ref_frontier_t *r, uint32_t n, uint64_t start, uint64_t stride, uint64_t base) {
  tsr_frontier_clear(f);
  r->count = 0;
  r->capacity = 128;
  for (uint32_t i = 0; i < n; i++) {
    tsr_frontier_insert_or_raise(f, ax(start + i * stride), base + i);
    r->e[r->count].axis = ax(start + i * stride);
    r->e[r->count].epoch = base + i;
    r->count++;
  }
}

typedef struct {
  tsr_frontier_t *a, *b, *out;
  ref_frontier_t ra, rb, rout;
  tsr_frontier_t *a0; /* pristine copy of a, for bodies that must restore */
  ref_frontier_t ra0;
  tsr_axis_t axis;
  uint64_t epoch;
} ctx_t;

/* ---- bodies (tessera) ---- */
/* The frontiers' pointers are read into locals before the loop, as a caller
 * holds them; the reference's bodies take addresses within the context,
 * which need no load either. */
static void t_compare(void *c, uint64_t n) {
  ctx_t *x = c;
  const tsr_frontier_t *a = x->a, *b = x->b;
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++) s += tsr_frontier_compare(a, b);
  g_sink += s;
}
static void t_merge(void *c, uint64_t n) {
  ctx_t *x = c;
  tsr_frontier_t *a = x->a;
  const tsr_frontier_t *b = x->b;
  for (uint64_t i = 0; i < n; i++) tsr_frontier_merge(a, b);
  g_sink += a->entries[0].epoch;
}
static void t_merge_restore(void *c, uint64_t n) {
  ctx_t *x = c;
  tsr_frontier_t *a = x->a;
  const tsr_frontier_t *a0 = x->a0, *b = x->b;
  for (uint64_t i = 0; i < n; i++) {
    memcpy(a, a0, tsr_frontier_size(a0->count));
    tsr_frontier_merge(a, b);
  }
  g_sink += a->count;
}
static void t_restore_only(void *c, uint64_t n) {
  ctx_t *x = c;
  tsr_frontier_t *a = x->a;
  const tsr_frontier_t *a0 = x->a0;
  for (uint64_t i = 0; i < n; i++) {
    memcpy(a, a0, tsr_frontier_size(a0->count));
    __asm__ volatile("" ::: "memory");
  }
  g_sink += a->count;
}
static void t_dominates(void *c, uint64_t n) {
  ctx_t *x = c;
  const tsr_frontier_t *a = x->a, *b = x->b;
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++) s += tsr_frontier_dominates(a, b);
  g_sink += s;
}
static void t_raise(void *c, uint64_t n) {
  ctx_t *x = c;
  tsr_frontier_t *a = x->a;
  for (uint64_t i = 0; i < n; i++) tsr_frontier_insert_or_raise(a, x->axis, ++x->epoch);
  g_sink += a->count;
}
static void t_insert_restore(void *c, uint64_t n) {
  ctx_t *x = c;
  tsr_frontier_t *a = x->a;
  const tsr_frontier_t *a0 = x->a0;
  for (uint64_t i = 0; i < n; i++) {
    memcpy(a, a0, tsr_frontier_size(a0->count));
    tsr_frontier_insert_or_raise(a, x->axis, 7);
  }
  g_sink += a->count;
}
static void t_find(void *c, uint64_t n) {
  ctx_t *x = c;
  const tsr_frontier_t *a = x->a, *b = x->b;
  tsr_frontier_t *out = x->out;
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++) s += tsr_frontier_find_undominated(a, b, out);
  g_sink += s + out->count;
}

/* ---- bodies (reference) ---- */
static void r_compare(void *c, uint64_t n) {
  ctx_t *x = c;
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++) s += (uint64_t)ref_compare(&x->ra, &x->rb);
  g_sink += s;
}
static void r_merge(void *c, uint64_t n) {
  ctx_t *x = c;
  for (uint64_t i = 0; i < n; i++) ref_merge(&x->ra, &x->rb);
  g_sink += x->ra.e[0].epoch;
}
static void r_merge_restore(void *c, uint64_t n) {
  ctx_t *x = c;
  for (uint64_t i = 0; i < n; i++) {
    x->ra.count = x->ra0.count;
    memcpy(x->ra.e, x->ra0.e, x->ra0.count * sizeof(x->ra.e[0]));
    ref_merge(&x->ra, &x->rb);
  }
  g_sink += x->ra.count;
}
static void r_dominates(void *c, uint64_t n) {
  ctx_t *x = c;
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++) s += ref_dominates(&x->ra, &x->rb);
  g_sink += s;
}
static void r_raise(void *c, uint64_t n) {
  ctx_t *x = c;
  for (uint64_t i = 0; i < n; i++) ref_insert_or_raise(&x->ra, x->axis, ++x->epoch);
  g_sink += x->ra.count;
}
static void r_insert_restore(void *c, uint64_t n) {
  ctx_t *x = c;
  for (uint64_t i = 0; i < n; i++) {
    x->ra.count = x->ra0.count;
    memcpy(x->ra.e, x->ra0.e, x->ra0.count * sizeof(x->ra.e[0]));
    ref_insert_or_raise(&x->ra, x->axis, 7);
  }
  g_sink += x->ra.count;
}
static void r_find(void *c, uint64_t n) {
  ctx_t *x = c;
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++) s += ref_find_undominated(&x->ra, &x->rb, &x->rout);
  g_sink += s;
}

/* ==== table =============================================================== */

static uint64_t g_total_allocs;

static void row(const char *op, uint32_t n, const char *axes, body_fn t, body_fn r, void *ctx, const char *target,
                const char *note) {
  uint64_t allocs = 0;
  double tmin = 0, rn = 0, rmin = 0;
  double tn = measure(t, r, ctx, &allocs, &tmin, &rn, &rmin);
  g_total_allocs += allocs;
  char rs[32] = "-", rf[32] = "-", ratio[32] = "-", fratio[32] = "-";
  if (r) {
    snprintf(rs, sizeof rs, "%.1f", rn);
    snprintf(rf, sizeof rf, "%.1f", rmin);
    snprintf(ratio, sizeof ratio, "%.2f", rn / tn);
    snprintf(fratio, sizeof fratio, "%.2f", rmin / tmin);
  }
  printf("| %s | %u | %s | %.1f | %.1f | %s | %s | %s | %s | %s | %llu | %s |\n", op, n, axes, tn, tmin, rs, rf, ratio,
         fratio, target, (unsigned long long)allocs, note);
  fflush(stdout);
  tsr_bench_record_t *rec = strcmp(axes, "-") ? tsr_bench_record_begin("frontier", "%s, n=%u, %s", op, n, axes)
                                              : tsr_bench_record_begin("frontier", "%s, n=%u", op, n);
  tsr_bench_record_figure(rec, tn, "tessera_ns");
  tsr_bench_record_figure(rec, tmin, "tessera_fastest_ns");
  if (r) {
    tsr_bench_record_figure(rec, rn, "reference_ns");
    tsr_bench_record_figure(rec, rmin, "reference_fastest_ns");
    tsr_bench_record_figure(rec, rn / tn, "ratio");
    tsr_bench_record_figure(rec, rmin / tmin, "fastest_ratio");
  }
  tsr_bench_record_figure(rec, (double)allocs, "heap_allocs");
  char goal[32];
  snprintf(goal, sizeof goal, "<= %s ns", target);
  tsr_bench_record_end(rec, strcmp(target, "-") ? goal : NULL, NULL);
}

static const char *target_for(const char *op, const char *axes, uint32_t n) {
  if (strcmp(axes, "equal") != 0) return "-";
  if (strcmp(op, "compare") != 0 && strcmp(op, "merge") != 0) return "-";
  switch (n) {
    case 1: return "3";
    case 4: return "6";
    case 16: return "15";
    case 64: return "65";
  }
  return "-";
}

/* Sanity: tessera and the reference agree on the fixture before timing. */
static void agree(ctx_t *x) {
  int tc = (int)tsr_frontier_compare(x->a, x->b);
  int rc = ref_compare(&x->ra, &x->rb);
  /* tessera's enum: 0 equal, 1 before, 2 after, 3 concurrent; reference:
   * 0 equal, 1 = a behind (before), 2 = b behind (after), 3 concurrent */
  if (tc != rc || tsr_frontier_dominates(x->a, x->b) != ref_dominates(&x->ra, &x->rb)) {
    fprintf(stderr, "bench: tessera and reference disagree\n");
    exit(1);
  }
}

static void frontier_rows(void) {
  static const uint32_t sizes[] = {1, 4, 16, 64};
  static storage_t sa, sb, so, sa0;
  ctx_t x;
  /* axis sets: 0 equal, 1 interleaved (even and odd ordinals), 2 separate
   * (a on ordinals 0..n-1, b on n..2n-1: disjoint ranges) */
  for (int axes = 0; axes < 3; axes++) {
    const char *an = axes == 0 ? "equal" : axes == 1 ? "interleaved" : "separate";
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
      uint32_t n = sizes[k];
      x.a = tsr_frontier_init(&sa, 256, TSR_FRONTIER_KNOWLEDGE);
      x.b = tsr_frontier_init(&sb, 256, TSR_FRONTIER_KNOWLEDGE);
      x.out = tsr_frontier_init(&so, 256, TSR_FRONTIER_REQUIREMENT);
      x.a0 = tsr_frontier_init(&sa0, 256, TSR_FRONTIER_KNOWLEDGE);

      /* compare: equal epochs (EQUAL, full scan) / even vs odd axes */
      if (axes == 0) {
        fill(x.a, &x.ra, n, 0, 1, 100);
        fill(x.b, &x.rb, n, 0, 1, 100);
      } else if (axes == 1) {
        fill(x.a, &x.ra, n, 0, 2, 100);
        fill(x.b, &x.rb, n, 1, 2, 100);
      } else {
        fill(x.a, &x.ra, n, 0, 1, 100);
        fill(x.b, &x.rb, n, n, 1, 100);
      }
      agree(&x);
      row("compare", n, an, t_compare, r_compare, &x, target_for("compare", an, n),
          axes == 0 ? "result equal: full scan" : "result concurrent");

      /* merge: equal axes, src ahead everywhere (in place, no restore: after
       * the first call dst knows src, so each call does the steady state's
       * work: tessera's lock step stores the maximum, its one-entry merge
       * stores nothing) / interleaved: union of 2n, dst restored every
       * iteration */
      if (axes == 0) {
        fill(x.a, &x.ra, n, 0, 1, 100);
        fill(x.b, &x.rb, n, 0, 1, 200);
        row("merge", n, an, t_merge, r_merge, &x, target_for("merge", an, n), "src ahead on all");
      } else {
        fill(x.a0, &x.ra0, n, 0, axes == 1 ? 2 : 1, 100);
        fill(x.a, &x.ra, n, 0, axes == 1 ? 2 : 1, 100);
        fill(x.b, &x.rb, n, axes == 1 ? 1 : n, axes == 1 ? 2 : 1, 100);
        row("merge", n, an, t_merge_restore, r_merge_restore, &x, "-", "into 2n; includes the restore copy");
        row("(restore copy alone)", n, an, t_restore_only, NULL, &x, "-", "subtract from above");
      }

      /* dominates: have == need axes, have ahead (true after a full scan) /
       * have holds 2n axes, need the n odd ones */
      if (axes == 0) {
        fill(x.a, &x.ra, n, 0, 1, 200);
        fill(x.b, &x.rb, n, 0, 1, 100);
      } else if (axes == 1) {
        fill(x.a, &x.ra, 2 * n, 0, 1, 200);
        fill(x.b, &x.rb, n, 1, 2, 100);
      } else {
        fill(x.a, &x.ra, n, 0, 1, 200);
        fill(x.b, &x.rb, n, n, 1, 100);
      }
      agree(&x);
      row("dominates", n, an, t_dominates, r_dominates, &x, "-",
          axes == 0   ? "true: full scan"
          : axes == 1 ? "have 2n, need n odd: true"
                      : "false: need's axes all above have's");

      /* insert-or-raise: raise the middle axis (equal) / insert a new axis in
       * the middle of n even axes, restored every iteration (interleaved) */
      if (axes == 0) {
        fill(x.a, &x.ra, n, 0, 1, 100);
        x.axis = ax(n / 2);
        x.epoch = 1000;
        row("insert_or_raise", n, an, t_raise, r_raise, &x, "-", "raise existing axis");
        x.epoch = 1000;
      } else if (axes == 1) {
        fill(x.a0, &x.ra0, n, 0, 2, 100);
        fill(x.a, &x.ra, n, 0, 2, 100);
        x.axis = ax(n | 1); /* odd: new, lands in the middle */
        row("insert_or_raise", n, an, t_insert_restore, r_insert_restore, &x, "-",
            "insert new axis; includes the restore copy");
      } else {
        fill(x.a0, &x.ra0, n, 0, 1, 100);
        fill(x.a, &x.ra, n, 0, 1, 100);
        x.axis = ax(2 * n); /* past the last: appended */
        row("insert_or_raise", n, an, t_insert_restore, r_insert_restore, &x, "-",
            "append a new axis; includes the restore copy");
      }

      /* find-undominated: need ahead on every other entry (n/2 missing) */
      if (axes == 0) {
        fill(x.a, &x.ra, n, 0, 1, 100);
        fill(x.b, &x.rb, n, 0, 1, 100);
        for (uint32_t i = 0; i < n; i += 2) x.b->entries[i].epoch = x.rb.e[i].epoch = 500;
      } else if (axes == 1) {
        fill(x.a, &x.ra, 2 * n, 0, 1, 100);
        fill(x.b, &x.rb, n, 1, 2, 100);
        for (uint32_t i = 0; i < n; i += 2) x.b->entries[i].epoch = x.rb.e[i].epoch = 500;
      } else {
        fill(x.a, &x.ra, n, 0, 1, 100);
        fill(x.b, &x.rb, n, n, 1, 100);
      }
      row("find_undominated", n, an, t_find, r_find, &x, "-",
          axes == 0   ? "n/2 missing"
          : axes == 1 ? "have 2n, need n odd, n/2 missing"
                      : "all n missing");
    }
  }
}

/* ==== semaphores and queues ============================================== */

typedef struct {
  tsr_semaphore_t *s;
  tsr_queue_t producer;
  tsr_frontier_t *k;
  uint64_t v;
} sem_ctx_t;

static void s_signal_import(void *c, uint64_t n) {
  sem_ctx_t *x = c;
  for (uint64_t i = 0; i < n; i++) {
    x->v++;
    tsr_semaphore_signal(x->s, x->v, x->producer.axis, x->producer.frontier);
    tsr_semaphore_import(x->s, x->v, x->k);
  }
  g_sink += x->k->count;
}

typedef struct {
  tsr_semaphore_t *sems[4];
  tsr_queue_t producers[4];
  tsr_queue_t consumer;
  tsr_queue_wait_t waits[4];
  uint32_t nwaits;
  uint64_t next; /* issued variant: next value to wait for */
} q_ctx_t;

#define ISSUE_BATCH 512

static void q_submit_elided(void *c, uint64_t n) {
  q_ctx_t *x = c;
  uint64_t issue, acc = 0;
  for (uint64_t i = 0; i < n; i++) {
    tsr_queue_submit(&x->consumer, x->waits, x->nwaits, &issue);
    acc |= issue;
  }
  if (acc) {
    fprintf(stderr, "bench: elided waits were issued\n");
    exit(1);
  }
  g_sink += x->consumer.epoch;
}

/* Each submit waits for fresh values, so every wait is issued and imports a
 * frontier. Producers pre-signal in blocks of ISSUE_BATCH values (their
 * time is counted too: reported as part of the row; see the note). */
static void q_submit_issued(void *c, uint64_t n) {
  q_ctx_t *x = c;
  uint64_t issue, acc = ~UINT64_C(0);
  for (uint64_t i = 0; i < n; i++) {
    if (x->next % ISSUE_BATCH == 0) {
      for (uint64_t v = x->next + 1; v <= x->next + ISSUE_BATCH; v++) {
        for (uint32_t j = 0; j < x->nwaits; j++) {
          tsr_queue_submit(&x->producers[j], NULL, 0, NULL);
          tsr_queue_signal(&x->producers[j], x->sems[j], v);
        }
      }
    }
    x->next++;
    for (uint32_t j = 0; j < x->nwaits; j++) x->waits[j].value = x->next;
    tsr_queue_submit(&x->consumer, x->waits, x->nwaits, &issue);
    acc &= issue;
  }
  if (acc != (UINT64_C(1) << x->nwaits) - 1) {
    fprintf(stderr, "bench: issued waits were elided\n");
    exit(1);
  }
  g_sink += x->consumer.epoch;
}

/* The producers' share of q_submit_issued, alone. */
static void q_produce_only(void *c, uint64_t n) {
  q_ctx_t *x = c;
  for (uint64_t i = 0; i < n; i++) {
    if (x->next % ISSUE_BATCH == 0) {
      for (uint64_t v = x->next + 1; v <= x->next + ISSUE_BATCH; v++) {
        for (uint32_t j = 0; j < x->nwaits; j++) {
          tsr_queue_submit(&x->producers[j], NULL, 0, NULL);
          tsr_queue_signal(&x->producers[j], x->sems[j], v);
        }
      }
    }
    x->next++;
  }
  g_sink += x->next;
}

static void must(tsr_status_t st) {
  if (st) {
    fprintf(stderr, "bench: %s\n", tsr_status_message(st));
    exit(1);
  }
}

static void semaphore_rows(void) {
  static TSR_FRONTIER_STORAGE(8) sp, sk;
  sem_ctx_t x;
  tsr_semaphore_options_t o = {0, 64, 8};
  must(tsr_semaphore_create(&o, &x.s));
  must(tsr_queue_init(&x.producer, ax(1000), tsr_frontier_init(&sp, 8, TSR_FRONTIER_KNOWLEDGE)));
  /* the producer's frontier: its own axis and 3 others (4 entries) */
  for (uint64_t i = 1; i <= 3; i++) tsr_frontier_insert_or_raise(x.producer.frontier, ax(i), 5);
  tsr_queue_submit(&x.producer, NULL, 0, NULL);
  x.k = tsr_frontier_init(&sk, 8, TSR_FRONTIER_KNOWLEDGE);
  x.v = 0;
  row("semaphore signal+import", 4, "-", s_signal_import, NULL, &x, "-",
      "one signal and one import of its frontier, uncontended");
  tsr_semaphore_destroy(x.s);
}

static void queue_rows(void) {
  static TSR_FRONTIER_STORAGE(16) sc, sp[4];
  for (uint32_t w = 1; w <= 4; w++) {
    for (int variant = 0; variant < 2; variant++) {
      q_ctx_t x;
      memset(&x, 0, sizeof x);
      tsr_semaphore_options_t o = {0, ISSUE_BATCH * 2, 8};
      must(tsr_queue_init(&x.consumer, ax(2000), tsr_frontier_init(&sc, 16, TSR_FRONTIER_KNOWLEDGE)));
      for (uint32_t j = 0; j < w; j++) {
        must(tsr_semaphore_create(&o, &x.sems[j]));
        must(tsr_queue_init(&x.producers[j], ax(3000 + j), tsr_frontier_init(&sp[j], 16, TSR_FRONTIER_KNOWLEDGE)));
        x.waits[j].semaphore = x.sems[j];
      }
      x.nwaits = w;
      if (variant == 0) {
        /* consumer already knows each producer's first signal */
        for (uint32_t j = 0; j < w; j++) {
          tsr_queue_submit(&x.producers[j], NULL, 0, NULL);
          tsr_queue_signal(&x.producers[j], x.sems[j], 1);
          x.waits[j].value = 1;
        }
        uint64_t issue;
        tsr_queue_submit(&x.consumer, x.waits, w, &issue);
        row("queue submit, waits elided", w, "-", q_submit_elided, NULL, &x, "-", "waits on values already covered");
      } else {
        x.next = 0;
        row("queue submit, waits issued", w, "-", q_submit_issued, NULL, &x, "-",
            "fresh values: issue + import; includes producers' signals");
        x.next = 0;
        for (uint32_t j = 0; j < w; j++) {
          tsr_semaphore_destroy(x.sems[j]);
          must(tsr_semaphore_create(&o, &x.sems[j]));
          x.waits[j].semaphore = x.sems[j];
          tsr_frontier_clear(x.producers[j].frontier);
          x.producers[j].epoch = 0;
        }
        row("(producers' signals alone)", w, "-", q_produce_only, NULL, &x, "-", "subtract from above");
      }
      for (uint32_t j = 0; j < w; j++) tsr_semaphore_destroy(x.sems[j]);
    }
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--quick") == 0) g_batch_ns = 3000000;
  printf(
      "| operation | entries | axis sets | tessera ns/op (median) | tessera fastest batch | "
      "reference ns/op (median) | reference fastest batch | reference / tessera (medians) | "
      "(fastest batches) | target ns | heap allocs in timed loops | case |\n");
  printf("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  frontier_rows();
  semaphore_rows();
  queue_rows();
  printf("\nheap allocations inside all timed loops: %llu\n", (unsigned long long)g_total_allocs);
  tsr_bench_record_t *rec = tsr_bench_record_begin("frontier", "all timed loops");
  tsr_bench_record_figure(rec, (double)g_total_allocs, "heap_allocs");
  tsr_bench_record_end(rec, NULL, NULL);
  return 0;
}
