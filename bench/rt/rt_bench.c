/* rt_bench: libtessera-rt's side of the bench/rt table: the
 * workloads of torch_baselines.py, run through the runtime, in the same
 * line format (key=value), so run.sh can put them side by side.
 *
 *   rt_bench [--only adds,chain,mixed,fused,reduce,jit] [--reps N] [--slots N] [--lanes N] [--threads N] [--cpu]
 *
 * fused is mixed as one JIT operator a iteration ("sigmoid(relu((A + B) *
 * C)) / D"); jit times, for both ways of making a kernel generation
 * (linked by nvJitLink, or one whole compile: TESSERA_RT_JIT_LINK), the
 * first register of an operator with an empty compiled-operator cache
 * (XDG_CACHE_HOME is pointed at a fresh folder), the same register in a
 * second runtime (from the cache) and a new operator in a third; then
 * replace under load (host time of the call).
 *
 * --slots sets the lanes' ring size (default 256): with 16384 a 10,000-task
 * chain is submitted without waiting for the device, which tells the
 * host's cost from the device's.
 *
 * Times are host wall time (CLOCK_MONOTONIC) from before the submit of the
 * first task to the return of flush: submission, the device's work and
 * the wait, everything a caller waits for. submit_us_per_op is the host
 * time of the submit calls alone. Median and min over --reps repetitions
 * (default 5) after 2 warm-up runs. Every result is checked against a
 * host computation after the timed runs; a mismatch is an error (exit 1).
 * Without a GPU it prints SKIP and exits 77 (--cpu runs the CPU backend:
 * the code paths, not speed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/rt.h"

static tsr_rt_t *rt;
static int reps = 5;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, tsr_status_t st) {
  fprintf(stderr, "rt_bench: %s: %s\n", what, st ? tsr_status_message(st) : "failed");
  exit(1);
}

static void *dev(size_t bytes) {
  void *p = NULL;
  tsr_status_t st = tsr_rt_alloc(rt, bytes, &p);
  if (st) die("alloc", st);
  return p;
}

static uint64_t rng = 42;
static float randn(void) {
  /* Box-Muller on a xorshift */
  double u[2];
  for (int k = 0; k < 2; k++) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    u[k] = ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
  }
  return (float)(sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]));
}

static float *host_randn(size_t n) {
  float *p = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = randn();
  return p;
}

static void *dev_from(const float *h, size_t n) {
  void *d = dev(n * 4);
  tsr_status_t st = tsr_rt_upload(rt, d, h, n * 4);
  if (st) die("upload", st);
  return d;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* What a measurement submits: `n` tasks, or a group. */
typedef struct {
  const tsr_rt_task_t *tasks;
  size_t n;
  const tsr_rt_group_t *group;
  bool one_a_call; /* each task by its own tsr_rt_submit_deferred, as a framework's operators come */
} work_t;

TSR_MUST_USE static tsr_status_t submit_work(const work_t *w) {
  if (w->group) return tsr_rt_submit_group(rt, w->group, NULL, NULL);
  if (!w->one_a_call) return tsr_rt_submit(rt, w->tasks, w->n, NULL);
  for (size_t i = 0; i < w->n; i++) {
    tsr_status_t st = tsr_rt_submit_deferred(rt, &w->tasks[i], 1, NULL);
    if (st) return st;
  }
  tsr_rt_post(rt);
  return NULL;
}

static void measure_work(const char *head, const work_t *w, size_t ops, void (*reset)(void), const char *tail);

/* Runs tasks[0..n) `reps` times after 2 warm-ups (reset, if given, before
 * each); prints the line. */
static void measure(const char *head, const tsr_rt_task_t *tasks, size_t n, size_t ops, void (*reset)(void),
                    const char *tail) {
  work_t w = {tasks, n, NULL, false};
  measure_work(head, &w, ops, reset, tail);
}

static void measure_work(const char *head, const work_t *w, size_t ops, void (*reset)(void), const char *tail) {
  double t[64], sub[64];
  tsr_rt_stats_t s0, s1;
  for (int r = -2; r < reps; r++) {
    if (r == 0) tsr_rt_stats(rt, &s0);
    if (reset) reset();
    tsr_status_t st = tsr_rt_flush(rt);
    if (st) die("flush", st);
    double t0 = now_s();
    st = submit_work(w);
    double t1 = now_s();
    if (!st) st = tsr_rt_flush(rt);
    double t2 = now_s();
    if (st) die(head, st);
    if (r >= 0) {
      t[r] = (t2 - t0) * 1e3;
      sub[r] = (t1 - t0) * 1e6 / (double)ops;
    }
  }
  tsr_rt_stats(rt, &s1);
  qsort(t, (size_t)reps, sizeof(double), cmp_d);
  qsort(sub, (size_t)reps, sizeof(double), cmp_d);
  double med = t[reps / 2];
  /* where the device's time went over the timed runs (CUDA backend) */
  char dev[256] = "";
  double b = (double)(s1.device_batches - s0.device_batches), k = (double)(s1.device_tasks - s0.device_tasks);
  if (b > 0 && k > 0 && s1.device_clock_khz) {
    double us = 1e3 / s1.device_clock_khz; /* per cycle */
    snprintf(dev, sizeof(dev),
             " dev_tasks_per_batch=%.1f dev_fetch_us_per_batch=%.3f dev_run_us_per_task=%.3f dev_wait_us_per_task=%.3f "
             "dev_publish_us_per_batch=%.3f",
             k / b, (double)(s1.device_fetch_cycles - s0.device_fetch_cycles) * us / b,
             (double)(s1.device_run_cycles - s0.device_run_cycles) * us / k,
             (double)(s1.device_wait_cycles - s0.device_wait_cycles) * us / k,
             (double)(s1.device_publish_cycles - s0.device_publish_cycles) * us / b);
  }
  printf("%s impl=tessera ops=%zu total_ms_median=%.3f total_ms_min=%.3f per_op_us=%.3f submit_us_per_op=%.3f%s%s\n",
         head, ops, med, t[0], med * 1e3 / (double)ops, sub[reps / 2], dev, tail ? tail : "");
  fflush(stdout);
}

static void binary(tsr_rt_task_t *t, tsr_rt_op_t op, void *out, void *a, void *b, int64_t n) {
  *t = (tsr_rt_task_t){.op = op};
  tsr_rt_tensor_contiguous(&t->out, out, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&t->in[0], a, TSR_RT_F32, 1, &n);
  if (b) tsr_rt_tensor_contiguous(&t->in[1], b, TSR_RT_F32, 1, &n);
}

static void check(const char *what, const float *got, const float *want, size_t n, double rtol, double atol) {
  for (size_t i = 0; i < n; i++)
    if (!(fabs((double)got[i] - want[i]) <= atol + rtol * fabs((double)want[i]))) {
      fprintf(stderr, "rt_bench: check failed: %s [%zu]: %g, want %g\n", what, i, got[i], want[i]);
      exit(1);
    }
}

static void adds(void) {
  enum { T = 10000 };
  const int64_t sizes[4] = {256, 1024, 4096, 16384};
  static tsr_rt_task_t ts[T];
  for (int s = 0; s < 4; s++) {
    int64_t n = sizes[s];
    size_t all = (size_t)T * (size_t)n;
    float *hx = host_randn(all), *hy = host_randn(all);
    float *x = dev_from(hx, all), *y = dev_from(hy, all), *o = dev(all * 4);
    for (int i = 0; i < T; i++)
      binary(&ts[i], TSR_RT_OP_ADD, o + (size_t)i * n, x + (size_t)i * n, y + (size_t)i * n, n);
    char head[96];
    snprintf(head, sizeof(head), "workload=adds size=%lld", (long long)n);
    measure(head, ts, T, T, NULL, NULL);
    float *got = malloc(all * 4);
    tsr_status_free(tsr_rt_download(rt, got, o, all * 4));
    for (size_t i = 0; i < all; i++) hy[i] += hx[i];
    check("adds", got, hy, all, 0, 0);
    /* the same adds as one group (tsr_rt_submit_group: a foreach) */
    static void *po[T], *px[T], *py[T];
    for (int i = 0; i < T; i++) po[i] = o + (size_t)i * n, px[i] = x + (size_t)i * n, py[i] = y + (size_t)i * n;
    tsr_rt_group_t g = {.task = ts[0], .count = T, .out = po, .in = {px, py}};
    work_t w = {NULL, 0, &g, false};
    snprintf(head, sizeof(head), "workload=adds_group size=%lld", (long long)n);
    tsr_status_free(tsr_rt_upload(rt, o, hx, all * 4)); /* not the answer: the group must write it */
    measure_work(head, &w, T, NULL, NULL);
    tsr_status_free(tsr_rt_download(rt, got, o, all * 4));
    check("adds_group", got, hy, all, 0, 0);
    /* and one task a call (tsr_rt_submit_deferred), as the PyTorch front submits */
    work_t w1 = {ts, T, NULL, true};
    snprintf(head, sizeof(head), "workload=adds_one_a_call size=%lld", (long long)n);
    tsr_status_free(tsr_rt_upload(rt, o, hx, all * 4));
    measure_work(head, &w1, T, NULL, NULL);
    tsr_status_free(tsr_rt_download(rt, got, o, all * 4));
    check("adds_one_a_call", got, hy, all, 0, 0);
    free(got);
    free(hx);
    free(hy);
    tsr_rt_free(rt, x);
    tsr_rt_free(rt, y);
    tsr_rt_free(rt, o);
  }
}

static float *chain_x, *chain_x0h;
static void chain_reset(void) { tsr_status_free(tsr_rt_upload(rt, chain_x, chain_x0h, 1024 * 4)); }

static void chain(void) {
  enum { N = 1024, T = 10000 };
  static tsr_rt_task_t ts[T];
  chain_x0h = host_randn(N);
  float *hy = host_randn(N), hh[N];
  for (int i = 0; i < N; i++) hh[i] = 0.5f;
  chain_x = dev(N * 4);
  float *y = dev_from(hy, N), *h = dev_from(hh, N), *x = chain_x;
  for (int i = 0; i < T; i += 5) {
    binary(&ts[i], TSR_RT_OP_ADD, x, x, y, N);
    binary(&ts[i + 1], TSR_RT_OP_MUL, x, x, h, N);
    binary(&ts[i + 2], TSR_RT_OP_RELU, x, x, NULL, N);
    binary(&ts[i + 3], TSR_RT_OP_SIGMOID, x, x, NULL, N);
    binary(&ts[i + 4], TSR_RT_OP_SUB, x, x, y, N);
  }
  measure("workload=chain size=1024", ts, T, T, chain_reset, NULL);
  float got[N], want[N];
  tsr_status_free(tsr_rt_download(rt, got, x, N * 4));
  for (int i = 0; i < N; i++) {
    float v = chain_x0h[i];
    for (int k = 0; k < T / 5; k++) {
      v = v + hy[i];
      v = v * 0.5f;
      v = v > 0 ? v : 0;
      v = 1.f / (1.f + expf(-v));
      v = v - hy[i];
    }
    want[i] = v;
  }
  check("chain", got, want, N, 1e-4, 1e-5);
  /* the same length of chain with one operator, x = x + y: the device's
   * cost of a dependent step when every step runs the same code */
  for (int i = 0; i < T; i++) binary(&ts[i], TSR_RT_OP_ADD, x, x, y, N);
  measure("workload=chain_add size=1024", ts, T, T, chain_reset, NULL);
  tsr_status_free(tsr_rt_download(rt, got, x, N * 4));
  for (int i = 0; i < N; i++) {
    float v = chain_x0h[i];
    for (int k = 0; k < T; k++) v = v + hy[i];
    want[i] = v;
  }
  check("chain_add", got, want, N, 1e-4, 1e-3);
  free(chain_x0h);
  free(hy);
  tsr_rt_free(rt, x);
  tsr_rt_free(rt, y);
  tsr_rt_free(rt, h);
}

static void mixed(void) {
  enum { N = 2048, IT = 1000, T = 5 * IT };
  static tsr_rt_task_t ts[T];
  float *ha = host_randn(N), *hb = host_randn(N), *hc = host_randn(N), *hd = host_randn(N);
  for (int i = 0; i < N; i++) hd[i] = 1.f + fabsf(hd[i]);
  float *a = dev_from(ha, N), *b = dev_from(hb, N), *c = dev_from(hc, N), *d = dev_from(hd, N);
  /* every op's result a fresh buffer, as eager allocates */
  float *tmp = dev((size_t)T * N * 4);
  for (int it = 0; it < IT; it++) {
    float *x = tmp + (size_t)(5 * it) * N, *y = x + N, *z = y + N, *w = z + N, *out = w + N;
    binary(&ts[5 * it], TSR_RT_OP_ADD, x, a, b, N);
    binary(&ts[5 * it + 1], TSR_RT_OP_MUL, y, x, c, N);
    binary(&ts[5 * it + 2], TSR_RT_OP_RELU, z, y, NULL, N);
    binary(&ts[5 * it + 3], TSR_RT_OP_SIGMOID, w, z, NULL, N);
    binary(&ts[5 * it + 4], TSR_RT_OP_DIV, out, w, d, N);
  }
  measure("workload=mixed size=2048 iters=1000", ts, T, T, NULL, " fused=no");
  float got[N], want[N];
  tsr_status_free(tsr_rt_download(rt, got, tmp + (size_t)(T - 1) * N, N * 4));
  for (int i = 0; i < N; i++) {
    double v = ((double)ha[i] + hb[i]) * hc[i];
    v = v > 0 ? v : 0;
    want[i] = (float)(1 / (1 + exp(-v)) / hd[i]);
  }
  check("mixed", got, want, N, 1e-5, 1e-6);
  free(ha), free(hb), free(hc), free(hd);
  tsr_rt_free(rt, a), tsr_rt_free(rt, b), tsr_rt_free(rt, c), tsr_rt_free(rt, d), tsr_rt_free(rt, tmp);
}

static void fused(void) {
  enum { N = 2048, IT = 1000 };
  static tsr_rt_task_t ts[IT];
  float *ha = host_randn(N), *hb = host_randn(N), *hc = host_randn(N), *hd = host_randn(N);
  for (int i = 0; i < N; i++) hd[i] = 1.f + fabsf(hd[i]);
  float *a = dev_from(ha, N), *b = dev_from(hb, N), *c = dev_from(hc, N), *d = dev_from(hd, N);
  float *outs = dev((size_t)IT * N * 4);
  tsr_rt_op_t op = 0;
  tsr_status_t st = tsr_rt_register(rt, "sigmoid(relu((A + B) * C)) / D", &op);
  if (st) die("register the fused operator", st);
  int64_t n = N;
  for (int it = 0; it < IT; it++) {
    ts[it] = (tsr_rt_task_t){.op = op};
    tsr_rt_tensor_contiguous(&ts[it].out, outs + (size_t)it * N, TSR_RT_F32, 1, &n);
    float *in[4] = {a, b, c, d};
    for (int k = 0; k < 4; k++) tsr_rt_tensor_contiguous(&ts[it].in[k], in[k], TSR_RT_F32, 1, &n);
  }
  measure("workload=mixed_fused size=2048 iters=1000", ts, IT, IT, NULL, NULL);
  float got[N], want[N];
  tsr_status_free(tsr_rt_download(rt, got, outs + (size_t)(IT - 1) * N, N * 4));
  for (int i = 0; i < N; i++) {
    double v = ((double)ha[i] + hb[i]) * hc[i];
    v = v > 0 ? v : 0;
    want[i] = (float)(1 / (1 + exp(-v)) / hd[i]);
  }
  check("fused", got, want, N, 1e-5, 1e-6);
  free(ha), free(hb), free(hc), free(hd);
  tsr_rt_free(rt, a), tsr_rt_free(rt, b), tsr_rt_free(rt, c), tsr_rt_free(rt, d), tsr_rt_free(rt, outs);
}

/* Registers `text` in a fresh runtime; the host time of the call, ms. */
/* A new operator's first use in a fresh runtime: register, one task of
 * 4096 floats, its result waited for (ms). */
static double register_fresh(const tsr_rt_options_t *o, const char *text) {
  tsr_rt_t *fresh = NULL;
  tsr_status_t st = tsr_rt_create(o, &fresh);
  if (st) die("a fresh runtime", st);
  enum { N = 4096 };
  void *buf = NULL;
  st = tsr_rt_alloc(fresh, 5 * N * 4, &buf);
  if (st) die("alloc", st);
  tsr_rt_task_t t = {0};
  int64_t n = N;
  tsr_rt_tensor_contiguous(&t.out, buf, TSR_RT_F32, 1, &n);
  for (int k = 0; k < 4; k++) tsr_rt_tensor_contiguous(&t.in[k], (float *)buf + (k + 1) * N, TSR_RT_F32, 1, &n);
  tsr_rt_op_t op = 0;
  double t0 = now_s();
  st = tsr_rt_register(fresh, text, &op);
  if (st) die("register", st);
  t.op = op;
  tsr_rt_ticket_t tk = 0;
  st = tsr_rt_submit(fresh, &t, 1, &tk);
  if (!st) st = tsr_rt_wait(fresh, tk);
  double ms = (now_s() - t0) * 1e3;
  if (st) die("first task", st);
  tsr_rt_free(fresh, buf);
  tsr_status_free(tsr_rt_destroy(fresh));
  return ms;
}

static void jit(const tsr_rt_options_t *o) {
  char dir[] = "/tmp/tsr-rt-bench-cache-XXXXXX";
  if (!mkdtemp(dir)) {
    fprintf(stderr, "rt_bench: mkdtemp failed\n");
    exit(1);
  }
  setenv("XDG_CACHE_HOME", dir, 1);
  /* A new operator's first use (register, a task, its result): interpreted
   * (the default, rt/prog.h), and both ways of making a kernel generation
   * (TESSERA_RT_JIT=compile, rt/jit.h), each with a cache of its own (a
   * subfolder per way): in a fresh runtime with an empty cache (cold), the
   * same operator in another fresh runtime (from the cache), and a new
   * operator (linked: the kernel comes from the cache, only the operators
   * compile). The whole compile takes about 40 s an operator: only with
   * RT_BENCH_WHOLE=1. */
  const char *modes[3] = {"interpret", "linked", "whole"};
  int nmodes = getenv("RT_BENCH_WHOLE") && strcmp(getenv("RT_BENCH_WHOLE"), "1") == 0 ? 3 : 2;
  for (int m = 0; m < nmodes; m++) {
    char sub[96];
    snprintf(sub, sizeof(sub), "%s/%s", dir, modes[m]);
    setenv("XDG_CACHE_HOME", sub, 1);
    setenv("TESSERA_RT_JIT", m ? "compile" : "interpret", 1);
    setenv("TESSERA_RT_JIT_LINK", m == 2 ? "0" : "1", 1);
    double cold = register_fresh(o, "A * B + sigmoid(C) - tanh(D)");
    double cached = register_fresh(o, "A * B + sigmoid(C) - tanh(D)");
    double fresh_op = register_fresh(o, "relu(A - B) * C + D");
    printf(
        "workload=jit_generation impl=tessera mode=%s first_use_cold_ms=%.3f first_use_cached_ms=%.3f "
        "first_use_new_operator_ms=%.3f\n",
        modes[m], cold, cached, fresh_op);
  }
  unsetenv("TESSERA_RT_JIT_LINK");
  unsetenv("TESSERA_RT_JIT");
  setenv("XDG_CACHE_HOME", dir, 1);
  double t0;
  tsr_status_t st;
  /* replace under load: the host time of each call, tasks in flight */
  enum { N = 1024, SWAPS = 20, PER = 500 };
  float *h = host_randn(N);
  float *x = dev_from(h, N), *y = dev((size_t)PER * N * 4);
  tsr_rt_op_t sw = 0;
  st = tsr_rt_register(rt, "A + 1", &sw);
  if (st) die("register", st);
  static tsr_rt_task_t ts[PER];
  int64_t n = N;
  for (int p = 0; p < PER; p++) {
    ts[p] = (tsr_rt_task_t){.op = sw};
    tsr_rt_tensor_contiguous(&ts[p].out, y + (size_t)p * N, TSR_RT_F32, 1, &n);
    tsr_rt_tensor_contiguous(&ts[p].in[0], x, TSR_RT_F32, 1, &n);
  }
  double swaps[SWAPS];
  for (int k = 0; k < SWAPS; k++) {
    st = tsr_rt_submit(rt, ts, PER, NULL);
    if (st) die("submit", st);
    char t[16];
    snprintf(t, sizeof(t), "A + %d", 1 + (k + 1) % 2);
    t0 = now_s();
    st = tsr_rt_replace(rt, sw, t);
    swaps[k] = (now_s() - t0) * 1e3;
    if (st) die("replace", st);
  }
  st = tsr_rt_flush(rt);
  if (st) die("flush", st);
  qsort(swaps, SWAPS, sizeof(double), cmp_d);
  printf("workload=jit impl=tessera replace_under_load_ms_median=%.3f replace_under_load_ms_max=%.3f\n",
         swaps[SWAPS / 2], swaps[SWAPS - 1]);
  free(h);
  tsr_rt_free(rt, x), tsr_rt_free(rt, y);
  char cmd[96];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "rt_bench: could not remove %s\n", dir);
}

static void reduce(void) {
  enum { T = 1000 };
  const int64_t shapes[4][2] = {{8, 256}, {32, 128}, {64, 512}, {128, 1024}};
  static tsr_rt_task_t ts[T];
  for (int s = 0; s < 4; s++) {
    int64_t r = shapes[s][0], c = shapes[s][1];
    float *hx = host_randn((size_t)(r * c));
    float *x = dev_from(hx, (size_t)(r * c)), *o = dev((size_t)T * (size_t)r * 4);
    for (int i = 0; i < T; i++) {
      ts[i] = (tsr_rt_task_t){.op = TSR_RT_OP_SUM, .reduce_mask = 2};
      tsr_rt_tensor_contiguous(&ts[i].in[0], x, TSR_RT_F32, 2, shapes[s]);
      tsr_rt_tensor_contiguous(&ts[i].out, o + (size_t)i * (size_t)r, TSR_RT_F32, 1, &r);
    }
    char head[128];
    snprintf(head, sizeof(head), "workload=reduce shape=%lldx%lld dim=-1 op=sum", (long long)r, (long long)c);
    measure(head, ts, T, T, NULL, NULL);
    float *got = malloc((size_t)r * 4), *want = malloc((size_t)r * 4);
    tsr_status_free(tsr_rt_download(rt, got, o + (size_t)(T - 1) * (size_t)r, (size_t)r * 4));
    for (int64_t i = 0; i < r; i++) {
      double acc = 0;
      for (int64_t j = 0; j < c; j++) acc += hx[i * c + j];
      want[i] = (float)acc;
    }
    check("reduce", got, want, (size_t)r, 1e-5, 1e-4);
    free(got), free(want), free(hx);
    tsr_rt_free(rt, x), tsr_rt_free(rt, o);
  }
}

int main(int argc, char **argv) {
  const char *only = "adds,chain,mixed,fused,reduce,jit";
  tsr_rt_options_t o = {.backend = TSR_RT_BACKEND_CUDA};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
      if (reps < 1 || reps > 64) {
        fprintf(stderr, "rt_bench: --reps must be 1 to 64\n");
        return 1;
      }
    } else if (strcmp(argv[i], "--slots") == 0 && i + 1 < argc) {
      o.lane_slots = (uint32_t)atoi(argv[++i]);
    } else if (strcmp(argv[i], "--lanes") == 0 && i + 1 < argc) {
      o.lanes = (uint32_t)atoi(argv[++i]);
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      o.threads = (uint32_t)atoi(argv[++i]);
    } else if (strcmp(argv[i], "--cpu") == 0) {
      o.backend = TSR_RT_BACKEND_CPU;
    } else {
      fprintf(stderr,
              "usage: rt_bench [--only adds,chain,mixed,fused,reduce,jit] [--reps N] [--slots N] [--lanes N] "
              "[--threads N] [--cpu]\n");
      return 1;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  tsr_status_t st = tsr_rt_create(&o, &rt);
  if (st && tsr_status_code(st) == TSR_INVALID_ARGUMENT) die("options", st);
  if (st) {
    printf("SKIP: %s\n", tsr_status_message(st));
    return 77;
  }
  tsr_rt_stats_t s;
  tsr_rt_stats(rt, &s);
  printf("impl=tessera lanes=%u lane_slots=%u threads=%u descriptor_bytes=%zu reps=%d backend=%s\n", s.lanes,
         s.lane_slots, s.threads, tsr_rt_descriptor_bytes(), reps, o.backend == TSR_RT_BACKEND_CPU ? "cpu" : "cuda");
  if (strstr(only, "adds")) adds();
  if (strstr(only, "chain")) chain();
  if (strstr(only, "mixed")) mixed();
  if (strstr(only, "fused")) fused();
  if (strstr(only, "reduce")) reduce();
  if (strstr(only, "jit")) jit(&o);
  tsr_rt_stats(rt, &s);
  printf("impl=tessera submitted=%llu cross_lane_waits=%llu host_waits=%llu\n", (unsigned long long)s.submitted,
         (unsigned long long)s.cross_lane_waits, (unsigned long long)s.host_waits);
  st = tsr_rt_destroy(rt);
  if (st) die("destroy", st);
  return 0;
}
