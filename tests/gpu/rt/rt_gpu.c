/* libtessera-rt on a real GPU: every builtin operator and dtype
 * against a float64 reference on fresh random inputs, strided, broadcast
 * and transposed operands, reductions over every axis set with and without
 * keepdim, dependent chains and joins across lanes, groups of tasks
 * (tsr_rt_submit_group) against a reference that runs their items in
 * order, 100,000 tasks in flight, parking the kernel, shutdown with work
 * pending, and a faulting task.
 *
 *   rt_gpu            exit 0: every check passed; 1: a check failed (FAIL:
 *                     lines); 77: no CUDA device (one line says why)
 *   rt_gpu --cpu      the same checks on the CPU backend (CI runs this:
 *                     it keeps the checks honest where no GPU is), but the
 *                     fault, which only a device can make
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../unit/rt/reference.h"
#include "rt/ops.h"
#include "tessera/rt.h"

static int fails, checks;
#define CHECK(cond, ...)            \
  do {                              \
    checks++;                       \
    if (!(cond)) {                  \
      fails++;                      \
      printf("FAIL: " __VA_ARGS__); \
      printf("\n");                 \
    }                               \
  } while (0)

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double urand(double lo, double hi) { return tsr_test_urand(&rng, lo, hi); }

static double get(const void *p, int64_t i, tsr_rt_dtype_t t) { return tsr_rt_load(p, i, t); }
static void put(void *p, int64_t i, tsr_rt_dtype_t t, double v) { tsr_rt_store(p, i, t, (float)v); }

static tsr_rt_t *rt;
static tsr_rt_options_t opts; /* the backend under test */

static void *dev(size_t bytes) {
  void *p = NULL;
  tsr_status_t st = tsr_rt_alloc(rt, bytes, &p);
  if (st) {
    printf("FAIL: alloc %zu: %s\n", bytes, tsr_status_message(st));
    exit(1);
  }
  return p;
}
static void up(void *d, const void *h, size_t b) { tsr_status_free(tsr_rt_upload(rt, d, h, b)); }
static void down(void *h, const void *d, size_t b) { tsr_status_free(tsr_rt_download(rt, h, d, b)); }
static void run(const tsr_rt_task_t *t, size_t n) {
  tsr_status_t st = tsr_rt_submit(rt, t, n, NULL);
  if (!st) st = tsr_rt_flush(rt);
  if (st) {
    printf("FAIL: run: %s\n", tsr_status_message(st));
    exit(1);
  }
}

/* The tolerance: an f32 result within 2 ulp-ish of the reference, halves
 * within their rounding. */
static bool close_to(double got, double want, tsr_rt_dtype_t t) {
  double tol = t == TSR_RT_F32 ? 2e-6 : (t == TSR_RT_F16 ? 1e-3 : 8e-3);
  if (isnan(want)) return isnan(got);
  return fabs(got - want) <= tol * fmax(1.0, fabs(want)) + 1e-30;
}

/* Every elementwise operator, every dtype, contiguous and strided with a
 * broadcast second input (out 33 x 47, in[0] its transpose's view, in[1]
 * a row). */
static void elementwise(void) {
  enum { R = 33, C = 47, N = R * C };
  tsr_rt_dtype_t dts[3] = {TSR_RT_F32, TSR_RT_F16, TSR_RT_BF16};
  void *da = dev(N * 4), *db = dev(N * 4), *dout = dev(N * 4);
  static char ha[N * 4], hb[N * 4], hout[N * 4];
  for (int op = TSR_RT_OP_ADD; op <= TSR_RT_OP_COPY; op++)
    for (int di = 0; di < 3; di++)
      for (int strided = 0; strided < 2; strided++) {
        tsr_rt_dtype_t dt = dts[di];
        bool pos = op == TSR_RT_OP_LOG || op == TSR_RT_OP_SQRT || op == TSR_RT_OP_POW;
        for (int i = 0; i < N; i++) {
          put(ha, i, dt, urand(pos ? 0.1 : -5, 5));
          double b = urand(op == TSR_RT_OP_POW ? -2 : -5, op == TSR_RT_OP_POW ? 2 : 5);
          if (op == TSR_RT_OP_DIV) b += b < 0 ? -0.5 : 0.5;
          put(hb, i, dt, b);
        }
        up(da, ha, N * 4);
        up(db, hb, N * 4);
        tsr_rt_task_t t = {.op = op, .scalar = {0.1f, 2.5f}};
        if (op == TSR_RT_OP_CLAMP || op == TSR_RT_OP_HARDTANH) t.scalar[0] = -1.5f;
        int64_t sz[2] = {R, C};
        tsr_rt_tensor_contiguous(&t.out, dout, dt, 2, sz);
        tsr_rt_tensor_contiguous(&t.in[0], da, dt, 2, sz);
        tsr_rt_tensor_contiguous(&t.in[1], db, dt, 2, sz);
        if (strided) {
          t.in[0].strides[0] = 1, t.in[0].strides[1] = R; /* element (i, j) at j*R + i */
          t.in[1].sizes[0] = 1;                           /* row 0, broadcast */
        }
        run(&t, 1);
        down(hout, dout, N * 4);
        int bad = 0;
        for (int i = 0; i < R && bad < 3; i++)
          for (int j = 0; j < C && bad < 3; j++) {
            double a = get(ha, strided ? j * R + i : i * C + j, dt);
            double b = get(hb, strided ? j : i * C + j, dt);
            double want = tsr_test_ref(op, a, op <= TSR_RT_OP_POW ? b : 0, t.scalar[0], t.scalar[1]);
            /* the reference rounded as the result is stored */
            char one[4];
            put(one, 0, dt, want);
            double got = get(hout, i * C + j, dt);
            if (!close_to(got, get(one, 0, dt), dt)) {
              bad++;
              CHECK(false, "%s %s%s (%d, %d): a=%g b=%g got %.9g want %.9g", tsr_rt_op_name(op),
                    dt == TSR_RT_F32   ? "f32"
                    : dt == TSR_RT_F16 ? "f16"
                                       : "bf16",
                    strided ? " strided" : "", i, j, a, b, got, want);
            }
          }
        CHECK(bad == 0, "%s: see above", tsr_rt_op_name(op));
      }
  tsr_rt_free(rt, da);
  tsr_rt_free(rt, db);
  tsr_rt_free(rt, dout);
  printf("elementwise: %d operators x 3 dtypes x {contiguous, strided+broadcast}\n", TSR_RT_OP_COPY);
}

/* The operators added for the PyTorch front (neg .. clamp_tensor): every
 * dtype, contiguous and strided (in[0] transposed, in[1] a broadcast row),
 * and with each input in turn a number instead of a tensor. */
static void newer_operators(void) {
  enum { R = 33, C = 47, N = R * C };
  tsr_rt_dtype_t dts[3] = {TSR_RT_F32, TSR_RT_F16, TSR_RT_BF16};
  void *d[3] = {dev(N * 4), dev(N * 4), dev(N * 4)}, *dout = dev(N * 4);
  static char h[3][N * 4], hout[N * 4];
  int cases = 0;
  for (int op = TSR_RT_OP_NEG; op < TSR_RT_OP_COUNT_; op++) {
    int nin = tsr_test_arity(op);
    bool pos = tsr_test_positive_only(op);
    for (int di = 0; di < 3; di++)
      for (int form = 0; form < 2 + nin; form++) { /* 0 contiguous, 1 strided, 2 + k: in[k] a number */
        tsr_rt_dtype_t dt = dts[di];
        bool strided = form == 1;
        uint32_t imm = form >= 2 ? 1u << (form - 2) : 0;
        for (int i = 0; i < N; i++)
          for (int k = 0; k < 3; k++) {
            double v = urand(pos ? 0.1 : -4, 4);
            if (op == TSR_RT_OP_WHERE && k == 0) v = i % 3 == 0;
            if (op == TSR_RT_OP_ADDCDIV && k == 2) v += v < 0 ? -0.5 : 0.5;
            put(h[k], i, dt, v);
          }
        for (int k = 0; k < 3; k++) up(d[k], h[k], N * 4);
        tsr_rt_task_t t = {.op = op, .scalar = {0.3f, 0.6f}, .imm_mask = imm, .imm = {0.75f, -1.25f, 2.5f}};
        int64_t sz[2] = {R, C};
        tsr_rt_tensor_contiguous(&t.out, dout, dt, 2, sz);
        for (int k = 0; k < nin; k++) tsr_rt_tensor_contiguous(&t.in[k], d[k], dt, 2, sz);
        if (strided) {
          t.in[0].strides[0] = 1, t.in[0].strides[1] = R;
          if (nin > 1) t.in[1].sizes[0] = 1;
        }
        run(&t, 1);
        down(hout, dout, N * 4);
        int bad = 0;
        for (int i = 0; i < R && bad < 3; i++)
          for (int j = 0; j < C && bad < 3; j++) {
            double v[3];
            for (int k = 0; k < 3; k++) {
              int64_t at = i * C + j;
              if (strided && k == 0) at = j * R + i;
              if (strided && k == 1 && nin > 1) at = j;
              v[k] = (imm >> k) & 1u ? t.imm[k] : get(h[k], at, dt);
            }
            double want = tsr_test_ref3(op, v[0], v[1], v[2], t.scalar[0], t.scalar[1]);
            char one[4];
            put(one, 0, dt, want);
            double got = get(hout, i * C + j, dt), w = get(one, 0, dt);
            bool ok = isnan(w) ? isnan(got)
                               : fabs(got - w) <= (dt == TSR_RT_F32   ? 4e-6
                                                   : dt == TSR_RT_F16 ? 2e-3
                                                                      : 1.6e-2) *
                                                      fmax(1.0, fabs(w));
            if (!ok) {
              bad++;
              CHECK(false, "%s dtype %d form %d (%d, %d): %g %g %g got %.9g want %.9g", tsr_rt_op_name(op), (int)dt,
                    form, i, j, v[0], v[1], v[2], got, w);
            }
          }
        CHECK(bad == 0, "%s: see above", tsr_rt_op_name(op));
        cases++;
      }
  }
  for (int k = 0; k < 3; k++) tsr_rt_free(rt, d[k]);
  tsr_rt_free(rt, dout);
  printf("newer operators: %d cases (operator x dtype x form)\n", cases);
}

/* SUM and MEAN over every axis set of a 4 x 5 x 6 x 7 tensor, keepdim or
 * not, f32 and bf16 in, f32 out. */
static void reductions(void) {
  int64_t sz[4] = {4, 5, 6, 7};
  enum { N = 4 * 5 * 6 * 7 };
  static char hin[N * 4];
  static float hout[N];
  void *din = dev(N * 4), *dout = dev(N * 4);
  int cases = 0;
  for (int di = 0; di < 2; di++) {
    tsr_rt_dtype_t dt = di ? TSR_RT_BF16 : TSR_RT_F32;
    for (int i = 0; i < N; i++) put(hin, i, dt, urand(-3, 3));
    up(din, hin, N * 4);
    for (uint32_t mask = 1; mask < 16; mask++)
      for (int keep = 0; keep < 2; keep++)
        for (int mean = 0; mean < 2; mean++) {
          int64_t osz[4];
          uint32_t od = 0;
          int cnt = 1;
          for (int d = 0; d < 4; d++) {
            if (mask & (1u << d)) {
              cnt *= (int)sz[d];
              if (keep) osz[od++] = 1;
            } else {
              osz[od++] = sz[d];
            }
          }
          tsr_rt_task_t t = {.op = mean ? TSR_RT_OP_MEAN : TSR_RT_OP_SUM, .reduce_mask = mask, .keepdim = keep};
          tsr_rt_tensor_contiguous(&t.in[0], din, dt, 4, sz);
          tsr_rt_tensor_contiguous(&t.out, dout, TSR_RT_F32, od, osz);
          run(&t, 1);
          down(hout, dout, (size_t)(N / cnt) * 4);
          static double acc[N];
          memset(acc, 0, sizeof(acc));
          double mag[N];
          memset(mag, 0, sizeof(mag));
          for (int i = 0; i < N; i++) {
            int c[4] = {i / 210, i / 42 % 5, i / 7 % 6, i % 7}, o = 0;
            for (int d = 0; d < 4; d++)
              if (!(mask & (1u << d))) o = o * (int)sz[d] + c[d];
            acc[o] += get(hin, i, dt);
            mag[o] += fabs(get(hin, i, dt));
          }
          int bad = 0;
          for (int o = 0; o < N / cnt; o++) {
            double want = mean ? acc[o] / cnt : acc[o], tol = 1e-5 * (mean ? mag[o] / cnt : mag[o]) + 1e-6;
            if (fabs(hout[o] - want) > tol && bad++ < 3)
              CHECK(false, "%s mask 0x%x keepdim %d %s [%d]: %g want %g", mean ? "mean" : "sum", mask, keep,
                    di ? "bf16" : "f32", o, hout[o], want);
          }
          CHECK(bad == 0, "reduction mask 0x%x", mask);
          cases++;
        }
  }
  tsr_rt_free(rt, din);
  tsr_rt_free(rt, dout);
  printf("reductions: %d cases\n", cases);
}

/* `count` tasks x = x + one over `n` floats: x (zeros) and one (ones) are
 * fresh device buffers of the first runtime, given back in *out_x and
 * *out_one. */
static void increments(tsr_rt_task_t *ts, int count, int64_t n, float **out_x, float **out_one) {
  float *h = malloc((size_t)n * 4);
  float *x = dev((size_t)n * 4), *one = dev((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) h[i] = 0.f;
  up(x, h, (size_t)n * 4);
  for (int64_t i = 0; i < n; i++) h[i] = 1.f;
  up(one, h, (size_t)n * 4);
  free(h);
  for (int i = 0; i < count; i++) {
    ts[i] = (tsr_rt_task_t){.op = TSR_RT_OP_ADD};
    tsr_rt_tensor_contiguous(&ts[i].out, x, TSR_RT_F32, 1, &n);
    ts[i].in[0] = ts[i].out;
    tsr_rt_tensor_contiguous(&ts[i].in[1], one, TSR_RT_F32, 1, &n);
  }
  *out_x = x;
  *out_one = one;
}

/* x = x + 1 ten thousand times, submitted in batches: one lane, in order. */
static void chain(void) {
  enum { N = 1024, T = 10000 };
  float *h = calloc(N, 4), *x, *one;
  static tsr_rt_task_t ts[T];
  increments(ts, T, N, &x, &one);
  run(ts, T);
  down(h, x, N * 4);
  int bad = 0;
  for (int i = 0; i < N; i++) bad += h[i] != (float)T;
  CHECK(bad == 0, "chain: %d of %d elements are not %d (x[0] = %g)", bad, N, T, h[0]);
  tsr_rt_free(rt, x);
  tsr_rt_free(rt, one);
  free(h);
  printf("chain: %d dependent adds\n", T);
}

/* 100,000 tasks in flight over 64 buffers: independent writes, joins of
 * two buffers written by other lanes, and overwrites after reads; the host
 * replays the same program on the CPU. */
static void many(void) {
  enum { B = 64, N = 256, T = 100000 };
  float *hb = malloc((size_t)B * N * 4), *got = malloc((size_t)B * N * 4);
  float *d = dev((size_t)B * N * 4);
  for (int i = 0; i < B * N; i++) hb[i] = (float)urand(-1, 1);
  up(d, hb, (size_t)B * N * 4);
  int64_t n = N;
  enum { BATCH = 1000 };
  static tsr_rt_task_t ts[BATCH];
  for (int done = 0; done < T; done += BATCH) {
    for (int k = 0; k < BATCH; k++) {
      int o = (int)urand(0, B), a = (int)urand(0, B), b = (int)urand(0, B);
      /* values stay in [-1, 1]: products, maxima and minima of such */
      int which = (int)urand(0, 3);
      tsr_rt_op_t op = which == 0 ? TSR_RT_OP_MUL : which == 1 ? TSR_RT_OP_MAXIMUM : TSR_RT_OP_MINIMUM;
      ts[k] = (tsr_rt_task_t){.op = op};
      tsr_rt_tensor_contiguous(&ts[k].out, d + (size_t)o * N, TSR_RT_F32, 1, &n);
      tsr_rt_tensor_contiguous(&ts[k].in[0], d + (size_t)a * N, TSR_RT_F32, 1, &n);
      tsr_rt_tensor_contiguous(&ts[k].in[1], d + (size_t)b * N, TSR_RT_F32, 1, &n);
      /* the same on the host, in program order (values kept bounded by the mix of ops) */
      for (int i = 0; i < N; i++) {
        float x = hb[a * N + i], y = hb[b * N + i];
        hb[o * N + i] = op == TSR_RT_OP_MUL ? x * y : op == TSR_RT_OP_MAXIMUM ? (x > y ? x : y) : (x < y ? x : y);
      }
    }
    tsr_status_t st = tsr_rt_submit(rt, ts, BATCH, NULL);
    if (st) {
      CHECK(false, "many: %s", tsr_status_message(st));
      tsr_status_free(st);
      return;
    }
    /* now and then every buffer becomes the sine of the next: a ring of
     * reads and writes across all of them */
    if (done % 10000 == 0) {
      tsr_rt_task_t sq[B];
      for (int k = 0; k < B; k++) {
        sq[k] = (tsr_rt_task_t){.op = TSR_RT_OP_SIN};
        tsr_rt_tensor_contiguous(&sq[k].out, d + (size_t)k * N, TSR_RT_F32, 1, &n);
        tsr_rt_tensor_contiguous(&sq[k].in[0], d + (size_t)((k + 1) % B) * N, TSR_RT_F32, 1, &n);
      }
      /* sin of the next buffer, in program order: the last reads buffer 0
       * after the first rewrote it */
      for (int k = 0; k < B; k++)
        for (int i = 0; i < N; i++) hb[k * N + i] = sinf(hb[((k + 1) % B) * N + i]);
      tsr_status_free(tsr_rt_submit(rt, sq, B, NULL));
    }
  }
  tsr_status_t st = tsr_rt_flush(rt);
  CHECK(!st, "many: flush: %s", st ? tsr_status_message(st) : "");
  tsr_status_free(st);
  down(got, d, (size_t)B * N * 4);
  int bad = 0;
  for (int i = 0; i < B * N; i++)
    if (!(fabsf(got[i] - hb[i]) <= 1e-3f * fmaxf(1.f, fabsf(hb[i]))) && !(isinf(hb[i]) && got[i] == hb[i])) bad++;
  tsr_rt_stats_t s;
  tsr_rt_stats(rt, &s);
  CHECK(bad == 0, "many: %d of %d elements differ from the program run in order on the host", bad, B * N);
  if (s.device_clock_khz) {
    /* the CUDA backend's own counters: every task done was counted by the
     * block that ran it, in batches, with time spent running */
    CHECK(s.device_tasks == s.completed, "many: the device counted %llu tasks, %llu are done",
          (unsigned long long)s.device_tasks, (unsigned long long)s.completed);
    CHECK(s.device_batches > 0 && s.device_batches <= s.device_tasks && s.device_run_cycles > 0,
          "many: %llu batches, %llu run cycles", (unsigned long long)s.device_batches,
          (unsigned long long)s.device_run_cycles);
  }
  printf("many: %d tasks over %d buffers, %llu cross-lane waits, %llu host waits\n", T, B,
         (unsigned long long)s.cross_lane_waits, (unsigned long long)s.host_waits);
  tsr_rt_free(rt, d);
  free(hb);
  free(got);
}

/* Runs of tasks without a barrier between them (TSR_RT_DESC_FOLLOW): random
 * programs over windows of one buffer that overlap by half (a task's own
 * operands never overlap partly: the runtime refuses that), so that
 * consecutive tasks of a lane share ranges exactly, miss each other, or
 * overlap partly; sizes at and past the register path's limits; inputs
 * that are the last task's output in either place or both (x * x); long
 * math operators; batches of every size, so a run crosses batch ends. The
 * host replays each program in order. */
static void runs(void) {
  static const int64_t sizes[] = {4, 1024, 1028, 4096, 4100, 2048};
  enum { W = 9, T = 20000 };
  static tsr_rt_task_t ts[T];
  for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
    int64_t n = sizes[si], half = n / 2 + (n / 2) % 4; /* windows 16-byte aligned */
    size_t total = (size_t)(half * (W - 1) + n);
    float *hb = malloc(total * 4), *got = malloc(total * 4);
    float *d = dev(total * 4);
    for (size_t i = 0; i < total; i++) hb[i] = (float)urand(0.5, 1.5);
    up(d, hb, total * 4);
    int follow_like = 0;
    for (int k = 0; k < T; k++) {
      int o, a, b;
      for (;;) {
        o = (int)urand(0, W), a = (int)urand(0, W), b = (int)urand(0, W);
        /* now and then a chain on the last output, in either input or both */
        if (k && urand(0, 1) < 0.5) {
          int last = (int)(((float *)ts[k - 1].out.data - d) / half);
          double r = urand(0, 3);
          if (r < 1)
            a = last;
          else if (r < 2)
            b = last;
          else
            a = b = last;
        }
        bool ok = true;
        int in[2] = {a, b};
        for (int i = 0; i < 2; i++)
          if (in[i] != o && abs(in[i] - o) * half < n) ok = false; /* partly overlapping */
        if (ok) break;
      }
      int which = (int)urand(0, 4);
      tsr_rt_op_t op = which == 0   ? TSR_RT_OP_MUL
                       : which == 1 ? TSR_RT_OP_MAXIMUM
                       : which == 2 ? TSR_RT_OP_DIV
                                    : TSR_RT_OP_TANH;
      if (k && (d + (size_t)a * half == ts[k - 1].out.data ||
                (op != TSR_RT_OP_TANH && d + (size_t)b * half == ts[k - 1].out.data)))
        follow_like++;
      ts[k] = (tsr_rt_task_t){.op = op};
      tsr_rt_tensor_contiguous(&ts[k].out, d + (size_t)o * half, TSR_RT_F32, 1, &n);
      tsr_rt_tensor_contiguous(&ts[k].in[0], d + (size_t)a * half, TSR_RT_F32, 1, &n);
      if (op != TSR_RT_OP_TANH) tsr_rt_tensor_contiguous(&ts[k].in[1], d + (size_t)b * half, TSR_RT_F32, 1, &n);
      /* the same IEEE operations on the host (tanh within an ulp or two);
       * squares may run off to inf, and inf / inf is NaN on both sides */
      for (int64_t i = 0; i < n; i++) {
        float x = hb[a * half + i], y = hb[b * half + i], r;
        r = op == TSR_RT_OP_MUL       ? x * y
            : op == TSR_RT_OP_MAXIMUM ? (x > y ? x : y)
            : op == TSR_RT_OP_DIV     ? x / y
                                      : tanhf(x) + 0.f;
        hb[o * half + i] = r;
      }
    }
    for (int k = 0; k < T;) {
      int m = 1 + (int)urand(0, 97);
      if (m > T - k) m = T - k;
      tsr_status_t st = tsr_rt_submit(rt, ts + k, (size_t)m, NULL);
      if (st) {
        CHECK(false, "runs %lld: %s", (long long)n, tsr_status_message(st));
        tsr_status_free(st);
        break;
      }
      k += m;
    }
    tsr_status_t st = tsr_rt_flush(rt);
    CHECK(!st, "runs %lld: flush: %s", (long long)n, st ? tsr_status_message(st) : "");
    tsr_status_free(st);
    down(got, d, total * 4);
    int bad = 0, first = -1;
    for (size_t i = 0; i < total; i++)
      if (!(fabsf(got[i] - hb[i]) <= 1e-4f * fmaxf(1.f, fabsf(hb[i]))) && !(got[i] == hb[i]) &&
          !(isnan(got[i]) && isnan(hb[i]))) {
        if (first < 0) first = (int)i;
        bad++;
      }
    CHECK(bad == 0,
          "runs %lld floats: %d of %zu elements differ from the program run in order (first [%d]: %g, want %g)",
          (long long)n, bad, total, first, first >= 0 ? got[first] : 0.f, first >= 0 ? hb[first] : 0.f);
    printf("runs: %d tasks over windows of %lld floats (%d read the last task's output)\n", T, (long long)n,
           follow_like);
    tsr_rt_free(rt, d);
    free(hb);
    free(got);
  }
}

/* a JIT operator over three inputs of three dtypes, one a broadcast row */
static void jit_ops(void) {
  enum { R = 37, C = 53, N = R * C };
  tsr_rt_op_t op = 0;
  tsr_status_t st = tsr_rt_register(rt, "A * B + sigmoid(C) - 0.5", &op);
  if (st) {
    CHECK(false, "register: %s", tsr_status_message(st));
    tsr_status_free(st);
    return;
  }
  static float ha[N], hc[C], hout[N];
  static uint16_t hb[N];
  for (int i = 0; i < N; i++) ha[i] = (float)urand(-3, 3), hb[i] = tsr_rt_f32_to_bf16((float)urand(-3, 3));
  for (int j = 0; j < C; j++) hc[j] = (float)urand(-4, 4);
  void *da = dev(N * 4), *db = dev(N * 2), *dc = dev(C * 4), *dout = dev(N * 4);
  up(da, ha, N * 4);
  up(db, hb, N * 2);
  up(dc, hc, C * 4);
  int64_t sz[2] = {R, C}, row[2] = {1, C};
  tsr_rt_task_t t = {.op = op};
  tsr_rt_tensor_contiguous(&t.out, dout, TSR_RT_F32, 2, sz);
  tsr_rt_tensor_contiguous(&t.in[0], da, TSR_RT_F32, 2, sz);
  tsr_rt_tensor_contiguous(&t.in[1], db, TSR_RT_BF16, 2, sz);
  tsr_rt_tensor_contiguous(&t.in[2], dc, TSR_RT_F32, 2, row);
  run(&t, 1);
  down(hout, dout, N * 4);
  int bad = 0;
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      double want = (double)ha[i * C + j] * tsr_rt_bf16_to_f32(hb[i * C + j]) + 1 / (1 + exp(-(double)hc[j])) - 0.5;
      if (!(fabs(hout[i * C + j] - want) <= 1e-5 * fmax(1, fabs(want))) && bad++ < 3)
        CHECK(false, "jit (%d, %d): %g want %g", i, j, hout[i * C + j], want);
    }
  CHECK(bad == 0, "jit operator: %d wrong", bad);
  tsr_rt_free(rt, da), tsr_rt_free(rt, db), tsr_rt_free(rt, dc), tsr_rt_free(rt, dout);
  printf("jit: A * B + sigmoid(C) - 0.5 over f32, bf16 and a broadcast row\n");
}

/* Groups (tsr_rt_submit_group) against a float64 reference that runs the
 * items one by one in order: per case an operator, a dtype for all
 * operands and an element count; items on slots of a shared pool (so
 * items read, overwrite and run in place on what others write), some off
 * the 16-byte grid (the element-by-element path beside the float4 one). */
static void groups(void) {
  enum { POOLN = 1 << 16, ITEMS = 300 };
  static const struct {
    tsr_rt_op_t op;
    tsr_rt_dtype_t dt;
    int64_t numel;
    uint32_t imm; /* inputs that are numbers */
  } cases[] = {{TSR_RT_OP_ADD, TSR_RT_F32, 1024, 0},     {TSR_RT_OP_MUL, TSR_RT_F32, 100, 0},
               {TSR_RT_OP_SIGMOID, TSR_RT_F32, 3000, 0}, {TSR_RT_OP_GELU, TSR_RT_F32, 256, 0},
               {TSR_RT_OP_HARDTANH, TSR_RT_F32, 7, 0},   {TSR_RT_OP_MAXIMUM, TSR_RT_F16, 1024, 0},
               {TSR_RT_OP_SUB, TSR_RT_BF16, 96, 0},      {TSR_RT_OP_TANH, TSR_RT_F16, 33, 0},
               {TSR_RT_OP_MUL, TSR_RT_F32, 4096, 2},     {TSR_RT_OP_SUB, TSR_RT_F32, 1000, 1},
               {TSR_RT_OP_ADDCMUL, TSR_RT_F32, 4096, 0}, {TSR_RT_OP_ADDCMUL, TSR_RT_F32, 2048, 4},
               {TSR_RT_OP_LERP, TSR_RT_F32, 512, 0},     {TSR_RT_OP_LERP_T, TSR_RT_F32, 64, 0},
               {TSR_RT_OP_ADDCMUL, TSR_RT_BF16, 256, 2}};
  static double ref[POOLN];
  static float hf[POOLN];
  static uint16_t hh[POOLN];
  static void *po[ITEMS], *pa[ITEMS], *pb[ITEMS], *pc[ITEMS];
  void *pool = dev(POOLN * 4);
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    tsr_rt_op_t op = cases[c].op;
    tsr_rt_dtype_t dt = cases[c].dt;
    int64_t n = cases[c].numel;
    int es = dt == TSR_RT_F32 ? 4 : 2;
    int nin = tsr_test_arity(op);
    uint32_t imm = cases[c].imm;
    const float immv[3] = {0.75f, -1.5f, 0.25f};
    for (int i = 0; i < POOLN; i++) {
      put(dt == TSR_RT_F32 ? (void *)hf : (void *)hh, i, dt, urand(-2, 2));
      ref[i] = get(dt == TSR_RT_F32 ? (void *)hf : (void *)hh, i, dt);
    }
    up(pool, dt == TSR_RT_F32 ? (void *)hf : (void *)hh, (size_t)POOLN * es);
    int64_t slots = POOLN / n - 1, at[4][ITEMS];
    for (int i = 0; i < ITEMS; i++) {
      for (int r = 0; r < 4; r++) {
        int64_t k = (int64_t)urand(0, (double)slots);
        at[r][i] = urand(0, 1) < 0.15 ? k * n + (int64_t)urand(1, 4) : k * n; /* off the grid: partial overlaps */
      }
      if (urand(0, 1) < 0.2) at[1][i] = at[0][i]; /* in place */
      /* an input that partly overlaps its own out is refused: move it */
      for (int r = 1; r < 4; r++)
        if (at[r][i] != at[0][i] && at[r][i] < at[0][i] + n && at[0][i] < at[r][i] + n) at[r][i] = at[0][i];
      po[i] = (char *)pool + at[0][i] * es;
      pa[i] = (char *)pool + at[1][i] * es;
      pb[i] = (char *)pool + at[2][i] * es;
      pc[i] = (char *)pool + at[3][i] * es;
    }
    tsr_rt_group_t g = {.count = ITEMS, .out = po, .in = {pa, nin > 1 ? pb : NULL, nin > 2 ? pc : NULL}};
    g.task.op = op;
    /* addcmul's value small: items chain through the pool, and a + v*b*c grows */
    g.task.scalar[0] = op == TSR_RT_OP_ADDCMUL ? 0.01f : -0.5f, g.task.scalar[1] = 0.75f;
    g.task.imm_mask = imm;
    tsr_rt_tensor_contiguous(&g.task.out, NULL, dt, 1, &n);
    for (int k = 0; k < nin; k++) {
      if ((imm >> k) & 1u) {
        g.task.imm[k] = immv[k];
        g.in[k] = NULL;
      } else {
        tsr_rt_tensor_contiguous(&g.task.in[k], NULL, dt, 1, &n);
      }
    }
    tsr_rt_ticket_t first = 0, last = 0;
    tsr_status_t st = tsr_rt_submit_group(rt, &g, &first, &last);
    if (!st) st = tsr_rt_flush(rt);
    if (st) {
      CHECK(false, "group %s: %s", tsr_rt_op_name(op), tsr_status_message(st));
      tsr_status_free(st);
      continue;
    }
    /* the reference: item after item, each rounded to the dtype */
    for (int i = 0; i < ITEMS; i++) {
      static double tmp[4096];
      for (int64_t e = 0; e < n; e++) {
        double v[3];
        for (int k = 0; k < 3; k++) v[k] = (imm >> k) & 1u ? immv[k] : k < nin ? ref[at[1 + k][i] + e] : 0;
        tmp[e] = tsr_test_ref3(op, v[0], v[1], v[2], g.task.scalar[0], 0.75);
      }
      for (int64_t e = 0; e < n; e++) {
        uint16_t h16;
        float f = (float)tmp[e];
        if (dt == TSR_RT_F32)
          ref[at[0][i] + e] = f;
        else
          put(&h16, 0, dt, tmp[e]), ref[at[0][i] + e] = get(&h16, 0, dt);
      }
    }
    down(dt == TSR_RT_F32 ? (void *)hf : (void *)hh, pool, (size_t)POOLN * es);
    int bad = 0;
    for (int i = 0; i < POOLN; i++) {
      double got = get(dt == TSR_RT_F32 ? (void *)hf : (void *)hh, i, dt);
      /* a half result feeds the next item: allow one more rounding */
      double tol = dt == TSR_RT_F32 ? 1e-5 : dt == TSR_RT_F16 ? 2e-3 : 1.6e-2;
      if (!(fabs(got - ref[i]) <= tol * fmax(1.0, fabs(ref[i]))) && bad++ < 3)
        CHECK(false, "group %s %s [%d]: %g want %g", tsr_rt_op_name(op), dt == TSR_RT_F32 ? "f32" : "half", i, got,
              ref[i]);
    }
    CHECK(bad == 0, "group %s: %d of %d elements wrong", tsr_rt_op_name(op), bad, POOLN);
    printf("group: %s, %lld elements an item, %d items in %llu descriptors\n", tsr_rt_op_name(op), (long long)n, ITEMS,
           (unsigned long long)(last - first + 1));
  }
  tsr_rt_free(rt, pool);
}

/* 100,000 tasks in flight while their operator is replaced 100 times (by
 * turns A + 1, A + 2, A + 3): every task computes the version in force
 * when it was submitted, none a mix, none lost */
static void hot_swap(void) {
  /* phase 0 runs the registered version, phase k > 0 the k-th replacement */
  enum { N = 64, T = 100000, REPLACES = 100, PHASES = REPLACES + 1, PER = T / PHASES + 1 };
  float *hin = malloc(N * 4), *got = malloc((size_t)T * N * 4);
  for (int i = 0; i < N; i++) hin[i] = (float)i;
  float *din = dev(N * 4), *dout = dev((size_t)T * N * 4);
  up(din, hin, N * 4);
  tsr_rt_op_t op = 0;
  tsr_status_t st = tsr_rt_register(rt, "A + 1", &op);
  if (st) {
    CHECK(false, "register: %s", tsr_status_message(st));
    tsr_status_free(st);
    return;
  }
  int64_t n = N;
  static tsr_rt_task_t ts[PER];
  static int version[T];
  struct timespec t0, t1;
  double swap_ms = 0, swap_max = 0;
  for (int k = 0; k < PHASES; k++) {
    if (k) {
      char text[16];
      snprintf(text, sizeof(text), "A + %d", 1 + k % 3);
      clock_gettime(CLOCK_MONOTONIC, &t0);
      st = tsr_rt_replace(rt, op, text);
      clock_gettime(CLOCK_MONOTONIC, &t1);
      double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
      swap_ms += ms;
      if (ms > swap_max) swap_max = ms;
      if (st) {
        CHECK(false, "replace %d: %s", k, tsr_status_message(st));
        tsr_status_free(st);
        return;
      }
    }
    const int first = (int)((long)T * k / PHASES), count = (int)((long)T * (k + 1) / PHASES) - first;
    for (int p = 0; p < count; p++) {
      int task = first + p;
      ts[p] = (tsr_rt_task_t){.op = op};
      tsr_rt_tensor_contiguous(&ts[p].out, dout + (size_t)task * N, TSR_RT_F32, 1, &n);
      tsr_rt_tensor_contiguous(&ts[p].in[0], din, TSR_RT_F32, 1, &n);
      version[task] = 1 + k % 3;
    }
    st = tsr_rt_submit(rt, ts, (size_t)count, NULL);
    if (st) {
      CHECK(false, "hot swap submit: %s", tsr_status_message(st));
      tsr_status_free(st);
      return;
    }
  }
  st = tsr_rt_flush(rt);
  CHECK(!st, "hot swap flush: %s", st ? tsr_status_message(st) : "");
  tsr_status_free(st);
  down(got, dout, (size_t)T * N * 4);
  int bad = 0;
  for (int t = 0; t < T; t++)
    for (int i = 0; i < N; i++)
      if (got[(size_t)t * N + i] != (float)(i + version[t]) && bad++ < 3)
        CHECK(false, "hot swap: task %d [%d] = %g, want %d", t, i, got[(size_t)t * N + i], i + version[t]);
  CHECK(bad == 0, "hot swap: %d wrong elements", bad);
  printf("hot swap: %d tasks, %d replacements under load; a replace took %.2f ms on average, %.2f ms at most\n", T,
         REPLACES, swap_ms / REPLACES, swap_max);
  tsr_rt_free(rt, din);
  tsr_rt_free(rt, dout);
  free(hin);
  free(got);
}

/* tsr_rt_park, on a runtime whose kernel stays 10 s with nothing to do:
 * without a park a task after 30 ms finds the same kernel (no launch);
 * after a park the kernel has ended and the task starts a new one. Then
 * a park after every submit of a chain, with no pause (a park racing the
 * work, and launches queued behind a kernel that is ending): every task
 * runs, in order. On the CPU backend the same tasks run (no launches). */
static void parking(void) {
  enum { N = 4096, T = 300 };
  tsr_rt_options_t o = opts;
  o.idle_us = 10000000;
  tsr_rt_t *r2 = NULL;
  tsr_status_t st = tsr_rt_create(&o, &r2);
  if (st) {
    CHECK(false, "parking runtime: %s", tsr_status_message(st));
    tsr_status_free(st);
    return;
  }
  float *h = calloc(N, 4), *x, *one;
  static tsr_rt_task_t ts[T + 2];
  increments(ts, T + 2, N, &x, &one);
  struct timespec ms30 = {0, 30000000};
  tsr_rt_stats_t s0, s1, s2, s3;
  st = tsr_rt_submit(r2, ts, 1, NULL);
  if (!st) st = tsr_rt_flush(r2);
  tsr_rt_stats(r2, &s0);
  nanosleep(&ms30, NULL);
  if (!st) st = tsr_rt_submit(r2, ts + 1, 1, NULL);
  if (!st) st = tsr_rt_flush(r2);
  tsr_rt_stats(r2, &s1);
  tsr_rt_park(r2);
  nanosleep(&ms30, NULL);
  tsr_rt_park(r2); /* again, after the end: nothing */
  tsr_rt_stats(r2, &s2);
  for (int i = 2; i < T + 2 && !st; i++) {
    st = tsr_rt_submit_deferred(r2, ts + i, 1, NULL);
    tsr_rt_park(r2);
  }
  if (!st) st = tsr_rt_flush(r2);
  tsr_rt_stats(r2, &s3);
  CHECK(!st, "parking: %s", st ? tsr_status_message(st) : "");
  tsr_status_free(st);
  st = tsr_rt_destroy(r2);
  CHECK(!st, "parking: destroy: %s", st ? tsr_status_message(st) : "");
  tsr_status_free(st);
  down(h, x, N * 4);
  CHECK(h[0] == (float)(T + 2) && h[N - 1] == (float)(T + 2), "parking: x = %g, %g, want %d", h[0], h[N - 1], T + 2);
  if (s0.device_clock_khz) {
    CHECK(s1.device_launches == s0.device_launches,
          "parking: a task 30 ms after another started a kernel (launches %llu then %llu) although it stays 10 s",
          (unsigned long long)s0.device_launches, (unsigned long long)s1.device_launches);
    CHECK(s2.device_launches == s1.device_launches, "parking: a park launched a kernel");
    CHECK(s3.device_launches > s2.device_launches && s3.device_launches <= s2.device_launches + T,
          "parking: after a park the next tasks started %llu kernels (want 1 to %d)",
          (unsigned long long)(s3.device_launches - s2.device_launches), T);
  } else {
    CHECK(s3.device_launches == 0, "parking: the CPU backend counted %llu launches",
          (unsigned long long)s3.device_launches);
  }
  printf("parking: %llu launches for %d tasks with a park after each\n",
         (unsigned long long)(s3.device_launches - s2.device_launches), T);
  tsr_rt_free(rt, x);
  tsr_rt_free(rt, one);
  free(h);
}

/* destroy right after a submit: everything submitted runs first */
static void shutdown_pending(void) {
  enum { N = 1 << 16, T = 2000 };
  tsr_rt_t *r2 = NULL;
  tsr_status_t st = tsr_rt_create(&opts, &r2);
  if (st) {
    CHECK(false, "second runtime: %s", tsr_status_message(st));
    tsr_status_free(st);
    return;
  }
  float *h = calloc(N, 4), *x, *one; /* on rt's context: the same primary context */
  static tsr_rt_task_t ts[T];
  increments(ts, T, N, &x, &one);
  st = tsr_rt_submit(r2, ts, T, NULL);
  if (!st)
    st = tsr_rt_destroy(r2);
  else
    tsr_status_free(tsr_rt_destroy(r2));
  CHECK(!st, "destroy with work pending: %s", st ? tsr_status_message(st) : "");
  tsr_status_free(st);
  down(h, x, N * 4);
  CHECK(h[0] == (float)T && h[N - 1] == (float)T, "destroy with work pending: x = %g, %g, want %d", h[0], h[N - 1], T);
  tsr_rt_free(rt, x);
  tsr_rt_free(rt, one);
  free(h);
  printf("shutdown: %d tasks pending at destroy, all ran\n", T);
}

/* a task on an address the device cannot reach: the ticket's wait fails,
 * destroy reports it, nothing hangs */
static void fault(void) {
  tsr_rt_t *r2 = NULL;
  tsr_rt_options_t o = {.lanes = 4};
  tsr_status_t st = tsr_rt_create(&o, &r2);
  if (st) {
    CHECK(false, "faulting runtime: %s", tsr_status_message(st));
    tsr_status_free(st);
    return;
  }
  int64_t n = 1024;
  tsr_rt_task_t t = {.op = TSR_RT_OP_RELU};
  tsr_rt_tensor_contiguous(&t.out, (void *)(uintptr_t)0x10000, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&t.in[0], (void *)(uintptr_t)0x20000, TSR_RT_F32, 1, &n);
  tsr_rt_ticket_t tk = 0;
  st = tsr_rt_submit(r2, &t, 1, &tk);
  CHECK(!st, "the faulting task was refused at submit: %s", st ? tsr_status_message(st) : "");
  tsr_status_free(st);
  time_t t0 = time(NULL);
  st = tsr_rt_wait(r2, tk);
  CHECK(st != NULL, "waiting on a faulting task returned success");
  if (st) printf("fault: wait said: %s\n", tsr_status_message(st));
  tsr_status_free(st);
  st = tsr_rt_destroy(r2);
  CHECK(st != NULL, "destroy after a fault returned success");
  if (st) printf("fault: destroy said: %s\n", tsr_status_message(st));
  tsr_status_free(st);
  CHECK(time(NULL) - t0 < 20, "the fault took %ld s to surface", (long)(time(NULL) - t0));
}

int main(int argc, char **argv) {
  bool cpu = argc > 1 && strcmp(argv[1], "--cpu") == 0;
  if (argc > 1 && !cpu) {
    fprintf(stderr, "usage: rt_gpu [--cpu]\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0); /* a hang shows how far it got */
  opts.backend = cpu ? TSR_RT_BACKEND_CPU : TSR_RT_BACKEND_CUDA;
  opts.cpu_jitter_us = cpu ? 5 : 0;
  tsr_status_t st = tsr_rt_create(&opts, &rt);
  if (st) {
    printf("SKIP: no CUDA runtime: %s\n", tsr_status_message(st));
    tsr_status_free(st);
    return 77;
  }
  tsr_rt_stats_t s;
  tsr_rt_stats(rt, &s);
  printf("runtime: %u lanes of %u slots, %u threads, descriptor %zu bytes\n", s.lanes, s.lane_slots, s.threads,
         tsr_rt_descriptor_bytes());
  elementwise();
  newer_operators();
  reductions();
  chain();
  runs();
  many();
  jit_ops();
  groups();
  hot_swap();
  parking();
  shutdown_pending();
  st = tsr_rt_destroy(rt);
  CHECK(!st, "destroy: %s", st ? tsr_status_message(st) : "");
  tsr_status_free(st);
  if (!cpu) fault(); /* last: a fault ends the primary context for this process */
  printf("%d checks, %d failed\n", checks, fails);
  return fails ? 1 : 0;
}
