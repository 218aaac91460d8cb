/* libtessera-rt through its CPU backend (lane threads standing in for the
 * persistent kernel's blocks, the same rings and protocol): every operator
 * against a double reference, dtypes, strides and broadcasting,
 * reductions, ordering across lanes, backpressure, shutdown with work
 * pending, tickets, and every refusal at submit. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_rt.h"
#include "reference.h"
#include "rt/ops.h"
#include "tessera/rt.h"

/* lanes that sleep a random 0-20 us before each task: ordering that the
 * protocol does not enforce falls apart under it */
static tsr_rt_t *make(uint32_t lanes, uint32_t slots) { return tsr_test_cpu_rt(lanes, slots, 20); }
static void done(tsr_rt_t *rt) { tsr_test_cpu_rt_done(rt); }

static void submit(tsr_rt_t *rt, const tsr_rt_task_t *t, size_t n) {
  tsr_status_t st = tsr_rt_submit(rt, t, n, NULL);
  cr_assert_null(st, "%s", tsr_status_message(st));
}

/* The tasks the lanes completed, read (tsr_rt_stats: no post, no wait) every
 * millisecond until `want` or `seconds` passed. */
static uint64_t completed_within(tsr_rt_t *rt, uint64_t want, int seconds) {
  tsr_rt_stats_t s;
  for (int ms = 0;; ms++) {
    tsr_rt_stats(rt, &s);
    if (s.completed >= want || ms >= seconds * 1000) return s.completed;
    struct timespec one = {0, 1000000};
    nanosleep(&one, NULL);
  }
}

static uint64_t rng = 88172645463325252ull;
static double urand(double lo, double hi) { return tsr_test_urand(&rng, lo, hi); }

static bool binary(tsr_rt_op_t op) { return op <= TSR_RT_OP_POW; }
static bool positive_only(tsr_rt_op_t op) { return op == TSR_RT_OP_LOG || op == TSR_RT_OP_SQRT || op == TSR_RT_OP_POW; }

static float *fill(size_t n, double lo, double hi) {
  float *p = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = (float)urand(lo, hi);
  return p;
}

Test(rt_cpu, every_elementwise_operator_against_double) {
  tsr_rt_t *rt = make(3, 16);
  enum { N = 1000 };
  for (int op = TSR_RT_OP_ADD; op <= TSR_RT_OP_COPY; op++) {
    double lo = positive_only(op) ? 0.1 : -4, hi = 4;
    float *a = fill(N, lo, hi), *b = fill(N, op == TSR_RT_OP_POW ? -2 : lo, op == TSR_RT_OP_POW ? 2 : hi);
    if (op == TSR_RT_OP_DIV)
      for (int i = 0; i < N; i++) b[i] = b[i] < 0 ? b[i] - 0.5f : b[i] + 0.5f;
    float *out = calloc(N, sizeof(float));
    int64_t n = N;
    tsr_rt_task_t t = {.op = op, .scalar = {0.1f, 2.5f}};
    if (op == TSR_RT_OP_HARDTANH || op == TSR_RT_OP_CLAMP) t.scalar[0] = -1.5f;
    tsr_rt_tensor_contiguous(&t.out, out, TSR_RT_F32, 1, &n);
    tsr_rt_tensor_contiguous(&t.in[0], a, TSR_RT_F32, 1, &n);
    tsr_rt_tensor_contiguous(&t.in[1], b, TSR_RT_F32, 1, &n);
    submit(rt, &t, 1);
    cr_assert_null(tsr_rt_flush(rt));
    for (int i = 0; i < N; i++) {
      double want = tsr_test_ref(op, a[i], binary(op) ? b[i] : 0, t.scalar[0], t.scalar[1]);
      cr_assert(fabs(out[i] - want) <= 1e-5 * fmax(1, fabs(want)), "%s(%g, %g): %.9g, want %.9g", tsr_rt_op_name(op),
                a[i], b[i], out[i], want);
    }
    free(a);
    free(b);
    free(out);
  }
  done(rt);
}

/* The operators added for the PyTorch front (issue 33): every one of
 * them, each input a tensor or a number in turn, against float64. */
Test(rt_cpu, the_newer_operators_with_numbers_in_every_input) {
  tsr_rt_t *rt = make(3, 16);
  enum { N = 257 };
  for (int op = TSR_RT_OP_NEG; op < TSR_RT_OP_COUNT_; op++) {
    int nin = tsr_test_arity(op);
    bool pos = tsr_test_positive_only(op);
    for (uint32_t mask = 0; mask < (1u << nin); mask++) {
      float *in[3];
      for (int k = 0; k < 3; k++) in[k] = fill(N, pos ? 0.1 : -3, 3);
      if (op == TSR_RT_OP_ADDCDIV)
        for (int i = 0; i < N; i++) in[2][i] = in[2][i] < 0 ? in[2][i] - 0.5f : in[2][i] + 0.5f;
      if (op == TSR_RT_OP_WHERE)
        for (int i = 0; i < N; i++) in[0][i] = (float)(i % 3 == 0);
      if (op >= TSR_RT_OP_EQ && op <= TSR_RT_OP_GE)
        for (int i = 0; i < N; i += 4) in[1][i] = in[0][i]; /* some equal */
      float imm[3] = {1.25f, -0.75f, 2.5f};
      if (op == TSR_RT_OP_WHERE) imm[0] = 0.f;
      float *out = calloc(N, sizeof(float));
      int64_t n = N;
      tsr_rt_task_t t = {.op = op, .scalar = {0.3f, 0.6f}, .imm_mask = mask};
      tsr_rt_tensor_contiguous(&t.out, out, TSR_RT_F32, 1, &n);
      for (int k = 0; k < nin; k++) {
        if (mask & (1u << k)) {
          t.imm[k] = imm[k];
          memset(&t.in[k], 0xa5, sizeof(t.in[k])); /* never read */
        } else {
          tsr_rt_tensor_contiguous(&t.in[k], in[k], TSR_RT_F32, 1, &n);
        }
      }
      submit(rt, &t, 1);
      cr_assert_null(tsr_rt_flush(rt));
      for (int i = 0; i < N; i++) {
        double v[3];
        for (int k = 0; k < 3; k++) v[k] = k < nin && (mask & (1u << k)) ? imm[k] : in[k][i];
        double want = tsr_test_ref3(op, v[0], v[1], v[2], t.scalar[0], t.scalar[1]);
        cr_assert((isnan(out[i]) && isnan(want)) || fabs(out[i] - want) <= 2e-5 * fmax(1, fabs(want)),
                  "%s mask %u (%g, %g, %g): %.9g, want %.9g", tsr_rt_op_name(op), mask, v[0], v[1], v[2], out[i], want);
      }
      for (int k = 0; k < 3; k++) free(in[k]);
      free(out);
    }
  }
  done(rt);
}

Test(rt_cpu, comparisons_write_bools_and_where_reads_them) {
  tsr_rt_t *rt = make(2, 8);
  enum { N = 100 };
  float x[N], y[N], out[N];
  uint8_t mask[N];
  for (int i = 0; i < N; i++) x[i] = (float)(i % 7) - 3.f;
  x[5] = NAN;
  int64_t n = N;
  /* mask = x > 0.5 (a number on the right), then y = where(mask, x, -1) */
  tsr_rt_task_t t[2] = {{.op = TSR_RT_OP_GT, .imm_mask = 2, .imm = {0, 0.5f}},
                        {.op = TSR_RT_OP_WHERE, .imm_mask = 4, .imm = {0, 0, -1.f}}};
  tsr_rt_tensor_contiguous(&t[0].out, mask, TSR_RT_BOOL, 1, &n);
  tsr_rt_tensor_contiguous(&t[0].in[0], x, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&t[1].out, y, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&t[1].in[0], mask, TSR_RT_BOOL, 1, &n);
  tsr_rt_tensor_contiguous(&t[1].in[1], x, TSR_RT_F32, 1, &n);
  memset(mask, 7, sizeof(mask));
  submit(rt, t, 2);
  cr_assert_null(tsr_rt_flush(rt));
  for (int i = 0; i < N; i++) {
    bool want = x[i] > 0.5f; /* NaN > 0.5 is false */
    cr_assert_eq(mask[i], want ? 1 : 0, "mask[%d] = %u for %g", i, mask[i], x[i]);
    cr_assert_eq(y[i], want ? x[i] : -1.f, "y[%d]", i);
  }
  /* a bool out of an arithmetic operator stores value != 0, NaN as true */
  float z[3] = {0.f, -2.f, NAN};
  uint8_t b[3];
  int64_t n3 = 3;
  tsr_rt_task_t c = {.op = TSR_RT_OP_COPY};
  tsr_rt_tensor_contiguous(&c.out, b, TSR_RT_BOOL, 1, &n3);
  tsr_rt_tensor_contiguous(&c.in[0], z, TSR_RT_F32, 1, &n3);
  submit(rt, &c, 1);
  cr_assert_null(tsr_rt_flush(rt));
  cr_assert(b[0] == 0 && b[1] == 1 && b[2] == 1, "%u %u %u", b[0], b[1], b[2]);
  (void)out;
  done(rt);
}

/* A number input has no bytes: it orders nothing and conflicts with
 * nothing, and the tensor inputs keep their order. */
Test(rt_cpu, numbers_make_no_dependencies_but_tensors_keep_theirs) {
  tsr_rt_t *rt = tsr_test_cpu_rt(4, 64, 50);
  enum { N = 64, STEPS = 200 };
  float x[N];
  for (int i = 0; i < N; i++) x[i] = 1.f;
  int64_t n = N;
  /* x = x * 1.01 + 0.5, then x = 3 - x, in place, STEPS times */
  tsr_rt_task_t t[3] = {{.op = TSR_RT_OP_MUL, .imm_mask = 2, .imm = {0, 1.01f}},
                        {.op = TSR_RT_OP_ADD, .imm_mask = 2, .imm = {0, 0.5f}},
                        {.op = TSR_RT_OP_SUB, .imm_mask = 1, .imm = {3.f}}};
  for (int k = 0; k < 3; k++) {
    tsr_rt_tensor_contiguous(&t[k].out, x, TSR_RT_F32, 1, &n);
    tsr_rt_tensor_contiguous(&t[k].in[k == 2 ? 1 : 0], x, TSR_RT_F32, 1, &n);
  }
  for (int s = 0; s < STEPS; s++) submit(rt, t, 3);
  cr_assert_null(tsr_rt_flush(rt));
  float want = 1.f;
  for (int s = 0; s < STEPS; s++) want = 3.f - (want * 1.01f + 0.5f);
  for (int i = 0; i < N; i++) cr_assert_eq(x[i], want, "x[%d] = %.9g, want %.9g", i, x[i], want);
  done(rt);
}

Test(rt_cpu, half_types_round_to_nearest_even) {
  /* every f16 and bf16 bit pattern that is a number survives f32 and back */
  for (uint32_t h = 0; h < 65536; h++) {
    float f = tsr_rt_f16_to_f32((uint16_t)h);
    if (f == f) cr_assert_eq(tsr_rt_f32_to_f16(f), (uint16_t)h, "f16 0x%04x", h);
    float g = tsr_rt_bf16_to_f32((uint16_t)h);
    if (g == g) cr_assert_eq(tsr_rt_f32_to_bf16(g), (uint16_t)h, "bf16 0x%04x", h);
  }
  /* ties go to even; overflow to infinity; a value below half the smallest subnormal to 0 */
  cr_assert_eq(tsr_rt_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);
  cr_assert_eq(tsr_rt_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);
  cr_assert_eq(tsr_rt_f32_to_f16(70000.f), 0x7c00);
  cr_assert_eq(tsr_rt_f32_to_f16(1e-9f), 0);
  cr_assert_eq(tsr_rt_f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  cr_assert_eq(tsr_rt_f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
}

Test(rt_cpu, mixed_dtypes_strides_and_broadcast) {
  tsr_rt_t *rt = make(2, 8);
  /* out[i][j] (bf16, 3x5) = a[j][i] (f32, a 5x3 transposed) * b[0][j] (f16, 1x5 broadcast) */
  float a[15];
  uint16_t b[5], out[15];
  for (int i = 0; i < 15; i++) a[i] = (float)urand(-2, 2);
  for (int j = 0; j < 5; j++) b[j] = tsr_rt_f32_to_f16((float)urand(-2, 2));
  tsr_rt_task_t t = {.op = TSR_RT_OP_MUL};
  int64_t s35[2] = {3, 5}, s15[2] = {1, 5};
  tsr_rt_tensor_contiguous(&t.out, out, TSR_RT_BF16, 2, s35);
  tsr_rt_tensor_contiguous(&t.in[0], a, TSR_RT_F32, 2, s35);
  t.in[0].strides[0] = 1; /* a is 5x3 row-major: element (i, j) at j*3 + i */
  t.in[0].strides[1] = 3;
  tsr_rt_tensor_contiguous(&t.in[1], b, TSR_RT_F16, 2, s15);
  submit(rt, &t, 1);
  cr_assert_null(tsr_rt_flush(rt));
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 5; j++) {
      float want = tsr_rt_bf16_to_f32(tsr_rt_f32_to_bf16(a[j * 3 + i] * tsr_rt_f16_to_f32(b[j])));
      cr_assert_eq(tsr_rt_bf16_to_f32(out[i * 5 + j]), want, "(%d, %d)", i, j);
    }
  done(rt);
}

Test(rt_cpu, reductions_over_every_axis_set) {
  tsr_rt_t *rt = make(4, 8);
  int64_t sz[3] = {3, 4, 5};
  float *x = fill(60, -3, 3);
  for (uint32_t mask = 1; mask < 8; mask++)
    for (int keep = 0; keep < 2; keep++)
      for (int mean = 0; mean < 2; mean++) {
        int64_t osz[3];
        uint32_t od = 0;
        for (int d = 0; d < 3; d++) {
          if (mask & (1u << d)) {
            if (keep) osz[od++] = 1;
          } else {
            osz[od++] = sz[d];
          }
        }
        float out[60];
        tsr_rt_task_t t = {.op = mean ? TSR_RT_OP_MEAN : TSR_RT_OP_SUM, .reduce_mask = mask, .keepdim = keep};
        tsr_rt_tensor_contiguous(&t.in[0], x, TSR_RT_F32, 3, sz);
        tsr_rt_tensor_contiguous(&t.out, out, TSR_RT_F32, od, osz);
        submit(rt, &t, 1);
        cr_assert_null(tsr_rt_flush(rt));
        /* the reference, element by element of the full index space */
        double acc[60] = {0};
        int cnt = 1;
        for (int d = 0; d < 3; d++)
          if (mask & (1u << d)) cnt *= (int)sz[d];
        for (int i = 0; i < 3; i++)
          for (int j = 0; j < 4; j++)
            for (int k = 0; k < 5; k++) {
              int c[3] = {i, j, k}, o = 0;
              for (int d = 0; d < 3; d++)
                if (!(mask & (1u << d))) o = o * (int)sz[d] + c[d];
              acc[o] += x[(i * 4 + j) * 5 + k];
            }
        for (int o = 0; o < 60 / cnt; o++) {
          double want = mean ? acc[o] / cnt : acc[o];
          cr_assert(fabs(out[o] - want) < 1e-4, "mask 0x%x keep %d mean %d [%d]: %g want %g", mask, keep, mean, o,
                    out[o], want);
        }
      }
  free(x);
  done(rt);
}

Test(rt_cpu, a_dependent_chain_keeps_program_order_across_lanes) {
  tsr_rt_t *rt = make(4, 64);
  enum { N = 256, STEPS = 2000 };
  float *x = calloc(N, sizeof(float)), *one = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) one[i] = 1.f;
  int64_t n = N;
  tsr_rt_task_t t = {.op = TSR_RT_OP_ADD};
  tsr_rt_tensor_contiguous(&t.out, x, TSR_RT_F32, 1, &n);
  t.in[0] = t.out;
  tsr_rt_tensor_contiguous(&t.in[1], one, TSR_RT_F32, 1, &n);
  tsr_rt_task_t batch[50];
  for (int i = 0; i < 50; i++) batch[i] = t;
  for (int s = 0; s < STEPS; s += 50) submit(rt, batch, 50);
  cr_assert_null(tsr_rt_flush(rt));
  for (int i = 0; i < N; i++) cr_assert_eq(x[i], (float)STEPS);
  tsr_rt_stats_t st;
  tsr_rt_stats(rt, &st);
  cr_assert_eq(st.cross_lane_waits, 0, "a chain paid %llu cross-lane waits", (unsigned long long)st.cross_lane_waits);
  free(x);
  free(one);
  done(rt);
}

Test(rt_cpu, a_task_waits_for_writers_on_other_lanes) {
  /* lanes sleep up to 300 us before each task: a reader on another lane
   * that did not wait for the writers would read what was there before */
  tsr_rt_t *rt = tsr_test_cpu_rt(4, 64, 300);
  enum { K = 8, N = 256, ROUNDS = 30 };
  int64_t n = N;
  float *p[ROUNDS][K], *q[ROUNDS][K / 2];
  for (int r = 0; r < ROUNDS; r++) {
    /* K independent writes, spread over the lanes */
    tsr_rt_task_t w[K];
    for (int k = 0; k < K; k++) {
      p[r][k] = calloc(N, sizeof(float));
      w[k] = (tsr_rt_task_t){.op = TSR_RT_OP_CLAMP, .scalar = {(float)(k + r), (float)(k + r)}};
      tsr_rt_tensor_contiguous(&w[k].out, p[r][k], TSR_RT_F32, 1, &n);
      w[k].in[0] = w[k].out;
    }
    submit(rt, w, K);
    /* then joins of two of them each, written by different lanes */
    tsr_rt_task_t j[K / 2];
    for (int k = 0; k < K / 2; k++) {
      q[r][k] = calloc(N, sizeof(float));
      j[k] = (tsr_rt_task_t){.op = TSR_RT_OP_ADD};
      tsr_rt_tensor_contiguous(&j[k].out, q[r][k], TSR_RT_F32, 1, &n);
      tsr_rt_tensor_contiguous(&j[k].in[0], p[r][k], TSR_RT_F32, 1, &n);
      tsr_rt_tensor_contiguous(&j[k].in[1], p[r][K - 1 - k], TSR_RT_F32, 1, &n);
    }
    submit(rt, j, K / 2);
  }
  cr_assert_null(tsr_rt_flush(rt));
  tsr_rt_stats_t st;
  tsr_rt_stats(rt, &st);
  cr_assert_gt(st.cross_lane_waits, 0);
  for (int r = 0; r < ROUNDS; r++)
    for (int k = 0; k < K / 2; k++) {
      for (int i = 0; i < N; i++)
        cr_assert_eq(q[r][k][i], (float)(2 * r + K - 1), "round %d join %d [%d]: %g", r, k, i, q[r][k][i]);
      free(q[r][k]);
    }
  for (int r = 0; r < ROUNDS; r++)
    for (int k = 0; k < K; k++) free(p[r][k]);
  done(rt);
}

Test(rt_cpu, a_write_waits_for_the_readers_before_it) {
  /* q = p + p on some lane; then p is overwritten: the overwrite must wait
   * for the read (write after read) */
  tsr_rt_t *rt = tsr_test_cpu_rt(4, 64, 300);
  enum { N = 256, ROUNDS = 40 };
  int64_t n = N;
  float *p = calloc(N, sizeof(float)), *q[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    tsr_rt_task_t t[2] = {{.op = TSR_RT_OP_ADD}, {.op = TSR_RT_OP_CLAMP, .scalar = {(float)(r + 1), (float)(r + 1)}}};
    q[r] = calloc(N, sizeof(float));
    tsr_rt_tensor_contiguous(&t[0].out, q[r], TSR_RT_F32, 1, &n);
    tsr_rt_tensor_contiguous(&t[0].in[0], p, TSR_RT_F32, 1, &n);
    t[0].in[1] = t[0].in[0];
    tsr_rt_tensor_contiguous(&t[1].out, p, TSR_RT_F32, 1, &n);
    t[1].in[0] = t[1].out;
    submit(rt, t, 2);
  }
  cr_assert_null(tsr_rt_flush(rt));
  for (int r = 0; r < ROUNDS; r++) {
    cr_assert_eq(q[r][N - 1], 2.f * r, "round %d: %g", r, q[r][N - 1]);
    free(q[r]);
  }
  free(p);
  done(rt);
}

Test(rt_cpu, backpressure_wraps_small_rings) {
  tsr_rt_t *rt = make(2, 2);
  enum { N = 64, T = 3000 };
  float *v[4];
  int64_t n = N;
  for (int i = 0; i < 4; i++) v[i] = calloc(N, sizeof(float));
  tsr_rt_ticket_t last = 0;
  for (int i = 0; i < T; i++) {
    tsr_rt_task_t t = {.op = TSR_RT_OP_CLAMP, .scalar = {(float)i, (float)i}};
    tsr_rt_tensor_contiguous(&t.out, v[i % 4], TSR_RT_F32, 1, &n);
    t.in[0] = t.out;
    tsr_rt_ticket_t tk;
    cr_assert_null(tsr_rt_submit(rt, &t, 1, &tk));
    cr_assert_eq(tk, last + 1);
    last = tk;
  }
  cr_assert_null(tsr_rt_wait(rt, last));
  cr_assert(tsr_rt_done(rt, last));
  cr_assert_eq(v[(T - 1) % 4][N - 1], (float)(T - 1));
  cr_assert_null(tsr_rt_flush(rt)); /* the other buffers' chains may be on other lanes */
  for (int i = 0; i < 4; i++) cr_assert_eq(v[i][N - 1], (float)(T - 4 + i));
  for (int i = 0; i < 4; i++) free(v[i]);
  done(rt);
}

/* The host posts a lane's descriptors lazily (on moving to another lane,
 * every few tasks, before a wait): whatever a submit call wrote is posted
 * by the time it returns, so the lanes run all of it with no further call
 * (tsr_rt_stats only reads the counters). */
Test(rt_cpu, every_task_of_a_submit_runs_without_a_later_call) {
  enum { N = 16, T = 203 };
  tsr_rt_t *rt = make(4, 64);
  float *x = fill(N, -1, 1), *y = calloc((size_t)T * N, sizeof(float));
  int64_t n = N;
  tsr_rt_task_t t[T];
  for (int i = 0; i < T; i++) {
    /* independent tasks in runs of 8 a lane, and every seventh a chain
     * link on the output before it */
    t[i] = (tsr_rt_task_t){.op = i % 7 == 6 ? TSR_RT_OP_ADD : TSR_RT_OP_ABS};
    tsr_rt_tensor_contiguous(&t[i].out, y + (size_t)i * N, TSR_RT_F32, 1, &n);
    tsr_rt_tensor_contiguous(&t[i].in[0], i % 7 == 6 ? y + (size_t)(i - 1) * N : x, TSR_RT_F32, 1, &n);
    if (i % 7 == 6) tsr_rt_tensor_contiguous(&t[i].in[1], x, TSR_RT_F32, 1, &n);
  }
  submit(rt, t, T);
  uint64_t ran = completed_within(rt, T, 30);
  cr_assert_eq(ran, T, "%llu of %d tasks ran", (unsigned long long)ran, T);
  for (int i = 0; i < T; i++)
    for (int e = 0; e < N; e++) {
      float want = i % 7 == 6 ? fabsf(x[e]) + x[e] : fabsf(x[e]);
      cr_assert_eq(y[(size_t)i * N + e], want, "task %d element %d", i, e);
    }
  free(x);
  free(y);
  done(rt);
}

/* tsr_rt_submit_deferred: a few independent tasks on one lane stay
 * unposted (the lanes do not run them) until tsr_rt_post; then they run
 * with no further call. */
Test(rt_cpu, deferred_tasks_run_once_posted) {
  enum { N = 16, T = 5 };
  tsr_rt_t *rt = tsr_test_cpu_rt(4, 64, 0);
  float *x = fill(N, -1, 1), *y = calloc((size_t)T * N, sizeof(float));
  int64_t n = N;
  for (int i = 0; i < T; i++) {
    tsr_rt_task_t t = {.op = TSR_RT_OP_ABS};
    tsr_rt_tensor_contiguous(&t.out, y + (size_t)i * N, TSR_RT_F32, 1, &n);
    tsr_rt_tensor_contiguous(&t.in[0], x, TSR_RT_F32, 1, &n);
    tsr_rt_ticket_t tk;
    cr_assert_null(tsr_rt_submit_deferred(rt, &t, 1, &tk));
    cr_assert_eq(tk, (tsr_rt_ticket_t)i + 1);
  }
  struct timespec ms20 = {0, 20000000};
  nanosleep(&ms20, NULL);
  tsr_rt_stats_t s;
  tsr_rt_stats(rt, &s);
  cr_assert_eq(s.completed, 0, "%llu tasks ran before they were posted", (unsigned long long)s.completed);
  tsr_rt_post(rt);
  uint64_t ran = completed_within(rt, T, 30);
  cr_assert_eq(ran, T, "%llu of %d tasks ran after the post", (unsigned long long)ran, T);
  for (int i = 0; i < T; i++)
    for (int e = 0; e < N; e++) cr_assert_eq(y[(size_t)i * N + e], fabsf(x[e]));
  free(x);
  free(y);
  done(rt);
}

/* Deferred submits one task at a time, independent writes and joins of
 * two of them across lanes under jitter: every dependency holds, nothing
 * waits forever, and tsr_rt_wait alone finishes a ticket. */
Test(rt_cpu, deferred_submits_keep_every_dependency) {
  tsr_rt_t *rt = tsr_test_cpu_rt(4, 64, 200);
  enum { N = 64, W = 40, J = 30 };
  int64_t n = N;
  float *p[W], *q[J];
  int ja[J], jb[J];
  tsr_rt_ticket_t last = 0;
  for (int k = 0; k < W; k++) {
    p[k] = calloc(N, sizeof(float));
    tsr_rt_task_t t = {.op = TSR_RT_OP_CLAMP, .scalar = {(float)k, (float)k}};
    tsr_rt_tensor_contiguous(&t.out, p[k], TSR_RT_F32, 1, &n);
    t.in[0] = t.out;
    cr_assert_null(tsr_rt_submit_deferred(rt, &t, 1, &last));
  }
  for (int j = 0; j < J; j++) {
    ja[j] = (int)(urand(0, W - 1e-9));
    jb[j] = (int)(urand(0, W - 1e-9));
    q[j] = calloc(N, sizeof(float));
    tsr_rt_task_t t = {.op = TSR_RT_OP_ADD};
    tsr_rt_tensor_contiguous(&t.out, q[j], TSR_RT_F32, 1, &n);
    tsr_rt_tensor_contiguous(&t.in[0], p[ja[j]], TSR_RT_F32, 1, &n);
    tsr_rt_tensor_contiguous(&t.in[1], p[jb[j]], TSR_RT_F32, 1, &n);
    cr_assert_null(tsr_rt_submit_deferred(rt, &t, 1, &last));
    if (j % 3 == 0) {
      /* then overwrite one input (write after read) */
      tsr_rt_task_t w = {.op = TSR_RT_OP_CLAMP, .scalar = {-1.f, -1.f}};
      tsr_rt_tensor_contiguous(&w.out, p[ja[j]], TSR_RT_F32, 1, &n);
      w.in[0] = w.out;
      cr_assert_null(tsr_rt_submit_deferred(rt, &w, 1, &last));
    }
  }
  cr_assert_null(tsr_rt_wait(rt, last));
  cr_assert(tsr_rt_done(rt, last));
  cr_assert_null(tsr_rt_flush(rt));
  /* replay on the host */
  float val[W];
  for (int k = 0; k < W; k++) val[k] = (float)k;
  for (int j = 0; j < J; j++) {
    float want = val[ja[j]] + val[jb[j]];
    for (int e = 0; e < N; e++) cr_assert_eq(q[j][e], want, "join %d [%d]: %g, want %g", j, e, q[j][e], want);
    if (j % 3 == 0) val[ja[j]] = -1.f;
  }
  tsr_rt_stats_t st;
  tsr_rt_stats(rt, &st);
  cr_assert_gt(st.cross_lane_waits, 0);
  for (int k = 0; k < W; k++) free(p[k]);
  for (int j = 0; j < J; j++) free(q[j]);
  done(rt);
}

Test(rt_cpu, destroy_runs_everything_submitted_before_it) {
  enum { N = 4096, T = 400 };
  float *x = calloc(N, sizeof(float)), *one = malloc(N * sizeof(float)), *y[8];
  int64_t n = N;
  for (int i = 0; i < N; i++) one[i] = 1.f;
  for (int k = 0; k < 8; k++) y[k] = calloc(N, sizeof(float));
  tsr_rt_t *rt = make(4, 32);
  for (int i = 0; i < T; i++) {
    tsr_rt_task_t t = {.op = TSR_RT_OP_ADD};
    tsr_rt_tensor_contiguous(&t.out, i % 2 ? x : y[i % 8], TSR_RT_F32, 1, &n);
    t.in[0] = t.out;
    tsr_rt_tensor_contiguous(&t.in[1], one, TSR_RT_F32, 1, &n);
    submit(rt, &t, 1);
  }
  done(rt); /* no flush before */
  cr_assert_eq(x[N - 1], T / 2.f);
  for (int k = 0; k < 8; k += 2) cr_assert_eq(y[k][N - 1], T / 8.f);
  free(x);
  free(one);
  for (int k = 0; k < 8; k++) free(y[k]);
}

Test(rt_cpu, tickets) {
  tsr_rt_t *rt = make(2, 8);
  cr_assert(tsr_rt_done(rt, 0));
  cr_assert_not(tsr_rt_done(rt, 1));
  tsr_status_t st = tsr_rt_wait(rt, 5);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "never given"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  float a[4] = {1, 2, 3, 4}, b[4];
  int64_t n = 4;
  tsr_rt_task_t t = {.op = TSR_RT_OP_RELU};
  tsr_rt_tensor_contiguous(&t.out, b, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&t.in[0], a, TSR_RT_F32, 1, &n);
  tsr_rt_ticket_t tk = 0;
  cr_assert_null(tsr_rt_submit(rt, &t, 1, &tk));
  cr_assert_eq(tk, 1);
  cr_assert_null(tsr_rt_wait(rt, tk));
  cr_assert(tsr_rt_done(rt, tk));
  cr_assert_eq(b[3], 4.f);
  cr_assert_eq(tsr_rt_descriptor_bytes(), 128);
  done(rt);
}

static void refused(tsr_rt_t *rt, const tsr_rt_task_t *t, const char *what) {
  tsr_rt_ticket_t before = 0, after = 0;
  tsr_rt_stats_t s0, s1;
  tsr_rt_stats(rt, &s0);
  tsr_rt_task_t two[2] = {*t, *t};
  /* a good task first: the bad one refuses the whole batch */
  float ok_in[2] = {1, 2}, ok_out[2];
  int64_t n = 2;
  two[0] = (tsr_rt_task_t){.op = TSR_RT_OP_RELU};
  tsr_rt_tensor_contiguous(&two[0].out, ok_out, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&two[0].in[0], ok_in, TSR_RT_F32, 1, &n);
  tsr_status_t st = tsr_rt_submit(rt, two, 2, &after);
  cr_assert_not_null(st, "not refused: %s", what);
  cr_assert(strstr(tsr_status_message(st), what), "%s: %s", what, tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), "task 1 of the batch"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  tsr_rt_stats(rt, &s1);
  cr_assert_eq(s1.submitted, s0.submitted, "%s: something was enqueued", what);
  cr_assert_eq(after, before + s0.submitted, "the last ticket moved");
}

Test(rt_cpu, bad_tasks_are_refused_at_submit) {
  tsr_rt_t *rt = make(2, 8);
  float a[16], b[16], c[16];
  int64_t n4[1] = {4}, n8[1] = {8}, n22[2] = {2, 2};
  tsr_rt_task_t good = {.op = TSR_RT_OP_ADD};
  tsr_rt_tensor_contiguous(&good.out, c, TSR_RT_F32, 1, n4);
  tsr_rt_tensor_contiguous(&good.in[0], a, TSR_RT_F32, 1, n4);
  tsr_rt_tensor_contiguous(&good.in[1], b, TSR_RT_F32, 1, n4);
  tsr_rt_task_t t;
  t = good, t.op = 0;
  refused(rt, &t, "unknown operator");
  t = good, t.op = TSR_RT_OP_COUNT_;
  refused(rt, &t, "unknown operator");
  t = good, t.in[1].data = NULL;
  refused(rt, &t, "in[1]: null data pointer");
  t = good, t.in[0].dtype = 9;
  refused(rt, &t, "in[0]: unsupported dtype 9");
  t = good, t.out.ndim = 9;
  refused(rt, &t, "out: 9 dims");
  t = good, tsr_rt_tensor_contiguous(&t.in[1], b, TSR_RT_F32, 1, n8);
  refused(rt, &t, "does not broadcast");
  t = good, tsr_rt_tensor_contiguous(&t.in[1], b, TSR_RT_F32, 2, n22);
  refused(rt, &t, "in[1] has 2 dims, out 1");
  t = good, t.out.data = a + 1;
  refused(rt, &t, "overlaps out");
  t = good, t.out.strides[0] = 0;
  refused(rt, &t, "stride 0");
  t = good, t.in[0].sizes[0] = -1;
  refused(rt, &t, "out of range");
  t = good, t.in[0].data = (char *)a + 1;
  refused(rt, &t, "not aligned");
  /* each size in range, their product 2^64: must not wrap to an empty tensor */
  int64_t huge[2] = {INT64_C(1) << 32, INT64_C(1) << 32}, huge3[3] = {INT64_C(1) << 32, INT64_C(1) << 32, 0};
  t = good, tsr_rt_tensor_contiguous(&t.out, c, TSR_RT_F32, 2, huge);
  refused(rt, &t, "more than 2^40 elements");
  cr_assert_eq(tsr_rt_tensor_numel(&t.out), UINT64_MAX, "numel saturates instead of wrapping");
  tsr_rt_tensor_t empty;
  tsr_rt_tensor_contiguous(&empty, c, TSR_RT_F32, 3, huge3);
  cr_assert_eq(tsr_rt_tensor_numel(&empty), 0, "a size 0 empties it whatever the others");
  t = good, t.in[0].strides[0] = INT64_MAX / 2;
  refused(rt, &t, "outside the address space");
  t = good, t.op = TSR_RT_OP_SUM, t.reduce_mask = 2;
  refused(rt, &t, "names dims past");
  t = good, t.op = TSR_RT_OP_SUM, t.reduce_mask = 1, t.keepdim = true;
  refused(rt, &t, "does not match");
  t = good, t.imm_mask = 4; /* add takes two inputs */
  refused(rt, &t, "imm_mask 0x4 names an input past");
  t = good, t.op = TSR_RT_OP_SUM, t.reduce_mask = 1, t.imm_mask = 1;
  refused(rt, &t, "imm_mask");
  t = good, t.out.dtype = 5;
  refused(rt, &t, "out: unsupported dtype 5");
  tsr_status_t st = tsr_rt_submit(rt, NULL, 1, NULL);
  cr_assert_not_null(st);
  tsr_status_free(st);
  done(rt);
}

/* A task of the shape validated just before is checked by its pointers
 * alone (the runtime keeps that shape): every pointer refusal must still
 * hold right after a good task of the same shape. */
Test(rt_cpu, a_task_of_the_shape_before_is_still_checked_by_its_pointers) {
  tsr_rt_t *rt = make(2, 8);
  float a[16], b[16], c[16];
  for (int i = 0; i < 16; i++) a[i] = (float)i, b[i] = 1, c[i] = 0;
  int64_t n4[1] = {4}, n22[2] = {2, 2};
  tsr_rt_task_t good = {.op = TSR_RT_OP_ADD};
  tsr_rt_tensor_contiguous(&good.out, c, TSR_RT_F32, 1, n4);
  tsr_rt_tensor_contiguous(&good.in[0], a, TSR_RT_F32, 1, n4);
  tsr_rt_tensor_contiguous(&good.in[1], b, TSR_RT_F32, 1, n4);
  tsr_rt_task_t t;
  /* refused() puts a RELU before: submit the good shape in the same batch */
  struct {
    void *out, *in0;
    const char *what;
  } bad[] = {{NULL, a, "out: null data pointer"},
             {c, (char *)a + 2, "not aligned"},
             {a + 2, a, "overlaps out"},
             {c, (void *)(uintptr_t)(UINTPTR_MAX - 7), "outside the address space"}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tsr_rt_task_t two[2] = {good, good};
    two[1].out.data = bad[i].out;
    two[1].in[0].data = bad[i].in0;
    tsr_rt_stats_t s0, s1;
    tsr_rt_stats(rt, &s0);
    tsr_status_t st = tsr_rt_submit(rt, two, 2, NULL);
    cr_assert_not_null(st, "not refused: %s", bad[i].what);
    cr_assert(strstr(tsr_status_message(st), bad[i].what), "%s: %s", bad[i].what, tsr_status_message(st));
    cr_assert(strstr(tsr_status_message(st), "task 1 of the batch"), "%s", tsr_status_message(st));
    tsr_status_free(st);
    tsr_rt_stats(rt, &s1);
    cr_assert_eq(s1.submitted, s0.submitted);
  }
  /* a reduction whose out lies in its input, after a good one */
  tsr_rt_task_t r = {.op = TSR_RT_OP_SUM, .reduce_mask = 2};
  int64_t n2[1] = {2};
  tsr_rt_tensor_contiguous(&r.out, c + 8, TSR_RT_F32, 1, n2);
  tsr_rt_tensor_contiguous(&r.in[0], a, TSR_RT_F32, 2, n22);
  tsr_rt_task_t two[2] = {r, r};
  two[1].out.data = a + 2;
  tsr_status_t st = tsr_rt_submit(rt, two, 2, NULL);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "out overlaps in[0]"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  /* in place after out-of-place, same shape: accepted, and right */
  t = good;
  t.out.data = a;
  tsr_rt_task_t ok[2] = {good, t};
  cr_assert_null(tsr_rt_submit(rt, ok, 2, NULL));
  cr_assert_null(tsr_rt_flush(rt));
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(c[i], (float)i + 1);
    cr_assert_eq(a[i], (float)i + 1);
  }
  done(rt);
}

Test(rt_cpu, options_are_checked) {
  tsr_rt_t *rt = NULL;
  tsr_rt_options_t o = {.backend = TSR_RT_BACKEND_CPU, .lane_slots = 3};
  tsr_status_t st = tsr_rt_create(&o, &rt);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "power of two"));
  tsr_status_free(st);
  o = (tsr_rt_options_t){.backend = TSR_RT_BACKEND_CPU, .threads = 100};
  st = tsr_rt_create(&o, &rt);
  cr_assert_not_null(st);
  tsr_status_free(st);
  o = (tsr_rt_options_t){.backend = 7};
  st = tsr_rt_create(&o, &rt);
  cr_assert_not_null(st);
  tsr_status_free(st);
  o = (tsr_rt_options_t){.backend = TSR_RT_BACKEND_CPU, .idle_us = 10000001};
  st = tsr_rt_create(&o, &rt);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "idle_us"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_null(rt);
  o = (tsr_rt_options_t){.backend = TSR_RT_BACKEND_CPU, .idle_us = 10000000};
  cr_assert_null(tsr_rt_create(&o, &rt));
  tsr_rt_stats_t s;
  tsr_rt_stats(rt, &s);
  cr_assert_eq(s.device_launches, 0, "the CPU backend launches no kernel");
  cr_assert_null(tsr_rt_destroy(rt));
}

/* tsr_rt_park on the CPU backend changes nothing: tasks before and after
 * it run, posted or deferred. */
Test(rt_cpu, park_keeps_every_task) {
  enum { N = 16, T = 6 };
  tsr_rt_t *rt = tsr_test_cpu_rt(4, 64, 0);
  float *x = fill(N, -1, 1), *y = calloc((size_t)T * N, sizeof(float));
  int64_t n = N;
  tsr_rt_park(rt); /* before any task */
  for (int i = 0; i < T; i++) {
    tsr_rt_task_t t = {.op = TSR_RT_OP_ABS};
    tsr_rt_tensor_contiguous(&t.out, y + (size_t)i * N, TSR_RT_F32, 1, &n);
    tsr_rt_tensor_contiguous(&t.in[0], x, TSR_RT_F32, 1, &n);
    cr_assert_null(tsr_rt_submit_deferred(rt, &t, 1, NULL));
    tsr_rt_park(rt);
  }
  cr_assert_null(tsr_rt_flush(rt));
  tsr_rt_park(rt);
  for (int i = 0; i < T; i++)
    for (int e = 0; e < N; e++) cr_assert_eq(y[(size_t)i * N + e], fabsf(x[e]));
  free(x);
  free(y);
  done(rt);
}

Test(rt_ops, nan_and_clamp_follow_pytorch) {
  float nan = nanf("");
  cr_assert(isnan(tsr_rt_f_relu(nan)));
  cr_assert(isnan(tsr_rt_f_maximum(nan, 1.f)) && isnan(tsr_rt_f_maximum(1.f, nan)));
  cr_assert(isnan(tsr_rt_f_minimum(nan, 1.f)) && isnan(tsr_rt_f_minimum(1.f, nan)));
  cr_assert(isnan(tsr_rt_f_clamp(nan, 0.f, 1.f)));
  cr_assert(isnan(tsr_rt_f_clamp(0.5f, nan, 1.f)));
  cr_assert(isnan(tsr_rt_f_clamp_min(0.5f, nan)) && isnan(tsr_rt_f_clamp_max(0.5f, nan)));
  cr_assert_eq(tsr_rt_f_clamp(-5.f, 2.f, 1.f), 1.f, "lo > hi gives hi");
  cr_assert_eq(tsr_rt_f_clamp(5.f, 2.f, 1.f), 1.f);
  cr_assert_eq(tsr_rt_f_softplus(30.f), 30.f);
  cr_assert(fabsf(tsr_rt_f_elu(-1e-4f, 1.f) - (float)expm1(-1e-4)) < 1e-11f, "elu near 0 uses expm1");
}

/* ---- JIT operators (the CPU backend evaluates them; rt/expr.h) ---------- */

Test(rt_jit_ops, an_expression_of_three_inputs_with_broadcast_and_dtypes) {
  tsr_rt_t *rt = make(3, 16);
  tsr_rt_op_t op = 0;
  tsr_status_t st = tsr_rt_register(rt, "A * B + sigmoid(C)", &op);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_geq(op, TSR_RT_OP_JIT_FIRST);
  cr_assert_str_eq(tsr_rt_op_name(op), "jit");
  enum { R = 5, C = 7 };
  float a[R * C], c[C], out[R * C];
  uint16_t b[R * C];
  for (int i = 0; i < R * C; i++) a[i] = (float)urand(-2, 2), b[i] = tsr_rt_f32_to_f16((float)urand(-2, 2));
  for (int j = 0; j < C; j++) c[j] = (float)urand(-3, 3);
  int64_t sz[2] = {R, C}, row[2] = {1, C};
  tsr_rt_task_t t = {.op = op};
  tsr_rt_tensor_contiguous(&t.out, out, TSR_RT_F32, 2, sz);
  tsr_rt_tensor_contiguous(&t.in[0], a, TSR_RT_F32, 2, sz);
  tsr_rt_tensor_contiguous(&t.in[1], b, TSR_RT_F16, 2, sz);
  tsr_rt_tensor_contiguous(&t.in[2], c, TSR_RT_F32, 2, row); /* a row, broadcast */
  submit(rt, &t, 1);
  cr_assert_null(tsr_rt_flush(rt));
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      double want = (double)a[i * C + j] * tsr_rt_f16_to_f32(b[i * C + j]) + 1 / (1 + exp(-(double)c[j]));
      cr_assert(fabs(out[i * C + j] - want) < 1e-5 * fmax(1, fabs(want)), "(%d, %d): %g want %g", i, j, out[i * C + j],
                want);
    }
  /* a task that gives fewer inputs than the expression's arity is refused */
  t.in[2] = (tsr_rt_tensor_t){0};
  st = tsr_rt_submit(rt, &t, 1, NULL);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "in[2]"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  done(rt);
}

Test(rt_jit_ops, registration_errors) {
  tsr_rt_t *rt = make(2, 8);
  tsr_rt_op_t op = 0, first = 0;
  tsr_status_t st = tsr_rt_register(rt, "A * (B + ", &op);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "column"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  st = tsr_rt_register(rt, "2 + 3", &op);
  cr_assert_not_null(st, "an expression without inputs was registered");
  tsr_status_free(st);
  cr_assert_null(tsr_rt_register(rt, "A + B", &first));
  st = tsr_rt_replace(rt, first, "A + B + C");
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "takes 3 inputs, the operator 2"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  st = tsr_rt_replace(rt, TSR_RT_OP_ADD, "A");
  cr_assert_not_null(st);
  tsr_status_free(st);
  st = tsr_rt_replace(rt, (tsr_rt_op_t)(TSR_RT_OP_JIT_FIRST + 9), "A");
  cr_assert_not_null(st);
  tsr_status_free(st);
  /* the table holds TSR_RT_JIT_OPS operators */
  for (int i = 1; i < TSR_RT_JIT_OPS; i++) cr_assert_null(tsr_rt_register(rt, "A", &op));
  st = tsr_rt_register(rt, "A", &op);
  cr_assert_not_null(st);
  cr_assert_eq(tsr_status_code(st), TSR_RESOURCE_EXHAUSTED);
  tsr_status_free(st);
  done(rt);
}

Test(rt_jit_ops, hot_swap_under_load_never_runs_a_mix) {
  /* op(A) = A + k, replaced 100 times while tasks are in flight: every
   * task's output is A + the k in force when it was submitted */
  tsr_rt_t *rt = tsr_test_cpu_rt(4, 64, 30);
  enum { N = 64, ROUNDS = 100, PER = 20 };
  static float out[ROUNDS * PER][N], in[N];
  static int want_k[ROUNDS * PER];
  for (int i = 0; i < N; i++) in[i] = (float)i;
  tsr_rt_op_t op = 0;
  cr_assert_null(tsr_rt_register(rt, "A + 0", &op));
  int64_t n = N;
  int task = 0;
  for (int k = 0; k < ROUNDS; k++) {
    if (k) {
      char text[32];
      snprintf(text, sizeof(text), "A + %d", k);
      tsr_status_t st = tsr_rt_replace(rt, op, text);
      cr_assert_null(st, "%s", tsr_status_message(st));
    }
    tsr_rt_task_t ts[PER];
    for (int p = 0; p < PER; p++, task++) {
      ts[p] = (tsr_rt_task_t){.op = op};
      tsr_rt_tensor_contiguous(&ts[p].out, out[task], TSR_RT_F32, 1, &n);
      tsr_rt_tensor_contiguous(&ts[p].in[0], in, TSR_RT_F32, 1, &n);
      want_k[task] = k;
    }
    submit(rt, ts, PER);
  }
  cr_assert_null(tsr_rt_flush(rt));
  for (int t = 0; t < task; t++)
    for (int i = 0; i < N; i++)
      cr_assert_eq(out[t][i], (float)(i + want_k[t]), "task %d [%d]: %g, want %d", t, i, out[t][i], i + want_k[t]);
  /* the replaced versions were reclaimed: the table has room again */
  tsr_rt_op_t more;
  for (int i = 0; i < TSR_RT_JIT_OPS - 2; i++) {
    tsr_status_t st = tsr_rt_register(rt, "A", &more);
    cr_assert_null(st, "registration %d: %s", i, tsr_status_message(st));
  }
  done(rt);
}
